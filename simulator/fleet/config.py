"""A fleet's configuration: pools of replicas behind routers, per-replica scheduler limits, arrivals, prices.

Plain data that the engine (`sim.py`) runs and the results (`results.py`) describe;
`capacity/fleet_build.py` assembles it from a Scenario. Compiled with the engine by mypyc
(setup.py, `native.py`): keep it fully typed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.hardware.profile import HardwareProfile
from specagent.simulator.protocol.phases import MODEL_NAMES, STRONG, WEAK
from specagent.simulator.protocol.setting import ApiModel

ROUTERS = ("session_affinity", "least_outstanding", "round_robin", "central_queue")
ARRIVAL_KINDS = ("poisson", "bursty", "trace")
SCHEDULER_SOURCE = "given explicitly; chunked prefill as in Sarathi-Serve (OSDI 2024)"
WEAK_POOL, STRONG_POOL = WEAK, STRONG
POOL_NAMES = MODEL_NAMES
#: Share of the earliest-arriving tasks left out of latency percentiles (the fleet warming up).
WARMUP_SHARE = 0.1


class FleetError(ValueError):
    """A fleet that cannot serve the workload as specified (missing pool, call that never fits)."""


@dataclass(frozen=True)
class Scheduler:
    """Per-replica batching limits. A pool given none runs its engine's own defaults for its GPU (`ReplicaPool.limits`)."""

    max_num_seqs: int = 128
    #: Token budget per iteration shared by decodes and prefill chunks; None: whole prefills in one pass.
    max_batched_tokens: int | None = 2048
    source: str = SCHEDULER_SOURCE

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError(f"Scheduler.max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.max_batched_tokens is not None and self.max_batched_tokens < self.max_num_seqs:
            raise ValueError(f"Scheduler.max_batched_tokens ({self.max_batched_tokens}) must be >= max_num_seqs "
                             f"({self.max_num_seqs}) so every running decode fits one iteration, as vLLM requires")


@dataclass(frozen=True)
class ReplicaPool:
    """Identical replicas of one model behind one router; `replicas=None` is unlimited (no contention)."""

    deployment: Deployment | ApiModel
    replicas: int | None = 1
    router: str = "session_affinity"
    #: None: the serving engine's own defaults on this GPU (`limits`), e.g. vLLM's 1024 sequences / 8192 tokens on an H200.
    scheduler: Scheduler | None = None
    usd_per_gpu_hour: float | None = None
    price_source: str = ""

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got '{self.router}'")
        if self.replicas is not None and self.replicas < 1:
            raise ValueError(f"replicas must be >= 1 (or None for unlimited), got {self.replicas}")
        if self.usd_per_gpu_hour is not None and self.usd_per_gpu_hour < 0:
            raise ValueError(f"usd_per_gpu_hour must be >= 0, got {self.usd_per_gpu_hour}")

    @property
    def is_api(self) -> bool:
        return isinstance(self.deployment, ApiModel)

    @property
    def limits(self) -> Scheduler:
        """The batching limits replicas run with: the pool's own, else what its serving engine picks on its GPU."""
        if self.scheduler is not None:
            return self.scheduler
        return engine_scheduler(self.deployment)  # type: ignore[arg-type]

    @property
    def gpus(self) -> int:
        if self.is_api or self.replicas is None:
            return 0
        return self.replicas * self.deployment.gpus  # type: ignore[union-attr]

    @property
    def usd_per_hour(self) -> float:
        if self.is_api or self.replicas is None:
            return 0.0
        if self.usd_per_gpu_hour is None:
            return math.nan  # unpriced GPU type: never silently free
        return self.gpus * self.usd_per_gpu_hour

    def describe(self) -> str:
        dep = self.deployment
        if isinstance(dep, ApiModel):
            return f"{dep.name} (API, unlimited concurrency)"
        n = "unlimited" if self.replicas is None else str(self.replicas)
        lim = self.limits
        budget = "whole prefills" if lim.max_batched_tokens is None else f"{lim.max_batched_tokens} tokens/iteration"
        return f"{n} x [{dep.describe()}] ({self.router}; <= {lim.max_num_seqs} seqs, {budget})"


@dataclass(frozen=True)
class Fleet:
    """The Weak and the Strong pool (either may be None when a strategy never calls it)."""

    weak: ReplicaPool | None
    strong: ReplicaPool | None
    weight_mode: str = "union"

    def pool(self, i: int) -> ReplicaPool | None:
        return self.weak if i == WEAK_POOL else self.strong

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in (self.weak, self.strong) if p is not None)

    @property
    def usd_per_hour(self) -> float:
        return sum(p.usd_per_hour for p in (self.weak, self.strong) if p is not None)

    def describe(self) -> dict[str, str]:
        return {name: (p.describe() if p is not None else "none") for name, p in zip(POOL_NAMES, (self.weak, self.strong))}


@dataclass(frozen=True)
class Arrivals:
    """When tasks arrive: Poisson at `rate`, bursty (gamma gaps with coefficient of variation `cv`), or given times."""

    kind: str = "poisson"
    rate: float = 1.0  # tasks per second
    cv: float = 3.0
    times: tuple[float, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"arrival kind must be one of {ARRIVAL_KINDS}, got '{self.kind}'")
        if self.kind != "trace" and not self.rate > 0:
            raise ValueError(f"arrival rate must be > 0 tasks/s, got {self.rate}")
        if self.kind == "bursty" and not self.cv > 0:
            raise ValueError(f"bursty arrivals need cv > 0, got {self.cv}")

    def sample(self, n: int) -> np.ndarray:
        """n arrival times in seconds, starting at the first arrival (t=0 for trace times)."""
        if self.kind == "trace":
            t = np.sort(np.asarray(self.times, dtype=np.float64))
            if len(t) < n:
                raise ValueError(f"trace arrivals: {n} tasks requested but only {len(t)} timestamps given")
            return t[:n] - (t[0] if len(t) else 0.0)
        rng = np.random.default_rng([int(self.seed), 7919])
        if self.kind == "poisson":
            gaps = rng.exponential(1.0 / self.rate, n)
        else:
            shape = 1.0 / self.cv**2
            gaps = rng.gamma(shape, 1.0 / (self.rate * shape), n)
        return np.cumsum(gaps)


def engine_scheduler(dep: Deployment) -> Scheduler:
    """The batching limits `dep`'s serving engine starts with on `dep`'s GPU (hardware/engines/*.toml [[scheduler]])."""
    row = dep.serving_engine.scheduler_for(dep.hardware)
    return Scheduler(row.max_num_seqs, row.max_batched_tokens, f"{dep.serving_engine.name} default on {dep.hardware.name}: {row.source}")


def resolve_price(hw: HardwareProfile, prices: dict[str, float] | None) -> tuple[float | None, str]:
    """$/GPU-hour: the user's figure first, then the profile's sourced price, else None (unpriced)."""
    prices = prices or {}
    for key in (hw.id, *hw.aliases):
        if key in prices:
            return float(prices[key]), f"user-supplied ({key}={prices[key]})"
    if hw.price_usd_per_gpu_hour is not None:
        return float(hw.price_usd_per_gpu_hour.value), f"profile: {hw.price_usd_per_gpu_hour.source}"
    return None, "no price (profile has none; pass one)"
