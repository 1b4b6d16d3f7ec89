"""The acceptance model: what the Strong verifier would say about drafted steps.

A reference trajectory records what an agent did, not what a verifier would have judged,
so these verdicts are *assumptions*: every figure here is shown in the simulator's output
and can be set by the user (ideally from a measured protocol log). Defaults are labelled
as illustrative, not as measurements.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

ASSUMPTION_NOTE = "illustrative default, not a measurement: set it from your own protocol logs"

#: Default per-kind probability that the semantic verifier accepts a drafted step.
DEFAULT_ACCEPT = {"read": 0.90, "write": 0.75, "generic": 0.80, "think": 0.95, "reply": 0.85}
#: Default per-kind probability that a drafted step equals exactly what the Strong model would write.
DEFAULT_EXACT = {"read": 0.55, "write": 0.45, "generic": 0.50, "think": 0.40, "reply": 0.10}


@dataclass(frozen=True)
class AcceptanceModel:
    """Seeded verdicts for drafted steps of a reference trajectory.

    p(accept step) = accept[kind] * position_decay**position_in_segment, lowered by a
    factor (1 - correlation) right after a rejection in the same trajectory, so that
    rejections cluster as they do when a task is hard for the Weak model.
    """

    accept: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ACCEPT))
    exact: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_EXACT))
    position_decay: float = 0.98
    correlation: float = 0.3
    #: Weak output (and visible) tokens per Strong token for the same step.
    weak_token_ratio: float = 1.0
    #: Tokens of the Strong model's verdict reason on a rejection.
    verdict_tokens: int = 48
    #: Tokens of the Strong model's verdict when it accepts the whole segment.
    accept_verdict_tokens: int = 4
    #: Chance that a rejection's verdict carries a valid replacement call (no repair turn then).
    p_valid_replacement: float = 0.5
    #: AgentCollab-style escalation: chance that a step the verifier would reject is detected by the Weak model.
    escalation_recall: float = 0.7
    #: Router: chance that a step of each kind is sent to the Strong model.
    route_strong: dict[str, float] = field(default_factory=lambda: {"read": 0.2, "write": 1.0, "generic": 1.0, "think": 0.2, "reply": 0.5})
    source: str = ASSUMPTION_NOTE

    def __post_init__(self) -> None:
        for name in ("accept", "exact", "route_strong"):
            for k, v in getattr(self, name).items():
                if not 0.0 <= v <= 1.0:
                    raise ValueError(f"AcceptanceModel.{name}[{k!r}] must be in [0, 1], got {v}")
        for name in ("position_decay", "correlation", "p_valid_replacement", "escalation_recall"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"AcceptanceModel.{name} must be in [0, 1], got {v}")
        if self.weak_token_ratio <= 0:
            raise ValueError("AcceptanceModel.weak_token_ratio must be > 0")
        if self.verdict_tokens < 0 or self.accept_verdict_tokens < 0:
            raise ValueError("verdict token counts must be >= 0")

    @classmethod
    def constant(cls, p: float, **kw) -> "AcceptanceModel":
        """Every kind accepted with probability p, no position decay or correlation (for tests and sweeps)."""
        kinds = DEFAULT_ACCEPT.keys()
        return cls(accept={k: p for k in kinds}, exact={k: p for k in kinds}, position_decay=1.0, correlation=0.0, **kw)

    def p_accept(self, kind: str, position: int, after_rejection: bool, exact: bool = False) -> float:
        table = self.exact if exact else self.accept
        p = table.get(kind, table.get("write", 0.0)) * self.position_decay**position
        if after_rejection:
            p *= 1.0 - self.correlation
        return p

    def describe(self) -> dict:
        d = asdict(self)
        d["source"] = self.source
        return d


def trajectory_rng(seed: int, index: int) -> random.Random:
    """One stream per trajectory, so results do not depend on evaluation order or on the other
    trajectories of the run. Python's Mersenne Twister: reproducible for a given integer seed
    across platforms and versions (the `random` module's documented guarantee), and cheap to
    create, which matters at tens of thousands of trajectories per second."""
    if seed < 0 or index < 0:
        raise ValueError("seed and trajectory index must be non-negative")
    return random.Random(int(seed) * 2**32 + int(index))
