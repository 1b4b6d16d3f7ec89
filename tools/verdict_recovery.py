"""The recovery suite of `specagent acceptance fit`: how often each printed 95% interval holds the truth.

Why a separate generator: a fit tested on logs drawn by its own simulator can share that
simulator's mistakes. This one is written from the documents alone — the record format of
docs/verdict-log.md and the model of docs/acceptance-fit.md (per-kind acceptance times
position decay, the first step after a rejection times 1 - correlation, a per-task shift of
the logit by a Normal(0, task_effect_sd²) task effect; negative-binomial token counts; drafted
lengths the reference length times the Weak/Strong ratio and multiplicative noise) — and
imports nothing of the fit but its entry points (read the records, fit them).

Each replication draws one log of known parameters (seeded), fits it and records, per printed
interval, whether it holds the truth, and per likelihood-ratio test whether it said
"supported". Coverage is the share of replications; its standard error sqrt(c (1 - c) / n).

    python tools/verdict_recovery.py                       # the full suite (minutes), the table on stdout
    python tools/verdict_recovery.py --write-doc           # ... and into docs/acceptance-fit.md
    python tools/verdict_recovery.py --reps 4 --tasks 60   # a small run (what the test runs)
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "acceptance-fit.md"
BEGIN, END = "<!-- recovery table: tools/verdict_recovery.py --write-doc -->", "<!-- end of recovery table -->"
KINDS = ("read", "write", "generic", "think", "reply")
NOMINAL = 0.95
TEST_LEVEL = 0.05


@dataclass(frozen=True)
class Truth:
    """The parameters a log is drawn from (the names the fit prints)."""

    accept: dict = field(default_factory=lambda: {"read": 0.85, "write": 0.6, "generic": 0.7, "think": 0.9, "reply": 0.8})
    position_decay: float = 0.9
    correlation: float = 0.3
    task_effect_sd: float = 0.0
    p_valid_replacement: float = 0.5
    exact: dict = field(default_factory=lambda: {"read": 0.5, "write": 0.3, "generic": 0.4, "think": 0.2, "reply": 0.1})
    verdict_tokens: float = 48.0
    accept_verdict_tokens: float = 6.0
    verify_reasoning_tokens: float = 300.0
    repair_reasoning_tokens: float = 200.0
    weak_token_ratio: float = 0.8
    #: multiplicative noise of a drafted length around ratio x reference: lognormal, this σ (mean 1)
    token_noise_sd: float = 0.4
    #: NB2 shape of every token count (verdicts, reasoning, repairs)
    count_shape: float = 4.0
    k: int = 4

    def value(self, name: str) -> float:
        table, _, kind = name.partition(".")
        return float(getattr(self, table)[kind] if kind else getattr(self, name))


#: name -> (truth, what it checks). `heterogeneous` is the case the fit used to read as correlation.
SCENARIOS: dict[str, tuple[Truth, str]] = {
    "independent tasks": (Truth(), "no task effect, correlation 0.3"),
    "heterogeneous tasks": (Truth(correlation=0.0, task_effect_sd=1.0), "task effect sd 1.0, correlation 0"),
    "both": (Truth(correlation=0.3, task_effect_sd=1.0), "task effect sd 1.0, correlation 0.3"),
}


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _nb(rng: np.random.Generator, mean: float, shape: float) -> int:
    return 0 if mean <= 0 else int(rng.negative_binomial(shape, shape / (shape + mean)))


def draw_log(truth: Truth, n_tasks: int, per_task: int, rng: np.random.Generator) -> list[dict]:
    """`n_tasks` tasks of `per_task` verifications each, as `specagent.verdict/1` records (docs/verdict-log.md)."""
    out = []
    nonwrite = [k for k in KINDS if k != "write"]
    for t in range(n_tasks):
        u = float(rng.normal(0.0, truth.task_effect_sd)) if truth.task_effect_sd > 0 else 0.0
        position, after = 0, False
        for _ in range(per_task):
            n = int(rng.integers(1, truth.k + 1))
            kinds = [nonwrite[int(i)] for i in rng.integers(0, len(nonwrite), size=n)]
            if rng.random() < 0.5:
                kinds[-1] = "write"  # a held write ends a segment
            steps = []
            for kind in kinds:
                ref = int(round(60.0 * math.exp(rng.normal(0.0, 0.6)))) + 1
                noise = math.exp(rng.normal(0.0, truth.token_noise_sd) - truth.token_noise_sd ** 2 / 2)
                steps.append({"kind": kind, "name": None if kind == "reply" else f"tool_{kind}",
                              "tokens": int(rng.poisson(truth.weak_token_ratio * ref * noise)), "reference_tokens": ref,
                              "exact_match": bool(rng.random() < truth.exact[kind])})
            accepted = n
            for i, kind in enumerate(kinds):
                p = truth.accept[kind] * truth.position_decay ** i * ((1 - truth.correlation) if after and i == 0 else 1.0)
                if rng.random() >= _logistic(math.log(p / (1 - p)) + u):
                    accepted = i
                    break
            rec = {"schema": "specagent.verdict/1", "task": f"task-{t}", "position": position, "drafted": steps,
                   "ended_by": "write" if kinds[-1] == "write" else "k", "accepted_prefix": accepted,
                   "verify_reasoning_tokens": _nb(rng, truth.verify_reasoning_tokens, truth.count_shape), "thinking": True}
            if accepted == n:
                rec.update(verdict_tokens=_nb(rng, truth.accept_verdict_tokens, truth.count_shape), replacement_offered=False,
                           replacement_valid=None, repair_tokens=None, repair_reasoning_tokens=None)
                position += n
            else:
                valid = bool(rng.random() < truth.p_valid_replacement)
                call = steps[accepted]["reference_tokens"]
                rec.update(verdict_tokens=_nb(rng, truth.verdict_tokens, truth.count_shape) + call, replacement_tokens=call,
                           replacement_offered=True, replacement_valid=valid,
                           repair_tokens=None if valid else _nb(rng, 60.0, truth.count_shape),
                           repair_reasoning_tokens=None if valid else _nb(rng, truth.repair_reasoning_tokens, truth.count_shape))
                position += accepted + 1
            after = accepted < n
            out.append(rec)
            position += int(rng.integers(0, 3))  # user turns and unreviewed chunks between verifications
    return out


def fit_records(records: list[dict]):
    """Fit a drawn log through the fit's public entry points (records validated as a reader validates them)."""
    from specagent.simulator.acceptance.fit import FitData, add_verdict_records, fit_acceptance
    from specagent.traces.verdict_log import VerdictRecord

    data = FitData()
    add_verdict_records(data, [VerdictRecord.model_validate(r) for r in records], "recovery")
    return fit_acceptance(data)


@dataclass
class Tally:
    covered: dict = field(default_factory=dict)  # (scenario, parameter) -> hits
    supported: dict = field(default_factory=dict)  # (scenario, test) -> times "supported"
    reps: int = 0


def run(reps: int, n_tasks: int, per_task: int, seed: int, scenarios: dict = SCENARIOS, progress=None) -> dict[str, Tally]:
    """Coverage of every printed interval and the rate each test says "supported", per scenario."""
    out = {}
    for si, (name, (truth, _)) in enumerate(scenarios.items()):
        tally = Tally()
        for r in range(reps):
            rng = np.random.default_rng([seed, si, r])
            res = fit_records(draw_log(truth, n_tasks, per_task, rng))
            for p in res.params:
                t = truth.value(p.name)
                key = (name, p.name)
                tally.covered[key] = tally.covered.get(key, 0) + int(p.low <= t <= p.high)
            for test, v in res.tests.items():
                key = (name, test)
                tally.supported[key] = tally.supported.get(key, 0) + int(v["supported"])
            tally.reps += 1
            if progress:
                progress(f"{name}: {r + 1}/{reps}")
        out[name] = tally
    return out


def _se(c: float, n: int) -> float:
    return math.sqrt(max(c * (1 - c), 1e-12) / n)


def rows(result: dict[str, Tally], scenarios: dict = SCENARIOS) -> list[dict]:
    """One row per (scenario, interval) and per (scenario, test): nominal, observed, SE, replications, within 2 SE."""
    out = []
    for name, tally in result.items():
        truth = scenarios[name][0]
        n = tally.reps
        for (_, param), hits in tally.covered.items():
            c = hits / n
            out.append({"scenario": name, "what": f"{param} interval", "truth": truth.value(param), "nominal": NOMINAL,
                        "observed": c, "se": _se(NOMINAL, n), "n": n})
        for (_, test), hits in tally.supported.items():
            null = {"position_decay": 1.0, "correlation": 0.0, "task_effect_sd": 0.0}[test]
            is_null = truth.value(test) == null
            c = hits / n
            out.append({"scenario": name, "what": f"{test} test: " + ("false positives" if is_null else "power"),
                        "truth": truth.value(test), "nominal": TEST_LEVEL if is_null else None, "observed": c,
                        "se": _se(TEST_LEVEL, n) if is_null else _se(c, n), "n": n})
    for r in out:
        r["within_2se"] = None if r["nominal"] is None else abs(r["observed"] - r["nominal"]) <= 2 * r["se"]
    return out


def command(reps: int, n_tasks: int, per_task: int, seed: int) -> str:
    return f"python tools/verdict_recovery.py --reps {reps} --tasks {n_tasks} --per-task {per_task} --seed {seed}"


def markdown(table: list[dict], reps: int, n_tasks: int, per_task: int, seed: int) -> str:
    lines = [BEGIN, "",
             f"{reps} replications per scenario, each {n_tasks} tasks × {per_task} verifications, seed {seed}; "
             f"regenerate with `{command(reps, n_tasks, per_task, seed)} --write-doc`. "
             "SE: the standard error of the observed share at the nominal rate (for power: at the observed rate); "
             "\"within 2 SE\": |observed − nominal| ≤ 2 SE.", "",
             "| scenario | interval or test | truth | nominal | observed | SE | n | within 2 SE |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        nominal = "—" if r["nominal"] is None else f"{r['nominal']:.2f}"
        within = "—" if r["within_2se"] is None else ("yes" if r["within_2se"] else "**no**")
        lines.append(f"| {r['scenario']} | {r['what']} | {r['truth']:g} | {nominal} | {r['observed']:.3f} | {r['se']:.3f} | "
                     f"{r['n']} | {within} |")
    return "\n".join(lines + ["", END])


def write_doc(text: str, doc: Path = DOC) -> None:
    from specagent.common.atomic import write_text

    body = doc.read_text(encoding="utf-8")
    if BEGIN not in body or END not in body:
        raise SystemExit(f"{doc}: no recovery-table markers ({BEGIN} ... {END})")
    head, rest = body.split(BEGIN, 1)
    write_text(doc, head + text + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="replications per scenario")
    ap.add_argument("--tasks", type=int, default=150, help="tasks per drawn log")
    ap.add_argument("--per-task", type=int, default=8, help="verifications per task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-doc", action="store_true", help=f"write the table into {DOC.relative_to(ROOT)}")
    a = ap.parse_args(argv)
    if min(a.reps, a.tasks, a.per_task) < 1:
        ap.error("--reps, --tasks and --per-task must be at least 1")
    result = run(a.reps, a.tasks, a.per_task, a.seed, progress=lambda m: print(m, file=sys.stderr, end="\r"))
    text = markdown(rows(result), a.reps, a.tasks, a.per_task, a.seed)
    print(text)
    if a.write_doc:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())


