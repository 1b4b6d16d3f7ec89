"""One capacity search of the plan job: the fewest replicas per pool that meet a latency SLO at one sustained rate.

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
by a wide margin there it is rejected, else it runs in full (`CapacitySearch.quick_miss`); a fleet at least as large in every pool
as one whose first look did not reject it skips its own. Every run stops at a look that finds it over the SLO for
certain (`steady_state.py`, step 5: the sequential stop).

Each candidate is measured in steady state (`steady_state.py`: a window sized from the
rate and the latency, a detected warm-up, a stability test, the percentile with its
confidence interval, a slice of large fleets); it meets the SLO when it is stable and its
percentile estimate is within the bound. Every candidate replays the same tasks and the
same unit-rate arrival sequence (common random numbers), so a search compares fleets,
not draws. The cheapest fleet is chosen by $/hour among priced GPU types; a GPU type
without a price is reported but ranked by GPU count only (`plan.py`). Searches are independent jobs,
run on a local process pool or on Ray (`parallel.py`) with identical results.

`CapacitySearch` is one search, (strategy, Weak GPU, Strong GPU, rate), its state named: the stage it is at, the best
metric so far, the candidates measured (`cache`, `by_slice`, `looked`: a candidate is run once; fleets that simulate as
the same slice share a run; a first look that passed is not repeated for a larger fleet) and the evaluation log.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np

from specagent.simulator.capacity.bounds import PoolCapacity, pool_capacity, pool_work
from specagent.simulator.capacity.fleet_build import (
    TaskPlan, build_fleet, gpus_sizing, plan_tasks, request_tasks, sized_deployment,
)
from specagent.simulator.capacity.steady_state import (
    GROWTH, Counts, Metric, Slice, SteadyResult, measure_steady, plan_window, uncontended,
)
from specagent.simulator.fleet.config import STRONG_POOL, WEAK_POOL, engine_scheduler, resolve_price
from specagent.simulator.strategies.catalog import models_called
from specagent.traces.requests import RequestTrace

if TYPE_CHECKING:
    from specagent.simulator.jobs.plan import PlanRequest

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
#: The pools of a fleet as its columns name them.
POOLS = ((WEAK_POOL, "weak"), (STRONG_POOL, "strong"))
SearchKey = tuple  # (strategy, weak GPU, strong GPU, rate): one search of a plan


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


def smallest_count(evaluate: Callable[[int], bool], start: int, cap: int, precision: float = 0.0,
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


class Candidate(NamedTuple):
    """One fleet measured: whether it meets the SLO, its steady-state result (None: rejected before any simulation)
    and the verdict in words."""

    meets: bool
    result: SteadyResult | None
    verdict: str


@dataclass(frozen=True)
class PoolSetup:
    """What a pool of one search runs on before any candidate is measured: GPUs per replica, the scheduler's limits,
    and its analytic throughput bound (a pool the strategy does not use keeps the zeros)."""

    gpus_per_replica: int = 0
    max_num_seqs: int = 0
    max_batched_tokens: int = 0
    scheduler_source: str = ""
    bound_replicas: int = 0
    bound_tasks_per_s: float = math.nan
    bound_batch: float = math.nan
    bound: str = ""


@dataclass(frozen=True)
class PoolSizing:
    """Why a pool of the fleet found has its size: the rate's share of its throughput bound, the reason in words, and
    what bound it (`sized_by`): "throughput" (the fewest replicas whose analytic throughput covers the rate, or the
    search's start just above it) or "SLO" (a smaller count measured missed the latency objective); "" for a pool the
    strategy does not use. Per pool: SpecAgent's Weak pool can be SLO-bound while its Strong pool is not (issue #51)."""

    load_share: float
    why: str
    sized_by: str = ""


def pool_columns(pools: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """(pool name, record) pairs as a result row's columns: a record's field `f` of pool `weak` is column `weak_f`."""
    return {f"{name}_{k}": v for name, record in pools for k, v in dataclasses.asdict(record).items()}


def task_plan(workload: Sequence | RequestTrace, strategy: str, scenario: Any) -> TaskPlan:
    """The tasks one search replays: a request trace's first PLANNED_TASKS requests, or the strategy's plans of as many
    agent tasks."""
    if isinstance(workload, RequestTrace):
        return request_tasks(workload.head(PLANNED_TASKS))
    return plan_tasks(workload, strategy, scenario, PLANNED_TASKS)


class CapacitySearch:
    """One capacity search, (strategy, Weak GPU, Strong GPU, rate); see the module docstring.

    `run()` is the whole search: the uncontended pilot (at construction), then `search_strong()` and `search_weak()`,
    each a `smallest_count` over `measure()` of candidate fleets. `heartbeat` (optional) receives a Heartbeat as the search
    starts and around each candidate; it does not change the result."""

    def __init__(self, workload: Sequence | RequestTrace, request: PlanRequest, strategy: str, weak_gpu: str,
                 strong_gpu: str, rate: float, heartbeat: Callable[[Heartbeat], None] | None = None) -> None:
        self.key: SearchKey = (strategy, weak_gpu, strong_gpu, rate)
        self.strategy, self.weak_gpu, self.strong_gpu, self.rate = strategy, weak_gpu, strong_gpu, rate
        self.slo: SLO = request.objective
        self.size_on = request.size_on
        self.max_replicas, self.max_refine, self.precision = request.max_replicas, request.max_refine, request.precision
        self.slice_tasks = request.slice_size
        self.router, self.scheduler, self.prices = request.router, request.scheduler, request.prices
        self.gpu_counts = request.gpu_counts
        self.heartbeat = heartbeat
        self.started = time.time()
        self.stage = "pilot"  # then "Strong replicas", "Weak replicas", "done"
        self.best_s = math.nan  # the lowest stable metric measured so far
        # ... of a whole fleet (every pool it uses counted, not an unlimited Weak pool): the best a fleet achieved
        self.best_fleet_s = math.nan
        self.log: list[dict] = []  # every candidate measured, in order: plan.json's evaluations
        self.beat()
        sc = self.scenario = request.scenario
        self.tasks = task_plan(workload, strategy, sc)
        self.uses = {WEAK_POOL: self.tasks.uses(WEAK_POOL), STRONG_POOL: self.tasks.uses(STRONG_POOL)}
        self.deps = {WEAK_POOL: sized_deployment(sc.weak, weak_gpu, self.tasks.max_context, self.gpu_counts),
                     STRONG_POOL: sized_deployment(sc.strong, strong_gpu, self.tasks.max_context, self.gpu_counts)}
        self.limits = {p: self.scheduler or engine_scheduler(dep) for p, dep in self.deps.items()}
        self.price: dict[int, float | None] = {}
        self.price_sources: dict[str, str] = {}
        for p, dep in self.deps.items():
            self.price[p], self.price_sources[dep.hardware.id] = resolve_price(dep.hardware, self.prices)
        self.caps: dict[int, PoolCapacity] = {p: pool_capacity(self.deps[p], self.limits[p], pool_work(self.tasks, p),
                                                               sc.weight_mode) for p, _ in POOLS if self.uses[p]}
        self.lower = {p: cap.replicas_for(rate) for p, cap in self.caps.items()}  # the analytic bound per pool
        # the reference latency: tasks alone on their replicas (unlimited pools), the p95 of their latency; no fleet does
        # better than that, so an SLO the uncontended tasks miss is infeasible at any size
        pilot = uncontended(self.tasks, self.build((None, None)), sc.seed, PILOT_TASKS)
        self.reference_s = float(np.percentile(pilot.tasks["latency_s"].to_numpy(), 95))
        alone = pilot.tasks["latency_s"] if self.slo.target == "task" else pilot.turns["latency_s"]
        self.floor_s = float(np.percentile(alone.to_numpy(), self.slo.percentile)) if len(alone) else math.inf
        self.cache: dict[Counts, Candidate] = {}
        self.by_slice: dict[tuple, Candidate] = {}  # fleets that run as the same slice share a result
        self.looked: list[Counts] = []  # fleets whose first look did not reject them: any fleet at least as large skips its own
        self.plateaus: list[Plateau] = []
        self.window_args = dict(slo_s=self.slo.seconds, min_tasks=request.n_tasks, slice_tasks=self.slice_tasks,
                                min_replicas=request.slice_replicas)

    # ------------------------------------------------------------------------------------------ measuring one fleet
    def beat(self, n_w: int | None = None, n_s: int | None = None) -> None:
        if self.heartbeat is not None:
            self.heartbeat(Heartbeat(self.key, self.stage, n_w, n_s, len(self.log), self.best_s, self.started, time.time()))

    def build(self, counts: Counts):
        deps, uses = self.deps, self.uses
        return build_fleet(deps[WEAK_POOL] if uses[WEAK_POOL] else None, deps[STRONG_POOL] if uses[STRONG_POOL] else None,
                           counts[WEAK_POOL], counts[STRONG_POOL], weight_mode=self.scenario.weight_mode, router=self.router,
                           scheduler=self.scheduler, prices=self.prices)

    def measure(self, n_w: int | None, n_s: int | None) -> Candidate:
        """The fleet of `n_w` Weak and `n_s` Strong replicas (None: unlimited), measured once (cached) and logged."""
        key: Counts = (n_w if self.uses[WEAK_POOL] else 0, n_s if self.uses[STRONG_POOL] else 0)
        if key in self.cache:
            return self.cache[key]
        sl, win = plan_window(key, self.rate, self.slo.metric, self.reference_s, **self.window_args)  # type: ignore[arg-type]
        self.beat(*key)
        same = (sl.counts, sl.fraction)
        over = self.overloaded(key)
        out: Candidate
        if over:
            out = Candidate(False, None, "unstable: " + "; ".join(over))
        elif same in self.by_slice:  # the very same simulation; its result names this fleet's slice (its N, its load excess)
            ok, sr0, verdict = self.by_slice[same]
            out = Candidate(ok, None if sr0 is None else dataclasses.replace(sr0, slice=sl), verdict)
        elif not any(covers(key, k) for k in self.looked) and (quick := self.quick_miss(key, sl)) is not None:
            out = quick
        else:
            out = self.by_slice[same] = self.full_run(key, win.tail_s, win.horizon_s)
        self.cache[key] = out
        self.log.append(self.evaluation(key, out))
        sr = out.result
        if sr is not None and sr.stable and math.isfinite(sr.value_s) and not sr.value_s >= self.best_s:
            self.best_s = sr.value_s
        if sr is not None and sr.stable and math.isfinite(sr.value_s) and None not in key and not sr.value_s >= self.best_fleet_s:
            self.best_fleet_s = sr.value_s
        self.beat(*key)
        return out

    def overloaded(self, key: Counts) -> list[str]:
        """The pools of `key` loaded at or over their analytic capacity, in words (rejected without simulation)."""
        return [f"{name.capitalize()} load is {self.caps[p].utilisation(self.rate, key[p]):.2f} x its analytic capacity"
                for p, name in POOLS
                if self.uses[p] and key[p] is not None and self.caps[p].utilisation(self.rate, key[p]) >= 1.0]  # type: ignore[arg-type]

    def full_run(self, key: Counts, tail_s: float, horizon_s: float) -> Candidate:
        """The candidate's steady-state run over its whole window (stopped early at a look that finds it a miss)."""
        slo, what = self.slo, f"{self.slo.target} p{self.slo.percentile:g}"
        sr = measure_steady(self.tasks, self.build, key, self.rate, slo.metric, self.reference_s, seed=self.scenario.seed,
                            stop_on=slo.seconds, **self.window_args)  # type: ignore[arg-type]
        interval = f"(95% CI {sr.ci_low_s:,.1f}-{sr.ci_high_s:,.1f})"
        if not sr.stable:
            out = Candidate(False, sr, f"unstable: {sr.reason}")
        elif math.isinf(sr.value_s):
            out = Candidate(False, sr, f"misses the SLO: {what} beyond the window (over {100 - slo.percentile:g}% of tasks "
                                       f"still running {tail_s:,.0f} s after arriving)")
        elif sr.value_s > slo.seconds:
            out = Candidate(False, sr, f"misses the SLO: {what} {sr.value_s:,.1f} s {interval}")
        elif self.size_on == "ci-high" and sr.ci_high_s > slo.seconds:
            out = Candidate(False, sr, f"misses the SLO at its CI's upper end (--size-on ci-high): {what} {sr.value_s:,.1f} s "
                                       f"{interval}")
        else:
            out = Candidate(True, sr, f"meets the SLO: {what} {sr.value_s:,.1f} s {interval}")
        if sr.stopped_early:
            out = Candidate(out.meets, out.result, f"{out.verdict}; sequential stop at {sr.stopped_at_s:,.0f} s of the "
                                                   f"{horizon_s:,.0f} s window (the interval there at 99% over the batches so far)")
        return out

    def quick_miss(self, key: Counts, sl: Slice) -> Candidate | None:
        """A first look on a slice a fifth the size: a fleet that misses by a wide margin there (the interval's low end
        over the bound by 5%, or a queue growing by 5% of the arrivals) is rejected without the full run; a
        smaller slice only pools less, so it errs towards missing, and the margin covers that."""
        if self.slice_tasks is None or self.slice_tasks < 5:
            return None
        slo = self.slo
        quick_args = {**self.window_args, "slice_tasks": self.slice_tasks // 5}
        qsl, _ = plan_window(key, self.rate, slo.metric, self.reference_s, **quick_args)  # type: ignore[arg-type]
        if qsl.counts == sl.counts and qsl.fraction == sl.fraction:
            return None  # the first look would be the full run
        sr = measure_steady(self.tasks, self.build, key, self.rate, slo.metric, self.reference_s, seed=self.scenario.seed,
                            stop_on=1.05 * slo.seconds, **quick_args)  # type: ignore[arg-type]
        if not sr.stable and sr.queue_growth > 2.5 * GROWTH:
            return Candidate(False, sr, f"unstable (first look, {sr.slice.describe()}): {sr.reason}")
        if sr.ci_low_s > 1.05 * slo.seconds:
            return Candidate(False, sr, f"misses the SLO (first look, {sr.slice.describe()}): {slo.target} "
                                        f"p{slo.percentile:g} {sr.value_s:,.1f} s, 95% CI from {sr.ci_low_s:,.1f} s")
        self.looked.append(key)
        return None

    def evaluation(self, key: Counts, out: Candidate) -> dict:
        """The log entry of one candidate measured (plan.json's `evaluations`)."""
        sr = out.result
        return {"strategy": self.strategy, "rate": self.rate, "weak_gpu": self.deps[WEAK_POOL].hardware.id,
                "strong_gpu": self.deps[STRONG_POOL].hardware.id, "weak_replicas": key[WEAK_POOL],
                "strong_replicas": key[STRONG_POOL], "meets_slo": out.meets, "verdict": out.verdict,
                "value_s": sr.value_s if sr else math.nan, "ci_low_s": sr.ci_low_s if sr else math.nan,
                "ci_high_s": sr.ci_high_s if sr else math.nan, "slice": sr.slice.describe() if sr else "",
                "tasks_simulated": sr.tasks_simulated if sr else 0, "stopped_at_s": sr.stopped_at_s if sr else math.nan}

    def metric(self, n_w: int | None, n_s: int | None) -> float:
        """The measured metric of a candidate already run, as sized on (the estimate, or its CI's upper end with
        --size-on ci-high; inf when rejected as unstable)."""
        sr = self.measure(n_w, n_s).result
        if sr is None or not sr.stable:
            return math.inf
        return sr.ci_high_s if self.size_on == "ci-high" else sr.value_s

    def plateau(self) -> Plateau:
        self.plateaus.append(Plateau(self.floor_s))
        return self.plateaus[-1]

    # ------------------------------------------------------------------------------------------ the two searches
    def search_strong(self) -> int | None:
        """The fewest Strong replicas meeting the SLO with an unlimited Weak pool (module docstring, step 3)."""
        weak: int | None = None if self.uses[WEAK_POOL] else 0
        start = self.lower[STRONG_POOL]
        if self.uses[WEAK_POOL]:  # keep headroom for the Weak pool's queueing (module docstring, step 3)
            start = self.caps[STRONG_POOL].replicas_for(self.rate / STRONG_HEADROOM)
        self.stage = "Strong replicas"
        return smallest_count(lambda n: self.measure(weak, n).meets, start, self.max_replicas, self.precision,
                              lambda n: self.metric(weak, n), self.slo.seconds, self.plateau())

    def search_weak(self, n_s: int) -> tuple[int | None, int]:
        """(Weak replicas, Strong replicas): the fewest Weak replicas meeting the SLO with the Strong count fixed, the
        Strong count grown by 5% when none up to eight times the Weak bound does (module docstring, step 4)."""
        weak_cap = min(self.max_replicas, max(8 * self.lower[WEAK_POOL], 64))
        self.stage = "Weak replicas"
        n_w: int | None = None
        for _ in range(self.max_refine + 1):
            strong = n_s if self.uses[STRONG_POOL] else 0
            n_w = smallest_count(lambda n: self.measure(n, strong).meets, self.lower[WEAK_POOL], weak_cap, self.precision,
                                 lambda n: self.metric(n, strong), self.slo.seconds, self.plateau())
            if n_w is not None or not self.uses[STRONG_POOL] or n_s >= self.max_replicas:
                break
            n_s = min(self.max_replicas, n_s + max(1, math.ceil(0.05 * n_s)))
        return n_w, n_s

    def run(self) -> dict:
        """The search; a dict with the result row ('row'), every candidate measured ('evaluations'), 'prices' (each GPU
        type's price source) and 'usd_per_gpu_hour' (the prices of the pools it used) (plain values: stored and read
        back, it gives the same plan)."""
        n_s: int | None = 0
        n_w: int | None = 0
        ok = self.floor_s <= self.slo.seconds
        if ok and self.uses[STRONG_POOL]:
            n_s = self.search_strong()
            ok = n_s is not None
        if ok and self.uses[WEAK_POOL]:
            n_w, n_s = self.search_weak(n_s)  # type: ignore[arg-type]
            ok = n_w is not None
        stopped_early = not ok and any(p.hit for p in self.plateaus)
        self.stage = "done"
        self.beat()
        row = {**self.head(ok, stopped_early), **pool_columns([(name, self.setup(p)) for p, name in POOLS])}
        if ok:
            row.update(self.answer(n_w, n_s))
        else:
            row["note"] = self.infeasible_note(stopped_early, row["best_slo_value_s"])
        usd = {self.deps[p].hardware.id: self.price[p] for p, _ in POOLS if self.uses[p] and self.price[p] is not None}
        return {"row": row, "evaluations": self.log, "prices": self.price_sources, "usd_per_gpu_hour": usd}

    # ------------------------------------------------------------------------------------------ the result row
    def head(self, ok: bool, stopped_early: bool) -> dict:
        return {"strategy": self.strategy, "label": self.tasks.strategy.label, "rate": self.rate,
                "weak_gpu": self.deps[WEAK_POOL].hardware.id, "strong_gpu": self.deps[STRONG_POOL].hardware.id,
                "feasible": ok, "evaluations": len(self.cache),
                "simulated": sum(1 for v in self.cache.values() if v.result is not None),
                "reference_latency_s": self.reference_s, "uncontended_slo_value_s": self.floor_s,
                "gpus_sizing": gpus_sizing(self.gpu_counts),
                # the best any fleet can do: the lowest stable metric of a whole fleet measured (issue #51: a Strong
                # candidate with an unlimited Weak pool, 196 s, was called the best achievable against a 200 s SLO no
                # fleet met), else of any candidate, or the uncontended bound when none ran
                "best_slo_value_s": next((v for v in (self.best_fleet_s, self.best_s) if math.isfinite(v)), self.floor_s),
                "stopped_early": bool(stopped_early)}

    def setup(self, p: int) -> PoolSetup:
        cap = self.caps.get(p)
        bound = PoolSetup(bound_replicas=self.lower.get(p, 0), bound_tasks_per_s=cap.tasks_per_s, bound_batch=cap.batch,
                          bound=cap.describe()) if cap is not None else PoolSetup(bound_replicas=self.lower.get(p, 0))
        if not self.uses[p]:
            return bound
        lim = self.limits[p]
        return dataclasses.replace(bound, gpus_per_replica=self.deps[p].gpus, max_num_seqs=lim.max_num_seqs,
                                   max_batched_tokens=lim.max_batched_tokens or 0, scheduler_source=lim.source)

    def answer(self, n_w: int | None, n_s: int | None) -> dict:
        """The columns of the fleet found: its replicas, GPUs and price, what it measured, and why each pool has its size."""
        uses, slo = self.uses, self.slo
        sr = self.measure(n_w if uses[WEAK_POOL] else 0, n_s if uses[STRONG_POOL] else 0).result
        assert sr is not None
        unpriced = [g for p, g in ((WEAK_POOL, self.weak_gpu), (STRONG_POOL, self.strong_gpu)) if uses[p] and self.price[p] is None]
        replicas = {WEAK_POOL: (n_w or 0) if uses[WEAK_POOL] else 0, STRONG_POOL: (n_s or 0) if uses[STRONG_POOL] else 0}
        fleet = self.build((replicas[WEAK_POOL], replicas[STRONG_POOL]))  # its GPUs and $/hour: the one formula (Pool / Fleet)
        usd_h = math.nan if unpriced else fleet.usd_per_hour
        s = sr.summary
        out = {
            "weak_replicas": replicas[WEAK_POOL], "strong_replicas": replicas[STRONG_POOL], "gpus": fleet.gpus,
            "usd_per_hour": usd_h,
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
        }
        busy = {WEAK_POOL: (s["weak_utilisation"], s["weak_mean_decode_batch"]),
                STRONG_POOL: (s["strong_utilisation"], s["strong_mean_decode_batch"])}
        # printed with the fleet (and in plan.json): what set a pool's size, when it is far above the rate's
        out["size_note"] = size_note(self.rate, slo, self.max_replicas, self.tasks.max_context,
                                     [(name, replicas[p], self.lower.get(p, 0), *busy[p], self.deps[p], self.limits[p].max_num_seqs)
                                      for p, name in POOLS if uses[p]])
        sizings = {name: self.sizing(p, name, replicas[p], n_s) for p, name in POOLS}
        out.update(pool_columns(list(sizings.items())))
        # what tasks take alone on this deployment against the SLO: an SLO just above it needs many replicas at low load
        out["slo_over_uncontended"] = slo.seconds / self.floor_s if self.floor_s > 0 else math.nan
        out["slo_note"] = slo_note(slo, self.floor_s, [(name, replicas[p], sizings[name]) for p, name in POOLS if uses[p]])
        # met with the whole 95% CI within the SLO, or only at the point estimate (the CI's upper end is over it)
        out["slo_met_at"] = "ci" if sr.ci_high_s <= slo.seconds else "point estimate only"
        if unpriced:
            out["note"] = (f"{self.strategy} on {pairing(self.weak_gpu, self.strong_gpu, self.strategy)}: no $/GPU-hour for "
                           f"{', '.join(sorted(set(unpriced)))} (pass --price GPU=USD); ranked by GPU count only")
        return out

    def sizing(self, p: int, name: str, n: int, n_s: int | None) -> PoolSizing:
        # utilisation is busy time (a replica running any sequence is busy, at batch 1 too); the load share is the
        # rate over the pool's throughput bound: both, so 'utilisation 1.00' at 15% of capacity cannot be misread
        share = self.caps[p].utilisation(self.rate, n) if p in self.caps and n else math.nan
        other = n_s if p == WEAK_POOL and self.uses[STRONG_POOL] else None
        if not self.uses[p]:
            return PoolSizing(share, "")
        return PoolSizing(share, why_this_size(name, n, self.lower.get(p, 0), self.log, self.slo, other, self.size_on),
                          "SLO" if slo_missed_below(name, n, self.log, other) else "throughput")

    def infeasible_note(self, stopped_early: bool, best_s: float) -> str:
        """Why no fleet was found, in words: the SLO is under what tasks take alone, the search met a plateau, or the cap."""
        slo, where = self.slo, f"{self.strategy} on {pairing(self.weak_gpu, self.strong_gpu, self.strategy)}"
        metric = f"{slo.target} p{slo.percentile:g}"
        if self.floor_s > slo.seconds:
            return (f"{where}: {slo} cannot be met at any fleet size: with no contention at all (every task alone on its "
                    f"replicas) the {metric} is {self.floor_s:,.1f} s, the best achievable")
        if stopped_early:
            return (f"{where} at {self.rate:g}/s: {slo} is not met; added replicas stopped lowering the {metric} (best "
                    f"achievable {best_s:,.1f} s; {self.floor_s:,.1f} s with no contention at all), so the search stopped "
                    f"there; relax --slo")
        return (f"{where} at {self.rate:g}/s: no fleet up to {self.max_replicas:,} replicas per pool meets {slo} (best "
                f"measured {metric} {best_s:,.1f} s; the search stops there: --max-replicas; or relax --slo)")


def search_job(workload: Sequence | RequestTrace, request: PlanRequest, strategy: str, weak_gpu: str, strong_gpu: str,
               rate: float, heartbeat: Callable[[Heartbeat], None] | None = None) -> dict:
    """One capacity search as a job a process pool or Ray runs (a module-level function pickles): `CapacitySearch.run`."""
    return CapacitySearch(workload, request, strategy, weak_gpu, strong_gpu, rate, heartbeat).run()

def covers(fleet: Counts, smaller: Counts) -> bool:
    """Whether `fleet` has at least `smaller`'s replicas in every pool (None: unlimited): a first look that did not
    reject the smaller fleet would not reject this one either (more replicas only lower a latency percentile, the
    monotonicity the search itself assumes), so it is not run again (issue #34: 7 of the done-when plan's first looks)."""
    return all(a is None or (b is not None and a >= b) for a, b in zip(fleet, smaller))


def _smaller(name: str, n: int, log: Sequence[dict], other: int | None) -> tuple[list[dict], list[dict]]:
    """(the candidates with fewer replicas in this pool that missed the SLO, the other pool held as in this pool's
    search; for the Strong pool, the candidates with fewer Strong replicas measured with a Weak pool: the refinement's)."""
    mine, theirs = f"{name}_replicas", "strong_replicas" if name == "weak" else "weak_replicas"
    fails = [e for e in log if not e["meets_slo"] and e[mine] is not None and e[mine] < n
             and (e[theirs] == other or (other is None and e[theirs] in (None, 0)))]
    fewer = [e for e in log if name == "strong" and e[mine] is not None and e[mine] < n and e[theirs]]
    return fails, fewer


def _refined_at(fewer: list[dict], name: str) -> tuple[int, list[dict]] | None:
    """The largest smaller Strong count the refinement measured with a Weak pool, and its candidates, when none of them
    met the SLO (the Strong count was raised for it); None otherwise."""
    if not fewer:
        return None
    k = max(int(e[f"{name}_replicas"]) for e in fewer)
    at_k = [e for e in fewer if e[f"{name}_replicas"] == k]
    return None if any(e["meets_slo"] for e in at_k) else (k, at_k)


def slo_missed_below(name: str, n: int, log: Sequence[dict], other: int | None) -> bool:
    """Whether the SLO set the pool's `n` replicas: a smaller count measured missed it (as `why_this_size` says)."""
    fails, fewer = _smaller(name, int(n), log, other)
    return bool(fails) or _refined_at(fewer, name) is not None


def why_this_size(name: str, n: int, bound: int, log: Sequence[dict], slo: SLO, other: int | None, size_on: str) -> str:
    """Why a pool has `n` replicas, in words: the rate (one fewer is over the throughput bound) or the SLO (the largest
    smaller count measured missed it, with what it measured); `other`: the other pool's count in this pool's search
    (None: the Strong pool, searched with an unlimited Weak pool)."""
    n, bound = int(n), int(bound)
    mine, theirs = f"{name}_replicas", "strong_replicas" if name == "weak" else "weak_replicas"
    fails, fewer = _smaller(name, n, log, other)
    pool = f"{n:,} {name.capitalize()} replica{'s' if n != 1 else ''}"
    on = "its CI's upper end" if size_on == "ci-high" else "the point estimate"
    refined = _refined_at(fewer, name)
    if refined is not None:  # the Strong count was raised because no Weak pool met the SLO with fewer (the refinement)
        k, at_k = refined
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
        # above the bound with no smaller count measured: the Strong pool's first count, with headroom (step 3)
        return (f"{pool}: the rate sets it, with {1 / STRONG_HEADROOM - 1:.0%} headroom for the Weak pool's queueing (the "
                f"search's first count, and it meets {slo}); the throughput bound alone needs {bound:,}")
    f = max(fails, key=lambda e: e[mine])
    k = int(f[mine])
    got = (f"gave {slo.target} p{slo.percentile:g} {f['value_s']:,.1f} s" if math.isfinite(f["value_s"])
           else f"was rejected ({f['verdict']})")
    with_ = " with an unlimited Weak pool" if name == "strong" and f[theirs] is None else ""
    return (f"{pool}: {slo} sets it (at {on}): {k:,}{with_} {got}; the throughput bound alone needs {bound:,}")


def pairing(wg: str, sg: str, strategy: str | None = None) -> str:
    """A GPU pairing as printed: which side is which, always (issue #34: 'l40s/h100' left the reader guessing); with the
    `strategy`, only the pools it uses (Strong-only's fleet has no Weak GPU; a request trace's is the Strong pool)."""
    called = ("weak", "strong") if strategy is None else ("strong",) if strategy == "serving" else models_called(strategy)
    return " / ".join(f"{role.capitalize()} {gpu}" for role, gpu in (("weak", wg), ("strong", sg)) if role in called)


def slo_note(slo: SLO, floor_s: float, pools: Sequence[tuple[str, int, PoolSizing]]) -> str:
    """Why the SLO, not the rate, set a pool, in numbers ('' when no pool is SLO-bound): the SLO against what tasks take
    alone on this deployment (`floor_s`: its percentile with no contention at all, the best any fleet can do), and each
    SLO-bound pool's load. Why: an SLO just above that floor gave Strong-only 44 GPUs at 12% load, unexplained (issue #51).
    `pools`: (name, replicas, its PoolSizing) of each pool the strategy uses."""
    bound = [(name, int(n), z) for name, n, z in pools if z.sized_by == "SLO"]
    if not bound or not (math.isfinite(floor_s) and floor_s > 0):
        return ""
    metric = f"{slo.target} p{slo.percentile:g}"
    each = ", ".join(f"{n:,} {name.capitalize()} replica{'s' if n != 1 else ''}"
                     + (f" at {z.load_share:.0%} of their throughput bound" if math.isfinite(z.load_share) else "")
                     for name, n, z in bound)
    return (f"{slo} is {slo.seconds / floor_s:.2f}x what tasks take alone on this deployment ({metric} {floor_s:,.1f} s with "
            f"no contention), so queueing must stay short: the SLO, not the rate, sets {each}; a looser --slo needs fewer")


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
