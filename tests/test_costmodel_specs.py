"""Model specs against SPEC §3's published figures, each re-derived by hand here.

The hand calculations are written out from the SPEC §3 shape table, not from the code's
own helpers, so a wrong formula in model_spec.py makes these fail.
"""

from __future__ import annotations

import json

import pytest

from specagent.costmodel.model_spec import (
    SUPPORTED_TYPES,
    ModelSpecError,
    load_model_spec,
    parse_config,
    shipped_models,
)

# (short name, published total, published active per token) from SPEC §3
PUBLISHED = [
    ("qwen3.5-397b-a17b", 396.35e9, 17.35e9),
    ("qwen3.5-122b-a10b", 122.11e9, 9.77e9),
    ("qwen3.5-35b-a3b", 34.66e9, 3.45e9),
    ("qwen3.5-27b", 26.90e9, None),
    ("qwen3.5-4b", 4.206e9, None),
    ("qwen3-235b-a22b", 235.09e9, 22.19e9),
    ("qwen3-30b-a3b", 30.53e9, 3.35e9),
    ("qwen3-4b", 4.02e9, None),
]


def _tol(published: float) -> float:
    """0.1% (issue 2), widened to half a unit in the published figure's last digit.

    SPEC §3 prints 3.45 B for Qwen3.5-35B-A3B's active count; any true value in
    [3.445, 3.455) is printed that way, which is ±0.145%, wider than 0.1%. Every other
    figure is printed precisely enough that 0.1% is the binding tolerance.
    """
    half_ulp = 0.005e9  # the active counts are all printed to 0.01 B
    return max(1e-3 * published, half_ulp)


@pytest.mark.parametrize("name,total,active", PUBLISHED)
def test_published_parameter_counts(name, total, active):
    p = load_model_spec(name).param_counts()
    assert abs(p.total - total) <= 1e-3 * total, (name, p.total)
    if active is None:  # dense: every parameter is active
        assert p.active == p.total
    else:
        assert abs(p.active - active) <= _tol(active), (name, p.active)


def test_only_35b_active_needs_the_rounding_allowance():
    """Guard the allowance above: it must not hide a miss on any other model."""
    for name, _total, active in PUBLISHED:
        if active is None:
            continue
        a = load_model_spec(name).param_counts().active
        within_01 = abs(a - active) <= 1e-3 * active
        assert within_01 != (name == "qwen3.5-35b-a3b"), name  # every other model within 0.1%; the 35B needs the allowance
    # and the 35B miss really is only rounding: 3.45499... B prints as 3.45
    a35 = load_model_spec("qwen3.5-35b-a3b").param_counts().active
    assert round(a35 / 1e9, 2) == 3.45


def test_397b_active_without_input_embedding():
    p = load_model_spec("qwen3.5-397b-a17b").param_counts()
    # embedding = vocab * hidden = 248320 * 4096
    assert p.embedding == 248320 * 4096 == 1_017_118_720
    assert abs(p.active_without_embedding - 16.33e9) <= 1e-3 * 16.33e9


def test_qwen35_4b_exact_and_mtp():
    p = load_model_spec("qwen3.5-4b").param_counts()
    assert p.total == 4_205_751_296
    assert abs(p.mtp - 0.1206e9) <= 1e-3 * 0.1206e9
    # SPEC: text + 0.3335 B vision tower + MTP = exactly 4,659,865,088, so the vision
    # tower is 4,659,865,088 - 4,205,751,296 - mtp and must round to 0.3335 B.
    vision = 4_659_865_088 - p.total - p.mtp
    assert round(vision / 1e9, 4) == 0.3335
    # tied embeddings: the LM head shares the input embedding, counted once
    assert p.lm_head == 0 and p.embedding == 248320 * 2560


def test_397b_per_layer_figures():
    s = load_model_spec("qwen3.5-397b-a17b")
    H = 4096
    # full attention: q_proj emits query + gate (2*32*256), k and v (2 kv heads * 256), o_proj, + q/k norms
    attn = H * (2 * 32 * 256) + 2 * H * (2 * 256) + 32 * 256 * H
    assert attn == 104_857_600
    assert s.attention.params(H) == attn + 2 * 256
    assert abs(s.attention.params(H) - 104.9e6) <= 1e-3 * 104.9e6
    # Gated DeltaNet: in_proj_qkv, in_proj_z, b/a projections, depthwise conv, out_proj
    qkv = 2 * 16 * 128 + 64 * 128
    gdn = H * qkv + H * (64 * 128) + 2 * H * 64 + qkv * 4 + (64 * 128) * H
    assert gdn == 118_013_952
    # + dt_bias and A_log (one per value head each) + the gated RMSNorm weight (value head dim)
    assert s.linear.params(H) == gdn + 2 * 64 + 128
    assert abs(s.linear.params(H) - 118.0e6) <= 1e-3 * 118.0e6
    # MoE: 512 routed + 1 shared SwiGLU experts of width 1024, router, shared-expert gate
    moe = 3 * H * 1024 * (512 + 1) + H * 512 + H
    assert moe == 6_457_135_104
    m = s.moe
    assert m.num_experts * m.expert_params(H) + m.shared_params(H) + m.router_params(H) == moe
    # the layer totals multiply up to the component totals
    p = s.param_counts()
    assert p.attention == 15 * s.attention.params(H)
    assert p.linear_attention == 45 * s.linear.params(H)
    assert p.routed_experts + p.shared_expert + p.router == 60 * moe


@pytest.mark.parametrize(
    "name,layers,linear,full,hidden",
    [
        ("qwen3.5-397b-a17b", 60, 45, 15, 4096),
        ("qwen3.5-122b-a10b", 48, 36, 12, 3072),
        ("qwen3.5-35b-a3b", 40, 30, 10, 2048),
        ("qwen3.5-27b", 64, 48, 16, 5120),
        ("qwen3.5-4b", 32, 24, 8, 2560),
        ("qwen3-4b", 36, 0, 36, 2560),
        ("qwen3-30b-a3b", 48, 0, 48, 2048),
        ("qwen3-235b-a22b", 94, 0, 94, 4096),
    ],
)
def test_layer_kinds(name, layers, linear, full, hidden):
    s = load_model_spec(name)
    assert (s.num_layers, s.num_linear_layers, s.num_full_layers, s.hidden) == (layers, linear, full, hidden)
    if linear:  # layer i is full attention when (i+1) % 4 == 0
        assert s.layer_kinds == tuple("full" if (i + 1) % 4 == 0 else "linear" for i in range(layers))


def test_kv_bytes_per_token():
    # only full-attention layers hold KV: layers * 2 (K,V) * kv heads * head_dim * 2 B
    assert load_model_spec("qwen3.5-397b-a17b").kv_bytes_per_token() == 15 * 2 * 2 * 256 * 2 == 30 * 1024
    assert load_model_spec("qwen3.5-4b").kv_bytes_per_token() == 8 * 2 * 4 * 256 * 2 == 32 * 1024
    assert load_model_spec("qwen3-4b").kv_bytes_per_token() == 36 * 2 * 8 * 128 * 2
    # fp8 KV halves it
    assert load_model_spec("qwen3.5-4b").kv_bytes_per_token(1.0) == 16 * 1024


def test_recurrent_state_bytes():
    s397 = load_model_spec("qwen3.5-397b-a17b")
    rec = 45 * 64 * 128 * 128 * 4  # float32 state, one 128x128 matrix per value head
    assert rec == 188_743_680  # ≈ 189 MB
    conv = 45 * (2 * 16 * 128 + 64 * 128) * (4 - 1) * 2  # conv state: kernel-1 columns of qkv, bf16
    assert s397.state_bytes_per_sequence() == rec + conv
    s4 = load_model_spec("qwen3.5-4b")
    rec4 = 24 * 32 * 128 * 128 * 4
    assert rec4 == 50_331_648  # ≈ 50 MB
    conv4 = 24 * (2 * 16 * 128 + 32 * 128) * 3 * 2
    assert s4.state_bytes_per_sequence() == rec4 + conv4
    # pure softmax-attention models keep no recurrent state
    assert load_model_spec("qwen3-4b").state_bytes_per_sequence() == 0


def test_shipped_models_all_load():
    models = shipped_models()
    for short, *_ in PUBLISHED:
        assert any(k.split("/", 1)[1].lower() == short for k in models), short
    for hf_id in models:
        s = load_model_spec(hf_id)
        assert s.name == hf_id and s.model_type in SUPPORTED_TYPES


# ----------------------------------------------------------------------------- loader errors
def _tiny_cfg(model_type: str = "qwen3") -> dict:
    return dict(
        model_type=model_type, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, vocab_size=1000, tie_word_embeddings=True,
    )


def test_config_path_loads(tmp_path):
    d = tmp_path / "Tiny-Model"
    d.mkdir()
    f = d / "config.json"
    f.write_text(json.dumps(_tiny_cfg()))
    for arg in (f, str(f), d):
        s = load_model_spec(arg)
        p = s.param_counts()
        # hand count: embedding 1000*64; per layer attn 64*64 + 2*64*32 + 64*64 + qk norms 2*16;
        # ffn 3*64*128; norms 2*64 per layer + final 64; tied head
        per_layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 2 * 16 + 3 * 64 * 128
        assert p.total == 1000 * 64 + 2 * per_layer + 2 * 2 * 64 + 64
        assert s.source == str(f)


def test_unsupported_model_type_names_it(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(_tiny_cfg("mistral")))
    with pytest.raises(ModelSpecError) as e:
        load_model_spec(f)
    assert "mistral" in str(e.value) and str(f) in str(e.value)
    assert "qwen3_5_moe" in str(e.value)  # lists what is supported


def test_bad_json_names_the_line(tmp_path):
    f = tmp_path / "config.json"
    f.write_text('{\n  "model_type": "qwen3",\n  "hidden_size": 64,,\n}\n')
    with pytest.raises(ModelSpecError) as e:
        load_model_spec(f)
    assert "line 3" in str(e.value) and str(f) in str(e.value)


def test_missing_field_named(tmp_path):
    cfg = _tiny_cfg()
    del cfg["num_attention_heads"]
    with pytest.raises(ModelSpecError, match="num_attention_heads"):
        parse_config(cfg, path="x/config.json")


def test_unknown_model_name_lists_shipped():
    with pytest.raises(ModelSpecError) as e:
        load_model_spec("no-such-model")
    assert "no-such-model" in str(e.value) and "qwen3.5-4b" in str(e.value)


def test_composite_text_config():
    """A composite (vision + text) config is read through its text_config."""
    inner = dict(_tiny_cfg(), model_type="qwen3_5_moe_text", tie_word_embeddings=False)
    inner.update(
        full_attention_interval=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32,
    )
    s = parse_config({"model_type": "qwen3_5_moe", "text_config": inner, "tie_word_embeddings": False})
    assert s.model_type == "qwen3_5_moe"
    assert s.layer_kinds == ("linear", "full")
    assert s.is_moe and s.moe.num_experts == 8
    assert not s.tie_embeddings
