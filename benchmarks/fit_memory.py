"""`acceptance fit` of 10^5 and 10^6 verifications: wall time, CPU time and peak memory (issue #35, F3-19).

    .venv/bin/python benchmarks/fit_memory.py [--records 100000 1000000] [--json out.json]

A synthetic verdict log (`simulate_verdict_log` of the default acceptance model with thinking on, seeded, written in
batches of 1,000 tasks of 8 verifications, each batch's tasks renamed so every record is a distinct verification)
is fitted by the CLI (`specagent acceptance fit LOG -o fit.toml`) in its own process. Peak RSS is that process's
(ru_maxrss of the child), so it covers reading the log, the identity check and the fit; CPU is its user + system
time. The reader holds one line at a time; what grows with the log is what the likelihood keeps per verification
(its drafted kinds, prefix and token counts) and the 16-byte identity of each record.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.verdict_records import simulate_verdict_log

BATCH_TASKS = 1000
PER_TASK = 8


def write_log(path: Path, records: int) -> int:
    """`records` verifications (rounded up to whole batches) appended batch by batch; returns the file's size in bytes."""
    truth = AcceptanceModel(position_decay=0.9, verify_reasoning_tokens=300, repair_reasoning_tokens=200, weak_token_ratio=0.8)
    batches = -(-records // (BATCH_TASKS * PER_TASK))
    with open(path, "w", encoding="utf-8") as fh:
        for b in range(batches):
            for r in simulate_verdict_log(truth, BATCH_TASKS, seed=b, segments_per_task=PER_TASK):
                fh.write(r.model_copy(update={"task": f"b{b}-{r.task}"}).to_json() + "\n")
    return path.stat().st_size


def measure(records: int, folder: Path) -> dict:
    log, out = folder / f"v{records}.jsonl", folder / f"fit{records}.toml"
    size = write_log(log, records)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [sys.executable, "-c", "from specagent.cli.app import main; main()", "acceptance", "fit", str(log), "-o", str(out)]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        sys.exit(f"acceptance fit failed: {run.stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_mb = after.ru_maxrss / 1024  # the largest child so far: runs go smallest first
    lines = sum(1 for _ in open(log, "rb"))
    log.unlink()
    return {"records": lines, "log_mb": round(size / 2**20, 1), "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(peak_mb, 1), "bytes_per_record": round(peak_mb * 2**20 / lines),
            "load_1min": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = [measure(n, Path(d)) for n in sorted(args.records)]
    print(json.dumps(res, indent=1))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
