"""Command line for fleets: `plan` (capacity); `sweep` is cli/sweep.py, `study` cli/study.py.

Mounted by app.py; `app` here holds `plan` for testing. The Weak and Strong models, their
dtypes, K, acceptance and seed come from the scenario (flags generated from it); the
GPU type and GPUs per replica are what `plan` searches and `study` varies, so those
deployment fields have no flags here.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from specagent.cli.console import SafeConsole, check_format, error_line, fail
from specagent.cli.options import guard_outputs
from specagent.cli.requests import error_text, request_options
from specagent.common import atomic
from specagent.common.paths import HTML, JSON_DOC
from specagent.reports.plan_table import COLUMNS as PLAN_TABLE_COLUMNS
from specagent.reports.plan_table import curve_rows, sized_by
from specagent.simulator.jobs import plan
from specagent.simulator.jobs.base import JobError, Step
from specagent.simulator.jobs.plan import PlanInterrupted, PlanRequest, PlanResult
from specagent.simulator.jobs.plan_search import SLO, pairing

console = SafeConsole()
#: Scenario fields plan chooses itself (the strategies) or does not use; it takes each pool's GPU type (--weak-hardware,
#: --strong-hardware, --hardware) as predict does: given, they fix one pairing (one search) instead of searching --gpu.
POOL_EXCLUDES = ("strategies", "pricing_engine", "strong_api")


@request_options(PlanRequest, exclude=POOL_EXCLUDES)
def plan_command(
    request: PlanRequest,
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for plan.json (what --json prints; `specagent report` reads it: figure 7) and the "
                                                          "capacity curve (capacity_curve.html, plus PNG/SVG where Chrome/Chromium exists)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", help="table, json (what plan.json holds) or csv (the cheapest fleet per rate and "
                                                       "strategy, one row each)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors (no progress; --out is still written)."),
) -> None:
    """Cheapest fleet (replicas per pool, GPUs per replica) meeting a latency SLO at a sustained arrival rate, per strategy.

    Search: replicas get the scenario's GPUs per replica (or, with --search-gpus, the fewest
    of those that hold the longest context) and their serving engine's scheduler defaults for that GPU; the analytic bound (each pool's throughput at its best
    batch) is where the search starts; each candidate is simulated in steady state (a
    window sized from the rate and the latency, detected warm-up, stability test, the
    percentile with its 95% confidence interval; large fleets as a slice). Strong replicas
    are found first with an uncontended Weak pool, then Weak replicas with the Strong count
    fixed. Every candidate replays the same tasks and arrival sequence (the scenario's seed).
    """
    fmt = check_format(fmt, as_json)
    guard_outputs([("--out", out / "plan.json" if out is not None else None, JSON_DOC),
                   ("--out", out / "capacity_curve.html" if out is not None else None, HTML)],
                  scenario=request.scenario, inputs={**request.provenance.inputs, "--requests": request.requests})
    if out is not None:
        atomic.check_writable(out / "plan.json")
    quiet = quiet or fmt != "table"
    res = _run_plan(request, out, quiet)
    if out is not None:
        _write_plan(out, res, quiet)
    if fmt == "json":
        print(res.json_text())
    elif fmt == "csv":
        sys.stdout.write(_curve_frame(res).to_csv(index=False))
    elif not quiet:
        _print_plan(res)


#: The columns of `plan --format csv` (and of the report's plan table): the answer first, each with its unit.
CURVE_COLUMNS = ("rate", "strategy", "weak_gpu", "weak_replicas", "weak_gpus_per_replica", "strong_gpu", "strong_replicas",
                 "strong_gpus_per_replica", "gpus", "usd_per_hour", "usd_per_task", "slo_value_s", "slo_ci_low_s", "slo_ci_high_s",
                 "latency_p50_s", "latency_p95_s", "weak_bound", "strong_bound")


def _curve_frame(res: PlanResult) -> pd.DataFrame:
    best = res.best
    return best[[c for c in CURVE_COLUMNS if c in best.columns]] if len(best) else pd.DataFrame(columns=list(CURVE_COLUMNS))


class PlanLines:
    """plan's progress on stderr: the lines the job tells, and on a terminal one bar naming the running searches (the
    first the pool started, and how many more); off a terminal each finished search's line with the pace so far."""

    def __init__(self) -> None:
        self.err = SafeConsole(stderr=True)
        # one line at 80 columns: the first search running and how many more are left
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=self.err, transient=True,
                            disable=not self.err.is_terminal)
        self.searches: TaskID | None = None
        self.reading: TaskID | None = None

    def __enter__(self) -> "PlanLines":
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, step: Step) -> None:
        kind, running = getattr(step, "kind", "say"), getattr(step, "running", ())
        described = running[0] + (f" +{len(running) - 1}" if len(running) > 1 else "") if running else "done"
        if kind == "read":  # the workload file, as it is read
            if self.reading is None:
                self.reading = self.bar.add_task(step.what, total=step.total)
            self.bar.update(self.reading, completed=step.done)
        elif kind == "start":
            self.searches = self.bar.add_task(described, total=step.total, completed=step.done)
        elif kind == "search" and self.searches is not None:
            self.bar.update(self.searches, completed=step.done, description=described)
            if not self.err.is_terminal:  # a log, not a bar: the ETA in words, from the pace of the searches run so far
                self.err.print(step.what, highlight=False)
        elif kind == "say":
            self.err.print(step.what, highlight=False)
        if kind != "read" and self.reading is not None:
            self.bar.remove_task(self.reading)
            self.reading = None


def _run_plan(request: PlanRequest, out: Optional[Path], quiet: bool) -> PlanResult:
    """The plan job, with its progress on stderr unless quiet; ^C stops cleanly (exit 130), saying what was kept."""
    try:
        if quiet:
            return plan.run(request, folder=out)
        with PlanLines() as lines:
            return plan.run(request, lines, folder=out)
    except PlanInterrupted as exc:
        error_line(f"interrupted: {exc.kept} of {exc.total} searches kept in {exc.folder}; rerun the same command to resume"
                   if exc.folder is not None else
                   f"interrupted: {exc.kept} of {exc.total} searches had finished, none kept (no --out)")
        raise typer.Exit(130) from None
    except JobError as exc:
        fail(error_text(PlanRequest, exc))
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))


def _write_plan(out: Path, res: PlanResult, quiet: bool) -> None:
    """plan.json and the curve's HTML together (both or neither); the optional PNG/SVG copies after, as a warning if
    they fail."""
    from specagent.reports.figures import capacity_plan_figure
    from specagent.reports.static import export_images

    fig = capacity_plan_figure(res.best) if len(res.best) else None
    try:
        res.write(out, also=None if fig is None else {
            "capacity_curve.html": lambda tmp: fig.write_html(tmp, include_plotlyjs=True, full_html=True)})
        if fig is not None:
            img = export_images({"capacity_curve": fig}, out)
            if not quiet:
                console.print(img.message or f"figures: {', '.join(str(p) for p in img.written)}", highlight=False)
    except OSError as exc:
        fail(f"--out {out}: cannot write: {exc}")


PLAN_COLUMNS_MEANING = dict(PLAN_TABLE_COLUMNS)["sized by"]


def _money(v: float, nd: int = 2) -> str:
    return "unpriced" if not isinstance(v, float) or math.isnan(v) else f"${v:,.{nd}f}"


def _pool_text(r: dict, name: str) -> str:
    n, g = int(r[f"{name}_replicas"]), int(r[f"{name}_gpus_per_replica"])
    return f"{n:,} {name.capitalize()} x {g} {r[f'{name}_gpu']}" if n else ""


def _utilisation_text(r: dict, name: str) -> str:
    """Both meanings of 'utilisation', each defined: the share of time a replica runs anything (at batch 1 too), and
    the rate's share of the pool's throughput bound."""
    share = r.get(f"{name}_load_share")
    bound = (f", load {share:.0%} of its throughput bound (rate / (replicas x bound per replica))"
             if isinstance(share, float) and not math.isnan(share) else "")
    return f"busy {r[f'{name}_utilisation']:.0%} of the time (a replica running any sequence is busy){bound}"


def _say(text: str = "") -> None:
    console.print(text, highlight=False)


def _print_plan(res: PlanResult) -> None:
    """One block per rate and strategy, as wrapped lines: nothing a user types is ever cut, at any terminal width."""
    req, slo = res.request, res.request.objective
    _say(f"Capacity plan for {slo} (Poisson arrivals; each candidate measured in steady state, large fleets as a slice)")
    best = res.best.to_dict("records") if len(res.best) else []
    table = res.table.to_dict("records")
    for rate in req.rates:
        _say()
        _say(f"At {rate:,.4g} tasks/s")
        for strat in req.strategy_names:
            rows = [r for r in best if r["strategy"] == strat and r["rate"] == rate]
            tried = [c for c in table if c["strategy"] == strat and c["rate"] == rate]
            if rows:
                _print_fleet(rows[0], strat, slo, tried)
            else:
                _print_no_fleet(strat, slo, tried)
    if len(req.rates) > 1 and best:
        _say()
        _print_curve(res.best, slo)
    _say()
    _say("Prices:")
    for g, src in res.price_sources.items():
        _say(f"  {g}: {src}")
    for n in res.notes:
        _say(f"note: {n}")


def _print_no_fleet(strat: str, slo: SLO, tried: list[dict]) -> None:
    _say(f"  {strat}: no fleet found (see the notes below)")
    for c in tried:
        _say(f"    {pairing(c['weak_gpu'], c['strong_gpu'])}: best achievable {slo.target} p{slo.percentile:g} "
             f"{c['best_slo_value_s']:,.1f} s against {slo.seconds:g} s"
             + (" (added replicas stopped lowering it; the search stopped there)" if c.get("stopped_early") else ""))


def _print_fleet(r: dict, strat: str, slo: SLO, tried: list[dict]) -> None:
    """The cheapest fleet of one strategy at one rate: its pools, what it measured, why each pool has its size."""
    pools = " + ".join(p for p in (_pool_text(r, "weak"), _pool_text(r, "strong")) if p)
    _say(f"  {strat} ({r['label']}; {pairing(r['weak_gpu'], r['strong_gpu'])})")
    _say(f"    fleet: {pools} = {int(r['gpus']):,} GPUs, {_money(r['usd_per_hour'])}/hour, {_money(r['usd_per_task'], 4)}/task")
    _say(f"    {slo.target} p{slo.percentile:g}: {r['slo_value_s']:,.1f} s (95% CI {r['slo_ci_low_s']:,.1f}-"
         f"{r['slo_ci_high_s']:,.1f} s); task p50 {r['latency_p50_s']:,.1f} s; sized by {sized_by(r)}")
    if r.get("slo_met_at") == "point estimate only":
        _say(f"    SLO met at the point estimate only: the 95% CI reaches {r['slo_ci_high_s']:,.1f} s, over the "
             f"{slo.seconds:g} s bound (--size-on ci-high sizes on the CI's upper end)")
    for name in ("strong", "weak"):
        if r[f"{name}_replicas"]:
            _print_pool(r, name)
    if isinstance(r.get("size_note"), str) and r["size_note"]:
        _say(f"    why so large: {r['size_note']}")
    _say(f"    simulated: {r['slice']}, {int(r['tasks_simulated']):,} tasks over {r['horizon_s']:,.0f} s (warm-up "
         f"{r['warmup_s']:,.0f} s detected, {int(r['tasks_measured']):,} tasks measured, {int(r['tasks_censored']):,} "
         f"still running at the end); {int(r['evaluations'])} candidates tried")
    sav = r.get("usd_saving_vs_strongonly")
    if strat != "strongonly" and isinstance(sav, float) and not math.isnan(sav):
        _say(f"    saving vs strongonly at this rate: $ {100 * sav:.0f}%, GPUs {100 * r['gpu_saving_vs_strongonly']:.0f}%")
    for c in (c for c in tried if (c["weak_gpu"], c["strong_gpu"]) != (r["weak_gpu"], r["strong_gpu"])):
        what = (f"{int(c['gpus']):,} GPUs, {_money(c['usd_per_hour'])}/hour" if c["feasible"] else
                f"no fleet found (best achievable {slo.target} p{slo.percentile:g} {c['best_slo_value_s']:,.1f} s)")
        _say(f"    also tried {pairing(c['weak_gpu'], c['strong_gpu'])}: {what}")


def _print_pool(r: dict, name: str) -> None:
    nb = int(r[f"{name}_bound_replicas"])
    _say(f"    {name.capitalize()}: analytic bound {nb:,} replica{'s' if nb != 1 else ''} ({r[f'{name}_bound']}); runs <= "
         f"{int(r[f'{name}_max_num_seqs']):,} sequences and {int(r[f'{name}_max_batched_tokens']):,} tokens per iteration; "
         f"mean decode batch {r[f'{name}_mean_decode_batch']:,.1f}; {_utilisation_text(r, name)}")
    if isinstance(r.get(f"{name}_why"), str) and r[f"{name}_why"]:
        _say(f"    why this size: {r[f'{name}_why']}")


def _print_curve(best: pd.DataFrame, slo: SLO) -> None:
    """The capacity curve: the cheapest fleet per strategy and rate, one row each."""
    rows = curve_rows(best, f"p{slo.percentile:g}")
    narrow = console.width < 110
    if narrow:  # at 80 columns the reason goes (each strategy's block above says it): nothing else is cut
        rows = rows.drop(columns="sized by")
    t = Table(title="Capacity curve: cheapest fleet per strategy", show_edge=False, box=None, padding=(0, 1), pad_edge=False,
              show_header=True, header_style="bold")
    for c in rows.columns:  # identifiers and figures never cut (each at its widest cell); the fleet and the reason wrap
        words = c in ("fleet", "sized by")
        t.add_column(c, justify="left" if c in ("strategy", "GPU", "fleet", "sized by") else "right", no_wrap=not words,
                     min_width=None if words else max([len(v) for v in rows[c]] + [len(w) for w in c.split()]),
                     ratio=1 if words else None)
    for r in rows.itertuples(index=False):
        t.add_row(*r)
    t.caption = "fleet: W×g / S×g = Weak / Strong replicas × GPUs per replica" + ("" if narrow else "; sized by: " + PLAN_COLUMNS_MEANING)
    console.print(t)


app = typer.Typer(help="Fleet planning.", no_args_is_help=True)
app.command("plan")(plan_command)


@app.callback()
def _group() -> None:
    """Fleet planning (a group of one command, so `plan` stays its subcommand as it is under the root)."""
