"""Read one big JSON document a record at a time: the members of its top-level object, the items of one array.

Why: a results file is one JSON document (τ²-Bench writes ``{info, tasks, simulations: [...]}``), and
``json.loads`` on 100 MB builds several hundred MB of Python objects before the first record is
converted. Here the text is held once and each array item is decoded when it is reached
(``json.JSONDecoder.raw_decode`` from an offset), so memory is the text plus one record.
Errors carry the line and column of the text, as ``json.loads``'s do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


def _fail(text: str, i: int, msg: str) -> json.JSONDecodeError:
    return json.JSONDecodeError(msg, text, i)


def _value(text: str, i: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, i)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _fail(text, i, "JSON nested deeper than Python's recursion limit") from None


def iter_array(text: str, i: int, end: list[int] | None = None) -> Iterator[tuple[Any, int]]:
    """(item, offset of the item) for each item of the array that starts at offset `i` (``[``); the offset just
    past its ']' is appended to `end` when the array is done."""
    if text[i:i + 1] != "[":
        raise _fail(text, i, "Expecting '['")
    i = _skip(text, i + 1)
    if text[i:i + 1] == "]":
        if end is not None:
            end.append(i + 1)
        return
    while True:
        item, stop = _value(text, i)
        yield item, i
        i = _skip(text, stop)
        c = text[i:i + 1]
        if c == "]":
            if end is not None:
                end.append(i + 1)
            return
        if c != ",":
            raise _fail(text, i, "Expecting ',' delimiter")
        i = _skip(text, i + 1)


def _close_of(text: str, i: int) -> int:
    """Past the ']' closing the array at `i`, scanning item by item."""
    j = _skip(text, i + 1)
    if text[j:j + 1] == "]":
        return j + 1
    while True:
        _, end = _value(text, j)
        j = _skip(text, end)
        if text[j:j + 1] == "]":
            return j + 1
        j = _skip(text, j + 1)


def members(text: str, stream: str, need: tuple[str, ...] = ()) -> tuple[dict[str, Any], Iterator[Any] | None]:
    """A top-level JSON object's members, the `stream` member's array left undecoded.

    Returns (the other members decoded, an iterator over the `stream` array's items — None when the object has no
    such array member). The members are decoded up to the array; when one of `need` comes after it, the array is
    scanned once (each item decoded and dropped) so that every member is known before the first item. The iterator
    checks the rest of the document when the array ends (a syntax error after it is still an error)."""
    i = _skip(text, 0)
    if text[i:i + 1] != "{":
        raise _fail(text, i, "Expecting '{'")
    out: dict[str, Any] = {}
    start, i = _object_members(text, _skip(text, i + 1), stream, out, stop_at_stream=True)
    if start is None:
        return out, None
    if any(k not in out for k in need):  # a needed member after the array: read past it now
        _object_members(text, _skip(text, _close_of(text, start)), stream, out, stop_at_stream=False, resume=True)
        return out, (item for item, _ in iter_array(text, start))

    def items() -> Iterator[Any]:
        stop: list[int] = []
        for item, _ in iter_array(text, start, stop):
            yield item
        _object_members(text, _skip(text, stop[0]), stream, out, stop_at_stream=False, resume=True)

    return out, items()


def _object_members(text: str, i: int, stream: str, out: dict[str, Any], stop_at_stream: bool,
                    resume: bool = False) -> tuple[int | None, int]:
    """Decode members into `out` from offset `i` (just inside '{', or just past a member when `resume`) to the closing
    '}' and the end of the text; with `stop_at_stream`, stop at the `stream` array: (its offset, -1)."""
    if resume:
        c = text[i:i + 1]
        if c == "}":
            return None, _end(text, i)
        if c != ",":
            raise _fail(text, i, "Expecting ',' delimiter")
        i = _skip(text, i + 1)
    elif text[i:i + 1] == "}":
        return None, _end(text, i)
    while True:
        if text[i:i + 1] != '"':
            raise _fail(text, i, "Expecting property name enclosed in double quotes")
        key, i = _value(text, i)
        i = _skip(text, i)
        if text[i:i + 1] != ":":
            raise _fail(text, i, "Expecting ':' delimiter")
        i = _skip(text, i + 1)
        if key == stream and text[i:i + 1] == "[":
            if stop_at_stream:
                return i, -1
            i = _close_of(text, i)
        else:
            out[key], i = _value(text, i)
        i = _skip(text, i)
        c = text[i:i + 1]
        if c == "}":
            return None, _end(text, i)
        if c != ",":
            raise _fail(text, i, "Expecting ',' delimiter")
        i = _skip(text, i + 1)


def _end(text: str, i: int) -> int:
    """Past the top-level object's '}' at `i`: nothing but whitespace may follow."""
    j = _skip(text, i + 1)
    if j != len(text):
        raise _fail(text, j, "Extra data")
    return j
