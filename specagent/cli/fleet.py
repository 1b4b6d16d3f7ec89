"""Command line for fleets: `plan` (capacity), `sweep` (grids of fleet runs), `study balance`.

Mounted by app.py; `app` here holds all three for testing. The Weak and Strong models, their
dtypes, K, acceptance and seed come from the scenario (flags generated from it); the
GPU type and GPUs per replica are what `plan` searches and `study` varies, so those
deployment fields have no flags here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from specagent.cli.console import error_line, fail
from specagent.cli.options import scenario_options
from specagent.cli.simulate import load_workload
from specagent.common import atomic
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.planner import SLO, PlanRequest, parse_prices, parse_rate, plan_capacity
from specagent.simulator.scenario import Scenario
from specagent.simulator.study import balance_study
from specagent.simulator.sweep import BACKENDS, SweepCellError, SweepConfig, SweepConfigError, load_sweep, run_sweep

console = Console()
#: Scenario fields the fleet commands choose themselves (the GPU type and count per replica, the strategies) or do not use.
FLEET_EXCLUDES = ("strategies", "engine", "strong_api", "weak.hardware", "weak.gpus", "strong.hardware", "strong.gpus")


def _fmt(v, nd: int = 2) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:,.{nd}f}"
    return str(v)


@scenario_options(exclude=FLEET_EXCLUDES)
def plan_command(
    scenario: Scenario,
    rate: str = typer.Option(..., help="Arrival rate of agent tasks (Poisson), e.g. 2/s, 120/min."),
    slo: str = typer.Option("p95-task=120s", help="Latency objective: pNN-task=SECONDS (end-to-end task) or pNN-turn=SECONDS (one agent turn between user messages)."),
    strategy: str = typer.Option("strongonly,specagent", help="Comma-separated strategies to size a fleet for."),
    gpu: str = typer.Option("h20,h200", help="Comma-separated GPU types to build replicas from (hardware profile ids or aliases)."),
    price: List[str] = typer.Option([], help="$/GPU-hour per GPU type, e.g. --price h20=2.1 (overrides the profile; needed where a profile has no price)."),
    tasks: int = typer.Option(120, help="Tasks simulated per candidate fleet (more: steadier percentiles, slower)."),
    mix_gpus: bool = typer.Option(False, "--mix-gpus", help="Also try Weak and Strong pools on different GPU types."),
    max_replicas: int = typer.Option(64, help="Largest replica count per pool the search tries."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Cheapest fleet (replicas per pool, GPUs per replica) meeting a latency SLO at an arrival rate, per strategy.

    Search: replicas get the fewest GPUs their model fits on; Strong replicas are found by
    doubling then bisection with an uncontended Weak pool, then Weak replicas the same way with
    the Strong count fixed. Every candidate replays the same tasks and arrival times (the
    scenario's seed seeds task sampling, arrivals and acceptance draws).
    """
    trajs = load_workload(scenario)[0]
    try:
        req = PlanRequest(rate=parse_rate(rate), slo=SLO.parse(slo), strategies=tuple(s.strip() for s in strategy.split(",") if s.strip()),
                          gpus=tuple(g.strip() for g in gpu.split(",") if g.strip()), prices=parse_prices(price), n_tasks=tasks,
                          scenario=scenario, mix_gpus=mix_gpus, max_replicas=max_replicas)
        res = plan_capacity(trajs, req)
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps({"request": {"rate_per_s": req.rate, "slo": str(req.slo), "tasks": req.n_tasks, "seed": req.seed,
                                      "scenario": scenario.to_dict()},
                          "candidates": json.loads(res.table.to_json(orient="records")),
                          "best": json.loads(res.best.to_json(orient="records")) if len(res.best) else [],
                          "price_sources": res.price_sources, "notes": res.notes}, indent=1))
        return
    t = Table(title=f"Cheapest fleet per strategy at {req.rate:g} tasks/s with {req.slo} ({req.n_tasks} simulated tasks)")
    for c in ("strategy", "weak pool", "strong pool", "GPUs", "$/hour", "p50 s", "p95 s", "util W/S", "Strong dec. batch", "saving vs Strong-only"):
        t.add_column(c)
    best = res.best.to_dict("records")
    for r in best:
        sav = r.get("usd_saving_vs_strongonly", math.nan)
        gsav = r.get("gpu_saving_vs_strongonly", math.nan)
        t.add_row(r["strategy"], f"{r['weak_replicas']}x{r['weak_gpus_per_replica']} {r['weak_gpu']}" if r["weak_replicas"] else "—",
                  f"{r['strong_replicas']}x{r['strong_gpus_per_replica']} {r['strong_gpu']}" if r["strong_replicas"] else "—",
                  str(r["gpus"]), _fmt(r["usd_per_hour"]), _fmt(r["latency_p50_s"], 1), _fmt(r["latency_p95_s"], 1),
                  f"{r['weak_utilisation']:.2f}/{r['strong_utilisation']:.2f}", _fmt(r["strong_mean_decode_batch"], 1),
                  f"$ {_fmt(100 * sav, 0)}%, GPUs {_fmt(100 * gsav, 0)}%" if isinstance(sav, float) else "—")
    t.caption = "; ".join(f"{r['strategy']} = {r['label']}" for r in best)
    console.print(t)
    cand = Table(title="All candidates (one per strategy and GPU pairing; replicas found by the search above)")
    cols = [("strategy", "strategy"), ("weak_gpu", "weak GPU"), ("strong_gpu", "strong GPU"), ("feasible", "meets SLO"),
            ("evaluations", "runs"), ("weak_replicas", "weak repl."), ("strong_replicas", "strong repl."), ("gpus", "GPUs"),
            ("usd_per_hour", "$/hour"), ("latency_p95_s", "p95 s")]
    cols = [(c, h) for c, h in cols if c in res.table]
    for _, h in cols:
        cand.add_column(h, justify="left" if h in ("strategy", "weak GPU", "strong GPU") else "right")
    for r in res.table.to_dict("records"):
        cand.add_row(*[("yes" if r[c] else "no") if c == "feasible" else _fmt(r[c], 2 if c == "usd_per_hour" else 1) for c, _ in cols])
    console.print(cand)
    console.print("Prices:")
    for g, src in res.price_sources.items():
        console.print(f"  {g}: {src}", highlight=False)
    for n in res.notes:
        console.print(f"note: {n}", highlight=False)


def sweep_command(
    config: Path = typer.Argument(..., help="Sweep config TOML: [sweep] fixed settings (its scenario: [sweep].scenario = FILE or "
                                            "a [scenario] table), [grid] lists, [fleet.NAME] replica counts."),
    out: Optional[Path] = typer.Option(None, help="Result directory (one Parquet file per cell under cells/); default CONFIG's name + '_results'."),
    backend: str = typer.Option("local", help="local (process pool) or ray (a Ray cluster; local instance unless --address)."),
    address: Optional[str] = typer.Option(None, help="Ray cluster address, e.g. ray://head:10001 or auto."),
    workers: int = typer.Option(1, help="Parallel cells (processes for local, CPUs for a local Ray instance)."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML file (or a shipped one: default, edge) for "
                                            "every cell, when the config names none; [sweep]'s seed/model/dtype keys override it."),
    force: bool = typer.Option(False, "--force", help="Run into a folder holding another config's cells: delete those cells "
                                                      "(the ones this config shares are kept)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's counts as JSON (no progress bar)."),
) -> None:
    """Run a grid of fleet simulations (strategy x K x acceptance x rate x fleet x hardware), resumably.

    Each finished cell is written atomically as its own Parquet file, so rerunning the same
    command after an interruption (^C keeps every finished cell) skips the cells already
    done; extending the grid reuses them too. A folder holding cells of a different config is
    refused (--force replaces them), and a folder another sweep is running in is locked.
    """
    if not 1 <= workers <= MAX_WORKERS:
        fail(f"--workers: expected a count in [1, {MAX_WORKERS}], got {workers}")
    if backend not in BACKENDS:
        fail(f"--backend: expected one of {', '.join(BACKENDS)}, got '{backend}'")
    if address is not None and backend != "ray":
        fail(f"--address {address}: a Ray cluster address, for --backend ray (the backend is '{backend}')")
    out_dir = out or config.with_name(config.stem + "_results")
    try:
        cfg = SweepConfig.from_toml(config, scenario)
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
        print(json.dumps(info))
        return
    console.print(f"{rep.ran} cell(s) run, {rep.skipped} already done, {rep.total} in the grid -> {rep.out_dir}/cells/*.parquet")
    df = load_sweep(rep.out_dir)
    if len(df):
        cols = ["strategy", "k", "acceptance", "rate", "fleet", "hardware", "latency_p50_s", "latency_p95_s", "usd_per_task",
                "strong_mean_decode_batch"]
        console.print(df[cols].to_string(index=False))


#: Guards against a typo, not limits of the method: the study simulates every task (10^6 take minutes), and each rate
#: runs at least rate x 60 s of arrivals, so a rate is bounded by the same count.
MAX_STUDY_TASKS = 1_000_000
MAX_STUDY_RATE = MAX_STUDY_TASKS / 60
MAX_WORKERS = 1024


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


@study_app.command("balance")
@scenario_options(exclude=FLEET_EXCLUDES)
def study_balance(
    scenario: Scenario,
    gpu: str = typer.Option("h20,h200", help="Comma-separated GPU types for the Strong replica."),
    rates: str = typer.Option("0.05,0.2,0.8,3.2,12.8", help="Comma-separated arrival rates (tasks/s): the load knob."),
    tasks: int = typer.Option(150, help="Minimum tasks per rate (each rate runs at least rate x 60 s of arrivals)."),
    out: Optional[Path] = typer.Option(None, help="Write the table as Parquet (.parquet) or CSV (anything else), atomically."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """SpecAgent's Strong time and memory saving vs Strong-only against the Strong replica's mean decode batch.

    The balance point is the decode batch at which a replica turns compute-bound; below it,
    moving Strong tokens from decode into one verification prefill saves time and traffic.
    Load rises with the rate; where the saving columns reach zero, SpecAgent stops paying.
    """
    gpus = [g.strip() for g in gpu.split(",") if g.strip()]
    if not gpus:
        fail(f"--gpu: expected a comma-separated list of GPU types, got {gpu!r}")
    for g in gpus:
        try:
            load_hardware(g)
        except HardwareProfileError as exc:
            fail(f"--gpu: {exc}")
    rate_list = _rates(rates)
    if not 1 <= tasks <= MAX_STUDY_TASKS:
        fail(f"--tasks: expected tasks per rate in [1, {MAX_STUDY_TASKS:,}], got {tasks}")
    if out is not None:
        atomic.check_writable(out)
    trajs = load_workload(scenario)[0]
    try:
        df = balance_study(trajs, hardware=gpus, rates=rate_list, n_tasks=tasks, scenario=scenario)
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
    t = Table(title="Balance-point study: SpecAgent vs Strong-only on one Strong replica")
    cols = ("hardware", "rate", "strongonly_decode_batch", "specagent_decode_batch", "balance_batch", "strong_time_saving",
            "strong_bytes_saving", "strongonly_strong_utilisation")
    for c in cols:
        t.add_column(c.replace("_", " "))
    for r in df.to_dict("records"):
        t.add_row(*(_fmt(r[c], 2) if isinstance(r[c], float) else str(r[c]) for c in cols))
    console.print(t)


app = typer.Typer(help="Fleet planning, sweeps and studies.", no_args_is_help=True)
app.command("plan")(plan_command)
app.command("sweep")(sweep_command)
app.add_typer(study_app, name="study")
