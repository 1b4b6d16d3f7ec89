"""Maximum-likelihood fit of the acceptance and verdict model to verdict logs and protocol logs.

Why: every saving the tool predicts rests on the acceptance model; this turns evidence
(`docs/verdict-log.md` records, or the protocol logs `specagent live` writes) into its
parameters, each with a 95% interval, and says whether the data support position decay and
correlation at all. The likelihood is the model's own (simulator/acceptance/model.py):

* a verification judges drafted steps in order and stops at the first rejection; step i
  is accepted with p = accept[kind] * position_decay**i, times (1 - correlation) for the
  first step after a rejection in the same task. Every judged step is one Bernoulli term.
* a rejection's replacement is valid with p_valid_replacement (Bernoulli); a drafted step
  equals the recorded one with exact[kind] (Bernoulli, where the log says).
* token counts (verdict reason, accept verdict, verification and repair reasoning) are
  negative binomial (NB2: mean mu, shape r; Poisson when not over-dispersed); the model
  takes mu, whose MLE is the sample mean.
* weak_token_ratio: drafted tokens ~ Poisson(ratio x reference tokens), quasi-Poisson
  dispersion for the interval.

Intervals: profile likelihood (2 x log-likelihood drop of chi2_1(0.95) = 3.84) for the
acceptance parameters, p_valid_replacement and exact; for the NB means, Fisher information
(mu and r are orthogonal in NB2, so se(mu) = sqrt(mu (1 + mu/r) / n)) on the log scale, or
the exact Poisson (Garwood) interval; for the ratio, quasi-Poisson Fisher information.
Likelihood-ratio tests of decay (H0: decay = 1) and correlation (H0: correlation = 0) use
the boundary null 0.5 chi2_0 + 0.5 chi2_1. Goodness of fit compares observed and expected
accepted-prefix lengths, per kind of the segment's last drafted step (Pearson chi2 over
cells pooled to an expected count of at least 5).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from scipy import optimize, stats

from specagent.simulator.acceptance.model import KINDS, AcceptanceModel
from specagent.simulator.acceptance.io import acceptance_table, acceptance_toml as model_toml
from specagent.simulator.acceptance.task_effect import (
    CORR, DECAY, SD, SD_BOUND, Judged, loglik, population_accept, prefix_distribution,
)
from specagent.simulator.protocol.workload import episode_from_trajectory, step_groups
from specagent.traces.errors import TraceFormatError
from specagent.traces.io import load_trajectories
from specagent.traces.schema import Trajectory
from specagent.traces.verdict_log import SCHEMA, VerdictRecord, iter_verdict_log, previous_rejected, previous_rejected_of

CHI2_95 = float(stats.chi2.ppf(0.95, 1))  # 3.841
CHI2_BOUNDARY_95 = float(stats.chi2.ppf(0.90, 1))  # 2.706: ½χ²₀ + ½χ²₁ exceeds it 5% of the time
#: The fit's name for the task effect's standard deviation (logit scale): reported, not a field of the model.
TASK_EFFECT = "task_effect_sd"
_EPS = 1e-9
LOG_FORMAT = f"a verdict log ('{SCHEMA}' JSONL) or a protocol log (`specagent live`'s protocol_log.jsonl)"


@dataclass
class Segment:
    """One verification as the acceptance likelihood sees it: the judged kinds and where it stopped."""

    kinds: tuple[int, ...]  # codes into KINDS of the drafted steps (a protocol log: the judged ones)
    after_rejection: bool
    accepted_prefix: int
    complete: bool  # all drafted steps known (verdict logs); a protocol log drops a rejected segment's tail
    task: int | None = None  # the task the verification belongs to (None: a task of its own), for the task effect


@dataclass
class FitData:
    """Everything a fit reads, from any mix of verdict logs and protocol logs."""

    segments: list[Segment] = field(default_factory=list)
    replacement_valid: list[bool] = field(default_factory=list)
    exact_kind: list[int] = field(default_factory=list)
    exact_match: list[bool] = field(default_factory=list)
    counts: dict[str, list[int]] = field(default_factory=lambda: {k: [] for k in COUNT_PARAMS + ("repair_tokens",)})
    drafted_tokens: list[int] = field(default_factory=list)
    reference_tokens: list[int] = field(default_factory=list)
    token_task: list[int] = field(default_factory=list)  # the task of each (drafted, reference) pair
    thinking: list[bool] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    records: int = 0
    task_ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (log, task) -> index

    def task_index(self, log: str, task: str) -> int:
        """A task is a task of one log: the same id in two logs is two runs."""
        return self.task_ids.setdefault((log, task), len(self.task_ids))


#: Token counts of the model fitted as NB means (the model's field names).
COUNT_PARAMS = ("verdict_tokens", "accept_verdict_tokens", "verify_reasoning_tokens", "repair_reasoning_tokens")


# ------------------------------------------------------------------------------------------------ reading
def add_verdict_records(data: FitData, records: Sequence[VerdictRecord], name: str) -> None:
    for r, aft in zip(records, previous_rejected(records)):
        _add_record(data, r, aft, data.task_index(name, r.task))
    data.records += len(records)
    data.logs.append(f"{name} ({len(records)} verdict records)")


def add_verdict_log(data: FitData, path: Path, seen: dict[bytes, tuple[str, int]]) -> None:
    """A verdict log read one record at a time, keeping what the likelihood needs (issue #35: 10^6 records were
    held as objects, 3.5 KB each); the after-a-rejection flags are set once every record of a task is known."""
    first = len(data.segments)
    summary: list[tuple[str, int, bool]] = []
    for i, (_, r) in enumerate(iter_verdict_log(path), 1):
        _check_new(seen, r.to_json(), str(path), "record", i, "verification")
        _add_record(data, r, False, data.task_index(str(path), r.task))
        summary.append((r.task, r.position, r.rejected))
    for j, aft in enumerate(previous_rejected_of(summary)):
        data.segments[first + j].after_rejection = aft
    data.records += len(summary)
    data.logs.append(f"{path} ({len(summary)} verdict records)")


def _add_record(data: FitData, r: VerdictRecord, aft: bool, task: int) -> None:
    kinds = tuple(KINDS.index(s.kind) for s in r.drafted)
    data.segments.append(Segment(kinds, aft, r.accepted_prefix, True, task))
    data.thinking.append(r.thinking)
    for s in r.drafted:
        if s.exact_match is not None:
            data.exact_kind.append(KINDS.index(s.kind))
            data.exact_match.append(s.exact_match)
        if s.reference_tokens is not None and s.reference_tokens > 0:
            data.drafted_tokens.append(s.tokens)
            data.reference_tokens.append(s.reference_tokens)
            data.token_task.append(task)
    if r.thinking:
        data.counts["verify_reasoning_tokens"].append(r.verify_reasoning_tokens)
    if not r.rejected:
        data.counts["accept_verdict_tokens"].append(r.verdict_tokens)
        return
    bad = r.drafted[r.accepted_prefix]
    if r.replacement_offered:
        data.replacement_valid.append(bool(r.replacement_valid))
        call = r.replacement_tokens if r.replacement_tokens is not None else (
            bad.reference_tokens if bad.reference_tokens is not None else bad.tokens)
    else:
        data.replacement_valid.append(False)
        call = 0
    data.counts["verdict_tokens"].append(max(r.verdict_tokens - call, 0))
    if r.repair_tokens is not None:
        data.counts["repair_tokens"].append(r.repair_tokens)
        if r.thinking and r.repair_reasoning_tokens is not None:
            data.counts["repair_reasoning_tokens"].append(r.repair_reasoning_tokens)


def add_protocol_log(data: FitData, trajs: Sequence[Trajectory], name: str) -> None:
    """Reviewed segments of `specagent live` protocol logs: verdicts and replacements (their token counts are
    recorded as totals, reasoning included, so they set no token parameter)."""
    n = 0
    for ti, t in enumerate(trajs):
        if not t.is_protocol_log:
            continue
        units = episode_from_trajectory(t).units
        groups = step_groups(t)
        segs: dict[int, list[tuple[int, str, int]]] = {}
        for u, g in zip(units, groups):
            lab = next((s.label for s in g.agent if s.label is not None), None)
            if lab is None or lab.verdict is None:
                continue  # user turns, unreviewed chunks
            # a repair's own kind may differ from the draft it replaced: the rejection belongs to the draft's kind
            kind = lab.rejected_kind.value if lab.verdict.value == "repair" and lab.rejected_kind is not None else u.kind
            segs.setdefault(lab.segment, []).append((KINDS.index(kind), lab.verdict.value, u.repair_tokens))
        after = False
        task = data.task_index(name, f"{t.task_id}#{ti}")  # one trajectory, one run of a task
        for s in sorted(segs):
            steps = segs[s]
            rep = [i for i, x in enumerate(steps) if x[1] == "repair"]
            a = rep[0] if rep else len(steps)
            data.segments.append(Segment(tuple(x[0] for x in steps[:a + 1]), after, a, not rep, task))
            if rep:
                data.replacement_valid.append(steps[a][2] == 0)
            after = bool(rep)
            n += 1
    if not n:
        raise TraceFormatError(name, "file", "<records>", LOG_FORMAT, found="trajectories without reviewed, labelled segments")
    data.records += n
    data.logs.append(f"{name} ({n} reviewed segments of {len(trajs)} protocol-log trajectories)")


def read_logs(paths: Iterable[str | Path]) -> FitData:
    """Every log, by content: a verdict log when its first record names the schema, else a protocol log.

    Each verification has an identity, the hash of its whole record (a protocol log's: of its trajectory):
    the same one given twice (the same log twice, a copy, an overlapping export) is refused, naming both
    places, since counting it twice would narrow every interval with evidence that is not there."""
    data = FitData()
    seen: dict[bytes, tuple[str, int]] = {}
    for p in paths:
        p = Path(p)
        if _is_verdict_log(p):
            add_verdict_log(data, p, seen)
        else:
            trajs = load_trajectories(p)
            for i, t in enumerate(trajs, 1):
                _check_new(seen, t.model_dump_json(), str(p), "trajectory", i, "protocol run")
            add_protocol_log(data, trajs, str(p))
    return data


def _check_new(seen: dict[bytes, tuple[str, int]], text: str, name: str, unit: str, i: int, what: str) -> None:
    key = hashlib.sha256(text.encode("utf-8")).digest()[:16]  # 128 bits: no two verifications collide by chance
    if key in seen:
        where = f"{seen[key][0]}: {unit} {seen[key][1]}"
        raise TraceFormatError(name, f"{unit} {i}", "<record>", f"a {what} not already read",
                               found=f"the same {what} as {where} (a log given twice, or a copy: it would count twice)")
    seen[key] = (name, i)


def _is_verdict_log(p: Path) -> bool:
    """A protocol log is a trace (JSONL trajectories with `steps`); anything else goes to the verdict-log reader,
    which names what is wrong with it."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", errors="replace").lstrip("\ufeff")
    except OSError:
        return True
    first = next((ln for ln in head.split("\n") if ln.strip()), "")
    try:
        obj = json.loads(first)
    except ValueError:
        return not first.lstrip().startswith('{"schema_version"') and '"steps"' not in first
    return not (isinstance(obj, dict) and "steps" in obj and "schema" not in obj)


# ------------------------------------------------------------------------------------------------ likelihoods
def acceptance_loglik(theta: np.ndarray, j: Judged) -> float:
    """The marginal log-likelihood of the judged steps (`task_effect.loglik` without its gradient)."""
    return loglik(theta, j)[0]


@dataclass
class ParamFit:
    name: str
    estimate: float
    low: float
    high: float
    n: int
    how: str  # interval method

    def row(self) -> dict:
        return dataclasses.asdict(self)


class _Profiled:
    """Maximise a log-likelihood over bounded free parameters; profile one parameter at a time.

    `ll(x)` returns the log-likelihood, or (log-likelihood, gradient) with `gradient=True` (the optimiser then
    takes the exact gradient rather than finite differences: the task effect's likelihood costs a matrix product)."""

    def __init__(self, ll, x0: np.ndarray, bounds: list[tuple[float, float]], free: list[int], gradient: bool = False):
        self.ll, self.bounds, self.free, self.gradient = ll, bounds, free, gradient
        self.x = x0.astype(float).copy()
        self.best = self._maximise(self.x, free)

    def _value(self, x: np.ndarray) -> float:
        v = self.ll(x)
        return float(v[0] if self.gradient else v)

    def _maximise(self, x: np.ndarray, free: list[int]) -> float:
        if not free:
            return self._value(x)
        full = x.copy()

        def nll(v):
            full[free] = v
            if not self.gradient:
                return -self.ll(full)
            f, g = self.ll(full)
            return -f, -g[free]

        res = optimize.minimize(nll, x[free], method="SLSQP", jac=self.gradient or None,
                                bounds=[self.bounds[i] for i in free], options={"ftol": 1e-10, "maxiter": 500})
        x[free] = res.x
        return self._value(x)

    def restricted(self, i: int, value: float) -> float:
        x = self.x.copy()
        x[i] = value
        return self._maximise(x, [f for f in self.free if f != i])

    def interval(self, i: int) -> tuple[float, float]:
        """The 95% profile interval: {v : 2 (best - restricted(v)) <= 3.84} inside the bounds, and a bound itself only
        when 2 (best - restricted(bound)) <= 2.71 (the 95% point of the boundary null ½χ²₀ + ½χ²₁, the LR tests' own):
        with χ²₁ at a bound, an interval covers a true value on the bound 97.5% of the time, not 95%."""
        lo_b, hi_b = self.bounds[i]
        xh = self.x[i]

        def drop(v):
            return 2.0 * (self.best - self.restricted(i, v)) - CHI2_95

        def end(b: float) -> float:
            d = drop(b)
            if d + CHI2_95 <= CHI2_BOUNDARY_95 or xh == b:
                return b
            if d <= 0:  # inside the χ²₁ set but refused at the bound: the interval runs to just inside it
                return b + (xh - b) * 1e-6
            return optimize.brentq(drop, *sorted((b, xh)), xtol=1e-6)

        return float(end(lo_b)), float(end(hi_b))


def _binomial(name: str, ys: Sequence[bool]) -> ParamFit:
    y = np.asarray(ys, dtype=bool)
    n, k = len(y), int(y.sum())

    def ll(x):
        p = min(max(x[0], _EPS), 1 - _EPS)
        return k * math.log(p) + (n - k) * math.log1p(-p)

    pr = _Profiled(ll, np.array([k / n]), [(0.0, 1.0)], [])
    lo, hi = pr.interval(0)
    return ParamFit(name, k / n, lo, hi, n, "profile likelihood")


def nb_mean(name: str, xs: Sequence[int]) -> tuple[ParamFit, float | None]:
    """NB2 mean with its 95% interval, and the fitted shape r (None: Poisson)."""
    x = np.asarray(xs, dtype=np.float64)
    n, mu = len(x), float(x.mean())
    var = float(x.var(ddof=1)) if n > 1 else 0.0
    if var <= mu or mu == 0:
        s = float(x.sum())
        lo = 0.0 if s == 0 else float(stats.chi2.ppf(0.025, 2 * s)) / (2 * n)
        hi = float(stats.chi2.ppf(0.975, 2 * s + 2)) / (2 * n)
        return ParamFit(name, mu, lo, hi, n, "exact Poisson (Garwood)"), None

    def nll(log_r):
        r = math.exp(log_r)
        return -float(np.sum(stats.nbinom.logpmf(x, r, r / (r + mu))))

    r = math.exp(optimize.minimize_scalar(nll, bounds=(-10.0, 15.0), method="bounded").x)
    se = math.sqrt(mu * (1 + mu / r) / n)
    return ParamFit(name, mu, mu * math.exp(-1.96 * se / mu), mu * math.exp(1.96 * se / mu), n,
                    "Fisher information (NB2, log scale)"), r


def _ratio(tokens: Sequence[int], reference: Sequence[int], task: Sequence[int] | None = None) -> ParamFit:
    """Σ drafted / Σ reference tokens, with a cluster-robust (sandwich) interval on the log scale.

    Why robust: the drafted length of a step is its reference length times noise that is multiplicative (a
    variance growing with the square of the length, not with it as Poisson assumes), and one task's steps share
    it; the sandwich variance of the ratio estimator, Σ_task (Σ (y - r x))² / (Σ x)², assumes neither."""
    y, x = np.asarray(tokens, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    r = float(y.sum() / x.sum())
    n = len(y)
    if r <= 0:
        return ParamFit("weak_token_ratio", r, 0.0, 0.0, n, "cluster-robust sandwich, log scale")
    g = np.arange(n) if task is None else np.unique(np.asarray(task, dtype=np.int64), return_inverse=True)[1].ravel()
    resid = np.bincount(g, weights=y - r * x)
    k = len(resid)
    var = float(np.sum(resid ** 2)) / x.sum() ** 2 * (k / (k - 1) if k > 1 else 1.0)
    se_log = math.sqrt(var) / r
    z = float(stats.t.ppf(0.975, max(k - 1, 1)))
    return ParamFit("weak_token_ratio", r, r * math.exp(-z * se_log), r * math.exp(z * se_log), n,
                    "cluster-robust sandwich, log scale")


# ------------------------------------------------------------------------------------------------ the fit
@dataclass
class FitResult:
    model: AcceptanceModel
    params: list[ParamFit]
    tests: dict[str, dict]
    goodness: dict[str, dict]
    not_fitted: dict[str, str]
    diagnostics: dict[str, float]
    data: FitData

    def table(self) -> dict:
        """What the acceptance table's `[acceptance.fit]` stores."""
        return self.model.fit


def _goodness(theta: np.ndarray, segs: Sequence[Segment]) -> dict[str, dict]:
    full = [s for s in segs if s.complete]  # a protocol log's rejected segments lack their tail
    out: dict[str, dict] = {}
    for kc, kind in enumerate(KINDS):
        g = [s for s in full if s.kinds[-1] == kc]
        if len(g) < 5:
            continue
        L = max(len(s.kinds) for s in g)
        pred = np.zeros(L + 1)
        for s in g:  # the task effect averaged over its distribution (not over the task's history: a diagnostic)
            pred[:len(s.kinds) + 1] += prefix_distribution(theta, s.kinds, s.after_rejection)
        obs = np.bincount([s.accepted_prefix for s in g], minlength=len(pred)).astype(float)
        # pool cells from the top until each has an expected count >= 5
        e_cells, o_cells = [], []
        e_acc = o_acc = 0.0
        for e, o in zip(pred[::-1], obs[::-1]):
            e_acc, o_acc = e_acc + e, o_acc + o
            if e_acc >= 5:
                e_cells.append(e_acc)
                o_cells.append(o_acc)
                e_acc = o_acc = 0.0
        if e_acc or o_acc:
            if e_cells:
                e_cells[-1] += e_acc
                o_cells[-1] += o_acc
            else:
                e_cells, o_cells = [e_acc], [o_acc]
        e_arr, o_arr = np.array(e_cells), np.array(o_cells)
        chi2 = float(np.sum((o_arr - e_arr) ** 2 / e_arr))
        df = len(e_cells) - 1
        out[kind] = {"segments": len(g), "observed": [int(x) for x in obs], "expected": [round(float(x), 2) for x in pred],
                     "chi2": round(chi2, 3), "df": df, "p_value": round(float(stats.chi2.sf(chi2, df)), 4) if df > 0 else 1.0}
    return out


def fit_acceptance(data: FitData, base: AcceptanceModel | None = None) -> FitResult:
    """The MLE of every parameter the logs inform, with 95% intervals; the others stay at `base` and are listed."""
    base = base or AcceptanceModel()
    if not data.segments:
        raise ValueError("the logs hold no verification to fit")
    j = Judged.of(data.segments)
    kinds_seen = sorted(set(j.kind.tolist()))
    has_decay = bool((j.pos > 0).any())
    has_corr = bool(j.after.any())
    has_sd = j.informs_task_effect()
    # the task effect starts away from 0: at 0 its gradient vanishes (the likelihood is even in it)
    x0 = np.array([base.accept[k] for k in KINDS] + [base.position_decay if has_decay else 1.0,
                                                     base.correlation if has_corr else 0.0, 0.5 if has_sd else 0.0], dtype=float)
    for kc in kinds_seen:  # start at the observed acceptance of the kind: a good, feasible start
        m = j.kind == kc
        x0[kc] = min(max(float(j.n_accepted[m].sum() / (j.n_accepted[m].sum() + j.n_rejected[m].sum())), 0.05), 0.95)
    bounds = [(0.0, 1.0)] * 5 + [(1e-3, 1.0), (0.0, 1.0), (0.0, SD_BOUND)]
    free = kinds_seen + ([DECAY] if has_decay else []) + ([CORR] if has_corr else []) + ([SD] if has_sd else [])
    pr = _Profiled(lambda x: loglik(x, j), x0, bounds, free, gradient=True)
    theta = pr.x
    params: list[ParamFit] = []
    not_fitted: dict[str, str] = {}
    for kc, kind in enumerate(KINDS):
        if kc in kinds_seen:
            lo, hi = pr.interval(kc)
            params.append(ParamFit(f"accept.{kind}", float(theta[kc]), lo, hi, j.of_kind(kc), "profile likelihood"))
        else:
            not_fitted[f"accept.{kind}"] = "no drafted step of this kind was judged"
    tests: dict[str, dict] = {}
    for idx, name, null, present in ((DECAY, "position_decay", 1.0, has_decay), (CORR, "correlation", 0.0, has_corr),
                                     (SD, TASK_EFFECT, 0.0, has_sd)):
        if not present:
            not_fitted[name] = {DECAY: "no step judged past a segment's first position",
                                CORR: "no verification follows a rejection in the same task",
                                SD: "no task has two judged steps"}[idx]
            continue
        lo, hi = pr.interval(idx)
        params.append(ParamFit(name, float(theta[idx]), lo, hi, j.tasks if idx == SD else j.steps, "profile likelihood"))
        stat = max(0.0, 2.0 * (pr.best - pr.restricted(idx, null)))
        tests[name] = {"null": f"{name} = {null:g}", "statistic": round(stat, 4),
                       "p_value": round(0.5 * float(stats.chi2.sf(stat, 1)), 6) if stat > 0 else 1.0,
                       "supported": bool(0.5 * stats.chi2.sf(stat, 1) < 0.05)}
    fields: dict = {"accept": {k: round(float(theta[i]), 6) if i in kinds_seen else base.accept[k] for i, k in enumerate(KINDS)},
                    "position_decay": round(float(theta[DECAY]), 6) if has_decay else base.position_decay,
                    "correlation": round(float(theta[CORR]), 6) if has_corr else base.correlation}
    if data.replacement_valid:
        f = _binomial("p_valid_replacement", data.replacement_valid)
        params.append(f)
        fields["p_valid_replacement"] = round(f.estimate, 6)
    else:
        not_fitted["p_valid_replacement"] = "no rejection in the logs"
    if data.exact_match:
        ek, em = np.array(data.exact_kind), np.array(data.exact_match)
        exact = dict(base.exact)
        for kc, kind in enumerate(KINDS):
            m = ek == kc
            if m.any():
                f = _binomial(f"exact.{kind}", em[m].tolist())
                params.append(f)
                exact[kind] = round(f.estimate, 6)
        fields["exact"] = exact
    else:
        not_fitted["exact"] = "no drafted step carries exact_match"
    diagnostics: dict[str, float] = {}
    for name in COUNT_PARAMS:
        xs = data.counts[name]
        if not xs:
            not_fitted[name] = {"verdict_tokens": "no rejection in a verdict log",
                                "accept_verdict_tokens": "no whole-segment acceptance in a verdict log",
                                "verify_reasoning_tokens": "no verification with thinking on in a verdict log",
                                "repair_reasoning_tokens": "no repair turn with thinking on in a verdict log"}[name]
            continue
        f, shape = nb_mean(name, xs)
        params.append(f)
        fields[name] = int(round(f.estimate))
        if shape is not None:
            diagnostics[f"{name}_nb_shape"] = round(shape, 4)
    if data.counts["repair_tokens"]:
        f, _ = nb_mean("repair_tokens", data.counts["repair_tokens"])
        diagnostics["repair_tokens_mean"] = round(f.estimate, 3)
        diagnostics["repair_tokens_low"] = round(f.low, 3)
        diagnostics["repair_tokens_high"] = round(f.high, 3)
    if data.drafted_tokens:
        f = _ratio(data.drafted_tokens, data.reference_tokens, data.token_task)
        if f.estimate > 0:
            params.append(f)
            fields["weak_token_ratio"] = round(f.estimate, 6)
        else:
            not_fitted["weak_token_ratio"] = "every drafted step has 0 tokens"
    else:
        not_fitted["weak_token_ratio"] = "no drafted step carries reference_tokens"
    if data.thinking:
        fields["thinking"] = any(data.thinking)
        if any(data.thinking) and not all(data.thinking):
            diagnostics["thinking_share"] = round(sum(data.thinking) / len(data.thinking), 4)
    goodness = _goodness(theta, data.segments)
    source = (f"fitted by `specagent acceptance fit` (maximum likelihood) from {'; '.join(data.logs)}; "
              f"parameters not in the logs keep their defaults: {', '.join(sorted(not_fitted)) or 'none'}")
    meta = {
        "method": "maximum likelihood (simulator/acceptance/fit.py)",
        "interval_method": "95%: profile likelihood (acceptance, decay, correlation, p_valid_replacement, exact); Fisher "
                           "information (NB2 token means, log scale; exact Poisson when not over-dispersed); quasi-Poisson "
                           "Fisher information (weak_token_ratio)",
        "logs": list(data.logs), "records": data.records,
        "intervals": {p.name: [round(p.low, 6), round(p.high, 6)] for p in params if p.name != TASK_EFFECT},
        "tests": tests, "goodness_of_fit": goodness, "not_fitted": not_fitted, "diagnostics": diagnostics,
    }
    sd_fit = next((p for p in params if p.name == TASK_EFFECT), None)
    if sd_fit is not None:
        meta["task_effect"] = {
            "sd": round(sd_fit.estimate, 6), "interval": [round(sd_fit.low, 6), round(sd_fit.high, 6)], "tasks": j.tasks,
            "model": "logit(p) + u, u ~ Normal(0, sd^2) per task; accept.KIND is the median task's acceptance",
            # what the planner (no task effect) would need to match the mean task's first step
            "population_accept": {KINDS[kc]: round(population_accept(float(theta[kc]), sd_fit.estimate), 6) for kc in kinds_seen},
        }
    model = dataclasses.replace(base, **fields, source=source, fit=meta, calibrated_on={})  # the user's own logs
    return FitResult(model, params, tests, goodness, not_fitted, diagnostics, data)


def acceptance_toml(result: FitResult) -> str:
    """The `[acceptance]` table a scenario takes (`--acceptance FILE`, or `acceptance = "FILE"` in a scenario)."""
    head = ("# The acceptance and verdict model fitted by `specagent acceptance fit`; pass it with\n"
            "# `--acceptance THIS.toml` (predict, simulate, plan, ...) or `acceptance = \"THIS.toml\"` in a scenario.\n")
    return model_toml(result.model, head)


def to_json(result: FitResult) -> str:
    return json.dumps({"acceptance": acceptance_table(result.model), "params": [p.row() for p in result.params]},
                      indent=2)
