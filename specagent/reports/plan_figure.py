"""The plan's own capacity_curve.html: the capacity figure, titled with what the plan was sized for (its SLO, models and prices).

Why: `plan --out` writes the figure as a file of its own, read without the plan around it; it stated no SLO, models or
prices, and carried the report's figure number (issue #51). The figure is the report's (`figures.capacity_plan_figure`);
this adds the lines under its title and leaves the report's numbering to the report. `write_plan` writes it beside
plan.json (`plan --out`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from specagent.simulator.jobs.plan import PlanResult

#: Room each line under the title takes, in pixels (the title's own lines are 20 px apart).
LINE_PX = 20


def plan_curve(best: pd.DataFrame, setting: Sequence[str]) -> go.Figure:
    """The capacity figure of `best` (the plan's cheapest fleets), its title unnumbered and followed by the `setting` lines."""
    from specagent.reports.figures import capacity_plan_figure

    fig = capacity_plan_figure(best)
    title = re.sub(r"^\d+ · ", "", str(fig.layout.title.text or ""))
    fig.update_layout(title_text=title + "".join(f"<br><span style='font-size:12px'>{line}</span>" for line in setting),
                      margin_t=(fig.layout.margin.t or 80) + LINE_PX * len(setting),
                      height=(fig.layout.height or 520) + LINE_PX * len(setting))
    return fig


def write_plan(res: PlanResult, out: Path) -> str:
    """plan.json and its capacity_curve.html in `out`, together (both or neither), then the optional PNG/SVG copies:
    returns what became of the copies, in words for the files line (", .png, .svg", or why not: a failure to render is a
    note, not an error). An OSError writing the folder is the caller's to word."""
    from specagent.reports.screens.plan import setting_lines
    from specagent.reports.static import export_images

    fig = plan_curve(res.best, setting_lines(res)) if len(res.best) else None
    res.write(out, also=None if fig is None else {
        "capacity_curve.html": lambda tmp: fig.write_html(tmp, include_plotlyjs=True, full_html=True)})
    if fig is None:
        return ""
    img = export_images({"capacity_curve": fig}, out)
    names = "".join(f", {Path(p).suffix}" for p in img.written)  # the copies' suffixes: capacity_curve.png, .svg
    return names + (f"; {', '.join(img.failed)} not rendered by kaleido" if img.failed else "") if img.written else f"; {img.message}"
