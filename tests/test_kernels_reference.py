"""kernels/modules.py against the `transformers` reference implementation of Qwen3.5 / Qwen3.5-MoE.

The reference models are built offline from the same config (no hub access: a config
object, never `from_pretrained`), loaded with the same weights (kernels/reference.py
states the layout mapping) and compared in fp32: each layer kind alone (full attention,
Gated DeltaNet, MoE), then whole tiny models, for a prefill, a segment appended onto the
cached context (the verification prefill) and step-by-step decode with cache.

Differences by design, none of which changes an output beyond fp32 rounding here:
* mRoPE: the reference rotates with multimodal RoPE sections (temporal/height/width);
  for text every section gets the same position, which is plain partial RoPE (ours).
* MoE dispatch: ours sorts token-expert pairs and loops over touched experts, the
  reference loops over a one-hot mask; same sums in another order.
* The reference's MTP head and vision tower are not built (text model only), as the cost
  model counts the text model.

The mutation tests show the comparisons can fail: a swapped query/gate split, a wrong
RoPE fraction and a wrong Gated DeltaNet decay each move the outputs by orders of
magnitude more than the tolerance.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub

import pytest
import torch
import transformers  # a test extra (pip install -e '.[test]'): missing, these tests fail rather than skip
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5 as q35  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as q35moe  # noqa: E402

from specagent.costmodel.model_spec import load_model_spec, shipped_models  # noqa: E402
from specagent.kernels.configs import strong_config, strong_spec, weak_config, weak_spec  # noqa: E402
from specagent.kernels.modules import Cache, FullAttention, GatedDeltaNet, Model, MoE  # noqa: E402
from specagent.kernels.reference import (  # noqa: E402
    attention_state, gdn_state, moe_state, reference_state_dict, reference_text_config,
)

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()  # the pure-torch fallbacks for fla / causal-conv1d are what we want

#: fp32 tolerance on outputs of order 1-30: rounding differences are ~1e-6 relative.
RTOL, ATOL = 1e-4, 1e-4


def _ref_config(which: str, **override):
    raw = weak_config("tiny") if which == "weak" else strong_config("tiny")
    kw = reference_text_config(raw)
    rp = dict(kw["rope_parameters"])
    rp.update(override.pop("rope", {}))
    kw["rope_parameters"] = rp
    kw.update(override)
    cls = transformers.Qwen3_5TextConfig if which == "weak" else transformers.Qwen3_5MoeTextConfig
    cfg = cls(**kw)
    cfg._attn_implementation = "sdpa"
    return cfg


def _ours(which: str, seed: int = 3) -> Model:
    """A tiny model whose norm weights are random too (so the norm re-parameterisation is tested)."""
    m = Model(weak_spec("tiny") if which == "weak" else strong_spec("tiny"), seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
    return m


@pytest.fixture(scope="module")
def weak():
    return _ours("weak")


@pytest.fixture(scope="module")
def strong():
    return _ours("strong")


def _load(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    missing, unexpected = module.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert not [k for k in missing if not k.endswith("inv_freq")], missing
    return module.eval()


def _x(n: int, hidden: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, n, hidden, generator=torch.Generator().manual_seed(seed))


def _layer(model: Model, kind: str) -> tuple[int, torch.nn.Module]:
    i = next(i for i, b in enumerate(model.blocks) if b.kind == kind)
    return i, model.blocks[i].mixer


# --------------------------------------------------------------------------- layers
def attention_outputs(model: Model, cfg, state_fn=attention_state, prefill: int = 40, decode: int = 6):
    """(ours, reference) outputs of one full-attention layer: a prefill then single-token decode steps."""
    li, att = _layer(model, "full")
    assert isinstance(att, FullAttention)
    ref = _load(q35.Qwen3_5Attention(cfg, li), state_fn(att))
    rope = q35.Qwen3_5TextRotaryEmbedding(cfg)
    x = _x(prefill + decode, model.spec.hidden)
    cache, rcache = Cache(batch=1), DynamicCache(config=cfg)
    ours, theirs = [], []
    with torch.no_grad():
        for lo, hi in [(0, prefill)] + [(t, t + 1) for t in range(prefill, prefill + decode)]:
            ours.append(att(x[:, lo:hi], cache, li))
            cache.length = hi
            pos = torch.arange(lo, hi)[None]
            theirs.append(ref(x[:, lo:hi], position_embeddings=rope(x, pos), attention_mask=None, past_key_values=rcache)[0])
    return torch.cat(ours, 1), torch.cat(theirs, 1)


def gdn_outputs(model: Model, cfg, state_fn=gdn_state, prefill: int = 150, decode: int = 6):
    """(ours, reference) outputs and final recurrent states of one Gated DeltaNet layer; the prefill spans
    several 64-token chunks."""
    li, gdn = _layer(model, "linear")
    assert isinstance(gdn, GatedDeltaNet)
    ref = _load(q35.Qwen3_5GatedDeltaNet(cfg, li), state_fn(gdn))
    x = _x(prefill + decode, model.spec.hidden, seed=1)
    cache, rcache = Cache(batch=1), DynamicCache(config=cfg)
    ours, theirs = [], []
    with torch.no_grad():
        for lo, hi in [(0, prefill)] + [(t, t + 1) for t in range(prefill, prefill + decode)]:
            ours.append(gdn(x[:, lo:hi], cache, li))
            cache.length = hi
            theirs.append(ref(x[:, lo:hi], cache_params=rcache))
    return torch.cat(ours, 1), torch.cat(theirs, 1), cache.recurrent[li], rcache.get_recurrent_state(li)


def test_attention_layer_matches_reference(weak, strong):
    for which, model in (("weak", weak), ("strong", strong)):
        ours, ref = attention_outputs(model, _ref_config(which))
        torch.testing.assert_close(ours, ref, rtol=RTOL, atol=ATOL)


def test_gated_deltanet_layer_matches_reference(weak, strong):
    for which, model in (("weak", weak), ("strong", strong)):
        ours, ref, state, ref_state = gdn_outputs(model, _ref_config(which))
        torch.testing.assert_close(ours, ref, rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(state, ref_state, rtol=RTOL, atol=ATOL)  # the float32 state the protocol keeps


def test_gated_deltanet_piecewise_prefill_matches_reference(weak):
    """The verification prefill split at step boundaries (to keep roll-back states) is the same function."""
    cfg = _ref_config("weak")
    li, gdn = _layer(weak, "linear")
    ref = _load(q35.Qwen3_5GatedDeltaNet(cfg, li), gdn_state(gdn))
    x = _x(90, weak.spec.hidden, seed=2)
    with torch.no_grad():
        ours = gdn(x, Cache(batch=1), li, splits=[7, 30, 71], snap_store={})
        theirs = ref(x)
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=ATOL)


def test_moe_layer_matches_reference(strong):
    cfg = _ref_config("strong")
    moe = strong.blocks[0].ffn
    assert isinstance(moe, MoE)
    ref = _load(q35moe.Qwen3_5MoeSparseMoeBlock(cfg), moe_state(moe))
    for n in (1, 5, 64):  # decode touches top-k experts; a prefill nearly all of them
        x = _x(n, strong.spec.hidden, seed=n)
        with torch.no_grad():
            torch.testing.assert_close(moe(x), ref(x), rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- whole models
def model_logits(model: Model, ref: torch.nn.Module, lengths=(100, 40), decode: int = 8, seed: int = 1):
    """Last-position logits of (ours, reference): a prefill, a segment appended onto the cache, then decode."""
    total = sum(lengths) + decode
    ids = torch.randint(0, model.spec.vocab, (1, total), generator=torch.Generator().manual_seed(seed))
    cache, rcache = model.new_cache(1), DynamicCache(config=ref.config)
    ours, theirs = [], []
    pos = 0
    chunks = list(lengths) + [1] * decode
    with torch.no_grad():
        for n in chunks:
            piece = ids[:, pos : pos + n]
            ours.append(model.prefill(cache, piece) if n > 1 else model.decode_step(cache, piece[:, 0]))
            theirs.append(ref(input_ids=piece, past_key_values=rcache, use_cache=True).logits[:, -1])
            pos += n
    return torch.stack(ours), torch.stack(theirs)


def _reference_model(model: Model, which: str, cfg=None, state=None):
    cls = transformers.Qwen3_5ForCausalLM if which == "weak" else transformers.Qwen3_5MoeForCausalLM
    ref = cls(cfg or _ref_config(which))
    return _load(ref, state or reference_state_dict(model))


@pytest.mark.parametrize("which", ["weak", "strong"])
def test_whole_model_prefill_and_cached_decode_match_reference(which, weak, strong):
    model = weak if which == "weak" else strong
    ours, ref = model_logits(model, _reference_model(model, which))
    torch.testing.assert_close(ours, ref, rtol=RTOL, atol=ATOL * 10)  # logits up to ~30
    assert ref.abs().max() > 1.0  # not a comparison of zeros


def test_parameter_counts_equal_the_cost_model():
    """Tiny models (ours and the reference) and every shipped Qwen3.5 config (reference built on the meta
    device: no memory) have exactly the cost model's parameter count, component by component for the tiny ones."""
    for which, spec in (("weak", weak_spec("tiny")), ("strong", strong_spec("tiny"))):
        pc = spec.param_counts()
        ours = Model(spec, seed=0)
        ref = _reference_model(ours, which)
        assert sum(p.numel() for p in ours.parameters()) == pc.total
        assert sum(p.numel() for p in ref.parameters()) == pc.total
        by = {"attention": 0, "linear_attention": 0, "ffn": 0, "router": 0, "experts": 0}
        for name, p in ref.named_parameters():
            if ".self_attn." in name:
                by["attention"] += p.numel()
            elif ".linear_attn." in name:
                by["linear_attention"] += p.numel()
            elif ".mlp.gate.weight" in name:
                by["router"] += p.numel()
            elif ".mlp.experts." in name:
                by["experts"] += p.numel()
            elif ".mlp." in name:
                by["ffn"] += p.numel()
        assert by["attention"] == pc.attention and by["linear_attention"] == pc.linear_attention
        assert by["router"] == pc.router and by["experts"] == pc.routed_experts
        assert by["ffn"] == pc.dense_ffn + pc.shared_expert
    names = [n for n in shipped_models() if n.startswith("Qwen/Qwen3.5-")]
    assert len(names) >= 5
    for name in names:
        spec = load_model_spec(name)
        raw = json.loads(open(shipped_models()[name]).read())
        moe = raw["model_type"] == "qwen3_5_moe"
        cls, ccls = ((transformers.Qwen3_5MoeForCausalLM, transformers.Qwen3_5MoeTextConfig) if moe
                     else (transformers.Qwen3_5ForCausalLM, transformers.Qwen3_5TextConfig))
        with torch.device("meta"):
            ref = cls(ccls(**reference_text_config(raw)))
        assert sum(p.numel() for p in ref.parameters()) == spec.param_counts().total, name


# --------------------------------------------------------------------------- the comparisons can fail
def _swap_gate(att: FullAttention) -> dict[str, torch.Tensor]:
    """q_proj rows per head are [query; gate]: swapping the halves swaps query and gate."""
    s = attention_state(att)
    q = s["q_proj.weight"].view(att.h, 2, att.hd, -1)
    s["q_proj.weight"] = q.flip(1).reshape(att.h * 2 * att.hd, -1)
    return s


def _double_decay(g: GatedDeltaNet) -> dict[str, torch.Tensor]:
    s = gdn_state(g)
    s["A_log"] = s["A_log"] + torch.log(torch.tensor(2.0))  # decay rate exp(A_log) doubled
    return s


def _drop_dt_bias(g: GatedDeltaNet) -> dict[str, torch.Tensor]:
    s = gdn_state(g)
    s["dt_bias"] = torch.zeros_like(s["dt_bias"])
    return s


@pytest.mark.parametrize("mutation", ["swapped_gate", "rope_fraction_0.5", "rope_fraction_1.0", "decay_doubled", "decay_no_dt_bias"])
def test_a_wrong_architecture_fails_the_comparison(mutation, strong):
    if mutation.startswith("swapped_gate") or mutation.startswith("rope"):
        cfg = _ref_config("strong", rope={"partial_rotary_factor": float(mutation.split("_")[-1])}) if mutation.startswith("rope") \
            else _ref_config("strong")
        ours, ref = attention_outputs(strong, cfg, state_fn=_swap_gate if mutation == "swapped_gate" else attention_state)
    else:
        fn = _double_decay if mutation == "decay_doubled" else _drop_dt_bias
        ours, ref, _, _ = gdn_outputs(strong, _ref_config("strong"), state_fn=fn)
    err = (ours - ref).abs().max().item()
    assert err > 100 * (ATOL + RTOL * ref.abs().max().item()), f"{mutation}: max error {err:.2e} would pass the tolerance"
