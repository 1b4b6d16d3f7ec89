"""One self-contained HTML report: the setting, every assumption, the tables and the figures.

The file embeds plotly.js once and references nothing outside itself, so it opens offline,
can be mailed, and renders the same years later. Same inputs give byte-identical output
(no timestamps, fixed element ids). It is written to a temp file beside the target and
renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from specagent.common import atomic
from specagent.costmodel.balance import balance_point, verify_saving_curve
from specagent.reports import bottom_line as BL
from specagent.simulator.jobs import bottom_line as JB
from specagent.reports import figures as F
from specagent.reports.plan_table import COLUMNS as PLAN_TABLE_COLUMNS
from specagent.reports.plan_table import curve_rows
from specagent.reports.data import ReportData, as_report_data, deployments
from specagent.reports.static import ImageExport, export_images


@dataclass
class FigureEntry:
    key: str  # fig1 .. fig8 (or fig3_<n> for several workloads)
    caption: str
    figure: go.Figure | None
    reason: str = ""  # why it was left out, when figure is None


@dataclass
class ReportResult:
    path: Path
    figures: list[FigureEntry]
    images: ImageExport | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def included(self) -> list[str]:
        return [f.key for f in self.figures if f.figure is not None]

    @property
    def omitted(self) -> dict[str, str]:
        return {f.key: f.reason for f in self.figures if f.figure is None}


# ------------------------------------------------------------------------------ figures
def _labels(data: ReportData) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in data.runs:
        if "label" in r.summary.columns:
            out.update({str(k): str(v) for k, v in r.summary["label"].items()})
    return out


def _segment_and_context(data: ReportData) -> tuple[float, float, str]:
    """The mean verified segment and mean context of SpecAgent in the first run, for the roofline fallback."""
    s = data.runs[0].summary
    row = None
    for name in ("specagent", *[i for i in s.index if str(i).startswith("specagent")]):
        if name in s.index:
            row = s.loc[name]
            break
    seg, ctx, how = 256.0, 8192.0, "no SpecAgent run in the results: assumed segment 256 tokens, context 8,192 tokens"
    if row is not None and float(row.get("reviews", 0) or 0) > 0 and float(row.get("tokens_strong_verify", 0) or 0) > 0:
        seg = float(row["tokens_strong_verify"]) / float(row["reviews"])
        how = f"verification prefill = mean of {row.get('label', 'SpecAgent')} ({seg:,.0f} tokens)"
        trajs = float(row.get("trajectories", 0) or 0)
        if trajs > 0 and float(row.get("committed_context_tokens", 0) or 0) > 0:
            # The context grows from the system prompt to the final committed context; its mean over the run is about half.
            ctx = 0.5 * float(row["committed_context_tokens"]) / trajs
            how += f", context = half the mean final context ({ctx:,.0f} tokens)"
        else:
            how += ", context 8,192 tokens (assumed: no committed-context counts in the results)"
    return seg, ctx, how


def _single_run_intervals(data: ReportData) -> dict | None:
    """The intervals a combined figure can draw: one run's (several workloads' rows would be ambiguous by strategy)."""
    return data.runs[0].intervals if len(data.runs) == 1 else None


def build_figures(data: ReportData) -> tuple[list[FigureEntry], list[str]]:
    """Every figure the results support, and for each one left out, the reason."""
    out: list[FigureEntry] = []
    notes: list[str] = []
    labels = _labels(data)
    summary = data.combined_summary()

    def attempt(key: str, caption: str, make) -> None:
        try:
            out.append(FigureEntry(key, caption, make()))
        except F.FigureNotSupported as exc:
            out.append(FigureEntry(key, caption, None, str(exc)))

    if data.runs:
        attempt("fig_cost", "What a task takes and costs under each strategy: seconds per task (model time, and the "
                            "tool and user waits no strategy changes) and dollars per task, with the prediction's "
                            "ranges as error bars where they were drawn."
                            + (f" Strategies compared in {data.runs[0].workload}; further workloads are in the bottom-line table."
                               if len(data.runs) > 1 else ""), lambda: _bottom_line_figure(data))
        attempt("fig1", "Memory reads of the Strong model, and of both models together, relative to Strong-only. "
                        "SpecAgent moves Strong tokens from decode (weights re-read per token) into one verification "
                        "prefill per drafted segment.", lambda: F.memory_reads_figure(summary, _single_run_intervals(data)))
        attempt("fig2", "Each strategy's operating point relative to Strong-only, with its intervals as error bars where "
                        "they were drawn. Quality comes only from measured success rates supplied with the results.", lambda: F.operating_points_figure(summary, _single_run_intervals(data)))
        attempt("fig_time", "Wall time split into model time (Weak and Strong passes on the critical path) and the tool "
                            "and user waits recorded in the workload, relative to Strong-only's wall time: what a strategy "
                            "can change and what it cannot.", lambda: F.agent_time_figure(summary, _single_run_intervals(data)))
        attempt("fig_explain", "Why SpecAgent's wall time is what it is (`specagent explain`): from Strong-only's 1, each "
                               "bar is one phase's share of Strong-only's wall time in SpecAgent minus its share in "
                               "Strong-only; the grey band is Strong-only's tool and user waits, which no strategy changes. "
                               "The bars add up to the printed wall ratio.", lambda: _explain_figure(data))
        for i, r in enumerate(data.runs):
            key = "fig3" if len(data.runs) == 1 else f"fig3_{i + 1}"
            attempt(key, "FLOPs, HBM bytes read and time by phase, stacked, as a fraction of Strong-only's total. "
                         "FLOPs may rise while memory traffic and time fall: the saving is in bandwidth, not arithmetic.",
                    lambda r=r: F.phase_cost_figure(r.phase_flops, r.phase_bytes, r.phase_time, labels))
            if len(data.runs) > 1 and out[-1].figure is not None:
                out[-1].figure.update_layout(title_text=f"3 · Cost by phase relative to Strong-only · {r.workload}")
    else:
        for key in ("fig_cost", "fig1", "fig2", "fig_time", "fig3"):
            out.append(FigureEntry(key, "", None, "no simulator results (summary JSON or per-trajectory Parquet) supplied"))

    weak, strong, weight_mode = deployments(data)
    # Figure 4: fleet study when supplied, else the roofline.
    if data.balance is not None:
        bb: dict[str, float | None] = {}
        if "balance_batch" in data.balance.columns:
            for hw, g in data.balance.groupby("hardware", sort=False):
                v = pd.to_numeric(g["balance_batch"], errors="coerce").dropna()
                bb[str(hw)] = float(v.iloc[0]) if len(v) else None
        attempt("fig4", "SpecAgent's saving against the Strong replica's mean decode batch, from the fleet study. "
                        "The saving vanishes as decode batches approach the balance point, where decode stops being "
                        "bandwidth-bound.", lambda: F.balance_figure(data.balance, "fleet study", bb,
                                                   saving_axis="Strong pool's busy time and HBM reads saved vs Strong-only (%)"))
    elif strong is not None and data.runs:
        seg, ctx, how = _segment_and_context(data)

        def fig4():
            df = verify_saving_curve(strong, seg, ctx, weight_mode)
            bp = balance_point(strong, context=int(round(ctx)), weight_mode=weight_mode)
            mark = {strong.hardware.name: bp.balance_batch_effective}
            note = f"roofline of {strong.describe()}; weights read in '{weight_mode}' mode; {how}"
            if bp.balance_batch_effective is None:
                note += f"; decode stays bandwidth-bound up to batch {bp.max_batch_searched:,}"
            notes.append(note)
            return F.balance_figure(df, "roofline; no fleet study supplied", mark,
                                    saving_axis="saving per verified token vs decoding it (%)")

        attempt("fig4", "Per-token saving of a verification prefill against decoding the same tokens, as the Strong "
                        "replica's decode batch grows (each sequence's share of a batched decode pass). From the cost "
                        "model, because no fleet balance study was supplied. Shaded: batches whose KV cache and "
                        "recurrent state do not fit next to the weights.", fig4)
        if out[-1].figure is not None and notes:
            out[-1].caption += " Inputs: " + notes.pop() + "."
    else:
        out.append(FigureEntry("fig4", "", None, "no fleet balance study supplied, and no Strong deployment this report can "
                                                 "price: an API model, or results that carry no scenario"))

    # Figure 5: roofline with phase operating points.
    if data.runs and (weak is not None or strong is not None):
        from specagent.costmodel.latency import latency_terms

        gpus, dts = {}, {}
        hw = strong.hardware if strong is not None else weak.hardware
        for name, dep in (("weak", weak), ("strong", strong)):
            if dep is not None and dep.hardware.id == hw.id:
                gpus[name], dts[name] = dep.gpus, dep.compute_dtype
        s5 = data.runs[0].summary
        keep = [k for k in ("strongonly", "specagent") if k in s5.index] or list(s5.index[:2])
        pts5 = F.phase_operating_points(s5, gpus, dts, keep)
        lt5 = latency_terms(strong if strong is not None else weak)
        derate5 = (lt5.gemm_mfu, lt5.bandwidth_efficiency)
        caption5 = (F.roofline_caption(hw, pts5, derate5) if len(pts5) else
                    "The hardware's roofline per GPU and where each phase of the run operates.")
        attempt("fig5", caption5, lambda: F.roofline_figure(hw, pts5, derate=derate5))
    else:
        out.append(FigureEntry("fig5", "", None, "no deployment of a simulated model known (needs results that carry their "
                                                 "scenario, as `specagent predict` writes them)"))

    if data.calibration is not None:
        attempt("fig6", "Calibration: the calibrated roofline's predicted times of held-out forward passes against "
                        "measured times on this machine.", lambda: F.calibration_figure(data.calibration))
    else:
        out.append(FigureEntry("fig6", "", None, "no calibration results supplied (columns point, predicted_s, measured_s)"))
    if data.plan is not None:
        attempt("fig7", "Capacity plan: cost per hour and GPUs of the cheapest fleet that meets the SLO at the planned "
                        "rate, per strategy.", lambda: F.capacity_plan_figure(data.plan))
    else:
        out.append(FigureEntry("fig7", "", None, "no capacity plan supplied (columns strategy, usd_per_hour, gpus)"))
    if data.sensitivity is not None:
        from specagent.reports.sensitivity import break_even_figure, tornado_figure

        attempt("fig_tornado", "Sensitivity: SpecAgent's wall, model-time, memory, FLOPs and cost ratios to Strong-only as "
                               "each assumption moves over its range, the others at the scenario's values "
                               "(`specagent study sensitivity`; ranges and rationales in docs/uncertainty.md).",
                lambda: tornado_figure(data.sensitivity))
        attempt("fig_break_even", "Break-even map: SpecAgent's wall time relative to Strong-only over semantic acceptance "
                                  "and the Weak/Strong time per token; the line is where they are equal.",
                lambda: break_even_figure(data.sensitivity))
    if data.latency is not None:
        from specagent.reports.latency import latency_figure

        attempt("fig8", "Serving-engine terms against public measurements: each published TPOT, TTFT, end-to-end latency "
                        "or throughput, predicted against measured (log-log, one colour per GPU; dotted: ±30%).",
                lambda: latency_figure(data.latency.to_dict("records"), "Predicted vs measured"))
    else:
        out.append(FigureEntry("fig8", "", None, "no latency validation rows supplied (`specagent latency validate --rows FILE`)"))
    return out, notes


def _explain_html(data: ReportData) -> list[str]:
    """`specagent explain`'s table: per phase, how much it moves each of SpecAgent's ratios from Strong-only's 1."""
    from specagent.simulator.explain import decompose

    if not data.runs:
        return []
    s = data.runs[0].summary
    if not {"specagent", "strongonly"} <= set(s.index) or "time_s_weak_decode" not in s:
        return []
    weak, strong, _ = deployments(data)
    decs = decompose(s, JB.pools_of(weak, strong, data.runs[0].assumptions.get("prices")) if weak is not None else [])
    labels = {t.phase: t.label for d in decs.values() for t in d.terms}
    table = pd.DataFrame({k: {labels[t.phase]: t.delta for t in d.terms} for k, d in decs.items()})
    cells = table[(table.abs() > 5e-4).any(axis=1)].map(lambda v: f"{v:+.3f}")
    cells.loc["SpecAgent ÷ Strong-only"] = [f"{d.ratio:.3f}" for d in decs.values()]
    return ['<h2 id="explain">Why these ratios</h2>',
            "<p>Each phase's share of Strong-only's total in SpecAgent minus its share in Strong-only: the rows add up "
            "from 1 to the ratio in the last row (<code>specagent explain</code> prints the factors behind each row and "
            "reruns the ratios with one thing changed; docs/explain.md).</p>",
            table_html(cells, index_name="phase")]


def _explain_figure(data: ReportData) -> go.Figure:
    """The wall-time waterfall of the first run (simulator/explain.py); needs SpecAgent and Strong-only in it."""
    from specagent.reports.explain_figure import waterfall_figure
    from specagent.simulator.explain import decompose

    s = data.runs[0].summary
    if not {"specagent", "strongonly"} <= set(s.index) or "time_s_weak_decode" not in s:
        raise F.FigureNotSupported("the results have no SpecAgent and Strong-only rows with per-phase totals")
    weak, strong, _ = deployments(data)
    pools = JB.pools_of(weak, strong, data.runs[0].assumptions.get("prices")) if weak is not None else []
    return waterfall_figure(decompose(s, pools)["wall"])


# ------------------------------------------------------------------------------ HTML pieces
CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"Liberation Sans",Arial,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1280px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:1.7em;margin:.2em 0}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em}
.lead{color:#555;max-width:60em}.headline{font-size:1.1em}.note{color:#555;font-size:.85em;max-width:80em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.88em;background:#fff}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.t,th.t{text-align:left}
.scroll{overflow-x:auto}
figure{margin:1.2em 0 2em;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px}
figcaption{color:#444;font-size:.9em;margin:4px 8px 8px}
.omitted{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:8px 12px;border-radius:4px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:.88em;margin:.4em 0 1em}
dl.kv dt{font-weight:600;color:#444}dl.kv dd{margin:0;word-break:break-word}
details{margin:.4em 0}summary{cursor:pointer;font-weight:600}
nav a{margin-right:1em}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v: Any, col: str = "") -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "—"
        if col.endswith("_rel"):
            return f"{f:.3f}×"
        if f != 0 and (abs(f) >= 1e6 or abs(f) < 1e-3):
            return f"{f:.4g}"
        return f"{f:,.4g}" if abs(f) < 1e4 else f"{f:,.0f}"
    return str(v)


def table_html(df: pd.DataFrame, index: bool = True, index_name: str = "", headers: Mapping[str, str] | None = None) -> str:
    """A plain HTML table; numbers right-aligned, ratios as ×."""
    headers = headers or {}
    cols = list(df.columns)
    head = "".join(f'<th class="t">{_e(index_name or df.index.name or "")}</th>' for _ in [0] if index)
    head += "".join(f"<th>{_e(headers.get(c, c))}</th>" for c in cols)
    rows = []
    for idx, r in df.iterrows():
        cells = f'<td class="t">{_e(idx)}</td>' if index else ""
        for c in cols:
            v = r[c]
            cls = ' class="t"' if isinstance(v, str) else ""
            cells += f"<td{cls}>{_e(_fmt(v, str(c)))}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def kv_html(d: Mapping[str, Any]) -> str:
    """Nested assumptions as definition lists; nothing is dropped."""
    items = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            inner = kv_html(v) if v else "<em>(none)</em>"
            items.append(f"<dt>{_e(k)}</dt><dd>{inner}</dd>")
        elif isinstance(v, (list, tuple)):
            items.append(f"<dt>{_e(k)}</dt><dd>{_e(json.dumps(v, default=str))}</dd>")
        else:
            items.append(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>")
    return f'<dl class="kv">{"".join(items)}</dl>'


HEADLINE_COLUMNS = {
    "label": "label",
    "trajectories": "trajectories",
    "strong_bytes_read_rel": "Strong HBM reads",
    "total_bytes_read_rel": "total HBM reads",
    "wall_time_s_rel": "wall time",
    "model_wall_time_s_rel": "model time (no tool/user waits)",
    "total_flops_rel": "total FLOPs",
    "strong_flops_rel": "Strong FLOPs",
    "strong_decode_tokens_rel": "Strong decode tokens",
    "strong_calls_rel": "Strong calls",
    "api_usd_rel": "API $",
    "measured_success": "measured success",
}
ABSOLUTE_COLUMNS = {
    "label": "label",
    "total_bytes_read": "HBM bytes read",
    "strong_bytes_read": "Strong bytes read",
    "weak_bytes_read": "Weak bytes read",
    "total_flops": "FLOPs",
    "wall_time_s": "wall time (s, summed)",
    "strong_decode_tokens": "Strong decode tokens",
    "strong_verdict_tokens": "verdict tokens",
    "strong_repair_tokens": "repair tokens",
    "strong_calls": "Strong calls",
    "reviews": "reviews",
    "rejections": "rejections",
    "repairs": "repairs",
    "api_usd": "API $",
    "unreviewed_writes": "unreviewed writes",
}


def _subset(df: pd.DataFrame, cols: Mapping[str, str]) -> pd.DataFrame:
    keep = [c for c in cols if c in df.columns]
    return df[keep]


#: The report's bottom-line columns: (column of bottom_line(), header with its unit).
BOTTOM_LINE_COLUMNS = (
    ("wall_s_per_task", "time per task"), ("model_s_per_task", "model time per task"), ("env_s_per_task", "tool + user waits per task"),
    ("weak_gpu_s_per_task", "Weak GPU-seconds per task"), ("strong_gpu_s_per_task", "Strong GPU-seconds per task"),
    ("gpu_h_per_task", "GPU-hours per task"), ("usd_per_task", "$ per task"),
)


def _run_bottom_line(r, weak, strong) -> tuple[list, pd.DataFrame, pd.DataFrame]:
    """One run's priced pools, per-task bottom line and its drawn ranges (empty where none were drawn)."""
    pool_list = JB.pools_of(weak, strong, r.assumptions.get("prices"))
    ranges = pd.DataFrame((r.intervals or {}).get("bottom_line") or [], columns=["strategy", "column", "point", "low", "high"])
    return pool_list, JB.bottom_line(r.summary, pool_list), ranges


def _bottom_line_figure(data: ReportData):
    """The first run's seconds and dollars per task with their ranges (reports.figures.bottom_line_figure)."""
    r = data.runs[0]
    if not all(c in r.summary for c in ("trajectories", "wall_time_s", "weak_model_time_s", "strong_model_time_s",
                                        "model_wall_time_s", "env_wall_time_s")):
        raise F.FigureNotSupported("Time and cost per task: the results carry no per-strategy time totals")
    weak, strong, _ = deployments(data)
    if weak is None:
        raise F.FigureNotSupported("Time and cost per task: these results carry no scenario whose deployments load here, "
                                   "so dollars per task cannot be priced")
    _, line, ranges = _run_bottom_line(r, weak, strong)
    iv = r.intervals or {}
    return F.bottom_line_figure(line, ranges, float(iv.get("level", 0) or 0) or None, str(iv.get("includes", "")),
                                _labels(data))


def _bottom_line_html(data: ReportData) -> list[str]:
    """The first thing the report shows: per task, seconds, GPU-hours and dollars per strategy, and the headline sentence."""
    if not data.runs or not all(c in data.runs[0].summary for c in ("trajectories", "wall_time_s", "weak_model_time_s",
                                                                    "strong_model_time_s", "model_wall_time_s", "env_wall_time_s")):
        return []
    weak, strong, _ = deployments(data)
    if weak is None:
        return ['<h2 id="bottom-line">Bottom line per task</h2><p>Not shown: these results carry no scenario whose '
                "deployments load here, so GPU-seconds and dollars per task cannot be priced.</p>"]
    out = ['<h2 id="bottom-line">Bottom line per task</h2>']
    for r in data.runs:
        pool_list, line, ranges = _run_bottom_line(r, weak, strong)
        iv = r.intervals or {}
        head = BL.headline(line, iv=ranges if not ranges.empty else None)
        if len(data.runs) > 1:
            out.append(f"<h3>{_e(r.workload)}</h3>")
        if head:
            out.append(f'<p class="headline"><b>{_e(head)}</b></p>')
        if iv.get("verdict"):
            out.append(f'<p class="headline">{_e(iv["verdict"])} ({int(iv.get("draws", 0))} draws of '
                       f'{_e(iv.get("includes", "the acceptance parameters"))}).</p>')
        lohi = {(x.strategy, x.column): (x.low, x.high) for x in ranges.itertuples()}
        cells = pd.DataFrame(index=line.index)
        for col, header in BOTTOM_LINE_COLUMNS:
            fmt = {"usd_per_task": BL.fmt_usd, "gpu_h_per_task": BL.fmt_gpu_hours}.get(col)
            cells[header] = [(fmt(float(v)) if fmt else (BL.fmt_seconds(float(v)) if col.endswith("s_per_task") and "gpu" not in col
                             else f"{float(v):,.1f} GPU·s")) + (f" {BL.fmt_range(col, *lohi[(s, col)])}" if (s, col) in lohi else "")
                             for s, v in line[col].items()]
        out.append(table_html(cells, index_name="strategy"))
        priced = "; ".join(f"{p.role.capitalize()}: {p.gpus}× {p.gpu} at "
                           + ("no price" if p.usd_per_gpu_hour is None else f"${p.usd_per_gpu_hour:,.3g}/GPU-hour") + f" ({p.source})"
                           for p in pool_list)
        out.append(f'<p class="note">Per task over {int(r.summary["trajectories"].iloc[0]):,} trajectories, batch 1 (every call '
                   "alone on its replica): GPU-seconds are each pool's busy time × its GPUs per replica, and dollars price them "
                   f"(idle time unbilled: a floor; <code>specagent plan</code> sizes a shared fleet). {_e(priced)}.</p>")
    return out


def _plan_html(plan: pd.DataFrame) -> list[str]:
    """The plan's answer as the terminal's curve table; every other column collapsed, the scheduler sources said once."""
    rows = curve_rows(plan)
    out = ['<h2 id="plan">Capacity plan</h2>', "<p>The cheapest fleet meeting the SLO per arrival rate and strategy. "
           + _e("; ".join(f"{c}: {m}" for c, m in PLAN_TABLE_COLUMNS if m)) + ".</p>", table_html(rows, index=False)]
    sources = [c for c in plan.columns if c.endswith("_scheduler_source")]
    said = sorted({str(v) for c in sources for v in plan[c].dropna().unique()})
    rest = plan.drop(columns=sources).reset_index(drop=True)
    out.append("<details><summary>Every column of the plan (" + f"{rest.shape[1]} columns)</summary>" + table_html(rest, index=False)
               + "".join(f"<p class=\"note\">Scheduler limits: {_e(s)}</p>" for s in said) + "</details>")
    return out


def intervals_html(iv: Mapping[str, Any]) -> str:
    """Each ratio with its interval (point [low–high]) per strategy, and the publication's ranges against them."""
    rows = pd.DataFrame(iv.get("intervals") or [])
    need = {"strategy", "metric", "point", "low", "high"}
    if rows.empty or not need <= set(rows.columns):
        return ""
    rows = rows[rows["metric"].isin(list(HEADLINE_COLUMNS) + ["strong_bytes_share"])]
    rows = rows.assign(cell=[f"{p:.3f} [{lo:.2f}–{hi:.2f}]" for p, lo, hi in zip(rows["point"], rows["low"], rows["high"])])
    table = rows.pivot(index="strategy", columns="metric", values="cell")
    table = table.reindex(index=list(dict.fromkeys(rows["strategy"])), columns=[c for c in list(HEADLINE_COLUMNS) + ["strong_bytes_share"]
                                                                               if c in table.columns])
    headers = {**HEADLINE_COLUMNS, "strong_bytes_share": "Strong share of memory traffic"}
    out = [f"<p>With {float(iv.get('level', 0)):.0%} intervals from {int(iv.get('draws', 0))} seeded draws of "
           f"{_e(iv.get('includes', 'the acceptance parameters'))} ({_e(iv.get('source', ''))}):</p>", table_html(table, index_name="strategy", headers=headers)]
    pub = iv.get("published") or []
    if pub:
        cells = {(r["strategy"], r["metric"]): r["cell"] for r in rows.to_dict("records")}
        allrows = pd.DataFrame(iv.get("intervals"))
        for r in allrows.to_dict("records"):
            cells.setdefault((r["strategy"], r["metric"]), f"{r['point']:.3f} [{r['low']:.2f}–{r['high']:.2f}]")
        t = pd.DataFrame([{"figure": p["figure"], "published": p["published"], "predicted [interval]": cells.get((p["strategy"], p["metric"]), "not run"),
                           "source": p.get("source", "")} for p in pub])
        if "fitted" in pub[0]:
            t.insert(3, "fitted", ["yes: a calibration target" if p.get("fitted") else "" for p in pub])
        out.append("<p>Published protocol figures (Wang et al., arXiv:2610.21463) against this run:</p>" + table_html(t, index=False))
    return "".join(out)


def render_html(data: ReportData, entries: Sequence[FigureEntry], image_note: str = "") -> str:
    """The whole document as a string (deterministic for the same inputs)."""
    parts: list[str] = []
    parts.append(f"<h1>{_e(data.title)}</h1>")
    parts.append('<p class="lead">What each agent strategy costs when a small Weak model drafts tool-using steps and a '
                 "large Strong model verifies them in one prefill, relative to the Strong model doing every step. "
                 "Every number below comes from the simulator, the cost model, a fleet study or a calibration run "
                 "named in the assumptions; nothing is invented (quality appears only where measured success rates "
                 "were supplied).</p>")
    parts.extend(_bottom_line_html(data))
    nav = ['<a href="#bottom-line">Bottom line</a>', '<a href="#setting">Setting</a>', '<a href="#summary">Summary</a>', '<a href="#figures">Figures</a>',
           '<a href="#phases">Phase tables</a>', '<a href="#assumptions">Assumptions</a>']
    why = _explain_html(data)
    if why:
        nav.insert(3, '<a href="#explain">Why</a>')
    parts.append(f"<nav>{''.join(nav)}</nav>")

    parts.append('<h2 id="setting">Setting</h2>')
    if data.runs:
        for r in data.runs:
            a = r.assumptions
            head = f"<h3>{_e(r.workload)}</h3>" if len(data.runs) > 1 else ""
            setting = dict(a.get("setting") or {})
            meta = {k: a[k] for k in ("workload", "trajectories", "engine", "seed", "quality") if k in a}
            meta["results from"] = r.source
            parts.append(head + kv_html({**setting, **meta}))
    else:
        parts.append("<p>No simulator results were supplied; this report shows only the tables given.</p>")

    if data.runs:
        parts.append('<h2 id="summary">Summary relative to Strong-only</h2>')
        parts.append("<p>Ratios to Strong-only on the same trajectories: 0.923× = 92.3% of Strong-only (1.000× = the same; "
                     "lower is cheaper).</p>")
        for r in data.runs:
            if len(data.runs) > 1:
                parts.append(f"<h3>{_e(r.workload)}</h3>")
            s = r.summary
            if "api_usd" in s.columns and "strongonly" in s.index and float(s.loc["strongonly", "api_usd"]) > 0:
                s = s.assign(api_usd_rel=s["api_usd"] / float(s.loc["strongonly", "api_usd"]))
            parts.append(table_html(_subset(s, HEADLINE_COLUMNS), index_name="strategy", headers=HEADLINE_COLUMNS))
            if r.intervals:
                parts.append(intervals_html(r.intervals))
            parts.append("<details><summary>Totals (absolute, summed over trajectories)</summary>"
                         + table_html(_subset(s, ABSOLUTE_COLUMNS), headers=ABSOLUTE_COLUMNS) + "</details>")

    parts.extend(why)
    parts.append('<h2 id="figures">Figures</h2>')
    if image_note:
        parts.append(f"<p><em>{_e(image_note)}</em></p>")
    for i, f in enumerate(entries):
        if f.figure is None:
            continue
        div = pio.to_html(f.figure, full_html=False, include_plotlyjs=False, div_id=f"plot-{f.key}",
                          config={"displaylogo": False, "responsive": True}, default_height=f"{int(f.figure.layout.height or 500)}px")
        parts.append(f'<figure id="{_e(f.key)}" data-figure="{_e(f.key)}">{div}<figcaption>{_e(f.caption)}</figcaption></figure>')
    omitted = [f for f in entries if f.figure is None]
    if omitted:
        lis = "".join(f"<li><b>{_e(f.key)}</b>: {_e(f.reason)}</li>" for f in omitted)
        parts.append(f'<div class="omitted"><b>Figures not shown</b> (the results given do not support them):<ul>{lis}</ul></div>')

    parts.append('<h2 id="phases">Phase tables</h2>')
    if data.runs:
        units = (("phase_time", "Time by phase (s, summed over trajectories)", 1.0),
                 ("phase_bytes", "HBM bytes read by phase (TB)", 1e-12),
                 ("phase_flops", "FLOPs by phase (PFLOP)", 1e-15))
        labels = _labels(data)
        for r in data.runs:
            if len(data.runs) > 1:
                parts.append(f"<h3>{_e(r.workload)}</h3>")
            for attr, title, scale in units:
                t = getattr(r, attr).copy()
                t = t.drop(columns=[c for c in ("workload",) if c in t.columns]) * scale
                t.index = [labels.get(i, i) for i in t.index]
                parts.append(f"<h4>{_e(title)}</h4>" + table_html(t, headers=F.PHASE_LABELS))
    for name, df, title in (("balance", data.balance, "Fleet balance study"), ("calibration", data.calibration, "Calibration")):
        if df is not None:
            parts.append(f'<h2 id="{name}">{_e(title)}</h2>' + table_html(df.reset_index(drop=True), index=False))
    if data.plan is not None:
        parts.extend(_plan_html(data.plan))
    if data.latency is not None:  # the rows are in the figure; the table is the error per metric
        lat = data.latency
        err = (lat["predicted"] / lat["measured"] - 1.0).abs()
        mape = err.groupby(lat["metric"]).agg(["count", "mean"]).rename(columns={"count": "figures", "mean": "MAPE"})
        parts.append('<h2 id="latency">Latency validation</h2>' + table_html(mape.reset_index(), index=False))

    parts.append('<h2 id="assumptions">Assumptions</h2>')
    if data.runs:
        for r in data.runs:
            if len(data.runs) > 1:
                parts.append(f"<h3>{_e(r.workload)}</h3>")
            parts.append(kv_html(r.assumptions) if r.assumptions else "<p>none recorded</p>")
    for n in data.notes:
        parts.append(f"<p>{_e(n)}</p>")

    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(data.title)}</title>"
        f"<style>{CSS}</style>\n<script type=\"text/javascript\">{get_plotlyjs()}</script>\n</head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def write_report(results: Any, out_html: str | Path, extra: Mapping[str, Any] | None = None, *,
                 images: str | Path | bool | None = None, image_formats: Sequence[str] = ("png", "svg"),
                 title: str | None = None) -> ReportResult:
    """Write the HTML report for a Comparison (or several), results paths, or a ReportData.

    ``extra`` may hold ``balance``, ``calibration``, ``plan`` and ``latency`` DataFrames (columns as in
    specagent.reports.data) and ``setting`` (the simulator Setting, so the roofline figures
    use the exact deployments). ``images``: a directory for PNG/SVG copies, True for
    ``<report stem>_figures/`` beside the HTML, False/None for none.
    """
    extra = dict(extra or {})
    unknown = set(extra) - {"balance", "calibration", "plan", "latency", "setting", "sensitivity"}
    if unknown:
        raise ValueError(f"write_report: unknown extra key(s) {', '.join(sorted(unknown))}; use balance, calibration, plan, latency, "
                         "setting, sensitivity")
    data = as_report_data(results, title=title, **extra)
    entries, notes = build_figures(data)
    out = Path(out_html)
    export: ImageExport | None = None
    img_dir = (out.with_name(out.stem + "_figures") if images is True else Path(images)) if images else None
    note = (f"Static {'/'.join(f.upper() for f in image_formats)} copies of these figures go to {img_dir.name}/ where a "
            "Chrome/Chromium is installed (the command says what it wrote)." if img_dir is not None else "")
    # the HTML first and whole: the optional image copies can fail (no browser, a kaleido render that times out)
    # without ever costing the report
    atomic.write_text(out, render_html(data, entries, note))
    if img_dir is not None:
        figs = {e.key: e.figure for e in entries if e.figure is not None}
        try:
            export = export_images(figs, img_dir, image_formats)
        except ValueError:
            raise  # a format this writer does not know: the caller's mistake, not the machine's
        except Exception as exc:  # noqa: BLE001 - optional output: a warning, never a lost report
            export = ImageExport(message=f"static images not written: {type(exc).__name__}: {exc}")
    return ReportResult(path=out, figures=entries, images=export, notes=notes)
