"""The strategies compared by Wang et al., arXiv:2610.21463, each turning an episode into model calls and waits.

Every strategy commits each reference action exactly once (by the Weak or the Strong
model); they differ in who decodes it, what gets reviewed, and what is thrown away.
Caches: each model keeps its own KV/state per trajectory; with prefix caching a call
prefills only what that model has not yet seen, without it the whole context.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.phases import CALL_PHASES, STRONG, STRONG_PREFILL, STRONG_VERDICT, STRONG_VERIFY, TOOL, USER, WEAK
from specagent.simulator.protocol.plan import PlanBuilder
from specagent.simulator.protocol.decisions import (
    Accept, CommitUnreviewed, Draft, DraftedRead, Reject, Review, UserMessage, specagent_protocol, weak_tokens,
)

if TYPE_CHECKING:  # annotations only: the settings that import the catalog load no workload
    from specagent.simulator.protocol.workload import Action, Episode, UserTurn

_CALL_STAT = ("weak_calls", "strong_calls")
REVIEW_POLICIES = ("on_write", "hold_replies", "every_chunk")
VERIFIERS = ("semantic", "exact")
#: SpecAgent's defaults (the Scenario's too): K steps drafted at most per chunk, review before a write.
DEFAULT_K = 4
DEFAULT_REVIEW = "on_write"


class ServingPolicy(Protocol):
    """What planning needs of where it runs (a Setting or a Scenario has it): caching and the verifier's prompt."""

    prefix_caching: bool
    verifier_prompt: str
    verifier_system_tokens: int


#: Per-unit uniforms of one episode, by stream (see acceptance.unit_uniforms): draws[s][unit].
Draws = tuple[list[float], list[float]]


def _no_log(*event) -> None:
    return None


@dataclass
class _State:
    """Per-trajectory bookkeeping: committed context and each model's cached prefix."""

    traj: int
    plan: PlanBuilder
    prefix_caching: bool
    hist: int
    seen: list[int] = field(default_factory=lambda: [0, 0])
    stats: dict[str, int] = field(default_factory=dict)
    #: When a list, every commit, execution and review is logged as a tuple (for invariant tests).
    audit: list | None = None

    def __post_init__(self) -> None:
        if self.audit is None:
            self.log = _no_log  # type: ignore[method-assign]

    def log(self, *event) -> None:
        self.audit.append(event)  # type: ignore[union-attr]

    def bump(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def call(self, model: int, out: int, ctx_out: int, pending: int = 0, group: int | None = None, lane: int = 0) -> None:
        """One model call: prefill what it has not seen of hist+pending, then decode `out` tokens."""
        total = self.hist + pending
        seen = self.seen[model]
        n, c = (total - seen, seen) if self.prefix_caching else (total, 0)
        pp, dp = CALL_PHASES[model]
        if n > 0:
            self.plan.add(self.traj, pp, n, c, 0.0, group, lane)
        if out > 0:
            self.plan.add(self.traj, dp, out, total, 0.0, group, lane)
        # What stays cached is the context as the next call sees it: reasoning is dropped,
        # the visible message stays (prefilled later where it was not decoded).
        self.seen[model] = total + min(out, ctx_out)
        key = _CALL_STAT[model]
        self.stats[key] = self.stats.get(key, 0) + 1

    def wait(self, phase: int, seconds: float, group: int | None = None, lane: int = 0) -> None:
        if seconds > 0:
            self.plan.add(self.traj, phase, wait_s=seconds, group=group, lane=lane)

    def user_turn(self, u: UserTurn) -> None:
        """The user answers after a think time; the message joins the committed context."""
        self.wait(USER, u.latency_s)
        self.hist += u.tokens

    def rollback(self) -> None:
        self.seen[WEAK] = min(self.seen[WEAK], self.hist)
        self.seen[STRONG] = min(self.seen[STRONG], self.hist)


class Strategy:
    """Base: a named way of running an episode; subclasses implement `run`.

    `lockstep` says whether `lockstep.plan_specagent_replicas` plans this very strategy: a subclass
    that changes how an episode runs must plan through its own `run`, so it is False
    unless a class says otherwise for itself.
    """

    name = "base"
    label = "base"
    lockstep = False

    def describe(self) -> dict:
        return {"strategy": self.name, "label": self.label}

    def plan_episode(self, ep: Episode, traj: int, builder: PlanBuilder, acc: AcceptanceModel, draws: Draws,
                     setting: ServingPolicy, audit: list | None = None) -> None:
        """Plan one episode into `builder` under the setting's caching and verifier-prompt policy."""
        st = _State(traj=traj, plan=builder, prefix_caching=setting.prefix_caching, hist=ep.system_tokens, audit=audit)
        st.stats["reference_actions"] = ep.actions
        self.run(ep, st, acc, draws, setting.verifier_prompt, setting.verifier_system_tokens)
        st.stats["committed_context_tokens"] = st.hist
        builder.stats.append(st.stats)

    def run(self, ep: Episode, st: _State, acc: AcceptanceModel, draws: Draws, verifier_prompt: str, vsys: int) -> None:
        raise NotImplementedError


def _weak_tokens(n: int, acc: AcceptanceModel) -> int:
    return weak_tokens(n, acc.weak_token_ratio)


def _commit_action(st: _State, idx: int, a: Action, by: int, ctx: int, reviewed: bool) -> None:
    st.hist += ctx
    if a.has_tool:
        st.log("exec", idx, by, reviewed)
        st.wait(TOOL, a.tool_s)
        st.hist += a.result_tokens
    st.log("commit", idx, by)
    st.bump("committed_weak" if by == WEAK else "committed_strong")


def _actions(ep: Episode, st: _State):
    """(index, action) of each action in order; user turns in between join the context on the way."""
    for idx, u in enumerate(ep.units):
        if u.is_user:
            st.user_turn(u)
        else:
            yield idx, u


class SingleModel(Strategy):
    """One model decodes every step (Strong-only or Weak-only)."""

    def __init__(self, model: int):
        self.model = model
        self.name = "strongonly" if model == STRONG else "weakonly"
        self.label = "Strong-only" if model == STRONG else "Weak-only"

    def run(self, ep, st, acc, draws, verifier_prompt, vsys):
        for idx, u in _actions(ep, st):
            out, ctx = (u.out_tokens, u.ctx_tokens) if self.model == STRONG else (_weak_tokens(u.out_tokens, acc), _weak_tokens(u.ctx_tokens, acc))
            st.call(self.model, out, ctx)
            if self.model == WEAK and u.held:
                st.bump("unreviewed_writes")
            _commit_action(st, idx, u, self.model, ctx, reviewed=self.model == STRONG)


class SpecAgent(Strategy):
    """Weak drafts up to K steps with real reads; Strong verifies a segment in one prefill and repairs one step."""

    def __init__(self, k: int = DEFAULT_K, review: str = DEFAULT_REVIEW, verifier: str = "semantic", name: str | None = None, label: str | None = None):
        if k < 1:
            raise ValueError(f"K must be >= 1, got {k}")
        if review not in REVIEW_POLICIES:
            raise ValueError(f"review policy must be one of {REVIEW_POLICIES}, got '{review}'")
        if verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {VERIFIERS}, got '{verifier}'")
        self.k, self.review, self.verifier = k, review, verifier
        self.name = name or "specagent"
        self.label = label or f"SpecAgent (K={k}, {review}{', exact-step verifier' if verifier == 'exact' else ''})"

    def describe(self) -> dict:
        return {**super().describe(), "k": self.k, "review": self.review, "verifier": self.verifier}

    @property
    def lockstep(self) -> bool:  # type: ignore[override]
        """Only SpecAgent itself: a subclass's own `run` (or helpers) must not be skipped."""
        return type(self) is SpecAgent

    def run(self, ep, st, acc, draws, verifier_prompt, vsys):
        units = ep.units
        if ep.labelled and acc.weak_token_ratio != 1.0:
            acc = dataclasses.replace(acc, weak_token_ratio=1.0)  # a protocol log records the Weak model's own tokens
        verify_ctx = 0
        for op in specagent_protocol(units, self.k, self.review, self.verifier == "exact", acc, draws, ep.labelled):
            kind = type(op)
            if kind is Draft:
                a = units[op.unit]
                st.call(WEAK, _weak_tokens(a.out_tokens, acc), _weak_tokens(a.ctx_tokens, acc), pending=op.pending)
            elif kind is DraftedRead:
                st.log("exec", op.unit, WEAK, False)
                st.wait(TOOL, units[op.unit].tool_s)
            elif kind is UserMessage:
                st.user_turn(units[op.unit])
            elif kind is CommitUnreviewed:
                self._commit_weak(st, op.segment, op.pending)
            elif kind is Review:
                verify_ctx = self._verify(st, op, verifier_prompt, vsys)
            elif kind is Accept:
                if op.verdict_tokens:
                    st.plan.add(st.traj, STRONG_VERDICT, op.verdict_tokens, verify_ctx)
                self._commit_weak(st, op.segment, op.pending)
                if op.run_held:  # reviewed and accepted: now it may run
                    last = units[op.segment[-1]]
                    st.log("exec", op.segment[-1], WEAK, True)
                    st.wait(TOOL, last.tool_s)
                    st.hist += last.result_tokens
            else:
                self._reject(st, units, op, verify_ctx, verifier_prompt)

    @staticmethod
    def _commit_weak(st: _State, segment: tuple[int, ...], pending: int) -> None:
        st.hist += pending
        st.bump("committed_weak", len(segment))
        for idx in segment:
            st.log("commit", idx, WEAK)

    @staticmethod
    def _verify(st: _State, op: Review, verifier_prompt: str, vsys: int) -> int:
        """One verification prefill over everything the Strong model has not read, segment included."""
        st.bump("reviews")
        st.log("review", op.segment)
        st.bump("strong_calls")
        total = st.hist + op.pending
        if verifier_prompt == "fresh":
            st.plan.add(st.traj, STRONG_VERIFY, vsys + total, 0)
            return vsys + total
        n, c = (total - st.seen[STRONG], st.seen[STRONG]) if st.prefix_caching else (total, 0)
        if n > 0:
            st.plan.add(st.traj, STRONG_VERIFY, n, c)
        st.seen[STRONG] = total  # the segment is now in Strong's cache (rolled back if rejected)
        return total

    @staticmethod
    def _reject(st: _State, units, op: Reject, verify_ctx: int, verifier_prompt: str) -> None:
        """Keep the valid prefix; Strong replaces or repairs the bad step, which commits unreviewed."""
        st.bump("rejections")
        st.bump("wasted_weak_tokens", op.wasted_weak_tokens)
        st.bump("committed_weak", op.position)
        for idx in op.segment[:op.position]:
            st.log("commit", idx, WEAK)
        b = op.segment[op.position]
        bad = units[b]
        if op.verdict_tokens:
            st.plan.add(st.traj, STRONG_VERDICT, op.verdict_tokens, verify_ctx)
        st.hist += op.keep
        st.rollback()
        if op.replacement:
            st.bump("replacements")
            if verifier_prompt == "cached" and st.prefix_caching and bad.ctx_tokens:
                # The call was decoded inside the verdict, after the rejected tail; once that tail
                # is rolled back, the call is appended to Strong's cache by a short prefill.
                st.plan.add(st.traj, STRONG_PREFILL, bad.ctx_tokens, st.hist)
                st.seen[STRONG] = st.hist + bad.ctx_tokens
        else:
            st.bump("repairs")
            st.call(STRONG, op.repair_tokens, bad.ctx_tokens)
        st.hist += bad.ctx_tokens
        if bad.has_tool:  # the repair commits without a second review
            st.log("exec", b, STRONG, True)
            st.wait(TOOL, bad.tool_s)
            st.hist += bad.result_tokens
        st.log("commit", b, STRONG)
        st.bump("committed_strong")


class ExactMatchSpeculative(Strategy):
    """Weak drafts each step while Strong decodes its own; the draft is kept only when identical.

    A matching read was already executed by the time Strong finishes, hiding its tool
    latency; Strong still decodes every step, so its decode traffic equals Strong-only.
    """

    name = "exactmatch"
    label = "Exact-match speculative agent"

    def run(self, ep, st, acc, draws, verifier_prompt, vsys):
        for idx, u in _actions(ep, st):
            g = st.plan.next_group()
            wo, wc = _weak_tokens(u.out_tokens, acc), _weak_tokens(u.ctx_tokens, acc)
            st.call(WEAK, wo, wc, group=g, lane=0)
            st.call(STRONG, u.out_tokens, u.ctx_tokens, group=g, lane=1)
            match = draws[0][idx] < acc.p_accept(u.kind, 0, False, exact=True)
            st.hist += u.ctx_tokens
            if match and u.has_tool and not u.held:
                st.log("exec", idx, WEAK, False)
                st.wait(TOOL, u.tool_s, group=g, lane=0)  # executed speculatively, overlapped with Strong
                st.hist += u.result_tokens
                st.bump("committed_weak")
                st.log("commit", idx, WEAK)
            else:
                st.bump("wasted_weak_tokens", 0 if match else wo)
                if u.has_tool:
                    st.log("exec", idx, STRONG, True)
                    st.wait(TOOL, u.tool_s)
                    st.hist += u.result_tokens
                st.bump("committed_weak" if match else "committed_strong")
                st.log("commit", idx, WEAK if match else STRONG)
            st.seen[WEAK] = min(st.seen[WEAK], st.hist)  # Weak must read Strong's step and the results


class Router(Strategy):
    """A per-step router sends each step to Weak or Strong (probabilities per step kind)."""

    name = "router"
    label = "Router (per-step)"

    def run(self, ep, st, acc, draws, verifier_prompt, vsys):
        for idx, u in _actions(ep, st):
            to_strong = draws[0][idx] < acc.route_strong.get(u.kind, 1.0)
            if to_strong:
                st.call(STRONG, u.out_tokens, u.ctx_tokens)
                _commit_action(st, idx, u, STRONG, u.ctx_tokens, reviewed=True)
            else:
                wc = _weak_tokens(u.ctx_tokens, acc)
                st.call(WEAK, _weak_tokens(u.out_tokens, acc), wc)
                if u.held:
                    st.bump("unreviewed_writes")
                _commit_action(st, idx, u, WEAK, wc, reviewed=False)


class Collaborative(Strategy):
    """AgentCollab-style: Weak acts, and escalates a step to Strong when it detects trouble.

    Trouble = the step a semantic verifier would reject (drawn from the acceptance model);
    the Weak model notices it with probability `escalation_recall`. Undetected bad steps are
    committed and counted (their quality effect is not modelled); Weak's writes are unreviewed.
    """

    name = "collab"
    label = "Collaborative (AgentCollab-style)"

    def run(self, ep, st, acc, draws, verifier_prompt, vsys):
        after_rej = False
        for idx, u in _actions(ep, st):
            wo, wc = _weak_tokens(u.out_tokens, acc), _weak_tokens(u.ctx_tokens, acc)
            st.call(WEAK, wo, wc)
            bad = draws[0][idx] >= acc.p_accept(u.kind, 0, after_rej)
            after_rej = bad
            if bad and draws[1][idx] < acc.escalation_recall:
                st.bump("wasted_weak_tokens", wo)
                st.seen[WEAK] = min(st.seen[WEAK], st.hist)
                st.call(STRONG, u.out_tokens, u.ctx_tokens)
                _commit_action(st, idx, u, STRONG, u.ctx_tokens, reviewed=True)
                continue
            if bad:
                st.bump("undetected_bad_steps")
            if u.held:
                st.bump("unreviewed_writes")
            _commit_action(st, idx, u, WEAK, wc, reviewed=False)


# ---------------------------------------------------------------------------------------------
# The registry: adding a strategy is one entry here (and its class above).
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StrategyEntry:
    """One registered strategy: its name, how to build it, what it is, and what it takes."""

    name: str
    help: str
    make: Callable[[int, str], Strategy]  # (K, review policy) -> the strategy
    aliases: tuple[str, ...] = ()

    @property
    def takes_k(self) -> bool:
        """Whether K changes the strategy it builds (read off the strategy, not restated): a sweep runs the others once per K-less cell."""
        return self.make(DEFAULT_K, DEFAULT_REVIEW).describe() != self.make(DEFAULT_K + 1, DEFAULT_REVIEW).describe()

    @property
    def lockstep(self) -> bool:
        """Planned by the vectorised lockstep planner (simulator/strategies/lockstep.py) unless audited: the strategy's own `lockstep`."""
        return bool(self.make(DEFAULT_K, DEFAULT_REVIEW).lockstep)


REGISTRY: tuple[StrategyEntry, ...] = (
    StrategyEntry("strongonly", "Strong decodes every step", lambda k, r: SingleModel(STRONG)),
    StrategyEntry("weakonly", "Weak decodes every step (writes unreviewed)", lambda k, r: SingleModel(WEAK)),
    StrategyEntry("specagent", "Weak drafts ≤K steps with real reads, Strong verifies in one prefill and repairs one step",
                  lambda k, r: SpecAgent(k=k, review=r)),
    StrategyEntry("exactmatch", "Weak drafts, Strong decodes its own step too; draft kept only if identical",
                  lambda k, r: ExactMatchSpeculative(), aliases=("exactmatchspeculative",)),
    StrategyEntry("router", "per-step router to Weak or Strong", lambda k, r: Router()),
    StrategyEntry("collab", "AgentCollab-style: Weak acts, escalates to Strong on detected trouble", lambda k, r: Collaborative(),
                  aliases=("collaborative", "agentcollab")),
    StrategyEntry("specagent_exact", "ablation: exact-step verifier",
                  lambda k, r: SpecAgent(k=k, review=r, verifier="exact", name="specagent_exact"), aliases=("exactstep",)),
    StrategyEntry("specagent_hold_replies", "ablation: also hold and review replies to the user",
                  lambda k, r: SpecAgent(k=k, review="hold_replies", name="specagent_hold_replies"), aliases=("holdreplies",)),
    StrategyEntry("specagent_every_chunk", "ablation: review every chunk, reads included",
                  lambda k, r: SpecAgent(k=k, review="every_chunk", name="specagent_every_chunk"), aliases=("everychunk",)),
)
STRATEGY_NAMES = tuple(e.name for e in REGISTRY)
STRATEGY_HELP = {e.name: e.help for e in REGISTRY}


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


_BY_KEY = {_key(n): e for e in REGISTRY for n in (e.name, *e.aliases)}


def models_called(name: str) -> tuple[str, ...]:
    """The models a strategy calls, ("weak", "strong") or one of them: a single-model strategy calls only its own, so a
    plan names no Weak GPU for Strong-only's fleet (issue #51)."""
    s = strategy_entry(name).make(DEFAULT_K, DEFAULT_REVIEW)
    if isinstance(s, SingleModel):
        return ("strong",) if s.model == STRONG else ("weak",)
    return ("weak", "strong")


def strategy_entry(name: str) -> StrategyEntry:
    """The registry entry for a name or alias (case, '-' and '_' ignored)."""
    entry = _BY_KEY.get(_key(name))
    if entry is None:
        raise ValueError(f"unknown strategy '{name}'; known: {', '.join(STRATEGY_NAMES)}")
    return entry


def make_strategy(name: str, k: int = DEFAULT_K, review: str = DEFAULT_REVIEW) -> Strategy:
    """A registered strategy by name, with SpecAgent's K and review policy (ignored by the others)."""
    return strategy_entry(name).make(k, review)
