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

from rich.table import Table

from specagent.cli.console import SafeConsole, fail
from specagent.cli.progress import progress_bar
from specagent.common import atomic
from specagent.common.paths import check_outputs
from specagent.common.errors import InputError
from specagent.measurements import MeasurementError
from specagent.measurements.protocol_figures import load_protocol_figures
from specagent.simulator.acceptance.io import acceptance_table
from specagent.simulator.calibration import (PARAMETERS, TIED, Calibration, calibrate as run_calibration, candidate_acceptance,
                                             evaluated_scenarios)
from specagent.simulator.parallel import MAX_WORKERS, default_workers
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.protocol.setting import API_VERIFY_SENDS

console = SafeConsole()
O = typer.Option  # noqa: E741  (short alias for the many options below)


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def _short(v: float) -> str:
    """A parameter value for the ranges table: two decimals below 10, a whole number above."""
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.0f}"


def _rounded(v):
    """Floats to 4 significant digits for a readable scenario file (the candidate's exact values are in candidates.csv)."""
    if isinstance(v, float):
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _acceptance_toml(cal: Calibration, row: int, scenario: Scenario, samples: int, seed: int, which: str,
                     aside: list[str], but: str | None = None, ids: list[str] | None = None) -> str:
    """A scenario file holding only [acceptance]: candidate `row`, its source saying where it comes from (`ids`: the
    set's figures, where it is not a setting's; `but`: the τ² figure set aside because no candidate meets it with the rest)."""
    acc = candidate_acceptance(cal.candidates.loc[row].to_dict(), scenario.acceptance)
    d = acceptance_table(acc, _rounded)  # None = tied to the workload: left out
    setting_of = {f.figure_id: f.setting for f in cal.figures}
    mine = [f for f in aside if which in ("all", "reachable") or setting_of[f] == which.split("_")[0]]
    ids = ids if ids is not None else cal.figure_ids(None if which in ('all', 'reachable') else which, aside)
    d["source"] = (f"specagent acceptance calibrate --samples {samples} --seed {seed}: candidate {row}, the central point of "
                   f"the {int(cal.accepted(None, ids).sum())} candidates meeting every scored published figure of set '{which}'"
                   + (f" (met by no candidate, set aside: {', '.join(mine)})" if mine else "")
                   + (f" (met by some candidates but never with every other τ²-Bench figure, set aside: {but})" if but else "")
                   + "; docs/protocol-calibration.md")
    return tomli_w.dumps({"acceptance": d})


#: Fields a point of a calibrated set leaves out: they describe the set, not one of its points.
_NOT_A_POINT = ("source", "fit", "calibrated_on")


def _points_toml(cal: Calibration, mode: str, ids: list[str], scenario: Scenario, samples: int, seed: int,
                 aside: list[str], but: str | None = None) -> str:
    """A ranges file of [[points]]: every candidate meeting every τ²-Bench figure (reasoning tied to the workload where
    any such candidate is accepted, as the point is chosen), each as the acceptance fields it sets."""
    ok = cal.accepted(mode, ids)
    tied = ok & (cal.candidates["verify_reasoning_tokens"] == TIED) & (cal.candidates["repair_reasoning_tokens"] == TIED)
    rows = [int(i) for i in cal.candidates.index[tied if tied.any() else ok]]
    points = []
    for i in rows:
        table = acceptance_table(candidate_acceptance(cal.candidates.loc[i].to_dict(), scenario.acceptance), _rounded)
        points.append({"candidate": i} | {k: v for k, v in table.items() if k not in _NOT_A_POINT})
    source = (f"specagent acceptance calibrate --samples {samples} --seed {seed} --points-out: the {len(rows)} candidates "
              f"meeting every scored τ²-Bench figure of Wang et al., arXiv:2610.21463"
              + (f" (met by no candidate, set aside: {', '.join(aside)})" if aside else "")
              + (f" (met by some candidates but never with every other τ²-Bench figure, set aside: {but})" if but else "")
              + ("; reasoning tied to the workload" if tied.any() else "") + "; each equally consistent with the figures")
    head = "# Written by `specagent acceptance calibrate --points-out`: do not edit by hand.\n"
    return head + tomli_w.dumps({"source": source, "points": points})


def _figures_table(cal: Calibration, row: int, mode: str) -> Table:
    t = Table(title=f"Published figures (Wang et al., arXiv:2610.21463) and candidate {row}", show_edge=False, pad_edge=False)
    for c in ("figure", "published", "simulated", "met", "meeting it"):
        t.add_column(c, justify="left" if c == "figure" else "right", no_wrap=c == "figure")
    meets = cal.meets(mode)
    for _, r in cal.miss_table(row, mode).iterrows():
        n = f"{int(meets[r.figure].sum())} / {len(meets)}" if r.figure in meets else r.status
        scored = r.status in ("scored", "hardware")
        signed = -r.miss if scored and r.value < r.low else r.miss  # below the range: negative
        met = "—" if not scored else ("yes" if r.met else f"no ({signed:+.0%})" if math.isfinite(r.miss) else "no")
        t.add_row(r.figure, r.published, _fmt(r.value), met, n)
    return t


def calibrate(
    figures: Optional[Path] = O(None, "--figures", help="Published figures CSV (default: the shipped measurements/protocol_figures.csv)."),
    samples: int = O(256, "--samples", "-n", help="Latin-hypercube candidates to simulate (a batch at a time; 512 take about 25 s of CPU on a 2-core machine)."),
    seed: int = O(0, help="Seed of the Latin hypercube (0 to 2^32 - 1)."),
    h20_scenario: Optional[Path] = O(None, "--h20-scenario", help="Scenario for the τ²-Bench figures (default: the publication's evaluated setting, the shipped wang2026-tau2)."),
    edge_scenario: Optional[Path] = O(None, "--edge-scenario", help="Scenario for the MCP-Atlas figures (default: the shipped edge scenario)."),
    api_mode: Optional[str] = O(None, "--api-verify-sends", help="Judge the API-cost figure under this send mode (" + ", ".join(API_VERIFY_SENDS)
                                + "; default: the edge scenario's)."),
    out: Path = O(Path("out/calibrate"), "-o", "--out", help="Directory for candidates.csv and summary.json."),
    acceptance_out: Optional[Path] = O(None, "--acceptance-out", help="Also write the chosen point (of every figure's set, else of the "
                                       "τ²-Bench set) as a scenario file holding only [acceptance]."),
    edge_acceptance_out: Optional[Path] = O(None, "--edge-acceptance-out", help="Also write the MCP-Atlas (edge) set's point likewise."),
    workers: int = O(0, "--workers", help="Processes simulating candidates, 64 at a time (0: one per CPU); the results do not "
                     "depend on it."),
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
    if samples < 1 or samples > 100_000:
        fail(f"--samples: expected a whole number in [1, 100,000], got {samples}")
    if not 0 <= seed < 2**32:
        fail(f"--seed: expected a whole number in [0, 2^32), got {seed}")
    if not 0 <= workers <= MAX_WORKERS:
        fail(f"--workers: expected a whole number in [0, {MAX_WORKERS:,}], got {workers}")
    if api_mode is not None and api_mode not in API_VERIFY_SENDS:
        fail(f"--api-verify-sends: expected one of {', '.join(API_VERIFY_SENDS)}, got {api_mode!r}")
    outputs = [("-o", out / "summary.json"), ("-o", out / "candidates.csv"), ("--acceptance-out", acceptance_out),
               ("--edge-acceptance-out", edge_acceptance_out), ("--points-out", points_out)]
    try:  # an output over an input, or two outputs in one file (--acceptance-out and --edge-acceptance-out alike)
        check_outputs(outputs, {"--figures": figures, "--h20-scenario": h20_scenario, "--edge-scenario": edge_scenario}, InputError)
    except InputError as exc:
        fail(str(exc))
    for _flag, target in outputs:
        if target is not None:
            atomic.check_writable(target)
    try:
        figs = load_protocol_figures(figures)
        evaluated = evaluated_scenarios()
        scenarios = {"h20": Scenario.load(h20_scenario) if h20_scenario else evaluated["h20"],
                     "edge": Scenario.load(edge_scenario) if edge_scenario else evaluated["edge"]}
        if api_mode is not None:
            scenarios["edge"] = scenarios["edge"].replace(api_verify_sends=api_mode)
        with progress_bar(samples, "simulating candidates") as advance:
            done = [0]

            def told(i: int, n: int) -> None:  # candidates are simulated a batch at a time: advance by what finished
                advance(i - done[0])
                done[0] = i

            cal = run_calibration(figs, samples=samples, seed=seed, scenarios=scenarios, progress=told,
                                  workers=workers or default_workers())
    except (MeasurementError, InputError, ScenarioError) as exc:
        fail(exc)
    mode = scenarios["edge"].api_verify_sends
    accepted = cal.accepted(mode)
    conflicts = cal.conflicts(mode)
    aside = conflicts["unreachable"]
    # the sets reported: every scored figure; every figure some candidate meets; each setting's alone
    sets = {"all": cal.figure_ids(), "reachable": cal.figure_ids(exclude=aside),
            "h20": cal.figure_ids("h20", exclude=aside), "edge": cal.figure_ids("edge", exclude=aside)}
    sets = {k: ids for k, ids in sets.items() if ids or k == "all"}  # a setting without scored figures has no set
    counts = {k: int(cal.accepted(mode, ids).sum()) for k, ids in sets.items()}
    # no candidate meets every τ² figure: set aside the one whose removal admits the most candidates (first in file
    # order on a tie), so that the set and its central point are those of every other τ² figure, the one named
    dropped = None
    if counts.get("h20") == 0 and len(sets.get("h20", [])) > 1:
        admits = {f: int(cal.accepted(mode, [g for g in sets["h20"] if g != f]).sum()) for f in sets["h20"]}
        best = max(admits.values())
        if best > 0:
            dropped = next(f for f in sets["h20"] if admits[f] == best)
            sets["h20_but_one"] = [g for g in sets["h20"] if g != dropped]
            counts["h20_but_one"] = best
    points = {k: cal.central(mode, ids) for k, ids in sets.items()}
    chosen = next((k for k in ("all", "reachable", "h20", "h20_but_one") if points.get(k, -1) >= 0), None)
    row = points[chosen] if chosen else conflicts["best_candidate"]

    console.print(f"{counts['all']} of {len(accepted)} candidates meet every scored figure "
                  f"(API cost judged with verifications sending '{mode}'; by send mode: "
                  + ", ".join(f"{m} {int(cal.accepted(m).sum())}" for m in API_VERIFY_SENDS) + ").")
    if counts["all"] == 0:
        console.print((f"Met by no candidate: {', '.join(aside)}. " if aside else "")
                      + (f"Never met together: {'; '.join(f'{a} + {b}' for a, b in conflicts['conflicting_pairs'])}. "
                         if conflicts["conflicting_pairs"] else "")
                      + f"The best candidate ({conflicts['best_candidate']}) meets {len(conflicts['best_meets'])} of "
                      + f"{len(cal.scored)}; it misses " + ", ".join(conflicts["best_misses"]) + ".")
        if aside and "reachable" in counts:
            console.print(f"Setting aside the figures no candidate meets: {counts['reachable']} meet all the others"
                          + "".join(f"; {counts[k]} meet every {label} figure" for k, label in
                                    (("h20", "τ²-Bench (h20)"), ("edge", "MCP-Atlas (edge)")) if k in counts) + ".")
    if dropped is not None:
        console.print(f"Setting aside {dropped} as well (the τ²-Bench figure whose removal admits the most candidates): "
                      f"{counts['h20_but_one']} meet every other τ²-Bench figure; their central point is candidate "
                      f"{points['h20_but_one']}, which gives {dropped} {cal.values.at[points['h20_but_one'], dropped]:.3f} "
                      f"(published {next(f for f in cal.scored if f.figure_id == dropped).range_text()}).")
    meets = cal.meets(mode)
    cross = {}
    for mine, other in (("h20", "edge"), ("edge", "h20")):
        if mine not in sets or other not in sets:
            continue
        ok = cal.accepted(mode, sets[mine])
        cross[mine] = {f: int(meets.loc[ok, f].sum()) for f in sets[other]}
        if counts["all"] == 0 and ok.any():
            console.print(f"Of the {int(ok.sum())} candidates meeting every {'τ²-Bench' if mine == 'h20' else 'MCP-Atlas'} figure, "
                          + ", ".join(f"{n} meet {f}" for f, n in cross[mine].items()) + ".")
    ranges = {k: cal.parameter_ranges(mode, sets.get(k, [])) for k in ("reachable", "h20", "edge")}
    t = Table(title="Parameters: searched, accepted (figures met by none set aside), the point", show_edge=False,
              pad_edge=False)
    for c in ("parameter", "searched", "both", "τ² (h20)", "MCP (edge)", f"#{row}"):
        t.add_column(c, justify="left" if c == "parameter" else "right", no_wrap=c == "parameter")
    for p in PARAMETERS:
        cells = []
        for k in ("reachable", "h20", "edge"):
            r = ranges[k].loc[p.name]
            cells.append(f"{_short(r.accepted_low)}–{_short(r.accepted_high)}" if counts.get(k) else
                         "none" if k in counts else "no figures")
        r = ranges["reachable"].loc[p.name]
        t.add_row(p.name, f"{_short(r.searched_low)}–{_short(r.searched_high)}", *cells,
                  _short(float(cal.candidates.at[row, p.name])))
    console.print(t)
    if any(p.p_off for p in PARAMETERS):
        console.print("reasoning tokens -1 = tied to the workload (the recorded reasoning of the step decided or repaired)")
    console.print(_figures_table(cal, row, mode))
    if points.get("edge", -1) >= 0 and points["edge"] != row:
        console.print(f"MCP-Atlas (edge) point: candidate {points['edge']}")
    api_keys = [k for k in cal.values.columns if "@" in k]
    if api_keys:
        console.print(f"API cost of candidate {row} by what a verification sends: "
                      + ", ".join(f"{k.split('@')[1]} {cal.values.at[row, k]:.3f}" for k in api_keys))

    table = cal.candidates.join(cal.values).join(cal.meets(mode).add_prefix("meets_"))
    table.insert(0, "accepted", accepted)
    summary = {
        "samples": samples, "seed": seed, "api_verify_sends": mode, "accepted": int(accepted.sum()),
        "accepted_by_mode": {m: int(cal.accepted(m).sum()) for m in API_VERIFY_SENDS},
        "accepted_by_set": counts, "cross": cross, "sets": sets, "points": points, "point_set": chosen,
        "parameter_ranges": {k: v.reset_index(names="parameter").to_dict(orient="records") for k, v in ranges.items()},
        "point": int(row),
        # a reasoning count of -1 means "tied to the workload": null in JSON (a count is never negative)
        "point_parameters": {k: (None if k.endswith("reasoning_tokens") and float(v) < 0 else float(v))
                             for k, v in cal.candidates.loc[row].items()},
        "figures": cal.miss_table(row, mode).to_dict(orient="records"),
        "conflicts": {k: (list(map(list, v)) if k == "conflicting_pairs" else v) for k, v in conflicts.items()},
        "figures_file": str(figures) if figures else "measurements/protocol_figures.csv",
    }
    summary = _nan_as_null(summary)
    writes = {out / "candidates.csv": atomic.text_writer(table.to_csv(index_label="candidate")),
              out / "summary.json": atomic.text_writer(atomic.json_text(summary))}
    missing = []
    for target, which in ((acceptance_out, chosen), (edge_acceptance_out, "edge")):
        if target is None:
            continue
        at = points.get(which, -1) if which else -1
        if at < 0:
            missing.append(f"{target}: not written: no candidate meets every figure of the set '{which or 'h20'}' "
                           f"(more --samples, or see the conflicts above)")
            continue
        writes[target] = atomic.text_writer(_acceptance_toml(cal, at, scenarios["h20"], samples, seed, which, aside,
                                                             dropped if which == "h20_but_one" else None, sets.get(which)))
    if points_out is not None:
        tau = "h20" if counts.get("h20", 0) else "h20_but_one" if counts.get("h20_but_one", 0) else None
        if tau is None:
            missing.append(f"{points_out}: not written: no candidate meets every τ²-Bench figure (more --samples)")
        else:
            writes[points_out] = atomic.text_writer(_points_toml(cal, mode, sets[tau], scenarios["h20"], samples, seed, aside,
                                                                 dropped if tau == "h20_but_one" else None))
    atomic.write_together(writes)
    console.print(f"wrote {', '.join(str(p) for p in writes)}")
    if missing:
        fail("; ".join(missing))


def _nan_as_null(obj):
    """Figures the simulator does not model (quality, no workload) have no value: null in JSON, never NaN; a
    reasoning parameter's -1 ("tied to the workload") is null too."""
    if isinstance(obj, dict):
        if str(obj.get("parameter", "")).endswith("reasoning_tokens"):
            obj = {k: (None if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0 else v) for k, v in obj.items()}
        return {k: _nan_as_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nan_as_null(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj
