"""Errors and skip reports for trace input.

Why: a malformed record must say where it is (file, line or trajectory id and
step index), which field, and what was expected — and with ``--skip-bad`` every
skipped record is reported, never silently dropped.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .vocabulary import LIMIT_REASONS

if TYPE_CHECKING:  # the error type is only read here; a request trace's replay validates without pydantic
    from pydantic import ValidationError


class TraceFormatError(ValueError):
    """Malformed trace input: names file, location, field and what was expected."""

    def __init__(self, file: str, location: str, field: str, expected: str, got: object = None, found: str | None = None):
        self.file = str(file)
        self.location = location
        self.field = field
        self.expected = expected
        self.got = got
        self.found = found
        got_s = "" if got is None else f"; got {_short(got)}"
        if found is not None:  # a description, printed as it is
            got_s += f"; found {found}"
        # one line, whatever a decoder or library put into the parts
        super().__init__(" ".join(f"{self.file}: {location}: field '{field}': expected {expected}{got_s}".split("\n")))

    def __reduce__(self) -> tuple:  # rebuilt from its parts where it crosses a process (a parallel import's worker)
        got = self.got if isinstance(self.got, (str, int, float, bool, type(None))) else _short(self.got)
        return type(self), (self.file, self.location, self.field, self.expected, got, self.found)


@dataclass(frozen=True)
class SkippedRecord:
    """One record left out under ``skip_bad``, with the reason."""

    file: str
    location: str
    reason: str

    def __str__(self) -> str:
        return f"skipped {self.file}: {self.location}: {self.reason}"


@dataclass(frozen=True)
class Repair:
    """One explicit repair an importer made (counts it could not trust replaced by estimates), with the reason."""

    file: str
    location: str
    what: str

    def __str__(self) -> str:
        return f"repaired {self.file}: {self.location}: {self.what}"


def report_repair(r: Repair, repairs: list[Repair] | None) -> None:
    """Record a repair: into `repairs`, or as a warning — never silently."""
    if repairs is not None:
        repairs.append(r)
    else:
        warnings.warn(str(r), stacklevel=4)


class NoTrajectoriesError(TraceFormatError):
    """An input (or all inputs after ``--skip-bad``) gave no trajectory: a run on it would print zeros."""


def close_skips(n: int, file: str, skipped_here: list[SkippedRecord], skipped: list[SkippedRecord] | None,
                what: str = "at least one trajectory") -> None:
    """End of one file under ``skip_bad``: hand its skips to `skipped` (or warn each), then raise when nothing
    came out — an empty input, or every record skipped (saying how many and the first reason)."""
    if skipped is not None:
        skipped.extend(skipped_here)
    else:
        for rec in skipped_here:
            warnings.warn(str(rec), stacklevel=3)
    if n:
        return
    if skipped_here:
        raise NoTrajectoriesError(file, "all records", "<records>", what,
                                  found=f"all {len(skipped_here)} record(s) skipped as bad; first: "
                                        f"{skipped_here[0].location}: {skipped_here[0].reason}")
    raise NoTrajectoriesError(file, "file", "<records>", what, found="no records")


def report_skipped(e: TraceFormatError, skipped: list[SkippedRecord] | None) -> None:
    """Record a record left out under ``skip_bad``: into `skipped`, or as a warning — never silently."""
    rec = SkippedRecord(e.file, e.location, str(e).removeprefix(f"{e.file}: {e.location}: "))  # said once, not twice
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
    for prefix in ("Input should be ", "Value error, "):
        msg = msg.removeprefix(prefix)
    limit = (first.get("ctx") or {}).get("le", (first.get("ctx") or {}).get("lt"))
    if first.get("type") in ("less_than_equal", "less_than") and limit in LIMIT_REASONS:
        msg = f"{'at most' if first['type'] == 'less_than_equal' else 'less than'} {limit:,} ({LIMIT_REASONS[limit]})"
    elif first.get("type") == "too_long" and (first.get("ctx") or {}).get("max_length") in LIMIT_REASONS:
        n = first["ctx"]["max_length"]
        msg = f"at most {n:,} items ({LIMIT_REASONS[n]})"
    elif first.get("type") == "too_short":
        msg = f"at least {first['ctx']['min_length']} item(s)"
    elif first.get("type") == "missing":
        msg = "a value (the field is required)"
    field = _loc_str(loc)
    if not loc:  # a model-level check: its message starts with the field it is about ("steps[3]: ...")
        m = re.match(r"([\w.\[\]]+): (.+)$", msg, re.S)
        if m:
            field, msg = m.group(1), m.group(2)
            loc = tuple(int(x) if x.isdigit() else x for x in re.findall(r"\w+", field))
    where = location
    if loc and loc[0] == "steps" and len(loc) > 1 and isinstance(loc[1], int):
        where = f"{location}, step {loc[1]}"
    extra = f" (+{len(err.errors()) - 1} more errors)" if len(err.errors()) > 1 else ""
    got = first.get("input") if first.get("type") not in ("missing",) else None
    if isinstance(got, (dict, list)):
        got = None
    return TraceFormatError(file, where, field, f"{msg}{extra}", got)
