"""Simulator throughput: trajectories/s (analytic engine) and agent steps/s (simpy engine).

Same 10,000 synthetic τ²-airline-like trajectories for both paths, SpecAgent K=4, one core.
Targets (issue 4): ≥ 20,000 trajectories/s analytic; ≥ 50,000 steps/s simpy.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from specagent.simulator.acceptance.model import AcceptanceModel  # noqa: E402
from specagent.simulator.pricing.des import run_des  # noqa: E402
from specagent.simulator.pricing.analytic import Pricer  # noqa: E402
from specagent.simulator.pricing.results import per_trajectory  # noqa: E402
from specagent.simulator.protocol.workload import unit_table_from_arrays  # noqa: E402
from specagent.simulator.run import plan_strategy  # noqa: E402
from specagent.simulator.scenario import default_setting  # noqa: E402
from specagent.simulator.strategies.catalog import make_strategy  # noqa: E402


def workload(n: int):
    """Synthetic τ²-airline-like steps as columns (the fast path: no pydantic or per-unit objects)."""
    from specagent.traces import step_arrays
    from specagent.traces.profile import load_profile
    from specagent.traces.synth import synthesize_frame

    return step_arrays(synthesize_frame(load_profile("tau2_airline"), n, seed=0))


def main(n: int = 10_000) -> None:
    arrays = workload(n)
    setting = default_setting()
    acc = AcceptanceModel()
    strat = make_strategy("specagent", k=4)

    t0 = time.perf_counter()
    episodes = unit_table_from_arrays(arrays)
    t1 = time.perf_counter()
    plan = plan_strategy(episodes, strat, setting, acc, seed=0)
    t2 = time.perf_counter()
    costs = Pricer(setting).price(plan)
    frame = per_trajectory(plan, costs)
    t3 = time.perf_counter()
    steps = len(arrays["traj"])
    analytic = t3 - t0
    print(f"workload: {n:,} synthetic tau2_airline trajectories, {steps:,} steps, {len(plan):,} plan events")
    print(f"unit extraction         {t1 - t0:8.3f} s")
    print(f"protocol planning       {t2 - t1:8.3f} s")
    print(f"vectorised pricing+sum  {t3 - t2:8.3f} s")
    rate = n / analytic
    print(f"analytic engine: {rate:,.0f} trajectories/s, columns to per-trajectory results (target 20,000: {rate / 20_000:.2f}x)")

    t4 = time.perf_counter()
    run_des(plan, costs.time_s)
    t5 = time.perf_counter()
    srate = steps / (t5 - t4)
    print(f"simpy engine:    {srate:,.0f} agent steps/s on the same plan ({t5 - t4:.2f} s; target 50,000: {srate / 50_000:.2f}x)")
    print(f"mean Strong bytes read per trajectory: {frame['strong_bytes_read'].mean() / 1e9:.1f} GB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
