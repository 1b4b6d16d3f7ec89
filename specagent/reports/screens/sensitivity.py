"""What `specagent study sensitivity` prints: the tornado (SpecAgent ÷ Strong-only at each end of each assumption's
range) and the break-even map (the Weak/Strong time per token at which SpecAgent's time equals Strong-only's, by
semantic acceptance, and per step kind).

Reads a `SensitivityResult` (`simulator/jobs/sensitivity.py`): every number is the job's; this words them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted, legend
from specagent.simulator.jobs.sensitivity import METRICS

if TYPE_CHECKING:
    from specagent.simulator.jobs.sensitivity import SensitivityResult


def num(v: float) -> str:
    return f"{float(v):.3f}" if math.isfinite(float(v)) else "-"


def tornado(study: SensitivityResult, console: Console) -> RenderableType:
    """The scenario's ratios, then each assumption's at the low and the high end of its range."""
    tor = study.tornado
    base = tor.groupby("metric", sort=False)["base"].first()
    rows = [["(the scenario)", "", *[num(base[m]) for m, _ in METRICS]]]
    for a, g in tor.groupby("assumption", sort=False):
        g = g.set_index("metric")
        rows.append([str(a), str(g["low_value"].iloc[0]), *[num(g.loc[m, "at_low"]) for m, _ in METRICS]])
        rows.append(["", str(g["high_value"].iloc[0]), *[num(g.loc[m, "at_high"]) for m, _ in METRICS]])
    api = study.scenario.strong_api is not None
    cost = "API charges" if api else "GPU-seconds (busy time × GPUs: the $ ratio at one price per GPU-hour)"
    caption = ("sorted by the swing of wall time; at = the assumption's value; " + legend([("wall", "wall time, waits included"),
               ("model time", "without tool and user waits"), ("memory", "HBM bytes read by both models"),
               ("FLOPs", "both models"), ("$", cost)]))
    cols = [Col("assumption", "left"), Col("at"), *(Col(label) for _, label in METRICS)]
    return fitted(console, cols, rows, caption=caption,
                  title=f"Sensitivity: SpecAgent ÷ Strong-only at each end of each assumption's range · {study.workload}")


def break_even(study: SensitivityResult) -> list[RenderableType]:
    """The break-even line by semantic acceptance, then where SpecAgent stops paying per step kind."""
    be = study.break_even
    b = Table(title="Break-even: Weak/Strong time per token at which SpecAgent's time equals Strong-only's", show_edge=False)
    for col in ("semantic acceptance", "wall", "model time"):
        b.add_column(col, justify="right")
    for r in be.line.to_dict("records"):
        b.add_row(f"{r['acceptance']:.2f}", *[f"{r[c]:.3f}" if math.isfinite(r[c]) else "never" for c in ("wall_break_even", "model_break_even")])
    b.caption = (f"this scenario: Weak/Strong decode time per token {be.r0:.3f}, mean semantic acceptance {be.base_acceptance:.2f} "
                 "(decay and correlation kept); SpecAgent pays where the deployments' time ratio is below the line")
    out: list[RenderableType] = [b]
    kb = study.kind_break_even
    if not kb.empty:
        out.append(Text.from_markup("Where SpecAgent stops paying, per step kind (that kind's semantic acceptance over [0, 1], "
                                    "the rest at the scenario's values, at this Weak speed):"))
        out += [Text(f"  {text}") for text in kb["text"]]
    return out
