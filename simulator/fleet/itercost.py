"""The pass time of one replica iteration as plain float arithmetic on a pass's aggregates.

The fleet prices every iteration a replica runs (10^5 or more per simulation), and
`costmodel.roofline.estimate` carries numpy and dict overhead per call that would
dominate. `IterationCost` reads the affine coefficients off `estimate` once per
deployment, so a pass costs a few float operations and still follows the roofline;
tests check it against `estimate` on random ragged batches to 1e-9.

A run of k pure-decode iterations over B sequences is affine in the iteration index
(every sequence's context grows by one per iteration), so its time, FLOPs and bytes sum
in closed form; `DecodeSegment` does that and answers "how many iterations have finished
by time t", which the fleet needs to let a new arrival join at the next iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import GDN_CHUNK, Passes
from specagent.costmodel.latency import LAUNCH_TERM, eager_launch_one, exposed_launch_one
from specagent.costmodel.roofline import WEIGHT_MODES, coefficients, compute_efficiency, estimate


@dataclass(frozen=True)
class IterationTotals:
    """Time and work of one segment (one or more iterations) on one replica."""

    time_s: float
    flops: float
    bytes_read: float
    bytes_written: float


def _sum_affine(a: float, b: float, lo: int, hi: int) -> float:
    """sum over integer j in [lo, hi) of a + b*j."""
    n = hi - lo
    if n <= 0:
        return 0.0
    return n * a + b * (hi * (hi - 1) / 2 - lo * (lo - 1) / 2)


def max_affine_sum(a1: float, b1: float, a2: float, b2: float, m: int) -> float:
    """sum over j in [0, m) of max(a1 + b1*j, a2 + b2*j), exactly, by splitting at the crossover."""
    if m <= 0:
        return 0.0
    db = b1 - b2
    if db == 0:
        return _sum_affine(max(a1, a2), b1, 0, m)
    j_star = -(a1 - a2) / db  # a1 + b1 j >= a2 + b2 j  <=>  (a1 - a2) + db j >= 0
    if db > 0:  # the first function wins from j >= j_star
        split = m if j_star >= m else (0 if j_star <= 0 else math.ceil(j_star))
        return _sum_affine(a2, b2, 0, split) + _sum_affine(a1, b1, split, m)
    split = m if j_star >= m else (0 if j_star < 0 else math.floor(j_star) + 1)  # the first function wins for j <= j_star
    return _sum_affine(a1, b1, 0, split) + _sum_affine(a2, b2, split, m)


def max_affine_sum3(a1: float, b1: float, a2: float, b2: float, a3: float, b3: float, m: int) -> float:
    """sum over j in [0, m) of max(a1 + b1*j, a2 + b2*j, a3 + b3*j), exactly.

    The upper envelope of three lines changes its winner only where two of them cross, so
    the run is cut at ceil(x) of every crossing x inside (0, m): between two consecutive
    cuts lo < hi no crossing lies in (lo, hi - 1], so one line is the maximum on every
    integer of [lo, hi) and it is the one that wins at their midpoint; each piece sums in
    closed form (`_sum_affine`). A decode segment's launch branch (a3, b3 = 0) is constant.
    """
    if m <= 0:
        return 0.0
    aa = (a1, a2, a3)
    bb = (b1, b2, b3)
    cuts = [0, m]
    for p in range(3):
        for q in range(p + 1, 3):
            db = bb[p] - bb[q]
            if db != 0.0:
                x = -(aa[p] - aa[q]) / db
                if 0.0 < x < m:
                    cuts.append(math.ceil(x))
    cuts.sort()
    total = 0.0
    for i in range(len(cuts) - 1):
        lo = cuts[i]
        hi = cuts[i + 1]
        if hi > lo:
            mid = 0.5 * (lo + hi - 1)
            w = 0
            for q in (1, 2):
                if aa[q] + bb[q] * mid > aa[w] + bb[w] * mid:
                    w = q
            total += _sum_affine(aa[w], bb[w], lo, hi)
    return total


FEATURES = ("tokens", "seqs", "decode_tokens", "attn_pairs", "kv_read_tokens", "state_touches", "logits")
_PROBE_STEP = 1024.0  # a power of two, so probe differences divide exactly


class IterationCost:
    """The pass time of `estimate` as affine functions of a pass's aggregates, read off `estimate` itself.

    `estimate` is affine in the `Passes` aggregates times factors that depend only on the
    token total and whether the pass is pure decode (every sequence adds one token, i.e.
    decode tokens == tokens; the same test as `estimate`) — the rule `costmodel.latency`
    states for every term: the distinct MoE experts read (union mode; it scales expert
    bytes and grouped-GEMM padding), the GEMM and attention efficiencies (flat, or a
    calibrated curve) and whether kernel launches are exposed (no CUDA graph). Probing
    `estimate` at a base point and one step along each aggregate recovers the affine parts
    exactly (the nonlinear factors are divided out), so this class follows any change to
    the pass-time function that keeps the rule; tests check it against `estimate` on random
    ragged batches.
    """

    def __init__(self, dep: Deployment, weight_mode: str = "union"):
        if weight_mode not in WEIGHT_MODES:
            raise ValueError(f"weight_mode must be one of {WEIGHT_MODES}, got '{weight_mode}'")
        self.dep = dep
        self.weight_mode = weight_mode
        moe = dep.model.moe if (dep.model.is_moe and dep.model.num_moe_layers) else None
        self.is_moe = moe is not None
        self.num_experts = moe.num_experts if moe else 0
        self.top_k = moe.top_k if moe else 0
        self._log_miss = math.log1p(-self.top_k / self.num_experts) if (moe and self.top_k < self.num_experts) else None
        hw = dep.hardware
        coef = coefficients(dep)
        self.terms = terms = coef.terms
        self._curve = bool(hw.compute_efficiency_curve)
        self._decode_curve = bool(hw.decode_efficiency_curve)
        self._eff_const = terms.gemm_mfu
        self._flat_eff = not self._curve and not self._decode_curve  # efficiency() is _eff_const for every pass
        self._attn_eff = terms.attention_mfu  # None: attention at the GEMM efficiency
        self._moe_eff = terms.moe_mfu  # None: grouped expert GEMMs at the GEMM efficiency
        self._eff_cache: dict[float, float] = {}
        self._decode_eff_cache: dict[float, float] = {}
        self._extra_cache: dict[float, tuple[float, float]] = {}
        self._decode_cache: dict[int, tuple] = {}
        self.launch_s = terms.launch_s  # eager launches overlap the GPU-busy time (costmodel.latency.exposed_launch)
        self.mem_fixed = terms.memory_fixed_s

        nf = len(FEATURES)
        x = np.ones((nf + 1, nf))
        for i in range(nf):
            x[i + 1, i] += _PROBE_STEP
        cost = estimate(dep, Passes(**{f: x[:, i].copy() for i, f in enumerate(FEATURES)}), weight_mode, coef)
        tokens = x[:, 0]
        pure = [bool(d == t) for t, d in zip(tokens, x[:, FEATURES.index("decode_tokens")])]
        touched = np.array([self.touched(t) for t in tokens])
        expert_read = cost.bytes_read.get("expert_weights", np.zeros(nf + 1))
        self.expert_bytes = float(expert_read[0] / touched[0]) if self.is_moe and touched[0] > 0 else 0.0
        eff = np.array([self.efficiency(float(t), p) for t, p in zip(tokens, pure)])
        eff_a = np.array([self.attention_efficiency(float(t), p) for t, p in zip(tokens, pure)])
        eff_m = np.array([self.moe_efficiency(float(t), p) for t, p in zip(tokens, pure)])
        read_lin = cost.total_bytes_read - self.expert_bytes * touched
        written = cost.total_bytes_written
        total_bytes = cost.total_bytes_read + written
        self.inv_bw = float((cost.memory_s[0] - self.mem_fixed) / total_bytes[0])
        pad = cost.compute_parts["expert_padding"]
        self.pad_work = float(pad[0] * eff_m[0] / touched[0]) if self.is_moe and touched[0] > 0 else 0.0  # per touched expert
        launch = cost.fixed[LAUNCH_TERM]

        def affine(q: np.ndarray) -> tuple[float, ...]:
            slopes = (q[1:] - q[0]) / _PROBE_STEP
            return (float(q[0] - slopes.sum()), *map(float, slopes))

        self.flops = affine(cost.total_flops)
        self.read = affine(read_lin)
        self.written = affine(written)
        # Work at efficiency 1 by efficiency: GEMMs; routed experts' grouped GEMMs and attention when the
        # engine gives them their own efficiency, else folded into the GEMM work (so that, with no engine
        # terms, this is the pre-engine arithmetic bit for bit: the fleet's pinned outputs depend on it).
        parts = cost.compute_parts
        fold = parts["gemm"] + (parts["experts"] if self._moe_eff is None else 0.0) + (parts["attention"] if self._attn_eff is None else 0.0)
        if self._moe_eff is None and self._attn_eff is None:
            fold = cost.compute_s - parts["expert_padding"]
        zero = np.zeros(nf + 1)
        self.compute_work = affine(fold * eff)
        self.attention_work = affine(zero if self._attn_eff is None else parts["attention"] * eff_a)
        self.expert_work = affine(zero if self._moe_eff is None else parts["experts"] * eff_m)
        self.fixed = affine(cost.comm_s + cost.overhead_s - launch)  # all fixed costs but the launch term
        self.busy = affine(cost.comm_s + cost.gpu_fixed_s)  # the GPU-side ones: collectives and per-layer time

    # --- the nonlinear factors: functions of (token total, pure decode) ---------------------
    def touched(self, tokens: float) -> float:
        """Distinct experts per MoE layer read by a pass of `tokens` tokens (costmodel.moe)."""
        if not self.is_moe:
            return 0.0
        if self.weight_mode == "active":
            return float(self.top_k)
        if self._log_miss is None:
            return float(self.num_experts)
        return self.num_experts * (1.0 - math.exp(tokens * self._log_miss))

    def efficiency(self, tokens: float, pure_decode: bool = False) -> float:
        """GEMM efficiency of a pass of `tokens` tokens; `pure_decode`: every sequence adds one token."""
        if pure_decode and self._decode_curve:
            e = self._decode_eff_cache.get(tokens)
            if e is None:
                t = np.array([tokens])
                e = self._decode_eff_cache[tokens] = float(compute_efficiency(self.dep, t, t, self.terms)[0])
            return e
        if not self._curve:
            return self._eff_const
        e = self._eff_cache.get(tokens)
        if e is None:
            e = float(compute_efficiency(self.dep, np.array([tokens]), None, self.terms)[0])
            self._eff_cache[tokens] = e
        return e

    def attention_efficiency(self, tokens: float, pure_decode: bool = False) -> float:
        """Attention efficiency: the engine's attention-kernel MFU, else the GEMM efficiency (`roofline.attention_efficiency`)."""
        a = self._attn_eff
        return self.efficiency(tokens, pure_decode) if a is None else a

    def moe_efficiency(self, tokens: float, pure_decode: bool = False) -> float:
        """Grouped expert GEMM efficiency: the engine's `moe_mfu` up to its `moe_tflops` ceiling, else the GEMM efficiency."""
        m = self._moe_eff
        return self.efficiency(tokens, pure_decode) if m is None else m

    # --- one pass -----------------------------------------------------------------------
    def one(self, t: float, seqs: float, dec: float, pairs: float, kv_tokens: float, state: float, logits: float) -> tuple[float, float, float, float]:
        """(time_s, flops, bytes_read, bytes_written) of one pass given its aggregates."""
        extra = self._extra_cache.get(t)
        if extra is None:
            tt = self.touched(t)
            extra = self._extra_cache[t] = (self.expert_bytes * tt, self.pad_work * tt)
        read = _dot(self.read, t, seqs, dec, pairs, kv_tokens, state, logits) + extra[0]
        written = _dot(self.written, t, seqs, dec, pairs, kv_tokens, state, logits)
        pure = dec == t
        eff = self._eff_const if self._flat_eff else self.efficiency(t, pure)
        attn = _dot(self.attention_work, t, seqs, dec, pairs, kv_tokens, state, logits)
        experts = _dot(self.expert_work, t, seqs, dec, pairs, kv_tokens, state, logits) + extra[1]
        compute_s = (_dot(self.compute_work, t, seqs, dec, pairs, kv_tokens, state, logits) / eff
                     + experts / (eff if self._moe_eff is None else self._moe_eff)
                     + attn / (eff if self._attn_eff is None else self._attn_eff))
        memory_s = (read + written) * self.inv_bw + self.mem_fixed
        roof = compute_s if compute_s >= memory_s else memory_s
        fixed = _dot(self.fixed, t, seqs, dec, pairs, kv_tokens, state, logits)
        launch = self.launch_s * eager_launch_one(self.terms, t, pure)
        if launch > 0.0:  # kernels launched one by one: only the launch time beyond the GPU-busy time shows
            fixed += exposed_launch_one(launch, roof + _dot(self.busy, t, seqs, dec, pairs, kv_tokens, state, logits))
        flops = _dot(self.flops, t, seqs, dec, pairs, kv_tokens, state, logits)
        return roof + fixed, flops, read, written

    def decode_segment(self, batch: int, ctx_sum: float) -> "DecodeSegment":
        """k iterations of `batch` sequences decoding one token each; contexts sum to ctx_sum at the first.

        Iteration j has tokens = seqs = decode tokens = state touches = logits = batch and
        attended pairs = KV tokens read = ctx_sum + batch + batch*j. Everything that depends
        on the batch size alone is cached per size.
        """
        c = self._decode_cache.get(batch)
        if c is None:
            c = self._decode_cache[batch] = self._decode_constants(batch)
        (eff, eff_a, extra, moe0, cw, cw4, cw5, cw6, cw7, aw, aw4, aw5, aw6, aw7, rd, rd4, rd5, rd6, rd7, wr, wr4, wr5, wr6, wr7,
         fx, fx4, fx5, fx6, fx7, bz, bz4, bz5, bz6, bz7, fl, fl4, fl5, fl6, fl7, c1, m1, fixed1, busy1, f1, dread, dwritten, launch) = c
        p0 = ctx_sum + float(batch)
        read0 = rd + rd4 * p0 + rd5 * p0 + rd6 + rd7 + extra
        written0 = wr + wr4 * p0 + wr5 * p0 + wr6 + wr7
        c0 = (cw + cw4 * p0 + cw5 * p0 + cw6 + cw7) / eff + moe0 + (aw + aw4 * p0 + aw5 * p0 + aw6 + aw7) / eff_a
        return DecodeSegment(
            c0, c1, (read0 + written0) * self.inv_bw + self.mem_fixed, m1,
            fx + fx4 * p0 + fx5 * p0 + fx6 + fx7, fixed1, fl + fl4 * p0 + fl5 * p0 + fl6 + fl7, f1, read0, dread, written0, dwritten,
            bz + bz4 * p0 + bz5 * p0 + bz6 + bz7, busy1, launch,
        )

    def decode_run(self, batch: int, ctx_sum: float, k: int) -> tuple["DecodeSegment", float]:
        """`decode_segment(batch, ctx_sum)` and the time of its first k iterations (the fleet starts ~10^5 of these)."""
        seg = self.decode_segment(batch, ctx_sum)
        return seg, seg.elapsed(k)

    def _decode_constants(self, batch: int) -> tuple:
        b = float(batch)
        eff = self.efficiency(b, True)
        eff_a = self.attention_efficiency(b, True)
        eff_m = self.moe_efficiency(b, True)
        tt = self.touched(b)
        ew = self.expert_work
        moe0 = (ew[0] + ew[1] * b + ew[2] * b + ew[3] * b + ew[6] * b + ew[7] * b + self.pad_work * tt) / eff_m  # experts' GEMMs do not grow with context

        def parts(a: tuple[float, ...]) -> tuple[float, ...]:
            # a[0] + a[1]*t + a[2]*s + a[3]*d, then the p and k coefficients, then the st and lg terms, as _dot adds them
            return (a[0] + a[1] * b + a[2] * b + a[3] * b, a[4], a[5], a[6] * b, a[7] * b)

        dread = (self.read[4] + self.read[5]) * b
        dwritten = (self.written[4] + self.written[5]) * b
        c1 = ((self.compute_work[4] + self.compute_work[5]) * b / eff + (ew[4] + ew[5]) * b / eff_m
              + (self.attention_work[4] + self.attention_work[5]) * b / eff_a)
        return (eff, eff_a, self.expert_bytes * tt, moe0, *parts(self.compute_work), *parts(self.attention_work),
                *parts(self.read), *parts(self.written), *parts(self.fixed), *parts(self.busy), *parts(self.flops),
                c1, (dread + dwritten) * self.inv_bw, (self.fixed[4] + self.fixed[5]) * b, (self.busy[4] + self.busy[5]) * b,
                (self.flops[4] + self.flops[5]) * b, dread, dwritten, self.launch_s * eager_launch_one(self.terms, b, True))


def _dot(a: tuple[float, ...], t: float, s: float, d: float, p: float, k: float, st: float, lg: float) -> float:
    """One linear cost (coefficients `a` over the pass aggregates), summed in a fixed order."""
    return a[0] + a[1] * t + a[2] * s + a[3] * d + a[4] * p + a[5] * k + a[6] * st + a[7] * lg


class DecodeSegment:
    """Per-iteration compute/memory time and work as affine functions of the iteration index j.

    Iteration j takes max(c0 + c1 j, m0 + m1 j) + fixed + fixed1 j, plus, when its kernels
    are launched one by one (``launch`` > 0: no captured CUDA graph of this batch), the
    launch time beyond its GPU-busy time (roofline + busy + busy1 j; `exposed_launch`). The
    launch branch is the same for every iteration of a segment (one batch, pure decode).
    A plain slotted class, not a dataclass: the fleet builds one per decode segment.
    """

    __slots__ = ("c0", "c1", "m0", "m1", "fixed", "fixed1", "f0", "f1", "r0", "r1", "w0", "w1", "busy", "busy1", "launch")

    def __init__(self, c0: float, c1: float, m0: float, m1: float, fixed: float, fixed1: float, f0: float, f1: float, r0: float,
                 r1: float, w0: float, w1: float, busy: float = 0.0, busy1: float = 0.0, launch: float = 0.0):
        self.c0, self.c1, self.m0, self.m1, self.fixed, self.fixed1 = c0, c1, m0, m1, fixed, fixed1
        self.f0, self.f1, self.r0, self.r1, self.w0, self.w1 = f0, f1, r0, r1, w0, w1
        self.busy, self.busy1, self.launch = busy, busy1, launch

    def elapsed(self, k: int) -> float:
        """Time taken by the first k iterations.

        Without a launch term, `max_affine_sum(c0, c1, m0, m1, k) + _sum_affine(fixed, fixed1, 0, k)`,
        inlined (this runs ~10^5 times per simulation) with the very same float operations in
        the same order. With one, the three-branch sum max(roofline + busy, launch) of
        `max_affine_sum3` plus the CPU-side rest (fixed − busy).
        """
        if k <= 0:
            return 0.0 + 0.0
        if self.launch > 0.0:
            bz, bz1 = self.busy, self.busy1
            return (max_affine_sum3(self.c0 + bz, self.c1 + bz1, self.m0 + bz, self.m1 + bz1, self.launch, 0.0, k)
                    + _sum_affine(self.fixed - bz, self.fixed1 - bz1, 0, k))
        a1, b1, a2, b2 = self.c0, self.c1, self.m0, self.m1
        tri = k * (k - 1) / 2  # _sum_affine's hi*(hi-1)/2 - lo*(lo-1)/2 with lo = 0 (subtracting 0.0 changes no bit)
        fixed = k * self.fixed + self.fixed1 * tri
        db = b1 - b2
        if db == 0:
            return (k * (a1 if a1 >= a2 else a2) + b1 * tri) + fixed
        j_star = -(a1 - a2) / db
        if db > 0:
            split = k if j_star >= k else (0 if j_star <= 0 else math.ceil(j_star))
            lo_a, lo_b, hi_a, hi_b = a2, b2, a1, b1
        else:
            split = k if j_star >= k else (0 if j_star < 0 else math.floor(j_star) + 1)
            lo_a, lo_b, hi_a, hi_b = a1, b1, a2, b2
        # _sum_affine(lo_a, lo_b, 0, split) + _sum_affine(hi_a, hi_b, split, k)
        first = split * lo_a + lo_b * (split * (split - 1) / 2) if split > 0 else 0.0
        second = (k - split) * hi_a + hi_b * (tri - split * (split - 1) / 2) if k - split > 0 else 0.0
        return (first + second) + fixed

    def iterations_done_by(self, dt: float, k: int) -> int:
        """Smallest j in [1, k] whose iteration ends at or after dt (the boundary a newcomer joins at); k if none."""
        return self.boundary(dt, k)[0]

    def boundary(self, dt: float, k: int) -> tuple[int, float]:
        """(j, elapsed(j)) for j = `iterations_done_by(dt, k)`, with few `elapsed` evaluations.

        `elapsed` is strictly increasing in j (every iteration takes time), so the answer is
        the unique j with elapsed(j) >= dt > elapsed(j - 1) (or k). A first guess solves the
        quadratic of the leading roofline branch; galloping away from it brackets the answer
        and bisection finishes it, so the result is exactly what plain bisection over [1, k]
        gives, in ~2 evaluations instead of log2(k) (the fleet asks this once per arrival
        that cuts a decode run).
        """
        elapsed = self.elapsed
        if k <= 1:
            return 1, elapsed(1)
        if self.c0 >= self.m0:
            a, b = self.c0 + self.fixed, self.c1 + self.fixed1
        else:
            a, b = self.m0 + self.fixed, self.m1 + self.fixed1
        if self.launch > a - self.fixed + self.busy:  # launch-bound at the start: guess from that branch
            a, b = self.launch + self.fixed - self.busy, self.fixed1 - self.busy1
        # elapsed(j) ~ a*j + b*j*(j-1)/2 = dt
        if a > 0.0 and dt > 0.0:
            h = a - 0.5 * b
            disc = h * h + 2.0 * b * dt
            x = (-h + math.sqrt(disc)) / b if b > 1e-300 and disc >= 0.0 else dt / a
            g = math.ceil(x) if x < k else k
            if g < 1:
                g = 1
        else:
            g = 1
        eg = elapsed(g)
        if eg >= dt:  # answer in [1, g]: gallop down for a j with elapsed(j) < dt
            hi, e_hi, step, lo = g, eg, 1, g - 1
            while lo >= 1:
                e = elapsed(lo)
                if e < dt:
                    break
                hi, e_hi = lo, e
                step *= 2
                lo = hi - step
            if lo < 0:
                lo = 0  # elapsed(0) = 0 < dt would hold for dt > 0; j=1 is the floor either way
        else:  # answer in (g, k]: gallop up for a j with elapsed(j) >= dt
            lo, step, hi = g, 1, g + 1
            e_hi = math.nan
            while hi < k:
                e = elapsed(hi)
                if e >= dt:
                    e_hi = e
                    break
                lo = hi
                step *= 2
                hi = lo + step
            if hi >= k:
                hi, e_hi = k, math.nan  # elapsed(k) unknown; bisection treats k as the fallback answer
        # invariant: elapsed(lo) < dt (or lo == 0), and elapsed(hi) >= dt or hi == k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            e = elapsed(mid)
            if e >= dt:
                hi, e_hi = mid, e
            else:
                lo = mid
        if e_hi != e_hi:
            e_hi = elapsed(hi)
        return hi, e_hi

    def work(self, k: int) -> tuple[float, float, float]:
        """(flops, bytes_read, bytes_written) of the first k iterations, as `totals` sums them, without the time."""
        if k <= 0:
            return 0.0, 0.0, 0.0
        tri = k * (k - 1) / 2  # as _sum_affine(a, b, 0, k) computes it
        return k * self.f0 + self.f1 * tri, k * self.r0 + self.r1 * tri, k * self.w0 + self.w1 * tri

    def totals(self, k: int) -> IterationTotals:
        return IterationTotals(
            time_s=self.elapsed(k), flops=_sum_affine(self.f0, self.f1, 0, k), bytes_read=_sum_affine(self.r0, self.r1, 0, k),
            bytes_written=_sum_affine(self.w0, self.w1, 0, k),
        )


def chunk_state_touches(n: int) -> float:
    """Recurrent-state touches of a sequence adding n tokens (as `Passes.from_sequences` counts them)."""
    return 1.0 + (math.ceil(n / GDN_CHUNK) if n > 1 else 0.0)
