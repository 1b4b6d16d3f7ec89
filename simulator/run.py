"""Entry points: plan a strategy over trajectories, price it with an engine, compare strategies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from specagent.simulator.acceptance import AcceptanceModel, unit_uniforms
from specagent.simulator.des import run_des
from specagent.simulator.lockstep import plan_specagent
from specagent.simulator.plan import CallPlan, Episode, PlanBuilder, UnitTable, episode_from_trajectory, paused_gc, unit_positions
from specagent.simulator.pricing import Pricer
from specagent.simulator.results import per_trajectory, phase_split, summarize
from specagent.simulator.setting import Setting, default_setting
from specagent.simulator.strategies import SpecAgent, Strategy, make_strategy
from specagent.traces.schema import Trajectory

ENGINES = ("analytic", "simpy")
DEFAULT_STRATEGIES = ("strongonly", "weakonly", "specagent", "exactmatch", "router", "collab",
                      "specagent_exact", "specagent_hold_replies", "specagent_every_chunk")


Workload = Sequence[Episode] | UnitTable


def to_episodes(trajectories: Iterable[Trajectory | Episode] | UnitTable) -> Workload:
    """Trajectories reduced to what the protocol needs (a UnitTable is already reduced)."""
    if isinstance(trajectories, UnitTable):
        return trajectories
    return [t if isinstance(t, Episode) else episode_from_trajectory(t) for t in trajectories]


def plan_strategy(episodes: Workload, strategy: Strategy, setting: Setting, acceptance: AcceptanceModel,
                  seed: int = 0, audits: list | None = None, lockstep: bool = True) -> CallPlan:
    """The protocol's calls and waits for every episode; `audits` collects per-episode event logs.

    SpecAgent on reference trajectories is planned in lockstep over all trajectories at once
    (simulator/lockstep.py); everything else, audited runs and recorded protocol logs go
    through the per-episode planner. Both read the same per-unit draws, so they agree row for row.
    """
    fast = lockstep and audits is None and isinstance(strategy, SpecAgent)
    if fast and not isinstance(episodes, UnitTable) and not any(e.labelled for e in episodes):
        episodes = UnitTable.from_episodes(episodes)
    if fast and isinstance(episodes, UnitTable):
        return plan_specagent(episodes, strategy.k, strategy.review, strategy.verifier == "exact", acceptance, seed,
                              setting.prefix_caching, setting.verifier_prompt, setting.verifier_system_tokens)
    first = 0
    if isinstance(episodes, UnitTable):
        first, episodes = episodes.first_traj, episodes.episodes()
    offsets = np.concatenate([[0], np.cumsum([len(e.units) for e in episodes], dtype=np.int64)])
    traj_of, pos_of = unit_positions(offsets)
    u = unit_uniforms(seed, traj_of + first, pos_of)
    u0, u1, bounds = u[:, 0].tolist(), u[:, 1].tolist(), offsets.tolist()
    b = PlanBuilder()
    with paused_gc():  # plans allocate many small acyclic rows
        for i, ep in enumerate(episodes):
            audit = [] if audits is not None else None
            lo, hi = bounds[i], bounds[i + 1]
            strategy.plan_episode(ep, i, b, acceptance, (u0[lo:hi], u1[lo:hi]), setting.prefix_caching,
                                  setting.verifier_prompt, setting.verifier_system_tokens, audit)
            if audits is not None:
                audits.append(audit)
    return b.build()


def task_ids(episodes: Workload) -> list[str]:
    return list(episodes.task_ids) if isinstance(episodes, UnitTable) else [e.task_id for e in episodes]


def simulate(trajectories: Iterable[Trajectory | Episode] | UnitTable, strategy: str | Strategy = "specagent", setting: Setting | None = None,
             acceptance: AcceptanceModel | None = None, seed: int = 0, engine: str = "analytic", k: int = 4,
             review: str = "on_write", pricer: Pricer | None = None) -> pd.DataFrame:
    """Per-trajectory accounting of one strategy (one row per trajectory)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got '{engine}'")
    setting = setting or default_setting()
    acceptance = acceptance or AcceptanceModel()
    strat = strategy if isinstance(strategy, Strategy) else make_strategy(strategy, k=k, review=review)
    episodes = to_episodes(trajectories)
    plan = plan_strategy(episodes, strat, setting, acceptance, seed)
    costs = (pricer or Pricer(setting)).price(plan)
    df = per_trajectory(plan, costs)
    if engine == "simpy":
        start, end = run_des(plan, costs.time_s)
        df["wall_time_s"] = end - start
    df.insert(0, "task_id", task_ids(episodes))
    df.insert(0, "traj", np.arange(plan.n_traj) + (episodes.first_traj if isinstance(episodes, UnitTable) else 0))
    df.insert(0, "label", strat.label)
    df.insert(0, "strategy", strat.name)
    df["engine"] = engine
    df["weight_mode"] = setting.weight_mode
    df["verifier_prompt"] = setting.verifier_prompt
    return df


@dataclass
class Comparison:
    """Every strategy on the same trajectories: per-trajectory rows, totals, phase splits, assumptions."""

    per_trajectory: pd.DataFrame
    summary: pd.DataFrame
    phase_time: pd.DataFrame
    phase_bytes: pd.DataFrame
    phase_flops: pd.DataFrame
    assumptions: dict = field(default_factory=dict)


def compare(trajectories: Iterable[Trajectory | Episode] | UnitTable, strategies: Sequence[str] = DEFAULT_STRATEGIES, setting: Setting | None = None,
            acceptance: AcceptanceModel | None = None, seed: int = 0, engine: str = "analytic", k: int = 4,
            review: str = "on_write", workload: str = "", success_rates: dict[str, float] | None = None) -> Comparison:
    """Run every strategy on the same trajectories and summarise relative to Strong-only."""
    setting = setting or default_setting()
    acceptance = acceptance or AcceptanceModel()
    episodes = to_episodes(trajectories)
    pricer = Pricer(setting)
    strats = {s: make_strategy(s, k=k, review=review) for s in strategies}
    frames = [simulate(episodes, strat, setting, acceptance, seed, engine, pricer=pricer) for strat in strats.values()]
    frame = pd.concat(frames, ignore_index=True)
    frame["workload"] = workload
    summary = summarize(frame)
    if success_rates:
        summary["measured_success"] = [success_rates.get(s, np.nan) for s in summary.index]
    assumptions = {
        "setting": setting.describe(),
        "acceptance_model": acceptance.describe(),
        "strategies": {s: strat.describe() for s, strat in strats.items()},
        "seed": seed,
        "engine": engine,
        "workload": workload,
        "trajectories": episodes.n_traj if isinstance(episodes, UnitTable) else len(episodes),
        "quality": "measured success rates as supplied" if success_rates else "not modelled: no quality figures are invented",
    }
    return Comparison(
        per_trajectory=frame, summary=summary, phase_time=phase_split(frame, "time_s"),
        phase_bytes=phase_split(frame, "bytes_read"), phase_flops=phase_split(frame, "flops"), assumptions=assumptions,
    )
