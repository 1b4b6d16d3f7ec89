"""Fit the serving-engine terms to public measurements (rows -> targets: latency_targets.py; validation: latency_validation.py).


The fit: scipy `least_squares` on log(predicted / measured) over every figure but a TTFT
measured with other requests running (`fitted_on`: scored, not fitted) — TPOT, TTFT at
concurrency 1, end-to-end latency, throughput (a concurrency-1 TTFT is mostly one prefill,
the only measurement of prefill time in most sources) with a robust (Cauchy) loss, bounded
parameters, and a weak pull of each parameter towards its prior (one residual of
ln(value / prior) / ln 4 per parameter), so a term no training row constrains stays at
its sourced prior instead of wandering. Validation is leave-one-source-out: every row is
predicted by a fit that never saw its source.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.latency import capped_efficiency
from specagent.costmodel.dtypes import canonical_dtype, dtype_bytes
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.costmodel.moe import moe_union_experts
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import coefficients, estimate
from specagent.hardware.serving_engine import (LAYER_KINDS, EngineProfile, EngineProfileError, SchedulerDefault, load_engine,
                                               toml_location, with_base)
from specagent.hardware.profile import HardwareProfile, HardwareProfileError, Sourced, load_hardware
from specagent.measurements import MoeKernelRow, ServingRow, file_sha256, load_serving
from specagent.costmodel.latency_targets import FIT_ENGINES, Target, TargetPredictor, predict
from specagent.costmodel.moe_kernel_fit import KERNEL_TERMS, PRIOR_SCALE, KernelFit, fit_moe_kernels

# ------------------------------------------------------------------------- parameters
#: A Param field: GPU time per kernel a layer runs, so each layer kind's fixed time is that × the kernels the engine profile
#: counts for the kind (`kernels_per_layer`): an MoE layer (router, top-k, align, two grouped GEMMs, shared expert: 14
#: kernels) pays more than a dense MLP (4) even where a CUDA graph removes the launches, since each kernel still takes a
#: few microseconds of the GPU's time however little it computes.
PER_KERNEL_LAYER_US = "layer_us.per_kernel"


@dataclass(frozen=True)
class Param:
    """One fitted engine coefficient: which field, for which engines and GPUs, its prior and bounds."""

    name: str  # unique label
    field: str  # EngineProfile field, or "layer_us.<kind>" / "layer_us.*" for every kind, or PER_KERNEL_LAYER_US
    prior: float
    lower: float
    upper: float
    prior_source: str
    engines: tuple[str, ...] = ()  # () = every engine
    gpus: tuple[str, ...] = ()  # () = every GPU
    #: A factor (prior 1) on the value the parameters before it give this field ("" = an absolute value): a generation's
    #: term is the current engine's times its factor, so with no row of its own (a held-out source) it prices as the
    #: engine it extends instead of at an unrelated prior.
    scale_of: str = ""
    #: Released last: the fit first solves the model without this term (held at its prior), then continues from that
    #: optimum with it free, and keeps the lowest loss of its starts, so a term added to the model cannot leave the fit
    #: in a worse optimum than the model without it reaches (issue 49: from the priors alone, the weight-stream term's
    #: fit settled at a loss of 2.362 against 2.296 continued this way).
    staged: bool = False

    def applies(self, engine: str | Sequence[str], gpu_id: str) -> bool:
        """Whether the term prices `engine` (an id, or an engine's `lineage`: a generation profile takes the terms of
        the engine it extends) on GPU `gpu_id`."""
        ids = (engine,) if isinstance(engine, str) else tuple(engine)
        return (not self.engines or any(e in self.engines for e in ids)) and (not self.gpus or gpu_id in self.gpus)


def default_params(engines: Sequence[str] = FIT_ENGINES, moe: KernelFit | None = None) -> list[Param]:
    """The coefficients the public data can constrain; every other term keeps its sourced value.

    With `moe` (the per-operator fused-MoE fit) the grouped-GEMM efficiency and its half-saturation take their priors
    from published kernel times, so a serving source held out does not leave them to a single other source.
    """
    ps = [
        Param("bandwidth", "bandwidth", 0.72, 0.3, 1.0, "BLIS example configuration H100 BwEffConstant 0.72 (hardware profiles)"),
        Param("bandwidth@mi300x", "bandwidth", 0.72, 0.2, 1.0, "as 'bandwidth' (ROCm kernels on MI300X fitted apart)", gpus=("mi300x",)),
        # issue 28: two independent H20 publications (the Qwen3 Speed Benchmark's batch-1 SGLang runs and sglang#10467's
        # concurrency-32 throughput) both measure the H20 slower than the shared fraction of its 4.0 TB/s prices it, by a
        # factor that grows with the bytes a step reads; fitted apart like MI300X's, with the shared prior
        Param("bandwidth@h20", "bandwidth", 0.72, 0.2, 1.0, "as 'bandwidth' (H20 fitted apart: its published decode runs read "
              "weights at well under the shared fraction of its stated 4.0 TB/s, see docs/serving-engine-terms.md)", gpus=("h20",)),
        # issue 32: the term above prices the current engines on H20 (sgl-project/sglang#10467's rows); SGLang before 0.5
        # (the Qwen3 Speed Benchmark's 0.4.6.post1 rows, profile sglang-0.4) reads weights on H20 at its own, lower fraction,
        # fitted apart so that a current engine on H20 does not inherit that generation's decode path
        Param("bandwidth@h20/sglang-0.4", "bandwidth", 1.0, 0.25, 4.0, "1: SGLang before 0.5 reads weights on H20 as the "
              "current engines do until its rows say otherwise (see docs/serving-engine-terms.md)", engines=("sglang-0.4",),
              gpus=("h20",), scale_of="bandwidth"),
        # issue 49: a dense model's weights are long sequential reads, nearer the copy rate than the KV and routed-expert
        # reads the shared term also prices (`costmodel.latency.weight_stream_s`); a factor on the bandwidth terms above,
        # so each GPU's (and H20's engine generations') weight stream keeps its own scale
        Param("weight_stream", "weight_stream", 1.0, 0.5, 2.0, "1: the dense weight stream reads at the shared fraction of "
              "the bandwidth until the rows say otherwise (issue 49)", staged=True),
        Param("gemm_mfu", "gemm_mfu", 0.6, 0.15, 0.95, "inference-sim (BLIS) docs/HARDWARE_CONFIG_GUIDE.md example mfuPrefill 0.60 "
              "(A100) / 0.65 (H100) (hardware profiles' prefill_mfu)"),
        Param("gemm_mfu@mi300x", "gemm_mfu", 0.6, 0.05, 0.95, "as 'gemm_mfu' (ROCm GEMMs on MI300X fitted apart)", gpus=("mi300x",)),
        Param("attention_mfu", "attention_mfu", 0.5, 0.05, 0.95, "FlashAttention on Hopper: 35-75% of peak (FA2/FA3 papers)"),
        # the grouped-GEMM priors come from per-operator profiles of the Triton fused_moe kernel, the default MoE path of
        # vLLM and SGLang: the kernel fit's values (`moe`), else one L40S kernel time at a prefill's token count
        *((Param(n, n, moe.values[n], lo, hi, moe.describe()) for n, _, lo, hi, _ in KERNEL_TERMS if n != "kernel_bandwidth")
          if moe else
          (Param("moe_mfu", "moe_mfu", 0.22, 0.01, 0.95, "vllm-project/vllm#53710 (PR description, per-M kernel time table, "
                 "default config): Triton fused_moe FP8 W8A8, E=128 N=768 top-8 (Qwen3-30B-A3B shape) on one L40S, 1916.23 us "
                 "at 4096 tokens for 4096 x 75.5 MFLOP = 22% of the 733 TFLOP/s FP8 peak"),)),
        Param("per_sequence_us", "per_sequence_us", 4.0, 0.0, 200.0, "BLIS trained-physics beta6 ~4 us per request (vLLM, H100)"),
        Param("kernel_us", PER_KERNEL_LAYER_US, 2.46, 0.0, 30.0, "BLIS trained-physics beta5 ~32 us per decoder layer (vLLM, "
              "H100) over the 13 kernels counted in a Llama layer (full attention 9 + dense MLP 4)"),
        Param("kernel_us@mi300x", PER_KERNEL_LAYER_US, 2.46, 0.0, 30.0, "as 'kernel_us' (ROCm kernels on MI300X fitted apart)",
              gpus=("mi300x",)),
    ]
    for e in engines:
        ps.append(Param(f"iteration_us@{e}", "iteration_us", 126.0, 1.0, 20000.0,
                        "BLIS trained-physics beta7 ~126 us per step (vLLM, H100)", engines=(e,)))
        ps.append(Param(f"request_us@{e}", "request_us", 15563.0, 10.0, 200000.0,
                        "BLIS trained-physics alpha0 ~15.6 ms per request (vLLM, H100)", engines=(e,)))
        # the CPU cost of an eager pass per counted kernel: Python dispatch and launch differ by engine, and the kernel
        # counts (hardware/engines/*.toml kernels_per_layer) are counted from the model code, not profiled, so this
        # also absorbs their error; it only shows where a pass is not graph-captured and its GPU work is shorter
        ps.append(Param(f"launch_us@{e}", "launch_us", 15.0, 1.0, 300.0, "facebookresearch/metaseq PR #270: CUDA graphs cut "
                        "OPT-175B decode on 8xA100 from 95 to 66 ms per token, ~15 us per eager kernel", engines=(e,)))
    return ps


#: Upper bounds of an own engine's host-side terms (µs): a user's server may be a Python server on a CPU (plain
#: `transformers serve` runs `model.generate` per request, tens of ms of host work per step), far beyond vLLM on a GPU,
#: whose BLIS-sized bounds (20 ms per iteration, 200 ms per request) would pin the fit to its edge; these are the engine
#: profile's typo guard (10 s) for a request and a tenth of it for a step.
OWN_UPPER_US = {"iteration_us": 1_000_000.0, "request_us": 10_000_000.0, "launch_us": 10_000.0}


def _base_value(eng: EngineProfile, hw: HardwareProfile, field_name: str) -> tuple[float, str] | None:
    """The value `eng` on `hw` prices a fitted field with today (an engine term, else the hardware's), with its source."""
    fallback = {"iteration_us": hw.pass_overhead_us, "gemm_mfu": hw.prefill_mfu, "bandwidth": hw.bandwidth_efficiency}
    if field_name == PER_KERNEL_LAYER_US:
        kernels = sum(float(eng.layer_kernels[k].value) for k in LAYER_KINDS)
        if kernels <= 0:
            return None
        per = sum(float(eng.layer_us[k].value) for k in LAYER_KINDS) / kernels
        return per, f"mean per kernel of the per-layer times ({eng.layer_us['full_attention'].source})"
    v = getattr(eng, field_name, None) if field_name in {f.name for f in dataclasses.fields(eng)} else None
    v = v if v is not None else fallback.get(field_name)
    return None if v is None or isinstance(v.value, bool) else (float(v.value), v.source)


def own_params(params: Sequence[Param], eng: EngineProfile, hw: HardwareProfile) -> list[Param]:
    """`params` with priors from the profile a user's fit starts from (`--base-engine`, e.g. `calibrate`'s measured
    engine terms on the server's machine, resolved for its hardware profile) instead of vLLM-on-H100 figures.

    A term the base prices at 0 (e.g. `calibrate`'s request_us: "no API server") says the base has no such part, not
    that the server has none: it keeps the published prior. Host-side terms get `OWN_UPPER_US` bounds.
    """
    eng = eng.for_hardware(hw)
    out = []
    for p in params:
        if not p.applies(eng.lineage, hw.id) or p.scale_of:  # a factor keeps its prior 1
            out.append(p)
            continue
        upper = max(p.upper, OWN_UPPER_US.get(p.field, p.upper))
        base = _base_value(eng, hw, p.field)
        if base is None or not base[0] > 0:
            out.append(dataclasses.replace(p, upper=upper))
            continue
        value, src = base
        lower = min(p.lower, value)
        upper = max(upper, value)
        out.append(dataclasses.replace(p, prior=value, lower=lower, upper=upper, prior_source=f"{eng.path or eng.id}: {src}"))
    return out


def serving_params(kernels: str | Path | None = None) -> tuple[list[Param], KernelFit]:
    """The parameters `latency fit` and `latency validate` use: `default_params` with MoE priors from the kernel fit.

    `kernels` is a moe_kernels.csv (default: the shipped one); its fit uses no serving row, so
    it is outside every serving source a validation holds out.
    """
    from specagent.measurements import load_moe_kernels

    k = fit_moe_kernels(load_moe_kernels(kernels))
    if kernels is not None:
        k = dataclasses.replace(k, dataset=str(kernels))
    return default_params(moe=k), k


def engine_with(base: EngineProfile, gpu_id: str, params: Sequence[Param], values: Sequence[float], source: str) -> EngineProfile:
    """`base` on `gpu_id` with every applicable parameter set to its value (later parameters win)."""
    eng = base.for_hardware(gpu_id)
    changes: dict[str, Any] = {}
    for p, v in zip(params, values):
        if not p.applies(eng.lineage, gpu_id):
            continue
        if p.scale_of:
            base = changes.get(p.scale_of, getattr(eng, p.scale_of))
            if base is None:
                raise ValueError(f"parameter '{p.name}' is a factor on '{p.scale_of}', which nothing before it sets")
            changes[p.field] = Sourced(float(base.value) * float(v), source)
            continue
        s = Sourced(float(v), source)
        if p.field == "layer_us.*":
            changes["layer_us"] = {k: s for k in LAYER_KINDS}
        elif p.field == PER_KERNEL_LAYER_US:  # GPU time per kernel a layer runs, even graph-captured, by its kernel count
            changes["layer_us"] = {k: Sourced(float(v) * float(eng.layer_kernels[k].value), source) for k in LAYER_KINDS}
        elif p.field.startswith("layer_us."):
            changes["layer_us"] = {**changes.get("layer_us", eng.layer_us), p.field.split(".", 1)[1]: s}
        else:
            changes[p.field] = s
    return dataclasses.replace(eng, **changes)


# ------------------------------------------------------------------------- fit
@dataclass
class FitResult:
    params: list[Param]
    values: np.ndarray
    rows: int  # targets fitted
    sources: list[str]
    cost: float
    success: bool
    message: str
    # per parameter, whether any fitted figure's prediction depends on it (a nonzero Jacobian column); () = not known
    informed: tuple[bool, ...] = ()




def _solve(targets: Sequence[Target], params: Sequence[Param], fixed: Sequence[Param], fixed_values: Sequence[float],
           x0: Sequence[float], f_scale: float, max_nfev: int, loss: str, prior_scale: float) -> tuple[np.ndarray, Any]:
    """One bounded robust least-squares solve of `params` (log space), `fixed` held at their values."""
    from scipy.optimize import least_squares

    measured = np.array([t.measured for t in targets])
    lo = np.log([p.lower if p.lower > 0 else 1e-3 for p in params])
    hi = np.log([p.upper for p in params])
    prior = np.log([max(p.prior, 1e-3) for p in params])
    start = np.clip(np.log(np.maximum(np.asarray(x0, dtype=float), 1e-3)), lo, hi)
    bases = {t.dep.serving_engine.id: t.dep.serving_engine for t in targets}
    every = [*fixed, *params]
    # a deployment's engine depends only on the parameters that apply to its engine and GPU: their values key the
    # predictions `TargetPredictor` keeps, so a trial that moves none of them (most Jacobian columns) reuses them exactly
    applies: dict[tuple[str, str, bool], tuple[int, ...]] = {}
    pricer = TargetPredictor(targets)

    def residuals(z: np.ndarray) -> np.ndarray:
        vals = [*fixed_values, *np.exp(z)]
        cache: dict[tuple[str, str, bool], EngineProfile] = {}

        def engine_for(dep: Deployment) -> EngineProfile:
            k = (dep.serving_engine.id, dep.hardware.id, bool(dep.serving_engine.cuda_graphs.value))
            if k not in cache:
                base = dataclasses.replace(bases[dep.serving_engine.id], cuda_graphs=dep.serving_engine.cuda_graphs)
                cache[k] = engine_with(base, dep.hardware.id, every, vals, "fit")
            return cache[k]

        def key_for(dep: Deployment) -> tuple:
            k = (dep.serving_engine.lineage, dep.hardware.id, dep.model.is_moe)
            if k not in applies:
                applies[k] = moves_price(every, *k)
            return tuple(float(vals[i]) for i in applies[k])

        pred = pricer(engine_for, key_for)
        return np.concatenate([np.log(pred / measured), (z - prior) / prior_scale])

    res = least_squares(residuals, start, bounds=(lo, hi), loss=loss, f_scale=f_scale, max_nfev=max_nfev, x_scale=1.0, diff_step=1e-3)
    return np.exp(res.x), res


#: Engine fields only routed-expert GEMMs read: a model without MoE layers computes 0 FLOPs at them, bit for bit.
MOE_FIELDS = ("moe_mfu", "moe_tflops", "moe_pad_tokens")
#: Parameter fields that set every layer kind's time at once (`engine_with`).
WHOLE_LAYER_FIELDS = ("layer_us.*", PER_KERNEL_LAYER_US)


def moves_price(params: Sequence[Param], engine_id: str | Sequence[str], gpu_id: str, moe: bool) -> tuple[int, ...]:
    """Indices of the `params` a deployment's price can depend on: those that apply to its engine and GPU, less those a
    later one overwrites in `engine_with` (a per-GPU term after its engine-wide one: later parameters win) and, for a
    model without MoE layers, the MoE fields. What is left out cannot change a bit of its prediction, so a fit's
    trial that moves only those reuses the prediction (`TargetPredictor`) — the same numbers, fewer repricings."""
    on = [i for i, p in enumerate(params) if p.applies(engine_id, gpu_id) and (moe or p.field not in MOE_FIELDS)]

    def overwritten(i: int) -> bool:  # a later absolute value of its field replaces it (a later factor multiplies it)
        f = params[i].field
        return any(not params[j].scale_of and (params[j].field == f or (params[j].field in WHOLE_LAYER_FIELDS and f.startswith("layer_us")))
                   for j in on if j > i)

    return tuple(i for i in on if not overwritten(i))


def fitted_on(t: Target) -> bool:
    """Whether a figure enters the fit (every figure is validated): all but a TTFT with other requests running.

    The sources measure mean TTFTs that grow 2-20 decode iterations from concurrency 1 to
    16-256 (`Validation.source_offsets` shows it as error within sources); the closed loop
    gives a fraction of that and no term describes the rest. Fitted anyway, those figures
    pushed the growth into constants that price every pass at any load: vLLM's request_us
    to 124 ms (53 ms without the RTX 5090 rows; 16 ms fitted on concurrency-1 TTFTs, near
    BLIS's 15.6 ms) and the grouped-GEMM ceiling from 302 to 149-174 TFLOP/s. A TTFT at batch 1
    is one request overhead and one prefill, which the terms do describe; one that waited for a sequence slot
    (`Target.queued`: the engine's max_num_seqs below the concurrency) is scored, not fitted, for the same reason.
    """
    if t.metric == "e2e" and not t.static:
        return False  # a closed loop's lifetime is TTFT + (O − 1)·TPOT of figures fitted already: scored, not counted twice
    return not (t.metric == "ttft" and (t.batch > 1 or t.queued > 0))


def fit(targets: Sequence[Target], params: Sequence[Param] | None = None, x0: Sequence[float] | None = None,
        f_scale: float = 0.2, max_nfev: int = 200, loss: str = "cauchy", prior_scale: float = PRIOR_SCALE) -> FitResult:
    """Least-squares fit of `params` on log(predicted / measured) over the figures `fitted_on` keeps, robust loss, bounded, weak prior.

    One stage over TPOT, TTFT at concurrency 1, end-to-end latency and throughput together:
    a TTFT carries the engine's per-request overhead (``request_us``, fitted per engine) and
    one prefill, so it is where prefill-side terms (GEMM, attention and grouped-GEMM
    efficiency) are measured at all. `loss` is scipy's robust loss ("cauchy" by default: a few rows off by
    10x must not drag every coefficient; "soft_l1" is the milder choice); `prior_scale` is
    how far (in ln units) a coefficient may move from its prior at the cost of one row off
    by a factor e.

    From the priors (no `x0`) the loss is solved twice and the lower optimum kept: once from the priors, and once
    continued from a first solve on the decode-side figures alone (every figure but the TTFTs). The TTFTs are where a
    slow prefill and a large per-request overhead trade off (SGLang's eager launches against its request_us: both
    explain a concurrency-1 TTFT), and from the priors the solver can settle in the basin that spends the overhead
    first, a worse optimum of the same loss (issue 49: cost 2.442 against 2.316 once the per-layer floors overlap
    weight reads). The continuation pins the decode-side terms on the figures that separate them, then lets the TTFTs
    place the rest. Where parameters are `staged`, a third start: the same two solves of the model without them (held
    at their priors), continued with every term free. Every start depends on the fitted figures only, so a held-out
    fit does the same on its own figures.
    """
    params = list(params or serving_params()[0])
    targets = [t for t in targets if fitted_on(t)]
    if not targets:
        raise ValueError("nothing to fit: no targets (a TTFT with other requests running is validated, not fitted)")
    x = np.array(x0 if x0 is not None else [p.prior for p in params], dtype=float)
    opts = dict(f_scale=f_scale, max_nfev=max_nfev, loss=loss, prior_scale=prior_scale)
    v, res = _solve(targets, params, [], [], x, **opts) if x0 is not None else _from_priors(targets, params, [], [], opts)
    free = [p for p in params if not p.staged]
    if x0 is None and len(free) < len(params):
        held = [p for p in params if p.staged]
        inner, _ = _from_priors(targets, free, held, [p.prior for p in held], opts)
        at = iter(inner)
        v2, res2 = _solve(targets, params, [], [], [p.prior if p.staged else next(at) for p in params], **opts)
        if float(res2.cost) < float(res.cost):
            v, res = v2, res2
    jac = np.asarray(res.jac)[: len(targets)]  # the figures' rows (the prior rows follow)
    return FitResult(params, v, len(targets), sorted({t.row.source for t in targets}), float(res.cost), bool(res.success),
                     f"{len(params)} terms on {len(targets)} figures: {res.message}",
                     tuple(bool(np.any(jac[:, j] != 0)) for j in range(len(params))))


def _from_priors(targets: Sequence[Target], params: Sequence[Param], fixed: Sequence[Param], fixed_values: Sequence[float],
                 opts: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The lower optimum of two solves from the priors: directly, and continued from a first solve on the decode-side
    figures alone (every figure but the TTFTs; `fit` says why)."""
    x = [p.prior for p in params]
    v, res = _solve(targets, params, fixed, fixed_values, x, **opts)
    decode_side = [t for t in targets if t.metric != "ttft"]
    if 0 < len(decode_side) < len(targets):
        first, _ = _solve(decode_side, params, fixed, fixed_values, x, **opts)
        v2, res2 = _solve(targets, params, fixed, fixed_values, first, **opts)
        if float(res2.cost) < float(res.cost):
            v, res = v2, res2
    return v, res


def fitted_engine_for(result: FitResult, source: str = "fit") -> Callable[[Deployment], EngineProfile]:
    def engine_for(dep: Deployment) -> EngineProfile:
        return engine_with(dep.serving_engine, dep.hardware.id, result.params, result.values, source)
    return engine_for


# ------------------------------------------------------------------------- collectives
def collective_alpha(rows: Sequence[Any], op: str, implementation: str, gpu: str, gpus: int,
                     max_bytes: float = 1 << 20) -> tuple[float, float, int]:
    """(α µs, β GB/s, rows) of latency = α + bytes/β fitted by least squares on one collective's small messages.

    `rows` are `measurements.CollectiveRow`s; messages up to `max_bytes` (a decode step's
    all-reduce carries batch × hidden × 2 bytes: 8 KiB to 1 MiB for batch 1 to 128).
    """
    pts = [(r.message_bytes, r.latency_us) for r in rows if r.op == op and r.implementation == implementation and r.gpu == gpu
           and r.gpus == gpus and r.message_bytes <= max_bytes]
    if len(pts) < 2:
        raise ValueError(f"need two or more {op}/{implementation} rows on {gpus}x {gpu} up to {max_bytes:.0f} bytes, found {len(pts)}")
    b = np.array([p[0] for p in pts])
    lat = np.array([p[1] for p in pts])
    (alpha, slope), *_ = np.linalg.lstsq(np.vstack([np.ones_like(b), b]).T, lat, rcond=None)
    return float(alpha), (float(1e-3 / slope) if slope > 0 else math.inf), len(pts)


# ------------------------------------------------------------------------- fitted profiles
def provenance(path: str | Path, n_rows: int, rows_used: int, n_targets: int, sources: Sequence[str]) -> dict[str, Any]:
    return {"dataset": str(Path(path).name), "dataset_sha256": file_sha256(path), "rows": n_rows, "rows_used": rows_used,
            "figures_fitted": n_targets, "sources": len(sources), "date": _dt.date.today().isoformat(), "tool": "specagent latency fit"}


def merge_tables(profile: dict[str, Any], tables: dict[str, Any]) -> dict[str, Any]:
    """An engine profile's TOML table with fitted tables written over it (nested dicts merged)."""
    out = dict(profile)
    for k, v in tables.items():
        out[k] = merge_tables(out.get(k, {}), v) if isinstance(v, dict) and "value" not in v else v
    return out


def figures_by_gpu(targets: Sequence[Target]) -> dict[str, dict[str, int]]:
    """GPU id -> engine id -> figures the fit uses on it (`fitted_on`): which engines' rows a per-GPU term rests on."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in targets:
        if fitted_on(t):
            out[t.dep.hardware.id][t.dep.serving_engine.id] += 1
    return {g: dict(sorted(v.items())) for g, v in sorted(out.items())}


def _coverage_note(gpu: str, coverage: dict[str, dict[str, int]] | None, engines: Sequence[str]) -> str:
    """For a per-GPU term every engine takes: which engines' figures fitted it, and which take it with none of their own."""
    if coverage is None:
        return ""
    have = coverage.get(gpu, {})
    without = [e for e in engines if e not in have]
    return (f"; figures on {gpu} by engine: {', '.join(f'{e} {n}' for e, n in have.items()) or 'none'}"
            + (f"; {', '.join(without)} take this value with no figure of their own on {gpu}" if without else ""))


def fitted_tables(result: FitResult, prov: dict[str, Any], engines: Sequence[str] = FIT_ENGINES,
                  profiles: dict[str, EngineProfile] | None = None,
                  coverage: dict[str, dict[str, int]] | None = None) -> dict[str, dict[str, Any]]:
    """Per engine id ("*": every engine), the TOML tables a fit changes: engine-wide fields and [hardware.<gpu>] ones.

    A per-kernel layer time is written as each layer kind's time, value × the kernels the profile of each of `engines`
    counts for that kind (from `profiles` where given, else the shipped profile), so a profile holds times per layer as
    everything else reads them. A user's own data (prov["dataset_path"]) is named by its path and its full sha256.
    With `coverage` (`figures_by_gpu`), a per-GPU term every engine takes says in its source which engines' figures
    fitted it and which engines take it with none of their own (vLLM on H20: no vLLM row), never silently.
    """
    data = (f"{prov['dataset_path']} (sha256 {prov['dataset_sha256']}" if "dataset_path" in prov
            else f"measurements/{prov['dataset']} (sha256 {prov['dataset_sha256'][:12]}")
    src = (f"fit: specagent latency fit on {data}, {prov['figures_fitted']} "
           f"figures from {prov['rows_used']} of its {prov['rows']} rows, {prov['sources']} sources, {prov['date']}); Cauchy loss on log "
           f"error, every term on TPOT, concurrency-1 TTFT, e2e and throughput together; prior {{prior}} ({{psrc}})")
    unmoved = (f"prior, not fitted: no figure of {data}) depends on it (a zero Jacobian column), so the fit left it at its "
               f"prior {{prior}} ({{psrc}})")
    out: dict[str, dict[str, Any]] = defaultdict(dict)

    def put(e: str, gpus: tuple[str, ...], section: str, items: dict[str, dict[str, Any]]) -> None:
        where = out[e] if not gpus else out[e].setdefault("hardware", {})
        for g in (gpus or (None,)):
            (where if g is None else where.setdefault(g, {})).setdefault(section, {}).update(items)

    def resolved(i: int, field_name: str, e: str, gpu: str) -> float:
        """The value parameters 0..i-1 give `field_name` for engine `e` (its lineage) on `gpu` ("": any GPU)."""
        lineage = (profiles[e] if profiles and e in profiles else load_engine(e)).lineage
        val = None
        for q, qv in zip(result.params[:i], result.values[:i]):
            if q.applies(lineage, gpu) and q.field == field_name:
                val = float(qv) if not q.scale_of else float(qv) * val  # type: ignore[operator]
        if val is None:
            raise ValueError(f"no parameter before #{i} sets '{field_name}' for engine '{e}' on '{gpu or 'any GPU'}'")
        return val

    informed = result.informed or (True,) * len(result.params)
    for i, (p, v, moved) in enumerate(zip(result.params, result.values, informed)):
        # the prior to 12 significant digits: a prior the MoE kernel fit computed differs in its last bits from one
        # CPU's BLAS to another's (286.9021864761188 here, 286.902186476119 on the machine that wrote the profiles)
        psrc = (src if moved else unmoved).format(prior=repr(float(f"{p.prior:.12g}")), psrc=p.prior_source)
        if p.scale_of:  # a factor: written as the value it prices, on each of its engines and GPUs
            for e in p.engines or engines:
                for g in p.gpus or ("",):
                    base = resolved(i, p.scale_of, e, g)
                    fsrc = f"{float(v):.4g} x the {p.scale_of} the engine it extends has here ({base:.4g}); {psrc}"
                    section, keys = toml_location(p.field)
                    put(e, (g,) if g else (), section, {k: {"value": float(f"{base * float(v):.4g}"), "source": fsrc} for k in keys})
            continue
        if p.field == PER_KERNEL_LAYER_US:
            per_kernel = float(f"{v:.4g}")
            for e in (p.engines or engines):
                counts = (profiles[e] if profiles and e in profiles else load_engine(e)).layer_kernels
                put(e, p.gpus, toml_location("layer_us.*")[0],
                    {k: {"value": float(f"{per_kernel * float(counts[k].value):.4g}"), "source": f"{per_kernel:g} us per kernel x "
                         f"{int(counts[k].value)} kernels per layer (kernels_per_layer.{k}); {psrc}"} for k in LAYER_KINDS})
            continue
        section, keys = toml_location(p.field)
        if p.gpus and not p.engines and coverage is not None:  # one item per GPU, each saying whose figures set it
            for g in p.gpus:
                put("*", (g,), section, {k: {"value": float(f"{v:.4g}"), "source": psrc + _coverage_note(g, coverage, engines)}
                                         for k in keys})
            continue
        item = {"value": float(f"{v:.4g}"), "source": psrc}
        for e in (p.engines or ("*",)):
            put(e, p.gpus, section, {k: item for k in keys})
    return dict(out)


def own_engine(base: EngineProfile, engine_id: str, max_num_seqs: int | None = None) -> EngineProfile:
    """`base` renamed `engine_id`: the profile a user's own measurements are priced and fitted with.

    `max_num_seqs`: the server's own limit on sequences it runs together (vLLM --max-num-seqs; plain `transformers
    serve`, which generates one request at a time: 1), one scheduler row for every GPU in place of `base`'s; the
    token budget stays `base`'s catch-all row's (at least the limit). The closed loop (`latency_targets`) and the
    fleet (`replay`, `plan`) then queue the clients beyond it instead of batching them.
    """
    # one's own engine prices one's own rows only: a generation's version range and lineage are not carried over
    eng = dataclasses.replace(base, id=engine_id.lower(), aliases=(), versions_below=None, extends="")
    if max_num_seqs is None:
        return eng
    budget = max(max_num_seqs, base.scheduler[-1].max_batched_tokens) if base.scheduler else max(max_num_seqs, 2048)
    row = SchedulerDefault(0.0, (), int(max_num_seqs), int(budget),
                           f"given: the server runs at most {max_num_seqs} sequence(s) together (latency fit --max-num-seqs); "
                           f"token budget {budget} from {base.id}'s profile")
    return dataclasses.replace(eng, scheduler=(row,))


def scheduler_table(eng: EngineProfile) -> list[dict[str, Any]]:
    """`eng`'s [[scheduler]] rows as TOML tables."""
    return [{"min_gpu_memory_gib": r.min_gpu_memory_gib, **({"not_gpus": list(r.not_gpus)} if r.not_gpus else {}),
             "max_num_seqs": r.max_num_seqs, "max_batched_tokens": r.max_batched_tokens, "source": r.source} for r in eng.scheduler]


def unmeasured_params(result: FitResult, gpus: Sequence[str]) -> list[Param]:
    """The fit's per-GPU terms for GPUs none of the data ran on: their values are their priors, moved by no figure."""
    measured = set(gpus)
    return [p for p in result.params if p.gpus and not measured.intersection(p.gpus)]


def own_engine_profile(base: EngineProfile, engine_id: str, result: FitResult, prov: dict[str, Any],
                       max_num_seqs: int | None = None, gpus: Sequence[str] = ()) -> dict[str, Any]:
    """The TOML table of a whole serving-engine profile `engine_id`: `base`'s file with the fitted fields written over it.

    Every fitted term's source names the data file and its sha256; the others keep `base`'s sources (the scheduler
    rows: `own_engine`'s, where `max_num_seqs` is given). Per-GPU terms for GPUs not among `gpus` (those the data ran
    on) are left out: written with a "fit" source they would claim a measurement for a prior, and replace `base`'s
    own sourced values on those GPUs. `[provenance.fit] gpus` records which GPUs the fit saw.
    """
    import tomllib

    eng = own_engine(base, engine_id, max_num_seqs)
    left_out = {p.name for p in unmeasured_params(result, gpus)}
    keep = [i for i, p in enumerate(result.params) if p.name not in left_out]
    result = dataclasses.replace(result, params=[result.params[i] for i in keep], values=np.asarray(result.values)[keep],
                                 informed=tuple(result.informed[i] for i in keep) if result.informed else ())
    prov = {**prov, "gpus": sorted(set(gpus))}
    tables = fitted_tables(result, prov, engines=(eng.id,), profiles={eng.id: eng})
    # a whole profile: a generation's file (`extends`) is written read over its engine's, so it stands on its own
    data = with_base(tomllib.loads(Path(base.path).read_text(encoding="utf-8")), Path(base.path))
    data.pop("extends", None)
    data = merge_tables(merge_tables(data, tables.get("*", {})), tables.get(eng.id, {}))
    if max_num_seqs is not None:
        data["scheduler"] = scheduler_table(eng)
    data.pop("versions", None)  # see own_engine: it would map the base engine's rows of those versions to this profile
    data.update(id=eng.id, name=f"{base.name}, fitted to {Path(prov['dataset_path']).name}", aliases=[])
    data["provenance"] = {**data.get("provenance", {}), "base_profile": base.id, "fit": prov}
    return data
