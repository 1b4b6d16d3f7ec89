"""Entry points: plan a strategy over trajectories, price it with an engine, compare strategies, run a scenario.

Defaults are the Scenario's (`Scenario.k` is its default K, and so on): they are defined there once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from specagent.common.alloc import paused_gc
from specagent.common.errors import InputError
from specagent.simulator.acceptance.model import AcceptanceModel, task_normals, unit_uniforms
from specagent.simulator.strategies.lockstep import plan_specagent_replicas
from specagent.simulator.protocol.plan import CallPlan, PlanBuilder
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.pricing.results import per_trajectory, phase_split, summarize
from specagent.simulator.scenario import ENGINES, Scenario
from specagent.simulator.protocol.setting import Setting
from specagent.simulator.strategies.catalog import ServingPolicy, Strategy, make_strategy
from specagent.simulator.protocol.workload import Episode, UnitTable, episode_from_trajectory, unit_positions
from specagent.traces.schema import Trajectory
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


Workload = Sequence[Episode] | UnitTable


def to_episodes(trajectories: Iterable[Trajectory | Episode] | UnitTable) -> Workload:
    """Trajectories reduced to what the protocol needs (a UnitTable is already reduced)."""
    if isinstance(trajectories, UnitTable):
        return trajectories
    return [t if isinstance(t, Episode) else episode_from_trajectory(t) for t in trajectories]


def plan_strategy(episodes: Workload, strategy: Strategy, setting: ServingPolicy,
                  acceptance: AcceptanceModel | Sequence[AcceptanceModel], seed: int = Scenario.seed, audits: list | None = None,
                  lockstep: bool = True) -> CallPlan:
    """The protocol's calls and waits for every episode; `audits` collects per-episode event logs.

    `setting` is the serving policy planning needs (prefix caching, verifier prompt): a
    Setting or a Scenario. Several acceptance models (the intervals' draws) plan the workload
    once per model in one plan: replica r's trajectory t is r * n + t, and every replica reads
    the point estimate's per-unit draws (common random numbers).

    A strategy whose `lockstep` holds (SpecAgent itself, not a subclass) on reference
    trajectories is planned in lockstep over all trajectories at once (simulator/strategies/lockstep.py);
    everything else, audited runs and recorded protocol logs go through the per-episode
    planner (`Strategy.run`). Both read the same per-unit draws, so they agree row for row.
    """
    models = [acceptance] if isinstance(acceptance, AcceptanceModel) else list(acceptance)
    if not models:
        raise ValueError("plan_strategy needs at least one acceptance model")
    if audits is not None and len(models) > 1:
        raise ValueError("audits are collected for one acceptance model at a time")
    fast = lockstep and audits is None and strategy.lockstep
    if fast and not isinstance(episodes, UnitTable) and not any(e.labelled for e in episodes):
        episodes = UnitTable.from_episodes(episodes)
    if fast and isinstance(episodes, UnitTable):
        return plan_specagent_replicas(episodes, strategy, models, seed, setting)  # type: ignore[arg-type]
    first = 0
    if isinstance(episodes, UnitTable):
        first, episodes = episodes.first_traj, episodes.episodes()
    offsets = np.concatenate([[0], np.cumsum([len(e.units) for e in episodes], dtype=np.int64)])
    traj_of, pos_of = unit_positions(offsets)
    u = unit_uniforms(seed, traj_of + first, pos_of)
    u0, u1, bounds = u[:, 0].tolist(), u[:, 1].tolist(), offsets.tolist()
    # a per-task effect: one draw per trajectory (the base one: replicas share it, common random numbers), read only
    # when a model has task_sd > 0, so a run without one draws exactly what it did before the field existed
    z = task_normals(seed, np.arange(len(episodes)) + first) if any(a.task_sd > 0 for a in models) else None
    b = PlanBuilder()
    with paused_gc():  # plans allocate many small acyclic rows
        for r, acc in enumerate(models):
            for i, ep in enumerate(episodes):
                audit = [] if audits is not None else None
                lo, hi = bounds[i], bounds[i + 1]
                acc_i = acc if z is None else acc.for_task(float(z[i]))  # itself where its task_sd is 0
                strategy.plan_episode(ep, r * len(episodes) + i, b, acc_i, (u0[lo:hi], u1[lo:hi]), setting, audit)
                if audits is not None:
                    audits.append(audit)
    return b.build()


def task_ids(episodes: Workload) -> list[str]:
    return list(episodes.task_ids) if isinstance(episodes, UnitTable) else [e.task_id for e in episodes]


def simulate(trajectories: Iterable[Trajectory | Episode] | UnitTable, strategy: str | Strategy = "specagent", setting: Setting | None = None,
             acceptance: AcceptanceModel | None = None, seed: int = Scenario.seed, engine: str = Scenario.pricing_engine,
             k: int = Scenario.k, review: str = Scenario.review, pricer: Pricer | None = None) -> pd.DataFrame:
    """Per-trajectory accounting of one strategy (one row per trajectory); the default Scenario's setting by default."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got '{engine}'")
    setting = setting or Scenario().setting(fit_context=None)
    acceptance = acceptance or AcceptanceModel()
    strat = strategy if isinstance(strategy, Strategy) else make_strategy(strategy, k=k, review=review)
    episodes = to_episodes(trajectories)
    plan = plan_strategy(episodes, strat, setting, acceptance, seed)
    costs = (pricer or Pricer(setting)).price(plan)
    df = per_trajectory(plan, costs)
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
    #: The setting the strategies ran in, and the scenario it came from (None when called without one).
    setting: Setting | None = None
    scenario: Scenario | None = None
    #: Every ratio's interval and the publication's ranges beside them (`simulator.uncertainty`), as stored in summary.json; None if not computed.
    intervals: dict | None = None


def check_success_rates(rates: object, strategies: Sequence[str], source: str = "success rates") -> dict[str, float]:
    """Measured success rates as {strategy: rate in [0, 1]}, for strategies that run; anything else is an InputError naming it.

    Quality is never invented, so a figure carried into the outputs must be a possible one.
    """
    if not isinstance(rates, dict):
        raise InputError(f"{source}: expected a JSON object {{strategy: success rate}}, got a {type(rates).__name__}")
    out = {}
    for name, v in rates.items():
        if name not in strategies:
            raise InputError(f"{source}: '{name}' is not a strategy of this run (expected one of {', '.join(strategies)})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:  # NaN fails the range test too
            raise InputError(f"{source}: '{name}': expected a success rate in [0, 1], got {v!r}")
        out[str(name)] = float(v)
    return out


def compare(trajectories: Iterable[Trajectory | Episode] | UnitTable, strategies: Sequence[str] = Scenario.strategies,
            setting: Setting | None = None, acceptance: AcceptanceModel | None = None, seed: int = Scenario.seed,
            engine: str = Scenario.pricing_engine, k: int = Scenario.k, review: str = Scenario.review, workload: str = "",
            success_rates: dict[str, float] | None = None) -> Comparison:
    """Run every strategy on the same trajectories and summarise relative to Strong-only."""
    setting = setting or Scenario().setting(fit_context=None)
    acceptance = acceptance or AcceptanceModel()
    episodes = to_episodes(trajectories)
    pricer = Pricer(setting)
    strats = {s: make_strategy(s, k=k, review=review) for s in strategies}
    frames = [simulate(episodes, strat, setting, acceptance, seed, engine, pricer=pricer) for strat in strats.values()]
    frame = pd.concat(frames, ignore_index=True)
    frame["workload"] = workload
    summary = summarize(frame)
    if success_rates:
        success_rates = check_success_rates(success_rates, list(strategies))
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
        setting=setting,
    )


def scenario_strategies(scenario: Scenario) -> tuple[str, ...]:
    """The strategies `predict` runs: the scenario's, with Strong-only (the baseline) first when missing."""
    return scenario.strategies if "strongonly" in scenario.strategies else ("strongonly", *scenario.strategies)


def predict(scenario: Scenario, trajectories: Iterable[Trajectory | Episode] | UnitTable | None = None, workload: str = "",
            success_rates: dict[str, float] | None = None, setting: Setting | None = None) -> Comparison:
    """Run a scenario: its strategies (Strong-only added first when missing: the baseline) on its workload.

    `trajectories` (named `workload`) and `setting` default to the scenario's own, loaded from
    it; the Comparison carries the setting and the scenario as they ran.
    """
    scenario = scenario.replace(strategies=scenario_strategies(scenario))
    name = workload
    if trajectories is None:
        trajectories, _, name = scenario.load_workload()
    setting = setting or scenario.setting()
    comp = compare(trajectories, scenario.strategies, setting, scenario.acceptance, scenario.seed, scenario.pricing_engine,
                   scenario.k, scenario.review, workload=name, success_rates=success_rates)
    comp.scenario = scenario
    comp.assumptions["environment"] = scenario.environment.describe()
    return comp
