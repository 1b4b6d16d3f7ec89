"""The fleet engine: pools of replicas with routers and iteration-level continuous batching.

Agent tasks arrive (Poisson, bursty, or at given times) and replay a strategy's call plan
on an event loop of the engine's own (simpy's event order, without its process and event
objects; see `FleetSim`): model calls join a replica's running batch, tool and user waits
pass outside it. Each replica iteration is priced by the roofline with the batch it actually
holds (decode sequences with their contexts plus chunked-prefill chunks), so the MoE
expert union, KV reads and the balance point emerge from the load instead of being set.

Scheduling (per replica, vLLM V1 style): running decodes take one token each, then
prefills fill the rest of a per-iteration token budget in admission order (chunked
prefill): max_num_batched_tokens and max_num_seqs per replica; Sarathi-Serve (Agrawal et
al., OSDI 2024) is the chunked-prefill design. Admission reserves a call's final KV (context + new + decoded
tokens) and recurrent state; a call that does not fit waits in FIFO order (no
preemption). A replica keeps every trajectory's prefix cache it has served (no
eviction); a call routed to a replica that has not served its trajectory recomputes its
whole context (a cache miss), which is why session affinity is the default router. The
`central_queue` router binds late instead: a call goes to a replica that can admit it at
once, else it waits in one FIFO queue of the pool that replicas pull from as they free
room (c replicas of batch 1 are then an M/M/c queue when service is exponential).
A pool without its own limits runs its serving engine's defaults on its GPU
(`config.engine_scheduler`: vLLM picks 1,024 sequences and 8,192 tokens per
iteration on GPUs of 70 GiB and more).

`FleetSim(horizon=T)` stops the clock at T (arrivals after it are the caller's to leave
out); tasks still running then have no end time, which steady-state measurement
(`steady_state.py`) counts as censored.

To avoid one event per token, a replica with only decodes running advances in closed
form to the earliest of (a sequence finishing, an admissible arrival's next iteration
boundary): see `itercost.DecodeSegment`. `FleetSim(step_by_token=True)` steps every
iteration instead; a test checks both agree.

The fleet's configuration types are in `config.py`, its result frames and summary in
`results.py`, the Chrome trace export in `trace.py`, and the assembly from a Scenario
(deployments, prices, pools, sampled tasks) in `capacity/fleet_build.py`.

This module, `config` and `itercost` are compiled with mypyc when specagent is
installed (setup.py; `native.py` chooses the engine at import): keep them fully typed, as a type error fails
the build, and remember that a compiled module checks the declared types at run time
(a numpy integer or bool where `int` or `bool` is declared is an error there).
"""

from __future__ import annotations

import heapq
import itertools
import math
import struct
from collections import deque
from typing import TYPE_CHECKING, Final, Sequence

import numpy as np

from specagent.common.alloc import paused_gc
from specagent.costmodel.latency import LatencyTerms, request_overhead_s
from specagent.costmodel.passes import GDN_CHUNK
from specagent.simulator.fleet.config import POOL_NAMES, STRONG_POOL, WARMUP_SHARE, WEAK_POOL, Fleet, FleetError, Scheduler
from specagent.simulator.fleet.results import FleetResult, summarize_fleet
from specagent.simulator.fleet.itercost import DecodeSegment, IterationCost
from specagent.simulator.protocol.phases import DECODE_PHASES, PHASE_NAMES, STRONG_PHASES, TOOL, USER, WEAK_PHASES
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.protocol.setting import ApiModel

if TYPE_CHECKING:  # the frames are built only for a FleetResult: replay reads the call records and never imports pandas
    import pandas as pd

_SCAN_REPLICAS = 512  # session-affinity pools up to this size find the least-loaded replica by a scan


# --------------------------------------------------------------------------------------
# Tasks: a call plan compiled into per-task step lists
# --------------------------------------------------------------------------------------
#: A task's steps are plain tuples tagged by their first item, read only through these names. Tuples, not
#: classes: the event loop reads them ~10^6 times a run and the planner pickles them to its workers.
#:   (CALL, pool, new, ctx, decode, phase, n_events): one model call, a prefill of `new` tokens over `ctx`
#:       cached ones then `decode` tokens (n_events plan events merged into it)
#:   (WAIT, seconds, phase): a tool or user wait
#:   (PARALLEL, [steps per lane]): lanes that run at once and join
KIND: Final = 0
CALL: Final = "c"
WAIT: Final = "w"
PARALLEL: Final = "p"
C_POOL: Final = 1
C_NEW: Final = 2
C_CTX: Final = 3
C_DECODE: Final = 4
C_PHASE: Final = 5
C_EVENTS: Final = 6
W_SECONDS: Final = 1
W_PHASE: Final = 2
P_LANES: Final = 1


def call_step(pool: int, new: int, ctx: int, decode: int, phase: int, n_events: int) -> tuple:
    return (CALL, pool, new, ctx, decode, phase, n_events)

def _pool_of(phase: int) -> int:
    if phase in WEAK_PHASES:
        return WEAK_POOL
    if phase in STRONG_PHASES:
        return STRONG_POOL
    return -1


def compile_steps(plan: CallPlan) -> list[list[tuple]]:
    """Per task, its calls and waits in order; a prefill followed by the decode that continues it is one call."""
    order = np.argsort(plan.traj, kind="stable")
    traj, phase, tokens, context, wait_s = (plan.traj[order].tolist(), plan.phase[order].tolist(), plan.tokens[order].tolist(),
                                            plan.context[order].tolist(), plan.wait_s[order].tolist())
    group, lane = plan.group[order].tolist(), plan.lane[order].tolist()
    out: list[list[tuple]] = [[] for _ in range(plan.n_traj)]

    def append(seq: list, e: int) -> None:
        ph = phase[e]
        if ph in (TOOL, USER):
            seq.append((WAIT, wait_s[e], ph))
            return
        pool = _pool_of(ph)
        if ph in DECODE_PHASES:
            prev = seq[-1] if seq else None
            if (prev is not None and prev[KIND] == CALL and prev[C_POOL] == pool and prev[C_DECODE] == 0 and prev[C_NEW] > 0
                    and prev[C_CTX] + prev[C_NEW] == context[e]):  # the decode continues that prefill: one call
                seq[-1] = call_step(pool, prev[C_NEW], prev[C_CTX], int(tokens[e]), prev[C_PHASE], prev[C_EVENTS] + 1)
            else:
                seq.append(call_step(pool, 0, int(context[e]), int(tokens[e]), ph, 1))
        else:
            seq.append(call_step(pool, int(tokens[e]), int(context[e]), 0, ph, 1))

    i, n = 0, len(traj)
    while i < n:
        j = i
        while j < n and traj[j] == traj[i] and group[j] == group[i]:
            j += 1
        seq = out[traj[i]]
        lanes = sorted(set(lane[i:j]))
        if len(lanes) == 1:
            for e in range(i, j):
                append(seq, e)
        else:
            par: list[list[tuple]] = []
            for ln in lanes:
                sub: list[tuple] = []
                for e in range(i, j):
                    if lane[e] == ln:
                        append(sub, e)
                par.append(sub)
            seq.append((PARALLEL, par))
        i = j
    return out


# --------------------------------------------------------------------------------------
# Requests and replicas
# --------------------------------------------------------------------------------------
class _Req:
    __slots__ = ("task", "pool", "replica", "new", "ctx", "m", "phase", "n_events", "hit", "t_submit", "t_admit", "t_first",
                 "t_done", "need", "proc", "it0", "prefill_total", "ctx0")

    def __init__(self, task: int, pool: int, new: int, ctx: int, m: int, phase: int, n_events: int, proc: "_Proc", now: float):
        self.task, self.pool, self.new, self.ctx, self.m, self.phase, self.n_events = task, pool, new, ctx, m, phase, n_events
        self.proc = proc
        self.replica = -1
        self.hit = True
        self.t_submit = now
        self.t_admit = self.t_first = self.t_done = math.nan
        self.need = 0.0
        self.it0 = 0
        self.prefill_total = new
        self.ctx0 = ctx


class _Proc:
    """A task's walk through its steps (one per task, plus one per parallel lane while it runs).

    An explicit state machine instead of a simpy process: `i` is the step being waited on.
    """

    __slots__ = ("task", "steps", "i", "turn", "join")

    def __init__(self, task: int, steps: list[tuple], turn: list[float], join: list | None):
        self.task, self.steps, self.i, self.turn, self.join = task, steps, 0, turn, join


class _Replica:
    """One model replica: waiting queue, running batch, and the segment it is executing.

    Slotted, and holding the simulation's queues and row lists itself: every segment
    start and end reads them, ~10^5 times per run.
    """

    __slots__ = ("sim", "pool", "idx", "cost", "sched", "free", "kv", "state", "max_seqs", "max_tokens", "waiting", "prefilling",
                 "dec_heap", "n_dec", "dec_ctx_sum", "it", "used", "n_running", "outstanding", "busy", "gen", "seq_no", "seg_t0",
                 "seg_k", "seg_decode", "seg_chunks", "seg_mixed", "busy_s", "cached", "queue", "eid", "now1", "rows", "calls",
                 "by_token", "least", "end_cb", "resume", "pending", "central", "record")

    def __init__(self, sim: "FleetSim", pool: int, idx: int, cost: IterationCost, sched: Scheduler):
        self.sim, self.pool, self.idx, self.cost, self.sched = sim, pool, idx, cost, sched
        dep = cost.dep
        self.free = dep.usable_bytes - dep.weight_bytes()
        self.kv = dep.kv_bytes_per_token()
        self.state = dep.state_bytes_per_sequence()
        self.max_seqs = sched.max_num_seqs
        self.max_tokens = sched.max_batched_tokens
        self.pending = 0.0  # memory the calls in `waiting` will reserve (what a central-queue router checks)
        self.waiting: deque[_Req] = deque()
        self.prefilling: list[_Req] = []
        self.dec_heap: list[tuple[int, int, _Req]] = []
        self.n_dec = 0
        self.dec_ctx_sum = 0.0
        self.it = 0
        self.used = 0.0
        self.n_running = 0
        self.outstanding = 0
        self.busy = False
        self.gen = 0
        self.seq_no = 0
        # the segment in flight
        self.seg_t0 = 0.0
        self.seg_k = 0
        self.seg_decode: DecodeSegment | None = None  # set for pure-decode runs, None for a mixed iteration
        self.seg_chunks: list[tuple[_Req, int]] = []
        self.seg_mixed: tuple | None = None
        self.busy_s = 0.0
        self.cached: set[int] = set()
        # the simulation's containers and flags, bound once
        self.queue, self.eid, self.now1 = sim._queue, sim._eid, sim._now1
        self.rows, self.calls = sim._seg, sim._calls
        self.record = sim.record_segments
        self.by_token = sim.step_by_token
        self.least = sim._least[pool]
        self.central = sim._central[pool]  # the pool's FIFO under the central_queue router, else None
        self.end_cb = self._end_segment
        self.resume = sim._resume

    # --- admission ------------------------------------------------------------------------
    def _admit(self) -> None:
        waiting = self.waiting
        now = self.sim.now
        free, max_seqs = self.free, self.max_seqs
        while waiting:
            r = waiting[0]
            if not (self.n_running < max_seqs and self.used + r.need <= free):
                break
            waiting.popleft()
            self.pending -= r.need
            self._start(r, now)
        if not waiting:
            self.pending = 0.0  # keep float drift from accumulating
            central = self.central
            if central:
                self._pull(central, now)

    def _pull(self, central: deque, now: float) -> None:
        """Admit calls from the head of the pool's central queue while this replica has room (FIFO, no overtaking)."""
        sim = self.sim
        while central:
            r = central[0]
            if not (self.n_running < self.max_seqs and self.used + r.need <= self.free):
                break
            central.popleft()
            sim._bind(self, r)
            self.outstanding += 1
            self._start(r, now)

    def _start(self, r: _Req, now: float) -> None:
        """An admitted call takes its memory and a running slot, then prefills or decodes."""
        self.used += r.need
        self.n_running += 1
        r.t_admit = now
        if r.new > 0:
            self.prefilling.append(r)
        else:
            self._enter_decode(r)

    def _enter_decode(self, r: _Req) -> None:
        if r.m <= 0:
            self._finish(r)
            return
        r.it0 = it = self.it
        r.ctx0 = r.ctx
        self.seq_no += 1
        heapq.heappush(self.dec_heap, (it + r.m, self.seq_no, r))
        self.n_dec += 1
        self.dec_ctx_sum += r.ctx

    def _finish(self, r: _Req) -> None:
        """The call's last token is out: free its memory, record it, and wake its task (one deferred event)."""
        now = self.sim.now
        self.used -= r.need
        self.n_running -= 1
        self.outstanding -= 1
        least = self.least
        if least is not None:
            heapq.heappush(least, (self.outstanding, self.idx))
        if r.t_first != r.t_first:  # NaN: no token yet (a decode-only call)
            r.t_first = now
        r.t_done = now
        m = r.m
        self.calls += _CALL_ROW(r.task, r.pool, r.replica, r.phase, r.n_events, r.prefill_total, r.ctx0 if m else r.ctx, m, r.hit,
                                r.t_submit, r.t_admit, r.t_first, now)
        self.now1.append((self.resume, r.proc))

    # --- arrivals --------------------------------------------------------------------------
    def need_of(self, r: _Req) -> float:
        """The KV cache and state a call reserves on admission (the same on every replica of the pool); too large is an error."""
        need = (r.ctx + r.new + r.m) * self.kv + self.state
        if need > self.free:
            dep = self.cost.dep
            raise FleetError(
                f"{POOL_NAMES[self.pool]} pool: a call of task {r.task} needs {need / 1e9:,.2f} GB of KV cache and state "
                f"({r.ctx + r.new + r.m:,} tokens) but a replica of {dep.describe()} has only {self.free / 1e9:,.2f} GB "
                f"left after weights; use more GPUs per replica or a smaller KV dtype")
        return need

    def can_take(self, need: float) -> bool:
        """Whether a call of this size would be admitted at the next iteration boundary (behind the calls already waiting)."""
        return self.n_running + len(self.waiting) < self.max_seqs and self.used + self.pending + need <= self.free

    def submit(self, r: _Req) -> None:
        r.need = need = self.need_of(r)
        self.pending += need
        self.outstanding += 1
        least = self.least
        if least is not None:
            heapq.heappush(least, (self.outstanding, self.idx))
        waiting = self.waiting
        waiting.append(r)
        if not self.busy:
            self._start_segment()
            return
        seg = self.seg_decode
        if (seg is not None and self.seg_k > 1 and len(waiting) == 1 and self.n_running < self.max_seqs
                and self.used + need <= self.free and not self.by_token):
            # join at the next iteration boundary: cut the closed-form decode run short there
            now = self.sim.now
            t0 = self.seg_t0
            j, e = seg.boundary(now - t0, self.seg_k)
            if j < self.seg_k:
                self.seg_k = j
                delay = t0 + e - now
                self._schedule(now, now + (delay if delay > 0.0 else 0.0))

    # --- segments --------------------------------------------------------------------------
    def _schedule(self, now: float, t: float) -> None:
        """End the segment in flight at time t (an older end event still queued is ignored: its generation is stale)."""
        self.gen = g = self.gen + 1
        if t == now:
            self.now1.append((self.end_cb, g))
        else:
            heapq.heappush(self.queue, (t, 1, next(self.eid), self.end_cb, g))

    def _start_segment(self) -> None:
        if self.waiting or self.central:
            self._admit()
        if self.n_running == 0:
            self.busy = False
            return
        self.busy = True
        now = self.sim.now
        self.seg_t0 = now
        n_dec = self.n_dec
        if self.prefilling:
            budget = math.inf if self.max_tokens is None else self.max_tokens - n_dec
            b = float(n_dec)
            t, dec, pairs, kvt, st, lg = b, b, self.dec_ctx_sum + b, self.dec_ctx_sum + b, b, b
            chunks: list[tuple[_Req, int]] = []
            add, ceil = chunks.append, math.ceil
            for r in self.prefilling:
                if budget <= 0:
                    break
                new = r.new
                n = int(new if new < budget else budget)
                budget -= n
                add((r, n))
                t += n
                dec += 1.0 if n == 1 else 0.0
                ctx = r.ctx
                pairs += n * ctx + n * (n + 1) / 2
                kvt += ctx + n
                st += 1.0 + (ceil(n / GDN_CHUNK) if n > 1 else 0.0)  # chunk_state_touches(n)
                lg += 1.0
            self.seg_chunks = chunks
            self.seg_decode = None
            self.seg_k = 1
            time_s, fl, rd, wr = self.cost.one(t, lg, dec, pairs, kvt, st, lg)
            self.seg_mixed = (time_s, fl, rd, wr, t, len(chunks) + n_dec)
            delay = time_s
        else:
            self.seg_k = k = 1 if self.by_token else self.dec_heap[0][0] - self.it
            self.seg_decode, delay = self.cost.decode_run(n_dec, self.dec_ctx_sum, k)
        self._schedule(now, now + (delay if delay > 0.0 else 0.0))

    def _end_segment(self, g: int) -> None:
        if g != self.gen:
            return  # superseded by a shorter run (an arrival cut it)
        now = self.sim.now
        t0 = self.seg_t0
        dur = now - t0
        self.busy_s += dur
        n_dec = self.n_dec
        seg = self.seg_decode
        if seg is not None:
            k = self.seg_k  # >= 1: a decode leaves the heap at its last iteration
            if self.record:
                fl, rd, wr = seg.work(k)
                self.rows += _SEG_ROW(self.pool, self.idx, t0, dur, k, n_dec, float(n_dec), 0, fl, rd, wr)
            self.it = it = self.it + k
            self.dec_ctx_sum += n_dec * k
        else:
            time_s, fl, rd, wr, t, seqs = self.seg_mixed  # type: ignore[misc]
            if self.record:
                self.rows += _SEG_ROW(self.pool, self.idx, t0, dur, 1, seqs, t, int(t) - n_dec, fl, rd, wr)
            it = self.it
            if n_dec:
                self.it = it = it + 1
                self.dec_ctx_sum += n_dec
        # finished decodes
        heap = self.dec_heap
        if heap and heap[0][0] <= it:
            while heap and heap[0][0] <= it:
                r = heapq.heappop(heap)[2]
                self.n_dec -= 1
                self.dec_ctx_sum -= r.ctx0 + (it - r.it0)
                r.ctx = r.ctx0 + r.m
                self._finish(r)
            if self.n_dec == 0:
                self.dec_ctx_sum = 0.0  # keep float drift from accumulating across busy periods
        # advanced prefills
        if seg is None:
            for r, n in self.seg_chunks:
                r.ctx += n
                r.new -= n
                if r.new == 0:
                    self.prefilling.remove(r)
                    r.t_first = now
                    self._enter_decode(r)
            self.seg_chunks = []
        self._start_segment()


# --------------------------------------------------------------------------------------
# The simulation
# --------------------------------------------------------------------------------------


class FleetSim:
    """One run of a compiled workload on a fleet (build, `run()`, read `result`).

    The event loop is simpy's, inlined: events run in (time, priority, sequence number)
    order, the same events in the same order as the simpy version this replaced (a pinned
    test checks the outputs bit for bit), but without Event, Process and Condition objects
    per step. Events for a later time wait in one heap of (time, priority, sequence
    number, callback, argument) entries (the arrivals, all known at the start, in a sorted
    stream beside it: `_seed_arrivals`); events for the current time (a finished call
    waking its task, a parallel group's lanes, zero-length waits) go to two FIFO queues,
    one per priority, which is the same order: anything queued for the current time
    while the clock stands there was created after every heap entry for that time, so it
    runs after them (urgent-priority lanes first). Tasks are explicit state machines
    (`_Proc`); a parallel group starts one per lane at urgent priority and joins them as
    simpy's AllOf did (a lane's end, then the join, each one deferred event).
    """

    def __init__(self, plan: CallPlan, fleet: Fleet, arrival_times: np.ndarray, task_ids: Sequence[str] | None = None,
                 step_by_token: bool = False, warmup: float = WARMUP_SHARE, steps: list[list[tuple]] | None = None,
                 horizon: float = math.inf, record_segments: bool = True):
        # callers that rerun one plan pass its compiled steps in (one list per task: they define the tasks)
        # record_segments=False: no per-segment records (replay reads only the call records, `call_records`; packing ~2.6
        # segments a request was a tenth of its event loop); `run()` then refuses, as its replica frame needs them
        self.record_segments = record_segments
        self.steps = steps if steps is not None else compile_steps(plan)
        n = len(self.steps)
        if len(arrival_times) != n:
            raise ValueError(f"{len(arrival_times)} arrival times for {n} tasks")
        if not 0 <= warmup < 1:
            raise ValueError(f"warmup must be in [0, 1), got {warmup}")
        if not horizon > 0:
            raise ValueError(f"horizon must be > 0 seconds, got {horizon}")
        self.plan, self.fleet, self.step_by_token, self.warmup, self.horizon = plan, fleet, step_by_token, warmup, horizon
        self.n_tasks = n
        self.arrivals = np.asarray(arrival_times, dtype=np.float64)
        self.task_ids = list(task_ids) if task_ids is not None else [str(i) for i in range(n)]
        if len(self.task_ids) != n:
            raise ValueError(f"{len(self.task_ids)} task ids for {n} tasks")
        used = {s[C_POOL] for seq in self.steps for s in flatten_steps(seq) if s[KIND] == CALL}
        for p in used:
            if fleet.pool(p) is None:
                raise FleetError(f"the strategy calls the {POOL_NAMES[p]} model but the fleet has no {POOL_NAMES[p]} pool")
        self.now = 0.0
        self._queue: list[tuple] = []  # later events: (time, priority, sequence number, callback, argument)
        self._now0: deque[tuple] = deque()  # (callback, argument) due now at urgent priority (parallel lanes)
        self._now1: deque[tuple] = deque()  # (callback, argument) due now at normal priority
        self._eid = itertools.count()
        self._seg = bytearray()  # packed _SEG_ROW records
        self._calls = bytearray()  # packed _CALL_ROW records
        self._turns: list[tuple] = []
        self.costs: list[IterationCost | None] = []
        self.replicas: list[list[_Replica]] = [[], []]
        self.rr = [0, 0]
        self.affinity: list[dict[int, int]] = [{}, {}]
        self._pools = (fleet.weak, fleet.strong)
        # per pool: a lazy heap of (outstanding, replica index) for least-outstanding choices; None where a scan
        # is cheaper (session affinity asks once per task, so with a few hundred replicas the heap's two pushes
        # per call cost more than scanning) or no choice is made
        self._least: list[list | None] = [None, None]
        self._central: list[deque | None] = [None, None]  # per pool: the FIFO of calls waiting for any replica (central_queue)
        self._limits: list[Scheduler | None] = [None, None]
        #: per pool: the deployment's fixed-cost terms, whose per-request overhead delays each prefilling call before it
        #: joins its pool (latency.request_overhead_s); None for an API pool (its TTFT holds its own)
        self._terms: list[LatencyTerms | None] = [None, None]
        for i in (WEAK_POOL, STRONG_POOL):
            pool = fleet.pool(i)
            if pool is None or pool.is_api:
                self.costs.append(None)
                continue
            cost = IterationCost(pool.deployment, fleet.weight_mode)  # type: ignore[arg-type]
            self.costs.append(cost)
            self._terms[i] = cost.terms
            self._limits[i] = limits = pool.limits
            if pool.replicas is not None:
                if pool.router == "least_outstanding" or (pool.router == "session_affinity" and pool.replicas > _SCAN_REPLICAS):
                    self._least[i] = [(0, r) for r in range(pool.replicas)]
                elif pool.router == "central_queue":
                    self._central[i] = deque()
                self.replicas[i] = [_Replica(self, i, r, cost, limits) for r in range(pool.replicas)]
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.api_usd = [0.0] * n
        self.waits_done = 0
        self.steps_done = 0  # plan events completed (calls' events plus waits), set when the run ends
        self._seeded = False  # the arrivals are on the event queue (the first `advance`)
        # the arrivals in the order the heap would pop them, beside it (`_seed_arrivals`), and the next one's index
        self._arr_t: list[float] = []
        self._arr_task: list[int] = []
        self._arr_i = 0

    # --- routing ---------------------------------------------------------------------------
    def _least_outstanding(self, pool_i: int) -> int:
        """The replica with the fewest outstanding calls (lowest index on ties), as min() over all would pick."""
        least = self._least[pool_i]
        reps = self.replicas[pool_i]
        if least is None:
            outs = [rep.outstanding for rep in reps]
            return outs.index(min(outs))
        while least[0][0] != reps[least[0][1]].outstanding:  # type: ignore[index]
            heapq.heappop(least)  # type: ignore[arg-type]
        return least[0][1]  # type: ignore[index]

    def _route_central(self, pool_i: int, r: _Req) -> _Replica | None:
        """central_queue: the replica with the fewest outstanding calls (lowest index) that can admit `r` at once, else None."""
        best: _Replica | None = None
        for rep in self.replicas[pool_i]:
            if rep.can_take(r.need) and (best is None or rep.outstanding < best.outstanding):
                best = rep
        return best

    def _bind(self, rep: _Replica, r: _Req) -> None:
        """`r` runs on `rep`: a replica that never served its task recomputes the whole context (a prefix-cache miss)."""
        r.replica = rep.idx
        served = rep.cached
        task, ctx = r.task, r.ctx
        if ctx > 0 and task not in served:
            r.hit = False  # this replica never served the task: recompute the whole context
            r.new, r.ctx = r.new + ctx, 0
            r.prefill_total = r.new
        served.add(task)

    def _route(self, pool_i: int, task: int) -> _Replica:
        pool = self._pools[pool_i]
        assert pool is not None  # FleetSim checked that the plan only calls pools the fleet has
        reps = self.replicas[pool_i]
        aff = self.affinity[pool_i]
        if pool.replicas is None:  # unlimited: every task its own replica
            r = aff.get(task)
            if r is None:
                r = len(reps)
                cost, limits = self.costs[pool_i], self._limits[pool_i]
                assert cost is not None and limits is not None  # only API pools have none, and they never reach here
                reps.append(_Replica(self, pool_i, r, cost, limits))
                aff[task] = r
            return reps[r]
        if pool.router == "round_robin":
            r = self.rr[pool_i] % len(reps)
            self.rr[pool_i] += 1
        elif pool.router == "least_outstanding" or task not in aff:
            r = self._least_outstanding(pool_i)
        else:
            r = aff[task]
        aff[task] = r
        return reps[r]

    def _submit(self, proc: _Proc, step: tuple) -> None:
        _, pool_i, new, ctx, m, phase, n_events = step  # a CALL step (module comment)
        task = proc.task
        now = self.now
        r = _Req(task, pool_i, new, ctx, m, phase, n_events, proc, now)
        pool = self._pools[pool_i]
        assert pool is not None
        if pool.is_api:
            api: ApiModel = pool.deployment  # type: ignore[assignment]
            cached_price = api.usd_per_mtok_cached_input if api.prompt_caching else api.usd_per_mtok_input
            if new > 0:
                self.api_usd[task] += (new * api.usd_per_mtok_input + ctx * cached_price) / 1e6
            self.api_usd[task] += m * api.usd_per_mtok_output / 1e6
            r.t_admit = now
            r.t_first = now + (api.ttft_s if new > 0 else 0.0)
            d = (api.ttft_s if new > 0 else 0.0) + m / api.output_tokens_per_s
            self._at(now + d, self._api_done, r)
            return
        terms = self._terms[pool_i]
        assert terms is not None  # every served (non-API) pool has its terms
        delay: float = request_overhead_s(terms, new)
        if delay > 0.0:  # the engine's per-request overhead (API server, tokenisation, ...) before the call joins a queue
            self._at(now + delay, self._enqueue, r)
        else:
            self._enqueue(r)

    def _enqueue(self, r: _Req) -> None:
        """A call reaches its pool's scheduler: routed, then queued on a replica (or on the central queue)."""
        pool_i = r.pool
        central = self._central[pool_i]
        if central is not None:  # the central_queue router
            r.need = self.replicas[pool_i][0].need_of(r)
            target = self._route_central(pool_i, r)
            if target is None:
                central.append(r)  # every replica is full: wait for the first one to free room
                return
            self._bind(target, r)
            target.submit(r)
            return
        rep = self._route(pool_i, r.task)
        self._bind(rep, r)
        rep.submit(r)

    def _at(self, t: float, fn, arg) -> None:
        """Schedule fn(arg) at time t >= now, at normal priority."""
        if t == self.now:
            self._now1.append((fn, arg))
        else:
            heapq.heappush(self._queue, (t, 1, next(self._eid), fn, arg))

    def _api_done(self, r: _Req) -> None:
        r.t_done = self.now
        self._calls += _CALL_ROW(r.task, r.pool, r.replica, r.phase, r.n_events, r.prefill_total, r.ctx0 if r.m else r.ctx,
                                 r.m, r.hit, r.t_submit, r.t_admit, r.t_first, r.t_done)
        self._now1.append((self._resume, r.proc))

    # --- tasks -----------------------------------------------------------------------------
    def _arrive(self, task: int) -> None:
        now = self.now
        self.start[task] = now
        self._run(_Proc(task, self.steps[task], [now, 0.0], None))

    def _resume(self, proc: _Proc) -> None:
        """The step `proc` waited on is over: account for it, then go on (a call's next step is submitted here)."""
        steps = proc.steps
        i = proc.i
        s = steps[i]
        kind = s[KIND]
        if kind == CALL:
            proc.turn[1] = 1.0
        elif kind == WAIT:
            self.waits_done += 1
            if s[W_PHASE] == USER:
                proc.turn[0] = self.now
        proc.i = i = i + 1
        if i < len(steps) and steps[i][KIND] == CALL:
            self._submit(proc, steps[i])  # the common case of _run, without the extra call
        else:
            self._run(proc)

    def _lane_done(self, join: list) -> None:
        join[0] += 1
        if join[0] == join[1]:
            self._now1.append((self._resume, join[2]))

    def _run(self, proc: _Proc) -> None:
        """Run `proc` from its current step until it waits (a call, a timed wait, a parallel group) or ends."""
        steps, i = proc.steps, proc.i
        if i < len(steps):
            s = steps[i]
            kind = s[KIND]
            if kind == CALL:
                self._submit(proc, s)
            elif kind == WAIT:
                turn = proc.turn
                if s[W_PHASE] == USER and turn[1]:
                    self._turns.append((proc.task, turn[0], self.now))
                    turn[1] = 0.0
                self._at(self.now + s[W_SECONDS], self._resume, proc)
            else:  # PARALLEL
                lanes = s[P_LANES]
                join = [0, len(lanes), proc]
                run, now0 = self._run, self._now0
                for sub in lanes:
                    now0.append((run, _Proc(proc.task, sub, proc.turn, join)))
            return
        if proc.join is not None:
            self._now1.append((self._lane_done, proc.join))
            return
        turn = proc.turn
        if turn[1]:
            self._turns.append((proc.task, turn[0], self.now))
        self.end[proc.task] = self.now

    def _seed_arrivals(self) -> None:
        """Queue every task's arrival: (time, priority 1, sequence number = task index), below every later event's
        sequence number. They wait in a stream sorted by (time, task), beside the heap, which then holds only the
        events in flight: the same events in the same order (`advance` takes an arrival before a heap entry of the same
        time), but a pop no longer sifts through ~17 levels of future arrivals at 10^5 tasks. A NaN time has no order
        to sort by: then they go on the heap, as before."""
        times = self.arrivals.tolist()
        for t, a in enumerate(times):
            if a < 0:
                raise ValueError(f"arrival time of task {t} is negative ({a})")
        eid = self._eid
        if any(a != a for a in times):
            queue = self._queue
            arrive = self._arrive
            for t, a in enumerate(times):
                queue.append((0.0 + a, 1, next(eid), arrive, t))
            heapq.heapify(queue)
        else:
            order: list[int] = np.argsort(self.arrivals, kind="stable").tolist()  # ties in task order
            self._arr_t = [0.0 + times[t] for t in order]
            self._arr_task = order
            for _ in order:  # their sequence numbers are taken, as on the heap
                next(eid)
        self._seeded = True

    def advance(self, until: float) -> None:
        """Run every event due at or before min(until, horizon), then pause: a later `advance` or `run` goes on with the
        very same events in the same order, so a caller can look at the tasks finished so far (`start`, `end`) between
        the two (a sequential stop of a steady-state run, `steady_state.measure_steady`)."""
        if not self._seeded:
            self._seed_arrivals()
        queue = self._queue
        pop = heapq.heappop
        now0, now1 = self._now0, self._now1
        pop0, pop1 = now0.popleft, now1.popleft
        now = self.now
        limit = min(until, self.horizon)
        arr_t, arr_task, arrive = self._arr_t, self._arr_task, self._arrive
        ai, na = self._arr_i, len(self._arr_t)
        with paused_gc():
            # (time, priority, sequence) order: urgent events due now, then heap entries due now (created before
            # the clock reached now), then normal events created at now in creation order, then the next time. The
            # arrivals' stream is part of the heap: its next entry comes first at a tie (a lower sequence number).
            while True:
                if now0:
                    fn, arg = pop0()
                elif ai < na and arr_t[ai] == now:
                    fn, arg = arrive, arr_task[ai]
                    ai += 1
                elif queue and queue[0][0] == now:
                    _, _, _, fn, arg = pop(queue)
                elif now1:
                    fn, arg = pop1()
                elif ai < na and (not queue or arr_t[ai] <= queue[0][0]):
                    if arr_t[ai] > limit:
                        break
                    now = arr_t[ai]
                    self.now = now
                    fn, arg = arrive, arr_task[ai]
                    ai += 1
                elif queue and queue[0][0] <= limit:
                    now, _, _, fn, arg = pop(queue)
                    self.now = now
                else:
                    break
                fn(arg)
            self._arr_i = ai

    def call_records(self) -> np.ndarray:
        """The model calls finished so far, one record per call in the order they finished (fields: task, pool_i,
        replica, phase, plan_events, prefill_tokens, decode_context, decode_tokens, cache_hit, t_submit_s, t_admit_s,
        t_first_token_s, t_done_s), as a structured array: the same records `run()`'s call frame is made of, for a
        caller that needs no frames (replay reads only these: `fleet_build.TaskPlan.call_records`)."""
        return np.frombuffer(bytes(self._calls), dtype=_CALL_DTYPE)

    def run(self) -> FleetResult:
        if not self.record_segments:
            raise FleetError("this simulation keeps no segment records (record_segments=False): read its call records")
        self.advance(self.horizon)
        with paused_gc():
            result = self._result()
            self._seg.clear()
            self._calls.clear()
        return result

    # --- results ---------------------------------------------------------------------------
    def _result(self) -> FleetResult:
        import pandas as pd

        n = self.n_tasks
        start, end = np.array(self.start, dtype=np.float64), np.array(self.end, dtype=np.float64)
        seg = _frame(self._seg, _SEG_DTYPE)
        seg.insert(0, "pool", np.array(POOL_NAMES)[seg["pool_i"].to_numpy(dtype=np.int64)] if len(seg) else [])
        calls = _frame(self._calls, _CALL_DTYPE)
        calls.insert(1, "pool", np.array(POOL_NAMES)[calls["pool_i"].to_numpy(dtype=np.int64)] if len(calls) else [])
        calls["queue_s"] = calls["t_admit_s"] - calls["t_submit_s"]
        calls["service_s"] = calls["t_done_s"] - calls["t_admit_s"]
        turns = pd.DataFrame(self._turns, columns=["task", "t_start_s", "t_end_s"])
        turns["latency_s"] = turns["t_end_s"] - turns["t_start_s"]
        latency = end - start
        tasks = pd.DataFrame({
            "task": np.arange(n), "task_id": self.task_ids, "arrival_s": self.arrivals, "start_s": start, "end_s": end,
            "latency_s": latency,
        })
        c_task, c_pool = calls["task"].to_numpy(), calls["pool_i"].to_numpy()
        c_queue, c_service = calls["queue_s"].to_numpy(), calls["service_s"].to_numpy()
        for name, i in (("weak", WEAK_POOL), ("strong", STRONG_POOL)):
            mine = c_pool == i  # numpy masks, not frame filters: the same values in the same order
            task_i = c_task[mine]
            tasks[f"{name}_calls"] = np.bincount(task_i, minlength=n) if len(task_i) else 0
            tasks[f"{name}_queue_s"] = np.bincount(task_i, weights=c_queue[mine], minlength=n) if len(task_i) else 0.0
            tasks[f"{name}_service_s"] = np.bincount(task_i, weights=c_service[mine], minlength=n) if len(task_i) else 0.0
        tasks["api_usd"] = np.array(self.api_usd, dtype=np.float64)
        if len(turns):
            g = turns.groupby("task")["latency_s"]
            tasks["turns"] = g.size().reindex(range(n), fill_value=0).to_numpy()
            tasks["turn_latency_mean_s"] = g.mean().reindex(range(n)).to_numpy()
            tasks["turn_latency_max_s"] = g.max().reindex(range(n)).to_numpy()
        makespan = float(np.nanmax(end)) if n and not np.isnan(end).all() else 0.0
        if self.horizon < math.inf:  # stopped by the clock: segments in flight count as busy up to it, and so does the span
            makespan = self.horizon
            for reps in self.replicas:
                for rep in reps:
                    if rep.busy:
                        rep.busy_s += self.horizon - rep.seg_t0
        rows = []
        # each replica's segments, in their original order, as contiguous slices of one sorted copy
        pool_i, rep_i = seg["pool_i"].to_numpy(dtype=np.int64), seg["replica"].to_numpy(dtype=np.int64)
        width = max(len(self.replicas[0]), len(self.replicas[1]), 1)
        key = pool_i * width + rep_i
        order = np.argsort(key, kind="stable")
        key = key[order]
        col = {c: seg[c].to_numpy()[order] for c in ("iterations", "batch", "prefill_tokens", "flops", "bytes_read", "bytes_written")}
        bi = col["batch"] * col["iterations"]
        for i in (WEAK_POOL, STRONG_POOL):
            reps = self.replicas[i]
            lo = np.searchsorted(key, i * width + np.arange(len(reps)), "left").tolist()
            hi = np.searchsorted(key, i * width + np.arange(len(reps)), "right").tolist()
            for rep in reps:
                a, b = lo[rep.idx], hi[rep.idx]
                its = col["iterations"][a:b]
                dec = col["prefill_tokens"][a:b] == 0
                rows.append({
                    "pool": POOL_NAMES[i], "replica": rep.idx, "busy_s": rep.busy_s,
                    "utilisation": rep.busy_s / makespan if makespan > 0 else 0.0,
                    "iterations": int(its.sum()),
                    "mean_batch": float(bi[a:b].sum() / max(its.sum(), 1)),
                    "mean_decode_batch": float(bi[a:b][dec].sum() / max(its[dec].sum(), 1)),
                    "flops": float(col["flops"][a:b].sum()), "bytes_read": float(col["bytes_read"][a:b].sum()),
                    "bytes_written": float(col["bytes_written"][a:b].sum()),
                })
        replicas = pd.DataFrame(rows, columns=["pool", "replica", "busy_s", "utilisation", "iterations", "mean_batch",
                                               "mean_decode_batch", "flops", "bytes_read", "bytes_written"])
        self.steps_done = self.waits_done + int(calls["plan_events"].sum())
        summary = summarize_fleet(tasks, calls, seg, replicas, self.fleet, self.warmup, self.steps_done)
        return FleetResult(tasks=tasks, calls=calls, turns=turns, segments=seg, replicas=replicas, summary=summary, fleet=self.fleet)


# Segment and call records are packed into byte buffers as the run goes (a struct per row costs about
# what a tuple does, and the frames then come from one zero-copy view instead of a conversion of
# ~10^6 boxed floats scattered over the heap). Field types are what pandas infers for the same values.
_SEG_FIELDS = (("pool_i", "q"), ("replica", "q"), ("t_start_s", "d"), ("duration_s", "d"), ("iterations", "q"), ("batch", "q"),
               ("tokens", "d"), ("prefill_tokens", "q"), ("flops", "d"), ("bytes_read", "d"), ("bytes_written", "d"))
_CALL_FIELDS = (("task", "q"), ("pool_i", "q"), ("replica", "q"), ("phase", "q"), ("plan_events", "q"), ("prefill_tokens", "q"),
                ("decode_context", "q"), ("decode_tokens", "q"), ("cache_hit", "?"), ("t_submit_s", "d"), ("t_admit_s", "d"),
                ("t_first_token_s", "d"), ("t_done_s", "d"))
_SEG_ROW = struct.Struct("<" + "".join(f for _, f in _SEG_FIELDS)).pack
_CALL_ROW = struct.Struct("<" + "".join(f for _, f in _CALL_FIELDS)).pack
_NP_CODE = {"q": "<i8", "d": "<f8", "?": "?"}
_SEG_DTYPE = np.dtype([(name, _NP_CODE[f]) for name, f in _SEG_FIELDS])
_CALL_DTYPE = np.dtype([(name, _NP_CODE[f]) for name, f in _CALL_FIELDS])
_PHASE_NAME_ARRAY = np.array(PHASE_NAMES, dtype=object)


def _frame(buf: bytearray, dtype: np.dtype) -> pd.DataFrame:
    """A frame from packed records, one column per field (a `phase` code column shows the phase's name)."""
    import pandas as pd

    rec = np.frombuffer(bytes(buf), dtype=dtype)
    names = dtype.names or ()
    out = {}
    for name in names:
        col = np.ascontiguousarray(rec[name])
        out[name] = _PHASE_NAME_ARRAY[col] if name == "phase" else col
    return pd.DataFrame(out, columns=list(names))


def flatten_steps(seq: list[tuple]):
    """A task's compiled steps with parallel lanes (PARALLEL) opened up, in order."""
    for s in seq:
        if s[KIND] == PARALLEL:
            for sub in s[P_LANES]:
                yield from flatten_steps(sub)
        else:
            yield s
