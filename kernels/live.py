"""The SpecAgent protocol run live: real torch models, a real SQLite tool environment.

Why: the simulator predicts what a protocol run costs; this runs one and measures it,
so the prediction can be checked on the very same run (`compare`). Semantic decisions
(accept / reject, replacement call or repair turn) cannot come from random weights: they
come from the trace's labels (a recorded protocol log) or from the simulator's seeded
acceptance model; everything else is real — the Weak model decodes its drafts at the
trace's token lengths, reads hit the database at once, the first held action stops
drafting and waits, the Strong model runs the verification prefill on its cached
context and decodes verdict and repair tokens, and caches roll back on rejection.

The decisions come from `specagent.simulator.protocol`, the same sequence the planner
prices (K, `on_write` review, cached verifier prompt, prefix caching); this module only
carries them out, and each model's cache length is exactly the simulator's "seen" count,
asserted at every call. When a verdict's replacement call
is used, both append it to the Strong cache with a short prefill (phase strong_prefill).

The run writes a protocol log in the trace schema (the trajectory's committed steps with
speculation labels, tool latencies as measured, user latency 0: the simulated user
answers at once) plus measured per-phase times and token counts.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from specagent.kernels.airline_env import AirlineEnv, UnreviewedWrite
from specagent.kernels.modules import Model
from specagent.simulator.acceptance import AcceptanceModel, unit_uniforms
from specagent.simulator.phases import PHASE_NAMES
from specagent.simulator.workload import UserTurn, episode_from_trajectory, step_groups
from specagent.simulator.protocol import Accept, CommitUnreviewed, Draft, DraftedRead, Review, UserMessage, specagent_protocol
from specagent.traces.schema import Actor, DraftedBy, SpecLabel, Step, StepKind, Trajectory, Verdict

PHASES = PHASE_NAMES


class SafetyViolation(AssertionError):
    """The database changed where the protocol says it must not."""


@dataclass
class Unit:
    """One agent message (parallel calls merged) with its tool results; or a user turn."""

    steps: list[int]  # agent step indices
    results: list[int]  # tool-result step indices
    kind: str
    held: bool
    has_tool: bool
    out_tokens: int
    ctx_tokens: int
    result_tokens: int
    tools: list[str]
    is_user: bool = False
    user_tokens: int = 0
    # recorded protocol-log labels, under the names simulator.protocol reads
    verdict: str | None = None
    verdict_tokens: int = 0
    repair_tokens: int = 0


def units_of(t: Trajectory) -> list[Unit]:
    """The simulator's units of `t` (`episode_from_trajectory`), with the step indices and tool names the run needs."""
    units: list[Unit] = []
    for g, u in zip(step_groups(t), episode_from_trajectory(t).units):
        if isinstance(u, UserTurn):
            units.append(Unit([g.user.index], [], "user", False, False, 0, 0, 0, [], is_user=True, user_tokens=u.tokens))
            continue
        units.append(Unit([s.index for s in g.agent], [s.index for s in g.tools], u.kind, u.held, u.has_tool, u.out_tokens,
                          u.ctx_tokens, u.result_tokens, [s.tool_name for s in g.agent if s.is_tool_call and s.tool_name],
                          verdict=u.verdict, verdict_tokens=u.verdict_tokens, repair_tokens=u.repair_tokens))
    return units


def scale_trajectory(t: Trajectory, factor: float) -> Trajectory:
    """Every token count scaled by `factor` (rounded, at least 1 where it was non-zero).

    For running long real traces on a small machine; the scaled trajectory is then the
    reference for both the live run and the simulator, so token counts still match exactly.
    """
    if factor == 1.0:
        return t
    if factor <= 0:
        raise ValueError(f"token scale must be > 0, got {factor}")

    def sc(x: int | None) -> int | None:
        return None if x is None else (0 if x == 0 else max(1, round(x * factor)))

    steps = []
    for s in t.steps:
        out = sc(s.output_tokens) or 0
        rt = s.reasoning_tokens
        steps.append(s.model_copy(update={"new_context_tokens": sc(s.new_context_tokens) or 0, "output_tokens": out,
                                          "reasoning_tokens": None if rt is None else min(out, sc(rt) or 0)}))
    return t.model_copy(update={"system_prompt_tokens": sc(t.system_prompt_tokens) or 0, "steps": steps,
                                "metadata": {**t.metadata, "token_scale": factor}})


# --------------------------------------------------------------------------- model lanes
class Lane:
    """One model with its cache for one trajectory; every pass is timed into a phase."""

    def __init__(self, model: Model, name: str, seed: int, clock: "Clock"):
        self.model, self.name, self.clock = model, name, clock
        self.cache = model.new_cache(1)
        self.gen = torch.Generator().manual_seed(seed)
        self.next_token = torch.zeros(1, dtype=torch.long)
        self.cache.snapshot()

    @property
    def seen(self) -> int:
        return self.cache.length

    def _ids(self, n: int) -> torch.Tensor:
        return torch.randint(0, self.model.spec.vocab, (1, n), generator=self.gen).to(self.model.device)

    def prefill_to(self, total: int, phase: str, boundaries: Sequence[int] = ()) -> None:
        """Prefill what this model has not seen up to `total`, keeping states at `boundaries`."""
        n = total - self.cache.length
        if n < 0:
            raise AssertionError(f"{self.name}: cache holds {self.cache.length} tokens, more than the context {total}")
        if self.cache.length in boundaries:
            self.cache.snapshot()
        if n == 0:
            return
        ids = self._ids(n)
        with self.clock.phase(phase, n):
            logits = self.model.prefill(self.cache, ids, snapshot_at=[b for b in boundaries if b > total - n])
        self.next_token = logits.argmax(-1)

    def decode(self, tokens: int, phase: str, keep: int | None = None) -> None:
        """Greedy-decode `tokens` tokens; keep a snapshot at length `keep` (what stays cached)."""
        if tokens <= 0:
            return
        start = self.cache.length
        with self.clock.phase(phase, tokens):
            tok = self.next_token
            for j in range(tokens):
                if keep is not None and start + j == keep:
                    self.clock.pause()
                    self.cache.snapshot()
                    self.clock.resume()
                tok = self.model.decode_step(self.cache, tok).argmax(-1)
            self.next_token = tok
        if keep is not None and keep == self.cache.length:
            self.cache.snapshot()

    def rollback(self, length: int) -> None:
        if length < self.cache.length:
            self.cache.rollback(length)


class Clock:
    """Wall time and tokens per phase; `pause` excludes bookkeeping (snapshots, safety digests)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tokens: dict[str, int] = defaultdict(int)
        self.passes: dict[str, int] = defaultdict(int)
        self.excluded = 0.0
        self._paused_at: float | None = None

    def pause(self) -> None:
        self._paused_at = time.perf_counter()

    def resume(self) -> None:
        assert self._paused_at is not None
        self.excluded += time.perf_counter() - self._paused_at
        self._paused_at = None

    class _Phase:
        def __init__(self, clock: "Clock", name: str, tokens: int):
            self.clock, self.name, self.tokens = clock, name, tokens

        def __enter__(self):
            self.ex0 = self.clock.excluded
            self.t0 = time.perf_counter()

        def __exit__(self, *exc):
            dt = time.perf_counter() - self.t0 - (self.clock.excluded - self.ex0)
            self.clock.seconds[self.name] += dt
            self.clock.tokens[self.name] += self.tokens
            self.clock.passes[self.name] += 1

    def phase(self, name: str, tokens: int = 0) -> "_Phase":
        return Clock._Phase(self, name, tokens)


# --------------------------------------------------------------------------- runner
@dataclass
class LiveResult:
    """One trajectory run live: the protocol log, measured phase times and token counts, safety record."""

    protocol_log: Trajectory
    seconds: dict[str, float]
    tokens: dict[str, int]
    wall_s: float  # whole run, bookkeeping (snapshots, safety digests) excluded
    safety: dict[str, int]
    db_diff: dict = field(default_factory=dict)
    events: list[tuple] = field(default_factory=list)


@dataclass(frozen=True)
class LiveConfig:
    k: int = 4
    seed: int = 0
    acceptance: AcceptanceModel = field(default_factory=AcceptanceModel)
    check_safety: bool = True


def run_trajectory(traj: Trajectory, weak: Model, strong: Model, cfg: LiveConfig = LiveConfig(), index: int = 0,
                   env: AirlineEnv | None = None) -> LiveResult:
    """Run SpecAgent (K, on_write review, cached verifier prompt, prefix caching) on one trajectory."""
    if cfg.k < 1:
        raise ValueError(f"K must be >= 1, got {cfg.k}")
    own_env = env is None
    env = env or AirlineEnv(seed=cfg.seed + index)
    try:
        return _run(traj, weak, strong, cfg, index, env)
    finally:
        if own_env:
            env.close()


def _run(traj: Trajectory, weak: Model, strong: Model, cfg: LiveConfig, index: int, env: AirlineEnv) -> LiveResult:
    acc = cfg.acceptance
    if acc.weak_token_ratio != 1.0:
        raise ValueError("the live run drafts at the trace's token lengths: acceptance.weak_token_ratio must be 1.0")
    units = units_of(traj)
    labelled = traj.is_protocol_log
    # the simulator's per-unit draws: a live run makes the decisions `simulate` makes on the same trace and seed
    u = unit_uniforms(cfg.seed, np.full(len(units), index), np.arange(len(units)))
    draws = (u[:, 0].tolist(), u[:, 1].tolist())
    arg_rng = random.Random(f"args:{cfg.seed}:{index}")
    clock = Clock()
    W = Lane(weak, "weak", cfg.seed * 1000 + 2 * index, clock)
    S = Lane(strong, "strong", cfg.seed * 1000 + 2 * index + 1, clock)
    users = [r[0] for r in env._ro.execute("SELECT user_id FROM users ORDER BY 1")]
    user_id = users[index % len(users)]
    labels: dict[int, SpecLabel] = {}
    tool_lat: dict[int, float] = {}
    safety = {"segments_reviewed": 0, "held_writes_accepted": 0, "held_writes_discarded": 0, "unreviewed_write_attempts_blocked": 0,
              "db_unchanged_while_drafting": 0, "db_restored_after_rejection": 0, "reads_executed": 0}
    events: list[tuple] = []
    before_all = env.snapshot()
    hist = traj.system_prompt_tokens

    def tool_calls(u: Unit, reviewed: bool) -> None:
        t0 = time.perf_counter()
        for name in u.tools:
            env.execute(name, env.arguments_for(name, user_id, arg_rng), reviewed=reviewed)
            if not env.holds(name):
                safety["reads_executed"] += 1
        dt = time.perf_counter() - t0
        clock.seconds["tool"] += dt
        clock.passes["tool"] += 1
        for ri in u.results:
            tool_lat[ri] = dt

    def db_unchanged(digest: str, violation: str, counter: str) -> None:
        """Compare the database with `digest` (off the clock); a difference is a safety violation."""
        clock.pause()
        if env.digest() != digest:
            raise SafetyViolation(violation)
        safety[counter] += 1
        clock.resume()

    def label(u: Unit, by: DraftedBy, verdict: Verdict | None, vt: int = 0, rt: int = 0, segment: int = 0) -> None:
        for j, si in enumerate(u.steps):
            labels[si] = SpecLabel(drafted_by=by, verdict=verdict, verdict_tokens=vt if j == 0 else 0,
                                   repair_tokens=rt if j == 0 else 0, segment=segment)

    def call(lane: Lane, out: int, ctx_out: int, total: int, pre_phase: str, dec_phase: str, snap: bool = False) -> None:
        """The simulator's `_State.call`: prefill the unseen part of `total`, decode `out`, keep total + min(out, ctx)."""
        lane.prefill_to(total, pre_phase, boundaries=(total,) if snap else ())
        if snap and lane.cache.length == total and total not in lane.cache.snapshots:
            lane.cache.snapshot()
        keep = total + min(out, ctx_out)
        lane.decode(out, dec_phase, keep=keep if out > ctx_out else None)
        lane.rollback(keep)

    t_start = time.perf_counter()
    seg_no = 0
    d0 = ""
    for op in specagent_protocol(units, cfg.k, "on_write", False, acc, draws, labelled):
        kind = type(op)
        if (kind is CommitUnreviewed or kind is Review) and cfg.check_safety:  # a chunk's drafting is over
            db_unchanged(d0, f"the database changed while drafting segment {seg_no} (before review)", "db_unchanged_while_drafting")
        if kind is Draft:
            a = units[op.unit]
            if op.position == 0 and cfg.check_safety:
                clock.pause()
                d0 = env.digest()
                clock.resume()
            call(W, a.out_tokens, a.ctx_tokens, hist + op.pending, "weak_prefill", "weak_decode", snap=True)
            if a.held and cfg.check_safety:  # the held action must be refused by the environment before review
                for name in a.tools:
                    if env.holds(name):
                        try:
                            env.execute(name, env.arguments_for(name, user_id, random.Random(0)), reviewed=False)
                        except UnreviewedWrite:
                            safety["unreviewed_write_attempts_blocked"] += 1
                        else:
                            raise SafetyViolation(f"{name} ran before review")
        elif kind is DraftedRead:
            tool_calls(units[op.unit], reviewed=False)
        elif kind is UserMessage:
            hist += units[op.unit].user_tokens
        elif kind is CommitUnreviewed:  # on_write: chunks of reads and replies are committed without review
            hist += op.pending
            for idx in op.segment:
                label(units[idx], DraftedBy.WEAK, None, segment=seg_no)
            events.append(("commit_unreviewed", op.segment))
            seg_no += 1
        elif kind is Review:  # verification prefill of everything Strong has not read, segment included
            safety["segments_reviewed"] += 1
            total = hist + op.pending
            S.prefill_to(total, "strong_verify", boundaries=[hist + sum(op.segment_ctx[:r]) for r in range(len(op.segment) + 1)])
        elif kind is Accept:
            S.decode(op.verdict_tokens, "strong_verdict")
            S.rollback(total)
            hist = total
            for n_, idx in enumerate(op.segment):
                label(units[idx], DraftedBy.WEAK, Verdict.ACCEPTED, vt=op.verdict_tokens if n_ == len(op.segment) - 1 else 0, segment=seg_no)
            if op.run_held:  # reviewed and accepted: the held write runs now
                last = units[op.segment[-1]]
                tool_calls(last, reviewed=True)
                safety["held_writes_accepted"] += 1
                hist += last.result_tokens
            events.append(("accept", op.segment))
            seg_no += 1
        else:  # Reject: keep the valid prefix; the verdict names the first bad step
            bad = units[op.segment[op.position]]
            S.decode(op.verdict_tokens, "strong_verdict")
            hist += op.keep
            S.rollback(hist)
            W.rollback(min(W.seen, hist))
            if units[op.segment[-1]].held:
                safety["held_writes_discarded"] += 1
            if cfg.check_safety:
                db_unchanged(d0, f"segment {seg_no} was rejected but the database changed", "db_restored_after_rejection")
            for idx in op.segment[:op.position]:
                label(units[idx], DraftedBy.WEAK, Verdict.ACCEPTED, segment=seg_no)
            if op.replacement:
                # the replacement call joins Strong's cache by a short prefill, as the simulator prices it
                S.prefill_to(hist + bad.ctx_tokens, "strong_prefill")
                rt = 0
            else:
                rt = op.repair_tokens
                call(S, rt, bad.ctx_tokens, hist, "strong_prefill", "strong_decode")
            hist += bad.ctx_tokens
            label(bad, DraftedBy.STRONG, Verdict.REPAIR, vt=op.verdict_tokens, rt=rt, segment=seg_no)
            if bad.has_tool:  # the repair commits without a second review
                tool_calls(bad, reviewed=True)
                hist += bad.result_tokens
            events.append(("reject", op.segment, op.position, "replacement" if op.replacement else "repair"))
            seg_no += 1
    wall = time.perf_counter() - t_start - clock.excluded
    steps = []
    for s in traj.steps:
        upd: dict = {}
        if s.index in labels:
            upd["label"] = labels[s.index]
        if s.actor == Actor.TOOL:
            upd["tool_latency_s"] = round(tool_lat.get(s.index, 0.0), 9)
        if s.actor == Actor.USER:
            upd["user_latency_s"] = 0.0
        if s.actor == Actor.AGENT:
            upd["model_latency_s"] = None
        steps.append(s.model_copy(update=upd))
    log = traj.model_copy(update={
        "steps": steps, "source": f"specagent live ({traj.source})",
        "metadata": {**traj.metadata, "live_strategy": "specagent", "live_k": cfg.k, "live_seed": cfg.seed,
                     "weak_model": weak.spec.name, "strong_model": strong.spec.name},
    })
    Trajectory.model_validate(log.model_dump())
    return LiveResult(protocol_log=log, seconds=dict(clock.seconds), tokens=dict(clock.tokens), wall_s=wall, safety=safety,
                      db_diff=AirlineEnv.diff(before_all, env.snapshot()), events=events)


# --------------------------------------------------------------------------- synthetic trace
def synthetic_airline_trajectory(seed: int = 0, turns: int = 3, system_tokens: int = 96, scale: float = 1.0) -> Trajectory:
    """A small airline conversation (user asks; agent reads, then writes or replies), seeded.

    For tests and the CLI's default when no trace is given; token counts are modest so the
    live run fits a CPU in seconds. Each user turn is followed by 1-3 reads, then a WRITE
    with its result, then a reply.
    """
    rng = random.Random(f"synthetic-airline:{seed}")
    reads = ["get_user_details", "get_reservation_details", "search_direct_flight", "get_flight_status"]
    writes = ["book_reservation", "cancel_reservation", "update_reservation_baggages", "send_certificate"]
    steps: list[Step] = []

    def add(**kw) -> None:
        steps.append(Step(index=len(steps), **kw))

    def n(lo: int, hi: int) -> int:
        return max(1, round(rng.randint(lo, hi) * scale))

    for _ in range(turns):
        add(actor=Actor.USER, kind=StepKind.USER, new_context_tokens=n(8, 30), user_latency_s=round(rng.uniform(1, 5), 3))
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(reads)
            add(actor=Actor.AGENT, kind=StepKind.READ, tool_name=name, new_context_tokens=n(12, 30), output_tokens=n(12, 40))
            add(actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name=name, new_context_tokens=n(20, 80), tool_latency_s=0.001)
        name = rng.choice(writes)
        add(actor=Actor.AGENT, kind=StepKind.WRITE, tool_name=name, irreversible=True, new_context_tokens=n(15, 35), output_tokens=n(15, 45))
        add(actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name=name, new_context_tokens=n(5, 20), tool_latency_s=0.001)
        add(actor=Actor.AGENT, kind=StepKind.REPLY, new_context_tokens=n(10, 40), output_tokens=n(10, 40))
    return Trajectory(task_id=f"synthetic-{seed}", domain="airline", source="specagent.kernels.live:synthetic_airline_trajectory",
                      system_prompt_tokens=max(1, round(system_tokens * scale)), steps=steps, metadata={"seed": seed})


# --------------------------------------------------------------------------- compare with the simulator
@dataclass
class Comparison:
    """Measured live run next to the simulator's prediction for the same protocol log."""

    rows: list[dict]  # one per phase: measured_s, predicted_s, measured_tokens, predicted_tokens
    measured_wall_s: float
    predicted_wall_s: float
    tokens_exact: bool
    notes: list[str]

    @property
    def wall_error(self) -> float:
        return (self.predicted_wall_s - self.measured_wall_s) / self.measured_wall_s


def compare(results: Sequence[LiveResult], weak_spec, strong_spec, weak_hw, strong_hw, dtype: str, k: int) -> Comparison:
    """Price the protocol logs with `specagent.simulator.simulate` and line them up with the measurements."""
    from specagent.kernels.calibrate import deployment_for
    from specagent.simulator.run import simulate
    from specagent.simulator.setting import Setting

    setting = Setting(weak=deployment_for(weak_spec, weak_hw, dtype), strong=deployment_for(strong_spec, strong_hw, dtype))
    df = simulate([r.protocol_log for r in results], "specagent", setting=setting, k=k)
    rows = []
    exact = True
    for ph in PHASES:
        meas_s = sum(r.seconds.get(ph, 0.0) for r in results)
        meas_t = sum(r.tokens.get(ph, 0) for r in results)
        col_t, col_s = f"tokens_{ph}", f"time_s_{ph}"
        pred_s = float(df[col_s].sum()) if col_s in df else 0.0
        pred_t = int(round(float(df[col_t].sum()))) if col_t in df else 0
        if ph in ("tool", "user"):
            meas_t = pred_t = 0
        if col_t in df and meas_t != pred_t:
            exact = False
        rows.append({"phase": ph, "measured_s": meas_s, "predicted_s": pred_s, "measured_tokens": meas_t,
                     "predicted_tokens": pred_t if col_t in df else None})
    notes = []
    notes: list[str] = []
    return Comparison(rows=rows, measured_wall_s=sum(r.wall_s for r in results), predicted_wall_s=float(df["wall_time_s"].sum()),
                      tokens_exact=exact, notes=notes)
