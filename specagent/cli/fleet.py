"""Command line for fleets: `plan` (capacity), `sweep` (grids of fleet runs), `study balance`.

Mounted by app.py; `app` here holds all three for testing. The Weak and Strong models, their
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
from rich.table import Table

from specagent.cli import plan_view
from specagent.cli.console import SafeConsole, check_format, error_line, fail, json_out, legend
from specagent.cli.options import deployment_flag, flags_given, guard_outputs, scenario_options
from specagent.cli.panels import PanelCommand
from specagent.cli.requests import error_text, request_options
from specagent.cli.simulate import load_workload
from specagent.common import atomic
from specagent.common.paths import HTML, JSON_DOC
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.capacity.fleet_build import parse_gpu_counts
from specagent.simulator.jobs import plan
from specagent.simulator.jobs.base import JobError
from specagent.simulator.jobs.plan import DEFAULT_GPUS, PlanInterrupted, PlanRequest, PlanResult
from specagent.simulator.parallel import MAX_WORKERS, ray_endpoint
from specagent.simulator.scenario import Scenario
from specagent.simulator.study import balance_study
from specagent.simulator.sweep import BACKENDS, SweepCellError, SweepConfig, SweepConfigError, load_sweep, run_sweep

console = SafeConsole()
#: Scenario fields the fleet commands choose themselves (the GPU type: --gpu; the strategies) or do not use. GPUs per
#: replica are the scenario's (--weak-gpus, --strong-gpus) unless --search-gpus asks for a search.
FLEET_EXCLUDES = ("strategies", "pricing_engine", "strong_api", "weak.hardware", "strong.hardware")
#: plan and study balance also take each pool's GPU type (--weak-hardware, --strong-hardware, --hardware) as predict
#: does: given, they fix one pairing (one search) instead of searching --gpu.
POOL_EXCLUDES = ("strategies", "pricing_engine", "strong_api")
POOL_HARDWARE_HELP = ("{role}: GPU profile (id, alias or .toml path) for every cell, replacing [grid].hardware with one "
                      "pairing (the other pool: {other}, or {default}).")
SEARCH_GPUS_HELP = ("GPUs per replica to search, e.g. 1,2,4,8: each pool gets the fewest that hold the longest context "
                    "(default: the scenario's --weak-gpus / --strong-gpus, as given).")

BACKEND_HELP = "local (a process pool) or ray; default: ray when --ray-address is given, else local (--workers processes)."
RAY_ADDRESS_HELP = ("A Ray cluster to run the searches on: the HOST:PORT `ray start --head` prints, ray://HOST:PORT (Ray "
                    "Client) or auto (docs/capacity-planning.md). Implies --backend ray.")


def _search_gpus(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return parse_gpu_counts(text)
    except ValueError as exc:
        fail(f"--search-gpus: {exc}")


def _fmt(v, nd: int = 2) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:,.{nd}f}"
    return str(v)


@request_options(PlanRequest, exclude=POOL_EXCLUDES)
def plan_command(
    request: PlanRequest,
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for plan.json (what --json prints; `specagent report` reads it: figure 7) and the "
                                                          "capacity curve (capacity_curve.html, plus PNG/SVG where Chrome/Chromium exists)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", help="table, json (what plan.json holds) or csv (the cheapest fleet per rate and "
                                                       "strategy, one row each)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors (no progress; --out is still written)."),
    details: bool = typer.Option(False, "--details", help="Before the answer, every search's block: each pool's analytic "
                                 "bound, scheduler limits, load and why it has its size, the simulation, the pairings also "
                                 "tried, the price sources."),
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
    images = _write_plan(out, res) if out is not None else ""
    if fmt == "json":
        print(res.json_text())
    elif fmt == "csv":
        sys.stdout.write(_curve_frame(res).to_csv(index=False))
    elif not quiet:
        plan_view.show(res, details=details, out=out, images=images)


#: The columns of `plan --format csv` (and of the report's plan table): the answer first, each with its unit.
CURVE_COLUMNS = ("rate", "strategy", "weak_gpu", "weak_replicas", "weak_gpus_per_replica", "strong_gpu", "strong_replicas",
                 "strong_gpus_per_replica", "gpus", "usd_per_hour", "usd_per_task", "slo_value_s", "slo_ci_low_s", "slo_ci_high_s",
                 "latency_p50_s", "latency_p95_s", "weak_bound", "strong_bound", "weak_sized_by", "strong_sized_by",
                 "uncontended_slo_value_s", "gpus_change_vs_strongonly", "usd_per_hour_change_vs_strongonly")


def _curve_frame(res: PlanResult) -> pd.DataFrame:
    best = res.best
    return best[[c for c in CURVE_COLUMNS if c in best.columns]] if len(best) else pd.DataFrame(columns=list(CURVE_COLUMNS))


def _run_plan(request: PlanRequest, out: Optional[Path], quiet: bool) -> PlanResult:
    """The plan job, with its progress on stderr unless quiet; ^C stops cleanly (exit 130), saying what was kept."""
    try:
        if quiet:
            return plan.run(request, folder=out)
        with plan_view.PlanLines() as lines:
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


def _gpu_list(gpu: str) -> tuple[str, ...]:
    """--gpu: comma-separated GPU types, each a hardware profile that loads."""
    gpus = tuple(g.strip() for g in gpu.split(",") if g.strip())
    if not gpus:
        fail(f"--gpu: expected a comma-separated list of GPU types, got {gpu!r}")
    for g in gpus:
        try:
            load_hardware(g)
        except HardwareProfileError as exc:
            fail(f"--gpu: {exc}")
    return gpus


def _check_backend(backend: str | None, address: str | None) -> str:
    """The backend to use: --backend as given, or ray when a cluster address is given; the address's form checked."""
    chosen = backend if backend is not None else ("ray" if address is not None else "local")
    if chosen not in BACKENDS:
        fail(f"--backend: expected one of {', '.join(BACKENDS)}, got '{chosen}'")
    if address is not None and chosen != "ray":
        fail(f"--ray-address {address}: a Ray cluster address, for --backend ray (the backend is '{chosen}')")
    if address is not None:
        try:
            ray_endpoint(address)
        except ValueError as exc:
            fail(f"--ray-address: {exc}")
    return chosen


def _write_plan(out: Path, res: PlanResult) -> str:
    """plan.json and the curve's HTML together (both or neither); the optional PNG/SVG copies after (what became of them,
    in words: a failure is a note, not an error)."""
    from specagent.reports.plan_figure import plan_curve
    from specagent.reports.static import export_images

    fig = plan_curve(res.best, plan_view.setting_lines(res)) if len(res.best) else None
    try:
        res.write(out, also=None if fig is None else {
            "capacity_curve.html": lambda tmp: fig.write_html(tmp, include_plotlyjs=True, full_html=True)})
        if fig is None:
            return ""
        img = export_images({"capacity_curve": fig}, out)
    except OSError as exc:
        fail(f"--out {out}: cannot write: {exc}")
    names = "".join(f", {Path(p).suffix}" for p in img.written)  # the copies' suffixes: capacity_curve.png, .svg
    return names + (f"; {', '.join(img.failed)} not rendered by kaleido" if img.failed else "") if img.written else f"; {img.message}"


def sweep_command(
    config: Path = typer.Argument(..., help="Sweep config TOML: [sweep] fixed settings (its scenario: [sweep].scenario = FILE or "
                                            "a [scenario] table), [grid] lists, [fleet.NAME] replica counts."),
    out: Optional[Path] = typer.Option(None, help="Result directory (one Parquet file per cell under cells/); default CONFIG's name + '_results'."),
    backend: Optional[str] = typer.Option(None, help=BACKEND_HELP),
    address: Optional[str] = typer.Option(None, "--ray-address", "--address", help=RAY_ADDRESS_HELP),
    workers: int = typer.Option(1, help="Parallel cells (processes for local, CPUs for a local Ray instance)."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML file (or a shipped one: default, edge) for "
                                            "every cell, when the config names none; [sweep]'s seed/model/dtype keys override it."),
    force: bool = typer.Option(False, "--force", help="Run into a folder holding another config's cells: delete those cells "
                                                      "(the ones this config shares are kept)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's counts as JSON (no progress bar)."),
    weak_hardware: Optional[str] = typer.Option(None, deployment_flag("weak", "hardware"), help=POOL_HARDWARE_HELP.format(
        role="Weak", other="--strong-hardware", default=Scenario().weak.hardware)),
    strong_hardware: Optional[str] = typer.Option(None, deployment_flag("strong", "hardware"), help=POOL_HARDWARE_HELP.format(
        role="Strong", other="--weak-hardware", default=Scenario().strong.hardware)),
) -> None:
    """Run a grid of fleet simulations (strategy x K x acceptance x rate x fleet x hardware), resumably.

    Each finished cell is written atomically as its own Parquet file, so rerunning the same
    command after an interruption (^C keeps every finished cell) skips the cells already
    done; extending the grid reuses them too. A folder holding cells of a different config is
    refused (--force replaces them), and a folder another sweep is running in is locked.
    """
    if not 1 <= workers <= MAX_WORKERS:
        fail(f"--workers: expected a count in [1, {MAX_WORKERS}], got {workers}")
    backend = _check_backend(backend, address)
    out_dir = out or config.with_name(config.stem + "_results")
    guard_outputs([("--out", out_dir / "config.json", JSON_DOC)], inputs={"CONFIG": config, "--scenario": scenario})
    hardware = None
    if weak_hardware is not None or strong_hardware is not None:  # one pairing for every cell, as [grid].hardware = ["W+S"]
        sc = Scenario()
        w, s_ = weak_hardware or sc.weak.hardware, strong_hardware or sc.strong.hardware
        for flag, g in ((deployment_flag("weak", "hardware"), w), (deployment_flag("strong", "hardware"), s_)):
            try:
                load_hardware(g)
            except HardwareProfileError as exc:
                fail(f"{flag}: {exc}")
        hardware = w if w == s_ else f"{w}+{s_}"
    try:
        cfg = SweepConfig.from_toml(config, scenario, hardware)
        rep = run_sweep(cfg, out_dir, backend=backend, workers=workers, address=address, progress=not as_json, force=force)
    except SweepCellError as exc:
        fail(f"{config}: {exc}")
    except (SweepConfigError, ValueError, RuntimeError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        kept = len(list((out_dir / "cells").glob("*.parquet")))
        error_line(f"interrupted: {kept} finished cell(s) kept in {out_dir / 'cells'}; rerun the same command to resume")
        raise typer.Exit(130) from None
    info = {"cells": rep.total, "skipped_existing": rep.skipped, "ran": rep.ran, "out": str(rep.out_dir)}
    if as_json:
        print(json_out(info))
        return
    console.print(f"{rep.ran} cell(s) run, {rep.skipped} already done, {rep.total} in the grid -> {rep.out_dir}/cells/*.parquet")
    df = load_sweep(rep.out_dir)
    if len(df):
        console.print(sweep_table(df).to_string(index=False))


def sweep_table(df: pd.DataFrame) -> pd.DataFrame:
    """The summary rows: a steady-state cell's latencies are its measurement window's, a burst cell's its tasks'.

    Why: a steady cell's burst percentiles take every simulated task, the ones still running at the
    horizon included (NaN), so they are not its answer; the window's are (simulator/capacity/steady_state.py)."""
    out = df[["strategy", "k", "acceptance", "rate", "fleet", "hardware"]].copy()
    for q in ("p50", "p95"):
        burst = df[f"latency_{q}_s"] if f"latency_{q}_s" in df else pd.Series(math.nan, index=df.index)
        window = df[f"window_latency_{q}_s"] if f"window_latency_{q}_s" in df else pd.Series(math.nan, index=df.index)
        out[f"latency_{q}_s"] = window.where(window.notna(), burst)
    out["usd_per_task"] = df["usd_per_task"]
    out["strong_mean_decode_batch"] = df["strong_mean_decode_batch"]
    if "steady_stable" in df:
        out["stable"] = df["steady_stable"].map({True: "yes", False: "NO"}).fillna("-")
    return out


#: Guards against a typo, not limits of the method: the study simulates every task (10^6 take minutes), and each rate
#: runs at least rate x 60 s of arrivals, so a rate is bounded by the same count.
MAX_STUDY_TASKS = 1_000_000
MAX_STUDY_RATE = MAX_STUDY_TASKS / 60


def _rates(text: str) -> list[float]:
    """--rates: comma-separated arrival rates, each a finite number of tasks/s in (0, MAX_STUDY_RATE]."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        try:
            r = float(part)
        except ValueError:
            r = math.nan
        if not 0 < r <= MAX_STUDY_RATE:  # NaN fails too
            fail(f"--rates: expected comma-separated tasks/s in (0, {MAX_STUDY_RATE:,.0f}], got {part!r} in {text!r}")
        out.append(r)
    return out


study_app = typer.Typer(help="Studies built on the fleet simulator.", no_args_is_help=True)


@study_app.command("balance", cls=PanelCommand)
@scenario_options(exclude=POOL_EXCLUDES)
def study_balance(
    scenario: Scenario,
    gpu: Optional[str] = typer.Option(None, help="Comma-separated GPU types for the Strong replica, one study each [default: "
                                                 f"{','.join(DEFAULT_GPUS)}]; --strong-hardware instead studies that one (the "
                                                 "Weak pool is on --weak-hardware)."),
    rates: str = typer.Option("0.05,0.2,0.8,3.2,12.8", help="Comma-separated arrival rates (tasks/s): the load knob."),
    tasks: int = typer.Option(150, help="Minimum tasks per rate (each rate runs at least rate x 60 s of arrivals)."),
    search_gpus: Optional[str] = typer.Option(None, "--search-gpus", help=SEARCH_GPUS_HELP),
    out: Optional[Path] = typer.Option(None, help="Write the table as Parquet (.parquet) or CSV (anything else), atomically."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """SpecAgent's Strong time and memory saving vs Strong-only against the Strong replica's mean decode batch.

    The balance point is the decode batch at which a replica turns compute-bound; below it,
    moving Strong tokens from decode into one verification prefill saves time and traffic.
    Load rises with the rate; where the saving columns reach zero, SpecAgent stops paying.
    """
    if "strong.hardware" in flags_given(scenario):
        if gpu is not None:
            fail("--gpu: lists Strong GPU types to study, while --strong-hardware fixes one: give one or the other")
        try:
            load_hardware(scenario.strong.hardware)
        except HardwareProfileError as exc:
            fail(f"--strong-hardware: {exc}")
        gpus = [scenario.strong.hardware]
    else:
        gpus = list(_gpu_list(gpu if gpu is not None else ",".join(DEFAULT_GPUS)))
    rate_list = _rates(rates)
    counts = _search_gpus(search_gpus)
    if not 1 <= tasks <= MAX_STUDY_TASKS:
        fail(f"--tasks: expected tasks per rate in [1, {MAX_STUDY_TASKS:,}], got {tasks}")
    guard_outputs({"--out": out}, scenario=scenario)
    if out is not None:
        atomic.check_writable(out)
    trajs = load_workload(scenario)[0]
    try:
        df = balance_study(trajs, hardware=gpus, rates=rate_list, n_tasks=tasks, scenario=scenario, search_gpus=counts)
    except ValueError as exc:
        fail(str(exc))
    if out is not None:
        if out.suffix == ".parquet":
            atomic.write_parquet(out, df)
        else:
            atomic.atomic_write(out, lambda tmp: df.to_csv(tmp, index=False))
    if as_json:
        print(df.to_json(orient="records"))
        return
    t = Table(title=f"Balance-point study: SpecAgent vs Strong-only on one Strong replica (Weak: {scenario.weak.model} on "
                    f"{scenario.weak.hardware}, uncontended)", show_edge=False, pad_edge=False)
    rows = df.to_dict("records")
    cells = [[_fmt(r[c], 2) if isinstance(r[c], float) else str(r[c]) for c, _, _ in BALANCE_COLUMNS] for r in rows]
    for i, (_, head, _) in enumerate(BALANCE_COLUMNS):  # no identifier or figure is ever cut: each column at its widest cell
        t.add_column(head, justify="left" if i == 0 else "right", no_wrap=True,
                     min_width=max([len(c[i]) for c in cells] + [len(w) for w in head.split("\n")]))
    for c in cells:
        t.add_row(*c)
    t.caption = legend((head, meaning) for _, head, meaning in BALANCE_COLUMNS[1:])
    console.print(t)


#: The study's table at 80 columns: short headers, spelled out in the caption (the Parquet/CSV/JSON keep the long names).
BALANCE_COLUMNS = (
    ("hardware", "Strong\nGPU", ""),
    ("rate", "rate/s", "arrival rate, tasks per second"),
    ("strongonly_decode_batch", "SO\nbatch", "Strong-only's mean Strong decode batch"),
    ("specagent_decode_batch", "SA\nbatch", "SpecAgent's mean Strong decode batch"),
    ("balance_batch", "balance\nbatch", "decode batch where the Strong replica turns compute-bound"),
    ("strong_time_saving", "time\nsaving", "SpecAgent's Strong busy time saved vs Strong-only (share)"),
    ("strong_bytes_saving", "bytes\nsaving", "Strong HBM bytes saved (share)"),
    ("strongonly_strong_utilisation", "SO\nutil.", "Strong-only's Strong replica utilisation"),
)


from specagent.cli import sensitivity as _sensitivity  # noqa: E402

study_app.command("sensitivity", cls=PanelCommand)(_sensitivity.sensitivity)

app = typer.Typer(help="Fleet planning, sweeps and studies.", no_args_is_help=True)
app.command("plan")(plan_command)
app.command("sweep")(sweep_command)
app.add_typer(study_app, name="study")
