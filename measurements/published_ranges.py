"""The published protocol figures (Wang et al., arXiv:2610.21463) as ranges to print beside the simulator's ratios.

A view of `protocol_figures.csv` (the one home of those figures, which `acceptance calibrate`
also reads): the rows the simulator's summary can be held to, each named by the summary column
it corresponds to and the setting it was measured in (`tau2`: self-hosted on H20; `edge`:
MCP-Atlas, Strong behind an API). Quality figures, figures of workloads that do not ship
(VitaBench, AutomationBench) and hardware facts have no column and are left out here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specagent.common.errors import InputError
from specagent.measurements import MeasurementError
from specagent.measurements.protocol_figures import RATIO_TOTALS, ProtocolFigure, load_protocol_figures

SETTINGS = ("tau2", "edge")
#: protocol_figures.csv's metric -> the summary column (`*_rel`: relative to Strong-only) it is judged against.
SUMMARY_COLUMNS = {**{m: f"{c}_rel" for m, c in RATIO_TOTALS.items()}, "strong_bytes_share": "strong_bytes_share"}


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


def _setting(f: ProtocolFigure) -> str | None:
    if f.setting == "edge":
        return "edge"
    return "tau2" if f.benchmark.lower().startswith("tau2") else None


def published_range(f: ProtocolFigure) -> PublishedRange | None:
    """The figure as a range on a summary column, or None when the summary has no such column or setting."""
    column, setting = SUMMARY_COLUMNS.get(f.metric), _setting(f)
    if column is None or setting is None or not f.strategy:
        return None
    relative_to = "" if f.metric == "strong_bytes_share" else f.relative_to
    return PublishedRange(f.figure_id, setting, f.strategy, column, relative_to, f.low, f.high,
                          f"{f.benchmark}: {f.notes}" if f.notes else f.benchmark, f.source, f.source_locator)


def load_published_ranges(path: str | Path | None = None) -> list[PublishedRange]:
    """The figures of a protocol-figures file (the shipped one by default) that the summary can be held to."""
    try:
        figures = load_protocol_figures(path)
    except MeasurementError as exc:
        raise InputError(str(exc)) from None
    return [r for r in map(published_range, figures) if r is not None]
