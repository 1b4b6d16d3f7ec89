"""The Strong model's verdict: the shipped verification prompt, the JSON schema it is asked for, and the strict reader.

Why strict: a verdict decides what the acceptance model is fitted on, so an answer that is not
exactly the object asked for (not JSON, a prefix out of range, a replacement offered although
every step was kept) is never repaired into one; the caller retries once and then counts the
position as unparseable. Code fences around the object are the one thing removed: they wrap
the answer, they do not change it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

#: The JSON schema sent as ``response_format`` (json_schema, strict) where the server supports it.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "accepted_prefix": {"type": "integer", "minimum": 0},
        "reason": {"type": "string"},
        "replacement": {"anyOf": [
            {"type": "null"},
            {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
             "required": ["name", "arguments"], "additionalProperties": False}]},
    },
    "required": ["accepted_prefix", "reason", "replacement"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def verifier_prompt() -> str:
    """The shipped prompt (specagent/endpoints/data/verifier_prompt.md), with `{n}` and `{segment}` to fill."""
    return resources.files("specagent.endpoints").joinpath("data/verifier_prompt.md").read_text(encoding="utf-8")


def fill_prompt(template: str, segment: str, n: int) -> str:
    # str.replace, not str.format: the prompt shows JSON braces literally
    return template.replace("{segment}", segment).replace("{n}", str(n))


@dataclass(frozen=True)
class Verdict:
    accepted_prefix: int
    reason: str
    replacement: dict[str, Any] | None  # {"name": str, "arguments": dict}


def parse_verdict(text: str, n: int) -> Verdict:
    """The verdict in `text` for a segment of `n` steps; ValueError saying what is wrong otherwise."""
    s = (text or "").strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    if not s:
        raise ValueError("the answer is empty")
    try:
        obj = json.loads(s)
    except ValueError as exc:
        raise ValueError(f"the answer is not JSON ({exc.msg}: char {exc.pos})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"the answer is a JSON {type(obj).__name__}, not an object")
    missing = [k for k in ("accepted_prefix", "reason", "replacement") if k not in obj]
    if missing:
        raise ValueError(f"the answer lacks {', '.join(missing)}")
    a = obj["accepted_prefix"]
    if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a <= n:
        raise ValueError(f"accepted_prefix must be an integer from 0 to {n}, got {a!r}")
    if not isinstance(obj["reason"], str):
        raise ValueError("reason must be a string")
    r = obj["replacement"]
    if r is not None:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not r["name"] or not isinstance(r.get("arguments"), dict):
            raise ValueError('replacement must be null or {"name": <tool name>, "arguments": {...}}')
        if a == n:
            raise ValueError(f"a replacement was offered although all {n} steps were kept")
        r = {"name": r["name"], "arguments": r["arguments"]}
    return Verdict(a, obj["reason"], r)


_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict, "null": type(None)}


def replacement_valid(replacement: dict[str, Any], tools: list[dict]) -> bool:
    """Whether the call names an offered tool and its arguments satisfy that tool's schema (required, known, typed)."""
    fn = next((t["function"] for t in tools if t["function"]["name"] == replacement["name"]), None)
    if fn is None:
        return False
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    args = replacement["arguments"]
    if any(k not in args for k in params.get("required") or []):
        return False
    if props and params.get("additionalProperties", False) is False and any(k not in props for k in args):
        return False
    for k, v in args.items():
        t = (props.get(k) or {}).get("type")
        want = _TYPES.get(t) if isinstance(t, str) else None
        if want is not None and (not isinstance(v, want) or (t in ("integer", "number") and isinstance(v, bool))):
            return False
    return True
