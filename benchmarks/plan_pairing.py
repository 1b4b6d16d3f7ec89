"""One real mixed deployment planned end to end (issue #34): wall time, the heartbeat's longest silence, and whether the
printed estimate brackets the real time.

    .venv/bin/python benchmarks/plan_pairing.py [--slo p95-task=240s ...] [--json out.json]

The done-when plan: `specagent plan --rate 5/s --slo p95-task=240s --weak-model qwen3-4b --weak-hardware l40s
--strong-model qwen3-32b --strong-hardware h100 --strong-gpus 4 --strong-dtype bf16` (one pairing: one search per
strategy; target 60 s on 2 cores), then the same at `p95-task=120s` (below what tasks take alone: it must stop at
once and print the best achievable p95 for every pairing), and at `p95-task=172s` for SpecAgent alone (just above the
uncontended p95, under what any contended fleet reaches: the search must stop on the plateau, not climb to the replica
cap). `--curve` adds the 6-point capacity curve x 2 strategies x 2 GPUs (`plan --rate 0.5/s..8/s --points 6 --gpu
h20,h200`, the default strategies and SLO: 24 searches; target 5 min on 2 cores). Each runs in its own process with stderr read line by line as it arrives, so the gaps between progress lines
are measured as a user sees them. The machine is shared: wall time under others' load is longer than on an idle
machine; CPU seconds (the child's, its worker processes' included) and the load average are printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

TARGET_S = 60.0
SPECAGENT = str(Path(sys.executable).with_name("specagent"))
BASE = ["plan", "--rate", "5/s", "--weak-model", "qwen3-4b", "--weak-hardware", "l40s", "--strong-model", "qwen3-32b",
        "--strong-hardware", "h100", "--strong-gpus", "4", "--strong-dtype", "bf16"]
CASES = {"p95-task=240s": [], "p95-task=120s": [], "p95-task=172s": ["--strategy", "specagent"]}
CURVE = ["plan", "--rate", "0.5/s..8/s", "--points", "6", "--gpu", "h20,h200"]
CURVE_TARGET_S = 300.0
ESTIMATE = re.compile(r"estimated wall time (?:about )?(\d[\d,.]*) (s|min|h)(?: to (\d[\d,.]*) (s|min|h))?")


def _seconds(v: str, unit: str) -> float:
    return float(v.replace(",", "")) * {"s": 1.0, "min": 60.0, "h": 3600.0}[unit]


def run_case(slo: str, extra: list[str], base: list[str] = BASE) -> dict:
    """One plan: wall and CPU seconds, the printed estimate, the longest gap between stderr lines once searches ran."""
    cmd = [SPECAGENT, *base, *(["--slo", slo] if slo else []), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"})
    stamps: list[tuple[float, str]] = []

    def read_err() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            stamps.append((time.perf_counter() - t0, line.rstrip()))

    reader = threading.Thread(target=read_err)
    reader.start()
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    reader.join()
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {' '.join(s for _, s in stamps)[-2000:]}")
    est = next((ESTIMATE.search(s) for _, s in stamps if ESTIMATE.search(s)), None)
    lo = hi = float("nan")
    if est:
        lo = _seconds(est.group(1), est.group(2))
        hi = _seconds(est.group(3), est.group(4)) if est.group(3) else lo
    t_est = next((t for t, s in stamps if ESTIMATE.search(s)), 0.0)
    times = [t_est] + [t for t, s in stamps if t > t_est] + [wall]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"slo": slo, "extra": extra, "wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "load_avg_1min": round(os.getloadavg()[0], 2), "estimate_s": [lo, hi],
            "estimate_brackets_search_time": bool(lo <= wall - t_est <= hi) if est else None,
            "longest_silence_s": round(max(gaps, default=0.0), 1), "heartbeats": sum("tried" in s for _, s in stamps),
            "best_achievable": re.findall(r"best achievable task p95 [\d,.]+ s", out),
            "fleets": re.findall(r"fleet: .*", out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slo", action="append", help="run only these SLO cases (default: all three)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--curve", action="store_true", help="also time the 6-point curve x 2 strategies x 2 GPUs")
    ap.add_argument("--curve-only", action="store_true", help="time only that curve")
    args = ap.parse_args()
    machine = {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "platform": platform.platform(),
               "python": platform.python_version()}
    print(f"machine: {machine}")
    rows = []
    for slo, extra in CASES.items():
        if (args.slo and slo not in args.slo) or args.curve_only:
            continue
        r = run_case(slo, extra)
        rows.append(r)
        target = f" (target {TARGET_S:.0f} s: {r['wall_s'] / TARGET_S:.2f}x)" if slo == "p95-task=240s" else ""
        print(f"{slo} {' '.join(extra)}: {r['wall_s']} s wall{target}, {r['cpu_s']} s CPU, load {r['load_avg_1min']}; "
              f"estimate {r['estimate_s'][0]:.0f}-{r['estimate_s'][1]:.0f} s (brackets the searches: "
              f"{r['estimate_brackets_search_time']}); longest silence {r['longest_silence_s']} s over "
              f"{r['heartbeats']} heartbeat lines")
        for line in r["fleets"] + r["best_achievable"]:
            print(f"    {line}")
    if args.curve or args.curve_only:
        r = run_case("", [], CURVE)
        rows.append(r)
        print(f"curve ({' '.join(CURVE[1:])}): {r['wall_s']} s wall (target {CURVE_TARGET_S:.0f} s: "
              f"{r['wall_s'] / CURVE_TARGET_S:.2f}x), {r['cpu_s']} s CPU, load {r['load_avg_1min']}; estimate "
              f"{r['estimate_s'][0]:.0f}-{r['estimate_s'][1]:.0f} s (brackets the searches: {r['estimate_brackets_search_time']}); "
              f"longest silence {r['longest_silence_s']} s")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
