"""Recovery suite for `specagent acceptance fit`: verdict logs drawn under known parameters, fitted by the shipped
fit, and how often each printed 95% interval holds the truth.

Why a separate generator: the fit's own tests draw logs with `simulate_verdict_log`, which shares the fit's view of
the model, so a misunderstanding common to both would pass. This one is written from the format's description
(docs/verdict-log.md) and the model's statement in docs/acceptance-fit.md only, and it draws what the fit does not
assume: a per-task random effect on acceptance (sd `sigma_task` on the logit scale) and multiplicative (log-normal)
noise on every token count, per step and per task. It writes `specagent.verdict/1` JSON lines itself and fits them
through `read_logs` and `fit_acceptance` (the CLI's path).

    python tools/verdict_recovery.py                   # print the coverage table (200 replicates per scenario)
    python tools/verdict_recovery.py --write-doc       # and write it into docs/acceptance-fit.md between markers
    python tools/verdict_recovery.py --replicates 20 --jobs 1
    python tools/verdict_recovery.py --replicates 1000 --quick   # only the rows that need no acceptance likelihood
    python tools/verdict_recovery.py --write-doc --cache .recovery-cache   # resumable: replicates already run are read

Two stages, fixed before any table was read: a row whose coverage over the table's replicates lands outside 2 SE of
nominal is rerun on `--confirm` fresh replicates (those after the table's, by default 800) and judged on those. With
38 rows an exact interval lands outside 2 SE somewhere in most tables (`_p_outside`); a real under-coverage is
outside on the fresh replicates too. The table prints both stages and the rule's chances (`_two_stage_chances`).

Seeded: replicate r of a scenario draws from numpy's default_rng([scenario seed, r]), so the table is the same
bytes for any --jobs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "acceptance-fit.md"
BEGIN = "<!-- verdict-recovery:begin (tools/verdict_recovery.py --write-doc) -->"
END = "<!-- verdict-recovery:end -->"
KINDS = ("read", "write", "generic", "think", "reply")
MIDDLE = ("read", "generic", "think")  # kinds that can stand before a segment's last step (a write or reply ends it)
NOMINAL = 0.95
ALPHA = 0.05


@dataclass(frozen=True)
class Truth:
    """The parameters a log is drawn under (acceptance fields as docs/acceptance-fit.md states the model)."""

    name: str
    seed: int
    accept: dict = field(default_factory=lambda: {"read": 0.85, "write": 0.6, "generic": 0.7, "think": 0.9, "reply": 0.8})
    position_decay: float = 0.9
    correlation: float = 0.3
    sigma_task: float = 0.0  # sd of a per-task effect added to logit(accept[kind])
    p_offer: float = 0.9  # a rejection's verdict carries a replacement call
    p_valid_given_offer: float = 0.6
    exact: dict = field(default_factory=lambda: {"read": 0.5, "write": 0.3, "generic": 0.4, "think": 0.2, "reply": 0.1})
    weak_token_ratio: float = 0.8
    reference_mean: float = 60.0
    verdict_tokens: float = 48.0  # the verdict's reason (the replacement call excluded)
    accept_verdict_tokens: float = 6.0
    verify_reasoning_tokens: float = 300.0
    repair_reasoning_tokens: float = 200.0
    repair_tokens: float = 70.0
    step_noise: float = 0.3  # sd of log multiplicative noise on drafted tokens per step
    task_noise: float = 0.2  # ... and per task (all of a task's drafted steps)
    count_noise: float = 0.5  # sd of log multiplicative noise on verdict, reasoning and repair token counts
    tasks: int = 150
    verifications: int = 8
    k: int = 4

    def value(self, name: str) -> float:
        """The true value of a fitted parameter, as the fit names it."""
        table, _, kind = name.partition(".")
        if table == "accept":
            return self.accept[kind]
        if table == "exact":
            return self.exact[kind]
        if name == "task_sd":  # the fit's per-task random intercept: the sd drawn here
            return self.sigma_task
        if name == "p_valid_replacement":  # a rejection with no replacement offered counts as not valid
            return self.p_offer * self.p_valid_given_offer
        return float(getattr(self, name))


def _noisy(rng: np.random.Generator, mean: float, sd: float) -> int:
    """Poisson around mean x a log-normal factor of mean 1 (multiplicative noise)."""
    return int(rng.poisson(mean * math.exp(rng.normal(-sd * sd / 2, sd)))) if mean > 0 else 0


def draw_log(t: Truth, rng: np.random.Generator) -> list[dict]:
    """One verdict log (docs/verdict-log.md): `t.tasks` tasks of `t.verifications` verifications each, in position
    order. A segment drafts 1..K steps; a shorter one ends at a write or a reply, one of K steps at any kind. Step i
    of a segment is accepted with expit(logit(accept[kind]) + u_task) * decay**i, times (1 - correlation) for the
    first step after a rejection in the same task; judging stops at the first rejection."""
    out: list[dict] = []
    logit = {k: math.log(p / (1 - p)) for k, p in t.accept.items()}
    for ti in range(t.tasks):
        u = float(rng.normal(0.0, t.sigma_task)) if t.sigma_task > 0 else 0.0
        task_factor = math.exp(rng.normal(-t.task_noise ** 2 / 2, t.task_noise)) if t.task_noise > 0 else 1.0
        pos, after = 0, False
        for _ in range(t.verifications):
            n = int(rng.integers(1, t.k + 1))
            kinds = [str(rng.choice(MIDDLE)) for _ in range(n - 1)]
            kinds.append(str(rng.choice(KINDS if n == t.k else ("write", "reply"))))
            ended = "write" if kinds[-1] == "write" else "reply" if kinds[-1] == "reply" else "k"
            drafted = []
            for kd in kinds:
                ref = int(rng.poisson(t.reference_mean)) + 1
                mult = task_factor * math.exp(rng.normal(-t.step_noise ** 2 / 2, t.step_noise))
                drafted.append({"kind": kd, "name": None if kd == "reply" else f"tool_{kd}",
                                "tokens": int(rng.poisson(t.weak_token_ratio * ref * mult)), "reference_tokens": ref,
                                "exact_match": bool(rng.random() < t.exact[kd])})
            a = n
            for i, kd in enumerate(kinds):
                p = 1.0 / (1.0 + math.exp(-(logit[kd] + u))) * t.position_decay ** i
                if i == 0 and after:
                    p *= 1.0 - t.correlation
                if not rng.random() < p:
                    a = i
                    break
            rec = {"schema": "specagent.verdict/1", "task": f"rec-{ti}", "position": pos, "drafted": drafted,
                   "ended_by": ended, "accepted_prefix": a, "thinking": True,
                   "verify_reasoning_tokens": _noisy(rng, t.verify_reasoning_tokens, t.count_noise)}
            if a == n:
                rec.update(verdict_tokens=_noisy(rng, t.accept_verdict_tokens, t.count_noise), replacement_offered=False,
                           replacement_valid=None, repair_tokens=None, repair_reasoning_tokens=None)
                pos += n
            else:
                offered = bool(rng.random() < t.p_offer)
                valid = offered and bool(rng.random() < t.p_valid_given_offer)
                reason = _noisy(rng, t.verdict_tokens, t.count_noise)
                call = int(rng.poisson(drafted[a]["reference_tokens"])) if offered else 0
                rec.update(verdict_tokens=reason + call, replacement_offered=offered,
                           replacement_valid=valid if offered else None,
                           repair_tokens=None if valid else _noisy(rng, t.repair_tokens, t.count_noise),
                           repair_reasoning_tokens=None if valid else _noisy(rng, t.repair_reasoning_tokens, t.count_noise))
                if offered:
                    rec["replacement_tokens"] = call
                pos += a + 1
            after = a < n
            out.append(rec)
            pos += int(rng.integers(0, 3))  # user turns between verifications
    return out


def fit_one(t: Truth, rep: int, quick: bool = False) -> dict:
    """Draw replicate `rep`, write it, fit it with the shipped fit; what each interval and test said. `quick`: only
    the parameters whose intervals need no acceptance likelihood (`quick_params`), the same draws."""
    from specagent.simulator.acceptance.fit import fit_acceptance, read_logs

    rng = np.random.default_rng([t.seed, rep])
    recs = draw_log(t, rng)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "v.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        data = read_logs([path])
    if quick:
        return {"covered": {p.name: _covers(p, t.value(p.name)) for p in quick_params(data)}, "supported": {}, "found": ""}
    res = fit_acceptance(data)
    return {"covered": {p.name: _covers(p, t.value(p.name)) for p in res.params},
            "supported": {k: bool(v["supported"]) for k, v in res.tests.items()},
            "found": res.diagnostics.get("dependence", "")}


def quick_params(data) -> list:
    """The intervals of p_valid_replacement, exact.KIND, the token means and weak_token_ratio, by the functions
    `fit_acceptance` calls on the same data (a test holds them equal to its rows): they read the counts alone, so
    1,000 replicates of them take minutes where the whole fit (the task effect's quadrature) takes hours."""
    from specagent.simulator.acceptance.fit import COUNT_PARAMS, _binomial, _ratio, nb_mean
    from specagent.simulator.acceptance.model import KINDS

    out = [_binomial("p_valid_replacement", data.replacement_valid)] if data.replacement_valid else []
    ek, em = np.array(data.exact_kind), np.array(data.exact_match)
    out += [_binomial(f"exact.{k}", em[ek == kc].tolist()) for kc, k in enumerate(KINDS) if (ek == kc).any()]
    out += [nb_mean(n, data.counts[n])[0] for n in COUNT_PARAMS if data.counts[n]]
    if data.drafted_tokens:
        out.append(_ratio(data.drafted_tokens, data.reference_tokens,
                          list(data.ratio_by_task.values()) if len(data.ratio_by_task) >= 2 else None))
    return out


def _is_quick(name: str) -> bool:
    """A row `quick_params` gives: its interval reads the counts alone."""
    return not (name.startswith("accept.") or name in ("position_decay", "correlation", "task_sd"))


def _covers(p, v: float) -> bool:
    """The interval holds v; an interval the fit says is open at 0 (task_sd when the boundary test rejects 0 but the
    profile at 0 is within 3.84) does not hold 0."""
    if v == 0.0 and p.low == 0.0 and "open at 0" in p.how:
        return False
    return bool(p.low <= v <= p.high)


def _job(args: tuple[Truth, int, bool]) -> dict:
    return fit_one(*args)


def _code_digest() -> str:
    """What a cached replicate was computed by: this file's generator and fit call and the acceptance package."""
    import inspect

    h = hashlib.sha256("".join(inspect.getsource(f) for f in (_noisy, draw_log, fit_one, quick_params, _is_quick,
                                                              _covers)).encode())
    for f in sorted((ROOT / "simulator" / "acceptance").glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _cache_path(cache: Path, t: Truth, rep: int, quick: bool, digest: str) -> Path:
    key = hashlib.sha256(repr(t).encode()).hexdigest()[:12]
    return cache / digest / f"{t.name}-{key}-{'quick' if quick else 'full'}-{rep}.json"


def run(t: Truth, replicates: int, jobs: int, quick: bool = False, start: int = 0, cache: Path | None = None) -> list[dict]:
    """Replicates start..start+replicates-1 of scenario t. With `cache`, each replicate's result is a JSON file
    (written whole, then renamed) keyed by the scenario, the replicate and a digest of the code: a stopped run resumes
    where it was and a change to the fit never reads an old result."""
    reps = range(start, start + replicates)
    done: dict[int, dict] = {}
    if cache is not None:
        digest = _code_digest()
        for r in reps:
            f = _cache_path(cache, t, r, quick, digest)
            if f.exists():
                done[r] = json.loads(f.read_text(encoding="utf-8"))
    work = [(t, r, quick) for r in reps if r not in done]
    if jobs <= 1 or len(work) <= 1:
        fresh = map(_job, work)
        ex = None
    else:
        ex = ProcessPoolExecutor(jobs)
        fresh = ex.map(_job, work, chunksize=1 if cache is not None else max(1, len(work) // (4 * jobs)))
    try:
        for (_, r, _), res in zip(work, fresh):
            done[r] = res
            if cache is not None:
                f = _cache_path(cache, t, r, quick, digest)
                f.parent.mkdir(parents=True, exist_ok=True)
                tmp = f.with_suffix(".tmp")
                tmp.write_text(json.dumps(res), encoding="utf-8")
                os.replace(tmp, f)
    finally:
        if ex is not None:
            ex.shutdown()
    return [done[r] for r in reps]


#: The scenarios of the table: the model as the fit states it (with token noise it does not assume), and per-task
#: heterogeneity with no correlation (what the fit used to read as correlation).
SCENARIOS = (
    Truth("A", seed=1),
    Truth("B", seed=2, correlation=0.0, sigma_task=1.0),
)


def _se(n: int, p: float = NOMINAL) -> float:
    return math.sqrt(p * (1 - p) / n)


def _p_outside(n: int, p: float = NOMINAL, true: float | None = None) -> float:
    """Chance that the coverage over n replicates lands outside 2 SE of nominal p, for an interval whose coverage
    is `true` (default: exact, p)."""
    from scipy import stats

    k = np.arange(n + 1)
    return float(stats.binom.pmf(k, n, p if true is None else true)[np.abs(k / n - p) > 2 * _se(n, p)].sum())


def _two_stage_chances(n1: int, n2: int, rows: int) -> str:
    """The rule's operating characteristics, from the binomial: how often an exact interval is called wrong, and how
    often one that covers less is caught, against the table's first stage alone."""
    p1, p2 = _p_outside(n1), _p_outside(n2)
    one = 1 - (1 - p1) ** rows
    both = 1 - (1 - p1 * p2) ** rows
    caught = ", ".join(f"{c:g}: {_p_outside(n1, true=c) * _p_outside(n2, true=c):.2f} "
                       f"(first stage alone {_p_outside(n1, true=c):.2f})" for c in (0.90, 0.92, 0.93))
    return (f"Were every interval exact, a row would land outside 2 SE at {n1} replicates with {p1:.3f} and at {n2} "
            f"with {p2:.3f}: one or more of {rows} rows outside at the first stage in {one:.0%} of tables, outside at "
            f"both in {both:.1%}. An interval that covers less is caught (outside at both stages) with, at coverage "
            f"{caught}.")


def _coverage(res: list[dict], name: str) -> tuple[float, int]:
    got = [r["covered"][name] for r in res if name in r["covered"]]
    return sum(got) / len(got), len(got)


def _within(c: float, n: int) -> bool:
    return abs(c - NOMINAL) <= 2 * _se(n)


def outside(res: list[dict]) -> list[str]:
    """The rows of one scenario's first stage outside 2 SE: what the second stage reruns."""
    names: list[str] = []
    for r in res:
        names += [n for n in r["covered"] if n not in names]
    return [n for n in names if not _within(*_coverage(res, n))]


def table(scenarios, results: dict[str, list[dict]], replicates: int,
          confirmed: dict[str, list[dict]] | None = None, confirm: int = 0) -> str:
    """The coverage table; `confirmed[scenario]`: the fresh replicates replicates..replicates+confirm-1 on which the
    first stage's rows outside 2 SE are judged (`outside`)."""
    se = _se(replicates)
    lines = [f"Recovery (`tools/verdict_recovery.py`, {replicates} replicates per scenario, seeded): share of replicates "
             f"whose 95% interval holds the truth; SE = the binomial SE at the nominal rate, √(0.95·0.05/{replicates}) = "
             f"{se:.4f}; \"within 2 SE\": |coverage − 0.95| ≤ 2 SE."]
    if confirm:
        rows = sum(len({n for r in results[t.name] for n in r["covered"]}) for t in scenarios)
        lines.append(f"A row outside 2 SE is rerun on {confirm} fresh replicates ({replicates}–{replicates + confirm - 1}"
                     f", \"confirmation\") and judged on those (SE {_se(confirm):.4f}). "
                     + _two_stage_chances(replicates, confirm, rows))
    lines.append("")
    for t in scenarios:
        res = results[t.name]
        lines.append(f"Scenario {t.name}: {t.tasks} tasks × {t.verifications} verifications, correlation {t.correlation:g}, "
                     f"position_decay {t.position_decay:g}, σ_task {t.sigma_task:g} (logit scale), token noise "
                     f"log-sd {t.step_noise:g} per step, {t.task_noise:g} per task, {t.count_noise:g} on counts.")
        lines.append("")
        second = (confirmed or {}).get(t.name)
        lines.append("| parameter | truth | coverage | SE | nominal | within 2 SE |"
                     + (" confirmation | within 2 SE |" if confirm else ""))
        lines.append("|---|---|---|---|---|---|" + ("---|---|" if confirm else ""))
        names: list[str] = []
        for r in res:
            names += [n for n in r["covered"] if n not in names]
        n_out, n_kept = 0, 0
        for n in names:
            c, k = _coverage(res, n)
            ok = _within(c, k)
            n_out += not ok
            row = f"| `{n}` | {t.value(n):g} | {c:.3f} | {_se(k):.4f} | {NOMINAL} | {'yes' if ok else 'no'} |"
            if confirm and (ok or second is None):
                row += " — | — |" if ok else " not run | — |"
            elif confirm:
                c2, k2 = _coverage(second, n)
                n_kept += not _within(c2, k2)
                row += f" {c2:.3f} | {'yes' if _within(c2, k2) else 'no'} |"
            lines.append(row)
        chance = sum(_p_outside(_coverage(res, n)[1]) for n in names)
        lines.append("")
        lines.append(f"Rows outside 2 SE: {n_out} of {len(names)}; expected by chance alone were every interval exact: "
                     f"{chance:.1f} (binomial: {_p_outside(replicates):.3f} a row)."
                     + (f" Outside on confirmation: {n_kept} of {n_out}." if confirm and n_out and second is not None
                        else ""))
        tests = sorted({k for r in res for k in r["supported"]})
        if tests:  # none with --quick
            lines.append("")
            lines.append("| test | truth | share of replicates that say \"supported\" |")
            lines.append("|---|---|---|")
        for test in tests:
            got = [r["supported"][test] for r in res if test in r["supported"]]
            truth = {"position_decay": f"decay {t.position_decay:g}", "correlation": f"correlation {t.correlation:g}",
                     "task_heterogeneity": f"σ_task {t.sigma_task:g}"}.get(test, "")
            lines.append(f"| `{test}` | {truth} | {sum(got) / len(got):.3f} ({sum(got)}/{len(got)}) |")
        found: dict[str, int] = {}
        for r in res:
            found[r["found"]] = found.get(r["found"], 0) + 1
        if any(found):
            lines.append("")
            lines.append("What the fit said it found (`diagnostics.dependence`): "
                         + ", ".join(f"{k} {v}/{len(res)}" for k, v in sorted(found.items())) + ".")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_doc(text: str, doc: Path = DOC) -> None:
    src = doc.read_text(encoding="utf-8")
    if BEGIN not in src or END not in src:
        raise SystemExit(f"{doc}: markers {BEGIN!r} ... {END!r} not found")
    head, rest = src.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + "\n" + text + END + tail, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--scenario", action="append", help="only these scenarios (A, B)")
    ap.add_argument("--write-doc", action="store_true", help=f"write the table into {DOC.relative_to(ROOT)}")
    ap.add_argument("--start", type=int, default=0,
                    help="first replicate (default 0): --start 200 --replicates 300 extends the table's 200 to 500")
    ap.add_argument("--quick", action="store_true",
                    help="only the rows that need no acceptance likelihood (p_valid_replacement, exact, token means, ratio)")
    ap.add_argument("--confirm", type=int, default=800,
                    help="fresh replicates a row outside 2 SE is rerun on (default 800; 0: no second stage)")
    ap.add_argument("--cache", type=Path, help="keep each replicate's result here and reuse it (resumable runs)")
    a = ap.parse_args(argv)
    if a.replicates < 1:
        ap.error("--replicates: must be at least 1")
    if a.start < 0:
        ap.error("--start: must be at least 0")
    if a.confirm < 0:
        ap.error("--confirm: must be at least 0")
    if a.write_doc and (a.quick or a.start or a.confirm == 0):
        ap.error("--write-doc: the doc's table has every row from replicate 0 and its confirmations; not with --quick, "
                 "--start or --confirm 0")
    chosen = [t for t in SCENARIOS if not a.scenario or t.name in a.scenario]
    results = {t.name: run(t, a.replicates, a.jobs, a.quick, a.start, a.cache) for t in chosen}
    confirmed = {}
    for t in chosen:
        flagged = outside(results[t.name])
        if a.confirm and flagged:  # the quick run suffices when every flagged row is a quick row
            quick = a.quick or all(_is_quick(n) for n in flagged)
            confirmed[t.name] = run(t, a.confirm, a.jobs, quick, a.start + a.replicates, a.cache)
    text = table(chosen, results, a.replicates, confirmed, a.confirm)
    if a.start:
        text = f"Replicates {a.start}–{a.start + a.replicates - 1} (`--start {a.start}`).\n\n" + text
    if a.quick:
        text = ("Quick (`--quick`): only the rows that need no acceptance likelihood; the acceptance rows and the tests "
                "need the whole run.\n\n" + text)
    sys.stdout.write(text)
    if a.write_doc:
        if len(chosen) != len(SCENARIOS):
            ap.error("--write-doc: needs every scenario")
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
