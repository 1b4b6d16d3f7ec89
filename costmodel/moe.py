"""How many distinct experts a pass touches, which sets an MoE pass's weight traffic."""

from __future__ import annotations

import numpy as np


def moe_union_experts(tokens, num_experts: int, top_k: int) -> np.ndarray:
    """Expected distinct experts per layer touched by `tokens` tokens under uniform routing.

    Each token picks top_k of num_experts without replacement, so a given expert is missed
    by one token with probability 1 - k/E and by T independent tokens with (1 - k/E)^T.
    At T = 1 this is exactly k; as T grows it tends to E.
    """
    t = np.asarray(tokens, dtype=np.float64)
    if num_experts <= 0 or not 0 < top_k <= num_experts:
        raise ValueError(f"need 0 < top_k <= num_experts, got top_k={top_k}, num_experts={num_experts}")
    if top_k == num_experts:
        return np.where(t > 0, float(num_experts), 0.0)
    miss = np.exp(t * np.log1p(-top_k / num_experts))
    return num_experts * (1.0 - miss)


def moe_union_experts_monte_carlo(tokens: int, num_experts: int, top_k: int, trials: int, seed: int) -> float:
    """Direct draw of the same quantity, used to test the closed form."""
    rng = np.random.default_rng(seed)
    counts = np.empty(trials)
    for i in range(trials):
        picks = np.argsort(rng.random((tokens, num_experts)), axis=1)[:, :top_k]
        counts[i] = np.unique(picks).size
    return float(counts.mean())
