"""Every ratio and per-task total with its interval: every named uncertainty source propagated by seeded Monte Carlo.

Two sources (`scenario.uncertainty.sources`), each switchable:

- **acceptance**: draws from an `AcceptanceDistribution` (priors, fitted intervals or a
  calibrated set); each draw replans the workload under that acceptance model, all draws of a
  strategy in one plan (`run.plan_strategy` with a list of models);
- **latency**: the latency model's held-out error (`simulator/latency_error.py`): per draw one
  lognormal factor per (model, phase) scaling every event's time, the same factors in every
  strategy (the Strong model that is slower than predicted is slower in Strong-only too).

Draws reuse the point estimate's per-unit uniforms (common random numbers), so the interval
measures the sources' effect alone, collapses onto the point estimate when the ranges do, and
narrows when they narrow. Each draw divides by the same draw's Strong-only totals. Intervals
are percentiles of the draws: (1 - level)/2 and (1 + level)/2, widened to reach the point estimate
where it lies in the draws' tail (a range drawn on one side of the scenario's value; `Intervals.widened`
names each such interval, and the outputs say so).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specagent.measurements.published_ranges import PublishedRange, load_published_ranges
from specagent.simulator.acceptance.ranges import AcceptanceDistribution
from specagent.simulator.latency_error import LatencyError, phase_factors
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.pricing.analytic import EventCosts, Pricer
from specagent.simulator.pricing.results import HEADLINE, per_trajectory
from specagent.simulator.run import Comparison, Workload, plan_strategy, to_episodes
from specagent.simulator.strategies.catalog import make_strategy
from specagent.simulator.protocol.workload import UnitTable
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


BASELINE = "strongonly"
#: Ratios an interval is given for: the summary's `<col>_rel`, plus the Strong model's share of the strategy's own memory traffic.
RATIO_METRICS = tuple(f"{c}_rel" for c in HEADLINE) + ("strong_bytes_share",)
#: Columns summed per draw: what the ratios need, and what the per-task bottom line needs (`jobs.bottom_line`).
_TOTALS = tuple(HEADLINE) + ("env_wall_time_s", "weak_model_time_s", "strong_model_time_s")


@dataclass(frozen=True)
class Intervals:
    """Per strategy and ratio: the point estimate and the interval of the draws (`table`), and the draws themselves."""

    table: pd.DataFrame  # columns: strategy, metric, point, low, high
    draws: dict[tuple[str, str], np.ndarray]
    n_draws: int
    level: float
    source: str
    #: (parameter, range, source) of every range drawn from (AcceptanceDistribution.describe, LatencyError.describe).
    ranges: list = field(default_factory=list)
    #: The sources the intervals include (`Uncertainty.sources`), in order.
    sources: tuple[str, ...] = ("acceptance",)
    #: Per strategy: one row per draw of the summed totals (`_TOTALS`), for per-task intervals.
    totals: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: (strategy, metric) of every interval widened to reach its point estimate (`percentile_interval`).
    widened: tuple[tuple[str, str], ...] = ()

    def get(self, strategy: str, metric: str) -> tuple[float, float, float] | None:
        row = self.table[(self.table["strategy"] == strategy) & (self.table["metric"] == metric)]
        if row.empty:
            return None
        r = row.iloc[0]
        return float(r["point"]), float(r["low"]), float(r["high"])

    def includes(self) -> str:
        """What the intervals include, in words (printed beside every interval)."""
        names = {"acceptance": "the acceptance parameters", "latency": "the latency model's held-out error"}
        return " and ".join(names.get(s, s) for s in self.sources) or "nothing"


def percentile_interval(x: np.ndarray, point: float, level: float) -> tuple[float, float, bool]:
    """(low, high, widened): the draws' (1 - level)/2 and (1 + level)/2 percentiles, stretched to the point.

    Why: a point outside its own interval reads as a contradiction. It happens when the point is an
    extreme of the draws (a range that lies on one side of the scenario's value, a parameter at its
    bound); the interval then reaches the point and `widened` says it was stretched.
    """
    lo, hi = (float(v) for v in np.quantile(np.asarray(x, dtype=float), [(1 - level) / 2, (1 + level) / 2]))
    tol = 1e-9 * max(abs(lo), abs(hi), abs(point))  # the draws' rounding (a constant metric summed in another order)
    if not (np.isfinite(point) and np.isfinite(lo) and np.isfinite(hi)) or lo - tol <= point <= hi + tol:
        return lo, hi, False
    return min(lo, point), max(hi, point), True


def scaled(plan: CallPlan, costs: EventCosts, factor: np.ndarray) -> EventCosts:
    """Costs with every event's time (and its per-request part) times `factor` (one per event)."""
    return replace(costs, time_s=costs.time_s * factor, request_s=costs.request_s * factor)


def draw_totals(plan: CallPlan, costs: EventCosts, replicas: int, n: int, factors: np.ndarray | None) -> pd.DataFrame:
    """n rows of summed totals: replica r of the plan (or the one plan, when `replicas` is 1) under draw r's latency factors."""
    n_per = plan.n_traj // replicas
    if replicas == n:
        c = costs if factors is None else scaled(plan, costs, factors[plan.traj // n_per, plan.phase])
        frame = per_trajectory(plan, c)
        return frame[list(_TOTALS)].groupby(np.arange(plan.n_traj) // n_per).sum().reset_index(drop=True)
    if replicas != 1:
        raise ValueError(f"a plan of {replicas} replicas for {n} draws")
    if factors is None:
        row = per_trajectory(plan, costs)[list(_TOTALS)].sum()
        return pd.DataFrame([row] * n).reset_index(drop=True)
    rows = [per_trajectory(plan, scaled(plan, costs, factors[r, plan.phase]))[list(_TOTALS)].sum() for r in range(n)]
    return pd.DataFrame(rows).reset_index(drop=True)


def ratios(totals: pd.DataFrame, base: pd.DataFrame | pd.Series) -> dict[str, np.ndarray]:
    """Ratios to the baseline's totals (per draw when `base` is a frame of draws) and the Strong memory share."""
    out = {}
    for c in HEADLINE:
        b = base[c].to_numpy(dtype=float) if isinstance(base, pd.DataFrame) else float(base[c])
        if np.all(np.asarray(b) > 0):
            out[f"{c}_rel"] = totals[c].to_numpy(dtype=float) / b
    tot = totals["total_bytes_read"].to_numpy(dtype=float)
    sb = base["strong_bytes_read"]
    if (tot > 0).all() and float(np.max(sb)) > 0:  # a hosted Strong model's traffic is not visible
        out["strong_bytes_share"] = totals["strong_bytes_read"].to_numpy(dtype=float) / tot
    return out


def prepared(trajectories) -> Workload:
    """The workload in the form replicas plan fastest: a UnitTable unless it holds recorded protocol logs."""
    eps = to_episodes(trajectories)
    if isinstance(eps, UnitTable) or any(e.labelled for e in eps):
        return eps
    return UnitTable.from_episodes(eps)


def ratio_intervals(comp: Comparison, trajectories, dist: AcceptanceDistribution | None = None, draws: int | None = None,
                    level: float | None = None, latency: LatencyError | None = None) -> Intervals | None:
    """Intervals for every ratio of every strategy of a `predict` comparison (None: no draws, or no source applies).

    The distribution, the number of draws, the level and the sources default to the comparison's
    scenario (`scenario.uncertainty`); the seed is always the scenario's. A recorded protocol log
    carries its own verdicts: the acceptance source does not apply to it.
    """
    sc = comp.scenario
    if sc is None or comp.setting is None:
        raise ValueError("ratio_intervals needs a Comparison from simulator.run.predict (it carries the scenario)")
    n = sc.uncertainty.draws if draws is None else draws
    level = sc.uncertainty.level if level is None else level
    eps = prepared(trajectories)
    sources = list(sc.uncertainty.source_set())
    if not isinstance(eps, UnitTable) and any(e.labelled for e in eps) and "acceptance" in sources:
        sources.remove("acceptance")  # a protocol log's verdicts are recorded: no acceptance model to be unsure of
    if n == 0 or not sources:
        return None
    by_acceptance = "acceptance" in sources
    dist = (dist or sc.uncertainty.distribution(sc.acceptance)) if by_acceptance else None
    models = dist.sample(n, sc.seed) if dist is not None else [sc.acceptance]
    lat = (latency or LatencyError.load()) if "latency" in sources else None
    factors = phase_factors(lat.factors(n, sc.seed, hosted=(False, comp.setting.strong_is_api))) if lat is not None else None
    summary = comp.summary
    pricer = Pricer(comp.setting)
    totals: dict[str, pd.DataFrame] = {}
    for name in summary.index:
        strat = make_strategy(str(name), k=sc.k, review=sc.review)
        mine = models if by_acceptance and name != BASELINE else [sc.acceptance]  # Strong-only never reads acceptance
        plan = plan_strategy(eps, strat, comp.setting, mine, sc.seed)
        totals[str(name)] = draw_totals(plan, pricer.price(plan), len(mine), n, factors)
    base = totals[BASELINE]
    per = {name: ratios(t, base) for name, t in totals.items()}
    rows, samples, widened = [], {}, []
    specagent = per.get("specagent")

    def add(name: str, metric: str, point: float, x: np.ndarray) -> None:
        lo, hi, stretched = percentile_interval(x, point, level)
        rows.append((name, metric, point, lo, hi))
        samples[(name, metric)] = x
        if stretched:
            widened.append((name, metric))

    for name, rs in per.items():
        point_row = summary.loc[name]
        for metric, x in rs.items():
            point = _point(point_row, metric)
            add(name, metric, point, x)
            if specagent is not None and metric in specagent and name != "specagent" and metric != "strong_bytes_share":
                ref = _point(summary.loc["specagent"], metric)
                # relative to SpecAgent only where SpecAgent has some of it in every draw (a workload of replies only
                # gives SpecAgent no Strong call: the ratio is undefined, not infinite)
                if ref > 0 and (specagent[metric] > 0).all():
                    add(name, f"{metric}_vs_specagent", point / ref, x / specagent[metric])
    table = pd.DataFrame(rows, columns=["strategy", "metric", "point", "low", "high"])
    described = (dist.describe() if dist is not None else []) + (lat.describe() if lat is not None else [])
    source = "; ".join(([dist.source] if dist is not None else []) + ([f"latency error: {lat.source}"] if lat is not None else []))
    return Intervals(table, samples, n, level, source, described, tuple(sources), totals, tuple(widened))


def _point(row: pd.Series, metric: str) -> float:
    if metric == "strong_bytes_share":
        return float(row["strong_bytes_read"]) / float(row["total_bytes_read"])
    return float(row[metric])


def setting_name(comp: Comparison) -> str:
    """Which published setting the comparison corresponds to: 'edge' (Strong behind an API) or 'tau2'."""
    return "edge" if comp.setting is not None and comp.setting.strong_is_api else "tau2"


def published_for(comp: Comparison, ranges: Sequence[PublishedRange] | None = None) -> dict[tuple[str, str], PublishedRange]:
    """The publication's ranges for this comparison's setting, keyed like `Intervals.table` (strategy, metric)."""
    out = {}
    for r in ranges if ranges is not None else load_published_ranges():
        if r.setting != setting_name(comp):
            continue
        metric = r.metric if r.relative_to in ("", BASELINE) else f"{r.metric}_vs_{r.relative_to}"
        out.setdefault((r.strategy, metric), r)  # the first row of a column is its headline figure
    return out
