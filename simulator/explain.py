"""Why SpecAgent's ratio to Strong-only is what it is: each ratio decomposed into named factors.

`predict` prints ratios (SpecAgent wall 0.927 of Strong-only on the default); a reader who
wants to know *why* 0.93 and what would make it 0.5 needs the ratio taken apart. This module
takes it apart from the very totals `predict` summarises (the per-trajectory frame of
`run.compare`), so the parts add back to the printed ratio exactly (a test holds them to 1e-9).

For a resource X (wall time, model time, HBM bytes, FLOPs, dollars) the ratio is

    R = X_specagent / X_strongonly = Σ_phase X_specagent[phase] / X_strongonly

and each phase's share is written as a product of factors against Strong-only's own work:
a decode-side phase (Weak drafting, Strong verification, repair and verdict decode) against
Strong-only's Strong decode, a prefill phase against Strong-only's Strong prefill:

    share = (Strong-only's share of X in the reference phase)
          × (tokens in this phase per reference token)
          × (X per token here / X per token in the reference phase)

so "the Weak model writes 0.53 tokens per Strong token at 0.97 of the Strong model's time per
token" is read off the table. The waterfall shows, per phase, SpecAgent's share minus
Strong-only's (the bars from 1 down to R). Counterfactual ratios (zero acceptance, thinking
off, no environment, a fresh verifier prompt) rerun the same scenario with one thing changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from specagent.simulator.protocol.phases import PHASE_NAMES, STRONG_PHASES, WAIT_PHASES, WEAK_PHASES

SPEC, BASE = "specagent", "strongonly"

#: The resources explained: key -> (what it is, its printed ratio's column in predict's summary or bottom line).
RESOURCES = {
    "wall": ("wall time per task, tool and user waits included", "wall_time_s_rel"),
    "model": ("wall time without tool and user waits (what a strategy can change)", "model_wall_time_s_rel"),
    "memory": ("HBM bytes read by both models", "total_bytes_read_rel"),
    "flops": ("FLOPs of both models", "total_flops_rel"),
    "usd": ("$ per task: busy GPU-seconds at each pool's $/GPU-hour plus API charges", "usd_per_task"),
}

#: Per phase: its name in the tables, and the Strong-only phase it is measured against.
PHASE_LABEL = {
    "weak_prefill": "Weak prefill", "weak_decode": "Weak drafting (decode)", "strong_prefill": "Strong prefill",
    "strong_verify": "Strong verification (drafted tokens read in prefill)", "strong_decode": "Strong decode (SpecAgent: repairs only)",
    "strong_verdict": "Strong verdict decode (incl. reasoning)", "tool": "tool waits", "user": "user waits",
}
REFERENCE = {
    "weak_prefill": "strong_prefill", "weak_decode": "strong_decode", "strong_prefill": "strong_prefill",
    "strong_verify": "strong_decode", "strong_decode": "strong_decode", "strong_verdict": "strong_decode",
    "tool": "tool", "user": "user",
}
#: What the token factor of each phase means (the factor names of issue #32's list).
#: How a reference phase of Strong-only is named in a factor.
REF_LABEL = {"strong_decode": "Strong decode", "strong_prefill": "Strong prefill", "tool": "tool waits", "user": "user waits"}
TOKEN_FACTOR = {
    "weak_prefill": "Weak prefill tokens per Strong-only prefill token",
    "weak_decode": "Weak tokens written per Strong-only decode token",
    "strong_prefill": "Strong prefill tokens per Strong-only prefill token",
    "strong_verify": "tokens moved from Strong decode to Strong prefill (verified per Strong-only decode token)",
    "strong_decode": "Strong repair tokens per Strong-only decode token (set by acceptance)",
    "strong_verdict": "verdict tokens per Strong-only decode token (set by reasoning)",
}


@dataclass(frozen=True)
class Factor:
    name: str
    value: float


@dataclass(frozen=True)
class Term:
    """One phase of one resource: SpecAgent's share of Strong-only's total, Strong-only's own, and the factors
    whose product is SpecAgent's share (empty when a factor is undefined, e.g. no tokens)."""

    phase: str
    label: str
    specagent: float
    strongonly: float
    factors: tuple[Factor, ...] = ()

    @property
    def delta(self) -> float:
        """The waterfall bar: how much this phase moves the ratio from Strong-only's 1."""
        return self.specagent - self.strongonly


@dataclass(frozen=True)
class Decomposition:
    resource: str
    meaning: str
    ratio: float
    terms: tuple[Term, ...]

    def total(self) -> float:
        return math.fsum(t.specagent for t in self.terms)


@dataclass
class Explanation:
    """Every resource's decomposition, the protocol facts behind them, and ratios under counterfactuals."""

    decompositions: dict[str, Decomposition]
    facts: dict[str, float]
    sources: dict[str, str]
    counterfactuals: dict[str, dict[str, float]] = field(default_factory=dict)


def _phase_metric(totals: pd.Series, metric: str, phase: str) -> float:
    return float(totals.get(f"{metric}_{phase}", 0.0))


def _term(phase: str, spec: pd.Series, base: pd.Series, value: Callable[[pd.Series, str], float], total: float) -> Term:
    """SpecAgent's share of `phase` over Strong-only's `total`, factored against the reference phase."""
    ref = REFERENCE[phase]
    x, x_ref = value(spec, phase), value(base, ref)
    share_spec, share_base = x / total, value(base, phase) / total
    factors: tuple[Factor, ...] = ()
    if phase in WAIT_PHASES_NAMES:
        if x_ref > 0:
            factors = (Factor(f"Strong-only's {REF_LABEL[ref]} share", x_ref / total),
                       Factor(f"{REF_LABEL[ref]} vs Strong-only's", x / x_ref))
    else:
        n, n_ref = _phase_metric(spec, "tokens", phase), _phase_metric(base, "tokens", ref)
        if n > 0 and n_ref > 0 and x_ref > 0:
            factors = (Factor(f"Strong-only's {REF_LABEL[ref]} share", x_ref / total),
                       Factor(TOKEN_FACTOR[phase], n / n_ref),
                       Factor(f"cost per token vs Strong-only's {REF_LABEL[ref]}", (x / n) / (x_ref / n_ref)))
    return Term(phase, PHASE_LABEL[phase], share_spec, share_base, factors)


WAIT_PHASES_NAMES = tuple(PHASE_NAMES[p] for p in WAIT_PHASES)
MODEL_PHASES_NAMES = tuple(PHASE_NAMES[p] for p in (*WEAK_PHASES, *STRONG_PHASES))


def _decompose(resource: str, spec: pd.Series, base: pd.Series, value: Callable[[pd.Series, str], float],
               total_of: Callable[[pd.Series], float], phases: Sequence[str], rest: str | None) -> Decomposition | None:
    """The phases' terms over Strong-only's total; `rest` names the term holding what the phases leave (parallel
    lanes' overlap in wall time, API charges in dollars), so the terms always add to the ratio. None when Strong-only
    has none of the resource (a hosted Strong model reads no bytes the run can see): there is no ratio to explain."""
    total, spec_total = total_of(base), total_of(spec)
    if not (math.isfinite(total) and total > 0):
        return None
    terms = [_term(p, spec, base, value, total) for p in phases]
    if rest is not None:
        terms.append(Term("rest", rest, (spec_total - math.fsum(value(spec, p) for p in phases)) / total,
                          (total - math.fsum(value(base, p) for p in phases)) / total))
    return Decomposition(resource, RESOURCES[resource][0], spec_total / total, tuple(terms))


def dollars_by_phase(totals: pd.Series, pools: Sequence[Any]) -> dict[str, float]:
    """GPU dollars per phase, as the bottom line prices them: busy time (time less the engine's per-request
    overhead) × GPUs per replica × $/GPU-hour of the phase's pool; a hosted model's phases cost 0 here (its
    charges are API dollars)."""
    by_role = {p.role: p for p in pools}
    out = {}
    for role, phases in (("weak", WEAK_PHASES), ("strong", STRONG_PHASES)):
        p = by_role.get(role)
        for code in phases:
            name = PHASE_NAMES[code]
            busy = _phase_metric(totals, "time_s", name) - _phase_metric(totals, "request_s", name)
            rate = math.nan if p is None or p.usd_per_gpu_hour is None else p.usd_per_gpu_hour
            out[name] = 0.0 if p is None or busy == 0 else busy * p.gpus * rate / 3600.0
    return out


def decompose(summary: pd.DataFrame, pools: Sequence[Any]) -> dict[str, Decomposition]:
    """Each resource's decomposition from predict's summary (totals per strategy) and the bottom line's pools."""
    if SPEC not in summary.index or BASE not in summary.index:
        raise ValueError("explain needs both specagent and strongonly in the run")
    spec, base = summary.loc[SPEC], summary.loc[BASE]
    dollars = {s: dollars_by_phase(summary.loc[s], pools) for s in (SPEC, BASE)}

    def metric(name: str) -> Callable[[pd.Series, str], float]:
        return lambda row, phase: _phase_metric(row, name, phase)

    def usd(row: pd.Series, phase: str) -> float:
        return dollars[row.name][phase] if phase in dollars[row.name] else 0.0

    def usd_total(row: pd.Series) -> float:
        return math.fsum(dollars[row.name].values()) + float(row.get("api_usd", 0.0))

    out: dict[str, Decomposition | None] = {
        "wall": _decompose("wall", spec, base, metric("time_s"), lambda r: float(r["wall_time_s"]),
                           MODEL_PHASES_NAMES + WAIT_PHASES_NAMES, "overlap of parallel lanes"),
        "model": _decompose("model", spec, base, metric("time_s"), lambda r: float(r["model_wall_time_s"]),
                            MODEL_PHASES_NAMES, "overlap of parallel lanes"),
        "memory": _decompose("memory", spec, base, metric("bytes_read"), lambda r: float(r["total_bytes_read"]),
                             MODEL_PHASES_NAMES, None),
        "flops": _decompose("flops", spec, base, metric("flops"), lambda r: float(r["total_flops"]), MODEL_PHASES_NAMES, None),
    }
    out["usd"] = _decompose("usd", spec, base, usd, usd_total, MODEL_PHASES_NAMES, "API charges")
    return {k: d for k, d in out.items() if d is not None}


def protocol_facts(summary: pd.DataFrame) -> dict[str, float]:
    """The protocol counters behind the token factors: how much of what SpecAgent committed the Weak model wrote
    and how often a review rejected."""
    spec = summary.loc[SPEC]
    reviews, committed_w, committed_s = (float(spec.get(k, 0)) for k in ("reviews", "committed_weak", "committed_strong"))
    base = summary.loc[BASE]
    wall = float(base["wall_time_s"])
    facts = {
        "environment share of Strong-only wall": float(base["env_wall_time_s"]) / wall if wall > 0 else math.nan,
        "committed steps the Weak model wrote": committed_w / (committed_w + committed_s) if committed_w + committed_s else math.nan,
        "reviews that rejected a step": float(spec.get("rejections", 0)) / reviews if reviews else math.nan,
        "Strong calls per Strong-only Strong call": float(spec["strong_calls"]) / float(base["strong_calls"])
        if float(base.get("strong_calls", 0)) else math.nan,
    }
    return facts


def sources(assumptions: Mapping[str, Any]) -> dict[str, str]:
    """Where the factors come from, as the run's assumptions state them."""
    acc = assumptions.get("acceptance_model", {})
    return {
        "environment": f"the workload's recorded user and tool waits ({assumptions.get('environment', 'as recorded')})",
        "time per token": "the batch-1 roofline and serving-engine terms of each deployment (`specagent roofline`)",
        "tokens": "the workload's recorded steps, the acceptance model's Weak token ratio "
                  f"({acc.get('weak_token_ratio', '?') if isinstance(acc, Mapping) else '?'}) and the protocol's plan",
        "acceptance and reasoning": str(acc.get("source", "")) if isinstance(acc, Mapping) else str(acc),
        "verifier prompt": f"{assumptions.get('setting', {}).get('verifier_prompt', '?') if isinstance(assumptions.get('setting'), Mapping) else '?'}"
                           " ('cached': a review prefills only the drafted segment, the history from the prefix cache; "
                           "'fresh' re-reads it: --verifier-prompt, docs/explain.md)",
    }


def ratios(summary: pd.DataFrame, pools: Sequence[Any]) -> dict[str, float]:
    """The five headline ratios of a run, from its decomposition."""
    return {k: d.ratio for k, d in decompose(summary, pools).items()}


#: The counterfactuals `explain` reruns, each one change to the scenario, and what it says.
COUNTERFACTUALS = {
    "zero acceptance": "every kind's semantic and exact acceptance 0 (every reviewed step rejected)",
    "zero acceptance, no replacements": "as zero acceptance, and no verdict's replacement call is valid (each rejection "
                                        "costs a Strong repair turn)",
    "thinking off": "the Strong model does not reason before verdicts and repairs",
    "environment none": "tool and user waits removed (environment preset 'none': model time only)",
    "environment recorded": "the trace's recorded tool and user waits (environment preset 'recorded')",
    "verifier fresh": "each review re-reads the verifier's prompt and the whole history (--verifier-prompt fresh)",
    "verifier cached": "each review prefills only the drafted segment, the history from the prefix cache (--verifier-prompt cached)",
}


def zero_of(acc: Any) -> dict[str, float]:
    return {k: 0.0 for k in acc.accept}


def counterfactual(name: str, scenario: Any, setting: Any) -> tuple[Any, Any]:
    """(scenario, setting) with the one change `name` makes (COUNTERFACTUALS)."""
    from dataclasses import replace

    from specagent.simulator.protocol.environment import Environment

    acc = scenario.acceptance
    if name == "zero acceptance":
        zero = zero_of(acc)
        return scenario.replace(acceptance=replace(acc, accept=zero, exact=dict(zero))), setting
    if name == "zero acceptance, no replacements":
        return scenario.replace(acceptance=replace(acc, accept=zero_of(acc), exact=zero_of(acc), p_valid_replacement=0.0)), setting
    if name == "thinking off":
        return scenario.replace(acceptance=replace(acc, thinking=False)), setting
    if name.startswith("environment "):
        return scenario.replace(environment=Environment(preset=name.split(" ", 1)[1])), setting
    if name in ("verifier fresh", "verifier cached"):
        mode = name.split(" ", 1)[1]
        return scenario.replace(verifier_prompt=mode), replace(setting, verifier_prompt=mode)
    raise ValueError(f"unknown counterfactual {name!r}; expected one of {', '.join(COUNTERFACTUALS)}")


def default_counterfactuals(scenario: Any) -> tuple[str, ...]:
    """Every counterfactual but the environment preset and the verifier prompt the scenario already prices."""
    return tuple(n for n in COUNTERFACTUALS
                 if n not in (f"environment {scenario.environment.preset}", f"verifier {scenario.verifier_prompt}"))


@dataclass(frozen=True)
class Gap:
    """One published range against this run's ratio, and the parts of the ratio that separate them.

    `parts`: the phases adding most to SpecAgent's share, largest first, each with its factors and, per factor of
    SpecAgent's own (tokens per reference token, cost per token against it; not Strong-only's share), the value it alone
    would need to reach the range's nearer end (None: no non-negative value does);
    `closes`: the counterfactuals (COUNTERFACTUALS) whose rerun lands inside the range, with their ratio. Nothing here
    is applied to the prediction: it says what separates it from the figure, in numbers.
    """

    resource: str
    figure_id: str
    ratio: float
    low: float
    high: float
    gap: float  # ratio minus the nearer end of the range (0: inside)
    parts: tuple[tuple[str, float, tuple[Factor, ...], tuple[float | None, ...]], ...]
    closes: tuple[tuple[str, float], ...]


def published_gaps(result: Explanation, ranges: Mapping[str, tuple[str, float, float]], top: int = 2) -> list[Gap]:
    """Per resource with a published range (`ranges`: resource -> (figure id, low, high)), the gap and its parts."""
    out = []
    for res, (fid, low, high) in ranges.items():
        dec = result.decompositions.get(res)
        if dec is None:
            continue
        r = dec.ratio
        gap = r - high if r > high else r - low if r < low else 0.0
        parts = []
        if gap:
            grow = [t for t in dec.terms if t.factors and t.specagent > 0]
            for t in sorted(grow, key=lambda t: -abs(t.specagent))[:top]:
                needs = []
                for i in range(1, len(t.factors)):  # the first factor is Strong-only's own share: not SpecAgent's to move
                    rest = math.prod(f.value for j, f in enumerate(t.factors) if j != i)
                    need = t.factors[i].value - gap / rest if rest > 0 else -1.0
                    needs.append(need if need >= 0 else None)
                parts.append((t.label, t.specagent, t.factors, tuple(needs)))
        closes = tuple((n, c[res]) for n, c in result.counterfactuals.items() if res in c and low <= c[res] <= high) if gap else ()
        out.append(Gap(res, fid, r, low, high, gap, tuple(parts), closes))
    return out


def explain(comp: Any, trajectories: Any, pools: Sequence[Any], counterfactuals: Sequence[str] | None = None,
            progress: Callable[[str], None] | None = None, recorded: Any = None) -> Explanation:
    """The decomposition of a predict run (`comp`, a run.Comparison with its scenario and setting), and its five
    ratios rerun under each counterfactual (default: `default_counterfactuals`) on the same trajectories (Strong-only
    and SpecAgent only). An environment preset is applied to `recorded`, the workload with the trace's own waits
    (default: `trajectories`, right when the scenario's environment is the recorded one)."""
    from specagent.simulator.run import compare

    summary = comp.summary
    out = Explanation(decompose(summary, pools), protocol_facts(summary), sources(comp.assumptions))
    sc, setting = comp.scenario, comp.setting
    if sc is None or setting is None:
        return out
    for name in default_counterfactuals(sc) if counterfactuals is None else counterfactuals:
        if progress is not None:
            progress(name)
        csc, cset = counterfactual(name, sc, setting)
        trajs = csc.environment.apply(trajectories if recorded is None else recorded) if name.startswith("environment ") \
            else trajectories
        c = compare(trajs, (BASE, SPEC), cset, csc.acceptance, csc.seed, csc.pricing_engine, csc.k, csc.review)
        out.counterfactuals[name] = ratios(c.summary, pools)
    return out
