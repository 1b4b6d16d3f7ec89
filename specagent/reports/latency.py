"""Predicted vs measured latency of public serving measurements: one log-log figure, one colour per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import plotly.graph_objects as go

from specagent.common import atomic

_SYMBOLS = {"tpot": "circle", "ttft": "diamond", "e2e": "square", "throughput": "triangle-up"}


def latency_figure(rows: Sequence[dict[str, Any]], title: str) -> go.Figure:
    """`rows` as `Validation.rows()` gives them (measured, predicted, gpu, metric, row_id; engine and concurrency if known)."""
    fig = go.Figure()
    for gpu in sorted({r["gpu"] for r in rows}):
        sel = [r for r in rows if r["gpu"] == gpu]
        fig.add_trace(go.Scatter(
            x=[r["measured"] for r in sel], y=[r["predicted"] for r in sel], mode="markers", name=gpu,
            marker=dict(symbol=[_SYMBOLS.get(r["metric"], "circle") for r in sel], size=8),
            text=[f"{r['row_id']} ({r['metric']}, {r.get('engine', '?')}, C={r.get('concurrency', '?')}): "
                  f"{r['predicted'] / r['measured'] - 1:+.0%}" for r in sel],
            hovertemplate="%{text}<br>measured %{x:.4g}<br>predicted %{y:.4g}<extra></extra>",
        ))
    vals = [v for r in rows for v in (r["measured"], r["predicted"]) if v > 0]
    if vals:
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured", line=dict(dash="dash", color="grey")))
        for f, name in ((1.3, "±30%"), (1 / 1.3, None)):
            fig.add_trace(go.Scatter(x=[lo, hi], y=[lo * f, hi * f], mode="lines", name=name or "", showlegend=name is not None,
                                     line=dict(dash="dot", color="lightgrey")))
    fig.update_xaxes(type="log", title="measured (ms; throughput in tok/s)")
    fig.update_yaxes(type="log", title="predicted (ms; throughput in tok/s)")
    fig.update_layout(title=title, legend_title="GPU (symbol: metric)", width=900, height=700)
    return fig


def write_latency_figure(rows: Sequence[dict[str, Any]], path: str | Path, title: str) -> Path:
    html = latency_figure(rows, title).to_html(full_html=True, include_plotlyjs=True)
    return atomic.write_text(path, html)
