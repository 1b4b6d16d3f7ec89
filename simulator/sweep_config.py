"""The sweep config: the grid of cells and the settings they all share, read and checked once (sweep.py runs it).

A cell is one (strategy, K, acceptance, rate, fleet, hardware) combination; its id hashes the
cell, the fixed settings and the contents of every file it reads, so an edited input gets new cells.

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

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specagent.common.paths import check_input_file
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.hardware.serving_engine import DEFAULT_ENGINE, EngineProfileError, load_engine
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.capacity.fleet_build import PlainServing, parse_gpu_counts
from specagent.simulator.fleet.config import ROUTERS, WARMUP_SHARE
from specagent.simulator.scenario import SHIPPED, Scenario, ScenarioError
from specagent.simulator.strategies.catalog import strategy_entry
from specagent.traces.io import default_workload_path
from specagent.traces.schema import MAX_STEPS

GRID_KEYS = ("strategy", "k", "acceptance", "rate", "fleet", "hardware")
#: [sweep] keys that override the scenario, and the scenario field each sets.
SCENARIO_KEYS = {"seed": "seed", "weak_model": "weak.model", "weak_dtype": "weak.weight_dtype", "strong_model": "strong.model",
                 "strong_dtype": "strong.weight_dtype"}


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
    #: [sweep].search_gpus: GPUs per replica to search (the fewest that fit); absent: the scenario's, as given
    search_gpus: tuple[int, ...] | None = None

    @classmethod
    def from_toml(cls, path: str | Path, scenario: str | Path | None = None, hardware: str | None = None) -> "SweepConfig":
        """A sweep config file; `scenario` (a file or a shipped name) stands for its [sweep].scenario, `hardware` (a GPU
        type or WEAK+STRONG: the command line's --weak-hardware/--strong-hardware) for its [grid].hardware."""
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
        return cls.from_dict(data, str(p))

    @classmethod
    def from_dict(cls, data: dict, where: str = "<config>") -> "SweepConfig":
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
            return cls(grid=g, fleets=fleets, scenario=scenario, **own)
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
            out["requests"] = file_digest(self.requests)
        else:
            out["workload"] = file_digest(self.workload or default_workload_path())
        for role in ("weak", "strong"):
            spec = getattr(sc, role)
            try:
                out[f"{role}_model"] = file_digest(load_model_spec(spec.model).source)
                eng = load_engine(spec.serving_engine or DEFAULT_ENGINE)
            except (ModelSpecError, EngineProfileError) as exc:
                raise SweepConfigError(f"[scenario] {role}: {exc}") from None
            out[f"{role}_engine"] = file_digest(eng.path) if eng.path else eng.id
        return out

    def hardware_inputs(self) -> dict[str, str]:
        """Content hash of each GPU profile the grid names (only the cells on that GPU read it)."""
        out: dict[str, str] = {}
        for hw in self.grid["hardware"]:
            for gpu in str(hw).split("+"):
                if gpu not in out:
                    try:
                        out[gpu] = file_digest(load_hardware(gpu).path)
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


def file_digest(path: str | Path) -> str:
    """The first 16 hex digits of a file's SHA-256 (what a cell id hashes for a file it reads)."""
    p = check_input_file(path, SweepConfigError, "an input of the sweep")
    h = hashlib.sha256()
    try:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise SweepConfigError(f"{p}: cannot read an input of the sweep ({exc.strerror})") from None
    return h.hexdigest()[:16]


def cell_id(cell: dict, fixed: dict, hardware: dict | None = None) -> str:
    """A readable prefix plus a hash of everything the cell's result depends on (`hardware`: its GPU profiles' digests)."""
    body = json.dumps({"cell": {k: cell[k] for k in GRID_KEYS}, "fixed": fixed, **({"hardware": hardware} if hardware else {})},
                      sort_keys=True, default=str)
    h = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{cell['strategy']}_k{cell['k']}_{h}"



__all__ = ["SweepConfig", "SweepConfigError", "FleetShape", "GRID_KEYS", "SCENARIO_KEYS", "cell_id", "file_digest"]
