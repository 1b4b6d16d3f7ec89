"""SpecAgent's decisions, written once: what is drafted together, what is reviewed, what a verdict keeps.

Two interpreters read this sequence: the planner (`strategies.SpecAgent`, which turns it
into priced model calls and waits) and the live runner (`kernels/live.py`, which runs it
on real models, caches and a real database). Only the interpreters differ in *how* a step
happens; *which* steps happen comes from here. The lockstep planner is this protocol
vectorised over many trajectories (tested equal to the planner row for row).

Units are Episode units (`plan.Action` / `plan.UserTurn`) or anything with the same
fields (`is_user`, `kind`, `held`, `has_tool`, `out_tokens`, `ctx_tokens`,
`result_tokens`, and for recorded logs `verdict`, `verdict_tokens`, `repair_tokens`).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

from specagent.simulator.acceptance.model import AcceptanceModel


def weak_tokens(n: int, ratio: float) -> int:
    """Weak tokens for a Strong step of n tokens."""
    return n if ratio == 1.0 else int(round(n * ratio))


class UserMessage(NamedTuple):
    """The user answers; the message joins the committed context."""

    unit: int


class Draft(NamedTuple):
    """The Weak model drafts `unit`, the `position`-th step of the chunk, on top of `pending`
    drafted-but-uncommitted tokens."""

    unit: int
    position: int
    pending: int


class DraftedRead(NamedTuple):
    """A drafted step's read-only tools run now, before any review (their results join the draft)."""

    unit: int


class CommitUnreviewed(NamedTuple):
    """A chunk the policy does not review (reads, replies under `on_write`) commits as drafted."""

    segment: tuple[int, ...]
    pending: int


class Review(NamedTuple):
    """The Strong model reads the drafted segment in one prefill; `segment_ctx[i]` is what step i added."""

    segment: tuple[int, ...]
    pending: int
    segment_ctx: tuple[int, ...]


class Accept(NamedTuple):
    """Every drafted step is valid: a short verdict, then the held action (if it has tools) runs.
    `verdict_tokens` is all the verdict decodes, its `reasoning_tokens` included."""

    segment: tuple[int, ...]
    pending: int
    verdict_tokens: int
    run_held: bool
    reasoning_tokens: int = 0


class Reject(NamedTuple):
    """The verdict keeps the first `position` steps (`keep` tokens) and names the bad one; Strong
    either runs the verdict's replacement call or decodes `repair_tokens` in a repair turn, and
    the repaired step commits (its tools run) without a second review. `verdict_tokens` and
    `repair_tokens` are all those calls decode, their reasoning (`reasoning_tokens`,
    `repair_reasoning_tokens`) included."""

    segment: tuple[int, ...]
    position: int
    keep: int
    verdict_tokens: int
    wasted_weak_tokens: int
    replacement: bool
    repair_tokens: int
    reasoning_tokens: int = 0
    repair_reasoning_tokens: int = 0


Op = UserMessage | Draft | DraftedRead | CommitUnreviewed | Review | Accept | Reject


def specagent_protocol(units: Sequence, k: int, review: str, exact: bool, acc: AcceptanceModel,
                       draws: tuple[Sequence[float], Sequence[float]], labelled: bool) -> Iterator[Op]:
    """SpecAgent over one episode. `draws[s][unit]` are the per-unit uniforms of
    `acceptance.unit_uniforms`; a recorded protocol log (`labelled`) takes verdicts from its labels, and its
    drafted steps are the Weak model's own recorded tokens (no Weak/Strong ratio applies to them)."""
    ratio = 1.0 if labelled else acc.weak_token_ratio
    i, n = 0, len(units)
    after_rej = False
    while i < n:
        if units[i].is_user:
            yield UserMessage(i)
            i += 1
            continue
        # draft a chunk: reads run for real, the first held action (or a reply) stops drafting
        seg: list[int] = []
        seg_ctx: list[int] = []
        pending = 0
        j = i
        while j < n and len(seg) < k:
            a = units[j]
            if a.is_user:
                break
            yield Draft(j, len(seg), pending)
            seg.append(j)
            add = weak_tokens(a.ctx_tokens, ratio)
            if a.held:
                seg_ctx.append(add)
                pending += add
                break
            if a.has_tool:
                yield DraftedRead(j)
                add += a.result_tokens
            seg_ctx.append(add)
            pending += add
            j += 1
            if a.kind == "reply":
                break
        segment = tuple(seg)
        last = units[seg[-1]]
        if not (last.held or review == "every_chunk" or (review == "hold_replies" and last.kind == "reply")):
            yield CommitUnreviewed(segment, pending)
            i = seg[-1] + 1
            continue
        yield Review(segment, pending, tuple(seg_ctx))
        rejected = -1
        for pos, idx in enumerate(seg):
            a = units[idx]
            ok = a.verdict != "repair" if labelled else draws[0][idx] < acc.p_accept(a.kind, pos, after_rej, exact)
            after_rej = not ok
            if not ok:
                rejected = pos
                break
        if rejected < 0:
            if labelled:  # recorded totals, reasoning included
                yield Accept(segment, pending, sum(units[idx].verdict_tokens for idx in seg), last.held and last.has_tool)
            else:
                vr = int(acc.verify_reasoning(last.out_tokens, last.ctx_tokens))
                yield Accept(segment, pending, acc.accept_verdict_tokens + vr, last.held and last.has_tool, vr)
            i = seg[-1] + 1
            continue
        b = seg[rejected]
        bad = units[b]
        vr = rr = 0
        if labelled:
            vt, replacement, repair = bad.verdict_tokens, bad.repair_tokens == 0, bad.repair_tokens
        else:  # a repair turn of zero tokens is indistinguishable from the verdict's own call
            vr = int(acc.verify_reasoning(bad.out_tokens, bad.ctx_tokens))
            vt = acc.verdict_tokens + bad.ctx_tokens + vr
            replacement = draws[1][b] < acc.p_valid_replacement or bad.out_tokens == 0
            rr = 0 if replacement else int(acc.repair_reasoning(bad.out_tokens, bad.ctx_tokens))
            repair = int(acc.repair_decode(bad.out_tokens, bad.ctx_tokens))
        yield Reject(segment, rejected, sum(seg_ctx[:rejected]), vt,
                     sum(weak_tokens(units[x].out_tokens, ratio) for x in seg[rejected:]), replacement, repair, vr, rr)
        i = b + 1
