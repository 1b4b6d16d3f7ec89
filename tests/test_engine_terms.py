"""Engine terms measured on a device (kernels/engine_terms.py): the arithmetic by hand, the CUDA-only
paths with fakes, the profile written and its [limits], the CPU measurement end to end, collectives over gloo."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
import types

import pytest
import torch
from typer.testing import CliRunner

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.latency import latency_terms
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.hardware.serving_engine import LAYER_KINDS, EngineProfileError, load_engine, load_engine_file, parse_engine
from specagent.hardware.profile import load_hardware
from specagent.kernels import calibrate as cal
from specagent.kernels import engine_terms as et
from specagent.kernels import microbench as mb
from specagent.kernels.configs import strong_spec, weak_spec
from specagent.kernels.modules import MoE

torch.set_num_threads(1)
FAST = mb.TimingConfig(warmup=1, repeats=2, rotate=2, max_seconds=0.2)
US = 1e-6


def _part(kind, eager, graph, kernels, roof, fixed=None, kernels_fixed=None, model="weak"):
    return et.PartTiming(kind, model, eager * US, (fixed if fixed is not None else eager) * US, None if graph is None else graph * US,
                         kernels, kernels_fixed if kernels_fixed is not None else kernels, "fake", roof * US, 0.0, 0.0)


#: A GPU-like measurement written by hand: (eager, graph, kernels, roofline) us; MoE with host reads (eager 500, without 420).
GPU_PARTS = {
    "full_attention": _part("full_attention", 300.0, 60.0, 40, 1.0),
    "linear_attention": _part("linear_attention", 400.0, 80.0, 50, 2.0),
    "dense_mlp": _part("dense_mlp", 100.0, 20.0, 10, 0.5),
    "moe": _part("moe", 500.0, 90.0, 62, 1.5, fixed=420.0, kernels_fixed=60, model="strong"),
}


def _terms(parts=GPU_PARTS, collectives=None, iteration_s=0.0, device="cuda:0", name="NVIDIA H200"):
    return et.EngineTerms(device=device, device_name=name, dtype="bf16", scale="tiny", date="2026-12-01T00:00:00+00:00", parts=dict(parts),
                          launch_s=et.launch_per_kernel_s(list(parts.values())) or 0.0, launch_note="fake",
                          passes=[{"model": "weak", "point": [1, 1, 0], "measured_s": 1e-3, "kernels": 600, "layer_kernels": 590}],
                          pass_kernels=10, iteration_s=iteration_s, collectives=collectives, gpus=2 if collectives else 1,
                          collectives_note="measured: fake" if collectives else "not measured: 1 GPU (fake)",
                          versions={"torch": "2.11.0+cu130", "cuda": "13.0"})


def test_every_engine_layer_kind_has_a_part():
    assert tuple(et.ENGINE_PARTS) == LAYER_KINDS
    with pytest.raises(ValueError, match="unknown layer kind 'mlp'"):
        et.build_part(weak_spec("tiny"), "mlp", "fp32", "cpu")
    with pytest.raises(ValueError, match="needs an MoE model"):
        et.build_part(weak_spec("tiny"), "moe", "fp32", "cpu")


def test_launch_cost_and_fixed_time_by_hand():
    # Σ(eager with counts given − graph) / Σ kernels of the graphed work: (240 + 320 + 80 + 330) / (40 + 50 + 10 + 60)
    assert et.launch_per_kernel_s(list(GPU_PARTS.values())) == pytest.approx(970.0 / 160.0 * US, rel=1e-12)
    assert et.layer_fixed_s(GPU_PARTS["full_attention"]) == pytest.approx(59.0 * US, rel=1e-12)
    assert et.layer_fixed_s(GPU_PARTS["dense_mlp"]) == pytest.approx(19.5 * US, rel=1e-12)
    # MoE: graph 90 − roofline 1.5, + the host reads of the routing counts 500 − 420
    assert et.layer_fixed_s(GPU_PARTS["moe"]) == pytest.approx(168.5 * US, rel=1e-12)
    # a layer's eager time is what the cost model adds back: fixed + its kernels x launch + roofline (summed over the four)
    launch = et.launch_per_kernel_s(list(GPU_PARTS.values()))
    total = sum(et.layer_fixed_s(p) + p.kernels_fixed * launch + p.roofline_s for p in GPU_PARTS.values())
    assert total == pytest.approx(sum(p.eager_s for p in GPU_PARTS.values()), rel=1e-12)
    # on a CPU: no graph, no launch term; the fixed time is the eager time − the roofline
    cpu = _part("dense_mlp", 100.0, None, 10, 30.0)
    assert et.launch_per_kernel_s([cpu]) is None
    assert et.layer_fixed_s(cpu) == pytest.approx(70.0 * US, rel=1e-12)
    # noise: a graph slower than eager, a roofline above the time — floored at 0, never negative
    assert et.launch_per_kernel_s([_part("dense_mlp", 10.0, 12.0, 5, 0.0)]) == 0.0
    assert et.layer_fixed_s(_part("dense_mlp", 10.0, None, 5, 20.0)) == 0.0
    with pytest.raises(ValueError, match="no kernels counted"):
        et.launch_per_kernel_s([_part("dense_mlp", 10.0, 5.0, 0, 0.0)])
    # a part whose graph could not be captured on a GPU: its launches (at the others' rate) come out of its eager time
    ungraphed = dataclasses.replace(_part("dense_mlp", 100.0, None, 10, 1.0), graph_error="RuntimeError: capture")
    assert et.layer_fixed_s(ungraphed, 6e-6) == pytest.approx(39.0 * US, rel=1e-12)
    parts = {**GPU_PARTS, "dense_mlp": ungraphed}
    data = et.engine_profile_dict(_terms(parts))
    assert "no CUDA graph: RuntimeError: capture" in data["per_layer_us"]["dense_mlp"]["source"]
    launch = (240 + 320 + 330) / (40 + 50 + 60)  # from the three graphed parts
    assert data["per_layer_us"]["dense_mlp"]["value"] == pytest.approx(100.0 - 1.0 - 10 * launch, rel=1e-4)


def test_part_work_counts_what_the_roofline_counts():
    """Bytes and FLOPs of a one-token layer's two parts agree with the cost model's count of that layer."""
    for spec, mixer, ffn in ((weak_spec("tiny"), "full_attention", "dense_mlp"), (weak_spec("tiny"), "linear_attention", "dense_mlp"),
                             (strong_spec("tiny"), "full_attention", "moe"), (strong_spec("tiny"), "linear_attention", "moe")):
        pm, pf = et.build_part(spec, mixer, "fp32", "cpu"), et.build_part(spec, ffn, "fp32", "cpu")
        one = dataclasses.replace(spec, layer_kinds=({"full_attention": "full", "linear_attention": "linear"}[mixer],), ffn_kinds=(spec.ffn_kinds[0],))
        cost = estimate(cal.deployment_for(one, load_hardware("h200"), "fp32"), Passes.uniform(1, et.PART_CONTEXT, 1))
        byts = sum(v[0] for k, v in cost.bytes_read.items() if k not in ("embedding", "lm_head")) + sum(v[0] for v in cost.bytes_written.values())
        flops = sum(v[0] for k, v in cost.flops.items() if k != "lm_head")
        assert pm.bytes + pf.bytes == pytest.approx(byts, rel=0.06), (mixer, ffn)  # activations counted a little differently
        assert pm.flops + pf.flops == pytest.approx(flops, rel=0.015), (mixer, ffn)  # the conv1d's FLOPs are left out
    # the dense MLP part by hand: RMSNorm weight + gate/up + down in fp32, the token in and out; 2 FLOP per GEMM weight
    spec = weak_spec("tiny")
    h, i = spec.hidden, spec.dense_intermediate
    p = et.build_part(spec, "dense_mlp", "fp32", "cpu")
    assert p.bytes == 4.0 * (h + 2 * i * h + i * h) + 2 * 4.0 * h
    assert p.flops == 2.0 * 3 * i * h
    # the MoE part reads only the top-k experts a token touches
    s = strong_spec("tiny")
    mo = s.moe
    expert = 3 * mo.expert_intermediate * s.hidden
    shared = 3 * mo.shared_intermediate * s.hidden + s.hidden  # + its gate
    pm = et.build_part(s, "moe", "fp32", "cpu")
    assert pm.flops == 2.0 * (mo.num_experts * s.hidden + shared + mo.top_k * expert)
    assert pm.bytes == 4.0 * (mo.num_experts * s.hidden + shared + mo.top_k * expert + s.hidden) + 2 * 4.0 * s.hidden


def test_roofline_part_by_hand():
    hw = load_hardware("h200")
    flops, byts = 2e9, 4.8e6
    mem = byts / (hw.bandwidth_bytes_s * float(hw.bandwidth_efficiency.value))
    comp = flops / (hw.peak_flops("bf16") * float(hw.prefill_mfu.value))
    assert et.roofline_s(flops, byts, hw, "bf16") == pytest.approx(max(mem, comp), rel=1e-12)
    assert et.roofline_s(0.0, byts, hw, "bf16") == pytest.approx(mem, rel=1e-12)


def test_count_events_cuda_and_cpu_branches():
    from torch.autograd import DeviceType

    def ev(name, dev=DeviceType.CPU, parent=None):
        return types.SimpleNamespace(name=name, device_type=dev, cpu_parent=parent)

    gpu = [ev("aten::mm"), ev("cudaLaunchKernel"), ev("sm90_gemm", DeviceType.CUDA), ev("Memcpy DtoH", DeviceType.CUDA),
           ev("cudaMemcpyAsync")]
    assert et.count_events(gpu, cuda=True) == (2, "GPU activities (kernels, copies, memsets) in torch.profiler")
    n, how = et.count_events([ev("aten::mm"), ev("cudaLaunchKernel"), ev("cudaMemcpyAsync"), ev("cudaStreamSynchronize")], cuda=True)
    assert n == 2 and "runtime launch calls" in how
    with pytest.raises(RuntimeError, match="CUPTI"):
        et.count_events([ev("aten::mm")], cuda=True)
    top = ev("aten::linear")
    cpu = [top, ev("aten::t", parent=top), ev("aten::matmul", parent=top), ev("aten::silu"), ev("aten::mul"), ev("Optimizer.step")]
    assert et.count_events(cpu, cuda=False)[0] == 3
    # measured on this CPU: a SwiGLU through F.linear dispatches linear, split, silu, mul, linear
    p = et.build_part(weak_spec("tiny"), "dense_mlp", "fp32", "cpu")
    k, how = et.count_kernels(lambda: p.run(0), "cpu")
    assert "torch ops dispatched" in how and k >= 5


class _FakeEvent:
    """CUDA event stand-in: elapsed time (ms) scripted per timed call."""

    script: list[float] = []

    def __init__(self, enable_timing=False):
        pass

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return _FakeEvent.script.pop(0)


class _FakeGraph:
    """CUDAGraph stand-in: capture runs the work once (as capture would record it), replay runs it again."""

    capturing = None

    def __init__(self):
        self.work = []

    def replay(self):
        for fn in self.work:
            fn()


def test_graph_seconds_on_a_fake_cuda(monkeypatch):
    """The CUDA-graph path, with torch.cuda faked: warm-up on a side stream, one graph per input set of
    `calls` calls, replays timed by events; seconds per call = the median replay / calls."""
    import contextlib

    calls = []

    @contextlib.contextmanager
    def graph(g, pool=None):
        assert pool == "pool"
        start = len(calls)
        yield
        recorded = calls[start:]
        g.work = [lambda r=r: calls.append(("replay", r[1])) for r in recorded]

    fake = types.SimpleNamespace(
        device=lambda d: contextlib.nullcontext(), Stream=lambda d: types.SimpleNamespace(wait_stream=lambda s: None),
        current_stream=lambda d: types.SimpleNamespace(wait_stream=lambda s: None), stream=lambda s: contextlib.nullcontext(),
        synchronize=lambda d=None: None, graph_pool_handle=lambda: "pool", CUDAGraph=_FakeGraph, graph=graph, Event=_FakeEvent)
    monkeypatch.setattr(torch, "cuda", fake)
    monkeypatch.setattr(mb.torch, "cuda", fake)
    cfg = mb.TimingConfig(warmup=1, repeats=3, rotate=2, max_seconds=10.0)
    _FakeEvent.script = [1.0, 3.0, 2.0]  # ms per replay of 10 calls
    secs = et.graph_seconds(lambda i: calls.append(("run", i)), 2, "cuda:0", cfg, calls=10)
    assert secs == pytest.approx(2.0e-3 / 10, rel=1e-12)
    runs = [c for c in calls if c[0] == "run"]
    assert runs == [("run", 0), ("run", 1)] + [("run", 0)] * 10 + [("run", 1)] * 10  # warm-up, then capture of each set
    replays = [c for c in calls if c[0] == "replay"]
    assert len(replays) == 10 * (1 + 3)  # warm-up replay + 3 timed, each replaying 10 captured calls
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        et.graph_seconds(lambda i: None, 2, "cpu", cfg)


def test_fit_alpha_beta_recovers_a_line_and_rejects_bad_input():
    sizes = [4096 * 4**i for i in range(8)]
    alpha, beta = 9.3e-6, 150e9
    t = [alpha + b / beta for b in sizes]
    a, b, resid = et.fit_alpha_beta(sizes, t)
    assert a == pytest.approx(alpha, rel=1e-9) and b == pytest.approx(beta, rel=1e-9) and max(map(abs, resid)) < 1e-9
    # relative-error weighting: 5% noise on the largest message moves alpha by far less than an absolute fit would
    noisy = t[:-1] + [t[-1] * 1.05]
    a2, _, _ = et.fit_alpha_beta(sizes, noisy)
    assert abs(a2 - alpha) / alpha < 0.05
    flat = et.fit_alpha_beta([4096, 8192], [5e-6, 5e-6])
    assert flat[0] == pytest.approx(5e-6, rel=1e-9) and flat[1] > 1e18  # no size dependence: beta unbounded
    assert et.fit_alpha_beta([4096, 8192], [5e-6, 4e-6])[1] == float("inf")  # faster with more bytes: no finite beta
    with pytest.raises(ValueError, match="need >= 2 distinct message sizes"):
        et.fit_alpha_beta([4096], [1e-5])
    with pytest.raises(ValueError, match="positive times"):
        et.fit_alpha_beta([4096, 8192], [1e-5, 0.0])


def test_engine_profile_loads_with_every_measured_value_and_its_source(tmp_path):
    coll = {"backend": "nccl", "ranks": 2, "all_reduce": {"alpha_us": 8.5, "beta_gb_s": 150.0, "points": [{}] * 8},
            "all_to_all": {"alpha_us": 11.0, "beta_gb_s": 90.0, "points": [{}] * 8}}
    data = et.engine_profile_dict(_terms(collectives=coll, iteration_s=40e-6))
    path = et.write_engine_toml(data, tmp_path / "e.toml")
    eng = load_engine(str(path))
    assert eng.id == "calibrated-h200-bf16" and not eng.cuda_graphs.value
    assert {k: v.value for k, v in eng.layer_us.items()} == pytest.approx({"full_attention": 59.0, "linear_attention": 78.0, "dense_mlp": 19.5,
                                                                          "moe": 168.5}, rel=1e-4)
    assert {k: v.value for k, v in eng.layer_kernels.items()} == {"full_attention": 40, "linear_attention": 50, "dense_mlp": 10, "moe": 62}
    assert eng.launch_us.value == pytest.approx(970.0 / 160.0, rel=1e-4) and "CUDA-graph replay" in eng.launch_us.source
    assert eng.iteration_us.value == pytest.approx(40.0) and eng.pass_kernels.value == 10
    assert eng.allreduce_alpha_us.value == 8.5 and eng.all_to_all_alpha_us.value == 11.0 and eng.max_gpus.value == 2
    assert "host reads" in eng.layer_us["moe"].source and "measured by specagent calibrate on NVIDIA H200" in eng.layer_us["moe"].source
    spec = weak_spec("tiny")
    lt = latency_terms(Deployment(spec, load_hardware("h200"), gpus=2, serving_engine=eng))
    assert lt.collective_latency_s == pytest.approx(2 * spec.num_layers * 8.5e-6, rel=1e-12)
    with pytest.raises(ValueError, match=r"prices at most 2 GPU\(s\) \(\[limits\] max_gpus: collective latencies measured on 2 GPUs\)"):
        Deployment(spec, load_hardware("h200"), gpus=4, serving_engine=eng)


def test_one_gpu_profile_has_no_collectives_and_refuses_more_gpus(tmp_path):
    data = et.engine_profile_dict(_terms())
    assert "collectives" not in data and data["limits"]["max_gpus"]["value"] == 1
    eng = load_engine_file(et.write_engine_toml(data, tmp_path / "one.toml"))
    assert eng.allreduce_alpha_us.value == 0.0 and "not applicable: [limits] max_gpus = 1" in eng.allreduce_alpha_us.source
    assert "not measured: 1 GPU" in eng.max_gpus.source
    assert ("max_gpus", 1, eng.max_gpus.source) in eng.figures()
    spec = weak_spec("tiny")
    dep = Deployment(spec, load_hardware("h200"), gpus=1, serving_engine=eng)
    assert latency_terms(dep).collective_latency_s == 0.0
    with pytest.raises(ValueError, match=r"serving engine 'calibrated-h200-bf16' .*prices at most 1 GPU\(s\).*not measured: 1 GPU"):
        Deployment(spec, load_hardware("h200"), gpus=2, serving_engine=eng)
    # the limit is only how collectives may be absent: without it they are required, as before
    with pytest.raises(EngineProfileError, match=r"x\.toml: missing field 'collectives\.allreduce_alpha_us'"):
        parse_engine({k: v for k, v in data.items() if k != "limits"}, "x.toml")
    with pytest.raises(EngineProfileError, match=r"x\.toml: missing field 'collectives\.allreduce_alpha_us'"):
        parse_engine({**data, "limits": {"max_gpus": {"value": 2, "source": "s"}}}, "x.toml")
    with pytest.raises(EngineProfileError, match=r"'limits\.max_gpus' must be an integer >= 1, got 0"):
        parse_engine({**data, "limits": {"max_gpus": {"value": 0, "source": "s"}}}, "x.toml")
    with pytest.raises(EngineProfileError, match=r"\[limits\] has unknown fields \['gpus'\]"):
        parse_engine({**data, "limits": {"gpus": {"value": 1, "source": "s"}}}, "x.toml")
    assert load_engine("vllm").max_gpus is None  # the shipped engines are unchanged


def test_fit_iteration_is_the_median_residual_of_the_anchor_passes():
    spec, hw = weak_spec("tiny"), load_hardware("h200")
    eng0 = parse_engine(et.engine_profile_dict(_terms()))
    points = [(1, 1, 0), (1, 1, 64), (1, 1, 128)]
    price = [float(estimate(cal.deployment_for(spec, hw, "bf16", eng0), Passes.uniform(n, c, b)).time_s[0]) for b, n, c in points]
    extra = [30e-6, 50e-6, 90e-6]
    it, resid = et.fit_iteration([(spec, hw, p, t + e) for p, t, e in zip(points, price, extra)], "bf16", eng0)
    assert it == pytest.approx(50e-6, rel=1e-9) and resid == pytest.approx(extra, rel=1e-9)
    # the profile with that iteration term prices the median anchor exactly
    eng = parse_engine(et.engine_profile_dict(_terms(iteration_s=it)))
    again = float(estimate(cal.deployment_for(spec, hw, "bf16", eng), Passes.uniform(1, 64, 1)).time_s[0])
    assert again == pytest.approx(price[1] + 50e-6, rel=1e-9)
    assert et.fit_iteration([(spec, hw, points[0], price[0] - 1e-3)], "bf16", eng0)[0] == 0.0  # floored
    with pytest.raises(ValueError, match="iteration_us = 0"):
        et.fit_iteration([(spec, hw, points[0], 1.0)], "bf16", eng)


def test_moe_forward_with_given_counts_is_the_same_function():
    spec = strong_spec("tiny")
    g = torch.Generator().manual_seed(3)
    moe = MoE(spec, torch.float32, g)
    x = torch.randn(2, 5, spec.hidden, generator=g)
    counts = moe.route_counts(x)
    assert sum(counts) == 2 * 5 * spec.moe.top_k and len(counts) == spec.moe.num_experts
    with torch.inference_mode():
        assert torch.equal(moe(x, counts), moe(x))
        with pytest.raises(ValueError, match="counts must give the tokens of each of"):
            moe(x, counts[:-1])


def test_measure_engine_terms_on_this_cpu(tmp_path):
    """Every step on the CPU: parts eager (no graph), kernels counted, decode passes, the iteration residual, no collectives."""
    specs = {"weak": weak_spec("tiny"), "strong": strong_spec("tiny")}
    _, hw, _ = cal.calibrate(specs["weak"], "fp32", "cpu", FAST, tokens=(1, 16), contexts=(64,), peak_dtypes=("fp32",),
                             decode_anchors=cal.DECODE_ANCHOR_POINTS[:1])
    seen = []
    terms = et.measure_engine_terms(specs, {"weak": hw}, "fp32", "cpu", FAST, scale="tiny", progress=seen.append)
    assert [m.split(": ")[1] for m in seen[:4]] == [f"{k} part ({et.ENGINE_PARTS[k][0]} model)" for k in LAYER_KINDS]
    for kind, p in terms.parts.items():
        # the roofline is priced on peaks measured on this same (noisy, shared) CPU, so it is not a strict lower
        # bound of one timed part: only its scale is checked (a unit slip is 1000x), and the fixed term is clamped at 0
        assert p.graph_s is None and p.kernels > 0 and p.eager_s > 0 and 0 < p.roofline_s < 3 * p.eager_s, kind
        assert et.layer_fixed_s(p) == max(p.eager_s - p.roofline_s, 0.0), kind
        assert 1e-6 < p.eager_s < 0.1, kind  # seconds per call (10 calls per timed run), not per run or in us
    assert terms.parts["moe"].model == "strong" and terms.launch_s == 0.0 and terms.collectives is None
    assert terms.collectives_note == "not measured: CPU device (no GPUs)"
    assert [r["point"] for r in terms.passes] == [list(p) for p in cal.ANCHOR_POINTS]
    weak = specs["weak"]
    layers = sum(terms.parts["full_attention" if k == "full" else "linear_attention"].kernels + terms.parts["dense_mlp"].kernels
                 for k in weak.layer_kinds)
    assert all(r["layer_kernels"] == layers for r in terms.passes)
    assert terms.pass_kernels == statistics.median([r["kernels"] - layers for r in terms.passes])
    assert terms.iteration_s == max(statistics.median([r["residual_s"] for r in terms.passes]), 0.0)
    eng = load_engine_file(et.write_engine_toml(et.engine_profile_dict(terms), tmp_path / "cpu.engine.toml"))
    assert eng.launch_us.value == 0.0 and eng.max_gpus.value == 1
    assert eng.layer_us["dense_mlp"].value == pytest.approx(et.layer_fixed_s(terms.parts["dense_mlp"]) * 1e6, rel=1e-4)
    # with the fitted iteration term, the anchors' residuals straddle 0 (it is their median)
    if terms.iteration_s > 0:
        res = [r["measured_s"] - float(estimate(cal.deployment_for(weak, hw, "fp32", eng), Passes.uniform(p[1], p[2], p[0])).time_s[0])
               for r, p in zip(terms.passes, cal.ANCHOR_POINTS)]
        assert statistics.median(res) == pytest.approx(0.0, abs=1e-3 * max(r["measured_s"] for r in terms.passes))
    rows = cal.validate(weak, hw, "fp32", points=((1, 1, 32),), cfg=FAST)
    priced = et.price_rows(weak, hw, eng, "fp32", rows)
    assert priced[0].measured_s == rows[0].measured_s
    ref = estimate(Deployment(weak, hw, weight_dtype="fp32", kv_dtype="fp32", activation_dtype="fp32", serving_engine=eng), Passes.uniform(1, 32, 1))
    assert priced[0].predicted_s == pytest.approx(float(ref.time_s[0]), rel=1e-12)


def test_collectives_are_measured_only_on_two_or_more_gpus():
    assert et.collectives_plan(False, 0) == (False, "not measured: CPU device (no GPUs)")
    assert et.collectives_plan(True, 1) == (False, "not measured: 1 GPU (torch.cuda.device_count() = 1; a collective needs >= 2)")
    assert et.collectives_plan(True, 8, wanted=False) == (False, "not measured: skipped by the caller (8 GPUs visible)")
    assert et.collectives_plan(True, 2) == (True, "measured: torch.distributed NCCL over 2 GPUs")


def test_collectives_over_two_gloo_processes():
    """The torch.distributed sweep's code path on CPU processes (gloo): both ops, every size, a fit each."""
    r = et.measure_collectives(2, "gloo", sizes=(4096, 65536), iters=2, rounds=2, timeout_s=120)
    assert r["backend"] == "gloo" and r["ranks"] == 2
    for op in ("all_reduce", "all_to_all"):
        assert [p["bytes"] for p in r[op]["points"]] == [4096, 65536]
        assert all(len(p["samples"]) == 2 and 0 < p["seconds"] < 5 for p in r[op]["points"])
        assert r[op]["alpha_us"] >= 0 and len(r[op]["relative_residuals"]) == 2
    with pytest.raises(ValueError, match="needs >= 2 ranks"):
        et.measure_collectives(1, "gloo")


def test_cli_calibrate_writes_the_engine_profile_beside_the_hardware_profile(tmp_path):
    from specagent.cli.kernels import app

    out = tmp_path / "cpu.toml"
    res = CliRunner().invoke(app, ["calibrate", "-o", str(out), "--scale", "tiny", "--engine-terms", "--repeats", "2", "--threads", "1",
                                   "--no-validate", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.output[res.output.index("{"):])
    eng_path = tmp_path / "cpu.engine.toml"
    assert payload["engine"]["profile"] == str(eng_path) and eng_path.exists() and out.exists()
    eng = load_engine(str(eng_path))
    assert payload["engine"]["id"] == eng.id and eng.id.startswith("calibrated-") and eng.id.endswith("-fp32")
    assert set(payload["engine"]["terms"]["layer_us"]) == set(LAYER_KINDS)
    res = CliRunner().invoke(app, ["calibrate", "-o", str(out), "--scale", "tiny", "--engine-output", str(out)])
    assert res.exit_code != 0 and "is the hardware profile's --output" in res.output
    res = CliRunner().invoke(app, ["calibrate", "-o", str(out), "--no-engine-terms", "--engine-output", str(tmp_path / "e.toml")])
    assert res.exit_code != 0 and "--no-engine-terms skips" in res.output
    assert not CliRunner().invoke(app, ["calibrate", "--help"]).exception


def test_live_repeats_stop_at_the_deadline():
    from specagent.kernels.live import LiveConfig, synthetic_airline_trajectory
    from specagent.kernels.live_compare import run_repeats
    from specagent.kernels.modules import Model

    weak, strong = Model(weak_spec("tiny"), seed=0), Model(strong_spec("tiny"), seed=1)
    trajs = [synthetic_airline_trajectory(0, turns=1)]
    runs = run_repeats(trajs, weak, strong, LiveConfig(), repeats=3, deadline=time.monotonic())
    assert len(runs) == 1  # the first repeat always runs; the next would pass the deadline
    assert len(run_repeats(trajs, weak, strong, LiveConfig(), repeats=2, deadline=time.monotonic() + 3600)) == 2


PROFILE_ONCE = """
import os, torch
from specagent.kernels import engine_terms as et
if {quiet}:
    n, _ = et.count_kernels(lambda: torch.ones(3) + 1, "cpu")
    assert os.environ.get("KINETO_LOG_LEVEL") == {user!r}, os.environ.get("KINETO_LOG_LEVEL")  # the environment restored
else:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(3) + 1
print("counted")
"""


def _profile_in_a_fresh_process(quiet: bool, user: str | None = None):
    """Kineto reads its log level once per process, when the first profile starts: each case needs a fresh one."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"} | ({"KINETO_LOG_LEVEL": user} if user else {})
    return subprocess.run([sys.executable, "-c", PROFILE_ONCE.format(quiet=quiet, user=user)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_counting_kernels_prints_no_profiler_noise_and_keeps_the_users_level():
    """`calibrate` printed 14 lines of kineto's `USDT: … profiler_start` before its tables (issue #51): counting kernels
    is now silent on stdout and stderr, the bare profiler (the control) still prints them, and a KINETO_LOG_LEVEL the user
    set is theirs (level 3 shows kineto's stages)."""
    quiet = _profile_in_a_fresh_process(True)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "counted\n" and quiet.stderr == "", quiet.stderr
    bare = _profile_in_a_fresh_process(False)
    assert bare.returncode == 0 and "profiler_start" in bare.stderr  # the noise exists: the check above can fail
    mine = _profile_in_a_fresh_process(True, user="3")
    assert mine.returncode == 0, mine.stderr
    assert "profiler_start" in mine.stderr and "Completed Stage" in mine.stderr
