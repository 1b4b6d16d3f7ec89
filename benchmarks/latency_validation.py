"""Benchmark: held-out error of the serving-engine latency terms against public measurements.

Why: every time specagent prints rests on the pass-time function (roofline + engine fixed
costs); issue 12 sets targets for its error on published serving measurements, held out by
source (leave-one-source-out: no coefficient is fitted on the page it is scored on):
TPOT at concurrency <= 16 within 20% MAPE, TPOT above that and TTFT within 30%. These are
targets reported here, not timed or asserted in tests; a missed target is printed as missed
with the worst rows, so the gap stays visible.

    .venv/bin/python benchmarks/latency_validation.py [--data CSV] [--worst 12] [--workers N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from specagent.costmodel.latency_fit import serving_params
from specagent.costmodel.latency_targets import skipped_by_reason, targets_from_rows
from specagent.costmodel.latency_validation import TARGETS, validate
from specagent.costmodel.phases import decode
from specagent.measurements import default_path, file_sha256, load_serving
from specagent.simulator.parallel import default_workers, job_runner
from specagent.simulator.scenario import default_setting

#: The default setting's decode step is reported at these batches, at this context (tokens already cached per sequence).
TPOT_BATCHES = (1, 8, 32, 128)
TPOT_CONTEXT = 2000


def default_tpot_ms() -> dict[str, dict]:
    """TPOT of one decode step of the default Weak and Strong deployments (what `make run` prices), by batch."""
    s = default_setting()
    return {role: {"deployment": dep.describe(), "tpot_ms": {b: round(float(decode(dep, TPOT_CONTEXT, b).time_s[0]) * 1e3, 3)
                                                             for b in TPOT_BATCHES}}
            for role, dep in (("weak", s.weak), ("strong", s.strong))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="serving_latency.csv (default: the shipped one)")
    ap.add_argument("--worst", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--workers", type=int, default=0, help="processes for the held-out fits, as `latency validate --workers` (0: one per CPU)")
    args = ap.parse_args(argv)
    path = args.data or default_path("serving_latency.csv")
    rows = load_serving(path)
    targets, skipped = targets_from_rows(rows)
    t0 = time.perf_counter()
    params, kfit = serving_params()
    procs = args.workers or default_workers()
    val = validate(targets, skipped, held_out=True, params=params, shares=procs, run=job_runner(procs))
    secs = time.perf_counter() - t0
    met = val.targets_met()
    out = {
        "dataset": str(path), "sha256": file_sha256(path), "rows": len(rows), "rows_used": len(rows) - len(skipped),
        "figures": len(targets), "sources": len({t.row.source for t in targets}), "seconds": round(secs, 1), "workers": procs,
        "targets": met, "by_class": val.mape("load_class"), "by_gpu": val.mape("gpu"), "by_engine": val.mape("engine"),
        "by_model_class": val.mape("model_class"), "by_source": val.mape("source"),
        "source_offsets": val.source_offsets(),
        "worst": sorted(val.rows(), key=lambda r: -abs(r["error"]))[: args.worst],
        "excluded": [dict(reason=r, rows=ids) for r, ids in skipped_by_reason(skipped)],
        "moe_kernels": kfit.summary(),
        "default_tpot_context": TPOT_CONTEXT, "default_tpot": default_tpot_ms(),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"held-out (leave-one-source-out) MAPE on {len(targets)} figures from {out['rows_used']} of {len(rows)} rows, "
          f"{out['sources']} sources ({secs:.0f} s on {procs} processes; dataset sha256 {out['sha256'][:12]})")
    for k, v in met.items():
        state = "no rows" if v["met"] is None else ("met" if v["met"] else "MISSED")
        mape = "-" if v["mape"] is None else f"{v['mape']:.1%}"
        print(f"  {k:12s} {mape:>7s}  target {TARGETS[k]:.0%}  ({v['rows']} figures)  {state}")
    for k, v in out["by_class"].items():
        if k not in met:
            print(f"  {k:12s} {v['mape']:>7.1%}  (no target; {v['rows']} figures)")
    k = out["moe_kernels"]
    print(f"MoE priors from {k['kernel_times']} fused-MoE kernel times ({k['sources']} sources; held-out MAPE "
          f"{k['held_out_mape']:.1%}): " + ", ".join(f"{n} {v:.3g}" for n, v in k["fit"].items()))
    for key in ("by_gpu", "by_engine", "by_model_class", "by_source"):
        print(f"{key.replace('_', ' ')}: " + "; ".join(f"{k} {v['mape']:.0%} ({v['rows']})" for k, v in out[key].items()))
    print("between sources vs within them (each source's bias = median predicted/measured; MAPE once it is divided out):")
    for cls in TARGETS:
        v = out["source_offsets"].get(cls)
        if v:
            biases = ", ".join(f"{src.split(':')[0]} {sv['bias']:.2f}x" for src, sv in v["sources"].items() if sv["figures"] >= 5)
            print(f"  {cls:12s} {v['mape']:.1%} -> {v['mape_after_offset']:.1%} after one factor per source; "
                  f"sources with >= 5 figures: {biases}")
    print(f"the default setting's decode step (TPOT) at context {TPOT_CONTEXT}, batch {'/'.join(map(str, TPOT_BATCHES))}:")
    for role, v in out["default_tpot"].items():
        print(f"  {role:6s} {' / '.join(f'{t:.2f}' for t in v['tpot_ms'].values())} ms  ({v['deployment']})")
    print(f"excluded {len(skipped)} rows, by rule:")
    for e in out["excluded"]:
        print(f"  {len(e['rows'])} x {e['reason']}: {', '.join(e['rows'])}")
    print("worst rows:")
    for r in out["worst"]:
        print(f"  {r['row_id']:40s} {r['metric']:10s} {r['gpu']:9s} {r['engine']:12s} C={r['concurrency']:<6g} "
              f"measured {r['measured']:10.4g} {r['unit']:5s} predicted {r['predicted']:10.4g}  {r['error']:+.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
