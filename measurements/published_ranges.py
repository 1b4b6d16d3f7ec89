"""SPEC §7's published protocol figures as ranges to print beside the simulator's ratios.

The SpecAgent evaluation is the only public measurement of the protocol itself; each row of
`published_ranges.csv` is one of its aggregates (a range over models or benchmarks), with
the setting it was measured in (`tau2`: self-hosted on H20; `edge`: MCP-Atlas, Strong behind
an API), the strategy and summary column it corresponds to, and what it is relative to
(Strong-only, or SpecAgent for ablations). An empty bound is open ("wall time does not
fall" is [1, ∞)). Validated once here; a bad row fails naming the file, line and column.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from specagent.common.errors import InputError

COLUMNS = ("figure_id", "setting", "strategy", "metric", "relative_to", "low", "high", "figure", "source", "source_locator")
SETTINGS = ("tau2", "edge")


@dataclass(frozen=True)
class PublishedRange:
    figure_id: str
    setting: str
    strategy: str
    metric: str
    relative_to: str  # "strongonly", "specagent", or "" for a share of the strategy's own total
    low: float  # -inf when open
    high: float  # inf when open
    figure: str
    source: str
    source_locator: str

    def text(self) -> str:
        if self.low == self.high:
            return f"{self.low:.2f}"
        if math.isinf(self.high):
            return f"≥{self.low:.2f}"
        if math.isinf(self.low):
            return f"≤{self.high:.2f}"
        return f"{self.low:.2f}–{self.high:.2f}"

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def default_path() -> Path:
    return Path(str(resources.files("specagent.measurements") / "published_ranges.csv"))


def load_published_ranges(path: str | Path | None = None) -> list[PublishedRange]:
    """Every row of the file (the shipped one by default), validated."""
    p = Path(path) if path is not None else default_path()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read published ranges: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise InputError(f"{p}: line 1: expected the columns {','.join(COLUMNS)}, got {','.join(reader.fieldnames or ())}")
    out, seen = [], set()
    for line, row in enumerate(reader, start=2):
        def bound(name: str, empty: float) -> float:
            v = (row[name] or "").strip()
            if not v:
                return empty
            try:
                x = float(v)
            except ValueError:
                raise InputError(f"{p}: line {line}: column {name}: expected a number or empty, got {v!r}") from None
            if not math.isfinite(x) or x < 0:
                raise InputError(f"{p}: line {line}: column {name}: expected a finite number >= 0, got {v!r}")
            return x
        if None in row or any(row[c] is None for c in COLUMNS):
            raise InputError(f"{p}: line {line}: expected {len(COLUMNS)} columns")
        lo, hi = bound("low", -math.inf), bound("high", math.inf)
        if lo > hi:
            raise InputError(f"{p}: line {line}: column low: {lo:g} is above high {hi:g}")
        if math.isinf(lo) and math.isinf(hi):
            raise InputError(f"{p}: line {line}: column low: a range needs at least one bound")
        if row["setting"] not in SETTINGS:
            raise InputError(f"{p}: line {line}: column setting: expected one of {', '.join(SETTINGS)}, got {row['setting']!r}")
        for c in ("figure_id", "strategy", "metric", "figure", "source"):
            if not row[c].strip():
                raise InputError(f"{p}: line {line}: column {c}: must not be empty")
        if row["figure_id"] in seen:
            raise InputError(f"{p}: line {line}: column figure_id: {row['figure_id']!r} appears twice")
        seen.add(row["figure_id"])
        out.append(PublishedRange(row["figure_id"], row["setting"], row["strategy"], row["metric"], row["relative_to"].strip(),
                                  lo, hi, row["figure"], row["source"], row["source_locator"]))
    return out
