"""`specagent predict` and `specagent simulate`: a scenario, run and shown.

Their scenario flags are generated from the Scenario (options.py); each command builds one
Scenario, runs it, and stores it whole with its results.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

import typer
from rich import box
from rich.console import RenderableType
from rich.table import Table

from specagent.cli.fit_table import Col, fitted
from specagent.cli.console import SafeConsole, check_format, fail, legend, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import progress_bar
from specagent.cli.ranges import ranges_tables
from specagent.cli.requests import request_options, run_job
from specagent.common import atomic
from specagent.common.paths import HTML, JSON_DOC, PARQUET, same_file
from specagent.reports import bottom_line as BL
from specagent.simulator.jobs import bottom_line as JB
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.jobs.base import Provenance
from specagent.simulator.jobs.predict import PredictRequest, PredictResult
from specagent.simulator.jobs.simulate import SimulateRequest
from specagent.simulator.jobs.simulate import run as simulate_job
from specagent.simulator.jobs.predict import run as predict_job
from specagent.traces import default_workload_path
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


console = SafeConsole()
err = SafeConsole(stderr=True)

O = typer.Option  # noqa: E741  (short alias for the many options below)


def load_workload(scenario: Scenario, show: bool = True, provenance: Provenance = Provenance()):
    """The scenario's trajectories, where they came from, and their short name; a failure names the flag (or the
    scenario file's key, when the value came from the file: `provenance`)."""
    w = scenario.workload
    p = Path(w.trace) if w.trace is not None else default_workload_path()
    size = p.stat().st_size if w.synthetic is None and p.is_file() else 0
    try:
        with progress_bar(size, f"reading {p.name}", show=show and size > 0) as advance:
            return scenario.load_workload(progress=advance)
    except ScenarioError as exc:
        where = exc.where if exc.where == "workload.synthetic" else "workload.trace"
        if provenance.scenario_file is not None and where not in provenance.given:  # the file's key, not a flag
            fail(f"{provenance.scenario_file}: {where}: {exc}")
        fail(f"{'--synthetic' if where == 'workload.synthetic' else '--trace'}: {exc}")


#: (summary column, short header, legend): headers are words of at most 5 letters, so every column fits
#: 80 terminal columns next to the longest strategy name; the caption spells them out.
REL_COLUMNS = (
    ("total_bytes_read_rel", "bytes", "HBM bytes read by both models"),
    ("strong_bytes_read_rel", "S bytes", "bytes read by the Strong model"),
    ("wall_time_s_rel", "wall", "wall time per task, tool and user waits included"),
    ("model_wall_time_s_rel", "model", "wall time without tool and user waits (what a strategy can change)"),
    ("total_flops_rel", "FLOPs", "FLOPs of both models"),
    ("strong_decode_tokens_rel", "S dec", "tokens the Strong model decodes"),
    ("strong_calls_rel", "S calls", "Strong model calls"),
    ("api_usd_rel", "API $", "API charges"),
)
#: Phase-table headers, short for the same reason, with their legend.
PHASE_HEADERS = {
    "weak_drafting": ("W dec", "Weak drafting (decode)"), "weak_prefill": ("W pre", "Weak prefill"),
    "strong_verification": ("S ver", "Strong verification prefill"), "strong_repair_verdict": ("S rep", "Strong verdict and repair decode"),
    "strong_prefill": ("S pre", "Strong prefill"), "tool": ("tool", "tool calls"), "user": ("user", "user turns"),
}


def _strategy_column(t: Table, names) -> None:
    t.add_column("strategy", no_wrap=True, min_width=max(len(str(s)) for s in names))


#: Relative-table columns that leave first where the table would not fit (the ranges tables under it repeat them).
REL_OPTIONAL = ("strong_decode_tokens_rel", "strong_calls_rel")


def _rel_table(summary: pd.DataFrame, title: str, extra: Mapping[str, Mapping[str, str]] | None = None) -> RenderableType:
    """The ratios to Strong-only, fitted to the console (cli/fit_table.py). `extra` adds columns after the ratios:
    {header: {strategy: cell}} (e.g. an interval beside a ratio); a strategy a column does not name gets '-'."""
    rel = [c for c in REL_COLUMNS if c[0] in summary]
    cols = [Col("strategy", "left")] + [Col(head, optional=c in REL_OPTIONAL) for c, head, _ in rel]
    if "measured_success" in summary:
        cols.append(Col("measured\nsuccess"))
    extra = dict(extra or {})
    cols += [Col(head) for head in extra]
    rows = []
    for strat, row in summary.iterrows():
        cells = [str(strat)] + [f"{row[c]:.3f}" for c, _, _ in rel]
        if "measured_success" in summary:
            cells.append("-" if pd.isna(row["measured_success"]) else f"{row['measured_success']:.2f}")
        rows.append(cells + [cells_by.get(str(strat), "-") for cells_by in extra.values()])
    caption = ["ratios to Strong-only: " + legend((head, meaning) for _, head, meaning in rel)]
    if "label" in summary:
        caption.append(legend(summary["label"].items()))
    return fitted(console, cols, rows, title=title, caption="\n".join(caption), left_out="--json has them")


def environment_line(summary: pd.DataFrame, preset: str = "recorded", waits_recorded: bool = True, short: bool = False,
                     changed: str | None = None) -> str | None:
    """What the strategies cannot change: Strong-only's tool and user waits per task, as a share of its time per task;
    then SpecAgent's wall and model-only ratios side by side (the environment preset decides how far apart they are).
    A workload whose log recorded no wait (`waits_recorded` False, with the 'recorded' preset) says so instead of
    reporting 0 s of waits. `changed` (the environment's description when it is not the log's) names the waits the
    short line reports."""
    if "strongonly" not in summary.index or "env_wall_time_s" not in summary:
        return None
    base = summary.loc["strongonly"]
    n = float(base.get("trajectories", 1) or 1)
    wall, env = float(base["wall_time_s"]) / n, float(base["env_wall_time_s"]) / n
    if wall <= 0:
        return None
    if preset == "recorded" and not waits_recorded:
        if short:
            return "Waits not recorded in the log: the times cover the models only (--user-latency-s, --tool-latency-s)."
        line = ("Agent time vs environment time: waits not recorded (the log has no timestamps or latencies): the wall "
                "covers model time only; give the waits with --tool-latency-s/--user-latency-s or another --environment.")
    elif short:
        return (f"Waits{f' ({changed})' if changed else ''}: {BL.fmt_seconds(env)} of Strong-only's {BL.fmt_seconds(wall)} per task ({env / wall:.0%}) are tool "
                "and user waits, which no strategy shortens (`specagent explain`).")
    else:
        line = (f"Agent time vs environment time (environment preset '{preset}'): tool and user waits are "
                f"{BL.fmt_seconds(env)} of Strong-only's {BL.fmt_seconds(wall)} per task ({env / wall:.1%}); "
                "no strategy changes them.")
    if "specagent" in summary.index and "model_wall_time_s_rel" in summary:
        spec = summary.loc["specagent"]
        line += (f" SpecAgent: wall {float(spec['wall_time_s_rel']):.3f}, model time alone {float(spec['model_wall_time_s_rel']):.3f}"
                 " of Strong-only (`specagent explain` takes them apart).")
    return line + " Column 'model' compares model time alone."


def _human(v: float, unit: str) -> str:
    """4.03e15 bytes -> '4.03 PB'; FLOPs likewise; seconds as fmt_seconds."""
    if unit == "s":
        return BL.fmt_seconds(v)
    base = "B" if unit == "bytes" else "FLOP"
    for prefix, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g} {prefix}{base}"
    return f"{v:.3g} {base}"


def _phase_table(phase: pd.DataFrame, baseline_total: float, title: str, unit: str, n_tasks: int = 1, kind: str = "") -> Table:
    """Each phase relative to Strong-only's total; or, when that total is 0 (a hosted Strong model), absolute per task in
    human units. A phase that is zero for every strategy is left out (and said so)."""
    t = Table(title=title, show_edge=False)
    _strategy_column(t, phase.index)
    zero = [c for c in phase.columns if not (phase[c].abs() > 0).any()]
    phase = phase.drop(columns=zero)
    heads = [PHASE_HEADERS.get(c, (c.replace("_", " "), c.replace("_", " "))) for c in phase.columns]
    if baseline_total:
        cells = [[f"{v / baseline_total:.3f}" for v in row.values] for _, row in phase.iterrows()]
    else:
        cells = [[_human(v / max(n_tasks, 1), kind) if v else "0" for v in row.values] for _, row in phase.iterrows()]
    for i, (head, _) in enumerate(heads):  # figures are never cut: each column at its widest cell
        t.add_column(head, justify="right", no_wrap=True, min_width=max([len(c[i]) for c in cells] + [5]))
    for strat, c in zip(phase.index, cells):
        t.add_row(str(strat), *c)
    what = (f"each phase's {unit} relative to Strong-only's total" if baseline_total
            else f"{unit} per task, absolute: Strong-only's is 0 here (a hosted Strong model's traffic is not visible)")
    t.caption = what + ": " + legend(heads) + (f" (always 0, left out: {', '.join(PHASE_HEADERS.get(c, (c,))[0] for c in zero)})" if zero else "")
    return t


def _reasoning(acc: dict) -> str:
    """The verdict model's reasoning terms in words (the rule: simulator/acceptance/model.py)."""
    if not acc.get("thinking", False):
        return "off (verdicts and repairs decode their answer only)"
    tied = "the workload's recorded reasoning of the step decided"
    v, r = acc.get("verify_reasoning_tokens"), acc.get("repair_reasoning_tokens")
    return (f"on: {tied if v is None else f'{v} tokens'} per verification / "
            f"{'the repaired step' + chr(39) + 's recorded reasoning' if r is None else f'{r} tokens'} per repair")


def _assumption_table(assumptions: dict) -> RenderableType:
    """Every setting the figures depend on, as (what, value) rows fitted to the console: where a value is wider than the
    terminal, each setting prints its name, then its value indented."""
    rows: list[list[str]] = []

    def add(*cells: object) -> None:
        rows.append([str(c) for c in cells])

    for k, v in assumptions["setting"].items():
        add(k, v)
    acc = assumptions["acceptance_model"]
    add("acceptance (semantic) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["accept"].items()))
    add("acceptance (exact step) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["exact"].items()))
    add("position decay / correlation", f"{acc['position_decay']:g} / {acc['correlation']:g}")
    if acc.get("task_sd", 0.0) > 0:  # shown where it acts (0, the default, plans as before the field existed)
        add("per-task effect (sd, logit scale)", f"{acc['task_sd']:g}: acceptance above is the median task's")
    add("weak token ratio", f"{acc['weak_token_ratio']:g}")
    add("verdict tokens (reject / accept)", f"{acc['verdict_tokens']} (+ replacement call) / {acc['accept_verdict_tokens']}")
    add("Strong reasoning (verify / repair)", _reasoning(acc))
    add("p(valid replacement)", f"{acc['p_valid_replacement']:g}")
    add("router p(Strong) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["route_strong"].items()))
    add("escalation recall (collab)", f"{acc['escalation_recall']:g}")
    add("acceptance source", acc["source"])
    if "intervals" in assumptions:
        add("intervals", assumptions["intervals"])
    if "environment" in assumptions:
        add("environment (user, tool waits)", assumptions["environment"])
    # the stored key `engine` is the pricing engine (analytic | simpy), not the serving engine shown per pool above
    for name, label in (("workload", "workload"), ("trajectories", "trajectories"), ("seed", "seed"),
                        ("engine", "pricing engine"), ("quality", "quality")):
        add(label, str(assumptions[name]))
    sa = assumptions["strategies"].get("specagent")
    if sa:
        add("SpecAgent", f"K={sa['k']}, review={sa['review']}, verifier={sa['verifier']}")
    return fitted(console, (Col("what", "left"), Col("", "left")), rows,
                  title="Assumptions (every figure above depends on these)")


def _bottom_line_table(line: pd.DataFrame, labels: pd.Series | None, title: str, pool_list) -> Table:
    t = Table(title=title, show_edge=False)
    _strategy_column(t, line.index)
    columns = list(JB.COLUMNS)
    if not any(p.role == "strong" for p in pool_list):  # a hosted Strong model: its API charges instead of its GPU-seconds
        columns[3] = ("api_usd_per_task", "API $", "API charges per task for the hosted Strong model")
    cells = [[BL.fmt_cell(c, float(row[c])) if c != "api_usd_per_task" else BL.fmt_usd(float(row[c])) for c, _, _ in columns]
             for _, row in line.iterrows()]
    for i, (_, head, _) in enumerate(columns):  # figures are never cut: each column at its widest cell
        t.add_column(head, justify="right", no_wrap=True, min_width=max([len(c[i]) for c in cells] + [len(head)]))
    for strat, c in zip(line.index, cells):
        t.add_row(str(strat), *c)
    priced = "; ".join(f"{p.role.capitalize()} {p.gpus}x {p.gpu} at "
                       f"{'no price (pass --price ' + p.gpu + '=USD)' if p.usd_per_gpu_hour is None else f'${p.usd_per_gpu_hour:,.2f}/GPU-h'}"
                       f" ({'--price' if p.source.startswith('user') else 'profile'})" for p in pool_list)
    t.caption = (legend((head, meaning) for _, head, meaning in columns) + f". Pools: {priced}; "
                 "`specagent hardware show GPU` gives each price's source. Batch 1: dollars price busy GPU-seconds only "
                 "(a floor); `specagent plan` sizes a shared fleet.")
    return t


#: The ranges table's columns: (bottom_line_intervals column, header, may leave at 80 columns). The savings are shown
#: as changes, the headline's sign convention (negative: less than Strong-only).
RANGE_COLUMNS = (("wall_s_per_task", "s/task", False), ("model_s_per_task", "model s", True),
                 ("gpu_h_per_task", "GPU·s", False), ("usd_per_task", "$/task", False),
                 ("time saving %", "s Δ%", False), ("$ saving %", "$ Δ%", False))


def _range_cell(col: str, low: float, high: float) -> str:
    """A magnitude's range as the bottom line writes one, `lo–hi`, in the units of the table above it (GPU-seconds,
    dollars); a saving's as the change it is, signed, `lo to hi` (the headline's notation)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    if col.endswith("%"):
        return f"{round(-high) + 0:+d} to {round(-low) + 0:+d}"  # + 0: never "-0"
    # the bottom line's `[lo–hi]` without its brackets, which mark a range beside a point: here the cell is the range
    return (BL.fmt_range("gpu_s_per_task", 3600 * low, 3600 * high) if col == "gpu_h_per_task" else
            BL.fmt_range(col, low, high)).strip("[]")


def _ranges_table(iv: pd.DataFrame, level: float, n: int, includes: str) -> RenderableType:
    """The bottom line's intervals, right under it: each per-task figure and each change against Strong-only."""
    lohi = {(r.strategy, r.column): (r.low, r.high) for r in iv.itertuples()}
    rows = [[str(strat), *[_range_cell(col, *lohi[(strat, col)]) if (strat, col) in lohi else "-" for col, _, _ in RANGE_COLUMNS]]
            for strat in dict.fromkeys(iv["strategy"])]
    caption = (f"{level:.0%} intervals over draws of {includes}; GPU·s = both pools' GPU-seconds per task; s Δ%, $ Δ% = "
               "change vs Strong-only in the same draw (negative: faster, cheaper)")
    shown = {c for c, _, _ in RANGE_COLUMNS}
    n_wide = int(sum(bool(r.widened) for r in iv.itertuples() if r.column in shown)) if "widened" in iv else 0
    if n_wide:
        caption += (f"; {n_wide} interval{'s' if n_wide > 1 else ''} stretched to reach the point estimate "
                    "(the point lies in the draws' tail)")
    cols = [Col("strategy", "left"), *(Col(head, optional=opt) for _, head, opt in RANGE_COLUMNS)]
    return fitted(console, cols, rows, title=f"Bottom line ranges ({level:.0%} of {n} draws)", caption=caption,
                  left_out="--format csv has them")


def _csv_frame(line: pd.DataFrame, summary: pd.DataFrame, iv: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per strategy: the per-task figures (with `<col>_low`/`<col>_high` where intervals were drawn), then the
    ratios to Strong-only."""
    rel = [c for c, _, _ in REL_COLUMNS if c in summary]
    cols = [c for c, _, _ in JB.COLUMNS] + list(JB.EXTRA)
    out = line[cols].copy()
    if iv is not None:
        for col in JB.INTERVAL_COLUMNS:
            sub = iv[iv["column"] == col].set_index("strategy")
            out[f"{col}_low"], out[f"{col}_high"] = sub["low"], sub["high"]
    out = out.join(summary[rel])
    out.index.name = "strategy"
    return out


@request_options(PredictRequest)
def predict(
    request: PredictRequest,
    out: Path = O(Path("out/predict"), "-o", "--out", help="Directory for per_trajectory.parquet and summary.json."),
    report: Optional[Path] = O(None, "--report", help="Also write a self-contained HTML report here."),
    details: bool = O(False, "--details", help="Before the answer, every table: the bottom line with its ranges, the ratios to "
                      "Strong-only with their intervals, the published figures and every assumption (the report has them too)."),
    phases: bool = O(False, "--phases", help="With --details: also the memory-traffic, time and FLOPs tables by phase."),
    brief: bool = O(False, "--brief", help="The answer only (the default; kept for scripts that pass it).", hidden=True),
    fmt: str = O("table", "--format", help="table (for people), json (the whole summary) or csv (one row per strategy: per-task "
                 "figures, then ratios)."),
    as_json: bool = O(False, "--json", help="Same as --format json."),
    quiet: bool = O(False, "--quiet", "-q", help="Print nothing but errors (the files are still written)."),
) -> None:
    """Predict what every strategy costs per task, and relative to Strong-only, on the built-in default scenario.

    Default: Qwen3.5-4B Weak (1×H20, bf16) and Qwen3.5-397B-A17B Strong (8×H20, fp8 weights)
    on the shipped τ²-Bench airline workload, K=4, review on writes, batch 1 (no fleet
    contention; see `specagent plan` for fleets). First the bottom line per task (seconds,
    GPU-seconds by pool, dollars), then the ratios; every assumption is printed with the
    results, and summary.json carries the whole scenario (`--scenario` reads it back).
    """
    fmt = _predict_format(fmt, as_json, brief, phases, details, quiet)
    table = fmt == "table" and not quiet
    _guard_predict(request, out, report)
    result = run_job(predict_job, request, show=table, workload=load_workload(request.scenario, show=table, provenance=request.provenance))
    result.write(out)
    if report:
        from specagent.reports.html import write_report  # plotly: only when a report is asked for
    written = write_report(result, report, images=True) if report else None
    if written is not None:
        _say_report(written, report, err.print if fmt != "table" else console.print)
    if not quiet:
        _show_predict(result, fmt, phases=phases, details=details, out=out, report=report)


def _predict_format(fmt: str, as_json: bool, brief: bool, phases: bool, details: bool, quiet: bool) -> str:
    """--format/--json, and the combinations that would lose what was asked for."""
    fmt = check_format(fmt, as_json)
    if brief and (details or phases):
        fail(f"--brief and {'--details' if details else '--phases'}: not both (--brief prints the answer only; "
             f"{'--details every table' if details else 'the phase tables are printed'} before it)")
    if phases and not details and fmt == "table" and not quiet:  # the phase tables are among the details
        fail("--phases needs --details (the phase tables are printed with the other tables, before the answer)")
    if quiet and fmt != "table":
        fail(f"--quiet and --format {fmt}: not both (--quiet prints nothing, so the {fmt.upper()} asked for would be lost; "
             "the files are written either way)")
    if phases and (quiet or fmt == "csv"):  # the phase tables are printed with the table format only
        fail("--quiet and --phases: not both (--quiet prints nothing, so the phase tables asked for would be lost)" if quiet else
             "--format csv and --phases: not both (the CSV holds one row per strategy, no phase tables; --format json "
             "carries them, as summary.json does)")
    return fmt


def _guard_predict(request: PredictRequest, out: Path, report: Optional[Path]) -> None:
    """The outputs checked before the run: writable, none over an input or over another's file."""
    for target in (out / "summary.json", report):
        if target is not None:
            atomic.check_writable(target)  # before the run, not after it
    if report is not None:  # `--report OUT/summary.json` replaced the summary just written with the HTML, exit 0
        inputs = (request.scenario.workload.trace, request.success, *(v[0] for v in request.provenance.inputs.values()))
        for other, what in ((out / "summary.json", "the summary this run writes"),
                            (out / "per_trajectory.parquet", "the per-trajectory file this run writes"),
                            *((Path(p), "one of the inputs") for p in inputs if p)):
            if same_file(report, other):
                fail(f"--report {report}: it is {what} ({other}); the report would replace it. Name another file")
    # the one output guard (common.paths.check_outputs): no file of -o over an input or another output's file
    guard_outputs([("-o", out / "per_trajectory.parquet", PARQUET), ("-o", out / "summary.json", JSON_DOC), ("--report", report, HTML)],
                  provenance=request.provenance, scenario=request.scenario, inputs={"--success": request.success})


def _show_predict(result: PredictResult, fmt: str, *, phases: bool, details: bool, out: Path, report: Optional[Path]) -> None:
    """The result in the format asked for; for people, the answer last (the first screen a terminal keeps)."""
    if fmt == "json":
        print(json_out(result.to_dict(), indent=2, default=str))
    elif fmt == "csv":
        sys.stdout.write(_csv_frame(result.bottom_line, result.comparison.summary, result.bottom_line_intervals).to_csv())
    else:
        if details:
            _print_predict(result, phases=phases)
        _print_answer(result, out, report, details)


def _print_answer(result: PredictResult, out: Path, report: Optional[Path], details: bool) -> None:
    """The answer in at most 24 lines of 80 columns: the warnings about the inputs, every strategy per task with its change
    against Strong-only, SpecAgent's changes with their intervals and the verdict, the waits, and where the rest is."""
    for note in (result.applies, *(f"warning: workload {result.name}: {w}" for w in (result.quality.warnings() if result.quality else ())),
                 f"note: {result.unused_prices}" if result.unused_prices else ""):
        if note:  # json/csv carry them in assumptions (acceptance_applies, data_quality, unused_prices)
            console.print(note, highlight=False, markup=False)
    console.print(_answer_table(result))
    iv = result.intervals
    head = BL.change_line(result.bottom_line, "specagent", iv=result.bottom_line_intervals, level=iv.level if iv else None)
    note = result.comparison.intervals and result.comparison.intervals.get("published_setting_note")
    env = result.request.scenario.environment
    for line in (head, result.verdict, environment_line(result.comparison.summary, env.preset, result.waits_recorded, short=True,
                                                        changed=None if env.recorded else env.describe()), note):
        if line:
            console.print(line, highlight=False)
    more = [*(() if details else ("every table: --details",)), *(() if report else ("a report: --report FILE",))]
    console.print(f"wrote {out}/" + (f" and {report}" if report else "") + (f"; {', '.join(more)}" if more else ""),
                  highlight=False)


def _answer_table(result: PredictResult) -> Table:
    """Every strategy per task: seconds, GPU-hours and dollars, each with its change against Strong-only."""
    line = result.bottom_line
    t = Table(title=f"Per task, batch 1 — {result.n_trajectories:,} trajectories of {result.name}",
              show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1))
    t.add_column("strategy", no_wrap=True)
    for head in ("s/task", "GPU·h/task", "$/task"):
        t.add_column(head, justify="right", no_wrap=True)
    for strat, row in line.iterrows():
        ch = BL.changes(line, str(strat)) if strat != "strongonly" and "strongonly" in line.index else {}
        t.add_row(str(strat), *(f"{fmt(float(row[c]))}{' ' + ch[c].split(' ')[0] if c in ch else ''}"
                                for c, fmt in (("wall_s_per_task", lambda v: f"{v:,.1f}"),
                                               ("gpu_h_per_task", lambda v: f"{v:.3g}"), ("usd_per_task", BL.fmt_usd))))
    pools = ", ".join(f"{p.role.capitalize()} {p.gpus}x {p.gpu}" for p in result.pools)
    if not any(p.role == "strong" for p in result.pools):
        pools += (", " if pools else "") + "Strong a hosted API"
    t.caption = f"vs Strong-only: negative = less; {pools}"
    t.min_width = min(max(len(t.title), len(t.caption)), console.width)  # a narrow table keeps its title and caption on a line
    return t


def _say_report(written, report: Path, say) -> None:
    say(f"wrote report {report} ({len(written.included)} figures)", highlight=False)
    if written.images is not None:
        say(written.images.message or f"wrote {len(written.images.written)} PNG/SVG figure files", highlight=False)
    for key, reason in written.omitted.items():
        say(f"  figure {key} left out: {reason}", highlight=False)


def _print_predict(result: PredictResult, *, phases: bool) -> None:
    """Every table (--details): the bottom line with its ranges, the ratios, phases on request and the assumptions."""
    comp, iv, sc = result.comparison, result.intervals, result.request.scenario
    console.print(_bottom_line_table(result.bottom_line, comp.summary.get("label"), f"Bottom line per task — "
                                     f"{result.n_trajectories:,} trajectories from {result.name}, batch 1", result.pools))
    if result.bottom_line_intervals is not None:
        console.print(_ranges_table(result.bottom_line_intervals, iv.level, iv.n_draws, iv.includes()))
    console.print(_rel_table(comp.summary, f"Relative to Strong-only ({BL.ratio_in_words(comp.summary)}; lower is cheaper; "
                                           f"{comp.setting.weight_mode} weight reads, {sc.pricing_engine} engine)"))
    for table in ranges_tables(comp, iv, console) if iv is not None else ():
        console.print(table)
    if phases:
        _print_phases(comp)
    else:
        console.print("Phase tables (memory traffic, time and FLOPs by phase): add --phases.", highlight=False)
    console.print(_assumption_table(comp.assumptions))


def _print_phases(comp) -> None:
    base = comp.summary.loc["strongonly"]
    n = int(base["trajectories"])
    console.print(_phase_table(comp.phase_bytes, float(base["total_bytes_read"]), "Memory traffic by phase", "memory reads", n, "bytes"))
    console.print(_phase_table(comp.phase_time, float(base["wall_time_s"]), "Wall time by phase", "wall time", n, "s"))
    console.print(_phase_table(comp.phase_flops, float(base["total_flops"]), "FLOPs by phase", "FLOPs", n, "flops"))


@request_options(SimulateRequest, exclude=("strategies",))
def simulate_cmd(
    request: SimulateRequest,
    out: Optional[Path] = O(None, "-o", "--out", help="Write the per-trajectory results as Parquet here."),
    as_json: bool = O(False, "--json", help="Print the totals and the whole scenario (K, acceptance, seed, engine, ...) as JSON."),
) -> None:
    """Run one strategy on a trace with every parameter as a flag; print per-model totals."""
    guard_outputs({"-o": out}, provenance=request.provenance, scenario=request.scenario, kinds={"-o": PARQUET})
    if out is not None:
        atomic.check_writable(out)
    sc = request.scenario
    workload = None if sc.workload.synthetic is not None else load_workload(sc, show=not as_json, provenance=request.provenance)
    result = run_job(simulate_job, request, exclude=("strategies",), show=not as_json, workload=workload, out=out)
    if out and result.frame is not None:
        atomic.write_parquet(out, result.frame)
    if as_json:
        print(json_out(result.to_dict(), indent=2))
        return
    t = Table(title=f"{result.label} — {result.n_traj:,} trajectories from {result.name} [{sc.weight_mode}, {sc.pricing_engine}]")
    t.add_column("total")
    t.add_column("value", justify="right")
    for c, v in result.totals.items():
        t.add_row(c, f"{v:,.4g}" if abs(v) >= 1e6 else f"{v:,.0f}" if v.is_integer() else f"{v:,.2f}")
    console.print(t)
    if out:
        console.print(f"wrote {out}")
