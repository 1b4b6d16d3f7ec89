"""SpecAgent planned for every trajectory at once, in lockstep.

The per-episode planner (`strategies.SpecAgent.run`) is the readable reference; this is the
same protocol as numpy over a `UnitTable`. Each round advances every unfinished trajectory
by one user turn or one drafted chunk (draft, review, commit or repair), so a run costs
rounds × a few dozen array operations instead of a Python loop over every step. Within a
chunk nothing depends on a verdict until the chunk is drafted, so chunk boundaries, prefill
sizes and cache positions follow from prefix sums; the first rejection is a minimum over
the chunk. Verdicts come from the same per-unit uniforms (`acceptance.unit_uniforms`) the
reference planner reads, so the two give identical plans (tests/test_simulator_lockstep.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specagent.simulator.acceptance.model import AcceptanceModel, shifted_accept, task_normals, unit_uniforms
from specagent.simulator.protocol.phases import (
    STRONG_DECODE, STRONG_PREFILL, STRONG_VERDICT, STRONG_VERIFY, TOOL, USER, WEAK_DECODE, WEAK_PREFILL,
)
from specagent.simulator.protocol.plan import STAT_NAMES, CallPlan
from specagent.simulator.strategies.catalog import ServingPolicy, SpecAgent
from specagent.simulator.protocol.workload import UNIT_KINDS, UnitTable

_STAT = {name: i for i, name in enumerate(STAT_NAMES)}
_REPLY = UNIT_KINDS.index("reply")


def weak_tokens_array(n: np.ndarray, ratio: float | np.ndarray) -> np.ndarray:
    """`protocol.weak_tokens` over an array (round half to even, as Python's round); `ratio` a scalar or one per unit."""
    if np.ndim(ratio) == 0 and ratio == 1.0:
        return n
    return np.where(np.asarray(ratio) == 1.0, n, np.round(n * ratio)).astype(np.int64)


class _Rows:
    """Plan rows emitted out of order, sorted at the end by (trajectory, round, slot)."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def add(self, mask: np.ndarray | None, traj: np.ndarray, rnd: int, slot, phase: int, tokens=0, context=0, wait_s=0.0) -> None:
        """Rows for the trajectories `traj` (where `mask`); other arguments are scalars or aligned arrays."""
        cols = (slot, tokens, context, wait_s)
        if mask is not None:
            idx = np.flatnonzero(mask)
            if len(idx) == 0:
                return
            traj = traj[idx]
            cols = tuple(x[idx] if isinstance(x, np.ndarray) else x for x in cols)
        if len(traj):
            self.blocks.append((traj, rnd, phase, *cols))

    def build(self, stats: np.ndarray) -> CallPlan:
        sizes = np.array([len(b[0]) for b in self.blocks], dtype=np.int64)
        n = int(sizes.sum())

        def column(i: int, dtype) -> np.ndarray:
            if not self.blocks:
                return np.zeros(0, dtype=dtype)
            parts = [b[i] for b in self.blocks]
            if not any(isinstance(x, np.ndarray) for x in parts):
                return np.repeat(np.array(parts, dtype=dtype), sizes)
            return np.concatenate([x.astype(dtype, copy=False) if isinstance(x, np.ndarray) else np.full(len(b[0]), x, dtype=dtype)
                                   for x, b in zip(parts, self.blocks)])

        traj, rnd, phase, slot = (column(i, np.int64) for i in range(4))
        tokens, context, wait_s = (column(i, np.float64) for i in range(4, 7))
        order = _row_order(traj, rnd, slot, len(stats))
        return CallPlan(
            traj=np.repeat(np.arange(len(stats), dtype=np.int64), np.bincount(traj, minlength=len(stats))),  # = traj[order]
            phase=phase[order], tokens=tokens[order], context=context[order], wait_s=wait_s[order],
            group=np.arange(1, n + 1, dtype=np.int64), lane=np.zeros(n, dtype=np.int64), stats=stats, n_traj=len(stats),
        )


def _row_order(traj: np.ndarray, rnd: np.ndarray, slot: np.ndarray, n_traj: int) -> np.ndarray:
    """`np.lexsort((slot, rnd, traj))`: the same permutation (both sorts stable), as one stable sort of a combined key
    where it fits in 63 bits (several times faster on the million-row plans of a batch of acceptance models)."""
    if len(traj) == 0:
        return np.zeros(0, dtype=np.int64)
    n_rnd, n_slot = int(rnd.max()) + 1, int(slot.max()) + 1
    if min(int(rnd.min()), int(slot.min())) < 0 or n_traj * n_rnd * n_slot >= 2**62:
        return np.lexsort((slot, rnd, traj))
    return np.argsort((traj * n_rnd + rnd) * n_slot + slot, kind="stable")


def plan_specagent_replicas(table: UnitTable, strategy: SpecAgent, models: Sequence[AcceptanceModel], seed: int,
                            setting: ServingPolicy) -> CallPlan:
    """The workload planned once per acceptance model, all replicas in one lockstep run.

    Replica r's trajectory t is trajectory r * n + t of the plan (n = table.n_traj). Every
    replica reads the draws of the original trajectory (common random numbers), so replica
    r's rows equal those of a run of `models[r]` alone: what differs between
    replicas is the acceptance model alone, never the luck of the draw.
    """
    if not strategy.lockstep:
        raise ValueError(f"{type(strategy).__name__} plans through its own run(), not the lockstep planner")
    if not models:
        raise ValueError("at least one acceptance model is needed")
    return _Lockstep(table, strategy.k, strategy.review, strategy.verifier == "exact", list(models), seed,
                     setting.prefix_caching, setting.verifier_prompt == "cached", setting.verifier_system_tokens).run()


def tile_table(table: UnitTable, n: int) -> UnitTable:
    """`table` repeated n times (replica r's trajectories follow replica r - 1's)."""
    m = len(table)
    starts = (table.offsets[:-1][None, :] + m * np.arange(n)[:, None]).ravel()
    cols = {name: np.tile(getattr(table, name), n) for name in
            ("is_user", "kind", "held", "has_tool", "out_tokens", "ctx_tokens", "result_tokens", "tool_s", "user_s")}
    return UnitTable(offsets=np.concatenate([starts, [m * n]]).astype(table.offsets.dtype),
                     system_tokens=np.tile(table.system_tokens, n), task_ids=table.task_ids * n,
                     first_traj=table.first_traj, **cols)


class _Lockstep:
    """Per-trajectory state as arrays (committed context, each model's cached prefix, the next unit).

    With several acceptance models (`accs`), the table is tiled once per model and each
    replica's parameters are looked up per trajectory (`self.rep`); with one, rep is all 0.
    """

    def __init__(self, table: UnitTable, k: int, review: str, exact: bool, accs: list[AcceptanceModel], seed: int,
                 prefix_caching: bool, cached_verifier: bool, vsys: int):
        base_traj, base_pos = table.positions()
        draws = unit_uniforms(seed, base_traj + table.first_traj, base_pos)
        n_rep, n_base = len(accs), table.n_traj
        if n_rep > 1:
            table, draws = tile_table(table, n_rep), np.tile(draws, (n_rep, 1))
        self.t = table
        self.k, self.review = k, review
        self.prefix_caching, self.cached_verifier, self.vsys = prefix_caching, cached_verifier, vsys
        n_traj, m = table.n_traj, len(table)
        traj_of, pos_of = table.positions()
        self.draws = draws
        self.rep = np.repeat(np.arange(n_rep), n_base)  # replica (acceptance model) of each trajectory
        self.correlation = np.array([a.correlation for a in accs])
        self.accept_verdict = np.array([a.accept_verdict_tokens for a in accs], dtype=np.int64)
        self.verdict = np.array([a.verdict_tokens for a in accs], dtype=np.int64)
        self.p_valid = np.array([a.p_valid_replacement for a in accs])
        # reasoning (acceptance.py's rule, per replica): none without thinking; a fixed count; else the workload's record
        self.thinking = np.array([a.thinking for a in accs])
        self.fixed_verify = np.array([-1 if a.verify_reasoning_tokens is None else a.verify_reasoning_tokens for a in accs])
        self.fixed_repair = np.array([-1 if a.repair_reasoning_tokens is None else a.repair_reasoning_tokens for a in accs])
        is_user, held, kind = table.is_user, table.held, table.kind
        ratio = np.array([a.weak_token_ratio for a in accs])
        unit_ratio = ratio[0] if n_rep == 1 else ratio[self.rep[traj_of]]
        self.wout = weak_tokens_array(table.out_tokens, unit_ratio)
        wctx = weak_tokens_array(table.ctx_tokens, unit_ratio)
        self.wkeep = np.minimum(self.wout, wctx)  # what of a Weak call stays in its cache (reasoning dropped)
        # context a drafted unit adds while drafting: its message, plus the results of a read it ran
        add = np.where(is_user, 0, wctx + np.where(table.has_tool & ~held, table.result_tokens, 0))
        self.cs_add = np.concatenate([[0], np.cumsum(add)])
        self.cs_wout = np.concatenate([[0], np.cumsum(np.where(is_user, 0, self.wout))])
        # a chunk starting at unit j ends (exclusive) at the first user turn, after the first held
        # action or reply, or at the trajectory's end, whichever comes first
        self.uend = table.offsets[1:]
        idx = np.arange(m)
        stop = np.where(is_user, idx, np.where(held | (kind == _REPLY), idx + 1, np.iinfo(np.int64).max))
        last_units = self.uend[self.uend > table.offsets[:-1]] - 1
        stop[last_units] = np.minimum(stop[last_units], last_units + 1)
        self.stop_end = np.minimum.accumulate(stop[::-1])[::-1]
        probs = [a.exact if exact else a.accept for a in accs]
        self.p_kind = np.array([[p.get(name, p.get("write", 0.0)) for name in UNIT_KINDS] for p in probs])
        # a per-task effect (task_sd > 0, semantic verdicts only: AcceptanceModel.for_task): each trajectory's own
        # table, from the per-trajectory draw the per-episode planner reads too (replicas share the base one's)
        sd = np.array([0.0 if exact else a.task_sd for a in accs])
        self.p_traj = None
        if (sd > 0).any():
            z = np.tile(task_normals(seed, np.arange(n_base) + table.first_traj), n_rep)
            self.p_traj = shifted_accept(self.p_kind[self.rep], (sd[self.rep] * z)[:, None])
        self.max_len = int(min(k, np.diff(table.offsets).max(initial=0)))  # the longest chunk possible
        self.decay = np.array([[a.position_decay**p for p in range(self.max_len + 1)] for a in accs])

        self.i = table.offsets[:-1].astype(np.int64).copy()
        self.hist = table.system_tokens.astype(np.int64).copy()
        self.seen_w = np.zeros(n_traj, dtype=np.int64)
        self.seen_s = np.zeros(n_traj, dtype=np.int64)
        self.after_rej = np.zeros(n_traj, dtype=bool)
        self.stats = np.zeros((n_traj, len(STAT_NAMES)), dtype=np.int64)
        self.stats[:, _STAT["reference_actions"]] = np.bincount(traj_of[~is_user], minlength=n_traj)
        self.rows = _Rows()
        # slots order a trajectory's rows within a round: drafting takes 3 per position, review after
        self.s_verify = 3 * self.max_len
        self.s_verdict, self.s_tool_acc, self.s_prefill, self.s_decode, self.s_tool_rep = (self.s_verify + d for d in range(1, 6))

    def _reasoning(self, fixed: np.ndarray, r: np.ndarray, out: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """`AcceptanceModel.verify_reasoning`/`repair_reasoning` for replicas r (one per step)."""
        f = fixed[r]
        recorded = AcceptanceModel.recorded_reasoning(out, ctx)
        return np.where(self.thinking[r], np.where(f >= 0, f, recorded), 0)

    def _verify_reasoning(self, r: np.ndarray, out: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        return self._reasoning(self.fixed_verify, r, out, ctx)

    def _repair_decode(self, r: np.ndarray, out: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """`AcceptanceModel.repair_decode`: the step's visible message plus the repair's reasoning."""
        return out - AcceptanceModel.recorded_reasoning(out, ctx) + self._reasoning(self.fixed_repair, r, out, ctx)

    def run(self) -> CallPlan:
        active = np.flatnonzero(self.i < self.uend)
        rnd = 0
        while len(active):
            iu = self.i[active]
            user = self.t.is_user[iu]
            self._user_turns(rnd, active[user], iu[user])
            if not user.all():
                self._chunks(rnd, active[~user], iu[~user])
            active = active[self.i[active] < self.uend[active]]
            rnd += 1
        self.stats[:, _STAT["committed_context_tokens"]] = self.hist
        return self.rows.build(self.stats)

    def _user_turns(self, rnd: int, t: np.ndarray, j: np.ndarray) -> None:
        """The user answers after a think time; the message joins the committed context."""
        us = self.t.user_s[j]
        self.rows.add(us > 0, t, rnd, 0, USER, wait_s=us)
        self.hist[t] += self.t.ctx_tokens[j]
        self.i[t] += 1

    def _chunks(self, rnd: int, t: np.ndarray, s: np.ndarray) -> None:
        """Draft a chunk per trajectory: each Weak call prefills what it has not seen, reads run for real."""
        tb, rows, cs_add, stats = self.t, self.rows, self.cs_add, self.stats
        e = np.minimum(s + self.k, self.stop_end[s])
        length = e - s
        starts = np.concatenate([[0], np.cumsum(length)[:-1]])
        tp = np.repeat(t, length)  # one entry per drafted position
        sp = np.repeat(s, length)
        p = np.arange(len(tp)) - np.repeat(starts, length)
        j = sp + p
        total = self.hist[tp] + (cs_add[j] - cs_add[sp])
        first = p == 0
        seen_p = np.empty_like(total)
        seen_p[first] = self.seen_w[t]
        later = np.flatnonzero(~first)
        seen_p[later] = total[later - 1] + self.wkeep[j[later] - 1]
        if self.prefix_caching:
            rows.add(total > seen_p, tp, rnd, 3 * p, WEAK_PREFILL, total - seen_p, seen_p)
        else:
            rows.add(total > 0, tp, rnd, 3 * p, WEAK_PREFILL, total, 0)
        wout = self.wout[j]
        rows.add(wout > 0, tp, rnd, 3 * p + 1, WEAK_DECODE, wout, total)
        tool_s = tb.tool_s[j]
        rows.add(tb.has_tool[j] & ~tb.held[j] & (tool_s > 0), tp, rnd, 3 * p + 2, TOOL, wait_s=tool_s)
        last = e - 1
        pend = cs_add[e] - cs_add[s]
        self.seen_w[t] = self.hist[t] + (cs_add[last] - cs_add[s]) + self.wkeep[last]
        stats[t, _STAT["weak_calls"]] += length
        if self.review == "every_chunk":
            reviewed = np.ones(len(t), dtype=bool)
        elif self.review == "hold_replies":
            reviewed = tb.held[last] | (tb.kind[last] == _REPLY)
        else:
            reviewed = tb.held[last]
        # chunks of reads and unreviewed replies commit as drafted
        nr = ~reviewed
        self.hist[t[nr]] += pend[nr]
        stats[t[nr], _STAT["committed_weak"]] += length[nr]
        self.i[t[nr]] = e[nr]
        if reviewed.any():
            sel = np.repeat(reviewed, length)
            self._review(rnd, t[reviewed], s[reviewed], e[reviewed], length[reviewed], pend[reviewed], tp[sel], p[sel], j[sel])

    def _review(self, rnd: int, t, s, e, length, pend, jt, jp, jj) -> None:
        """One verification prefill over all the Strong model has not read, then commit or repair one step."""
        tb, rows, stats, hist, seen_s, rep = self.t, self.rows, self.stats, self.hist, self.seen_s, self.rep
        ctx, out, res, has_tool, tool_s = tb.ctx_tokens, tb.out_tokens, tb.result_tokens, tb.has_tool, tb.tool_s
        stats[t, _STAT["reviews"]] += 1
        stats[t, _STAT["strong_calls"]] += 1
        total = hist[t] + pend
        if self.cached_verifier:
            if self.prefix_caching:
                rows.add(total > seen_s[t], t, rnd, self.s_verify, STRONG_VERIFY, total - seen_s[t], seen_s[t])
            else:
                rows.add(total > 0, t, rnd, self.s_verify, STRONG_VERIFY, total, 0)
            verify_ctx = total
            seen_s[t] = total  # the segment is now in Strong's cache (rolled back below if rejected)
        else:
            verify_ctx = self.vsys + total
            rows.add(None, t, rnd, self.s_verify, STRONG_VERIFY, verify_ctx, 0)
        # judge positions up to the first rejection (only the first position can follow one)
        rj = rep[jt]
        p_kind = self.p_kind[rj, tb.kind[jj]] if self.p_traj is None else self.p_traj[jt, tb.kind[jj]]
        prob = p_kind * self.decay[rj, jp]
        prob = np.where((jp == 0) & self.after_rej[jt], prob * (1.0 - self.correlation[rj]), prob)
        never = np.iinfo(np.int64).max
        starts = np.concatenate([[0], np.cumsum(length)[:-1]])
        rej = np.minimum.reduceat(np.where(self.draws[jj, 0] >= prob, jp, never), starts)
        ok = rej == never
        self.after_rej[t] = ~ok
        # --- accepted whole: a short verdict, then the held action may run
        at, last = t[ok], e[ok] - 1
        avt = self.accept_verdict[rep[at]] + self._verify_reasoning(rep[at], out[last], ctx[last])
        rows.add(avt > 0, at, rnd, self.s_verdict, STRONG_VERDICT, avt, verify_ctx[ok])
        runs = tb.held[last] & has_tool[last]
        rows.add(runs & (tool_s[last] > 0), at, rnd, self.s_tool_acc, TOOL, wait_s=tool_s[last])
        hist[at] += pend[ok] + np.where(runs, res[last], 0)
        stats[at, _STAT["committed_weak"]] += length[ok]
        self.i[at] = e[ok]
        if ok.all():
            return
        # --- rejected: keep the valid prefix; the verdict names the first bad step; Strong repairs it
        x = ~ok
        xt, r = t[x], rej[x]
        b = s[x] + r
        stats[xt, _STAT["rejections"]] += 1
        stats[xt, _STAT["wasted_weak_tokens"]] += self.cs_wout[e[x]] - self.cs_wout[b]
        stats[xt, _STAT["committed_weak"]] += r
        vt = self.verdict[rep[xt]] + ctx[b] + self._verify_reasoning(rep[xt], out[b], ctx[b])
        rows.add(vt > 0, xt, rnd, self.s_verdict, STRONG_VERDICT, vt, verify_ctx[x])
        h = hist[xt] + (self.cs_add[b] - self.cs_add[s[x]])
        self.seen_w[xt] = np.minimum(self.seen_w[xt], h)
        ss = np.minimum(seen_s[xt], h)
        repl = (self.draws[b, 1] < self.p_valid[rep[xt]]) | (out[b] == 0)
        fix = ~repl
        stats[xt, _STAT["replacements"]] += repl
        stats[xt, _STAT["repairs"]] += fix
        stats[xt, _STAT["strong_calls"]] += fix
        if self.cached_verifier and self.prefix_caching:
            # the replacement call was decoded inside the verdict; a short prefill appends it to the cache
            appended = repl & (ctx[b] > 0)
            rows.add(appended, xt, rnd, self.s_prefill, STRONG_PREFILL, ctx[b], h)
            ss = np.where(appended, h + ctx[b], ss)
        if self.prefix_caching:
            rows.add(fix & (h > ss), xt, rnd, self.s_prefill, STRONG_PREFILL, h - ss, ss)
        else:
            rows.add(fix & (h > 0), xt, rnd, self.s_prefill, STRONG_PREFILL, h, 0)
        rdec = self._repair_decode(rep[xt], out[b], ctx[b])
        rows.add(fix & (rdec > 0), xt, rnd, self.s_decode, STRONG_DECODE, rdec, h)
        seen_s[xt] = np.where(fix, h + np.minimum(rdec, ctx[b]), ss)
        # the repaired step commits without a second review
        rows.add(has_tool[b] & (tool_s[b] > 0), xt, rnd, self.s_tool_rep, TOOL, wait_s=tool_s[b])
        hist[xt] = h + ctx[b] + np.where(has_tool[b], res[b], 0)
        stats[xt, _STAT["committed_strong"]] += 1
        self.i[xt] = b + 1
