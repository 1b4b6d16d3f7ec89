"""Benchmark: roofline passes priced per second, vectorised vs a plain Python loop.

Why: the simulator prices every forward pass of every replica of two fleets; it can only
do that at scale if one numpy call prices a million ragged passes (issue 2 target:
>= 1,000,000 passes/s). The loop baseline calls the same estimator one pass at a time,
over a subsample (default 2,000 passes) whose rate is extrapolated to the full count;
the subsample's results are checked equal to the vectorised ones.

    .venv/bin/python benchmarks/roofline.py [--passes 1000000] [--loop-sample 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
import tracemalloc

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import coefficients, estimate
from specagent.hardware.profile import load_hardware

TARGET_PASSES_PER_S = 1_000_000


def mixed_workload(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pass: new tokens per sequence, cached context, batch size, and the phase label.

    60% decode/repair (1 token, batch 1-256, context 0-128k), 25% verify (16-2048 drafted
    tokens on 1k-64k context, batch 1-8), 15% prefill (256-16384 tokens, no context, batch 1-4).
    """
    rng = np.random.default_rng(seed)
    phase = rng.choice(np.array(["decode", "verify", "prefill"]), size=n, p=[0.60, 0.25, 0.15])
    new = np.ones(n)
    ctx = np.zeros(n)
    batch = np.ones(n)
    d, v, p = phase == "decode", phase == "verify", phase == "prefill"
    new[v] = rng.integers(16, 2049, v.sum())
    new[p] = rng.integers(256, 16385, p.sum())
    ctx[d] = rng.integers(0, 131_073, d.sum())
    ctx[v] = rng.integers(1024, 65_537, v.sum())
    batch[d] = rng.integers(1, 257, d.sum())
    batch[v] = rng.integers(1, 9, v.sum())
    batch[p] = rng.integers(1, 5, p.sum())
    return new, ctx, batch, phase


def vectorised(dep: Deployment, new, ctx, batch) -> np.ndarray:
    """Build the passes and price them: the whole path a caller pays for."""
    cost = estimate(dep, Passes.uniform(new, ctx, batch))
    return cost.time_s


def ragged_workload(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ragged batches: 1-8 sequences per pass, each its own new tokens (1 or 16-2048) and context."""
    rng = np.random.default_rng(seed + 1)
    sizes = rng.integers(1, 9, n)
    owner = np.repeat(np.arange(n), sizes)
    m = len(owner)
    new = np.where(rng.random(m) < 0.7, 1.0, rng.integers(16, 2049, m).astype(float))
    ctx = rng.integers(0, 65_537, m).astype(float)
    return new, ctx, owner


def vectorised_ragged(dep: Deployment, new, ctx, owner, n: int) -> np.ndarray:
    return estimate(dep, Passes.from_sequences(new, ctx, owner, n)).time_s


def loop(dep: Deployment, new, ctx, batch) -> np.ndarray:
    """The same passes priced one at a time (coefficients cached, as a careful caller would)."""
    coef = coefficients(dep)
    out = np.empty(len(new))
    for i in range(len(new)):
        out[i] = estimate(dep, Passes.uniform(float(new[i]), float(ctx[i]), float(batch[i])), coef=coef).time_s[0]
    return out


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=1_000_000)
    ap.add_argument("--loop-sample", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=3, help="vectorised timing: best of this many runs")
    ap.add_argument("--model", default="qwen3.5-397b-a17b")
    ap.add_argument("--hardware", default="h20")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--weight-dtype", default="fp8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    dep = Deployment(load_model_spec(args.model), load_hardware(args.hardware), gpus=args.gpus, weight_dtype=args.weight_dtype)
    new, ctx, batch, phase = mixed_workload(args.passes, args.seed)

    vec_s, times = best_of(lambda: vectorised(dep, new, ctx, batch), args.repeats)
    k = min(args.loop_sample, args.passes)
    loop_s, loop_times = best_of(lambda: loop(dep, new[:k], ctx[:k], batch[:k]), 1)
    np.testing.assert_allclose(loop_times, times[:k], rtol=1e-12)  # same answers, or the race is meaningless

    rnew, rctx, rowner = ragged_workload(args.passes, args.seed)
    rag_s, _ = best_of(lambda: vectorised_ragged(dep, rnew, rctx, rowner, args.passes), args.repeats)

    tracemalloc.start()
    vectorised(dep, new, ctx, batch)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)

    vec_rate = args.passes / vec_s
    loop_rate = k / loop_s
    res = dict(
        passes=args.passes, deployment=dep.describe(),
        phase_mix={p: int((phase == p).sum()) for p in ("decode", "verify", "prefill")},
        vectorised_s=vec_s, vectorised_passes_per_s=vec_rate, target_passes_per_s=TARGET_PASSES_PER_S,
        meets_target=bool(vec_rate >= TARGET_PASSES_PER_S),
        ragged_sequences=int(len(rowner)), ragged_s=rag_s, ragged_passes_per_s=args.passes / rag_s,
        loop_sample=k, loop_sample_s=loop_s, loop_passes_per_s=loop_rate,
        loop_extrapolated_s=args.passes / loop_rate, speedup=vec_rate / loop_rate,
        peak_traced_bytes_vectorised=traced_peak, max_rss_bytes=maxrss,
        python=platform.python_version(), numpy=np.__version__, machine=platform.machine(),
        timing="vectorised: best of %d runs incl. Passes construction; loop: one run over the first %d passes, "
               "extrapolated linearly to %d" % (args.repeats, k, args.passes),
    )
    if args.json:
        print(json.dumps(res, indent=2))
        return res
    print(f"roofline benchmark — {res['deployment']}")
    print(f"  {args.passes:,} mixed passes: {res['phase_mix']}")
    print(f"  vectorised : {vec_s * 1e3:9.1f} ms  -> {vec_rate:14,.0f} passes/s  "
          f"(target {TARGET_PASSES_PER_S:,}: {'MET' if res['meets_target'] else 'MISSED'})")
    print(f"  ragged     : {rag_s * 1e3:9.1f} ms  -> {args.passes / rag_s:14,.0f} passes/s  "
          f"({len(rowner):,} sequences in 1-8-sequence batches via Passes.from_sequences)")
    print(f"  plain loop : {loop_s * 1e3:9.1f} ms for {k:,} passes -> {loop_rate:14,.0f} passes/s "
          f"(extrapolated {res['loop_extrapolated_s']:,.1f} s for {args.passes:,})")
    print(f"  speed-up   : {res['speedup']:,.0f}x")
    print(f"  memory     : peak traced by tracemalloc during one vectorised run {traced_peak / 2**20:,.1f} MiB; "
          f"process max RSS {maxrss / 2**20:,.1f} MiB")
    print(f"  ({res['timing']})")
    return res


if __name__ == "__main__":
    main()
