"""The sensitivity study and predict's intervals on the default workload: wall-clock seconds on this machine.

Issue #23's target: the whole `study sensitivity` (tornado + break-even map) on the default
workload (118 τ²-airline trajectories) in under 30 s. Also times the Monte Carlo behind
predict's intervals: SpecAgent's draws in one lockstep run over the tiled workload, against
the same draws planned one by one (what the vectorised path saves), and every strategy.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from specagent.simulator.run import plan_strategy, predict  # noqa: E402
from specagent.simulator.scenario import Scenario  # noqa: E402
from specagent.simulator.jobs.sensitivity import sensitivity_study  # noqa: E402
from specagent.simulator.strategies.catalog import make_strategy  # noqa: E402
from specagent.simulator.uncertainty import prepared, ratio_intervals  # noqa: E402


def main(draws: int = 100) -> None:
    sc = Scenario()
    t0 = time.perf_counter()
    trajs, _, name = sc.load_workload()
    setting = sc.setting()
    t_load = time.perf_counter() - t0

    t0 = time.perf_counter()
    study = sensitivity_study(sc, trajs, name, setting)
    t_study = time.perf_counter() - t0
    n_bars = study.tornado["assumption"].nunique()

    table = prepared(trajs)
    models = sc.uncertainty.distribution(sc.acceptance).sample(draws, sc.seed)
    strat = make_strategy("specagent", k=sc.k, review=sc.review)
    t0 = time.perf_counter()
    plan_strategy(table, strat, setting, models, sc.seed)
    t_tiled = time.perf_counter() - t0
    t0 = time.perf_counter()
    for m in models:
        plan_strategy(table, strat, setting, m, sc.seed)
    t_loop = time.perf_counter() - t0

    comp = predict(sc, trajs, name, setting=setting)
    t0 = time.perf_counter()
    ratio_intervals(comp, trajs, draws=draws)
    t_all = time.perf_counter() - t0

    print(f"workload: {len(trajs)} trajectories from {name} (loaded and resolved in {t_load:.1f} s)")
    print(f"study sensitivity: {t_study:.2f} s for {n_bars} tornado bars x 2 ends and a "
          f"{study.break_even.grid['acceptance'].nunique()} x {study.break_even.grid['time_ratio'].nunique()} break-even map "
          f"(target < 30 s)")
    print(f"SpecAgent, {draws} acceptance draws: {t_tiled:.2f} s planned in one lockstep run over the tiled workload, "
          f"{t_loop:.2f} s planned draw by draw ({t_loop / t_tiled:.1f}x)")
    print(f"predict's intervals, {draws} draws x {len(comp.summary)} strategies (planning + pricing): {t_all:.2f} s")
    sys.exit(0 if t_study < 30 else 1)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
