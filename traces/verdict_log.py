"""The verdict log (`specagent.verdict/1`, docs/verdict-log.md): one validated record per verification.

Why a typed record: `specagent acceptance fit` turns these records into the acceptance and
verdict model every saving rests on, so a record that contradicts itself (a rejection
with no repair and no valid replacement, a `write` drafted before the segment's end, an
accepted prefix longer than the segment) must stop the fit with the file, line and
field — never bend an estimate. Writers (`specagent live`, `acceptance measure`, a
user's own deployment) build the same record, so what they write is what this reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Iterable, Iterator, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specagent.common.atomic import write_text

from . import files
from .errors import TraceFormatError, from_validation_error
from .schema import MAX_CONTEXT_TOKENS, MAX_STEP_LATENCY_S, MAX_STEPS

SCHEMA = "specagent.verdict/1"
VERDICT_FORMAT = f"a verdict log (JSONL, one '{SCHEMA}' record per verification; docs/verdict-log.md)"
#: The step kinds the acceptance model is keyed by.
STEP_KINDS = ("read", "write", "generic", "think", "reply")
ENDED_BY = ("write", "reply", "k", "unmatched_read", "end")

Tokens = Annotated[int, Field(ge=0, le=MAX_CONTEXT_TOKENS, strict=True)]
Seconds = Annotated[float, Field(ge=0, le=MAX_STEP_LATENCY_S, allow_inf_nan=False)]


class DraftedStep(BaseModel):
    """One drafted step of the segment under review."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["read", "write", "generic", "think", "reply"]
    name: str | None
    tokens: Tokens
    reference_tokens: Tokens | None = None
    exact_match: Annotated[bool, Field(strict=True)] | None = None


class Latency(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    draft: Seconds | None = None
    verify: Seconds | None = None
    repair: Seconds | None = None


class VerdictRecord(BaseModel):
    """One verification of a drafted segment (the fields of docs/verdict-log.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: Literal["specagent.verdict/1"] = Field(alias="schema")
    task: Annotated[str, Field(min_length=1)]
    position: Annotated[int, Field(ge=0, lt=MAX_STEPS, strict=True)]
    drafted: Annotated[list[DraftedStep], Field(min_length=1, max_length=MAX_STEPS)]
    ended_by: Literal["write", "reply", "k", "unmatched_read", "end"]
    accepted_prefix: Annotated[int, Field(ge=0, strict=True)]
    verdict_tokens: Tokens
    verify_reasoning_tokens: Tokens
    thinking: Annotated[bool, Field(strict=True)]
    replacement_offered: Annotated[bool, Field(strict=True)]
    replacement_valid: Annotated[bool, Field(strict=True)] | None
    repair_tokens: Tokens | None
    repair_reasoning_tokens: Tokens | None
    replacement_tokens: Tokens | None = None
    verify_prompt_tokens: Tokens | None = None
    cached_prompt_tokens: Tokens | None = None
    latency_s: Latency | None = None
    source: str | None = None

    @property
    def rejected(self) -> bool:
        return self.accepted_prefix < len(self.drafted)

    @property
    def repaired(self) -> bool:
        """A Strong repair turn ran (the rejection's replacement was not offered, or not valid)."""
        return self.repair_tokens is not None

    @model_validator(mode="after")
    def _consistent(self) -> "VerdictRecord":
        n = len(self.drafted)
        if self.accepted_prefix > n:
            raise ValueError(f"accepted_prefix: at most len(drafted) = {n}, got {self.accepted_prefix}")
        for i, s in enumerate(self.drafted[:-1]):
            if s.kind == "write":
                raise ValueError(f"drafted[{i}].kind: a 'write' step only as the last drafted step (drafting stops at "
                                 f"a held write), got one at {i} of {n}")
        if not self.thinking and self.verify_reasoning_tokens:
            raise ValueError(f"verify_reasoning_tokens: 0 when thinking is false, got {self.verify_reasoning_tokens}")
        if self.rejected:
            if self.replacement_offered:
                if self.replacement_valid is None:
                    raise ValueError("replacement_valid: true or false when a replacement was offered, got null")
                if self.replacement_valid and self.repair_tokens is not None:
                    raise ValueError("repair_tokens: null when the replacement was valid (no repair turn ran), "
                                     f"got {self.repair_tokens}")
            elif self.replacement_valid is not None:
                raise ValueError(f"replacement_valid: null when no replacement was offered, got {self.replacement_valid}")
            if not (self.replacement_offered and self.replacement_valid) and self.repair_tokens is None:
                raise ValueError("repair_tokens: the repair turn's tokens (a rejection without a valid replacement "
                                 "runs one), got null")
        else:
            if self.replacement_offered:
                raise ValueError("replacement_offered: false when the whole segment was accepted, got true")
            if self.replacement_valid is not None:
                raise ValueError(f"replacement_valid: null when the whole segment was accepted, got {self.replacement_valid}")
            if self.repair_tokens is not None:
                raise ValueError(f"repair_tokens: null when the whole segment was accepted, got {self.repair_tokens}")
        if (self.repair_tokens is None) != (self.repair_reasoning_tokens is None):
            raise ValueError("repair_reasoning_tokens: null exactly when repair_tokens is null (no repair turn), got "
                             f"{self.repair_reasoning_tokens}")
        if not self.thinking and self.repair_reasoning_tokens:
            raise ValueError(f"repair_reasoning_tokens: 0 when thinking is false, got {self.repair_reasoning_tokens}")
        if self.replacement_tokens is not None:
            if not self.replacement_offered:
                raise ValueError("replacement_tokens: only with an offered replacement, got "
                                 f"{self.replacement_tokens} with replacement_offered false")
            if self.replacement_tokens > self.verdict_tokens:
                raise ValueError(f"replacement_tokens: at most verdict_tokens ({self.verdict_tokens}; the call is part of "
                                 f"the verdict), got {self.replacement_tokens}")
        if (self.verify_prompt_tokens is not None and self.cached_prompt_tokens is not None
                and self.cached_prompt_tokens > self.verify_prompt_tokens):
            raise ValueError(f"cached_prompt_tokens: at most verify_prompt_tokens ({self.verify_prompt_tokens}), got "
                             f"{self.cached_prompt_tokens}")
        return self

    def to_json(self) -> str:
        """The record as one JSONL line (fields left out stay out)."""
        return json.dumps(self.model_dump(by_alias=True, exclude_none=False, exclude_unset=True), separators=(", ", ": "))


def make_record(**fields) -> VerdictRecord:
    """A record from Python values (what writers call); a bad combination raises the same located error."""
    try:
        return VerdictRecord.model_validate({"schema": SCHEMA, **fields})
    except ValidationError as e:
        raise from_validation_error("<record>", f"task {fields.get('task')!r}", e) from None


def parse_verdict_line(line: str, file: str, lineno: int) -> VerdictRecord:
    obj = files.parse_json_line(line, file, lineno)
    if not isinstance(obj, dict):
        raise TraceFormatError(file, f"line {lineno}", "<record>", f"a JSON object (one '{SCHEMA}' record)", type(obj).__name__)
    if "schema" in obj and obj["schema"] != SCHEMA:
        raise TraceFormatError(file, f"line {lineno}", "schema", f"'{SCHEMA}' (the only verdict-log version)", obj["schema"])
    try:
        return VerdictRecord.model_validate(obj)
    except ValidationError as e:
        raise from_validation_error(file, f"line {lineno}", e) from None


def read_verdict_log(path: str | os.PathLike) -> list[VerdictRecord]:
    """Every record of a verdict log, validated; the first bad one raises a one-line `TraceFormatError`.

    Besides each record's own invariants, records of one task must not share a position or
    overlap: a verification starts after the steps the previous one committed (its accepted
    prefix, plus the repaired step after a rejection). Records come back in file order.
    """
    return [r for _, r in iter_verdict_log(path)]


def iter_verdict_log(path: str | os.PathLike) -> Iterator[tuple[int, VerdictRecord]]:
    """(line number, record) of every record, validated as `read_verdict_log` does, one at a time: a caller that keeps
    only what it needs (the fit keeps counts) reads 10^6 records without holding 10^6 record objects. The order rule
    needs every record of a task, so it is checked on a compact summary once the last record is out: consume it all."""
    p = Path(path)
    order: list[tuple[str, int, int, int]] = []  # (task, position, steps committed, line) per record
    for lineno, line in files.iter_lines(p, VERDICT_FORMAT):  # one line in memory at a time, not the file's text
        if not line.strip():
            continue
        r = parse_verdict_line(line, str(p), lineno)
        order.append((r.task, r.position, r.accepted_prefix + (1 if r.rejected else 0), lineno))
        yield lineno, r
    _check_order(order, str(p))


def _check_order(order: Sequence[tuple[str, int, int, int]], file: str) -> None:
    by_task: dict[str, list[int]] = {}
    for i, o in enumerate(order):
        by_task.setdefault(o[0], []).append(i)
    for task, idx in by_task.items():
        idx = sorted(idx, key=lambda i: order[i][1])
        for a, b in zip(idx, idx[1:]):
            (_, pa, committed, la), (_, pb, _, lb) = order[a], order[b]
            if pb < pa + committed:
                raise TraceFormatError(file, f"line {lb}", "position",
                                       f"at least {pa + committed} (task {task!r}: the verification on line "
                                       f"{la} at position {pa} committed {committed} step(s))", pb)


def previous_rejected(records: Sequence[VerdictRecord]) -> list[bool]:
    """For each record: did the task's previous verification (by position) end in a rejection?

    This is the acceptance model's `correlation` condition: its first drafted step is judged
    right after a rejection in the same trajectory.
    """
    return previous_rejected_of([(r.task, r.position, r.rejected) for r in records])


def previous_rejected_of(summary: Sequence[tuple[str, int, bool]]) -> list[bool]:
    """`previous_rejected` from (task, position, rejected) per record, for callers that keep no records."""
    out = [False] * len(summary)
    by_task: dict[str, list[int]] = {}
    for i, r in enumerate(summary):
        by_task.setdefault(r[0], []).append(i)
    for idx in by_task.values():
        idx = sorted(idx, key=lambda i: summary[i][1])
        for a, b in zip(idx, idx[1:]):
            out[b] = summary[a][2]
    return out


def write_verdict_log(records: Iterable[VerdictRecord], path: str | os.PathLike) -> Path:
    """Write records as JSONL, atomically."""
    return write_text(path, "".join(r.to_json() + "\n" for r in records))
