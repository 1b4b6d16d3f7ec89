"""Cost-model figures and edges pinned to hand values, written where tools/mutation.py found mutants surviving.

Each expected number below is derived from SPEC §3 shapes (or a small config written here) by the
formula stated next to it, not read back from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specagent.costmodel.balance import balance_point, verify_saving_curve
from specagent.costmodel.deployment import Deployment, DeploymentDoesNotFit
from specagent.costmodel.dtypes import dtype_bytes
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, parse_config, shipped_models
from specagent.costmodel.moe import moe_union_experts
from specagent.costmodel.passes import Passes
from specagent.costmodel.phases import DecodeRun, decode, max_affine_sum_lines, prefill, repair, verify
from specagent.costmodel.roofline import coefficients, estimate
from specagent.hardware.serving_engine import load_engine
from specagent.hardware.profile import Sourced, load_hardware

H20 = load_hardware("h20")
Q397 = load_model_spec("qwen3.5-397b-a17b")
Q4 = load_model_spec("qwen3-4b")
#: The hand calculations here are of the bare roofline; the serving engine's fixed costs are
#: checked by hand in tests/test_costmodel_latency.py.
IDEAL = load_engine("ideal")


def Dep(*args, **kw) -> Deployment:
    return Deployment(*args, **{"serving_engine": IDEAL, **kw})

# ------------------------------------------------------------------ Qwen3.5-397B-A17B by hand (SPEC §3)
H, L_FULL, L_LIN, L = 4096, 15, 45, 60
ATTN_GEMM = H * (2 * 32 * 256) + 2 * H * (2 * 256) + (32 * 256) * H  # q+gate, k, v, o = 104,857,600
ATTN_ACT = (H + 2 * 32 * 256) + 2 * (H + 2 * 256) + (32 * 256 + H)  # inputs + outputs of those GEMMs
QKV = 2 * 16 * 128 + 64 * 128  # GDN q, k (16 key heads) and v (64 value heads), head dim 128
GDN_GEMM = H * QKV + H * (64 * 128) + H * (2 * 64) + (64 * 128) * H  # in_proj_qkv, in_proj_z, b/a, out_proj
GDN_ACT = (H + QKV) + (H + 64 * 128) + (H + 2 * 64) + (64 * 128 + H)
CONV = 2 * QKV * 4  # depthwise causal conv, kernel 4, 2 FLOPs per MAC
GDN_DEC = 64 * 7 * 128 * 128 + CONV  # per layer per token: decay, S·k, rank-1 update, q·S
GDN_PRE = 64 * (2 * 64 * (2 * 128 + 128) + 6 * 128 * 128) + CONV  # chunked form, 64-token chunks
EXPERT = 3 * H * 1024
MOE_DENSE = 3 * H * 1024 + H + H * 512  # shared expert (gated) + router, per MoE layer
MOE_ACT = 10 * (H + 2 * 1024 + 1024 + H) + (H + 3 * 1024 + H) + H + 512  # top-10 experts, shared expert, gate, router
ATTN_PARAMS = ATTN_GEMM + 2 * 256  # + q/k norms
GDN_PARAMS = GDN_GEMM + QKV * 4 + 2 * 64 + 128  # + conv weights, dt_bias/A_log, gated norm
NORMS = L * 2 * H + H
ROUTER = L * H * 512
SHARED = L * (3 * H * 1024 + H)


def test_nvfp4_weights_are_4_5_bits_and_run_fp4_gemms_only_where_the_gpu_has_them():
    b200, h200 = load_hardware("b200"), load_hardware("h200")
    dep = Dep(Q397, b200, gpus=4, weight_dtype="nvfp4")
    c = coefficients(dep)
    assert c.expert_bytes == EXPERT * 0.5625  # 4-bit values + one 8-bit scale per 16
    assert c.dense_weight_bytes == (L_FULL * ATTN_PARAMS + L_LIN * GDN_PARAMS + L * (3 * H * 1024 + H)) * 0.5625 \
        + (NORMS + ROUTER) * 2  # norms and router stay 16-bit
    assert dep.compute_dtype == "fp4" and b200.peak_flops("fp4") == 2 * b200.peak_flops("fp8") == 9000e12
    assert load_hardware("rtx5090").peak_flops("fp4") == 1676e12
    assert Dep(Q397, h200, gpus=4, weight_dtype="nvfp4").compute_dtype == "bf16"  # Hopper: weight-only FP4 kernels
    fp8 = Dep(Q397, b200, gpus=4, weight_dtype="fp8")
    p4, p8 = (estimate(d, Passes.uniform(1024, 0, 1)) for d in (dep, fp8))
    assert p4.flops["dense"][0] == p8.flops["dense"][0] > 0
    assert p4.compute_parts["gemm"][0] == pytest.approx(p8.compute_parts["gemm"][0] / 2, rel=1e-12)  # same FLOPs at twice the peak


@pytest.mark.parametrize("gpus,par", [(1, "tp"), (8, "tp"), (8, "tp+ep")])
def test_coefficients_of_the_397b_by_hand(gpus, par):
    dep = Dep(Q397, H20, gpus=gpus, parallelism=par, weight_dtype="fp8")
    c = coefficients(dep)
    assert c.dense_gemm_params == L_FULL * ATTN_GEMM + L_LIN * GDN_GEMM + L * MOE_DENSE
    assert c.expert_params == EXPERT and c.expert_bytes == EXPERT * 1.0  # fp8: one byte per weight
    assert (c.moe_layers, c.num_experts, c.top_k) == (60, 512, 10)
    # fp8 weights; norms and router stay 16-bit
    assert c.dense_weight_bytes == L_FULL * ATTN_PARAMS + L_LIN * GDN_PARAMS + L * (3 * H * 1024) + (NORMS + ROUTER + L * H) * 2 - L * H
    assert c.embedding_row_bytes == H * 2 and c.lm_head_bytes == 248320 * H * 2
    assert c.lm_head_flops_per_logit == 2 * 248320 * H
    assert c.attn_flops_per_pair == 4 * 32 * 256 * L_FULL
    assert c.gdn_flops_decode == L_LIN * GDN_DEC and c.gdn_flops_prefill == L_LIN * GDN_PRE
    assert c.kv_bytes_per_token == L_FULL * 2 * 2 * 256 * 2  # 30 KiB
    assert c.state_bytes == L_LIN * (64 * 128 * 128 * 4 + QKV * 3 * 2)  # fp32 recurrent + bf16 conv state (k - 1 = 3 taps)
    assert c.chunk_state_bytes == L_LIN * 64 * 128 * 128 * 2
    assert c.act_bytes_per_token == 2 * (L_FULL * ATTN_ACT + L_LIN * GDN_ACT + L * MOE_ACT)
    assert c.act_bytes_per_logit == 2 * (H + 248320) and c.act_bytes == 2 and c.hidden == H
    a2a = 60 if par == "tp+ep" else 0
    assert (c.allreduce_layers, c.a2a_layers) == ((2 * L - a2a, a2a) if gpus > 1 else (0, 0))


def test_dense_ffn_coefficients_qwen3_4b_by_hand():
    h, layers, ff = 2560, 36, 9728
    c = coefficients(Dep(Q4, H20))
    attn = h * 4096 + 2 * h * 1024 + 4096 * h
    assert c.dense_gemm_params == layers * (attn + 3 * h * ff)
    assert c.act_bytes_per_token == 2 * layers * ((h + 4096) + 2 * (h + 1024) + (4096 + h) + (h + 2 * ff + ff + h))
    assert (c.moe_layers, c.num_experts, c.top_k, c.expert_params, c.gdn_flops_decode, c.chunk_state_bytes) == (0, 0, 0, 0, 0, 0)


def test_397b_passes_component_by_component():
    """Decode at context 1000 and a 100-token verification on 8 GPUs (tp+ep): every FLOP, byte and second by hand."""
    dep = Dep(Q397, H20, gpus=8, parallelism="tp+ep", weight_dtype="fp8")
    p = estimate(dep, Passes.from_batches([[(1, 1000)], [(100, 1000)]]), "union")
    t = np.array([1.0, 100.0])
    assert p.flops["dense"] == pytest.approx(2 * (L_FULL * ATTN_GEMM + L_LIN * GDN_GEMM + L * MOE_DENSE) * t, rel=1e-12)
    assert p.flops["experts"] == pytest.approx(2 * EXPERT * 10 * 60 * t, rel=1e-12)
    assert p.flops["linear_attention"] == pytest.approx([L_LIN * GDN_DEC, 100 * L_LIN * GDN_PRE], rel=1e-12)
    pairs = np.array([1001.0, 100 * 1000 + 100 * 101 / 2])  # causal: token i attends to 1000 + i positions
    assert p.flops["attention"] == pytest.approx(4 * 32 * 256 * L_FULL * pairs, rel=1e-12)
    assert p.flops["lm_head"] == pytest.approx([2 * 248320 * H] * 2, rel=1e-12)  # one logit row per sequence
    union = 512 * (1 - (1 - 10 / 512) ** t)
    assert p.experts_touched == pytest.approx(union, rel=1e-12)
    assert p.bytes_read["expert_weights"] == pytest.approx(EXPERT * 60 * union, rel=1e-12)
    act = 0.5 * (2 * (L_FULL * ATTN_ACT + L_LIN * GDN_ACT + L * MOE_ACT) * t + 2 * (H + 248320))
    assert p.bytes_read["activations"] == pytest.approx(act, rel=1e-12) and p.bytes_written["activations"] == pytest.approx(act, rel=1e-12)
    assert p.bytes_written["kv"] == pytest.approx(30720 * t, rel=1e-12)
    # all-reduce (ring, 2(g-1)/g) on the 60 non-MoE sub-layers; all-to-all dispatch + combine on the 60 MoE layers
    msg = t * H * 2
    touched_gpus = 8 * (1 - (7 / 8) ** 10)
    comm = 60 * 2 * 7 / 8 * msg + 60 * 2 * msg / 8 * touched_gpus * 7 / 8
    assert p.comm_bytes == pytest.approx(comm, rel=1e-12)
    assert p.comm_s == pytest.approx(comm / 450e9, rel=1e-12)
    flops_gemm = p.flops["dense"] + p.flops["experts"] + p.flops["lm_head"]
    flops_attn = p.flops["attention"] + p.flops["linear_attention"]
    assert p.compute_s == pytest.approx((flops_gemm / 296e12 + flops_attn / 148e12) / (8 * 0.6), rel=1e-12)  # fp8 GEMMs, bf16 attention
    total = sum(p.bytes_read.values()) + sum(p.bytes_written.values())
    assert p.memory_s == pytest.approx(total / (8 * 4.0e12 * 0.72), rel=1e-12)
    frame = p.to_frame()
    assert list(frame["bound"]) == ["compute" if b else "memory" for b in p.compute_bound]
    mixed = estimate(dep, Passes.uniform([1, 8192], [0, 0], 1)).to_frame()
    assert list(mixed["bound"]) == ["memory", "compute"]
    for col, arr in (("flops", p.total_flops), ("bytes_read", p.total_bytes_read), ("bytes_written", p.total_bytes_written),
                     ("comm_bytes", p.comm_bytes), ("experts_touched", p.experts_touched), ("compute_s", p.compute_s),
                     ("memory_s", p.memory_s), ("comm_s", p.comm_s), ("overhead_s", p.overhead_s), ("time_s", p.time_s),
                     ("flops_experts", p.flops["experts"]), ("read_kv", p.bytes_read["kv"]), ("write_state", p.bytes_written["state"]),
                     ("collective_latency_s", p.collective_latency_s)):
        assert frame[col].to_numpy() == pytest.approx(arr, rel=1e-12), col


def test_single_gpu_has_no_communication_and_attention_runs_in_the_activation_dtype():
    one = estimate(Dep(Q4, H20), Passes.uniform(512, 0, 1))
    assert one.comm_bytes[0] == 0 and one.comm_s[0] == 0
    two = estimate(Dep(Q4, H20, gpus=2), Passes.uniform(512, 0, 1))  # ring all-reduce, 2 per layer: 2(g-1)/g = 1
    assert two.comm_bytes[0] == 2 * 36 * 1.0 * 512 * 2560 * 2 and two.comm_s[0] == pytest.approx(two.comm_bytes[0] / 450e9, rel=1e-12)
    a100 = load_hardware("a100")  # no fp8 peak: fp8 activations run attention at the bf16 peak
    p8 = estimate(Dep(Q4, a100, activation_dtype="fp8"), Passes.uniform(512, 0, 1))
    g8, a8 = p8.flops["dense"] + p8.flops["lm_head"], p8.flops["attention"]
    assert p8.compute_s[0] == pytest.approx((g8[0] + a8[0]) / (312e12 * float(a100.prefill_mfu.value)), rel=1e-12)
    # fp32 activations: attention at the profile's fp32 peak (37 TFLOP/s here), GEMMs at the bf16 peak
    hw = dataclasses.replace(H20, peak_tflops={**H20.peak_tflops, "fp32": Sourced(37.0, "test")})
    p = estimate(Dep(Q4, hw, activation_dtype="fp32"), Passes.uniform(512, 0, 1))
    gemm = p.flops["dense"] + p.flops["lm_head"]
    attn = p.flops["attention"] + p.flops["linear_attention"]
    assert p.compute_s[0] == pytest.approx((gemm[0] / 148e12 + attn[0] / 37e12) / 0.6, rel=1e-12)


# ------------------------------------------------------------------ phase wrappers, DecodeRun's closed form
def test_phase_wrappers_pass_weight_mode_and_batch():
    dep = Dep(Q397, H20, gpus=8, weight_dtype="fp8")
    for mode in ("union", "active"):
        assert decode(dep, 500, 4, mode).total_bytes_read[0] == estimate(dep, Passes.uniform(1, 500, 4), mode).total_bytes_read[0]
        assert repair(dep, 500, 4, mode).total_bytes_read[0] == estimate(dep, Passes.uniform(1, 500, 4), mode).total_bytes_read[0]
        assert estimate(dep, Passes.uniform(1, 500, 4), mode).weight_mode == mode
        assert prefill(dep, 300, 7, 2, mode).total_bytes_read[0] == estimate(dep, Passes.uniform(300, 7, 2), mode).total_bytes_read[0]
        assert verify(dep, 40, 900, weight_mode=mode).total_bytes_read[0] == estimate(dep, Passes.uniform(40, 900, 1), mode).total_bytes_read[0]
    assert prefill(dep, 300).time_s[0] == estimate(dep, Passes.uniform(300, 0, 1)).time_s[0]  # context 0, batch 1 by default
    assert repair(dep, 500).time_s[0] == decode(dep, 500).time_s[0] == estimate(dep, Passes.uniform(1, 500, 1)).time_s[0]
    assert decode(dep, 500, 4).bytes_read["expert_weights"][0] > decode(dep, 500, 4, "active").bytes_read["expert_weights"][0]
    # "active" reads top-k experts only: at 300 tokens union reads far more
    assert prefill(dep, 300, weight_mode="active").bytes_read["expert_weights"][0] == pytest.approx(EXPERT * 60 * 10, rel=1e-12)


@given(a1=st.sampled_from([0.0, 1.0, 2.5, 7.0]), b1=st.sampled_from([-1.0, 0.0, 0.5, 2.0]),
       a2=st.sampled_from([0.0, 3.0, 5.0]), b2=st.sampled_from([-1.0, 0.0, 0.5, 1.0]),
       c=st.lists(st.integers(0, 30), min_size=1, max_size=4), m=st.integers(0, 25))
@settings(max_examples=300, deadline=None)
def test_decode_run_max_affine_sum_matches_the_loop(a1, b1, a2, b2, c, m):
    """sum_{j<m} max(a1 + b1(c+j), a2 + b2(c+j)), equal slopes and empty runs included."""
    run = DecodeRun.__new__(DecodeRun)
    run._a, run._b = {"compute_s": a1, "memory_s": a2}, {"compute_s": b1, "memory_s": b2}
    cs = np.array(c, dtype=float)
    ms = np.full_like(cs, float(m))
    want = [sum(max(a1 + b1 * (ci + j), a2 + b2 * (ci + j)) for j in range(m)) for ci in c]
    assert run._max_affine_sum(cs, ms) == pytest.approx(want, rel=1e-12, abs=1e-9)


@given(a=st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0, 7.0]), min_size=3, max_size=3),
       b=st.lists(st.sampled_from([-1.0, 0.0, 0.25, 0.5, 2.0]), min_size=3, max_size=3),
       c=st.lists(st.integers(0, 30), min_size=1, max_size=4), m=st.integers(0, 25))
@settings(max_examples=300, deadline=None)
def test_max_affine_sum_of_three_lines_matches_the_loop(a, b, c, m):
    """sum_{j<m} max_i (a_i + b_i(c+j)) over three lines: ties, equal slopes and empty runs included."""
    cs = np.array(c, dtype=float)
    want = [sum(max(a[i] + b[i] * (ci + j) for i in range(3)) for j in range(m)) for ci in c]
    got = max_affine_sum_lines(list(zip(a, b)), cs, np.full_like(cs, float(m)))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-9)


def test_max_affine_sum_lines_keeps_the_shape_and_takes_a_length_per_run():
    """Runs of different lengths side by side, as a 2-D array: each sums only its own steps, in float64, in its shape."""
    lines = [(4.0, -1.0), (0.0, 0.5), (2.5, 0.0)]
    cs = np.array([[0.0, 3.0, 7.0], [1.0, 12.0, 0.0]])
    ms = np.array([[9.0, 2.0, 0.0], [25.0, 5.0, 1.0]])
    want = [[sum(max(a + b * (c + j) for a, b in lines) for j in range(int(m))) for c, m in zip(cr, mr)] for cr, mr in zip(cs, ms)]
    got = max_affine_sum_lines(lines, cs, ms)
    assert got.shape == (2, 3) and got.dtype == np.float64
    assert got.ravel() == pytest.approx(np.array(want).ravel(), rel=1e-12)
    assert max_affine_sum_lines(lines, 3.0, 2.0).shape == ()


@pytest.mark.parametrize("engine", ["sglang:eager", "vllm:eager"])
def test_decode_run_without_cuda_graphs_sums_the_overlapped_launches_exactly(engine):
    """Eager batch-1 decode: each step is max(GPU-busy, launches) + CPU work; the closed form equals the loop."""
    slow = dataclasses.replace(H20, peak_tflops={**H20.peak_tflops, "bf16": Sourced(0.5, "test")})  # compute-bound steps
    for dep in (Dep(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=load_engine(engine)), Dep(Q4, H20, serving_engine=load_engine(engine)),
                Dep(Q4, slow, gpus=2, serving_engine=load_engine(engine))):
        run = DecodeRun(dep)
        assert run._launch_s > 0
        for c, m in ((0, 40), (3000, 200), (150_000, 30)):
            steps = estimate(dep, Passes.uniform(1, c + np.arange(float(m)), 1))
            assert run.totals(c, m)["time_s"] == pytest.approx(steps.time_s.sum(), rel=1e-11)  # summation order: the closed form adds segments, the loop adds steps


def test_decode_run_time_includes_communication_and_overhead_per_step():
    dep = Dep(Q397, H20, gpus=8, weight_dtype="fp8")
    run = DecodeRun(dep, "active")
    steps = estimate(dep, Passes.uniform(1, 2000 + np.arange(50.0), 1), "active")
    tot = run.totals(2000, 50)
    assert tot["time_s"] == pytest.approx(steps.time_s.sum(), rel=1e-12)
    assert tot["read_expert_weights"] == pytest.approx(50 * EXPERT * 60 * 10, rel=1e-12)  # "active" reached the run
    assert tot["comm_bytes"] == pytest.approx(steps.comm_bytes.sum(), rel=1e-12) and steps.comm_bytes[0] > 0
    assert DecodeRun(dep).totals(2000, 50)["time_s"] == pytest.approx(tot["time_s"], rel=1e-12)  # union by default (= active at batch 1)


# ------------------------------------------------------------------ Passes: construction and validation
def test_passes_aggregate_sequences():
    p = Passes.from_sequences([1, 3, 200], [10, 0, 5], [0, 0, 1], n_passes=2)
    assert p.tokens.tolist() == [4, 200] and p.seqs.tolist() == [2, 1] and p.decode_tokens.tolist() == [1, 0]
    assert p.logits.tolist() == [2, 1]
    assert p.state_touches.tolist() == [1 + (1 + 1), 1 + math.ceil(200 / 64)]  # a decode touches the state once
    assert Passes.from_sequences([2, 1], [0, 4], [1, 0]).tokens.tolist() == [1, 2]  # pass count from the largest index
    u = Passes.uniform(3)
    assert (u.tokens[0], u.seqs[0], u.kv_read_tokens[0]) == (3, 1, 3)  # context 0, batch 1 by default
    assert Passes.uniform([2], [0], [1]).state_touches.tolist() == [2]  # 2 new tokens: one chunk + the state read
    assert Passes.from_sequences([2, 1], [0, 0], [0, 1]).state_touches.tolist() == [2, 1]
    assert len(Passes.from_sequences([], [], []).tokens) == 0  # no sequences: no passes
    both = Passes.concat([u, p])
    assert both.tokens.tolist() == [3, 4, 200] and both.seqs.tolist() == [1, 2, 1] and both.logits.tolist() == [1, 2, 1]
    b = Passes.from_batches([[(5, 7)], [(1, 0), (1, 3)]])
    assert b.tokens.tolist() == [5, 2] and b.seqs.tolist() == [1, 2]


@pytest.mark.parametrize("call,msg", [
    (lambda: Passes.uniform(0, 0, 1), "new_tokens >= 1, context >= 0 and batch >= 1 are required"),
    (lambda: Passes.uniform(1, -1, 1), "new_tokens >= 1, context >= 0 and batch >= 1 are required"),
    (lambda: Passes.uniform(1, 0, 0), "new_tokens >= 1, context >= 0 and batch >= 1 are required"),
    (lambda: Passes.from_sequences([0], [0], [0]), "new_tokens >= 1 and context >= 0 are required for every sequence"),
    (lambda: Passes.from_sequences([1], [-2], [0]), "new_tokens >= 1 and context >= 0 are required for every sequence"),
    (lambda: Passes.from_batches([[(1, 0)], []]), "every batch needs at least one (new_tokens, context) sequence"),
])
def test_passes_reject_bad_input_with_the_exact_message(call, msg):
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        call()


def test_passes_fields_must_agree_in_shape_and_be_positive():
    p = Passes.uniform([1, 2])
    with pytest.raises(ValueError, match=r"^Passes\.seqs has shape \(3,\), expected \(2,\)$"):
        dataclasses.replace(p, seqs=np.ones(3))
    with pytest.raises(ValueError, match="^every pass needs at least one sequence and one new token$"):
        dataclasses.replace(p, seqs=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="^every pass needs at least one sequence and one new token$"):
        dataclasses.replace(p, tokens=np.array([0.0, 2.0]))


# ------------------------------------------------------------------ Deployment: fit, limits, messages
def test_deployment_validation_messages_and_bounds():
    for bad in (0, 1025):
        with pytest.raises(ValueError, match=rf"^gpus must be in \[1, 1,024\], got {bad}$"):
            Dep(Q4, H20, gpus=bad)
    with pytest.raises(ValueError, match=r"^parallelism must be one of \('tp', 'tp\+ep'\), got 'pp'$"):
        Dep(Q4, H20, parallelism="pp")
    for bad in (0.0, 1e-320, 0.0099, 1.01):
        with pytest.raises(ValueError, match=rf"^memory_utilization must be in \[0.01, 1\], got {bad}$"):
            Dep(Q4, H20, memory_utilization=bad)
    assert Dep(Q4, H20, memory_utilization=1.0).usable_bytes == 96e9  # 1 is allowed: the whole card


def test_deployment_memory_sizes_by_hand():
    dep = Dep(load_model_spec("qwen3.5-4b"), H20)
    w = 4_205_751_296 * 2
    state = 24 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)  # fp32 recurrent + bf16 conv state
    kv = 8 * 2 * 4 * 256 * 2
    assert dep.weight_bytes() == w and dep.state_bytes_per_sequence() == state and dep.kv_bytes_per_token() == kv
    assert Dep(dep.model, H20, activation_dtype="fp32").state_bytes_per_sequence() == 24 * (32 * 128 * 128 * 4 + 8192 * 3 * 4)
    assert dep.memory_needed() == w + state  # 1 sequence, context 0 by default
    assert dep.memory_needed(3, 1000) == w + 3 * (1000 * kv + state)
    free = 96e9 * 0.9 - w
    assert dep.max_sequences(4096) == int(free // (4096 * kv + state))
    # memory alone needs 14 GPUs; the fewest a 16-head model can be split over at or above that is 16
    assert math.ceil((w + 1000 * (32768 * kv + state)) / (96e9 * 0.9)) == 14
    assert dep.min_gpus() == 1 and dep.min_gpus(1000, 32768) == 16


def test_max_sequences_edges():
    q4 = Dep(Q4, H20)  # no recurrent state: a sequence of context 0 costs nothing
    assert q4.max_sequences(0) == 10**9
    tiny = dataclasses.replace(H20, memory_capacity_gb=Sourced(8.0, "test"))
    assert Dep(Q4, tiny).max_sequences(100) == 0  # 8.04 GB of weights > 7.2 GB usable
    exact = Dep(Q4, H20, memory_utilization=Q4.param_counts().total * 2 / 96e9)  # weights fill it exactly
    assert exact.max_sequences(100) == 0


def test_check_fit_message_and_figures():
    dep = Dep(Q397, H20, gpus=8, weight_dtype="bf16")
    need = dep.memory_needed(100, 100_000)
    with pytest.raises(DeploymentDoesNotFit) as e:
        dep.check_fit(100, 100_000)
    g = math.ceil(need / (96e9 * 0.9))  # the KV of 100 x 100k tokens (307 GB) counts too
    assert g > math.ceil(dep.memory_needed(100, 0) / (96e9 * 0.9))
    assert g == 13
    g = 16  # the advice is a TP degree that divides the 32 attention heads (13, 14, 15 do not)
    assert e.value.need_bytes == need and e.value.have_bytes == 8 * 96e9 * 0.9 and e.value.min_gpus == g
    assert str(e.value) == (
        f"Qwen/Qwen3.5-397B-A17B in bf16 on 8x NVIDIA H20 does not fit: needs {need / 1e9:,.1f} GB (weights "
        f"{dep.weight_bytes() / 1e9:,.1f} GB + 100 sequence(s) x 100,000 tokens of KV/state) but 8 GPU(s) x 96 GB x 0.90 usable = "
        f"{8 * 96 * 0.9:,.1f} GB; it would fit on {g} GPU(s) (or use a smaller weight dtype, e.g. fp8)"
    )
    # the suggested format is smaller than the one in use, or none is left
    for dtype, hint in (("fp8", "(or use a smaller weight dtype, e.g. int4)"), ("int4", "(its weights are in the smallest format)")):
        with pytest.raises(DeploymentDoesNotFit, match=re.escape(hint) + "$"):
            Dep(Q397, H20, gpus=1, weight_dtype=dtype).check_fit()
    # defaults: one sequence at context 0 (weights + one recurrent state), judged against a budget of 1.5 states
    m = load_model_spec("qwen3.5-4b")
    w, state, kv = 4_205_751_296 * 2, Dep(m, H20).state_bytes_per_sequence(), Dep(m, H20).kv_bytes_per_token()
    snug = Dep(m, H20, memory_utilization=(w + 1.5 * state) / 96e9)
    snug.check_fit()  # 1 sequence, context 0: fits
    assert snug.min_gpus() == 1
    with pytest.raises(DeploymentDoesNotFit):
        snug.check_fit(2, 0)
    tight = Dep(m, H20, memory_utilization=(w + state + 0.5 * kv) / 96e9)
    tight.check_fit()  # context 0 by default
    assert tight.min_gpus() == 1 and tight.min_gpus(1, 1) == 2
    exact = Dep(Q4, dataclasses.replace(H20, memory_capacity_gb=Sourced(8.044936192, "test")), memory_utilization=1.0)
    assert exact.memory_needed() == exact.usable_bytes == 4_022_468_096 * 2
    exact.check_fit()  # needing exactly what is there fits
    with pytest.raises(DeploymentDoesNotFit):
        tight.check_fit(1, 1)
    fits = Dep(Q4, H20, memory_utilization=(Q4.param_counts().total * 2 + 1) / 96e9)
    fits.check_fit(1, 0)  # need == have - 1 byte: fits
    with pytest.raises(DeploymentDoesNotFit):
        Dep(Q4, H20, memory_utilization=Q4.param_counts().total * 2 / 96e9 * (1 - 1e-9)).check_fit()


# ------------------------------------------------------------------ balance point fields and search range
def test_balance_point_reports_what_it_searched():
    dep = Dep(Q4, H20)
    default = balance_point(dep)
    assert (default.context, default.weight_mode, default.max_batch_searched) == (0, "union", 65536)
    bp = balance_point(dep, context=0, weight_mode="active", max_batch=64)
    assert (bp.context, bp.weight_mode, bp.compute_dtype, bp.max_batch_searched) == (0, "active", "bf16", 64)
    assert bp.hardware_ridge_bf16 == 37.0 and bp.hardware_ridge == 37.0
    assert balance_point(dep, max_batch=38).balance_batch_peak == 38  # the last batch searched counts
    assert balance_point(dep, max_batch=37).balance_batch_peak is None
    slow = Dep(Q4, dataclasses.replace(H20, peak_tflops={**H20.peak_tflops, "bf16": Sourced(0.001, "test")}))
    assert balance_point(slow, max_batch=4).balance_batch_peak == 1  # compute-bound from the first batch
    fp8 = Dep(Q397, H20, gpus=8, weight_dtype="fp8")
    bp8 = balance_point(fp8, max_batch=4)
    assert bp8.compute_dtype == "fp8" and bp8.hardware_ridge == 74.0 and bp8.hardware_ridge_bf16 == 37.0


# ------------------------------------------------------------------ verification vs decode saving curve
def test_verify_saving_curve_is_one_minus_the_per_token_ratio_by_hand():
    """Per token: a decode pass at batch B costs pass(B) / B per sequence, a verification prefill of n tokens pass / n."""
    dep = Dep(Q397, H20, gpus=8, weight_dtype="fp8")
    n, ctx = 37.0, 3000.0
    curve = verify_saving_curve(dep, n, ctx, batches=[1, 4, 64])
    assert curve["strong_mean_decode_batch"].tolist() == [1.0, 4.0, 64.0] and set(curve["hardware"]) == {"NVIDIA H20"}
    ver = estimate(dep, Passes.uniform(n, ctx, 1))
    vt, vb = float(ver.time_s[0]) / n, float(ver.total_bytes_read[0]) / n
    for b, row in zip((1, 4, 64), curve.to_dict("records")):
        dec = estimate(dep, Passes.uniform(1, ctx, b))
        dt, db = float(dec.time_s[0]) / b, float(dec.total_bytes_read[0]) / b
        assert row["decode_s_per_token"] == pytest.approx(dt, rel=1e-12) and row["verify_s_per_token"] == pytest.approx(vt, rel=1e-12)
        assert row["decode_bytes_per_token"] == pytest.approx(db, rel=1e-12)
        assert row["verify_bytes_per_token"] == pytest.approx(vb, rel=1e-12)
        assert row["time_saving"] == pytest.approx(1 - vt / dt, rel=1e-12)
        assert row["memory_saving"] == pytest.approx(1 - vb / db, rel=1e-12)
        assert row["fits"] == (b <= dep.max_sequences(int(ctx)))
    # at batch 1 a 37-token verification reads the shared weights once for 37 tokens, but the union of the experts its
    # tokens touch (far more than one token's 10 per layer): 68% of the bytes are saved, less at larger decode batches
    assert 0.6 < curve["memory_saving"].iloc[0] < 0.75 and curve["memory_saving"].is_monotonic_decreasing
    # default batches: 1 up to twice the larger of the memory limit and the balance batch (>= 64), log-spaced, no repeats
    auto = verify_saving_curve(dep, n, ctx)
    bp = balance_point(dep, context=int(ctx))
    top = min(65536, 2 * max(dep.max_sequences(int(ctx)), bp.balance_batch_effective or 0, 64))
    b = auto["strong_mean_decode_batch"].to_numpy()
    assert b[0] == 1 and b[-1] == top and (np.diff(b) > 0).all()
    assert verify_saving_curve(dep, n, ctx, max_batch=10)["strong_mean_decode_batch"].max() == 10
    # the search range's floor and ceiling: 2 x 64 when neither the memory limit nor a balance batch is larger (Qwen3-8B at
    # 30k tokens: 15 sequences fit, never compute-bound), 65,536 when memory is no limit (Qwen3-4B, empty cache)
    long = Dep(load_model_spec("qwen3-8b"), H20)
    assert long.max_sequences(30000) == 15 and balance_point(long, context=30000).balance_batch_effective is None
    assert verify_saving_curve(long, n, 30000.0)["strong_mean_decode_batch"].max() == 128
    wide = verify_saving_curve(Dep(Q4, H20), n, 0.0)["strong_mean_decode_batch"]
    assert wide.max() == 65536 and wide.dtype == np.float64 and curve["strong_mean_decode_batch"].dtype == np.float64
    for bad, msg in (((1.0, ctx), "segment_tokens must be >= 2 for a verification prefill, got 1.0"),
                     ((n, -1.0), "context must be >= 0, got -1.0")):
        with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
            verify_saving_curve(dep, *bad)
    for batches in ([], [0, 4]):
        with pytest.raises(ValueError, match="^batches must be >= 1$"):
            verify_saving_curve(dep, n, ctx, batches=batches)
    assert len(verify_saving_curve(dep, 2.0, 0.0, batches=[1])) == 1  # the smallest segment, an empty cache
    fit = dep.max_sequences(int(ctx))
    assert verify_saving_curve(dep, n, ctx, batches=[fit, fit + 1])["fits"].tolist() == [True, False]
    # the weight mode reaches both passes
    active = verify_saving_curve(dep, n, ctx, weight_mode="active", batches=[4])
    assert active["decode_bytes_per_token"].iloc[0] == pytest.approx(
        float(estimate(dep, Passes.uniform(1, ctx, 4), "active").total_bytes_read[0]) / 4, rel=1e-12)
    assert active["verify_bytes_per_token"].iloc[0] == pytest.approx(
        float(estimate(dep, Passes.uniform(n, ctx, 1), "active").total_bytes_read[0]) / n, rel=1e-12)
    assert active["verify_bytes_per_token"].iloc[0] < vb  # active weights: only the routed experts' bytes


def test_balance_point_prices_attention_in_the_activation_dtype_or_bf16_when_the_gpu_has_no_peak_for_it():
    """Peak balance: GEMM FLOPs at the compute dtype's peak plus attention (full and linear) FLOPs at the activation
    dtype's, against all bytes at the HBM bandwidth; a GPU without a peak for the activation dtype is priced at bf16."""
    no32 = dataclasses.replace(H20, peak_tflops={k: v for k, v in H20.peak_tflops.items() if k != "fp32"})
    hybrid, ctx, top = load_model_spec("qwen3.5-4b"), 1024, 256  # full and linear attention layers
    batches = np.arange(1.0, top + 1)

    def by_hand(dep, attn_dtype):
        cost = estimate(dep, Passes.uniform(1, ctx, batches))
        f, hw = cost.flops, dep.hardware
        comp = ((f["dense"] + f["experts"] + f["lm_head"]) / hw.peak_flops(dep.compute_dtype)
                + (f["attention"] + f["linear_attention"]) / hw.peak_flops(attn_dtype))
        hit = np.flatnonzero(comp >= cost.total_bytes / hw.bandwidth_bytes_s)
        return int(batches[hit[0]]) if hit.size else None

    got = []
    for hw, want_dtype in ((H20, "fp32"), (no32, "bf16")):
        dep = Dep(hybrid, hw, activation_dtype="fp32")
        got.append(balance_point(dep, context=ctx, max_batch=top).balance_batch_peak)
        assert got[-1] is not None and got[-1] == by_hand(dep, want_dtype)
    assert got[0] < got[1]  # fp32 attention is slower than bf16: compute-bound at a smaller batch


# ------------------------------------------------------------------ MoE union: edges
def test_moe_union_edges_and_errors():
    assert moe_union_experts(np.array([0, 1, 5]), 8, 8).tolist() == [0.0, 8.0, 8.0]  # every expert per token
    assert moe_union_experts(np.array([0]), 8, 2).tolist() == [0.0]
    assert moe_union_experts([1, 2], 8, 2) == pytest.approx([2.0, 8 * (1 - 0.75**2)], rel=1e-12)  # lists too
    for e, k in ((8, 0), (0, 0), (8, 9), (-1, 1)):
        with pytest.raises(ValueError, match=rf"^need 0 < top_k <= num_experts, got top_k={k}, num_experts={e}$"):
            moe_union_experts(np.array([1]), e, k)


def test_dtype_error_lists_known_dtypes():
    with pytest.raises(ValueError, match=r"^unknown dtype 'fp7'; known: .*\bbf16, .*\bfp8\b"):
        dtype_bytes("fp7")


# ------------------------------------------------------------------ config parsing: every optional field
def _moe_cfg(**kw):
    cfg = {"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
           "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "intermediate_size": 96,
           "mlp_only_layers": [5], "decoder_sparse_step": 3, "attention_bias": True, "tie_word_embeddings": False,
           "num_nextn_predict_layers": 1, "max_position_embeddings": 4096, "_name_or_path": "org/tiny-moe"}
    cfg.update(kw)
    return cfg


def test_small_moe_config_parameter_counts_by_hand():
    cfg = _moe_cfg()
    m = parse_config(cfg, path="tiny.json")
    assert m.ffn_kinds == ("dense", "dense", "moe", "dense", "dense", "dense")  # every 3rd layer is MoE; layer 5 is mlp-only
    assert m.layer_kinds == ("full",) * 6 and (m.name, m.max_positions, m.source, m.mtp_layers) == ("org/tiny-moe", 4096, "tiny.json", 1)
    assert m.raw is cfg and m.attention.bias and m.attention.qk_norm and not m.attention.output_gate
    attn = 64 * 64 + 2 * 64 * 32 + 64 * 64 + (64 + 2 * 32) + 2 * 16  # weights + q/k/v biases + q/k norms
    expert, shared, router, dense = 3 * 64 * 32, 3 * 64 * 48 + 64, 64 * 8, 3 * 64 * 96
    p = m.param_counts()
    assert (p.attention, p.dense_ffn, p.routed_experts, p.active_routed_experts) == (6 * attn, 5 * dense, 8 * expert, 2 * expert)
    assert (p.shared_expert, p.router, p.embedding, p.lm_head, p.norms) == (shared, router, 64000, 64000, 6 * 2 * 64 + 64)
    assert p.mtp == attn + 8 * expert + shared + router + 2 * 64 * 64 + 5 * 64  # MTP layer: MoE FFN + 2H→H fusion + norms
    total = 6 * attn + 5 * dense + 8 * expert + shared + router + 128000 + 6 * 2 * 64 + 64
    d = p.as_dict()
    assert d["total"] == total and d["active"] == total - 6 * expert and d["active_without_embedding"] == total - 6 * expert - 64000
    assert d["mtp"] == p.mtp and d["norms"] == 6 * 2 * 64 + 64 and set(d) >= {"embedding", "attention", "linear_attention", "router"}
    assert m.attention.matmul_shapes(64) == [(64, 64), (64, 32), (64, 32), (64, 64)]
    dense_mtp = parse_config(_moe_cfg(num_experts=0, mtp_num_hidden_layers=2), path="x")
    assert dense_mtp.ffn_kinds == ("dense",) * 6 and dense_mtp.param_counts().mtp == 2 * (attn + dense + 2 * 64 * 64 + 5 * 64)
    # an MoE spec with every layer mlp-only: no MoE anywhere, MTP layer dense too, no expert terms in the roofline
    no_moe = parse_config(_moe_cfg(mlp_only_layers=[0, 1, 2, 3, 4, 5]), path="x")
    assert no_moe.moe is not None and no_moe.num_moe_layers == 0 and no_moe.param_counts().mtp == attn + dense + 2 * 64 * 64 + 5 * 64
    c = coefficients(Dep(no_moe, H20))
    assert (c.moe_layers, c.num_experts, c.top_k, c.expert_params) == (0, 0, 0, 0)
    assert c.dense_gemm_params == 6 * (64 * 64 + 2 * 64 * 32 + 64 * 64) + 6 * dense
    mixtral_style = parse_config(_moe_cfg(num_experts=None, num_local_experts=4, shared_expert_intermediate_size=1), path="x")
    assert mixtral_style.moe.num_experts == 4 and mixtral_style.moe.shared_gate  # a 1-wide shared expert is still gated
    assert parse_config(_moe_cfg(intermediate_size=1), path="x").dense_intermediate == 1
    assert not parse_config(_moe_cfg(attn_output_gate=True), path="x").attention.output_gate  # only hybrid models gate attention


def test_qwen3_30b_a3b_no_shared_expert_by_hand():
    """Qwen3-30B-A3B: 48 layers, hidden 2048, 32/4 heads of 128, 128 experts top-8 of width 768, no shared expert."""
    h, layers = 2048, 48
    attn_gemm = h * 4096 + 2 * h * 512 + 4096 * h
    p = load_model_spec("qwen3-30b-a3b").param_counts()
    assert p.shared_expert == 0 and p.attention == layers * (attn_gemm + 2 * 128)
    assert p.total == layers * (attn_gemm + 256) + layers * 128 * 3 * h * 768 + layers * h * 128 + 2 * 151936 * h + layers * 2 * h + h
    c = coefficients(Dep(load_model_spec("qwen3-30b-a3b"), H20))
    assert c.dense_gemm_params == layers * (attn_gemm + h * 128)  # attention + router; no shared expert, no gate
    act_attn = (h + 4096) + 2 * (h + 512) + (4096 + h)
    assert c.act_bytes_per_token == 2 * layers * (act_attn + 8 * (h + 2 * 768 + 768 + h) + h + 128)


def test_config_top_level_type_when_the_text_config_has_none():
    text = {k: v for k, v in _moe_cfg().items() if k != "model_type"}
    assert parse_config({"model_type": "qwen3_moe", "text_config": text}, path="c").model_type == "qwen3_moe"
    # no top-level type: the text config's type, mapped from its *_text name where it has one
    assert parse_config({"text_config": dict(text, model_type="qwen3_moe")}, path="c").model_type == "qwen3_moe"
    hybrid_text = dict(text, model_type="qwen3_5_moe_text", full_attention_interval=2, linear_num_key_heads=2,
                       linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4)
    assert parse_config({"text_config": hybrid_text}, path="c").model_type == "qwen3_5_moe"
    assert parse_config(_moe_cfg(decoder_sparse_step=None)).ffn_kinds == ("moe",) * 5 + ("dense",)  # null step: every layer
    assert parse_config(_moe_cfg(_name_or_path=None)).name == "<memory>" == parse_config(_moe_cfg()).source  # no path given
    assert parse_config({"model_type": "qwen3", "text_config": dict(text, model_type="qwen3_moe")}, path="c").model_type == "qwen3"
    assert parse_config(dict(_moe_cfg(), model_type="qwen3"), path="c").model_type == "qwen3"


def test_hybrid_layer_kinds_from_the_interval():
    """SPEC §3: without layer_types, layer i is full attention when (i + 1) % full_attention_interval == 0."""
    cfg = {"model_type": "qwen3_5", "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4, "head_dim": 16,
           "vocab_size": 100, "intermediate_size": 96, "full_attention_interval": 4, "linear_num_key_heads": 2,
           "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4}
    m = parse_config(cfg, path="h")
    assert m.layer_kinds == ("linear", "linear", "linear", "full") * 2
    assert not m.tie_embeddings  # no tie_word_embeddings anywhere: untied


@pytest.mark.parametrize("field", ["num_hidden_layers", "num_attention_heads", "linear_num_key_heads", "linear_num_value_heads",
                                   "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "vocab_size"])
def test_missing_hybrid_fields_are_named_with_the_file(field):
    cfg = {"model_type": "qwen3_5", "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4, "head_dim": 16,
           "vocab_size": 100, "intermediate_size": 96, "full_attention_interval": 4, "linear_num_key_heads": 2,
           "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4}
    del cfg[field]
    with pytest.raises(ModelSpecError, match=f"^p\\.json: missing field '{field}' needed for model_type 'qwen3_5'$"):
        parse_config(cfg, path="p.json")


@pytest.mark.parametrize("field", ["num_experts_per_tok", "moe_intermediate_size"])
def test_missing_moe_fields_are_named_with_the_file(field):
    cfg = _moe_cfg()
    del cfg[field]
    with pytest.raises(ModelSpecError, match=f"^p\\.json: missing field '{field}' needed for model_type 'qwen3_moe'$"):
        parse_config(cfg, path="p.json")


def test_config_name_vocab_tie_and_defaults():
    cfg = _moe_cfg()
    del cfg["_name_or_path"], cfg["max_position_embeddings"], cfg["num_nextn_predict_layers"], cfg["attention_bias"]
    del cfg["head_dim"], cfg["num_key_value_heads"], cfg["mlp_only_layers"], cfg["decoder_sparse_step"]
    m = parse_config(cfg, path="p.json")
    assert (m.name, m.max_positions, m.mtp_layers, m.attention.bias) == ("p.json", 0, 0, False)
    assert (m.attention.head_dim, m.attention.num_kv_heads) == (16, 4)  # hidden / heads, kv heads = heads
    assert m.ffn_kinds == ("moe",) * 6 and m.moe.shared_gate
    assert parse_config(cfg, name="given", path="p.json").name == "given"
    assert parse_config(_moe_cfg(shared_expert_intermediate_size=0), path="x").moe.shared_gate is False
    # composite config: text fields in text_config, vocab and tying at the top level
    text = {k: v for k, v in _moe_cfg(model_type="qwen3_5_moe_text").items() if k not in ("vocab_size", "tie_word_embeddings")}
    text.update(layer_types=["linear_attention", "full_attention"] * 3, linear_num_key_heads=2, linear_num_value_heads=4,
                linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4, attn_output_gate=True)
    comp = parse_config({"model_type": "qwen3_5_moe", "vocab_size": 500, "tie_word_embeddings": True, "text_config": text}, path="c")
    assert (comp.model_type, comp.vocab, comp.tie_embeddings) == ("qwen3_5_moe", 500, True)
    assert comp.layer_kinds == ("linear", "full") * 3 and comp.attention.output_gate
    assert comp.linear.matmul_shapes(64) == [(64, 2 * 2 * 8 + 4 * 8), (64, 32), (64, 8), (32, 64)]
    text["tie_word_embeddings"] = False  # the text config's own flag wins over the top level's
    assert parse_config({"model_type": "qwen3_5_moe", "vocab_size": 500, "tie_word_embeddings": True, "text_config": text}, path="c").tie_embeddings is False
    nxt = dict(text, model_type="qwen3_next", vocab_size=500)
    del nxt["attn_output_gate"]
    assert parse_config(nxt, path="n").attention.output_gate  # Qwen3-Next gates attention by default
    llama = parse_config({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "intermediate_size": 96, "vocab_size": 100}, path="l")
    assert not llama.attention.qk_norm and llama.attention.params(64) == 4 * 64 * 64


@pytest.mark.parametrize("cfg,msg", [
    ([1, 2], "p.json: expected a JSON object at the top level"),
    ({"model_type": "gpt2"}, "p.json: unsupported model_type 'gpt2'; supported: qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe, llama"),
    ({"model_type": "qwen3", "num_hidden_layers": 2}, "p.json: missing field 'hidden_size' needed for model_type 'qwen3'"),
    ({"model_type": "qwen3", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10},
     "p.json: missing field 'intermediate_size' needed for dense FFN layers (a positive integer)"),
    ({"model_type": "qwen3_5", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10,
      "layer_types": ["full_attention"]}, "p.json: layer_types has 1 entries, num_hidden_layers is 2"),
    ({"model_type": "qwen3_5", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10},
     "p.json: missing field 'full_attention_interval' needed for model_type 'qwen3_5'"),
])
def test_config_errors_name_file_field_and_type(cfg, msg):
    with pytest.raises(ModelSpecError, match=f"^{re.escape(msg)}$"):
        parse_config(cfg, path="p.json")


_DENSE = {"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
          "vocab_size": 100}
_HYBRID = {"model_type": "qwen3_5", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16,
           "vocab_size": 100, "intermediate_size": 96, "full_attention_interval": 2, "linear_num_key_heads": 2,
           "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4}


@pytest.mark.parametrize("base,change,msg", [
    (_DENSE, {"hidden_size": "64"}, "field 'hidden_size' must be an integer, got '64'"),
    (_DENSE, {"hidden_size": True}, "field 'hidden_size' must be an integer, got True"),
    (_DENSE, {"num_hidden_layers": 0}, "field 'num_hidden_layers' must be at least 1, got 0"),
    (_DENSE, {"num_hidden_layers": 1025}, "field 'num_hidden_layers' must be at most 1024, got 1025"),
    (_DENSE, {"num_key_value_heads": 0}, "field 'num_key_value_heads' must be at least 1, got 0"),
    (_DENSE, {"num_key_value_heads": 3}, "field 'num_attention_heads' (4) must be a multiple of 'num_key_value_heads' (3)"),
    (_DENSE, {"hidden_size": 66}, "field 'hidden_size' (66) must be a multiple of 'num_attention_heads' (4)"),
    (_DENSE, {"head_dim": 0}, "field 'head_dim' must be at least 1, got 0"),
    (_DENSE, {"model_type": 3}, "field 'model_type' must be a string, got 3"),
    (_DENSE, {"intermediate_size": -1}, "field 'intermediate_size' must be at least 0, got -1"),
    (_DENSE, {"tie_word_embeddings": "yes"}, "field 'tie_word_embeddings' must be true or false, got 'yes'"),
    (_DENSE, {"num_nextn_predict_layers": -1}, "field 'num_nextn_predict_layers' must be at least 0, got -1"),
    (_DENSE, {"num_nextn_predict_layers": 1025}, "field 'num_nextn_predict_layers' must be at most 1024, got 1025"),
    (_DENSE, {"max_position_embeddings": -1}, "field 'max_position_embeddings' must be at least 1, got -1"),
    (_DENSE, {"num_experts": -1}, "field 'num_experts' must be at least 0, got -1"),
    (_HYBRID, {"layer_types": "full_attention"}, "layer_types has str entries, num_hidden_layers is 2"),
    (_HYBRID, {"layer_types": ["mamba", "full_attention"]},
     "field 'layer_types' entries must be 'full_attention' or 'linear_attention', got 'mamba'"),
    (_HYBRID, {"linear_num_value_heads": 3}, "field 'linear_num_value_heads' (3) must be a multiple of 'linear_num_key_heads' (2)"),
])
def test_config_field_errors_name_the_file_and_the_field(base, change, msg):
    with pytest.raises(ModelSpecError, match=f"^{re.escape('p.json: ' + msg)}$"):
        parse_config({**base, **change}, path="p.json")


@pytest.mark.parametrize("change,msg", [
    ({"shared_expert_intermediate_size": -1}, "field 'shared_expert_intermediate_size' must be at least 0, got -1"),
    ({"num_experts_per_tok": 9}, "field 'num_experts_per_tok' must be at most 8, got 9"),
    ({"mlp_only_layers": "5"}, "field 'mlp_only_layers' must be a list of layer indices, got '5'"),
    ({"mlp_only_layers": [True]}, "field 'mlp_only_layers' must be a list of layer indices, got [True]"),
    ({"decoder_sparse_step": 0}, "field 'decoder_sparse_step' must be at least 1, got 0"),
    ({"text_config": {"model_type": 5}}, "field 'model_type' must be a string, got 5"),
])
def test_moe_config_field_errors_name_the_file_and_the_field(change, msg):
    with pytest.raises(ModelSpecError, match=f"^{re.escape('p.json: ' + msg)}$"):
        parse_config(_moe_cfg(**change), path="p.json")


def test_config_limits_are_inclusive_and_integral_floats_are_integers():
    m = parse_config({**_DENSE, "num_hidden_layers": 1024.0, "hidden_size": 64.0, "num_nextn_predict_layers": 1024}, path="p")
    assert (m.num_layers, m.hidden, m.mtp_layers) == (1024, 64, 1024) and type(m.hidden) is int
    assert parse_config(_moe_cfg(num_experts_per_tok=8), path="p").moe.top_k == 8


def test_unreadable_config_files_are_named(tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"model_type": "qwen3\xe9"}')
    with pytest.raises(ModelSpecError, match=f"^{re.escape(str(bad))}: not UTF-8 text \\(byte 21\\); expected a Hugging Face config\\.json$"):
        load_model_spec(bad)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    with pytest.raises(ModelSpecError, match=f"^{re.escape(str(deep))}: JSON nested too deeply; expected a Hugging Face config\\.json$"):
        load_model_spec(deep)


def test_load_model_spec_by_name_id_dir_and_file(tmp_path):
    by_short, by_id = load_model_spec("QWEN3.5-4B"), load_model_spec("Qwen/Qwen3.5-4B")
    assert by_short.name == by_id.name == "Qwen/Qwen3.5-4B" and by_short.param_counts() == by_id.param_counts()
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(_moe_cfg()), encoding="utf-8")
    assert load_model_spec(d).name == "my-model" and load_model_spec(d / "config.json").name == "my-model"
    missing = tmp_path / "nope.json"
    with pytest.raises(ModelSpecError, match=f"^{re.escape(str(missing))}: cannot read model config \\(No such file or directory\\)$"):
        load_model_spec(missing)
    shipped = ", ".join(k.split("/", 1)[1].lower() for k in shipped_models())
    with pytest.raises(ModelSpecError, match=f"^{re.escape(f'unknown model {chr(39)}gpt-9{chr(39)}; shipped: {shipped} (or pass a path to a Hugging Face config.json)')}$"):
        load_model_spec("gpt-9")


def test_deployment_limits_are_inclusive_and_an_engine_gpu_limit_is_named_in_full():
    spec, hw = load_model_spec("Qwen/Qwen3-8B"), load_hardware("h100_sxm")
    with pytest.raises(ValueError, match=r"a replica on 1024 GPUs splits attention 1024 ways, but 1024 does not divide"):
        Deployment(spec, hw, gpus=1024, memory_utilization=0.01)  # within the range: refused only as a TP degree
    assert Deployment(spec, hw, gpus=32, memory_utilization=0.01).gpus == 32
    with pytest.raises(ValueError, match=r"^gpus must be in \[1, 1,024\], got 1025$"):
        Deployment(spec, hw, gpus=1025)
    two = dataclasses.replace(load_engine("vllm"), max_gpus=Sourced(2, "calibrated on 2"))
    assert Deployment(spec, hw, gpus=2, serving_engine=two).gpus == 2
    tail = ("prices at most 2 GPU(s) ([limits] max_gpus: calibrated on 2); 4 GPUs need collective latencies it does not have: "
            "calibrate on more GPUs or pick another serving engine")
    with pytest.raises(ValueError, match=f"^{re.escape(f'serving engine {chr(39)}vllm{chr(39)} ({two.path}) ' + tail)}$"):
        Deployment(spec, hw, gpus=4, serving_engine=two)
    with pytest.raises(ValueError, match=f"^{re.escape(f'serving engine {chr(39)}vllm{chr(39)} (in memory) ' + tail)}$"):
        Deployment(spec, hw, gpus=4, serving_engine=dataclasses.replace(two, path=""))


def test_collective_counts_by_parallelism():
    """2 all-reduces per layer under TP; under tp+ep each MoE layer swaps its FFN all-reduce for dispatch + combine all-to-alls."""
    from specagent.costmodel.latency import collective_counts, latency_terms

    dense, moe = load_model_spec("Qwen/Qwen3-8B"), load_model_spec("Qwen/Qwen3-30B-A3B")
    hw = load_hardware("h100_sxm")
    assert (dense.num_layers, moe.num_layers, moe.num_moe_layers) == (36, 48, 48)
    assert collective_counts(Deployment(dense, hw, gpus=1)) == (0, 0)
    assert collective_counts(Deployment(dense, hw, gpus=2)) == (72, 0)
    assert collective_counts(Deployment(moe, hw, gpus=2)) == (96, 0)
    ep = Deployment(moe, hw, gpus=2, parallelism="tp+ep", serving_engine=load_engine("vllm"))
    terms = latency_terms(ep)
    assert collective_counts(ep) == (terms.allreduces, terms.all_to_alls) == (48, 96)
    eng = ep.serving_engine
    assert terms.collective_latency_s == pytest.approx(
        (48 * eng.allreduce_alpha_us.value + 96 * eng.all_to_all_alpha_us.value) * 1e-6, rel=1e-12)


def test_an_eager_pass_exposes_the_launches_beyond_its_gpu_busy_time_collectives_included():
    """Launch time exposed = max(launches - (max(compute, memory) + collectives + per-layer time), 0) (latency.exposed_launch)."""
    from specagent.costmodel.latency import latency_terms

    dep = Dep(Q4, H20, gpus=2, serving_engine=load_engine("vllm:eager"))
    p = estimate(dep, Passes.uniform(1, 100, 1))
    busy = max(p.compute_s[0], p.memory_s[0]) + p.comm_s[0] + p.fixed["layers"][0]
    assert p.comm_s[0] > 0 and latency_terms(dep).launch_s > busy
    assert p.fixed["launch"][0] == pytest.approx(latency_terms(dep).launch_s - busy, rel=1e-12)


def test_shared_experts_add_their_weight_kernels_to_the_bandwidth_ramp():
    """Each weight-reading kernel pays the bandwidth ramp (bandwidth_half_mb); a shared expert adds 3 kernels per MoE layer."""
    from specagent.costmodel.latency import SHARED_EXPERT_KERNELS, latency_terms

    eng = dataclasses.replace(load_engine("vllm"), bandwidth_half_mb=Sourced(1.0, "test"))
    with_shared = Dep(parse_config(_moe_cfg(mlp_only_layers=[], decoder_sparse_step=1), path="s"), H20, serving_engine=eng)
    without = Dep(parse_config(_moe_cfg(mlp_only_layers=[], decoder_sparse_step=1, shared_expert_intermediate_size=0), path="n"),
                  H20, serving_engine=eng)
    a, b = latency_terms(with_shared), latency_terms(without)
    assert SHARED_EXPERT_KERNELS == 3 and with_shared.model.num_moe_layers == 6
    # the shared expert is dense: its kernels ramp at the weight stream's rate (vLLM's profile sets one), not the shared one
    assert a.stream_efficiency is not None and a.stream_efficiency > a.bandwidth_efficiency
    assert a.bandwidth_ramp_s - b.bandwidth_ramp_s == pytest.approx(6 * 3 * 1e6 / (H20.bandwidth_bytes_s * a.stream_efficiency),
                                                                    rel=1e-12)


def test_decode_steps_replay_a_cuda_graph_even_when_mixed_batches_run_eager():
    """An engine that captures graphs for pure decode only (cuda_graphs.mixed = false) launches nothing per decode step."""
    eng = dataclasses.replace(load_engine("vllm"), cuda_graphs_mixed=Sourced(False, "test"))
    dep = Dep(Q4, H20, serving_engine=eng)
    run = DecodeRun(dep)
    assert run._launch_s == 0.0
    steps = estimate(dep, Passes.uniform(1, 100 + np.arange(50.0), 1))
    assert steps.fixed["launch"].max() == 0.0 and run.totals(100, 50)["time_s"] == pytest.approx(steps.time_s.sum(), rel=1e-12)
    verify = estimate(dep, Passes.uniform(8, 100, 1))
    assert verify.fixed["launch"][0] > 0  # an 8-token (verify-sized) pass is not a pure decode: it launches eagerly
