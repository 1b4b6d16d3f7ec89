"""A deployment: one model replica on some GPUs, with parallelism and storage formats.

It answers "does it fit?" before anything is priced, because a cost estimate for a model
that cannot be loaded is worse than no estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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


class DeploymentDoesNotFit(ValueError):
    """Weights plus KV cache plus recurrent state exceed the replica's usable memory."""

    def __init__(self, message: str, need_bytes: float, have_bytes: float, min_gpus: int | None):
        super().__init__(message)
        self.need_bytes = need_bytes
        self.have_bytes = have_bytes
        self.min_gpus = min_gpus


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
    state_dtype: str = "fp32"  # Gated DeltaNet recurrent state is kept in float32 (SPEC §3)
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    #: The serving engine whose fixed costs (costmodel.latency) every pass pays; `ideal` is the bare roofline.
    engine: EngineProfile = field(default_factory=default_engine)

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus must be in [1, {MAX_GPUS:,}], got {self.gpus}")
        if self.parallelism not in PARALLELISMS:
            raise ValueError(f"parallelism must be one of {PARALLELISMS}, got '{self.parallelism}'")
        for d in (self.weight_dtype, self.kv_dtype, self.activation_dtype, self.state_dtype):
            dtype_bytes(d)
        if not MIN_MEMORY_UTILIZATION <= self.memory_utilization <= 1:
            raise ValueError(f"memory_utilization must be in [{MIN_MEMORY_UTILIZATION:g}, 1], got {self.memory_utilization}")
        if self.parallelism == "tp+ep" and not self.model.is_moe:
            raise ValueError(f"parallelism 'tp+ep' needs an MoE model; {self.model.name} is dense")
        lim = self.engine.max_gpus
        if lim is not None and self.gpus > int(lim.value):
            raise ValueError(f"serving engine '{self.engine.id}' ({self.engine.path or 'in memory'}) prices at most {int(lim.value)} GPU(s) "
                             f"([limits] max_gpus: {lim.source}); {self.gpus} GPUs need collective latencies it does not have: "
                             "calibrate on more GPUs or pick another serving engine")

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

    def min_gpus(self, sequences: int = 1, context: int = 0) -> int:
        per_gpu = self.hardware.capacity_bytes * self.memory_utilization
        return max(1, math.ceil(self.memory_needed(sequences, context) / per_gpu))

    def check_fit(self, sequences: int = 1, context: int = 0) -> None:
        need = self.memory_needed(sequences, context)
        have = self.usable_bytes
        if need > have:
            g = self.min_gpus(sequences, context)
            smaller = [d for d in ("fp8", "int4") if dtype_bytes(d) < dtype_bytes(self.weight_dtype)]
            other = f"or use a smaller weight dtype, e.g. {smaller[0]}" if smaller else "its weights are in the smallest format"
            raise DeploymentDoesNotFit(
                f"{self.model.name} in {self.weight_dtype} on {self.gpus}x {self.hardware.name} does not fit: needs "
                f"{need / 1e9:,.1f} GB (weights {self.weight_bytes() / 1e9:,.1f} GB + {sequences} sequence(s) x "
                f"{context:,} tokens of KV/state) but {self.gpus} GPU(s) x {self.hardware.capacity_bytes / 1e9:.0f} GB x "
                f"{self.memory_utilization:.2f} usable = {have / 1e9:,.1f} GB; it would fit on {g} GPU(s) "
                f"({other})",
                need, have, g,
            )

    def describe(self) -> str:
        return (f"{self.model.name} on {self.gpus}x {self.hardware.name} ({self.parallelism}, weights {self.weight_dtype}, "
                f"KV {self.kv_dtype}, engine {self.engine.id})")
