"""`specagent acceptance calibrate -n 512` wall and CPU time (issue #34 item 6: goal <= 60 s on this 2-core machine).

Two parts:

1. The command itself, `acceptance calibrate -n N --seed 0` on the shipped figures and scenarios, in its own
   process, once per `--workers` value (1, and 0 = one per CPU): wall, CPU (user + sys of the process and its
   workers), peak RSS (the largest process), the 1-minute load before and after, and the SHA-256 of
   candidates.csv and summary.json. The runs must write the same bytes whatever the workers (exit 1 if not).
2. In this process, the per-candidate loop the sweep ran before the rewrite (`evaluate` once per candidate and
   context: a lockstep plan per strategy, every send mode priced in full) against `simulate_candidates` (candidates planned
   and priced a batch at a time) on the first `--reference-samples` candidates: CPU seconds per candidate of
   each, and whether every value is the same float (exit 1 if not).

    .venv/bin/python benchmarks/acceptance_calibrate.py [--samples 512] [--workers 1 0] [--reference-samples 64] [--json F]

The load is printed because this machine is shared: at load L on 2 cores a process gets about 2 / (L + 1) of
a core, so wall time follows the load and CPU time is the figure to compare across sessions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_cli(samples: int, workers: int, folder: Path) -> dict:
    out = folder / f"n{samples}-w{workers}"
    cmd = [sys.executable, "-c", "from specagent.cli.app import main; main()", "acceptance", "calibrate", "-n", str(samples),
           "--seed", "0", "--workers", str(workers), "-o", str(out)]
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        sys.exit(f"acceptance calibrate failed: {run.stderr.strip() or run.stdout.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    digest = {name: hashlib.sha256((out / name).read_bytes()).hexdigest()[:16] for name in ("candidates.csv", "summary.json")}
    return {"samples": samples, "workers": workers, "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(after.ru_maxrss / 1024), "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2), **digest}


def reference(samples: int) -> dict:
    """The pre-rewrite per-candidate loop vs `simulate_candidates`, in this process, on the same candidates."""
    from specagent.measurements.protocol_figures import load_protocol_figures
    from specagent.simulator.jobs.acceptance_candidates import (
        WORKLOADS, candidate_acceptance, evaluate, figure_status, latin_hypercube, load_context, simulate_candidates,
        strategies_needed,
    )
    from specagent.simulator.scenario import Scenario

    figs = load_protocol_figures()
    scenarios = {"h20": Scenario(), "edge": Scenario.load("edge")}
    contexts = [load_context(n, scenarios[n], strategies_needed(figs, n)) for n in WORKLOADS
                if any(f.setting == n and figure_status(f) == "scored" for f in figs)]
    t0 = time.process_time()
    old = []
    for values in latin_hypercube(samples, 0).to_dict(orient="records"):
        rec: dict[str, float] = {}
        for ctx in contexts:
            rec.update(evaluate(ctx, candidate_acceptance(values, scenarios[ctx.name].acceptance), figs))
        old.append(rec)
    t_old = time.process_time() - t0
    t0 = time.process_time()
    new = simulate_candidates(figs, samples=samples, seed=0, scenarios=scenarios).values
    t_new = time.process_time() - t0
    same = list(new.columns) == list(old[0]) and all(
        v == rec[k] or (math.isnan(v) and math.isnan(rec[k])) for i, rec in enumerate(old) for k, v in new.loc[i].items())
    return {"samples": samples, "per_candidate_loop_cpu_ms": round(t_old / samples * 1e3, 1),
            "batched_cpu_ms": round(t_new / samples * 1e3, 1), "speedup": round(t_old / t_new, 2), "identical": same,
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 0])
    ap.add_argument("--reference-samples", type=int, default=64, help="0: skip the in-process comparison")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        runs = [run_cli(args.samples, w, Path(d)) for w in args.workers]
    res = {"cli": runs, "goal_wall_s": 60}
    if args.reference_samples:
        res["reference"] = reference(args.reference_samples)
    print(json.dumps(res, indent=1))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1), encoding="utf-8")
    differ = len({(r["candidates.csv"], r["summary.json"]) for r in runs}) > 1
    if differ or not res.get("reference", {"identical": True})["identical"]:
        sys.exit("outputs differ between runs: " + ("workers" if differ else "batched vs per-candidate values"))


if __name__ == "__main__":
    main()
