"""The sensitivity study's own HTML page: the break-evens in words, the tornado and the break-even map, nothing else.

Why a page of its own: the predict report's skeleton (bottom line, phases, figures not shown)
is empty for a study that has no strategy results, and a reader looking for "where does
SpecAgent stop paying" should find that sentence first, not nine "figures not shown".
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Mapping

import plotly.io as pio
from plotly.offline import get_plotlyjs

from specagent.common import atomic
from specagent.reports.figures import FigureNotSupported
from specagent.reports.html import CSS
from specagent.reports.sensitivity import break_even_figure, tornado_figure


def render_sensitivity_page(doc: Mapping[str, Any], title: str) -> str:
    """The whole page as a string (deterministic for the same study)."""
    parts = [f"<h1>{escape(str(title))}</h1>"]
    kinds = [r for r in doc.get("kind_break_even") or [] if isinstance(r, Mapping) and r.get("text")]
    if kinds:
        parts.append('<h2 id="break-even-words">Where SpecAgent stops paying, per step kind</h2>'
                     "<p>Each kind's semantic acceptance moved over [0, 1], the other kinds and every other assumption at "
                     "the scenario's values, at this scenario's Weak speed.</p><ul>")
        parts += [f"<li>{escape(str(r['text']))}</li>" for r in kinds]
        parts.append("</ul>")
    for key, caption, make in (
            ("fig_tornado", "SpecAgent ÷ Strong-only at each end of each assumption's range, the others at the scenario's "
                        "values (ranges and rationales: docs/uncertainty.md).", tornado_figure),
            ("fig_break_even", "Break-even map: SpecAgent's wall time ÷ Strong-only's over semantic acceptance × Weak/Strong "
                           "time per token; the line is where it equals 1.", break_even_figure)):
        try:
            fig = make(doc)
        except FigureNotSupported as exc:
            parts.append(f'<p class="note">{escape(str(key))} not drawn: {escape(str(exc))}</p>')
            continue
        div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"plot-{key}")
        parts.append(f'<figure id="{key}" data-figure="{key}">{div}<figcaption>{escape(str(caption))}</figcaption></figure>')
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(str(title))}</title>"
            f"<style>{CSS}</style>\n<script type=\"text/javascript\">{get_plotlyjs()}</script>\n</head>\n"
            f"<body><main>\n{body}\n</main></body></html>\n")


def write_sensitivity_page(doc: Mapping[str, Any], out: str | Path, title: str) -> Path:
    p = Path(out)
    atomic.write_text(p, render_sensitivity_page(doc, title))
    return p
