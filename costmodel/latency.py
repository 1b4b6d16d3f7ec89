"""The fixed costs a served forward pass pays beyond the roofline, defined once.

`roofline.estimate` adds these terms to every pass, so the phases, `DecodeRun`'s closed
form, the fleet's `IterationCost` (which reads them off `estimate`), the balance point and
calibration all price the same pass the same way. Each term is a named field of the
deployment's serving-engine profile (`hardware/engines/*.toml`, with its source or fit):

* per-iteration CPU work (``iteration_us``) + per sequence (``per_sequence_us``);
* GPU-side fixed time per layer by kind (``layer_us``: full attention, Gated DeltaNet,
  dense MLP, MoE — a decoder layer is one mixer and one FFN and pays both); the fit sets
  it per kernel the layer runs (`latency_fit.PER_KERNEL_LAYER_US`), so an MoE layer's
  fourteen counted kernels cost more than a dense MLP's four, graphs or not;
* kernel launches (``launch_us`` × kernels per pass) by every pass that does not replay a
  CUDA graph: graphs cover passes of up to ``cuda_graphs.max_batch`` tokens, pure-decode
  ones only unless the engine also captures mixed batches (vLLM V1's piecewise graphs).
  Launches are CPU work issued asynchronously, so they overlap the GPU's execution: an
  eager pass takes max(GPU-busy time, launch time), and only the launch time beyond the
  GPU-busy time is exposed (`exposed_launch`);
* α–β collectives: ``allreduce_alpha_us`` per tensor-parallel all-reduce (2 per layer: after
  the mixer and after the FFN) and ``all_to_all_alpha_us`` per expert-parallel all-to-all
  (dispatch + combine replace the FFN all-reduce of an MoE layer under tp+ep); the bytes
  ÷ link bandwidth part is the roofline's, unchanged; the vocabulary-parallel embedding
  all-reduce and logits gather (2 per pass) are left in the per-iteration term;
* grouped-GEMM MoE efficiency vs tokens per expert: each touched expert computes
  ``moe_pad_tokens`` rows beyond its tokens (block padding and the tiles a few rows leave
  idle), i.e. efficiency e × τ/(τ + pad) at τ tokens per touched expert, where
  e = min(``moe_mfu``, ``moe_tflops`` / peak): a fraction of the compute dtype's peak up
  to a throughput ceiling (fitted to published kernel times, `moe_kernel_fit.fit_moe_kernels`);
* attention-kernel efficiency apart from GEMM efficiency (``attention_mfu``);
* the achieved-bandwidth curve of weight-streaming kernels, e(b) = e∞·b/(b + b½) for a
  kernel of b bytes per GPU, which adds b½/(BW·e∞) of memory time per such kernel;
* the dense weight stream's own rate (``weight_stream``, a factor on ``bandwidth``): the weights
  every pass reads once are priced at it instead of the shared fraction (`weight_stream_s`).

`FIXED_TERMS` below is the one list of the per-pass fixed costs (name, the engine-profile
field that is each coefficient's one home, how it enters the pass time); every consumer
iterates over it (docs/fixed-costs.md).

The rule that keeps the fleet exact: every term is affine in a pass's aggregates
(`Passes`), times factors that depend only on (token total, pure-decode flag) — the MoE
expert union, the GEMM and attention efficiencies (calibrated curves), and whether the
kernels are launched one by one — and a pass's time is

    max(compute, memory, launch − G) + G + iteration + per_sequence,   G = collectives + layers

a maximum of three such functions plus affine ones (the launch branch is constant for a
given token total and pure-decode flag, so within a run of decode iterations of one batch).
`simulator.itercost.IterationCost` probes `estimate` under exactly this rule and
`DecodeRun` / `DecodeSegment` sum the three-branch maximum exactly; a new term that
breaks the rule must extend that probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import ModelSpec
from specagent.hardware.serving_engine import LAYER_KINDS, EngineProfile

#: Weight-streaming GEMM kernels per layer by kind, as vLLM and SGLang fuse them (fused QKV
#: and gate/up projections: QKVParallelLinear, MergedColumnParallelLinear): attention QKV +
#: output; Gated DeltaNet fused qkvz + fused ba + output; MLP gate/up + down; MoE router +
#: grouped w13 + grouped w2 (+ shared expert gate/up + down + its gate, where present).
WEIGHT_KERNELS = {"full_attention": 2, "linear_attention": 3, "dense_mlp": 2, "moe": 3}
SHARED_EXPERT_KERNELS = 3


def weight_kernel_params(model: ModelSpec) -> dict[str, tuple[tuple[float, bool, bool], ...]]:
    """Per layer kind, the weights each weight-streaming kernel of `WEIGHT_KERNELS` reads in a one-token decode step.

    Each entry is (parameters, high precision, routed experts): the fused QKV(+output gate) and output GEMMs of attention; Gated
    DeltaNet's fused qkvz, fused ba and output; a dense MLP's gate/up and down; an MoE layer's router (kept in high
    precision, as the roofline counts it), grouped w13 and w2 over the top-k experts a single token routes to (the
    union of experts a one-token pass touches), then the shared expert's gate/up, down and its scalar gate. The kernel
    grouping is the one `WEIGHT_KERNELS` counts (vLLM's and SGLang's fused linear layers).
    """
    h = model.hidden
    a = model.attention.matmul_shapes(h)
    out: dict[str, tuple[tuple[float, bool, bool], ...]] = {
        "full_attention": ((float(sum(i * o for i, o in a[:3])), False, False), (float(a[3][0] * a[3][1]), False, False)),
        "dense_mlp": ((2.0 * h * model.dense_intermediate, False, False), (float(h * model.dense_intermediate), False, False)),
    }
    if model.linear:
        la = model.linear.matmul_shapes(h)
        out["linear_attention"] = ((float(sum(i * o for i, o in la[:2])), False, False),
                                   (float(la[2][0] * la[2][1]), False, False), (float(la[3][0] * la[3][1]), False, False))
    else:
        out["linear_attention"] = ()
    if model.moe:
        m = model.moe
        moe = [(float(h * m.num_experts), True, False), (2.0 * h * m.expert_intermediate * m.top_k, False, True),
               (float(h * m.expert_intermediate * m.top_k), False, True)]
        if m.shared_intermediate:
            moe += [(2.0 * h * m.shared_intermediate, False, False), (float(h * m.shared_intermediate), False, False),
                    (float(h if m.shared_gate else 0), False, False)]
        out["moe"] = tuple(moe)
    else:
        out["moe"] = ()
    return out


def hidden_floor_s(dep: Deployment, eng: EngineProfile, bandwidth_efficiency: float, half_bytes: float,
                   stream_efficiency: float) -> float:
    """Per-layer fixed time that weight-streaming kernels hide behind their own weight reads (seconds per pass).

    A kernel takes max(its floor, its bytes ÷ achieved bandwidth, its FLOPs ÷ achieved peak), not their sum: the
    floor (the few microseconds every kernel takes however little it does, `[per_layer_us]` ÷ `[kernels_per_layer]`)
    and the memory traffic overlap inside one kernel. The roofline's memory term already prices every weight byte, so
    what a weight kernel adds beyond it is max(floor − bytes time, 0): this returns Σ min(floor, bytes time) over the
    weight kernels of every layer, which the layers term subtracts from its floors. A 4B dense model's GEMMs stream
    20–95 MB each (tens of microseconds on an H200), so their floors vanish; an MoE model split over 8 GPUs moves
    1–20 MB per kernel and per GPU, so its floors mostly stay. Bytes are per GPU (tensor-parallel shards, as the memory
    term divides them) at a one-token decode step (top-k experts); a larger pass reads at least as many, so its
    hidden part is at least this one (FLOP-bound GEMMs take longer still): the subtraction never exceeds what a pass
    hides. Kernels without weights (norms, RoPE, the attention and recurrent kernels, activations) keep their floor.
    Applied where the engine profile says its floors overlap reads (`floor_overlaps_reads`: the GPU engines); a CPU's
    eager per-op dispatch runs before its op, serially, and adds. A routed-expert kernel reads at `bandwidth_efficiency`,
    every other weight kernel at `stream_efficiency` (the dense weight stream's, `weight_stream_s`).
    """
    counts = layer_counts(dep)
    rate = dep.hardware.bandwidth_bytes_s * bandwidth_efficiency
    stream = dep.hardware.bandwidth_bytes_s * stream_efficiency
    wb, hp, g = dep.weight_bytes_per_param, dep.high_precision_bytes, dep.gpus
    total = 0.0
    for kind, kernels in weight_kernel_params(dep.model).items():
        n_kern = float(eng.layer_kernels[kind].value)
        if not counts[kind] or n_kern <= 0 or not kernels:
            continue
        floor = float(eng.layer_us[kind].value) * 1e-6 / n_kern
        if floor <= 0.0:
            continue
        per_layer = sum(min(floor, (params * (hp if high else wb) / g + half_bytes) / (rate if routed else stream))
                        for params, high, routed in kernels)
        total += counts[kind] * min(per_layer, floor * n_kern)
    return total


@dataclass(frozen=True)
class LatencyTerms:
    """One deployment's fixed-cost terms in seconds (engine profile resolved for its GPU)."""

    iteration_s: float
    per_sequence_s: float
    layers_s: float  # sum over layers of the per-kind fixed time, less what weight kernels hide (`hidden_floor_s`)
    launch_s: float  # CPU time to launch every kernel of one pass one by one (overlaps the GPU's work: exposed_launch)
    allreduces: int  # tensor-parallel all-reduces per pass
    all_to_alls: int  # expert-parallel all-to-alls per pass
    collective_latency_s: float  # allreduces × α_ar + all_to_alls × α_a2a
    moe_pad_tokens: float
    bandwidth_ramp_s: float  # memory time the achieved-bandwidth curve adds per pass
    gemm_mfu: float
    attention_mfu: float | None  # None: attention at the GEMM efficiency
    moe_mfu: float | None  # None: routed-expert GEMMs at the GEMM efficiency
    bandwidth_efficiency: float
    #: The dense weight stream's fraction of the datasheet bandwidth (`bandwidth_efficiency` where the engine sets none).
    stream_efficiency: float
    cuda_graphs: bool
    cuda_graph_max_batch: int
    cuda_graphs_mixed: bool
    #: Per request, before its first token and outside any pass (API server, tokenisation, admission, the first
    #: detokenised chunk; the engine profile's request_us): it enters a call's first token, never a pass time. The fit
    #: adds it to every TTFT (latency_targets.closed_loop), the fleet delays each prefilling call's admission by it.
    request_s: float = 0.0
    #: The part of the per-layer floors that weight-streaming kernels hide behind their own reads (`hidden_floor_s`):
    #: layers_s is the floors' sum less this, so a kernel pays max(floor, bytes time), not both.
    layers_hidden_s: float = 0.0
    #: Memory time the dense weight stream saves (< 0) by reading at its own rate (`weight_stream_s`): per pass, as its bytes are.
    weight_stream_s: float = 0.0

    @property
    def memory_fixed_s(self) -> float:
        """Memory time a pass pays beyond its bytes ÷ the shared achieved bandwidth: the ramp and the weight stream's own rate."""
        return self.bandwidth_ramp_s + self.weight_stream_s


@dataclass(frozen=True)
class FixedTerm:
    """One fixed cost a served pass pays: where its coefficient lives and how it enters the pass time.

    `FIXED_TERMS` is the only list of them: `roofline.estimate` computes each into
    `PassCost.fixed`, `PassCost.time_s` / `overhead_s`, the roofline CLI's breakdown and the
    fleet's and `DecodeRun`'s probes iterate over it, so a term added here reaches every
    consumer (tests/test_fixed_terms.py checks they agree with every term non-zero).
    """

    name: str  # the key in PassCost.fixed (and the roofline JSON's fixed_<name>_s)
    coefficient: str  # its one home: the serving-engine profile field ([section] key; per GPU under [hardware.<id>])
    attr: str  # the LatencyTerms field (seconds) it is priced from
    per: str  # "pass": once per pass; else the Passes aggregate it multiplies (affine: the fleet's probe stays exact)
    enters: str  # "cpu": serial engine work after the GPU's; "gpu": GPU-busy time (launches overlap it); "launch"
    label: str  # the roofline CLI's word for it

    def amount(self, terms: "LatencyTerms", passes: object, tokens: np.ndarray) -> np.ndarray:
        """The term for every pass ("cpu" and "gpu" terms; the launch term is `exposed_launch`)."""
        value = getattr(terms, self.attr)
        if self.per == "pass":
            return np.full_like(tokens, value)
        return value * getattr(passes, self.per)


#: Every fixed cost, in the order they are summed (the order keeps the pinned goldens bit-exact).
#: A pass takes max(roofline + collectives + the "gpu" terms, eager launches) + the "cpu" terms.
FIXED_TERMS: tuple[FixedTerm, ...] = (
    FixedTerm("iteration", "iteration_us ([per_pass]; absent: the hardware profile's pass_overhead_us)", "iteration_s",
              "pass", "cpu", "iteration"),
    FixedTerm("per_sequence", "per_sequence_us ([per_pass])", "per_sequence_s", "seqs", "cpu", "sequences"),
    FixedTerm("layers", "[per_layer_us] by layer kind", "layers_s", "pass", "gpu", "layers"),
    FixedTerm("launch", "launch_us ([per_pass]) x kernels ([per_pass] kernels, [kernels_per_layer])", "launch_s",
              "pass", "launch", "launches"),
)
CPU_TERMS = tuple(t.name for t in FIXED_TERMS if t.enters == "cpu")
GPU_TERMS = tuple(t.name for t in FIXED_TERMS if t.enters == "gpu")
LAUNCH_TERM = next(t.name for t in FIXED_TERMS if t.enters == "launch")


def capped_efficiency(moe_mfu: float, moe_tflops: float | None, peak_flops: float) -> float:
    """A fraction of peak up to a throughput ceiling: min(moe_mfu, moe_tflops / peak) (no ceiling: moe_mfu)."""
    return moe_mfu if moe_tflops is None else min(moe_mfu, moe_tflops * 1e12 / peak_flops)


def moe_efficiency(eng: EngineProfile, peak_flops: float) -> float | None:
    """Asymptotic grouped-GEMM efficiency of `eng` on a GPU of `peak_flops` (`capped_efficiency`); None: the GEMM's."""
    if eng.moe_mfu is None:
        return None
    return capped_efficiency(float(eng.moe_mfu.value), None if eng.moe_tflops is None else float(eng.moe_tflops.value), peak_flops)


def layer_counts(dep: Deployment) -> dict[str, int]:
    m = dep.model
    return {"full_attention": m.num_full_layers, "linear_attention": m.num_linear_layers,
            "dense_mlp": m.num_dense_ffn_layers, "moe": m.num_moe_layers if m.is_moe else 0}


def collective_counts(dep: Deployment) -> tuple[int, int]:
    """(all-reduces, all-to-alls) one pass issues: 2 all-reduces per layer under TP; under
    tp+ep an MoE layer's FFN all-reduce becomes a dispatch and a combine all-to-all."""
    if dep.gpus == 1:
        return 0, 0
    m = dep.model
    moe_ep = m.num_moe_layers if (dep.parallelism == "tp+ep" and m.is_moe) else 0
    return 2 * m.num_layers - moe_ep, 2 * moe_ep


def stream_efficiency(eng: EngineProfile, bandwidth_efficiency: float) -> float:
    """The dense weight stream's fraction of the datasheet bandwidth: `bandwidth` × the engine's `weight_stream` factor,
    at most the datasheet (or the shared fraction, where a calibrated one exceeds it); the shared fraction itself where
    the engine sets none."""
    if eng.weight_stream is None:
        return bandwidth_efficiency
    return min(bandwidth_efficiency * float(eng.weight_stream.value), max(1.0, bandwidth_efficiency))


def weight_stream_s(dep: Deployment, bandwidth_efficiency: float, stream: float) -> float:
    """Memory time per pass the dense weight stream adds (< 0: saves) by reading at `stream` instead of the shared rate.

    The roofline prices every byte at the shared `bandwidth` fraction. The weights every pass reads once whatever its
    tokens (`Deployment.dense_weight_bytes`, and the LM head) are long sequential GEMV reads, which run nearer the
    device's copy rate than the paged KV reads, the scattered routed-expert reads and the activations that share that
    fraction (issue 49: Qwen3-8B's measured BF16 − FP8 TPOT gap on an H100 reads its weights at 0.94 of the datasheet,
    the shared fit says 0.70). Those bytes are the same in every pass, so the difference is a constant per deployment,
    and the pass time stays affine in its aggregates (the fleet's probe reads it as such).
    """
    if stream == bandwidth_efficiency:
        return 0.0
    per_gpu = (dep.dense_weight_bytes() + dep.lm_head_bytes()) / dep.gpus
    bw = dep.hardware.bandwidth_bytes_s
    return per_gpu / (bw * stream) - per_gpu / (bw * bandwidth_efficiency)


def latency_terms(dep: Deployment) -> LatencyTerms:
    eng = dep.serving_engine.for_hardware(dep.hardware)
    hw = dep.hardware
    counts = layer_counts(dep)
    us = 1e-6
    floors_s = sum(counts[k] * float(eng.layer_us[k].value) for k in LAYER_KINDS) * us
    kernels = int(eng.pass_kernels.value) + sum(counts[k] * int(eng.layer_kernels[k].value) for k in LAYER_KINDS)
    ar, a2a = collective_counts(dep)
    bw_eff = float((eng.bandwidth or hw.bandwidth_efficiency).value)
    weight_kernels = 1 + sum(counts[k] * WEIGHT_KERNELS[k] for k in LAYER_KINDS)  # + the LM head
    if dep.model.moe and dep.model.moe.shared_intermediate:
        weight_kernels += counts["moe"] * SHARED_EXPERT_KERNELS
    half_bytes = float(eng.bandwidth_half_mb.value) * 1e6
    stream = stream_efficiency(eng, bw_eff)
    ramp = weight_kernels * half_bytes / (hw.bandwidth_bytes_s * bw_eff)
    if stream != bw_eff and half_bytes:  # the routed experts' two grouped GEMMs per MoE layer ramp at the shared rate
        routed = 2 * counts["moe"]
        ramp = half_bytes / hw.bandwidth_bytes_s * ((weight_kernels - routed) / stream + routed / bw_eff)
    moe = moe_efficiency(eng, hw.peak_flops(dep.compute_dtype))
    overlaps = eng.floor_overlaps_reads is not None and bool(eng.floor_overlaps_reads.value)
    hidden = hidden_floor_s(dep, eng, bw_eff, half_bytes, stream) if overlaps else 0.0
    layers_s = floors_s - hidden if hidden > 0.0 else floors_s
    return LatencyTerms(
        iteration_s=float((eng.iteration_us or hw.pass_overhead_us).value) * us,
        per_sequence_s=float(eng.per_sequence_us.value) * us,
        layers_s=layers_s,
        launch_s=kernels * float(eng.launch_us.value) * us,
        allreduces=ar,
        all_to_alls=a2a,
        collective_latency_s=(ar * float(eng.allreduce_alpha_us.value) + a2a * float(eng.all_to_all_alpha_us.value)) * us,
        moe_pad_tokens=float(eng.moe_pad_tokens.value),
        bandwidth_ramp_s=ramp,
        gemm_mfu=float((eng.gemm_mfu or hw.prefill_mfu).value),
        attention_mfu=float(eng.attention_mfu.value) if eng.attention_mfu is not None else None,
        moe_mfu=moe,
        bandwidth_efficiency=bw_eff,
        stream_efficiency=stream,
        cuda_graphs=bool(eng.cuda_graphs.value),
        cuda_graph_max_batch=int(eng.cuda_graph_max_batch.value),
        cuda_graphs_mixed=bool(eng.cuda_graphs_mixed.value),
        layers_hidden_s=hidden,
        request_s=float(eng.request_us.value) * us,
        weight_stream_s=weight_stream_s(dep, bw_eff, stream),
    )


_Tokens = TypeVar("_Tokens", float, np.ndarray)


def request_overhead_s(terms: LatencyTerms, new_tokens: _Tokens) -> _Tokens:
    """The serving engine's per-request overhead a call pays, once, before its first token (seconds).

    The one rule every consumer follows: a call that prefills (new tokens > 0) is a request to
    the engine (API server, tokenisation, admission) and pays `request_s`; a decode that
    continues a call already admitted pays nothing. The fleet delays each call's admission by
    it, the batch-1 pricer (`predict`) adds it to each prefill event, the fit to each TTFT.
    `new_tokens`: a scalar or an array (one value per call).
    """
    return terms.request_s * (new_tokens > 0)


# --- the factors that may depend only on (token total, pure-decode flag) ---------------------
def eager_launch(terms: LatencyTerms, tokens: np.ndarray, pure_decode: np.ndarray) -> np.ndarray:
    """1.0 where a pass launches its kernels one by one (no captured CUDA graph replays it), else 0.0."""
    kinds = np.asarray(pure_decode, dtype=bool) | terms.cuda_graphs_mixed
    graphed = terms.cuda_graphs & (np.asarray(tokens) <= terms.cuda_graph_max_batch) & kinds
    return np.where(graphed, 0.0, 1.0)


def eager_launch_one(terms: LatencyTerms, tokens: float, pure_decode: bool) -> float:
    """`eager_launch` for one pass (the fleet's scalar path)."""
    graphed = terms.cuda_graphs and tokens <= terms.cuda_graph_max_batch and (pure_decode or terms.cuda_graphs_mixed)
    return 0.0 if graphed else 1.0


# --- launch overlap -----------------------------------------------------------------------------
def exposed_launch(launch_s: np.ndarray, busy_s: np.ndarray) -> np.ndarray:
    """Launch time a pass exposes beyond its GPU-busy time: max(launch − busy, 0).

    Kernel launches are CPU work enqueued asynchronously ("By default, GPU operations are
    asynchronous ... enqueued to the particular device, but not necessarily executed until
    later": PyTorch docs, notes/cuda.rst, Asynchronous execution): the CPU launches kernel
    i+1 while the GPU runs kernel i, so an eager pass takes max(GPU-busy, launch) to first
    order, and only a pass whose kernels are shorter than their launches is launch-bound
    (NVIDIA, docs.nvidia.com/dl-cuda-graph, "CUDA Graph": launch overhead matters
    "especially when the CPU cannot keep up with feeding work to the GPU"). GPU-busy time is
    max(compute, memory) + collectives + per-layer fixed time; the engine's per-iteration
    and per-sequence CPU work (scheduling, input preparation) comes before the launches
    and stays serial. With no launch term (``launch_s`` 0) this is +0.0: no bit changes.
    """
    return np.maximum(launch_s - busy_s, 0.0)


def exposed_launch_one(launch_s: float, busy_s: float) -> float:
    """`exposed_launch` for one pass (the fleet's scalar path)."""
    d = launch_s - busy_s
    return d if d > 0.0 else 0.0
