"""The plan job: the cheapest fleet that meets a latency SLO at a sustained arrival rate, per strategy.

A `PlanRequest` is what `specagent plan` takes, in the same words (``rate="0.5/s..8/s"``,
``slo="p95-task=300s"``, ``price=("h20=1.85",)``): every default lives here, the CLI generates its
flags from the fields, and a bad value raises a `JobError` naming the field. `run(request)` is the
whole job, for the CLI and for a Python caller alike:

1. the workload: the scenario's trajectories, a request trace (`requests`), or one given in memory (`workload`);
2. one search per strategy, GPU pairing and rate (`search_keys`), each a `plan_search.CapacitySearch`, run on a
   process pool or Ray (`plan_capacity`); with an output folder each finished search is kept on disk as it ends
   (`plan_store.py`) and a rerun of the same request reuses it; ^C raises `PlanInterrupted`, the kept searches on
   disk;
3. with a `progress` callback: what the plan will do, its wall-time estimate from a probe of this machine now
   (`plan_estimate.py`), a live line inside each search at least every few seconds (`plan_progress.py`) and one as
   each search ends.

The result (`PlanResult`) is the table of fleets found, the cheapest per strategy and rate, every candidate
measured, the prices used and notes; `to_dict()` is plan.json, `write(folder)` writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from specagent.common import atomic
from specagent.common.guard import check_output
from specagent.common.paths import file_sha256
from specagent.common.redact import Redactor
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.capacity.fleet_build import (
    build_fleet, check_requests_fit, episodes_of, gpus_sizing, parse_gpu_counts, plan_tasks, request_tasks, sized_deployment,
)
from specagent.simulator.capacity.bounds import pool_capacity, pool_work
from specagent.simulator.capacity.steady_state import SLICE_TASKS, unit_arrivals
from specagent.simulator.fleet import FLEET_BACKEND
from specagent.simulator.fleet.config import STRONG_POOL, WEAK_POOL, Scheduler, engine_scheduler, resolve_price
from specagent.simulator.jobs import plan_store
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, Step, chosen_backend
from specagent.simulator.jobs.plan_estimate import PlanEstimate, duration, estimate_plan
from specagent.simulator.jobs.plan_progress import HeartbeatPrinter
from specagent.simulator.jobs.plan_search import SIZE_ON, SLO, SearchKey, pairing, search_job
from specagent.simulator.parallel import MAX_WORKERS, default_workers, run_jobs
from specagent.simulator.provenance import record_fleet_inputs
from specagent.simulator.rates_prices import parse_prices, parse_rates, unused_prices
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.strategies.catalog import STRATEGY_NAMES
from specagent.traces.io import default_workload_path
from specagent.traces.requests import RequestTrace, load_requests

#: The GPU types a plan searches when none is given, each for both pools.
DEFAULT_GPUS = ("h20", "h200")
#: Guards against typos, not limits of the method (a plan at 1000 tasks/s measures ~10^5 tasks per candidate).
MAX_PLAN_TASKS = 10_000_000
MAX_PLAN_REPLICAS = 1_000_000
MAX_PLAN_RATE = 1e6  # tasks per second
MAX_PLAN_POINTS = 1000
#: The scenario fields that, given (on the command line: --weak-hardware, --strong-hardware, --hardware), fix one pairing.
PER_POOL = ("weak.hardware", "strong.hardware")
#: The scenario's fields plan chooses itself (the strategies) or does not read; it takes each pool's GPU type
#: (`weak.hardware`, `strong.hardware`) as predict does: given, they fix one pairing (one search) instead of searching.
NOT_READ = ("strategies", "pricing_engine", "strong_api")
#: Tasks the speed probe serves (`probe_speed`): a second or two of simulation on the project's 2-core machine.
PROBE_TASKS = 200
METHOD = ("steady-state windows (simulator/capacity/steady_state.py); search from the analytic bound "
          "(simulator/capacity/bounds.py, simulator/jobs/plan_search.py)")


def _items(v: str | Sequence[str]) -> tuple[str, ...]:
    """A list field's values: a tuple as given, or one text of comma-separated values."""
    return tuple(s.strip() for item in ((v,) if isinstance(v, str) else v) for s in str(item).split(",") if s.strip())


def _blank(v: str | Sequence[str]) -> str | None:
    """The first value given blank ('' or only commas: a mistake, never 'the default'), if any."""
    return next((str(x) for x in ((v,) if isinstance(v, str) else v) if not str(x).replace(",", "").strip()), None)


def _whole(name: str, value: Any, lo: int, hi: int) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi):
        raise JobError(f"expected a whole number in [{lo:,}, {hi:,}], got {value}", name)


@dataclass(frozen=True)
class PlanRequest(Request):
    """What to plan for: one or more rates and an SLO, the GPU types to try, and the scenario (models, dtypes, GPUs per
    replica, K, acceptance, seed); `requests` plans a plain serving fleet for a request trace instead of agent
    strategies. Text fields are read as the command line reads them; the parsed values are properties (`rates`,
    `objective`, `strategies`, `gpus`, `pairings`, `prices`, `gpu_counts`, `worker_count`, `backend_name`).

    The scenario's deployments give each pool its model, storage dtypes, GPUs per replica and parallelism, as given;
    the search chooses the GPU type (from `gpu`) and, only when `search_gpus` is set, the GPUs per replica (the fewest
    of them that fit)."""

    #: text as on the command line, or a number (or numbers) of tasks/s
    rate: str = field(default="", metadata={"required": True, "help": (
        "Arrival rate of tasks (Poisson): one (2/s, 120/min), a list (2/s,50/s,1000/s) or a range LO..HI (0.5/s..1000/s, "
        "--points rates log-spaced): several rates draw a capacity curve.")})
    points: int = field(default=6, metadata={"help": "Rates in a LO..HI range."})
    slo: str = field(default="p95-task=300s", metadata={"help": (  # text, or an SLO
        "Latency objective: pNN-task=SECONDS (end-to-end task) or pNN-turn=SECONDS (one agent turn between user "
        "messages). The shipped τ²-airline tasks take about 130 s at p95 with no contention at all; an SLO below what "
        "tasks take alone is reported as infeasible.")})
    strategy: tuple[str, ...] = field(default=("strongonly", "specagent"), metadata={
        "help": "Comma-separated strategies to size a fleet for."})
    gpu: tuple[str, ...] = field(default=(), metadata={"help": (
        f"Comma-separated GPU types to search, each for both pools (hardware profile ids or aliases) [default: "
        f"{','.join(DEFAULT_GPUS)}]; --weak-hardware/--strong-hardware instead fix one pairing: one search.")})
    price: tuple[str, ...] = field(default=(), metadata={"help": (
        "$/GPU-hour per GPU type, one or a comma list: --price h20=1.85,h200=3.5 (overrides the profile's sourced "
        "price; needed where a profile has none). `specagent hardware list` shows the defaults.")})
    n_tasks: int = field(default=1000, metadata={"flag": "tasks", "help": (
        "At least this many tasks measured per candidate fleet (the window is longer when the rate and the percentile "
        "need it).")})
    requests: Path | None = field(default=None, metadata={"help": (
        "Plan a plain LLM serving fleet instead: a request trace CSV (arrival time, prompt tokens, output tokens; Vidur "
        "and Azure trace headers accepted) or a vllm bench serve dataset (.json / .jsonl: ShareGPT, custom, a saved "
        "result) served by the Strong deployment, requests resampled in order at --rate.")})
    mix_gpus: bool = field(default=False, metadata={"help": "Also try Weak and Strong pools on different GPU types."})
    #: text as on the command line ("1,2,4,8"), or a sequence of counts
    search_gpus: str | None = field(default=None, metadata={"help": (
        "GPUs per replica to search, e.g. 1,2,4,8: each pool gets the fewest that hold the longest context (default: "
        "the scenario's --weak-gpus / --strong-gpus, as given).")})
    max_replicas: int = field(default=100_000, metadata={"help": "Largest replica count per pool the search tries."})
    slice_tasks: int = field(default=SLICE_TASKS, metadata={"help": (
        "A fleet whose window holds more arrivals is simulated as a slice of about this many (0: always the whole "
        "fleet).")})
    slice_replicas: int = field(default=1, metadata={"help": "A slice keeps at least this many replicas of its smallest pool."})
    workers: int = field(default=0, metadata={"help": "Searches run in parallel (0: one per CPU)."})
    backend: str | None = field(default=None, metadata={"help": (
        "local (a process pool) or ray; default: ray when --ray-address is given, else local (--workers processes).")})
    address: str | None = field(default=None, metadata={"flag": "ray-address", "short": ("--address",), "help": (
        "A Ray cluster to run the searches on: the HOST:PORT `ray start --head` prints, ray://HOST:PORT (Ray Client) or "
        "auto (docs/capacity-planning.md). Implies --backend ray.")})
    size_on: str = field(default="point", metadata={"help": (
        "What must be within the SLO: point (the percentile's estimate) or ci-high (the upper end of its 95% CI: a "
        "fleet that meets the SLO whatever the sampling error).")})
    #: (Weak GPU, Strong GPU) pairings to search: one pairing, one search (empty: from the scenario's pool hardware when
    #: that was given, else every GPU of `gpu` for both pools, or with `mix_gpus` every ordered pair)
    pairs: tuple[tuple[str, str], ...] = field(default=(), metadata={"cli": False})
    router: str = field(default="session_affinity", metadata={"cli": False})
    max_refine: int = field(default=3, metadata={"cli": False})
    scheduler: Scheduler | None = field(default=None, metadata={"cli": False})  # None: each engine's defaults per GPU
    precision: float = field(default=0.01, metadata={"cli": False})  # bisection stops within this share (or one replica)
    #: a workload in memory instead of the scenario's: agent trajectories (or episodes), or a RequestTrace
    workload: Sequence[Any] | RequestTrace | None = field(default=None, metadata={"cli": False}, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.check()  # a bad request never exists: the error names its field

    def check(self) -> None:
        """Every field read as the plan reads it, in the order the command line's flags were once checked."""
        self.pairings, self.rates, self.objective, self.strategies, self.gpus, self.prices  # noqa: B018
        self.check_priced()
        if self.size_on not in SIZE_ON:
            raise JobError(f"expected one of {', '.join(SIZE_ON)}, got {self.size_on!r}", "size_on")
        self.gpu_counts  # noqa: B018
        for name, lo, hi in (("n_tasks", 1, MAX_PLAN_TASKS), ("max_replicas", 1, MAX_PLAN_REPLICAS),
                             ("slice_tasks", 0, MAX_PLAN_TASKS), ("slice_replicas", 1, MAX_PLAN_REPLICAS),
                             ("workers", 0, MAX_WORKERS), ("max_refine", 0, 100)):
            _whole(name, getattr(self, name), lo, hi)
        self.backend_name  # noqa: B018
        if not 0 <= self.precision < 0.5:
            raise JobError(f"expected a share in [0, 0.5), got {self.precision}", "precision")

    # ----------------------------------------------------------------------------------- the fields, parsed
    @cached_property
    def pairings(self) -> tuple[tuple[str, str], ...]:
        """The (Weak GPU, Strong GPU) pairings fixed up front: `pairs`, or the scenario's pool hardware when the request
        was built with it given (its provenance); () when `gpu` is searched."""
        if self.pairs:
            return tuple((str(w), str(s)) for w, s in self.pairs)
        given = [p for p in PER_POOL if p in self.provenance.given]
        if not given:
            return ()
        named = " and ".join(f"`scenario.{p}`" for p in given)
        for name, used in (("gpu", bool(_items(self.gpu))), ("mix_gpus", self.mix_gpus)):
            if used:
                raise JobError(f"searches GPU types, while {named} fix{'es' if len(given) == 1 else ''} one pairing: give one "
                               "or the other", name)
        pair = (self.scenario.weak.hardware, self.scenario.strong.hardware)
        for role, g in zip(("weak", "strong"), pair):
            try:
                load_hardware(g)
            except HardwareProfileError as exc:
                raise JobError(str(exc), f"scenario.{role}.hardware") from None
        return (pair,)

    @cached_property
    def rates(self) -> tuple[float, ...]:
        """The rates, tasks/s, ascending."""
        if not 2 <= self.points <= MAX_PLAN_POINTS:
            raise JobError(f"expected rates in a range in [2, {MAX_PLAN_POINTS}], got {self.points}", "points")
        text = self.rate if isinstance(self.rate, str) else ",".join(
            f"{float(r)!r}" for r in (self.rate if isinstance(self.rate, (tuple, list)) else (self.rate,)))
        if not text.strip():
            raise JobError("give a rate (or rates) to plan for, e.g. 2/s", "rate")
        try:
            rates = parse_rates(text, self.points)
        except ValueError as exc:
            raise JobError(str(exc), "rate") from None
        if max(rates) > MAX_PLAN_RATE:
            raise JobError(f"expected rates up to {MAX_PLAN_RATE:,.0f} tasks/s, got {self.rate!r}", "rate")
        return tuple(sorted(rates))

    @cached_property
    def objective(self) -> SLO:
        """The SLO `slo` says."""
        if isinstance(self.slo, SLO):
            return self.slo
        try:
            return SLO.parse(self.slo)
        except ValueError as exc:
            raise JobError(str(exc), "slo") from None

    @cached_property
    def strategies(self) -> tuple[str, ...]:
        names = _items(self.strategy)
        bad = _blank(self.strategy)
        if bad is not None or not names or any(s not in STRATEGY_NAMES for s in names):
            raise JobError(f"expected comma-separated strategies from {', '.join(STRATEGY_NAMES)}, got "
                           f"{bad if bad is not None else ','.join(names)!r}", "strategy")
        return names

    @cached_property
    def gpus(self) -> tuple[str, ...]:
        """Every GPU type a pool of this plan may run on."""
        if self.pairings:
            return tuple(dict.fromkeys(g for pair in self.pairings for g in pair))
        if (bad := _blank(self.gpu)) is not None:
            raise JobError(f"expected a comma-separated list of GPU types, got {bad!r}", "gpu")
        gpus = _items(self.gpu) or DEFAULT_GPUS
        for g in gpus:
            try:
                load_hardware(g)
            except HardwareProfileError as exc:
                raise JobError(str(exc), "gpu") from None
        return gpus

    @cached_property
    def prices(self) -> dict[str, float]:
        """$/GPU-hour by GPU type as given (`price`): they override the profiles' sourced prices."""
        try:
            return parse_prices((self.price,) if isinstance(self.price, str) else self.price)
        except ValueError as exc:
            raise JobError(str(exc), "price") from None

    def check_priced(self) -> None:
        """Up front, before any search: every GPU type has a $/GPU-hour (a plan that ranks fleets by GPU count alone would
        compare unpriced and priced pools as if the unpriced ones were free)."""
        for g in self.gpus:
            hw = load_hardware(g)
            if resolve_price(hw, self.prices)[0] is None:
                where = ("gpu" if not self.pairings else
                         "scenario.weak.hardware" if g == self.pairings[0][0] else "scenario.strong.hardware")
                raise JobError(f"{g}: {hw.name} has no $/GPU-hour in its profile; pass `price` {g}=USD_PER_GPU_HOUR (comma "
                               f"lists work: `price` {g}=2.0,h200=3.5)", where)

    @cached_property
    def gpu_counts(self) -> tuple[int, ...] | None:
        """The GPUs per replica to search (None: the scenario's, as given)."""
        if self.search_gpus is None:
            return None
        try:
            return parse_gpu_counts(self.search_gpus)
        except ValueError as exc:
            raise JobError(str(exc), "search_gpus") from None

    @cached_property
    def backend_name(self) -> str:
        """`backend` as given, or ray when a cluster address is given; the address's form checked."""
        return chosen_backend(self.backend, self.address)

    @property
    def worker_count(self) -> int:
        return self.workers or default_workers()

    @property
    def slice_size(self) -> int | None:
        """Arrivals a simulated slice holds at most (None: every fleet whole)."""
        return self.slice_tasks or None

    @property
    def serving(self) -> bool:
        """A plain serving fleet for a request trace, not agent strategies."""
        return self.requests is not None or isinstance(self.workload, RequestTrace)

    @property
    def strategy_names(self) -> tuple[str, ...]:
        return ("serving",) if self.serving else self.strategies

    @property
    def seed(self) -> int:
        return self.scenario.seed


def search_keys(req: PlanRequest) -> list[SearchKey]:
    """Every search a plan runs, in the order it submits them: strategy, then rate, then GPU pairing."""
    pairs = (list(req.pairings) if req.pairings else [(g, g) for g in req.gpus] if not req.mix_gpus
             else [(w, s) for w in req.gpus for s in req.gpus])
    return [(strat, wg, sg, rate) for strat in req.strategy_names for rate in req.rates for wg, sg in pairs]


# ------------------------------------------------------------------------------------------------------ the result
#: The columns of `PlanResult.fleets()` (`plan --format csv`): the answer first, each with its unit.
CURVE_COLUMNS = ("rate", "strategy", "weak_gpu", "weak_replicas", "weak_gpus_per_replica", "strong_gpu", "strong_replicas",
                 "strong_gpus_per_replica", "gpus", "usd_per_hour", "usd_per_task", "slo_value_s", "slo_ci_low_s", "slo_ci_high_s",
                 "latency_p50_s", "latency_p95_s", "weak_bound", "strong_bound", "weak_sized_by", "strong_sized_by",
                 "uncontended_slo_value_s", "gpus_change_vs_strongonly", "usd_per_hour_change_vs_strongonly")


@dataclass
class PlanResult(Result):
    table: pd.DataFrame  # one row per (strategy, rate, weak GPU, strong GPU): the cheapest fleet found
    best: pd.DataFrame  # one row per (strategy, rate)
    price_sources: dict[str, str]
    request: PlanRequest
    notes: list[str]
    evaluations: pd.DataFrame  # every candidate measured: its verdict and why
    requests_notes: tuple[str, ...] = ()  # what the request trace's reader said (lengths estimated, records dropped)
    estimate: PlanEstimate | None = None  # the wall-time estimate told before the searches ran (with a progress only)
    usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)  # the price of each GPU type a fleet found runs on

    @property
    def uncontended(self) -> pd.DataFrame:
        """What tasks take alone on each deployment searched (strategy x GPU pairing; no contention, so the same at every
        rate): the SLO's percentile there, the task p95, and the SLO over it (how close the SLO sits to that floor)."""
        cols = ["strategy", "weak_gpu", "strong_gpu", "uncontended_slo_value_s", "reference_latency_s"]
        if self.table.empty or any(c not in self.table.columns for c in cols):
            return pd.DataFrame(columns=[*cols, "slo_over_uncontended"])
        out = self.table[cols].drop_duplicates(["strategy", "weak_gpu", "strong_gpu"]).reset_index(drop=True)
        out["slo_over_uncontended"] = self.request.objective.seconds / out["uncontended_slo_value_s"]
        return out

    @property
    def used_gpus(self) -> list[str]:
        """The GPU types the cheapest fleets run on (a pool with replicas), in the order the prices name them."""
        best = self.best.to_dict("records") if len(self.best) else []
        used = {str(r[f"{name}_gpu"]) for r in best for name in ("weak", "strong")
                if pd.to_numeric(r.get(f"{name}_replicas"), errors="coerce") > 0}
        return [g for g in self.usd_per_gpu_hour if g in used]

    @property
    def other_pairings(self) -> dict[str, list[str]]:
        """Per strategy, the GPU pairings searched that none of its cheapest fleets runs on (dearer, or missing the SLO),
        as `pairing` names them; empty when each strategy searched one."""
        if self.table.empty or not len(self.best):
            return {}
        won = {(r["strategy"], r["weak_gpu"], r["strong_gpu"]) for r in self.best.to_dict("records")}
        lost: dict[str, list[str]] = {}
        for r in self.table.to_dict("records"):
            if (r["strategy"], r["weak_gpu"], r["strong_gpu"]) not in won and any(s == r["strategy"] for s, _, _ in won):
                label = pairing(str(r["weak_gpu"]), str(r["strong_gpu"]), str(r["strategy"]))
                if label not in lost.setdefault(str(r["strategy"]), []):
                    lost[str(r["strategy"])].append(label)
        return lost

    @property
    def curve(self) -> pd.DataFrame:
        """$/hour and GPUs against rate per strategy (the best rows)."""
        return self.best[["strategy", "rate", "gpus", "usd_per_hour", "usd_per_task"]]

    def fleets(self) -> pd.DataFrame:
        """The cheapest fleet per rate and strategy, one row each, in CURVE_COLUMNS (what `plan --format csv` prints)."""
        best = self.best
        return best[[c for c in CURVE_COLUMNS if c in best.columns]] if len(best) else pd.DataFrame(columns=list(CURVE_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        """plan.json: the request as run, the cheapest fleets, every candidate fleet and evaluation, prices, notes and
        copies of the inputs it was priced with."""
        req = self.request
        return {"request": {"rates_per_s": list(req.rates), "slo": str(req.objective), "min_tasks_measured": req.n_tasks,
                            "seed": req.seed, "slice_tasks": req.slice_size, "slice_replicas": req.slice_replicas,
                            "workers": req.worker_count, "backend": req.backend_name,
                            "requests": str(req.requests) if req.requests else None,
                            "requests_notes": list(self.requests_notes), "scenario": req.scenario.to_dict(),
                            # what ran: the scenario's GPUs per replica, or the counts searched (each row's *_gpus_per_replica)
                            "search_gpus": list(req.gpu_counts) if req.gpu_counts else None,
                            "gpus_sizing": gpus_sizing(req.gpu_counts)},
                "best": _records(self.best), "candidates": _records(self.table), "evaluations": _records(self.evaluations),
                "price_sources": self.price_sources, "usd_per_gpu_hour": self.usd_per_gpu_hour, "notes": self.notes,
                "uncontended": _records(self.uncontended),
                # copies and SHA-256 of the model configs, engine and GPU profiles it was priced with (simulator/provenance.py)
                "inputs": record_fleet_inputs(req.scenario, req.gpus),
                "method": METHOD}

    def json_text(self) -> str:
        """plan.json's text: checked for impossible numbers (`common.guard`), secrets masked, no NaN."""
        doc = check_output(self.to_dict(), "plan")
        return json.dumps(Redactor.of().doc(doc, values_only=True), allow_nan=False, indent=1, default=_plain)

    def write(self, folder: str | Path, also: Mapping[str, atomic.Writer] | None = None) -> list[Path]:
        """plan.json in `folder`, with `also` (file name -> writer: the CLI's capacity curve) written together: all or
        none. Returns the paths written."""
        out = Path(folder)
        text = self.json_text()
        return atomic.write_together({out / "plan.json": atomic.text_writer(text),
                                      **{out / name: w for name, w in (also or {}).items()}})


def _plain(o: Any) -> Any:
    import numpy as np

    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


# ------------------------------------------------------------------------------------------------------ the job
@dataclass(frozen=True)
class PlanStep(Step):
    """A plan's progress. `kind`: "say" (a line to show: what the plan will do, its estimate, a note), "live" (a line
    inside a running search, told every few seconds: a status to show while it runs, not a line to keep, so a terminal
    shows it in place and the answer is not buried under them), "read" (bytes of the workload read, `done` of `total`),
    "start" (`done` of `total` searches done before the first new one starts; `running`: the searches to run, as labels)
    or "search" (one more search finished: `done` of `total`; `running` what still runs; `what` the pace so far)."""

    kind: str = "say"
    running: tuple[str, ...] = ()


class PlanInterrupted(KeyboardInterrupt):
    """^C during the searches: `kept` of `total` searches are on disk in `folder` (None: no folder, none kept); the same
    request run again with the same folder resumes from them."""

    def __init__(self, kept: int, total: int, folder: Path | None) -> None:
        self.kept, self.total, self.folder = kept, total, folder
        super().__init__(f"{kept} of {total} searches kept in {folder}; run the same request again to resume" if folder
                         else f"{kept} of {total} searches had finished, none kept (no output folder)")


def say(progress: Progress | None, line: str) -> None:
    """Tell `progress` (if any) one line."""
    if progress is not None:
        progress(PlanStep(line))


def label(key: SearchKey) -> str:
    strat, wg, sg, rate = key
    return f"{strat} {pairing(Path(wg).stem, Path(sg).stem, strat)} at {rate:,.4g}/s"


def run(request: PlanRequest, progress: Progress | None = None, folder: str | Path | None = None) -> PlanResult:
    """The plan; see the module docstring. `folder`: where each finished search is kept (`folder/searches/`) and found
    again by a rerun of the same request (the request's fingerprint: plan_store.py); plan.json is `result.write`'s.

    Without `progress` nothing is probed, estimated or told, and the searches run in this process when there is one
    worker; with it, they run in worker processes (so the thread telling their heartbeats keeps its clock)."""
    request.check()
    workload, source, notes = load_workload(request, progress)
    keys = search_keys(request)
    store = None if folder is None else plan_store.PlanStore(folder, plan_store.fingerprint(
        request, workload_digest(request, workload, source), plan_store.code_version()))
    finished = store.load(keys) if store is not None else {}
    todo = [k for k in keys if k not in finished]
    say(progress, _header(request, keys, finished, todo, store))
    estimated = None
    if todo and progress is not None:  # before a long curve starts: how long it will take, and why that long, from a
        # short probe of this machine's speed now (a figure measured on a quiet machine misleads on a loaded one)
        estimated = estimate(request, workload, todo)
        say(progress, estimated.text())
    runs = SearchProgress(keys, finished, todo, store, progress)
    try:
        if progress is None:
            res = plan_capacity(workload, request, runs.tick, finished=finished, on_result=runs.keep)
        else:  # a live line inside each search, at least every HEARTBEAT_S seconds (plan_progress.py)
            metric = f"{request.objective.target} p{request.objective.percentile:g}"
            with HeartbeatPrinter(lambda line: progress(PlanStep(line, kind="live")), metric, estimated) as beats:
                res = plan_capacity(workload, request, runs.tick, finished=finished, on_result=runs.keep,
                                    heartbeat=beats.sink if request.backend_name == "local" else None, isolate=True)
    except KeyboardInterrupt:
        raise PlanInterrupted(len(finished) + runs.saved, len(keys), store.folder if store is not None else None) from None
    if finished:
        say(progress, f"{len(finished)} search(es) reused from {store.folder}, {len(todo)} run")  # type: ignore[union-attr]
    return dataclasses.replace(res, requests_notes=notes, estimate=estimated)


def _header(req: PlanRequest, keys: list, finished: Mapping, todo: list, store: plan_store.PlanStore | None) -> str:
    n_strat = len(req.strategy_names)
    return (f"{len(keys)} search{'es' if len(keys) != 1 else ''} ({n_strat} strateg{'ies' if n_strat != 1 else 'y'}"
            f" x {len(keys) // max(1, n_strat * len(req.rates))} GPU pairing(s) x {len(req.rates)} rate(s)) on "
            f"{min(req.worker_count, max(1, len(todo)))} worker(s)"
            + (f"; {len(finished)} already done in {store.folder}, {len(todo)} to run" if finished and store else "")
            + ("" if store is None else f"; each is kept in {store.folder} as it finishes (^C keeps them; rerun to resume)")
            + ("" if store is not None or len(keys) < 4 else "; no output folder: an interrupted run keeps nothing"))


class SearchProgress:
    """The searches of one run as they finish: each kept in the store (if any) as it ends, and told to `progress`."""

    def __init__(self, keys: list, finished: Mapping, todo: list, store: plan_store.PlanStore | None,
                 progress: Progress | None) -> None:
        self.keys, self.finished, self.store, self.progress = keys, finished, store, progress
        self.running = list(todo)
        self.saved = 0
        self.t0 = time.monotonic()
        if progress is not None:
            progress(PlanStep("", len(finished), len(keys), "start", tuple(label(k) for k in self.running)))

    def keep(self, key: SearchKey, value: dict) -> None:
        # idempotent: a ^C landing inside this call makes the pool report the same finished search again
        if key not in self.running:
            return
        if self.store is not None:
            self.store.save(key, value)
            self.saved += 1
        self.running.remove(key)

    def tick(self, done: int, total: int) -> None:
        if self.progress is None:
            return
        elapsed, new = time.monotonic() - self.t0, done - len(self.finished)
        left = f"; about {duration(elapsed / new * (total - done))} left at the pace so far" if 0 < new and done < total else ""
        self.progress(PlanStep(f"search {done}/{total} done after {elapsed:,.0f} s{left}", done, total, "search",
                               tuple(label(k) for k in self.running)))


def estimate(request: PlanRequest, workload: Any, keys: Sequence[SearchKey] | None = None, probe: bool = True) -> PlanEstimate:
    """How long the searches `keys` (default: all) take on this machine: plan_estimate.py's cost model, at the speed a
    short probe of the fleet engine measures now (`probe=False`: the speed recorded in data/plan_speed.toml)."""
    keys = list(keys) if keys is not None else search_keys(request)
    return estimate_plan(request, keys, workload, request.worker_count, FLEET_BACKEND.compiled,
                         probe_speed(workload, request) if probe else None)


def load_workload(request: PlanRequest, progress: Progress | None = None) -> tuple[Any, str | None, tuple[str, ...]]:
    """(the workload, the file it came from (the synthetic profile's name; None in memory), the reader's notes)."""
    if request.workload is not None:
        return request.workload, None, tuple(getattr(request.workload, "notes", ()))
    if request.requests is not None:
        trace = load_requests(request.requests)
        for note in trace.notes:  # a dataset's: which lengths are estimated from text, which records dropped
            say(progress, f"note: {note}")
        return trace, str(request.requests), tuple(trace.notes)
    sc = request.scenario
    p = Path(sc.workload.trace) if sc.workload.trace is not None else default_workload_path()
    size = p.stat().st_size if sc.workload.synthetic is None and p.is_file() else 0
    read = [0]

    def advance(n: int) -> None:
        read[0] += n
        if progress is not None:
            progress(PlanStep(f"reading {p.name}", read[0], size, "read"))

    try:
        trajectories, source, _ = sc.load_workload(progress=advance if size else None)
    except ScenarioError as exc:
        raise scenario_error(request, exc) from None
    return trajectories, source, ()


def scenario_error(request: Request, exc: ScenarioError) -> JobError:
    """A scenario field's error as a JobError: named as the scenario file's key when that file gave the value (not as a
    flag the user never typed), else as the scenario field (the CLI names its flag)."""
    prov = request.provenance
    if prov.scenario_file is not None and not any(exc.where == g or exc.where.startswith(g + ".") for g in prov.given):
        return JobError(f"{prov.scenario_file}: {exc.where}: {exc}")
    return JobError(str(exc), f"scenario.{exc.where}" if exc.where else "")


def workload_digest(request: PlanRequest, workload: Any, source: str | None) -> str:
    """What the plan's searches read, as a hash: the trace file's bytes, the scenario's synthetic fields (in the
    fingerprint already), or a workload in memory's contents."""
    if request.workload is not None:
        h = hashlib.sha256()
        for item in ([workload] if isinstance(workload, RequestTrace) else workload):
            dump = getattr(item, "model_dump_json", None)
            h.update(dump().encode() if dump is not None else pickle.dumps(item))
        return f"memory:{h.hexdigest()}"
    sc = request.scenario
    if not request.serving and sc.workload.synthetic is not None and sc.workload.trace is None:
        return "synthetic"
    p = Path(str(source)) if source is not None else None
    return file_sha256(p) if p is not None and p.is_file() else f"path:{source}"


def plan_capacity(workload: Any, req: PlanRequest, progress: Callable[[int, int], None] | None = None, *,
                  finished: Mapping[SearchKey, dict] | None = None,
                  on_result: Callable[[SearchKey, dict], None] | None = None,
                  heartbeat: Callable | None = None, isolate: bool = False) -> PlanResult:
    """Run the stated search (plan_search.py) for every strategy, GPU pairing and rate of `req` over `workload` (agent
    trajectories or episodes, or a RequestTrace: a plain serving fleet; None: the request's own `workload`).

    `finished` holds searches already done (a resumed run: their results are used, not rerun); `on_result(key, result)`
    is called as each new search finishes, in completion order, so a caller can keep it before the next one ends
    (a search's result is a plain dict of JSON-able values: stored and read back, it gives the same plan).
    `heartbeat` goes to every search; with worker processes it must pickle (`plan_progress.FileHeartbeat` does).
    `isolate` runs the searches in worker processes even one at a time (`parallel.run_jobs`), so a caller's thread that
    reads the heartbeats runs beside them.
    """
    sc = req.scenario
    if sc.strong_api is not None:
        raise ValueError(f"the scenario prices the Strong model as an API ({sc.strong_api}); the planner sizes self-hosted pools")
    keys = search_keys(req)
    workload = req.workload if workload is None else workload
    if isinstance(workload, RequestTrace) != req.serving:
        raise ValueError("a request trace is planned by a request that says so (requests= or workload=), and only it")
    if isinstance(workload, RequestTrace):
        # the Strong pools' GPUs only: a request trace is served by the Strong deployment
        check_requests(workload, sc, sorted({k[2] for k in keys}), req.gpu_counts)
    else:
        if workload is None:
            raise ValueError("plan_capacity needs a workload: trajectories or a request trace")
        workload = list(episodes_of(workload))
    # the searches get the workload once, as their first argument
    searched = dataclasses.replace(req, workload=None) if req.workload is not None else req
    finished = dict(finished or {})
    todo = [k for k in keys if k not in finished]
    count = [len(keys) - len(todo)]

    def done(i: int, value: dict) -> None:
        count[0] += 1
        if on_result is not None:
            on_result(todo[i], value)
        if progress is not None:
            progress(count[0], len(keys))

    jobs = [(workload, searched, *k, heartbeat) for k in todo]
    new = run_jobs(search_job, jobs, req.backend_name, req.worker_count, req.address, done, isolate=isolate) if jobs else []
    results = {**finished, **dict(zip(todo, new))}
    price_sources: dict[str, str] = {}
    gpu_prices: dict[str, float] = {}
    notes: list[str] = []
    rows, evals = [], []
    for o in (results[k] for k in keys):
        price_sources.update(o["prices"])
        gpu_prices.update(o.get("usd_per_gpu_hour", {}))  # a search kept by an older run has none
        row = dict(o["row"])
        note = row.pop("note", None)
        if note and note not in notes:  # the same GPU unpriced at every rate is said once
            notes.append(note)
        rows.append(row)
        evals.extend(o["evaluations"])
    # a price no pool of this plan runs on is said, as predict and replay say it, never silently left out
    notes += [f"--price {item}: no pool of this plan runs on that GPU (they run on {', '.join(req.gpus)}); the price is "
              "unused" for item in unused_prices(req.prices, [load_hardware(g) for g in req.gpus])]
    table = pd.DataFrame(rows)
    return PlanResult(table=table, best=best_fleets(table), price_sources=price_sources, request=req, notes=notes,
                      evaluations=pd.DataFrame(evals), usd_per_gpu_hour=gpu_prices)


def probe_speed(workload: Any, req: PlanRequest) -> tuple[float, float]:
    """(seconds per task, seconds the probe took) of this machine's fleet engine now, for the plan's time estimate.

    Why: the estimate from a figure measured once on a quiet machine said '2 s to 82 s' for a plan that took over
    15 minutes on a loaded one (issue #34). The probe serves the first search's first PROBE_TASKS tasks at its rate on
    what a first candidate looks like (the Strong pool at its analytic bound, the Weak pool at its own), so it runs the
    same engine, models and load as the searches, on this machine as it is now."""
    t0 = time.perf_counter()
    keys = search_keys(req)
    strategy, wg, sg, rate = keys[0]
    sc = req.scenario
    if isinstance(workload, RequestTrace):
        check_requests(workload, sc, sorted({k[2] for k in keys}), req.gpu_counts)  # its line, not the probe's
        tasks = request_tasks(workload.head(PROBE_TASKS))
    else:
        tasks = plan_tasks(list(episodes_of(workload)), strategy, sc, PROBE_TASKS)
    uses = {WEAK_POOL: tasks.uses(WEAK_POOL), STRONG_POOL: tasks.uses(STRONG_POOL)}
    deps = {WEAK_POOL: sized_deployment(sc.weak, wg, tasks.max_context, req.gpu_counts),
            STRONG_POOL: sized_deployment(sc.strong, sg, tasks.max_context, req.gpu_counts)}
    counts = {p: pool_capacity(deps[p], req.scheduler or engine_scheduler(deps[p]), pool_work(tasks, p),
                               sc.weight_mode).replicas_for(rate) if uses[p] else 0 for p in deps}
    fleet = build_fleet(deps[WEAK_POOL] if uses[WEAK_POOL] else None, deps[STRONG_POOL] if uses[STRONG_POOL] else None,
                        counts[WEAK_POOL], counts[STRONG_POOL], weight_mode=sc.weight_mode, router=req.router,
                        scheduler=req.scheduler, prices=req.prices)
    t1 = time.perf_counter()
    tasks.serve(fleet, unit_arrivals(sc.seed, tasks.n_tasks) / rate)
    t2 = time.perf_counter()
    return (t2 - t1) / max(1, tasks.n_tasks), t2 - t0


def check_requests(trace: RequestTrace, sc: Scenario, gpus: Sequence[str], search_gpus: Sequence[int] | None) -> None:
    """The longest request must fit the Strong model's window and some replica on every GPU: say which line it is."""
    for g in gpus:
        check_requests_fit(trace, lambda n, g=g: sized_deployment(sc.strong, g, n, search_gpus))


def best_fleets(table: pd.DataFrame) -> pd.DataFrame:
    """Cheapest feasible fleet per strategy and rate ($/hour, then GPUs), plus savings against Strong-only at that rate
    (shares) and the changes ($/hour and GPUs, signed: more is positive)."""
    if table.empty or not table["feasible"].any():
        return pd.DataFrame()
    f = table[table["feasible"]].copy()
    f["_priced"] = f["usd_per_hour"].notna()
    f = f.sort_values(["strategy", "rate", "_priced", "usd_per_hour", "gpus"], ascending=[True, True, False, True, True])
    best = f.groupby(["strategy", "rate"], sort=False).head(1).drop(columns="_priced")
    order = {s: i for i, s in enumerate(table["strategy"].unique())}
    best = best.sort_values(["rate", "strategy"], key=lambda c: c.map(order) if c.name == "strategy" else c).reset_index(drop=True)
    base = best[best["strategy"] == "strongonly"].set_index("rate")
    if len(base):
        ref_usd = best["rate"].map(base["usd_per_hour"])
        ref_gpus = best["rate"].map(base["gpus"])
        best["usd_saving_vs_strongonly"] = 1.0 - best["usd_per_hour"] / ref_usd
        best["gpu_saving_vs_strongonly"] = 1.0 - best["gpus"] / ref_gpus
        # the changes themselves, signed (+3 GPUs: three more than Strong-only), so no reader takes "-75%" for a saving
        best["gpus_change_vs_strongonly"] = best["gpus"] - ref_gpus
        best["usd_per_hour_change_vs_strongonly"] = best["usd_per_hour"] - ref_usd
    return best
