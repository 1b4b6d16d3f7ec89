"""The last check before a result is printed or written: an impossible number is a defect report, never a result.

Why: inputs are validated at load, but a defect further down (a NaN turned into 0, a
negative time from a subtraction) would otherwise reach the user as a plausible figure
(`predict` once reported a 0.000x wall time while the same record held 14.8 s of user
waits). Every command that prints JSON or writes results passes them through
`check_output`; what it refuses names the record and the field, so the report can be
traced, and nothing is written.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterator

from specagent.common.errors import InputError

#: Keys whose numbers are times, costs, counts or sizes: never negative (the fuzz suites' oracle uses the same rule).
NON_NEGATIVE = re.compile(r"(^|_)(s|ms|us|time|latency|usd|cost|price|tokens|bytes|flops|calls|count|tasks|gpus|replicas|batch|"
                          r"iterations|steps|trajectories|reviews|rejections|repairs|replacements|memory|bandwidth|tflops|gb|"
                          r"rate|rows|figures|layers)(_|$)")
#: Keys that may be negative although they name such a quantity (differences, savings, logs, errors).
SIGNED = re.compile(r"saving|error|delta|diff|change|log|offset|slope|intercept|residual|bias")


class ResultDefect(InputError):
    """A result that cannot be right (NaN, infinity, a negative time, no time for work done): a defect to report."""


def _walk(obj: Any, path: str) -> Iterator[tuple[str, Any, dict | None]]:
    """(path, value, the record holding it) for every scalar of a JSON-like document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(v, (dict, list, tuple)):
                yield from _walk(v, p)
            else:
                yield p, v, obj
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj, None


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    item = getattr(v, "item", None)  # numpy scalars
    if callable(item) and getattr(v, "shape", None) == ():
        try:
            x = item()
        except (TypeError, ValueError):
            return None
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
    return None


def _record_problems(rec: dict, path: str) -> Iterator[str]:
    """Consistency of one results record: time for work done, a wall time no shorter than its parts."""
    num = {k: _number(v) for k, v in rec.items()}
    for k, v in num.items():
        if k.startswith("time_s_") and v is not None:
            phase = k[len("time_s_"):]
            work = num.get(f"tokens_{phase}") or num.get(f"flops_{phase}") or 0.0
            if work > 0 and not v > 0:
                yield f"{path}.{k} = {v:g} although {path} processed {work:g} tokens/FLOPs in that phase"
    wall = num.get("wall_time_s")
    if wall is not None and math.isfinite(wall):
        for part in ("env_wall_time_s", "time_s_user", "time_s_tool", "model_wall_time_s"):
            p = num.get(part)
            if p is not None and math.isfinite(p) and wall < p * (1 - 1e-9) - 1e-9:
                yield f"{path}.wall_time_s = {wall:g} is shorter than its part {part} = {p:g}"
    calls = (num.get("weak_calls") or 0.0) + (num.get("strong_calls") or 0.0)
    model = num.get("model_wall_time_s")
    if calls > 0 and model is not None and not model > 0:
        yield f"{path}.model_wall_time_s = {model:g} although {path} made {calls:g} model calls"


def problems(obj: Any) -> list[str]:
    """Every impossible number in a JSON-like document, each as 'path = value (why)'."""
    out: list[str] = []
    checked: set[int] = set()
    for path, v, rec in _walk(obj, ""):
        x = _number(v)
        if x is not None:
            key = re.sub(r"\[\d+\]", "", path.rsplit(".", 1)[-1]).lower()
            if not math.isfinite(x):
                out.append(f"{path} = {x} (not a finite number)")
            elif x < 0 and NON_NEGATIVE.search(key) and not SIGNED.search(key):
                out.append(f"{path} = {x:g} (a time, cost, count or size cannot be negative)")
        if rec is not None and id(rec) not in checked:
            checked.add(id(rec))
            where = path.rsplit(".", 1)[0] if "." in path else "record"
            out.extend(_record_problems(rec, where))
    return out


def check_output(obj: Any, what: str) -> Any:
    """`obj` unchanged when every number in it is possible; else a ResultDefect naming `what`, the field and the value."""
    found = problems(obj)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ResultDefect(f"defect: {what} would report an impossible number, so nothing was printed or written: "
                           f"{found[0]}{more}; this is a bug (or an input that passed validation but should not have): "
                           "please report it with the command line")
    return obj
