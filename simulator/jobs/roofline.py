"""The roofline job: one forward pass of one deployment broken into FLOPs and bytes by component (`roofline`).

No scenario: one deployment (default: the Scenario's Strong one) and the pass's shape. The Result carries every figure
the terminal table shows and `--json` prints, with where the efficiencies come from. The checks and the deployment
loading here are shared with the balance-point job (balance_point.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.costmodel.phases import PHASES
from specagent.hardware.profile import ENV_VAR
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.simulator.scenario import DeploymentSpec, Scenario, ScenarioError
from specagent.traces.schema import MAX_CONTEXT_TOKENS

#: Sequences in one pass: a guard against a typo (vLLM's default max_num_seqs is 256-1024), not a limit of the model.
MAX_BATCH = 1 << 20
WEIGHT_MODE_HELP = ("'union': an MoE pass reads every distinct expert its tokens touch; 'active': only top-k per "
                    "layer.")
HARDWARE_DIR_HELP = (f"Extra directory of hardware profile TOML files (also ${ENV_VAR}); serving-engine profiles in its "
                     "engines/ folder.")


def check_hardware_dir(hardware_dir: Path | None) -> list[Path]:
    """The extra profile folder as a list of folders to search (none: []); a path that is no folder is refused."""
    if hardware_dir is not None and not hardware_dir.is_dir():
        raise JobError(f"`hardware_dir` {hardware_dir}: {'not a folder' if hardware_dir.exists() else 'no such folder'} "
                       "(expected a folder of hardware profile TOML files)")
    return [hardware_dir] if hardware_dir else []


def check_tokens(**counts: int) -> None:
    """context >= 0, tokens >= 1, each at most the largest context window a public model has."""
    for name, v in counts.items():
        lo = 0 if name == "context" else 1
        if not lo <= v <= MAX_CONTEXT_TOKENS:
            raise JobError(f"expected tokens per sequence in [{lo}, {MAX_CONTEXT_TOKENS:,}] (the largest context "
                           f"window), got {v}", name)


def check_weight_mode(weight_mode: str) -> None:
    from specagent.costmodel.roofline import WEIGHT_MODES

    if weight_mode not in WEIGHT_MODES:
        raise JobError(f"expected one of {', '.join(WEIGHT_MODES)}, got '{weight_mode}'", "weight_mode")


def build(deployment: DeploymentSpec, hardware_dir: Path | None) -> Any:  # type: ignore[valid-type]
    """The costmodel Deployment; a name that loads nothing is a JobError on its deployment field."""
    try:
        return deployment.build(check_hardware_dir(hardware_dir))
    except ScenarioError as exc:
        raise JobError(str(exc), f"deployment.{exc.where}" if exc.where else "") from None


@dataclass(frozen=True)
class RooflineRequest(Request):
    """One pass: its phase, sequences, cached and new tokens per sequence, expert reads, and the deployment."""

    phase: str = field(default="decode", metadata={"help": f"One of {', '.join(PHASES)}."})
    batch: int = field(default=1, metadata={"help": "Sequences in the pass."})
    context: int = field(default=8192, metadata={"help": "Cached tokens per sequence before the pass."})
    tokens: int = field(default=512, metadata={"help": "New tokens per sequence (prefill/verify only; decode adds 1)."})
    weight_mode: str = field(default="union", metadata={"help": WEIGHT_MODE_HELP})
    hardware_dir: Path | None = field(default=None, metadata={"help": HARDWARE_DIR_HELP})
    deployment: DeploymentSpec = field(default=Scenario.strong)  # type: ignore[valid-type]

    def check(self) -> None:
        if self.phase not in PHASES:
            raise JobError(f"`phase` must be one of {', '.join(PHASES)}, got '{self.phase}'")
        check_tokens(context=self.context, tokens=self.tokens)
        if not 1 <= self.batch <= MAX_BATCH:
            raise JobError(f"expected sequences in one pass in [1, {MAX_BATCH:,}], got {self.batch}", "batch")
        check_weight_mode(self.weight_mode)

    @property
    def new_tokens(self) -> int:
        """New tokens per sequence: one for a decode or repair pass, `tokens` otherwise."""
        return 1 if self.phase in ("decode", "repair") else self.tokens


@dataclass
class RooflineResult(Result):
    """The pass's cost (`cost`: per component) on the built deployment, and the figures `--json` prints (`record`); for
    the terminal's breakdown (reports/screens/foundation.py), the engine's fixed terms as (label, record key) in the
    cost model's order and the collectives per pass (all-reduces, all-to-alls)."""

    request: RooflineRequest
    deployment: Any  # costmodel.Deployment
    cost: Any  # costmodel PassCost of the one pass
    record: dict[str, Any]
    fixed_terms: tuple[tuple[str, str], ...]
    collectives: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return self.record

    def write(self, folder: str | Path) -> list[Path]:
        return []  # prints only


def _does_not_fit(dep: Any, r: RooflineRequest, exc: Exception) -> JobError:
    """Name what does not fit: the batch's KV cache and state, the context's, or the weights themselves."""
    new = r.new_tokens
    if r.batch > 1 and dep.max_sequences(r.context + new) >= 1:
        return JobError(f"`batch` {r.batch}: {exc}; one sequence fits: lower `batch` (or `context`)")
    if r.context > 0 and dep.max_sequences(new) >= 1:
        return JobError(f"`context` {r.context}: {exc}; lower `context`")
    return JobError(f"{exc}; set `deployment.gpus` or `deployment.weight_dtype`")


def run(request: RooflineRequest, progress: Progress | None = None) -> RooflineResult:
    """Price the request's pass on its deployment."""
    from specagent.costmodel.deployment import DeploymentDoesNotFit
    from specagent.costmodel.phases import PHASE_FUNCTIONS

    request.check()
    report(progress, "loading the deployment")
    r = request
    dep = build(r.deployment, r.hardware_dir)
    try:
        dep.check_fit(r.batch, r.context + r.new_tokens)
    except DeploymentDoesNotFit as exc:
        raise _does_not_fit(dep, r, exc) from None
    fn = PHASE_FUNCTIONS[r.phase]
    cost = (fn(dep, context=r.context, batch=r.batch, weight_mode=r.weight_mode) if r.phase in ("decode", "repair")
            else fn(dep, r.tokens, r.context, r.batch, weight_mode=r.weight_mode))
    from specagent.costmodel.latency import FIXED_TERMS
    from specagent.costmodel.roofline import coefficients

    lt = coefficients(dep).terms
    return RooflineResult(r, dep, cost, _record(dep, cost, r), tuple((t.label, f"fixed_{t.name}_s") for t in FIXED_TERMS),
                          (lt.allreduces, lt.all_to_alls))


def _record(dep: Any, cost: Any, r: RooflineRequest) -> dict[str, Any]:
    """The pass's figures and where its efficiencies come from (what --json prints)."""
    from specagent.costmodel.roofline import coefficients

    row = cost.to_frame().iloc[0].to_dict()
    hw = dep.hardware
    lt = coefficients(dep).terms
    eng = dep.serving_engine.for_hardware(hw)
    return dict(
        deployment=dep.describe(), serving_engine=dep.serving_engine.describe(), phase=r.phase, batch=r.batch,
        context=r.context, new_tokens_per_sequence=r.new_tokens, weight_mode=r.weight_mode,
        ridge_flop_per_byte=hw.ridge(dep.compute_dtype), intensity_flop_per_byte=float(cost.intensity[0]),
        efficiencies=dict(gemm=lt.gemm_mfu, gemm_source=(eng.gemm_mfu or hw.prefill_mfu).source,
                          attention=lt.attention_mfu if lt.attention_mfu is not None else lt.gemm_mfu,
                          attention_source=(eng.attention_mfu or eng.gemm_mfu or hw.prefill_mfu).source,
                          moe=lt.moe_mfu if lt.moe_mfu is not None else lt.gemm_mfu, moe_pad_tokens=lt.moe_pad_tokens,
                          bandwidth=lt.bandwidth_efficiency, bandwidth_source=(eng.bandwidth or hw.bandwidth_efficiency).source,
                          weight_stream=lt.stream_efficiency,
                          weight_stream_source=eng.weight_stream.source if eng.weight_stream is not None else "as bandwidth"),
        engine_terms={name: value for name, value, _ in eng.figures()},
        **{k: (v if isinstance(v, str) else float(v)) for k, v in row.items()},
    )
