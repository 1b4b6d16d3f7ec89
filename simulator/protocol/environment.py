"""The agent's environment as a what-if: user and tool latencies scaled or replaced.

Recorded waits are the environment the trace was recorded in (τ²-Bench's user simulator
is itself an LLM served by an API, and its waits are 48.9% of Strong-only's wall time on the
default workload). A `preset` says which environment a run prices: `recorded` (the default:
the waits the trace measured, the only sourced figure for them) or `none` (no waits at all:
model time only, what a strategy can change; the evaluation does not say whether its wall
time counts the user simulator, docs/explain.md). A user with their own environment states it here; every strategy and every
engine then sees the same waits, because they are changed once, on the workload, before
any strategy plans it. Replacement comes first, then the scale: `user_latency_s = 2` with
`user_latency_scale = 0.5` waits 1 s per user turn.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specagent.common.errors import InputError
from specagent.traces.vocabulary import MAX_STEP_LATENCY_S, Actor

if TYPE_CHECKING:  # the workload types are imported where a workload is changed: a replay builds none
    from specagent.simulator.protocol.workload import Episode, UnitTable
    from specagent.traces.schema import Trajectory

#: Which environment a run prices: the trace's recorded waits, or none (model time only).
ENVIRONMENT_PRESETS = ("recorded", "none")

#: Largest latency scale accepted: a guard against a typo, not a measured limit.
MAX_LATENCY_SCALE = 1000.0


@dataclass(frozen=True)
class Environment:
    """How long the user and the tools take, relative to (or instead of) what the trace recorded."""

    preset: str = field(default="recorded", metadata={
        "flag": "environment", "choices": ENVIRONMENT_PRESETS,
        "help": "Which environment: 'recorded' = the trace's measured user and tool waits (then scaled or replaced "
                "below); 'none' = no waits at all (model time only; the scales and replacements are then unused)."})
    user_latency_scale: float = field(default=1.0, metadata={
        "help": "Multiply every user turn's wait (0 removes user time; after any replacement)."})
    tool_latency_scale: float = field(default=1.0, metadata={
        "help": "Multiply every tool call's latency (0 removes tool time; after any replacement)."})
    user_latency_s: float | None = field(default=None, metadata={
        "help": "Replace every user turn's wait by this many seconds (default: the recorded waits)."})
    tool_latency_s: float | None = field(default=None, metadata={
        "help": "Replace every tool result's latency by this many seconds (default: the recorded latencies)."})

    def __post_init__(self) -> None:
        if self.preset not in ENVIRONMENT_PRESETS:
            raise InputError(f"environment.preset must be one of {', '.join(ENVIRONMENT_PRESETS)}, got {self.preset!r}",
                             "preset")
        for name in ("user_latency_scale", "tool_latency_scale"):
            v = getattr(self, name)
            if not (_real(v) and 0.0 <= v <= MAX_LATENCY_SCALE):
                raise InputError(f"environment.{name} must be a number in [0, {MAX_LATENCY_SCALE:g}], got {v!r}", name)
        for name in ("user_latency_s", "tool_latency_s"):
            v = getattr(self, name)
            if v is not None and not (_real(v) and 0.0 <= v <= MAX_STEP_LATENCY_S):
                raise InputError(f"environment.{name} must be a number of seconds in [0, {MAX_STEP_LATENCY_S:,.0f}], "
                                 f"got {v!r}", name)

    @property
    def recorded(self) -> bool:
        """True when nothing changes (the trace's own waits)."""
        return self == Environment()

    def describe(self) -> str:
        def one(what: str, fixed: float | None, scale: float) -> str:
            base = f"{fixed:g} s each" if fixed is not None else "as recorded"
            return f"{what} {base}" + (f" ×{scale:g}" if scale != 1.0 else "")
        if self.preset == "none":
            return "preset none: no user or tool waits (model time only)"
        return (one("user waits", self.user_latency_s, self.user_latency_scale) + "; "
                + one("tool latency", self.tool_latency_s, self.tool_latency_scale))

    # --- applying -----------------------------------------------------------------------------
    def user_wait(self, recorded: np.ndarray) -> np.ndarray:
        if self.preset == "none":
            return np.zeros_like(recorded)
        base = np.full_like(recorded, self.user_latency_s) if self.user_latency_s is not None else recorded
        return base * self.user_latency_scale

    def tool_wait(self, recorded: np.ndarray) -> np.ndarray:
        if self.preset == "none":
            return np.zeros_like(recorded)
        base = np.full_like(recorded, self.tool_latency_s) if self.tool_latency_s is not None else recorded
        return base * self.tool_latency_scale

    def apply(self, workload: Sequence[Trajectory | Episode] | UnitTable) -> list | UnitTable:
        """The workload (trajectories, episodes or a unit table) with this environment's waits."""
        from specagent.simulator.protocol.workload import Episode, UnitTable

        if self.recorded:
            return workload if isinstance(workload, UnitTable) else list(workload)
        if isinstance(workload, UnitTable):
            user = workload.is_user
            tool = ~user & workload.has_tool & ~np.isnan(workload.tool_s)
            return replace(workload, user_s=np.where(user, self.user_wait(workload.user_s), workload.user_s),
                           tool_s=np.where(tool, self.tool_wait(workload.tool_s), workload.tool_s))
        return [self._episode(t) if isinstance(t, Episode) else self._trajectory(t) for t in workload]

    def _episode(self, e: Episode) -> Episode:
        from specagent.simulator.protocol.workload import UserTurn

        units = tuple(u._replace(latency_s=float(self.user_wait(np.array([u.latency_s]))[0])) if isinstance(u, UserTurn)
                      else u._replace(tool_s=float(self.tool_wait(np.array([u.tool_s]))[0])) if u.has_tool else u
                      for u in e.units)
        return replace(e, units=units)

    def _trajectory(self, t: Trajectory) -> Trajectory:
        steps = []
        for s in t.steps:
            if s.actor == Actor.USER:
                rec = s.user_latency_s if s.user_latency_s is not None else 0.0
                s = s.model_copy(update={"user_latency_s": float(self.user_wait(np.array([rec]))[0])})
            elif s.actor == Actor.TOOL:
                rec = s.tool_latency_s if s.tool_latency_s is not None else 0.0
                s = s.model_copy(update={"tool_latency_s": float(self.tool_wait(np.array([rec]))[0])})
            steps.append(s)
        return t.model_copy(update={"steps": steps})


def _real(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)  # type: ignore[arg-type]
