"""The serving-engine terms (costmodel.latency) against hand counts, and engine profiles as data.

Each expected figure is counted here from the model's shape (SPEC §3) and the engine
profile's coefficients, not read back from `latency_terms`.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.passes import Passes
from specagent.costmodel.phases import decode, prefill
from specagent.costmodel.roofline import estimate
from specagent.hardware.serving_engine import (
    DEFAULT_ENGINE, LAYER_KINDS, EngineProfileError, list_engines, load_engine, load_engine_file, parse_engine,
)
from specagent.hardware.profile import HardwareProfileError, Sourced, load_hardware, parse_profile

H20 = load_hardware("h20")
H100 = load_hardware("h100_sxm")
Q397 = load_model_spec("qwen3.5-397b-a17b")  # 60 layers: 15 full + 45 Gated DeltaNet, all MoE
Q35_4B = load_model_spec("qwen3.5-4b")  # 32 layers: 8 full + 24 Gated DeltaNet, dense MLP
Q30 = load_model_spec("qwen3-30b-a3b")  # 48 full-attention MoE layers
VLLM = load_engine("vllm")
IDEAL = load_engine("ideal")


def _us(s: Sourced) -> float:
    return float(s.value) * 1e-6


def _engine(**fields) -> object:
    """vLLM's profile with some fields replaced on every GPU (values in the profile's units; a per-GPU override of one is dropped)."""
    overrides = {g: {k: v for k, v in o.items() if k not in fields} for g, o in VLLM.overrides.items()}
    return dataclasses.replace(VLLM, overrides=overrides, **{k: Sourced(v, "test") for k, v in fields.items()})


# ------------------------------------------------------------------------- collectives
def test_tp8_decode_step_carries_two_all_reduce_latencies_per_layer():
    dep = Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=VLLM)
    cost = decode(dep, context=4096, batch=3)
    alpha = _us(VLLM.allreduce_alpha_us)
    assert cost.collective_latency_s[0] == pytest.approx(2 * 60 * alpha, rel=1e-12)
    # the bytes part is the roofline's ring all-reduce, unchanged: 2 per layer of 3 tokens x 4096 x 2 B
    beta = 2 * 60 * 2 * 7 / 8 * 3 * 4096 * 2 / 450e9
    assert cost.comm_s[0] == pytest.approx(2 * 60 * alpha + beta, rel=1e-12)
    # one GPU: no collective at all; the ideal engine: bytes only
    assert decode(Deployment(Q35_4B, H20, serving_engine=VLLM), context=10).comm_s[0] == 0.0
    ideal = decode(dataclasses.replace(dep, serving_engine=IDEAL), context=4096, batch=3)
    assert ideal.collective_latency_s[0] == 0.0 and ideal.comm_s[0] == pytest.approx(beta, rel=1e-12)


def test_expert_parallel_moe_layers_use_two_all_to_alls_instead_of_their_ffn_all_reduce():
    eng = _engine(allreduce_alpha_us=10.0, all_to_all_alpha_us=25.0)
    dep = Deployment(Q30, H20, gpus=4, parallelism="tp+ep", serving_engine=eng)
    cost = decode(dep, context=0)
    # 48 layers: 48 attention all-reduces; each of the 48 MoE layers dispatches and combines
    assert cost.collective_latency_s[0] == pytest.approx((48 * 10.0 + 2 * 48 * 25.0) * 1e-6, rel=1e-12)
    tp = decode(dataclasses.replace(dep, parallelism="tp"), context=0)
    assert tp.collective_latency_s[0] == pytest.approx(2 * 48 * 10.0 * 1e-6, rel=1e-12)


# ------------------------------------------------------------------------- launches and CUDA graphs
def _kernels(eng, full: int, linear: int, dense: int, moe: int) -> int:
    k = eng.layer_kernels
    return (int(eng.pass_kernels.value) + full * int(k["full_attention"].value) + linear * int(k["linear_attention"].value)
            + dense * int(k["dense_mlp"].value) + moe * int(k["moe"].value))


def _busy(cost) -> float:
    """GPU-busy time of a one-pass cost, summed here from its parts: max(compute, memory) + comm + per-layer time."""
    return max(float(cost.compute_s[0]), float(cost.memory_s[0])) + float(cost.comm_s[0]) + float(cost.fixed["layers"][0])


def test_cuda_graphs_remove_the_launch_term_for_decode():
    # on an H100: on the H20 (fitted achieved bandwidth 0.38 of 4.0 TB/s, issue 28) the same step's GPU time outlasts its launches
    dep = Deployment(Q35_4B, H100, serving_engine=VLLM)
    launch = _kernels(VLLM, 8, 24, 32, 0) * _us(VLLM.launch_us)
    assert launch > 0
    graphed = decode(dep, context=1000, batch=8)
    assert graphed.fixed["launch"][0] == 0.0 and graphed.eager_launch_s[0] == 0.0
    eager = decode(dataclasses.replace(dep, serving_engine=load_engine("vllm:eager")), context=1000, batch=8)
    assert eager.eager_launch_s[0] == pytest.approx(launch, rel=1e-12)
    # a 4B decode step keeps an H100 busy ~5 ms, shorter than its 7 ms of launches: launch-bound,
    # so the step takes the launch time plus the CPU work, and the GPU's own time is hidden
    busy = _busy(eager)
    assert busy < launch
    cpu = _us(VLLM.iteration_us) + 8 * _us(VLLM.per_sequence_us)
    assert eager.time_s[0] == pytest.approx(launch + cpu, rel=1e-12)
    assert eager.fixed["launch"][0] == pytest.approx(launch - busy, rel=1e-12)
    assert eager.time_s[0] - graphed.time_s[0] == pytest.approx(launch - busy, rel=1e-9)
    # past the largest captured graph the batch runs eagerly again
    big = decode(dep, context=0, batch=int(VLLM.cuda_graph_max_batch.value) + 1)
    assert big.eager_launch_s[0] == pytest.approx(launch, rel=1e-12)


def test_eager_launches_overlap_the_gpu_work_of_a_long_pass():
    """Launches are issued asynchronously: a pass whose GPU work outlasts them shows none of them."""
    dep = Deployment(Q35_4B, H20, serving_engine=load_engine("vllm:eager"))
    launch = _kernels(VLLM, 8, 24, 32, 0) * _us(VLLM.launch_us)
    long = prefill(dep, 8000)  # ~ 64 TFLOP at 148 TFLOP/s: hundreds of ms of GPU time
    busy = _busy(long)
    assert busy > 10 * launch
    assert long.fixed["launch"][0] == 0.0 and long.eager_launch_s[0] == pytest.approx(launch, rel=1e-12)
    cpu = _us(VLLM.iteration_us) + _us(VLLM.per_sequence_us)
    assert long.time_s[0] == pytest.approx(busy + cpu, rel=1e-12)


def test_mixed_passes_replay_graphs_only_where_the_engine_captures_them():
    sgl = load_engine("sglang")
    assert VLLM.cuda_graphs_mixed.value and not sgl.cuda_graphs_mixed.value
    p = Passes.from_batches([[(1, 100), (3, 200)]])  # 4 tokens, one sequence verifies 3: not pure decode
    v = estimate(Deployment(Q35_4B, H20, serving_engine=VLLM), p)
    s = estimate(Deployment(Q35_4B, H20, serving_engine=sgl), p)
    assert v.fixed["launch"][0] == 0.0 and v.eager_launch_s[0] == 0.0
    launch = _kernels(sgl, 8, 24, 32, 0) * _us(sgl.launch_us)
    assert s.eager_launch_s[0] == pytest.approx(launch, rel=1e-12)
    assert s.fixed["launch"][0] == pytest.approx(max(launch - _busy(s), 0.0), rel=1e-12)


# ------------------------------------------------------------------------- per layer, per iteration, per sequence
def test_per_layer_fixed_time_by_kind_and_per_iteration_and_sequence_terms():
    eng = _engine(iteration_us=100.0, per_sequence_us=3.0)
    eng = dataclasses.replace(eng, layer_us={"full_attention": Sourced(11.0, "t"), "linear_attention": Sourced(7.0, "t"),
                                             "dense_mlp": Sourced(5.0, "t"), "moe": Sourced(13.0, "t")})
    h20 = eng.for_hardware("h20")
    shared = 4.0e12 * float(h20.bandwidth.value)  # achieved bytes/s of routed-expert reads on one H20
    rate = 4.0e12 * min(1.0, float(h20.bandwidth.value) * float(h20.weight_stream.value))  # of the dense weight stream
    dense = decode(Deployment(Q35_4B, H20, serving_engine=eng), context=50, batch=7)
    # each weight kernel pays max(floor, bytes time): its floor is hidden up to its bytes time (hidden_floor_s). Qwen3.5-4B,
    # BF16 on one GPU, by hand from SPEC §3: attention QKV+gate 2560 x (8192 + 2 x 1024), output 4096 x 2560; Gated
    # DeltaNet qkvz 2560 x (8192 + 4096), ba 2560 x 64, output 4096 x 2560; MLP gate/up 2 x 2560 x 9216, down 9216 x 2560
    def hidden(floor_us: float, params: list[float], bytes_per: float, gpus: int = 1, at: float = rate) -> float:
        return sum(min(floor_us * 1e-6, n * bytes_per / gpus / at) for n in params)

    want = (8 * 11e-6 - 8 * hidden(11 / 9, [2560 * 10240, 4096 * 2560], 2)
            + 24 * 7e-6 - 24 * hidden(7 / 11, [2560 * 12288, 2560 * 64, 4096 * 2560], 2)
            + 32 * 5e-6 - 32 * hidden(5 / 4, [2 * 2560 * 9216, 9216 * 2560], 2))
    assert dense.fixed["layers"][0] == pytest.approx(want, rel=1e-12)
    # the 4B's GEMMs stream 5-94 MB each, microseconds beyond any of these floors: every weight kernel's floor is hidden
    # but the tiny ba projection's (0.33 MB, 0.15 us on an H20)
    assert want == pytest.approx((8 * 11 + 24 * 7 + 32 * 5) * 1e-6 - (8 * 2 * 11 / 9 + 24 * 2 * 7 / 11 + 32 * 2 * 5 / 4) * 1e-6
                                 - 24 * 2560 * 64 * 2 / rate, rel=1e-12)
    assert dense.fixed["iteration"][0] == pytest.approx(100e-6, rel=1e-12)
    assert dense.fixed["per_sequence"][0] == pytest.approx(7 * 3e-6, rel=1e-12)
    moe = decode(Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=eng), context=50)
    # Qwen3.5-397B-A17B FP8 over 8 GPUs: attention QKV+gate 4096 x (16384 + 2 x 512), output 8192 x 4096; Gated DeltaNet
    # qkvz 4096 x (12288 + 8192), ba 4096 x 128, output 8192 x 4096; MoE router 4096 x 512 (BF16), top-10 w13 and w2,
    # shared expert gate/up, down and its scalar gate; bytes per GPU; the routed experts' two at the shared rate
    routed, shared_expert = [2 * 4096 * 1024 * 10, 1024 * 4096 * 10], [2 * 4096 * 1024, 1024 * 4096, 4096]
    want = (15 * 11e-6 - 15 * hidden(11 / 9, [4096 * 17408, 8192 * 4096], 1, 8)
            + 45 * 7e-6 - 45 * hidden(7 / 11, [4096 * 20480, 4096 * 128, 8192 * 4096], 1, 8)
            + 60 * 13e-6 - 60 * (hidden(13 / 14, [4096 * 512], 2, 8) + hidden(13 / 14, routed, 1, 8, shared)
                                 + hidden(13 / 14, shared_expert, 1, 8)))
    assert moe.fixed["layers"][0] == pytest.approx(want, rel=1e-12)
    assert moe.overhead_s[0] == pytest.approx(sum(v[0] for v in moe.fixed.values()), rel=1e-12)


def test_a_weight_kernel_pays_its_floor_or_its_bytes_whichever_binds():
    """The per-layer floor and a weight kernel's own reads overlap (issue 49): with floors far above every kernel's bytes
    time the layers term hides exactly the weights' memory time (GPU-busy = floors, as if each kernel took its floor);
    with floors far below it hides every weight kernel's floor (GPU-busy = the roofline + the weightless kernels' floors)."""
    dep = Deployment(Q35_4B, H20, serving_engine=VLLM)
    huge = dataclasses.replace(VLLM, overrides={}, layer_us={k: Sourced(1e5 * float(VLLM.layer_kernels[k].value), "t") for k in LAYER_KINDS})
    tiny = dataclasses.replace(VLLM, overrides={}, layer_us={k: Sourced(1e-6 * float(VLLM.layer_kernels[k].value), "t") for k in LAYER_KINDS})
    rate = 4.0e12 * min(1.0, float(VLLM.bandwidth.value) * float(VLLM.weight_stream.value))  # the dense weight stream's
    weights = 8 * (2560 * 10240 + 4096 * 2560) + 24 * (2560 * 12288 + 2560 * 64 + 4096 * 2560) + 32 * 3 * 2560 * 9216
    floors = sum(n * 1e5 * float(VLLM.layer_kernels[k].value) for k, n in
                 (("full_attention", 8), ("linear_attention", 24), ("dense_mlp", 32))) * 1e-6
    big = decode(dataclasses.replace(dep, serving_engine=huge), context=0)
    assert big.fixed["layers"][0] == pytest.approx(floors - weights * 2 / rate, rel=1e-12)
    small = decode(dataclasses.replace(dep, serving_engine=tiny), context=0)
    weight_kernels = 8 * 2 + 24 * 3 + 32 * 2
    assert small.fixed["layers"][0] == pytest.approx(floors / 1e11 - weight_kernels * 1e-12, rel=1e-9)  # floors 1e-6 us each
    # never below the roofline, and the ideal engine (no floors) is the roofline as before
    assert small.time_s[0] >= max(small.memory_s[0], small.compute_s[0])
    ideal = decode(dataclasses.replace(dep, serving_engine=IDEAL), context=0)
    assert ideal.fixed["layers"][0] == 0.0
    # a profile that does not say its floors overlap reads (a CPU's calibrate profile, every profile before issue 49) adds them
    serial = dataclasses.replace(huge, floor_overlaps_reads=None)
    assert decode(dataclasses.replace(dep, serving_engine=serial), context=0).fixed["layers"][0] == pytest.approx(floors, rel=1e-12)
    assert VLLM.floor_overlaps_reads.value is True and load_engine("sglang-0.4").floor_overlaps_reads.value is True


def test_engine_without_iteration_term_uses_the_hardware_pass_overhead():
    assert IDEAL.iteration_us is None and VLLM.iteration_us is not None
    c = decode(Deployment(Q35_4B, H20, serving_engine=IDEAL), context=0)
    assert c.fixed["iteration"][0] == pytest.approx(float(H20.pass_overhead_us.value) * 1e-6, rel=1e-12)
    v = decode(Deployment(Q35_4B, H20, serving_engine=VLLM), context=0)
    assert v.fixed["iteration"][0] == pytest.approx(_us(VLLM.iteration_us), rel=1e-12)


# ------------------------------------------------------------------------- kernel efficiencies
def test_grouped_gemm_padding_per_touched_expert_by_hand():
    eng = _engine(moe_pad_tokens=20.0, gemm_mfu=0.5, moe_mfu=0.4)
    dep = Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=eng)
    cost = decode(dep, context=0, batch=4)
    touched = 512 * (1 - (1 - 10 / 512) ** 4)
    pad_flops = 2 * (3 * 4096 * 1024) * 60 * 20.0 * touched
    assert cost.compute_parts["expert_padding"][0] == pytest.approx(pad_flops / (296e12 * 8 * 0.4), rel=1e-9)
    # efficiency of the expert GEMMs at tau tokens per touched expert is moe_mfu x tau / (tau + pad)
    tau = 4 * 10 / touched
    expert = cost.compute_parts["experts"][0] + cost.compute_parts["expert_padding"][0]
    assert cost.flops["experts"][0] / (296e12 * 8) / expert == pytest.approx(0.4 * tau / (tau + 20.0), rel=1e-9)
    gemm = cost.flops["dense"][0] + cost.flops["lm_head"][0]
    assert cost.compute_parts["gemm"][0] == pytest.approx(gemm / (296e12 * 8 * 0.5), rel=1e-12)
    assert decode(Deployment(Q35_4B, H20, serving_engine=eng), context=0).compute_parts["expert_padding"][0] == 0.0


def test_attention_runs_at_its_own_efficiency_and_gemms_at_the_gemm_one():
    eng = _engine(attention_mfu=0.25, gemm_mfu=0.5)
    dep = Deployment(Q35_4B, H20, serving_engine=eng)
    cost = prefill(dep, 4096, context=8192)
    attn = cost.flops["attention"][0] + cost.flops["linear_attention"][0]
    gemm = cost.flops["dense"][0] + cost.flops["lm_head"][0]
    assert cost.compute_parts["attention"][0] == pytest.approx(attn / (148e12 * 0.25), rel=1e-12)
    assert cost.compute_parts["gemm"][0] == pytest.approx(gemm / (148e12 * 0.5), rel=1e-12)
    assert cost.compute_s[0] == pytest.approx(sum(v[0] for v in cost.compute_parts.values()), rel=1e-12)


def test_a_decode_pass_uses_the_gemm_efficiency_for_its_token_count_not_a_decode_mfu():
    """Issue 17: no separate decode MFU; a batch-B decode's GEMMs are B-row GEMMs at the GEMM efficiency."""
    dep = Deployment(Q35_4B, H20, serving_engine=IDEAL)  # no engine gemm_mfu: the hardware's prefill_mfu (0.6)
    for b in (1, 64, 3000):
        cost = decode(dep, context=100, batch=b)
        assert cost.compute_s[0] == pytest.approx(cost.total_flops[0] / (148e12 * 0.6), rel=1e-12)
    eng = _engine(gemm_mfu=0.45)
    cost = decode(Deployment(Q35_4B, H20, serving_engine=eng), context=100, batch=64)
    gemm = cost.flops["dense"][0] + cost.flops["lm_head"][0]
    assert cost.compute_parts["gemm"][0] == pytest.approx(gemm / (148e12 * 0.45), rel=1e-12)


def test_achieved_bandwidth_ramp_adds_half_size_per_weight_kernel():
    eng = _engine(bandwidth_half_mb=2.0, bandwidth=0.8, weight_stream=1.0)  # one rate for all bytes
    dep = Deployment(Q35_4B, H20, serving_engine=eng)
    cost = decode(dep, context=500)
    # weight kernels: 8 x (QKV, output) + 24 x (qkvz, ba, output) + 32 x (gate/up, down) + the LM head
    kernels = 8 * 2 + 24 * 3 + 32 * 2 + 1
    flat = cost.total_bytes[0] / (4.0e12 * 0.8)
    assert cost.memory_s[0] - flat == pytest.approx(kernels * 2e6 / (4.0e12 * 0.8), rel=1e-9)
    # a kernel of b bytes then streams at 0.8 * b / (b + 2 MB) of the datasheet bandwidth
    b = 50e6
    assert b / (b / (4.0e12 * 0.8) + 2e6 / (4.0e12 * 0.8)) / 4.0e12 == pytest.approx(0.8 * b / (b + 2e6), rel=1e-12)


def test_the_dense_weight_stream_reads_at_its_own_rate_capped_at_the_datasheet():
    """`weight_stream` prices the weights every pass reads once (all but the embedding table and routed experts, and the
    LM head) at bandwidth x factor; KV, activations and routed experts keep the shared rate (issue 49)."""
    for dep, g in ((Deployment(Q35_4B, H20), 1), (Deployment(Q397, H20, gpus=8, weight_dtype="fp8"), 8)):
        one = decode(dataclasses.replace(dep, serving_engine=_engine(bandwidth=0.6, weight_stream=1.0)), context=500, batch=3)
        fast = decode(dataclasses.replace(dep, serving_engine=_engine(bandwidth=0.6, weight_stream=1.5)), context=500, batch=3)
        capped = decode(dataclasses.replace(dep, serving_engine=_engine(bandwidth=0.8, weight_stream=2.0)), context=500, batch=3)
        stream = (fast.bytes_read["dense_weights"][0] + fast.bytes_read["lm_head"][0]) / g
        rest = fast.total_bytes[0] / g - stream
        assert one.memory_s[0] == pytest.approx((stream + rest) / (4.0e12 * 0.6), rel=1e-12)  # factor 1: one rate, as before
        assert fast.memory_s[0] == pytest.approx(stream / (4.0e12 * 0.9) + rest / (4.0e12 * 0.6), rel=1e-12)
        assert capped.memory_s[0] == pytest.approx(stream / 4.0e12 + rest / (4.0e12 * 0.8), rel=1e-12)  # 1.6 capped at 1
        assert rest > 0 and stream > 0


# ------------------------------------------------------------------------- ideal = the roofline before engine terms
def test_ideal_engine_is_the_bare_roofline():
    dep = Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=IDEAL)
    p = Passes.from_batches([[(1, 5000)] * 7, [(300, 2000), (1, 100)], [(4096, 0)]])
    cost = estimate(dep, p)
    hw = H20
    ring = cost.comm_bytes / hw.link_bytes_s
    expect = np.maximum(cost.total_flops * 0 + cost.compute_s, cost.total_bytes / (8 * 4.0e12 * 0.72)) + ring + 50e-6
    assert cost.time_s == pytest.approx(expect, rel=1e-12)
    assert all(float(v.sum()) == 0.0 for k, v in cost.fixed.items() if k != "iteration")


# ------------------------------------------------------------------------- profiles as data
def test_shipped_engines_load_with_sources_and_the_default_is_vllm():
    ids = {e.id for e in list_engines()}
    assert {"vllm", "sglang", "tensorrt-llm", "ideal"} <= ids
    assert DEFAULT_ENGINE == "vllm" and Deployment(Q35_4B, H20).serving_engine.id == "vllm"
    for e in list_engines():
        for name, value, source in e.figures():
            assert source.strip(), f"{e.path}: {name} has no source"
        assert set(e.layer_us) == set(LAYER_KINDS) == set(e.layer_kernels)
    assert load_engine("SGL").id == "sglang" and load_engine("trtllm").id == "tensorrt-llm"
    assert "engine vllm" in Deployment(Q35_4B, H20).describe()


def test_engine_profile_errors_name_file_and_field(tmp_path: Path):
    data = tomllib.loads(Path(VLLM.path).read_text(encoding="utf-8"))
    bad = {**data, "collectives": {k: v for k, v in data["collectives"].items() if k != "allreduce_alpha_us"}}
    with pytest.raises(EngineProfileError, match=r"x\.toml: missing field 'collectives\.allreduce_alpha_us'"):
        parse_engine(bad, "x.toml")
    bad = {**data, "per_pass": {**data["per_pass"], "launch_us": {"value": -1.0, "source": "s"}}}
    with pytest.raises(EngineProfileError, match=r"x\.toml: field 'per_pass\.launch_us' must be non-negative"):
        parse_engine(bad, "x.toml")
    bad = {**data, "per_pass": {**data["per_pass"], "launch_us": {"value": 3.0, "source": " "}}}
    with pytest.raises(EngineProfileError, match=r"'per_pass\.launch_us' has an empty source"):
        parse_engine(bad, "x.toml")
    bad = {**data, "kernels": {**data["kernels"], "typo_mfu": {"value": 0.5, "source": "s"}}}
    with pytest.raises(EngineProfileError, match=r"\[kernels\] has unknown fields \['typo_mfu'\]"):
        parse_engine(bad, "x.toml")
    bad = {**data, "hardware": {"h20": {"collectives": {"allreduce_alpha_us": {"value": "fast", "source": "s"}}}}}
    with pytest.raises(EngineProfileError, match=r"'hardware\.h20\.collectives\.allreduce_alpha_us' must be a number"):
        parse_engine(bad, "x.toml")
    f = tmp_path / "broken.toml"
    f.write_text("id = [", encoding="utf-8")
    with pytest.raises(EngineProfileError, match=r"broken\.toml: not valid TOML"):
        load_engine_file(f)
    with pytest.raises(EngineProfileError, match=r"unknown serving engine 'tgi'; known: .*sglang.*vllm"):
        load_engine("tgi")


def test_hardware_pair_tables_apply_on_their_gpu_only():
    data = tomllib.loads(Path(VLLM.path).read_text(encoding="utf-8"))
    data["hardware"] = {"h20": {"collectives": {"allreduce_alpha_us": {"value": 21.0, "source": "pair fit"}},
                                "per_layer_us": {"moe": {"value": 40.0, "source": "pair fit"}}}}
    eng = parse_engine(data, "pair.toml")
    on_h20 = decode(Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=eng), context=0)
    on_h100 = decode(Deployment(Q397, H100, gpus=8, weight_dtype="fp8", serving_engine=eng), context=0)
    assert on_h20.collective_latency_s[0] == pytest.approx(120 * 21e-6, rel=1e-12)
    assert on_h100.collective_latency_s[0] == pytest.approx(120 * _us(VLLM.allreduce_alpha_us), rel=1e-12)
    lay = eng.for_hardware("h20").layer_us
    assert lay["moe"].value == 40.0 and lay["full_attention"].value == VLLM.layer_us["full_attention"].value


def test_hardware_profiles_reject_decode_mfu_with_the_reason():
    data = tomllib.loads(Path(H20.path).read_text(encoding="utf-8"))
    data["efficiency"]["decode_mfu"] = {"value": 0.12, "source": "BLIS example"}
    with pytest.raises(HardwareProfileError, match=r"x\.toml: field 'efficiency\.decode_mfu' is no longer read"):
        parse_profile(data, "x.toml")


# ------------------------------------------------------------------------- the fleet's iteration cost follows every term
def test_iteration_cost_equals_estimate_with_every_engine_term():
    from specagent.simulator.fleet.itercost import IterationCost

    full = _engine(attention_mfu=0.3, bandwidth_half_mb=3.0, moe_pad_tokens=24.0, per_sequence_us=20.0, gemm_mfu=0.5, moe_mfu=0.35)
    deps = [Deployment(Q397, H20, gpus=8, weight_dtype="fp8", serving_engine=full),
            Deployment(Q30, H20, gpus=4, parallelism="tp+ep", serving_engine=dataclasses.replace(full, cuda_graph_max_batch=Sourced(6, "t"))),
            Deployment(Q35_4B, H20, serving_engine=load_engine("sglang:eager"))]
    rng = np.random.default_rng(11)
    for dep in deps:
        for mode in ("union", "active"):
            ic = IterationCost(dep, mode)
            for _ in range(25):
                b = int(rng.integers(1, 12))
                new = np.where(rng.random(b) < 0.6, 1, rng.integers(1, 3000, b))
                ctx = rng.integers(0, 40000, b)
                ref = estimate(dep, Passes.from_batches([list(zip(new.tolist(), ctx.tolist()))]), mode)
                n, c = new.astype(float), ctx.astype(float)
                got = ic.one(n.sum(), float(b), float((n == 1).sum()), float((n * c + n * (n + 1) / 2).sum()), float((c + n).sum()),
                             float(sum(1 + (math.ceil(x / 64) if x > 1 else 0) for x in new)), float(b))
                assert got[0] == pytest.approx(float(ref.time_s[0]), rel=1e-9)
                assert got[1] == pytest.approx(float(ref.total_flops[0]), rel=1e-9)
            for batch, k in ((1, 30), (5, 40), (9, 20)):  # 9 > the captured 6 on the second deployment: launches exposed
                ctx = rng.integers(100, 20000, batch).astype(float)
                seg = ic.decode_segment(batch, float(ctx.sum()))
                ref = estimate(dep, Passes.from_batches([list(zip([1] * batch, (ctx + j).tolist())) for j in range(k)]), mode)
                assert seg.totals(k).time_s == pytest.approx(float(ref.time_s.sum()), rel=1e-9)
