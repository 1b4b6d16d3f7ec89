"""Fit the roofline's efficiencies on this machine and validate them on real model passes.

What is fitted, and from what:

* peak FLOP/s per dtype: the best rate of large square GEMMs (measured, so the fitted
  efficiencies are relative to what this machine and torch can do at best);
* memory bandwidth: a large buffer copy; bandwidth efficiency: the memory-bound kernels
  (single-token GEMMs reading weights, attention decode over cached K/V, Gated DeltaNet
  state step) — bytes as the roofline counts them over measured time, relative to the copy;
* per-pass overhead and the compute-efficiency curve over tokens per pass, fitted on
  *anchor* passes of the target model (`fit_passes`): eager torch pays a framework cost
  per op that no kernel benchmark sees, so the overhead is the median of (measured −
  roofline memory time) over decode anchors at batch 1; the curve point at T tokens is
  the efficiency at which the roofline reproduces a batch-1 prefill of T tokens after
  that overhead. Anchor points (ANCHOR_POINTS, DECODE_ANCHOR_POINTS and
  `prefill_anchor_points`) are listed in the profile and are never validation points;
* the decode curve over the decode batch (`fit_decode_curve`), fitted the same way on
  batched decode anchors (DECODE_ANCHOR_POINTS): B sequences decoding one token each run
  a recurrent state step and attention per sequence, slower than a B-token prefill, so
  pricing them on the prefill curve under-predicted batched decode by 18-28% in bf16. Whole-layer benchmarks give an
  overhead-separated diagnostic curve (`fit`), kept in the profile's fit residuals.

Validation then predicts full forward passes at held-out (batch, new tokens, context)
points through `specagent.costmodel.roofline.estimate` on the written profile and
compares with measured time (error per point, MAPE).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import platform
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import tomli_w
import torch

from specagent.common import atomic
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import ModelSpec
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import PassCost, estimate
from specagent.hardware.serving_engine import EngineProfile, load_engine
from specagent.hardware.profile import HardwareProfile, parse_profile
from specagent.kernels import microbench as mb
from specagent.kernels.modules import Model

#: (batch, new_tokens, context) of the anchor passes the per-pass overhead is fitted on.
ANCHOR_POINTS: tuple[tuple[int, int, int], ...] = ((1, 1, 0), (1, 1, 64))
#: (batch, 1, context) batched-decode anchors the decode curve is fitted on (batch 1 comes
#: from the 1-token point of the compute curve, so batch-1 decode is priced as before).
DECODE_ANCHOR_POINTS: tuple[tuple[int, int, int], ...] = ((2, 1, 256), (3, 1, 256), (6, 1, 256), (12, 1, 128), (32, 1, 64))
#: Held-out validation points: none is an anchor point, and they span decode, batched
#: decode, short verification prefills onto a context, and long prefills.
VALIDATION_POINTS: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1024), (4, 1, 512), (8, 1, 256), (1, 8, 512), (1, 32, 1024), (2, 64, 256), (1, 128, 0), (1, 512, 0),
)
CURVE_TOKENS: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)


def processor_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{processor_name()} ({torch.get_num_threads()} torch threads)"


@dataclass(frozen=True)
class DeviceFacts:
    """What calibration must know about the device before measuring it.

    Read once from torch (`device_facts`); tests inject a fake description, so the CUDA
    branches are exercised without a GPU.
    """

    device: str  # "cpu", "cuda", "cuda:1"
    name: str
    memory_bytes: float
    memory_source: str
    #: CUDA compute capability (major, minor); None on a CPU.
    capability: tuple[int, int] | None = None

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def has_fp8(self) -> bool:
        """FP8 tensor-core GEMMs: Ada (8.9), Hopper (9.0) and later (torch._scaled_mm's CUDA requirement)."""
        return self.is_cuda and self.capability is not None and self.capability >= FP8_MIN_CAPABILITY


#: Lowest CUDA compute capability with FP8 tensor cores (Ada Lovelace sm_89; Hopper is 9.0).
FP8_MIN_CAPABILITY = (8, 9)
#: Largest square GEMM side for the peak measurement on a GPU: 8192³ x 2 FLOP = 1.1 TFLOP, about
#: a millisecond at a Hopper's dense BF16 peak — long enough to time, large enough to saturate.
GPU_PEAK_GEMM_MAX = 8192
#: The peak GEMMs' operands (3 rotated input sets of A, B and the output) may take this share of device memory.
GPU_PEAK_GEMM_MEMORY_SHARE = 0.125


def device_facts(device: str) -> DeviceFacts:
    """Memory and capability of `device` as torch reports them (host RAM for a CPU)."""
    if device.startswith("cuda"):
        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        return DeviceFacts(device, props.name, float(props.total_memory),
                           f"torch.cuda.get_device_properties({device!r}).total_memory: memory of the measured GPU",
                           (int(props.major), int(props.minor)))
    try:
        mem = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        src = "os.sysconf(SC_PHYS_PAGES x SC_PAGE_SIZE): physical memory of the measured machine"
    except (ValueError, OSError, AttributeError):
        mem, src = 1e9, "unknown: os.sysconf unavailable; 1 GB stated so the fit check stays conservative"
    return DeviceFacts(device, processor_name(), mem, src)


def peak_dtypes_for(facts: DeviceFacts, requested: Sequence[str]) -> list[str]:
    """Dtypes whose peak GEMM rate is measured: those requested, bf16 (the profile schema requires it),
    and fp8 where the GPU has FP8 tensor cores."""
    out = set(requested) | {"bf16"}
    if facts.has_fp8:
        out.add("fp8")
    return sorted(out)


def peak_gemm_sizes(facts: DeviceFacts, dtypes: Sequence[str]) -> dict[str, int]:
    """Side of the square GEMM that measures each dtype's peak.

    On a CPU: 1024 in fp32, 384 in the others (a bf16 GEMM without native support takes
    seconds at 1024). On a GPU: as large as GPU_PEAK_GEMM_MAX, shrunk (by halving) until
    three rotated sets of A, B and C fit in GPU_PEAK_GEMM_MEMORY_SHARE of device memory.
    """
    if not facts.is_cuda:
        return {d: 1024 if d == "fp32" else 384 for d in dtypes}
    out = {}
    for d in dtypes:
        size = mb.element_bytes(d)
        n = GPU_PEAK_GEMM_MAX
        while n > 256 and 3 * 3 * n * n * max(size, 2) > GPU_PEAK_GEMM_MEMORY_SHARE * facts.memory_bytes:
            n //= 2
        out[d] = n
    return out


def slug(text: str) -> str:
    """A profile id from free text (a device or machine name): lower-case letters and digits joined by single dashes."""
    s = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    while "--" in s:
        s = s.replace("--", "-")
    return s.strip("-")


def deployment_for(spec: ModelSpec, hw: HardwareProfile, dtype: str, engine: EngineProfile | None = None) -> Deployment:
    """The roofline's view of a torch model run in `dtype` on one device.

    Eager torch is no serving engine: by default the `ideal` engine profile adds no fixed
    costs of its own, so a pass pays the calibrated profile's `pass_overhead_us` (fitted here)
    and nothing else; `engine` prices it with measured engine terms instead (kernels/engine_terms.py).
    """
    return Deployment(spec, hw, gpus=1, weight_dtype=dtype, kv_dtype=dtype,
                      activation_dtype=dtype, state_dtype="fp32", serving_engine=engine or load_engine("ideal"))


def price_points(spec: ModelSpec, hw: HardwareProfile, dtype: str, points: Sequence[tuple[int, int, int]],
                 engine: EngineProfile | None = None) -> PassCost:
    """The cost model's price of one pass per (batch, new tokens, context) on the calibration deployment."""
    b, n, c = (np.array(x, dtype=np.float64) for x in zip(*points))
    return estimate(deployment_for(spec, hw, dtype, engine), Passes.uniform(n, c, b))


def predict_seconds(spec: ModelSpec, hw: HardwareProfile, dtype: str, points: Sequence[tuple[int, int, int]]) -> np.ndarray:
    return price_points(spec, hw, dtype, points).time_s


# --------------------------------------------------------------------------- measured passes
def measure_passes(model: Model, points: Sequence[tuple[int, int, int]], cfg: mb.TimingConfig = mb.TimingConfig(),
                   seed: int = 0) -> list[float]:
    """Wall time (the `cfg` statistic) of one forward pass of `model` at each (batch, new tokens, context).

    Each context is prefilled once; every timed run starts from it (KV truncated, recurrent
    state restored from a snapshot — outside the timed region). Repeats are taken round-robin
    over the points, so a burst of load from other jobs on a shared machine spreads over all
    points instead of inflating the few measured while it lasted.
    """
    g = torch.Generator().manual_seed(seed)
    dev = model.device
    setups = []
    for b, n, c in points:
        cache = model.new_cache(b)
        if c:
            model.prefill(cache, torch.randint(0, model.spec.vocab, (b, c), generator=g).to(dev))
        cache.snapshot()
        ids = [torch.randint(0, model.spec.vocab, (b, n), generator=g).to(dev) for _ in range(cfg.rotate)]
        setups.append((cache, c, ids))
    samples: list[list[float]] = [[] for _ in points]
    loads: list[float] = []
    now = cfg.timer(dev)
    for i in range(cfg.warmup + cfg.repeats):
        probe = mb.ForeignLoad.start()
        for j, (cache, c, ids) in enumerate(setups):
            restore_cache(cache, c)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = now()
            model.forward_tokens(cache, ids[i % cfg.rotate])
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            dt = now() - t0
            if i >= cfg.warmup:
                samples[j].append(dt)
        if i >= cfg.warmup:
            loads.append(probe.stop())
    keep = mb.quiet_rounds(loads)
    return [cfg.summarise([s[r] for r in keep]) for s in samples]


def restore_cache(cache, c: int) -> None:
    """Reset the cache to exactly its snapshot at c (also when it already has length c)."""
    if cache.length != c:
        cache.rollback(c)
    snap = cache.snapshots.get(c)
    if snap:
        for i, (s, cv) in snap.items():
            cache.recurrent[i] = s.clone()
            cache.conv[i] = cv.clone()


# --------------------------------------------------------------------------- fit
@dataclass
class Calibration:
    """Everything fitted, with the measurements behind it."""

    device: str
    dtype: str
    model: str
    peak_tflops: dict[str, float]  # FLOP/s per dtype as measured, despite the name (the profile it writes holds TFLOP/s)
    bandwidth_tb_s: float
    bandwidth_efficiency: float
    curve: list[tuple[float, float]]
    pass_overhead_us: float
    call_overhead_us: float
    anchors: list[dict]
    residuals: dict[str, float]
    measurements: list[mb.Measurement] = field(repr=False)
    provenance: dict = field(default_factory=dict)
    decode_curve: list[tuple[float, float]] = field(default_factory=list)
    clock: str = "wall"  # TimingConfig.clock the measurements used


def _gemm_mix(spec: ModelSpec, tokens: int) -> list[tuple[int, int, int, float]]:
    """(tokens, in, out, count) of the dense GEMMs one pass at `tokens` issues (routed experts apart)."""
    h = spec.hidden
    mix: list[tuple[int, int, int, float]] = []
    for i, o in spec.attention.matmul_shapes(h):
        mix.append((tokens, i, o, spec.num_full_layers))
    if spec.linear:
        for i, o in spec.linear.matmul_shapes(h):
            mix.append((tokens, i, o, spec.num_linear_layers))
    if spec.num_dense_ffn_layers:
        mix += [(tokens, h, 2 * spec.dense_intermediate, spec.num_dense_ffn_layers), (tokens, spec.dense_intermediate, h, spec.num_dense_ffn_layers)]
    if spec.moe and spec.moe.shared_intermediate:
        si = spec.moe.shared_intermediate
        mix += [(tokens, h, 2 * si, spec.num_moe_layers), (tokens, si, h, spec.num_moe_layers)]
    mix.append((1, h, spec.vocab, 1))  # LM head at the last position
    return mix


def fit(spec: ModelSpec, ms: Sequence[mb.Measurement], dtype: str, separate_overhead: bool = True) -> dict:
    """Peak, curve and bandwidth efficiency from microbenchmark measurements (pure function of them)."""
    over = next(m for m in ms if m.kind == "overhead").seconds
    copy = next(m for m in ms if m.kind == "copy")
    bw = copy.byte_rate
    gemm = {(m.params["tokens"], m.params["k"], m.params["n"]): m for m in ms if m.kind == "gemm" and m.params["dtype"] == dtype}
    peaks: dict[str, float] = {}
    for m in ms:
        if m.kind in ("peak", "gemm"):
            d = m.params["dtype"]
            peaks[d] = max(peaks.get(d, 0.0), m.flop_rate)
    peak = peaks[dtype]
    # tokens per pass arrive as one sequence's prefill (batch 1) or as a batch of decodes; where
    # both were measured, the curve uses the mean of the two times
    layers: dict[tuple[str, int], list[float]] = {}
    for m in ms:
        if m.kind == "layer":
            t = m.params["tokens"] * m.params["batch"]
            layers.setdefault((m.params["kind"], t), []).append(m.seconds)
    curve, curve_resid = [], []
    shim = _FlopCounter(spec, dtype)
    # memory-bound kernels: single-token GEMMs, attention decode, GDN state step
    # — fp32 ones: the memory system does not depend on the dtype, while a 1-token GEMM or SDPA
    # in a dtype this device lacks native support for (bf16 on CPUs without AVX512-BF16/AMX)
    # is bound by its slow conversion path; that cost belongs to the compute curve and overhead
    mem = [m for m in ms if (m.kind == "gemm" and m.params["tokens"] == 1 and m.params["dtype"] == "fp32")
           or (m.kind == "attention" and m.params["new_tokens"] == 1 and m.params["context"] >= 256 and m.params["dtype"] == "fp32")
           or (m.kind == "gdn" and m.params["tokens"] == 1)]
    byts = sum(m.bytes for m in mem)
    secs = sum(max(m.seconds - over, 0.25 * m.seconds) for m in mem)
    bw_eff = min(byts / secs / bw, 1.5) if mem else 1.0
    # Per-layer framework overhead: eager torch pays a fixed cost per op, so a layer at one
    # token costs (its memory roofline time + a constant). That constant is taken out of the
    # layer times before the curve is fitted — otherwise it masquerades as a tiny compute
    # efficiency that the roofline then applies to FLOPs that do grow (attention over a long
    # context, more tokens), and it is put back per pass by the anchor-fitted overhead.
    kinds = sorted(set(spec.layer_kinds))
    t_min = min((k[1] for k in layers), default=None)
    layer_overhead = {}
    for kind in kinds:
        if t_min is None or (kind, t_min) not in layers:
            layer_overhead[kind] = 0.0
            continue
        mem_s = shim.layer_bytes(kind, t_min) / (bw * bw_eff)
        layer_overhead[kind] = max(statistics.fmean(layers[(kind, t_min)]) - mem_s, 0.0) if separate_overhead else 0.0
    for t in sorted({k[1] for k in layers}):
        secs = sum(spec.layer_kinds.count(kind) * max(statistics.fmean(layers[(kind, t)]) - layer_overhead[kind],
                                                      0.05 * statistics.fmean(layers[(kind, t)]))
                   for kind in kinds if (kind, t) in layers)
        if not secs:
            continue
        curve.append((float(t), min(shim.layer_flops(t) / (peak * secs), 1.5)))
    gemm_curve = []  # diagnostic: what the GEMMs alone would give
    moe = {m.params["tokens"]: m for m in ms if m.kind == "moe"}
    for t in sorted({k[0] for k in gemm}):
        fl = tm = 0.0
        mix = _gemm_mix(spec, t)
        if not all((tt, i, o) in gemm for tt, i, o, _ in mix) or (spec.is_moe and t not in moe):
            continue
        for tt, i, o, cnt in mix:
            fl += cnt * gemm[(tt, i, o)].flops
            tm += cnt * gemm[(tt, i, o)].seconds
        if spec.is_moe:
            fl += spec.num_moe_layers * moe[t].flops
            tm += spec.num_moe_layers * moe[t].seconds
        gemm_curve.append((float(t), fl / (peak * tm)))
    for m in mem:
        pred = m.bytes / (bw * bw_eff) + over
        curve_resid.append(abs(pred - m.seconds) / m.seconds)
    return {"peak": peaks, "bandwidth": bw, "bandwidth_efficiency": bw_eff, "curve": curve, "call_overhead": over,
            "layer_overhead": layer_overhead,
            "gemm_only_curve": gemm_curve,
            "memory_kernel_mape": float(np.mean(curve_resid)) if curve_resid else float("nan")}


class _FlopCounter:
    """FLOPs the roofline counts for the decoder layers of a pass (LM head excluded)."""

    def __init__(self, spec: ModelSpec, dtype: str):
        self.spec, self.dtype = spec, dtype

    def layer_flops(self, tokens: int, batch: int = 1, context: int = 0) -> float:
        from specagent.costmodel.roofline import coefficients

        hw = _placeholder_hw()
        dep = Deployment(self.spec, hw, weight_dtype=self.dtype, kv_dtype=self.dtype, activation_dtype=self.dtype)
        cost = estimate(dep, Passes.uniform(tokens, context, batch), coef=coefficients(dep))
        return float(sum(v[0] for k, v in cost.flops.items() if k != "lm_head"))

    def layer_bytes(self, kind: str, tokens: int) -> float:
        """Bytes the roofline moves for one decoder layer of `kind` at batch 1, no context."""
        from specagent.costmodel.roofline import coefficients

        ffn = "moe" if self.spec.is_moe else "dense"
        one = dataclasses.replace(self.spec, layer_kinds=(kind,), ffn_kinds=(ffn,))
        dep = Deployment(one, _placeholder_hw(), weight_dtype=self.dtype, kv_dtype=self.dtype, activation_dtype=self.dtype,
                         state_dtype="fp32")
        cost = estimate(dep, Passes.uniform(tokens, 0, 1), coef=coefficients(dep))
        skip = {"embedding", "lm_head"}
        return float(sum(v[0] for k, v in cost.bytes_read.items() if k not in skip) + sum(v[0] for v in cost.bytes_written.values()))


def _placeholder_hw() -> HardwareProfile:
    """Any valid profile: FLOP counts do not depend on the hardware (only times do)."""
    from specagent.hardware.profile import load_hardware

    return load_hardware("h20")


def _profile_dict(cal: Calibration, machine: str, stamp: str, facts: DeviceFacts) -> dict:
    src = f"measured by specagent calibrate on {machine}, torch {torch.__version__}"
    peaks = {d: {"value": float(f"{v / 1e12:.6g}"),
                 "source": f"{src}: best {'torch._scaled_mm (e4m3, bf16 out)' if d == 'fp8' else 'F.linear'} rate of large square GEMMs in {d}"}
             for d, v in cal.peak_tflops.items()}
    mem_gb, mem_src = facts.memory_bytes / 1e9, facts.memory_source
    curve_pts = [[float(t), float(f"{e:.5g}")] for t, e in cal.curve]
    big = cal.curve[-1][1] if cal.curve else 1.0
    return {
        "schema_version": 1,
        "id": slug(f"calibrated-{machine}-{cal.dtype}-{cal.model}"),
        "name": f"{machine} ({cal.dtype}, calibrated for {cal.model})",
        "vendor": "measured",
        "peak_tflops": peaks,
        "memory": {
            "capacity_gb": {"value": float(f"{mem_gb:.4g}"), "source": mem_src},
            "bandwidth_tb_s": {"value": float(f"{cal.bandwidth_tb_s:.5g}"), "source": f"{src}: copy of a 256 MB buffer (read + write bytes / median time)"},
        },
        "interconnect": {
            "kind": {"value": "none", "source": "single device: calibration measures one device, no interconnect"},
            "bandwidth_gb_s": {"value": float(f"{cal.bandwidth_tb_s * 1e3:.5g}"), "source": "no interconnect: set to the measured memory copy bandwidth so multi-device estimates are not free (not a link measurement)"},
        },
        "efficiency": {
            "prefill_mfu": {"value": float(f"{big:.5g}"), "source": f"{src}: compute curve at {cal.curve[-1][0]:.0f} tokens/pass" if cal.curve else src},
            "bandwidth": {"value": float(f"{cal.bandwidth_efficiency:.5g}"), "source": f"{src}: fp32 memory-bound kernels (1-token GEMMs, attention decode, GDN step) bytes/time over copy bandwidth"},
            "pass_overhead_us": {"value": float(f"{cal.pass_overhead_us:.5g}"), "source": f"{src}: median of (measured - roofline memory time) over decode anchor passes {list(ANCHOR_POINTS)} of {cal.model} (batch, new tokens, context): eager-torch framework cost per pass"},
            "compute_curve": {"value": curve_pts, "source": f"{src}: anchor passes of {cal.model} per tokens/pass (batch-1 prefill from empty context): roofline compute time at peak / (measured - pass overhead); at 1 token, compute/memory time of the decode anchor"},
            **({"decode_curve": {"value": [[float(b), float(f"{e:.5g}")] for b, e in cal.decode_curve],
                                 "source": f"{src}: pure-decode passes per decode batch: batch 1 = compute curve at 1 token; batches "
                                           f"{sorted({p[0] for p in DECODE_ANCHOR_POINTS})}: roofline compute time at peak / (measured - pass overhead) "
                                           f"of {cal.model} decode anchor passes {list(DECODE_ANCHOR_POINTS)} (batch, new tokens, context)"}}
               if cal.decode_curve else {}),
        },
        "provenance": {
            "tool": "specagent calibrate",
            "processor": machine,
            "device": cal.device,
            "torch": torch.__version__,
            "dtype": cal.dtype,
            "threads": torch.get_num_threads(),
            "clock": cal.clock,
            "model": cal.model,
            "date": stamp,
            "call_overhead_us": float(f"{cal.call_overhead_us:.5g}"),
            "anchor_points": [list(a["point"]) for a in cal.anchors] or [list(p) for p in ANCHOR_POINTS],
            "anchor_residuals_us": [float(f"{a['residual_s'] * 1e6:.5g}") for a in cal.anchors],
            "fit_residuals": {k: (float(f"{v:.5g}") if isinstance(v, float) else v) for k, v in cal.residuals.items()},
            "microbenchmarks": len(cal.measurements),
        },
    }


def write_profile_toml(data: dict, path: str | Path) -> Path:
    """Validate through the loader, then write atomically (temp file + os.replace)."""
    path = Path(path)
    parse_profile(data, str(path))
    text = tomli_w.dumps(data)
    return atomic.write_text(path, "# Hardware profile written by `specagent calibrate`; every figure carries its source.\n" + text)


def measure_peaks(dtypes: Sequence[str], device: str, cfg: mb.TimingConfig, sizes: dict[str, int] | None = None) -> list[mb.Measurement]:
    """Large square GEMMs per dtype (`peak_gemm_sizes` by default); the best rate is the profile's peak for that dtype."""
    sizes = sizes or peak_gemm_sizes(device_facts(device), dtypes)
    out = []
    for d in dtypes:
        n = sizes[d]
        m = mb.bench_gemm_fp8(n, n, n, device, cfg) if d == "fp8" else mb.bench_gemm(n, n, n, d, device, cfg)
        out.append(dataclasses.replace(m, kind="peak"))
    return out


def prefill_anchor_points(tokens: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """Batch-1 prefills from an empty context at the curve's token counts (other than 1)."""
    return tuple((1, int(t), 0) for t in sorted(set(tokens)) if t > 1)


def fit_passes(spec: ModelSpec, hw_unit: HardwareProfile, dtype: str, decode: Sequence[tuple[tuple[int, int, int], float]],
               prefill: Sequence[tuple[tuple[int, int, int], float]]) -> tuple[float, list[tuple[float, float]]]:
    """Per-pass overhead and compute-efficiency curve from measured anchor passes (pure function).

    `hw_unit` is the calibrated profile with compute efficiency 1 and no overhead, so the
    roofline gives each pass's ideal compute time C and memory time M. The overhead is the
    median of (measured − M) over the decode anchors (memory-bound at one token); the curve
    point at T tokens is C(T) / (measured(T) − overhead) — exactly the efficiency at which
    the roofline reproduces that pass — and at one token C/M of the first decode anchor
    (the pass is memory-bound there, so any efficiency at or above it prices it the same).
    """
    if not decode:
        raise ValueError("need at least one decode anchor pass")
    pts = [p for p, _ in decode] + [p for p, _ in prefill]
    b, n, c = (np.array(x, dtype=np.float64) for x in zip(*pts))
    cost = estimate(deployment_for(spec, hw_unit, dtype), Passes.uniform(n, c, b))
    comp, memo = cost.compute_s, cost.memory_s
    nd = len(decode)
    overhead = max(statistics.median(m - float(memo[i]) for i, (_, m) in enumerate(decode)), 0.0)
    curve = [(float(decode[0][0][0] * decode[0][0][1]), float(min(max(comp[0] / memo[0], 1e-6), 1.5)))]
    for j, ((bb, nn, _), m) in enumerate(prefill):
        work = max(m - overhead, 1e-9)
        curve.append((float(bb * nn), float(min(max(comp[nd + j] / work, 1e-6), 1.5))))
    return overhead, sorted(curve)


def fit_decode_curve(spec: ModelSpec, hw_unit: HardwareProfile, dtype: str, overhead: float, batch1_efficiency: float,
                     batched: Sequence[tuple[tuple[int, int, int], float]]) -> list[tuple[float, float]]:
    """Decode curve ((batch, efficiency), ...) from measured batched-decode anchors (pure function).

    As `fit_passes` does for prefill: the point at batch B is C(B) / (measured(B) − overhead),
    the efficiency at which the roofline reproduces that pass (C from `hw_unit`, at unit
    efficiency); batch 1 takes `batch1_efficiency` (the compute curve's 1-token point) so
    that batch-1 decode is priced exactly as without the decode curve. Two anchors at one
    batch are averaged.
    """
    if any(n != 1 or b < 2 for (b, n, _), _m in batched):
        raise ValueError(f"decode anchors must be (batch >= 2, 1, context) points, got {[p for p, _ in batched]}")
    if not batched:
        return []
    pts = [p for p, _ in batched]
    b, n, c = (np.array(x, dtype=np.float64) for x in zip(*pts))
    comp = estimate(deployment_for(spec, hw_unit, dtype), Passes.uniform(n, c, b)).compute_s
    by_batch: dict[float, list[float]] = {}
    for j, ((bb, _, _), m) in enumerate(batched):
        by_batch.setdefault(float(bb), []).append(float(min(max(comp[j] / max(m - overhead, 1e-9), 1e-6), 1.5)))
    return [(1.0, float(batch1_efficiency))] + [(bb, statistics.fmean(v)) for bb, v in sorted(by_batch.items())]


def calibrate(spec: ModelSpec, dtype: str = "fp32", device: str = "cpu", cfg: mb.TimingConfig = mb.TimingConfig(),
              tokens: Sequence[int] = CURVE_TOKENS, contexts: Sequence[int] = (256, 1024, 4096), seed: int = 0,
              progress: Callable[[str], None] | None = None, model: Model | None = None,
              peak_dtypes: Sequence[str] = ("fp32", "bf16"),
              decode_anchors: Sequence[tuple[int, int, int]] = DECODE_ANCHOR_POINTS,
              facts: DeviceFacts | None = None) -> tuple[Calibration, HardwareProfile, dict]:
    """Microbenchmarks (peak, bandwidth), then the overhead and curve fitted on anchor passes.

    Why anchor passes of the target model and not the isolated-layer benchmarks: on eager
    CPU torch, a layer benchmarked alone ran up to ~30% slower than the same layer inside a
    model pass (measured here; cause not isolated), and the layer curve folded the per-op
    framework overhead into a tiny "efficiency" that the roofline then applied to FLOPs that
    grow with context. The layer curve stays in the residuals as a diagnostic.
    """
    tick = progress or (lambda _m: None)
    tick("peak GEMMs")
    facts = facts or device_facts(device)
    dts = peak_dtypes_for(facts, [*peak_dtypes, dtype])
    ms = measure_peaks(dts, device, cfg, peak_gemm_sizes(facts, dts))
    ms += mb.run_suite([spec], dtype, device, tokens, contexts, cfg, progress)
    f = fit(spec, ms, dtype)
    machine = facts.name if facts.is_cuda else processor_name()
    stamp = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    cal = Calibration(device=device_name(device), dtype=dtype, model=spec.name, peak_tflops=f["peak"],
                      bandwidth_tb_s=f["bandwidth"] / 1e12, bandwidth_efficiency=f["bandwidth_efficiency"],
                      curve=[(1.0, 1.0)], pass_overhead_us=0.0, call_overhead_us=f["call_overhead"] * 1e6, anchors=[],
                      residuals={"memory_kernel_mape": f["memory_kernel_mape"]}, measurements=ms, clock=cfg.clock)
    data = _profile_dict(cal, machine, stamp, facts)
    data["efficiency"]["pass_overhead_us"]["value"] = 0.0
    data["efficiency"]["prefill_mfu"]["value"] = 1.0
    del data["efficiency"]["compute_curve"]
    hw_unit = parse_profile(data, "<calibration at unit efficiency, no overhead>")
    tick("anchor passes")
    model = model or Model(spec, seed=seed, dtype=mb.torch_dtype(dtype), device=device)
    prefill_pts = prefill_anchor_points(tokens)
    points = tuple(ANCHOR_POINTS) + tuple(decode_anchors) + prefill_pts
    anchor_cfg = dataclasses.replace(cfg, repeats=max(cfg.repeats, 9))
    measured = measure_passes(model, points, anchor_cfg, seed)
    nd, nb = len(ANCHOR_POINTS), len(decode_anchors)
    overhead, curve = fit_passes(spec, hw_unit, dtype, list(zip(ANCHOR_POINTS, measured[:nd])),
                                 list(zip(prefill_pts, measured[nd + nb:])))
    cal.pass_overhead_us = overhead * 1e6
    cal.curve = curve
    cal.decode_curve = fit_decode_curve(spec, hw_unit, dtype, overhead, curve[0][1],
                                        list(zip(decode_anchors, measured[nd:nd + nb])))
    data = _profile_dict(cal, machine, stamp, facts)
    hw = parse_profile(data, "<calibrated>")
    predicted = predict_seconds(spec, hw, dtype, points)
    cal.anchors = [{"point": p, "measured_s": m, "roofline_s": float(q), "residual_s": m - float(q)}
                   for p, m, q in zip(points, measured, predicted)]
    cal.residuals["layer_curve"] = [[t, float(f"{e:.4g}")] for t, e in f["curve"]]
    data = _profile_dict(cal, machine, stamp, facts)
    hw = parse_profile(data, "<calibrated>")
    return cal, hw, data


# --------------------------------------------------------------------------- validation
@dataclass(frozen=True)
class ValidationRow:
    batch: int
    new_tokens: int
    context: int
    predicted_s: float
    measured_s: float
    bound: str

    @property
    def error(self) -> float:
        """Signed relative error of the prediction."""
        return (self.predicted_s - self.measured_s) / self.measured_s


def validate(spec: ModelSpec, hw: HardwareProfile, dtype: str, points: Sequence[tuple[int, int, int]] = VALIDATION_POINTS,
             device: str = "cpu", cfg: mb.TimingConfig = mb.TimingConfig(), seed: int = 1, model: Model | None = None) -> list[ValidationRow]:
    """Predict each held-out pass with the roofline on `hw`, measure it, return both."""
    overlap = set(points) & (set(ANCHOR_POINTS) | set(DECODE_ANCHOR_POINTS) | set(prefill_anchor_points(CURVE_TOKENS)))
    if overlap:
        raise ValueError(f"validation points {sorted(overlap)} were used to fit the overhead or curves; choose held-out points")
    model = model or Model(spec, seed=seed, dtype=mb.torch_dtype(dtype), device=device)
    measured = measure_passes(model, points, cfg, seed)
    b, n, c = (np.array(x, dtype=np.float64) for x in zip(*points))
    cost = estimate(deployment_for(spec, hw, dtype), Passes.uniform(n, c, b))
    return [ValidationRow(int(p[0]), int(p[1]), int(p[2]), float(t), float(m), "compute" if cb else "memory")
            for p, t, m, cb in zip(points, cost.time_s, measured, cost.compute_bound)]


def mape(rows: Sequence[ValidationRow]) -> float:
    return float(np.mean([abs(r.error) for r in rows])) if rows else math.nan
