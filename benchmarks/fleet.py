"""Fleet simulator benchmark: simulated agent steps per wall second, sweep scaling, peak memory.

    .venv/bin/python benchmarks/fleet.py [--tasks 2000] [--sweep-tasks 30] [--json out.json]

1. 2,000 τ²-airline-like tasks under SpecAgent on one Strong replica (8x H20, fp8) and a
   Weak pool of 2 replicas per task/s of arrivals (Weak never queues); the arrival rate is
   doubled from 8/s until the Strong replica's decode batch reaches 16 (the brief asks for
   16-64). The decode batch is the number of decoding sequences per Strong iteration over
   *all* its iterations, those that also carry prefill chunks included (vLLM runs them in
   one batch, and the roofline prices them together). The summary's
   `strong_mean_decode_batch` averages only prefill-free iterations; under SpecAgent over
   90% of the Strong replica's time goes to iterations with verification prefill chunks
   (~5,000 new tokens per ~50 verdict tokens), so prefill-free iterations happen only when
   the prefill queue drains and that figure plateaus near 13 at saturation; both are
   printed, with the time-weighted batch. Throughput counts plan events (model calls, tool
   and user waits) and the source trajectories' steps, per wall second of `FleetSim.run`
   (results frames included) on one core.
   The final rate is timed `--repeat` times; the median is the headline.
2. The same on the other engine: the installed one is compiled with mypyc where a C
   compiler exists (setup.py); with it, the pure-Python engine is timed in a child
   process (SPECAGENT_PURE_PYTHON=1) and the speed-up printed (`--no-compare` skips it).
3. A 64-cell sweep with 1 and with 2 local workers.
4. Peak resident memory of this process (ru_maxrss).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np

from specagent.simulator.fleet import FLEET_BACKEND as ENGINE
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.fleet.native import PURE_ENV
from specagent.simulator.fleet.sim import FleetSim, compile_steps
from specagent.simulator.capacity.fleet_build import sample_tasks
from specagent.simulator.fleet.config import Arrivals, Fleet, ReplicaPool, Scheduler
from specagent.simulator.run import plan_strategy, to_episodes
from specagent.simulator.scenario import default_setting
from specagent.simulator.strategies.catalog import make_strategy
from specagent.simulator.jobs.sweep import SweepRequest, run as run_sweep
from specagent.traces import default_workload_path, load_trajectories


def fleet_throughput(n_tasks: int, all_rates: bool = False, repeat: int = 3) -> dict:
    trajs = load_trajectories(default_workload_path())
    eps = to_episodes(trajs)
    idx = sample_tasks(len(eps), n_tasks, 0)
    traj_steps = sum(len(trajs[i].steps) for i in idx)
    setting = default_setting()
    t0 = time.perf_counter()
    plan = plan_strategy([eps[i] for i in idx], make_strategy("specagent"), setting, AcceptanceModel(), 0)
    steps = compile_steps(plan)
    prep_s = time.perf_counter() - t0

    def timed_run(rate: float):
        fleet = Fleet(weak=ReplicaPool(setting.weak, max(1, int(rate * 2)), scheduler=Scheduler(max_num_seqs=256)),
                      strong=ReplicaPool(setting.strong, 1, scheduler=Scheduler(max_num_seqs=256)))
        t0 = time.perf_counter()
        res = FleetSim(plan, fleet, Arrivals(rate=rate, seed=0).sample(n_tasks), steps=steps).run()
        return res, time.perf_counter() - t0

    rate, best = 8.0, None
    while rate <= 1024:
        res, wall = timed_run(rate)
        seg = res.segments[res.segments["pool"] == "strong"]
        decoding = np.where(seg["prefill_tokens"] == 0, seg["batch"], seg["tokens"] - seg["prefill_tokens"])  # decode rows
        best = dict(rate_per_s=rate, wall_s=wall, plan_events=res.summary["plan_steps"], trajectory_steps=traj_steps,
                    plan_events_per_s=res.summary["plan_steps"] / wall, trajectory_steps_per_s=traj_steps / wall,
                    segments=len(res.segments),
                    strong_decode_batch_all_iterations=float((decoding * seg["iterations"]).sum() / seg["iterations"].sum()),
                    strong_decode_batch_time_weighted=float((decoding * seg["duration_s"]).sum() / seg["duration_s"].sum()),
                    strong_mean_decode_batch=res.summary["strong_mean_decode_batch"],
                    strong_queue_mean_s=res.summary["strong_queue_mean_s"], latency_p50_s=res.summary["latency_p50_s"],
                    weak_mean_decode_batch=res.summary["weak_mean_decode_batch"], weak_replicas=res.fleet.weak.replicas,
                    strong_utilisation=res.summary["strong_utilisation"], plan_and_compile_s=prep_s)
        print(f"rate {rate:g}/s: {wall:.2f} s wall, {best['plan_events_per_s']:,.0f} plan events/s, "
              f"{best['trajectory_steps_per_s']:,.0f} trajectory steps/s; Strong decode batch {best['strong_decode_batch_all_iterations']:.1f} "
              f"(all iterations; {best['strong_decode_batch_time_weighted']:.1f} time-weighted, "
              f"{best['strong_mean_decode_batch']:.1f} prefill-free only), utilisation {best['strong_utilisation']:.2f}, "
              f"Strong queue {best['strong_queue_mean_s']:.0f} s")
        if best["strong_decode_batch_all_iterations"] >= 16 and not all_rates:
            break
        rate *= 2
    walls = [best["wall_s"], *(timed_run(rate)[1] for _ in range(repeat - 1))]
    wall = statistics.median(walls)
    best.update(wall_s=wall, wall_s_runs=walls, plan_events_per_s=best["plan_events"] / wall,
                trajectory_steps_per_s=traj_steps / wall, engine=ENGINE.describe())
    print(f"rate {rate:g}/s, median of {len(walls)} runs ({', '.join(f'{w:.2f}' for w in walls)} s): "
          f"{best['trajectory_steps_per_s']:,.0f} trajectory steps/s, {best['plan_events_per_s']:,.0f} plan events/s "
          f"[{ENGINE.describe()}]")
    return best


def pure_python_throughput(n_tasks: int, repeat: int) -> dict:
    """The same measurement in a child process on the pure-Python engine."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "pure.json")
        subprocess.run([sys.executable, __file__, "--tasks", str(n_tasks), "--repeat", str(repeat), "--no-sweep", "--no-compare",
                        "--json", out], check=True, env={**os.environ, PURE_ENV: "1"})
        with open(out, encoding="utf-8") as f:
            return json.load(f)["fleet"]


def sweep_scaling(tasks: int) -> dict:
    cfg = SweepRequest.from_dict({
        "sweep": {"tasks": tasks, "seed": 1, "prices": {"h20": 2.0}},
        "grid": {"strategy": ["strongonly", "specagent"], "k": [2, 4, 8], "acceptance": [0.7, 0.9], "rate": [0.25, 0.5, 1.0, 2.0],
                 "fleet": ["a", "b"], "hardware": ["h20"]},
        "fleet": {"a": {"weak_replicas": 1, "strong_replicas": 1}, "b": {"weak_replicas": 2, "strong_replicas": 2}},
    }, "benchmark")
    out = {"cells": len(cfg.cells()), "tasks_per_cell": tasks}
    for w in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_sweep(replace(cfg, workers=w), d)
            out[f"wall_s_{w}_worker"] = time.perf_counter() - t0
        print(f"64-cell sweep, {w} worker(s): {out[f'wall_s_{w}_worker']:.1f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--sweep-tasks", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--all-rates", action="store_true", help="time every rate 8..1024/s instead of stopping at decode batch 16")
    ap.add_argument("--no-sweep", action="store_true", help="skip the 64-cell sweep timing")
    ap.add_argument("--repeat", type=int, default=3, help="runs at the final rate (the median is reported)")
    ap.add_argument("--no-compare", action="store_true", help="do not also time the pure-Python engine")
    a = ap.parse_args()
    print(f"fleet engine: {ENGINE.describe()}")
    res = {"engine": ENGINE.describe(), "fleet": fleet_throughput(a.tasks, a.all_rates, a.repeat)}
    if ENGINE.compiled and not a.no_compare:
        print("the same on the pure-Python engine:")
        pure = res["fleet_pure_python"] = pure_python_throughput(a.tasks, a.repeat)
        ratio = res["fleet"]["trajectory_steps_per_s"] / pure["trajectory_steps_per_s"]
        print(f"compiled / pure Python: {ratio:.2f}x trajectory steps/s")
    if not a.no_sweep:
        res["sweep"] = sweep_scaling(a.sweep_tasks)
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {res['peak_rss_mib']:.0f} MiB")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
