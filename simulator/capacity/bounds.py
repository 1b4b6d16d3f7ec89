"""Analytic capacity of a replica pool: tasks per second at its best batch, and the fewest replicas a rate needs.

Why: a capacity search that doubles from one replica spends its simulations on fleets that
cannot possibly carry the load, and prints an answer with nothing to check it against. A
replica is fastest when every iteration is as full as its limits allow: B decoding sequences
(B at most `max_num_seqs` and at most what fits the KV cache and recurrent state next to the
weights, at the workload's mean reservation per call) with the prompts' prefill riding along
in chunks, or in iterations of their own when the decodes cannot carry it all. Per task (P
prefill and D decode tokens) the replica needs D / B decoding iterations, and its prefill
costs the cheaper of: chunks that fill the iteration's token budget (C = budget - B tokens,
as vLLM's and SGLang's chunked prefill pack waiting prompts) added to decoding iterations,
t(B, C) - t(B, 0) each, with what the decoding iterations cannot carry in prefill-only
iterations of a full budget; or prefill-only iterations alone, t(0, budget) each. Smaller
chunks would often be cheaper per token (a few hundred prefill tokens hide under a decode
step's weight reads), but no serving engine's scheduler holds prompts back to make them: a
bound that assumed so was 1.7x optimistic against the fleet's own scheduler once MoE prefill
became compute-bound. Every iteration is priced by the one pass-time function
(`IterationCost.one`: the roofline plus the serving engine's fixed costs) at the workload's
mean contexts; B is the best of a geometric grid up to its cap. One replica then serves at
most 1 / (seconds per task) tasks per second, so a pool of n replicas is overloaded at rates
>= n times that. The bound ignores idle gaps, queueing for memory and contexts above the
mean, so it is optimistic: a lower bound on replicas that the simulation then raises (a test
checks that one replica fewer is unstable in simulation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import GDN_CHUNK
from specagent.simulator.fleet.sim import flatten_steps
from specagent.simulator.capacity.fleet_build import TaskPlan
from specagent.simulator.fleet.config import Scheduler
from specagent.simulator.fleet.itercost import IterationCost


@dataclass(frozen=True)
class PoolWork:
    """What one task asks of one pool, on average (from a planned sample of tasks)."""

    prefill_tokens: float  # new tokens prefilled per task
    decode_tokens: float  # tokens decoded per task
    prefill_calls: float  # calls with a prefill per task
    prefill_context: float  # cached tokens under a prefilled token (token-weighted mean)
    decode_context: float  # context of a decoding sequence (token-weighted mean over its decode)
    hold_tokens: float  # tokens of KV cache a running call reserves (weighted by its decode length)


def pool_work(tasks: TaskPlan, pool: int) -> PoolWork:
    """Per-task work of `pool` (WEAK_POOL or STRONG_POOL) over the planned tasks, as the fleet replays them."""
    pf = pf_calls = pf_ctx = dec = dec_ctx = hold = 0.0
    for seq in tasks.steps:
        for s in flatten_steps(seq):
            if s[0] != "c":
                continue
            _, p, new, ctx, m = s[:5]
            if p != pool:
                continue
            if new > 0:
                pf += new
                pf_calls += 1
                pf_ctx += new * ctx
            if m > 0:
                dec += m
                dec_ctx += m * (ctx + new + m / 2.0)
                hold += m * (ctx + new + m)
    n = max(len(tasks.steps), 1)
    return PoolWork(pf / n, dec / n, pf_calls / n, pf_ctx / pf if pf else 0.0, dec_ctx / dec if dec else 0.0,
                    hold / dec if dec else (pf / pf_calls if pf_calls else 0.0))


@dataclass(frozen=True)
class PoolCapacity:
    """One replica's best sustained throughput on a workload, and what its best iteration looks like."""

    tasks_per_s: float
    batch: float  # decoding sequences per iteration at the best batch
    prefill_chunk: float  # prefill tokens per chunk riding along (the cheapest per token)
    iteration_s: float  # a decode-only iteration at that batch
    limit: str  # what caps the batch: max_num_seqs, memory (KV cache and state), or the token budget
    max_num_seqs: int
    max_batched_tokens: int | None

    def replicas_for(self, rate: float) -> int:
        """The fewest replicas whose analytic capacity exceeds `rate` (fewer are overloaded for certain)."""
        if self.tasks_per_s <= 0:
            return 0
        return max(1, math.floor(rate / self.tasks_per_s) + 1)

    def utilisation(self, rate: float, replicas: int) -> float:
        """Offered load over analytic capacity: >= 1 means the pool cannot keep up."""
        return rate / (replicas * self.tasks_per_s) if self.tasks_per_s > 0 else 0.0

    def describe(self) -> str:
        return (f"{self.tasks_per_s:.3g} tasks/s per replica: {self.batch:.0f} decodes per {self.iteration_s * 1e3:.1f} ms iteration, "
                f"prefill in chunks of {self.prefill_chunk:.0f} tokens (batch capped by {self.limit})")


def pool_capacity(dep: Deployment, limits: Scheduler, work: PoolWork, weight_mode: str = "union") -> PoolCapacity:
    """The best throughput of one replica of `dep` under `limits` on `work` (see the module docstring)."""
    cost = IterationCost(dep, weight_mode)
    free = dep.usable_bytes - dep.weight_bytes()
    per_seq = work.hold_tokens * dep.kv_bytes_per_token() + dep.state_bytes_per_sequence()
    mem_cap = math.floor(free / per_seq) if per_seq > 0 else math.inf
    P, D = work.prefill_tokens, work.decode_tokens
    budget = math.inf if limits.max_batched_tokens is None else float(limits.max_batched_tokens)
    if D <= 0 and P <= 0:
        return PoolCapacity(math.inf, 0.0, 0.0, 0.0, "no work", limits.max_num_seqs, limits.max_batched_tokens)
    rho = P / work.prefill_calls if work.prefill_calls else 1.0  # new tokens per prefilled call
    ctx_d, ctx_p = work.decode_context, work.prefill_context

    def t_iter(b: float, c: float) -> float:
        """One iteration of b decodes and c prefill tokens (in chunks of about one prompt each)."""
        s_p = c / rho if c > 0 else 0.0
        n = rho if c > 0 else 0.0
        pairs = b * (ctx_d + 1.0) + s_p * (n * ctx_p + n * (n + 1.0) / 2.0)
        kvt = b * (ctx_d + 1.0) + s_p * (ctx_p + n)
        st = b + s_p * (1.0 + (math.ceil(n / GDN_CHUNK) if n > 1 else 0.0))
        return cost.one(b + c, b + s_p, b, pairs, kvt, st, b + s_p)[0]

    full = budget if budget < math.inf else max(rho, 1.0) * 64  # a prefill-only iteration's tokens
    solo = t_iter(0.0, full) / full if P > 0 else 0.0  # seconds per prompt token in prefill-only iterations
    if D <= 0:  # prefill only
        return PoolCapacity(1.0 / (P * solo), 0.0, full, t_iter(0.0, full), "token budget", limits.max_num_seqs,
                            limits.max_batched_tokens)
    caps = {"max_num_seqs": float(limits.max_num_seqs), "memory for KV cache and state": float(mem_cap),
            "token budget": budget - 1.0}
    limit = min(caps, key=lambda k: caps[k])
    b_max = max(1.0, caps[limit])
    best: tuple[float, float, float, float] | None = None  # (seconds per task, b, chunk, t(b, 0))
    for b in sorted({*np.geomspace(1.0, b_max, 20).round().tolist(), b_max}):
        t0 = t_iter(b, 0.0)
        iters = D / b
        options = [(iters * t0 + P * solo, full)] if P > 0 else [(iters * t0, 0.0)]
        room = budget - b if budget < math.inf else full
        if P > 0 and room >= 1:  # the scheduler fills each iteration's token budget with waiting prompts
            least = b * P / D  # chunks this large fit the prompts into the decoding iterations
            if room >= least:
                options.append((iters * t0 + P * (t_iter(b, room) - t0) / room, room))
            else:  # the decodes carry chunks of `room`; the rest of the prompts run on their own
                options.append((iters * t_iter(b, room) + (P - room * iters) * solo, room))
        per_task, c = min(options)
        if best is None or per_task < best[0]:
            best = (per_task, b, c, t0)
    assert best is not None
    per_task, b, c, t0 = best
    return PoolCapacity(1.0 / per_task, b, c, t0, limit if b >= b_max else "throughput (larger batches are no faster)",
                        limits.max_num_seqs, limits.max_batched_tokens)
