"""Workload profiles: the distributions a synthetic workload is drawn from, as TOML data files.

Why data files: a workload is an assumption about the world; each parameter
carries a ``source`` string saying where it came from (a fit to named traces, a
statement in the publication, or an explicit assumption).

The generative model (see synth.py):

* ``turns`` — agent messages + user text messages per task (a message with N
  parallel tool calls is one turn; tool results are not turns);
* the kind of each turn follows a first-order Markov chain over ``EVENT_KINDS``
  (``initial`` for the first turn, ``transitions`` after);
* a tool-call turn of kind k carries 1 + extra parallel calls with probability
  ``parallel.prob[k]``, all of the turn's kind, each followed by its tool result;
* per kind, ``tokens[kind].context`` (tokens added to the agent's context) and,
  for agent kinds, ``tokens[kind].reasoning`` (hidden decode; output = context +
  reasoning);
* WRITE calls are irreversible; a GENERIC call is irreversible with probability
  ``irreversible_generic_prob`` (e.g. transfer to a human);
* tool and user latencies, system prompt tokens, success rate.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specagent.common import atomic

from .errors import TraceFormatError, from_validation_error
from .files import read_text
from .schema import LIMIT_REASONS, MAX_CONTEXT_TOKENS, MAX_STEP_LATENCY_S, MAX_STEPS

#: Most turns a profile may draw for one task: 100x the longest workloads the publication names (about 100 turns in
#: everyday-life services; 30–80 in customer service). The generator's memory grows with the turns it draws,
#: so an absurd bound (1e9 turns) is refused here rather than discovered as an out-of-memory kill.
MAX_PROFILE_TURNS = 10_000
LIMIT_REASONS = {**LIMIT_REASONS, MAX_PROFILE_TURNS: "100x the longest workloads in the publication, about 100 turns"}

#: States of the turn-kind Markov chain (tool results follow calls deterministically).
EVENT_KINDS: tuple[str, ...] = ("user", "reply", "read", "write", "generic", "think")
TOOL_EVENT_KINDS = ("read", "write", "generic", "think")
TOKEN_KINDS: tuple[str, ...] = ("user", "reply", "read", "write", "generic", "think", "tool_result")


class Dist(BaseModel):
    """A 1-D distribution, clipped to [lo, hi]; integer draws are rounded.

    ``lognormal`` (mu, sigma of log x), ``uniform`` (low, high; for integers both
    ends inclusive), ``constant`` (value).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    family: Literal["lognormal", "uniform", "constant"]
    mu: float | None = None
    sigma: float | None = Field(default=None, ge=0)
    low: float | None = None
    high: float | None = None
    value: float | None = None
    lo: float = 0.0
    hi: float | None = None
    integer: bool = False
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _params(self) -> "Dist":
        need = {"lognormal": ("mu", "sigma"), "uniform": ("low", "high"), "constant": ("value",)}[self.family]
        for p in need:
            if getattr(self, p) is None:
                raise ValueError(f"{self.family} distribution needs '{p}'")
        if self.family == "uniform" and self.high < self.low:
            raise ValueError(f"uniform needs low <= high, got {self.low} > {self.high}")
        if self.family == "uniform" and max(abs(self.low), abs(self.high)) > 1e15:
            raise ValueError(f"uniform needs low and high within ±1e15 (the random generator's range), got {self.low}, {self.high}")
        if self.hi is not None and self.hi < self.lo:
            raise ValueError(f"clip needs lo <= hi, got {self.lo} > {self.hi}")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw n values (always consumes the same random stream for the same n)."""
        if self.family == "lognormal":
            x = rng.lognormal(self.mu, abs(self.sigma), n)  # abs: a sigma of -0.0 passes ge=0 but numpy refuses it
        elif self.family == "uniform":
            if self.integer:
                x = rng.integers(int(round(self.low)), int(round(self.high)) + 1, n).astype(float)
            else:
                x = rng.uniform(self.low, self.high, n)
        else:
            x = np.full(n, float(self.value))
        x = np.clip(x, self.lo, self.hi if self.hi is not None else np.inf)
        if self.integer:
            return np.rint(x).astype(np.int64)
        return x

    def support(self) -> tuple[float, float]:
        """Smallest and largest value a draw can take (after clipping; inf when unbounded)."""
        hi = self.hi if self.hi is not None else np.inf

        def clip(v: float) -> float:
            return min(max(v, self.lo), hi)

        if self.family == "lognormal":
            return clip(0.0), clip(np.inf)
        if self.family == "uniform":
            return clip(self.low), clip(self.high)
        return clip(self.value), clip(self.value)

    def check_range(self, where: str, low: float, high: float, integer: bool = False) -> None:
        """Raise ValueError naming `where` unless every draw lies in [low, high] (and is an integer if asked)."""
        lo, hi = self.support()
        if integer and not self.integer:
            raise ValueError(f"{where}: an integer distribution (integer = true)")
        if lo < low:
            raise ValueError(f"{where}: draws of at least {_num(low)} (raise lo, low or value); the smallest draw is {_num(lo)}")
        if hi > high:
            why = f" ({LIMIT_REASONS[high]})" if high in LIMIT_REASONS else ""
            fix = "set hi" if self.family == "lognormal" and self.hi is None else "lower hi, high or value"
            raise ValueError(f"{where}: draws of at most {_num(high)}{why}; {fix}: the largest draw is {_num(hi)}")

    def mean(self) -> float:
        """Mean before clipping/rounding (for reports)."""
        if self.family == "lognormal":
            with np.errstate(over="ignore"):
                return float(np.exp(self.mu + self.sigma**2 / 2))
        if self.family == "uniform":
            return (self.low + self.high) / 2
        return float(self.value)


def _num(x: float) -> str:
    return f"{x:,.0f}" if np.isfinite(x) and float(x).is_integer() else f"{x:g}"


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    value: float
    source: str = Field(min_length=1)


class KindProbs(BaseModel):
    """Probabilities over EVENT_KINDS (missing kinds are 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    probs: dict[str, float]
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "KindProbs":
        _check_probs(self.probs, "probs")
        return self

    def vector(self) -> np.ndarray:
        return np.array([self.probs.get(k, 0.0) for k in EVENT_KINDS])


class Transitions(BaseModel):
    """Row-stochastic matrix: matrix[from][to] over EVENT_KINDS."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    matrix: dict[str, dict[str, float]]
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "Transitions":
        for k in EVENT_KINDS:
            if k not in self.matrix:
                raise ValueError(f"transitions.matrix needs a row for {k!r}")
            _check_probs(self.matrix[k], f"matrix.{k}")
        return self

    def array(self) -> np.ndarray:
        return np.array([[self.matrix[a].get(b, 0.0) for b in EVENT_KINDS] for a in EVENT_KINDS])


def _check_probs(p: dict[str, float], where: str) -> None:
    bad = [k for k in p if k not in EVENT_KINDS]
    if bad:
        raise ValueError(f"{where}: unknown kind {bad[0]!r}; expected one of {EVENT_KINDS}")
    if any(v < 0 for v in p.values()):
        raise ValueError(f"{where}: probabilities must be >= 0")
    s = sum(p.values())
    if abs(s - 1.0) > 1e-6:
        raise ValueError(f"{where}: probabilities must sum to 1, got {s:.6f}")


class Parallel(BaseModel):
    """Per tool-call kind, the probability that a turn holds more than one call; extra calls' count."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    prob: dict[str, float]
    extra_calls: Dist
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "Parallel":
        for k, v in self.prob.items():
            if k not in TOOL_EVENT_KINDS:
                raise ValueError(f"parallel.prob: {k!r} is not a tool-call kind {TOOL_EVENT_KINDS}")
            if not 0 <= v <= 1:
                raise ValueError(f"parallel.prob.{k} must be in [0, 1], got {v}")
        return self

    def vector(self) -> np.ndarray:
        """Probability per EVENT_KINDS entry (0 for user/reply)."""
        return np.array([self.prob.get(k, 0.0) for k in EVENT_KINDS])


class TokenSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    context: Dist
    reasoning: Dist | None = None


class WorkloadProfile(BaseModel):
    """A synthetic workload: every parameter says where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str
    domain: str
    source: str = Field(min_length=1)
    turns: Dist
    initial: KindProbs
    transitions: Transitions
    parallel: Parallel
    tokens: dict[str, TokenSpec]
    irreversible_generic_prob: Param
    tool_latency_s: Dist
    user_latency_s: Dist
    system_prompt_tokens: Dist
    success_rate: Param

    @model_validator(mode="after")
    def _check(self) -> "WorkloadProfile":
        missing = [k for k in TOKEN_KINDS if k not in self.tokens]
        if missing:
            raise ValueError(f"tokens: an entry for every kind {TOKEN_KINDS}; missing {missing}")
        unknown = [k for k in self.tokens if k not in TOKEN_KINDS]
        if unknown:
            raise ValueError(f"tokens: entries only for the kinds {TOKEN_KINDS}; unknown {unknown}")
        for k in ("user", "tool_result"):
            if self.tokens[k].reasoning is not None:
                raise ValueError(f"tokens.{k}.reasoning must be absent (only the agent decodes)")
        if not self.turns.integer:
            raise ValueError("turns: an integer distribution (integer = true)")
        if not 0 <= self.success_rate.value <= 1 or not 0 <= self.irreversible_generic_prob.value <= 1:
            raise ValueError("success_rate: a probability in [0, 1] (and irreversible_generic_prob too)")
        # every draw must be a value the trace schema accepts (schema.py: sourced limits)
        self.turns.check_range("turns", 1, MAX_PROFILE_TURNS, integer=True)
        self.parallel.extra_calls.check_range("parallel.extra_calls", 0, MAX_STEPS, integer=True)
        self.system_prompt_tokens.check_range("system_prompt_tokens", 0, MAX_CONTEXT_TOKENS, integer=True)
        for k, spec in self.tokens.items():
            spec.context.check_range(f"tokens.{k}.context", 0, MAX_CONTEXT_TOKENS, integer=True)
            if spec.reasoning is not None:
                spec.reasoning.check_range(f"tokens.{k}.reasoning", 0, MAX_CONTEXT_TOKENS, integer=True)
        self.tool_latency_s.check_range("tool_latency_s", 0, MAX_STEP_LATENCY_S)
        self.user_latency_s.check_range("user_latency_s", 0, MAX_STEP_LATENCY_S)
        return self

    def to_toml(self) -> str:
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))


def profiles_dir() -> Path:
    return Path(str(resources.files("specagent.traces").joinpath("data/profiles")))


def list_profiles() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def load_profile(name_or_path: str | os.PathLike) -> WorkloadProfile:
    """Load a shipped profile by name, or a TOML file by path."""
    p = Path(name_or_path)
    if not p.exists():
        cand = profiles_dir() / f"{name_or_path}.toml"
        if not cand.exists():
            raise FileNotFoundError(f"no profile file {str(name_or_path)!r} and no shipped profile of that name; "
                                    f"shipped: {', '.join(list_profiles())}")
        p = cand
    try:
        data = tomllib.loads(read_text(p, "a workload profile (TOML)"))
    except tomllib.TOMLDecodeError as e:
        raise TraceFormatError(str(p), "file", "<toml>", f"valid TOML ({e})") from None
    except RecursionError:
        raise TraceFormatError(str(p), "file", "<toml>", "valid TOML (nested too deeply)") from None
    try:
        return WorkloadProfile.model_validate(data)
    except ValidationError as e:
        raise from_validation_error(str(p), "profile", e) from None


def save_profile(profile: WorkloadProfile, path: str | os.PathLike) -> Path:

    return atomic.write_text(path, profile.to_toml())
