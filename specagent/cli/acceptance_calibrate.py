"""`specagent acceptance calibrate`: which acceptance and verdict parameters reproduce the published protocol figures.

Thin: the search and the forward model are `simulator.calibration`; this prints what it found
and writes it (atomically) for the report and for `--scenario`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import tomli_w
import typer
from rich.console import Console
from rich.table import Table

from specagent.cli.console import fail
from specagent.cli.progress import progress_bar
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.measurements import MeasurementError
from specagent.measurements.protocol_figures import load_protocol_figures
from specagent.simulator.calibration import PARAMETERS, Calibration, calibrate as run_calibration, candidate_acceptance
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.setting import API_VERIFY_SENDS

console = Console()
O = typer.Option


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def _rounded(v):
    """Floats to 4 significant digits for a readable scenario file (the candidate's exact values are in candidates.csv)."""
    if isinstance(v, float):
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _figures_table(cal: Calibration, row: int, mode: str) -> Table:
    t = Table(title=f"Published figures (SPEC §7) and candidate {row}", show_edge=False, pad_edge=False)
    for c in ("figure", "published", "simulated", "met", "meeting it"):
        t.add_column(c, justify="left" if c == "figure" else "right", no_wrap=c == "figure")
    meets = cal.meets(mode)
    for _, r in cal.miss_table(row, mode).iterrows():
        n = f"{int(meets[r.figure].sum())} / {len(meets)}" if r.figure in meets else r.status
        scored = r.status in ("scored", "hardware")
        met = "—" if not scored else ("yes" if r.met else f"no ({r.miss:+.0%})" if math.isfinite(r.miss) else "no")
        t.add_row(r.figure, r.published, _fmt(r.value), met, n)
    return t


def calibrate(
    figures: Optional[Path] = O(None, "--figures", help="Published figures CSV (default: the shipped measurements/protocol_figures.csv)."),
    samples: int = O(256, "--samples", "-n", help="Latin-hypercube candidates to simulate (about 0.6 s each on this machine)."),
    seed: int = O(0, help="Seed of the Latin hypercube."),
    h20_scenario: Optional[Path] = O(None, "--h20-scenario", help="Scenario for the τ²-Bench figures (default: the built-in default)."),
    edge_scenario: Optional[Path] = O(None, "--edge-scenario", help="Scenario for the MCP-Atlas figures (default: the shipped edge scenario)."),
    api_mode: Optional[str] = O(None, "--api-verify-sends", help="Judge the API-cost figure under this send mode (" + ", ".join(API_VERIFY_SENDS)
                                + "; default: the edge scenario's)."),
    out: Path = O(Path("out/calibrate"), "-o", "--out", help="Directory for candidates.csv and summary.json."),
    acceptance_out: Optional[Path] = O(None, "--acceptance-out", help="Also write the chosen point as a scenario file holding only [acceptance]."),
) -> None:
    """Search acceptance and verdict parameters that reproduce every published protocol range (SPEC §7).

    Forward model: this tool's own simulator, τ²-Bench figures on the default scenario, MCP-Atlas
    figures on the edge scenario's MCP-like workload. Hardware and latency terms are never moved.
    Prints the accepted set (count, per-parameter ranges), what each figure's simulated value is
    for a documented point of the set, and, when no candidate meets every figure, which conflict.
    """
    if samples < 1 or samples > 100_000:
        fail(f"--samples: expected a whole number in [1, 100,000], got {samples}")
    if seed < 0:
        fail(f"--seed: expected a whole number >= 0, got {seed}")
    if api_mode is not None and api_mode not in API_VERIFY_SENDS:
        fail(f"--api-verify-sends: expected one of {', '.join(API_VERIFY_SENDS)}, got {api_mode!r}")
    for target in (out / "summary.json", acceptance_out):
        if target is not None:
            atomic.check_writable(target)
    try:
        figs = load_protocol_figures(figures)
        scenarios = {"h20": Scenario.load(h20_scenario) if h20_scenario else Scenario(),
                     "edge": Scenario.load(edge_scenario) if edge_scenario else Scenario.load("edge")}
        if api_mode is not None:
            scenarios["edge"] = scenarios["edge"].replace(api_verify_sends=api_mode)
        with progress_bar(samples, "simulating candidates") as advance:
            cal = run_calibration(figs, samples=samples, seed=seed, scenarios=scenarios, progress=lambda i, n: advance(1))
    except (MeasurementError, InputError, ScenarioError) as exc:
        fail(exc)
    mode = scenarios["edge"].api_verify_sends
    accepted = cal.accepted(mode)
    conflicts = cal.conflicts(mode)
    point = cal.central(mode)
    row = point if point >= 0 else conflicts["best_candidate"]

    console.print(f"{int(accepted.sum())} of {len(accepted)} candidates meet every scored figure "
                  f"(API cost judged with verifications sending '{mode}'); by send mode: "
                  + ", ".join(f"{m} {int(cal.accepted(m).sum())}" for m in API_VERIFY_SENDS))
    ranges = cal.parameter_ranges(mode)
    t = Table(title="Parameters: searched range and the accepted set's range", show_edge=False, pad_edge=False)
    for c in ("parameter", "searched", "accepted", f"candidate {row}"):
        t.add_column(c, justify="left" if c == "parameter" else "right")
    for p in PARAMETERS:
        r = ranges.loc[p.name]
        t.add_row(p.name, f"{_fmt(r.searched_low)}–{_fmt(r.searched_high)}",
                  f"{_fmt(r.accepted_low)}–{_fmt(r.accepted_high)}" if accepted.any() else "none",
                  _fmt(float(cal.candidates.at[row, p.name])))
    console.print(t)
    console.print(_figures_table(cal, row, mode))
    if not accepted.any():
        console.print("[bold]No candidate meets every scored figure.[/] "
                      + (f"Met by none: {', '.join(conflicts['unreachable'])}. " if conflicts["unreachable"] else "")
                      + (f"Never met together: {'; '.join(f'{a} + {b}' for a, b in conflicts['conflicting_pairs'])}. "
                         if conflicts["conflicting_pairs"] else "")
                      + f"Candidate {row} meets {len(conflicts['best_meets'])} of {len(cal.scored)}; it misses "
                      + ", ".join(conflicts["best_misses"]) + ".")
    api_keys = [k for k in cal.values.columns if "@" in k]
    if api_keys:
        console.print(f"API cost of candidate {row} by what a verification sends: "
                      + ", ".join(f"{k.split('@')[1]} {cal.values.at[row, k]:.3f}" for k in api_keys))

    table = cal.candidates.join(cal.values).join(cal.meets(mode).add_prefix("meets_"))
    table.insert(0, "accepted", accepted)
    summary = {
        "samples": samples, "seed": seed, "api_verify_sends": mode, "accepted": int(accepted.sum()),
        "accepted_by_mode": {m: int(cal.accepted(m).sum()) for m in API_VERIFY_SENDS},
        "parameter_ranges": ranges.reset_index(names="parameter").to_dict(orient="records"),
        "point": int(row), "point_is_accepted": bool(point >= 0),
        "point_parameters": {k: float(v) for k, v in cal.candidates.loc[row].items()},
        "figures": cal.miss_table(row, mode).to_dict(orient="records"),
        "conflicts": {k: (list(map(list, v)) if k == "conflicting_pairs" else v) for k, v in conflicts.items()},
        "figures_file": str(figures) if figures else "measurements/protocol_figures.csv",
    }
    writes = {out / "candidates.csv": atomic.text_writer(table.to_csv(index_label="candidate")),
              out / "summary.json": atomic.text_writer(atomic.json_text(summary))}
    if acceptance_out is not None:
        acc = candidate_acceptance(cal.candidates.loc[row].to_dict(), scenarios["h20"].acceptance)
        d = {f: _rounded(getattr(acc, f)) for f in acc.__dataclass_fields__}
        d["source"] = (f"specagent acceptance calibrate --samples {samples} --seed {seed}: candidate {row}, "
                       + ("a point of the set meeting every scored SPEC §7 figure" if point >= 0 else
                          f"meets {len(conflicts['best_meets'])} of {len(cal.scored)} scored SPEC §7 figures (no candidate meets all)"))
        writes[acceptance_out] = atomic.text_writer(tomli_w.dumps({"acceptance": d}))
    atomic.write_together(writes)
    console.print(f"wrote {', '.join(str(p) for p in writes)}")
