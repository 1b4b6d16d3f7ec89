"""The same protocol as simpy processes, on resources that can contend.

Each trajectory is a process that walks its plan group by group; within a group each lane
is a sub-process, and a group ends when its slowest lane does. Model calls hold a slot of
their model's resource for their priced duration. With unlimited slots (the default) the
results equal the analytic engine's; the fleet simulator replaces the fixed durations
with batched replica iterations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specagent.simulator.protocol.phases import PHASE_NAMES, STRONG_PHASES, WEAK_PHASES
from specagent.simulator.protocol.plan import CallPlan
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import simpy
else:  # loaded on first use: this module is on the CLI's start-up path
    simpy = lazy_module("simpy")


def run_des(plan: CallPlan, event_time: np.ndarray, weak_slots: int | None = None, strong_slots: int | None = None,
            start_times: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (start, end) time of every trajectory."""
    env = simpy.Environment()
    cap = 10**9
    weak = simpy.Resource(env, capacity=weak_slots or cap)
    strong = simpy.Resource(env, capacity=strong_slots or cap)
    resource_of = [-1] * len(PHASE_NAMES)
    for p_ in WEAK_PHASES:
        resource_of[p_] = 0
    for p_ in STRONG_PHASES:
        resource_of[p_] = 1
    resources = (weak, strong)

    order = np.argsort(plan.traj, kind="stable")
    bounds = np.searchsorted(plan.traj[order], np.arange(plan.n_traj + 1))
    start = np.zeros(plan.n_traj) if start_times is None else np.asarray(start_times, dtype=np.float64)
    end = np.zeros(plan.n_traj)
    phase = plan.phase.tolist()
    event_time = np.asarray(event_time, dtype=np.float64).tolist()
    group, lane = plan.group, plan.lane

    unlimited = weak_slots is None and strong_slots is None
    timeout = env.timeout

    def run_events(idx):
        for e in idx:
            r = resource_of[phase[e]]
            d = event_time[e]
            if r < 0 or unlimited:  # a request that can never block changes nothing: skip it
                yield timeout(d)
                continue
            with resources[r].request() as req:
                yield req
                yield env.timeout(d)

    group_l, lane_l = group.tolist(), lane.tolist()

    def trajectory(t: int):
        yield env.timeout(float(start[t]))
        ev = order[bounds[t]:bounds[t + 1]].tolist()
        i, n = 0, len(ev)
        while i < n:
            g = group_l[ev[i]]
            j = i + 1
            while j < n and group_l[ev[j]] == g:
                j += 1
            if j == i + 1 and unlimited:  # the common case: one event, nothing to wait for but itself
                yield timeout(event_time[ev[i]])
                i = j
                continue
            members = ev[i:j]
            lanes = sorted({lane_l[e] for e in members})
            if len(lanes) == 1:
                yield from run_events(members)
            else:
                procs = [env.process(run_events([e for e in members if lane_l[e] == ln])) for ln in lanes]
                yield simpy.AllOf(env, procs)
            i = j
        end[t] = env.now

    for t in range(plan.n_traj):
        env.process(trajectory(t))
    env.run()
    return start, end
