"""Capacity planning at real traffic (issue 13): `plan` wall time up to 1,000 tasks/s, and plain serving request
traces simulated per wall second with their peak memory.

    .venv/bin/python benchmarks/capacity.py [--quick] [--json out.json]

1. `specagent plan --rate R --slo p95-task=300s --strategy strongonly --gpu h200` (the issue's example) at 2, 50
   and 1,000 tasks/s, each in its own process: wall time (target at 1,000/s: 120 s on this machine), the fleet
   found, the analytic bound, the slice simulated and the percentile's 95% interval: the fleets must grow with
   the rate.
2. The same at 1,000 tasks/s for both strategies on both GPU types (`--strategy strongonly,specagent
   --gpu h20,h200`, four searches on the machine's CPUs).
3. A plain serving request trace (synthetic, seeded: Poisson arrivals, geometric prompt and output lengths of
   mean 1,024 and 256 tokens) of 10,000 and 100,000 requests replayed at its own arrival times on 8 replicas of
   the scenario's Strong deployment (Qwen3.5-397B-A17B FP8 on 4x H200) at half their analytic capacity, each in
   its own process: requests simulated per wall second and peak RSS.

`--quick` skips step 2 and the 100,000-request run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 120.0
SPECAGENT = str(Path(sys.executable).with_name("specagent"))


def run(cmd: list[str]) -> tuple[float, float, str, float, float]:
    """(wall seconds, peak RSS in MiB, stdout, CPU seconds, load average at the end) of one command in its own process
    (os.wait4: the child's own usage, its worker processes' CPU included). The machine is shared: wall time under
    others' load is longer than on an idle machine; CPU seconds are not."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, "OMP_NUM_THREADS": "1"})
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {err.read().decode()[-2000:]}")
        return dt, usage.ru_maxrss / 1024, out.read().decode(), usage.ru_utime + usage.ru_stime, os.getloadavg()[0]


def plan(rate: str, strategies: str, gpus: str) -> dict:
    # --search-gpus: the GPUs per replica these figures were planned with (the fewest of 1, 2, 4, 8 that fit); without
    # it `plan` keeps the scenario's (8 Strong GPUs)
    dt, _, out, cpu, load = run([SPECAGENT, "plan", "--rate", rate, "--slo", "p95-task=300s", "--strategy", strategies, "--gpu", gpus,
                                 "--search-gpus", "1,2,4,8", "--json"])
    doc = json.loads(out)
    rows = []
    for b in doc["best"]:
        rows.append({k: b[k] for k in ("strategy", "rate", "strong_gpu", "weak_replicas", "strong_replicas", "gpus", "usd_per_hour",
                                       "slo_value_s", "slo_ci_low_s", "slo_ci_high_s", "strong_bound_replicas",
                                       "weak_bound_replicas", "slice", "tasks_simulated", "evaluations")})
    return {"rate": rate, "strategies": strategies, "gpus": gpus, "wall_s": dt, "cpu_s": cpu, "load_average": load, "best": rows,
            "notes": doc["notes"]}


def requests_child(n: int) -> None:
    """Replay n synthetic requests (one process per size, for its own peak RSS); prints a JSON line."""
    from specagent.simulator.capacity.bounds import pool_capacity, pool_work
    from specagent.simulator.capacity.fleet_build import build_fleet, fitting_deployment, request_tasks
    from specagent.simulator.fleet.config import STRONG_POOL, engine_scheduler
    from specagent.simulator.scenario import Scenario
    from specagent.traces.requests import synthetic_requests

    sc = Scenario()
    probe = request_tasks(synthetic_requests(2000, rate=1.0, seed=0))
    dep = fitting_deployment(sc.strong, "h200", probe.max_context)
    cap = pool_capacity(dep, engine_scheduler(dep), pool_work(probe, STRONG_POOL), sc.weight_mode)
    replicas = 8
    rate = 0.5 * replicas * cap.tasks_per_s
    trace = synthetic_requests(n, rate=rate, seed=0)
    tasks = request_tasks(trace)
    fleet = build_fleet(None, dep, 0, replicas, weight_mode=sc.weight_mode)
    t0 = time.perf_counter()
    res = tasks.serve(fleet, trace.arrival_s)
    wall = time.perf_counter() - t0
    print(json.dumps({"requests": n, "rate_per_s": rate, "replicas": replicas, "deployment": dep.describe(), "wall_s": wall,
                      "requests_per_wall_s": n / wall, "simulated_s": float(res.tasks["end_s"].max()),
                      "latency_p50_s": float(res.tasks["latency_s"].median()),
                      "latency_p95_s": float(res.tasks["latency_s"].quantile(0.95)),
                      "strong_mean_decode_batch": res.summary["strong_mean_decode_batch"]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the two-strategy run at 1000/s and the 100,000-request run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--requests-child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.requests_child:
        requests_child(a.requests_child)
        return
    res: dict = {"plans": [], "requests": []}
    print("1. plan --slo p95-task=300s --strategy strongonly --gpu h200")
    for rate in ("2/s", "50/s", "1000/s"):
        p = plan(rate, "strongonly", "h200")
        res["plans"].append(p)
        for b in p["best"]:
            print(f"  {rate:>7}: {p['wall_s']:6.1f} s wall ({p['cpu_s']:.1f} s CPU, load {p['load_average']:.1f}); "
                  f"{b['strong_replicas']:,} Strong replicas = {b['gpus']:,} GPUs "
                  f"(analytic bound {b['strong_bound_replicas']:,}); p95 {b['slo_value_s']:.1f} s "
                  f"[{b['slo_ci_low_s']:.1f}, {b['slo_ci_high_s']:.1f}]; {b['slice']}; {b['evaluations']} candidates")
    top = res["plans"][-1]["wall_s"]
    print(f"  1000/s answered in {top:.1f} s: {top / TARGET_S:.2f} x the {TARGET_S:.0f} s target")
    if not a.quick:
        print("2. plan --rate 1000/s --slo p95-task=300s --strategy strongonly,specagent --gpu h20,h200")
        p = plan("1000/s", "strongonly,specagent", "h20,h200")
        res["plans"].append(p)
        for b in p["best"]:
            print(f"  {b['strategy']:>10} on {b['strong_gpu']}: {b['weak_replicas']:,} Weak + {b['strong_replicas']:,} Strong = "
                  f"{b['gpus']:,} GPUs; p95 {b['slo_value_s']:.1f} s; {b['slice']}")
        print(f"  answered in {p['wall_s']:.1f} s ({p['cpu_s']:.1f} s CPU on {os.cpu_count()} CPUs, load {p['load_average']:.1f}): "
              f"{p['wall_s'] / TARGET_S:.2f} x the {TARGET_S:.0f} s target")
    print("3. plain serving request trace replayed on 8 Strong replicas at half their analytic capacity")
    for n in ((10_000,) if a.quick else (10_000, 100_000)):
        _, rss, out, _, _ = run([sys.executable, __file__, "--requests-child", str(n)])
        r = json.loads(out.strip().splitlines()[-1])
        r["peak_rss_mib"] = rss
        res["requests"].append(r)
        print(f"  {n:>7,} requests: {r['requests_per_wall_s']:,.0f} requests/s simulated ({r['wall_s']:.1f} s wall for "
              f"{r['simulated_s']:,.0f} s of traffic at {r['rate_per_s']:.1f}/s), peak RSS {rss:,.0f} MiB; p95 latency "
              f"{r['latency_p95_s']:.1f} s, decode batch {r['strong_mean_decode_batch']:.0f}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
