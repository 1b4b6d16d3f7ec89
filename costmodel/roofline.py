"""Roofline estimate of one or many forward passes: FLOPs, HBM bytes, communication, time.

A pass's time is max(compute time, memory time) + communication + a fixed per-pass
overhead, with compute and bandwidth derated by the hardware profile's efficiencies.
Weight reads happen once per pass whatever its token count — this is what makes decode
bandwidth-bound and a verification prefill compute-bound, the mechanism SpecAgent uses.

Simplifications (stated so they can be checked): KV of the attended context is read once
per sequence per pass (an ideal flash-attention; tile re-reads hit L2); every GEMM reads
its input activations and writes its outputs once; communication is not overlapped with
compute; experts are routed uniformly (an assumption: no routing statistics are published); chunked Gated DeltaNet prefill reads the
float32 state once, writes it once, and materialises one state per 64-token chunk in the
activation dtype (as flash-linear-attention's chunk kernels do).

On top of the roofline every pass pays its serving engine's fixed costs — per iteration,
per sequence, per layer, collective latencies, and the part of its kernel launches that
the GPU's own work does not hide — and runs its grouped
MoE GEMMs and attention kernels at their own efficiencies; those terms are defined in
`costmodel.latency` (one place) and added here. Which efficiency a pass uses: every GEMM
at the GEMM efficiency for its token count (the calibrated compute curve where present,
else the engine's `gemm_mfu` or the hardware's `prefill_mfu`) — decode included, since a
decode pass's GEMMs are GEMMs of `batch` rows and its low achieved MFU is the memory
bound, which the memory term already gives; a calibrated decode curve, where present,
prices pure-decode passes; routed experts' grouped GEMMs at the engine's `moe_mfu` up to its
`moe_tflops` ceiling (`latency.moe_efficiency`; padded per touched expert), attention (softmax and Gated DeltaNet) at its `attention_mfu`, where
the engine states them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.dtypes import dtype_bytes
from specagent.costmodel.latency import CPU_TERMS, FIXED_TERMS, GPU_TERMS, LatencyTerms, eager_launch, exposed_launch, latency_terms
from specagent.costmodel.moe import moe_union_experts
from specagent.costmodel.passes import GDN_CHUNK, Passes

if TYPE_CHECKING:  # pandas only for to_frame: the CLI's foundation commands import this module
    import pandas as pd

WEIGHT_MODES = ("union", "active")


@dataclass(frozen=True)
class Coefficients:
    """Per-token and per-pass constants of a deployment, computed once per estimate."""

    dense_gemm_params: float  # per token, every GEMM except routed experts and LM head
    expert_params: float  # one routed expert of one layer
    moe_layers: int
    num_experts: int
    top_k: int
    dense_weight_bytes: float  # read once per pass
    expert_bytes: float  # one expert of one layer
    embedding_row_bytes: float
    lm_head_bytes: float
    lm_head_flops_per_logit: float
    attn_flops_per_pair: float
    gdn_flops_decode: float
    gdn_flops_prefill: float
    kv_bytes_per_token: float
    state_bytes: float  # float32 recurrent + conv state of one sequence
    chunk_state_bytes: float  # one per-chunk state materialised by chunked prefill (activation dtype)
    act_bytes_per_token: float
    act_bytes_per_logit: float
    allreduce_layers: int  # all-reduces of the hidden state per pass (per token)
    a2a_layers: int  # MoE layers using all-to-all under expert parallelism
    hidden: int
    act_bytes: float
    terms: LatencyTerms  # the serving engine's fixed costs on this deployment (costmodel.latency)


def coefficients(dep: Deployment) -> Coefficients:
    m = dep.model
    h = m.hidden
    wb = dep.weight_bytes_per_param
    hp = dep.high_precision_bytes
    ab = dtype_bytes(dep.activation_dtype)

    attn_gemm = sum(i * o for i, o in m.attention.matmul_shapes(h))
    gemm = m.num_full_layers * attn_gemm
    act = m.num_full_layers * sum(i + o for i, o in m.attention.matmul_shapes(h))
    gdn_dec = gdn_pre = 0.0
    if m.linear:
        la = m.linear
        gemm += m.num_linear_layers * sum(i * o for i, o in la.matmul_shapes(h))
        act += m.num_linear_layers * sum(i + o for i, o in la.matmul_shapes(h))
        nv, dk, dv = la.num_value_heads, la.key_head_dim, la.value_head_dim
        conv = 2 * la.qkv_dim * la.conv_kernel
        # Recurrent step per value head: decay, S·k, rank-1 delta update, q·S  ≈ 7·dk·dv.
        gdn_dec = m.num_linear_layers * (nv * 7 * dk * dv + conv)
        # Chunked form: intra-chunk QKᵀ, KKᵀ and AV over a 64-token chunk, plus inter-chunk state terms.
        gdn_pre = m.num_linear_layers * (nv * (2 * GDN_CHUNK * (2 * dk + dv) + 6 * dk * dv) + conv)
    gemm += m.num_dense_ffn_layers * 3 * h * m.dense_intermediate
    act += m.num_dense_ffn_layers * (h + 2 * m.dense_intermediate + m.dense_intermediate + h)
    expert_params = 0.0
    if m.moe and m.num_moe_layers:
        mo = m.moe
        n = m.num_moe_layers
        gemm += n * (3 * h * mo.shared_intermediate + (h if mo.shared_gate else 0) + h * mo.num_experts)
        expert_params = float(mo.expert_params(h))
        per_expert_act = h + 2 * mo.expert_intermediate + mo.expert_intermediate + h
        shared_act = (h + 3 * mo.shared_intermediate + h) if mo.shared_intermediate else 0
        act += n * (mo.top_k * per_expert_act + shared_act + h + mo.num_experts)

    moe = m.moe if (m.moe and m.num_moe_layers) else None
    g = dep.gpus
    if g > 1:
        a2a_layers = m.num_moe_layers if dep.parallelism == "tp+ep" else 0
        allreduce_layers = 2 * m.num_layers - a2a_layers
    else:
        a2a_layers = allreduce_layers = 0
    return Coefficients(
        dense_gemm_params=float(gemm),
        expert_params=expert_params,
        moe_layers=m.num_moe_layers if moe else 0,
        num_experts=moe.num_experts if moe else 0,
        top_k=moe.top_k if moe else 0,
        dense_weight_bytes=dep.dense_weight_bytes(),
        expert_bytes=expert_params * wb,
        embedding_row_bytes=h * hp,
        lm_head_bytes=dep.lm_head_bytes(),
        lm_head_flops_per_logit=2.0 * m.vocab * h,
        attn_flops_per_pair=4.0 * m.attention.num_heads * m.attention.head_dim * m.num_full_layers,
        gdn_flops_decode=float(gdn_dec),
        gdn_flops_prefill=float(gdn_pre),
        kv_bytes_per_token=dep.kv_bytes_per_token(),
        state_bytes=dep.state_bytes_per_sequence(),
        chunk_state_bytes=(m.num_linear_layers * m.linear.state_elements() * ab) if m.linear else 0.0,
        act_bytes_per_token=act * ab,
        act_bytes_per_logit=(h + m.vocab) * ab,
        allreduce_layers=allreduce_layers,
        a2a_layers=a2a_layers,
        hidden=h,
        act_bytes=ab,
        terms=latency_terms(dep),
    )


@dataclass(frozen=True)
class PassCost:
    """Columns of per-pass costs; every array has one entry per pass."""

    flops: dict[str, np.ndarray]
    bytes_read: dict[str, np.ndarray]
    bytes_written: dict[str, np.ndarray]
    comm_bytes: np.ndarray  # per GPU, over the interconnect
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray  # collectives: latency α per collective + bytes / link bandwidth
    overhead_s: np.ndarray  # the sum of `fixed`
    experts_touched: np.ndarray  # distinct experts per MoE layer (0 for dense models)
    weight_mode: str = "union"
    meta: dict = field(default_factory=dict)
    #: compute seconds by kind: "gemm" (dense GEMMs and LM head), "experts" (routed experts' grouped GEMMs),
    #: "expert_padding" (their rows computed beyond the tokens), "attention" (softmax and Gated DeltaNet); they sum to compute_s
    compute_parts: dict[str, np.ndarray] = field(default_factory=dict)
    #: engine fixed costs by term (costmodel.latency): iteration, per_sequence, layers, launch (the exposed part:
    #: launch time beyond the GPU-busy time max(compute, memory) + comm + layers, which it overlaps)
    fixed: dict[str, np.ndarray] = field(default_factory=dict)
    collective_latency_s: np.ndarray | None = None  # the α part of comm_s
    #: CPU time of launching the pass's kernels one by one (0 where a CUDA graph replays it), before overlap
    eager_launch_s: np.ndarray | None = None

    @property
    def total_flops(self) -> np.ndarray:
        return sum(self.flops.values())  # type: ignore[return-value]

    @property
    def total_bytes_read(self) -> np.ndarray:
        return sum(self.bytes_read.values())  # type: ignore[return-value]

    @property
    def total_bytes_written(self) -> np.ndarray:
        return sum(self.bytes_written.values())  # type: ignore[return-value]

    @property
    def total_bytes(self) -> np.ndarray:
        return self.total_bytes_read + self.total_bytes_written

    @property
    def time_s(self) -> np.ndarray:
        """max(GPU-busy time, eager launches) + the engine's CPU work per iteration and sequence.

        GPU-busy = max(compute, memory) + communication + per-layer fixed time; launches
        overlap it (`costmodel.latency.exposed_launch`). Written so that with no launch term
        it is max(compute, memory) + comm + overhead bit for bit, and so that two
        launch-bound passes cost exactly the same (time stays monotone in the work).
        """
        roof = np.maximum(self.compute_s, self.memory_s)
        if self.eager_launch_s is None:
            return roof + self.comm_s + self.overhead_s
        out = np.maximum(_gpu_busy(roof + self.comm_s, self.fixed), self.eager_launch_s)
        for name in CPU_TERMS:
            out = out + self.fixed[name]
        return out

    @property
    def gpu_fixed_s(self) -> np.ndarray:
        """The fixed terms spent on the GPU (`latency.FIXED_TERMS` entering "gpu"): the launches overlap them."""
        return _gpu_busy(np.zeros_like(self.compute_s), self.fixed)

    @property
    def compute_bound(self) -> np.ndarray:
        return self.compute_s >= self.memory_s

    @property
    def intensity(self) -> np.ndarray:
        """Arithmetic intensity of the pass (FLOP per HBM byte)."""
        return self.total_flops / self.total_bytes

    def __len__(self) -> int:
        return len(self.compute_s)

    def to_frame(self) -> "pd.DataFrame":
        cols: dict[str, np.ndarray] = {}
        cols.update({f"flops_{k}": v for k, v in self.flops.items()})
        cols.update({f"read_{k}": v for k, v in self.bytes_read.items()})
        cols.update({f"write_{k}": v for k, v in self.bytes_written.items()})
        cols.update(
            flops=self.total_flops, bytes_read=self.total_bytes_read, bytes_written=self.total_bytes_written,
            comm_bytes=self.comm_bytes, experts_touched=self.experts_touched, compute_s=self.compute_s,
            memory_s=self.memory_s, comm_s=self.comm_s, overhead_s=self.overhead_s, time_s=self.time_s,
            bound=np.where(self.compute_bound, "compute", "memory"),
        )
        cols.update({f"compute_{k}_s": v for k, v in self.compute_parts.items()})
        cols.update({f"fixed_{k}_s": v for k, v in self.fixed.items()})
        if self.collective_latency_s is not None:
            cols["collective_latency_s"] = self.collective_latency_s
        import pandas as pd

        return pd.DataFrame(cols)


def _gpu_busy(base: np.ndarray, fixed: dict[str, np.ndarray]) -> np.ndarray:
    """`base` (roofline + collectives) plus the GPU-side fixed terms, summed in `FIXED_TERMS` order."""
    for name in GPU_TERMS:
        base = base + fixed[name]
    return base


def _interp_log(x: np.ndarray, curve: tuple[tuple[float, float], ...], default: float) -> np.ndarray:
    if not curve:
        return np.full_like(x, default, dtype=np.float64)
    xs = np.log(np.array([c[0] for c in curve]))
    ys = np.array([c[1] for c in curve])
    return np.interp(np.log(np.maximum(x, 1e-30)), xs, ys)


def compute_efficiency(dep: Deployment, tokens: np.ndarray, decode_tokens: np.ndarray | None = None,
                       terms: LatencyTerms | None = None) -> np.ndarray:
    """GEMM efficiency (fraction of peak FLOP/s) of passes of `tokens` tokens.

    A calibrated curve over tokens per pass when the hardware profile has one, else the
    engine's `gemm_mfu` (or the hardware's `prefill_mfu`). With `decode_tokens` given and
    a profile that has a decode curve, a pure-decode pass (every sequence adds one token:
    decode_tokens == tokens, so tokens is the decode batch) takes the decode curve at its
    batch instead: B one-token sequences run a recurrent state step and attention over B
    caches, which is slower than a B-token prefill's GEMM-bound work (measured on CPU;
    `kernels.calibrate`). Mixed passes and profiles without a decode curve (every shipped
    GPU profile) use the prefill curve or the flat efficiency.
    """
    hw = dep.hardware
    t = np.asarray(tokens, dtype=np.float64)
    flat = (terms or latency_terms(dep)).gemm_mfu
    eff = _interp_log(t, hw.compute_efficiency_curve, flat)
    if decode_tokens is not None and hw.decode_efficiency_curve:
        pure = np.asarray(decode_tokens, dtype=np.float64) == t
        if np.any(pure):
            eff = np.where(pure, _interp_log(t, hw.decode_efficiency_curve, 1.0), eff)
    return eff


def attention_efficiency(terms: LatencyTerms, gemm_efficiency: np.ndarray) -> np.ndarray:
    """Efficiency of attention FLOPs: the engine's attention-kernel MFU, else the GEMM efficiency."""
    if terms.attention_mfu is None:
        return gemm_efficiency
    return np.full_like(gemm_efficiency, terms.attention_mfu)


def estimate(dep: Deployment, passes: Passes, weight_mode: str = "union", coef: Coefficients | None = None) -> PassCost:
    """Price every pass in `passes` on `dep` (vectorised over passes)."""
    if weight_mode not in WEIGHT_MODES:
        raise ValueError(f"weight_mode must be one of {WEIGHT_MODES}, got '{weight_mode}'")
    c = coef or coefficients(dep)
    lt = c.terms
    t = passes.tokens
    prefill_tokens = t - passes.decode_tokens
    one = np.ones_like(t)

    if c.moe_layers:
        if weight_mode == "union":
            touched = moe_union_experts(t, c.num_experts, c.top_k)
        else:
            touched = np.full_like(t, float(c.top_k))
    else:
        touched = np.zeros_like(t)

    # every GEMM reads its inputs and writes its outputs once: half the traffic each way
    activations = 0.5 * (c.act_bytes_per_token * t + c.act_bytes_per_logit * passes.logits)
    state = c.state_bytes * passes.seqs + c.chunk_state_bytes * (passes.state_touches - passes.seqs)
    flops = {
        "dense": 2.0 * c.dense_gemm_params * t,
        "experts": 2.0 * c.expert_params * c.top_k * c.moe_layers * t,
        "attention": c.attn_flops_per_pair * passes.attn_pairs,
        "linear_attention": c.gdn_flops_decode * passes.decode_tokens + c.gdn_flops_prefill * prefill_tokens,
        "lm_head": c.lm_head_flops_per_logit * passes.logits,
    }
    read = {
        "dense_weights": c.dense_weight_bytes * one,
        "expert_weights": c.expert_bytes * c.moe_layers * touched,
        "embedding": c.embedding_row_bytes * t,
        "lm_head": c.lm_head_bytes * one,
        "kv": c.kv_bytes_per_token * passes.kv_read_tokens,
        "state": state,
        "activations": activations,
    }
    written = {
        "kv": c.kv_bytes_per_token * t,
        "state": state,
        "activations": activations,
    }

    g = dep.gpus
    hw = dep.hardware
    hidden_msg = t * c.hidden * c.act_bytes
    comm = np.zeros_like(t)
    if g > 1:
        comm = c.allreduce_layers * 2.0 * (g - 1) / g * hidden_msg
        if c.a2a_layers:
            gpus_touched = g * (1.0 - (1.0 - 1.0 / g) ** c.top_k)
            comm = comm + c.a2a_layers * 2.0 * hidden_msg / g * gpus_touched * (g - 1) / g
    attn_flops = flops["attention"] + flops["linear_attention"]
    # grouped MoE GEMMs compute `moe_pad_tokens` rows beyond the tokens of every touched expert
    pad_flops = 2.0 * c.expert_params * c.moe_layers * lt.moe_pad_tokens * touched
    pure = passes.decode_tokens == t
    eff_c = compute_efficiency(dep, t, passes.decode_tokens, lt)
    eff_a = attention_efficiency(lt, eff_c)
    eff_m = eff_c if lt.moe_mfu is None else np.full_like(eff_c, lt.moe_mfu)
    attn_dtype = dep.activation_dtype if dep.activation_dtype in hw.peak_tflops else "bf16"  # attention runs in the activation dtype
    peak_c, peak_a = hw.peak_flops(dep.compute_dtype), hw.peak_flops(attn_dtype)
    # written as one sum over the GEMM efficiency so that, without the engine terms, it is the
    # pre-engine roofline bit for bit (+ 0.0 and x 1.0 change no bits)
    gemm_flops = flops["dense"] + flops["experts"] * (eff_c / eff_m) + flops["lm_head"]
    compute_s = (gemm_flops / peak_c + pad_flops / peak_c * (eff_c / eff_m) + attn_flops / peak_a * (eff_c / eff_a)) / (g * eff_c)
    compute_parts = {"gemm": (flops["dense"] + flops["lm_head"]) / peak_c / (g * eff_c),
                     "experts": flops["experts"] / peak_c / (g * eff_m), "expert_padding": pad_flops / peak_c / (g * eff_m),
                     "attention": attn_flops / peak_a / (g * eff_a)}
    total_bytes = sum(read.values()) + sum(written.values())
    memory_s = total_bytes / (g * hw.bandwidth_bytes_s * lt.bandwidth_efficiency) + lt.memory_fixed_s
    collective_latency = np.full_like(t, lt.collective_latency_s)
    comm_s = comm / hw.link_bytes_s + collective_latency if g > 1 else np.zeros_like(t)
    launch = lt.launch_s * eager_launch(lt, t, pure)
    fixed: dict[str, np.ndarray] = {}
    for term in FIXED_TERMS:  # the launch term last: the GPU's own time hides the launches it overlaps; only the rest shows
        fixed[term.name] = (term.amount(lt, passes, t) if term.enters != "launch"
                            else exposed_launch(launch, _gpu_busy(np.maximum(compute_s, memory_s) + comm_s, fixed)))
    overhead_s = sum(fixed.values())
    return PassCost(
        flops=flops, bytes_read=read, bytes_written=written, comm_bytes=comm, compute_s=compute_s,
        memory_s=memory_s, comm_s=comm_s, overhead_s=overhead_s, experts_touched=touched, weight_mode=weight_mode,
        compute_parts=compute_parts, fixed=fixed, collective_latency_s=collective_latency if g > 1 else np.zeros_like(t),
        eager_launch_s=launch,
    )
