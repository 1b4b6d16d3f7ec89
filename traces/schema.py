"""The trace schema: one validated record type for every agent trajectory.

Why one schema: the simulator replays real runs (τ²-Bench, OpenAI-chat logs),
synthetic runs and recorded protocol logs through the same code, so all of them
must say the same things in the same units.

Token semantics (the simulator's contract):

* ``new_context_tokens`` — tokens this step adds to the *agent's* context. For an
  agent step it is the step's visible output as the next agent call sees it (not
  hidden reasoning); for a user message or tool result it is the message itself.
  The agent context before step *i* is ``system_prompt_tokens`` plus the sum of
  ``new_context_tokens`` of the agent-visible steps before *i*.
* ``output_tokens`` — tokens the acting model decodes in this step (visible
  output plus hidden reasoning). 0 for user messages and tool results (the user
  simulator's tokens are not the agent's serving cost).
* ``reasoning_tokens`` — the hidden-reasoning part of ``output_tokens`` where
  known (``None`` = unknown, 0 = known to be none).
* ``token_source`` — ``measured`` when the counts come from recorded usage
  (including an exact-total split of one message's usage over its parallel
  calls), ``estimated`` when they come from the text estimator.

Limits (checked here, at the boundary every importer, loader and generator
passes through, so an impossible count never reaches the simulator):

* ``MAX_CONTEXT_TOKENS`` = 10,485,760 — the largest context window of a public
  model: Llama 4 Scout's ``max_position_embeddings`` (meta-llama/Llama-4-Scout-17B-16E,
  config.json ``text_config``; 40× Qwen3.5's 262,144 max_position_embeddings). No model call can
  read or write more, so it bounds every per-step count, the system prompt, the
  agent context a trajectory builds up (system prompt plus every agent-visible
  step) and, for each agent step, that context plus the tokens it decodes.
* ``MAX_STEPS`` = 100,000 steps per trajectory — 500× τ²-Bench's own cap of 200
  steps per simulation (``info.max_steps`` in the shared results files).
* ``MAX_STEP_LATENCY_S`` = 604,800 s (one week) per recorded wait — an
  assumption: the shared τ²-Bench files' longest gap between two messages is
  105 s; a gap of weeks or years is a clock error (a timestamp from another run
  or epoch), not a wait to simulate. Latencies must be finite.

Holding rule: ``irreversible`` marks an action the protocol must hold until the
Strong model has reviewed the segment leading to it. Importers set it on every
WRITE call and on GENERIC calls that end or hand off the conversation
(``transfer_to_human_agents``); the kind of such a GENERIC call stays
``generic``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specagent.traces.vocabulary import (  # re-exported: the schema's own names
    SCHEMA_VERSION,
    MAX_CONTEXT_TOKENS,
    MAX_STEPS,
    MAX_STEP_LATENCY_S,
    LIMIT_REASONS,
    StepKind,
    TOOL_CALL_KINDS,
    Actor,
    TokenSource,
    DraftedBy,
    Verdict,
)

# strict: a count given as true/false or "12" is malformed input, not 1 or 12
TokenCount = Annotated[int, Field(ge=0, le=MAX_CONTEXT_TOKENS, strict=True)]
Latency = Annotated[float, Field(ge=0, le=MAX_STEP_LATENCY_S, allow_inf_nan=False)]
StepNumber = Annotated[int, Field(ge=0, lt=MAX_STEPS, strict=True)]


class SpecLabel(BaseModel):
    """Speculation label of an agent step in a recorded protocol log.

    ``segment`` numbers the drafted segment (one verification prefill) the step
    belonged to; ``verdict_tokens``/``repair_tokens`` are the Strong model's
    decoded tokens attributed to this step (non-zero on the first rejected step
    and on the repair step). ``rejected_kind``, on a ``repair`` step, is the kind of
    the drafted step the verifier rejected: the committed repair may be of another
    kind (a rejected write repaired by a read), and the acceptance fit must credit
    the rejection to the draft (absent: the repair stands in the draft's place).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    drafted_by: DraftedBy
    verdict: Verdict | None = None
    verdict_tokens: TokenCount = 0
    repair_tokens: TokenCount = 0
    segment: StepNumber = 0
    rejected_kind: StepKind | None = None


class Step(BaseModel):
    """One step of a trajectory: an agent action, a user message or a tool result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: StepNumber
    actor: Actor
    kind: StepKind
    tool_name: str | None = None
    irreversible: bool = False
    in_agent_context: bool = True
    new_context_tokens: TokenCount
    output_tokens: TokenCount = 0
    reasoning_tokens: TokenCount | None = None
    token_source: TokenSource = TokenSource.MEASURED
    model_latency_s: Latency | None = None
    tool_latency_s: Latency | None = None
    user_latency_s: Latency | None = None
    parallel_group: StepNumber | None = None
    tool_error: bool | None = None
    label: SpecLabel | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Step":
        k, a = self.kind, self.actor
        if k == StepKind.TOOL_RESULT and a != Actor.TOOL:
            raise ValueError(f"kind 'tool_result' needs actor 'tool', got {a.value!r}")
        if a == Actor.TOOL and k != StepKind.TOOL_RESULT:
            raise ValueError(f"actor 'tool' needs kind 'tool_result', got {k.value!r}")
        if k == StepKind.REPLY and a != Actor.AGENT:
            raise ValueError(f"kind 'reply' needs actor 'agent', got {a.value!r}")
        if k == StepKind.USER and a != Actor.USER:
            raise ValueError(f"kind 'user' needs actor 'user', got {a.value!r}")
        if self.tool_name == "":
            raise ValueError("tool_name must be a non-empty string or null (synthetic traces may omit it)")
        if self.tool_name is not None and k not in TOOL_CALL_KINDS and k != StepKind.TOOL_RESULT:
            raise ValueError(f"tool_name is only allowed on tool calls and tool results, not kind {k.value!r}")
        if a != Actor.AGENT and self.output_tokens != 0:
            raise ValueError(f"output_tokens must be 0 for actor {a.value!r} (only the agent decodes)")
        if self.reasoning_tokens is not None and self.reasoning_tokens > self.output_tokens:
            raise ValueError(
                f"reasoning_tokens ({self.reasoning_tokens}) must not exceed output_tokens ({self.output_tokens})"
            )
        if self.label is not None and a != Actor.AGENT:
            raise ValueError("speculation labels belong on agent steps only")
        if not self.in_agent_context and self.new_context_tokens != 0:
            raise ValueError("a step outside the agent's context must have new_context_tokens 0")
        return self

    @property
    def is_tool_call(self) -> bool:
        return self.kind in TOOL_CALL_KINDS

    @property
    def holds(self) -> bool:
        """True when the protocol must hold this agent action for review."""
        return self.actor == Actor.AGENT and self.irreversible


class Outcome(BaseModel):
    """Task outcome as recorded by the benchmark (None where not recorded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reward: Annotated[float, Field(allow_inf_nan=False)] | None = None
    success: bool | None = None


MetaValue = str | int | float | bool | None


class Trajectory(BaseModel):
    """One task's run: who did what, with token counts and latencies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    task_id: str
    domain: str
    source: str
    outcome: Outcome = Field(default_factory=Outcome)
    system_prompt_tokens: TokenCount
    system_prompt_source: TokenSource = TokenSource.MEASURED
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    metadata: dict[str, MetaValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _indices(self) -> "Trajectory":
        ctx = self.system_prompt_tokens
        for i, s in enumerate(self.steps):
            if s.index != i:
                raise ValueError(f"steps[{i}].index is {s.index}; expected {i} (steps are numbered from 0 in order)")
            if s.actor == Actor.AGENT and ctx + s.output_tokens > MAX_CONTEXT_TOKENS:
                raise ValueError(f"steps[{i}]: the context before the step plus its output_tokens at most {MAX_CONTEXT_TOKENS:,} "
                                 f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]}); got {ctx:,} + {s.output_tokens:,}")
            if s.in_agent_context:
                ctx += s.new_context_tokens
            if ctx > MAX_CONTEXT_TOKENS:
                raise ValueError(f"steps[{i}]: an agent context of at most {MAX_CONTEXT_TOKENS:,} tokens "
                                 f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]}); it reaches {ctx:,} here")
        return self

    @property
    def is_protocol_log(self) -> bool:
        """A trace with speculation labels is a recorded protocol log, else a reference trajectory."""
        return any(s.label is not None for s in self.steps)

    @property
    def n_turns(self) -> int:
        """Agent messages plus user messages (parallel calls of one message count once)."""
        n = 0
        seen_groups: set[int] = set()
        for s in self.steps:
            if s.actor == Actor.TOOL:
                continue
            if s.parallel_group is not None:
                if s.parallel_group in seen_groups:
                    continue
                seen_groups.add(s.parallel_group)
            n += 1
        return n
