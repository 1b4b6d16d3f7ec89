"""Command line for fleets: `plan` (capacity); `sweep` is cli/sweep.py, `study` cli/study.py.

Mounted by app.py; `app` here holds `plan` for testing. The Weak and Strong models, their
dtypes, K, acceptance and seed come from the scenario (flags generated from it); the
GPU type and GPUs per replica are what `plan` searches and `study` varies, so those
deployment fields have no flags here.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import pandas as pd
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from specagent import __version__
from specagent.cli.console import SafeConsole, check_format, error_line, fail, json_out
from specagent.cli.options import deployment_flag, flags_given, guard_outputs, scenario_options
from specagent.cli.simulate import load_workload
from specagent.common import atomic
from specagent.common.paths import HTML, JSON_DOC
from specagent.reports.plan_table import COLUMNS as PLAN_TABLE_COLUMNS
from specagent.reports.plan_table import curve_rows, sized_by
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.capacity.fleet_build import gpus_sizing, parse_gpu_counts
from specagent.simulator.parallel import MAX_WORKERS, default_workers, ray_endpoint
from specagent.simulator import FLEET_BACKEND, plan_store
from specagent.simulator.plan_estimate import duration, estimate_plan
from specagent.cli.plan_progress import HeartbeatPrinter
from specagent.simulator.planner import SIZE_ON, SLO, PlanRequest, PlanResult, pairing, plan_capacity, probe_speed, search_keys
from specagent.simulator.provenance import record_fleet_inputs
from specagent.simulator.rates_prices import parse_prices, parse_rates, unused_prices
from specagent.simulator.fleet.config import resolve_price
from specagent.simulator.scenario import Scenario
from specagent.simulator.capacity.steady_state import SLICE_TASKS
from specagent.simulator.strategies.catalog import STRATEGY_NAMES
from specagent.simulator.parallel import BACKENDS
from specagent.traces.requests import load_requests

console = SafeConsole()
#: Scenario fields the fleet commands choose themselves (the GPU type: --gpu; the strategies) or do not use. GPUs per
#: replica are the scenario's (--weak-gpus, --strong-gpus) unless --search-gpus asks for a search.
FLEET_EXCLUDES = ("strategies", "pricing_engine", "strong_api", "weak.hardware", "strong.hardware")
#: plan and study balance also take each pool's GPU type (--weak-hardware, --strong-hardware, --hardware) as predict
#: does: given, they fix one pairing (one search) instead of searching --gpu.
POOL_EXCLUDES = ("strategies", "pricing_engine", "strong_api")
PER_POOL = ("weak.hardware", "strong.hardware")
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


def _pairing_flags(scenario: Scenario, gpu: str | None, mix_gpus: bool) -> tuple[tuple[str, str], ...]:
    """The one (Weak GPU, Strong GPU) pairing the per-pool flags give (the other pool keeps the scenario's), or () when
    none was given and --gpu is searched; both kinds at once are refused, naming the flags."""
    given = [p for p in PER_POOL if p in flags_given(scenario)]
    if not given:
        return ()
    typed = " and ".join(deployment_flag(p.split(".")[0], "hardware") for p in given)
    for other, used in (("--gpu", gpu is not None), ("--mix-gpus", mix_gpus)):
        if used:
            fail(f"{other}: searches GPU types, while {typed} fix{'es' if len(given) == 1 else ''} one pairing: give one or the other")
    pair = (scenario.weak.hardware, scenario.strong.hardware)
    for role, g in zip(("weak", "strong"), pair):
        try:
            load_hardware(g)
        except HardwareProfileError as exc:
            fail(f"{deployment_flag(role, 'hardware')}: {exc}")
    return (pair,)


@scenario_options(exclude=POOL_EXCLUDES)
def plan_command(
    scenario: Scenario,
    rate: str = typer.Option(..., help="Arrival rate of tasks (Poisson): one (2/s, 120/min), a list (2/s,50/s,1000/s) or a range "
                                       "LO..HI (0.5/s..1000/s, --points rates log-spaced): several rates draw a capacity curve."),
    points: int = typer.Option(6, help="Rates in a LO..HI range."),
    slo: str = typer.Option("p95-task=300s", help="Latency objective: pNN-task=SECONDS (end-to-end task) or pNN-turn=SECONDS (one agent "
                                              "turn between user messages). The shipped τ²-airline tasks take about 130 s at p95 "
                                              "with no contention at all; an SLO below what tasks take alone is reported as infeasible."),
    strategy: str = typer.Option("strongonly,specagent", help="Comma-separated strategies to size a fleet for."),
    gpu: Optional[str] = typer.Option(None, help="Comma-separated GPU types to search, each for both pools (hardware profile ids or "
                                                  "aliases) [default: h20,h200]; --weak-hardware/--strong-hardware instead fix one "
                                                  "pairing: one search."),
    price: List[str] = typer.Option([], help="$/GPU-hour per GPU type, one or a comma list: --price h20=1.85,h200=3.5 (overrides the profile's sourced price; "
                                                 "needed where a profile has none). `specagent hardware list` shows the defaults."),
    tasks: int = typer.Option(1000, help="At least this many tasks measured per candidate fleet (the window is longer when the rate and the "
                                         "percentile need it)."),
    requests: Optional[Path] = typer.Option(None, "--requests", help="Plan a plain LLM serving fleet instead: a request trace CSV "
                                            "(arrival time, prompt tokens, output tokens; Vidur and Azure trace headers accepted) "
                                            "or a vllm bench serve dataset (.json / .jsonl: ShareGPT, custom, a saved result) "
                                            "served by the Strong deployment, requests resampled in order at --rate."),
    mix_gpus: bool = typer.Option(False, "--mix-gpus", help="Also try Weak and Strong pools on different GPU types."),
    search_gpus: Optional[str] = typer.Option(None, "--search-gpus", help=SEARCH_GPUS_HELP),
    max_replicas: int = typer.Option(100_000, help="Largest replica count per pool the search tries."),
    slice_tasks: int = typer.Option(SLICE_TASKS, help="A fleet whose window holds more arrivals is simulated as a slice of about this "
                                                      "many (0: always the whole fleet)."),
    slice_replicas: int = typer.Option(1, help="A slice keeps at least this many replicas of its smallest pool."),
    workers: int = typer.Option(0, help="Searches run in parallel (0: one per CPU)."),
    backend: Optional[str] = typer.Option(None, help=BACKEND_HELP),
    address: Optional[str] = typer.Option(None, "--ray-address", "--address", help=RAY_ADDRESS_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for plan.json (what --json prints; `specagent report` reads it: figure 7) and the "
                                                          "capacity curve (capacity_curve.html, plus PNG/SVG where Chrome/Chromium exists)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", help="table, json (what plan.json holds) or csv (the cheapest fleet per rate and "
                                                       "strategy, one row each)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors (no progress; --out is still written)."),
    size_on: str = typer.Option("point", "--size-on", help="What must be within the SLO: point (the percentile's estimate) or "
                                                           "ci-high (the upper end of its 95% CI: a fleet that meets the SLO "
                                                           "whatever the sampling error)."),
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
    as_json = fmt == "json"
    pairs = _pairing_flags(scenario, gpu, mix_gpus)
    gpu_text = ",".join(dict.fromkeys(g for p in pairs for g in p)) if pairs else (gpu if gpu is not None else "h20,h200")
    rates, slo_, strategies, gpus, prices = _plan_flags(rate, points, slo, strategy, gpu_text, price, "--weak-hardware/--strong-hardware" if pairs else "--gpu")
    if size_on not in SIZE_ON:
        fail(f"--size-on: expected one of {', '.join(SIZE_ON)}, got {size_on!r}")
    counts = _search_gpus(search_gpus)
    for name, value, lo, hi in (("--tasks", tasks, 1, MAX_PLAN_TASKS), ("--max-replicas", max_replicas, 1, MAX_PLAN_REPLICAS),
                                ("--slice-tasks", slice_tasks, 0, MAX_PLAN_TASKS), ("--slice-replicas", slice_replicas, 1, MAX_PLAN_REPLICAS),
                                ("--workers", workers, 0, MAX_WORKERS)):
        if not lo <= value <= hi:
            fail(f"{name}: expected a whole number in [{lo:,}, {hi:,}], got {value}")
    backend = _check_backend(backend, address)
    guard_outputs([("--out", out / "plan.json" if out is not None else None, JSON_DOC),
                   ("--out", out / "capacity_curve.html" if out is not None else None, HTML)],
                  scenario=scenario, inputs={"--requests": requests})
    if out is not None:
        atomic.check_writable(out / "plan.json")
    quiet = quiet or fmt != "table"
    try:
        trace = load_requests(requests) if requests is not None else None
        if trace is not None and not quiet:  # a dataset's: which lengths are estimated from text, which records dropped
            for note in trace.notes:
                SafeConsole(stderr=True).print(f"note: {note}", highlight=False)
        trajs, wl_path = (None, requests) if trace is not None else load_workload(scenario, show=not quiet)[:2]
        req = PlanRequest(rates=rates, slo=slo_, strategies=strategies, gpus=gpus, prices=prices, n_tasks=tasks,
                          scenario=scenario, mix_gpus=mix_gpus, max_replicas=max_replicas, slice_tasks=slice_tasks or None,
                          slice_replicas=slice_replicas, workers=workers or default_workers(), backend=backend, address=address,
                          requests=trace, search_gpus=counts, pairs=pairs, size_on=size_on)
        res = _run_plan(trajs, req, out, wl_path, quiet)
        # a price no pool of this plan runs on is said, as predict and replay say it, never silently left out
        res.notes += [f"--price {item}: no pool of this plan runs on that GPU (they run on {', '.join(gpus)}); the price is "
                      "unused" for item in unused_prices(prices, [load_hardware(g) for g in gpus])]
    except typer.Exit:
        raise  # ^C, already reported (click's Exit is a RuntimeError)
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))
    text = json_out(_plan_doc(res, scenario, requests, trace.notes if trace is not None else ()), indent=1, default=_json_default)
    if out is not None:
        _write_plan(out, text, res, quiet)
    if as_json:
        print(text)
        return
    if fmt == "csv":
        sys.stdout.write(_curve_frame(res).to_csv(index=False))
        return
    if not quiet:
        _print_plan(res)


#: The columns of `plan --format csv` (and of the report's plan table): the answer first, each with its unit.
CURVE_COLUMNS = ("rate", "strategy", "weak_gpu", "weak_replicas", "weak_gpus_per_replica", "strong_gpu", "strong_replicas",
                 "strong_gpus_per_replica", "gpus", "usd_per_hour", "usd_per_task", "slo_value_s", "slo_ci_low_s", "slo_ci_high_s",
                 "latency_p50_s", "latency_p95_s", "weak_bound", "strong_bound")


def _curve_frame(res: PlanResult) -> pd.DataFrame:
    best = res.best
    return best[[c for c in CURVE_COLUMNS if c in best.columns]] if len(best) else pd.DataFrame(columns=list(CURVE_COLUMNS))


def _workload_digest(wl_path, scenario: Scenario) -> str:
    """What the plan's searches read, as a hash: the trace file's bytes (a synthetic workload is its scenario fields)."""
    if scenario.workload.synthetic is not None and scenario.workload.trace is None:
        return "synthetic"  # the scenario's synthetic fields and seed, in the fingerprint already
    p = Path(str(wl_path)) if wl_path is not None else None
    return plan_store.file_digest(p) if p is not None and p.is_file() else f"path:{wl_path}"


def _run_plan(trajs, req: PlanRequest, out: Optional[Path], wl_path, quiet: bool) -> PlanResult:
    """The searches with a progress bar naming the running ones; with --out each finished search is kept as it ends
    and a rerun reuses it; ^C stops cleanly (exit 130), saying what was kept."""
    keys = search_keys(req)
    store = None
    finished: dict = {}
    if out is not None:
        store = plan_store.PlanStore(out, plan_store.fingerprint(req, _workload_digest(wl_path, req.scenario), __version__))
        finished = store.load(keys)
    err = SafeConsole(stderr=True)
    say = (lambda text: None) if quiet else (lambda text: err.print(text, highlight=False))  # noqa: E731
    todo = [k for k in keys if k not in finished]
    say(f"{len(keys)} search{'es' if len(keys) != 1 else ''} ({len(req.strategy_names)} strateg{'ies' if len(req.strategy_names) != 1 else 'y'}"
        f" x {len(keys) // max(1, len(req.strategy_names) * len(req.rates))} GPU pairing(s) x {len(req.rates)} rate(s)) on "
        f"{min(req.workers, max(1, len(todo)))} worker(s)"
        + (f"; {len(finished)} already done in {store.folder}, {len(todo)} to run" if finished else "")
        + ("" if store is None else f"; each is kept in {store.folder} as it finishes (^C keeps them; rerun to resume)")
        + ("" if store is not None or len(keys) < 4 else "; no --out: an interrupted run keeps nothing"))
    estimate = None
    if todo:  # before a long curve starts: how long it will take, and why that long (simulator/plan_estimate.py), from a
        # short probe of this machine's speed now (a figure measured on a quiet machine misleads on a loaded one)
        probe = None if quiet else probe_speed(trajs, req)
        estimate = estimate_plan(req, todo, trajs, req.workers, FLEET_BACKEND.compiled, probe)
        say(estimate.text())
    running = list(todo)
    saved = [0]

    def label(k) -> str:
        strat, wg, sg, rate = k
        return f"{strat} {pairing(Path(wg).stem, Path(sg).stem)} at {rate:,.4g}/s"

    def on_result(k, value) -> None:
        # idempotent: a ^C landing inside this call makes the pool report the same finished search again
        if k not in running:
            return
        if store is not None:
            store.save(k, value)
            saved[0] += 1
        running.remove(k)

    # one line at 80 columns: the first search running (the pool starts them in order) and how many more are left
    bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True, disable=quiet or not err.is_terminal)
    t0 = time.monotonic()

    def describe() -> str:
        return label(running[0]) + (f" +{len(running) - 1}" if len(running) > 1 else "")

    with bar:
        task = bar.add_task(describe() if running else "done", total=len(keys), completed=len(finished))

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, description=describe() if running else "done")
            if not err.is_terminal:  # a log, not a bar: the ETA in words, from the pace of the searches run so far
                elapsed, new = time.monotonic() - t0, done - len(finished)
                left = f"; about {duration(elapsed / new * (total - done))} left at the pace so far" if 0 < new and done < total else ""
                say(f"search {done}/{total} done after {elapsed:,.0f} s{left}")

        try:
            if quiet:
                res = plan_capacity(trajs, req, progress=tick, finished=finished, on_result=on_result)
            else:  # a live line inside each search, at least every HEARTBEAT_S seconds (specagent/cli/plan_progress.py)
                with HeartbeatPrinter(say, f"{req.slo.target} p{req.slo.percentile:g}", estimate) as beats:
                    res = plan_capacity(trajs, req, progress=tick, finished=finished, on_result=on_result,
                                        heartbeat=beats.sink if req.backend == "local" else None, isolate=True)
        except KeyboardInterrupt:
            bar.stop()
            kept = len(finished) + saved[0]
            where = (f"{kept} of {len(keys)} searches kept in {store.folder}; rerun the same command to resume" if store is not None
                     else f"{saved[0] + len(finished)} of {len(keys)} searches had finished, none kept (no --out)")
            error_line(f"interrupted: {where}")
            raise typer.Exit(130) from None
    if finished:
        say(f"{len(finished)} search(es) reused from {store.folder}, {len(todo)} run")  # type: ignore[union-attr]
    return res


#: Guards against typos, not limits of the method (a plan at 1000 tasks/s measures ~10^5 tasks per candidate).
MAX_PLAN_TASKS = 10_000_000
MAX_PLAN_REPLICAS = 1_000_000
MAX_PLAN_RATE = 1e6  # tasks per second
MAX_PLAN_POINTS = 1000


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


def _plan_flags(rate: str, points: int, slo: str, strategy: str, gpu: str, price: list[str], gpu_flag: str = "--gpu"):
    """plan's list and text flags, each checked with its own name in the error."""
    if not 2 <= points <= MAX_PLAN_POINTS:
        fail(f"--points: expected rates in a range in [2, {MAX_PLAN_POINTS}], got {points}")
    try:
        rates = parse_rates(rate, points)
    except ValueError as exc:
        fail(f"--rate: {exc}")
    if max(rates) > MAX_PLAN_RATE:
        fail(f"--rate: expected rates up to {MAX_PLAN_RATE:,.0f} tasks/s, got {rate!r}")
    try:
        slo_ = SLO.parse(slo)
    except ValueError as exc:
        fail(f"--slo: {exc}")
    strategies = tuple(s.strip() for s in strategy.split(",") if s.strip())
    unknown = [s for s in strategies if s not in STRATEGY_NAMES]
    if not strategies or unknown:
        fail(f"--strategy: expected comma-separated strategies from {', '.join(STRATEGY_NAMES)}, got {strategy!r}")
    gpus = _gpu_list(gpu)
    try:
        prices = parse_prices(price)
    except ValueError as exc:
        fail(f"--price: {exc}")
    _check_priced(gpus, prices, gpu_flag)
    return rates, slo_, strategies, gpus, prices


def _check_priced(gpus: tuple[str, ...], prices: dict[str, float], gpu_flag: str = "--gpu") -> None:
    """Up front, before any search: every --price names a GPU type, and every --gpu has a $/GPU-hour (a plan that ranks
    fleets by GPU count alone would compare unpriced and priced pools as if the unpriced ones were free)."""
    for g in gpus:
        hw = load_hardware(g)
        if resolve_price(hw, prices)[0] is None:
            fail(f"{gpu_flag} {g}: {hw.name} has no $/GPU-hour in its profile; pass --price {g}=USD_PER_GPU_HOUR "
                 f"(comma lists work: --price {g}=2.0,h200=3.5)")


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


def _json_default(o):
    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


def _plan_doc(res: PlanResult, scenario: Scenario, requests: Path | None, requests_notes: tuple = ()) -> dict:
    req = res.request
    return {"request": {"rates_per_s": list(req.rates), "slo": str(req.slo), "min_tasks_measured": req.n_tasks, "seed": req.seed,
                        "slice_tasks": req.slice_tasks, "slice_replicas": req.slice_replicas, "workers": req.workers,
                        "backend": req.backend, "requests": str(requests) if requests else None,
                        "requests_notes": list(requests_notes), "scenario": scenario.to_dict(),
                        # what ran: the scenario's GPUs per replica, or the counts searched (each row's *_gpus_per_replica)
                        "search_gpus": list(req.search_gpus) if req.search_gpus else None, "gpus_sizing": gpus_sizing(req.search_gpus)},
            "best": _records(res.best), "candidates": _records(res.table), "evaluations": _records(res.evaluations),
            "price_sources": res.price_sources, "notes": res.notes,
            # copies and SHA-256 of the model configs, engine and GPU profiles it was priced with (simulator/provenance.py)
            "inputs": record_fleet_inputs(scenario, req.gpus),
            "method": "steady-state windows (simulator/capacity/steady_state.py); search from the analytic bound (simulator/capacity/bounds.py, planner.py)"}


def _write_plan(out: Path, text: str, res: PlanResult, quiet: bool) -> None:
    from specagent.reports.figures import capacity_plan_figure
    from specagent.reports.static import export_images

    try:
        # plan.json and the curve's HTML together (both or neither); the optional PNG/SVG copies after, as a warning if they fail
        writes = {out / "plan.json": atomic.text_writer(text)}
        fig = capacity_plan_figure(res.best) if len(res.best) else None
        if fig is not None:
            writes[out / "capacity_curve.html"] = lambda tmp: fig.write_html(tmp, include_plotlyjs=True, full_html=True)
        atomic.write_together(writes)
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


def _print_plan(res: PlanResult) -> None:
    """One block per rate and strategy, as wrapped lines: nothing a user types is ever cut, at any terminal width."""
    req = res.request
    say = lambda text="": console.print(text, highlight=False)  # noqa: E731
    say(f"Capacity plan for {req.slo} (Poisson arrivals; each candidate measured in steady state, large fleets as a slice)")
    best = res.best.to_dict("records") if len(res.best) else []
    table = res.table.to_dict("records")
    for rate in req.rates:
        say()
        say(f"At {rate:,.4g} tasks/s")
        for strat in req.strategy_names:
            rows = [r for r in best if r["strategy"] == strat and r["rate"] == rate]
            if not rows:
                say(f"  {strat}: no fleet found (see the notes below)")
                for c in (c for c in table if c["strategy"] == strat and c["rate"] == rate):
                    say(f"    {pairing(c['weak_gpu'], c['strong_gpu'])}: best achievable {req.slo.target} "
                        f"p{req.slo.percentile:g} {c['best_slo_value_s']:,.1f} s against {req.slo.seconds:g} s"
                        + (" (added replicas stopped lowering it; the search stopped there)" if c.get("stopped_early") else ""))
                continue
            r = rows[0]
            pools = " + ".join(p for p in (_pool_text(r, "weak"), _pool_text(r, "strong")) if p)
            say(f"  {strat} ({r['label']}; {pairing(r['weak_gpu'], r['strong_gpu'])})")
            say(f"    fleet: {pools} = {int(r['gpus']):,} GPUs, {_money(r['usd_per_hour'])}/hour, "
                f"{_money(r['usd_per_task'], 4)}/task")
            say(f"    {req.slo.target} p{req.slo.percentile:g}: {r['slo_value_s']:,.1f} s (95% CI {r['slo_ci_low_s']:,.1f}-"
                f"{r['slo_ci_high_s']:,.1f} s); task p50 {r['latency_p50_s']:,.1f} s; sized by {sized_by(r)}")
            if r.get("slo_met_at") == "point estimate only":
                say(f"    SLO met at the point estimate only: the 95% CI reaches {r['slo_ci_high_s']:,.1f} s, over the "
                    f"{req.slo.seconds:g} s bound (--size-on ci-high sizes on the CI's upper end)")
            for name in ("strong", "weak"):
                if r[f"{name}_replicas"]:
                    nb = int(r[f"{name}_bound_replicas"])
                    say(f"    {name.capitalize()}: analytic bound {nb:,} replica{'s' if nb != 1 else ''} "
                        f"({r[f'{name}_bound']}); runs <= {int(r[f'{name}_max_num_seqs']):,} sequences and "
                        f"{int(r[f'{name}_max_batched_tokens']):,} tokens per iteration; mean decode batch "
                        f"{r[f'{name}_mean_decode_batch']:,.1f}; {_utilisation_text(r, name)}")
                    if isinstance(r.get(f"{name}_why"), str) and r[f"{name}_why"]:
                        say(f"    why this size: {r[f'{name}_why']}")
            if isinstance(r.get("size_note"), str) and r["size_note"]:
                say(f"    why so large: {r['size_note']}")
            say(f"    simulated: {r['slice']}, {int(r['tasks_simulated']):,} tasks over {r['horizon_s']:,.0f} s (warm-up "
                f"{r['warmup_s']:,.0f} s detected, {int(r['tasks_measured']):,} tasks measured, {int(r['tasks_censored']):,} "
                f"still running at the end); {int(r['evaluations'])} candidates tried")
            sav = r.get("usd_saving_vs_strongonly")
            if strat != "strongonly" and isinstance(sav, float) and not math.isnan(sav):
                say(f"    saving vs strongonly at this rate: $ {100 * sav:.0f}%, GPUs {100 * r['gpu_saving_vs_strongonly']:.0f}%")
            others = [c for c in table if c["strategy"] == strat and c["rate"] == rate and
                      (c["weak_gpu"], c["strong_gpu"]) != (r["weak_gpu"], r["strong_gpu"])]
            for c in others:
                what = (f"{int(c['gpus']):,} GPUs, {_money(c['usd_per_hour'])}/hour" if c["feasible"] else
                        f"no fleet found (best achievable {req.slo.target} p{req.slo.percentile:g} {c['best_slo_value_s']:,.1f} s)")
                say(f"    also tried {pairing(c['weak_gpu'], c['strong_gpu'])}: {what}")
    if len(req.rates) > 1 and best:
        say()
        rows = curve_rows(res.best, f"p{req.slo.percentile:g}")
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
    say()
    say("Prices:")
    for g, src in res.price_sources.items():
        say(f"  {g}: {src}")
    for n in res.notes:
        say(f"note: {n}")


app = typer.Typer(help="Fleet planning.", no_args_is_help=True)
app.command("plan")(plan_command)


@app.callback()
def _group() -> None:
    """Fleet planning (a group of one command, so `plan` stays its subcommand as it is under the root)."""
