"""The acceptance likelihood with a per-task random effect, integrated over the effect by Gauss–Hermite quadrature.

Why: some tasks are harder for the Weak model all through. Without a term for it the fit reads the resulting
clustering of rejections as first-step correlation (a rejection says the task is a hard one, so the next first
step is rejected more often) and gives too-narrow acceptance intervals, since a task's steps are not independent
evidence. Here step i of a task with effect u is accepted with

    p = expit(logit(accept[kind]) + task_sd * z) * position_decay**i * (1 - correlation if after a rejection),

z ~ N(0, 1), and a task's steps are independent given z (the after-a-rejection flags are functions of its past
verdicts, so the product of the conditional terms is the task's likelihood). The task's marginal likelihood is
∫ Π_steps p^y (1-p)^(1-y) φ(z) dz, a sum over `NODES` Gauss–Hermite nodes placed at each task's mode (adaptive
quadrature); accept[kind] is the acceptance of the median task (z = 0). At task_sd = 0 it equals the fixed-effect likelihood of fit.py term for term.

Everything is vectorised over the per-task cells (kind, position, after, task) × nodes; the gradient is analytic
(the posterior weights of the nodes per task times each cell's score), so a profile interval costs a few dozen
evaluations, not a few hundred finite differences.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit, logsumexp

#: Quadrature nodes per task (adaptive: centred and scaled at each task's mode; tests/test_acceptance_recovery.py
#: holds 20 against 80).
NODES = 20
_A_EPS = 1e-12  # accept kept off 0 and 1 for its logit
_LOG_EPS = math.log(1e-9)  # fit.py's clip of a probability, in logs


def _one_minus(m, s, eta):
    """1 - m s: where m = 1 it is expit(-eta), exact when s rounds to 1."""
    return np.where(m >= 1.0, expit(-eta), 1.0 - m * s)


def _log_one_minus(m, s, eta):
    with np.errstate(divide="ignore"):
        return np.where(m >= 1.0, log_expit(-eta), np.log1p(-m * s))


#: Most judged cells one block of tasks holds (each array of a block is cells × NODES floats: 21 MB at 2^17): the
#: likelihood and its gradient are summed block by block, so memory stays bounded however long the log (a log of
#: 10^6 verifications has some 2.5 million cells). A log under it is one block: the same sums in the same order.
BLOCK_CELLS = 1 << 17


class _Block:
    """The cells of a run of whole tasks, with task codes local to the block."""

    def __init__(self, kind, pos, after, acc, rej, cell_task, starts):
        self.kind, self.pos, self.after, self.acc, self.rej = kind, pos, after, acc, rej
        self.cell_task, self.starts = cell_task, starts

    @property
    def tasks(self) -> int:
        return len(self.starts)


class TaskEffectLikelihood:
    """Marginal log-likelihood and its gradient in theta = (accept[5], position_decay, correlation, task_sd)."""

    def __init__(self, kind: np.ndarray, pos: np.ndarray, after: np.ndarray, n_accepted: np.ndarray,
                 n_rejected: np.ndarray, task: np.ndarray, nodes: int = NODES, block_cells: int = BLOCK_CELLS):
        order = np.argsort(task, kind="stable")
        kind, pos, after = kind[order], pos[order].astype(np.float64), after[order].astype(bool)
        acc, rej = n_accepted[order].astype(np.float64), n_rejected[order].astype(np.float64)
        t = task[order]
        starts = np.flatnonzero(np.concatenate([[True], t[1:] != t[:-1]])) if len(t) else np.zeros(0, dtype=np.int64)
        cell_task = np.cumsum(np.concatenate([[False], t[1:] != t[:-1]])) if len(t) else np.zeros(0, dtype=np.int64)
        ends = np.append(starts[1:], len(t)).astype(np.int64)
        self.blocks: list[tuple[_Block, int, int]] = []  # (block, first task, end task)
        t0 = 0
        while t0 < len(starts):
            t1 = max(int(np.searchsorted(ends, starts[t0] + block_cells, side="right")), t0 + 1)  # whole tasks
            c0, c1 = int(starts[t0]), int(ends[t1 - 1])
            self.blocks.append((_Block(kind[c0:c1], pos[c0:c1], after[c0:c1], acc[c0:c1], rej[c0:c1],
                                       cell_task[c0:c1] - t0, starts[t0:t1] - c0), t0, t1))
            t0 = t1
        self._tasks = len(starts)
        self._mode = np.zeros(self._tasks)
        self._last: tuple | None = None
        self.x, w = np.polynomial.hermite.hermgauss(nodes)
        self.logw_x = np.log(w) + self.x ** 2  # Gauss–Hermite weights times e^{x^2}: the rule for ∫ f(x) dx

    @property
    def tasks(self) -> int:
        return self._tasks

    def _nodes(self, b: _Block, mode: np.ndarray, logit_a: np.ndarray, m: np.ndarray, sd: float) -> tuple[np.ndarray, np.ndarray]:
        """Adaptive quadrature: per task, the mode and curvature scale of its integrand in z (Newton, vectorised over
        tasks), so the nodes sit where a long task's likelihood is, however peaked (plain nodes at sd 3 were off by
        5 log-likelihood units over 150 tasks). Returns the nodes (tasks × nodes) and their log weights; `mode` (the
        block's slice of the last point's modes) is updated in place."""
        g = b.tasks
        z = mode.copy() if sd > 0 else np.zeros(g)  # the last point's modes: a near start, 2-3 steps from here
        curv = np.ones(g)
        if sd > 0:
            for _ in range(50):
                eta = logit_a[b.kind] + sd * z[b.cell_task]
                s = expit(eta)
                r = m * s * (1.0 - s) / _one_minus(m, s, eta)  # p (1 - s) / (1 - p)
                d1 = b.acc * (1.0 - s) - b.rej * r
                d2 = -b.acc * s * (1.0 - s) - b.rej * r * (1.0 - 2.0 * s + r)
                g1 = sd * np.bincount(b.cell_task, weights=d1, minlength=g) - z
                # -f'' floored at the prior's 1: log(1 - m expit) is not concave where m < 1, and a task's
                # likelihood never makes its posterior wider than the prior's unit scale by much
                curv = np.maximum(1.0 - sd * sd * np.bincount(b.cell_task, weights=d2, minlength=g), 1.0)
                step = np.clip(g1 / curv, -2.0, 2.0)
                z = z + step
                if np.max(np.abs(step)) < 1e-10:
                    break
            mode[:] = z
        scale = 1.0 / np.sqrt(curv)
        nodes = z[:, None] + math.sqrt(2.0) * scale[:, None] * self.x[None, :]
        logw = (np.log(math.sqrt(2.0) * scale)[:, None] + self.logw_x[None, :] - 0.5 * nodes ** 2
                - 0.5 * math.log(2.0 * math.pi))
        return nodes, logw

    def _block(self, b: _Block, mode: np.ndarray, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(log-likelihood, gradient) of one block's tasks."""
        a = np.clip(theta[:5], _A_EPS, 1.0 - _A_EPS)
        decay, corr, sd = float(theta[5]), float(theta[6]), float(theta[7])
        logit_a = np.log(a / (1.0 - a))
        # the optimiser may step a hair past correlation 1 (SLSQP's bounds are kept only at its iterates): 1 - corr < 0
        # would make log(m) NaN, so m is held in [0, 1] as the model defines it
        m = decay ** b.pos * np.where(b.after, min(max(1.0 - corr, 0.0), 1.0), 1.0)
        nodes, logw = self._nodes(b, mode, logit_a, m, sd)
        zc = nodes[b.cell_task]  # cells × nodes: each cell's task's nodes
        eta = logit_a[b.kind][:, None] + sd * zc
        s, mm = expit(eta), m[:, None]
        q = _one_minus(mm, s, eta)  # 1 - p, without cancellation
        with np.errstate(divide="ignore"):
            log_m = np.log(mm)
        # log p and log(1 - p) from log-expit, not a clipped p (a clip is a kink the quadrature cannot integrate);
        # floored at log 1e-9 as fit.py clips p, so a correlation of 1 with an accepted step after a rejection is
        # very unlikely, not impossible (a finite log-likelihood the optimiser can leave)
        ll = (b.acc[:, None] * np.maximum(log_expit(eta) + log_m, _LOG_EPS)
              + b.rej[:, None] * np.maximum(_log_one_minus(mm, s, eta), _LOG_EPS))
        tq = np.add.reduceat(ll, b.starts, axis=0) + logw  # tasks × nodes
        lt = logsumexp(tq, axis=1)
        post = np.exp(tq - lt[:, None])[b.cell_task]  # each cell's task's posterior weight on each node
        p = s * mm
        # h = d loglik / d p times p: A - R p / (1 - p)
        hp = post * (b.acc[:, None] - b.rej[:, None] * p / q)
        dlogit = hp * (1.0 - s)  # d p / d (logit accept + sd z) = p (1 - s)
        g = np.zeros(8)
        g[:5] = np.bincount(b.kind, weights=dlogit.sum(axis=1), minlength=5)[:5] / (a * (1.0 - a))
        g[5] = float(np.sum(hp.sum(axis=1) * b.pos) / decay)
        after = b.after & (m > 0)
        g[6] = float(-np.sum(np.where(after, hp.sum(axis=1) / np.where(after, 1.0 - corr, 1.0), 0.0)))
        g[7] = float(np.sum(dlogit * zc))  # the nodes held where they are (their move changes the rule, not the integral)
        return float(lt.sum()), g

    def _cached(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """The optimiser asks for the value and the gradient at the same point in turn: compute both once."""
        theta = np.asarray(theta, dtype=np.float64)
        key = theta.tobytes()
        if self._last is None or self._last[0] != key:
            ll, g = 0.0, np.zeros(8)
            for b, t0, t1 in self.blocks:
                bl, bg = self._block(b, self._mode[t0:t1], theta)
                ll, g = ll + bl, g + bg
            self._last = (key, (ll, g))
        return self._last[1]

    def loglik(self, theta: np.ndarray) -> float:
        return self._cached(theta)[0]

    def grad(self, theta: np.ndarray) -> np.ndarray:
        return self._cached(theta)[1].copy()
