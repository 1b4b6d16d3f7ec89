"""`specagent replay` on a 10^6-request trace: wall time and peak memory (issue 27: under 1 GB; 2.8 GB before chunking).

    .venv/bin/python benchmarks/replay_memory.py [--requests 1000000] [--chunk 100000] [--overlap 5000 ...] [--json out.json]

A synthetic request trace (seeded: Poisson arrivals at 40 requests/s, geometric prompt and output
lengths of mean 1,024 and 256 tokens) written as CSV, then replayed by the CLI in its own process on
10 replicas of the default scenario's Strong deployment (Qwen3.5-397B-A17B FP8 on 8x H20), the
per-request results streamed to Parquet. Peak RSS is the child process's (ru_maxrss), so it covers
reading the CSV, the simulation and the Parquet output. Several `--overlap` values replay the same trace once each and
print each one's chunk boundary gap (what docs/benchmarks.md's advice on `--overlap` at 10^6 requests comes from).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from specagent.traces.requests import save_requests, synthetic_requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--overlap", type=int, action="append", help="replay's --overlap (repeat for several; default 5000)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as d:
        csv, out = Path(d) / "requests.csv", Path(d) / "replay.parquet"
        save_requests(csv, synthetic_requests(args.requests, 40.0, seed=27))
        for overlap in args.overlap or [5000]:
            cmd = [sys.executable, "-c", "from specagent.cli.app import main; main()", "replay", str(csv), "--replicas", "10",
                   "--chunk", str(args.chunk), "--overlap", str(overlap), "-o", str(out), "--format", "json"]
            t0 = time.perf_counter()
            run = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if run.returncode != 0:
                sys.exit(f"replay failed: {run.stderr.strip()}")
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
            stats = json.loads(run.stdout)
            rows = pq.ParquetFile(out).metadata.num_rows
            res = {"requests": args.requests, "chunk": args.chunk, "overlap": overlap, "wall_s": round(wall, 1),
                   "peak_rss_mb": round(peak_mb, 1), "rows_written": rows,
                   "bytes_per_request": round(peak_mb * 2**20 / args.requests, 1), "p99_e2e_s": stats["p99_e2el_ms"] / 1000,
                   "median_ttft_ms": stats["median_ttft_ms"], "chunks": stats["chunks"],
                   "chunk_boundary_gap": stats["chunk_boundary_gap"]}
            print(json.dumps(res, indent=1), flush=True)
            results.append(res)
    if args.json:
        args.json.write_text(json.dumps(results if len(results) > 1 else results[0], indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
