"""CLI start-up: `specagent --help`, `specagent predict --help` and a usage error, as ratios to `python -c pass`.

The goal is each under 0.5 s on a quiet machine (docs/benchmarks.md records it with the machine); a ratio to an
empty interpreter's start travels between machines better than seconds do. Each command runs in a fresh process,
best of --repeat.

Run: .venv/bin/python benchmarks/cli_startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

SPECAGENT = Path(sys.executable).with_name("specagent")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "specagent --help": [str(SPECAGENT), "--help"],
    "specagent predict --help": [str(SPECAGENT), "predict", "--help"],
    "specagent predict --no-such-flag": [str(SPECAGENT), "predict", "--no-such-flag"],
    "specagent --version": [str(SPECAGENT), "--version"],
    # what `specagent replay TRACE.csv` imports before it reads the trace (issue #34: start-up was most of a 10k replay)
    "replay's import path": [sys.executable, "-c", "import specagent.cli.replay"],
}
GOAL_S = 0.5


def best_of(argv: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "100"})
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per command; the best is reported")
    args = ap.parse_args()
    base = best_of(COMMANDS["python -c pass"], args.repeat)
    print(f"{'command':36s} {'best s':>8s} {'× pass':>7s}  goal {GOAL_S} s")
    for name, argv in COMMANDS.items():
        t = base if name == "python -c pass" else best_of(argv, args.repeat)
        print(f"{name:36s} {t:8.3f} {t / base:7.1f}  {'' if name == 'python -c pass' else ('ok' if t <= GOAL_S else 'over')}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (a loaded machine inflates every row)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
