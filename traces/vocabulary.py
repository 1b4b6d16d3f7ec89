"""The trace vocabulary without the validated records: limits, step kinds, actors.

Why a module of its own: the settings and the replay engine name these (a limit in an error message,
`Actor.USER` in an environment) but build no trajectory, so they should not pay for importing the
pydantic record types of `traces/schema.py`, which re-exports everything here. The limits' sources are
in that module's docstring.
"""

from __future__ import annotations

import enum

SCHEMA_VERSION = 1

#: Largest context window of a public model (Llama 4 Scout, max_position_embeddings); see the module docstring.
MAX_CONTEXT_TOKENS = 10_485_760
#: Most steps in one trajectory: 500× τ²-Bench's cap of 200 steps per simulation.
MAX_STEPS = 100_000
#: Longest single recorded wait (one week); the shared τ²-Bench files' longest is 105 s.
MAX_STEP_LATENCY_S = 604_800.0

#: Latest arrival a request trace may hold, in seconds after its first request (about 31.7 years): past it a float64
#: clock cannot hold a request's service time (its step at 1e9 s is 1.2e-7 s; at 1e300 s it is 1e284 s, so a request
#: sent there finished the instant it was sent), so a later arrival is a unit or clock error, not a trace.
MAX_ARRIVAL_S = 1e9

#: Most trajectories one run generates: a guard against a typo (1e12 for 1e2), not a limit of the method. At the
#: measured 25-30 k trajectories/s (README, benchmarks/simulate.py) 10^8 already takes about an hour; split larger runs.
MAX_TRAJECTORIES = 100_000_000

#: Why each limit holds, for error messages (keyed by the limit's value).
LIMIT_REASONS: dict[float, str] = {
    MAX_CONTEXT_TOKENS: "the largest public context window, Llama 4 Scout's 10,485,760 tokens",
    MAX_STEPS: "500x tau2-bench's cap of 200 steps per simulation",
    MAX_STEP_LATENCY_S: "one week; a longer gap is a clock error, not a wait",
    MAX_ARRIVAL_S: "about 31.7 years after the first request; a float64 clock cannot hold a request's service time much later",
}

class StepKind(str, enum.Enum):
    """What a step is. Tool-call kinds follow τ²-Bench's READ/WRITE/GENERIC/THINK tags."""

    READ = "read"
    WRITE = "write"
    GENERIC = "generic"
    THINK = "think"
    REPLY = "reply"  # agent message to the user, no tool call
    USER = "user"  # user message
    TOOL_RESULT = "tool_result"


TOOL_CALL_KINDS = frozenset({StepKind.READ, StepKind.WRITE, StepKind.GENERIC, StepKind.THINK})
AGENT_KINDS = TOOL_CALL_KINDS | {StepKind.REPLY}


class Actor(str, enum.Enum):
    """Who produces the step."""

    AGENT = "agent"
    USER = "user"
    TOOL = "tool"


class TokenSource(str, enum.Enum):
    """Whether a step's token counts were recorded or estimated from text."""

    MEASURED = "measured"
    ESTIMATED = "estimated"


class DraftedBy(str, enum.Enum):
    WEAK = "weak"
    STRONG = "strong"


class Verdict(str, enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    REPAIR = "repair"
