"""What `specagent report` prints: the page written and, per figure, whether it is in it or why not; then what became
of the PNG/SVG copies. Reads the `ReportResult` of `reports/html.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted

if TYPE_CHECKING:
    from specagent.reports.html import ReportResult


def written(res: ReportResult, console: Console) -> list[RenderableType]:
    """The figures' table and the copies' message."""
    rows = [[f.key, "included" if f.figure is not None else f"not shown: {f.reason}"] for f in res.figures]
    out: list[RenderableType] = [fitted(console, (Col("figure", "left"), Col("status", "left")), rows,
                                        title=f"report written: {res.path}")]
    if res.images is not None:
        out.append(Text.from_markup(res.images.message))
    return out
