"""Real torch modules: cache semantics (decode = prefill, roll-back, append) and the GDN forms agree."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from specagent.kernels.configs import strong_spec, weak_spec
from specagent.kernels.modules import (
    FullAttention,
    Model,
    chunked_gated_delta_rule,
    recurrent_gated_delta_rule,
)

torch.set_num_threads(1)  # robust on a shared 2-core machine (OpenMP spin-waits under contention)


@pytest.fixture(scope="module")
def weak() -> Model:
    return Model(weak_spec("tiny"), seed=1)


@pytest.fixture(scope="module")
def strong() -> Model:
    return Model(strong_spec("tiny"), seed=2)


def _gdn_inputs(b, h, t, dk, dv, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, dk, generator=g) * dk**-0.5
    k = F.normalize(torch.randn(b, h, t, dk, generator=g), dim=-1)
    v = torch.randn(b, h, t, dv, generator=g)
    gd = -torch.rand(b, h, t, generator=g)
    beta = torch.rand(b, h, t, generator=g)
    s0 = torch.randn(b, h, dk, dv, generator=g)
    return q, k, v, gd, beta, s0


@settings(max_examples=15, deadline=None)
@given(t=st.integers(1, 140), chunk=st.sampled_from([8, 16, 64]), seed=st.integers(0, 10_000))
def test_chunked_gdn_matches_recurrence(t, chunk, seed):
    args = _gdn_inputs(2, 3, t, 8, 12, seed)
    o1, s1 = recurrent_gated_delta_rule(*args)
    o2, s2 = chunked_gated_delta_rule(*args, chunk=chunk)
    assert torch.allclose(o1, o2, atol=1e-4, rtol=1e-4)
    assert torch.allclose(s1, s2, atol=1e-4, rtol=1e-4)


def test_gdn_hand_example():
    """One token, zero initial state: S = beta k vᵀ and o = (q·k) beta v."""
    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[0.6, 0.8]]]])
    v = torch.tensor([[[[2.0, -1.0, 3.0]]]])
    g = torch.tensor([[[-0.5]]])
    beta = torch.tensor([[[0.5]]])
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, torch.zeros(1, 1, 2, 3))
    assert torch.allclose(s[0, 0], 0.5 * torch.outer(k[0, 0, 0], v[0, 0, 0]))
    assert torch.allclose(o[0, 0, 0], 0.6 * 0.5 * v[0, 0, 0])
    # a second step decays the state by exp(g) before the delta correction
    o2, s2 = recurrent_gated_delta_rule(q, k, v, g, beta, s)
    decayed = s[0, 0] * math.exp(-0.5)
    pred = decayed.T @ k[0, 0, 0]
    expect = decayed + 0.5 * torch.outer(k[0, 0, 0], v[0, 0, 0] - pred)
    assert torch.allclose(s2[0, 0], expect, atol=1e-6)


@pytest.mark.parametrize("which", ["weak", "strong"])
def test_decode_after_prefill_equals_longer_prefill(which, weak, strong):
    m = weak if which == "weak" else strong
    ids = torch.randint(0, m.spec.vocab, (2, 37), generator=torch.Generator().manual_seed(3))
    ref = m.prefill(m.new_cache(2), ids)
    c = m.new_cache(2)
    m.prefill(c, ids[:, :29])
    for i in range(29, 37):
        out = m.decode_step(c, ids[:, i])
    assert c.length == 37
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4), (out - ref).abs().max()
    # and the logits are not trivially equal to something else
    other = m.prefill(m.new_cache(2), ids[:, :36])
    assert not torch.allclose(other, ref, atol=1e-3)


@pytest.mark.parametrize("which", ["weak", "strong"])
def test_append_segment_equals_single_prefill(which, weak, strong):
    m = weak if which == "weak" else strong
    ids = torch.randint(0, m.spec.vocab, (1, 90), generator=torch.Generator().manual_seed(4))
    ref = m.prefill(m.new_cache(1), ids)
    c = m.new_cache(1)
    m.prefill(c, ids[:, :70])
    out = m.append(c, ids[:, 70:])  # the verification prefill onto a cached context
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)


def test_naive_gdn_prefill_matches_chunked(weak):
    ids = torch.randint(0, weak.spec.vocab, (1, 70), generator=torch.Generator().manual_seed(5))
    a = weak.forward_tokens(weak.new_cache(1), ids)
    b = weak.forward_tokens(weak.new_cache(1), ids, naive_gdn=True)
    assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("which", ["weak", "strong"])
def test_rollback_then_reappend_equals_never_appended(which, weak, strong):
    m = weak if which == "weak" else strong
    gen = torch.Generator().manual_seed(6)
    ctx = torch.randint(0, m.spec.vocab, (1, 25), generator=gen)
    seg = torch.randint(0, m.spec.vocab, (1, 12), generator=gen)
    alt = torch.randint(0, m.spec.vocab, (1, 9), generator=gen)
    ref_cache = m.new_cache(1)
    m.prefill(ref_cache, ctx)
    m.prefill(ref_cache, seg[:, :5])
    ref = m.append(ref_cache, alt)

    c = m.new_cache(1)
    m.prefill(c, ctx)
    # verification prefill of the whole segment, keeping states at its step boundaries
    m.append(c, seg, snapshot_at=[25 + 5, 25 + 12])
    assert c.length == 37
    c.rollback(30)  # steps after position 5 of the segment rejected
    assert c.length == 30
    out = m.append(c, alt)
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)


def test_rollback_after_decode_with_snapshot(weak):
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, weak.spec.vocab, (1, 20), generator=gen)
    c = weak.new_cache(1)
    weak.prefill(c, ids)
    c.snapshot()
    weak.generate(c, ids[:, -1], 6)
    assert c.length == 26
    c.rollback(20)
    nxt = torch.randint(0, weak.spec.vocab, (1, 4), generator=gen)
    out = weak.append(c, nxt)
    ref = weak.prefill(weak.new_cache(1), torch.cat([ids, nxt], 1))
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)


def test_rollback_without_snapshot_fails_clearly(weak):
    c = weak.new_cache(1)
    weak.prefill(c, torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="no recurrent-state snapshot at length 4"):
        c.rollback(4)
    with pytest.raises(ValueError, match="cache holds 10"):
        c.rollback(11)


def test_partial_rope_rotates_only_a_quarter_and_preserves_norm():
    spec = weak_spec("tiny")
    attn = FullAttention(spec, torch.float32, torch.Generator().manual_seed(0))
    assert attn.rot == spec.attention.head_dim // 4
    x = torch.randn(1, 2, 5, spec.attention.head_dim)
    y = attn._rope(x, start=7)
    assert torch.equal(y[..., attn.rot:], x[..., attn.rot:])
    assert not torch.allclose(y[..., : attn.rot], x[..., : attn.rot])
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    # position 0 is the identity
    assert torch.allclose(attn._rope(x[:, :, :1], start=0), x[:, :, :1])


def test_moe_touches_union_of_routed_experts(strong):
    moe = next(b.ffn for b in strong.blocks if b.ffn.__class__.__name__ == "MoE")
    x = torch.randn(1, 1, strong.spec.hidden)
    moe(x)
    assert moe.last_touched == strong.spec.moe.top_k  # one token: exactly top-k experts
    moe(torch.randn(1, 200, strong.spec.hidden))
    assert moe.last_touched == strong.spec.moe.num_experts  # 200 tokens touch all 8


def test_same_seed_same_weights_and_outputs():
    a, b = Model(weak_spec("tiny"), seed=9), Model(weak_spec("tiny"), seed=9)
    ids = torch.arange(12).reshape(1, 12)
    assert torch.equal(a.prefill(a.new_cache(1), ids), b.prefill(b.new_cache(1), ids))
    c = Model(weak_spec("tiny"), seed=10)
    assert not torch.equal(a.prefill(a.new_cache(1), ids), c.prefill(c.new_cache(1), ids))


def test_parameter_count_matches_cost_model():
    """The torch model holds exactly the parameters the cost model counts (no MTP layer here)."""
    for spec in (weak_spec("tiny"), strong_spec("tiny")):
        m = Model(spec, seed=0)
        n = sum(p.numel() for p in m.parameters())
        assert n == spec.param_counts().total
