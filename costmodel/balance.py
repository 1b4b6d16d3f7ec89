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
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


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


def verify_saving_curve(strong: Deployment, segment_tokens: float, context: float, weight_mode: str = "union",
                        batches: Sequence[int] | None = None, max_batch: int | None = None) -> pd.DataFrame:
    """Per-token saving of one verification prefill against decoding the same tokens, by decode batch.

    What the report's balance figure shows when no fleet study is available.

    A replica decoding a batch of B sequences spends one decode pass per token for all of
    them, so each sequence's share of a token is (decode pass at batch B) ÷ B. A
    verification prefill of ``segment_tokens`` onto ``context`` cached tokens costs
    (prefill pass) ÷ segment_tokens per token. The saving is 1 − verify share ÷ decode
    share, for time and for HBM bytes read. Returns the balance-study columns (hardware,
    strong_mean_decode_batch, time_saving, memory_saving) plus the per-token figures and
    ``fits`` (whether B sequences' KV cache and state fit next to the weights). Batches run
    to ``max_batch`` (default: twice the larger of the memory limit and the roofline
    balance batch, at most 65,536).
    """
    if segment_tokens < 2:
        raise ValueError(f"segment_tokens must be >= 2 for a verification prefill, got {segment_tokens}")
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    fit = strong.max_sequences(int(round(context)))
    if batches is None:
        if max_batch is None:
            bp = balance_point(strong, context=int(round(context)), weight_mode=weight_mode)
            max_batch = min(65536, 2 * max(fit, bp.balance_batch_effective or 0, 64))
        batches = np.unique(np.round(np.geomspace(1, max_batch, 80)).astype(int))
    b = np.asarray(batches, dtype=np.float64)
    if b.size == 0 or np.any(b < 1):
        raise ValueError("batches must be >= 1")
    dec = estimate(strong, Passes.uniform(1, context, b), weight_mode)
    ver = estimate(strong, Passes.uniform(float(segment_tokens), context, 1), weight_mode)
    n = float(segment_tokens)
    dec_t, dec_m = dec.time_s / b, dec.total_bytes_read / b
    ver_t, ver_m = float(ver.time_s[0]) / n, float(ver.total_bytes_read[0]) / n
    return pd.DataFrame({
        "hardware": strong.hardware.name,
        "strong_mean_decode_batch": b,
        "time_saving": 1.0 - ver_t / dec_t,
        "memory_saving": 1.0 - ver_m / dec_m,
        "decode_s_per_token": dec_t,
        "verify_s_per_token": ver_t,
        "decode_bytes_per_token": dec_m,
        "verify_bytes_per_token": ver_m,
        "fits": b <= fit,
    })
