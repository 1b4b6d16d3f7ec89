"""Errors and skip reports for trace input.

Why: a malformed record must say where it is (file, line or trajectory id and
step index), which field, and what was expected — and with ``--skip-bad`` every
skipped record is reported, never silently dropped.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from pydantic import ValidationError


class TraceFormatError(ValueError):
    """Malformed trace input: names file, location, field and what was expected."""

    def __init__(self, file: str, location: str, field: str, expected: str, got: object = None):
        self.file = str(file)
        self.location = location
        self.field = field
        self.expected = expected
        self.got = got
        got_s = "" if got is None else f"; got {_short(got)}"
        super().__init__(f"{self.file}: {location}: field '{field}': expected {expected}{got_s}")


@dataclass(frozen=True)
class SkippedRecord:
    """One record left out under ``skip_bad``, with the reason."""

    file: str
    location: str
    reason: str

    def __str__(self) -> str:
        return f"skipped {self.file}: {self.location}: {self.reason}"


def report_skipped(e: TraceFormatError, skipped: list[SkippedRecord] | None) -> None:
    """Record a record left out under ``skip_bad``: into `skipped`, or as a warning — never silently."""
    rec = SkippedRecord(e.file, e.location, str(e))
    if skipped is not None:
        skipped.append(rec)
    else:
        warnings.warn(str(rec), stacklevel=4)


def _short(x: object, n: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."


def _loc_str(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<record>"


def from_validation_error(file: str, location: str, err: ValidationError) -> TraceFormatError:
    """Turn the first pydantic error into a TraceFormatError naming the field path."""
    first = err.errors()[0]
    loc = tuple(first.get("loc", ()))
    # model-level validators report no field; the message names it
    msg = first.get("msg", "valid value")
    field = _loc_str(loc)
    where = location
    if loc and loc[0] == "steps" and len(loc) > 1 and isinstance(loc[1], int):
        where = f"{location}, step {loc[1]}"
    extra = f" (+{len(err.errors()) - 1} more errors)" if len(err.errors()) > 1 else ""
    got = first.get("input") if first.get("type") not in ("missing",) else None
    if isinstance(got, (dict, list)):
        got = None
    return TraceFormatError(file, where, field, f"{msg}{extra}", got)
