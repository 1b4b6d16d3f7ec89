"""Sweeps: a grid of fleet simulations, one Parquet file per cell, resumable, on a process pool or Ray.

A cell is one (strategy, K, acceptance, rate, fleet, hardware) combination; its result is a
pure function of the cell and the sweep's fixed settings (every random draw is seeded from
them), so the local and Ray backends produce identical rows, and an interrupted sweep
resumes by skipping cells whose file exists. Only the driver writes files, each atomically
(common.atomic), so a kill never leaves a half-written cell that would be skipped.

The config (its TOML layout, validation and cell ids) is sweep_config.py; the folder lock is
common/folder_lock.py.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.folder_lock import FolderLock
from specagent.simulator.capacity.fleet_build import (
    build_fleet, check_requests_fit, episodes_of, gpus_sizing, plan_tasks, request_tasks, sized_deployment,
)
from specagent.simulator.fleet.config import Arrivals
from specagent.simulator.parallel import BACKENDS, run_jobs
from specagent.simulator.provenance import record_fleet_inputs
from specagent.simulator.scenario import Scenario
from specagent.simulator.capacity.steady_state import Metric, measure_steady, uncontended
from specagent.simulator.strategies.catalog import STRATEGY_NAMES
from specagent.simulator.sweep_config import GRID_KEYS, FleetShape, SweepConfig, SweepConfigError, cell_id
from specagent.traces import load_trajectories
from specagent.traces.io import default_workload_path
from specagent.traces.requests import load_requests

class SweepCellError(InputError):
    """A cell that cannot be simulated with its grid values (a model that fits no GPU of the grid, ...); names the cell."""


class SweepFolderError(InputError):
    """The result folder is in use by another sweep, or holds cells of a different config."""



@functools.lru_cache(maxsize=4)
def _episodes(workload: str | None, digest: str | None = None):
    """The workload's episodes, cached per (path, content hash): an edited file is read again."""
    return episodes_of(load_trajectories(workload or default_workload_path()))


def run_cell(cell: dict, fixed: dict) -> dict:
    """Simulate one cell; a flat dict of scalars (the Parquet row)."""
    sc = Scenario.from_dict(fixed["scenario"])
    acc = sc.acceptance if cell["acceptance"] == "default" else sc.acceptance.with_constant(float(cell["acceptance"]))
    sc = sc.replace(k=max(int(cell["k"]), 1), acceptance=acc)
    hw = str(cell["hardware"])
    weak_gpu, strong_gpu = hw.split("+", 1) if "+" in hw else (hw, hw)
    shape = FleetShape(**fixed["fleets"][cell["fleet"]])
    search = fixed.get("search_gpus")
    steady = fixed.get("steady", True)
    n = int(fixed["tasks"])
    # a request trace is served as it is (replayed cyclically past its end: TaskPlan.serve); agent tasks are planned
    # once per cell: steady cells draw at least 1,000 so the window's tasks are not a handful repeated
    if fixed.get("requests"):  # the check plan and replay make, on this cell's Strong deployment
        check_requests_fit(_requests(fixed["requests"], fixed.get("inputs", {}).get("requests")),
                           lambda tokens: sized_deployment(sc.strong, strong_gpu, tokens, search))
    tasks = request_tasks(_requests(fixed["requests"], fixed.get("inputs", {}).get("requests"))) if fixed.get("requests") else \
        plan_tasks(sc.environment.apply(_episodes(fixed["workload"], fixed.get("inputs", {}).get("workload"))), cell["strategy"], sc,
                   max(n, 1000) if steady else n)
    # replicas sized to hold the cell's longest sequence, as plan and replay size them (planner.search_job)
    wdep = sized_deployment(sc.weak, weak_gpu, tasks.max_context, search)
    sdep = sized_deployment(sc.strong, strong_gpu, tasks.max_context, search)

    def build(counts):
        return build_fleet(wdep, sdep, counts[0], counts[1], weight_mode=sc.weight_mode, router=shape.router, prices=fixed["prices"])

    fleet = build((shape.weak_replicas, shape.strong_replicas))
    steady_row: dict = {}
    if steady:  # the fleet at a sustained rate: window, detected warm-up, stability, p95 with its CI
        ref = float(uncontended(tasks, build((None, None)), sc.seed).tasks["latency_s"].quantile(0.95))
        sr = measure_steady(tasks, build, (shape.weak_replicas, shape.strong_replicas), float(cell["rate"]), Metric(95.0, "task"),
                            ref, min_tasks=n, slice_tasks=None, seed=sc.seed)
        summary = sr.summary
        steady_row = sr.as_row("steady_")
    else:  # one burst of `tasks` Poisson arrivals
        summary = tasks.serve(fleet, Arrivals("poisson", float(cell["rate"]), seed=sc.seed).sample(n), float(fixed["warmup"])).summary
    row = {k: cell[k] for k in ("cell_index", "cell_id", *GRID_KEYS)}
    row["acceptance"] = str(row["acceptance"])
    row["hardware"] = hw
    row["weak_price_source"], row["strong_price_source"] = fleet.weak.price_source, fleet.strong.price_source  # type: ignore[union-attr]
    row["weak_gpus_per_replica"], row["strong_gpus_per_replica"] = wdep.gpus, sdep.gpus
    row["gpus_sizing"] = gpus_sizing(search)
    for k, v in {**summary, **steady_row}.items():
        if isinstance(v, (int, float, str, bool)):
            row[k] = v
    return row


@functools.lru_cache(maxsize=2)
def _requests(path: str, digest: str | None = None):
    return load_requests(path)


@dataclass
class SweepReport:
    total: int
    skipped: int
    ran: int
    out_dir: Path


def run_sweep(config: SweepConfig, out_dir: str | Path, backend: str = "local", workers: int = 1, address: str | None = None,
              stop_after: int | None = None, on_done: Callable[[dict], None] | None = None, progress: bool = False,
              force: bool = False) -> SweepReport:
    """Run every cell whose file is missing; `stop_after` stops after that many new cells (an interruption).

    The folder is locked while the sweep runs (`SweepFolderError` if another sweep holds it).
    A folder holding cells that this config does not produce (another config's: a changed
    fixed setting changes every cell's id) is refused, naming what changed, unless `force`,
    which deletes those cells; cells this config shares are kept. On an interruption
    (KeyboardInterrupt) or a failing cell, the cells finished so far are written, the
    workers are stopped at once, and the exception propagates: rerunning resumes.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got '{backend}'")
    out = Path(out_dir)
    cells_dir = out / "cells"
    try:
        created = atomic.make_parents(cells_dir / "cell")  # cells/ and the folders above it that did not exist
    except OSError as exc:
        raise atomic.output_error(cells_dir, exc) from exc
    fixed = {**config.fixed(), "inputs": config.inputs()}
    cells = config.cells()
    try:
        return _run_locked(config, out, fixed, cells, backend, workers, address, stop_after, on_done, progress, force)
    except BaseException:
        if created and not any(cells_dir.glob("*.parquet")):  # a folder this run made and no cell finished: leave nothing
            (out / "config.json").unlink(missing_ok=True)
            atomic.remove_folders(created)
        raise


def _run_locked(config: SweepConfig, out: Path, fixed: dict, cells: list[dict], backend: str, workers: int, address: str | None,
                stop_after: int | None, on_done: Callable[[dict], None] | None, progress: bool, force: bool) -> SweepReport:
    cells_dir = out / "cells"
    with FolderLock(out):
        _adopt_folder(out, config, cells, force)
        todo = [c for c in cells if not (cells_dir / f"{c['cell_id']}.parquet").exists()]
        skipped = len(cells) - len(todo)
        if stop_after is not None:
            todo = todo[:stop_after]
        done = 0

        def finish(row: dict) -> None:
            nonlocal done
            atomic.write_parquet(cells_dir / f"{row['cell_id']}.parquet", pd.DataFrame([row]))
            done += 1
            bar.advance()
            if on_done:
                on_done(row)

        bar = _progress(progress, len(cells), skipped)
        try:  # each cell written as it finishes, so an interrupted sweep keeps them (parallel.run_jobs)
            run_jobs(_run_located, [(c, fixed) for c in todo], backend, max(workers, 1), address, lambda _i, row: finish(row))
        finally:
            bar.close()
    return SweepReport(total=len(cells), skipped=skipped, ran=done, out_dir=out)


def _run_located(cell: dict, fixed: dict) -> dict:
    """run_cell, with a cell's bad-input failure (a model that fits no GPU of the grid, ...) naming the cell."""
    try:
        return run_cell(cell, fixed)
    except ValueError as exc:
        raise SweepCellError(f"cell {cell['cell_index'] + 1} ({', '.join(f'{k}={cell[k]}' for k in GRID_KEYS)}): {exc}") from exc


def config_record(config: SweepConfig) -> dict:
    """What config.json holds: the grid, the fixed settings and the content hashes of the inputs, as plain JSON data."""
    inputs = {**config.inputs(), **{f"hardware.{g}": d for g, d in config.hardware_inputs().items()}}
    gpus = [g for hw in config.grid["hardware"] for g in str(hw).split("+")]
    # and copies of those files (simulator/provenance.py), so the folder says what its cells were priced with
    return json.loads(json.dumps({"grid": config.grid, "fixed": config.fixed(), "inputs": inputs,
                                  "priced_with": record_fleet_inputs(config.scenario, gpus)}, sort_keys=True, default=str))


def _adopt_folder(out: Path, config: SweepConfig, cells: list[dict], force: bool) -> None:
    """Make `out` this config's folder: refuse (or, with `force`, delete) cells of another config; write config.json.

    Extending the grid is fine: every cell already there is one of the new config's.
    Temp files a killed sweep left in cells/ are removed (the lock says no writer is active).
    """
    cells_dir = out / "cells"
    for tmp in cells_dir.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    ids = {c["cell_id"] for c in cells}
    foreign = sorted(p for p in cells_dir.glob("*.parquet") if p.stem not in ids)
    new = config_record(config)
    if foreign and not force:
        raise SweepFolderError(
            f"{out} holds {len(foreign)} cell(s) of a different sweep config ({_what_changed(out / 'config.json', new)}); "
            f"give a new --out folder, or --force to delete those cells and run this config there (a cell is stale when "
            f"the config or the contents of a file it read changed)")
    for p in foreign:
        p.unlink()
    atomic.write_text(out / "config.json", json.dumps(new, sort_keys=True, indent=1))


def _what_changed(path: Path, new: dict) -> str:
    """The settings that differ between the folder's config.json and `new`, as 'key: old -> new' (a few)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{path.name} is missing, so what changed is unknown"
    except (OSError, ValueError) as exc:
        return f"{path.name} cannot be read: {exc}"
    a, b = _flatten(old), _flatten(new)
    diffs = [f"{k}: {_short(a.get(k, '(none)'))} -> {_short(b.get(k, '(none)'))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    more = f"; and {len(diffs) - 4} more" if len(diffs) > 4 else ""
    return "changed " + "; ".join(diffs[:4]) + more if diffs else "the same settings, but cells that are not this config's"


def _flatten(d: object, prefix: str = "") -> dict[str, object]:
    if isinstance(d, dict) and d:
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def _short(v: object) -> str:
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."


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


__all__ = ["SweepConfig", "SweepConfigError", "SweepFolderError", "SweepCellError", "run_sweep", "run_cell", "load_sweep", "cell_id", "BACKENDS",
           "STRATEGY_NAMES"]
