"""Synthetic workloads at scale: peak memory (RSS) and wall time of the real commands, each in its own process.

Targets (issue 14): `simulate --synthetic` on 10⁶ trajectories within 2 GB peak RSS; `traces synth -n 200000`
well under the 3.4 GB / 11 s it took when every trajectory was held at once (it streams block by block now).

Run: .venv/bin/python benchmarks/synthetic_scale.py [--quick]   (--quick: 10⁵ instead of 10⁶)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RSS_GB = 2.0
SPECAGENT = str(Path(sys.executable).with_name("specagent"))


def measure(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one command run in its own process (os.wait4: this child's own usage)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([SPECAGENT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return dt, usage.ru_maxrss / 1024**2  # ru_maxrss is in KiB on Linux


def main() -> int:
    n_sim = 100_000 if "--quick" in sys.argv else 1_000_000
    tmp = Path(tempfile.mkdtemp(prefix="specagent-scale-"))
    try:
        rows = []
        for profile in ("tau2_airline", "everyday_life"):
            dt, gb = measure(["simulate", "specagent", "--synthetic", profile, "--trajectories", str(n_sim), "--json"])
            rows.append((f"simulate --synthetic {profile} --trajectories {n_sim:,}", dt, gb, TARGET_RSS_GB))
        dt, gb = measure(["simulate", "specagent", "--synthetic", "tau2_airline", "--trajectories", str(n_sim),
                          "-o", str(tmp / "rows.parquet"), "--json"])
        rows.append(("  … with -o rows.parquet (per-trajectory rows streamed)", dt, gb, TARGET_RSS_GB))
        for suffix, n in ((".parquet", 200_000), (".jsonl", 20_000)):
            dt, gb = measure(["traces", "synth", "--profile", "tau2_airline", "-n", str(n), "-o", str(tmp / f"s{suffix}")])
            rows.append((f"traces synth -n {n:,} -o s{suffix}", dt, gb, None))
        for what, dt, gb, target in rows:
            ratio = f" = {gb / target:.2f} x target {target:g} GB" if target else ""
            print(f"{what:<62} {dt:7.1f} s  peak RSS {gb:5.2f} GB{ratio}")
        worst = max(gb for _, _, gb, t in rows if t)
        print(f"largest peak RSS of the simulate runs: {worst:.2f} GB (target <= {TARGET_RSS_GB:g} GB: "
              f"{'met' if worst <= TARGET_RSS_GB else 'NOT met'})")
        return 0 if worst <= TARGET_RSS_GB else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
