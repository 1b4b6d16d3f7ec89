"""Capacity planning: the cheapest fleet that meets a latency SLO at an arrival rate, per strategy.

Search (stated, so results can be checked): for each strategy and each pair of GPU types
(Weak pool, Strong pool), every replica gets the fewest GPUs (1, 2, 4, 8) on which its
model fits with one long sequence. Then
  1. Strong replicas: with the Weak pool unlimited (no contention), double n_strong from 1
     until the SLO holds, then bisect between the last failure and the first success;
  2. Weak replicas: with n_strong fixed, the same doubling + bisection on n_weak;
  3. if no n_weak up to the cap meets the SLO with that n_strong, add one Strong replica
     and repeat step 2 (at most `max_refine` times).
Bisection assumes the SLO metric does not get worse with more replicas (true in
expectation; every candidate replays the same tasks and arrival times, common random
numbers, so noise cannot reverse it by much). Each fleet is simulated once and cached.
The cheapest fleet is chosen by $/hour among priced GPU types; a GPU type without a price
(in its profile or from the user) is reported but ranked by GPU count only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from specagent.simulator.fleet_build import (
    Workload, build_fleet, episodes_of, fitting_deployment, plan_tasks,
)
from specagent.simulator.fleet_config import STRONG_POOL, WARMUP_SHARE, WEAK_POOL, Arrivals, Scheduler, resolve_price
from specagent.simulator.fleet_results import FleetResult
from specagent.simulator.scenario import Scenario

SLO_METRICS = ("task", "turn")


@dataclass(frozen=True)
class SLO:
    """A latency percentile bound: `p95-task=120s` (end-to-end task) or `p90-turn=20s` (one agent turn)."""

    percentile: float
    target: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> "SLO":
        m = re.fullmatch(r"\s*p(\d{1,2}(?:\.\d+)?)-(task|turn)\s*=\s*([0-9.]+)\s*(s|ms|min)?\s*", text)
        if not m:
            raise ValueError(f"SLO '{text}': expected pNN-task=SECONDS or pNN-turn=SECONDS, e.g. p95-task=120s")
        scale = {"s": 1.0, None: 1.0, "ms": 1e-3, "min": 60.0}[m.group(4)]
        slo = cls(float(m.group(1)), m.group(2), float(m.group(3)) * scale)
        if not 0 < slo.percentile < 100 or slo.seconds <= 0:
            raise ValueError(f"SLO '{text}': percentile must be in (0, 100) and the bound > 0")
        return slo

    def __str__(self) -> str:
        return f"p{self.percentile:g}-{self.target}={self.seconds:g}s"

    def measure(self, sim_result: FleetResult) -> float:
        t = sim_result.tasks.sort_values("arrival_s")
        skip = int(math.floor(sim_result.summary["warmup_share"] * len(t)))
        keep = set(t["task"].iloc[skip:])
        if self.target == "task":
            x = t["latency_s"].iloc[skip:].to_numpy()
        else:
            tr = sim_result.turns
            x = tr[tr["task"].isin(keep)]["latency_s"].to_numpy()
        return float(np.percentile(x, self.percentile)) if len(x) else math.inf


def parse_rate(text: str) -> float:
    """'2/s', '120/min', '7200/h' or a bare number of tasks per second."""
    m = re.fullmatch(r"\s*([0-9.]+(?:e-?\d+)?)\s*(?:/\s*(s|sec|min|h|hour))?\s*", str(text))
    if not m:
        raise ValueError(f"rate '{text}': expected tasks per time, e.g. 2/s, 120/min or 7200/h")
    v = float(m.group(1)) / {None: 1.0, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}[m.group(2)]
    if v <= 0:
        raise ValueError(f"rate '{text}' must be > 0")
    return v


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """['h20=2.1', ...] -> {'h20': 2.1}."""
    out = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"price '{it}': expected GPU=USD_PER_GPU_HOUR, e.g. h20=2.1")
        k, v = it.split("=", 1)
        try:
            out[k.strip().lower()] = float(v)
        except ValueError as exc:
            raise ValueError(f"price '{it}': '{v}' is not a number of USD per GPU-hour") from exc
        if out[k.strip().lower()] < 0:
            raise ValueError(f"price '{it}' must be >= 0")
    return out


@dataclass(frozen=True)
class PlanRequest:
    """What to plan for: a rate and an SLO, GPU types to try, and the scenario (models, dtypes, K, acceptance, seed).

    The scenario's deployments give each pool its model and storage dtypes; the search
    chooses the GPU type (from `gpus`) and the GPUs per replica.
    """

    rate: float
    slo: SLO
    strategies: tuple[str, ...] = ("strongonly", "specagent")
    gpus: tuple[str, ...] = ("h20", "h200")
    mix_gpus: bool = False  # also try Weak and Strong pools on different GPU types
    scenario: Scenario = field(default_factory=Scenario)
    prices: dict[str, float] = field(default_factory=dict)
    n_tasks: int = 120
    router: str = "session_affinity"
    max_replicas: int = 64
    max_refine: int = 3
    warmup: float = WARMUP_SHARE
    scheduler: Scheduler = field(default_factory=Scheduler)

    @property
    def seed(self) -> int:
        return self.scenario.seed


@dataclass
class PlanResult:
    table: pd.DataFrame  # one row per (strategy, weak GPU, strong GPU): the cheapest fleet found
    best: pd.DataFrame  # one row per strategy
    price_sources: dict[str, str]
    request: PlanRequest
    notes: list[str]


def _search(evaluate, lo_fail: int, cap: int) -> int | None:
    """Smallest n in (lo_fail, cap] with evaluate(n) True, by doubling then bisection; None if none."""
    n = max(lo_fail + 1, 1)
    last_fail = lo_fail
    while not evaluate(n):
        last_fail = n
        if n >= cap:
            return None
        n = min(cap, n * 2)
    lo, hi = last_fail, n  # evaluate(lo) False (or lo = lo_fail), evaluate(hi) True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if evaluate(mid):
            hi = mid
        else:
            lo = mid
    return hi


def plan_capacity(trajectories: Workload, req: PlanRequest, progress=None) -> PlanResult:
    """Run the stated search for every strategy and GPU pairing; see the module docstring."""
    sc = req.scenario
    if sc.strong_api is not None:
        raise ValueError(f"the scenario prices the Strong model as an API ({sc.strong_api}); the planner sizes self-hosted pools")
    eps = episodes_of(trajectories)
    arrivals = Arrivals("poisson", rate=req.rate, seed=sc.seed).sample(req.n_tasks)
    pairs = [(g, g) for g in req.gpus] if not req.mix_gpus else [(w, s) for w in req.gpus for s in req.gpus]
    price_sources: dict[str, str] = {}
    notes: list[str] = []
    rows = []
    for strat_name in req.strategies:
        tasks = plan_tasks(eps, strat_name, sc, req.n_tasks)
        strat, max_ctx = tasks.strategy, tasks.max_context
        uses = {WEAK_POOL: tasks.uses(WEAK_POOL), STRONG_POOL: tasks.uses(STRONG_POOL)}
        for wg, sg in pairs:
            deps = {WEAK_POOL: fitting_deployment(sc.weak, wg, max_ctx), STRONG_POOL: fitting_deployment(sc.strong, sg, max_ctx)}
            price = {}
            for p, dep in deps.items():
                usd, src = resolve_price(dep.hardware, req.prices)
                price[p] = usd
                price_sources[dep.hardware.id] = src
            cache: dict[tuple, tuple[bool, dict, float]] = {}

            def run(n_w: int | None, n_s: int | None) -> tuple[bool, dict, float]:
                key = (n_w, n_s)
                if key not in cache:
                    fleet = build_fleet(deps[WEAK_POOL] if uses[WEAK_POOL] else None, deps[STRONG_POOL] if uses[STRONG_POOL] else None,
                                        n_w, n_s, weight_mode=sc.weight_mode, router=req.router, scheduler=req.scheduler,
                                        prices=req.prices)
                    res = tasks.serve(fleet, arrivals, req.warmup)
                    v = req.slo.measure(res)
                    cache[key] = (v <= req.slo.seconds, res.summary, v)
                    if progress is not None:
                        progress(strat_name, wg, sg, n_w, n_s, v)
                return cache[key]

            n_s: int | None = 0
            n_w: int | None = 0
            ok = True
            if uses[STRONG_POOL]:
                n_s = _search(lambda n: run(None if uses[WEAK_POOL] else 0, n)[0], 0, req.max_replicas)
                ok = n_s is not None
            if ok and uses[WEAK_POOL]:
                for _ in range(req.max_refine + 1):
                    n_w = _search(lambda n: run(n, n_s if uses[STRONG_POOL] else 0)[0], 0, req.max_replicas)
                    if n_w is not None or not uses[STRONG_POOL] or n_s >= req.max_replicas:  # type: ignore[operator]
                        break
                    n_s += 1  # type: ignore[operator]
                ok = n_w is not None
            row = {"strategy": strat_name, "label": strat.label, "weak_gpu": deps[WEAK_POOL].hardware.id,
                   "strong_gpu": deps[STRONG_POOL].hardware.id, "feasible": ok,
                   "weak_gpus_per_replica": deps[WEAK_POOL].gpus if uses[WEAK_POOL] else 0,
                   "strong_gpus_per_replica": deps[STRONG_POOL].gpus if uses[STRONG_POOL] else 0,
                   "evaluations": len(cache)}
            if ok:
                _, s, v = run(n_w if uses[WEAK_POOL] else 0, n_s if uses[STRONG_POOL] else 0)
                unpriced = [g for p, g in ((WEAK_POOL, wg), (STRONG_POOL, sg)) if uses[p] and price[p] is None]
                row.update({
                    "weak_replicas": n_w if uses[WEAK_POOL] else 0, "strong_replicas": n_s if uses[STRONG_POOL] else 0,
                    "gpus": s["gpus"], "usd_per_hour": math.nan if unpriced else s["usd_per_hour"],
                    "slo_value_s": v, "latency_p50_s": s["latency_p50_s"], "latency_p95_s": s["latency_p95_s"],
                    "weak_utilisation": s["weak_utilisation"], "strong_utilisation": s["strong_utilisation"],
                    "strong_mean_decode_batch": s["strong_mean_decode_batch"], "weak_mean_decode_batch": s["weak_mean_decode_batch"],
                    "usd_per_task": math.nan if unpriced else s["usd_per_task"],
                })
                if unpriced:
                    notes.append(f"{strat_name} on {wg}/{sg}: no $/GPU-hour for {', '.join(sorted(set(unpriced)))} "
                                 f"(pass --price GPU=USD); ranked by GPU count only")
            else:
                notes.append(f"{strat_name} on {wg}/{sg}: no fleet up to {req.max_replicas} replicas per pool meets {req.slo}")
            rows.append(row)
    table = pd.DataFrame(rows)
    best = _best(table)
    return PlanResult(table=table, best=best, price_sources=price_sources, request=req, notes=notes)


def _best(table: pd.DataFrame) -> pd.DataFrame:
    """Cheapest feasible fleet per strategy ($/hour, then GPUs), plus savings against Strong-only."""
    if table.empty or not table["feasible"].any():
        return pd.DataFrame()
    f = table[table["feasible"]].copy()
    f["_priced"] = f["usd_per_hour"].notna()
    f = f.sort_values(["strategy", "_priced", "usd_per_hour", "gpus"], ascending=[True, False, True, True])
    best = f.groupby("strategy", sort=False).head(1).drop(columns="_priced").set_index("strategy")
    order = [s for s in table["strategy"].unique() if s in best.index]
    best = best.loc[order]
    if "strongonly" in best.index:
        base = best.loc["strongonly"]
        best["usd_saving_vs_strongonly"] = 1.0 - best["usd_per_hour"] / base["usd_per_hour"]
        best["gpu_saving_vs_strongonly"] = 1.0 - best["gpus"] / base["gpus"]
    return best.reset_index()
