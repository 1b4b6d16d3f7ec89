"""The phases an agent's model calls go through, as thin names over one roofline.

``verify`` is a prefill of a drafted segment onto a cached context and ``repair`` is
decode; they are priced by the same formulas, and named so that results can be split
by phase. ``decode_run`` prices m consecutive decode steps in closed form, because a
simulator that loops over tokens is too slow for fleets.
"""

from __future__ import annotations

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.passes import Passes
from specagent.costmodel.latency import LAUNCH_TERM, eager_launch
from specagent.costmodel.roofline import Coefficients, PassCost, coefficients, estimate

PHASES = ("prefill", "decode", "verify", "repair")


def prefill(dep: Deployment, new_tokens, context=0, batch=1, weight_mode: str = "union") -> PassCost:
    """Prompt processing: `batch` sequences each add `new_tokens` onto `context` cached tokens."""
    return estimate(dep, Passes.uniform(new_tokens, context, batch), weight_mode)


def decode(dep: Deployment, context, batch=1, weight_mode: str = "union") -> PassCost:
    """One token per sequence onto `context` cached tokens."""
    return estimate(dep, Passes.uniform(1, context, batch), weight_mode)


def verify(dep: Deployment, segment_tokens, context, batch=1, weight_mode: str = "union") -> PassCost:
    """The Strong model reads a whole drafted segment in one prefill on top of its cached context."""
    return estimate(dep, Passes.uniform(segment_tokens, context, batch), weight_mode)


def repair(dep: Deployment, context, batch=1, weight_mode: str = "union") -> PassCost:
    """One decode step of the Strong model's verdict or repair turn."""
    return decode(dep, context, batch, weight_mode)


PHASE_FUNCTIONS = {"prefill": prefill, "decode": decode, "verify": verify, "repair": repair}


class DecodeRun:
    """Totals of m decode steps at batch 1 starting from context c, vectorised over (c, m).

    Every per-step figure is affine in the context (c + j at step j), so FLOPs and bytes
    sum in closed form; the step time max(compute, memory) is a maximum of two affine
    functions, summed exactly by splitting the run at the crossover step. Without CUDA
    graphs a step's kernel launches overlap its GPU-busy time (`latency.exposed_launch`):
    the step takes max(compute + G, memory + G, launch) + CPU work, G the collectives and
    per-layer time; the launch branch is the same at every step (one token, batch 1), so the
    sum of the three-branch maximum is exact too (`max_affine_sum_lines`).
    """

    def __init__(self, dep: Deployment, weight_mode: str = "union", coef: Coefficients | None = None):
        self.dep = dep
        self.weight_mode = weight_mode
        coef = coef or coefficients(dep)
        base = estimate(dep, Passes.uniform(1, [0.0, 1.0], 1), weight_mode, coef)
        # per-step value = a + b * context, for every quantity
        self._a: dict[str, float] = {}
        self._b: dict[str, float] = {}
        for name, arr in self._columns(base).items():
            self._a[name] = float(arr[0])
            self._b[name] = float(arr[1] - arr[0])
        self._fixed_s = float(base.comm_s[0] + base.overhead_s[0] - base.fixed[LAUNCH_TERM][0])  # every fixed cost but launches
        self._busy_s = float(base.comm_s[0] + base.gpu_fixed_s[0])  # the GPU-side part: collectives, per-layer time
        lt = self.terms = coef.terms  # the deployment's fixed-cost terms (the per-request overhead among them)
        self._launch_s = lt.launch_s * float(eager_launch(lt, np.ones(1), np.ones(1, dtype=bool))[0])

    @staticmethod
    def _columns(cost: PassCost) -> dict[str, np.ndarray]:
        cols = {f"flops_{k}": v for k, v in cost.flops.items()}
        cols.update({f"read_{k}": v for k, v in cost.bytes_read.items()})
        cols.update({f"write_{k}": v for k, v in cost.bytes_written.items()})
        cols.update(compute_s=cost.compute_s, memory_s=cost.memory_s, comm_bytes=cost.comm_bytes)
        return cols

    def totals(self, context, tokens) -> dict[str, np.ndarray]:
        """Sum over steps j = 0..m-1 at context c + j; returns every column plus ``time_s``."""
        c = np.asarray(context, dtype=np.float64)
        m = np.asarray(tokens, dtype=np.float64)
        c, m = np.broadcast_arrays(c, m)
        # sum_{j<m} (c + j) = m*c + m(m-1)/2
        ctx_sum = m * c + m * (m - 1) / 2
        out = {k: self._a[k] * m + self._b[k] * ctx_sum for k in self._a}
        if self._launch_s > 0.0:
            g = self._busy_s
            lines = [(self._a["compute_s"] + g, self._b["compute_s"]), (self._a["memory_s"] + g, self._b["memory_s"]), (self._launch_s, 0.0)]
            out["time_s"] = max_affine_sum_lines(lines, c, m) + (self._fixed_s - g) * m
        else:
            out["time_s"] = self._max_affine_sum(c, m) + self._fixed_s * m
        return out

    def _max_affine_sum(self, c: np.ndarray, m: np.ndarray) -> np.ndarray:
        a1, b1 = self._a["compute_s"], self._b["compute_s"]
        a2, b2 = self._a["memory_s"], self._b["memory_s"]

        def s(a: float, b: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
            # sum over integer j in [lo, hi) of a + b*(c + j)
            n = np.maximum(hi - lo, 0)
            return n * (a + b * c) + b * (hi * (hi - 1) / 2 - lo * (lo - 1) / 2) * (n > 0)

        db = b1 - b2
        if db == 0:
            return s(max(a1, a2), b1, np.zeros_like(m), m)
        # compute_s >= memory_s  <=>  (a1 - a2) + db*(c + j) >= 0
        j_star = -((a1 - a2) / db) - c
        if db > 0:  # compute wins from j >= j_star
            split = np.clip(np.ceil(j_star), 0, m)
            return s(a2, b2, np.zeros_like(m), split) + s(a1, b1, split, m)
        split = np.clip(np.floor(j_star) + 1, 0, m)  # compute wins for j <= j_star
        return s(a1, b1, np.zeros_like(m), split) + s(a2, b2, split, m)


def max_affine_sum_lines(lines: list[tuple[float, float]], c: np.ndarray, m: np.ndarray) -> np.ndarray:
    """sum over integer j in [0, m) of max over `lines` (a, b) of a + b*(c + j), exactly, vectorised over (c, m).

    The maximum changes its winning line only where two lines cross; cutting every run at
    ceil of each crossing inside (0, m) leaves pieces [lo, hi) on whose integers one line is
    the maximum — the one that wins at the piece's midpoint — and each piece sums in closed
    form. (`simulator.itercost.max_affine_sum3` is the fleet's scalar twin.)
    """
    c, m = np.broadcast_arrays(np.asarray(c, dtype=np.float64), np.asarray(m, dtype=np.float64))
    shape = m.shape
    c, m = c.ravel(), m.ravel()
    cuts = [np.zeros_like(m), m]
    for p in range(len(lines)):
        for q in range(p + 1, len(lines)):
            db = lines[p][1] - lines[q][1]
            if db != 0.0:
                x = -((lines[p][0] - lines[q][0]) / db) - c  # crossing, in steps from the run's start
                inside = (x > 0) & (x < m)
                cuts.append(np.where(inside, np.ceil(np.where(inside, x, 0.0)), m))
    cuts_arr = np.sort(np.stack(cuts), axis=0)
    a = np.array([ln[0] for ln in lines])[:, None]
    b = np.array([ln[1] for ln in lines])[:, None]
    total = np.zeros_like(m)
    for lo, hi in zip(cuts_arr[:-1], cuts_arr[1:]):
        n = np.maximum(hi - lo, 0)
        mid = c + 0.5 * (lo + hi - 1)
        w = np.argmax(a + b * mid[None, :], axis=0)
        aw, bw = a[w, 0], b[w, 0]
        # sum over integer j in [lo, hi) of aw + bw*(c + j)
        total = total + np.where(n > 0, n * (aw + bw * c) + bw * (hi * (hi - 1) / 2 - lo * (lo - 1) / 2), 0.0)
    return total.reshape(shape)
