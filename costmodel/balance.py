"""The balance point: the decode batch at which a replica stops being bandwidth-bound.

SpecAgent moves Strong tokens from decode (bandwidth-bound) into a verification prefill
(compute-bound); the trade pays while the Strong replica's decode batch stays below this
point. The hardware ridge (peak FLOP/s ÷ bandwidth) is the dense-model answer in FLOP per
byte; the model-specific batch differs because KV and state reads grow with the batch and,
for MoE, so do the distinct experts read.

The effective balance batch uses the same pass-time function as everything else
(`roofline.estimate`): GEMMs at the GEMM efficiency for their token count, grouped MoE
GEMMs padded per touched expert, attention at the attention-kernel efficiency, the
achieved-bandwidth ramp — so the engine's kernel terms move it; fixed costs that add to
both sides of the bound (per iteration, per layer, collectives) do not. The peak balance
batch is the same comparison at datasheet rates: FLOPs ÷ peak against bytes ÷ bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate


@dataclass(frozen=True)
class BalancePoint:
    hardware_ridge: float  # FLOP/B at the compute dtype's peak
    hardware_ridge_bf16: float
    balance_batch_peak: int | None  # smallest decode batch that is compute-bound at peak rates
    balance_batch_effective: int | None  # same, with the profile's efficiencies applied
    context: int
    weight_mode: str
    compute_dtype: str
    max_batch_searched: int


def balance_point(dep: Deployment, context: int = 0, weight_mode: str = "union", max_batch: int = 65536) -> BalancePoint:
    """Search every batch 1..max_batch at once; None means decode never turns compute-bound there."""
    batches = np.arange(1, max_batch + 1, dtype=np.float64)
    cost = estimate(dep, Passes.uniform(1, context, batches), weight_mode)
    hw = dep.hardware
    attn_dtype = dep.activation_dtype if dep.activation_dtype in hw.peak_tflops else "bf16"
    f = cost.flops
    peak_compute = ((f["dense"] + f["experts"] + f["lm_head"]) / hw.peak_flops(dep.compute_dtype)
                    + (f["attention"] + f["linear_attention"]) / hw.peak_flops(attn_dtype))
    peak_memory = cost.total_bytes / hw.bandwidth_bytes_s

    def first(mask: np.ndarray) -> int | None:
        idx = np.flatnonzero(mask)
        return int(batches[idx[0]]) if idx.size else None

    return BalancePoint(
        hardware_ridge=hw.ridge(dep.compute_dtype),
        hardware_ridge_bf16=hw.ridge("bf16"),
        balance_batch_peak=first(peak_compute >= peak_memory),
        balance_batch_effective=first(cost.compute_s >= cost.memory_s),
        context=context,
        weight_mode=weight_mode,
        compute_dtype=dep.compute_dtype,
        max_batch_searched=max_batch,
    )
