"""One reading of a model call's recorded ``usage``, whatever convention logged it.

Why: the same quantities come under different names and meanings. OpenAI counts
cached input *inside* ``prompt_tokens`` (``prompt_tokens_details.cached_tokens``
≤ ``prompt_tokens``) and reasoning inside ``completion_tokens``; Anthropic's
``input_tokens`` *excludes* ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; LiteLLM passes Anthropic's split on under
OpenAI's names, so a Claude run through LiteLLM logs ``prompt_tokens`` 110 beside
``cached_tokens`` 5,383. The Responses API says ``input_tokens``/``output_tokens``
with ``*_details``. A reader that takes ``prompt_tokens`` at face value prices a
5,493-token context as 110 tokens, or refuses the file.

Whether cached input is inside or beside the prompt count is decided per
conversation from the data (``cache_convention``): the agent's context only
grows, so the reading whose prompts dip less often (see importing.usage_dips) is
the right one; where both read the same, a cached count above the prompt count
can only be beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .importing import ErrFn, check_count, usage_dips
from .schema import LIMIT_REASONS, MAX_CONTEXT_TOKENS

#: (prompt-count key, completion-count key) of each convention, in the order they are tried
_NAMES = (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens"))


@dataclass(frozen=True)
class Usage:
    """A call's counts: ``prompt`` as logged (cached input not added), ``cached`` the cached input the log names
    (read plus written), ``completion`` every decoded token, ``reasoning`` its hidden part where the log says."""

    prompt: int
    completion: int
    cached: int = 0
    reasoning: int | None = None

    def prompt_total(self, cached_beside: bool) -> int:
        """The whole prompt the model read: the logged count, plus the cached input where it is logged beside it."""
        return self.prompt + (self.cached if cached_beside else 0)


def _details(u: dict, key: str, field: str, err: ErrFn) -> int | None:
    d = u.get(key)
    if d is None:
        return None
    if not isinstance(d, dict):
        raise err(f"usage.{key}", "an object or null", d)
    v = d.get(field)
    return None if v is None else check_count(v, f"usage.{key}.{field}", err)


def read_usage(u: Any, err: ErrFn) -> Usage:
    """A ``usage`` object under OpenAI's, Anthropic's or the Responses API's names; a located error otherwise."""
    if type(u) is dict and len(u) == 2:  # the common case, {prompt_tokens, completion_tokens}, checked quickly
        p, c = u.get("prompt_tokens"), u.get("completion_tokens")
        if type(p) is int and type(c) is int and 0 <= p and 0 <= c and p + c <= MAX_CONTEXT_TOKENS:
            return Usage(p, c)
    if not isinstance(u, dict):
        raise err("usage", "an object with prompt_tokens and completion_tokens (or input_tokens and output_tokens)", u)
    for pk, ck in _NAMES:
        if pk in u or ck in u:
            break
    else:
        raise err("usage", "an object with prompt_tokens and completion_tokens (or input_tokens and output_tokens)", u)
    prompt = check_count(u.get(pk), f"usage.{pk}", err)
    completion = check_count(u.get(ck), f"usage.{ck}", err)
    cached = 0
    for key, field in (("prompt_tokens_details", "cached_tokens"), ("input_tokens_details", "cached_tokens")):
        cached = max(cached, _details(u, key, field, err) or 0)
    for key in ("cache_read_input_tokens", "cache_creation_input_tokens"):  # Anthropic: both beside input_tokens
        if u.get(key) is not None:
            cached += check_count(u[key], f"usage.{key}", err)
    reasoning = None
    for key in ("completion_tokens_details", "output_tokens_details"):
        r = _details(u, key, "reasoning_tokens", err)
        if r is not None:
            reasoning = r
    if reasoning is not None and reasoning > completion:
        raise err("usage.completion_tokens_details.reasoning_tokens", "an integer between 0 and completion_tokens", reasoning)
    if prompt + cached + completion > MAX_CONTEXT_TOKENS:
        raise err("usage", f"prompt + cached + completion tokens at most {MAX_CONTEXT_TOKENS:,} "
                           f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]})", prompt + cached + completion)
    return Usage(prompt, completion, cached, reasoning)


def cache_convention(calls: Sequence[Usage], visible: Sequence[int]) -> bool:
    """True when the calls' cached input is logged *beside* their prompt counts (add it), False when inside.

    The reading under which the prompts dip less often wins (the context only grows); on a tie, a cached count
    above its prompt count can only be beside it. No cached count anywhere: False (nothing to add)."""
    if not any(c.cached for c in calls):
        return False
    none = [False] * len(calls)
    inside = sum(usage_dips([c.prompt for c in calls], visible, none))
    beside = sum(usage_dips([c.prompt + c.cached for c in calls], visible, none))
    if beside != inside:
        return beside < inside
    return any(c.cached > c.prompt for c in calls)


#: Hidden reasoning inferred where a call's completion count exceeds the estimate of its visible text by more than
#: max(REASONING_MIN_EXCESS, REASONING_MIN_FRACTION × the estimate): on the 496 assistant messages of the shared
#: non-reasoning τ²-Bench files (grok-3, grok-3-mini, whose completion_tokens hold no reasoning) the excess never
#: does (largest 109 tokens, over an estimate of 376: tokens.py's estimator), so what exceeds it is reasoning the
#: provider counted into the completion (OpenAI's and Anthropic's convention).
REASONING_MIN_EXCESS = 24
REASONING_MIN_FRACTION = 0.3


@dataclass(frozen=True)
class Decoded:
    """A call's decoded tokens: `visible` (what the next prompt sees), `reasoning` (None: unknown) and where the
    reasoning figure came from (``measured``, ``cost``, ``estimated`` from kept text, ``inferred`` from the counts)."""

    visible: int
    reasoning: int | None
    source: str

    @property
    def output(self) -> int:
        return self.visible + (self.reasoning or 0)


def split_completion(u: Usage, visible_estimate: int, reasoning_text: str = "") -> Decoded:
    """A completion count (reasoning included, OpenAI's and Anthropic's convention) split into visible tokens and
    hidden reasoning, from the best source there is: the logged reasoning count; reasoning the log kept as text
    (its estimate); the excess of the count over the visible text's estimate (inferred; 0 below the threshold). Kept
    text that falls short of that excess by more than the threshold is a summary of the reasoning (Gemini's thought
    summaries, OpenAI's reasoning summaries), not all of it: the excess stands."""
    if u.reasoning is not None:
        return Decoded(u.completion - u.reasoning, u.reasoning, "measured")
    excess = u.completion - visible_estimate
    beyond = max(REASONING_MIN_EXCESS, REASONING_MIN_FRACTION * visible_estimate)
    if reasoning_text:
        from .tokens import estimate_text_tokens

        r = min(u.completion, estimate_text_tokens(reasoning_text))
        if excess - r <= beyond:
            return Decoded(u.completion - r, r, "estimated")
    if excess > beyond:
        return Decoded(u.completion - excess, excess, "inferred")
    return Decoded(u.completion, 0, "inferred")
