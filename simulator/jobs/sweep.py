"""The sweep job: a grid of fleet simulations, one Parquet file per cell, resumable, on a process pool or Ray.

A cell is one (strategy, K, acceptance, rate, fleet, hardware) combination; its result is a
pure function of the cell and the sweep's fixed settings (every random draw is seeded from
them), so the local and Ray backends produce identical rows, and an interrupted sweep
resumes by skipping cells whose file exists. Only the driver writes files, each atomically
(common.atomic), so a kill never leaves a half-written cell that would be skipped. A cell's
id hashes the cell, the fixed settings and the contents of every file it reads, so an
edited input gets new cells. The folder lock is common/folder_lock.py.

`SweepRequest` is the sweep: its grid, fleets and fixed settings (what the config file's
tables say; `read()` fills them from `config`, the TOML file) and how it runs (workers,
backend, a Ray cluster, `force`); `run(request, out)` runs it into a folder and returns a
`SweepResult`. `specagent sweep CONFIG` generates its flags from the Request and prints.

Config (TOML):

    [sweep]
    workload = "traces/data/tau2_airline.jsonl"   # optional; the shipped τ²-airline by default
    requests = "requests.csv"  # optional instead: a plain serving request trace (strategy "serving", Strong pool)
    tasks = 200          # steady: at least this many tasks measured per cell; burst: tasks per cell
    steady = true        # measure each cell in steady state (simulator/capacity/steady_state.py); false: one burst of `tasks`
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

import dataclasses
import functools
import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.folder_lock import FolderLock
from specagent.common.paths import check_input_file, file_sha256
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.hardware.serving_engine import DEFAULT_ENGINE, EngineProfileError, load_engine
from specagent.simulator.capacity.fleet_build import (
    PlainServing, build_fleet, check_requests_fit, episodes_of, gpus_sizing, parse_gpu_counts, plan_tasks, request_tasks,
    sized_deployment,
)
from specagent.simulator.capacity.steady_state import Metric, measure_steady, uncontended
from specagent.simulator.fleet.config import ROUTERS, WARMUP_SHARE, Arrivals
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, chosen_backend, report
from specagent.simulator.parallel import MAX_WORKERS, run_jobs
from specagent.simulator.provenance import record_fleet_inputs
from specagent.simulator.scenario import SHIPPED, Scenario, ScenarioError
from specagent.simulator.strategies.catalog import strategy_entry
from specagent.traces import load_trajectories
from specagent.traces.io import default_workload_path
from specagent.traces.requests import load_requests
from specagent.traces.schema import MAX_STEPS

GRID_KEYS = ("strategy", "k", "acceptance", "rate", "fleet", "hardware")
#: [sweep] keys that override the scenario, and the scenario field each sets.
SCENARIO_KEYS = {"seed": "seed", "weak_model": "weak.model", "weak_dtype": "weak.weight_dtype", "strong_model": "strong.model",
                 "strong_dtype": "strong.weight_dtype"}


#: SweepRequest fields that say where the sweep is read from and how it runs (not what a cell computes).
RUN_FIELDS = ("config", "scenario_file", "weak_hardware", "strong_hardware", "workers", "backend", "ray_address", "force",
              "provenance")


class SweepConfigError(InputError):
    """A sweep config that cannot be run; the message names the file and field."""



@dataclass(frozen=True)
class FleetShape:
    weak_replicas: int = 1
    strong_replicas: int = 1
    router: str = "session_affinity"


#: Help of the per-pool GPU flags: each replaces [grid].hardware with one pairing.
POOL_HARDWARE_HELP = ("{role}: GPU profile (id, alias or .toml path) for every cell, replacing [grid].hardware with one "
                      "pairing (the other pool: {other}, or {default}).")


@dataclass(frozen=True)
class SweepRequest(Request):
    """A sweep: the grid and the settings every cell shares (the config file's tables), and how it runs.

    The grid, fleets and fixed settings come from a config file (`config`, read by `read()`; or
    `from_toml` / `from_dict`) or are given directly; their defaults here are the config's."""

    grid: Mapping[str, list] = field(default_factory=dict, metadata={"cli": False})
    fleets: Mapping[str, FleetShape] = field(default_factory=dict, metadata={"cli": False})
    workload: str | None = field(default=None, metadata={"cli": False})
    tasks: int = field(default=200, metadata={"cli": False})
    warmup: float = field(default=WARMUP_SHARE, metadata={"cli": False})
    steady: bool = field(default=True, metadata={"cli": False})
    requests: str | None = field(default=None, metadata={"cli": False})
    prices: Mapping[str, float] = field(default_factory=dict, metadata={"cli": False})
    #: [sweep].search_gpus: GPUs per replica to search (the fewest that fit); absent: the scenario's, as given
    search_gpus: tuple[int, ...] | None = field(default=None, metadata={"cli": False})
    # -- where the sweep is read from
    config: Path | None = field(default=None, metadata={"argument": True, "required": True, "help": (
        "Sweep config TOML: [sweep] fixed settings (its scenario: [sweep].scenario = FILE or a [scenario] table), [grid] "
        "lists, [fleet.NAME] replica counts.")})
    scenario_file: Path | None = field(default=None, metadata={"flag": "scenario", "help": (
        "Scenario TOML file (or a shipped one: default, edge) for every cell, when the config names none; [sweep]'s "
        "seed/model/dtype keys override it.")})
    weak_hardware: str | None = field(default=None, metadata={"help": POOL_HARDWARE_HELP.format(
        role="Weak", other="--strong-hardware", default=Scenario.weak.hardware)})
    strong_hardware: str | None = field(default=None, metadata={"help": POOL_HARDWARE_HELP.format(
        role="Strong", other="--weak-hardware", default=Scenario.strong.hardware)})
    # -- how it runs
    workers: int = field(default=1, metadata={"help": "Parallel cells (processes for local, CPUs for a local Ray instance)."})
    backend: str | None = field(default=None, metadata={"help": (
        "local (a process pool) or ray; default: ray when --ray-address is given, else local (--workers processes).")})
    ray_address: str | None = field(default=None, metadata={"short": ("--address",), "help": (
        "A Ray cluster to run the searches on: the HOST:PORT `ray start --head` prints, ray://HOST:PORT (Ray Client) or "
        "auto (docs/capacity-planning.md). Implies --backend ray.")})
    force: bool = field(default=False, metadata={"help": (
        "Run into a folder holding another config's cells: delete those cells (the ones this config shares are kept).")})

    def check(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise JobError(f"expected a count in [1, {MAX_WORKERS}], got {self.workers}", field="workers")
        self.chosen_backend()
        for name in ("weak_hardware", "strong_hardware"):
            if getattr(self, name) is not None:
                try:
                    load_hardware(getattr(self, name))
                except HardwareProfileError as exc:
                    raise JobError(str(exc), field=name) from None
        if not self.grid and self.config is None:
            raise JobError("a sweep needs a config file (or a grid)", field="config")

    def chosen_backend(self) -> str:
        """`backend` as given, or ray when a cluster address is given, else local; the address's form checked."""
        return chosen_backend(self.backend, self.ray_address, "ray_address")

    def pairing(self) -> str | None:
        """The one GPU pairing `weak_hardware` / `strong_hardware` give every cell (the other pool: the default
        scenario's), as [grid].hardware spells it (WEAK+STRONG, or one GPU for both); None when neither is given."""
        if self.weak_hardware is None and self.strong_hardware is None:
            return None
        w, s_ = self.weak_hardware or Scenario.weak.hardware, self.strong_hardware or Scenario.strong.hardware
        return w if w == s_ else f"{w}+{s_}"

    def read(self) -> "SweepRequest":
        """This request with the grid, fleets, fixed settings and scenario of its config file (`scenario_file`
        standing for its [sweep].scenario, the per-pool GPUs for its [grid].hardware); itself when it names none."""
        if self.config is None:
            return self
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in RUN_FIELDS}
        return SweepRequest.from_toml(self.config, self.scenario_file, self.pairing(), **own)

    @classmethod
    def from_toml(cls, path: str | Path, scenario: str | Path | None = None, hardware: str | None = None,
                  **fields: Any) -> "SweepRequest":
        """A sweep config file; `scenario` (a file or a shipped name) stands for its [sweep].scenario, `hardware` (a GPU
        type or WEAK+STRONG: the command line's --weak-hardware/--strong-hardware) for its [grid].hardware; `fields`:
        the request's other fields (how it runs)."""
        p = check_input_file(path, SweepConfigError, "sweep config")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8").removeprefix("\ufeff"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SweepConfigError(f"{p}: cannot read sweep config: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise SweepConfigError(f"{p}: cannot read sweep config: not UTF-8 text (byte {exc.start})") from None
        except RecursionError:
            raise SweepConfigError(f"{p}: cannot read sweep config: nested too deeply") from None
        if scenario is not None:
            if "scenario" in data or "scenario" in data.get("sweep", {}):
                raise SweepConfigError(f"{p} names its own scenario; give --scenario or that, not both")
            name = str(scenario)
            data.setdefault("sweep", {})["scenario"] = name if name in SHIPPED else str(Path(name).resolve())
        if hardware is not None and isinstance(data.get("grid"), dict):
            data["grid"]["hardware"] = [hardware]
        return cls.from_dict(data, str(p), **fields)

    @classmethod
    def from_dict(cls, data: dict, where: str = "<config>", **fields: Any) -> "SweepRequest":
        """A sweep from a config's tables (`where` names it in errors); `fields`: the request's other fields."""
        _check_values(data, where)
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
        fleets = {}
        for name, t in data.get("fleet", {}).items():
            try:
                fs = FleetShape(**t)
            except TypeError as exc:
                raise SweepConfigError(f"{where}: [fleet.{name}]: {exc} (fields: weak_replicas, strong_replicas, router)") from exc
            fleets[name] = fs
        for f in g["fleet"]:
            if f not in fleets:
                raise SweepConfigError(f"{where}: [grid].fleet names '{f}' but there is no [fleet.{f}] table")
        allowed = {"workload", "tasks", "warmup", "prices", "scenario", "steady", "requests", "search_gpus", *SCENARIO_KEYS}
        bad = set(sw) - allowed
        if bad:
            raise SweepConfigError(f"{where}: [sweep] has unknown key(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        if not isinstance(sw.get("steady", True), bool):
            raise SweepConfigError(f"{where}: [sweep].steady must be true or false, got {sw['steady']!r}")
        if "requests" in sw and not (isinstance(sw["requests"], str) and Path(sw["requests"]).is_file()):
            raise SweepConfigError(f"{where}: [sweep].requests must name a request trace file (CSV, or a vllm bench serve dataset: .json / .jsonl), got {sw['requests']!r}")
        own = {k: v for k, v in sw.items() if k not in SCENARIO_KEYS and k != "scenario"}
        if "search_gpus" in own:
            try:
                own["search_gpus"] = parse_gpu_counts(own["search_gpus"]) if isinstance(own["search_gpus"], list) else \
                    parse_gpu_counts([own["search_gpus"]] if not isinstance(own["search_gpus"], str) else own["search_gpus"])
            except ValueError as exc:
                raise SweepConfigError(f"{where}: [sweep].search_gpus: {exc}") from None
        try:
            scenario = _scenario(data, sw, where)
            return cls(grid=g, fleets=fleets, scenario=scenario, **own, **fields)
        except ScenarioError as exc:
            raise SweepConfigError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from exc
        except TypeError as exc:
            raise SweepConfigError(f"{where}: [sweep]: {exc}") from exc

    def fixed(self) -> dict:
        """Everything but the grid, as plain data: what every cell's result depends on (and its id hashes)."""
        d = {f: getattr(self, f) for f in ("workload", "tasks", "warmup", "prices", "steady", "requests")}
        d["search_gpus"] = list(self.search_gpus) if self.search_gpus else None  # None: the scenario's GPUs per replica
        d["fleets"] = {k: asdict(v) for k, v in self.fleets.items()}
        d["scenario"] = self.scenario.to_dict()
        return d

    def inputs(self) -> dict:
        """Content hashes of every file all cells read (workload or requests, model configs, serving engines).

        Why: a cell's file name must change when what it was computed from changes, not only its path;
        an edited trace under the same name would otherwise resume with cells of the old one."""
        sc = self.scenario
        out: dict[str, str] = {}
        if self.requests:
            out["requests"] = short_digest(self.requests)
        else:
            out["workload"] = short_digest(self.workload or default_workload_path())
        for role in ("weak", "strong"):
            spec = getattr(sc, role)
            try:
                out[f"{role}_model"] = short_digest(load_model_spec(spec.model).source)
                eng = load_engine(spec.serving_engine or DEFAULT_ENGINE)
            except (ModelSpecError, EngineProfileError) as exc:
                raise SweepConfigError(f"[scenario] {role}: {exc}") from None
            out[f"{role}_engine"] = short_digest(eng.path) if eng.path else eng.id
        return out

    def hardware_inputs(self) -> dict[str, str]:
        """Content hash of each GPU profile the grid names (only the cells on that GPU read it)."""
        out: dict[str, str] = {}
        for hw in self.grid["hardware"]:
            for gpu in str(hw).split("+"):
                if gpu not in out:
                    try:
                        out[gpu] = short_digest(load_hardware(gpu).path)
                    except HardwareProfileError as exc:
                        raise SweepConfigError(f"[grid].hardware: {exc}") from None
        return out

    def cells(self) -> list[dict]:
        """The grid in a fixed order; K collapses to 0 for strategies that have no K.

        A cell's id hashes the cell, the fixed settings, the contents of the files every cell reads
        and of the GPU profiles this cell reads: edit one profile and exactly its cells get new ids."""
        fixed = {**self.fixed(), "inputs": self.inputs()}
        hw_digest = self.hardware_inputs()
        out, seen = [], set()
        for combo in itertools.product(*(self.grid[k] for k in GRID_KEYS)):
            cell = dict(zip(GRID_KEYS, combo))
            if cell["strategy"] == PlainServing.name or not strategy_entry(cell["strategy"]).takes_k:
                cell["k"] = 0
            key = json.dumps(cell, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            gpus = str(cell["hardware"]).split("+")
            cell["cell_id"] = cell_id(cell, fixed, {g: hw_digest[g] for g in gpus})
            cell["cell_index"] = len(out)
            out.append(cell)
        return out


#: Guards against a typo, not limits of the method: every cell simulates its tasks (10^6 take minutes), a fleet of
#: 100,000 replicas per pool is the planner's own search limit, and 10^6 tasks/s arrive faster than any fleet here serves.
MAX_CELL_TASKS = 1_000_000
MAX_REPLICAS = 100_000
MAX_RATE = 1e6


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_values(data: dict, where: str) -> None:
    """Types and ranges of a config's values, before anything is built from them; a failure names file, table and key."""
    def bad(key: str, expected: str, got: object) -> SweepConfigError:
        return SweepConfigError(f"{where}: {key}: expected {expected}, got {got!r}")

    for table in ("sweep", "grid", "fleet", "scenario"):
        if table in data and not isinstance(data[table], dict):
            raise bad(f"[{table}]", "a table", data[table])
    sw = data.get("sweep", {})
    if "tasks" in sw and not (_is_int(sw["tasks"]) and 1 <= sw["tasks"] <= MAX_CELL_TASKS):
        raise bad("[sweep].tasks", f"a whole number of tasks in [1, {MAX_CELL_TASKS:,}]", sw["tasks"])
    if "warmup" in sw and not (_is_real(sw["warmup"]) and 0 <= sw["warmup"] < 1):
        raise bad("[sweep].warmup", "a share of the tasks in [0, 1)", sw["warmup"])
    prices = sw.get("prices", {})
    if not isinstance(prices, dict):
        raise bad("[sweep].prices", "a table of GPU = USD per GPU-hour", prices)
    for gpu, usd in prices.items():
        if not (_is_real(usd) and usd >= 0):
            raise bad(f"[sweep].prices.{gpu}", "USD per GPU-hour, a finite number >= 0", usd)
    if "workload" in sw:
        w = sw["workload"]
        if not (isinstance(w, str) and w):
            raise bad("[sweep].workload", "the path of a trace file", w)
        if not Path(w).is_file():
            raise bad("[sweep].workload", "the path of a trace file (relative to the current folder)", w)
    if "scenario" in sw and not (isinstance(sw["scenario"], str) and sw["scenario"]):
        raise bad("[sweep].scenario", "a scenario file or a shipped scenario's name", sw["scenario"])
    grid = data.get("grid", {})
    for key, ok, expected in (
        ("strategy", lambda v: isinstance(v, str), "strategy names"),
        ("k", lambda v: _is_int(v) and 1 <= v <= MAX_STEPS, f"whole numbers of steps in [1, {MAX_STEPS:,}]"),
        ("acceptance", lambda v: v == "default" or (_is_real(v) and 0 <= v <= 1), "\"default\" or probabilities in [0, 1]"),
        ("rate", lambda v: _is_real(v) and 0 < v <= MAX_RATE, f"tasks per second in (0, {MAX_RATE:,.0f}]"),
        ("fleet", lambda v: isinstance(v, str), "names of [fleet.NAME] tables"),
        ("hardware", lambda v: isinstance(v, str) and v, "GPU types (or WEAK+STRONG)"),
    ):
        for v in grid.get(key, []) if isinstance(grid.get(key), list) else []:
            if not ok(v):
                raise bad(f"[grid].{key}", f"a list of {expected}", v)
    for hw in grid.get("hardware", []) if isinstance(grid.get("hardware"), list) else []:
        for gpu in hw.split("+", 1):
            try:
                load_hardware(gpu)
            except HardwareProfileError as exc:
                raise SweepConfigError(f"{where}: [grid].hardware: {exc}") from None
    for name, t in data.get("fleet", {}).items():
        if not isinstance(t, dict):
            raise bad(f"[fleet.{name}]", "a table of weak_replicas, strong_replicas, router", t)
        for key in ("weak_replicas", "strong_replicas"):
            if key in t and not (_is_int(t[key]) and 1 <= t[key] <= MAX_REPLICAS):
                raise bad(f"[fleet.{name}].{key}", f"a whole number of replicas in [1, {MAX_REPLICAS:,}]", t[key])
        if "router" in t and t["router"] not in ROUTERS:
            raise bad(f"[fleet.{name}].router", f"one of {', '.join(ROUTERS)}", t["router"])


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


def short_digest(path: str | Path) -> str:
    """The first 16 hex digits of a file's SHA-256 (what a cell id hashes for a file it reads)."""
    p = check_input_file(path, SweepConfigError, "an input of the sweep")
    try:
        return file_sha256(p)[:16]
    except OSError as exc:
        raise SweepConfigError(f"{p}: cannot read an input of the sweep ({exc.strerror})") from None


def cell_id(cell: dict, fixed: dict, hardware: dict | None = None) -> str:
    """A readable prefix plus a hash of everything the cell's result depends on (`hardware`: its GPU profiles' digests)."""
    body = json.dumps({"cell": {k: cell[k] for k in GRID_KEYS}, "fixed": fixed, **({"hardware": hardware} if hardware else {})},
                      sort_keys=True, default=str)
    h = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{cell['strategy']}_k{cell['k']}_{h}"



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
class SweepResult(Result):
    """What a sweep run did (cells in the grid, already done, run now) and where its cells are."""

    total: int
    skipped: int
    ran: int
    out_dir: Path

    def to_dict(self) -> dict[str, Any]:
        """The run's counts, as `specagent sweep --json` prints them."""
        return {"cells": self.total, "skipped_existing": self.skipped, "ran": self.ran, "out": str(self.out_dir)}

    def rows(self) -> pd.DataFrame:
        """Every finished cell in the folder, in grid order (one row each)."""
        return load_sweep(self.out_dir)

    def table(self) -> pd.DataFrame:
        """The summary rows of the finished cells (`sweep_table`)."""
        rows = self.rows()
        return sweep_table(rows) if len(rows) else rows

    def write(self, folder: str | Path) -> list[Path]:
        """sweep.parquet in `folder`: every finished cell in grid order, one file, atomically (the cells themselves
        are written as they finish, under `out_dir`/cells: a rerun resumes from them)."""
        path = Path(folder) / "sweep.parquet"
        atomic.write_parquet(path, self.rows())
        return [path]


def default_folder(request: SweepRequest) -> Path:
    """Where a sweep of a config file runs when no folder is given: beside it, its name + '_results'."""
    if request.config is None:
        raise JobError("a sweep given without a config file needs an output folder", field="config")
    return Path(request.config).with_name(Path(request.config).stem + "_results")


def run(request: SweepRequest, out: str | Path | None = None, progress: Progress | None = None, stop_after: int | None = None,
        on_done: Callable[[dict], None] | None = None) -> SweepResult:
    """Run every cell of `request` whose file is missing in `out` (default: `default_folder`); `stop_after` stops after
    that many new cells (an interruption); `on_done(row)` sees each cell's row as it finishes.

    The folder is locked while the sweep runs (`SweepFolderError` if another sweep holds it).
    A folder holding cells that this config does not produce (another config's: a changed
    fixed setting changes every cell's id) is refused, naming what changed, unless `force`,
    which deletes those cells; cells this config shares are kept. On an interruption
    (KeyboardInterrupt) or a failing cell, the cells finished so far are written, the
    workers are stopped at once, and the exception propagates: rerunning resumes.
    """
    request.check()
    config = request.read()
    config.check()
    folder = Path(out) if out is not None else default_folder(request)
    cells_dir = folder / "cells"
    try:
        created = atomic.make_parents(cells_dir / "cell")  # cells/ and the folders above it that did not exist
    except OSError as exc:
        raise atomic.output_error(cells_dir, exc) from exc
    try:
        try:
            fixed = {**config.fixed(), "inputs": config.inputs()}
            return _run_locked(config, folder, fixed, config.cells(), stop_after, on_done, progress)
        except SweepCellError as exc:
            raise SweepCellError(f"{request.config}: {exc}" if request.config is not None else str(exc)) from exc
    except BaseException:  # the renamed cell error too: a sibling `except` would not see it
        if created and not any(cells_dir.glob("*.parquet")):  # a folder this run made and no cell finished: leave nothing
            (folder / "config.json").unlink(missing_ok=True)
            atomic.remove_folders(created)
        raise


def _run_locked(config: SweepRequest, out: Path, fixed: dict, cells: list[dict], stop_after: int | None,
                on_done: Callable[[dict], None] | None, progress: Progress | None) -> SweepResult:
    cells_dir = out / "cells"
    with FolderLock(out):
        _adopt_folder(out, config, cells, config.force)
        todo = [c for c in cells if not (cells_dir / f"{c['cell_id']}.parquet").exists()]
        skipped = len(cells) - len(todo)
        if stop_after is not None:
            todo = todo[:stop_after]
        done = 0
        report(progress, "sweep", skipped, len(cells))

        def finish(row: dict) -> None:
            nonlocal done
            atomic.write_parquet(cells_dir / f"{row['cell_id']}.parquet", pd.DataFrame([row]))
            done += 1
            report(progress, "sweep", skipped + done, len(cells))
            if on_done:
                on_done(row)

        # each cell written as it finishes, so an interrupted sweep keeps them (parallel.run_jobs)
        run_jobs(_run_located, [(c, fixed) for c in todo], config.chosen_backend(), max(config.workers, 1), config.ray_address,
                 lambda _i, row: finish(row))
    return SweepResult(total=len(cells), skipped=skipped, ran=done, out_dir=out)


def _run_located(cell: dict, fixed: dict) -> dict:
    """run_cell, with a cell's bad-input failure (a model that fits no GPU of the grid, ...) naming the cell."""
    try:
        return run_cell(cell, fixed)
    except ValueError as exc:
        raise SweepCellError(f"cell {cell['cell_index'] + 1} ({', '.join(f'{k}={cell[k]}' for k in GRID_KEYS)}): {exc}") from exc


def config_record(config: SweepRequest) -> dict:
    """What config.json holds: the grid, the fixed settings and the content hashes of the inputs, as plain JSON data."""
    inputs = {**config.inputs(), **{f"hardware.{g}": d for g, d in config.hardware_inputs().items()}}
    gpus = [g for hw in config.grid["hardware"] for g in str(hw).split("+")]
    # and copies of those files (simulator/provenance.py), so the folder says what its cells were priced with
    return json.loads(json.dumps({"grid": config.grid, "fixed": config.fixed(), "inputs": inputs,
                                  "priced_with": record_fleet_inputs(config.scenario, gpus)}, sort_keys=True, default=str))


def _adopt_folder(out: Path, config: SweepRequest, cells: list[dict], force: bool) -> None:
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


def load_sweep(out_dir: str | Path) -> pd.DataFrame:
    """Every finished cell, in grid order."""
    files = sorted((Path(out_dir) / "cells").glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return df.sort_values("cell_index").reset_index(drop=True)


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
