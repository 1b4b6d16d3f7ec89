"""The Scenario: everything one run depends on, its defaults defined once, validated on construction.

Every command builds one (a scenario TOML file or a shipped one, then flags generated
from these fields override it), every result carries it whole (`to_dict`), and reports
and the fleet read it back (`from_dict`) instead of parsing printed descriptions. A
Scenario is declarative: models and GPUs are named, not loaded; `setting()` resolves
them into deployments (and checks that they exist and fit).

Where the defaults live: the Weak and Strong deployments, the workload, seed and
engine here; SpecAgent's K and review policy in `strategies`, the acceptance model in
`acceptance`, the serving policy (prefix caching, verifier prompt, weight reads) in
`setting.Setting`, and every other deployment option in `costmodel.Deployment`; this
module reads them from there. `scenarios/default.toml` is this default written out
(a test keeps them equal), `scenarios/edge.toml` the edge–cloud setting of Wang et al., arXiv:2610.21463, and
`scenarios/wang2026-tau2.toml` its evaluated τ²-Bench setting (agent-side time, a verifier re-reading its context),
in which every comparison with the publication's τ² figures runs.

A deployment entry (`DeploymentSpec`) has exactly the fields of `costmodel.Deployment`,
generated from it: the model and the hardware by name, every other field as is. A new
Deployment field is therefore one line in `costmodel/deployment.py`; it reaches the
scenario files, the results and the `--weak-*`/`--strong-*` flags by itself. A field
that holds an object (like the model spec) needs a name → object loader in `RESOLVERS`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import textwrap
import tomllib
import types
import warnings
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, get_type_hints

import tomli_w

from specagent.common.errors import DeprecatedSpelling, InputError
from specagent.common.paths import check_input_file
from specagent.costmodel.deployment import MAX_GPUS, MIN_MEMORY_UTILIZATION, PARALLELISMS, Deployment, DeploymentDoesNotFit
from specagent.costmodel.dtypes import DTYPE_BYTES
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.costmodel.roofline import WEIGHT_MODES
from specagent.hardware.serving_engine import DEFAULT_ENGINE, EngineProfileError, EngineCatalog, FittedTermsNotApplied
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.io import acceptance_table
from specagent.simulator.acceptance.ranges import Uncertainty
from specagent.simulator.protocol.environment import Environment
from specagent.simulator.protocol.setting import API_VERIFY_SENDS, VERIFIER_PROMPTS, ApiModel, Setting, load_api_models
from specagent.simulator.strategies.catalog import DEFAULT_K, DEFAULT_REVIEW, REVIEW_POLICIES, STRATEGY_HELP, STRATEGY_NAMES
from specagent.traces.vocabulary import MAX_CONTEXT_TOKENS, MAX_STEPS, MAX_TRAJECTORIES

if TYPE_CHECKING:  # the workload's types are imported where a workload is loaded: a replay's settings load none
    from specagent.simulator.protocol.workload import UnitTable
    from specagent.traces.profile import WorkloadProfile
    from specagent.traces.schema import Trajectory

#: How a run is priced (the pricing engine): closed-form analytic sums per event, at batch 1. The simpy model of the same
#: protocol (pricing/des.py) gives the same figures on uncontended resources and is the tests' oracle for this engine,
#: no longer a choice of runs: a file that names it (`RETIRED_ENGINES`) is read as analytic, with a warning.
PRICING_ENGINES = ("analytic",)
ENGINES = PRICING_ENGINES  # the old name, kept for one release
#: Pricing engines a scenario or summary file may still name, each read as the analytic engine (the reason, said once).
RETIRED_ENGINES = {"simpy": "the simpy engine gave the analytic engine's figures on the same uncontended resources; it is "
                            "that engine's test oracle now (simulator/pricing/des.py), not a choice of runs"}
SHIPPED = ("default", "edge", "wang2026-tau2")
#: The shipped scenario that is the publication's evaluated τ²-Bench setting: every comparison with its τ² figures runs in it.
EVALUATED_TAU2 = "wang2026-tau2"
#: The title of scenarios/default.toml, which is `Scenario().to_toml(DEFAULT_TITLE)` (a test keeps them equal).
DEFAULT_TITLE = ("scenario: the built-in default: the model pair and GPUs of Wang et al., arXiv:2610.21463, on the "
                 "workload's recorded environment (the publication's evaluated setting is wang2026-tau2)")
#: A deployment must hold one sequence of this many tokens next to its weights to be accepted.
FIT_CONTEXT = 32768


class ScenarioError(InputError):
    """A scenario field with a value it cannot take; `where` is the field's dotted path (e.g. `strong.gpus`)."""


class DoesNotFit(ScenarioError):
    """A deployment too small for its model; `where` is the role ('weak' or 'strong')."""


# ------------------------------------------------------------------------------------------------
# Deployment entries: costmodel.Deployment's fields, with the model and the hardware by name
# ------------------------------------------------------------------------------------------------
#: Deployment fields that hold a loaded object, and how a scenario's name for one is loaded.
#: Each takes (name, hardware_dirs, engines): `engines` is the run's one EngineCatalog (engine profiles read once per
#: run, found in each hardware dir's engines/ folder, $SPECAGENT_ENGINE_DIR and the shipped ones).
RESOLVERS: dict[str, Callable[..., Any]] = {
    "model": lambda name, hardware_dirs, engines: load_model_spec(name),
    "hardware": lambda name, hardware_dirs, engines: load_hardware(name, hardware_dirs),
    "serving_engine": lambda name, hardware_dirs, engines: engines.load(name),
}
#: The name a resolved field takes when the scenario gives none (for fields whose Deployment default is a factory).
RESOLVER_DEFAULTS: dict[str, str] = {"serving_engine": DEFAULT_ENGINE}
#: Scenario keys of deployment fields whose costmodel.Deployment name would be ambiguous there (none since
#: Deployment.engine became Deployment.serving_engine; the mapping stays for the next such field).
SPEC_NAMES: dict[str, str] = {}
_DEPLOYMENT_NAMES = {v: k for k, v in SPEC_NAMES.items()}
#: Old spellings still read, with a DeprecatedSpelling warning, for one release: scenario key -> its new name.
DEPRECATED_KEYS: dict[str, str] = {"engine": "pricing_engine"}
DEPRECATED_DEPLOYMENT_KEYS: dict[str, str] = {"engine": "serving_engine"}
#: Help for the flags and scenario files; a field without an entry here is described by its
#: `metadata={"help": ...}` in costmodel/deployment.py, or by its name.
DEPLOYMENT_HELP = {
    "model": "model (HF id, short name or config.json path)",
    "hardware": "GPU profile (id, alias or .toml path)",
    "gpus": "GPUs per replica",
    "parallelism": "'tp' (tensor parallel) or 'tp+ep' (experts spread whole across GPUs)",
    "weight_dtype": "weight storage dtype: bf16, fp16, fp8, int8, int4",
    "kv_dtype": "KV cache dtype",
    "activation_dtype": "activation dtype",
    "state_dtype": "recurrent-state dtype (Gated DeltaNet keeps float32)",
    "memory_utilization": "share of GPU memory the serving engine may use",
    "serving_engine": "serving-engine profile whose fixed costs every pass pays (hardware/engines/: vllm, sglang, tensorrt-llm, "
              "ideal = the bare roofline; or a .toml path; NAME:eager = CUDA graphs off)",
}
#: Flag names that differ from the field name (role-prefixed: --weak-dtype, --strong-dtype).
DEPLOYMENT_FLAGS = {"weight_dtype": "dtype"}
#: Flag names of a command about one deployment (`roofline`) that differ from the field name.
SINGLE_DEPLOYMENT_FLAGS: dict[str, str] = {}
_SCALARS = (str, int, float, bool)


def _deployment_fields() -> list[tuple[str, type, Any]]:
    hints = get_type_hints(Deployment)
    out: list[tuple[str, type, Any]] = []
    for f in fields(Deployment):
        name = SPEC_NAMES.get(f.name, f.name)
        help_ = f.metadata.get("help") or DEPLOYMENT_HELP.get(name) or name.replace("_", " ")
        if f.name in RESOLVERS:  # named in the scenario; an optional object (default None) stays optional
            if f.name in RESOLVER_DEFAULTS:
                out.append((name, str, field(default=RESOLVER_DEFAULTS[f.name], metadata={"help": help_})))
            elif f.default is dataclasses.MISSING:
                out.append((name, str, field(metadata={"help": help_})))
            else:
                out.append((name, str | None, field(default=None, metadata={"help": help_})))  # type: ignore[arg-type]
            continue
        typ = hints[f.name]
        if typ not in _SCALARS:
            raise TypeError(f"costmodel.Deployment.{f.name} is a {typ}: add a name -> object loader for it to "
                            f"simulator.scenario.RESOLVERS")
        out.append((name, typ, field(default=f.default, metadata={**f.metadata, "help": help_})))
    return out


class _DeploymentSpecMethods:
    """What a deployment entry can do; the fields are generated from costmodel.Deployment."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if not _of_type(v, f.type):
                raise ScenarioError(f"{f.name} must be {_type_name(f.type)}, got {v!r}", f.name)
            if isinstance(v, str) and not v:
                raise ScenarioError(f"{f.name} must not be empty", f.name)
        if not 1 <= self.gpus <= MAX_GPUS:  # type: ignore[attr-defined]
            raise ScenarioError(f"gpus must be in [1, {MAX_GPUS:,}], got {self.gpus}", "gpus")  # type: ignore[attr-defined]
        if not MIN_MEMORY_UTILIZATION <= self.memory_utilization <= 1:  # type: ignore[attr-defined]
            raise ScenarioError(f"memory_utilization must be in [{MIN_MEMORY_UTILIZATION:g}, 1], got "  # type: ignore[attr-defined]
                                f"{self.memory_utilization!r}", "memory_utilization")
        if self.parallelism not in PARALLELISMS:  # type: ignore[attr-defined]
            raise ScenarioError(f"parallelism must be one of {', '.join(PARALLELISMS)}, got {self.parallelism!r}",  # type: ignore[attr-defined]
                                "parallelism")
        for name in ("weight_dtype", "kv_dtype", "activation_dtype", "state_dtype"):
            if getattr(self, name).lower() not in DTYPE_BYTES:
                raise ScenarioError(f"{name} must be one of {', '.join(DTYPE_BYTES)}, got {getattr(self, name)!r}", name)

    def build(self, hardware_dirs: Iterable[str | Path] = (), engines: EngineCatalog | None = None) -> Deployment:
        """The costmodel Deployment this entry names (loads the model config and the GPU and engine profiles)."""
        values = {_DEPLOYMENT_NAMES.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        dirs = list(hardware_dirs)
        catalog = engines if engines is not None else EngineCatalog.for_hardware_dirs(dirs)
        for name, load in RESOLVERS.items():
            if values.get(name) is None:
                continue
            try:
                values[name] = load(values[name], dirs, catalog)
            except (ModelSpecError, HardwareProfileError, EngineProfileError, OSError) as exc:
                raise ScenarioError(str(exc), SPEC_NAMES.get(name, name)) from exc
        try:
            return Deployment(**values)
        except ValueError as exc:
            text = str(exc)
            first = text.split(" ", 1)[0].rstrip(":")  # Deployment's messages start with the field they concern
            if first in values and text.startswith(first + ":"):
                text = text[len(first) + 1:].strip()
            raise ScenarioError(text, first if first in values else "") from exc


DeploymentSpec = dataclasses.make_dataclass("DeploymentSpec", _deployment_fields(), bases=(_DeploymentSpecMethods,), frozen=True)
DeploymentSpec.__module__ = __name__  # so it pickles (process-pool sweeps) and prints as scenario.DeploymentSpec
DeploymentSpec.__doc__ = ("One model replica named for a scenario: costmodel.Deployment's fields, the model and the "
                          "hardware by name (`build()` loads them).")


def _of_type(v: Any, typ: Any) -> bool:
    if isinstance(typ, types.UnionType):  # X | None
        return v is None or any(_of_type(v, t) for t in typ.__args__ if t is not type(None))
    if typ is bool:
        return isinstance(v, bool)
    if typ is int:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if typ is float:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    if typ is str:
        return isinstance(v, str)
    return True


def _type_name(typ: Any) -> str:
    return {bool: "true or false", int: "a whole number", float: "a finite number", str: "a text"}.get(typ, str(typ))


# ------------------------------------------------------------------------------------------------
# The workload and the scenario
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """Which trajectories run: a trace file, or synthetic ones from a workload profile."""

    trace: str | None = field(default=None, metadata={
        "aliases": ("--workload",), "help": "Trajectories (JSONL or Parquet in specagent's trace schema). Default: the shipped τ²-Bench airline workload."})
    synthetic: str | None = field(default=None, metadata={
        "help": "Instead of a trace: synthetic trajectories from a workload profile (name or TOML; `specagent traces "
                "profiles` lists them), generated as columns and planned in lockstep: the fast path for 10^4-10^6 trajectories."})
    trajectories: int = field(default=10_000, metadata={
        "help": "How many synthetic trajectories a synthetic workload generates (seeded by the seed)."})

    def __post_init__(self) -> None:
        for name in ("trace", "synthetic"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, str) and v):
                raise ScenarioError(f"{name} must be a non-empty path or name, got {v!r}", name)
        if self.trace is not None and self.synthetic is not None:
            raise ScenarioError("give a trace or a synthetic profile, not both", "synthetic")
        if not (_of_type(self.trajectories, int) and 1 <= self.trajectories <= MAX_TRAJECTORIES):
            raise ScenarioError(f"trajectories must be a whole number in [1, {MAX_TRAJECTORIES:,}], got {self.trajectories!r}",
                                "trajectories")


def _setting_default(name: str) -> Any:
    return next(f.default for f in fields(Setting) if f.name == name)


def _strategy_list(v: Any) -> Any:
    """A list (or comma-separated text) of strategy names as a tuple; anything else is left for validation."""
    if isinstance(v, str):
        return tuple(s.strip() for s in v.split(",") if s.strip())
    return tuple(v) if isinstance(v, list) else v


@dataclass(frozen=True)
class Scenario:
    """Models and deployments, workload, strategies and their parameters, acceptance, caching, verifier
    prompt, weight reads, seed and pricing engine: everything a run depends on."""

    weak: DeploymentSpec = field(  # type: ignore[valid-type]
        default=DeploymentSpec(model="qwen3.5-4b", hardware="h20", gpus=1, weight_dtype="bf16"),
        metadata={"help": "The Weak model's replica"})
    strong: DeploymentSpec = field(  # type: ignore[valid-type]
        default=DeploymentSpec(model="qwen3.5-397b-a17b", hardware="h20", gpus=8, weight_dtype="fp8"),
        metadata={"help": "The Strong model's replica (its BF16 weights, ~793 GB, do not fit 8×H20; FP8, ~400 GB, do)"})
    strong_api: str | None = field(default=None, metadata={
        "help": "Price the Strong model as a hosted API instead (an entry of simulator/data/api_models.toml)."})
    workload: Workload = field(default_factory=Workload, metadata={"help": "The trajectories"})
    strategies: tuple[str, ...] = field(default=STRATEGY_NAMES, metadata={
        "help": "Strategies to compare (comma-separated on the command line; Strong-only, the baseline, is always run): "
                + "; ".join(f"{k} = {v}" for k, v in STRATEGY_HELP.items())})
    k: int = field(default=DEFAULT_K, metadata={"help": "K: most steps the Weak model drafts before a chunk ends."})
    review: str = field(default=DEFAULT_REVIEW, metadata={
        "choices": REVIEW_POLICIES, "help": "Review trigger: " + ", ".join(REVIEW_POLICIES) + "."})
    acceptance: AcceptanceModel = field(default_factory=AcceptanceModel, metadata={
        "help": "What the Strong verifier would say about drafted steps (defaults calibrated to the published τ²-Bench "
                "protocol figures, docs/protocol-calibration.md: set them from your own "
                "protocol logs)"})
    prefix_caching: bool = field(default=_setting_default("prefix_caching"), metadata={
        "help": "Each call prefills only what its model has not cached."})
    weight_mode: str = field(default=_setting_default("weight_mode"), metadata={
        "choices": WEIGHT_MODES,
        "help": "'union': a pass reads every distinct expert its tokens touch; 'active': only the active parameters."})
    verifier_prompt: str = field(default=_setting_default("verifier_prompt"), metadata={
        "choices": VERIFIER_PROMPTS,
        "help": "Verifier prompt: 'cached' (append-only, reads only what is new) or 'fresh' (re-reads a system prompt + "
                "whole history each review)."})
    verifier_system_tokens: int = field(default=_setting_default("verifier_system_tokens"), metadata={
        "help": "Tokens of the verifier's own instructions, re-read by every 'fresh' review."})
    api_verify_sends: str = field(default=_setting_default("api_verify_sends"), metadata={
        "choices": API_VERIFY_SENDS,
        "help": "Hosted Strong API only: what a verification call sends. 'context' = the whole context every call, its "
                "prefix a cache hit (billed at the provider's cached-input price); 'context_uncached' = the whole context "
                "as a cache miss (all at the input price: a verifier prompt that breaks the provider's prefix cache); "
                "'segment' = only what the Strong model has not read (the drafted segment) and the verifier's "
                "instructions (verifier_system_tokens, billed as cached input)."})
    environment: Environment = field(default_factory=Environment, metadata={
        "help": "The environment as a what-if: user and tool latencies scaled or replaced (default: as recorded)"})
    uncertainty: Uncertainty = field(default_factory=Uncertainty, metadata={
        "help": "How what is not known (acceptance, the latency model's error) becomes each printed interval (seeded Monte Carlo)"})
    seed: int = field(default=0, metadata={"help": "Seed of every random draw (same seed, same bytes out)."})
    pricing_engine: str = field(default=PRICING_ENGINES[0], metadata={
        "choices": PRICING_ENGINES, "cli": False,
        "help": "Pricing engine: analytic (closed-form sums per event, at batch 1; a file naming the retired simpy engine, "
                "which gave the same figures, is read as analytic)."})

    def __post_init__(self) -> None:
        for role in ("weak", "strong"):
            if not isinstance(getattr(self, role), DeploymentSpec):
                raise ScenarioError(f"{role} must be a deployment entry, got {getattr(self, role)!r}", role)
        if self.strong_api is not None and not (isinstance(self.strong_api, str) and self.strong_api):
            raise ScenarioError(f"strong_api must be the name of an API model, got {self.strong_api!r}", "strong_api")
        if not isinstance(self.workload, Workload):
            raise ScenarioError(f"workload must be a Workload, got {self.workload!r}", "workload")
        if not isinstance(self.environment, Environment):
            raise ScenarioError(f"environment must be an Environment, got {self.environment!r}", "environment")
        if not isinstance(self.uncertainty, Uncertainty):
            raise ScenarioError(f"uncertainty must be an Uncertainty, got {self.uncertainty!r}", "uncertainty")
        if not isinstance(self.acceptance, AcceptanceModel):
            raise ScenarioError(f"acceptance must be an AcceptanceModel, got {self.acceptance!r}", "acceptance")
        if not (isinstance(self.strategies, tuple) and self.strategies and all(isinstance(s, str) for s in self.strategies)):
            raise ScenarioError(f"strategies must be a non-empty list of names, got {self.strategies!r}", "strategies")
        for s in self.strategies:
            if s not in STRATEGY_NAMES:
                raise ScenarioError(f"unknown strategy '{s}'; known: {', '.join(STRATEGY_NAMES)}", "strategies")
        if not (_of_type(self.k, int) and 1 <= self.k <= MAX_STEPS):
            raise ScenarioError(f"K must be a whole number of steps in [1, {MAX_STEPS:,}] (the most steps a trajectory has), "
                                f"got {self.k!r}", "k")
        if not (_of_type(self.verifier_system_tokens, int) and 0 <= self.verifier_system_tokens <= MAX_CONTEXT_TOKENS):
            raise ScenarioError(f"verifier_system_tokens must be a whole number in [0, {MAX_CONTEXT_TOKENS:,}] (the largest "
                                f"context window), got {self.verifier_system_tokens!r}", "verifier_system_tokens")
        if not (_of_type(self.seed, int) and 0 <= self.seed < 2**63):  # a TOML integer is 64-bit signed
            raise ScenarioError(f"seed must be a whole number in [0, 2^63), got {self.seed!r}", "seed")
        if not isinstance(self.prefix_caching, bool):
            raise ScenarioError(f"prefix_caching must be true or false, got {self.prefix_caching!r}", "prefix_caching")
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise ScenarioError(f"{f.name} must be one of {', '.join(choices)}, got {getattr(self, f.name)!r}", f.name)

    # --- resolving ------------------------------------------------------------------------------
    def setting(self, hardware_dirs: Iterable[str | Path] = (), fit_context: int | None = FIT_CONTEXT) -> Setting:
        """The deployments and serving policy, loaded; each deployment must hold one `fit_context`-token sequence."""
        dirs = list(hardware_dirs)
        engines = EngineCatalog.for_hardware_dirs(dirs)  # the engine profiles, read once for both deployments
        weak = _build(self.weak, "weak", dirs, fit_context, engines)
        strong: Deployment | ApiModel
        if self.strong_api is not None:
            apis = load_api_models()
            if self.strong_api not in apis:
                raise ScenarioError(f"unknown API model '{self.strong_api}'; known: {', '.join(apis)}", "strong_api")
            strong = apis[self.strong_api]
        else:
            strong = _build(self.strong, "strong", dirs, fit_context, engines)
        return Setting(weak=weak, strong=strong, prefix_caching=self.prefix_caching, weight_mode=self.weight_mode,
                       verifier_prompt=self.verifier_prompt, verifier_system_tokens=self.verifier_system_tokens,
                       api_verify_sends=self.api_verify_sends)

    def deployment(self, role: str, hardware_dirs: Iterable[str | Path] = (), fit_context: int | None = FIT_CONTEXT) -> Deployment:
        """One self-hosted deployment of the scenario ('weak' or 'strong'), loaded and checked as `setting` checks it,
        for a job that serves one pool (replay: the Strong one) and so need not read the other's files."""
        if role not in ("weak", "strong"):
            raise ValueError(f"role must be 'weak' or 'strong', got {role!r}")
        return _build(getattr(self, role), role, list(hardware_dirs), fit_context)

    def synthetic_profile(self) -> WorkloadProfile:
        """The workload profile `workload.synthetic` names (a ScenarioError if it does not load)."""
        from specagent.traces import load_profile

        try:
            return load_profile(self.workload.synthetic)
        except (FileNotFoundError, ValueError) as exc:
            raise ScenarioError(str(exc), "workload.synthetic") from exc

    def synthetic_name(self, prof: WorkloadProfile) -> str:
        return f"synthetic {prof.name} ×{self.workload.trajectories:,} (seed {self.seed})"

    def load_workload(self, progress: Callable[[int], None] | None = None) -> tuple[list[Trajectory] | UnitTable, str, str]:
        """(trajectories, where they came from, a short name for tables): the trace, or a synthetic UnitTable.

        `progress(n)` is called as a trace file is read (n bytes at a time)."""
        from specagent.simulator.protocol.workload import synthetic_unit_table
        from specagent.traces import load_trajectories
        from specagent.traces.io import default_workload_path

        w = self.workload
        if w.synthetic is not None:
            prof = self.synthetic_profile()
            name = self.synthetic_name(prof)
            return self.environment.apply(synthetic_unit_table(prof, w.trajectories, self.seed)), name, name
        path = Path(w.trace) if w.trace is not None else default_workload_path()
        try:
            trajs = load_trajectories(path, progress=progress)
        except FileNotFoundError as exc:
            raise ScenarioError(f"{path}: no such trace file", "workload.trace") from exc
        except ValueError as exc:
            raise ScenarioError(str(exc), "workload.trace") from exc
        return self.environment.apply(trajs), str(path), path.name

    # --- changing ------------------------------------------------------------------------------
    def replace(self, **changes: Any) -> "Scenario":
        """A copy with some top-level fields changed (validated)."""
        return replace(self, **changes)

    def override(self, values: Mapping[str, Any]) -> "Scenario":
        """A copy with fields changed by dotted path, e.g. {"strong.gpus": 4, "acceptance.verdict_tokens": 32}."""
        d = self.to_dict()
        for path, v in values.items():
            node = d
            *parents, leaf = path.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = v
        return Scenario.from_dict(d)

    # --- storing -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON/TOML types), every field: what results store."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if dataclasses.is_dataclass(v):
                v = {g.name: _plain(getattr(v, g.name)) for g in fields(v)}
            out[f.name] = _plain(v)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> "Scenario":
        """The scenario a `to_dict` (or a scenario file) describes; fields left out keep their defaults.

        Errors are ScenarioErrors naming the field (`where` on the error); given `where` here
        (a file name), the message starts with it and the field's dotted path.
        """
        try:
            return cls._from_dict(data)
        except ScenarioError as exc:
            if not where:
                raise
            field_ = f"{exc.where}: " if exc.where else ""
            raise ScenarioError(f"{where}: {field_}{exc}", exc.where) from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> "Scenario":
        if not isinstance(data, Mapping):
            raise ScenarioError(f"a scenario must be a table of fields, got {type(data).__name__}")
        default = cls()
        names = [f.name for f in fields(cls)]
        data = _respelled(data, DEPRECATED_KEYS, "")
        data = _unretired(data)
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ScenarioError(f"unknown scenario field(s) {', '.join(unknown)}; known: {', '.join(names)}", unknown[0])
        kw: dict[str, Any] = {}
        for name, v in data.items():
            base = getattr(default, name)
            if dataclasses.is_dataclass(base):
                kw[name] = _sub_from_dict(base, v, name)
            else:
                kw[name] = _strategy_list(v) if name == "strategies" else v
        return cls(**kw)

    @classmethod
    def load(cls, name_or_path: str | Path) -> "Scenario":
        """A scenario TOML file, or a shipped scenario by name (`SHIPPED`: `default`, `edge`, `wang2026-tau2`)."""
        p = Path(name_or_path)
        if not p.exists() and str(name_or_path) in SHIPPED:
            p = shipped_path(str(name_or_path))
        check_input_file(p, ScenarioError, "scenario file",
                         missing=f"{p}: no such scenario file (shipped scenarios: {', '.join(SHIPPED)})")
        try:
            raw = p.read_text(encoding="utf-8")
            data = tomllib.loads(raw.removeprefix("\ufeff"))  # a BOM (Windows editors) is not TOML, but harmless
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(f"{p}: cannot read scenario file: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError(f"{p}: not valid TOML: {exc}") from None
        except RecursionError:
            raise ScenarioError(f"{p}: not valid TOML: nested too deeply") from None
        if isinstance(data.get("acceptance"), str):  # `acceptance = "fit.toml"`: a fitted table, beside the scenario
            ref = Path(data["acceptance"])
            try:
                acc = load_acceptance(ref if ref.is_absolute() else p.parent / ref)
            except ScenarioError as exc:
                raise ScenarioError(f"{p}: acceptance: {exc}", exc.where) from None
            data = {**data, "acceptance": acceptance_table(acc)}
        return cls.from_dict(data, str(p))

    def to_toml(self, title: str = "") -> str:
        """A commented scenario file (fields that are None are written as comments)."""
        return _render_toml(self, title)


def load_acceptance(path: str | Path, base: AcceptanceModel | None = None) -> AcceptanceModel:
    """An `[acceptance]` table from a TOML file (what `specagent acceptance fit` writes), over `base`'s values.

    The file holds an `[acceptance]` table (a scenario file's other fields are refused: this
    sets the acceptance model only); errors name the file and the field.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8").removeprefix("\ufeff"))  # a BOM, as a scenario file's
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such acceptance file", "acceptance") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{p}: cannot read acceptance file: {exc}", "acceptance") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{p}: not valid TOML: {exc}", "acceptance") from None
    except RecursionError:
        raise ScenarioError(f"{p}: not valid TOML: nested too deeply", "acceptance") from None
    other = sorted(set(data) - {"acceptance"})
    if other or not isinstance(data.get("acceptance"), Mapping):
        found = f"field(s) {', '.join(other)}" if other else "no [acceptance] table"
        raise ScenarioError(f"{p}: an acceptance file holds one [acceptance] table (as `specagent acceptance fit` writes); "
                            f"found {found}", f"acceptance.{other[0]}" if other else "acceptance")
    try:
        return _sub_from_dict(base or AcceptanceModel(), data["acceptance"], "acceptance")
    except ScenarioError as exc:
        raise ScenarioError(f"{p}: {exc.where}: {exc}", exc.where) from None


def shipped_path(name: str) -> Path:
    return Path(str(resources.files("specagent.simulator").joinpath("scenarios", f"{name}.toml")))


def default_setting(**overrides: Any) -> Setting:
    """The built-in default, resolved: Wang et al.'s pair (arXiv:2610.21463), Qwen3.5-4B Weak on 1×H20 and Qwen3.5-397B-A17B
    Strong on 8×H20 (FP8), with the workload's recorded environment and a cached verifier context."""
    return Scenario().replace(**overrides).setting(fit_context=None)


def edge_setting(api: str | None = None, **overrides: Any) -> Setting:
    """The publication's edge–cloud setting, resolved: Weak on one local RTX 5090, Strong behind a provider's API."""
    edge = Scenario.load("edge")
    return edge.replace(**({"strong_api": api} if api else {}), **overrides).setting(fit_context=None)


# ------------------------------------------------------------------------------------------------
def _build(spec: Any, role: str, hardware_dirs: Iterable[str | Path], fit_context: int | None,
           engines: EngineCatalog | None = None) -> Deployment:
    try:
        dep = spec.build(hardware_dirs, engines)
    except ScenarioError as exc:
        raise ScenarioError(f"{role} deployment: {exc}", f"{role}.{exc.where}" if exc.where else role) from None
    _, unkeyed = dep.serving_engine.terms_key(dep.hardware)
    if unkeyed:  # once per deployment built (the pricing code resolves the terms silently, many times)
        warnings.warn(f"{role} deployment: {unkeyed}", FittedTermsNotApplied, stacklevel=3)
    if fit_context is not None:
        try:
            dep.check_fit(1, fit_context)
        except DeploymentDoesNotFit as exc:
            raise DoesNotFit(f"{role} deployment: {exc}", role) from None
    return dep


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _unretired(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` with a retired pricing engine (`RETIRED_ENGINES`: a file written when it was a choice) read as the analytic
    engine, a DeprecatedSpelling warning saying why; the figures are the same (tests/test_simulator_invariants.py)."""
    old = data.get("pricing_engine")
    if not isinstance(old, str) or old not in RETIRED_ENGINES:
        return data
    warnings.warn(f"scenario key pricing_engine = '{old}' is read as '{PRICING_ENGINES[0]}': {RETIRED_ENGINES[old]}",
                  DeprecatedSpelling, stacklevel=4)
    return {**data, "pricing_engine": PRICING_ENGINES[0]}


def _respelled(data: Mapping[str, Any], old_names: Mapping[str, str], prefix: str) -> Mapping[str, Any]:
    """`data` with deprecated keys renamed to their new names (a DeprecatedSpelling warning for each); both: an error."""
    found = [k for k in old_names if k in data]
    if not found:
        return data
    out = dict(data)
    for old in found:
        new = old_names[old]
        if new in out:
            raise ScenarioError(f"give {prefix}{new} or its old spelling {prefix}{old}, not both", f"{prefix}{old}".rstrip("."))
        warnings.warn(f"scenario key '{prefix}{old}' is now '{prefix}{new}'; the old spelling is read for one release",
                      DeprecatedSpelling, stacklevel=4)
        out[new] = out.pop(old)
    return out


def _sub_from_dict(base: Any, data: Any, name: str) -> Any:
    """A nested entry (deployment, workload, acceptance) from a table, over the default entry's values."""
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{name} must be a table of fields, got {data!r}", name)
    if isinstance(base, DeploymentSpec):
        data = _respelled(data, DEPRECATED_DEPLOYMENT_KEYS, f"{name}.")
    known = {f.name for f in fields(base)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ScenarioError(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                            f"{name}.{unknown[0]}")
    try:
        return replace(base, **data)
    except InputError as exc:
        raise ScenarioError(str(exc), f"{name}.{exc.where}" if exc.where else name) from None


#: Columns of a scenario file's lines (`scenario show` prints it: it must read on an 80-column terminal, issue #51).
TOML_WIDTH = 80


def _comment(text: str) -> str:
    return "".join(f"# {line}\n" for para in text.splitlines() for line in textwrap.wrap(para, TOML_WIDTH - 2) or [""])


def toml_entry(key: str, value: Any) -> str:
    """`key = value` as TOML; a string too long for one line as a multi-line string whose lines end in a backslash (TOML
    joins them back: the same value), broken at single spaces only, each line within TOML_WIDTH where its words allow."""
    text = tomli_w.dumps({key: value})
    head = f'{key} = "'
    if not (isinstance(value, str) and len(text) - 1 > TOML_WIDTH and text.startswith(head) and text.endswith('"\n')
            and value[:1] not in (" ", "\t")):  # the opening backslash would trim a leading space: one line then
        return text
    body, lines, line = text[len(head):-2], [], ""
    for word in re.split(r"(?<=\S) (?=\S)", body):  # a single space between two words: the only break point
        if line and len(line) + 1 + len(word) + 2 > TOML_WIDTH:
            lines.append(line + " \\")
            line = word
        else:
            line = f"{line} {word}" if line else word
    return f'{key} = """\\\n' + "\n".join([*lines, line]) + '"""\n'


def _render_toml(s: Scenario, title: str) -> str:
    out = [_comment(title) if title else "",
           _comment("A specagent scenario: `specagent predict --scenario THIS.toml` (flags override it). Fields left out "
                    "take the built-in defaults (simulator/scenarios/default.toml); `specagent scenario show` prints one.")]
    tables: list[tuple[str, Any, str]] = []
    for f in fields(s):
        v = getattr(s, f.name)
        if dataclasses.is_dataclass(v):
            tables.append((f.name, v, f.metadata.get("help", "")))
            continue
        out.append("\n" + _comment(f.metadata.get("help", "")))
        out.append(toml_entry(f.name, _plain(v)) if v is not None else f"# {f.name} = \"...\"\n")
    for name, v, help_ in tables:
        out.append(f"\n{_comment(help_)}[{name}]\n")
        subtables = []
        for g in fields(v):
            x = getattr(v, g.name)
            if isinstance(x, dict):
                subtables.append((g, x))
                continue
            out.append(_comment(g.metadata.get("help", "")))
            out.append(toml_entry(g.name, _plain(x)) if x is not None else f"# {g.name} = \"...\"\n")
        for g, x in subtables:
            if not x:  # an empty table (no fit metadata) is the default: leave it out
                continue
            out.append(f"\n{_comment(g.metadata.get('help', ''))}")
            out.append(tomli_w.dumps({name: {g.name: _plain(x)}}))
    return "".join(out)
