"""`specagent acceptance calibrate`: which acceptance and verdict parameters reproduce the published protocol figures.

Prints only: the search is the job `simulator/jobs/acceptance_search.py` (its flags generated from its Request);
this prints what it found and has it write its files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from rich.console import RenderableType

from specagent.cli.console import SafeConsole, fail
from specagent.reports.screens.tables import Col, fitted
from specagent.cli.options import guard_outputs
from specagent.cli.progress import step_bar
from specagent.cli.requests import fail_job, request_options
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.measurements import MeasurementError
from specagent.simulator.jobs.acceptance_candidates import PARAMETERS, CandidateSet
from specagent.simulator.jobs.acceptance_search import AcceptanceSearchRequest, AcceptanceSearchResult
from specagent.simulator.protocol.setting import API_VERIFY_SENDS
from specagent.simulator.scenario import ScenarioError

console = SafeConsole()
O = typer.Option  # noqa: E741  (short alias for the options below)


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def _short(v: float) -> str:
    """A parameter value for the ranges table: two decimals below 10, a whole number above."""
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.0f}"


def _figures_table(cal: CandidateSet, row: int, mode: str) -> RenderableType:
    rows = []
    meets = cal.meets(mode)
    for _, r in cal.miss_table(row, mode).iterrows():
        n = f"{int(meets[r.figure].sum())} / {len(meets)}" if r.figure in meets else r.status
        scored = r.status in ("scored", "hardware")
        signed = -r.miss if scored and r.value < r.low else r.miss  # below the range: negative
        met = "—" if not scored else ("yes" if r.met else f"no ({signed:+.0%})" if math.isfinite(r.miss) else "no")
        rows.append([r.figure, r.published, _fmt(r.value), met, n])
    cols = [Col("figure", "left"), *(Col(c) for c in ("published", "simulated", "met", "meeting it"))]
    return fitted(console, cols, rows, title=f"Published figures (Wang et al., arXiv:2610.21463) and candidate {row}")


def _parameters_table(res: AcceptanceSearchResult) -> RenderableType:
    rows = []
    for p in PARAMETERS:
        cells = []
        for k in ("reachable", "h20", "edge"):
            r = res.ranges[k].loc[p.name]
            cells.append(f"{_short(r.accepted_low)}–{_short(r.accepted_high)}" if res.counts.get(k) else
                         "none" if k in res.counts else "no figures")
        r = res.ranges["reachable"].loc[p.name]
        rows.append([p.name, f"{_short(r.searched_low)}–{_short(r.searched_high)}", *cells,
                     _short(float(res.candidates.candidates.at[res.point, p.name]))])
    cols = [Col("parameter", "left"), *(Col(c) for c in ("searched", "both", "τ² (h20)", "MCP (edge)", f"#{res.point}"))]
    return fitted(console, cols, rows, title="Parameters: searched, accepted (figures met by none set aside), the point")


def _print_counts(res: AcceptanceSearchResult) -> None:
    """How many candidates meet what; when none meets every figure, which figures conflict."""
    cal, mode, counts, conflicts = res.candidates, res.mode, res.counts, res.conflicts
    console.print(f"{counts['all']} of {len(cal.candidates)} candidates meet every scored figure "
                  f"(API cost judged with verifications sending '{mode}'; by send mode: "
                  + ", ".join(f"{m} {int(cal.accepted(m).sum())}" for m in API_VERIFY_SENDS) + ").")
    if counts["all"] == 0:
        console.print((f"Met by no candidate: {', '.join(res.aside)}. " if res.aside else "")
                      + (f"Never met together: {'; '.join(f'{a} + {b}' for a, b in conflicts['conflicting_pairs'])}. "
                         if conflicts["conflicting_pairs"] else "")
                      + f"The best candidate ({conflicts['best_candidate']}) meets {len(conflicts['best_meets'])} of "
                      + f"{len(cal.scored)}; it misses " + ", ".join(conflicts["best_misses"]) + ".")
        if res.aside and "reachable" in counts:
            console.print(f"Setting aside the figures no candidate meets: {counts['reachable']} meet all the others"
                          + "".join(f"; {counts[k]} meet every {label} figure" for k, label in
                                    (("h20", "τ²-Bench (h20)"), ("edge", "MCP-Atlas (edge)")) if k in counts) + ".")
    if res.dropped is not None:
        at = res.points["h20_but_one"]
        console.print(f"Setting aside {res.dropped} as well (the τ²-Bench figure whose removal admits the most candidates): "
                      f"{counts['h20_but_one']} meet every other τ²-Bench figure; their central point is candidate "
                      f"{at}, which gives {res.dropped} {cal.values.at[at, res.dropped]:.3f} "
                      f"(published {next(f for f in cal.scored if f.figure_id == res.dropped).range_text()}).")
    if counts["all"] == 0:
        for mine, met in res.cross.items():
            ok = cal.accepted(mode, res.sets[mine])
            if ok.any():
                console.print(f"Of the {int(ok.sum())} candidates meeting every {'τ²-Bench' if mine == 'h20' else 'MCP-Atlas'} "
                              "figure, " + ", ".join(f"{n} meet {f}" for f, n in met.items()) + ".")


def _print(res: AcceptanceSearchResult) -> None:
    _print_counts(res)
    console.print(_parameters_table(res))
    if any(p.p_off for p in PARAMETERS):
        console.print("reasoning tokens -1 = tied to the workload (the recorded reasoning of the step decided or repaired)")
    cal, row = res.candidates, res.point
    console.print(_figures_table(cal, row, res.mode))
    if res.points.get("edge", -1) >= 0 and res.points["edge"] != row:
        console.print(f"MCP-Atlas (edge) point: candidate {res.points['edge']}")
    api_keys = [k for k in cal.values.columns if "@" in k]
    if api_keys:
        console.print(f"API cost of candidate {row} by what a verification sends: "
                      + ", ".join(f"{k.split('@')[1]} {cal.values.at[row, k]:.3f}" for k in api_keys))


@request_options(AcceptanceSearchRequest, scenario=False)
def acceptance_search(
    request: AcceptanceSearchRequest,
    out: Path = O(Path("out/calibrate"), "-o", "--out", help="Directory for candidates.csv and summary.json."),
    acceptance_out: Optional[Path] = O(None, "--acceptance-out", help="Also write the chosen point (of every figure's set, else of the "
                                       "τ²-Bench set) as a scenario file holding only [acceptance]."),
    edge_acceptance_out: Optional[Path] = O(None, "--edge-acceptance-out", help="Also write the MCP-Atlas (edge) set's point likewise."),
    points_out: Optional[Path] = O(None, "--points-out", help="Also write the τ²-Bench (h20) set as a ranges file of [[points]] "
                                   "(`--acceptance-ranges FILE`; shipped as simulator/data/calibrated_set_tau2.toml)."),
) -> None:
    """Search acceptance and verdict parameters that reproduce every published protocol range (Wang et al., arXiv:2610.21463).

    Forward model: this tool's own simulator, τ²-Bench figures in the publication's evaluated setting (the shipped
    scenario wang2026-tau2: agent-side time, a verifier re-reading its context), MCP-Atlas figures on the edge
    scenario's MCP-like workload. Hardware and latency terms are never moved.
    Prints the accepted set (count, per-parameter ranges), what each figure's simulated value is
    for a documented point of the set, and, when no candidate meets every figure, which conflict.
    """
    from specagent.simulator.jobs.acceptance_search import run

    outputs = [("-o", out / "summary.json"), ("-o", out / "candidates.csv"), ("--acceptance-out", acceptance_out),
               ("--edge-acceptance-out", edge_acceptance_out), ("--points-out", points_out)]
    # an output over an input, or two outputs in one file (--acceptance-out and --edge-acceptance-out alike)
    guard_outputs(outputs, inputs={"--figures": request.figures, "--h20-scenario": request.h20_scenario,
                                   "--edge-scenario": request.edge_scenario})
    for _flag, target in outputs:
        if target is not None:
            atomic.check_writable(target)
    try:
        with step_bar(request.samples, "simulating candidates") as progress:
            res = run(request, progress)
    except (MeasurementError, InputError, ScenarioError) as exc:
        fail_job(AcceptanceSearchRequest, exc)
    _print(res)
    written = res.write(out, acceptance_out, edge_acceptance_out, points_out)
    console.print(f"wrote {', '.join(str(p) for p in written)}")
    _, missing = res.point_files(acceptance_out, edge_acceptance_out, points_out)
    if missing:
        fail("; ".join(missing))
