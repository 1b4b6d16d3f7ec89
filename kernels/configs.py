"""Scaled-down Weak and Strong model configs that keep Qwen3.5's structure.

Why: the live run and the validation need real models that fit a 2-core CPU, yet have
the shapes whose costs the roofline prices — hybrid layers with every 4th one full
attention (Gated DeltaNet elsewhere), gated attention output, partial RoPE, and for the
Strong model a top-k MoE with a gated shared expert. They are plain HF-style config
dicts parsed by the cost model's own `parse_config`, so both sides read one spec.

Two scales: ``tiny`` for unit tests (milliseconds per pass) and ``bench`` for the
benchmark and the live run (large enough that GEMMs, not Python, dominate a prefill).
"""

from __future__ import annotations

from typing import Any

from specagent.costmodel.model_spec import ModelSpec, parse_config

SCALES = ("tiny", "bench")

# The live comparison's defaults (`specagent live`, benchmarks/calibration.py; kernels/live_compare.py),
# kept here, in a module that needs no torch, so the command line and the library share them.
#: 24 evenly spaced τ²-Bench airline trajectories make 128 READ calls (so >= 100 reads execute live).
LIVE_TRAJECTORIES = 24
#: Token counts of the τ²-Bench traces scaled by this: the default CPU run then decodes ~5,000 Weak tokens
#: (~35 s on one core of the machine the README figures come from) instead of ~100,000.
LIVE_TOKEN_SCALE = 0.05
#: Acceptance per drafted step and verdict length of the seeded acceptance model (a trace without labels):
#: illustrative, chosen so a default run has both outcomes several times, not fitted to anything.
LIVE_ACCEPT = 0.7
LIVE_VERDICT_TOKENS = 16


def _layer_types(n: int, interval: int = 4) -> list[str]:
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]


def _base(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int, lin_k: int, lin_v: int, lin_dim: int,
          vocab: int) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "layer_types": _layer_types(layers),
        "full_attention_interval": 4,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "attn_output_gate": True,
        "attention_bias": False,
        "linear_num_key_heads": lin_k,
        "linear_num_value_heads": lin_v,
        "linear_key_head_dim": lin_dim,
        "linear_value_head_dim": lin_dim,
        "linear_conv_kernel_dim": 4,
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "max_position_embeddings": 262144,
    }


def weak_config(scale: str = "tiny") -> dict[str, Any]:
    """A dense Qwen3.5-4B-shaped model (tied embeddings), scaled down."""
    _check(scale)
    if scale == "tiny":
        text = _base(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, lin_k=2, lin_v=4, lin_dim=16, vocab=512)
        text["intermediate_size"] = 192
    else:
        text = _base(hidden=256, layers=8, heads=4, kv_heads=2, head_dim=64, lin_k=2, lin_v=4, lin_dim=64, vocab=4096)
        text["intermediate_size"] = 768
    text["model_type"] = "qwen3_5_text"
    text["tie_word_embeddings"] = True
    return {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": text,
            "_name_or_path": f"specagent/weak-{scale}"}


def strong_config(scale: str = "tiny") -> dict[str, Any]:
    """A Qwen3.5-397B-A17B-shaped MoE model (gated shared expert, untied head), scaled down."""
    _check(scale)
    if scale == "tiny":
        text = _base(hidden=96, layers=8, heads=4, kv_heads=2, head_dim=24, lin_k=2, lin_v=4, lin_dim=24, vocab=512)
        text.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)
    else:
        text = _base(hidden=512, layers=8, heads=8, kv_heads=2, head_dim=64, lin_k=4, lin_v=8, lin_dim=64, vocab=4096)
        text.update(num_experts=16, num_experts_per_tok=2, moe_intermediate_size=512, shared_expert_intermediate_size=512)
    text["model_type"] = "qwen3_5_moe_text"
    text["tie_word_embeddings"] = False
    text["mlp_only_layers"] = []
    return {"model_type": "qwen3_5_moe", "tie_word_embeddings": False, "text_config": text,
            "_name_or_path": f"specagent/strong-{scale}"}


def _check(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"unknown scale '{scale}'; known: {', '.join(SCALES)}")


def weak_spec(scale: str = "tiny") -> ModelSpec:
    return parse_config(weak_config(scale), name=f"specagent/weak-{scale}", path=f"specagent.kernels.configs:weak_config({scale!r})")


def strong_spec(scale: str = "tiny") -> ModelSpec:
    return parse_config(strong_config(scale), name=f"specagent/strong-{scale}", path=f"specagent.kernels.configs:strong_config({scale!r})")
