"""How long a plan will take, said before it starts: a cost model of the tasks its searches simulate.

Why: a 6-point curve on two GPU types ran past 10 minutes behind a bare counter and was
killed (issue #27). The model counts what a search simulates with the planner's own window
sizes: an uncontended pilot of PILOT_TASKS tasks, then 1 to 16 candidate fleets (the search
starts at the analytic bound, then doubles and bisects to 1%; a two-pool search repeats its Weak search when it
refines the Strong count), each over the steady-state
window `size_window` gives at that rate, capped at two slices. A window grows with the
reference latency (the tasks' uncontended percentile), which is only known once a search
has run its pilot: the low end takes the shortest window the planner uses (a reference
near zero: the minimum task count and the SLO's tail), the high end the SLO itself (a
search whose reference exceeds the SLO is infeasible). Tasks times steps per task over the
fleet engine's speed is the time: measured by a short probe on this machine as it is now (`plan.probe_speed`; a
figure recorded on a quiet machine, data/plan_speed.toml, only without one); searches share the
workers. The answer is a range, printed with its basis; tests/test_plan_estimate.py checks
the task counts against what plans really simulate. Once searches finish, the progress
line's ETA (their measured pace) takes over.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Sequence

from specagent.simulator.capacity.steady_state import size_window

#: Candidate fleets a search measures, low and high (plan_search.py: from the bound up, doubling, then bisecting to 1%).
#: 16, not 8: a two-pool search that refines its Strong count runs its Weak search again (issue #34's SpecAgent plan
#: at 5 tasks/s simulated 183,000 tasks, over the 145,000 that 8 candidates gave).
CANDIDATES = (1, 16)
#: The reference latency as a share of the SLO, low and high (see the module docstring; 0 is the shortest window).
REF_SHARE = (0.0, 1.0)
#: The uncontended pilot each search runs first (plan_search.PILOT_TASKS; kept equal by tests/test_plan_estimate.py).
PILOT_TASKS = 1000


@dataclass(frozen=True)
class PlanEstimate:
    searches: int
    workers: int
    low_tasks: float  # tasks simulated in all, low and high
    high_tasks: float
    low_s: float  # wall seconds, low and high
    high_s: float
    basis: str

    def text(self) -> str:
        lo, hi = duration(self.low_s), duration(self.high_s)
        return f"estimated wall time {'about ' + lo if lo == hi else lo + ' to ' + hi} ({self.basis})"


def duration(s: float) -> str:
    """Seconds as a person reads them: '40 s', '3.5 min', '1.2 h'."""
    if s < 90:
        return f"{max(1, round(s)):,} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def engine_speed(compiled: bool) -> tuple[float, float, str]:
    """(trajectory steps/s, requests/s, source) of the fleet engine in use, from data/plan_speed.toml."""
    data = tomllib.loads((resources.files("specagent.simulator") / "data" / "plan_speed.toml").read_text(encoding="utf-8"))
    comp = data["compiled"]
    if compiled:
        return float(comp["trajectory_steps_per_s"]), float(comp["requests_per_s"]), data["source"]
    pure = float(data["pure"]["trajectory_steps_per_s"])
    return pure, float(comp["requests_per_s"]) * pure / float(comp["trajectory_steps_per_s"]), data["source"]


def candidate_tasks(rate: float, req: Any, ref_share: float) -> float:
    """Tasks one candidate fleet simulates at `rate`: its steady-state window's arrivals (at most two slices)."""
    slo = req.objective
    w = size_window(rate, max(ref_share * slo.seconds, 1e-9), slo.percentile, req.n_tasks, slo.seconds)
    n = rate * w.horizon_s
    return min(n, 2.0 * req.slice_size) if req.slice_size else n


def mean_steps(workload: Any) -> float:
    """Steps (units: actions and user turns) per task of a plan's workload: trajectories, episodes or a UnitTable."""
    if workload is None:
        return 1.0  # a request trace: one request per task
    if hasattr(workload, "offsets"):  # UnitTable
        return len(workload) / max(1, len(workload.offsets) - 1)
    counts = [len(getattr(t, "steps", None) or getattr(t, "units", ())) for t in workload]
    return sum(counts) / max(1, len(counts))


def estimate_plan(req: Any, keys: Sequence[tuple], workload: Any, workers: int, compiled: bool,
                  probe: tuple[float, float] | None = None) -> PlanEstimate:
    """The range of tasks and wall time the searches `keys` (those still to run) take on `workers`; see the module docstring.

    `probe`: (seconds per task, seconds taken) measured on this machine now (`plan.probe_speed`); it replaces the
    engine speed recorded in data/plan_speed.toml, which holds only for the quiet machine it was measured on."""
    steps_s, requests_s, source = engine_speed(compiled)
    if probe is not None:
        per_task_s, unit = probe[0], f"{1.0 / max(probe[0], 1e-12):,.0f} tasks/s measured by a {probe[1]:.2f} s probe now"
        source = "this machine, now"
    elif req.serving:
        per_task_s, unit = 1.0 / requests_s, f"{requests_s:,.0f} requests/s"
    else:
        steps = mean_steps(workload)
        per_task_s, unit = steps / steps_s, f"{steps:.1f} steps per task at {steps_s:,.0f} steps/s"
    w = max(1, min(workers, len(keys)))
    tasks, secs = [], []
    for c, share in zip(CANDIDATES, REF_SHARE):
        each = [PILOT_TASKS + c * candidate_tasks(k[3], req, share) for k in keys]
        tasks.append(sum(each))
        secs.append(max(sum(each) / w, max(each, default=0.0)) * per_task_s)
    basis = (f"cost model: {len(keys)} search(es) on {w} worker(s), each a {PILOT_TASKS:,}-task pilot and "
             f"{CANDIDATES[0]}-{CANDIDATES[1]} candidate fleets over its rate's steady-state window, {tasks[0]:,.0f}-"
             f"{tasks[1]:,.0f} tasks in all, {unit} ({'compiled' if compiled else 'pure-Python'} engine, "
             f"{source.split(':')[0]})")
    return PlanEstimate(len(keys), w, tasks[0], tasks[1], secs[0], secs[1], basis)
