"""Calibration: the fit on hand-made measurements, the written profile, validation, the CLI."""

from __future__ import annotations

import dataclasses
import json
import tomllib

import pytest
import torch
from typer.testing import CliRunner

from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.kernels import calibrate as cal
from specagent.kernels import microbench as mb
from specagent.cli.kernels import app
from specagent.kernels.configs import strong_spec, weak_spec

torch.set_num_threads(1)  # robust on a shared 2-core machine (OpenMP spin-waits under contention)
FAST = mb.TimingConfig(warmup=1, repeats=2, rotate=2, max_seconds=0.2)


def _m(mkind, seconds, flops=0.0, byts=0.0, **params):
    return mb.Measurement(mkind, params, flops, byts, seconds)


def test_fit_by_hand():
    spec = weak_spec("tiny")
    fl1 = cal._FlopCounter(spec, "fp32").layer_flops(1)
    fl16 = cal._FlopCounter(spec, "fp32").layer_flops(16)
    ms = [
        _m("overhead", 2e-6, calls=1),
        _m("copy", 0.1, 0, 1e9, megabytes=500),  # 10 GB/s
        _m("peak", 0.01, 1e9, 0, dtype="fp32"),  # 100 GFLOP/s
        # memory-bound kernel: 4e6 bytes in 1e-3 s (+2 us overhead) -> 4 GB/s -> efficiency 0.4
        _m("gemm", 1e-3 + 2e-6, 2e6, 4e6, tokens=1, k=1000, n=1000, dtype="fp32"),
        # layers: 3 linear + 1 full in the tiny Weak model
        _m("layer", 1e-3, kind="linear", tokens=1, batch=1, context=0, dtype="fp32"),
        _m("layer", 2e-3, kind="full", tokens=1, batch=1, context=0, dtype="fp32"),
        _m("layer", 4e-3, kind="linear", tokens=16, batch=1, context=0, dtype="fp32"),
        _m("layer", 4e-3, kind="full", tokens=16, batch=1, context=0, dtype="fp32"),
    ]
    f = cal.fit(spec, ms, "fp32")
    assert f["peak"]["fp32"] == pytest.approx(1e11)  # the best rate seen (the 1-token GEMM is 2 GFLOP/s)
    assert f["bandwidth"] == pytest.approx(1e10)
    assert f["bandwidth_efficiency"] == pytest.approx(0.4)
    # per-layer overhead = layer time at 1 token minus its memory time at 4 GB/s effective
    shim = cal._FlopCounter(spec, "fp32")
    mem = {k: shim.layer_bytes(k, 1) / 4e9 for k in ("linear", "full")}
    assert 0 < mem["linear"] < 1e-3 and 0 < mem["full"] < 2e-3
    assert f["layer_overhead"]["linear"] == pytest.approx(1e-3 - mem["linear"])
    assert f["layer_overhead"]["full"] == pytest.approx(2e-3 - mem["full"])
    # the curve is fitted on layer time minus that overhead
    # (at one token that leaves the memory time, floored at 5% of the layer time)
    work1 = 3 * max(mem["linear"], 0.05 * 1e-3) + max(mem["full"], 0.05 * 2e-3)
    assert f["curve"][0] == (1.0, pytest.approx(fl1 / (1e11 * work1)))
    work16 = 3 * (4e-3 - 1e-3 + mem["linear"]) + (4e-3 - 2e-3 + mem["full"])
    assert f["curve"][1] == (16.0, pytest.approx(fl16 / (1e11 * work16)))


def _unit_profile():
    import dataclasses

    from specagent.hardware.profile import Sourced

    hw = load_hardware("h20")
    return dataclasses.replace(hw, prefill_mfu=Sourced(1.0, "test"), compute_efficiency_curve=(),
                               pass_overhead_us=Sourced(0.0, "test"))


def test_fit_passes_recovers_overhead_and_curve_by_hand():
    """Synthetic passes priced as C/eff + overhead (decode: M + overhead) give back eff and overhead."""
    import numpy as np

    from specagent.costmodel.passes import Passes
    from specagent.costmodel.roofline import estimate

    spec = weak_spec("tiny")
    hw = _unit_profile()
    o = 3e-3
    dec_pts = [(1, 1, 0), (1, 1, 64)]
    pre_pts = [(1, 16, 0), (1, 256, 0)]
    effs = [0.1, 0.4]
    b, n, c = (np.array(x, dtype=float) for x in zip(*dec_pts, *pre_pts))
    unit = estimate(cal.deployment_for(spec, hw, "fp32"), Passes.uniform(n, c, b))
    dec = [(p, float(unit.memory_s[i]) + o + (1e-4 if i else -1e-4)) for i, p in enumerate(dec_pts)]
    pre = [(p, float(unit.compute_s[2 + j]) / e + o) for j, (p, e) in enumerate(zip(pre_pts, effs))]
    overhead, curve = cal.fit_passes(spec, hw, "fp32", dec, pre)
    assert overhead == pytest.approx(o)  # median of o - 1e-4 and o + 1e-4
    assert [t for t, _ in curve] == [1.0, 16.0, 256.0]
    assert curve[0][1] == pytest.approx(float(unit.compute_s[0] / unit.memory_s[0]))
    assert curve[1][1] == pytest.approx(0.1) and curve[2][1] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="decode anchor"):
        cal.fit_passes(spec, hw, "fp32", [], pre)


def test_fit_decode_curve_by_hand():
    """Batched decodes priced as C/eff + overhead give back eff per batch (two anchors at one batch averaged)."""
    import numpy as np

    from specagent.costmodel.passes import Passes
    from specagent.costmodel.roofline import estimate

    spec = weak_spec("tiny")
    hw = _unit_profile()
    o = 2e-3
    pts = [(2, 1, 128), (16, 1, 128), (16, 1, 64), (32, 1, 64)]
    effs = [0.05, 0.2, 0.3, 0.4]
    b, n, c = (np.array(x, dtype=float) for x in zip(*pts))
    unit = estimate(cal.deployment_for(spec, hw, "fp32"), Passes.uniform(n, c, b))
    meas = [(p, float(unit.compute_s[j]) / e + o) for j, (p, e) in enumerate(zip(pts, effs))]
    curve = cal.fit_decode_curve(spec, hw, "fp32", o, 0.007, meas)
    assert [x for x, _ in curve] == [1.0, 2.0, 16.0, 32.0]
    assert [e for _, e in curve] == pytest.approx([0.007, 0.05, 0.25, 0.4], rel=1e-9)
    assert cal.fit_decode_curve(spec, hw, "fp32", o, 0.007, []) == []
    with pytest.raises(ValueError, match="decode anchors"):
        cal.fit_decode_curve(spec, hw, "fp32", o, 0.007, [((4, 2, 0), 1.0)])


def test_quiet_rounds_keep_the_uncontended_rounds():
    assert mb.quiet_rounds([0.0, 1.0, 0.05, 0.9, 0.1, 1.1]) == [0, 2, 4]
    assert mb.quiet_rounds([1.0, 1.2, 0.9, 2.0]) == [0, 1, 2]  # all contended: the 3 quietest
    assert mb.quiet_rounds([float("nan"), 0.1]) == [0, 1]  # no load information: keep all

def test_foreign_load_is_other_processes_cpu_per_wall_second(monkeypatch):
    """stop() = (all busy CPU-seconds - this process's) / wall seconds, clamped at 0; NaN only without /proc/stat."""
    probe = mb.ForeignLoad(busy=100.0, own=2.0, wall=50.0)
    ends = iter([mb.ForeignLoad(busy=103.5, own=2.5, wall=52.0), mb.ForeignLoad(busy=100.2, own=2.5, wall=52.0),
                 mb.ForeignLoad(busy=None, own=2.5, wall=52.0)])
    monkeypatch.setattr(mb.ForeignLoad, "start", classmethod(lambda cls: next(ends)))
    assert probe.stop() == pytest.approx((3.5 - 0.5) / 2.0, rel=1e-12)  # 1.5 other CPUs busy
    assert probe.stop() == 0.0  # own time exceeds the machine's busy delta (clock granularity): no negative load
    unknown = probe.stop()
    assert unknown != unknown  # NaN
    monkeypatch.undo()
    # on Linux the real probe reads /proc/stat and gives a finite number
    import os

    if os.path.exists("/proc/stat"):
        load = mb.ForeignLoad.start().stop()
        assert load == load and load >= 0.0


def test_calibrate_writes_a_loadable_sourced_profile(tmp_path):
    spec = weak_spec("tiny")
    fit, hw, data = cal.calibrate(spec, "fp32", "cpu", dataclasses.replace(FAST, clock="cpu"), tokens=(1, 16), contexts=(256,),
                                  peak_dtypes=("fp32",))
    path = cal.write_profile_toml(data, tmp_path / "cpu.toml")
    loaded = load_hardware(str(path))
    assert loaded.compute_efficiency_curve == tuple((t, pytest.approx(e, rel=1e-4)) for t, e in fit.curve)
    assert loaded.peak_flops("fp32") == pytest.approx(fit.peak_tflops["fp32"], rel=1e-4)
    raw = tomllib.loads(path.read_text())
    assert "measured by specagent calibrate" in raw["memory"]["bandwidth_tb_s"]["source"]
    prov = raw["provenance"]
    assert prov["torch"] == torch.__version__ and prov["dtype"] == "fp32" and prov["date"] and prov["clock"] == "cpu"
    n_anchors = len(cal.ANCHOR_POINTS) + len(cal.DECODE_ANCHOR_POINTS) + 1  # + prefill at 16
    assert len(prov["anchor_residuals_us"]) == n_anchors == len(prov["anchor_points"])
    # the decode curve: batch 1 = the compute curve's 1-token point, then one point per decode-anchor batch
    assert [b for b, _ in loaded.decode_efficiency_curve] == [1.0] + sorted({float(p[0]) for p in cal.DECODE_ANCHOR_POINTS})
    assert loaded.decode_efficiency_curve[0][1] == pytest.approx(fit.curve[0][1], rel=1e-4)
    assert "decode anchor passes" in raw["efficiency"]["decode_curve"]["source"]
    assert 0 < fit.bandwidth_efficiency <= 1.5 and fit.pass_overhead_us >= 0  # measured here: only its range is known
    assert loaded.bandwidth_efficiency.value == pytest.approx(fit.bandwidth_efficiency, rel=1e-4)  # the profile carries the fit
    assert loaded.pass_overhead_us.value == pytest.approx(fit.pass_overhead_us, rel=1e-4, abs=1e-6)
    # held-out validation runs on the written profile and rejects anchor points
    rows = cal.validate(spec, loaded, "fp32", points=((1, 4, 32), (2, 1, 16)), cfg=FAST)
    assert [(r.batch, r.new_tokens, r.context) for r in rows] == [(1, 4, 32), (2, 1, 16)]
    from specagent.costmodel.passes import Passes
    from specagent.costmodel.roofline import estimate

    for r in rows:  # the prediction is the written profile's roofline for that very pass
        ref = estimate(cal.deployment_for(spec, loaded, "fp32"), Passes.uniform(r.new_tokens, r.context, r.batch))
        assert r.predicted_s == pytest.approx(float(ref.time_s[0]), rel=1e-12)
        assert r.bound == ("compute" if bool(ref.compute_bound[0]) else "memory")
        # seconds, not ms or us: a unit slip is 1000x; wall time on a shared CPU strays several-fold (6-8x seen under
        # load), and the prediction itself is checked exactly above
        assert 0.05 < r.measured_s / r.predicted_s < 20.0
        assert r.error == pytest.approx((r.predicted_s - r.measured_s) / r.measured_s, rel=1e-12)
    with pytest.raises(ValueError, match="used to fit"):
        cal.validate(spec, loaded, "fp32", points=cal.ANCHOR_POINTS[:1], cfg=FAST)
    with pytest.raises(ValueError, match="used to fit"):  # the curve's prefill anchors are held out too
        cal.validate(spec, loaded, "fp32", points=((1, 16, 0),), cfg=FAST)
    with pytest.raises(ValueError, match="used to fit"):  # and the decode curve's batched-decode anchors
        cal.validate(spec, loaded, "fp32", points=cal.DECODE_ANCHOR_POINTS[-1:], cfg=FAST)
    assert not set(cal.VALIDATION_POINTS) & (set(cal.ANCHOR_POINTS) | set(cal.DECODE_ANCHOR_POINTS)
                                             | set(cal.prefill_anchor_points(cal.CURVE_TOKENS)))
    # the fitted profile reproduces its own anchor passes (the curve inverts the roofline there)
    pre = [a for a in fit.anchors if a["point"][1] > 1]
    assert pre and all(a["roofline_s"] == pytest.approx(a["measured_s"], rel=1e-3) for a in pre)


H200 = cal.DeviceFacts("cuda:0", "NVIDIA H200", 150_754_820_096.0, "torch.cuda.get_device_properties('cuda:0').total_memory: fake", (9, 0))
A100 = cal.DeviceFacts("cuda", "NVIDIA A100-SXM4-80GB", 85_089_976_320.0, "fake", (8, 0))


def test_cpu_device_facts_and_peak_gemms_are_unchanged():
    import os

    f = cal.device_facts("cpu")
    assert not f.is_cuda and not f.has_fp8 and f.capability is None
    assert f.memory_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert "os.sysconf" in f.memory_source
    assert cal.peak_dtypes_for(f, ["fp32"]) == ["bf16", "fp32"]
    assert cal.peak_gemm_sizes(f, ["fp32", "bf16", "fp16"]) == {"fp32": 1024, "bf16": 384, "fp16": 384}


def test_cuda_facts_size_the_peak_gemms_and_add_fp8_where_the_gpu_has_it():
    """The CUDA branches with the device injected: no GPU needed."""
    assert H200.has_fp8 and not A100.has_fp8
    assert cal.DeviceFacts("cuda", "RTX 4090", 24e9, "fake", (8, 9)).has_fp8  # Ada: the first FP8 generation
    assert cal.peak_dtypes_for(H200, ["fp32"]) == ["bf16", "fp32", "fp8"]
    assert cal.peak_dtypes_for(A100, ["fp32"]) == ["bf16", "fp32"]
    assert cal.peak_gemm_sizes(H200, ["fp32", "bf16", "fp8"]) == {"fp32": 8192, "bf16": 8192, "fp8": 8192}
    # 16 GB: three sets of fp32 8192² operands (2.4 GB) exceed 1/8 of it, bf16 ones (1.2 GB) do not
    small = cal.DeviceFacts("cuda", "small", 16e9, "fake", (7, 5))
    assert cal.peak_gemm_sizes(small, ["fp32", "bf16"]) == {"fp32": 4096, "bf16": 8192}
    assert cal.peak_gemm_sizes(cal.DeviceFacts("cuda", "tiny", 1e3, "fake", (7, 5)), ["bf16"]) == {"bf16": 256}  # floor


def test_cuda_calibration_path_end_to_end_with_fake_facts(tmp_path):
    """calibrate() with a fake FP8-capable GPU (run on the CPU, operands sized down by its small memory):
    the profile states the GPU's memory from torch.cuda, an fp8 peak from _scaled_mm, the GPU's name."""
    fake = cal.DeviceFacts("cuda:0", "Fake FP8 GPU", 2e6, "torch.cuda.get_device_properties('cuda:0').total_memory: fake", (9, 0))
    assert cal.peak_gemm_sizes(fake, ["fp8"]) == {"fp8": 256}
    fit, hw, data = cal.calibrate(weak_spec("tiny"), "fp32", "cpu", FAST, tokens=(1, 16), contexts=(256,),
                                  peak_dtypes=("fp32",), facts=fake, decode_anchors=cal.DECODE_ANCHOR_POINTS[:1])
    raw = tomllib.loads(cal.write_profile_toml(data, tmp_path / "gpu.toml").read_text())
    assert raw["memory"]["capacity_gb"]["value"] == pytest.approx(0.002)
    assert "torch.cuda.get_device_properties" in raw["memory"]["capacity_gb"]["source"]
    assert set(raw["peak_tflops"]) == {"fp32", "bf16", "fp8"} and "_scaled_mm" in raw["peak_tflops"]["fp8"]["source"]
    assert raw["provenance"]["processor"] == "Fake FP8 GPU"
    assert hw.peak_flops("fp8") > 0


def test_fp8_gemm_benchmark_counts():
    m = mb.bench_gemm_fp8(16, 32, 48, "cpu", FAST)
    assert m.params["dtype"] == "fp8" and m.flops == 2 * 16 * 32 * 48
    assert m.bytes == 48 * 32 + 16 * 32 + 2 * 16 * 48  # 1-byte operands, bf16 output
    with pytest.raises(ValueError, match="multiples of 16"):
        mb.bench_gemm_fp8(1, 32, 48, "cpu", FAST)
    assert mb.element_bytes("fp8") == 1 and mb.element_bytes("bf16") == 2


def test_cpu_clock_times_only_this_threads_work():
    import time

    cpu = mb.TimingConfig(warmup=0, repeats=3, rotate=1, statistic="min", clock="cpu")
    wall = dataclasses.replace(cpu, clock="wall")
    assert mb.time_call(lambda i: time.sleep(0.02), "cpu", cpu)[0] < 0.005  # asleep: off the core
    assert mb.time_call(lambda i: time.sleep(0.02), "cpu", wall)[0] >= 0.02
    with pytest.raises(ValueError, match="clock must be"):
        mb.TimingConfig(clock="sundial")
    with pytest.raises(ValueError, match="needs clock='wall'"):
        cpu.timer("cuda")


def test_write_profile_is_validated_and_atomic(tmp_path):
    with pytest.raises(HardwareProfileError):
        cal.write_profile_toml({"id": "x"}, tmp_path / "bad.toml")
    assert list(tmp_path.iterdir()) == []


def test_attention_priced_at_the_activation_dtype_peak():
    """An fp32 run prices attention at the fp32 peak (the roofline uses the activation dtype's entry)."""
    from specagent.costmodel.passes import Passes
    from specagent.costmodel.roofline import estimate

    hw = load_hardware("h20")
    spec = load_model_spec("qwen3.5-4b")
    dep32 = cal.deployment_for(spec, hw, "fp32")
    cost = estimate(dep32, Passes.uniform(256, 4096))
    gemm = cost.flops["dense"] + cost.flops["experts"] + cost.flops["lm_head"]
    attn = cost.flops["attention"] + cost.flops["linear_attention"]
    expect = (gemm + attn) / hw.peak_flops("fp32") / float(hw.prefill_mfu.value)
    assert cost.compute_s[0] == pytest.approx(expect[0], rel=1e-12)


def test_microbench_flop_and_byte_counts():
    m = mb.bench_gemm(4, 32, 64, "fp32", "cpu", FAST)
    assert m.flops == 2 * 4 * 32 * 64 and m.bytes == 4 * (64 * 32 + 4 * 32 + 4 * 64)
    a = mb.bench_attention(1, 100, 4, 2, 16, 1, "fp32", "cpu", FAST)
    assert a.flops == 4 * 4 * 16 * (100 + 1)  # 101 query-key pairs
    o = mb.bench_call_overhead("cpu", FAST, calls=50)
    assert 0 < o.seconds < 1e-3
    with pytest.raises(ValueError):
        mb.TimingConfig(statistic="mean")


def test_strong_costs_several_times_weak_per_token():
    for scale in ("tiny", "bench"):
        w, s = weak_spec(scale).param_counts(), strong_spec(scale).param_counts()
        assert 3 <= s.active / w.active <= 6
        assert strong_spec(scale).is_moe and strong_spec(scale).moe.shared_gate
        assert weak_spec(scale).layer_kinds.count("full") * 4 == weak_spec(scale).num_layers


def test_cli_live_json(tmp_path):
    out = tmp_path / "live"
    r = CliRunner().invoke(app, ["live", "--synthetic", "--trajectories", "2", "--scale", "tiny", "--weak-hardware", "h20", "--json",
                                 "--k", "3", "--accept", "0.5", "--token-scale", "0.3", "--repeats", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["trajectories"] == 2 and rep["repeats"] == 2 and rep["safety"]["segments_reviewed"] > 0
    assert rep["counts"]["reads_executed"] > 0 and rep["setup"]["clock"] == "cpu"
    assert rep["comparison"]["tokens_exact"] and rep["targets"]["tokens_exact"]
    assert {row["phase"] for row in rep["comparison"]["rows"]} >= {"weak_decode", "strong_verify"}
    from specagent.traces.io import load_trajectories

    logs = load_trajectories(out / "protocol_log.jsonl")
    assert len(logs) == 2 and all(t.is_protocol_log for t in logs)
    assert json.loads((out / "comparison.json").read_text())["counts"] == rep["counts"]
    r = CliRunner().invoke(app, ["live", "--synthetic", "--trajectories", "1", "--scale", "tiny", "--no-compare", "-o", str(out)])
    assert r.exit_code == 0 and "live SpecAgent run: 1 trajectories" in " ".join(r.output.split()) and "simulator s" not in r.output


def test_cli_errors_are_clear(tmp_path):
    def text(r):  # the console wraps long lines
        return " ".join(r.output.split())

    r = CliRunner().invoke(app, ["live", "--strategy", "router"])
    assert r.exit_code == 2 and "only 'specagent'" in text(r)
    r = CliRunner().invoke(app, ["live", "--clock", "sundial"])
    assert r.exit_code == 2 and "--clock: expected one of" in text(r)
    r = CliRunner().invoke(app, ["live", "--synthetic", "--scale", "tiny", "--weak-hardware", "no-such-gpu", "-o", str(tmp_path)])
    assert r.exit_code == 2 and "no-such-gpu" in text(r)
    retail = tmp_path / "retail.jsonl"
    from specagent.kernels.live import synthetic_airline_trajectory
    from specagent.traces.io import save_trajectories

    t = synthetic_airline_trajectory(0)
    steps = [st.model_copy(update={"tool_name": "get_order_details"}) if st.tool_name == t.steps[2].tool_name else st for st in t.steps]
    save_trajectories([t.model_copy(update={"steps": steps})], retail)
    r = CliRunner().invoke(app, ["live", "--trace", str(retail), "--scale", "tiny", "--no-compare", "-o", str(tmp_path)])
    assert r.exit_code == 2 and "retail.jsonl" in text(r) and "step 1" in text(r) and "get_order_details" in text(r)
    r = CliRunner().invoke(app, ["calibrate", "-o", str(tmp_path / "p.toml"), "--model", "medium"])
    assert r.exit_code == 2 and "weak" in text(r)
