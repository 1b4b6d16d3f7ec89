"""Reading input files: one place that checks a path, its encoding and what its content is.

Why: a trace loader or importer handed the wrong thing (a directory, a Parquet
file named ``.jsonl``, a τ²-Bench file given to the OpenAI importer, a non-UTF-8
byte) must say which file, what it expected and what it found, instead of a
decoder's message that names no file. Formats are recognised by content, never
by the file name alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specagent.common.paths import input_file_problem

from .errors import TraceFormatError

PARQUET_MAGIC = b"PAR1"

# what each importer or loader reads, for "expected ..." messages
TAU2_FORMAT = "a τ²-Bench results file (one JSON object with a 'simulations' list)"
OPENAI_FORMAT = "OpenAI chat conversations (a JSON message list, an object with 'messages', or JSONL of those)"
TRACE_FORMAT = "a specagent trace (JSONL of trajectories, or Parquet)"
IMPORT_HINT = {
    "tau2": "import it with `specagent traces import tau2`",
    "openai": "import it with `specagent traces import openai`",
    "trace": "it is already in the trace schema: pass it to `traces stats`, `simulate --trace` or `predict --trace`",
}


def check_input_path(path: str | os.PathLike, expected: str) -> Path:
    """The path as a Path if it names a readable regular file; else FileNotFoundError / TraceFormatError."""
    p = Path(path)
    problem = input_file_problem(p)  # the one check every file argument goes through (common/paths.py)
    if problem == "no such file":
        raise FileNotFoundError(f"{p}: no such file (expected {expected})")
    if problem == "a directory":
        raise TraceFormatError(str(p), "path", "<file>", f"a file holding {expected}", found="a directory")
    if problem is not None:
        raise TraceFormatError(str(p), "path", "<file>", f"a regular file holding {expected}", found=problem)
    return p


def read_bytes(path: str | os.PathLike, expected: str) -> bytes:
    p = check_input_path(path, expected)
    try:
        return p.read_bytes()
    except OSError as e:
        raise TraceFormatError(str(p), "file", "<file>", f"a readable file holding {expected}", found=f"an unreadable file ({e.strerror})") from None


def decode_utf8(data: bytes, file: str, expected: str) -> str:
    """UTF-8 text of ``data`` (a leading BOM is dropped); a Parquet file or a bad byte is named."""
    if data.startswith(PARQUET_MAGIC):
        raise TraceFormatError(file, "file", "<format>", expected, found="a Parquet file (content starts with 'PAR1')")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TraceFormatError(file, f"line {line} (byte {e.start})", "<encoding>", f"UTF-8 text ({expected})",
                               data[e.start:e.start + 4]) from None
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike, expected: str) -> str:
    """The UTF-8 text of an input file, after the path, Parquet and encoding checks."""
    return decode_utf8(read_bytes(path, expected), str(path), expected)


def iter_lines(path: str | os.PathLike, expected: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of an input file, read one line at a time: `read_text`'s checks (path, Parquet,
    UTF-8 with the line and byte named, a leading BOM dropped) and `require_content`'s, in memory bounded by the longest
    line rather than the file (issue #35: a fit of 10^6 records held the whole 400 MB text)."""
    p = check_input_path(path, expected)
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed below; a generator must own its file
    except OSError as e:
        raise TraceFormatError(str(p), "file", "<file>", f"a readable file holding {expected}", found=f"an unreadable file ({e.strerror})") from None
    with fh:
        offset, content = 0, False
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1:
                if raw.startswith(PARQUET_MAGIC):
                    raise TraceFormatError(str(p), "file", "<format>", expected, found="a Parquet file (content starts with 'PAR1')")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TraceFormatError(str(p), f"line {lineno} (byte {offset + e.start})", "<encoding>", f"UTF-8 text ({expected})",
                                       raw[e.start:e.start + 4]) from None
            offset += len(raw)
            if lineno == 1:
                text = text.removeprefix("\ufeff")
            text = text.removesuffix("\n")
            content = content or bool(text.strip())
            yield lineno, text
    if not content:
        raise TraceFormatError(str(p), "file", "<content>", expected, found="an empty file")


def require_content(text: str, file: str, expected: str) -> None:
    if not text.strip():
        raise TraceFormatError(file, "file", "<content>", expected, found="an empty file")


def kind_of(obj: Any) -> str | None:
    """What a parsed JSON value looks like: 'tau2', 'openai', 'trace', or None (unrecognised)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("simulations"), list):
            return "tau2"
        # a specagent trace's schema_version is an integer; ATIF's ("ATIF-v1.6") is a string (an agent log)
        if "steps" in obj and (isinstance(obj.get("schema_version"), int) or "system_prompt_tokens" in obj):
            return "trace"
        if isinstance(obj.get("messages"), list):
            return "openai"
        return None
    if isinstance(obj, list) and obj and all(isinstance(m, dict) and "role" in m for m in obj):
        return "openai"
    if isinstance(obj, list) and obj:
        kinds = {kind_of(x) for x in obj[:3]}
        return "openai" if kinds == {"openai"} else None
    return None


def first_json_record(text: str) -> Any:
    """The first line of JSONL text as JSON, or None when it does not parse."""
    for line in text.split("\n"):
        if line.strip():
            try:
                return json.loads(line)
            except (ValueError, RecursionError):
                return None
    return None


_FOUND = {
    "tau2": "a τ²-Bench results file",
    "openai": "OpenAI chat conversations",
    "trace": "a specagent trace",
}


def wrong_format(file: str, expected: str, found: str | None, want: str) -> TraceFormatError | None:
    """An error saying the content is another known format (None when it is ``want`` or unknown)."""
    if found is None or found == want:
        return None
    return TraceFormatError(file, "file", "<format>", expected, found=f"{_FOUND[found]} ({IMPORT_HINT[found]})")


def parse_json(text: str, file: str, expected: str, want: str | None = None) -> Any:
    """One JSON document; a JSONL file or another known format is named in the error."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        first = first_json_record(text) if e.msg == "Extra data" else None
        if first is not None:  # one JSON value per line: JSONL
            err = wrong_format(file, expected, kind_of(first), want or "")
            raise err or TraceFormatError(file, "file", "<format>", expected,
                                          found="JSONL (one JSON value per line)") from None
        raise TraceFormatError(file, f"line {e.lineno}", "<json>", f"valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise TraceFormatError(file, "file", "<json>", "JSON nested less deeply than Python's recursion limit") from None
    except ValueError as e:  # e.g. an integer literal longer than Python's 4,300-digit conversion limit
        raise TraceFormatError(file, "file", "<json>", f"valid JSON ({e})") from None
    return obj


def parse_json_line(line: str, file: str, lineno: int) -> Any:
    """One JSONL line's JSON value; errors name the line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise TraceFormatError(file, f"line {lineno}", "<json>", f"valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise TraceFormatError(file, f"line {lineno}", "<json>", "JSON nested less deeply than Python's recursion limit") from None
    except ValueError as e:  # e.g. an integer literal longer than Python's 4,300-digit conversion limit
        raise TraceFormatError(file, f"line {lineno}", "<json>", f"valid JSON ({e})") from None
