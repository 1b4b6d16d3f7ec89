"""The waterfall of `specagent explain`: from Strong-only's 1 to SpecAgent's ratio, one bar per phase.

Why a waterfall: the ratio is a sum of per-phase changes (simulator/explain.py), some large and
opposite (Strong decode removed, Weak drafting added), so a reader sees at a glance which phase
holds the saving and which floor (tool and user waits) no strategy moves.
"""

from __future__ import annotations

import plotly.graph_objects as go

from specagent.simulator.explain import Decomposition

#: Changes smaller than this (of Strong-only's total) are left out of the bars (they would be invisible); the
#: total bar still ends at the exact ratio.
MIN_BAR = 5e-4


def waterfall_figure(dec: Decomposition, title: str = "") -> go.Figure:
    """Strong-only = 1, then each phase's change (SpecAgent's share minus Strong-only's), then SpecAgent's ratio.

    Strong-only's tool and user waits are a grey band under the bars (the floor no strategy moves); a phase that
    changes by less than MIN_BAR is left out of the bars."""
    waits = [t for t in dec.terms if t.phase in ("tool", "user")]
    moved = [t for t in dec.terms if t.phase not in ("tool", "user") and abs(t.delta) >= MIN_BAR]
    x = ["Strong-only"]
    y = [1.0]
    measure = ["absolute"]
    text = ["1.000"]
    for t in moved:
        x.append(t.label)
        y.append(t.delta)
        measure.append("relative")
        # a phase with its factors says why: tokens per reference token, cost per token against the reference
        text.append(f"{t.delta:+.3f}" + (f"<br>{t.factors[1].value:.3g}× tokens<br>{t.factors[2].value:.3g}× cost/token"
                                         if len(t.factors) == 3 else ""))
    x.append("SpecAgent")
    y.append(dec.ratio)
    measure.append("total")
    text.append(f"{dec.ratio:.3f}")
    fig = go.Figure(go.Waterfall(
        x=x, y=y, measure=measure, text=text, textposition="outside", orientation="v", cliponaxis=False,
        increasing={"marker": {"color": "#d6604d"}}, decreasing={"marker": {"color": "#4393c3"}},
        totals={"marker": {"color": "#636363"}}, connector={"line": {"color": "#bbb", "dash": "dot"}},
        hovertemplate="%{x}<br>%{text}<extra></extra>"))
    floor = sum(w.strongonly for w in waits)
    if floor > 0:  # the floor: Strong-only's waits, as a band under the bars
        fig.add_hrect(y0=0, y1=floor, fillcolor="#bdbdbd", opacity=0.3, line_width=0,
                      annotation_text=f"tool and user waits: {floor:.3f} (no strategy changes them)",
                      annotation_position="bottom right")
    top = max([1.0, dec.ratio] + [1.0 + sum(t.delta for t in moved[:i + 1]) for i in range(len(moved))])
    fig.update_layout(title=title or f"Why SpecAgent's {dec.resource} ratio is {dec.ratio:.3f}<br><sup>{dec.meaning}; "
                      "each bar: a phase's share in SpecAgent minus its share in Strong-only</sup>",
                      xaxis_title="phase (from Strong-only to SpecAgent)", yaxis_title="÷ Strong-only's total", yaxis_range=[0, top * 1.3], showlegend=False,
                      height=520, margin=dict(t=110, b=170, l=70, r=30), template="plotly_white")
    fig.update_xaxes(tickangle=-30)
    return fig
