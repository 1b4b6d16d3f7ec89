"""The sensitivity job (`specagent study sensitivity`): which assumption moves SpecAgent's answer most (a tornado), and
where SpecAgent stops paying (a break-even map). `run(SensitivityRequest(scenario))` returns the SensitivityResult
whose `to_dict()` is sensitivity.json (what `specagent report` reads).

**Tornado.** Each assumption is set to the low and then the high end of its range, every
other one at the scenario's value, and SpecAgent's wall, model-time, memory, FLOPs and cost
ratios to Strong-only are recomputed. Acceptance ranges are the uncertainty source's
(`acceptance_ranges`: priors, fitted intervals); the environment and serving ranges are in
`data/sensitivity_ranges.toml`, each with its rationale. All acceptance ends are planned
in one lockstep run (one replica per end); environment ends replan both strategies.

**Break-even map.** Semantic acceptance (one probability for every step kind; the
scenario's decay and correlation kept) against the Weak/Strong time per token. A Weak
model `s` times slower per token makes every Weak pass `s` times longer; SpecAgent's
events run one after another, so its wall time is S + s·W + E (S: Strong time and every
call's per-request overhead, engine CPU work that a slower Weak model does not stretch; W:
the Weak model's busy time; E: waits), and the ratio to Strong-only is 1 where
s* = (Strong-only wall − S − E) / W. The
axis is s times this run's own Weak/Strong decode time per token (`r0`), so the scenario's
deployments sit at r0.

**Cost.** API charges when the Strong model is an API; otherwise GPU-seconds (each model's
busy time × its replica's GPUs), which is the dollar ratio at any one price per GPU-hour
when both models run on the same GPU type (the default: H20 and H20).

**Strong batch.** The analytic engine runs at batch 1. At batch B > 1 the Strong model's
decode steps (repair and verdict tokens, Strong-only's every token) are shared with B - 1
other sequences at the same context: each step takes the batch-B step time, and its FLOPs
and bytes are split B ways; prefills run as at batch 1. A run of m decode steps is priced at
its mean context (exact while decode stays on one side of the roofline, as below the
balance point). This is the fleet's effect in one number; `study balance` simulates it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import WEIGHT_MODES, estimate
from specagent.simulator.acceptance.model import KINDS, AcceptanceModel
from specagent.simulator.acceptance.ranges import AcceptanceDistribution, ParameterRange, model_over, value_of
from specagent.simulator.protocol.phases import DECODE_PHASES, STRONG_PHASES
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.pricing.analytic import EventCosts, Pricer
from specagent.simulator.pricing.results import per_trajectory
from specagent.simulator.fleet.config import resolve_price
from specagent.simulator.jobs.base import Progress, Request, Result, read_workload, report
from specagent.simulator.scenario import Scenario
from specagent.simulator.run import plan_strategy
from specagent.simulator.protocol.setting import VERIFIER_PROMPTS, Setting
from specagent.simulator.strategies.catalog import make_strategy
from specagent.simulator.uncertainty import prepared
from specagent.simulator.protocol.workload import UnitTable

#: The ratios a tornado bar shows: (column, label).
METRICS = (("wall_time_s_rel", "wall"), ("model_wall_time_s_rel", "model time"), ("total_bytes_read_rel", "memory"),
           ("total_flops_rel", "FLOPs"), ("cost_rel", "$"))
#: Acceptance parameters SpecAgent reads (others belong to the comparison strategies).
SPECAGENT_PARAMETERS = ("accept.", "position_decay", "correlation", "weak_token_ratio", "verdict_tokens",
                        "accept_verdict_tokens", "p_valid_replacement", "verify_reasoning_tokens", "repair_reasoning_tokens")
_SUMS = ("wall_time_s", "model_wall_time_s", "total_bytes_read", "total_flops", "api_usd", "weak_model_time_s",
         "strong_model_time_s", "time_s_weak_decode", "tokens_weak_decode", "time_s_strong_decode", "tokens_strong_decode",
         "time_s_tool", "time_s_user", "weak_request_s", "strong_request_s")


# ------------------------------------------------------------------------------------------------ ranges
@dataclass(frozen=True)
class ScenarioRanges:
    """The environment and serving ranges the tornado sweeps (data/sensitivity_ranges.toml)."""

    user_latency_scale: tuple[float, float]
    tool_latency_s: tuple[float, float]
    strong_batch: tuple[int, int]
    rationale: dict[str, str]
    source: str


def load_scenario_ranges(path: str | Path | None = None) -> ScenarioRanges:
    p = Path(path) if path is not None else Path(str(resources.files("specagent.simulator") / "data" / "sensitivity_ranges.toml"))
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{p}: cannot read sensitivity ranges: {exc}") from None
    out: dict[str, Any] = {}
    why: dict[str, str] = {}
    for name, kind in (("user_latency_scale", float), ("tool_latency_s", float), ("strong_batch", int)):
        e = data.get(name)
        if not isinstance(e, dict) or "low" not in e or "high" not in e or not e.get("rationale"):
            raise InputError(f"{p}: [{name}] needs low, high and a rationale", name)
        lo, hi = e["low"], e["high"]
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 <= lo <= hi):
            raise InputError(f"{p}: [{name}]: expected 0 <= low <= high, got {lo!r}, {hi!r}", name)
        if kind is int and (lo < 1 or int(lo) != lo or int(hi) != hi):
            raise InputError(f"{p}: [{name}]: expected whole numbers >= 1, got {lo!r}, {hi!r}", name)
        out[name] = (kind(lo), kind(hi))
        why[name] = str(e["rationale"])
    return ScenarioRanges(**out, rationale=why, source=str(data.get("source", p.name)))


# ------------------------------------------------------------------------------------------------ pricing
class BatchedStrongPricer(Pricer):
    """Batch-1 pricing, except the Strong model's decode steps, shared with `batch - 1` other sequences (module doc)."""

    def __init__(self, setting: Setting, batch: int):
        super().__init__(setting)
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self.batch = int(batch)

    def price(self, plan: CallPlan) -> EventCosts:
        costs = super().price(plan)
        strong = self.setting.strong
        if self.batch == 1 or not isinstance(strong, Deployment):
            return costs
        dec = np.flatnonzero(np.isin(plan.phase, [p for p in DECODE_PHASES if p in STRONG_PHASES]) & (plan.tokens > 0))
        if dec.size:
            m = plan.tokens[dec]
            step = estimate(strong, Passes.uniform(1, plan.context[dec] + (m - 1) / 2, self.batch), self.setting.weight_mode)
            time_s, flops, rd, wr = costs.time_s.copy(), costs.flops.copy(), costs.bytes_read.copy(), costs.bytes_written.copy()
            time_s[dec] = step.time_s * m
            flops[dec] = step.total_flops * m / self.batch
            rd[dec] = step.total_bytes_read * m / self.batch
            wr[dec] = step.total_bytes_written * m / self.batch
            costs = EventCosts(time_s=time_s, flops=flops, bytes_read=rd, bytes_written=wr, usd=costs.usd, request_s=costs.request_s)
        return costs


def _totals(plan: CallPlan, pricer: Pricer, n_rep: int) -> pd.DataFrame:
    frame = per_trajectory(plan, pricer.price(plan))
    return frame[list(_SUMS)].groupby(np.arange(plan.n_traj) // (plan.n_traj // n_rep)).sum()


def _gpu_seconds(t: pd.DataFrame | pd.Series, setting: Setting):
    strong_gpus = setting.strong.gpus if isinstance(setting.strong, Deployment) else 0
    return t["weak_model_time_s"] * setting.weak.gpus + t["strong_model_time_s"] * strong_gpus


def _ratios(sa: pd.DataFrame, so: pd.Series, setting: Setting) -> pd.DataFrame:
    out = pd.DataFrame(index=sa.index)
    for col, src in (("wall_time_s_rel", "wall_time_s"), ("model_wall_time_s_rel", "model_wall_time_s"),
                     ("total_bytes_read_rel", "total_bytes_read"), ("total_flops_rel", "total_flops")):
        out[col] = sa[src] / so[src] if float(so[src]) > 0 else np.nan
    if setting.strong_is_api:
        out["cost_rel"] = sa["api_usd"] / so["api_usd"] if float(so["api_usd"]) > 0 else np.nan
    else:
        out["cost_rel"] = _gpu_seconds(sa, setting) / float(_gpu_seconds(so, setting))
    return out


@dataclass
class _Runner:
    """The scenario's workload and setting, planned for Strong-only and SpecAgent on demand."""

    scenario: Scenario
    table: UnitTable
    setting: Setting

    def plan(self, name: str, models: Sequence[AcceptanceModel], table: UnitTable | None = None,
             setting: Setting | None = None) -> CallPlan:
        strat = make_strategy(name, k=self.scenario.k, review=self.scenario.review)
        return plan_strategy(table if table is not None else self.table, strat, setting or self.setting, list(models),
                             self.scenario.seed)

    def pair(self, models: Sequence[AcceptanceModel], table: UnitTable | None = None, setting: Setting | None = None,
             pricer: Pricer | None = None) -> pd.DataFrame:
        """SpecAgent's ratios to Strong-only, one row per acceptance model."""
        setting = setting or self.setting
        pricer = pricer or Pricer(setting)
        so = _totals(self.plan("strongonly", [self.scenario.acceptance], table, setting), pricer, 1).iloc[0]
        sa = _totals(self.plan("specagent", models, table, setting), pricer, len(models))
        return _ratios(sa, so, setting)


def _runner(scenario: Scenario, trajectories, setting: Setting | None) -> _Runner:
    table = prepared(trajectories)
    if not isinstance(table, UnitTable):
        raise InputError("the sensitivity study needs reference trajectories, not a recorded protocol log (its verdicts "
                         "are recorded, so acceptance cannot vary)")
    return _Runner(scenario, table, setting or scenario.setting())


# ------------------------------------------------------------------------------------------------ tornado
TORNADO_COLUMNS = ("assumption", "group", "low_value", "high_value", "metric", "label", "base", "at_low", "at_high",
                   "swing", "rationale")


def set_spans(dist: AcceptanceDistribution) -> AcceptanceDistribution:
    """A calibrated set read as ranges: every prior parameter's span over the set's points, the base value included."""
    out = []
    for r in AcceptanceDistribution.priors(dist.base).ranges:
        vals = [value_of(m, r.path) for m in dist.points] + [value_of(dist.base, r.path)]
        out.append(ParameterRange(r.path, min(vals), max(vals), "uniform", f"span over {dist.source}"))
    return replace(dist, ranges=tuple(out), points=())


def tornado(scenario: Scenario, trajectories, setting: Setting | None = None, dist: AcceptanceDistribution | None = None,
            ranges: ScenarioRanges | None = None) -> pd.DataFrame:
    """One row per (assumption, metric): the ratio at the assumption's low and high end; sorted by wall-time swing."""
    run = _runner(scenario, trajectories, setting)
    base_acc = scenario.acceptance
    dist = dist or scenario.uncertainty.distribution(base_acc)
    if dist.points and not dist.ranges:  # a calibrated set: each parameter's span over its points (and the scenario's value)
        dist = set_spans(dist)
    ranges = ranges or load_scenario_ranges()
    base = run.pair([base_acc]).iloc[0]
    rows: list[dict] = []

    def add(name: str, group: str, lo_v: str, hi_v: str, at_lo: pd.Series, at_hi: pd.Series, why: str) -> None:
        for col, label in METRICS:
            rows.append({"assumption": name, "group": group, "low_value": lo_v, "high_value": hi_v, "metric": col,
                         "label": label, "base": float(base[col]), "at_low": float(at_lo[col]), "at_high": float(at_hi[col]),
                         "swing": abs(float(at_hi[col]) - float(at_lo[col])), "rationale": why})

    # acceptance: every end of every range SpecAgent reads, in one lockstep run
    acc_ranges = [r for r in dist.ranges if r.path.startswith(SPECAGENT_PARAMETERS)]
    models = []
    for r in acc_ranges:
        for v in (r.low, r.high):
            models.append(_with(base_acc, r.path, v))
    if models:
        res = run.pair(models)
        for i, r in enumerate(acc_ranges):
            # each end as simulated: a whole-token field's fractional end (a fitted interval, a ranges file) runs rounded
            lo_v, hi_v = (value_of(models[2 * i + j], r.path) for j in (0, 1))
            add(r.path, "acceptance", f"{lo_v:.4g}", f"{hi_v:.4g}", res.iloc[2 * i], res.iloc[2 * i + 1], r.source)
    # the Strong model's reasoning before verdicts and repairs (its token counts are ranges above when set explicitly)
    if isinstance(getattr(base_acc, "thinking", None), bool):
        res = run.pair([replace(base_acc, thinking=False), replace(base_acc, thinking=True)])
        add("Strong reasoning (thinking)", "acceptance", "off", "on", res.iloc[0], res.iloc[1],
            "whether the Strong model reasons before its verdicts and repairs (Qwen3.5 does unless told not to); on: "
            "as long as the acceptance model says (by default the workload's recorded reasoning of the step decided)")
    # the environment: both strategies see the changed waits
    env = scenario.environment
    for name, lo, hi, make in (
            ("user latency scale", *ranges.user_latency_scale, lambda v: replace(env, user_latency_scale=v)),
            ("tool latency (s per call)", *ranges.tool_latency_s, lambda v: replace(env, tool_latency_s=v))):
        ends = [run.pair([base_acc], table=make(v).apply(run.table)).iloc[0] for v in (lo, hi)]
        key = "user_latency_scale" if name.startswith("user") else "tool_latency_s"
        add(name, "environment", f"{lo:g}", f"{hi:g}", ends[0], ends[1], ranges.rationale[key])
    # serving: Strong batch, weight reads, verifier prompt
    if isinstance(run.setting.strong, Deployment):
        lo_b, hi_b = ranges.strong_batch
        ends = [run.pair([base_acc], pricer=BatchedStrongPricer(run.setting, b)).iloc[0] for b in (lo_b, hi_b)]
        add("Strong decode batch", "serving", str(lo_b), str(hi_b), ends[0], ends[1], ranges.rationale["strong_batch"])
        ends = [run.pair([base_acc], setting=replace(run.setting, weight_mode=m)).iloc[0] for m in WEIGHT_MODES]
        add("weight reads", "serving", WEIGHT_MODES[0], WEIGHT_MODES[1], ends[0], ends[1],
            "how a pass reads MoE weights: every distinct expert its tokens touch, or only the active parameters "
            "(the evaluation's accounting mode is not stated: Wang et al., arXiv:2610.21463)")
    ends = [run.pair([base_acc], setting=replace(run.setting, verifier_prompt=m)).iloc[0] for m in VERIFIER_PROMPTS]
    add("verifier prompt", "serving", VERIFIER_PROMPTS[0], VERIFIER_PROMPTS[1], ends[0], ends[1],
        "cached: each review reads only what is new; fresh: it re-reads a system prompt and the whole history")
    df = pd.DataFrame(rows, columns=list(TORNADO_COLUMNS))
    order = df[df["metric"] == "wall_time_s_rel"].sort_values("swing", ascending=False, kind="stable")["assumption"].tolist()
    df["assumption"] = pd.Categorical(df["assumption"], categories=order, ordered=True)
    df["metric"] = pd.Categorical(df["metric"], categories=[m for m, _ in METRICS], ordered=True)
    return df.sort_values(["assumption", "metric"], kind="stable").reset_index(drop=True).astype({"assumption": str, "metric": str})


def _with(base: AcceptanceModel, path: str, v: float) -> AcceptanceModel:
    return model_over(base, {path: v}, dotted=True)


def assumption_curve(scenario: Scenario, trajectories, path: str, values: Sequence[float],
                     setting: Setting | None = None) -> pd.DataFrame:
    """SpecAgent's ratios as one acceptance parameter takes each of `values` (the others at the scenario's)."""
    run = _runner(scenario, trajectories, setting)
    value_of(scenario.acceptance, path)  # a KeyError/AttributeError here means no such parameter
    res = run.pair([_with(scenario.acceptance, path, v) for v in values])
    res.insert(0, path, list(values))
    return res.reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ break-even
@dataclass(frozen=True)
class BreakEven:
    """The map and its line: ratios over (acceptance, Weak/Strong time per token), and r*(acceptance) where each is 1."""

    grid: pd.DataFrame  # acceptance, time_ratio, wall_time_s_rel, model_wall_time_s_rel
    line: pd.DataFrame  # acceptance, wall_break_even, model_break_even (time ratios; inf: never breaks even)
    r0: float  # Weak/Strong decode time per token in the scenario's own run (where its deployments sit)
    base_acceptance: float  # the scenario's mean semantic acceptance over kinds (a marker, not an axis value)


def break_even(scenario: Scenario, trajectories, setting: Setting | None = None,
               acceptance: Sequence[float] = tuple(np.round(np.linspace(0.3, 1.0, 15), 4)),
               time_ratios: Sequence[float] | None = None) -> BreakEven:
    """SpecAgent's wall and model-time ratios to Strong-only over semantic acceptance × Weak/Strong time per token."""
    run = _runner(scenario, trajectories, setting)
    acc = scenario.acceptance
    models = [acc] + [replace(acc, accept={k: float(a) for k in acc.accept}) for a in acceptance]
    pricer = Pricer(run.setting)
    so = _totals(run.plan("strongonly", [acc]), pricer, 1).iloc[0]
    both = _totals(run.plan("specagent", models), pricer, len(models))
    own, sa = both.iloc[0], both.iloc[1:].reset_index(drop=True)  # replica 0: the scenario's own acceptance
    if float(own["tokens_weak_decode"]) <= 0 or float(so["tokens_strong_decode"]) <= 0:
        raise InputError("the break-even map needs Weak and Strong decode tokens in the workload")
    r0 = float((own["time_s_weak_decode"] / own["tokens_weak_decode"]) / (so["time_s_strong_decode"] / so["tokens_strong_decode"]))
    weak = sa["weak_model_time_s"].to_numpy()
    # what a slower Weak model does not stretch: the Strong model's time and every call's per-request overhead
    strong = (sa["strong_model_time_s"] + sa["strong_request_s"] + sa["weak_request_s"]).to_numpy()
    waits = (sa["wall_time_s"] - sa["model_wall_time_s"]).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        s_wall = np.where(weak > 0, (float(so["wall_time_s"]) - strong - waits) / weak, np.inf)
        s_model = np.where(weak > 0, (float(so["model_wall_time_s"]) - strong) / weak, np.inf)
    line = pd.DataFrame({"acceptance": list(acceptance), "wall_break_even": np.maximum(s_wall, 0.0) * r0,
                         "model_break_even": np.maximum(s_model, 0.0) * r0})
    if time_ratios is None:
        finite = line[["wall_break_even", "model_break_even"]].replace(np.inf, np.nan).max().max()
        top = max(2.0 * r0, 1.25 * float(finite) if np.isfinite(finite) else 2.0 * r0)
        time_ratios = np.round(np.linspace(0.0, top, 41), 6)
    rows = []
    for i, a in enumerate(acceptance):
        for r in time_ratios:
            s = float(r) / r0
            rows.append({"acceptance": float(a), "time_ratio": float(r),
                         "wall_time_s_rel": (strong[i] + s * weak[i] + waits[i]) / float(so["wall_time_s"]),
                         "model_wall_time_s_rel": (strong[i] + s * weak[i]) / float(so["model_wall_time_s"])})
    return BreakEven(pd.DataFrame(rows), line, r0, float(np.mean(list(acc.accept.values()))))


# ------------------------------------------------------------------------------------------------ break-even per kind
#: (ratio column, what it saves, in words) for the per-kind break-evens.
KIND_METRICS = (("wall_time_s_rel", "time"), ("total_bytes_read_rel", "memory traffic"), ("usd_rel", "$"))


def _usd(t: pd.DataFrame | pd.Series, setting: Setting):
    """Dollars of busy GPU time at each pool's sourced $/GPU-hour plus API charges (GPU-seconds where a pool is unpriced)."""
    total = t["api_usd"] * 1.0
    for role, col in (("weak", "weak_model_time_s"), ("strong", "strong_model_time_s")):
        dep = getattr(setting, role)
        if not isinstance(dep, Deployment):
            continue
        price, _ = resolve_price(dep.hardware, None)
        total = total + t[col] * dep.gpus * ((price if price is not None else 3600.0) / 3600.0)
    return total


def crossing(values: Sequence[float], ratio: Sequence[float]) -> tuple[str, float | None]:
    """Where a ratio curve over acceptance crosses 1: ('always', None) below 1 everywhere, ('never', None) at or above 1
    everywhere, ('below', x): saves only above acceptance x, ('above', x): saves only below x (linear between grid points)."""
    v, r = np.asarray(values, float), np.asarray(ratio, float)
    saves = r < 1
    if saves.all():
        return "always", None
    if not saves.any():
        return "never", None
    i = int(np.flatnonzero(saves[1:] != saves[:-1])[-1 if saves[-1] else 0])
    x = v[i] + (1 - r[i]) * (v[i + 1] - v[i]) / (r[i + 1] - r[i])
    return ("below" if saves[-1] else "above"), float(x)


def kind_break_evens(scenario: Scenario, trajectories, setting: Setting | None = None,
                     grid: Sequence[float] = tuple(np.round(np.linspace(0.0, 1.0, 11), 4))) -> pd.DataFrame:
    """Per step kind and KIND_METRICS: the semantic acceptance of that kind (the others at the scenario's values) at which
    SpecAgent stops saving against Strong-only at the scenario's own Weak speed, with the sentence that says it."""
    run = _runner(scenario, trajectories, setting)
    acc = scenario.acceptance
    kinds = (*KINDS, "every")  # "every": all kinds moved together
    models = [replace(acc, accept={**acc.accept, **{j: float(a) for j in (KINDS if k == "every" else (k,))}})
              for k in kinds for a in grid]
    pricer = Pricer(run.setting)
    so = _totals(run.plan("strongonly", [acc]), pricer, 1).iloc[0]
    sa = _totals(run.plan("specagent", models), pricer, len(models)).reset_index(drop=True)
    sa["usd_rel"] = _usd(sa, run.setting) / float(_usd(so, run.setting))
    sa["wall_time_s_rel"] = sa["wall_time_s"] / float(so["wall_time_s"])
    sa["total_bytes_read_rel"] = sa["total_bytes_read"] / float(so["total_bytes_read"]) if float(so["total_bytes_read"]) > 0 else np.nan
    rows = []
    n = len(grid)
    for i, kind in enumerate(kinds):
        part = sa.iloc[i * n:(i + 1) * n]
        for col, what in KIND_METRICS:
            r = part[col].to_numpy(float)
            if not np.isfinite(r).all():
                continue
            how, x = crossing(grid, r)
            own = float(np.mean(list(acc.accept.values()))) if kind == "every" else acc.accept[kind]
            name = "acceptance (every kind moved together)" if kind == "every" else f"{kind} acceptance"
            if how == "always":
                text = (f"saves {what} at every {name} in [0, 1] (ratio {r.max():.2f} at worst): "
                        + ("the saving comes from what no verdict decides" if kind == "every" else
                           f"it does not hinge on {kind} steps being accepted"))
            elif how == "never":
                text = f"never saves {what} at any {name} in [0, 1] (ratio {r.min():.2f} at best)"
            elif how == "below":
                text = f"stops saving {what} when {name} falls below {x:.2f} at this Weak speed (the scenario's: {own:.2f})"
            else:
                text = f"saves {what} only while {name} stays below {x:.2f} (the scenario's: {own:.2f})"
            rows.append({"kind": kind, "metric": what, "how": how, "acceptance": x, "scenario_acceptance": own,
                         "ratio_at_0": float(r[0]), "ratio_at_1": float(r[-1]), "text": f"SpecAgent {text}"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ the study
@dataclass(frozen=True)
class SensitivityResult(Result):
    """The tornado, the break-even map and the per-kind break-evens of one scenario and workload."""

    tornado: pd.DataFrame
    break_even: BreakEven
    scenario: Scenario
    workload: str
    #: Per step kind, for time, memory and $: where SpecAgent stops saving (`kind_break_evens`).
    kind_break_even: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_dict(self) -> dict:
        return {
            "kind": "specagent.sensitivity/1", "workload": self.workload, "scenario": self.scenario.to_dict(),
            "tornado": self.tornado.to_dict(orient="records"),
            "break_even": {"r0": self.break_even.r0, "base_acceptance": self.break_even.base_acceptance,
                           "line": _records(self.break_even.line), "grid": _records(self.break_even.grid)},
            "kind_break_even": _records(self.kind_break_even),
        }

    def write(self, folder: str | Path) -> list[Path]:
        """sensitivity.json (`to_dict()`) in `folder`, atomically."""
        path = Path(folder) / "sensitivity.json"
        atomic.write_text(path, atomic.json_text(self.to_dict()))
        return [path]


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def sensitivity_study(scenario: Scenario, trajectories, workload: str = "", setting: Setting | None = None) -> SensitivityResult:
    setting = setting or scenario.setting()
    return SensitivityResult(tornado(scenario, trajectories, setting), break_even(scenario, trajectories, setting), scenario, workload,
                            kind_break_evens(scenario, trajectories, setting))


@dataclass(frozen=True)
class SensitivityRequest(Request):
    """The study of the request's scenario: its workload, deployments, acceptance model and its ranges (the job has no
    fields of its own; the ranges are the scenario's uncertainty sources and data/sensitivity_ranges.toml)."""


def run(request: SensitivityRequest, progress: Progress | None = None) -> SensitivityResult:
    """The tornado, break-even map and per-kind break-evens of the request's scenario on its workload."""
    request.check()
    sc = request.scenario
    trajectories, _, name = read_workload(sc, progress)
    setting = sc.setting()
    report(progress, "tornado and break-even", 0, None)
    return sensitivity_study(sc, trajectories, name, setting)
