"""The one writer of `[acceptance]` tables: every field of the dataclass, read off `dataclasses.fields`.

Why: three writers listing fields by hand (the fit, the calibration, the scenario) drop the next
field added to `AcceptanceModel` silently; one writer derived from the dataclass cannot. The
reader is `simulator.scenario.load_acceptance` (it merges over a base scenario's values).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np


def plain(v: Any) -> Any:
    """numpy scalars, tuples and nested tables as the plain Python values TOML and JSON writers take."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def acceptance_table(model: Any, value: Callable[[Any], Any] = plain) -> dict[str, Any]:
    """Every field of an acceptance model (any dataclass) as a TOML-ready table; None (tied to the workload) left out.

    `value` maps each value (default `plain`; a writer may round floats for readability).
    """
    return {f.name: value(plain(getattr(model, f.name))) for f in dataclasses.fields(model) if getattr(model, f.name) is not None}


def acceptance_toml(model: Any, head: str = "", value: Callable[[Any], Any] = plain) -> str:
    """A file holding one `[acceptance]` table (what `--acceptance FILE` and `load_acceptance` read)."""
    import tomli_w

    return head + tomli_w.dumps({"acceptance": acceptance_table(model, value)})
