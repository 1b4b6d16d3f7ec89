"""A call plan: the model calls and waits a strategy makes, as flat columns.

Strategies decide *what* happens (who prefills or decodes how many tokens on what
context, which tool and user waits lie on the critical path); engines decide *how long*
it takes. Keeping the plan as plain columns lets the analytic engine price every call
of every trajectory in a few numpy expressions, and lets the simpy and fleet engines
replay the very same plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specagent.traces.schema import Actor, StepKind, Trajectory

# Phase codes. Weak phases < 2, Strong phases 2..5, waits 6..7.
WEAK_PREFILL, WEAK_DECODE, STRONG_PREFILL, STRONG_VERIFY, STRONG_DECODE, STRONG_VERDICT, TOOL, USER = range(8)
PHASE_NAMES = ("weak_prefill", "weak_decode", "strong_prefill", "strong_verify", "strong_decode", "strong_verdict", "tool", "user")
PREFILL_PHASES = (WEAK_PREFILL, STRONG_PREFILL, STRONG_VERIFY)
DECODE_PHASES = (WEAK_DECODE, STRONG_DECODE, STRONG_VERDICT)
WEAK_PHASES = (WEAK_PREFILL, WEAK_DECODE)
STRONG_PHASES = (STRONG_PREFILL, STRONG_VERIFY, STRONG_DECODE, STRONG_VERDICT)
WAIT_PHASES = (TOOL, USER)

STAT_NAMES = (
    "weak_calls", "strong_calls", "reviews", "rejections", "repairs", "replacements", "committed_weak",
    "committed_strong", "unreviewed_writes", "wasted_weak_tokens", "undetected_bad_steps",
    "reference_actions", "committed_context_tokens",
)


@dataclass(frozen=True)
class Action:
    """One agent message (its parallel tool calls merged) with what comes back from its tools."""

    kind: str  # read / write / generic / think / reply
    held: bool  # must not execute before Strong review (WRITE, or an irreversible GENERIC)
    has_tool: bool
    out_tokens: int  # decoded by the acting model (reasoning included)
    ctx_tokens: int  # added to the agent's context by the message itself
    result_tokens: int  # tool results added to the context
    tool_s: float
    #: Recorded protocol-log labels (None on reference trajectories): "accepted", "repair" or "unreviewed".
    verdict: str | None = None
    verdict_tokens: int = 0
    repair_tokens: int = 0


@dataclass(frozen=True)
class UserTurn:
    tokens: int
    latency_s: float


Unit = Action | UserTurn


@dataclass(frozen=True)
class Episode:
    """A trajectory reduced to what the protocol needs."""

    task_id: str
    system_tokens: int
    units: tuple[Unit, ...]
    #: True for a recorded protocol log: verdicts come from its labels, not an acceptance model.
    labelled: bool = False

    @property
    def actions(self) -> int:
        return sum(isinstance(u, Action) for u in self.units)


_KIND_RANK = {"write": 4, "generic": 3, "read": 2, "think": 1, "reply": 0}


def episode_from_trajectory(t: Trajectory, default_tool_s: float = 0.0, default_user_s: float = 0.0) -> Episode:
    """Merge parallel calls into one action and attach the tool results that answer it.

    A recorded protocol log lists the *committed* steps, each labelled: drafted_by weak with
    verdict None (committed unreviewed) or "accepted"; or drafted_by strong with verdict
    "repair" where the Weak draft at that position was rejected (verdict_tokens: the
    Strong model's verdict; repair_tokens: its repair turn, 0 when the verdict's
    replacement call ran directly). Replaying it through SpecAgent with the same K and
    review policy reproduces the run's segments exactly, with no acceptance model.
    """
    units: list[Unit] = []
    cur: dict | None = None
    cur_group: int | None = None

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            units.append(Action(**cur))
            cur = None

    for s in t.steps:
        ctx = s.new_context_tokens if s.in_agent_context else 0
        if s.actor == Actor.AGENT:
            kind = s.kind.value
            same = cur is not None and s.parallel_group is not None and s.parallel_group == cur_group
            if not same:
                flush()
                cur = dict(kind=kind, held=False, has_tool=False, out_tokens=0, ctx_tokens=0, result_tokens=0, tool_s=0.0)
                cur_group = s.parallel_group
            assert cur is not None
            if _KIND_RANK.get(kind, 4) > _KIND_RANK.get(cur["kind"], 4):
                cur["kind"] = kind
            cur["held"] = cur["held"] or s.irreversible or s.kind == StepKind.WRITE
            cur["has_tool"] = cur["has_tool"] or s.is_tool_call
            cur["out_tokens"] += s.output_tokens
            cur["ctx_tokens"] += ctx
            if s.label is not None:
                v = s.label.verdict.value if s.label.verdict is not None else "unreviewed"
                if v == "rejected":
                    raise ValueError(
                        f"{t.source}: step {s.index} is labelled 'rejected'; a protocol log lists committed steps only, "
                        "with the repaired step labelled 'repair' (see simulator/plan.py)"
                    )
                if cur.get("verdict") != "repair":
                    cur["verdict"] = v
                cur["verdict_tokens"] = cur.get("verdict_tokens", 0) + s.label.verdict_tokens
                cur["repair_tokens"] = cur.get("repair_tokens", 0) + s.label.repair_tokens
        elif s.actor == Actor.TOOL:
            if cur is None:  # a tool result with no call before it: keep its tokens in the context
                cur = dict(kind="read", held=False, has_tool=True, out_tokens=0, ctx_tokens=0, result_tokens=0, tool_s=0.0)
            cur["result_tokens"] += ctx
            lat = s.tool_latency_s if s.tool_latency_s is not None else default_tool_s
            cur["tool_s"] = max(cur["tool_s"], lat)  # parallel calls run concurrently
        else:
            flush()
            cur_group = None
            lat = s.user_latency_s if s.user_latency_s is not None else default_user_s
            units.append(UserTurn(tokens=ctx, latency_s=lat))
    flush()
    return Episode(task_id=t.task_id, system_tokens=t.system_prompt_tokens, units=tuple(units), labelled=t.is_protocol_log)


class PlanBuilder:
    """Append-only columns of events; one builder collects every trajectory of a run."""

    def __init__(self) -> None:
        self.traj: list[int] = []
        self.phase: list[int] = []
        self.tokens: list[int] = []
        self.context: list[int] = []
        self.wait_s: list[float] = []
        self.group: list[int] = []
        self.lane: list[int] = []
        self._group = 0
        self.stats: list[dict[str, int]] = []

    def next_group(self) -> int:
        self._group += 1
        return self._group

    def add(self, traj: int, phase: int, tokens: int = 0, context: int = 0, wait_s: float = 0.0, group: int | None = None, lane: int = 0) -> None:
        self.traj.append(traj)
        self.phase.append(phase)
        self.tokens.append(int(tokens))
        self.context.append(int(context))
        self.wait_s.append(float(wait_s))
        self.group.append(self.next_group() if group is None else group)
        self.lane.append(lane)

    def build(self) -> "CallPlan":
        stats = np.zeros((len(self.stats), len(STAT_NAMES)), dtype=np.int64)
        for i, st in enumerate(self.stats):
            for j, name in enumerate(STAT_NAMES):
                stats[i, j] = st.get(name, 0)
        return CallPlan(
            traj=np.asarray(self.traj, dtype=np.int64), phase=np.asarray(self.phase, dtype=np.int64),
            tokens=np.asarray(self.tokens, dtype=np.float64), context=np.asarray(self.context, dtype=np.float64),
            wait_s=np.asarray(self.wait_s, dtype=np.float64), group=np.asarray(self.group, dtype=np.int64),
            lane=np.asarray(self.lane, dtype=np.int64), stats=stats, n_traj=len(self.stats),
        )


@dataclass(frozen=True)
class CallPlan:
    traj: np.ndarray
    phase: np.ndarray
    tokens: np.ndarray  # prefill: new tokens; decode: tokens decoded
    context: np.ndarray  # cached tokens before the event
    wait_s: np.ndarray  # tool / user waits
    group: np.ndarray  # events of one group run concurrently, lane by lane
    lane: np.ndarray
    stats: np.ndarray  # (n_traj, len(STAT_NAMES)) counters from the protocol
    n_traj: int

    def __len__(self) -> int:
        return len(self.traj)

    def stat(self, name: str) -> np.ndarray:
        return self.stats[:, STAT_NAMES.index(name)]

    def events_of(self, traj: int) -> np.ndarray:
        return np.flatnonzero(self.traj == traj)
