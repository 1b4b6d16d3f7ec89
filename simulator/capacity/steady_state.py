"""Steady-state measurement of a fleet: a window sized from the rate and the latency, a detected warm-up, a latency
percentile with its confidence interval, a stability test, and a representative slice of a large fleet.

Why: a fixed burst of tasks says nothing about a fleet at a sustained rate. A fleet that
starts empty serves its first tasks faster than it will in steady state, one whose
offered load exceeds its capacity looks fine for as long as its queues take to grow,
and at 1,000 tasks/s no one can simulate thousands of replicas for every candidate.
The method, in order (each step is a function below, tested on its own):

1. **Window** (`size_window`). Arrivals run from 0 to a horizon H = W + M + T and the
   clock stops at H: W = 2 L reserved for warm-up, a measurement span M long enough
   for `batches` batches of L each and for `tail / (1 - q)` tasks (enough samples beyond
   the q-th percentile), and a tail T = max(3 L, 1.5 x the SLO bound) so that a task
   measured at the end of M that has not finished by H has certainly missed the bound
   (and percentiles up to T stay observable). L is the
   reference latency, the time scale on which the fleet fills and forgets: the task
   latency's 95th percentile with no contention (each task alone on its replicas).
2. **Warm-up**: the later of two points. The MSER-5 rule (`mser5`; White 1997; Franklin
   & White 2008) on the task latencies in arrival order: drop the prefix that minimises
   the standard error of the remaining mean (at most half of the series). And the fill
   time (`fill_time`): the fleet starts empty, so the first time the tasks in the
   system reach their usual level of the second half of the span (mean less one
   standard deviation). (MSER-5 on the number
   in the system itself over-truncates: that series is a slow random walk whose
   criterion has its minimum wherever the walk happens to be flat.)
3. **Stability** (`deficit`): over the measurement span, the tasks that arrive against
   the tasks that complete. A fleet that serves only a share s of what arrives falls behind by
   1 - s of the arrivals, its queue growing linearly (offered load rho > 1: 1 - 1/rho,
   4.8% at rho = 1.05); a stable one completes what arrives, give or take the wander of
   the number in the system (`deficit`). A deficit above 2% of the arrivals and above
   four standard deviations of that wander is rejected as unstable (so is a fleet whose analytic
   utilisation is >= 1, before any simulation: `bounds.py`). Counts, not a regression
   of the number in the system on time: that series is so autocorrelated (and, with
   common random numbers, shares its arrival bursts across candidates) that a trend test
   on it flags lightly loaded fleets.
4. **Percentile and confidence interval** (`percentile_ci`): the q-th percentile of
   the task (or turn) latencies of everything that arrived in the measurement span;
   a task still running at H counts as infinitely late (censored). The interval is
   the batch-quantile method (Seila 1982): the span is cut into `batches` batches of
   equal time, the percentile is taken in each, and the half-width is Student's t
   (batches - 1 degrees of freedom, 95%) times their standard error.
5. **Sequential stop** (`look`, given the SLO bound): the run pauses at LOOKS (after 3, 5 and
   7 of the `batches` batches have arrived, and LOOK_TAIL bounds more, so that a task of them
   still running has certainly missed the bound) and tests the bound on what has finished: the
   percentile's batch-quantile interval at LOOK_LEVEL (99%) over the batches so far, a task still
   running counted at its lower bound (the time it has run). An interval wholly over the bound
   (or a queue growing, as in step 3) stops the run as a miss; else it runs on. Three looks, each
   wrong with probability at most 0.5%: a run stops over the bound while the true percentile is
   under it with probability at most 1.5% (Bonferroni), against a full run whose own point
   estimate falls on the wrong side whenever the true value is within its noise of the bound
   (issue #34: most candidates of a search miss by far, and ran their whole window). Only misses
   stop: a fleet near its capacity fills slowly, so an early look is optimistic (the done-when
   plan's 12 Weak + 1 Strong at 1 task/s: task p95 212 s at a look, 243 s over the whole window),
   which errs towards continuing a miss, never towards passing a fleet.
6. **Slice** (`choose_slice`): a fleet of N_p replicas per pool at rate r whose window
   would hold more than `slice_tasks` (20,000) arrivals is simulated as k_p of each pool
   at rate r x k0 / N0 under the same router: the smallest pool (the one whose count
   rounds the most) cut exactly, k0 of its N0 replicas with k0 about N0 over the number
   of such slices the window's arrivals make (at least `min_replicas`), and every other
   pool rounded down, floor(N_p x k0 / N0), so that no pool of the slice carries less load
   per replica than in the full fleet (the slice is never optimistic); k0 grows, up to
   three times, until that excess is within 3%. Session affinity makes a slice exact up to the router's reach: a task
   stays on the replicas it first met, so a large fleet behaves as independent groups;
   what a slice loses is the least-loaded choice among more replicas, which only makes
   it slower. A test checks that a slice's percentiles match the full fleet's at 64
   replicas within their confidence intervals.

$ per task from a window: the fleet's $/hour (the whole fleet, paid while it idles) over
the tasks it completes per hour in the measurement span (the slice's completions scaled
by the slice), plus the API charges per task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import stats as sps

from specagent.simulator.capacity.fleet_build import TaskPlan
from specagent.simulator.fleet.config import Arrivals, Fleet
from specagent.simulator.fleet.results import FleetResult

#: Batches of the measurement span (batch quantiles).
BATCHES = 10
#: Observations wanted beyond the measured percentile (p95: 1,000 tasks; p99: 5,000).
TAIL = 50
#: Warm-up reserved, in reference latencies (the detected warm-up may be shorter).
WARMUP_REFS = 2.0
#: The tail after the measurement span, in reference latencies and in SLO bounds (the larger): a measured task
#: still running at the horizon counts as infinitely late, which decides "within the bound?" exactly as long as the
#: tail is at least the bound, and leaves percentiles up to the tail observable (finite intervals).
TAIL_REFS, TAIL_SLO = 3.0, 1.5
#: Completing fewer tasks than arrive by more than this share (and by more than DEFICIT_SDS standard deviations of
#: the number in the system's wander) is a queue growing linearly: a pool with offered load rho > 1 falls behind by
#: 1 - 1/rho (rho = 1.05: 4.8%).
GROWTH = 0.02
DEFICIT_SDS = 4.0
#: A slice keeps every pool's load per replica within this of the fleet's (else the closest found).
SLICE_RATIO_TOL = 0.03
#: Arrivals a window may hold before the fleet is cut into a slice of about this many.
SLICE_TASKS = 20_000
#: The sequential stop (module docstring, step 5): looks after this many batches, each at this two-sided level (three
#: looks at 99%: a stop on the wrong side of the true percentile has probability <= 3 x 0.5% = 1.5%), each this many
#: SLO bounds after the last batch's last arrival.
LOOKS = (3, 5, 7)
LOOK_LEVEL = 0.99
LOOK_TAIL = 1.25


@dataclass(frozen=True)
class Window:
    """Arrivals over [0, horizon); the warm-up allowance, the measurement span and the tail after it."""

    warmup_s: float
    measure_s: float
    tail_s: float

    @property
    def horizon_s(self) -> float:
        return self.warmup_s + self.measure_s + self.tail_s

    @property
    def measure_end_s(self) -> float:
        return self.warmup_s + self.measure_s


def size_window(rate: float, ref_latency_s: float, percentile: float, min_tasks: int, slo_s: float = 0.0,
                batches: int = BATCHES) -> Window:
    """The window for `rate` (tasks/s simulated) at reference latency `ref_latency_s` (see the module docstring)."""
    if not rate > 0 or not ref_latency_s > 0:
        raise ValueError(f"a window needs rate > 0 and a reference latency > 0, got {rate} and {ref_latency_s}")
    needed = max(int(min_tasks), math.ceil(TAIL / (1.0 - percentile / 100.0)))
    measure = max(batches * ref_latency_s, needed / rate)
    return Window(WARMUP_REFS * ref_latency_s, measure, max(TAIL_REFS * ref_latency_s, TAIL_SLO * slo_s))


def mser5(x: np.ndarray) -> int:
    """How many leading observations to drop (a multiple of 5), by MSER-5 (at most about half of them)."""
    m = len(x) // 5
    if m < 4:
        return 0
    b = np.asarray(x[: m * 5], dtype=np.float64).reshape(m, 5).mean(axis=1)
    # for each d: sum_{i >= d} (b_i - mean_d)^2 / (m - d)^2, from suffix sums
    rev = b[::-1]
    s1 = np.cumsum(rev)[::-1]
    s2 = np.cumsum(rev * rev)[::-1]
    k = m - np.arange(m)  # observations left after dropping d
    ss = s2 - s1 * s1 / k
    crit = ss / (k * k)
    half = m // 2
    d = int(np.argmin(crit[: half + 1]))
    return 5 * d


def _quantile(x: np.ndarray, q: float) -> float:
    """The q-th percentile (linear), where +inf entries (censored) are larger than every finite one."""
    if len(x) == 0:
        return math.inf
    xs = np.sort(x)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    a, b = xs[lo], xs[hi]
    if math.isinf(b):
        return math.inf if (hi == lo or pos > lo) else float(a)
    return float(a + (b - a) * (pos - lo))


def percentile_ci(values: np.ndarray, times: np.ndarray, t0: float, t1: float, q: float,
                  batches: int = BATCHES, level: float = 0.95) -> tuple[float, float, float]:
    """(estimate, low, high) of the q-th percentile of `values` observed at `times` in [t0, t1), by batch quantiles
    (a two-sided interval at `level`)."""
    inside = (times >= t0) & (times < t1)
    est = _quantile(values[inside], q)
    edges = np.linspace(t0, t1, batches + 1)
    idx = np.searchsorted(edges, times[inside], side="right") - 1
    v = values[inside]
    bq = np.array([_quantile(v[idx == j], q) for j in range(batches)])
    if not np.isfinite(bq).all() or not math.isfinite(est):
        return est, (float(np.min(bq)) if len(bq) else math.inf), math.inf
    half = float(sps.t.ppf(0.5 + level / 2.0, batches - 1) * bq.std(ddof=1) / math.sqrt(batches))
    return est, est - half, est + half


def in_system(arrival: np.ndarray, end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Tasks arrived and not yet finished at each time of `at` (unfinished tasks have end NaN)."""
    a = np.sort(arrival)
    e = np.sort(end[np.isfinite(end)])
    return np.searchsorted(a, at, side="right") - np.searchsorted(e, at, side="right")


def fill_time(arrival: np.ndarray, end: np.ndarray, t_end: float, points: int = 500) -> float:
    """When the fleet, started empty, first holds as many tasks as it usually holds over [t_end / 2, t_end) (their mean
    less one standard deviation: the level itself wanders, and waiting for the walk to touch its mean again is not
    what warming up means)."""
    grid = np.linspace(0.0, t_end, points, endpoint=False)
    n = in_system(arrival, end, grid)
    late = n[points // 2:]
    level = late.mean() - late.std()
    reached = np.flatnonzero(n >= level)
    return float(grid[reached[0]]) if len(reached) else t_end / 2


def deficit(arrival: np.ndarray, end: np.ndarray, t0: float, t1: float) -> tuple[float, float]:
    """(share of the tasks arriving in [t0, t1) that the fleet did not complete in it, one standard deviation of that
    share in a stable fleet).

    A - D over the span is the change of the number in the system between its ends, so in
    steady state its spread is that of the difference of two samples of that number:
    sqrt(2 var). The variance is the larger of the Poisson one of an uncongested fleet (the
    mean, M/G/infinity) and the one the run shows about its linear trend (a congested
    fleet wanders more; the trend is what is being tested, so it is taken out)."""
    a = int(((arrival >= t0) & (arrival < t1)).sum())
    d = int(((end >= t0) & (end < t1)).sum())
    if a == 0:
        return 0.0, math.inf
    at = np.linspace(t0, t1, 200, endpoint=False)
    n = in_system(arrival, end, at).astype(np.float64)
    resid = n - np.polyval(np.polyfit(at, n, 1), at)
    var = max(float(n.mean()), float(resid.var()), 1.0)
    return (a - d) / a, math.sqrt(2.0 * var) / a


# ------------------------------------------------------------------------------------------------------
# Slices of a large fleet
# ------------------------------------------------------------------------------------------------------
Counts = tuple[int | None, int | None]  # replicas per pool (WEAK, STRONG): None unlimited, 0 no pool


@dataclass(frozen=True)
class Slice:
    """k_p replicas of each pool at `fraction` of the rate stand for the full fleet's N_p."""

    full: Counts
    counts: Counts
    fraction: float  # simulated rate / full rate = max_p k_p / N_p
    load_excess: float  # most any pool's per-replica load exceeds the full fleet's (0: exact ratio)

    @property
    def is_full(self) -> bool:
        return self.counts == self.full

    def describe(self) -> str:
        if self.is_full:
            return "full fleet"
        parts = [f"{k} of {n} {name}" for name, k, n in zip(("weak", "strong"), self.counts, self.full) if n]
        return f"slice: {', '.join(parts)} at {self.fraction:.4g} of the rate (+{100 * self.load_excess:.1f}% load)"


def choose_slice(full: Counts, min_replicas: int = 1, parts: int | None = None) -> Slice:
    """A slice of about 1/`parts` of the fleet (None: the smallest one) keeping `min_replicas` of its smallest pool.

    The smallest finite pool, whose count rounds the most, is cut exactly: k0 of its N0
    replicas, the rate fraction k0 / N0. Every other pool keeps floor(N_p x k0 / N0)
    replicas, so none carries less load per replica than in the fleet (the slice errs
    slow, never fast), and k0 grows from its least value (N0 / parts, at least
    `min_replicas`) up to three times that until the other pools' load excess is within
    SLICE_RATIO_TOL (else the k0 with the least excess).
    """
    if min_replicas < 1:
        raise ValueError(f"a slice keeps at least one replica per pool, got {min_replicas}")
    finite = [(p, n) for p, n in enumerate(full) if n]
    if not finite:
        return Slice(full, full, 1.0, 0.0)
    p0, n0 = min(finite, key=lambda x: (x[1], x[0]))
    k_lo = max(min_replicas, math.ceil(n0 / parts)) if parts else min_replicas
    best: tuple[float, int, dict[int, int]] | None = None
    for k0 in range(k_lo, max(3 * k_lo, k_lo + 2) + 1):
        if k0 >= n0:
            break
        ks = {p: (k0 if p == p0 else math.floor(n * k0 / n0 + 1e-9)) for p, n in finite}
        excess = max((k0 / n0) / (ks[p] / n) - 1.0 for p, n in finite)
        if best is None or excess < best[0] - 1e-12:
            best = (excess, k0, ks)
        if excess <= SLICE_RATIO_TOL:
            break
    if best is None:
        return Slice(full, full, 1.0, 0.0)
    excess, k0, ks = best
    counts = tuple(ks.get(p, full[p]) for p in range(len(full)))
    return Slice(full, counts, k0 / n0, max(excess, 0.0))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------
# One steady-state measurement
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """A latency percentile of tasks ('task') or of agent turns between user messages ('turn')."""

    percentile: float = 95.0
    target: str = "task"


@dataclass
class SteadyResult:
    """What a fleet does at a sustained rate: the metric with its interval, stability, and the window's figures."""

    value_s: float  # the metric's point estimate (inf: censored beyond the tail)
    ci_low_s: float
    ci_high_s: float
    stable: bool
    reason: str  # why unstable ('' when stable)
    slice: Slice
    rate_simulated: float
    warmup_s: float  # detected (MSER-5)
    window: Window
    tasks_simulated: int
    tasks_measured: int
    tasks_censored: int  # measured tasks still running at the horizon
    throughput_per_s: float  # completions per second in the measurement span, scaled to the full fleet
    queue_growth: float  # share of the arrivals the fleet falls behind by (second half of the span)
    summary: dict = field(default_factory=dict)  # the slice run's fleet summary, with steady-state $ per task
    stopped_at_s: float = math.nan  # the clock where a look stopped the run (nan: it ran its whole window)

    @property
    def stopped_early(self) -> bool:
        return not math.isnan(self.stopped_at_s)

    def as_row(self, prefix: str = "") -> dict:
        return {f"{prefix}{k}": v for k, v in (
            ("value_s", self.value_s), ("ci_low_s", self.ci_low_s), ("ci_high_s", self.ci_high_s), ("stable", self.stable),
            ("unstable_reason", self.reason), ("slice", self.slice.describe()), ("rate_simulated", self.rate_simulated),
            ("warmup_s", self.warmup_s), ("measure_s", self.window.measure_s), ("horizon_s", self.window.horizon_s),
            ("tasks_simulated", self.tasks_simulated), ("tasks_measured", self.tasks_measured),
            ("tasks_censored", self.tasks_censored), ("throughput_per_s", self.throughput_per_s),
            ("queue_growth", self.queue_growth), ("stopped_at_s", self.stopped_at_s))}


def uncontended(tasks: TaskPlan, fleet: Fleet, seed: int = 0, n: int = 1000) -> FleetResult:
    """The first `n` tasks each alone on its replicas (`fleet` of unlimited pools), at one arrival per second: their
    latencies set the reference latency of a window, and no fleet can do better than they do."""
    m = min(n, tasks.n_tasks)
    return tasks.serve(fleet, Arrivals("poisson", rate=1.0, seed=seed).sample(m))


def unit_arrivals(seed: int, n: int) -> np.ndarray:
    """n arrival times of a unit-rate Poisson process (seeded): divided by a rate they are that rate's arrivals, so every
    candidate and every rate replays the same sequence (common random numbers)."""
    return np.cumsum(np.random.default_rng([int(seed), 7919, 1]).exponential(1.0, n))


def plan_window(full: Counts, rate: float, metric: Metric, ref_latency_s: float, *, slo_s: float = 0.0, min_tasks: int = 0,
                slice_tasks: int | None = SLICE_TASKS, min_replicas: int = 1, batches: int = BATCHES) -> tuple[Slice, Window]:
    """The slice that runs for fleet `full` at `rate`, and its window (what `measure_steady` simulates)."""
    whole = size_window(rate, ref_latency_s, metric.percentile, min_tasks, slo_s, batches)
    parts = None if slice_tasks is None else max(1, math.floor(rate * whole.horizon_s / slice_tasks))
    sl = choose_slice(full, min_replicas, parts) if parts and parts > 1 else Slice(full, full, 1.0, 0.0)
    return sl, size_window(rate * sl.fraction, ref_latency_s, metric.percentile, min_tasks, slo_s, batches)


def measure_steady(tasks: TaskPlan, build: Callable[[Counts], Fleet], full: Counts, rate: float, metric: Metric,
                   ref_latency_s: float, *, slo_s: float = 0.0, min_tasks: int = 0, slice_tasks: int | None = SLICE_TASKS,
                   min_replicas: int = 1, seed: int = 0, batches: int = BATCHES, stop_on: float | None = None) -> SteadyResult:
    """Serve `tasks` on the fleet `build(counts)` at a sustained `rate` and measure it in steady state (module docstring).

    `full` is the fleet's replicas per pool. A fleet whose window would hold more than
    `slice_tasks` arrivals runs as a slice of about that many (None: always the full
    fleet), keeping at least `min_replicas` of its smallest pool. `build` makes a fleet
    from replica counts (the caller's deployments, router and prices). `stop_on` (an SLO
    bound, seconds) stops the run at a look that finds it over the bound (step 5); the
    result then says where (`stopped_at_s`) and has no summary."""
    sl, win = plan_window(full, rate, metric, ref_latency_s, slo_s=slo_s, min_tasks=min_tasks, slice_tasks=slice_tasks,
                          min_replicas=min_replicas, batches=batches)
    rate_s = rate * sl.fraction
    need = int(rate_s * win.horizon_s * 1.1) + 64
    unit = unit_arrivals(seed, need)
    while unit[-1] / rate_s < win.horizon_s:  # rare: the draw ran short of the horizon
        need *= 2
        unit = unit_arrivals(seed, need)
    arrivals = unit[unit / rate_s < win.horizon_s] / rate_s
    sim = tasks.simulation(build(sl.counts), arrivals, horizon=win.horizon_s)
    if stop_on is not None and stop_on > 0 and metric.target == "task":
        span = win.measure_s / batches
        for k in LOOKS:
            clock = win.warmup_s + k * span + LOOK_TAIL * stop_on
            if k >= batches or clock >= win.measure_end_s:
                break
            sim.advance(clock)
            early = look(np.asarray(sim.arrivals), np.array(sim.end, dtype=np.float64), clock, win, k, span, metric, stop_on)
            if early is not None:
                est, lo, hi, t0, growth, stable, reason = early
                arr = np.asarray(sim.arrivals)
                arrived = int((arr <= clock).sum())
                inside = int(((arr >= t0) & (arr < win.warmup_s + k * span)).sum())
                return SteadyResult(est, lo, hi, stable, reason, sl, rate_s, t0, win, arrived, inside, 0, math.nan, growth,
                                    {}, clock)
    return analyse(tasks.result(sim), sl, rate_s, win, metric, batches)


def look(arr: np.ndarray, end: np.ndarray, clock: float, win: Window, k: int, span: float, metric: Metric,
         bound: float) -> tuple[float, float, float, float, float, bool, str] | None:
    """One look of the sequential stop (module docstring, step 5) at `clock`, after `k` batches of `span` seconds:
    (estimate, low, high, measured from, deficit, stable, why unstable) of the task latencies' lower bounds when the fleet
    misses `bound` for certain (the interval's low end over it, or a queue growing), else None."""
    t_end = win.warmup_s + k * span
    early = arr < t_end
    done = np.isfinite(end)
    ran = np.where(done, end - arr, clock - arr)  # a task still running: the time it has run (a lower bound)
    series = ran[early]
    d_lat = mser5(series)
    warm = max(float(arr[early][d_lat]) if 0 < d_lat < len(series) else 0.0, fill_time(arr, end, t_end))
    t0 = min(max(warm, win.warmup_s), t_end * 0.5)
    growth, wander = deficit(arr, end, t0, t_end)
    stable = not growth > max(GROWTH, DEFICIT_SDS * wander)
    reason = "" if stable else (f"the fleet completes {100 * growth:.1f}% fewer tasks than arrive (its queues grow "
                                f"linearly; sequential stop at {clock:,.0f} s)")
    q = metric.percentile
    est, lo, hi = percentile_ci(ran, arr, t0, t_end, q, k, LOOK_LEVEL)  # on lower bounds: over the bound for certain?
    # a look stops an unstable fleet whatever its interval, which at 3 batches and 99% can reach below 0 s (no latency is)
    return (est, max(lo, 0.0), hi, t0, growth, stable, reason) if lo > bound or not stable else None


def analyse(res: FleetResult, sl: Slice, rate_s: float, win: Window, metric: Metric, batches: int = BATCHES) -> SteadyResult:
    """Warm-up, stability, the metric with its interval and $ per task from one windowed run."""
    t = res.tasks
    arr = t["arrival_s"].to_numpy()
    end = t["end_s"].to_numpy()
    lat = t["latency_s"].to_numpy()
    horizon, t_end = win.horizon_s, win.measure_end_s
    # warm-up: MSER-5 on the latencies in arrival order (unfinished tasks at their lower bound, the time they have
    # run), and the fleet filling up (`fill_time`); the later of the two
    early = arr < t_end
    series = np.where(np.isfinite(lat), lat, horizon - arr)[early]
    d_lat = mser5(series)
    warm = max(float(arr[early][d_lat]) if 0 < d_lat < len(series) else 0.0, fill_time(arr, end, t_end))
    stable, reason = True, ""
    t0 = min(warm, t_end * 0.5)
    rel_growth, wander = deficit(arr, end, t0, t_end)
    if rel_growth > max(GROWTH, DEFICIT_SDS * wander):
        stable, reason = False, (f"the fleet completes {100 * rel_growth:.1f}% fewer tasks than arrive (its queues grow "
                                 f"linearly)")
    inside = (arr >= t0) & (arr < t_end)
    censored = int((inside & ~np.isfinite(lat)).sum())
    late = np.where(np.isfinite(lat), lat, math.inf)  # a task still running counts as infinitely late
    if metric.target == "task":
        est, lo, hi = percentile_ci(late, arr, t0, t_end, metric.percentile, batches)
    else:
        tr = res.turns
        tv = tr["latency_s"].to_numpy()
        ts = tr["t_start_s"].to_numpy()
        # a task still running at the horizon has a turn open for longer than the tail: one censored turn each
        cen = arr[inside & ~np.isfinite(lat)]
        values = np.concatenate([tv, np.full(len(cen), math.inf)])
        times = np.concatenate([ts, cen])
        est, lo, hi = percentile_ci(values, times, t0, t_end, metric.percentile, batches)
    done = (end >= t0) & (end < t_end)
    tput = float(done.sum()) / (t_end - t0) / sl.fraction if t_end > t0 else 0.0
    s = dict(res.summary)
    fleet_usd_h = _full_usd_per_hour(res.fleet, sl)
    api = float(t.loc[done, "api_usd"].mean()) if done.any() else 0.0
    s["usd_per_task"] = fleet_usd_h / (3600.0 * tput) + api if tput > 0 else math.inf
    s["usd_per_task_basis"] = "fleet $/hour over tasks completed per hour in the measurement window, plus API charges"
    task_lat = late[inside]
    s["window_latency_p50_s"] = _quantile(task_lat, 50.0)
    s["window_latency_p95_s"] = _quantile(task_lat, 95.0)
    return SteadyResult(est, lo, hi, stable, reason, sl, rate_s, t0, win, len(t), int(inside.sum()), censored, tput,
                        rel_growth, s)


def _full_usd_per_hour(fleet: Fleet, sl: Slice) -> float:
    """The full fleet's $/hour from the slice's pools (each finite pool scales by N_p / k_p)."""
    total = 0.0
    for i in range(2):
        pool, k, n = fleet.pool(i), sl.counts[i], sl.full[i]
        if pool is not None and k and n:
            total += pool.usd_per_hour * n / k
    return total
