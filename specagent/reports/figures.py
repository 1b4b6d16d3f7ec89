"""The report's figures: each one function from results (plain DataFrames) to a plotly Figure.

Every figure is a view of numbers the simulator, the fleet study, calibration or the
cost model produced; nothing is drawn that those did not compute. Inputs are plain
frames with documented columns so that notebooks, the HTML report and other tools can
call the same functions.

Common input: a *summary* frame, one row per strategy (and per workload when several
benchmarks are compared), with columns ``strategy``, ``label``, ``workload`` and the
simulator's totals and ``*_rel`` ratios to Strong-only (see
``specagent.simulator.pricing.results.summarize``).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

BASELINE = "strongonly"
TEMPLATE = "plotly_white"

#: Phase groups (specagent.simulator.pricing.results.PHASE_GROUPS) in stacking order, with display names.
PHASE_LABELS = {
    "weak_prefill": "Weak prefill",
    "weak_drafting": "Weak drafting (decode)",
    "strong_prefill": "Strong prefill (own turns)",
    "strong_verification": "Strong verification (prefill of drafts)",
    "strong_repair_verdict": "Strong repair + verdict (decode)",
    "tool": "Tool time",
    "user": "User time",
}
PHASE_COLORS = {
    "weak_prefill": "#9ecae1", "weak_drafting": "#3182bd", "strong_prefill": "#fdae6b",
    "strong_verification": "#e6550d", "strong_repair_verdict": "#a63603", "tool": "#74c476", "user": "#bdbdbd",
}
#: Model phases (specagent.simulator.protocol.phases.PHASE_NAMES) shown on the roofline.
MODEL_PHASES = {
    "weak_prefill": ("weak", "Weak prefill"),
    "weak_decode": ("weak", "Weak decode (drafting)"),
    "strong_prefill": ("strong", "Strong prefill"),
    "strong_verify": ("strong", "Strong verification prefill"),
    "strong_decode": ("strong", "Strong decode (own steps / repair)"),
    "strong_verdict": ("strong", "Strong verdict decode"),
}


# ----------------------------------------------------------------------------- helpers
def _summary_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """Strategy and workload as columns, whatever the input's index."""
    df = summary.copy()
    if "strategy" not in df.columns:
        df.index.name = "strategy"
        df = df.reset_index()
    if "label" not in df.columns:
        df["label"] = df["strategy"]
    if "workload" not in df.columns:
        df["workload"] = ""
    df["workload"] = df["workload"].fillna("").astype(str)
    return df


def strategy_colors(strategies: Iterable[str]) -> dict[str, str]:
    """A fixed colour per strategy, in first-seen order, shared by every figure of a report."""
    palette = qualitative.Plotly + qualitative.D3
    out: dict[str, str] = {}
    for s in strategies:
        if s not in out:
            out[s] = palette[len(out) % len(palette)]
    return out


def _x_axis(df: pd.DataFrame) -> list:
    """Strategy labels, grouped under workload names when there are several workloads."""
    labels = [_wrap(x) for x in df["label"]]
    if df["workload"].nunique() > 1:
        return [df["workload"].tolist(), labels]
    return labels


def _wrap(label: str, width: int = 18) -> str:
    """Break a long strategy label into lines so tick labels stay readable."""
    words, lines, cur = str(label).split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return "<br>".join(lines)


def _vline(fig: go.Figure, x: float, text: str, log_x: bool, color: str = "#999", dash: str = "dot",
           yanchor: str = "top", y: float = 1.0, row: int | None = None, col: int | None = None,
           xanchor: str = "left") -> None:
    """A vertical marker with its label; annotations on a log axis take log10(x), shapes take x."""
    kw = {} if row is None else {"row": row, "col": col}
    fig.add_vline(x=x, line_dash=dash, line_color=color, **kw)
    ax = np.log10(x) if log_x else x
    fig.add_annotation(x=ax, y=y, yref="paper", text=text, showarrow=False, xanchor=xanchor, yanchor=yanchor,
                       font=dict(size=11, color=color), bgcolor="rgba(255,255,255,0.8)", **kw)


def _fmt_rel(v: float) -> str:
    return f"{v:.2f}×" if np.isfinite(v) else ""


def _finish(fig: go.Figure, title: str, height: int = 480, top: int = 110, legend: str = "top", bottom: int = 60) -> go.Figure:
    """Shared look: title at the top left; legend above the plot, below it (figures with subplot
    titles) or to its right; white template."""
    if "<br>" in title:
        top += 22
    leg = {
        "top": dict(orientation="h", y=1.02, yanchor="bottom", x=0, xanchor="left"),
        "bottom": dict(orientation="h", y=0, yref="container", yanchor="bottom", x=0, xanchor="left"),
        "right": dict(orientation="v", y=1.0, yanchor="top", x=1.02, xanchor="left", font=dict(size=11)),
    }[legend]
    fig.update_layout(template=TEMPLATE, height=height, legend=leg,
                      title=dict(text=title, x=0.01, xanchor="left", yref="container", y=1.0, yanchor="top", pad=dict(t=14)),
                      margin=dict(l=70, r=10 if legend == "right" else 30, t=top, b=bottom))
    return fig


class FigureNotSupported(ValueError):
    """The results given do not contain what this figure needs; the message says what is missing."""


def _need(df: pd.DataFrame, cols: Sequence[str], figure: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise FigureNotSupported(f"{figure}: results lack column(s) {', '.join(missing)}")


# ----------------------------------------------------------------------------- figure 1
def memory_reads_figure(summary: pd.DataFrame, intervals: Mapping | None = None) -> go.Figure:
    """Figure 1: Strong-model HBM reads and total HBM reads (both models) per strategy, relative to Strong-only.

    Columns: strategy, label, workload (optional), strong_bytes_read_rel, total_bytes_read_rel. With
    `intervals` (summary.json's), each bar carries its interval as an error bar.
    """
    df = _summary_frame(summary)
    _need(df, ["strong_bytes_read_rel", "total_bytes_read_rel"], "Figure 1 (memory reads)")
    x = _x_axis(df)
    fig = go.Figure()
    for col, name, color in (("strong_bytes_read_rel", "Strong model reads", "#e6550d"),
                             ("total_bytes_read_rel", "Total reads (Weak + Strong)", "#3182bd")):
        v = df[col].astype(float).to_numpy()
        fig.add_bar(x=x, y=v, name=name, marker_color=color, text=[_fmt_rel(a) for a in v], textposition="outside",
                    error_y=_bar_intervals(intervals, df["strategy"], col, v),
                    hovertemplate="%{x}<br>" + name + ": %{y:.3f}× Strong-only<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#444", annotation_text="Strong-only = 1", annotation_position="top right")
    fig.update_layout(barmode="group", yaxis_title="HBM bytes read ÷ Strong-only", xaxis_title="strategy", xaxis_tickangle=0)
    fig.update_yaxes(rangemode="tozero")
    return _finish(fig, "1 · HBM memory reads relative to Strong-only (lower is better)" + _bars_note(intervals), height=560)


def _bar_intervals(intervals: Mapping | None, strategies: Iterable[str], metric: str, points: Sequence[float]) -> dict | None:
    """Asymmetric error bars for a row of bars from summary.json's `intervals` rows (0 where a strategy has none)."""
    rows = {r.get("strategy"): r for r in (intervals or {}).get("intervals") or [] if r.get("metric") == metric}
    strategies = list(strategies)
    if not any(s in rows for s in strategies):
        return None
    hi = [max(float(rows[s]["high"]) - p, 0.0) if s in rows else 0.0 for s, p in zip(strategies, points)]
    lo = [max(p - float(rows[s]["low"]), 0.0) if s in rows else 0.0 for s, p in zip(strategies, points)]
    return dict(type="data", symmetric=False, array=hi, arrayminus=lo, thickness=1.2, width=4, color="#222")


def _bars_note(intervals: Mapping | None) -> str:
    """The subtitle that says what a figure's error bars are."""
    if not (intervals and intervals.get("intervals")):
        return ""
    return (f"<br><sup>bars: {float(intervals.get('level', 0)):.0%} intervals over "
            f"{_e_text(intervals.get('includes', 'the acceptance parameters'))}</sup>")


# ----------------------------------------------------------------------------- bottom line
def bottom_line_figure(line: pd.DataFrame, ranges: pd.DataFrame | None = None, level: float | None = None,
                       includes: str = "", labels: Mapping[str, str] | None = None) -> go.Figure:
    """The report's first figure: seconds and dollars per task per strategy, each with its range where drawn.

    Why first: the question a reader brings is "how long does a task take and what does it cost", not HBM
    bytes. `line` is `jobs.bottom_line.bottom_line()` (indexed by strategy; columns wall_s_per_task,
    model_s_per_task, env_s_per_task, usd_per_task); `ranges` its intervals (columns strategy, column, low,
    high), drawn as error bars on the totals. A strategy with no price has no dollar bar, never a zero one.
    """
    _need(line, ["wall_s_per_task", "model_s_per_task", "env_s_per_task", "usd_per_task"], "Time and cost per task")
    lohi = {} if ranges is None or ranges.empty else {(r.strategy, r.column): (float(r.low), float(r.high))
                                                      for r in ranges.itertuples()}

    def bars(col: str, strategies: Sequence[str], values: np.ndarray) -> dict | None:
        if not any((s, col) in lohi for s in strategies):
            return None
        hi = [max(lohi[(s, col)][1] - v, 0.0) if (s, col) in lohi else 0.0 for s, v in zip(strategies, values)]
        lo = [max(v - lohi[(s, col)][0], 0.0) if (s, col) in lohi else 0.0 for s, v in zip(strategies, values)]
        return dict(type="data", symmetric=False, array=hi, arrayminus=lo, thickness=1.4, width=5, color="#222")

    keys = [str(s) for s in line.index]
    colors = strategy_colors(keys)
    names = [_wrap(str((labels or {}).get(k, k))) for k in keys]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("Seconds per task (model time + tool and user waits)", "Dollars per task"))
    model = line["model_s_per_task"].to_numpy(dtype=float)
    env = line["env_s_per_task"].to_numpy(dtype=float)
    wall = line["wall_s_per_task"].to_numpy(dtype=float)
    fig.add_bar(y=names, x=model, orientation="h", name="model time", marker_color="#3182bd", row=1, col=1,
                hovertemplate="%{y}<br>model time %{x:.1f} s/task<extra></extra>")
    # the range is the wall time's: drawn on the stack's end, the waits' segment carries it
    fig.add_bar(y=names, x=env, orientation="h", name="tool and user waits", marker_color="#bdbdbd", row=1, col=1,
                error_x=bars("wall_s_per_task", keys, wall), customdata=wall,
                hovertemplate="%{y}<br>waits %{x:.1f} s/task<br>wall %{customdata:.1f} s/task<extra></extra>")
    usd = line["usd_per_task"].to_numpy(dtype=float)
    priced = np.isfinite(usd)
    shown = [k for k, ok in zip(keys, priced) if ok]
    fig.add_bar(y=[n for n, ok in zip(names, priced) if ok], x=usd[priced], orientation="h", name="$ per task",
                showlegend=False, marker_color=[colors[k] for k in shown], row=1, col=2,
                error_x=bars("usd_per_task", shown, usd[priced]),
                hovertemplate="%{y}<br>$%{x:.4g} per task<extra></extra>")
    fig.update_layout(barmode="stack", bargap=0.3)
    fig.update_yaxes(autorange="reversed", title_text="strategy", row=1, col=1)
    fig.update_xaxes(title_text="s per task", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="$ per task", rangemode="tozero", row=1, col=2)
    sub = (f"bars: {level:.0%} intervals over {_e_text(includes or 'the drawn sources')}" if lohi and level
           else "no intervals were drawn for this run: points only")
    return _finish(fig, f"Time and cost per task (shorter is better)<br><sup>{sub}</sup>",
                   height=200 + 52 * max(len(keys), 3), top=100, legend="bottom", bottom=100)


# ----------------------------------------------------------------------------- figure 2
def _error_bars(intervals: Mapping | None, strategy: str, metric: str, point: float) -> dict | None:
    """Plotly error bars (asymmetric) for one point from summary.json's `intervals` rows, or None."""
    for r in (intervals or {}).get("intervals") or []:
        if r.get("strategy") == strategy and r.get("metric") == metric:
            lo, hi = float(r["low"]), float(r["high"])
            return dict(type="data", symmetric=False, array=[max(hi - point, 0.0)], arrayminus=[max(point - lo, 0.0)],
                        thickness=1.2, width=4)
    return None


def operating_points_figure(summary: pd.DataFrame, intervals: Mapping | None = None) -> go.Figure:
    """Figure 2: each strategy's memory traffic and wall time (x) against measured success (y).

    Columns: strategy, label, workload, total_bytes_read_rel, wall_time_s_rel and, when
    quality was measured, measured_success (0..1). Without measured success, quality is not
    invented: the figure plots memory traffic against wall time instead and says so. With
    `intervals` (summary.json's), each point carries its intervals as error bars.
    """
    df = _summary_frame(summary)
    _need(df, ["total_bytes_read_rel", "wall_time_s_rel"], "Figure 2 (operating points)")
    colors = strategy_colors(df["strategy"])
    workloads = list(dict.fromkeys(df["workload"]))
    symbols = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon"]
    sym = {w: symbols[i % len(symbols)] for i, w in enumerate(workloads)}
    has_quality = "measured_success" in df.columns and df["measured_success"].notna().any()
    if has_quality:
        q = df[df["measured_success"].notna()]
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                            subplot_titles=("Memory traffic (HBM reads) ÷ Strong-only", "Wall time ÷ Strong-only"))
        for c, col in enumerate(("total_bytes_read_rel", "wall_time_s_rel"), start=1):
            for _, r in q.iterrows():
                name = r["label"] + (f" · {r['workload']}" if len(workloads) > 1 else "")
                fig.add_scatter(x=[r[col]], y=[r["measured_success"]], mode="markers+text", name=name, legendgroup=name,
                                showlegend=c == 1, text=[str(r["strategy"])], textposition="top center", textfont=dict(size=10),
                                marker=dict(size=13, color=colors[r["strategy"]], symbol=sym[r["workload"]]),
                                hovertemplate=f"{name}<br>%{{x:.3f}}× Strong-only<br>success %{{y:.3f}}<extra></extra>",
                                row=1, col=c)
            fig.add_vline(x=1.0, line_dash="dot", line_color="#444", row=1, col=c)
        fig.update_yaxes(title_text="measured success rate", row=1, col=1)
        title = "2 · Operating points: cost relative to Strong-only vs measured quality (upper left is better)"
        missing = list(dict.fromkeys(df[df["measured_success"].isna()]["label"]))
        if missing:
            title += f"<br><sup>{len(missing)} strateg{'y' if len(missing) == 1 else 'ies'} without measured success not shown</sup>"
        return _finish(fig, title, height=560, top=80, legend="bottom", bottom=110)
    fig = go.Figure()
    for _, r in df.iterrows():
        name = r["label"] + (f" · {r['workload']}" if len(workloads) > 1 else "")
        # each point labelled with its strategy (nine colours alone are slow to match to a legend)
        fig.add_scatter(x=[r["total_bytes_read_rel"]], y=[r["wall_time_s_rel"]], mode="markers+text", name=name,
                        error_x=_error_bars(intervals, r["strategy"], "total_bytes_read_rel", float(r["total_bytes_read_rel"])),
                        error_y=_error_bars(intervals, r["strategy"], "wall_time_s_rel", float(r["wall_time_s_rel"])),
                        text=[str(r["strategy"])], textposition="top center", textfont=dict(size=10, color=colors[r["strategy"]]),
                        marker=dict(size=13, color=colors[r["strategy"]], symbol=sym[r["workload"]]),
                        hovertemplate=f"{name}<br>memory %{{x:.3f}}×<br>wall time %{{y:.3f}}×<extra></extra>")
    fig.add_vline(x=1.0, line_dash="dot", line_color="#444")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#444")
    fig.update_layout(xaxis_title="Memory traffic (HBM reads) ÷ Strong-only", yaxis_title="Wall time ÷ Strong-only")
    bars = (f"; bars: {float(intervals.get('level', 0)):.0%} intervals over {_e_text(intervals.get('includes', 'the acceptance parameters'))}"
            if intervals and intervals.get("intervals") else "")
    return _finish(fig, "2 · Operating points relative to Strong-only (lower left is better)"
                   f"<br><sup>quality not shown: no measured success rates were supplied, and none are invented{bars}</sup>",
                   height=560, top=150)


def _e_text(x: object) -> str:
    return str(x).replace("<", "&lt;").replace(">", "&gt;")


# ----------------------------------------------------------------------------- agent vs environment time
def agent_time_figure(summary: pd.DataFrame, intervals: Mapping | None = None) -> go.Figure:
    """Wall time split into model time (what a strategy changes) and tool + user waits (what it cannot),
    each relative to Strong-only's wall time; with `intervals`, the wall ratio's interval on each bar's end.

    Columns: strategy, label, wall_time_s, model_wall_time_s, env_wall_time_s.
    """
    df = _summary_frame(summary)
    _need(df, ["wall_time_s", "model_wall_time_s", "env_wall_time_s"], "Agent vs environment time")
    if BASELINE not in set(df["strategy"]):
        raise FigureNotSupported(f"Agent vs environment time: no '{BASELINE}' row to normalise by")
    base = df[df["strategy"] == BASELINE]
    wall = float(base["wall_time_s"].iloc[0])
    if wall <= 0:
        raise FigureNotSupported("Agent vs environment time: Strong-only's wall time is zero")
    y = _x_axis(df)
    fig = go.Figure()
    total = df["wall_time_s"].astype(float).to_numpy() / wall
    for col, name, color in (("model_wall_time_s", "model time (Weak + Strong)", "#3182bd"),
                             ("env_wall_time_s", "tool and user waits", "#bdbdbd")):
        v = df[col].astype(float).to_numpy() / wall
        # the interval is the wall ratio's, so it sits on the stack's end (the waits' segment)
        err = _bar_intervals(intervals, df["strategy"], "wall_time_s_rel", total) if col == "env_wall_time_s" else None
        fig.add_bar(y=y, x=v, orientation="h", name=name, marker_color=color, text=[_fmt_rel(a) for a in v],
                    textposition="inside", error_x=err,
                    hovertemplate="%{y}<br>" + name + ": %{x:.3f}× Strong-only wall time<extra></extra>")
    fig.add_vline(x=1.0, line_dash="dot", line_color="#444")
    fig.update_layout(barmode="stack", xaxis_title="÷ Strong-only's wall time", yaxis_title="strategy", bargap=0.25)
    fig.update_yaxes(autorange="reversed")
    bars = _bars_note(intervals).replace("<br><sup>", "; ").replace("</sup>", "")
    return _finish(fig, "Agent time vs environment time, relative to Strong-only's wall time"
                   f"<br><sup>a strategy changes model time only; tool and user waits are the workload's{bars}</sup>",
                   height=200 + 52 * max(len(df), 3), top=90, legend="bottom", bottom=100)


# ----------------------------------------------------------------------------- figure 3
def phase_cost_figure(phase_flops: pd.DataFrame, phase_bytes: pd.DataFrame, phase_time: pd.DataFrame,
                      labels: Mapping[str, str] | None = None, baseline: str = BASELINE,
                      workload: str | None = None) -> go.Figure:
    """Figure 3: FLOPs, HBM reads and time by phase, stacked, relative to Strong-only's total.

    Each frame is indexed by strategy with one column per phase group (the simulator's
    ``phase_split``); a column ``workload`` may select between benchmarks. Bars of one
    strategy sum to its total relative to Strong-only's total of that metric.
    """
    panels = (("FLOPs", phase_flops), ("HBM bytes read", phase_bytes), ("Time (sum of phases)", phase_time))
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=[p[0] for p in panels])
    labels = dict(labels or {})
    shown: set[str] = set()
    n_rows = 0
    for c, (_, frame) in enumerate(panels, start=1):
        f = frame.copy()
        if "strategy" in f.columns:
            f = f.set_index("strategy")
        if workload is not None and "workload" in f.columns:
            f = f[f["workload"] == workload]
        f = f.drop(columns=[k for k in ("workload",) if k in f.columns])
        if baseline not in f.index:
            raise FigureNotSupported(f"Figure 3 (phase costs): no '{baseline}' row to normalise by")
        base = float(f.loc[baseline].sum())
        if base <= 0:
            raise FigureNotSupported(f"Figure 3 (phase costs): '{baseline}' total is zero")
        rel = f / base
        y = [labels.get(s, s) for s in rel.index]
        n_rows = len(y)
        for group in PHASE_LABELS:
            if group not in rel.columns or not (rel[group] > 0).any():
                continue
            fig.add_bar(y=y, x=rel[group].to_numpy(), orientation="h", name=PHASE_LABELS[group], legendgroup=group,
                        showlegend=group not in shown, marker_color=PHASE_COLORS[group],
                        hovertemplate="%{y}<br>" + PHASE_LABELS[group] + ": %{x:.3f}× Strong-only total<extra></extra>",
                        row=1, col=c)
            shown.add(group)
        fig.add_vline(x=1.0, line_dash="dot", line_color="#444", row=1, col=c)
        fig.update_xaxes(title_text="÷ Strong-only total", row=1, col=c)
    fig.update_layout(barmode="stack", bargap=0.25)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(title_text="strategy", row=1, col=1)
    title = "3 · Cost by phase relative to Strong-only (bars sum to each strategy's total)"
    if workload:
        title += f" · {workload}"
    return _finish(fig, title, height=260 + 36 * max(n_rows, 3), top=80, legend="bottom", bottom=150)


# ----------------------------------------------------------------------------- figure 4
def _zero_crossing(x: np.ndarray, y: np.ndarray) -> float | None:
    """First x where y falls from positive to <= 0 (linear interpolation in log x)."""
    for i in range(1, len(x)):
        if y[i - 1] > 0 >= y[i]:
            lx0, lx1 = np.log(x[i - 1]), np.log(x[i])
            return float(np.exp(lx0 + (lx1 - lx0) * y[i - 1] / (y[i - 1] - y[i])))
    return None


def balance_figure(balance: pd.DataFrame, source: str = "fleet study",
                   balance_batches: Mapping[str, float | None] | None = None, note: str = "",
                   saving_axis: str = "SpecAgent saving vs Strong-only (%)") -> go.Figure:
    """Figure 4: SpecAgent's time and memory saving against the Strong replica's mean decode batch.

    Columns: hardware, strong_mean_decode_batch, time_saving, memory_saving (fractions:
    1 − SpecAgent ÷ Strong-only); optional ``fits`` (False where the batch does not fit in
    memory: drawn shaded). The balance point is marked per hardware: the batch where the
    time saving vanishes (interpolated from the data), and, where given in
    ``balance_batches``, the roofline balance batch (decode turns compute-bound).
    """
    df = balance.copy()
    _need(df, ["hardware", "strong_mean_decode_batch", "time_saving", "memory_saving"], "Figure 4 (balance)")
    fig = go.Figure()
    hws = list(dict.fromkeys(df["hardware"].astype(str)))
    colors = strategy_colors(hws)
    level = 1.0
    xs_all = df["strong_mean_decode_batch"].to_numpy(dtype=float)
    lo_x, hi_x = np.log10(xs_all.min()), np.log10(xs_all.max())

    def side(v: float) -> str:
        return "right" if hi_x > lo_x and (np.log10(v) - lo_x) / (hi_x - lo_x) > 0.55 else "left"

    for hw in hws:
        d = df[df["hardware"].astype(str) == hw].sort_values("strong_mean_decode_batch")
        x = d["strong_mean_decode_batch"].to_numpy(dtype=float)
        for col, dash, what in (("time_saving", "solid", "time"), ("memory_saving", "dash", "memory traffic")):
            fig.add_scatter(x=x, y=100 * d[col].to_numpy(dtype=float), mode="lines+markers", name=f"{hw}: {what} saving",
                            line=dict(color=colors[hw], dash=dash), marker=dict(size=4),
                            hovertemplate=f"{hw}<br>decode batch %{{x:.1f}}<br>{what} saving %{{y:.1f}}%<extra></extra>")
        if "fits" in d.columns and not d["fits"].all():
            last_in = float(x[d["fits"].to_numpy(dtype=bool)].max()) if d["fits"].any() else 1.0
            fig.add_vrect(x0=last_in, x1=float(x.max()), fillcolor="#bbbbbb", opacity=0.25, line_width=0)
            _vline(fig, last_in, f"{hw}: memory holds at most {last_in:,.0f} sequences", True, "#666", "solid", y=level,
                   xanchor=side(last_in))
            level -= 0.08
        zc = _zero_crossing(x, d["time_saving"].to_numpy(dtype=float))
        if zc is not None:
            _vline(fig, zc, f"{hw}: time saving vanishes at batch ≈ {zc:,.0f}", True, colors[hw], "dot", y=level,
                   xanchor=side(zc))
            level -= 0.08
        bb = (balance_batches or {}).get(hw)
        if bb:
            _vline(fig, bb, f"{hw}: balance point (decode compute-bound) at batch {bb:,.0f}", True, colors[hw], "dashdot", y=level,
                   xanchor=side(bb))
            level -= 0.08
    fig.add_hline(y=0, line_color="#444", line_width=1)
    xs = df["strong_mean_decode_batch"].to_numpy(dtype=float)
    fig.update_xaxes(type="log", title_text="Strong replica's mean decode batch",
                     range=[np.log10(xs.min()) - 0.05, np.log10(xs.max()) + 0.05])
    fig.update_yaxes(title_text=saving_axis, ticksuffix="%")
    title = f"4 · Saving against the Strong replica's decode batch (from the {source})"
    if note:
        title += f"<br><sup>{note}</sup>"
    return _finish(fig, title, height=540)


# ----------------------------------------------------------------------------- figure 5
def phase_operating_points(summary: pd.DataFrame, gpus: Mapping[str, int], compute_dtypes: Mapping[str, str] | None = None,
                           strategies: Sequence[str] | None = None) -> pd.DataFrame:
    """Each model phase's aggregate operating point: FLOP per HBM byte and achieved FLOP/s per GPU.

    ``summary`` has per-strategy totals ``flops_<phase>``, ``bytes_read_<phase>``,
    ``bytes_written_<phase>`` and ``time_s_<phase>`` (the simulator's summary; less ``request_s_<phase>``, the
    serving engine's per-request overhead, where present); ``gpus``
    maps 'weak'/'strong' to GPUs per replica. Phases with no FLOPs (e.g. an API model) are
    left out.
    """
    df = _summary_frame(summary)
    if strategies is not None:
        df = df[df["strategy"].isin(strategies)]
    rows = []
    for _, r in df.iterrows():
        for phase, (model, name) in MODEL_PHASES.items():
            cols = [f"flops_{phase}", f"bytes_read_{phase}", f"bytes_written_{phase}", f"time_s_{phase}"]
            if any(c not in df.columns for c in cols) or model not in gpus:
                continue
            flops, br, bw, t = (float(r[c]) for c in cols)
            t -= float(r.get(f"request_s_{phase}", 0.0))  # the GPU's time: the per-request overhead runs no pass
            if flops <= 0 or t <= 0 or br + bw <= 0:
                continue
            rows.append({"strategy": r["strategy"], "label": r["label"], "workload": r["workload"], "model": model,
                         "phase": phase, "phase_label": name, "intensity": flops / (br + bw),
                         "flops_per_s_per_gpu": flops / t / gpus[model],
                         "compute_dtype": (compute_dtypes or {}).get(model, "bf16")})
    return pd.DataFrame(rows, columns=["strategy", "label", "workload", "model", "phase", "phase_label", "intensity",
                                       "flops_per_s_per_gpu", "compute_dtype"])


DECODE_PHASES = ("weak_decode", "strong_decode", "strong_verdict")


def roofline_caption(profile, points: pd.DataFrame, derate: tuple[float, float] | None = None) -> str:
    """Figure 5's caption, written from the points it plots: how far below the (derated) roof each kind of phase sits.

    Why: a fixed sentence ("decode sits on the bandwidth slope") contradicted the picture
    whenever the serving engine's fixed costs per iteration, not bandwidth, set a phase's time.
    """
    eff_c, eff_b = derate or (float(profile.prefill_mfu.value), float(profile.bandwidth_efficiency.value))
    bw = profile.bandwidth_bytes_s
    share = []
    for _, r in points.iterrows():
        roof = min(profile.peak_flops(r["compute_dtype"]) * eff_c, float(r["intensity"]) * bw * eff_b)
        share.append(float(r["flops_per_s_per_gpu"]) / roof if roof > 0 else float("nan"))
    pts = points.assign(share=share)

    def span(mask) -> str:
        v = pts.loc[mask, "share"].dropna()
        if v.empty:
            return ""
        lo, hi = v.min(), v.max()
        return f"{100 * lo:.0f}%" if abs(hi - lo) < 0.005 else f"{100 * lo:.0f}–{100 * hi:.0f}%"

    is_dec = pts["phase"].isin(DECODE_PHASES)
    dec, pre = span(is_dec), span(~is_dec)
    parts = ["The hardware's roofline per GPU (solid: peak; dashed: derated by the serving engine's efficiencies) and where "
             "each phase of the run operates, as its FLOPs over its time and bytes."]
    if dec:
        below = bool((pts.loc[is_dec, "intensity"] < [profile.ridge(d) for d in pts.loc[is_dec, "compute_dtype"]]).all())
        worst, best = pts.loc[is_dec, "share"].min(), pts.loc[is_dec, "share"].max()
        why = ("most of every decode pass" if best < 0.5 else "much of the smaller decode passes" if worst < 0.5
               else "the rest of each pass")
        parts.append(f"Decode phases{' sit below the ridge (memory-bound by intensity) but' if below else ''} reach {dec} of "
                     f"the derated roof: the engine's fixed costs per iteration (CPU work, launches, per-layer time) take {why}, "
                     "not the weight reads.")
    if pre:
        parts.append(f"Prefill and verification passes reach {pre} of the derated roof.")
    return " ".join(parts)


def roofline_figure(profile, points: pd.DataFrame, efficiencies: bool = True,
                    derate: tuple[float, float] | None = None) -> go.Figure:
    """Figure 5: the hardware profile's roofline per GPU with each phase's operating points.

    ``profile`` is a HardwareProfile; ``points`` has columns label, phase, phase_label,
    intensity (FLOP/byte), flops_per_s_per_gpu and compute_dtype (from
    ``phase_operating_points``). Solid lines are peak rooflines, one per compute dtype used;
    dashed lines apply ``derate`` = (GEMM MFU, bandwidth efficiency) — the serving engine's
    on this GPU (`costmodel.latency`) — or else the profile's prefill MFU and bandwidth efficiency.
    """
    _need(points, ["label", "phase", "intensity", "flops_per_s_per_gpu", "compute_dtype"], "Figure 5 (roofline)")
    if points.empty:
        raise FigureNotSupported("Figure 5 (roofline): no phase with FLOPs and bytes to place")
    bw = profile.bandwidth_bytes_s
    lo = min(0.5, float(points["intensity"].min()) / 2)
    hi = max(float(points["intensity"].max()) * 2, 4 * profile.ridge("bf16"))
    xi = np.geomspace(lo, hi, 200)
    fig = go.Figure()
    dtypes = list(dict.fromkeys(points["compute_dtype"])) or ["bf16"]
    eff_c, eff_b = derate or (float(profile.prefill_mfu.value), float(profile.bandwidth_efficiency.value))
    for dt in dtypes:
        peak = profile.peak_flops(dt)
        fig.add_scatter(x=xi, y=np.minimum(peak, xi * bw) / 1e12, mode="lines", name=f"peak roofline ({dt.upper()})",
                        line=dict(color="#222", width=2 if dt == dtypes[0] else 1.5),
                        hovertemplate="%{x:.1f} FLOP/B → %{y:.1f} TFLOP/s<extra></extra>")
        if efficiencies:
            fig.add_scatter(x=xi, y=np.minimum(peak * eff_c, xi * bw * eff_b) / 1e12, mode="lines",
                            name=f"derated ({dt.upper()}: MFU {eff_c:.2f}, bandwidth {eff_b:.2f})",
                            line=dict(color="#777", dash="dash"), hoverinfo="skip")
        _vline(fig, profile.ridge(dt), f"ridge {dt.upper()}: {profile.ridge(dt):.0f} FLOP/B", True, "#888", "dot",
               yanchor="bottom", y=0.0 if dt == dtypes[0] else 0.06)
    strategies = list(dict.fromkeys(points["strategy"] if "strategy" in points else points["label"]))
    symbols = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon", "pentagon"]
    sym = {s: symbols[i % len(symbols)] for i, s in enumerate(strategies)}
    phase_color = {"weak_prefill": "#9ecae1", "weak_decode": "#3182bd", "strong_prefill": "#fdae6b",
                   "strong_verify": "#e6550d", "strong_decode": "#a63603", "strong_verdict": "#756bb1"}
    for _, r in points.iterrows():
        skey = r["strategy"] if "strategy" in points else r["label"]
        name = f"{r['label']}: {r.get('phase_label', r['phase'])}"
        fig.add_scatter(x=[r["intensity"]], y=[r["flops_per_s_per_gpu"] / 1e12], mode="markers", name=name,
                        marker=dict(size=18 if skey == strategies[0] else 11, color=phase_color.get(r["phase"], "#333"), symbol=sym[skey],
                                    line=dict(width=1, color="#222")),
                        hovertemplate=f"{name}<br>%{{x:.2f}} FLOP/B<br>%{{y:.2f}} TFLOP/s per GPU<extra></extra>")
    fig.update_xaxes(type="log", title_text="Arithmetic intensity (FLOP per HBM byte)", range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(type="log", title_text="Achieved TFLOP/s per GPU")
    return _finish(fig, f"5 · Roofline of {profile.name} with each phase's operating point (aggregate over the run)",
                   height=620, top=70, legend="right")


# ----------------------------------------------------------------------------- figure 6
def calibration_figure(calibration: pd.DataFrame) -> go.Figure:
    """Figure 6: predicted vs measured time per held-out point, with the percentage error.

    Columns: point (a name), predicted_s, measured_s (> 0). The title states the mean
    absolute percentage error over the points.
    """
    df = calibration.copy()
    _need(df, ["point", "predicted_s", "measured_s"], "Figure 6 (calibration)")
    pred = df["predicted_s"].to_numpy(dtype=float)
    meas = df["measured_s"].to_numpy(dtype=float)
    err = 100.0 * (pred - meas) / meas
    mape = float(np.mean(np.abs(err)))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.1,
                        subplot_titles=("Predicted vs measured (log-log)", "Error per point: (predicted − measured) ÷ measured"))
    names = df["point"].astype(str).tolist()
    fig.add_scatter(x=meas, y=pred, mode="markers", name="held-out points", text=names, marker=dict(size=9, color="#3182bd"),
                    hovertemplate="%{text}<br>measured %{x:.4g} s<br>predicted %{y:.4g} s<extra></extra>", row=1, col=1)
    lo, hi = float(min(meas.min(), pred.min())) / 1.3, float(max(meas.max(), pred.max())) * 1.3
    line = np.array([lo, hi])
    fig.add_scatter(x=line, y=line, mode="lines", name="predicted = measured", line=dict(color="#222"), row=1, col=1)
    for f, nm in ((1.1, "±10%"),):
        fig.add_scatter(x=np.r_[line, line[::-1]], y=np.r_[line * f, line[::-1] / f], fill="toself", mode="lines",
                        line=dict(width=0), fillcolor="rgba(49,130,189,0.12)", name=nm, hoverinfo="skip", row=1, col=1)
    fig.add_bar(x=names, y=err, name="error %", marker_color=np.where(np.abs(err) <= 10, "#74c476", "#de2d26").tolist(),
                hovertemplate="%{x}<br>%{y:.1f}%<extra></extra>", row=1, col=2)
    fig.update_xaxes(type="log", title_text="measured (s)", row=1, col=1)
    fig.update_yaxes(type="log", title_text="predicted (s)", row=1, col=1)
    fig.update_yaxes(title_text="error (%)", ticksuffix="%", row=1, col=2)
    fig.update_xaxes(tickangle=-40, title_text="pass", row=1, col=2)
    return _finish(fig, f"6 · Calibration: predicted vs measured pass times — MAPE {mape:.1f}% over {len(df)} points", height=560, top=80, legend="bottom", bottom=140)


# ----------------------------------------------------------------------------- figure 7
def capacity_plan_figure(plan: pd.DataFrame, rate: str = "") -> go.Figure:
    """Figure 7: $/hour and GPUs of the cheapest fleet per strategy: bars at one planned rate, or, when the table holds
    several rates (`specagent plan --rate LO..HI`), the capacity curve: both against the rate, one line per strategy,
    where the distance between the lines is what SpecAgent saves at that load.

    Columns: strategy, usd_per_hour, gpus; optional label (display name), fleet (a
    description of the replicas) and rate (arrivals per second).
    """
    df = plan.copy()
    _need(df, ["strategy", "usd_per_hour", "gpus"], "Figure 7 (capacity plan)")
    if "rate" in df.columns and df["rate"].nunique() > 1:
        return _capacity_curve(df)
    names = (df["label"] if "label" in df.columns else df["strategy"]).astype(str).tolist()
    colors = strategy_colors(df["strategy"])
    col = [colors[s] for s in df["strategy"]]
    hover = df["fleet"].astype(str).tolist() if "fleet" in df.columns else [""] * len(df)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("$ per hour", "GPUs"), horizontal_spacing=0.1)
    fig.add_bar(x=names, y=df["usd_per_hour"].to_numpy(dtype=float), marker_color=col, name="$/hour", customdata=hover,
                text=[f"${v:,.0f}" for v in df["usd_per_hour"]], textposition="outside",
                hovertemplate="%{x}<br>$%{y:,.2f}/hour<br>%{customdata}<extra></extra>", row=1, col=1)
    fig.add_bar(x=names, y=df["gpus"].to_numpy(dtype=float), marker_color=col, name="GPUs", customdata=hover,
                text=[f"{v:,.0f}" for v in df["gpus"]], textposition="outside",
                hovertemplate="%{x}<br>%{y:,.0f} GPUs<br>%{customdata}<extra></extra>", row=1, col=2)
    fig.update_layout(showlegend=False)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickprefix="$", title_text="$/hour", row=1, col=1)
    fig.update_yaxes(title_text="GPUs", row=1, col=2)
    fig.update_xaxes(title_text="strategy")
    if not rate and "rate" in df.columns and df["rate"].nunique() == 1:
        rate = f"{df['rate'].iloc[0]}"
    title = "7 · Capacity plan: cheapest fleet meeting the SLO, per strategy"
    if rate:
        title += f" (rate {rate})"
    return _finish(fig, title, height=480, top=80)


def log_ticks(lo: float, hi: float, prefix: str = "", suffix: str = "") -> tuple[list[float], list[str]]:
    """Major ticks of a log axis in the 1-2-5 sequence covering [lo, hi], labelled in full ("0.5", "$20", "200"),
    so no tick reads as a bare minor digit ("5" for 0.5)."""
    lo, hi = float(lo), float(hi)
    if not (lo > 0 and hi > 0 and np.isfinite(lo) and np.isfinite(hi)):
        return [], []
    decades = range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1)
    keep: list[float] = []
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        keep = [float(f"{m * 10.0 ** e:.6g}") for e in decades for m in mantissas if lo / 1.25 <= m * 10.0 ** e <= hi * 1.25]
        if len(keep) >= 3:  # a narrow range gets finer ticks, never fewer than three
            break
    if len(keep) > 9:  # a wide range: decades only
        keep = [v for v in keep if round(v / 10.0 ** np.floor(np.log10(v)), 6) == 1]
    return keep, [f"{prefix}{(f'{v:,.0f}' if v >= 1 and float(v).is_integer() else f'{v:.4g}')}{suffix}" for v in keep]


def _pool_shape(r: pd.Series) -> str:
    """'3 Weak×1 h20 + 1 Strong×8 h20' from a plan row (what the hover and the report's table say)."""
    parts = []
    for name in ("weak", "strong"):
        n = r.get(f"{name}_replicas")
        if isinstance(n, (int, float, np.integer, np.floating)) and n and not pd.isna(n):
            parts.append(f"{int(n):,} {name.capitalize()}×{int(r.get(f'{name}_gpus_per_replica', 1))} {r.get(f'{name}_gpu', '')}")
    return " + ".join(parts)


def _capacity_curve(df: pd.DataFrame) -> go.Figure:
    """Three log-log panels against the rate ($/hour, $/task, GPUs), one line per strategy; each point names the GPU type
    that won at that rate (its marker) and the fleet's shape (hover)."""
    colors = strategy_colors(df["strategy"].unique())
    panels = [("usd_per_hour", "$ per hour", "$/hour", "$"), ("usd_per_task", "$ per task", "$/task", "$"), ("gpus", "GPUs", "GPUs", "")]
    panels = [p for p in panels if p[0] in df.columns]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels], horizontal_spacing=0.08)
    gpu_of = (df["strong_gpu"].astype(str) if "strong_gpu" in df.columns else pd.Series([""] * len(df), index=df.index))
    symbols = {g: sym for g, sym in zip(dict.fromkeys(gpu_of), ("circle", "diamond", "square", "triangle-up", "x", "star"))}
    for strat, g in df.sort_values("rate").groupby("strategy", sort=False):
        name = str(g["label"].iloc[0]) if "label" in g.columns else str(strat)
        x = g["rate"].to_numpy(dtype=float)
        shapes = [_pool_shape(r) for _, r in g.iterrows()]
        gpus = gpu_of.loc[g.index].tolist()
        for col, (ycol, _, unit, prefix) in enumerate(panels, 1):
            fmt = {"usd_per_hour": "$%{y:,.2f}/hour", "usd_per_task": "$%{y:,.4f}/task", "gpus": "%{y:,.0f} GPUs"}[ycol]
            fig.add_scatter(x=x, y=g[ycol].to_numpy(dtype=float), mode="lines+markers+text" if col == 1 else "lines+markers",
                            name=name, legendgroup=str(strat), showlegend=col == 1, line=dict(color=colors[strat]),
                            marker=dict(symbol=[symbols.get(v, "circle") for v in gpus], size=9),
                            text=[str(v).replace("_sxm", "") for v in gpus] if col == 1 else None, textposition="top center",
                            textfont=dict(size=10, color=colors[strat]), customdata=shapes,
                            hovertemplate=f"{name}<br>%{{x:,.4g}} tasks/s<br>{fmt}<br>%{{customdata}}<extra></extra>", row=1, col=col)
    xv, xt = log_ticks(df["rate"].min(), df["rate"].max())
    fig.update_xaxes(type="log", title_text="arrival rate (tasks/s)", tickvals=xv, ticktext=xt)
    for col, (ycol, _, unit, prefix) in enumerate(panels, 1):
        y = pd.to_numeric(df[ycol], errors="coerce")
        yv, yt = log_ticks(y[y > 0].min() if (y > 0).any() else 1, y.max() if (y > 0).any() else 10, prefix)
        fig.update_yaxes(type="log", title_text=unit, tickvals=yv, ticktext=yt, row=1, col=col)
    return _finish(fig, "7 · Capacity curve: the cheapest fleet meeting the SLO against the arrival rate, per strategy "
                        "(labels: the GPU type that won; hover: the fleet)", height=520, top=80, legend="bottom", bottom=110)


