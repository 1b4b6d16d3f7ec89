"""The sensitivity study's figures: a tornado of SpecAgent's ratios and the break-even map.

Inputs are the plain records `simulator.jobs.sensitivity.SensitivityResult.to_dict()` writes (and
`specagent study sensitivity` stores as sensitivity.json), so the report can draw them from
the file alone.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specagent.reports.figures import FigureNotSupported, finish_layout

KIND = "specagent.sensitivity/1"
TORNADO_NEEDS = ("assumption", "metric", "label", "base", "at_low", "at_high", "low_value", "high_value")


def _check(doc: Mapping[str, Any]) -> None:
    if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
        raise FigureNotSupported(f"not a sensitivity study (expected kind {KIND!r})")


def tornado_figure(doc: Mapping[str, Any]) -> go.Figure:
    """One panel per ratio; a bar per assumption from its low end to its high end, the scenario's value marked."""
    _check(doc)
    df = pd.DataFrame(doc.get("tornado") or [])
    missing = [c for c in TORNADO_NEEDS if c not in df.columns]
    if df.empty or missing:
        raise FigureNotSupported(f"the tornado needs rows with {', '.join(TORNADO_NEEDS)}")
    # a ratio Strong-only has no figure for (memory and FLOPs of a hosted Strong model) has no panel
    metrics = [m for m in dict.fromkeys(df["metric"]) if pd.to_numeric(df.loc[df["metric"] == m, "base"], errors="coerce").notna().any()]
    if not metrics:
        raise FigureNotSupported("the tornado has no ratio with a value")
    labels = [df.loc[df["metric"] == m, "label"].iloc[0] for m in metrics]
    order = list(dict.fromkeys(df["assumption"]))[::-1]  # largest wall swing on top
    fig = make_subplots(rows=1, cols=len(metrics), shared_yaxes=True, subplot_titles=labels, horizontal_spacing=0.02)
    for j, m in enumerate(metrics, start=1):
        d = df[df["metric"] == m].set_index("assumption").reindex(order)
        lo, hi, base = d["at_low"].to_numpy(float), d["at_high"].to_numpy(float), d["base"].to_numpy(float)
        text_lo = [f"{a}: {v} → {x:.3f}" for a, v, x in zip(order, d["low_value"], lo)]
        text_hi = [f"{a}: {v} → {x:.3f}" for a, v, x in zip(order, d["high_value"], hi)]
        fig.add_trace(go.Bar(y=order, x=lo - base, base=base, orientation="h", marker_color="#3182bd", name="low end",
                             hovertext=text_lo, hoverinfo="text", showlegend=j == 1, legendgroup="lo"), 1, j)
        fig.add_trace(go.Bar(y=order, x=hi - base, base=base, orientation="h", marker_color="#e6550d", name="high end",
                             hovertext=text_hi, hoverinfo="text", showlegend=j == 1, legendgroup="hi"), 1, j)
        b = float(np.nanmedian(base))
        fig.add_vline(x=b, line_dash="dot", line_color="#555", row=1, col=j)
        fig.add_vline(x=1.0, line_color="#999", row=1, col=j)
    fig.update_layout(barmode="overlay")
    return finish_layout(fig, "Sensitivity · SpecAgent's ratios to Strong-only as each assumption moves over its range<br>"
                        "<sup>dotted: the scenario's value; solid: 1 (Strong-only); blue: the low end, orange: the high end</sup>",
                   height=max(420, 26 * len(order) + 160), legend="bottom", bottom=80)


def break_even_figure(doc: Mapping[str, Any]) -> go.Figure:
    """SpecAgent's wall-time ratio over semantic acceptance × Weak/Strong time per token, the break-even line at 1."""
    _check(doc)
    be = doc.get("break_even") or {}
    grid, line = pd.DataFrame(be.get("grid") or []), pd.DataFrame(be.get("line") or [])
    if grid.empty or line.empty or "r0" not in be:
        raise FigureNotSupported("the break-even map needs its grid, its line and r0")
    piv = grid.pivot(index="time_ratio", columns="acceptance", values="wall_time_s_rel")
    fig = go.Figure()
    fig.add_trace(go.Heatmap(x=piv.columns, y=piv.index, z=piv.to_numpy(), colorscale="RdBu_r", zmid=1.0,
                             colorbar=dict(title="wall ÷<br>Strong-only"), name="wall ratio",
                             hovertemplate="acceptance %{x}<br>Weak/Strong time per token %{y:.3f}<br>wall ratio %{z:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=line["acceptance"], y=line["wall_break_even"], mode="lines+markers", line=dict(color="black"),
                             name="break-even (wall = Strong-only)"))
    if "model_break_even" in line:
        fig.add_trace(go.Scatter(x=line["acceptance"], y=line["model_break_even"], mode="lines", line=dict(color="black", dash="dash"),
                                 name="break-even on model time"))
    fig.add_trace(go.Scatter(x=[be.get("base_acceptance")], y=[be["r0"]], mode="markers", marker=dict(symbol="x", size=12, color="#111"),
                             name=f"this scenario (time ratio {be['r0']:.3f})"))
    fig.update_xaxes(title_text="semantic acceptance (every step kind)")
    fig.update_yaxes(title_text="Weak time per token ÷ Strong time per token")
    return finish_layout(fig, "Break-even · where SpecAgent's wall time equals Strong-only's<br>"
                        "<sup>below the line SpecAgent is faster; the scenario's decay and correlation kept</sup>",
                   height=560, legend="bottom", bottom=90)
