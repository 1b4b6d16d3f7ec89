"""A second, independent fit: fused-MoE kernel times from published kernel benchmarks (the MoE efficiency terms)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from specagent.costmodel.latency import capped_efficiency
from specagent.costmodel.moe import moe_union_experts
from specagent.hardware.profile import HardwareProfile
from specagent.measurements import MoeKernelRow
from specagent.costmodel.latency_targets import cached_hardware

PRIOR_SCALE = math.log(4.0)  # a parameter 4x from its prior costs as much as one row off by e

#: A kernel benchmark (vLLM's benchmark_moe.py, SGLang's fused_moe_triton tuner) calls one layer on the same weights again
#: and again, so where the touched experts' weights fit in the last-level cache the time is not an HBM read. Rows whose
#: touched-expert weights are under this size are left out: it is twice the largest last-level cache of a profiled GPU
#: (MI300X, 256 MB AMD Infinity Cache: AMD CDNA 3 architecture white paper; H100/H200 50 MB, L40S 96 MB of L2).
KERNEL_MIN_WEIGHT_BYTES = 512e6
#: dtype of a fused-MoE kernel row -> (compute dtype of the tensor cores, bytes per stored weight)
KERNEL_DTYPES = {"bf16": ("bf16", 2.0), "fp16": ("fp16", 2.0), "fp8_w8a8": ("fp8", 1.0), "fp8_w8a8_block128": ("fp8", 1.0)}
#: The kernels serving rows run: vLLM's and SGLang's Triton fused_moe (FlagGems and hpc-ops rows time other libraries).
KERNEL_ENGINES = ("vllm", "sglang")
#: The config the engine ran before the publication's change (its fallback, a file it shipped, or its main branch);
#: "tuned" and "pr-default" rows time what the publication proposes, kept in the CSV for comparison.
KERNEL_CONFIGS = ("default", "shipped", "main")
#: What the kernel fit finds: (name, prior, lower, upper, prior source or "" for none). The grouped GEMMs' efficiency as a
#: fraction of peak and their throughput ceiling (TFLOP/s), the half-saturation in tokens per touched expert (rows each
#: touched expert computes beyond its tokens), and the achieved bandwidth of the weight reads. A weak pull to the prior
#: (as in `fit`) keeps a term that only one source constrains from wandering when that source is held out.
KERNEL_TERMS = (
    ("moe_mfu", 0.6, 0.01, 0.95, "the dense GEMM prior (BLIS example mfuPrefill 0.60)"),
    ("moe_tflops", 300.0, 10.0, 5000.0, ""),
    ("moe_pad_tokens", 16.0, 0.0, 4000.0, "vLLM fused_moe get_default_config: BLOCK_SIZE_M 16 at decode batch sizes"),
    ("kernel_bandwidth", 0.72, 0.2, 1.0, "BLIS example BwEffConstant 0.72"),
)


@dataclass(frozen=True)
class KernelTarget:
    """One published fused-MoE layer time, with what is needed to price it."""

    row: MoeKernelRow
    hardware: HardwareProfile
    peak_flops: float
    weight_bytes: float  # per stored weight
    touched: float  # distinct experts the call reads (uniform routing, `moe_union_experts`)
    measured: float  # seconds
    expert_params: float  # w13 (gate and up) and w2 of one expert's shard: 3 x K x N


def kernel_targets(rows: Iterable[MoeKernelRow]) -> tuple[list[KernelTarget], list[tuple[MoeKernelRow, str]]]:
    """Every usable kernel row; the rest with the reason (unknown GPU or dtype, weights cache-resident)."""
    out: list[KernelTarget] = []
    skipped: list[tuple[MoeKernelRow, str]] = []
    profiles: dict[str, HardwareProfile | None] = {}
    for r in rows:
        if r.engine not in KERNEL_ENGINES:
            skipped.append((r, f"engine '{r.engine}' is not a serving engine's fused_moe kernel"))
            continue
        if r.config not in KERNEL_CONFIGS:
            skipped.append((r, f"config '{r.config}': the publication's proposed change, not what the engine ran before it"))
            continue
        if r.hidden is None or r.top_k is None:
            skipped.append((r, "hidden size (K) or top-k not stated"))
            continue
        hw = cached_hardware(r.gpu, profiles)
        if hw is None:
            skipped.append((r, f"no hardware profile for GPU '{r.gpu}'"))
            continue
        if r.dtype not in KERNEL_DTYPES:
            skipped.append((r, f"kernel dtype '{r.dtype}' not modelled"))
            continue
        compute, wb = KERNEL_DTYPES[r.dtype]
        if compute not in hw.peak_tflops:
            skipped.append((r, f"no {compute} peak in the {r.gpu} profile"))
            continue
        touched = float(moe_union_experts(np.array([float(r.tokens)]), r.num_experts, r.top_k)[0])
        params = 3.0 * r.hidden * r.shard_intermediate
        if touched * params * wb < KERNEL_MIN_WEIGHT_BYTES:
            skipped.append((r, f"touched experts' weights under {KERNEL_MIN_WEIGHT_BYTES / 1e6:.0f} MB: cache-resident in a repeated benchmark"))
            continue
        out.append(KernelTarget(r, hw, hw.peak_flops(compute), wb, touched, r.kernel_us * 1e-6, params))
    return out, skipped


def kernel_time(t: KernelTarget, moe_mfu: float, moe_tflops: float, pad_tokens: float, bandwidth: float) -> float:
    """The roofline's price of one fused-MoE layer call, as `roofline.estimate` prices the routed experts of a pass.

    Compute: 2 FLOPs per weight for every routed token plus `pad_tokens` rows per touched expert, at
    e = min(moe_mfu, moe_tflops / peak) of the peak (`latency.capped_efficiency`; so the efficiency at τ tokens per
    touched expert is e·τ/(τ + pad)). Memory: every touched expert's weights once, and each routed token's
    activations (K in, 2N gate/up out, N in, K out) once.
    """
    r = t.row
    rows_ = r.tokens * r.top_k + pad_tokens * t.touched
    compute = 2.0 * t.expert_params * rows_ / (t.peak_flops * capped_efficiency(moe_mfu, moe_tflops, t.peak_flops))
    act = r.tokens * r.top_k * (2.0 * r.hidden + 3.0 * r.shard_intermediate) * 2.0  # type: ignore[operator]
    memory = (t.touched * t.expert_params * t.weight_bytes + act) / (t.hardware.bandwidth_bytes_s * bandwidth)
    return max(compute, memory)


@dataclass
class KernelFit:
    """The fused-MoE terms fitted on per-operator rows, and each row's leave-one-source-out prediction."""

    values: dict[str, float]
    targets: list[KernelTarget]
    skipped: list[tuple[MoeKernelRow, str]]
    held_out: np.ndarray  # predicted seconds, each by a fit that never saw the row's source
    sources: list[str]
    dataset: str = "measurements/moe_kernels.csv"

    @property
    def held_out_mape(self) -> float:
        meas = np.array([t.measured for t in self.targets])
        return float(np.mean(np.abs(self.held_out / meas - 1.0)))

    def summary(self) -> dict[str, Any]:
        """What `latency validate` and the benchmark report about the fit: its values, rows, sources and held-out error."""
        return {"fit": self.values, "kernel_times": len(self.targets), "sources": len(self.sources),
                "held_out_mape": self.held_out_mape, "skipped": len(self.skipped)}

    def describe(self) -> str:
        return (f"fused-MoE kernel fit on {self.dataset} ({len(self.targets)} kernel times, {len(self.sources)} "
                f"sources; held-out MAPE {self.held_out_mape:.1%}): moe_mfu {self.values['moe_mfu']:.3g}, moe_tflops "
                f"{self.values['moe_tflops']:.3g}, moe_pad_tokens {self.values['moe_pad_tokens']:.3g}")


def _fit_kernels(targets: Sequence[KernelTarget]) -> np.ndarray:
    from scipy.optimize import least_squares

    lo = np.log([max(lower, 1e-3) for _, _, lower, _, _ in KERNEL_TERMS])
    hi = np.log([upper for _, _, _, upper, _ in KERNEL_TERMS])
    x0 = np.clip(np.log([max(prior, 1e-3) for _, prior, _, _, _ in KERNEL_TERMS]), lo, hi)
    pulled = np.array([bool(src) for *_, src in KERNEL_TERMS])
    meas = np.array([t.measured for t in targets])

    def residuals(z: np.ndarray) -> np.ndarray:
        v = np.exp(z)
        return np.concatenate([np.log(np.array([kernel_time(t, *v) for t in targets]) / meas), ((z - x0) / PRIOR_SCALE)[pulled]])

    res = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, x_scale=1.0, diff_step=1e-3)
    return np.exp(res.x)


def fit_moe_kernels(rows: Iterable[MoeKernelRow]) -> KernelFit:
    """Fit `KERNEL_TERMS` on every usable row; validate leave-one-source-out."""
    targets, skipped = kernel_targets(rows)
    if not targets:
        raise ValueError("no usable fused-MoE kernel rows to fit")
    full = _fit_kernels(targets)
    sources = sorted({t.row.source for t in targets})
    held = np.empty(len(targets))
    for s in sources:
        idx = [k for k, t in enumerate(targets) if t.row.source == s]
        train = [t for t in targets if t.row.source != s]
        v = _fit_kernels(train) if train else full
        held[idx] = [kernel_time(targets[k], *v) for k in idx]
    return KernelFit({name: float(v) for (name, *_), v in zip(KERNEL_TERMS, full)}, targets, skipped, held, sources)
