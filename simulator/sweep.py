"""Sweeps: a grid of fleet simulations, one Parquet file per cell, resumable, on a process pool or Ray.

A cell is one (strategy, K, acceptance, rate, fleet, hardware) combination; its result is a
pure function of the cell and the sweep's fixed settings (every random draw is seeded from
them), so the local and Ray backends produce identical rows, and an interrupted sweep
resumes by skipping cells whose file exists. Only the driver writes files, each atomically
(temp file in the same directory, then os.replace), so a kill never leaves a half-written
cell that would be skipped.

Config (TOML):

    [sweep]
    workload = "traces/data/tau2_airline.jsonl"   # optional; the shipped τ²-airline by default
    tasks = 200          # tasks per cell
    seed = 0
    warmup = 0.1
    weak_model = "qwen3.5-4b"          # optional, with weak_dtype / strong_model / strong_dtype
    prices = { h20 = 2.0 }             # optional $/GPU-hour overrides

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
import os
import tempfile
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from specagent.simulator.acceptance import AcceptanceModel
from specagent.simulator.fleet import ROUTERS, Arrivals, Fleet, Pool, Scheduler, resolve_price, simulate_fleet
from specagent.simulator.strategies import STRATEGY_NAMES, SpecAgent, make_strategy

BACKENDS = ("local", "ray")
GRID_KEYS = ("strategy", "k", "acceptance", "rate", "fleet", "hardware")


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
    seed: int = 0
    warmup: float = 0.1
    weak_model: str = "qwen3.5-4b"
    strong_model: str = "qwen3.5-397b-a17b"
    weak_dtype: str = "bf16"
    strong_dtype: str = "fp8"
    prices: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_toml(cls, path: str | Path) -> "SweepConfig":
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SweepConfigError(f"{p}: cannot read sweep config: {exc}") from exc
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
        defaults = {"k": [4], "acceptance": ["default"], "fleet": None, "hardware": ["h20"]}
        for key in GRID_KEYS:
            v = grid.get(key, defaults.get(key))
            if v is None:
                raise SweepConfigError(f"{where}: [grid].{key} is required (a list)")
            if not isinstance(v, list) or not v:
                raise SweepConfigError(f"{where}: [grid].{key} must be a non-empty list, got {v!r}")
            g[key] = v
        for s in g["strategy"]:
            try:
                make_strategy(str(s))
            except ValueError as exc:
                raise SweepConfigError(f"{where}: [grid].strategy: {exc}") from exc
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
        allowed = {"workload", "tasks", "seed", "warmup", "weak_model", "strong_model", "weak_dtype", "strong_dtype", "prices"}
        bad = set(sw) - allowed
        if bad:
            raise SweepConfigError(f"{where}: [sweep] has unknown key(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        try:
            return cls(grid=g, fleets=fleets, **sw)
        except TypeError as exc:
            raise SweepConfigError(f"{where}: [sweep]: {exc}") from exc

    def fixed(self) -> dict:
        d = asdict(self)
        d.pop("grid")
        d["fleets"] = {k: asdict(v) for k, v in self.fleets.items()}
        return d

    def cells(self) -> list[dict]:
        """The grid in a fixed order; K collapses to 0 for strategies that have no K."""
        out, seen = [], set()
        for combo in itertools.product(*(self.grid[k] for k in GRID_KEYS)):
            cell = dict(zip(GRID_KEYS, combo))
            if not isinstance(make_strategy(cell["strategy"]), SpecAgent):
                cell["k"] = 0
            key = json.dumps(cell, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            cell["cell_id"] = cell_id(cell, self.fixed())
            cell["cell_index"] = len(out)
            out.append(cell)
        return out


def cell_id(cell: dict, fixed: dict) -> str:
    """A readable prefix plus a hash of everything the cell's result depends on."""
    body = json.dumps({"cell": {k: cell[k] for k in GRID_KEYS}, "fixed": fixed}, sort_keys=True, default=str)
    h = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{cell['strategy']}_k{cell['k']}_{h}"


@functools.lru_cache(maxsize=4)
def _episodes(workload: str | None):
    from specagent.simulator.run import to_episodes
    from specagent.traces import default_workload_path, load_trajectories
    return to_episodes(load_trajectories(workload or default_workload_path()))


def run_cell(cell: dict, fixed: dict) -> dict:
    """Simulate one cell; a flat dict of scalars (the Parquet row)."""
    from specagent.simulator.planner import fitting_deployment

    eps = _episodes(fixed["workload"])
    hw = str(cell["hardware"])
    weak_gpu, strong_gpu = hw.split("+", 1) if "+" in hw else (hw, hw)
    shape = FleetShape(**fixed["fleets"][cell["fleet"]])
    ctx = 131072  # size replicas for long agent contexts
    wdep = fitting_deployment(fixed["weak_model"], weak_gpu, fixed["weak_dtype"], ctx)
    sdep = fitting_deployment(fixed["strong_model"], strong_gpu, fixed["strong_dtype"], ctx)
    wp, wsrc = resolve_price(wdep.hardware, fixed["prices"])
    sp, ssrc = resolve_price(sdep.hardware, fixed["prices"])
    fleet = Fleet(weak=Pool(wdep, shape.weak_replicas, shape.router, Scheduler(), wp, wsrc),
                  strong=Pool(sdep, shape.strong_replicas, shape.router, Scheduler(), sp, ssrc))
    acc = AcceptanceModel() if cell["acceptance"] == "default" else AcceptanceModel.constant(float(cell["acceptance"]))
    res = simulate_fleet(eps, cell["strategy"], fleet, int(fixed["tasks"]), Arrivals("poisson", float(cell["rate"]), seed=fixed["seed"]),
                         acceptance=acc, seed=int(fixed["seed"]), k=max(int(cell["k"]), 1), warmup=float(fixed["warmup"]))
    row = {k: cell[k] for k in ("cell_index", "cell_id", *GRID_KEYS)}
    row["acceptance"] = str(row["acceptance"])
    row["hardware"] = hw
    row["weak_price_source"], row["strong_price_source"] = wsrc, ssrc
    row["weak_gpus_per_replica"], row["strong_gpus_per_replica"] = wdep.gpus, sdep.gpus
    for k, v in res.summary.items():
        if isinstance(v, (int, float, str, bool)):
            row[k] = v
    return row


def _write_atomic(df: pd.DataFrame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    (out / "config.json").write_text(json.dumps({"grid": config.grid, "fixed": fixed}, sort_keys=True, indent=1, default=str))
    cells = config.cells()
    todo = [c for c in cells if not (cells_dir / f"{c['cell_id']}.parquet").exists()]
    skipped = len(cells) - len(todo)
    if stop_after is not None:
        todo = todo[:stop_after]
    done = 0

    def finish(row: dict) -> None:
        nonlocal done
        _write_atomic(pd.DataFrame([row]), cells_dir / f"{row['cell_id']}.parquet")
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
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
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
