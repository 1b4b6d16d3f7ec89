"""The acceptance search's candidates: acceptance and verdict parameters, each simulated against the published protocol
figures (Wang et al., arXiv:2610.21463). The job that runs the search and reports it is `acceptance_search.py`
(`specagent acceptance calibrate`); this module is its forward model and its set of candidates.

Forward model = this tool's own simulator: each candidate parameter set is planned and
priced on the scenario its figure was measured in (τ²-Bench → the evaluated setting, `--scenario wang2026-tau2`,
on the shipped τ² airline trace; MCP-Atlas → the edge scenario on the MCP-like synthetic profile),
and each figure's metric is read off the result exactly as `predict` computes it. Hardware
and latency terms are never touched: only `AcceptanceModel` fields (and the verifier's
reasoning: `thinking`, `verify_reasoning_tokens`, `repair_reasoning_tokens`) vary. A candidate is *accepted* when every figure the
simulator can evaluate lies in its published range; figures about quality (success,
Pass@1, gap closed) or about benchmarks with no shipped workload are reported as such,
never scored. When nothing meets every figure, `conflicts` says which figures cannot be met
together.

Candidates are a seeded Latin hypercube (numpy) over `PARAMETERS`; each candidate's plan is
the vectorised lockstep planner over all trajectories at once, and the Strong-only baselines
(independent of acceptance) are computed once per scenario.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from specagent.common.errors import InputError
from specagent.costmodel.balance import balance_point
from specagent.measurements.protocol_figures import RATIO_TOTALS, ProtocolFigure
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.parallel import run_jobs
from specagent.simulator.predictor import decode_bytes_per_token
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.pricing.results import api_usd, per_trajectory
from specagent.simulator.run import plan_strategy, simulate, to_episodes
from specagent.simulator.scenario import Scenario
from specagent.simulator.protocol.setting import API_VERIFY_SENDS, Setting
from specagent.simulator.protocol.workload import UnitTable
from specagent.simulator.strategies.catalog import STRATEGY_NAMES, make_strategy

#: Quality metrics: the simulator models no quality, so these figures are recorded but never scored.
QUALITY_METRICS = ("success_delta_points", "pass_at_1", "gap_closed", "success_percent")
#: Metrics that are one strategy's total over another's (`relative_to` names a strategy).
RATIO_METRICS = tuple(RATIO_TOTALS)
#: Figure benchmarks the shipped workloads stand for, by setting (anything else: "no workload").
WORKLOADS = {"h20": ("tau2", "all four"), "edge": ("mcp",)}


def evaluated_scenarios() -> dict[str, Scenario]:
    """The scenario each setting's figures are scored in: the publication's evaluated τ²-Bench setting
    (`scenarios/wang2026-tau2.toml`: agent-side time, a verifier re-reading its context, each choice with the arithmetic
    that forces it) and the edge–cloud one. Never the default scenario: its recorded environment and cached verifier
    are a user's workload as recorded, which the published τ² wall and FLOPs cannot have been measured in."""
    from specagent.simulator.scenario import EVALUATED_TAU2

    return {"h20": Scenario.load(EVALUATED_TAU2), "edge": Scenario.load("edge")}


#: A reasoning parameter's value meaning "None: tied to the workload's recorded reasoning" (AcceptanceModel's rule).
TIED = -1


@dataclass(frozen=True)
class Parameter:
    """One searched dimension: a uniform range (integers rounded), or a point mass at `off` with probability `p_off`."""

    name: str
    low: float
    high: float
    integer: bool = False
    p_off: float = 0.0  # share of candidates pinned at `off` (e.g. thinking off: no verifier reasoning)
    off: float = 0.0
    why: str = ""


#: The shapes the acceptance scales multiply: the pre-calibration illustrative tables (per-kind order kept),
#: fixed here so that re-setting the shipped defaults from this search does not move the search itself.
ACCEPT_SHAPE = {"read": 0.90, "write": 0.75, "generic": 0.80, "think": 0.95, "reply": 0.85}
EXACT_SHAPE = {"read": 0.55, "write": 0.45, "generic": 0.50, "think": 0.40, "reply": 0.10}

#: The searched space. Acceptance by kind is a scale of the shipped table's shape (per-kind values
#: keep their order; clipped to 1); the exact-step table likewise, never above the semantic one.
PARAMETERS: tuple[Parameter, ...] = (
    Parameter("accept_scale", 0.40, 1.11, why="semantic acceptance = scale × (read 0.90, write 0.75, generic 0.80, "
              "think 0.95, reply 0.85), clipped to 1"),
    Parameter("exact_scale", 0.20, 1.20, why="exact-step acceptance = scale × (read 0.55, write 0.45, generic 0.50, "
              "think 0.40, reply 0.10), at most the semantic value"),
    Parameter("position_decay", 0.80, 1.00),
    Parameter("correlation", 0.00, 0.80),
    Parameter("weak_token_ratio", 0.20, 2.00),
    Parameter("verdict_tokens", 8, 256, integer=True),
    Parameter("accept_verdict_tokens", 1, 64, integer=True),
    Parameter("p_valid_replacement", 0.00, 1.00),
    Parameter("verify_reasoning_tokens", 0, 2048, integer=True, p_off=0.25, off=TIED,
              why="Strong reasoning tokens per verification; -1 = tied to the workload (the recorded reasoning of the "
                  "step the verdict decides)"),
    Parameter("repair_reasoning_tokens", 0, 2048, integer=True, p_off=0.5, off=TIED,
              why="Strong reasoning tokens per repair turn; -1 = tied to the workload (the repaired step's recorded "
                  "reasoning)"),
)
PARAMETER_NAMES = tuple(p.name for p in PARAMETERS)


def candidate_acceptance(values: dict[str, float], base: AcceptanceModel | None = None) -> AcceptanceModel:
    """The AcceptanceModel a candidate's parameter values describe (other fields from `base`)."""
    base = base or AcceptanceModel()
    accept = {k: min(1.0, v * values["accept_scale"]) for k, v in ACCEPT_SHAPE.items()}
    exact = {k: min(accept[k], v * values["exact_scale"]) for k, v in EXACT_SHAPE.items()}
    acc = replace(base, accept=accept, exact=exact, position_decay=float(values["position_decay"]),
                  correlation=float(values["correlation"]), weak_token_ratio=float(values["weak_token_ratio"]),
                  verdict_tokens=int(values["verdict_tokens"]), accept_verdict_tokens=int(values["accept_verdict_tokens"]),
                  p_valid_replacement=float(values["p_valid_replacement"]), thinking=True,
                  verify_reasoning_tokens=_reasoning(values["verify_reasoning_tokens"]),
                  repair_reasoning_tokens=_reasoning(values["repair_reasoning_tokens"]))
    return acc


def _reasoning(v: float) -> int | None:
    """A searched reasoning value as the AcceptanceModel field: TIED -> None (the workload's rule), else tokens.

    `thinking` stays on: thinking off prices exactly as both reasoning figures at 0, which the search covers.
    """
    return None if v < 0 else int(v)


def latin_hypercube(n: int, seed: int, params: Sequence[Parameter] = PARAMETERS) -> pd.DataFrame:
    """`n` seeded Latin-hypercube samples of `params` (one stratum per candidate in every dimension)."""
    if n < 1:
        raise InputError(f"samples must be at least 1, got {n}", "samples")
    rng = np.random.default_rng(seed)
    cols = {}
    for p in params:
        u = (rng.permutation(n) + rng.random(n)) / n
        v = p.low + u * (p.high - p.low)
        if p.p_off:
            v = np.where(rng.random(n) < p.p_off, p.off, v)
        cols[p.name] = np.round(v).astype(np.int64) if p.integer else v
    return pd.DataFrame(cols)


# ------------------------------------------------------------------------------------------------
# the forward model
# ------------------------------------------------------------------------------------------------
def figure_status(fig: ProtocolFigure) -> str:
    """'scored' (the simulator evaluates it), 'quality' (not modelled), 'no workload', or 'hardware'."""
    if fig.metric in QUALITY_METRICS:
        return "quality"
    if fig.metric == "ridge_flop_per_byte":
        return "hardware"
    bench = fig.benchmark.lower()
    if not any(bench.startswith(w) for w in WORKLOADS[fig.setting]):
        return "no workload"
    return "scored"


def strategies_needed(figs: Sequence[ProtocolFigure], setting: str) -> list[str]:
    out = ["specagent"]
    for f in figs:
        if f.setting == setting and figure_status(f) == "scored":
            for s in (f.strategy, f.relative_to):
                if s in STRATEGY_NAMES and s not in out and s != "strongonly":
                    out.append(s)
    return out


@dataclass
class FigureContext:
    """One scenario's loaded workload, setting and acceptance-independent baseline."""

    name: str
    scenario: Scenario
    episodes: object
    settings: dict[str, Setting]  # by api_verify_sends (one entry for a self-hosted Strong model)
    pricer: dict[str, Pricer]
    baseline: pd.Series  # Strong-only totals
    strategies: list[str]
    units: int = 0  # workload units (steps) over all trajectories: sizes the batches of `simulate_candidates`


def _totals(frame: pd.DataFrame) -> pd.Series:
    return frame.select_dtypes("number").sum()


def load_context(name: str, scenario: Scenario, strategies: list[str]) -> FigureContext:
    trajs, _, _ = scenario.load_workload()
    episodes = to_episodes(trajs)
    setting = scenario.setting(fit_context=None)
    modes = API_VERIFY_SENDS if setting.strong_is_api else (setting.api_verify_sends,)
    settings = {m: replace(setting, api_verify_sends=m) for m in modes}
    pricers = {m: Pricer(s) for m, s in settings.items()}
    first = modes[0]
    base = simulate(episodes, "strongonly", settings[first], scenario.acceptance, scenario.seed, pricer=pricers[first])
    units = len(episodes) if isinstance(episodes, UnitTable) else sum(len(e.units) for e in episodes)
    return FigureContext(name, scenario, episodes, settings, pricers, _totals(base), strategies, units)


def _run(ctx: FigureContext, acc: AcceptanceModel) -> dict[str, dict[str, pd.DataFrame]]:
    """Per-trajectory frames of every needed strategy under `acc`, by API send mode: planned once, priced per mode."""
    sc = ctx.scenario
    out: dict[str, dict[str, pd.DataFrame]] = {m: {} for m in ctx.settings}
    first = next(iter(ctx.settings))
    for s in ctx.strategies:
        plan = plan_strategy(ctx.episodes, make_strategy(s, k=sc.k, review=sc.review), ctx.settings[first], acc, sc.seed)
        for m in ctx.settings:
            out[m][s] = per_trajectory(plan, ctx.pricer[m].price(plan))
    return out


def _predictor_error(frame: pd.DataFrame, setting: Setting) -> float:
    """|predicted − accounted| Strong share of memory reads over the whole workload (the verdict-token predictor of Wang et al., arXiv:2610.21463)."""
    ctx = frame["committed_context_tokens"].mean() / 2.0
    b_s = decode_bytes_per_token(setting.strong, ctx, setting.weight_mode)
    b_w = decode_bytes_per_token(setting.weak, ctx, setting.weight_mode)
    s = float((frame["tokens_strong_verdict"] + frame["tokens_strong_decode"]).sum()) * b_s
    w = float(frame["tokens_weak_decode"].sum()) * b_w
    predicted = s / (s + w) if s + w > 0 else math.nan
    accounted = float(frame["strong_bytes_read"].sum() / frame["total_bytes_read"].sum())
    return abs(predicted - accounted)


def _metric(fig: ProtocolFigure, tot: dict[str, pd.Series], base: pd.Series, frames: dict[str, pd.DataFrame],
            setting: Setting) -> float:
    """The value the simulator gives for one scored figure."""
    t = tot[fig.strategy]
    if fig.metric in RATIO_TOTALS:
        c = RATIO_TOTALS[fig.metric]
        if fig.metric == "strong_decode_ratio":
            num = t["tokens_strong_decode"] + t["tokens_strong_verdict"]
            ref = base if fig.relative_to == "strongonly" else tot[fig.relative_to]
            den = ref["tokens_strong_decode"] + ref["tokens_strong_verdict"]
            return float(num / den)
        ref = base if fig.relative_to == "strongonly" else tot[fig.relative_to]
        return float(t[c] / ref[c]) if ref[c] else math.nan
    if fig.metric == "strong_bytes_share":
        return float(t["strong_bytes_read"] / t["total_bytes_read"])
    if fig.metric == "weak_bytes_share":
        return float(t["weak_bytes_read"] / t["total_bytes_read"])
    if fig.metric == "predictor_abs_error":
        return _predictor_error(frames[fig.strategy], setting)
    raise InputError(f"line {fig.line}: metric '{fig.metric}' has no forward model", "metric")


def evaluate(ctx: FigureContext, acc: AcceptanceModel, figs: Sequence[ProtocolFigure]) -> dict[str, float]:
    """{figure_id: simulated value} for the scored figures of this context's setting; API cost under every send mode."""
    out: dict[str, float] = {}
    mine = [f for f in figs if f.setting == ctx.name and figure_status(f) == "scored"]
    own = ctx.scenario.api_verify_sends
    several = len(ctx.settings) > 1
    runs = _run(ctx, acc)
    for mode, frames in runs.items():
        tot = {s: _totals(f) for s, f in frames.items()}
        for f in mine:
            if mode != own and f.metric != "api_cost_ratio":
                continue  # only the bill depends on what a verification sends
            v = _metric(f, tot, ctx.baseline, frames, ctx.settings[mode])
            if mode == own:
                out[f.figure_id] = v
            if several and f.metric == "api_cost_ratio":
                out[f"{f.figure_id}@{mode}"] = v
    return out


def _replica_totals(frame: pd.DataFrame, n_rep: int) -> pd.DataFrame:
    """Column totals of each replica's trajectories (replica r's are rows r·n … r·n + n − 1): one row per replica.

    The same sums `_totals` takes of one replica's frame, bit for bit: each is numpy's pairwise sum over that
    replica's contiguous run of the column (tests/test_calibration.py holds the two to equality).
    """
    num = frame.select_dtypes("number")
    return pd.DataFrame({c: num[c].to_numpy().reshape(n_rep, -1).sum(axis=1) for c in num.columns})


def evaluate_batch(ctx: FigureContext, accs: Sequence[AcceptanceModel], figs: Sequence[ProtocolFigure]) -> list[dict[str, float]]:
    """`evaluate(ctx, acc, figs)` for every model of `accs`, all planned and priced at once.

    Each strategy is planned once for the whole batch (`plan_strategy` with several models: replica r's
    trajectory t is r·n + t, every replica reading the same per-unit draws as a plan of its model alone) and
    priced once per API send mode; each replica's totals are then read off its rows. The values equal
    `evaluate`'s for each model alone, bit for bit (tests/test_calibration.py, tests/test_calibration_golden.py):
    what a candidate costs is arithmetic over the same trajectories and draws, so it need not be a run of its own.
    """
    accs = list(accs)
    if not accs:
        return []
    mine = [f for f in figs if f.setting == ctx.name and figure_status(f) == "scored"]
    own = ctx.scenario.api_verify_sends
    several = len(ctx.settings) > 1
    sc = ctx.scenario
    first = next(iter(ctx.settings))
    n_rep = len(accs)
    out: list[dict[str, float]] = [{} for _ in accs]
    need_frames = {f.strategy for f in mine if f.metric == "predictor_abs_error"}
    # another send mode than the scenario's own moves the API bill alone: only the bill is priced for it, and only
    # when an API cost figure reads it
    others = [m for m in ctx.settings if m != own] if several and any(f.metric == "api_cost_ratio" for f in mine) else []
    frames: dict[str, pd.DataFrame] = {}
    bills: dict[str, dict[str, np.ndarray]] = {m: {} for m in others}
    for s in ctx.strategies:
        plan = plan_strategy(ctx.episodes, make_strategy(s, k=sc.k, review=sc.review), ctx.settings[first], accs, sc.seed)
        frames[s] = per_trajectory(plan, ctx.pricer[own].price(plan))
        for m in others:
            bills[m][s] = api_usd(plan, ctx.pricer[m].bill(plan))
    for mode in ctx.settings:  # in the settings' order, as `evaluate` fills its dict
        if mode == own:
            tots = {s: _replica_totals(f, n_rep) for s, f in frames.items()}
        elif mode in bills:
            tots = {s: pd.DataFrame({"api_usd": b.reshape(n_rep, -1).sum(axis=1)}) for s, b in bills[mode].items()}
        else:
            continue
        n = {s: len(f) // n_rep for s, f in frames.items()}
        for r in range(n_rep):
            tot = {s: t.iloc[r] for s, t in tots.items()}
            own_frames = {s: frames[s].iloc[r * n[s]:(r + 1) * n[s]] for s in need_frames if s in frames}
            for f in mine:
                if mode != own and f.metric != "api_cost_ratio":
                    continue  # only the bill depends on what a verification sends
                v = _metric(f, tot, ctx.baseline, own_frames, ctx.settings[mode])
                if mode == own:
                    out[r][f.figure_id] = v
                if several and f.metric == "api_cost_ratio":
                    out[r][f"{f.figure_id}@{mode}"] = v
    return out


def hardware_value(fig: ProtocolFigure, scenario: Scenario) -> float:
    """The figure's hardware quantity: the Strong replica's dense BF16 ridge (peak FLOP/s ÷ bandwidth)."""
    dep = scenario.setting(fit_context=None).strong
    return float(balance_point(dep).hardware_ridge_bf16)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# the search
# ------------------------------------------------------------------------------------------------
@dataclass
class CandidateSet:
    """Candidates, each figure's simulated value per candidate, and what meets what."""

    figures: list[ProtocolFigure]
    candidates: pd.DataFrame  # parameter values, one row per candidate
    values: pd.DataFrame  # figure_id (and figure_id@mode for API cost) -> simulated value, one row per candidate
    status: dict[str, str]  # figure_id -> scored | quality | no workload | hardware
    hardware: dict[str, float] = field(default_factory=dict)
    seed: int = 0

    @property
    def scored(self) -> list[ProtocolFigure]:
        return [f for f in self.figures if self.status[f.figure_id] == "scored"]

    def meets(self, mode: str | None = None) -> pd.DataFrame:
        """Boolean candidate × scored figure: the simulated value lies in the published range.

        `mode` picks which API send mode's cost the API figures are judged by (default: the scenario's).
        """
        cols = {}
        for f in self.scored:
            key = f"{f.figure_id}@{mode}" if mode and f"{f.figure_id}@{mode}" in self.values else f.figure_id
            v = self.values[key].to_numpy()
            cols[f.figure_id] = (v >= f.low) & (v <= f.high)
        return pd.DataFrame(cols, index=self.candidates.index)

    def accepted(self, mode: str | None = None, only: Sequence[str] | None = None) -> pd.Series:
        """Candidates meeting every scored figure (or every figure of `only`, a list of figure ids)."""
        m = self.meets(mode)
        if only is not None:
            m = m[[c for c in m.columns if c in set(only)]]
        return m.all(axis=1) if m.shape[1] else pd.Series(True, index=m.index)

    def figure_ids(self, setting: str | None = None, exclude: Sequence[str] = ()) -> list[str]:
        """Scored figure ids, of one setting (`h20`, `edge`) if given, less `exclude`."""
        return [f.figure_id for f in self.scored if (setting is None or f.setting == setting) and f.figure_id not in exclude]

    def parameter_ranges(self, mode: str | None = None, only: Sequence[str] | None = None) -> pd.DataFrame:
        """Per parameter: min and max over the accepted set, and the searched range."""
        acc = self.candidates[self.accepted(mode, only)]
        return pd.DataFrame({
            "searched_low": [p.low for p in PARAMETERS], "searched_high": [p.high for p in PARAMETERS],
            "accepted_low": [acc[p.name].min() if len(acc) else math.nan for p in PARAMETERS],
            "accepted_high": [acc[p.name].max() if len(acc) else math.nan for p in PARAMETERS],
        }, index=list(PARAMETER_NAMES))

    def conflicts(self, mode: str | None = None) -> dict:
        """What cannot be met: figures no candidate meets, pairs never met together, and the largest jointly met set."""
        m = self.meets(mode)
        alone = [c for c in m.columns if not m[c].any()]
        reachable = [c for c in m.columns if m[c].any()]
        pairs = [(a, b) for i, a in enumerate(reachable) for b in reachable[i + 1:] if not (m[a] & m[b]).any()]
        counts = m.sum(axis=1)
        best = int(counts.idxmax()) if len(m) else -1
        joint = [c for c in m.columns if best >= 0 and m.at[best, c]]
        return {"unreachable": alone, "conflicting_pairs": pairs, "best_candidate": best,
                "best_meets": joint, "best_misses": [c for c in m.columns if c not in joint]}

    def miss_table(self, row: int, mode: str | None = None) -> pd.DataFrame:
        """One candidate against every figure: value, range, met, relative miss."""
        recs = []
        for f in self.figures:
            st = self.status[f.figure_id]
            if st == "scored":
                key = f"{f.figure_id}@{mode}" if mode and f"{f.figure_id}@{mode}" in self.values else f.figure_id
                v = float(self.values.at[row, key])
            elif st == "hardware":
                v = self.hardware[f.figure_id]
            else:
                v = math.nan
            met = f.contains(v) if st in ("scored", "hardware") else None
            recs.append({"figure": f.figure_id, "status": st, "strategy": f.strategy, "metric": f.metric, "value": v,
                         "published": f.range_text(), "low": f.low, "met": met,
                         "miss": f.miss(v) if met is not None else math.nan})
        return pd.DataFrame(recs)

    def central(self, mode: str | None = None, only: Sequence[str] | None = None, prefer_tied: bool = True) -> int:
        """The accepted candidate nearest the middle of every scored range; -1 if none.

        A documented point of the set, not a best fit: every accepted candidate meets the figures
        equally; this one leaves the most room on each side. With `prefer_tied`, candidates whose
        verification and repair reasoning are tied to the workload (AcceptanceModel's default rule)
        are preferred when there are any: their reasoning follows a user's own workload instead of
        a constant fitted to τ²-Bench, and a scenario file can state them (it cannot write None).
        """
        ok = self.accepted(mode, only)
        if not ok.any():
            return -1
        if prefer_tied:
            tied = ok & (self.candidates["verify_reasoning_tokens"] == TIED) & (self.candidates["repair_reasoning_tokens"] == TIED)
            if tied.any():
                ok = tied
        score = np.zeros(len(self.candidates))
        for f in self.scored:
            if only is not None and f.figure_id not in set(only):
                continue
            key = f"{f.figure_id}@{mode}" if mode and f"{f.figure_id}@{mode}" in self.values else f.figure_id
            v = self.values[key].to_numpy()
            hi = f.high if math.isfinite(f.high) else f.low * 2 if f.low > 0 else f.low + 1
            mid, half = (f.low + hi) / 2, max((hi - f.low) / 2, 1e-9)
            score += np.minimum(((v - mid) / half) ** 2, 4.0)
        score[~ok.to_numpy()] = np.inf
        return int(np.argmin(score))


def simulate_candidates(figures: Sequence[ProtocolFigure], samples: int = 128, seed: int = 0,
                        scenarios: dict[str, Scenario] | None = None,
                        progress: Callable[[int, int], None] | None = None, workers: int = 1) -> CandidateSet:
    """Simulate `samples` Latin-hypercube candidates; every scored figure evaluated on its scenario's simulator.

    Candidates go `CHUNK` at a time (a task; `progress(done, samples)` after each), each context planning a
    batch of them in one lockstep run (`evaluate_batch`). `workers` > 1 runs the chunks on that many processes
    (`parallel.run_jobs`); a candidate's values depend on nothing but the candidate, so they are the same bit for
    bit whatever the workers, chunks and batches.
    """
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}", "workers")
    figs = list(figures)
    for f in figs:
        for s in (f.strategy, f.relative_to) if f.metric in RATIO_METRICS else (f.strategy,):
            if figure_status(f) == "scored" and s not in STRATEGY_NAMES:
                raise InputError(f"line {f.line}: figure '{f.figure_id}': strategy or relative_to '{s}' is not a strategy "
                                 f"(expected one of {', '.join(STRATEGY_NAMES)})", "strategy")
    scenarios = scenarios or evaluated_scenarios()
    status = {f.figure_id: figure_status(f) for f in figs}
    contexts = [load_context(name, scenarios[name], strategies_needed(figs, name)) for name in WORKLOADS
                if any(f.setting == name and status[f.figure_id] == "scored" for f in figs)]
    hardware = {f.figure_id: hardware_value(f, scenarios[f.setting]) for f in figs if status[f.figure_id] == "hardware"}
    cands = latin_hypercube(samples, seed)
    base = {name: scenarios[name].acceptance for name in scenarios}
    values = cands.to_dict(orient="records")
    jobs = [(contexts, base, figs, values[lo:lo + CHUNK]) for lo in range(0, samples, CHUNK)]
    done = [0]

    def finished(_: int, recs: list) -> None:  # in completion order: the count of candidates done so far
        done[0] += len(recs)
        if progress:
            progress(done[0], samples)

    parts = run_jobs(_evaluate_chunk, jobs, workers=workers, on_done=finished)
    rows = [rec for part in parts for rec in part]  # in submission order: candidate order
    return CandidateSet(figs, cands, pd.DataFrame(rows, index=cands.index), status, hardware, seed)


def _evaluate_chunk(contexts: list[FigureContext], base: dict[str, AcceptanceModel], figs: list[ProtocolFigure],
                    chunk: list[dict[str, float]]) -> list[dict[str, float]]:
    """Every context's figure values for each candidate of `chunk` (one task of `simulate_candidates`), in batches of the
    context's `batch_size`."""
    recs: list[dict[str, float]] = [{} for _ in chunk]
    for ctx in contexts:
        size = batch_size(ctx)
        for b in range(0, len(chunk), size):
            accs = [candidate_acceptance(v, base[ctx.name]) for v in chunk[b:b + size]]
            for rec, got in zip(recs[b:b + size], evaluate_batch(ctx, accs, figs)):
                rec.update(got)
    return recs


#: Candidates evaluated between two progress reports.
CHUNK = 64
#: Workload units (trajectory steps) one lockstep run plans at most, all replicas together: a batch that size keeps
#: the plan's arrays (about four rows a unit) small enough to stay fast; larger ones are slower per candidate.
BATCH_UNITS = 200_000


def batch_size(ctx: FigureContext) -> int:
    """Candidates planned together on this context: as many as `BATCH_UNITS` allows, at least 1, at most `CHUNK`."""
    return max(1, min(CHUNK, BATCH_UNITS // max(1, ctx.units)))


def evaluate_point(figures: Sequence[ProtocolFigure], acc: AcceptanceModel, scenarios: dict[str, Scenario] | None = None
                   ) -> dict[str, float]:
    """The scored figures' simulated values for one given acceptance model (e.g. the shipped default)."""
    figs = list(figures)
    scenarios = scenarios or evaluated_scenarios()
    out: dict[str, float] = {}
    for name in WORKLOADS:
        if any(f.setting == name and figure_status(f) == "scored" for f in figs):
            out.update(evaluate(load_context(name, scenarios[name], strategies_needed(figs, name)), acc, figs))
    return out


def evaluate_scenarios(figures: Sequence[ProtocolFigure], scenarios: dict[str, Scenario] | None = None) -> dict[str, float]:
    """The scored figures' simulated values, each setting under its own scenario's acceptance (the shipped defaults)."""
    figs = list(figures)
    scenarios = scenarios or evaluated_scenarios()
    out: dict[str, float] = {}
    for name in WORKLOADS:
        if any(f.setting == name and figure_status(f) == "scored" for f in figs):
            ctx = load_context(name, scenarios[name], strategies_needed(figs, name))
            out.update(evaluate(ctx, scenarios[name].acceptance, figs))
    return out
