"""Capacity planning: the cheapest fleet that meets a latency SLO at a sustained arrival rate, per strategy.

The search (stated, so results can be checked), for each strategy, pair of GPU types
(Weak pool, Strong pool) and rate:

1. Every replica gets the fewest GPUs (1, 2, 4, 8) on which its model holds one sequence
   of the longest context the tasks reach, and runs its serving engine's scheduler
   defaults on that GPU (or `scheduler`).
2. **Analytic bound** (`bounds.py`): each used pool's best throughput per replica gives
   the fewest replicas that are not overloaded for certain; fewer are rejected without
   simulation (utilisation >= 1).
3. **Strong replicas**, with the Weak pool unlimited (no contention): from the bound up,
   in steps that double (the first a tenth of the bound), until a fleet meets the SLO,
   then down to `precision` (1%: within 1% or one replica of the smallest). When the
   strategy also uses a Weak pool, the Strong count starts at 5% below the Strong pool's
   analytic capacity instead of at it: step 4 makes the Weak pool queue, which makes the
   Strong calls' arrivals burstier, and a Strong pool at 99% of its capacity that met the
   SLO with an uncontended Weak pool turned unstable under every Weak count tried (SpecAgent
   at 1,000 tasks/s), inflating the Weak pool instead.
4. **Weak replicas** the same way with the Strong count fixed; if none up to eight times
   the Weak bound meets the SLO, the Strong count grows by 5% (at least one) and step 4
   repeats (at most `max_refine` times).

A candidate of a large fleet first runs on a slice a fifth the usual size; if it misses
by a wide margin there it is rejected, else it runs in full (`_quick_miss`); a fleet at least as large in every pool
as one whose first look did not reject it skips its own. Every run stops at a look that finds it over the SLO for
certain (`steady_state.py`, step 5: the sequential stop).

Each candidate is measured in steady state (`steady_state.py`: a window sized from the
rate and the latency, a detected warm-up, a stability test, the percentile with its
confidence interval, a slice of large fleets); it meets the SLO when it is stable and its
percentile estimate is within the bound. Every candidate replays the same tasks and the
same unit-rate arrival sequence (common random numbers), so a search compares fleets,
not draws. The cheapest fleet is chosen by $/hour among priced GPU types; a GPU type
without a price is reported but ranked by GPU count only. Searches are independent jobs,
run on a local process pool or on Ray (`parallel.py`) with identical results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from specagent.simulator.capacity.bounds import PoolCapacity, pool_capacity, pool_work
from specagent.simulator.capacity.fleet_build import (
    TaskPlan, build_fleet, check_requests_fit, episodes_of, gpus_sizing, plan_tasks, request_tasks, sized_deployment,
)
from specagent.simulator.fleet.config import STRONG_POOL, WEAK_POOL, Scheduler, engine_scheduler, resolve_price
from specagent.simulator.parallel import BACKENDS, run_jobs
from specagent.simulator.rates_prices import parse_rate  # noqa: F401  (re-exported: notebooks/03 imports it from here)
from specagent.simulator.scenario import Scenario
from specagent.simulator.capacity.steady_state import (
    GROWTH, SLICE_TASKS, Counts, Metric, SteadyResult, measure_steady, plan_window, uncontended, unit_arrivals,
)
from specagent.traces.requests import RequestTrace

if TYPE_CHECKING:
    from specagent.simulator.capacity.fleet_build import Workload

SLO_METRICS = ("task", "turn")
#: What must be within the SLO for a candidate to meet it: the percentile's point estimate or its 95% CI's upper end.
SIZE_ON = ("point", "ci-high")
#: Tasks planned per strategy; longer windows replay them cyclically (fleet_build.TaskPlan.serve).
PLANNED_TASKS = 2000
#: Tasks of the uncontended pilot run that sets the reference latency and the best any fleet can do.
PILOT_TASKS = 1000
#: Strong pools of two-pool fleets run at most at this share of their analytic capacity (module docstring, step 3).
STRONG_HEADROOM = 0.95
#: A pool this many times its throughput bound, at under LOW_UTILISATION busy, gets a note saying what set its size
#: (issue #26: 3,480 replicas at 0.4% utilisation, sized by one 10^7-token request, were printed without a word).
OVERSIZE_FACTOR = 4.0
LOW_UTILISATION = 0.25
#: A pool past this many replicas gets the note whatever its utilisation: a fleet this big is worth a second look.
LARGE_POOL = 1000


@dataclass(frozen=True)
class SLO:
    """A latency percentile bound: `p95-task=120s` (end-to-end task) or `p90-turn=20s` (one agent turn)."""

    percentile: float
    target: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> "SLO":
        m = re.fullmatch(r"\s*p(\d{1,2}(?:\.\d+)?)-(task|turn)\s*=\s*([0-9.]+)\s*(s|ms|min)?\s*", text)
        if not m:
            raise ValueError(f"SLO '{text}': expected pNN-task=SECONDS or pNN-turn=SECONDS, e.g. p95-task=120s")
        scale = {"s": 1.0, None: 1.0, "ms": 1e-3, "min": 60.0}[m.group(4)]
        slo = cls(float(m.group(1)), m.group(2), float(m.group(3)) * scale)
        if not 0 < slo.percentile < 100 or slo.seconds <= 0:
            raise ValueError(f"SLO '{text}': percentile must be in (0, 100) and the bound > 0")
        return slo

    def __str__(self) -> str:
        return f"p{self.percentile:g}-{self.target}={self.seconds:g}s"

    @property
    def metric(self) -> Metric:
        return Metric(self.percentile, self.target)


@dataclass(frozen=True)
class PlanRequest:
    """What to plan for: one or more rates and an SLO, GPU types to try, and the scenario (models, dtypes, K, acceptance,
    seed); `requests` plans a plain serving fleet for a request trace instead of agent strategies.

    The scenario's deployments give each pool its model, storage dtypes, GPUs per replica
    and parallelism, as given; the search chooses the GPU type (from `gpus`) and, only
    when `search_gpus` is set, the GPUs per replica (the fewest of them that fit).
    """

    rate: float | None = None  # one rate (tasks/s), or
    slo: SLO = field(default_factory=lambda: SLO(95.0, "task", 300.0))
    strategies: tuple[str, ...] = ("strongonly", "specagent")
    gpus: tuple[str, ...] = ("h20", "h200")
    mix_gpus: bool = False  # also try Weak and Strong pools on different GPU types
    scenario: Scenario = field(default_factory=Scenario)
    prices: dict[str, float] = field(default_factory=dict)
    n_tasks: int = 1000  # at least this many tasks measured per candidate (the window is longer when the rate needs it)
    router: str = "session_affinity"
    max_replicas: int = 100_000
    max_refine: int = 3
    scheduler: Scheduler | None = None  # None: each engine's own defaults for its GPU
    rates: tuple[float, ...] = ()  # several rates: a capacity curve
    slice_tasks: int | None = SLICE_TASKS  # a fleet whose window holds more arrivals runs as a slice of about this many
    slice_replicas: int = 1  # a slice keeps at least this many replicas of its smallest pool
    precision: float = 0.01  # bisection stops within this share of the answer (or one replica)
    workers: int = 1
    backend: str = "local"
    address: str | None = None
    requests: RequestTrace | None = None  # a plain serving workload (served by the scenario's Strong deployment)
    search_gpus: tuple[int, ...] | None = None  # None: the scenario's GPUs per replica; else the fewest of these that fit
    #: (Weak GPU, Strong GPU) pairings to search, e.g. from --weak-hardware/--strong-hardware: one pairing, one search
    #: (empty: every GPU of `gpus` for both pools, or with `mix_gpus` every ordered pair)
    pairs: tuple[tuple[str, str], ...] = ()
    size_on: str = "point"  # "point": the percentile's estimate meets the SLO; "ci-high": its 95% CI's upper end does

    def __post_init__(self) -> None:
        rates = tuple(self.rates) if self.rates else ((self.rate,) if self.rate is not None else ())
        if not rates:
            raise ValueError("give a rate (or rates) to plan for")
        for r in rates:
            if not (isinstance(r, (int, float)) and r > 0 and math.isfinite(r)):
                raise ValueError(f"rates must be > 0 tasks/s, got {r!r}")
        object.__setattr__(self, "rates", tuple(sorted(float(r) for r in rates)))
        object.__setattr__(self, "rate", self.rates[0])
        if self.n_tasks < 1:
            raise ValueError(f"--tasks must be >= 1 (tasks measured per candidate), got {self.n_tasks}")
        if self.max_replicas < 1:
            raise ValueError(f"--max-replicas must be >= 1, got {self.max_replicas}")
        if self.slice_replicas < 1:
            raise ValueError(f"--slice-replicas must be >= 1, got {self.slice_replicas}")
        if self.slice_tasks is not None and self.slice_tasks < 1:
            raise ValueError(f"--slice-tasks must be >= 1, got {self.slice_tasks}")
        if not 0 <= self.precision < 0.5:
            raise ValueError(f"precision must be in [0, 0.5), got {self.precision}")
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got '{self.backend}'")
        if not self.strategies and self.requests is None:
            raise ValueError("give at least one strategy")
        if self.pairs:
            object.__setattr__(self, "pairs", tuple((str(w), str(s)) for w, s in self.pairs))
            object.__setattr__(self, "gpus", tuple(dict.fromkeys(g for pair in self.pairs for g in pair)))
        if not self.gpus:
            raise ValueError("give at least one GPU type")
        if self.size_on not in SIZE_ON:
            raise ValueError(f"--size-on must be one of {', '.join(SIZE_ON)}, got '{self.size_on}'")

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @property
    def strategy_names(self) -> tuple[str, ...]:
        return ("serving",) if self.requests is not None else self.strategies


@dataclass
class PlanResult:
    table: pd.DataFrame  # one row per (strategy, rate, weak GPU, strong GPU): the cheapest fleet found
    best: pd.DataFrame  # one row per (strategy, rate)
    price_sources: dict[str, str]
    request: PlanRequest
    notes: list[str]
    evaluations: pd.DataFrame  # every candidate measured: its verdict and why

    @property
    def curve(self) -> pd.DataFrame:
        """$/hour and GPUs against rate per strategy (the best rows)."""
        return self.best[["strategy", "rate", "gpus", "usd_per_hour", "usd_per_task"]]


def _search(evaluate: Callable[[int], bool], start: int, cap: int, precision: float = 0.0,
            value: Callable[[int], float] | None = None, target: float = math.nan,
            plateau: Callable[[float, int], bool] | None = None) -> int | None:
    """The smallest n in [start, cap] with evaluate(n) True, assuming start - 1 fails and evaluate is monotone in n.

    Up from `start` in steps that double (the first max(1, start // 10)) until a success,
    then down to within max(1, precision x n). Given `value(n)`, a measured metric that
    falls with n, and its `target` (success: value <= target), the bracket shrinks by the
    Illinois variant of regula falsi (interpolate the metric linearly; when the same end
    moves twice running, halve the other end's weight), falling back to bisection where
    a metric is not finite; without it, by bisection. None if `cap` fails, or as soon as `plateau(value(n), n)` says
    added replicas stopped lowering the metric of the failing counts (`Plateau`).
    """
    if start > cap:
        return None
    n, last_fail = max(start, 1), max(start, 1) - 1
    step = max(1, n // 10)
    while not evaluate(n):
        last_fail = n
        if n >= cap or (plateau is not None and value is not None and plateau(value(n), n)):
            return None
        n = min(cap, n + step)
        step *= 2
    lo, hi = last_fail, n

    def excess(k: int) -> float | None:
        v = value(k) - target if value is not None and k >= start else math.nan
        return v if math.isfinite(v) else None

    f_lo, f_hi = excess(lo), excess(hi)
    side = ""
    while hi - lo > max(1, math.floor(precision * hi)):
        mid = (lo + hi) // 2
        if f_lo is not None and f_hi is not None and f_lo > 0 >= f_hi and f_lo > f_hi:
            mid = min(hi - 1, max(lo + 1, round(lo + f_lo / (f_lo - f_hi) * (hi - lo))))
        if evaluate(mid):
            hi, f_hi = mid, excess(mid)
            if side == "hi" and f_lo is not None:
                f_lo /= 2.0
            side = "hi"
        else:
            lo, f_lo = mid, excess(mid)
            if side == "lo" and f_hi is not None:
                f_hi /= 2.0
            side = "lo"
    return hi


#: Two growth steps in a row that each lower the failing metric by less than this share are a plateau, and so is one
#: step that adds PLATEAU_GROWTH x the replicas for less: the search stops there (issue #34: one search doubled to
#: 100,000 replicas for 142 s against an SLO just under what tasks take alone).
PLATEAU_SHARE = 0.01
PLATEAU_GROWTH = 1.5


class Plateau:
    """Says when added replicas stopped lowering a failing candidate's metric: it is within PLATEAU_SHARE of the
    uncontended bound (`floor_s`: tasks alone on their replicas, which no fleet beats), or two growth steps in a row
    each lowered it by less than PLATEAU_SHARE, or one step that grew the pool PLATEAU_GROWTH-fold did. An unstable
    candidate (inf) restarts the count: more replicas help it."""

    def __init__(self, floor_s: float) -> None:
        self.floor_s = floor_s
        self.history: list[float] = []
        self.counts: list[int] = []
        self.hit = False  # it said stop at least once

    def __call__(self, value: float, n: int = 0) -> bool:
        if not math.isfinite(value):
            self.history.clear()
            self.counts.clear()
            return False
        self.history.append(value)
        self.counts.append(n)
        h, c = self.history, self.counts
        small = [h[i] - h[i + 1] < PLATEAU_SHARE * h[i] for i in range(len(h) - 1)]
        self.hit = (value <= self.floor_s * (1.0 + PLATEAU_SHARE) or (len(small) >= 2 and small[-1] and small[-2])
                    or (bool(small) and small[-1] and c[-2] > 0 and c[-1] >= PLATEAU_GROWTH * c[-2]))
        return self.hit


@dataclass(frozen=True)
class Heartbeat:
    """Where one search stands, sent as it starts and around each candidate it measures, so a caller can print a live
    line inside a search (issue #34: nothing was printed for up to 10 minutes between finished searches)."""

    key: tuple  # (strategy, Weak GPU, Strong GPU, rate)
    stage: str  # "pilot", "Strong replicas", "Weak replicas" or "done"
    weak_replicas: int | None  # the candidate being measured (None: an unlimited pool)
    strong_replicas: int | None
    tried: int  # candidates measured so far
    best_s: float  # the lowest stable metric measured so far (nan: none yet)
    started: float  # time.time() when the search started
    sent: float  # time.time() when this beat was sent


class FileHeartbeat:
    """A Heartbeat sink that pickles to worker processes: each search's latest beat is one small JSON file in `folder`
    (written whole, then renamed), which the caller reads on its own clock."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, beat: Heartbeat) -> None:
        import json
        import os

        name = os.path.join(self.folder, hashlib.sha256(repr(beat.key).encode()).hexdigest()[:16] + ".json")
        tmp = f"{name}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({**dataclasses.asdict(beat), "key": list(beat.key)}, f)
        os.replace(tmp, name)

    def read(self) -> list[Heartbeat]:
        """Every search's latest beat (a file being replaced is skipped this time)."""
        import json
        import os

        out = []
        for n in sorted(os.listdir(self.folder)):
            if n.endswith(".json"):
                try:
                    with open(os.path.join(self.folder, n), encoding="utf-8") as f:
                        d = json.load(f)
                except (OSError, ValueError):
                    continue
                out.append(Heartbeat(**{**d, "key": tuple(d["key"])}))
        return out


# ------------------------------------------------------------------------------------------------------
# One search job: (strategy, weak GPU, strong GPU, rate)
# ------------------------------------------------------------------------------------------------------
def _plan(workload: Sequence | RequestTrace, strategy: str, sc: Scenario) -> TaskPlan:
    if isinstance(workload, RequestTrace):
        return request_tasks(workload.head(PLANNED_TASKS))
    return plan_tasks(workload, strategy, sc, PLANNED_TASKS)


def search_job(workload: Sequence | RequestTrace, req: PlanRequest, strategy: str, wg: str, sg: str, rate: float,
               heartbeat: Callable[[Heartbeat], None] | None = None) -> dict:
    """One capacity search; a dict with the row ('row'), every candidate measured ('evaluations') and 'prices'.

    `heartbeat` (optional) receives a Heartbeat as the search starts and around each candidate; it does not change the
    result."""
    started = time.time()
    stage = ["pilot"]
    best = [math.nan]

    def beat(n_w: int | None = None, n_s: int | None = None) -> None:
        if heartbeat is not None:
            heartbeat(Heartbeat((strategy, wg, sg, rate), stage[0], n_w, n_s, len(log), best[0], started, time.time()))

    log: list[dict] = []
    beat()
    sc = req.scenario
    tasks = _plan(workload, strategy, sc)
    max_ctx = tasks.max_context
    uses = {WEAK_POOL: tasks.uses(WEAK_POOL), STRONG_POOL: tasks.uses(STRONG_POOL)}
    deps = {WEAK_POOL: sized_deployment(sc.weak, wg, max_ctx, req.search_gpus),
            STRONG_POOL: sized_deployment(sc.strong, sg, max_ctx, req.search_gpus)}
    limits = {p: req.scheduler or engine_scheduler(dep) for p, dep in deps.items()}
    price, sources = {}, {}
    for p, dep in deps.items():
        price[p], sources[dep.hardware.id] = resolve_price(dep.hardware, req.prices)
    caps: dict[int, PoolCapacity] = {p: pool_capacity(deps[p], limits[p], pool_work(tasks, p), sc.weight_mode)
                                     for p in (WEAK_POOL, STRONG_POOL) if uses[p]}
    lower = {p: cap.replicas_for(rate) for p, cap in caps.items()}

    def build(counts: Counts):
        return build_fleet(deps[WEAK_POOL] if uses[WEAK_POOL] else None, deps[STRONG_POOL] if uses[STRONG_POOL] else None,
                           counts[WEAK_POOL], counts[STRONG_POOL], weight_mode=sc.weight_mode, router=req.router,
                           scheduler=req.scheduler, prices=req.prices)

    # the reference latency: tasks alone on their replicas (unlimited pools), the p95 of their latency; no fleet does
    # better than that, so an SLO the uncontended tasks miss is infeasible at any size
    pilot = uncontended(tasks, build((None, None)), sc.seed, PILOT_TASKS)
    ref = float(np.percentile(pilot.tasks["latency_s"].to_numpy(), 95))
    alone = pilot.tasks["latency_s"] if req.slo.target == "task" else pilot.turns["latency_s"]
    floor_s = float(np.percentile(alone.to_numpy(), req.slo.percentile)) if len(alone) else math.inf
    cache: dict[Counts, tuple[bool, SteadyResult | None, str]] = {}
    by_slice: dict[tuple, tuple[bool, SteadyResult | None, str]] = {}  # fleets that run as the same slice share a result
    window_args = dict(slo_s=req.slo.seconds, min_tasks=req.n_tasks, slice_tasks=req.slice_tasks, min_replicas=req.slice_replicas)

    def run(n_w: int | None, n_s: int | None) -> tuple[bool, SteadyResult | None, str]:
        key: Counts = (n_w if uses[WEAK_POOL] else 0, n_s if uses[STRONG_POOL] else 0)
        if key in cache:
            return cache[key]
        over = [f"{name} load is {caps[p].utilisation(rate, key[p]):.2f} x its analytic capacity"
                for p, name in ((WEAK_POOL, "Weak"), (STRONG_POOL, "Strong"))
                if uses[p] and key[p] is not None and caps[p].utilisation(rate, key[p]) >= 1.0]  # type: ignore[arg-type]
        sl, win = plan_window(key, rate, req.slo.metric, ref, **window_args)  # type: ignore[arg-type]
        beat(*key)
        same = (sl.counts, sl.fraction)
        what = f"{req.slo.target} p{req.slo.percentile:g}"
        out: tuple[bool, SteadyResult | None, str]
        if over:
            out = (False, None, "unstable: " + "; ".join(over))
        elif same in by_slice:  # the very same simulation; its result names this fleet's slice (its N, its load excess)
            ok, sr0, verdict = by_slice[same]
            out = (ok, None if sr0 is None else dataclasses.replace(sr0, slice=sl), verdict)
        elif not any(_covers(key, k) for k in looked) and (quick := _quick_miss(key, sl)) is not None:
            out = quick
        else:
            sr = measure_steady(tasks, build, key, rate, req.slo.metric, ref, seed=sc.seed, stop_on=req.slo.seconds,
                                **window_args)  # type: ignore[arg-type]
            if not sr.stable:
                out = (False, sr, f"unstable: {sr.reason}")
            elif math.isinf(sr.value_s):
                out = (False, sr, f"misses the SLO: {what} beyond the window (over {100 - req.slo.percentile:g}% of tasks still "
                                  f"running {win.tail_s:,.0f} s after arriving)")
            elif sr.value_s > req.slo.seconds:
                out = (False, sr, f"misses the SLO: {what} {sr.value_s:,.1f} s (95% CI {sr.ci_low_s:,.1f}-{sr.ci_high_s:,.1f})")
            elif req.size_on == "ci-high" and sr.ci_high_s > req.slo.seconds:
                out = (False, sr, f"misses the SLO at its CI's upper end (--size-on ci-high): {what} {sr.value_s:,.1f} s "
                                  f"(95% CI {sr.ci_low_s:,.1f}-{sr.ci_high_s:,.1f})")
            else:
                out = (True, sr, f"meets the SLO: {what} {sr.value_s:,.1f} s (95% CI {sr.ci_low_s:,.1f}-{sr.ci_high_s:,.1f})")
            if sr.stopped_early:
                out = (out[0], out[1], f"{out[2]}; sequential stop at {sr.stopped_at_s:,.0f} s of the {win.horizon_s:,.0f} s "
                                       f"window (the interval there at 99% over the batches so far)")
            by_slice[same] = out
        cache[key] = out
        log.append({"strategy": strategy, "rate": rate, "weak_gpu": deps[WEAK_POOL].hardware.id,
                    "strong_gpu": deps[STRONG_POOL].hardware.id, "weak_replicas": key[WEAK_POOL],
                    "strong_replicas": key[STRONG_POOL], "meets_slo": out[0], "verdict": out[2],
                    "value_s": out[1].value_s if out[1] else math.nan, "ci_low_s": out[1].ci_low_s if out[1] else math.nan,
                    "ci_high_s": out[1].ci_high_s if out[1] else math.nan, "slice": out[1].slice.describe() if out[1] else "",
                    "tasks_simulated": out[1].tasks_simulated if out[1] else 0,
                    "stopped_at_s": out[1].stopped_at_s if out[1] else math.nan})
        if out[1] is not None and out[1].stable and math.isfinite(out[1].value_s) and not out[1].value_s >= best[0]:
            best[0] = out[1].value_s
        beat(*key)
        return out

    looked: list[Counts] = []  # fleets whose first look did not reject them: any fleet at least as large skips its own

    def _quick_miss(key: Counts, sl) -> tuple[bool, SteadyResult | None, str] | None:
        """A first look on a slice a fifth the size: a fleet that misses by a wide margin there (the interval's low end
        over the bound by 5%, or a queue growing by 5% of the arrivals) is rejected without the full run; a
        smaller slice only pools less, so it errs towards missing, and the margin covers that."""
        if req.slice_tasks is None or req.slice_tasks < 5:
            return None
        quick_args = {**window_args, "slice_tasks": req.slice_tasks // 5}
        qsl, _ = plan_window(key, rate, req.slo.metric, ref, **quick_args)  # type: ignore[arg-type]
        if qsl.counts == sl.counts and qsl.fraction == sl.fraction:
            return None  # the first look would be the full run
        sr = measure_steady(tasks, build, key, rate, req.slo.metric, ref, seed=sc.seed, stop_on=1.05 * req.slo.seconds,
                            **quick_args)  # type: ignore[arg-type]
        if not sr.stable and sr.queue_growth > 2.5 * GROWTH:
            return (False, sr, f"unstable (first look, {sr.slice.describe()}): {sr.reason}")
        if sr.ci_low_s > 1.05 * req.slo.seconds:
            return (False, sr, f"misses the SLO (first look, {sr.slice.describe()}): {req.slo.target} p{req.slo.percentile:g} "
                               f"{sr.value_s:,.1f} s, 95% CI from {sr.ci_low_s:,.1f} s")
        looked.append(key)
        return None

    def metric(n_w: int | None, n_s: int | None) -> float:
        """The measured metric of a candidate already run, as sized on (the estimate, or its CI's upper end with
        --size-on ci-high; inf when rejected as unstable)."""
        _, sr, verdict = run(n_w, n_s)
        if sr is None or not sr.stable:
            return math.inf
        return sr.ci_high_s if req.size_on == "ci-high" else sr.value_s

    n_s: int | None = 0
    n_w: int | None = 0
    ok = floor_s <= req.slo.seconds
    plateaus: list[Plateau] = []

    def plateau() -> Plateau:
        plateaus.append(Plateau(floor_s))
        return plateaus[-1]

    if ok and uses[STRONG_POOL]:
        start = lower[STRONG_POOL]
        if uses[WEAK_POOL]:  # keep headroom for the Weak pool's queueing (module docstring, step 3)
            start = caps[STRONG_POOL].replicas_for(rate / STRONG_HEADROOM)
        stage[0] = "Strong replicas"
        n_s = _search(lambda n: run(None if uses[WEAK_POOL] else 0, n)[0], start, req.max_replicas, req.precision,
                      lambda n: metric(None if uses[WEAK_POOL] else 0, n), req.slo.seconds, plateau())
        ok = n_s is not None
    if ok and uses[WEAK_POOL]:
        weak_cap = min(req.max_replicas, max(8 * lower[WEAK_POOL], 64))
        stage[0] = "Weak replicas"
        for _ in range(req.max_refine + 1):
            n_w = _search(lambda n: run(n, n_s if uses[STRONG_POOL] else 0)[0], lower[WEAK_POOL], weak_cap, req.precision,
                          lambda n: metric(n, n_s if uses[STRONG_POOL] else 0), req.slo.seconds, plateau())
            if n_w is not None or not uses[STRONG_POOL] or n_s >= req.max_replicas:  # type: ignore[operator]
                break
            n_s = min(req.max_replicas, n_s + max(1, math.ceil(0.05 * n_s)))  # type: ignore[operator]
        ok = n_w is not None
    stopped_early = not ok and any(p.hit for p in plateaus)
    stage[0] = "done"
    beat()
    row = {"strategy": strategy, "label": tasks.strategy.label, "rate": rate, "weak_gpu": deps[WEAK_POOL].hardware.id,
           "strong_gpu": deps[STRONG_POOL].hardware.id, "feasible": ok, "evaluations": len(cache),
           "simulated": sum(1 for v in cache.values() if v[1] is not None), "reference_latency_s": ref,
           "uncontended_slo_value_s": floor_s, "gpus_sizing": gpus_sizing(req.search_gpus),
           # the best any fleet can do: the lowest stable metric measured, or the uncontended bound when no candidate ran
           "best_slo_value_s": best[0] if math.isfinite(best[0]) else floor_s, "stopped_early": bool(stopped_early)}
    for p, name in ((WEAK_POOL, "weak"), (STRONG_POOL, "strong")):
        row[f"{name}_gpus_per_replica"] = deps[p].gpus if uses[p] else 0
        row[f"{name}_max_num_seqs"] = limits[p].max_num_seqs if uses[p] else 0
        row[f"{name}_max_batched_tokens"] = (limits[p].max_batched_tokens or 0) if uses[p] else 0
        row[f"{name}_scheduler_source"] = limits[p].source if uses[p] else ""
        row[f"{name}_bound_replicas"] = lower.get(p, 0)
        row[f"{name}_bound_tasks_per_s"] = caps[p].tasks_per_s if p in caps else math.nan
        row[f"{name}_bound_batch"] = caps[p].batch if p in caps else math.nan
        row[f"{name}_bound"] = caps[p].describe() if p in caps else ""
    if ok:
        _, sr, _ = run(n_w if uses[WEAK_POOL] else 0, n_s if uses[STRONG_POOL] else 0)
        assert sr is not None
        unpriced = [g for p, g in ((WEAK_POOL, wg), (STRONG_POOL, sg)) if uses[p] and price[p] is None]
        nw, ns = (n_w or 0) if uses[WEAK_POOL] else 0, (n_s or 0) if uses[STRONG_POOL] else 0
        fleet = build((nw, ns))  # its GPUs and $/hour: the one formula (fleet_config.Pool / Fleet)
        gpus = fleet.gpus
        usd_h = math.nan if unpriced else fleet.usd_per_hour
        s = sr.summary
        row.update({
            "weak_replicas": nw, "strong_replicas": ns, "gpus": gpus, "usd_per_hour": usd_h,
            # the whole fleet's $/hour over the tasks it completes per hour in the window, plus API charges
            "usd_per_task": math.nan if unpriced or not sr.throughput_per_s > 0 else
            usd_h / (3600.0 * sr.throughput_per_s) + s["api_usd_per_task"],
            "slo_value_s": sr.value_s, "slo_ci_low_s": sr.ci_low_s, "slo_ci_high_s": sr.ci_high_s,
            "latency_p50_s": s.get("window_latency_p50_s", math.nan), "latency_p95_s": s.get("window_latency_p95_s", math.nan),
            "weak_utilisation": s["weak_utilisation"], "strong_utilisation": s["strong_utilisation"],
            "strong_mean_decode_batch": s["strong_mean_decode_batch"], "weak_mean_decode_batch": s["weak_mean_decode_batch"],
            "slice": sr.slice.describe(), "slice_weak_replicas": sr.slice.counts[WEAK_POOL] or 0,
            "slice_strong_replicas": sr.slice.counts[STRONG_POOL] or 0, "slice_fraction": sr.slice.fraction,
            "rate_simulated": sr.rate_simulated, "tasks_simulated": sr.tasks_simulated, "tasks_measured": sr.tasks_measured,
            "tasks_censored": sr.tasks_censored, "warmup_s": sr.warmup_s, "measure_s": sr.window.measure_s,
            "horizon_s": sr.window.horizon_s, "throughput_per_s": sr.throughput_per_s,
        })
        why = size_note(rate, req.slo, req.max_replicas, max_ctx,
                        [(name, row[f"{name}_replicas"], lower.get(p, 0), s[f"{name}_utilisation"], s[f"{name}_mean_decode_batch"],
                          deps[p], limits[p].max_num_seqs) for p, name in ((WEAK_POOL, "weak"), (STRONG_POOL, "strong")) if uses[p]])
        row["size_note"] = why  # printed with the fleet (and in plan.json): what set a pool's size, when it is far above the rate's
        for p, name in ((WEAK_POOL, "weak"), (STRONG_POOL, "strong")):
            # utilisation is busy time (a replica running any sequence is busy, at batch 1 too); the load share is the
            # rate over the pool's throughput bound: both, so 'utilisation 1.00' at 15% of capacity cannot be misread
            row[f"{name}_load_share"] = caps[p].utilisation(rate, row[f"{name}_replicas"]) if p in caps and row[f"{name}_replicas"] else math.nan
            row[f"{name}_why"] = (why_this_size(name, row[f"{name}_replicas"], lower.get(p, 0), log, req.slo,
                                                n_s if p == WEAK_POOL and uses[STRONG_POOL] else None, req.size_on)
                                  if uses[p] else "")
        # met with the whole 95% CI within the SLO, or only at the point estimate (the CI's upper end is over it)
        row["slo_met_at"] = "ci" if sr.ci_high_s <= req.slo.seconds else "point estimate only"
        if unpriced:
            row["note"] = (f"{strategy} on {pairing(wg, sg)}: no $/GPU-hour for {', '.join(sorted(set(unpriced)))} "
                           f"(pass --price GPU=USD); ranked by GPU count only")
    elif floor_s > req.slo.seconds:
        row["note"] = (f"{strategy} on {pairing(wg, sg)}: {req.slo} cannot be met at any fleet size: with no contention at all "
                       f"(every task alone on its replicas) the {req.slo.target} p{req.slo.percentile:g} is {floor_s:,.1f} s, "
                       f"the best achievable")
    elif stopped_early:
        row["note"] = (f"{strategy} on {pairing(wg, sg)} at {rate:g}/s: {req.slo} is not met; added replicas stopped "
                       f"lowering the {req.slo.target} p{req.slo.percentile:g} (best achievable {row['best_slo_value_s']:,.1f} s; "
                       f"{floor_s:,.1f} s with no contention at all), so the search stopped there; relax --slo")
    else:
        row["note"] = (f"{strategy} on {pairing(wg, sg)} at {rate:g}/s: no fleet up to {req.max_replicas:,} replicas per pool "
                       f"meets {req.slo} (best measured {req.slo.target} p{req.slo.percentile:g} "
                       f"{row['best_slo_value_s']:,.1f} s; the search stops there: --max-replicas; or relax --slo)")
    return {"row": row, "evaluations": log, "prices": sources}


def _covers(fleet: Counts, smaller: Counts) -> bool:
    """Whether `fleet` has at least `smaller`'s replicas in every pool (None: unlimited): a first look that did not
    reject the smaller fleet would not reject this one either (more replicas only lower a latency percentile, the
    monotonicity the search itself assumes), so it is not run again (issue #34: 7 of the done-when plan's first looks)."""
    return all(a is None or (b is not None and a >= b) for a, b in zip(fleet, smaller))


def why_this_size(name: str, n: int, bound: int, log: Sequence[dict], slo: SLO, other: int | None, size_on: str) -> str:
    """Why a pool has `n` replicas, in words: the rate (one fewer is over the throughput bound) or the SLO (the largest
    smaller count measured missed it, with what it measured); `other`: the other pool's count in this pool's search
    (None: the Strong pool, searched with an unlimited Weak pool)."""
    n, bound = int(n), int(bound)
    mine, theirs = f"{name}_replicas", "strong_replicas" if name == "weak" else "weak_replicas"
    fails = [e for e in log if not e["meets_slo"] and e[mine] is not None and e[mine] < n
             and (e[theirs] == other or (other is None and e[theirs] in (None, 0)))]
    pool = f"{n:,} {name.capitalize()} replica{'s' if n != 1 else ''}"
    on = "its CI's upper end" if size_on == "ci-high" else "the point estimate"
    fewer = [e for e in log if name == "strong" and e[mine] is not None and e[mine] < n and e[theirs]]
    if fewer:  # the Strong count was raised because no Weak pool met the SLO with fewer (the search's refinement)
        k = max(int(e[mine]) for e in fewer)
        at_k = [e for e in fewer if e[mine] == k]
        if not any(e["meets_slo"] for e in at_k):
            vals = [e["value_s"] for e in at_k if math.isfinite(e["value_s"])]
            best = f" (best {slo.target} p{slo.percentile:g} {min(vals):,.1f} s)" if vals else ""
            return (f"{pool}: {slo} sets it (at {on}): with {k:,} no Weak pool tried (up to "
                    f"{max(int(e[theirs]) for e in at_k):,} replicas) met it{best}; the throughput bound alone needs {bound:,}")
    if not fails:
        if n <= 1:
            return f"{pool}: the fewest a pool can have, and it meets {slo}"
        if n <= bound:
            return (f"{pool}: the rate sets it: {n - 1:,} would be at or over the pool's throughput bound "
                    f"({bound:,} replicas needed)")
        return f"{pool}: the smallest the search measured meeting {slo} at {on}"
    f = max(fails, key=lambda e: e[mine])
    k = int(f[mine])
    got = (f"gave {slo.target} p{slo.percentile:g} {f['value_s']:,.1f} s" if math.isfinite(f["value_s"])
           else f"was rejected ({f['verdict']})")
    with_ = " with an unlimited Weak pool" if name == "strong" and f[theirs] is None else ""
    return (f"{pool}: {slo} sets it (at {on}): {k:,}{with_} {got}; the throughput bound alone needs {bound:,}")


def pairing(wg: str, sg: str) -> str:
    """A GPU pairing as printed: which side is which, always (issue #34: 'l40s/h100' left the reader guessing)."""
    return f"Weak {wg} / Strong {sg}"


def size_note(rate: float, slo: SLO, max_replicas: int, max_context: int, pools: Sequence[tuple]) -> str:
    """Why a pool is far larger than the rate needs, in words ('' when no pool is): what bound its size.

    `pools`: (name, replicas, throughput-bound replicas, utilisation, mean decode batch, deployment, max_num_seqs).
    A pool at or under its throughput bound was sized by the rate; one above it by the SLO, and when it is mostly idle
    the reason is what a replica can hold at once: KV memory for the longest task, or the engine's sequence limit."""
    out = []
    for name, n, bound, util, batch, dep, max_seqs in pools:
        n, bound = int(n), int(bound)
        over = n > OVERSIZE_FACTOR * max(bound, 1) and util < LOW_UTILISATION
        if not (over or n > LARGE_POOL):
            continue
        what = f"{n:,} {name.capitalize()} replicas ({n * dep.gpus:,} GPUs)"
        if n <= bound:
            out.append(f"{what}: sized by the rate ({rate:,.4g} tasks/s needs {bound:,} replicas at the analytic throughput "
                       f"bound); the search stops at --max-replicas {max_replicas:,}")
            continue
        held = dep.max_sequences(max_context)
        holds = (f"KV memory holds {held:,} sequence(s) of the longest task ({max_context:,} tokens) per replica"
                 + (f", under the engine's {max_seqs:,}-sequence limit: memory, not compute, bounds each replica"
                    if held < max_seqs else f"; the engine runs at most {max_seqs:,} sequences per replica"))
        out.append(f"{what} are {n / max(bound, 1):,.1f}x the {bound:,} the rate needs at the throughput bound, at "
                   f"{util:.1%} utilisation (mean decode batch {batch:,.1f}): {slo} set this size, not the rate. {holds}. "
                   f"Long tasks hold replicas while others queue; relax --slo or shorten the longest tasks (the search stops "
                   f"at --max-replicas {max_replicas:,})")
    return "; ".join(out)


SearchKey = tuple  # (strategy, weak GPU, strong GPU, rate): one search of plan_capacity


def search_keys(req: PlanRequest) -> list[SearchKey]:
    """Every search a plan runs, in the order it submits them: strategy, then rate, then GPU pairing."""
    pairs = (list(req.pairs) if req.pairs else [(g, g) for g in req.gpus] if not req.mix_gpus
             else [(w, s) for w in req.gpus for s in req.gpus])
    return [(strat, wg, sg, rate) for strat in req.strategy_names for rate in req.rates for wg, sg in pairs]


def plan_capacity(trajectories: Workload | None, req: PlanRequest, progress: Callable[[int, int], None] | None = None, *,
                  finished: Mapping[SearchKey, dict] | None = None,
                  on_result: Callable[[SearchKey, dict], None] | None = None,
                  heartbeat: Callable[[Heartbeat], None] | None = None, isolate: bool = False) -> PlanResult:
    """Run the stated search for every strategy, GPU pairing and rate; see the module docstring.

    `finished` holds searches already done (a resumed run: their results are used, not rerun); `on_result(key, result)`
    is called as each new search finishes, in completion order, so a caller can keep it before the next one ends
    (a search's result is a plain dict of JSON-able values: stored and read back, it gives the same plan).
    `heartbeat` goes to every search (`search_job`); with worker processes it must pickle (`FileHeartbeat` does).
    `isolate` runs the searches in worker processes even one at a time (`parallel.run_jobs`), so a caller's thread that
    reads the heartbeats runs beside them.
    """
    sc = req.scenario
    if sc.strong_api is not None:
        raise ValueError(f"the scenario prices the Strong model as an API ({sc.strong_api}); the planner sizes self-hosted pools")
    workload: Sequence | RequestTrace
    if req.requests is not None:
        workload = req.requests
        # the Strong pools' GPUs only: a request trace is served by the Strong deployment
        _check_requests(workload, sc, sorted({k[2] for k in search_keys(req)}), req.search_gpus)
    else:
        if trajectories is None:
            raise ValueError("plan_capacity needs trajectories (or a request trace in the request)")
        workload = list(episodes_of(trajectories))
    keys = search_keys(req)
    finished = dict(finished or {})
    todo = [k for k in keys if k not in finished]
    jobs = [(workload, req, *k, heartbeat) for k in todo]
    count = [len(keys) - len(todo)]

    def done(i: int, value: dict) -> None:
        count[0] += 1
        if on_result is not None:
            on_result(todo[i], value)
        if progress is not None:
            progress(count[0], len(keys))

    new = run_jobs(search_job, jobs, req.backend, req.workers, req.address, done, isolate=isolate) if jobs else []
    results = {**finished, **dict(zip(todo, new))}
    outs = [results[k] for k in keys]
    price_sources: dict[str, str] = {}
    notes: list[str] = []
    rows, evals = [], []
    for o in outs:
        price_sources.update(o["prices"])
        row = dict(o["row"])
        note = row.pop("note", None)
        if note and note not in notes:  # the same GPU unpriced at every rate is said once
            notes.append(note)
        rows.append(row)
        evals.extend(o["evaluations"])
    table = pd.DataFrame(rows)
    return PlanResult(table=table, best=_best(table), price_sources=price_sources, request=req, notes=notes,
                      evaluations=pd.DataFrame(evals))


#: Tasks the speed probe serves (`probe_speed`): a second or two of simulation on the project's 2-core machine.
PROBE_TASKS = 200


def probe_speed(trajectories: Workload | None, req: PlanRequest) -> tuple[float, float]:
    """(seconds per task, seconds the probe took) of this machine's fleet engine now, for the plan's time estimate.

    Why: the estimate from a figure measured once on a quiet machine said '2 s to 82 s' for a plan that took over
    15 minutes on a loaded one (issue #34). The probe serves the first search's first PROBE_TASKS tasks at its rate on
    what a first candidate looks like (the Strong pool at its analytic bound, the Weak pool at its own), so it runs the
    same engine, models and load as the searches, on this machine as it is now."""
    t0 = time.perf_counter()
    strategy, wg, sg, rate = search_keys(req)[0]
    sc = req.scenario
    workload: Sequence | RequestTrace = req.requests if req.requests is not None else list(episodes_of(trajectories))
    if isinstance(workload, RequestTrace):
        _check_requests(workload, sc, sorted({k[2] for k in search_keys(req)}), req.search_gpus)  # its line, not the probe's
        tasks = request_tasks(workload.head(PROBE_TASKS))
    else:
        tasks = plan_tasks(workload, strategy, sc, PROBE_TASKS)
    uses = {WEAK_POOL: tasks.uses(WEAK_POOL), STRONG_POOL: tasks.uses(STRONG_POOL)}
    deps = {WEAK_POOL: sized_deployment(sc.weak, wg, tasks.max_context, req.search_gpus),
            STRONG_POOL: sized_deployment(sc.strong, sg, tasks.max_context, req.search_gpus)}
    counts = {p: pool_capacity(deps[p], req.scheduler or engine_scheduler(deps[p]), pool_work(tasks, p),
                               sc.weight_mode).replicas_for(rate) if uses[p] else 0 for p in deps}
    fleet = build_fleet(deps[WEAK_POOL] if uses[WEAK_POOL] else None, deps[STRONG_POOL] if uses[STRONG_POOL] else None,
                        counts[WEAK_POOL], counts[STRONG_POOL], weight_mode=sc.weight_mode, router=req.router,
                        scheduler=req.scheduler, prices=req.prices)
    t1 = time.perf_counter()
    tasks.serve(fleet, unit_arrivals(sc.seed, tasks.n_tasks) / rate)
    t2 = time.perf_counter()
    return (t2 - t1) / max(1, tasks.n_tasks), t2 - t0


def _check_requests(trace: RequestTrace, sc: Scenario, gpus: Sequence[str], search_gpus: Sequence[int] | None) -> None:
    """The longest request must fit the Strong model's window and some replica on every GPU: say which line it is."""
    for g in gpus:
        check_requests_fit(trace, lambda n, g=g: sized_deployment(sc.strong, g, n, search_gpus))


def _best(table: pd.DataFrame) -> pd.DataFrame:
    """Cheapest feasible fleet per strategy and rate ($/hour, then GPUs), plus savings against Strong-only at that rate."""
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
    return best
