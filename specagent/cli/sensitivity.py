"""`specagent study sensitivity`: a tornado of SpecAgent's ratios over each assumption's range, and the break-even map.

The study is the job `simulator/jobs/sensitivity.py` (its flags: the scenario's); this prints its terminal tables and
writes sensitivity.json (the result's `to_dict()`, what `specagent report` reads) and an HTML page with both figures.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from specagent.cli.console import json_out
from specagent.reports.screens.tables import Col, fitted, legend
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common import atomic
from specagent.common.paths import HTML, JSON_DOC
from specagent.reports.sensitivity_page import write_sensitivity_page
from specagent.simulator.jobs.sensitivity import METRICS, SensitivityRequest, SensitivityResult, run

console = Console()


def _num(v: float) -> str:
    return f"{float(v):.3f}" if math.isfinite(float(v)) else "-"


def _print_tornado(study: SensitivityResult) -> None:
    tor = study.tornado
    base = tor.groupby("metric", sort=False)["base"].first()
    rows = [["(the scenario)", "", *[_num(base[m]) for m, _ in METRICS]]]
    for a, g in tor.groupby("assumption", sort=False):
        g = g.set_index("metric")
        rows.append([str(a), str(g["low_value"].iloc[0]), *[_num(g.loc[m, "at_low"]) for m, _ in METRICS]])
        rows.append(["", str(g["high_value"].iloc[0]), *[_num(g.loc[m, "at_high"]) for m, _ in METRICS]])
    api = study.scenario.strong_api is not None
    cost = "API charges" if api else "GPU-seconds (busy time × GPUs: the $ ratio at one price per GPU-hour)"
    caption = ("sorted by the swing of wall time; at = the assumption's value; " + legend([("wall", "wall time, waits included"),
               ("model time", "without tool and user waits"), ("memory", "HBM bytes read by both models"),
               ("FLOPs", "both models"), ("$", cost)]))
    cols = [Col("assumption", "left"), Col("at"), *(Col(label) for _, label in METRICS)]
    console.print(fitted(console, cols, rows, caption=caption,
                         title=f"Sensitivity: SpecAgent ÷ Strong-only at each end of each assumption's range · {study.workload}"))


def _print_break_even(study: SensitivityResult) -> None:
    be = study.break_even
    b = Table(title="Break-even: Weak/Strong time per token at which SpecAgent's time equals Strong-only's", show_edge=False)
    for col in ("semantic acceptance", "wall", "model time"):
        b.add_column(col, justify="right")
    for r in be.line.to_dict("records"):
        b.add_row(f"{r['acceptance']:.2f}", *[f"{r[c]:.3f}" if math.isfinite(r[c]) else "never" for c in ("wall_break_even", "model_break_even")])
    b.caption = (f"this scenario: Weak/Strong decode time per token {be.r0:.3f}, mean semantic acceptance {be.base_acceptance:.2f} "
                 "(decay and correlation kept); SpecAgent pays where the deployments' time ratio is below the line")
    console.print(b)
    kb = study.kind_break_even
    if not kb.empty:
        console.print("Where SpecAgent stops paying, per step kind (that kind's semantic acceptance over [0, 1], the rest "
                      "at the scenario's values, at this Weak speed):", highlight=False)
        for text in kb["text"]:
            console.print(f"  {text}", highlight=False, markup=False)


@request_options(SensitivityRequest, exclude=("strategies",))
def sensitivity(
    request: SensitivityRequest,
    out: Path = typer.Option(Path("out/sensitivity"), "-o", "--out", help="Directory for sensitivity.json and sensitivity.html."),
    as_json: bool = typer.Option(False, "--json", help="Print the study as JSON instead of tables."),
) -> None:
    """Which assumption moves SpecAgent's wall, model time, memory, FLOPs and cost most, and where SpecAgent stops paying.

    Tornado: each assumption (acceptance by kind, decay, correlation, Weak ratio, verdict tokens,
    user and tool latency, Strong batch, weight reads, verifier prompt) at the low and the high
    end of its range, the others at the scenario's values. Break-even map: semantic acceptance ×
    Weak/Strong time per token, and the line where SpecAgent's wall time equals Strong-only's.
    Ranges and their rationale: docs/uncertainty.md.
    """
    guard_outputs([("-o", out / "sensitivity.json", JSON_DOC), ("-o", out / "sensitivity.html", HTML)],
                  scenario=request.scenario, inputs=request.provenance.inputs)
    for target in (out / "sensitivity.json", out / "sensitivity.html"):
        atomic.check_writable(target)
    with job_progress(show=not as_json) as progress:
        study = run(request, progress)
    doc = study.to_dict()
    study.write(out)
    write_sensitivity_page(doc, out / "sensitivity.html", f"specagent sensitivity study · {study.workload}")
    if as_json:
        print(json_out(doc, indent=2, default=str))
        return
    _print_tornado(study)
    _print_break_even(study)
    console.print(f"wrote {out / 'sensitivity.json'} and {out / 'sensitivity.html'} (`specagent report` takes the JSON too)")
