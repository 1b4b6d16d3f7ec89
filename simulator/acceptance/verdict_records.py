"""Verdict-log records from the protocol's own decisions, and verdict logs simulated under known parameters.

Why here: the protocol (`protocol.specagent_protocol`) yields one `Review` and then one
`Accept` or `Reject` per verification; turning that pair into a `specagent.verdict/1`
record is written once, so the live runner's verdict log, a simulated run's and the
synthetic logs the fit is tested on say the same things the same way.

`simulate_verdict_log` draws segments (kinds, lengths), verdicts and token counts from an
`AcceptanceModel` with seeded randomness: a log whose true parameters are known, which
`acceptance fit` must recover inside its intervals. Token counts are Poisson around the
model's figures (reasoning and repair tokens negative binomial, since real reasoning
lengths are over-dispersed); both are stated in the test that uses them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specagent.simulator.acceptance.model import KINDS, AcceptanceModel, unit_uniforms
from specagent.simulator.protocol.decisions import Accept, Reject, Review, specagent_protocol, weak_tokens
from specagent.simulator.protocol.workload import Episode
from specagent.traces.verdict_log import VerdictRecord, make_record


def _name(unit) -> str | None:
    tools = getattr(unit, "tools", None)
    return tools[0] if tools else None


def verdict_record(task: str, units: Sequence, review: Review, verdict: Accept | Reject, acc: AcceptanceModel, k: int,
                   source: str) -> VerdictRecord:
    """The record of one verification: the reviewed segment and what the verdict decided (docs/verdict-log.md).

    `tokens` of a drafted step are what the Weak model drafted (`weak_token_ratio` times the
    recorded step's output), `reference_tokens` the recorded step's output; the verdict's
    replacement call is the rejected step's visible message (`replacement_tokens`).
    """
    seg = review.segment
    last = units[seg[-1]]
    ratio = acc.weak_token_ratio
    drafted = [{"kind": units[i].kind, "name": _name(units[i]), "tokens": weak_tokens(units[i].out_tokens, ratio),
                "reference_tokens": int(units[i].out_tokens)} for i in seg]
    ended = "write" if last.held else "reply" if last.kind == "reply" else "k" if len(seg) >= k else "end"
    common = dict(task=task, position=int(seg[0]), drafted=drafted, ended_by=ended, thinking=acc.thinking, source=source,
                  verdict_tokens=int(verdict.verdict_tokens - verdict.reasoning_tokens),
                  verify_reasoning_tokens=int(verdict.reasoning_tokens))
    if isinstance(verdict, Accept):
        return make_record(**common, accepted_prefix=len(seg), replacement_offered=False, replacement_valid=None,
                           repair_tokens=None, repair_reasoning_tokens=None)
    bad = units[seg[verdict.position]]
    repair = None if verdict.replacement else int(verdict.repair_tokens - verdict.repair_reasoning_tokens)
    return make_record(**common, accepted_prefix=verdict.position, replacement_offered=True,
                       replacement_valid=bool(verdict.replacement), repair_tokens=repair,
                       repair_reasoning_tokens=None if verdict.replacement else int(verdict.repair_reasoning_tokens),
                       replacement_tokens=int(bad.ctx_tokens))


def protocol_verdict_records(episodes: Sequence[Episode], k: int, acc: AcceptanceModel, seed: int,
                             review: str = "on_write", source: str = "simulated") -> list[VerdictRecord]:
    """The verdict log SpecAgent would write on these reference episodes (the planner's own draws); task ids get
    the episode's index (`24#3`), since a workload may hold several runs of one task."""
    out: list[VerdictRecord] = []
    for i, ep in enumerate(episodes):
        n = len(ep.units)
        u = unit_uniforms(seed, np.full(n, i), np.arange(n))
        pending: Review | None = None
        for op in specagent_protocol(ep.units, k, review, False, acc, (u[:, 0].tolist(), u[:, 1].tolist()), False):
            if isinstance(op, Review):
                pending = op
            elif isinstance(op, (Accept, Reject)) and pending is not None:
                out.append(verdict_record(f"{ep.task_id}#{i}", ep.units, pending, op, acc, k, source))
                pending = None
    return out


def simulate_verdict_log(acc: AcceptanceModel, n_tasks: int, seed: int, k: int = 4, segments_per_task: int = 8,
                         kinds: Sequence[str] = KINDS, reference_mean: float = 60.0,
                         reasoning_dispersion: float = 4.0, exact: bool = True) -> list[VerdictRecord]:
    """A verdict log drawn from `acc` (seeded): what `acceptance fit` is tested on.

    Each task is a run of `segments_per_task` verifications; a segment drafts 1..K steps of
    kinds drawn uniformly from `kinds`, ending at a held write with probability 1/2 (a write
    is then its last step). Verdicts follow the acceptance model exactly (per-kind
    acceptance, position decay, correlation after a rejection in the same task, a per-task effect
    when task_sd > 0); a rejection's
    replacement is valid with `p_valid_replacement`. Reference step tokens are Poisson with
    mean `reference_mean`, drafted tokens Poisson(weak_token_ratio x reference); verdict
    reasons Poisson(verdict_tokens) plus the replacement call; accept verdicts
    Poisson(accept_verdict_tokens); verification and repair reasoning negative binomial with
    means `verify_reasoning_tokens` / `repair_reasoning_tokens` (0 when not thinking) and
    shape `reasoning_dispersion`.
    """
    rng = np.random.default_rng(seed)
    vr = (acc.verify_reasoning_tokens or 0) if acc.thinking else 0
    rr = (acc.repair_reasoning_tokens or 0) if acc.thinking else 0
    nonwrite = [x for x in kinds if x != "write"] or ["read"]

    def nb(mean: float) -> int:
        if mean <= 0:
            return 0
        return int(rng.negative_binomial(reasoning_dispersion, reasoning_dispersion / (reasoning_dispersion + mean)))

    out: list[VerdictRecord] = []
    for t in range(n_tasks):
        pos, after_rej = 0, False
        task = acc.for_task(rng.normal()) if acc.task_sd > 0 else acc  # no draw without a task effect: same log as before
        for _ in range(segments_per_task):
            n = int(rng.integers(1, k + 1))
            ks = [str(x) for x in rng.choice(nonwrite, size=n)]
            if "write" in kinds and rng.random() < 0.5:
                ks[-1] = "write"
            ref = rng.poisson(reference_mean, size=n)
            drafted = [{"kind": kd, "name": None if kd == "reply" else f"tool_{kd}", "tokens": int(rng.poisson(acc.weak_token_ratio * r)),
                        "reference_tokens": int(r)} for kd, r in zip(ks, ref)]
            if exact:
                for d in drafted:
                    d["exact_match"] = bool(rng.random() < acc.exact[d["kind"]])
            a = n
            for i, kd in enumerate(ks):
                if not rng.random() < task.p_accept(kd, i, after_rej and i == 0):
                    a = i
                    break
            after_rej = a < n
            rec = dict(task=f"sim-{t}", position=pos, drafted=drafted, ended_by="write" if ks[-1] == "write" else "k",
                       accepted_prefix=a, thinking=acc.thinking, verify_reasoning_tokens=nb(vr), source="simulated")
            if a == n:
                rec.update(verdict_tokens=int(rng.poisson(acc.accept_verdict_tokens)), replacement_offered=False,
                           replacement_valid=None, repair_tokens=None, repair_reasoning_tokens=None)
                pos += n
            else:
                valid = bool(rng.random() < acc.p_valid_replacement)
                call = int(ref[a])
                rec.update(verdict_tokens=int(rng.poisson(acc.verdict_tokens)) + call, replacement_offered=True,
                           replacement_valid=valid, replacement_tokens=call,
                           repair_tokens=None if valid else int(rng.poisson(reference_mean)),
                           repair_reasoning_tokens=None if valid else nb(rr))
                pos += a + 1
            out.append(make_record(**rec))
            pos += int(rng.integers(0, 3))  # user turns and unreviewed chunks between verifications
    return out


#: The shipped simulated verdict log (traces/data/verdict_log_simulated.jsonl): its source, and how it is rebuilt.
SAMPLE_NAME = "verdict_log_simulated.jsonl"
SAMPLE_SOURCE = "simulated: the default acceptance model on the shipped tau2 airline trace"


def shipped_sample_records() -> list[VerdictRecord]:
    """The verdict log of SpecAgent (K=4, on_write, seed 0, the default acceptance model) on the shipped τ²-Bench
    airline trace: the shipped sample, rebuilt (a test checks the file equals it)."""
    from specagent.traces import default_workload_path, load_trajectories
    from specagent.simulator.protocol.workload import episode_from_trajectory

    eps = [episode_from_trajectory(t) for t in load_trajectories(default_workload_path())]
    return protocol_verdict_records(eps, 4, AcceptanceModel(), seed=0, source=SAMPLE_SOURCE)
