"""The acceptance model: what the Strong verifier would say about drafted steps.

A reference trajectory records what an agent did, not what a verifier would have judged,
so these verdicts are *assumptions*: every figure here is shown in the simulator's output
and can be set by the user (ideally from a measured protocol log). The defaults are one
documented point of the set that reproduces the published τ²-Bench protocol figures (Wang et al., arXiv:2610.21463)
through this simulator (`specagent acceptance calibrate`, docs/protocol-calibration.md): a
calibration to published aggregates, not a measurement of your deployment.

Reasoning. The Strong model of the evaluated setting (Qwen3.5) is a thinking model: unless told not to,
it reasons before it answers, in a verification as in a repair. Those reasoning tokens are
decoded tokens (Strong decode memory traffic; API output tokens in the edge setting), so
they are named parts of the verdict model here:

* ``thinking`` off: verdicts and repairs decode their visible answer only.
* ``thinking`` on, ``verify_reasoning_tokens = None`` (the default): a verification reasons
  as long as the workload records the Strong model reasoning for *the step the verdict
  decides* — the first rejected step, or the segment's last step when the whole segment is
  accepted. A step's recorded reasoning is ``max(out_tokens - ctx_tokens, 0)``: decoded
  tokens (visible + hidden reasoning, `traces/schema.py`) less the visible message; a
  workload that does not record reasoning (``reasoning_tokens`` unknown) gives 0.
* ``thinking`` on, ``repair_reasoning_tokens = None``: a repair turn reasons as long as the
  workload records for the repaired step, so it decodes that step's recorded output.
* An integer N (either field) replaces the workload's figure by N tokens per call.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from specagent.common.errors import InputError
from specagent.traces.vocabulary import MAX_CONTEXT_TOKENS

#: Largest per-task sd accepted (logit scale): a guard against a typo (sd 10 makes every task accept all or nothing),
#: not a measured limit.
MAX_TASK_SD = 10.0
#: Largest Weak/Strong token ratio accepted: a guard against a typo (a drafter writing 100x the reference step's tokens
#: is not a speculative setting any more), not a measured limit.
MAX_WEAK_TOKEN_RATIO = 100.0

ASSUMPTION_NOTE = "illustrative default, not a measurement: set it from your own protocol logs"
#: Where the defaults below come from (the `source` of AcceptanceModel()).
CALIBRATED_NOTE = ("calibrated to the published τ²-Bench protocol figures (Wang et al., arXiv:2610.21463) in the "
                   "publication's evaluated setting (`--scenario wang2026-tau2`: agent-side time, a verifier re-reading its "
                   "context): candidate 401 of `specagent acceptance calibrate --samples 512 --seed 0`, the central point "
                   "of the 14 candidates (7 with reasoning tied to the workload) meeting every τ² figure but two: "
                   "retail_exact_flops (met by none) and tau2_wall_ratio (met by 14, never with every other τ² figure; "
                   "0.715 at this point, published 0.41–0.54). The same candidate was the central point of the search "
                   "run in the default setting before the wall and FLOPs figures were scored (docs/protocol-calibration.md). "
                   "Not a measurement of your deployment: set it from your own protocol logs")

#: The step kinds a verdict is keyed by (τ²-Bench's tool tags, plus replies to the user).
KINDS = ("read", "write", "generic", "think", "reply")
#: Default per-kind probability that the semantic verifier accepts a drafted step (CALIBRATED_NOTE).
DEFAULT_ACCEPT = {"read": 0.410, "write": 0.342, "generic": 0.365, "think": 0.433, "reply": 0.387}
#: Default per-kind probability that a drafted step equals exactly what the Strong model would write (CALIBRATED_NOTE).
DEFAULT_EXACT = {"read": 0.250, "write": 0.204, "generic": 0.227, "think": 0.182, "reply": 0.045}
#: Default per-kind chance that the router strategy sends a step to the Strong model.
#: The setting the default acceptance was calibrated on (simulator/applicability.py warns when a run differs).
DEFAULT_CALIBRATED_ON = {"weak_model": "qwen3.5-4b", "strong_model": "qwen3.5-397b-a17b", "weak_hardware": "h20",
                         "strong_hardware": "h20", "workload": "tau2_airline.jsonl"}
#: The keys `calibrated_on` may hold.
CALIBRATED_ON_KEYS = tuple(DEFAULT_CALIBRATED_ON)
DEFAULT_ROUTE_STRONG = {"read": 0.2, "write": 1.0, "generic": 1.0, "think": 0.2, "reply": 0.5}


@dataclass(frozen=True)
class AcceptanceModel:
    """Seeded verdicts for drafted steps of a reference trajectory.

    p(accept step) = accept[kind] * position_decay**position_in_segment, lowered by a
    factor (1 - correlation) right after a rejection in the same trajectory, so that
    rejections cluster as they do when a task is hard for the Weak model. With task_sd > 0
    each trajectory draws one u ~ N(0, task_sd^2) (`task_normals`, seeded by trajectory) and
    accept[kind] becomes expit(logit(accept[kind]) + u) for it (`for_task`): some tasks are
    harder all through, which is what `acceptance fit` measures as a per-task random effect.
    """

    accept: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ACCEPT), metadata={
        "help": "Per step kind: probability that the semantic verifier accepts a drafted step."})
    exact: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_EXACT), metadata={
        "help": "Per step kind: probability that a drafted step equals exactly what the Strong model would write."})
    position_decay: float = field(default=0.958, metadata={
        "help": "Acceptance falls by this factor per position within a drafted segment."})
    correlation: float = field(default=0.037, metadata={
        "help": "Right after a rejection, acceptance is lowered by the factor (1 - correlation)."})
    task_sd: float = field(default=0.0, metadata={
        "help": "Per-task difficulty: sd, on the logit scale, of a per-trajectory effect u added to logit(accept[kind]) "
                "(0: every task alike; the default, not calibrated: the published figures are aggregates). With it "
                "accept[kind] is the acceptance of the median task (u = 0)."})
    weak_token_ratio: float = field(default=0.532, metadata={
        "flag": "weak-ratio", "help": "Weak tokens per Strong token for the same step."})
    verdict_tokens: int = field(default=115, metadata={
        "help": "Tokens in a rejection verdict's reason (its replacement call is counted on top)."})
    accept_verdict_tokens: int = field(default=39, metadata={
        "help": "Tokens of the Strong model's verdict when it accepts the whole segment."})
    p_valid_replacement: float = field(default=0.948, metadata={
        "help": "Chance a verdict's replacement call is valid (else one Strong repair turn)."})
    escalation_recall: float = field(default=0.7, metadata={
        "help": "Collaborative strategy: chance the Weak model detects a step the verifier would reject."})
    route_strong: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ROUTE_STRONG), metadata={
        "help": "Router strategy: per step kind, chance a step is sent to the Strong model."})
    thinking: bool = field(default=True, metadata={
        "help": "The Strong model reasons before its verdicts and repairs (Qwen3.5 does unless told not to)."})
    verify_reasoning_tokens: int | None = field(default=None, metadata={
        "help": "Reasoning tokens per verification when thinking (none: the workload's recorded reasoning of the step "
                "the verdict decides)."})
    repair_reasoning_tokens: int | None = field(default=None, metadata={
        "help": "Reasoning tokens per repair turn when thinking (none: the workload's recorded reasoning of the "
                "repaired step)."})
    source: str = field(default=CALIBRATED_NOTE, metadata={"cli": False, "help": "Where these figures come from."})
    calibrated_on: dict = field(default_factory=lambda: dict(DEFAULT_CALIBRATED_ON), metadata={
        "cli": False, "help": "The setting these figures were calibrated or fitted on (weak_model, strong_model, "
                              "weak_hardware, strong_hardware, workload); empty: none recorded. A run elsewhere is warned."})
    fit: dict = field(default_factory=dict, metadata={
        "cli": False, "help": "How these figures were fitted (`specagent acceptance fit`): the logs, the method, 95% "
                              "intervals per parameter (`intervals`, dotted name -> [low, high]) and the tests."})

    def __post_init__(self) -> None:
        defaults = {"accept": DEFAULT_ACCEPT, "exact": DEFAULT_EXACT, "route_strong": DEFAULT_ROUTE_STRONG}
        for name, default in defaults.items():
            table = getattr(self, name)
            if not isinstance(table, dict):
                raise InputError(f"acceptance.{name} must be a table of step kind -> probability, got {table!r}", name)
            unknown = sorted(set(table) - set(KINDS), key=str)
            if unknown:
                raise InputError(f"acceptance.{name}: unknown step kind {unknown[0]!r}; expected one of {', '.join(KINDS)}",
                                 f"{name}.{unknown[0]}")
            for k, v in table.items():
                if not _probability(v):
                    raise InputError(f"acceptance.{name}[{k!r}] must be a probability in [0, 1], got {_shown(v)}", f"{name}.{k}")
            # a partial table sets the kinds it names; the others keep their defaults (in kind order)
            object.__setattr__(self, name, {k: table.get(k, default[k]) for k in KINDS})
        for name in ("position_decay", "correlation", "p_valid_replacement", "escalation_recall"):
            v = getattr(self, name)
            if not _probability(v):
                raise InputError(f"acceptance.{name} must be a probability in [0, 1], got {_shown(v)}", name)
        r = self.weak_token_ratio
        if not (_number(r) and 0 < r <= MAX_WEAK_TOKEN_RATIO):
            raise InputError(f"acceptance.weak_token_ratio (Weak tokens per Strong token) must be a number in "
                             f"(0, {MAX_WEAK_TOKEN_RATIO:g}], got {_shown(r)}", "weak_token_ratio")
        for name in ("verdict_tokens", "accept_verdict_tokens"):
            v = getattr(self, name)
            if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v <= MAX_CONTEXT_TOKENS):
                raise InputError(f"acceptance.{name} must be a whole number of tokens in [0, {MAX_CONTEXT_TOKENS:,}] "
                                 f"(the largest context window), got {_shown(v)}", name)
        if not isinstance(self.thinking, bool):
            raise InputError(f"acceptance.thinking must be true or false, got {self.thinking!r}", "thinking")
        if not isinstance(self.source, str):
            raise InputError(f"acceptance.source must be a string saying where the figures come from, got {self.source!r}",
                             "source")
        sd = self.task_sd
        if not (_number(sd) and 0.0 <= sd <= MAX_TASK_SD):
            raise InputError(f"acceptance.task_sd (sd of the per-task effect, logit scale) must be a number in "
                             f"[0, {MAX_TASK_SD:g}], got {sd!r}", "task_sd")
        for name in ("verify_reasoning_tokens", "repair_reasoning_tokens"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v <= MAX_CONTEXT_TOKENS):
                raise InputError(f"acceptance.{name} must be a whole number of tokens in [0, {MAX_CONTEXT_TOKENS:,}] "
                                 f"or left out (tied to the workload's recorded reasoning), got {v!r}", name)
        _check_fit(self.fit)
        for k in self.fit.get("intervals", {}):  # read by `--acceptance-ranges fitted`: refused here, where the file is known
            if not self._is_parameter(k):
                raise InputError(f"acceptance.fit.intervals: {k!r} is not a numeric field (or table entry) of the acceptance "
                                 "model", f"fit.intervals.{k}")
        on = self.calibrated_on
        if not isinstance(on, dict) or any(k not in CALIBRATED_ON_KEYS or not isinstance(v, str) for k, v in on.items()):
            raise InputError(f"acceptance.calibrated_on must be a table of {', '.join(CALIBRATED_ON_KEYS)} (text), got {on!r}",
                             "calibrated_on")

    def _is_parameter(self, path: str) -> bool:
        """'accept.read' (a kind of a table) or 'position_decay' (a field holding a number): what an interval can be of."""
        name, _, kind = path.partition(".")
        v = getattr(self, name, None) if name in {f.name for f in fields(self)} else None
        if kind:
            return name in ("accept", "exact", "route_strong") and kind in v  # type: ignore[operator]
        return _number(v)

    @classmethod
    def constant(cls, p: float, **kw) -> "AcceptanceModel":
        """Every kind accepted with probability p, no position decay or correlation, and Weak steps as long as the
        reference's (weak_token_ratio 1 unless given): a neutral model for tests, hand traces and the live runner."""
        return cls(**{"weak_token_ratio": 1.0, **kw}).with_constant(p)

    def with_constant(self, p: float) -> "AcceptanceModel":
        """This model with every kind accepted (and exactly matched) with probability p, no decay or correlation."""
        kinds = DEFAULT_ACCEPT.keys()
        return replace(self, accept={k: p for k in kinds}, exact={k: p for k in kinds}, position_decay=1.0, correlation=0.0,
                       task_sd=0.0, calibrated_on={})  # the user's own figure: no calibration setting to warn about

    def for_task(self, u: float) -> "AcceptanceModel":
        """This model as one task with effect u (in sd units: the logit shift is task_sd * u) sees it: accept[kind]
        shifted on the logit scale, task_sd 0. Only the semantic verdict's acceptance moves (`exact` is a property of
        the drafted text, which the fit measures independently of the task effect)."""
        if self.task_sd == 0.0:
            return self
        shifted = shifted_accept(np.array(list(self.accept.values())), np.float64(self.task_sd * float(u)))
        return replace(self, accept={k: float(p) for k, p in zip(self.accept, shifted)}, task_sd=0.0)

    def p_accept(self, kind: str, position: int, after_rejection: bool, exact: bool = False) -> float:
        table = self.exact if exact else self.accept
        p = table.get(kind, table.get("write", 0.0)) * self.position_decay**position
        if after_rejection:
            p *= 1.0 - self.correlation
        return p

    # --- reasoning: the rule of the module docstring, for one step (ints) or many (numpy arrays) ---
    @staticmethod
    def recorded_reasoning(out_tokens, ctx_tokens):
        """The hidden reasoning a workload records for a step: decoded tokens less the visible message."""
        return np.maximum(np.subtract(out_tokens, ctx_tokens), 0)

    def _reasoning(self, fixed, out_tokens, ctx_tokens):
        """No reasoning when not thinking; a fixed count where one is set; else what the workload recorded for the step."""
        if not self.thinking:
            return np.zeros_like(np.asarray(out_tokens))
        if fixed is not None:
            return np.full_like(np.asarray(out_tokens), fixed)
        return self.recorded_reasoning(out_tokens, ctx_tokens)

    def verify_reasoning(self, out_tokens, ctx_tokens):
        """Reasoning tokens a verification decodes when its verdict decides this step (see the module docstring)."""
        return self._reasoning(self.verify_reasoning_tokens, out_tokens, ctx_tokens)

    def repair_reasoning(self, out_tokens, ctx_tokens):
        """Reasoning tokens of the repair turn that rewrites this step."""
        return self._reasoning(self.repair_reasoning_tokens, out_tokens, ctx_tokens)

    def repair_decode(self, out_tokens, ctx_tokens):
        """Tokens a repair turn decodes: the step's visible message plus the repair's reasoning."""
        visible = np.subtract(out_tokens, self.recorded_reasoning(out_tokens, ctx_tokens))
        return visible + self.repair_reasoning(out_tokens, ctx_tokens)

    def describe(self) -> dict:
        d = asdict(self)
        d["source"] = self.source
        return d


#: Keys an `[acceptance.fit]` table may hold (written by `specagent acceptance fit`).
FIT_KEYS = ("method", "interval_method", "logs", "records", "intervals", "tests", "goodness_of_fit", "not_fitted", "diagnostics")


def _check_fit(fit: object) -> None:
    """`fit` is metadata, but its intervals are read by uncertainty propagation: check their shape once, here."""
    if not isinstance(fit, dict):
        raise InputError(f"acceptance.fit must be a table, got {fit!r}", "fit")
    unknown = sorted(set(fit) - set(FIT_KEYS), key=str)
    if unknown:
        raise InputError(f"acceptance.fit: unknown key {unknown[0]!r}; expected one of {', '.join(FIT_KEYS)}", f"fit.{unknown[0]}")
    for key, (kind, said) in _FIT_SHAPES.items():
        v = fit.get(key)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool) or (key == "records" and v < 0)
                              or (key == "logs" and not all(isinstance(x, str) for x in v))):
            raise InputError(f"acceptance.fit.{key} must be {said}, got {v!r}", f"fit.{key}")
    iv = fit.get("intervals", {})
    if not isinstance(iv, dict):
        raise InputError(f"acceptance.fit.intervals must be a table of parameter -> [low, high], got {iv!r}", "fit.intervals")
    for k, v in iv.items():
        ok = (isinstance(v, (list, tuple)) and len(v) == 2 and all(_number(x) and math.isfinite(x) for x in v)
              and v[0] <= v[1])
        if not ok:
            # an unquoted dotted key (`accept.read = [...]`) is a TOML table: say how to write the name
            hint = (f" (a dotted name is quoted in TOML: '{k}.{next(iter(v))}' = [low, high])"
                    if isinstance(v, dict) and len(v) == 1 else "")
            raise InputError(f"acceptance.fit.intervals[{k!r}] must be [low, high] with finite low <= high, got {v!r}{hint}",
                             f"fit.intervals.{k}")


def _shown(v: object) -> object:
    """A value as an error shows it: a string quoted, so that "0.5" (text) never reads as the number 0.5."""
    return repr(v) if isinstance(v, str) else v


#: The shape of each `fit` entry `acceptance fit` writes, checked because reports and ranges read them.
_FIT_SHAPES = {"method": (str, "text"), "interval_method": (str, "text"), "logs": ((list, tuple), "a list of the logs fitted"),
               "records": (numbers.Integral, "a whole number of records"), "tests": (dict, "a table"),
               "goodness_of_fit": (dict, "a table"), "not_fitted": (dict, "a table"), "diagnostics": (dict, "a table")}


def _number(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _probability(v: object) -> bool:
    return _number(v) and 0.0 <= v <= 1.0  # type: ignore[operator]  # NaN fails the comparison


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
#: Independent draws per unit: 0 = the verdict (or match / route / trouble), 1 = the follow-up
#: (valid replacement call, escalation).
UNIT_STREAMS = 2


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def unit_uniforms(seed: int, traj: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Uniforms in [0, 1) for each unit of each trajectory, shape (n, UNIT_STREAMS).

    Counter-based (SplitMix64 of seed, trajectory index, unit position, stream): a draw depends
    only on *which* unit it decides, never on evaluation order, on the other trajectories or
    on how many draws came before. That is what lets the lockstep (vectorised) planner and
    the per-episode loop planner make the very same decisions, and it keeps results
    independent of how a run is batched. Each unit is judged at most once (judging stops at
    the first rejection, and every judged unit is then committed), so one draw per stream
    per unit suffices.
    """
    if seed < 0:
        raise ValueError("seed must be non-negative")
    traj = np.asarray(traj, dtype=np.int64)
    position = np.asarray(position, dtype=np.int64)
    if traj.size and (traj.min() < 0 or position.min() < 0):
        raise ValueError("trajectory index and unit position must be non-negative")
    with np.errstate(over="ignore"):
        key = _splitmix64(np.full(traj.shape, seed, dtype=np.uint64))
        key = _splitmix64(key ^ traj.astype(np.uint64))
        key = _splitmix64(key ^ position.astype(np.uint64))
        streams = np.arange(UNIT_STREAMS, dtype=np.uint64)
        z = _splitmix64(key[:, None] ^ (streams[None, :] * _GOLDEN))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


#: The counter position of a trajectory's task-effect draw: no unit has it (positions are counts of units).
_TASK_POSITION = np.uint64(2**63 - 1)


def task_normals(seed: int, traj: np.ndarray) -> np.ndarray:
    """One standard normal per trajectory (its task effect in sd units), counter-based like `unit_uniforms` (a
    stream of its own: SplitMix64 of seed, trajectory, a position no unit has), so the lockstep and per-episode
    planners draw the same u for a trajectory however a run is batched. Read only when task_sd > 0."""
    from scipy.special import ndtri

    traj = np.asarray(traj, dtype=np.int64)
    with np.errstate(over="ignore"):
        key = _splitmix64(np.full(traj.shape, seed, dtype=np.uint64))
        key = _splitmix64(key ^ traj.astype(np.uint64))
        z = _splitmix64(key ^ _TASK_POSITION)
    return ndtri(((z >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 2**53))


def shifted_accept(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """expit(logit(p) + shift), 0 and 1 kept (a kind always or never accepted is so for every task): one task's table
    (`AcceptanceModel.for_task`) or the lockstep planner's per-trajectory tables, by the same arithmetic."""
    p = np.asarray(p, dtype=np.float64)
    inner = (p > 0.0) & (p < 1.0)
    q = np.clip(p, 1e-300, 1.0 - 1e-16)
    with np.errstate(divide="ignore", over="ignore"):
        out = 1.0 / (1.0 + np.exp(-(np.log(q / (1.0 - q)) + shift)))
    return np.where(inner, out, p)
