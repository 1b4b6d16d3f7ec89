"""Workload reduction: trajectories reduced to what the protocol needs (episodes, unit tables).

A trajectory records steps; the protocol acts on *units*: an agent message with its
parallel tool calls merged and the results that answer them, or a user message. An
`Episode` holds one trajectory's units as objects (what the per-episode planner and the
live runner walk); a `UnitTable` holds many as flat columns (what the lockstep planner
reads, built without a Python object per unit for large synthetic workloads).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from specagent.common.alloc import paused_gc
from specagent.traces.columns import KIND_NAMES
from specagent.traces.profile import WorkloadProfile
from specagent.traces.schema import Actor, Step, StepKind, Trajectory
from specagent.traces.synth import block_step_arrays, block_task_ids, iter_blocks

class Action(NamedTuple):
    """One agent message (its parallel tool calls merged) with what comes back from its tools.

    A NamedTuple: immutable, and built several times faster than a dataclass, which matters
    when a run reduces hundreds of thousands of steps.
    """

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
    is_user = False  # class attribute, not a field: what the protocol asks of any unit


class UserTurn(NamedTuple):
    """A user message after the user's think time."""

    tokens: int
    latency_s: float
    is_user = True


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


#: Unit kinds by code; the code is the merge rank (when parallel calls merge into one action,
#: the most consequential kind wins).
UNIT_KINDS = ("reply", "think", "read", "generic", "write")
_KIND_RANK = {k: r for r, k in enumerate(UNIT_KINDS)}


class StepGroup(NamedTuple):
    """The steps behind one unit: an agent message's parallel calls and the tool results that
    answer them (`user` None), or a user message (`agent` and `tools` empty)."""

    agent: list[Step]
    tools: list[Step]
    user: Step | None = None


def step_groups(t: Trajectory) -> list[StepGroup]:
    """Group steps into units: an agent step starts a new unit unless it continues the current
    message's parallel group; tool results join the unit before them (a result with no call
    before it opens a unit of its own); a user step is a unit."""
    groups: list[StepGroup] = []
    cur: StepGroup | None = None
    cur_pg: int | None = None
    for s in t.steps:
        if s.actor == Actor.AGENT:
            if cur is None or s.parallel_group is None or s.parallel_group != cur_pg:
                cur = StepGroup([], [])
                groups.append(cur)
                cur_pg = s.parallel_group
            cur.agent.append(s)
        elif s.actor == Actor.TOOL:
            if cur is None:
                cur = StepGroup([], [])
                groups.append(cur)
            cur.tools.append(s)
        else:
            groups.append(StepGroup([], [], s))
            cur, cur_pg = None, None
    return groups


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
    for g in step_groups(t):
        if g.user is not None:
            s = g.user
            lat = s.user_latency_s if s.user_latency_s is not None else default_user_s
            units.append(UserTurn(tokens=s.new_context_tokens if s.in_agent_context else 0, latency_s=lat))
            continue
        kind = "read"  # a tool result with no call before it: keep its tokens in the context
        if g.agent:
            kind = g.agent[0].kind.value
            for s in g.agent[1:]:
                if _KIND_RANK.get(s.kind.value, 4) > _KIND_RANK.get(kind, 4):  # the most consequential kind wins
                    kind = s.kind.value
        verdict, verdict_tokens, repair_tokens = None, 0, 0
        for s in g.agent:
            if s.label is None:
                continue
            v = s.label.verdict.value if s.label.verdict is not None else "unreviewed"
            if v == "rejected":
                raise ValueError(
                    f"{t.source}: step {s.index} is labelled 'rejected'; a protocol log lists committed steps only, "
                    "with the repaired step labelled 'repair' (see simulator/protocol/workload.py)"
                )
            if verdict != "repair":
                verdict = v
            verdict_tokens += s.label.verdict_tokens
            repair_tokens += s.label.repair_tokens
        units.append(Action(
            kind=kind,
            held=any(s.irreversible or s.kind == StepKind.WRITE for s in g.agent),
            has_tool=any(s.is_tool_call for s in g.agent) or not g.agent,
            out_tokens=sum(s.output_tokens for s in g.agent),
            ctx_tokens=sum(s.new_context_tokens for s in g.agent if s.in_agent_context),
            result_tokens=sum(s.new_context_tokens for s in g.tools if s.in_agent_context),
            tool_s=max([0.0, *(s.tool_latency_s if s.tool_latency_s is not None else default_tool_s for s in g.tools)]),
            verdict=verdict, verdict_tokens=verdict_tokens, repair_tokens=repair_tokens,
        ))
    return Episode(task_id=t.task_id, system_tokens=t.system_prompt_tokens, units=tuple(units), labelled=t.is_protocol_log)


_RANK_BY_CODE = np.array([_KIND_RANK.get(k, -1) for k in KIND_NAMES])  # indexed by traces' kind codes


@dataclass(frozen=True)
class UnitTable:
    """Unlabelled episodes as flat columns, one row per unit (an action or a user turn).

    The columnar twin of a list of `Episode`s: the lockstep planner reads it without
    building a Python object per unit, which is what keeps large synthetic workloads fast.
    User rows carry their tokens in `ctx_tokens` and their think time in `user_s`.
    """

    offsets: np.ndarray  # (n_traj + 1,) first unit of each trajectory
    system_tokens: np.ndarray  # (n_traj,)
    is_user: np.ndarray
    kind: np.ndarray  # codes into UNIT_KINDS (0 on user rows)
    held: np.ndarray
    has_tool: np.ndarray
    out_tokens: np.ndarray
    ctx_tokens: np.ndarray
    result_tokens: np.ndarray
    tool_s: np.ndarray
    user_s: np.ndarray
    task_ids: tuple[str, ...]
    first_traj: int = 0  # global index of the first trajectory (a chunk of a larger workload draws as that one does)

    def __len__(self) -> int:
        return len(self.is_user)

    @property
    def n_traj(self) -> int:
        return len(self.offsets) - 1

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """(trajectory index, position within its trajectory) of every unit."""
        return unit_positions(self.offsets)

    def episodes(self) -> list[Episode]:
        cols = (
            [UNIT_KINDS[k] for k in self.kind.tolist()], self.held.tolist(), self.has_tool.tolist(), self.out_tokens.tolist(),
            self.ctx_tokens.tolist(), self.result_tokens.tolist(), self.tool_s.tolist(), self.user_s.tolist(), self.is_user.tolist(),
        )
        with paused_gc():
            built: list[Unit] = [
                UserTurn(c, ul) if u else Action(k, h, t, o, c, r, ts)
                for k, h, t, o, c, r, ts, ul, u in zip(*cols)
            ]
        b = self.offsets.tolist()
        sys_tok = self.system_tokens.tolist()
        return [Episode(task_id=self.task_ids[t], system_tokens=sys_tok[t], units=tuple(built[b[t]:b[t + 1]])) for t in range(self.n_traj)]

    @classmethod
    def from_episodes(cls, episodes: Sequence[Episode]) -> "UnitTable":
        if any(e.labelled for e in episodes):
            raise ValueError("a UnitTable holds reference trajectories; recorded protocol logs keep their labels as Episodes")
        units = [u for e in episodes for u in e.units]
        user = [isinstance(u, UserTurn) for u in units]
        act = [(u if not is_u else _NO_ACTION) for u, is_u in zip(units, user)]
        for a in act:
            if a.kind not in _KIND_RANK:
                raise ValueError(f"unknown action kind '{a.kind}'; expected one of {UNIT_KINDS}")
        return cls(
            offsets=np.concatenate([[0], np.cumsum([len(e.units) for e in episodes], dtype=np.int64)]).astype(np.int64),
            system_tokens=np.array([e.system_tokens for e in episodes], dtype=np.int64),
            is_user=np.array(user, dtype=bool),
            kind=np.array([_KIND_RANK[a.kind] for a in act], dtype=np.int64),
            held=np.array([a.held for a in act], dtype=bool),
            has_tool=np.array([a.has_tool for a in act], dtype=bool),
            out_tokens=np.array([a.out_tokens for a in act], dtype=np.int64),
            ctx_tokens=np.array([u.tokens if is_u else u.ctx_tokens for u, is_u in zip(units, user)], dtype=np.int64),
            result_tokens=np.array([a.result_tokens for a in act], dtype=np.int64),
            tool_s=np.array([a.tool_s for a in act], dtype=np.float64),
            user_s=np.array([u.latency_s if is_u else 0.0 for u, is_u in zip(units, user)], dtype=np.float64),
            task_ids=tuple(e.task_id for e in episodes),
        )


_NO_ACTION = Action("reply", False, False, 0, 0, 0, 0.0)


def unit_table_from_arrays(arrays: dict, task_ids: Sequence[str] | None = None, default_tool_s: float = 0.0,
                           default_user_s: float = 0.0, first_traj: int = 0) -> UnitTable:
    """The same reduction as `episode_from_trajectory`, vectorised over `traces.step_arrays` columns.

    This is the fast path for large synthetic workloads (no pydantic objects); it carries
    no speculation labels, so recorded protocol logs go through `episode_from_trajectory`.
    A unit starts at every user step, at an agent step that does not continue the current
    message's parallel group, and at a tool result with no call before it.
    """
    actor = arrays["actor"].astype(np.int64)
    kind = arrays["kind"].astype(np.int64)
    n = len(actor)
    off = arrays["traj_offsets"]
    n_traj = len(off) - 1
    ids = tuple(task_ids) if task_ids is not None else tuple(str(t) for t in range(n_traj))
    if len(ids) != n_traj:
        raise ValueError(f"{len(ids)} task ids for {n_traj} trajectories")
    ctx = arrays["new_context_tokens"] * arrays["in_agent_context"]
    pg = arrays["parallel_group"].astype(np.int64)
    is_agent, is_user, is_tool = actor == 0, actor == 1, actor == 2
    first = np.zeros(n, dtype=bool)
    first[off[:-1][off[:-1] < off[1:]]] = True
    # pg of the latest agent step since the last user step / trajectory start (-2: none)
    marker = np.where(is_agent, pg, np.where(is_user | first, -2, -3))
    pos = np.where(marker != -3, np.arange(n), -1)
    last = np.maximum.accumulate(pos)
    prev = np.full(n, -2)
    prev[1:] = np.where(last[:-1] >= 0, marker[np.maximum(last[:-1], 0)], -2)
    prev[first] = -2
    prev_is_user = np.zeros(n, dtype=bool)
    prev_is_user[1:] = is_user[:-1]
    start = is_user | first | (is_agent & ((pg < 0) | (prev != pg))) | (is_tool & prev_is_user)
    unit = np.cumsum(start) - 1
    m = int(unit[-1]) + 1 if n else 0

    def total(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.bincount(unit, weights=np.where(mask, x, 0), minlength=m)

    rank = np.full(m, -1)
    np.maximum.at(rank, unit[is_agent], _RANK_BY_CODE[kind[is_agent]])
    unit_user = is_user[start]
    tool_lat = np.where(np.isnan(arrays["tool_latency_s"]), default_tool_s, arrays["tool_latency_s"])
    tool_s = np.zeros(m)
    np.maximum.at(tool_s, unit[is_tool], tool_lat[is_tool])
    user_lat = np.where(np.isnan(arrays["user_latency_s"]), default_user_s, arrays["user_latency_s"])
    # units of trajectory t: from the unit of its first step to that of the next trajectory's
    # (a trajectory without steps owns none)
    first_unit = np.where(off[:-1] < off[1:], unit[np.clip(off[:-1], 0, n - 1)] if n else -1, -1)
    bounds = np.append(first_unit, m).astype(np.int64)
    for t in range(n_traj - 1, -1, -1):  # empty trajectories take the next one's start
        if bounds[t] < 0:
            bounds[t] = bounds[t + 1]
    return UnitTable(
        offsets=bounds,
        system_tokens=np.asarray(arrays["system_prompt_tokens"], dtype=np.int64),
        is_user=unit_user,
        kind=np.where(unit_user | (rank < 0), np.where(unit_user, 0, _KIND_RANK["read"]), rank).astype(np.int64),
        held=(total((arrays["irreversible"] | (kind == 1)).astype(np.float64), is_agent) > 0) & ~unit_user,
        has_tool=((total((kind <= 3).astype(np.float64), is_agent) > 0) | (rank < 0)) & ~unit_user,
        out_tokens=total(arrays["output_tokens"], is_agent).astype(np.int64),
        ctx_tokens=total(ctx, is_agent | is_user).astype(np.int64),
        result_tokens=total(ctx, is_tool).astype(np.int64),
        tool_s=np.where(unit_user, 0.0, tool_s),
        user_s=np.where(unit_user, user_lat[start], 0.0),
        task_ids=ids,
        first_traj=first_traj,
    )


def unit_positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trajectory index, position within its trajectory) of every unit, given each trajectory's first unit."""
    offsets = np.asarray(offsets, dtype=np.int64)
    traj = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return traj, np.arange(int(offsets[-1])) - offsets[traj]


def synthetic_unit_tables(profile: WorkloadProfile, n: int, seed: int, progress=None) -> Iterator[UnitTable]:
    """N synthetic trajectories of a workload profile as UnitTables, one per generation block (traces/synth.py):
    generated as columns, never as objects, with memory bounded by one block. Each table carries its first
    trajectory's global index, so planning the tables one by one draws exactly what planning them as one would."""
    for blk in iter_blocks(profile, n, seed, progress):
        yield unit_table_from_arrays(block_step_arrays(blk), block_task_ids(profile, blk, seed), first_traj=blk.first)


def concat_unit_tables(tables: Sequence[UnitTable]) -> UnitTable:
    """Consecutive chunks of one workload as one table (the unchunked reference)."""
    if len(tables) == 1:
        return tables[0]
    for a, b in zip(tables, tables[1:]):
        if b.first_traj != a.first_traj + a.n_traj:
            raise ValueError("unit tables to join must be consecutive chunks of one workload")
    offs = [tables[0].offsets[:1]]
    base = 0
    for t in tables:
        offs.append(t.offsets[1:] + base)
        base += len(t)
    cat = {f.name: np.concatenate([getattr(t, f.name) for t in tables])
           for f in dataclasses.fields(UnitTable) if f.name not in ("offsets", "task_ids", "first_traj")}
    return UnitTable(offsets=np.concatenate(offs).astype(np.int64), task_ids=tuple(i for t in tables for i in t.task_ids),
                     first_traj=tables[0].first_traj, **cat)


def synthetic_unit_table(profile: WorkloadProfile, n: int, seed: int) -> UnitTable:
    """N synthetic trajectories of a workload profile as one UnitTable (see `synthetic_unit_tables`)."""
    return concat_unit_tables(list(synthetic_unit_tables(profile, n, seed)))


def episodes_from_arrays(arrays: dict, task_ids: Sequence[str] | None = None, default_tool_s: float = 0.0,
                         default_user_s: float = 0.0) -> list[Episode]:
    """`unit_table_from_arrays` as Episode objects (what the per-episode loop planner reads)."""
    return unit_table_from_arrays(arrays, task_ids, default_tool_s, default_user_s).episodes()
