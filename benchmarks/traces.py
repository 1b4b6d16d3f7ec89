"""Trace throughput: τ²-Bench import (steps/s) on the shared files, and synthesis (steps/s) vs the 200,000 target.

Run: .venv/bin/python benchmarks/traces.py
"""

from __future__ import annotations

import sys
import time

from specagent.traces import load_profile, synthesize, synthesize_frame
from specagent.traces.io import data_path
from specagent.traces.tau2 import import_tau2, shared_tau2_files

TARGET = 200_000


def best_of(fn, repeats: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    files = shared_tau2_files() or [data_path("tau2_airline_sample.json")]
    label = "shared τ²-Bench files" if shared_tau2_files() else "packaged τ²-Bench sample (shared data absent)"
    dt, trajs = best_of(lambda: import_tau2(files))
    steps = sum(len(t.steps) for t in trajs)
    print(f"import  : {len(trajs)} trajectories, {steps} steps from {len(files)} {label} "
          f"in {dt:.3f} s -> {steps / dt:,.0f} steps/s (JSON parse + validation)")
    prof = load_profile("tau2_airline")
    n = 20_000
    dt, df = best_of(lambda: synthesize_frame(prof, n, 0))
    rate = len(df) / dt
    print(f"synth   : {n} trajectories, {len(df)} steps (step table) in {dt:.3f} s -> {rate:,.0f} steps/s "
          f"= {rate / TARGET:.2f} x target {TARGET:,}")
    n2 = 2_000
    dt2, tr = best_of(lambda: synthesize(prof, n2, 0), repeats=1)
    s2 = sum(len(t.steps) for t in tr)
    print(f"synth   : {n2} trajectories as Trajectory objects, {s2} steps in {dt2:.3f} s -> {s2 / dt2:,.0f} steps/s "
          f"= {s2 / dt2 / TARGET:.2f} x target (object construction dominates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
