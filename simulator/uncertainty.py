"""Every ratio with its interval: the acceptance parameters' uncertainty propagated by seeded Monte Carlo.

The draws come from an `AcceptanceDistribution` (priors, fitted intervals or a calibrated
set). Each draw replans the workload under that acceptance model; all draws of a lockstep
strategy are planned in one lockstep run over the workload tiled once per draw
(`lockstep.plan_specagent_replicas`), the others draw by draw, and every draw's plan is
priced in one vectorised pass. Draws reuse the point estimate's per-unit uniforms (common
random numbers), so the interval measures the parameters' effect alone, collapses onto
the point estimate when the ranges do, and narrows when they narrow.

The Strong-only baseline does not read the acceptance model (a test checks it), so every
draw is divided by the same baseline. Intervals are percentiles of the draws: (1 - level)/2
and (1 + level)/2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from specagent.measurements.published_ranges import PublishedRange, load_published_ranges
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.ranges import AcceptanceDistribution
from specagent.simulator.strategies.lockstep import plan_specagent_replicas
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.pricing.results import HEADLINE, per_trajectory
from specagent.common.alloc import paused_gc
from specagent.simulator.acceptance.model import unit_uniforms
from specagent.simulator.protocol.plan import PlanBuilder
from specagent.simulator.run import Comparison, Workload, to_episodes
from specagent.simulator.protocol.setting import Setting
from specagent.simulator.strategies.catalog import Strategy, make_strategy
from specagent.simulator.protocol.workload import UnitTable, unit_positions

BASELINE = "strongonly"
#: Ratios an interval is given for: the summary's `<col>_rel`, plus the Strong model's share of the strategy's own memory traffic.
RATIO_METRICS = tuple(f"{c}_rel" for c in HEADLINE) + ("strong_bytes_share",)
#: Columns summed per draw (what the ratios need).
_TOTALS = tuple(HEADLINE)


@dataclass(frozen=True)
class Intervals:
    """Per strategy and ratio: the point estimate and the interval of the draws (`table`), and the draws themselves."""

    table: pd.DataFrame  # columns: strategy, metric, point, low, high
    draws: dict[tuple[str, str], np.ndarray]
    n_draws: int
    level: float
    source: str
    #: (parameter, range, source) of every range drawn from (AcceptanceDistribution.describe).
    ranges: list = field(default_factory=list)

    def get(self, strategy: str, metric: str) -> tuple[float, float, float] | None:
        row = self.table[(self.table["strategy"] == strategy) & (self.table["metric"] == metric)]
        if row.empty:
            return None
        r = row.iloc[0]
        return float(r["point"]), float(r["low"]), float(r["high"])


def concat_plans(plans: Sequence[CallPlan]) -> CallPlan:
    """Plans of the same workload one after another: plan r's trajectory t becomes r * n + t."""
    offs = np.cumsum([0] + [p.n_traj for p in plans])
    goffs = np.cumsum([0] + [int(p.group.max(initial=0)) for p in plans])
    return CallPlan(
        traj=np.concatenate([p.traj + o for p, o in zip(plans, offs)]),
        phase=np.concatenate([p.phase for p in plans]), tokens=np.concatenate([p.tokens for p in plans]),
        context=np.concatenate([p.context for p in plans]), wait_s=np.concatenate([p.wait_s for p in plans]),
        group=np.concatenate([p.group + g for p, g in zip(plans, goffs)]), lane=np.concatenate([p.lane for p in plans]),
        stats=np.concatenate([p.stats for p in plans]), n_traj=int(offs[-1]),
    )


def plan_replicas(episodes: Workload, strategy: Strategy, setting: Setting, models: Sequence[AcceptanceModel], seed: int) -> CallPlan:
    """The workload planned under each acceptance model (replica r = models[r]), with the point estimate's draws."""
    if strategy.lockstep and isinstance(episodes, UnitTable):
        return plan_specagent_replicas(episodes, strategy, models, seed, setting)  # type: ignore[arg-type]
    first = episodes.first_traj if isinstance(episodes, UnitTable) else 0
    eps = episodes.episodes() if isinstance(episodes, UnitTable) else list(episodes)
    offsets = np.concatenate([[0], np.cumsum([len(e.units) for e in eps], dtype=np.int64)])
    traj_of, pos_of = unit_positions(offsets)
    u = unit_uniforms(seed, traj_of + first, pos_of)
    u0, u1, bounds = u[:, 0].tolist(), u[:, 1].tolist(), offsets.tolist()
    b = PlanBuilder()
    with paused_gc():  # one builder for every replica: `plan_strategy`'s per-episode loop, once per model
        for r, m in enumerate(models):
            for i, ep in enumerate(eps):
                lo, hi = bounds[i], bounds[i + 1]
                strategy.plan_episode(ep, r * len(eps) + i, b, m, (u0[lo:hi], u1[lo:hi]), setting)
    return b.build()


def replica_totals(episodes: Workload, strategy: Strategy, setting: Setting, models: Sequence[AcceptanceModel], seed: int,
                   pricer: Pricer | None = None) -> pd.DataFrame:
    """One row per acceptance model: the headline totals of the strategy over the whole workload."""
    plan = plan_replicas(episodes, strategy, setting, models, seed)
    frame = per_trajectory(plan, (pricer or Pricer(setting)).price(plan))
    n = plan.n_traj // len(models)
    return frame[list(_TOTALS)].groupby(np.arange(plan.n_traj) // n).sum()


def ratios(totals: pd.DataFrame, base: pd.Series) -> dict[str, np.ndarray]:
    """Ratios to the baseline's totals (columns where the baseline is positive) and the Strong memory share."""
    out = {}
    for c in _TOTALS:
        if float(base[c]) > 0:
            out[f"{c}_rel"] = totals[c].to_numpy(dtype=float) / float(base[c])
    tot = totals["total_bytes_read"].to_numpy(dtype=float)
    if (tot > 0).all() and float(base["strong_bytes_read"]) > 0:  # a hosted Strong model's traffic is not visible
        out["strong_bytes_share"] = totals["strong_bytes_read"].to_numpy(dtype=float) / tot
    return out


def prepared(trajectories) -> Workload:
    """The workload in the form replicas plan fastest: a UnitTable unless it holds recorded protocol logs."""
    eps = to_episodes(trajectories)
    if isinstance(eps, UnitTable) or any(e.labelled for e in eps):
        return eps
    return UnitTable.from_episodes(eps)


def ratio_intervals(comp: Comparison, trajectories, dist: AcceptanceDistribution | None = None, draws: int | None = None,
                    level: float | None = None) -> Intervals | None:
    """Intervals for every ratio of every strategy of a `predict` comparison (None: no draws, or a protocol log).

    The distribution, the number of draws and the level default to the comparison's scenario
    (`scenario.uncertainty`); the seed is always the scenario's.
    """
    sc = comp.scenario
    if sc is None or comp.setting is None:
        raise ValueError("ratio_intervals needs a Comparison from simulator.run.predict (it carries the scenario)")
    n = sc.uncertainty.draws if draws is None else draws
    level = sc.uncertainty.level if level is None else level
    eps = prepared(trajectories)
    if n == 0 or (not isinstance(eps, UnitTable) and any(e.labelled for e in eps)):
        return None  # a protocol log's verdicts are recorded: no acceptance model to be unsure of
    dist = dist or sc.uncertainty.distribution(sc.acceptance)
    models = dist.sample(n, sc.seed)
    summary = comp.summary
    base = summary.loc[BASELINE]
    pricer = Pricer(comp.setting)
    per: dict[str, dict[str, np.ndarray]] = {}
    for name in summary.index:
        strat = make_strategy(str(name), k=sc.k, review=sc.review)
        if name == BASELINE:
            per[name] = {m: np.full(n, v) for m, v in ratios(summary.loc[[name]].reset_index(drop=True), base).items()}
            continue
        per[name] = ratios(replica_totals(eps, strat, comp.setting, models, sc.seed, pricer), base)
    rows, samples = [], {}
    q = [(1 - level) / 2, (1 + level) / 2]
    specagent = per.get("specagent")
    for name, rs in per.items():
        point_row = summary.loc[name]
        for metric, x in rs.items():
            point = _point(point_row, metric)
            lo, hi = np.quantile(x, q)
            rows.append((name, metric, point, float(lo), float(hi)))
            samples[(name, metric)] = x
            if specagent is not None and metric in specagent and name != "specagent" and metric != "strong_bytes_share":
                rel = x / specagent[metric]
                lo, hi = np.quantile(rel, q)
                key = f"{metric}_vs_specagent"
                rows.append((name, key, point / _point(summary.loc["specagent"], metric), float(lo), float(hi)))
                samples[(name, key)] = rel
    table = pd.DataFrame(rows, columns=["strategy", "metric", "point", "low", "high"])
    return Intervals(table, samples, n, level, dist.source, dist.describe())


def _point(row: pd.Series, metric: str) -> float:
    if metric == "strong_bytes_share":
        return float(row["strong_bytes_read"]) / float(row["total_bytes_read"])
    return float(row[metric])


def setting_name(comp: Comparison) -> str:
    """Which SPEC §7 setting the comparison corresponds to: 'edge' (Strong behind an API) or 'tau2'."""
    return "edge" if comp.setting is not None and comp.setting.strong_is_api else "tau2"


def published_for(comp: Comparison, ranges: Sequence[PublishedRange] | None = None) -> dict[tuple[str, str], PublishedRange]:
    """SPEC §7's ranges for this comparison's setting, keyed like `Intervals.table` (strategy, metric)."""
    out = {}
    for r in ranges if ranges is not None else load_published_ranges():
        if r.setting != setting_name(comp):
            continue
        metric = r.metric if r.relative_to in ("", BASELINE) else f"{r.metric}_vs_{r.relative_to}"
        out.setdefault((r.strategy, metric), r)  # the first row of a column is its headline figure
    return out
