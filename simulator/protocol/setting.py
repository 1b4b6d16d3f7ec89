"""Where the two models run: deployments (or a priced API for the Strong model) and caching policy, resolved."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from specagent.common.paths import check_input_file
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.roofline import WEIGHT_MODES

VERIFIER_PROMPTS = ("cached", "fresh")
#: What a verification call to a hosted Strong API sends: the whole context with its prefix a cache hit (billed at
#: the provider's cached-input price), the whole context as a cache miss (a verifier prompt that differs from the
#: agent's, all at the input price), or only the drafted segment and the verifier's instructions.
API_VERIFY_SENDS = ("context", "context_uncached", "segment")


@dataclass(frozen=True)
class ApiModel:
    """A hosted model priced per million tokens, with a simple latency model.

    Latency of one request = time to first token + output tokens / output speed; the
    provider's own hardware cost is not visible, so FLOPs and bytes are not counted.
    """

    name: str
    usd_per_mtok_input: float
    usd_per_mtok_cached_input: float
    usd_per_mtok_output: float
    ttft_s: float
    output_tokens_per_s: float
    source: str
    prompt_caching: bool = True

    def __post_init__(self) -> None:
        for f in ("usd_per_mtok_input", "usd_per_mtok_cached_input", "usd_per_mtok_output", "ttft_s"):
            if getattr(self, f) < 0:
                raise ValueError(f"ApiModel {self.name}: {f} must be >= 0")
        if self.output_tokens_per_s <= 0:
            raise ValueError(f"ApiModel {self.name}: output_tokens_per_s must be > 0")


def load_api_models(path: str | Path | None = None) -> dict[str, ApiModel]:
    """API price/latency entries from a TOML file (the shipped one by default)."""
    p = Path(path) if path else Path(str(resources.files("specagent.simulator") / "data" / "api_models.toml"))
    check_input_file(p, ValueError, "API model file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8").removeprefix("\ufeff"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{p}: cannot read API model file: {exc}") from exc
    out = {}
    for name, entry in data.get("api", {}).items():
        try:
            out[name] = ApiModel(name=name, **entry)
        except TypeError as exc:
            raise ValueError(f"{p}: [api.{name}] {exc}") from exc
    return out


@dataclass(frozen=True)
class Setting:
    """Everything about *where* a strategy runs, separate from *what* the agent does: the resolved deployments.

    A `Scenario` names models and GPUs; `Scenario.setting()` loads them into this. The
    policy defaults below are the Scenario's too (it reads them from here).
    """

    weak: Deployment
    strong: Deployment | ApiModel
    prefix_caching: bool = True
    weight_mode: str = "union"
    verifier_prompt: str = "cached"
    #: Tokens of the verifier's own instructions, re-read by every `fresh` review.
    verifier_system_tokens: int = 1024
    #: Hosted Strong model only: what a verification request sends (API_VERIFY_SENDS); self-hosted models ignore it.
    api_verify_sends: str = "context"
    assumptions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verifier_prompt not in VERIFIER_PROMPTS:
            raise ValueError(f"verifier_prompt must be one of {VERIFIER_PROMPTS}, got '{self.verifier_prompt}'")
        if self.weight_mode not in WEIGHT_MODES:
            raise ValueError(f"weight_mode must be one of {WEIGHT_MODES}, got '{self.weight_mode}'")
        if self.api_verify_sends not in API_VERIFY_SENDS:
            raise ValueError(f"api_verify_sends must be one of {API_VERIFY_SENDS}, got '{self.api_verify_sends}'")

    @property
    def strong_is_api(self) -> bool:
        return isinstance(self.strong, ApiModel)

    def describe(self) -> dict[str, str]:
        strong = (f"{self.strong.name} (API: TTFT {self.strong.ttft_s:g} s, {self.strong.output_tokens_per_s:g} output tokens/s)"
                  if isinstance(self.strong, ApiModel) else self.strong.describe())
        engines = self.weak.engine.describe() if isinstance(self.strong, ApiModel) else (
            self.weak.engine.describe() if self.strong.engine.id == self.weak.engine.id
            else f"Weak: {self.weak.engine.describe()}; Strong: {self.strong.engine.describe()}")
        api = {"api_verify_sends": self.api_verify_sends} if isinstance(self.strong, ApiModel) else {}
        return {
            "weak": self.weak.describe(),
            "strong": strong,
            "serving_engine": engines,
            "prefix_caching": str(self.prefix_caching),
            "weight_mode": self.weight_mode,
            "verifier_prompt": self.verifier_prompt,
            "verifier_system_tokens": str(self.verifier_system_tokens),
            **api,
        }
