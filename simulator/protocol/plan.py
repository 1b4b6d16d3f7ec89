"""A call plan: the model calls and waits a strategy makes, as flat columns.

Strategies decide *what* happens (who prefills or decodes how many tokens on what
context, which tool and user waits lie on the critical path); engines decide *how long*
it takes. Keeping the plan as plain columns lets the analytic engine price every call
of every trajectory in a few numpy expressions, and lets the simpy and fleet engines
replay the very same plan. Phase codes are in `phases.py`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

STAT_NAMES = (
    "weak_calls", "strong_calls", "reviews", "rejections", "repairs", "replacements", "committed_weak",
    "committed_strong", "unreviewed_writes", "wasted_weak_tokens", "undetected_bad_steps",
    "reference_actions", "committed_context_tokens",
)


class PlanBuilder:
    """Append-only rows of events; one builder collects every trajectory of a run."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._group = 0
        self.stats: list[dict[str, int]] = []

    def next_group(self) -> int:
        self._group += 1
        return self._group

    def add(self, traj: int, phase: int, tokens: int = 0, context: int = 0, wait_s: float = 0.0, group: int | None = None, lane: int = 0) -> None:
        if group is None:
            self._group += 1
            group = self._group
        self.rows.append((traj, phase, tokens, context, wait_s, group, lane))

    def build(self) -> "CallPlan":
        stats = np.zeros((len(self.stats), len(STAT_NAMES)), dtype=np.int64)
        for i, st in enumerate(self.stats):
            for j, name in enumerate(STAT_NAMES):
                stats[i, j] = st.get(name, 0)
        flat = np.fromiter(itertools.chain.from_iterable(self.rows), dtype=np.float64, count=7 * len(self.rows))
        cols = flat.reshape(-1, 7).T
        ints = cols[[0, 1, 5, 6]].astype(np.int64)
        return CallPlan(
            traj=ints[0], phase=ints[1], tokens=cols[2].copy(), context=cols[3].copy(), wait_s=cols[4].copy(),
            group=ints[2], lane=ints[3], stats=stats, n_traj=len(self.stats),
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
