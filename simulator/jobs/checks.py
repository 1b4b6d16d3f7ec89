"""Checks every Request's `check()` may share: a field's `min`/`max` metadata (the bounds its generated flag also
enforces), and numbers that must be finite. Why here: a Python caller builds a Request without the command line, so
the bounds the CLI's typer options hold must hold in the job too, from the same metadata.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from specagent.simulator.jobs.base import JobError


def _shown(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000 else f"{v:g}" if isinstance(v, float) else str(v)


def check_bounds(request: Any) -> None:
    """A JobError for the first field whose value lies outside its metadata's [min, max] (None: not given, passes)."""
    for f in dataclasses.fields(request):
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        v = getattr(request, f.name)
        if (lo is None and hi is None) or v is None:
            continue
        if isinstance(v, float) and math.isnan(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
            where = f"[{_shown(lo) if lo is not None else '-inf'}, {_shown(hi) if hi is not None else 'inf'}]"
            raise JobError(f"expected a value in {where}, got {v}", f.name)


def check_finite(request: Any, *names: str) -> None:
    """A JobError for the first of `names` holding a number that is not finite (NaN, infinity)."""
    for name in names:
        v = getattr(request, name)
        if v is not None and not math.isfinite(v):
            raise JobError(f"expected a finite number, got {v}", name)
