"""The acceptance likelihood with a per-task random effect: a task's difficulty shifts every verdict of that task.

Why: tasks differ (some are hard for the Weak model all the way through). Without a task
effect, a hard task's repeated rejections look like first-step correlation (a step right
after a rejection is judged in a task already known to be hard), and every interval is too
narrow, since one task's verdicts are not independent evidence. With it, the correlation
test asks whether a step *right after* a rejection is worse than the same task's other
steps, and the data say how much tasks differ.

The model (docs/acceptance-fit.md): step i of a verification in task t is accepted with

    p = logistic(logit(accept[kind] * position_decay**i * (1 - correlation)**after) + u_t),
    u_t ~ Normal(0, task_effect_sd**2), independent across tasks,

so with `task_effect_sd = 0` it is the acceptance model the planner uses, and
`accept[kind]` is the acceptance of the median task (u = 0). The marginal likelihood of a
task integrates its verdicts over u_t by Gauss-Hermite quadrature; it is exact sequentially
(a step's `after` flag is a function of the same task's earlier verdicts, so the product of
conditionals given u_t is the task's joint likelihood given u_t).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import sparse

#: Quadrature nodes (standard normal) and weights (sum to 1); 32 nodes integrate the logistic terms of a task to
#: well under 1e-6 in log-likelihood for task_effect_sd up to the bound (4).
NODES, _W = hermegauss(32)
WEIGHTS = _W / _W.sum()
LOG_WEIGHTS = np.log(WEIGHTS)
SD_BOUND = 4.0
_EPS = 1e-9
#: Parameter layout: accept per kind (5), position_decay, correlation, task_effect_sd.
N_THETA = 8
DECAY, CORR, SD = 5, 6, 7


@dataclass(frozen=True)
class Judged:
    """Every judged step, aggregated into cells of (kind, position, after a rejection), with the counts of each cell
    per task (`task_accepted`, `task_rejected`: sparse tasks x cells) that the task effect needs."""

    kind: np.ndarray
    pos: np.ndarray
    after: np.ndarray  # first step after a rejection in the same task
    n_accepted: np.ndarray
    n_rejected: np.ndarray
    task_accepted: sparse.csr_matrix
    task_rejected: sparse.csr_matrix

    @classmethod
    def of(cls, segments) -> "Judged":
        k, p, a, y, t = [], [], [], [], []
        fresh = -1
        for s in segments:
            task = s.task
            if task is None:  # a segment of unknown task is a task of its own
                task, fresh = fresh, fresh - 1
            m = min(s.accepted_prefix + 1, len(s.kinds))
            for i in range(m):
                k.append(s.kinds[i])
                p.append(i)
                a.append(s.after_rejection and i == 0)
                y.append(i < s.accepted_prefix)
                t.append(task)
        key = np.stack([np.array(k, dtype=np.int64), np.array(p, dtype=np.int64), np.array(a, dtype=np.int64)], axis=1)
        cells, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.ravel()
        _, tinv = np.unique(np.array(t, dtype=np.int64), return_inverse=True)
        tinv = tinv.ravel()
        yy = np.array(y, dtype=bool)
        shape = (int(tinv.max()) + 1, len(cells))
        ta = sparse.csr_matrix((yy.astype(float), (tinv, inv)), shape=shape)
        tr = sparse.csr_matrix(((~yy).astype(float), (tinv, inv)), shape=shape)
        n_acc = np.bincount(inv, weights=yy, minlength=len(cells))
        n_rej = np.bincount(inv, weights=~yy, minlength=len(cells))
        return cls(cells[:, 0], cells[:, 1], cells[:, 2].astype(bool), n_acc, n_rej, ta, tr)

    @property
    def steps(self) -> int:
        return int(self.n_accepted.sum() + self.n_rejected.sum())

    @property
    def tasks(self) -> int:
        return self.task_accepted.shape[0]

    def of_kind(self, kc: int) -> int:
        m = self.kind == kc
        return int(self.n_accepted[m].sum() + self.n_rejected[m].sum())

    def informs_task_effect(self) -> bool:
        """Some task has two judged steps: only then can tasks be told apart from steps."""
        per_task = np.asarray((self.task_accepted + self.task_rejected).sum(axis=1)).ravel()
        return bool((per_task >= 2).any())


def p_accept(theta: np.ndarray, j: Judged) -> np.ndarray:
    """The median task's acceptance of each cell: accept[kind] * decay**pos * (1 - correlation)**after."""
    accept, decay, corr = theta[:5], theta[DECAY], theta[CORR]
    return accept[j.kind] * decay ** j.pos * np.where(j.after, 1.0 - corr, 1.0)


def loglik(theta: np.ndarray, j: Judged) -> tuple[float, np.ndarray]:
    """The marginal log-likelihood of every judged step and its gradient in theta (the fit's optimiser uses both)."""
    p_raw = p_accept(theta, j)
    p = np.clip(p_raw, _EPS, 1 - _EPS)
    inside = (p_raw > _EPS) & (p_raw < 1 - _EPS)
    sd = float(theta[SD])
    grad = np.zeros(N_THETA)
    if sd == 0.0:  # no task effect: independent Bernoulli cells
        ll = float(np.sum(j.n_accepted * np.log(p) + j.n_rejected * np.log1p(-p)))
        g_eta = (j.n_accepted * (1 - p) - j.n_rejected * p)  # d ll / d logit(p)
    else:
        eta = np.log(p) - np.log1p(-p)
        z = eta[:, None] + sd * NODES[None, :]  # cells x nodes
        log_s, log_1ms = -np.logaddexp(0.0, -z), -np.logaddexp(0.0, z)
        ell = j.task_accepted @ log_s + j.task_rejected @ log_1ms + LOG_WEIGHTS  # tasks x nodes
        top = ell.max(axis=1, keepdims=True)
        e = np.exp(ell - top)
        tot = e.sum(axis=1, keepdims=True)
        ll = float(np.sum(top + np.log(tot)))
        post = e / tot  # each task's posterior weight on each node
        s = np.exp(log_s)
        g_cell = (j.task_accepted.T @ post) * (1 - s) - (j.task_rejected.T @ post) * s  # cells x nodes
        g_eta = g_cell.sum(axis=1)
        grad[SD] = float(np.sum(g_cell * NODES[None, :]))
    # chain rule through logit(p) = log p - log(1 - p), p = accept * decay**pos * (1 - corr)**after
    d_logp = np.where(inside, g_eta / (1 - p), 0.0)  # d ll / d log p
    accept = theta[:5][j.kind]
    grad[:5] = np.bincount(j.kind, weights=np.where(accept > 0, d_logp / np.where(accept > 0, accept, 1.0), 0.0),
                           minlength=5)
    decay = float(theta[DECAY])
    grad[DECAY] = float(np.sum(d_logp * j.pos)) / decay if decay > 0 else 0.0
    corr = float(theta[CORR])
    grad[CORR] = -float(np.sum(d_logp * j.after)) / (1 - corr) if corr < 1 else 0.0
    return ll, grad


def population_accept(accept: float, sd: float) -> float:
    """The mean over tasks of a first step's acceptance (the median task's is `accept`)."""
    if sd == 0.0 or accept <= 0.0 or accept >= 1.0:
        return float(accept)
    eta = np.log(accept) - np.log1p(-accept)
    return float(np.sum(WEIGHTS / (1.0 + np.exp(-(eta + sd * NODES)))))


def prefix_distribution(theta: np.ndarray, kinds: tuple[int, ...], after_rejection: bool) -> np.ndarray:
    """P(accepted prefix = m), m = 0..len(kinds), of one verification, averaged over the task effect's distribution."""
    accept, decay, corr, sd = theta[:5], theta[DECAY], theta[CORR], float(theta[SD])
    p = np.array([accept[k] * decay ** i * ((1 - corr) if (i == 0 and after_rejection) else 1.0) for i, k in enumerate(kinds)])
    p = np.clip(p, _EPS, 1 - _EPS)
    if sd > 0:
        p = 1.0 / (1.0 + np.exp(-(np.log(p) - np.log1p(-p))[None, :] - sd * NODES[:, None]))  # nodes x steps
    else:
        p = p[None, :]
    surv = np.concatenate([np.ones((p.shape[0], 1)), np.cumprod(p, axis=1)], axis=1)
    n = p.shape[1]
    out = np.empty((p.shape[0], n + 1))
    out[:, :n] = surv[:, :n] * (1 - p)
    out[:, n] = surv[:, n]
    return (WEIGHTS @ out) if sd > 0 else out[0]
