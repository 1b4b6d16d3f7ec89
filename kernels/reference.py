"""The same weights in the layout of the `transformers` reference implementation (Qwen3.5 / Qwen3.5-MoE).

Why: `kernels/modules.py` writes the Qwen3.5 layers by hand (gated attention with partial
RoPE, Gated DeltaNet, MoE with a gated shared expert) so that it can keep the states the
protocol rolls back to. The tests (tests/test_kernels_reference.py) build the reference
model of the same architecture offline from the same config, load these weights into it
and compare outputs; this module is the one place that states how the two layouts
correspond. Nothing here imports `transformers`: it returns plain config keyword
arguments and a state dict.

Layout differences, all re-parameterisations (same function, different storage):

* RMSNorm: the reference stores ``w - 1`` (its norm multiplies by ``1 + weight``, zero
  at init); the Gated DeltaNet output norm stores ``w`` as is (no offset there).
* Fused projections here, separate there: FFN ``gate_up`` = [gate_proj; up_proj];
  Gated DeltaNet ``in_proj_ba`` = [in_proj_b; in_proj_a]; conv weight [C, 1, K] as is.
* MoE experts are stacked [E, 2I, H] / [E, H, I] on both sides; the router is
  ``mlp.gate.weight``.
"""

from __future__ import annotations

from typing import Any

import torch

from specagent.kernels.modules import FullAttention, GatedDeltaNet, Model, MoE, RMSNorm, SwiGLU

#: Keys of our HF-style text config that the reference config classes do not take as such.
_DROPPED = ("model_type", "full_attention_interval", "rope_theta", "partial_rotary_factor", "mlp_only_layers")


def reference_text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``Qwen3_5TextConfig`` / ``Qwen3_5MoeTextConfig`` from a config dict
    (`kernels.configs.weak_config()` or a Hugging Face config.json of those types)."""
    text = dict(config.get("text_config", config))
    rp = dict(text.get("rope_parameters") or {})
    out = {k: v for k, v in text.items() if k not in _DROPPED and k != "rope_parameters"}
    out["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": text.get("rope_theta", rp.get("rope_theta")),
        "partial_rotary_factor": text.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.25)),
    }
    out.setdefault("hidden_act", "silu")
    return out


def _norm(n: RMSNorm) -> torch.Tensor:
    """Our RMSNorm multiplies by w; the reference by (1 + w')."""
    return n.weight.detach().float() - 1.0


def attention_state(a: FullAttention) -> dict[str, torch.Tensor]:
    """``self_attn.*`` of one reference full-attention layer."""
    out = {"q_proj.weight": a.q_proj, "k_proj.weight": a.k_proj, "v_proj.weight": a.v_proj, "o_proj.weight": a.o_proj}
    if a.q_norm is not None:
        out["q_norm.weight"] = _norm(a.q_norm)
        out["k_norm.weight"] = _norm(a.k_norm)
    return {k: v.detach() for k, v in out.items()}


def gdn_state(g: GatedDeltaNet) -> dict[str, torch.Tensor]:
    """``linear_attn.*`` of one reference Gated DeltaNet layer."""
    b, a = g.in_proj_ba.detach().split(g.nv, dim=0)
    return {
        "in_proj_qkv.weight": g.in_proj_qkv.detach(), "in_proj_z.weight": g.in_proj_z.detach(),
        "in_proj_b.weight": b, "in_proj_a.weight": a, "conv1d.weight": g.conv_weight.detach(),
        "dt_bias": g.dt_bias.detach(), "A_log": g.A_log.detach(), "norm.weight": g.norm.weight.detach(),
        "out_proj.weight": g.out_proj.detach(),
    }


def mlp_state(f: SwiGLU) -> dict[str, torch.Tensor]:
    """``mlp.*`` of one reference dense SwiGLU (also the MoE's shared expert)."""
    gate, up = f.gate_up.detach().split(f.inter, dim=0)
    return {"gate_proj.weight": gate, "up_proj.weight": up, "down_proj.weight": f.down.detach()}


def moe_state(m: MoE) -> dict[str, torch.Tensor]:
    """``mlp.*`` of one reference sparse MoE block (router, stacked experts, gated shared expert)."""
    out = {"gate.weight": m.router.detach(), "experts.gate_up_proj": m.w_gate_up.detach(), "experts.down_proj": m.w_down.detach()}
    if m.shared is not None:
        out.update({f"shared_expert.{k}": v for k, v in mlp_state(m.shared).items()})
    if m.shared_gate is not None:
        out["shared_expert_gate.weight"] = m.shared_gate.detach()
    return out


def reference_state_dict(model: Model) -> dict[str, torch.Tensor]:
    """Every weight of `model` under the reference ``Qwen3_5(Moe)ForCausalLM`` names."""
    sd: dict[str, torch.Tensor] = {"model.embed_tokens.weight": model.embed.detach(), "model.norm.weight": _norm(model.norm)}
    sd["lm_head.weight"] = (model.embed if model.lm_head is None else model.lm_head).detach()
    for i, blk in enumerate(model.blocks):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = _norm(blk.norm1)
        sd[p + "post_attention_layernorm.weight"] = _norm(blk.norm2)
        mixer = attention_state(blk.mixer) if blk.kind == "full" else gdn_state(blk.mixer)
        sd.update({p + ("self_attn." if blk.kind == "full" else "linear_attn.") + k: v for k, v in mixer.items()})
        ffn = moe_state(blk.ffn) if isinstance(blk.ffn, MoE) else mlp_state(blk.ffn)
        sd.update({p + "mlp." + k: v for k, v in ffn.items()})
    return sd
