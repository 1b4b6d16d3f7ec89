"""The SpecAgent protocol run live: real torch models, real reads on a SQLite airline service.

Why: the simulator predicts what a protocol run costs; this runs one and measures it,
so the prediction can be checked on the very same run (`compare`). Semantic decisions
(accept / reject, replacement call or repair turn) cannot come from random weights: they
come from the trace's labels (a recorded protocol log) or from the simulator's seeded
acceptance model; everything else is real — the Weak model decodes its drafts at the
trace's token lengths; every drafted READ executes on the service at once (arguments
drawn from its rows) and its result, at its real size in tokens, is what the next draft
and the Strong model's verification read; the first held action stops drafting and is
refused by the service until reviewed; the Strong model runs the verification prefill
on its cached context and decodes verdict and repair tokens; caches roll back on
rejection.

The decisions come from `specagent.simulator.protocol.decisions`, the same sequence the planner
prices (K, `on_write` review, cached verifier prompt, prefix caching); this module only
carries them out, and each model's cache length is exactly the simulator's "seen" count,
asserted at every call. When a verdict's replacement call is used, both append it to the
Strong cache with a short prefill (phase strong_prefill).

Real result sizes: a tool-result step takes the estimated tokens of the executed call's
JSON result (`airline_env.result_tokens`) times the trajectory's token scale
(`scale_trajectory`), so a scaled run keeps a real run's proportions and a run at scale 1
reads results at their real size. A re-drafted read (after a rejection) repeats the same
call on the same state and must return the same size (checked).

The run writes a protocol log in the trace schema (the trajectory's committed steps with
speculation labels, tool results at their real sizes, tool latencies as measured, user
latency 0: the simulated user answers at once), measured per-phase times and token
counts, the executed calls — checked against the calls the log implies
(`tool_runs_in_log`) — and a safety record per segment.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from specagent.kernels.airline_env import AirlineEnv, ToolError, UnreviewedWrite
from specagent.kernels.microbench import CLOCKS
from specagent.kernels.modules import Model
from specagent.simulator.acceptance.model import AcceptanceModel, unit_uniforms
from specagent.simulator.protocol.phases import PHASE_NAMES
from specagent.simulator.protocol.decisions import Accept, CommitUnreviewed, Draft, DraftedRead, Reject, Review, UserMessage, specagent_protocol
from specagent.simulator.acceptance.verdict_records import verdict_record
from specagent.simulator.protocol.workload import UserTurn, episode_from_trajectory, step_groups
from specagent.traces.verdict_log import VerdictRecord
from specagent.traces.schema import Actor, DraftedBy, SpecLabel, Step, StepKind, Trajectory, Verdict

PHASES = PHASE_NAMES


class SafetyViolation(AssertionError):
    """The database changed where the protocol says it must not."""


class LogMismatch(AssertionError):
    """The tool calls the service executed differ from those the protocol log implies."""


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
    """Time and tokens per phase, and every timed pass in order; `pause` excludes bookkeeping
    (snapshots, safety digests).

    Two clocks, as calibration's (`microbench.CLOCKS`): "wall" (perf_counter; on a GPU each
    pass ends with a device synchronise, so a pass's time includes its kernels) and "cpu"
    (this thread's CPU time: on a CPU shared with other jobs, the time the pass itself ran,
    without the time other processes held the core; exact with one torch thread, which does
    all the work on this thread). Wall time is recorded alongside either way.
    """

    def __init__(self, kind: str = "wall", sync: Callable[[], None] | None = None) -> None:
        if kind not in CLOCKS:
            raise ValueError(f"clock must be one of {CLOCKS}, got '{kind}'")
        self.kind = kind
        self.now = time.thread_time if kind == "cpu" else time.perf_counter
        self.sync = sync or (lambda: None)
        self.seconds: dict[str, float] = defaultdict(float)
        self.wall_seconds: dict[str, float] = defaultdict(float)
        self.tokens: dict[str, int] = defaultdict(int)
        self.passes: list[tuple[str, float]] = []  # (phase, seconds) of every timed pass, in order
        self.excluded = 0.0
        self.excluded_wall = 0.0
        self._paused_at: tuple[float, float] | None = None

    def pause(self) -> None:
        self._paused_at = (self.now(), time.perf_counter())

    def resume(self) -> None:
        assert self._paused_at is not None
        self.excluded += self.now() - self._paused_at[0]
        self.excluded_wall += time.perf_counter() - self._paused_at[1]
        self._paused_at = None

    def add(self, name: str, seconds: float, wall: float, tokens: int = 0) -> None:
        self.seconds[name] += seconds
        self.wall_seconds[name] += wall
        self.tokens[name] += tokens
        self.passes.append((name, seconds))

    class _Phase:
        def __init__(self, clock: "Clock", name: str, tokens: int):
            self.clock, self.name, self.tokens = clock, name, tokens

        def __enter__(self):
            c = self.clock
            c.sync()
            self.ex0, self.exw0 = c.excluded, c.excluded_wall
            self.t0, self.w0 = c.now(), time.perf_counter()

        def __exit__(self, *exc):
            c = self.clock
            c.sync()
            c.add(self.name, c.now() - self.t0 - (c.excluded - self.ex0), time.perf_counter() - self.w0 - (c.excluded_wall - self.exw0),
                  self.tokens)

    def phase(self, name: str, tokens: int = 0) -> "_Phase":
        return Clock._Phase(self, name, tokens)


# --------------------------------------------------------------------------- runner
@dataclass
class LiveResult:
    """One trajectory run live: the protocol log, measured phase times and token counts, safety record."""

    protocol_log: Trajectory
    seconds: dict[str, float]  # per phase, on the run's clock
    wall_seconds: dict[str, float]  # per phase, wall time
    passes: list[tuple[str, float]]  # every timed pass (phase, seconds on the run's clock), in order
    tokens: dict[str, int]
    total_s: float  # whole run on the run's clock, bookkeeping (snapshots, safety digests) excluded
    wall_s: float  # whole run, wall time, bookkeeping excluded
    clock: str
    safety: dict[str, int]
    db_diff: dict = field(default_factory=dict)
    events: list[tuple] = field(default_factory=list)
    #: reads / writes executed, writes held / accepted / discarded, reviews, rejections, repairs, replacements
    counts: dict[str, int] = field(default_factory=dict)
    #: every executed tool call: (unit, tool, reviewed, result tokens before the token scale)
    calls: list[tuple[int, str, bool, int]] = field(default_factory=list)
    #: one `specagent.verdict/1` record per verification (docs/verdict-log.md); none when replaying a protocol log,
    #: whose recorded verdict totals do not split reasoning from answer
    verdict_records: list[VerdictRecord] = field(default_factory=list)


@dataclass(frozen=True)
class LiveConfig:
    k: int = 4
    seed: int = 0
    #: the live Weak model drafts at the trace's token lengths, so its ratio is 1 whatever the default's is
    acceptance: AcceptanceModel = field(default_factory=lambda: AcceptanceModel(weak_token_ratio=1.0))
    check_safety: bool = True
    #: "wall" or "cpu" (see `Clock`); "cpu" only for models on a CPU.
    clock: str = "wall"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"K must be >= 1, got {self.k}")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {CLOCKS}, got '{self.clock}'")


def check_tools(trajs: Sequence[Trajectory]) -> None:
    """Every tool call of `trajs` names a tool of the airline service (one clear error otherwise)."""
    for t in trajs:
        for s in t.steps:
            if s.is_tool_call and s.tool_name:
                try:
                    AirlineEnv.kind(s.tool_name)
                except ToolError as exc:
                    raise ValueError(f"{t.source} (task {t.task_id}), step {s.index}: {exc}; the live run executes "
                                     "tool calls on its SQLite airline service") from None


def run_trajectory(traj: Trajectory, weak: Model, strong: Model, cfg: LiveConfig = LiveConfig(), index: int = 0,
                   env: AirlineEnv | None = None) -> LiveResult:
    """Run SpecAgent (K, on_write review, cached verifier prompt, prefix caching) on one trajectory."""
    own_env = env is None
    env = env or AirlineEnv(seed=cfg.seed + index)
    try:
        return _run(traj, weak, strong, cfg, index, env)
    finally:
        if own_env:
            env.close()


def _run(traj: Trajectory, weak: Model, strong: Model, cfg: LiveConfig, index: int, env: AirlineEnv) -> LiveResult:
    return _LiveRun(traj, weak, strong, cfg, index, env).run()


class _LiveRun:
    """One trajectory's live run, its state named: the two lanes and the clock, the context committed so far
    (`hist`), the segment being drafted and its database digest, and what the run records (labels, tool latencies,
    real result sizes, executed calls, safety counters, events, verdict records)."""

    def __init__(self, traj: Trajectory, weak: Model, strong: Model, cfg: LiveConfig, index: int, env: AirlineEnv):
        acc = cfg.acceptance
        if acc.weak_token_ratio != 1.0:
            raise ValueError("the live run drafts at the trace's token lengths: acceptance.weak_token_ratio must be 1.0")
        self.traj, self.weak, self.strong, self.cfg, self.index, self.env, self.acc = traj, weak, strong, cfg, index, env, acc
        self.units = units = units_of(traj)
        self.labelled = traj.is_protocol_log
        # the simulator's per-unit draws: a live run makes the decisions `simulate` makes on the same trace and seed
        u = unit_uniforms(cfg.seed, np.full(len(units), index), np.arange(len(units)))
        self.draws = (u[:, 0].tolist(), u[:, 1].tolist())
        if cfg.clock == "cpu" and weak.device.type != "cpu":
            raise ValueError(f"the cpu clock times work on this thread; models on {weak.device} need the wall clock")
        sync = (lambda: torch.cuda.synchronize(weak.device)) if weak.device.type == "cuda" else None
        self.clock = clock = Clock(cfg.clock, sync)
        self.W = Lane(weak, "weak", cfg.seed * 1000 + 2 * index, clock)
        self.S = Lane(strong, "strong", cfg.seed * 1000 + 2 * index + 1, clock)
        users = env.user_ids()
        self.user_id = users[index % len(users)]
        self.scale = float(traj.metadata.get("token_scale", 1.0))
        self.labels: dict[int, SpecLabel] = {}
        self.tool_lat: dict[int, float] = {}
        self.result_size: dict[int, int] = {}  # tool-result step -> tokens of the real result (at the run's token scale)
        self.calls: list[tuple[int, str, bool, int]] = []  # (unit, tool, reviewed, result tokens) of every executed call
        self.safety = {"segments_reviewed": 0, "held_writes_accepted": 0, "held_writes_discarded": 0,
                       "unreviewed_write_attempts_blocked": 0, "db_unchanged_while_drafting": 0,
                       "db_restored_after_rejection": 0}
        self.events: list[tuple] = []
        self.before_all = env.snapshot()
        self.hist = traj.system_prompt_tokens  # the context committed so far
        self.seg_no = 0  # the segment being drafted
        self.d0 = ""  # the database's digest when its drafting began
        self.verdicts: list[VerdictRecord] = []
        self.review: Review | None = None  # the last review, and the context it verified
        self.reviewed = 0

    def run(self) -> LiveResult:
        """Carry out the protocol's decisions in order, then write the protocol log and check it against the calls."""
        clock, cfg = self.clock, self.cfg
        log_start = len(self.env.log)
        c_start, t_start = clock.now(), time.perf_counter()
        for op in specagent_protocol(self.units, cfg.k, "on_write", False, self.acc, self.draws, self.labelled):
            self._op(op)
        total = clock.now() - c_start - clock.excluded
        wall = time.perf_counter() - t_start - clock.excluded_wall
        log = self._protocol_log()
        counts = self._counts(log, log_start)
        return LiveResult(protocol_log=log, seconds=dict(clock.seconds), wall_seconds=dict(clock.wall_seconds),
                          passes=clock.passes, tokens=dict(clock.tokens), total_s=total, wall_s=wall, clock=clock.kind,
                          safety=self.safety, db_diff=AirlineEnv.diff(self.before_all, self.env.snapshot()),
                          events=self.events, counts=counts, calls=self.calls, verdict_records=self.verdicts)

    def _op(self, op) -> None:
        """One decision: recorded (review, verdict record), the safety check at a chunk's end, then carried out."""
        kind = type(op)
        if kind is Review:
            self.review = op
        elif (kind is Accept or kind is Reject) and self.review is not None and not self.labelled:
            self.verdicts.append(verdict_record(f"{self.traj.task_id}#{self.index}", self.units, self.review, op, self.acc,
                                                self.cfg.k, "live"))
        if (kind is CommitUnreviewed or kind is Review) and self.cfg.check_safety:  # a chunk's drafting is over
            self._db_unchanged(f"the database changed while drafting segment {self.seg_no} (before review)",
                               "db_unchanged_while_drafting")
        if kind is Draft:
            self._draft(op)
        elif kind is DraftedRead:
            self._tool_calls(op.unit, reviewed=False)
        elif kind is UserMessage:
            self.hist += self.units[op.unit].user_tokens
        elif kind is CommitUnreviewed:  # on_write: chunks of reads and replies are committed without review
            self.hist += op.pending
            for idx in op.segment:
                self._label(self.units[idx], DraftedBy.WEAK, None, segment=self.seg_no)
            self.events.append(("commit_unreviewed", op.segment))
            self.seg_no += 1
        elif kind is Review:  # verification prefill of everything Strong has not read, segment included
            self.safety["segments_reviewed"] += 1
            self.reviewed = self.hist + op.pending
            self.S.prefill_to(self.reviewed, "strong_verify",
                              boundaries=[self.hist + sum(op.segment_ctx[:r]) for r in range(len(op.segment) + 1)])
        elif kind is Accept:
            self._accept(op)
        else:  # Reject: keep the valid prefix; the verdict names the first bad step
            self._reject(op)

    def _args(self, ui: int, j: int, name: str) -> dict:
        """The arguments of call j of unit ui: drawn from the database with a seed of their own, so a
        re-drafted read (after a rejection) repeats the same call on the same state."""
        return self.env.arguments_for(name, self.user_id, random.Random(f"args:{self.cfg.seed}:{self.index}:{ui}:{j}"))

    def _tool_calls(self, ui: int, reviewed: bool) -> None:
        """Run unit ui's calls; their results' real sizes become the unit's result tokens (what the
        protocol adds to the context next) and the log's tool-result steps."""
        u, clock, result_size = self.units[ui], self.clock, self.result_size
        t0, w0 = clock.now(), time.perf_counter()
        outs = [self.env.execute(name, self._args(ui, j, name), reviewed=reviewed) for j, name in enumerate(u.tools)]
        dt, wall = clock.now() - t0, time.perf_counter() - w0
        clock.add("tool", dt, wall)
        for ri in u.results:
            self.tool_lat[ri] = dt
        self.calls.extend((ui, o.tool, reviewed, o.tokens) for o in outs)
        if outs and len(outs) == len(u.results):  # one result step per call, in call order
            for ri, o in zip(u.results, outs):
                n = o.tokens if self.scale == 1.0 else max(1, round(o.tokens * self.scale))
                if result_size.setdefault(ri, n) != n:
                    raise LogMismatch(f"step {ri}: {o.tool} re-executed on the same state returned {n} tokens, "
                                      f"first {result_size[ri]}")
            u.result_tokens = sum(result_size[ri] for ri in u.results)

    def _db_unchanged(self, violation: str, counter: str) -> None:
        """Compare the database with the digest taken when the segment's drafting began (off the clock); a
        difference is a safety violation."""
        self.clock.pause()
        if self.env.digest() != self.d0:
            raise SafetyViolation(violation)
        self.safety[counter] += 1
        self.clock.resume()

    def _label(self, u: Unit, by: DraftedBy, verdict: Verdict | None, vt: int = 0, rt: int = 0, segment: int = 0) -> None:
        # a repair stands in the rejected step's place here, so the rejected kind is the unit's own (said, for the fit)
        rejected = StepKind(u.kind) if verdict == Verdict.REPAIR else None
        for j, si in enumerate(u.steps):
            self.labels[si] = SpecLabel(drafted_by=by, verdict=verdict, verdict_tokens=vt if j == 0 else 0,
                                        repair_tokens=rt if j == 0 else 0, segment=segment, rejected_kind=rejected)

    @staticmethod
    def _call(lane: Lane, out: int, ctx_out: int, total: int, pre_phase: str, dec_phase: str, snap: bool = False) -> None:
        """The simulator's `_State.call`: prefill the unseen part of `total`, decode `out`, keep total + min(out, ctx)."""
        lane.prefill_to(total, pre_phase, boundaries=(total,) if snap else ())
        if snap and lane.cache.length == total and total not in lane.cache.snapshots:
            lane.cache.snapshot()
        keep = total + min(out, ctx_out)
        lane.decode(out, dec_phase, keep=keep if out > ctx_out else None)
        lane.rollback(keep)

    def _draft(self, op: Draft) -> None:
        """The Weak model drafts a unit; a held action is tried on the service, which must refuse it before review."""
        a, env = self.units[op.unit], self.env
        if op.position == 0 and self.cfg.check_safety:
            self.clock.pause()
            self.d0 = env.digest()
            self.clock.resume()
        self._call(self.W, a.out_tokens, a.ctx_tokens, self.hist + op.pending, "weak_prefill", "weak_decode", snap=True)
        if a.held and self.cfg.check_safety:  # the held action must be refused by the environment before review
            for j, name in enumerate(a.tools):
                if env.holds(name):
                    try:
                        env.execute(name, self._args(op.unit, j, name), reviewed=False)
                    except UnreviewedWrite:
                        self.safety["unreviewed_write_attempts_blocked"] += 1
                    else:
                        raise SafetyViolation(f"{name} ran before review")

    def _accept(self, op: Accept) -> None:
        """Strong's verdict accepts the segment: its context is committed and a held write runs now."""
        self.S.decode(op.verdict_tokens, "strong_verdict")
        self.S.rollback(self.reviewed)
        self.hist = self.reviewed
        for n_, idx in enumerate(op.segment):
            self._label(self.units[idx], DraftedBy.WEAK, Verdict.ACCEPTED,
                        vt=op.verdict_tokens if n_ == len(op.segment) - 1 else 0, segment=self.seg_no)
        if op.run_held:  # reviewed and accepted: the held write runs now
            last = self.units[op.segment[-1]]
            self._tool_calls(op.segment[-1], reviewed=True)
            self.safety["held_writes_accepted"] += 1
            self.hist += last.result_tokens
        self.events.append(("accept", op.segment))
        self.seg_no += 1

    def _reject(self, op: Reject) -> None:
        """Strong's verdict keeps the valid prefix and replaces or repairs the first bad step; caches roll back."""
        S, bad = self.S, self.units[op.segment[op.position]]
        S.decode(op.verdict_tokens, "strong_verdict")
        self.hist += op.keep
        S.rollback(self.hist)
        self.W.rollback(min(self.W.seen, self.hist))
        if self.units[op.segment[-1]].held:
            self.safety["held_writes_discarded"] += 1
        if self.cfg.check_safety:
            self._db_unchanged(f"segment {self.seg_no} was rejected but the database changed", "db_restored_after_rejection")
        for idx in op.segment[:op.position]:
            self._label(self.units[idx], DraftedBy.WEAK, Verdict.ACCEPTED, segment=self.seg_no)
        if op.replacement:
            # the replacement call joins Strong's cache by a short prefill, as the simulator prices it
            S.prefill_to(self.hist + bad.ctx_tokens, "strong_prefill")
            rt = 0
        else:
            rt = op.repair_tokens
            self._call(S, rt, bad.ctx_tokens, self.hist, "strong_prefill", "strong_decode")
        self.hist += bad.ctx_tokens
        self._label(bad, DraftedBy.STRONG, Verdict.REPAIR, vt=op.verdict_tokens, rt=rt, segment=self.seg_no)
        if bad.has_tool:  # the repair commits without a second review
            self._tool_calls(op.segment[op.position], reviewed=True)
            self.hist += bad.result_tokens
        self.events.append(("reject", op.segment, op.position, "replacement" if op.replacement else "repair"))
        self.seg_no += 1

    def _protocol_log(self) -> Trajectory:
        """The trajectory's steps with the run's labels, measured tool latencies and real result sizes (validated)."""
        traj, cfg = self.traj, self.cfg
        steps = []
        for s in traj.steps:
            upd: dict = {}
            if s.index in self.labels:
                upd["label"] = self.labels[s.index]
            if s.actor == Actor.TOOL:
                upd["tool_latency_s"] = round(self.tool_lat.get(s.index, 0.0), 9)
                if s.index in self.result_size:
                    upd["new_context_tokens"] = self.result_size[s.index]
            if s.actor == Actor.USER:
                upd["user_latency_s"] = 0.0
            if s.actor == Actor.AGENT:
                upd["model_latency_s"] = None
            steps.append(s.model_copy(update=upd))
        log = traj.model_copy(update={
            "steps": steps, "source": f"specagent live ({traj.source})",
            "metadata": {**traj.metadata, "live_strategy": "specagent", "live_k": cfg.k, "live_seed": cfg.seed,
                         "weak_model": self.weak.spec.name, "strong_model": self.strong.spec.name,
                         "live_tool_results": f"executed on the SQLite airline service (kernels/airline_env.py); result "
                                              f"tokens measured, times token scale {self.scale:g}"},
        })
        Trajectory.model_validate(log.model_dump())
        return log

    def _counts(self, log: Trajectory, log_start: int) -> dict[str, int]:
        """What the service executed and the protocol decided, checked against the calls the log implies."""
        env, safety, events = self.env, self.safety, self.events
        executed = env.log[log_start:]
        counts = {
            "reads_executed": sum(1 for t, _, _ in executed if not env.holds(t)),
            "writes_executed": sum(1 for t, _, _ in executed if env.holds(t)),
            "writes_held": safety["held_writes_accepted"] + safety["held_writes_discarded"],
            "writes_accepted": safety["held_writes_accepted"], "writes_discarded": safety["held_writes_discarded"],
            "segments_reviewed": safety["segments_reviewed"],
            "rejections": sum(1 for e in events if e[0] == "reject"),
            "repairs": sum(1 for e in events if e[0] == "reject" and e[3] == "repair"),
            "replacements": sum(1 for e in events if e[0] == "reject" and e[3] == "replacement"),
        }
        expected = tool_runs_in_log(log, self.cfg.k)
        if (counts["reads_executed"], counts["writes_executed"]) != (expected["reads"], expected["writes"]):
            raise LogMismatch(f"{self.traj.task_id}: the service executed {counts['reads_executed']} reads and "
                              f"{counts['writes_executed']} writes; the protocol log implies {expected['reads']} and "
                              f"{expected['writes']}")
        return counts


def tool_runs_in_log(log: Trajectory, k: int) -> dict[str, int]:
    """Tool calls a protocol log implies, replayed through the protocol (K as run): reads executed while
    drafting (again when re-drafted after a rejection), held writes run after acceptance, calls of repaired steps."""
    units = units_of(log)
    none = [0.0] * len(units)
    reads = writes = 0
    for op in specagent_protocol(units, k, "on_write", False, AcceptanceModel(), (none, none), True):
        if isinstance(op, DraftedRead):
            ran = units[op.unit].tools
        elif isinstance(op, Accept) and op.run_held:
            ran = units[op.segment[-1]].tools
        elif isinstance(op, Reject) and units[op.segment[op.position]].has_tool:
            ran = units[op.segment[op.position]].tools
        else:
            continue
        held = sum(1 for name in ran if AirlineEnv.holds(name))
        writes += held
        reads += len(ran) - held
    return {"reads": reads, "writes": writes}


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


# --------------------------------------------------------------------------- repeats and the simulator's prediction
@dataclass
class Measured:
    """Per-phase time of a live run repeated R times with identical passes (same seed: same tokens, same calls).

    `seconds[phase]` sums, over the phase's passes, each pass's fastest of the R repeats —
    the statistic calibration fits on (`TimingConfig(statistic="min")`), pass by pass, so a
    burst of load from other jobs during one repeat does not count. `repeats` keeps each
    repeat's own totals: their spread is what a single run may show.
    """

    seconds: dict[str, float]
    repeats: list[dict[str, float]]
    total_s: float
    repeat_totals: list[float]
    clock: str


def measure(runs: Sequence[Sequence[LiveResult]]) -> Measured:
    """Combine R repeats (each a list of LiveResult, one per trajectory) of the same live run."""
    if not runs or not runs[0]:
        raise ValueError("no live run to measure")
    first = runs[0]
    for r, run in enumerate(runs[1:], start=2):
        if len(run) != len(first) or any([p for p, _ in a.passes] != [p for p, _ in b.passes] or a.tokens != b.tokens
                                         for a, b in zip(first, run)):
            raise ValueError(f"repeat {r} did not run the same passes as repeat 1 (same trace, K and seed give identical runs)")
    seconds: dict[str, float] = defaultdict(float)
    glue = []
    for i in range(len(first)):
        for j, (ph, _) in enumerate(first[i].passes):
            seconds[ph] += min(run[i].passes[j][1] for run in runs)
    for run in runs:  # time outside timed passes (the protocol's own Python between them)
        glue.append(sum(r.total_s - sum(t for _, t in r.passes) for r in run))
    repeats = [{ph: sum(r.seconds.get(ph, 0.0) for r in run) for ph in PHASES} for run in runs]
    return Measured(seconds={ph: seconds.get(ph, 0.0) for ph in PHASES}, repeats=repeats,
                    total_s=sum(seconds.values()) + min(glue), repeat_totals=[sum(r.total_s for r in run) for run in runs],
                    clock=first[0].clock)


@dataclass
class LiveComparison:
    """Measured live run next to the simulator's prediction for the same protocol logs."""

    rows: list[dict]  # one per phase: measured_s, spread_s (min, max over repeats), predicted_s, measured_tokens, predicted_tokens
    measured_s: float  # whole run (min statistic over repeats)
    predicted_s: float
    repeat_totals: list[float]
    tokens_exact: bool
    clock: str
    counts: dict[str, int]

    @property
    def error(self) -> float:
        """Signed relative error of the simulator's total."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    def as_dict(self) -> dict:
        return {"rows": self.rows, "measured_s": self.measured_s, "predicted_s": self.predicted_s, "error": self.error,
                "repeat_totals": self.repeat_totals, "tokens_exact": self.tokens_exact, "clock": self.clock, "counts": self.counts}


def total_counts(results: Sequence[LiveResult]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in results:
        for k, v in r.counts.items():
            out[k] += v
    return dict(out)


def compare_live(runs: Sequence[Sequence[LiveResult]] | Sequence[LiveResult], weak_spec, strong_spec, weak_hw, strong_hw, dtype: str,
                 k: int, engine=None) -> LiveComparison:
    """Price the protocol logs with `specagent.simulator.simulate` and line them up with the measurements.

    `runs`: the repeats of one live run (or a single run's results); `engine`: the serving-engine
    profile both models' passes pay (default `ideal`: the calibrated profiles' own overhead)."""
    from specagent.kernels.calibrate import deployment_for
    from specagent.simulator.run import simulate
    from specagent.simulator.protocol.setting import Setting

    if runs and isinstance(runs[0], LiveResult):
        runs = [runs]  # type: ignore[list-item]
    m = measure(runs)  # type: ignore[arg-type]
    first = runs[0]
    setting = Setting(weak=deployment_for(weak_spec, weak_hw, dtype, engine), strong=deployment_for(strong_spec, strong_hw, dtype, engine))
    df = simulate([r.protocol_log for r in first], "specagent", setting=setting, k=k)  # type: ignore[union-attr]
    rows = []
    exact = True
    for ph in PHASES:
        meas_t = sum(r.tokens.get(ph, 0) for r in first)  # type: ignore[union-attr]
        col_t, col_s = f"tokens_{ph}", f"time_s_{ph}"
        pred_s = float(df[col_s].sum()) if col_s in df else 0.0
        pred_t = int(round(float(df[col_t].sum()))) if col_t in df else 0
        if ph in ("tool", "user"):
            meas_t = pred_t = 0
        if col_t in df and meas_t != pred_t:
            exact = False
        per = [rep[ph] for rep in m.repeats]
        rows.append({"phase": ph, "measured_s": m.seconds[ph], "spread_s": (min(per), max(per)), "predicted_s": pred_s,
                     "measured_tokens": meas_t, "predicted_tokens": pred_t if col_t in df else None})
    return LiveComparison(rows=rows, measured_s=m.total_s, predicted_s=float(df["wall_time_s"].sum()), repeat_totals=m.repeat_totals,
                      tokens_exact=exact, clock=m.clock, counts=total_counts(first))  # type: ignore[arg-type]
