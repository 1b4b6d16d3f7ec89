"""Torch modules of a Qwen3.5-style hybrid model, built from a ModelSpec at any scale.

Why here: the cost model prices passes of exactly these shapes, so running them for
real (with random, seeded weights) lets calibration and the live protocol run check the
roofline against measured time. Weights are random because the protocol's semantic
decisions come from trace labels, never from these models.

Pieces: full attention (GQA, sigmoid output gate, partial RoPE, per-head qk RMSNorm,
torch SDPA); Gated DeltaNet linear attention (causal depthwise conv, recurrent state in
float32; a naive recurrent form for decode and a chunked form for prefill that matches
it); dense SwiGLU FFN; MoE with top-k routing over touched experts only and a
sigmoid-gated shared expert.

Cache roll-back: a KV cache is truncated. A recurrent state cannot be un-applied, so the
cache keeps *snapshots* of every linear layer's (recurrent, conv) state at chosen
lengths — the boundaries the protocol may roll back to (drafted-step boundaries). A
prefill told ``snapshot_at=[...]`` runs its Gated DeltaNet layers piecewise, splitting
the chunked scan at those positions, so a verification prefill yields the state at every
step boundary in the same single pass (no recomputation on rejection). ``rollback(n)``
needs a snapshot at exactly n, or n equal to the current length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from specagent.costmodel.model_spec import ModelSpec

#: Chunk length of the chunked Gated DeltaNet prefill; the roofline's GDN_CHUNK is 64 too.
GDN_CHUNK = 64
RMS_EPS = 1e-6


def _rope_params(spec: ModelSpec) -> tuple[float, float]:
    """(partial_rotary_factor, rope_theta) from the raw HF config; Qwen3.5 defaults 0.25, 1e7."""
    raw = spec.raw.get("text_config", spec.raw) if isinstance(spec.raw, dict) else {}
    rp = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    factor = raw.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.25 if spec.linear else 1.0))
    theta = raw.get("rope_theta", rp.get("rope_theta", 1e7 if spec.linear else 1e6))
    return float(factor), float(theta)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
        return (xf * self.weight.float()).to(x.dtype)


def _linear(i: int, o: int, dtype: torch.dtype, gen: torch.Generator) -> nn.Parameter:
    """Random weight [o, i] scaled 1/sqrt(i) so activations stay O(1) through many layers."""
    return nn.Parameter(torch.randn(o, i, generator=gen, dtype=torch.float32).mul_(1.0 / math.sqrt(i)).to(dtype))


# --------------------------------------------------------------------------- cache
@dataclass
class KVBuffer:
    """K and V of one full-attention layer in a growable buffer [B, kv_heads, capacity, hd]."""

    k: torch.Tensor
    v: torch.Tensor

    def ensure(self, need: int) -> None:
        cap = self.k.shape[2]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 16)
        for name in ("k", "v"):
            old = getattr(self, name)
            buf = old.new_empty(old.shape[0], old.shape[1], new_cap, old.shape[3])
            buf[:, :, :cap] = old
            setattr(self, name, buf)


@dataclass
class Cache:
    """Per-sequence-batch model state: KV per full layer, (recurrent, conv) per linear layer."""

    batch: int
    length: int = 0
    kv: dict[int, KVBuffer] = field(default_factory=dict)
    recurrent: dict[int, torch.Tensor] = field(default_factory=dict)  # [B, nv, dk, dv] float32
    conv: dict[int, torch.Tensor] = field(default_factory=dict)  # [B, qkv_dim, kernel-1]
    snapshots: dict[int, dict[int, tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)

    def snapshot(self) -> None:
        """Remember the linear layers' states at the current length (a roll-back target)."""
        self.snapshots[self.length] = {i: (self.recurrent[i].clone(), self.conv[i].clone()) for i in self.recurrent}

    def rollback(self, length: int) -> None:
        """Return to `length` tokens: KV truncated, recurrent state restored from its snapshot."""
        if length == self.length:
            return
        if not 0 <= length < self.length:
            raise ValueError(f"cannot roll back to length {length}: the cache holds {self.length} tokens")
        if self.recurrent and length not in self.snapshots:
            raise ValueError(
                f"no recurrent-state snapshot at length {length} (have {sorted(self.snapshots)}); take one with "
                "Cache.snapshot() or prefill(..., snapshot_at=[...]) at every boundary you may roll back to"
            )
        if self.recurrent:
            for i, (s, c) in self.snapshots[length].items():
                self.recurrent[i] = s.clone()
                self.conv[i] = c.clone()
        self.snapshots = {n: v for n, v in self.snapshots.items() if n <= length}
        self.length = length


# --------------------------------------------------------------------------- attention
class FullAttention(nn.Module):
    """Softmax attention with GQA, optional sigmoid output gate, partial RoPE and qk-norm."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, gen: torch.Generator):
        super().__init__()
        a = spec.attention
        self.h, self.kvh, self.hd, self.gate = a.num_heads, a.num_kv_heads, a.head_dim, a.output_gate
        h = spec.hidden
        self.q_proj = _linear(h, a.num_heads * a.head_dim * (2 if a.output_gate else 1), dtype, gen)
        self.k_proj = _linear(h, a.num_kv_heads * a.head_dim, dtype, gen)
        self.v_proj = _linear(h, a.num_kv_heads * a.head_dim, dtype, gen)
        self.o_proj = _linear(a.num_heads * a.head_dim, h, dtype, gen)
        self.q_norm = RMSNorm(a.head_dim, dtype) if a.qk_norm else None
        self.k_norm = RMSNorm(a.head_dim, dtype) if a.qk_norm else None
        factor, theta = _rope_params(spec)
        self.rot = int(a.head_dim * factor) // 2 * 2
        self.theta = theta

    def _rope(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotate the first `rot` channels of each head (rotate-half convention); x: [B, H, n, hd]."""
        if self.rot == 0:
            return x
        n = x.shape[2]
        inv = 1.0 / (self.theta ** (torch.arange(0, self.rot, 2, dtype=torch.float32, device=x.device) / self.rot))
        pos = torch.arange(start, start + n, dtype=torch.float32, device=x.device)
        ang = torch.outer(pos, inv)
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype), torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
        xr, xp = x[..., : self.rot], x[..., self.rot:]
        half = self.rot // 2
        rotated = torch.cat([-xr[..., half:], xr[..., :half]], -1)
        return torch.cat([xr * cos + rotated * sin, xp], -1)

    def forward(self, x: torch.Tensor, cache: Cache, layer: int) -> torch.Tensor:
        b, n, _ = x.shape
        c = cache.length
        q = F.linear(x, self.q_proj)
        if self.gate:
            q, g = q.view(b, n, self.h, 2 * self.hd).chunk(2, dim=-1)
            g = g.reshape(b, n, self.h * self.hd)
        else:
            q = q.view(b, n, self.h, self.hd)
        k = F.linear(x, self.k_proj).view(b, n, self.kvh, self.hd)
        v = F.linear(x, self.v_proj).view(b, n, self.kvh, self.hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = self._rope(q.transpose(1, 2), c)
        k = self._rope(k.transpose(1, 2), c)
        v = v.transpose(1, 2)
        buf = cache.kv.get(layer)
        if buf is None:
            buf = cache.kv[layer] = KVBuffer(k.new_empty(b, self.kvh, 0, self.hd), v.new_empty(b, self.kvh, 0, self.hd))
        buf.ensure(c + n)
        buf.k[:, :, c : c + n] = k
        buf.v[:, :, c : c + n] = v
        keys, vals = buf.k[:, :, : c + n], buf.v[:, :, : c + n]
        if n == 1:
            out = F.scaled_dot_product_attention(q, keys, vals, enable_gqa=True)
        elif c == 0:
            out = F.scaled_dot_product_attention(q, keys, vals, is_causal=True, enable_gqa=True)
        else:  # a segment appended onto a cached context: query i sees keys j <= c + i
            mask = torch.ones(n, c + n, dtype=torch.bool, device=x.device).tril(diagonal=c)
            out = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask, enable_gqa=True)
        out = out.transpose(1, 2).reshape(b, n, self.h * self.hd)
        if self.gate:
            out = out * torch.sigmoid(g)
        return F.linear(out, self.o_proj)


# --------------------------------------------------------------------------- gated deltanet
def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(|x|² + eps) over the last dim: the query/key normalisation of the reference
    implementations (flash-linear-attention, transformers' Qwen3.5), eps included."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def recurrent_gated_delta_rule(q, k, v, g, beta, state):
    """Reference recurrence, token by token. q,k: [B,H,T,dk]; v: [B,H,T,dv]; g, beta: [B,H,T]; state [B,H,dk,dv].

    S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - (exp(g_t) S_{t-1})ᵀ k_t))ᵀ ;  o_t = S_tᵀ q_t.
    q is expected pre-scaled. All math in float32.
    """
    T = q.shape[2]
    out = torch.empty(*v.shape, dtype=torch.float32, device=v.device)
    s = state
    for t in range(T):
        s = s * g[:, :, t].exp()[..., None, None]
        kt = k[:, :, t]
        kv_mem = (s * kt[..., None]).sum(-2)
        delta = (v[:, :, t] - kv_mem) * beta[:, :, t][..., None]
        s = s + kt[..., None] * delta[..., None, :]
        out[:, :, t] = (s * q[:, :, t][..., None]).sum(-2)
    return out, s


def chunked_gated_delta_rule(q, k, v, g, beta, state, chunk: int = GDN_CHUNK):
    """Chunked (WY / UT-transform) form of the same recurrence: O(T/C) sequential steps.

    Within a chunk the delta-rule corrections form a unit lower-triangular system solved
    with one triangular solve; across chunks the state is carried exactly. Matches
    `recurrent_gated_delta_rule` to float32 rounding.
    """
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    chunk = min(chunk, T)  # a short segment is one exact chunk: no padding work
    pad = (-T) % chunk
    if pad:  # zero keys/values/betas and zero log-decay leave the state untouched
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    N = (T + pad) // chunk
    k_beta = k * beta[..., None]
    v_beta = v * beta[..., None]
    q, k, v, k_beta, v_beta = (t.reshape(B, H, N, chunk, t.shape[-1]) for t in (q, k, v, k_beta, v_beta))
    g = g.reshape(B, H, N, chunk).cumsum(-1)
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    decay = (g[..., :, None] - g[..., None, :]).masked_fill(~tril, float("-inf")).exp()  # [B,H,N,C,C]
    upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu()  # diagonal included
    strict = (k_beta @ k.transpose(-1, -2) * decay).masked_fill(upper, 0.0)
    eye = torch.eye(chunk, dtype=q.dtype, device=q.device)
    inv = torch.linalg.solve_triangular(eye + strict, eye.expand_as(strict), upper=False, unitriangular=True)
    u = inv @ v_beta  # pseudo-values
    w = inv @ (k_beta * g.exp()[..., None])  # decayed keys for the state correction
    intra = (q @ k.transpose(-1, -2) * decay)  # causal incl. diagonal (decay is 0 above it)
    out = torch.empty(B, H, N, chunk, dv, dtype=torch.float32, device=q.device)
    s = state
    g_last = g[..., -1]
    for i in range(N):
        v_new = u[:, :, i] - w[:, :, i] @ s
        out[:, :, i] = (q[:, :, i] * g[:, :, i, :, None].exp()) @ s + intra[:, :, i] @ v_new
        kd = k[:, :, i] * (g_last[:, :, i, None] - g[:, :, i]).exp()[..., None]
        s = s * g_last[:, :, i, None, None].exp() + kd.transpose(-1, -2) @ v_new
    return out.reshape(B, H, N * chunk, dv)[:, :, :T], s


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet linear attention (Qwen3-Next / Qwen3.5 layout)."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, gen: torch.Generator):
        super().__init__()
        la = spec.linear
        assert la is not None
        h = spec.hidden
        self.nk, self.nv, self.dk, self.dv, self.kernel = (
            la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim, la.conv_kernel
        )
        if self.nv % self.nk:
            raise ValueError(f"linear_num_value_heads ({self.nv}) must be a multiple of linear_num_key_heads ({self.nk})")
        self.qkv_dim = la.qkv_dim
        self.in_proj_qkv = _linear(h, la.qkv_dim, dtype, gen)
        self.in_proj_z = _linear(h, la.value_dim, dtype, gen)
        self.in_proj_ba = _linear(h, 2 * self.nv, dtype, gen)
        self.conv_weight = nn.Parameter(
            (torch.randn(la.qkv_dim, 1, la.conv_kernel, generator=gen) / math.sqrt(la.conv_kernel)).to(dtype)
        )
        self.dt_bias = nn.Parameter(torch.rand(self.nv, generator=gen).to(dtype))
        self.A_log = nn.Parameter(torch.log(torch.rand(self.nv, generator=gen) * 15 + 1).to(dtype))
        self.norm = RMSNorm(self.dv, dtype)
        self.out_proj = _linear(la.value_dim, h, dtype, gen)

    def forward(self, x: torch.Tensor, cache: Cache, layer: int, splits: Sequence[int] = (), naive: bool = False,
                snap_store: dict | None = None) -> torch.Tensor:
        b, n, _ = x.shape
        mixed = F.linear(x, self.in_proj_qkv).transpose(1, 2)  # [B, C, n]
        conv_state = cache.conv.get(layer)
        if conv_state is None:
            conv_state = mixed.new_zeros(b, self.qkv_dim, self.kernel - 1)
        full = torch.cat([conv_state, mixed], dim=-1)
        conv = F.silu(F.conv1d(full, self.conv_weight, groups=self.qkv_dim))  # [B, C, n]
        kd, vd = self.nk * self.dk, self.nv * self.dv
        qc, kc, vc = conv.transpose(1, 2).split([kd, kd, vd], dim=-1)
        rep = self.nv // self.nk
        q = qc.reshape(b, n, self.nk, self.dk).float()
        k = kc.reshape(b, n, self.nk, self.dk).float()
        q = l2norm(q) * (self.dk ** -0.5)
        k = l2norm(k)
        if rep > 1:
            q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
        v = vc.reshape(b, n, self.nv, self.dv).float()
        ba = F.linear(x, self.in_proj_ba).float()
        beta = torch.sigmoid(ba[..., : self.nv])
        gdec = -self.A_log.float().exp() * F.softplus(ba[..., self.nv:] + self.dt_bias.float())
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, n, d]
        beta, gdec = beta.transpose(1, 2), gdec.transpose(1, 2)
        state = cache.recurrent.get(layer)
        if state is None:
            state = torch.zeros(b, self.nv, self.dk, self.dv, dtype=torch.float32, device=x.device)
        bounds = [0] + [s for s in splits if 0 < s < n] + [n]
        outs = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            args = (q[:, :, lo:hi], k[:, :, lo:hi], v[:, :, lo:hi], gdec[:, :, lo:hi], beta[:, :, lo:hi], state)
            o, state = recurrent_gated_delta_rule(*args) if (naive or hi - lo == 1) else chunked_gated_delta_rule(*args)
            outs.append(o)
            if snap_store is not None and hi < n:
                snap_store.setdefault(cache.length + hi, {})[layer] = (state.clone(), full[:, :, hi : hi + self.kernel - 1].clone())
        o = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
        cache.recurrent[layer] = state
        cache.conv[layer] = full[:, :, -(self.kernel - 1):].clone() if self.kernel > 1 else full[:, :, :0]
        o = self.norm(o.transpose(1, 2).to(x.dtype))  # [B, n, nv, dv]
        z = F.linear(x, self.in_proj_z).view(b, n, self.nv, self.dv)
        o = (o * F.silu(z)).reshape(b, n, self.nv * self.dv)
        return F.linear(o, self.out_proj)


# --------------------------------------------------------------------------- FFNs
class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inter: int, dtype: torch.dtype, gen: torch.Generator):
        super().__init__()
        self.inter = inter
        self.gate_up = _linear(hidden, 2 * inter, dtype, gen)
        self.down = _linear(inter, hidden, dtype, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gu = F.linear(x, self.gate_up)
        gte, up = gu.split(self.inter, dim=-1)
        return F.linear(F.silu(gte) * up, self.down)


class MoE(nn.Module):
    """Top-k routed experts (softmax, renormalised top-k) plus a sigmoid-gated shared expert.

    Dispatch loops over the experts the pass's tokens touch — the distinct-expert union
    the roofline charges for weight reads.
    """

    def __init__(self, spec: ModelSpec, dtype: torch.dtype, gen: torch.Generator):
        super().__init__()
        mo = spec.moe
        assert mo is not None
        h, e, i = spec.hidden, mo.num_experts, mo.expert_intermediate
        self.e, self.k, self.inter = e, mo.top_k, i
        self.router = _linear(h, e, dtype, gen)
        self.w_gate_up = nn.Parameter(torch.stack([_linear(h, 2 * i, dtype, gen).data for _ in range(e)]))
        self.w_down = nn.Parameter(torch.stack([_linear(i, h, dtype, gen).data for _ in range(e)]))
        self.shared = SwiGLU(h, mo.shared_intermediate, dtype, gen) if mo.shared_intermediate else None
        self.shared_gate = _linear(h, 1, dtype, gen) if (mo.shared_intermediate and mo.shared_gate) else None
        self.last_touched = 0

    def route_counts(self, x: torch.Tensor) -> list[int]:
        """Tokens per expert as this input routes them (what `forward` reads back to the host)."""
        probs = torch.softmax(F.linear(x.reshape(-1, x.shape[-1]), self.router).float(), dim=-1)
        return torch.bincount(probs.topk(self.k, dim=-1)[1].reshape(-1), minlength=self.e).tolist()

    def forward(self, x: torch.Tensor, counts: Sequence[int] | None = None) -> torch.Tensor:
        """`counts` (from `route_counts` of this very input) skips the host read of the per-expert
        counts — the one step of the dispatch a CUDA graph cannot capture (kernels/engine_terms.py)."""
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        probs = torch.softmax(F.linear(xf, self.router).float(), dim=-1)
        w, idx = probs.topk(self.k, dim=-1)
        w = (w / w.sum(-1, keepdim=True)).to(x.dtype)
        flat = idx.reshape(-1)
        order = flat.argsort(stable=True)
        if counts is None:  # torch.bincount sizes its output on the host too (a sync on CUDA)
            counts = torch.bincount(flat, minlength=self.e).tolist()
        elif len(counts) != self.e or sum(counts) != flat.numel():
            raise ValueError(f"counts must give the tokens of each of {self.e} experts ({flat.numel()} in all), got {list(counts)}")
        token_of = order // self.k
        weight_of = w.reshape(-1)[order]
        out = torch.zeros_like(xf)
        start = 0
        touched = 0
        for ex, cnt in enumerate(counts):
            if cnt == 0:
                continue
            touched += 1
            tok = token_of[start : start + cnt]
            xe = xf.index_select(0, tok)
            gte, up = F.linear(xe, self.w_gate_up[ex]).split(self.inter, dim=-1)
            ye = F.linear(F.silu(gte) * up, self.w_down[ex]) * weight_of[start : start + cnt, None]
            out.index_add_(0, tok, ye)
            start += cnt
        self.last_touched = touched
        if self.shared is not None:
            s = self.shared(xf)
            if self.shared_gate is not None:
                s = s * torch.sigmoid(F.linear(xf, self.shared_gate))
            out = out + s
        return out.view(shape)


# --------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, spec: ModelSpec, i: int, dtype: torch.dtype, gen: torch.Generator):
        super().__init__()
        self.kind = spec.layer_kinds[i]
        self.mixer = FullAttention(spec, dtype, gen) if self.kind == "full" else GatedDeltaNet(spec, dtype, gen)
        self.ffn = MoE(spec, dtype, gen) if spec.ffn_kinds[i] == "moe" else SwiGLU(spec.hidden, spec.dense_intermediate, dtype, gen)
        self.norm1 = RMSNorm(spec.hidden, dtype)
        self.norm2 = RMSNorm(spec.hidden, dtype)


class Model(nn.Module):
    """A decoder built from a ModelSpec with random seeded weights; prefill/decode over a Cache."""

    def __init__(self, spec: ModelSpec, seed: int = 0, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        super().__init__()
        self.spec = spec
        self.dtype = dtype
        gen = torch.Generator().manual_seed(seed)
        self.embed = nn.Parameter(torch.randn(spec.vocab, spec.hidden, generator=gen).to(dtype))
        self.blocks = nn.ModuleList([Block(spec, i, dtype, gen) for i in range(spec.num_layers)])
        self.norm = RMSNorm(spec.hidden, dtype)
        self.lm_head = None if spec.tie_embeddings else _linear(spec.hidden, spec.vocab, dtype, gen)
        self.to(device)
        self.requires_grad_(False)

    @property
    def device(self) -> torch.device:
        return self.embed.device

    def new_cache(self, batch: int = 1) -> Cache:
        return Cache(batch=batch)

    @torch.inference_mode()
    def forward_tokens(self, cache: Cache, ids: torch.Tensor, snapshot_at: Sequence[int] = (), naive_gdn: bool = False) -> torch.Tensor:
        """Append `ids` [B, n] onto the cached context; return last-position logits [B, vocab].

        `snapshot_at` lists absolute cache lengths inside (cache.length, cache.length + n]
        at which to keep the linear layers' states for roll-back.
        """
        if ids.dim() != 2 or ids.shape[0] != cache.batch:
            raise ValueError(f"ids must be [batch={cache.batch}, n], got {tuple(ids.shape)}")
        n = ids.shape[1]
        c0 = cache.length
        rel = sorted({s - c0 for s in snapshot_at if c0 < s <= c0 + n})
        store: dict[int, dict] = {}
        x = F.embedding(ids, self.embed)
        for li, blk in enumerate(self.blocks):
            hx = blk.norm1(x)
            if blk.kind == "full":
                x = x + blk.mixer(hx, cache, li)
            else:
                x = x + blk.mixer(hx, cache, li, splits=rel, naive=naive_gdn, snap_store=store)
            x = x + blk.ffn(blk.norm2(x))
        cache.length = c0 + n
        if rel and rel[-1] == n:
            cache.snapshot()
        for length, states in store.items():
            cache.snapshots[length] = states
        last = self.norm(x[:, -1])
        return F.linear(last, self.embed if self.lm_head is None else self.lm_head).float()

    def prefill(self, cache: Cache, ids: torch.Tensor, snapshot_at: Sequence[int] = ()) -> torch.Tensor:
        """Prefill (also the verification prefill: a segment appended onto a cached context)."""
        return self.forward_tokens(cache, ids, snapshot_at)

    append = prefill

    def decode_step(self, cache: Cache, ids: torch.Tensor) -> torch.Tensor:
        """One token per sequence; ids [B] or [B, 1]."""
        return self.forward_tokens(cache, ids.reshape(cache.batch, 1))

    @torch.inference_mode()
    def generate(self, cache: Cache, first: torch.Tensor, steps: int) -> torch.Tensor:
        """Greedy-decode `steps` tokens starting by feeding `first` [B]; returns the fed tokens [B, steps]."""
        out = torch.empty(cache.batch, steps, dtype=torch.long, device=self.device)
        tok = first.reshape(cache.batch)
        for i in range(steps):
            out[:, i] = tok
            tok = self.decode_step(cache, tok).argmax(-1)
        return out
