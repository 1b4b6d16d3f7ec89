"""The waterfall of `specagent explain`: from Strong-only's 1 to SpecAgent's ratio, one bar per phase.

Why a waterfall: the ratio is a sum of per-phase changes (simulator/explain.py), some large and
opposite (Strong decode removed, Weak drafting added), so a reader sees at a glance which phase
holds the saving and which floor (tool and user waits) no strategy moves.
"""

from __future__ import annotations

from typing import Any, Mapping

import plotly.graph_objects as go

from specagent.reports.figures import MODEBAR_ROOM, title_text, wrap_label

#: Changes smaller than this (of Strong-only's total) are left out of the bars (they would be invisible); the
#: total bar still ends at the exact ratio.
MIN_BAR = 5e-4


def plain(dec: Any) -> dict[str, Any]:
    """A decomposition as the predict job stores it (`views.decompositions[resource]`: meaning, ratio, terms with phase,
    label, strongonly, specagent, change and factors), from that dict or from `explain`'s object in memory."""
    if isinstance(dec, Mapping):
        return dict(dec)
    return {"meaning": dec.meaning, "ratio": dec.ratio, "terms": [
        {"phase": t.phase, "label": t.label, "strongonly": t.strongonly, "specagent": t.specagent, "change": t.delta,
         "factors": [{"name": f.name, "value": f.value} for f in t.factors]} for t in dec.terms]}


def waterfall_figure(dec: Any, title: str = "", resource: str = "wall") -> go.Figure:
    """Strong-only = 1, then each phase's change (SpecAgent's share minus Strong-only's), then SpecAgent's ratio.

    `dec` is one resource's decomposition (`plain`'s dict; `resource` names it in the title). Strong-only's tool and
    user waits are a grey band under the bars (the floor no strategy moves); a phase that changes by less than MIN_BAR
    is left out of the bars."""
    d = plain(dec)
    resource = getattr(dec, "resource", resource)
    terms = list(d["terms"])
    ratio = float(d["ratio"])
    waits = [t for t in terms if t["phase"] in ("tool", "user")]
    moved = [t for t in terms if t["phase"] not in ("tool", "user") and abs(float(t["change"])) >= MIN_BAR]
    x = ["Strong-only"]
    y = [1.0]
    measure = ["absolute"]
    text = ["1.000"]
    for t in moved:
        f = t.get("factors") or []
        x.append(t["label"])
        y.append(float(t["change"]))
        measure.append("relative")
        # a phase with its factors says why: tokens per reference token, cost per token against the reference
        text.append(f"{float(t['change']):+.3f}" + (f"<br>{float(f[1]['value']):.3g}× tokens<br>{float(f[2]['value']):.3g}× "
                                                    "cost/token" if len(f) == 3 else ""))
    x.append("SpecAgent")
    y.append(ratio)
    measure.append("total")
    text.append(f"{ratio:.3f}")
    fig = go.Figure(go.Waterfall(
        x=x, y=y, measure=measure, text=text, textposition="outside", orientation="v", cliponaxis=False,
        increasing={"marker": {"color": "#d6604d"}}, decreasing={"marker": {"color": "#4393c3"}},
        totals={"marker": {"color": "#636363"}}, connector={"line": {"color": "#bbb", "dash": "dot"}},
        hovertemplate="%{x}<br>%{text}<extra></extra>"))
    floor = sum(float(w["strongonly"]) for w in waits)
    if floor > 0:  # the floor: Strong-only's waits, as a band under the bars (said in the subtitle, not over a bar)
        fig.add_hrect(y0=0, y1=floor, fillcolor="#bdbdbd", opacity=0.3, line_width=0)
    top = max([1.0, ratio] + [1.0 + sum(float(t["change"]) for t in moved[:i + 1]) for i in range(len(moved))])
    sub = f"{d['meaning']}; each bar: a phase's share in SpecAgent minus its share in Strong-only" + (
        f"; grey band: Strong-only's tool and user waits, {floor:.3f} of its total (no strategy changes them)" if floor > 0 else "")
    head = title or title_text(f"Why SpecAgent's {resource} ratio is {ratio:.3f}", sub)
    fig.update_layout(title=dict(text=head, x=0.01, xanchor="left", yref="container", y=1.0, yanchor="top",
                                 pad=dict(t=MODEBAR_ROOM + 20)),
                      xaxis_title="phase (from Strong-only to SpecAgent)", yaxis_title="÷ Strong-only's total",
                      yaxis_range=[0, top * 1.3], showlegend=False, height=540 + MODEBAR_ROOM + 20 * head.count("<br>"),
                      margin=dict(t=60 + MODEBAR_ROOM + 20 * head.count("<br>"), b=170, l=70, r=30), template="plotly_white")
    fig.update_xaxes(tickangle=0, tickvals=x, ticktext=[wrap_label(v, 13) for v in x])  # wrapped, not slanted: no two overlap
    return fig
