"""The same protocol as simpy processes, on resources that can contend.

Each trajectory is a process that walks its plan group by group; within a group each lane
is a sub-process, and a group ends when its slowest lane does. Model calls hold a slot of
their model's resource for their priced duration. With unlimited slots (the default) the
results equal the analytic engine's; the fleet simulator replaces the fixed durations
with batched replica iterations.
"""

from __future__ import annotations

import numpy as np
import simpy

from specagent.simulator.plan import STRONG_PHASES, WEAK_PHASES, CallPlan


def run_des(plan: CallPlan, event_time: np.ndarray, weak_slots: int | None = None, strong_slots: int | None = None,
            start_times: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (start, end) time of every trajectory."""
    env = simpy.Environment()
    cap = 10**9
    weak = simpy.Resource(env, capacity=weak_slots or cap)
    strong = simpy.Resource(env, capacity=strong_slots or cap)
    resource_of = np.full(8, -1)
    resource_of[list(WEAK_PHASES)] = 0
    resource_of[list(STRONG_PHASES)] = 1
    resources = (weak, strong)

    order = np.argsort(plan.traj, kind="stable")
    bounds = np.searchsorted(plan.traj[order], np.arange(plan.n_traj + 1))
    start = np.zeros(plan.n_traj) if start_times is None else np.asarray(start_times, dtype=np.float64)
    end = np.zeros(plan.n_traj)
    group, lane, phase = plan.group, plan.lane, plan.phase

    def run_events(idx: list[int]):
        for e in idx:
            r = resource_of[phase[e]]
            d = float(event_time[e])
            if r < 0:
                yield env.timeout(d)
                continue
            with resources[r].request() as req:
                yield req
                yield env.timeout(d)

    def trajectory(t: int):
        yield env.timeout(float(start[t]))
        ev = order[bounds[t]:bounds[t + 1]]
        i = 0
        while i < len(ev):
            g = group[ev[i]]
            j = i
            while j < len(ev) and group[ev[j]] == g:
                j += 1
            members = ev[i:j]
            lanes = np.unique(lane[members])
            if len(lanes) == 1:
                yield from run_events(list(members))
            else:
                procs = [env.process(run_events([e for e in members if lane[e] == ln])) for ln in lanes]
                yield simpy.AllOf(env, procs)
            i = j
        end[t] = env.now

    for t in range(plan.n_traj):
        env.process(trajectory(t))
    env.run()
    return start, end
