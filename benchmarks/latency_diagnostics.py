"""Diagnostics of the held-out latency errors (issue 28): the batch 32-256 class and the concurrency-1 TTFT class.

Why: held-out rows at a running batch of 32-256 were under-predicted on other GPUs, and TTFTs at low load missed the
issue-12 target. Three questions are separated here, the first on the held-out predictions `specagent latency validate
--rows` writes, the others on the shipped engine profiles:

1. **Shape within a source.** For every source with the same setup (model, GPU, GPU count, engine, dtype, lengths)
   measured at two or more loads, the measured growth of per-token time with concurrency against the predicted one:
   shape = (predicted TPOT(C) / predicted TPOT(C0)) / (measured TPOT(C) / measured TPOT(C0)), C0 the setup's lowest
   concurrency. Below 1: the model's time grows too slowly with batch (a missing batch-dependent cost); a constant
   offset per source (engine version, client, machine) cancels out of the ratio.
2. **CUDA-graph padding.** Decode batches are replayed from graphs captured at fixed sizes and padded up to the next
   one: SGLang captures [1, 2, 4, 8] + range(16, 161, 8) (sgl-project/sglang python/sglang/srt/model_executor/
   cuda_graph_runner.py, get_batch_sizes_to_capture; more multiples of 8 up to 256 on GPUs over 90 GB), vLLM
   [1, 2, 4] + range(8, max + 1, 8) (vllm-project/vllm vllm/config.py, batch_size_capture_list). Above batch 8 both pad
   to the next multiple of 8, so at most 7 rows. The upper bound of its cost: the decode step priced at the padded batch
   with every padded row a full sequence (its KV read included, which the engines do not do: a padded row attends to
   one token) over the step at the batch itself, with the shipped engine profile.
3. **The per-request overhead each source implies.** A TTFT at concurrency 1 is priced as the engine's `request_us` plus
   one prefill of the prompt (`costmodel.latency_targets`); measured TTFT minus that prefill is the overhead the source
   implies. One engine term can fit every source only if these agree; their spread (per source: median, and the range
   over its figures) is the part of the class's error no per-engine constant removes.

    .venv/bin/python benchmarks/latency_diagnostics.py [--rows ROWS.csv] [--json]

Without --rows it runs the leave-one-source-out validation itself (about 10 minutes on 2 cores); with the CSV that
`specagent latency validate --rows ROWS.csv` wrote, it reads those held-out predictions instead.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from specagent.costmodel.latency import latency_terms
from specagent.costmodel.latency_fit import serving_params
from specagent.costmodel.latency_targets import predict, targets_from_rows
from specagent.costmodel.latency_validation import validate
from specagent.costmodel.phases import decode
from specagent.measurements import default_path, load_serving
from specagent.simulator.parallel import default_workers, job_runner

#: Both engines pad a decode batch above 8 to the next multiple of 8 (module docstring: the capture lists and their files).
GRAPH_STEP = 8


def padded_batch(b: int) -> int:
    """The captured graph size a decode batch of `b` replays on (SGLang and vLLM defaults, batch <= 256)."""
    if b <= 2:
        return b
    if b <= 4:
        return 4
    return GRAPH_STEP * math.ceil(b / GRAPH_STEP)


def shapes(rows: list[dict]) -> list[dict]:
    """Per setup measured at two or more concurrencies: measured and predicted TPOT growth from its lowest concurrency."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["metric"] != "tpot":
            continue
        key = (r["source"], r["model"], r["gpu"], r["gpus"], r["engine"], r["input_tokens"], r["output_tokens"])
        groups[key].append(r)
    out = []
    for key, rs in sorted(groups.items()):
        by_c = {}
        for r in rs:  # one row per concurrency (the first, where a source repeats a setup with other flags)
            by_c.setdefault(float(r["concurrency"]), r)
        if len(by_c) < 2:
            continue
        c0 = min(by_c)
        base = by_c[c0]
        for c in sorted(by_c)[1:]:
            r = by_c[c]
            meas = float(r["measured"]) / float(base["measured"])
            pred = float(r["predicted"]) / float(base["predicted"])
            out.append(dict(source=key[0], model=key[1], gpu=key[2], gpus=int(key[3]), engine=key[4], c0=c0, c=c,
                            measured_growth=meas, predicted_growth=pred, shape=pred / meas, error_at_c=float(r["error"])))
    return out


def padding_bounds(rows: list[dict]) -> list[dict]:
    """Upper bound of the CUDA-graph padding cost for every held-out decode figure at a running batch of 32-256."""
    data = {r.row_id: r for r in load_serving(default_path("serving_latency.csv"))}
    want = {r["row_id"] for r in rows if 32 <= int(r["batch"]) <= 256 and r["metric"] in ("tpot", "throughput", "e2e")}
    targets, _ = targets_from_rows([data[i] for i in sorted(want) if i in data])
    out = []
    for t in targets:
        if t.metric == "ttft":  # the row's decode batch once, whatever figures it has
            continue
        pb = padded_batch(t.batch)
        ctx = t.input_tokens + t.output_tokens / 2.0
        at_b = float(decode(t.dep, ctx, t.batch).time_s[0])
        at_pad = float(decode(t.dep, ctx, pb).time_s[0])
        out.append(dict(row_id=t.row.row_id, source=t.row.source, gpu=t.row.gpu, batch=t.batch, padded=pb,
                        step_ratio_upper_bound=at_pad / at_b))
    return out


def implied_overheads() -> dict[str, dict]:
    """Per source: the per-request overhead (ms) its concurrency-1 TTFTs imply, measured TTFT minus the priced prefill."""
    targets, _ = targets_from_rows(load_serving(default_path("serving_latency.csv")))
    ttft1 = [t for t in targets if t.metric == "ttft" and t.concurrency <= 1]
    pred = predict(ttft1)  # shipped profiles: request_us + one prefill
    groups: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for t, p in zip(ttft1, pred):
        request_s = latency_terms(t.dep).request_s
        groups[t.row.source].append((t.measured - (p - request_s), request_s, t.dep.serving_engine.id))
    out = {}
    for src, v in sorted(groups.items()):
        implied = np.array([x[0] for x in v]) * 1e3
        out[src] = dict(figures=len(v), engines=sorted({x[2] for x in v}), shipped_request_ms=sorted({round(x[1] * 1e3, 1) for x in v}),
                        implied_median_ms=float(np.median(implied)), implied_min_ms=float(implied.min()),
                        implied_max_ms=float(implied.max()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default=None, help="CSV written by `specagent latency validate --rows` (held-out predictions); "
                    "default: run the leave-one-source-out validation here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.rows is None:
        targets, skipped = targets_from_rows(load_serving(default_path("serving_latency.csv")))
        procs = default_workers()
        val = validate(targets, skipped, params=serving_params()[0], shares=procs, run=job_runner(procs))
        rows = [{k: str(v) for k, v in r.items()} for r in val.rows()]
        return report(rows, args.json)
    path = Path(args.rows)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        print(f"error: {path}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    need = {"row_id", "source", "model", "gpu", "gpus", "engine", "metric", "concurrency", "batch", "input_tokens",
            "output_tokens", "measured", "predicted", "error"}
    missing = need - set(rows[0] if rows else {})
    if missing:
        print(f"error: {path}: line 1: expected the columns of `latency validate --rows`; missing {sorted(missing)}", file=sys.stderr)
        return 2
    return report(rows, args.json)


def report(rows: list[dict], as_json: bool) -> int:
    """Print the three diagnostics for these held-out rows (tables, or JSON)."""
    sh, pad, over = shapes(rows), padding_bounds(rows), implied_overheads()
    if as_json:
        print(json.dumps({"shapes": sh, "padding": pad, "implied_request_overhead": over}, indent=2))
        return 0
    print("TPOT growth with concurrency within one setup (shape < 1: predicted growth too slow):")
    for s in sh:
        print(f"  {s['source'][:44]:44s} {s['model'].split('/')[-1][:22]:22s} {s['gpu']:9s} x{s['gpus']} C {s['c0']:g}->{s['c']:g}: "
              f"measured x{s['measured_growth']:.2f}, predicted x{s['predicted_growth']:.2f}, shape {s['shape']:.2f}")
    worst = max((p["step_ratio_upper_bound"] for p in pad), default=float("nan"))
    print(f"CUDA-graph padding, upper bound of the decode step's growth over {len(pad)} figures at batch 32-256: "
          f"at most x{worst:.4f}")
    for p in pad:
        if p["padded"] != p["batch"]:
            print(f"  {p['row_id']:40s} batch {p['batch']} -> graph {p['padded']}: step x{p['step_ratio_upper_bound']:.4f}")
    print("per-request overhead implied by concurrency-1 TTFTs (measured TTFT - priced prefill, ms; shipped request_us beside it):")
    for src, o in over.items():
        print(f"  {src[:60]:60s} {o['figures']:3d} figures ({'/'.join(o['engines'])}, shipped {'/'.join(map(str, o['shipped_request_ms']))}): "
              f"median {o['implied_median_ms']:.1f}, range {o['implied_min_ms']:.1f} to {o['implied_max_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
