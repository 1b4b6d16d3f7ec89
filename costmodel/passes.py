"""Forward passes as columns of per-pass aggregates.

Every cost the roofline counts is linear in a handful of sums over a pass's sequences
(new tokens, attended pairs, cached tokens read, recurrent-state touches), except the MoE
expert union, which depends on the pass's token total only. Storing those sums per pass
lets one numpy expression price a million ragged batches without a Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np

#: Chunk length of chunked Gated DeltaNet prefill kernels (flash-linear-attention uses 64).
GDN_CHUNK = 64


@dataclass(frozen=True)
class Passes:
    tokens: np.ndarray  # sum of new tokens n_i over the batch
    seqs: np.ndarray  # sequences in the batch
    decode_tokens: np.ndarray  # new tokens of sequences that add exactly one token
    attn_pairs: np.ndarray  # sum of n_i*c_i + n_i(n_i+1)/2: query-key pairs under a causal mask
    kv_read_tokens: np.ndarray  # sum of c_i + n_i: tokens whose K,V are read
    state_touches: np.ndarray  # recurrent-state touches: 1 per sequence + 1 per chunk of a chunked prefill
    logits: np.ndarray  # positions that need the LM head (one per sequence)

    def __post_init__(self) -> None:
        n = len(self.tokens)
        for f in fields(self):
            arr = getattr(self, f.name)
            if arr.shape != (n,):
                raise ValueError(f"Passes.{f.name} has shape {arr.shape}, expected ({n},)")
        if np.any(self.tokens < 1) or np.any(self.seqs < 1):
            raise ValueError("every pass needs at least one sequence and one new token")

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def uniform(cls, new_tokens, context=0, batch=1) -> "Passes":
        """Passes whose `batch` sequences each add `new_tokens` onto `context` cached tokens (broadcast)."""
        n, c, b = np.broadcast_arrays(
            np.asarray(new_tokens, dtype=np.float64), np.asarray(context, dtype=np.float64), np.asarray(batch, dtype=np.float64)
        )
        n, c, b = np.atleast_1d(n).astype(np.float64), np.atleast_1d(c).astype(np.float64), np.atleast_1d(b).astype(np.float64)
        if np.any(n < 1) or np.any(c < 0) or np.any(b < 1):
            raise ValueError("new_tokens >= 1, context >= 0 and batch >= 1 are required")
        chunks = np.where(n > 1, np.ceil(n / GDN_CHUNK), 0.0)
        return cls(
            tokens=n * b,
            seqs=b.copy(),
            decode_tokens=np.where(n == 1, b, 0.0),
            attn_pairs=b * (n * c + n * (n + 1) / 2),
            kv_read_tokens=b * (c + n),
            state_touches=b * (1 + chunks),
            logits=b.copy(),
        )

    @classmethod
    def from_batches(cls, batches: Sequence[Sequence[tuple[int, int]]]) -> "Passes":
        """One pass per batch, each batch a list of (new_tokens, context) per sequence."""
        lengths = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
        if np.any(lengths == 0):
            raise ValueError("every batch needs at least one (new_tokens, context) sequence")
        flat = np.array([s for b in batches for s in b], dtype=np.float64).reshape(-1, 2)
        owner = np.repeat(np.arange(len(batches)), lengths)
        return cls.from_sequences(flat[:, 0], flat[:, 1], owner, len(batches))

    @classmethod
    def from_sequences(cls, new_tokens: np.ndarray, context: np.ndarray, pass_index: np.ndarray, n_passes: int | None = None) -> "Passes":
        """Aggregate per-sequence columns into passes (``pass_index[i]`` says which pass row i is in)."""
        n = np.asarray(new_tokens, dtype=np.float64)
        c = np.asarray(context, dtype=np.float64)
        idx = np.asarray(pass_index, dtype=np.int64)
        if np.any(n < 1) or np.any(c < 0):
            raise ValueError("new_tokens >= 1 and context >= 0 are required for every sequence")
        m = int(n_passes if n_passes is not None else (idx.max() + 1 if len(idx) else 0))

        def agg(x: np.ndarray) -> np.ndarray:
            return np.bincount(idx, weights=x, minlength=m)

        chunks = np.where(n > 1, np.ceil(n / GDN_CHUNK), 0.0)
        ones = np.ones_like(n)
        return cls(
            tokens=agg(n), seqs=agg(ones), decode_tokens=agg(np.where(n == 1, 1.0, 0.0)),
            attn_pairs=agg(n * c + n * (n + 1) / 2), kv_read_tokens=agg(c + n),
            state_touches=agg(1 + chunks), logits=agg(ones),
        )

    @classmethod
    def concat(cls, parts: Sequence["Passes"]) -> "Passes":
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})
