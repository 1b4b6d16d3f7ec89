"""Hypothesis properties of the pass time (roofline + engine terms): monotone in work, per-token bytes amortise with batch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.moe import moe_union_experts
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import coefficients, estimate
from specagent.hardware.serving_engine import load_engine
from specagent.hardware.profile import Sourced, load_hardware

H20 = load_hardware("h20")
RTX = load_hardware("rtx5090")
#: every engine term switched on (attention-kernel MFU, achieved-bandwidth ramp, the weight stream's own rate, grouped-GEMM padding)
FULL = dataclasses.replace(load_engine("vllm"), attention_mfu=Sourced(0.3, "test"), bandwidth_half_mb=Sourced(4.0, "test"), moe_mfu=Sourced(0.25, "test"),
                           moe_pad_tokens=Sourced(20.0, "test"), per_sequence_us=Sourced(30.0, "test"), weight_stream=Sourced(1.3, "test"))
DEPLOYMENTS = [
    Deployment(load_model_spec("qwen3-30b-a3b"), H20, gpus=4, parallelism="tp+ep", serving_engine=FULL),
    Deployment(load_model_spec("qwen3.5-397b-a17b"), H20, gpus=8, weight_dtype="fp8", serving_engine=load_engine("sglang:eager")),
    Deployment(load_model_spec("qwen3.5-4b"), H20, serving_engine=load_engine("tensorrt-llm")),
    Deployment(load_model_spec("qwen3.5-4b"), H20),
    Deployment(load_model_spec("qwen3.5-4b"), RTX, weight_dtype="fp8"),
    Deployment(load_model_spec("qwen3-4b"), H20, gpus=2),
    Deployment(load_model_spec("qwen3-30b-a3b"), H20, gpus=4, parallelism="tp+ep"),
    Deployment(load_model_spec("qwen3.5-397b-a17b"), H20, gpus=8, weight_dtype="fp8"),
]
COEF = [coefficients(d) for d in DEPLOYMENTS]
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)

dep_idx = st.integers(0, len(DEPLOYMENTS) - 1)
tokens = st.integers(1, 20_000)
context = st.integers(0, 200_000)
batch = st.integers(1, 512)
mode = st.sampled_from(["union", "active"])


def _cost(i, n, c, b, wm="union"):
    return estimate(DEPLOYMENTS[i], Passes.uniform(n, c, b), wm, COEF[i])


def _monotone(i, lo, hi, wm):
    """Every cost of pass `hi` (more work) is ≥ that of pass `lo`."""
    a = _cost(i, *lo, wm)
    z = _cost(i, *hi, wm)
    assert z.time_s[0] >= a.time_s[0]
    assert z.total_bytes_read[0] >= a.total_bytes_read[0]
    assert z.total_bytes_written[0] >= a.total_bytes_written[0]
    assert z.total_flops[0] >= a.total_flops[0]
    assert z.memory_s[0] >= a.memory_s[0] and z.compute_s[0] >= a.compute_s[0]


@SETTINGS
@given(dep_idx, tokens, st.integers(1, 5000), context, batch, mode)
def test_monotone_in_tokens(i, n, dn, c, b, wm):
    _monotone(i, (n, c, b), (n + dn, c, b), wm)


@SETTINGS
@given(dep_idx, tokens, context, st.integers(1, 100_000), batch, mode)
def test_monotone_in_context(i, n, c, dc, b, wm):
    _monotone(i, (n, c, b), (n, c + dc, b), wm)


@SETTINGS
@given(dep_idx, st.integers(1, 4096), context, batch, st.integers(1, 512), mode)
def test_monotone_in_batch(i, n, c, b, db, wm):
    _monotone(i, (n, c, b), (n, c, b + db), wm)


@SETTINGS
@given(dep_idx, st.integers(1, 4096), context, batch, st.integers(1, 512), mode)
def test_per_token_bytes_never_increase_with_batch(i, n, c, b, db, wm):
    a = _cost(i, n, c, b, wm)
    z = _cost(i, n, c, b + db, wm)
    per_a = a.total_bytes[0] / (n * b)
    per_z = z.total_bytes[0] / (n * (b + db))
    assert per_z <= per_a * (1 + 1e-12)
    if a.eager_launch_s[0] == 0.0 < z.eager_launch_s[0]:
        # past the largest captured CUDA graph a pass launches its kernels one by one (the
        # engine's launch term): what the GPU's own work does not hide of it is a real step up
        # in time, so per-token time may rise there by that much and no more
        terms = COEF[i].terms
        assert n * b <= terms.cuda_graph_max_batch < n * (b + db) and z.eager_launch_s[0] == pytest.approx(terms.launch_s)
        busy = max(z.compute_s[0], z.memory_s[0]) + z.comm_s[0] + z.fixed["layers"][0]
        assert z.fixed["launch"][0] == pytest.approx(max(terms.launch_s - busy, 0.0), rel=1e-9, abs=1e-15)
        assert (z.time_s[0] - z.fixed["launch"][0]) / (b + db) <= a.time_s[0] / b * (1 + 1e-12)
        return
    assert z.time_s[0] / (b + db) <= a.time_s[0] / b * (1 + 1e-12)


@SETTINGS
@given(dep_idx, st.lists(st.integers(1, 10_000), min_size=1, max_size=6), context)
def test_gemm_flops_additive_in_tokens(i, parts, c):
    """Dense GEMM and routed-expert FLOPs are exactly per-token: a pass of Σn tokens costs the sum of its parts."""
    whole = _cost(i, sum(parts), c, 1)
    pieces = estimate(DEPLOYMENTS[i], Passes.uniform(np.array(parts), c, 1), "union", COEF[i])
    for k in ("dense", "experts"):
        assert whole.flops[k][0] == pytest.approx(pieces.flops[k].sum(), rel=1e-12, abs=0)
    # and equals 2 FLOPs per GEMM weight per token
    assert whole.flops["dense"][0] == pytest.approx(2 * COEF[i].dense_gemm_params * sum(parts), rel=1e-12)


@SETTINGS
@given(st.integers(1, 512), st.data())
def test_union_experts_bounded_and_increasing(E, data):
    k = data.draw(st.integers(1, E))
    t = np.unique(np.array(data.draw(st.lists(st.integers(1, 1_000_000), min_size=2, max_size=30)), dtype=float))
    u = moe_union_experts(t, E, k)
    assert np.all(u >= k * (1 - 1e-12)) and np.all(u <= E * (1 + 1e-12))
    assert np.all(np.diff(u) >= -1e-9 * E)
    # strictly increasing while far from saturation (expected misses above 1e-6 of E)
    far = (1 - u[:-1] / E) > 1e-6
    assert np.all(np.diff(u)[far] > 0)
    assert float(moe_union_experts(1, E, k)) == pytest.approx(k, rel=1e-12)


@SETTINGS
@given(dep_idx, st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 50_000)), min_size=1, max_size=12))
@example(0, [(1, 0), (512, 0)])  # 513 tokens: past the 512-token CUDA graph, its launches overlap ~28 ms of GPU work
def test_batch_costs_between_single_and_sum(i, seqs):
    """A batch costs at least its largest sequence alone and at most all of them run separately."""
    batch = estimate(DEPLOYMENTS[i], Passes.from_batches([seqs]), "union", COEF[i])
    singles = estimate(DEPLOYMENTS[i], Passes.from_batches([[s] for s in seqs]), "union", COEF[i])
    assert batch.total_bytes[0] <= singles.total_bytes.sum() * (1 + 1e-12)
    assert batch.total_bytes[0] >= singles.total_bytes.max() * (1 - 1e-12)
    assert batch.total_flops[0] == pytest.approx(singles.total_flops.sum(), rel=1e-12)
    assert batch.time_s[0] <= singles.time_s.sum() * (1 + 1e-12)
