"""Model specs read from Hugging Face ``config.json`` files.

Only the fields that shape cost are kept: layer kinds (full attention vs Gated DeltaNet
linear attention), projection widths, FFN/MoE widths, vocabulary and tying. Parameter
counts are re-derived from these fields (never read from a model card) so that the
published parameter counts (model cards) test the derivation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from specagent.common.paths import check_input_file

SUPPORTED_TYPES = ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "llama")
_TEXT_TYPES = {"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"}


class ModelSpecError(ValueError):
    """A config is unreadable, of an unsupported type, or missing a field."""


@dataclass(frozen=True)
class AttentionSpec:
    """Softmax (full) attention with grouped KV heads."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    output_gate: bool  # q_proj also emits a per-channel sigmoid gate (Qwen3-Next / 3.5)
    qk_norm: bool
    bias: bool

    def params(self, hidden: int) -> int:
        q_out = self.num_heads * self.head_dim * (2 if self.output_gate else 1)
        kv_out = self.num_kv_heads * self.head_dim
        weights = hidden * q_out + 2 * hidden * kv_out + self.num_heads * self.head_dim * hidden
        bias = (q_out + 2 * kv_out) if self.bias else 0
        norms = 2 * self.head_dim if self.qk_norm else 0
        return weights + bias + norms

    def matmul_shapes(self, hidden: int) -> list[tuple[int, int]]:
        """(in, out) of each GEMM a token goes through in this block."""
        q_out = self.num_heads * self.head_dim * (2 if self.output_gate else 1)
        kv_out = self.num_kv_heads * self.head_dim
        return [(hidden, q_out), (hidden, kv_out), (hidden, kv_out), (self.num_heads * self.head_dim, hidden)]


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Gated DeltaNet: a fixed-size recurrent state per value head instead of a KV cache."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def qkv_dim(self) -> int:
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    def params(self, hidden: int) -> int:
        in_proj_qkv = hidden * self.qkv_dim
        in_proj_z = hidden * self.value_dim
        in_proj_ba = 2 * hidden * self.num_value_heads
        conv = self.qkv_dim * self.conv_kernel  # depthwise, no bias
        dt_bias_a_log = 2 * self.num_value_heads
        norm = self.value_head_dim  # gated RMSNorm shared across heads
        out_proj = self.value_dim * hidden
        return in_proj_qkv + in_proj_z + in_proj_ba + conv + dt_bias_a_log + norm + out_proj

    def matmul_shapes(self, hidden: int) -> list[tuple[int, int]]:
        return [(hidden, self.qkv_dim), (hidden, self.value_dim), (hidden, 2 * self.num_value_heads), (self.value_dim, hidden)]

    def state_elements(self) -> int:
        """Recurrent state per sequence per layer: one key×value matrix per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    def conv_state_elements(self) -> int:
        return self.qkv_dim * (self.conv_kernel - 1)


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int  # 0 when the model has no shared expert
    shared_gate: bool  # a scalar sigmoid gate on the shared expert's output

    def expert_params(self, hidden: int) -> int:
        return 3 * hidden * self.expert_intermediate

    def shared_params(self, hidden: int) -> int:
        return 3 * hidden * self.shared_intermediate + (hidden if self.shared_gate else 0)

    def router_params(self, hidden: int) -> int:
        return hidden * self.num_experts


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by component (text model; the MTP head is listed apart, outside totals)."""

    embedding: int
    attention: int
    linear_attention: int
    dense_ffn: int
    routed_experts: int
    shared_expert: int
    router: int
    lm_head: int
    norms: int
    mtp: int
    active_routed_experts: int

    @property
    def total(self) -> int:
        return (
            self.embedding + self.attention + self.linear_attention + self.dense_ffn + self.routed_experts
            + self.shared_expert + self.router + self.lm_head + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters one token uses: routed experts replaced by the top-k ones."""
        return self.total - self.routed_experts + self.active_routed_experts

    @property
    def active_without_embedding(self) -> int:
        return self.active - self.embedding

    def as_dict(self) -> dict[str, int]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(total=self.total, active=self.active, active_without_embedding=self.active_without_embedding)
        return d


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    hidden: int
    vocab: int
    layer_kinds: tuple[str, ...]  # "full" | "linear" per decoder layer
    ffn_kinds: tuple[str, ...]  # "dense" | "moe" per decoder layer
    dense_intermediate: int
    attention: AttentionSpec
    linear: LinearAttentionSpec | None
    moe: MoESpec | None
    tie_embeddings: bool
    mtp_layers: int = 0
    max_positions: int = 0
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        return len(self.layer_kinds)

    @property
    def num_full_layers(self) -> int:
        return self.layer_kinds.count("full")

    @property
    def num_linear_layers(self) -> int:
        return self.layer_kinds.count("linear")

    @property
    def num_moe_layers(self) -> int:
        return self.ffn_kinds.count("moe")

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.ffn_kinds.count("dense")

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and self.num_moe_layers > 0

    def param_counts(self) -> ParamCounts:
        h = self.hidden
        attn = self.num_full_layers * self.attention.params(h)
        lin = self.num_linear_layers * self.linear.params(h) if self.linear else 0
        dense = self.num_dense_ffn_layers * 3 * h * self.dense_intermediate
        routed = shared = router = active_routed = 0
        if self.moe:
            n = self.num_moe_layers
            routed = n * self.moe.num_experts * self.moe.expert_params(h)
            active_routed = n * self.moe.top_k * self.moe.expert_params(h)
            shared = n * self.moe.shared_params(h)
            router = n * self.moe.router_params(h)
        embedding = self.vocab * h
        lm_head = 0 if self.tie_embeddings else self.vocab * h
        norms = self.num_layers * 2 * h + h
        mtp = self.mtp_layers * self._mtp_layer_params()
        return ParamCounts(
            embedding=embedding, attention=attn, linear_attention=lin, dense_ffn=dense, routed_experts=routed,
            shared_expert=shared, router=router, lm_head=lm_head, norms=norms, mtp=mtp,
            active_routed_experts=active_routed,
        )

    def _mtp_layer_params(self) -> int:
        """One full-attention decoder layer plus the 2H→H fusion projection and its norms."""
        h = self.hidden
        ffn = 3 * h * self.dense_intermediate
        if self.moe and self.num_moe_layers:
            ffn = self.moe.num_experts * self.moe.expert_params(h) + self.moe.shared_params(h) + self.moe.router_params(h)
        return self.attention.params(h) + ffn + 2 * h * h + 5 * h

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """K and V of every full-attention layer for one token."""
        return self.num_full_layers * 2 * self.attention.num_kv_heads * self.attention.head_dim * kv_dtype_bytes

    def state_bytes_per_sequence(self, state_dtype_bytes: float = 4.0, conv_dtype_bytes: float = 2.0) -> float:
        """Gated DeltaNet recurrent state (float32 by default) plus causal-conv state, per sequence."""
        if not self.linear:
            return 0.0
        per_layer = self.linear.state_elements() * state_dtype_bytes + self.linear.conv_state_elements() * conv_dtype_bytes
        return self.num_linear_layers * per_layer

    def summary(self, model: str) -> dict[str, Any]:
        """One row of `models list --json` (`model`: the id it was loaded by): the layer mix, the parameters in
        billions, the KV cache per token (KiB, bf16) and the recurrent state per sequence (MB)."""
        p = self.param_counts()
        return dict(model=model, type=self.model_type, layers=self.num_layers, full=self.num_full_layers,
                    linear=self.num_linear_layers, total_b=round(p.total / 1e9, 3), active_b=round(p.active / 1e9, 3),
                    kv_kib_per_token=self.kv_bytes_per_token() / 1024, state_mb=round(self.state_bytes_per_sequence() / 1e6, 1))

    def record(self) -> dict[str, Any]:
        """`models show --json`: the layer mix, the parameters by component, KV bytes per token (bf16) and recurrent
        state bytes per sequence."""
        return dict(model=self.name, model_type=self.model_type, source=self.source, layers=self.num_layers,
                    full_attention_layers=self.num_full_layers, linear_attention_layers=self.num_linear_layers,
                    moe_layers=self.num_moe_layers, params=self.param_counts().as_dict(),
                    kv_bytes_per_token_bf16=self.kv_bytes_per_token(), state_bytes_per_sequence=self.state_bytes_per_sequence())


#: Most decoder layers a config may declare: 8x the deepest shipped or public LLM config we know of (Llama 3.1
#: 405B, 126 layers; meta-llama/Llama-3.1-405B config.json). The spec holds one entry per layer, so an absurd
#: count would exhaust memory before any check downstream could name it.
MAX_LAYERS = 1024


#: Typo guards on shape fields (a factor of ~8 or more beyond the largest public config: hidden 16,384 and
#: intermediate 53,248 in Llama 3.1 405B; 128 heads; head_dim 256; vocab 262,144 in Gemma 3; 512 experts in
#: Qwen3.5-397B; a 10,485,760-token window in Llama 4 Scout). A value past them is a slip, and unbounded it
#: would price a 10^32-parameter model with exit status 0.
SHAPE_LIMITS: dict[str, int] = {
    "hidden_size": 131_072, "intermediate_size": 1_048_576, "moe_intermediate_size": 1_048_576,
    "shared_expert_intermediate_size": 1_048_576, "num_attention_heads": 4_096, "num_key_value_heads": 4_096,
    "head_dim": 4_096, "vocab_size": 16_777_216, "num_experts": 65_536, "num_local_experts": 65_536,
    "num_experts_per_tok": 65_536, "linear_num_key_heads": 4_096, "linear_num_value_heads": 4_096,
    "linear_key_head_dim": 4_096, "linear_value_head_dim": 4_096, "linear_conv_kernel_dim": 64,
    "full_attention_interval": MAX_LAYERS, "decoder_sparse_step": MAX_LAYERS, "max_position_embeddings": 134_217_728,
}


def _get(cfg: dict[str, Any], key: str, path: str, default: Any = ...) -> Any:
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if default is ...:
        raise ModelSpecError(f"{path}: missing field '{key}' needed for model_type '{cfg.get('model_type')}'")
    return default


def _int(cfg: dict[str, Any], key: str, path: str, default: Any = ..., minimum: int = 1, maximum: int | None = None) -> int:
    """An integer field (an integral float such as 4.0 is accepted), at least `minimum`: named when it is not."""
    v = _get(cfg, key, path, default)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ModelSpecError(f"{path}: field '{key}' must be an integer, got {v!r}")
    if v < minimum:
        raise ModelSpecError(f"{path}: field '{key}' must be at least {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ModelSpecError(f"{path}: field '{key}' must be at most {maximum}, got {v}")
    guard = SHAPE_LIMITS.get(key)
    if guard is not None and v > guard:
        raise ModelSpecError(f"{path}: field '{key}' must be at most {guard:,} (a guard against typos: several times the "
                             f"largest public model's), got {v:,}")
    return v


def _divides(path: str, a: str, av: int, b: str, bv: int) -> None:
    if av % bv:
        raise ModelSpecError(f"{path}: field '{a}' ({av}) must be a multiple of '{b}' ({bv})")


def parse_config(cfg: dict[str, Any], name: str = "", path: str = "<memory>") -> ModelSpec:
    """Turn a HF config dict (composite configs with ``text_config`` too) into a ModelSpec."""
    if not isinstance(cfg, dict):
        raise ModelSpecError(f"{path}: expected a JSON object at the top level")
    top_type = cfg.get("model_type")
    if cfg.get("text_config") is not None and not isinstance(cfg["text_config"], dict):
        raise ModelSpecError(f"{path}: field 'text_config' must be a JSON object, got {cfg['text_config']!r}")
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    for t in (top_type, text.get("model_type")):
        if t is not None and not isinstance(t, str):
            raise ModelSpecError(f"{path}: field 'model_type' must be a string, got {t!r}")
    model_type = _TEXT_TYPES.get(text.get("model_type") or "", top_type or text.get("model_type"))
    if model_type not in SUPPORTED_TYPES:
        raise ModelSpecError(
            f"{path}: unsupported model_type '{model_type}'; supported: {', '.join(SUPPORTED_TYPES)}"
        )
    hidden = _int(text, "hidden_size", path)
    n_layers = _int(text, "num_hidden_layers", path, maximum=MAX_LAYERS)
    heads = _int(text, "num_attention_heads", path)
    kv_heads = _int(text, "num_key_value_heads", path, heads)
    _divides(path, "num_attention_heads", heads, "num_key_value_heads", kv_heads)  # grouped-query attention
    if _get(text, "head_dim", path, None) is None:
        _divides(path, "hidden_size", hidden, "num_attention_heads", heads)  # head_dim defaults to hidden/heads
    head_dim = _int(text, "head_dim", path, hidden // heads)
    hybrid = model_type in ("qwen3_next", "qwen3_5", "qwen3_5_moe")

    if hybrid:
        layer_types = text.get("layer_types")
        if layer_types:
            if not isinstance(layer_types, list) or len(layer_types) != n_layers:
                n = len(layer_types) if isinstance(layer_types, list) else type(layer_types).__name__
                raise ModelSpecError(f"{path}: layer_types has {n} entries, num_hidden_layers is {n_layers}")
            bad = [t for t in layer_types if t not in ("full_attention", "linear_attention")]
            if bad:
                raise ModelSpecError(f"{path}: field 'layer_types' entries must be 'full_attention' or "
                                     f"'linear_attention', got {bad[0]!r}")
            kinds = tuple("full" if t == "full_attention" else "linear" for t in layer_types)
        else:
            interval = _int(text, "full_attention_interval", path)
            kinds = tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(n_layers))
        linear = LinearAttentionSpec(
            num_key_heads=_int(text, "linear_num_key_heads", path),
            num_value_heads=_int(text, "linear_num_value_heads", path),
            key_head_dim=_int(text, "linear_key_head_dim", path),
            value_head_dim=_int(text, "linear_value_head_dim", path),
            conv_kernel=_int(text, "linear_conv_kernel_dim", path),
        )
        # Gated DeltaNet groups value heads over key heads (Qwen3.5-397B: 64 over 16)
        _divides(path, "linear_num_value_heads", linear.num_value_heads, "linear_num_key_heads", linear.num_key_heads)
    else:
        kinds = ("full",) * n_layers
        linear = None

    attention = AttentionSpec(
        num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        output_gate=bool(text.get("attn_output_gate", model_type == "qwen3_next")) if hybrid else False,
        qk_norm=model_type != "llama",
        bias=bool(text.get("attention_bias", False)),
    )

    experts_key = "num_experts" if text.get("num_experts") else "num_local_experts"
    num_experts = _int(text, experts_key, path, 0, minimum=0)
    moe = None
    ffn_kinds: tuple[str, ...] = ("dense",) * n_layers
    if num_experts:
        shared_i = _int(text, "shared_expert_intermediate_size", path, 0, minimum=0)
        moe = MoESpec(
            num_experts=num_experts,
            top_k=_int(text, "num_experts_per_tok", path, maximum=num_experts),
            expert_intermediate=_int(text, "moe_intermediate_size", path),
            shared_intermediate=shared_i,
            shared_gate=shared_i > 0,
        )
        mlp_only_raw = text.get("mlp_only_layers", []) or []
        if not isinstance(mlp_only_raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in mlp_only_raw):
            raise ModelSpecError(f"{path}: field 'mlp_only_layers' must be a list of layer indices, got {mlp_only_raw!r}")
        mlp_only = set(mlp_only_raw)
        step = _int(text, "decoder_sparse_step", path, 1)
        ffn_kinds = tuple(
            "moe" if (i not in mlp_only and (i + 1) % step == 0) else "dense" for i in range(n_layers)
        )
    dense_i = _int(text, "intermediate_size", path, 0, minimum=0)
    if "dense" in ffn_kinds and dense_i <= 0:
        if text.get("intermediate_size") is not None:
            raise ModelSpecError(f"{path}: field 'intermediate_size' must be at least 1 for dense FFN layers, got {dense_i}")
        raise ModelSpecError(f"{path}: missing field 'intermediate_size' needed for dense FFN layers (a positive integer)")

    tie = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    if "tie_word_embeddings" in text:
        tie = text["tie_word_embeddings"]
    if not isinstance(tie, bool):
        raise ModelSpecError(f"{path}: field 'tie_word_embeddings' must be true or false, got {tie!r}")
    mtp_key = "mtp_num_hidden_layers" if "mtp_num_hidden_layers" in text else "num_nextn_predict_layers"
    mtp = _int(text, mtp_key, path, 0, minimum=0, maximum=MAX_LAYERS)
    vocab = _int(text, "vocab_size", path, cfg.get("vocab_size", ...))
    return ModelSpec(
        name=name or str(cfg.get("_name_or_path", "") or path),
        model_type=model_type,
        hidden=hidden,
        vocab=vocab,
        layer_kinds=kinds,
        ffn_kinds=ffn_kinds,
        dense_intermediate=dense_i,
        attention=attention,
        linear=linear,
        moe=moe,
        tie_embeddings=bool(tie),
        mtp_layers=mtp,
        # absent: unknown (0, no window check); present: a window of at least one token
        max_positions=_int(text, "max_position_embeddings", path) if text.get("max_position_embeddings") is not None else 0,
        source=path,
        raw=cfg,
    )


def _configs_root() -> Path:
    return Path(str(resources.files("specagent.costmodel") / "configs"))


def shipped_models() -> dict[str, Path]:
    """Shipped configs keyed by HF id (``Org/Name``)."""
    root = _configs_root()
    out: dict[str, Path] = {}
    if root.is_dir():
        for f in sorted(root.glob("*/*/config.json")):
            out[f"{f.parent.parent.name}/{f.parent.name}"] = f
    return out


def load_model_spec(name_or_path: str | Path) -> ModelSpec:
    """Load by HF id (``Qwen/Qwen3.5-4B``), short name (``qwen3.5-4b``), or a config.json path."""
    text = str(name_or_path)
    p = Path(text)
    if p.suffix == ".json" or p.is_dir():
        f = p / "config.json" if p.is_dir() else p
        check_input_file(f, ModelSpecError, "model config", missing=f"{f}: cannot read model config (No such file or directory)")
        try:
            cfg = json.loads(f.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ModelSpecError(f"{f}: cannot read model config ({exc.strerror})") from exc
        except json.JSONDecodeError as exc:
            raise ModelSpecError(f"{f}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
        except UnicodeDecodeError as exc:
            raise ModelSpecError(f"{f}: not UTF-8 text (byte {exc.start}); expected a Hugging Face config.json") from exc
        except RecursionError as exc:
            raise ModelSpecError(f"{f}: JSON nested too deeply; expected a Hugging Face config.json") from exc
        return parse_config(cfg, name=p.parent.name if p.suffix == ".json" else p.name, path=str(f))
    models = shipped_models()
    want = text.lower()
    for hf_id, f in models.items():
        if want in (hf_id.lower(), hf_id.split("/", 1)[1].lower()):
            spec = load_model_spec(f)
            return replace(spec, name=hf_id)
    raise ModelSpecError(
        f"unknown model '{text}'; shipped: {', '.join(m.split('/', 1)[1].lower() for m in models)} "
        "(or pass a path to a Hugging Face config.json)"
    )
