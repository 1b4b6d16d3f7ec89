"""A deployment: one model replica on some GPUs, with parallelism and storage formats.

It answers "does it fit?" before anything is priced, because a cost estimate for a model
that cannot be loaded is worse than no estimate.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from specagent.common.errors import DeprecatedSpelling

from specagent.costmodel.dtypes import COMPUTE_DTYPE, dtype_bytes
from specagent.costmodel.model_spec import ModelSpec
from specagent.hardware.serving_engine import DEFAULT_ENGINE, EngineProfile, load_engine
from specagent.hardware.profile import HardwareProfile

#: Fraction of device memory a serving engine lets the model use; vLLM's default
#: ``gpu_memory_utilization`` is 0.9 (vLLM EngineArgs documentation).
DEFAULT_MEMORY_UTILIZATION = 0.9
MEMORY_UTILIZATION_SOURCE = "vLLM EngineArgs default gpu_memory_utilization = 0.9"

#: Bounds that catch a typo, not limits of the model: a replica on more GPUs than any announced scale-up domain
#: (NVIDIA Vera Rubin Ultra NVL576, GTC 2025 keynote: 576 GPUs), or with under 1% of its memory usable, is a mistake
#: (the latter would also divide the fit check by a subnormal number).
MAX_GPUS = 1024
MIN_MEMORY_UTILIZATION = 0.01

PARALLELISMS = ("tp", "tp+ep")
#: Formats served engines run each tensor in (vLLM, SGLang, TensorRT-LLM): activations in a float format (int4/int8
#: are weight-only formats, dequantised before the GEMM), the Gated DeltaNet state in a float format (its recurrent
#: update accumulates), KV in NVFP4 only on GPUs with FP4 tensor cores (Blackwell).
ACTIVATION_DTYPES = ("fp32", "bf16", "fp16", "fp8")
STATE_DTYPES = ("fp32", "bf16", "fp16")


class DeploymentDoesNotFit(ValueError):
    """Weights plus KV cache plus recurrent state exceed the replica's usable memory."""

    def __init__(self, message: str, need_bytes: float, have_bytes: float, min_gpus: int | None):
        super().__init__(message)
        self.need_bytes = need_bytes
        self.have_bytes = have_bytes
        self.min_gpus = min_gpus


def tp_problem(model: ModelSpec, gpus: int) -> str | None:
    """Why `model` cannot be split tensor-parallel over `gpus` GPUs (None when it can).

    Why: an engine shards every attention layer by heads, so TP must divide the query heads and
    the Gated DeltaNet heads; KV heads are split when TP divides them and replicated when they
    divide TP (vLLM, SGLang), never otherwise. A price for TP = 7 on 16 heads is for a
    deployment no engine can start."""
    if gpus == 1:
        return None
    a = model.attention
    heads = [("num_attention_heads", a.num_heads)]
    if model.linear is not None and model.num_linear_layers:
        heads += [("linear_num_key_heads", model.linear.num_key_heads), ("linear_num_value_heads", model.linear.num_value_heads)]
    for name, n in heads:
        if n % gpus:
            return f"{gpus} does not divide {model.name}'s {n} {name}"
    kv = a.num_kv_heads
    if kv % gpus and gpus % kv:
        return f"{gpus} neither divides {model.name}'s {kv} num_key_value_heads nor is a multiple of them"
    return None


def valid_gpu_counts(model: ModelSpec, upto: int = MAX_GPUS) -> list[int]:
    """Every tensor-parallel degree in [1, upto] `model` can be served at."""
    return [g for g in range(1, upto + 1) if tp_problem(model, g) is None]


class ContextTooLong(DeploymentDoesNotFit):
    """A sequence longer than the model's context window: no GPU count makes it fit."""

    def __init__(self, message: str, context: int, window: int):
        super().__init__(message, float(context), float(window), None)
        self.context = context
        self.window = window


def default_engine() -> EngineProfile:
    """The serving engine a deployment names when none is given (`hardware.serving_engine.DEFAULT_ENGINE`)."""
    return load_engine(DEFAULT_ENGINE)


@dataclass(frozen=True)
class Deployment:
    model: ModelSpec
    hardware: HardwareProfile
    gpus: int = 1
    parallelism: str = "tp"  # "tp": every layer tensor-parallel; "tp+ep": experts spread whole across GPUs
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    state_dtype: str = "fp32"  # Gated DeltaNet recurrent state is kept in float32 (config.json mamba_ssm_dtype)
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    #: The serving engine whose fixed costs (costmodel.latency) every pass pays; `ideal` is the bare roofline.
    serving_engine: EngineProfile = field(default_factory=default_engine)

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus must be in [1, {MAX_GPUS:,}], got {self.gpus}")
        if self.parallelism not in PARALLELISMS:
            raise ValueError(f"parallelism must be one of {PARALLELISMS}, got '{self.parallelism}'")
        for d in (self.weight_dtype, self.kv_dtype, self.activation_dtype, self.state_dtype):
            dtype_bytes(d)
        if self.activation_dtype.lower() not in ACTIVATION_DTYPES:
            raise ValueError(f"activation_dtype: no serving engine runs activations in '{self.activation_dtype}' "
                             f"(expected one of {', '.join(ACTIVATION_DTYPES)}; int4/int8 are weight formats)")
        if self.state_dtype.lower() not in STATE_DTYPES:
            raise ValueError(f"state_dtype: the recurrent state accumulates, so it is kept in a float format "
                             f"({', '.join(STATE_DTYPES)}), not '{self.state_dtype}'")
        if self.kv_dtype.lower() == "nvfp4" and "fp4" not in self.hardware.peak_tflops:
            raise ValueError(f"kv_dtype: an NVFP4 KV cache needs FP4 tensor cores, which {self.hardware.name} does not have "
                             f"(its profile lists {', '.join(sorted(self.hardware.peak_tflops))})")
        if not MIN_MEMORY_UTILIZATION <= self.memory_utilization <= 1:
            raise ValueError(f"memory_utilization must be in [{MIN_MEMORY_UTILIZATION:g}, 1], got {self.memory_utilization}")
        if self.parallelism == "tp+ep" and not self.model.is_moe:
            raise ValueError(f"parallelism 'tp+ep' needs an MoE model; {self.model.name} is dense")
        lim = self.serving_engine.max_gpus
        if lim is not None and self.gpus > int(lim.value):
            raise ValueError(f"serving engine '{self.serving_engine.id}' ({self.serving_engine.path or 'in memory'}) prices at most {int(lim.value)} GPU(s) "
                             f"([limits] max_gpus: {lim.source}); {self.gpus} GPUs need collective latencies it does not have: "
                             "calibrate on more GPUs or pick another serving engine")
        problem = tp_problem(self.model, self.gpus)
        if problem is not None:
            ok = ", ".join(map(str, valid_gpu_counts(self.model, 64)))
            raise ValueError(f"gpus: a replica on {self.gpus} GPUs splits attention {self.gpus} ways, but {problem}; "
                             f"valid GPU counts: {ok}, ...")

    # --- sizes --------------------------------------------------------------------
    @property
    def weight_bytes_per_param(self) -> float:
        return dtype_bytes(self.weight_dtype)

    @property
    def high_precision_bytes(self) -> float:
        """Embeddings, LM head, norms and router stay in 16 bits in 8/4-bit checkpoints."""
        return max(2.0, self.weight_bytes_per_param)

    @property
    def compute_dtype(self) -> str:
        """GEMM precision: FP8 weights run FP8 GEMMs where the GPU has them, else dequantise to BF16."""
        dt = COMPUTE_DTYPE[self.weight_dtype.lower()]
        return dt if dt in self.hardware.peak_tflops else "bf16"

    def weight_bytes(self) -> float:
        p = self.model.param_counts()
        hp = p.embedding + p.lm_head + p.norms + p.router
        return (p.total - hp) * self.weight_bytes_per_param + hp * self.high_precision_bytes

    def dense_weight_bytes(self) -> float:
        """The weights every pass reads once whatever its tokens: all but the embedding table, the LM head and the
        routed experts (norms and router in 16 bits)."""
        p = self.model.param_counts()
        hp_params = p.norms + p.router
        dense = p.total - p.embedding - p.lm_head - p.routed_experts
        return float((dense - hp_params) * self.weight_bytes_per_param + hp_params * self.high_precision_bytes)

    def lm_head_bytes(self) -> float:
        """The LM head, read once per pass that computes logits, in 16 bits (as the roofline prices it)."""
        return float(self.model.vocab * self.model.hidden * self.high_precision_bytes)

    def kv_bytes_per_token(self) -> float:
        return self.model.kv_bytes_per_token(dtype_bytes(self.kv_dtype))

    def state_bytes_per_sequence(self) -> float:
        return self.model.state_bytes_per_sequence(dtype_bytes(self.state_dtype), dtype_bytes(self.activation_dtype))

    @property
    def usable_bytes(self) -> float:
        return self.gpus * self.hardware.capacity_bytes * self.memory_utilization

    def memory_needed(self, sequences: int = 1, context: int = 0) -> float:
        return self.weight_bytes() + sequences * (context * self.kv_bytes_per_token() + self.state_bytes_per_sequence())

    def max_sequences(self, context: int) -> int:
        """How many sequences of this context fit next to the weights (0 if the weights alone do not)."""
        free = self.usable_bytes - self.weight_bytes()
        per_seq = context * self.kv_bytes_per_token() + self.state_bytes_per_sequence()
        if free <= 0:
            return 0
        return int(free // per_seq) if per_seq > 0 else 10**9

    def min_gpus(self, sequences: int = 1, context: int = 0) -> int | None:
        """The fewest GPUs, at a TP degree the model can be split at, that hold the weights and `sequences` (None: > MAX_GPUS)."""
        per_gpu = self.hardware.capacity_bytes * self.memory_utilization
        need = max(1, math.ceil(self.memory_needed(sequences, context) / per_gpu))
        if need > MAX_GPUS:
            return None
        return next((g for g in range(need, MAX_GPUS + 1) if tp_problem(self.model, g) is None), None)

    def check_context(self, context: int) -> None:
        """Refuse a sequence longer than the model's context window (its config's max_position_embeddings)."""
        window = self.model.max_positions
        if window > 0 and context > window:
            raise ContextTooLong(f"{self.model.name} reads at most {window:,} tokens (max_position_embeddings in "
                                 f"{self.model.source or 'its config'}), but a sequence of {context:,} tokens was asked for; "
                                 "a model served with a longer window (e.g. YaRN rope scaling) needs a config that states it",
                                 context, window)

    def check_fit(self, sequences: int = 1, context: int = 0) -> None:
        self.check_context(context)
        need = self.memory_needed(sequences, context)
        have = self.usable_bytes
        if need > have:
            g = self.min_gpus(sequences, context)
            where = (f"it would fit on {g} GPU(s)" if g is not None
                     else f"it does not fit on any replica of up to {MAX_GPUS:,} GPUs")
            smaller = [d for d in ("fp8", "int4") if dtype_bytes(d) < dtype_bytes(self.weight_dtype)]
            other = f"or use a smaller weight dtype, e.g. {smaller[0]}" if smaller else "its weights are in the smallest format"
            raise DeploymentDoesNotFit(
                f"{self.model.name} in {self.weight_dtype} on {self.gpus}x {self.hardware.name} does not fit: needs "
                f"{need / 1e9:,.1f} GB (weights {self.weight_bytes() / 1e9:,.1f} GB + {sequences} sequence(s) x "
                f"{context:,} tokens of KV/state) but {self.gpus} GPU(s) x {self.hardware.capacity_bytes / 1e9:.0f} GB x "
                f"{self.memory_utilization:.2f} usable = {have / 1e9:,.1f} GB; {where} "
                f"({other})",
                need, have, g,
            )

    def describe(self) -> str:
        return (f"{self.model.name} on {self.gpus}x {self.hardware.name} ({self.parallelism}, weights {self.weight_dtype}, "
                f"KV {self.kv_dtype}, engine {self.serving_engine.id})")


def _warn_engine() -> None:
    warnings.warn("Deployment.engine is now Deployment.serving_engine (the old name is read for one release)",
                  DeprecatedSpelling, stacklevel=3)


def _engine(self: Deployment) -> EngineProfile:
    """The old name of `serving_engine` (one release)."""
    _warn_engine()
    return self.serving_engine


_dataclass_init = Deployment.__init__


def _init(self: Deployment, *args: Any, engine: EngineProfile | None = None, **kwargs: Any) -> None:
    """Deployment(..., engine=...): the old keyword, warned, for one release; with serving_engine too, an error
    (so dataclasses.replace(dep, engine=...) is one: replace passes every field)."""
    if engine is not None:
        if "serving_engine" in kwargs or len(args) >= 10:
            raise TypeError("Deployment: give serving_engine or its old spelling engine, not both")
        _warn_engine()
        kwargs["serving_engine"] = engine
    _dataclass_init(self, *args, **kwargs)


Deployment.engine = property(_engine)  # type: ignore[attr-defined]
Deployment.__init__ = _init  # type: ignore[method-assign]
