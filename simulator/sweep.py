"""Sweeps: a grid of fleet simulations, one Parquet file per cell, resumable, on a process pool or Ray.

A cell is one (strategy, K, acceptance, rate, fleet, hardware) combination; its result is a
pure function of the cell and the sweep's fixed settings (every random draw is seeded from
them), so the local and Ray backends produce identical rows, and an interrupted sweep
resumes by skipping cells whose file exists. Only the driver writes files, each atomically
(common.atomic), so a kill never leaves a half-written cell that would be skipped.

Config (TOML):

    [sweep]
    workload = "traces/data/tau2_airline.jsonl"   # optional; the shipped τ²-airline by default
    requests = "requests.csv"  # optional instead: a plain serving request trace (strategy "serving", Strong pool)
    tasks = 200          # steady: at least this many tasks measured per cell; burst: tasks per cell
    steady = true        # measure each cell in steady state (simulator/steady_state.py); false: one burst of `tasks`
    warmup = 0.1         # burst only: share of the earliest tasks left out of the percentiles
    prices = { h20 = 2.0 }             # optional $/GPU-hour overrides
    scenario = "my_scenario.toml"      # optional: models, dtypes, acceptance, seed, ... (default: the built-in one)
    seed = 0                           # optional overrides of the scenario: seed, weak_model, weak_dtype,
    strong_model = "qwen3.5-397b-a17b" #   strong_model, strong_dtype

    [scenario]                         # or the scenario inline (instead of [sweep].scenario)
    seed = 0

    [grid]
    strategy = ["strongonly", "specagent"]
    k = [2, 4]                         # applies to SpecAgent variants only; others run once
    acceptance = ["default", 0.6, 0.9] # "default" acceptance model or a constant p(accept)
    rate = [0.5, 1.0]                  # tasks per second (Poisson)
    fleet = ["small"]                  # names of [fleet.NAME] tables
    hardware = ["h20", "rtx5090+h20"]  # GPU type for both pools, or WEAK+STRONG

    [fleet.small]
    weak_replicas = 2
    strong_replicas = 1
    router = "session_affinity"        # optional
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import itertools
import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from specagent.common import atomic
from specagent.simulator.fleet_build import (
    PlainServing, build_fleet, episodes_of, fitting_deployment, plan_tasks, request_tasks, simulate_fleet,
)
from specagent.simulator.fleet_config import ROUTERS, WARMUP_SHARE, Arrivals
from specagent.simulator.scenario import SHIPPED, Scenario, ScenarioError
from specagent.simulator.steady_state import Metric, measure_steady, uncontended
from specagent.simulator.strategies import STRATEGY_NAMES, strategy_entry
from specagent.traces import load_trajectories
from specagent.traces.io import default_workload_path
from specagent.traces.requests import load_requests

BACKENDS = ("local", "ray")
GRID_KEYS = ("strategy", "k", "acceptance", "rate", "fleet", "hardware")
#: [sweep] keys that override the scenario, and the scenario field each sets.
SCENARIO_KEYS = {"seed": "seed", "weak_model": "weak.model", "weak_dtype": "weak.weight_dtype", "strong_model": "strong.model",
                 "strong_dtype": "strong.weight_dtype"}
#: Replicas are sized to hold one sequence of this many tokens (long agent contexts).
SIZING_CONTEXT = 131072


class SweepConfigError(ValueError):
    """A sweep config that cannot be run; the message names the file and field."""


@dataclass(frozen=True)
class FleetShape:
    weak_replicas: int = 1
    strong_replicas: int = 1
    router: str = "session_affinity"


@dataclass(frozen=True)
class SweepConfig:
    grid: dict[str, list]
    fleets: dict[str, FleetShape]
    workload: str | None = None
    tasks: int = 200
    warmup: float = WARMUP_SHARE
    steady: bool = True
    requests: str | None = None
    prices: dict[str, float] = field(default_factory=dict)
    scenario: Scenario = field(default_factory=Scenario)

    @classmethod
    def from_toml(cls, path: str | Path, scenario: str | Path | None = None) -> "SweepConfig":
        """A sweep config file; `scenario` (a file or a shipped name) stands for its [sweep].scenario."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SweepConfigError(f"{p}: cannot read sweep config: {exc}") from exc
        if scenario is not None:
            if "scenario" in data or "scenario" in data.get("sweep", {}):
                raise SweepConfigError(f"{p} names its own scenario; give --scenario or that, not both")
            name = str(scenario)
            data.setdefault("sweep", {})["scenario"] = name if name in SHIPPED else str(Path(name).resolve())
        return cls.from_dict(data, str(p))

    @classmethod
    def from_dict(cls, data: dict, where: str = "<config>") -> "SweepConfig":
        sw = data.get("sweep", {})
        grid = data.get("grid")
        if not isinstance(grid, dict):
            raise SweepConfigError(f"{where}: missing [grid] table with lists {', '.join(GRID_KEYS)}")
        unknown = set(grid) - set(GRID_KEYS)
        if unknown:
            raise SweepConfigError(f"{where}: [grid] has unknown key(s) {sorted(unknown)}; expected {GRID_KEYS}")
        g: dict[str, list] = {}
        defaults = {"k": [Scenario.k], "acceptance": ["default"], "fleet": None, "hardware": [Scenario.strong.hardware]}
        for key in GRID_KEYS:
            v = grid.get(key, defaults.get(key))
            if v is None:
                raise SweepConfigError(f"{where}: [grid].{key} is required (a list)")
            if not isinstance(v, list) or not v:
                raise SweepConfigError(f"{where}: [grid].{key} must be a non-empty list, got {v!r}")
            g[key] = v
        for s in g["strategy"]:
            if "requests" in sw and s == PlainServing.name:
                continue
            try:
                strategy_entry(str(s))
            except ValueError as exc:
                raise SweepConfigError(f"{where}: [grid].strategy: {exc}") from exc
        if "requests" in sw and g["strategy"] != [PlainServing.name]:
            raise SweepConfigError(f"{where}: [sweep].requests is a plain serving trace: [grid].strategy must be "
                                   f"[\"{PlainServing.name}\"]")
        for k in g["k"]:
            if not isinstance(k, int) or k < 1:
                raise SweepConfigError(f"{where}: [grid].k entries must be integers >= 1, got {k!r}")
        for a in g["acceptance"]:
            if not (a == "default" or (isinstance(a, (int, float)) and 0 <= a <= 1)):
                raise SweepConfigError(f"{where}: [grid].acceptance entries must be \"default\" or a number in [0, 1], got {a!r}")
        for r in g["rate"]:
            if not isinstance(r, (int, float)) or r <= 0:
                raise SweepConfigError(f"{where}: [grid].rate entries must be numbers > 0 (tasks/s), got {r!r}")
        fleets = {}
        for name, t in data.get("fleet", {}).items():
            try:
                fs = FleetShape(**t)
            except TypeError as exc:
                raise SweepConfigError(f"{where}: [fleet.{name}]: {exc} (fields: weak_replicas, strong_replicas, router)") from exc
            if fs.router not in ROUTERS or fs.weak_replicas < 1 or fs.strong_replicas < 1:
                raise SweepConfigError(f"{where}: [fleet.{name}]: replicas must be >= 1 and router one of {ROUTERS}")
            fleets[name] = fs
        for f in g["fleet"]:
            if f not in fleets:
                raise SweepConfigError(f"{where}: [grid].fleet names '{f}' but there is no [fleet.{f}] table")
        allowed = {"workload", "tasks", "warmup", "prices", "scenario", "steady", "requests", *SCENARIO_KEYS}
        bad = set(sw) - allowed
        if bad:
            raise SweepConfigError(f"{where}: [sweep] has unknown key(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        if not isinstance(sw.get("steady", True), bool):
            raise SweepConfigError(f"{where}: [sweep].steady must be true or false, got {sw['steady']!r}")
        if "requests" in sw and not (isinstance(sw["requests"], str) and Path(sw["requests"]).is_file()):
            raise SweepConfigError(f"{where}: [sweep].requests must name a request trace CSV file, got {sw['requests']!r}")
        own = {k: v for k, v in sw.items() if k not in SCENARIO_KEYS and k != "scenario"}
        try:
            scenario = _scenario(data, sw, where)
            return cls(grid=g, fleets=fleets, scenario=scenario, **own)
        except ScenarioError as exc:
            raise SweepConfigError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from exc
        except TypeError as exc:
            raise SweepConfigError(f"{where}: [sweep]: {exc}") from exc

    def fixed(self) -> dict:
        """Everything but the grid, as plain data: what every cell's result depends on (and its id hashes)."""
        d = {f: getattr(self, f) for f in ("workload", "tasks", "warmup", "prices", "steady", "requests")}
        d["fleets"] = {k: asdict(v) for k, v in self.fleets.items()}
        d["scenario"] = self.scenario.to_dict()
        return d

    def cells(self) -> list[dict]:
        """The grid in a fixed order; K collapses to 0 for strategies that have no K."""
        out, seen = [], set()
        for combo in itertools.product(*(self.grid[k] for k in GRID_KEYS)):
            cell = dict(zip(GRID_KEYS, combo))
            if cell["strategy"] == PlainServing.name or not strategy_entry(cell["strategy"]).takes_k:
                cell["k"] = 0
            key = json.dumps(cell, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            cell["cell_id"] = cell_id(cell, self.fixed())
            cell["cell_index"] = len(out)
            out.append(cell)
        return out


def _scenario(data: dict, sw: dict, where: str) -> Scenario:
    """The sweep's scenario: inline [scenario], or the file [sweep].scenario names, then [sweep]'s overrides."""
    if "scenario" in data and "scenario" in sw:
        raise ScenarioError(f"{where}: give [sweep].scenario (a file) or a [scenario] table, not both")
    if "scenario" in sw:
        name = str(sw["scenario"])  # a shipped scenario, or a file relative to the sweep config
        base = Scenario.load(name if name in SHIPPED or Path(name).is_absolute() else Path(where).parent / name)
    else:
        base = Scenario.from_dict(data.get("scenario", {}), f"{where}: [scenario]")
    overrides = {SCENARIO_KEYS[k]: v for k, v in sw.items() if k in SCENARIO_KEYS}
    try:
        return base.override(overrides)
    except ScenarioError as exc:
        key = next((k for k, f in SCENARIO_KEYS.items() if f == exc.where), exc.where)
        raise ScenarioError(f"{where}: [sweep].{key}: {exc}", exc.where) from None


def cell_id(cell: dict, fixed: dict) -> str:
    """A readable prefix plus a hash of everything the cell's result depends on."""
    body = json.dumps({"cell": {k: cell[k] for k in GRID_KEYS}, "fixed": fixed}, sort_keys=True, default=str)
    h = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{cell['strategy']}_k{cell['k']}_{h}"


@functools.lru_cache(maxsize=4)
def _episodes(workload: str | None):
    return episodes_of(load_trajectories(workload or default_workload_path()))


def run_cell(cell: dict, fixed: dict) -> dict:
    """Simulate one cell; a flat dict of scalars (the Parquet row)."""
    eps = _episodes(fixed["workload"])
    sc = Scenario.from_dict(fixed["scenario"])
    acc = sc.acceptance if cell["acceptance"] == "default" else sc.acceptance.with_constant(float(cell["acceptance"]))
    sc = sc.replace(k=max(int(cell["k"]), 1), acceptance=acc)
    hw = str(cell["hardware"])
    weak_gpu, strong_gpu = hw.split("+", 1) if "+" in hw else (hw, hw)
    shape = FleetShape(**fixed["fleets"][cell["fleet"]])
    wdep = fitting_deployment(sc.weak, weak_gpu, SIZING_CONTEXT)
    sdep = fitting_deployment(sc.strong, strong_gpu, SIZING_CONTEXT)

    def build(counts):
        return build_fleet(wdep, sdep, counts[0], counts[1], weight_mode=sc.weight_mode, router=shape.router, prices=fixed["prices"])

    fleet = build((shape.weak_replicas, shape.strong_replicas))
    steady_row: dict = {}
    if fixed.get("steady", True):  # the fleet at a sustained rate: window, detected warm-up, stability, p95 with its CI
        tasks = request_tasks(_requests(fixed["requests"])) if fixed.get("requests") else \
            plan_tasks(eps, cell["strategy"], sc, max(int(fixed["tasks"]), 1000))
        ref = float(uncontended(tasks, build((None, None)), sc.seed).tasks["latency_s"].quantile(0.95))
        sr = measure_steady(tasks, build, (shape.weak_replicas, shape.strong_replicas), float(cell["rate"]), Metric(95.0, "task"),
                            ref, min_tasks=int(fixed["tasks"]), slice_tasks=None, seed=sc.seed)
        summary = sr.summary
        steady_row = sr.as_row("steady_")
    else:
        summary = simulate_fleet(eps, cell["strategy"], fleet, int(fixed["tasks"]),
                                 Arrivals("poisson", float(cell["rate"]), seed=sc.seed), sc, warmup=float(fixed["warmup"])).summary
    row = {k: cell[k] for k in ("cell_index", "cell_id", *GRID_KEYS)}
    row["acceptance"] = str(row["acceptance"])
    row["hardware"] = hw
    row["weak_price_source"], row["strong_price_source"] = fleet.weak.price_source, fleet.strong.price_source  # type: ignore[union-attr]
    row["weak_gpus_per_replica"], row["strong_gpus_per_replica"] = wdep.gpus, sdep.gpus
    for k, v in {**summary, **steady_row}.items():
        if isinstance(v, (int, float, str, bool)):
            row[k] = v
    return row


@functools.lru_cache(maxsize=2)
def _requests(path: str):
    return load_requests(path)


@dataclass
class SweepReport:
    total: int
    skipped: int
    ran: int
    out_dir: Path


def run_sweep(config: SweepConfig, out_dir: str | Path, backend: str = "local", workers: int = 1, address: str | None = None,
              stop_after: int | None = None, on_done: Callable[[dict], None] | None = None, progress: bool = False) -> SweepReport:
    """Run every cell whose file is missing; `stop_after` stops after that many new cells (an interruption)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got '{backend}'")
    out = Path(out_dir)
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    fixed = config.fixed()
    atomic.write_text(out / "config.json", json.dumps({"grid": config.grid, "fixed": fixed}, sort_keys=True, indent=1, default=str))
    cells = config.cells()
    todo = [c for c in cells if not (cells_dir / f"{c['cell_id']}.parquet").exists()]
    skipped = len(cells) - len(todo)
    if stop_after is not None:
        todo = todo[:stop_after]
    done = 0

    def finish(row: dict) -> None:
        nonlocal done
        atomic.write_parquet(cells_dir / f"{row['cell_id']}.parquet", pd.DataFrame([row]))
        done += 1
        if on_done:
            on_done(row)

    bar = _progress(progress, len(cells), skipped)
    try:
        if backend == "local":
            if workers <= 1:
                for c in todo:
                    finish(run_cell(c, fixed))
                    bar.advance()
            else:
                with cf.ProcessPoolExecutor(max_workers=workers) as ex:
                    futs = [ex.submit(run_cell, c, fixed) for c in todo]
                    for f in cf.as_completed(futs):
                        finish(f.result())
                        bar.advance()
        else:
            _run_ray(todo, fixed, workers, address, finish, bar)
    finally:
        bar.close()
    return SweepReport(total=len(cells), skipped=skipped, ran=done, out_dir=out)


def _run_ray(todo: list[dict], fixed: dict, workers: int, address: str | None, finish, bar) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("the ray backend needs Ray: pip install 'specagent[ray]' (ray[default])") from exc
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:
            ray.init(num_cpus=max(workers, 1), include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(run_cell)
        pending = [remote.remote(c, fixed) for c in todo]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                finish(ray.get(r))
                bar.advance()
    finally:
        if started and not address:
            ray.shutdown()


class _progress:
    """A rich progress bar when asked for, otherwise nothing (tests, --json)."""

    def __init__(self, show: bool, total: int, done: int):
        self.p = None
        if show:
            self.p = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
            self.p.start()
            self.task = self.p.add_task("cells", total=total, completed=done)

    def advance(self) -> None:
        if self.p is not None:
            self.p.advance(self.task)

    def close(self) -> None:
        if self.p is not None:
            self.p.stop()


def load_sweep(out_dir: str | Path) -> pd.DataFrame:
    """Every finished cell, in grid order."""
    files = sorted((Path(out_dir) / "cells").glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return df.sort_values("cell_index").reset_index(drop=True)


__all__ = ["SweepConfig", "SweepConfigError", "FleetShape", "run_sweep", "run_cell", "load_sweep", "cell_id", "BACKENDS",
           "STRATEGY_NAMES"]
