"""One self-contained HTML report: the bottom line, the setting, every assumption, the tables and the figures.

Reports read results and price nothing: every number on the page is the predict job's (its stored
summary.json: the bottom line, the intervals and verdict, the `views`) or a table given with it, in
the words the terminal uses (reports/bottom_line.py, reports/published.py). The file embeds
plotly.js once and references nothing outside itself, so it opens offline, can be mailed, and
renders the same years later. Same inputs give byte-identical output (no timestamps, fixed element
ids). It is written to a temp file beside the target and renamed, so a reader never sees half a
report.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from specagent.common import atomic
from specagent.reports import bottom_line as BL
from specagent.reports import figures as F
from specagent.reports.data import ReportData, Run, as_report_data
from specagent.reports.plan_table import COLUMNS as PLAN_TABLE_COLUMNS
from specagent.reports.plan_table import curve_rows
from specagent.reports.published import STRETCHED, STRETCHED_MARK, VERDICTS, fmt_interval, published_rows, stretched
from specagent.reports.report_figures import FigureEntry, bottom_line_ranges, build_figures, labels_of
from specagent.reports.static import ImageExport, export_images


@dataclass
class ReportResult:
    path: Path
    figures: list[FigureEntry]
    images: ImageExport | None = None

    @property
    def included(self) -> list[str]:
        return [f.key for f in self.figures if f.figure is not None]

    @property
    def omitted(self) -> dict[str, str]:
        return {f.key: f.reason for f in self.figures if f.figure is None}

    def to_dict(self) -> dict[str, Any]:
        """What `specagent report --json` prints: the page, the figures it holds and leaves out, the copies written."""
        return {"html": str(self.path), "figures": self.included, "omitted": self.omitted,
                "images": [str(p) for p in (self.images.written if self.images else [])],
                "images_message": self.images.message if self.images else "not requested"}


# ------------------------------------------------------------------------------ HTML pieces
CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"Liberation Sans",Arial,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1280px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:1.7em;margin:.2em 0}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em}
.lead{color:#555;max-width:60em}.headline{font-size:1.1em}.note{color:#555;font-size:.85em;max-width:80em}
.warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:6px 10px;border-radius:4px;max-width:80em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.88em;background:#fff}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.t,th.t{text-align:left}
.rng{white-space:nowrap}
.scroll{overflow-x:auto}
figure{margin:1.2em 0 2em;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px}
figcaption{color:#444;font-size:.9em;margin:4px 8px 8px}
.omitted{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:8px 12px;border-radius:4px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:.88em;margin:.4em 0 1em}
dl.kv dt{font-weight:600;color:#444}dl.kv dd{margin:0;word-break:break-word}
details{margin:.4em 0}summary{cursor:pointer;font-weight:600}
nav a{margin-right:1em;white-space:nowrap}
@media (max-width:900px){
main{padding:16px 12px 48px}
table.wide,table.wide tbody,table.wide tr,table.wide td{display:block}
table.wide thead{display:none}
table.wide tr{border:1px solid #ddd;margin:0 0 8px;background:#fff}
table.wide td{border:none;border-bottom:1px solid #f0f0f0;text-align:left;overflow:hidden}
table.wide td:first-child{background:#f0f0f0}
table.wide td::before{content:attr(data-label);float:left;width:45%;padding-right:8px;box-sizing:border-box;font-weight:600;color:#444}
dl.kv{grid-template-columns:1fr}
}
"""
#: A table with more columns than this turns into one block per row below 900 px, each cell under its column's name.
WIDE = 5
#: A cell "point [low–high]" (a range, possibly marked as stretched): the range is kept on one line.
RANGED = re.compile(r"^(.*\S) (\[[^\[\]]*\]\*?)$")


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


def _cell(text: str) -> str:
    """A cell's text, escaped; a range after its point never breaks inside itself."""
    m = RANGED.match(text)
    return _e(text) if m is None else f'{_e(m.group(1))} <span class="rng">{_e(m.group(2))}</span>'


def table_html(df: pd.DataFrame, index: bool = True, index_name: str = "", headers: Mapping[str, str] | None = None) -> str:
    """A plain HTML table; numbers right-aligned, ratios as ×; below 900 px a wide one reads as one block per row."""
    headers = headers or {}
    cols = list(df.columns)
    names = [str(headers.get(c, c)) for c in cols]
    first = str(index_name or df.index.name or "")
    head = "".join(f'<th class="t">{_e(first)}</th>' for _ in [0] if index)
    text = {c for c in cols if len(df) and all(isinstance(v, str) for v in df[c])}  # headed like their cells: left
    head += "".join(("<th class=\"t\">" if c in text else "<th>") + f"{_e(n)}</th>" for c, n in zip(cols, names))
    rows = []
    for idx, r in df.iterrows():
        cells = f'<td class="t" data-label="{_e(first)}">{_e(idx)}</td>' if index else ""
        for c, name in zip(cols, names):
            v = r[c]
            cls = ' class="t"' if isinstance(v, str) else ""
            cells += f'<td{cls} data-label="{_e(name)}">{_cell(_fmt(v, str(c)))}</td>'
        rows.append(f"<tr>{cells}</tr>")
    wide = ' class="wide"' if len(cols) + index > WIDE else ""
    return f'<div class="scroll"><table{wide}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


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
#: The ratios' intervals, as the terminal names them (besides HEADLINE_COLUMNS).
INTERVAL_COLUMNS = {**HEADLINE_COLUMNS, "strong_bytes_share": "Strong share of memory traffic"}


def _subset(df: pd.DataFrame, cols: Mapping[str, str]) -> pd.DataFrame:
    keep = [c for c in cols if c in df.columns]
    return df[keep]


# ------------------------------------------------------------------------------ sections
#: The report's bottom-line columns: (column of the stored bottom line, header with its unit).
BOTTOM_LINE_COLUMNS = (
    ("wall_s_per_task", "time per task"), ("model_s_per_task", "model time per task"), ("env_s_per_task", "tool + user waits per task"),
    ("weak_gpu_s_per_task", "Weak GPU-seconds per task"), ("strong_gpu_s_per_task", "Strong GPU-seconds per task"),
    ("gpu_h_per_task", "GPU-hours per task"), ("usd_per_task", "$ per task"),
)
#: The changes against Strong-only beside them, in the headline's sign convention: (column, header).
CHANGE_COLUMNS = (("wall_s_per_task", "time vs Strong-only"), ("usd_per_task", "$ vs Strong-only"))


def _bottom_line_cells(line: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """The stored bottom line as the report prints it: each figure with its range, then its change against Strong-only."""
    lohi = {(x.strategy, x.column): (float(x.low), float(x.high)) for x in ranges.itertuples()}
    cells = pd.DataFrame(index=line.index)
    for col, header in BOTTOM_LINE_COLUMNS:
        fmt = {"usd_per_task": BL.fmt_usd, "gpu_h_per_task": BL.fmt_gpu_hours}.get(col) or (
            BL.fmt_seconds if "gpu" not in col else (lambda v: f"{v:,.1f} GPU·s"))
        cells[header] = [fmt(float(v)) + (f" {BL.fmt_range(col, *lohi[(s, col)])}" if (s, col) in lohi else "")
                         for s, v in line[col].items()]
    if "strongonly" in line.index:  # as the terminal's first screen: BL.changes, the negated stored saving as its range
        ch = {s: BL.changes(line, s, iv=ranges if not ranges.empty else None) for s in line.index if s != "strongonly"}
        for col, header in CHANGE_COLUMNS:
            cells[header] = [ch[s][col] if s in ch else "—" for s in line.index]
    return cells


def _warnings(r: Run) -> list[str]:
    """What the terminal says before its answer: the acceptance model not calibrated here, the workload's estimates."""
    a = r.assumptions
    out = []
    applies = str(a.get("acceptance_applies") or "")
    if applies and not applies.startswith("yes"):
        out.append(applies)
    dq = a.get("data_quality")
    if isinstance(dq, Mapping):
        out += [f"workload {r.workload}: {w}" for w in dq.get("warnings") or []]
    if a.get("unused_prices"):
        out.append(str(a["unused_prices"]))
    return out


def _waits_line(r: Run) -> str:
    """Strong-only's tool and user waits per task and their share of its wall time, from this run's totals."""
    share = BL.waits_share(r.summary)
    if share is None:
        return ""
    dq = r.assumptions.get("data_quality")
    if isinstance(dq, Mapping) and any("waits not recorded" in str(w) for w in dq.get("warnings") or []):
        return "Tool and user waits: not recorded in this workload's log, so the wall time covers model time only."
    so = r.summary.loc["strongonly"]
    n = float(so["trajectories"])
    env = r.assumptions.get("environment")
    preset = f" (environment '{env['preset']}')" if isinstance(env, Mapping) and env.get("preset") else ""
    return (f"Tool and user waits{preset}: {BL.fmt_seconds(float(so['env_wall_time_s']) / n)} of Strong-only's "
            f"{BL.fmt_seconds(float(so['wall_time_s']) / n)} per task ({share:.1%}); no strategy changes them.")


def _prices_note(r: Run) -> str:
    prices = r.assumptions.get("prices")
    said = "; ".join(f"{gpu} at " + ("no price" if not isinstance(p.get("usd_per_gpu_hour"), (int, float))
                                      else f"${float(p['usd_per_gpu_hour']):,.3g}/GPU-hour") + f" ({p.get('source', '')})"
                     for gpu, p in prices.items() if isinstance(p, Mapping)) if isinstance(prices, Mapping) else ""
    return (f"Per task over {int(r.summary['trajectories'].iloc[0]):,} trajectories, batch 1 (every call alone on its "
            "replica): GPU-seconds are each pool's busy time × its GPUs per replica, and dollars price them (idle time "
            "unbilled: a floor; <code>specagent plan</code> sizes a shared fleet). "
            + (f"Prices: {_e(said)}." if said else "No prices recorded."))


def _bottom_line_html(data: ReportData) -> list[str]:
    """The first thing the report shows: the headline, the verdict, any warning about the inputs, then per task,
    seconds, GPU-hours and dollars per strategy, all as the predict job stored them."""
    if not data.runs:
        return []
    out = ['<h2 id="bottom-line">Bottom line per task</h2>']
    for r in data.runs:
        if len(data.runs) > 1:
            out.append(f"<h3>{_e(r.workload)}</h3>")
        if r.bottom_line is None:
            out.append(f"<p>Not shown: {_e(r.missing('the bottom line per task'))}.</p>")
            continue
        iv = r.intervals or {}
        ranges = bottom_line_ranges(r)
        head = BL.headline(r.bottom_line, iv=ranges if not ranges.empty else None)
        if head:
            out.append(f'<p class="headline"><b>{_e(head)}</b></p>')
        if iv.get("verdict"):
            out.append(f'<p class="headline">{_e(iv["verdict"])} ({int(iv.get("draws", 0))} draws of '
                       f'{_e(iv.get("includes", "the acceptance parameters"))}).</p>')
        out += [f'<p class="warn">{_e(w)}</p>' for w in _warnings(r)]
        waits = _waits_line(r)
        if waits:
            out.append(f"<p>{_e(waits)}</p>")
        out.append(table_html(_bottom_line_cells(r.bottom_line, ranges), index_name="strategy"))
        out.append(f'<p class="note">{_prices_note(r)} Changes against Strong-only: negative is less time or fewer dollars; '
                   "ranges are the intervals of the same draws.</p>")
    return out


def intervals_html(iv: Mapping[str, Any]) -> str:
    """Each ratio with its interval (point [low–high], as the terminal prints it) per strategy."""
    rows = [r for r in iv.get("intervals") or [] if r.get("metric") in INTERVAL_COLUMNS and r.get("point") is not None]
    if not rows:
        return ""
    wide = stretched(iv)
    cells = pd.DataFrame([{"strategy": r["strategy"], "metric": r["metric"],
                           "cell": fmt_interval(float(r["point"]), float(r["low"]), float(r["high"]))
                           + (STRETCHED_MARK if (r["strategy"], r["metric"]) in wide else "")} for r in rows])
    table = cells.pivot(index="strategy", columns="metric", values="cell")
    table = table.reindex(index=list(dict.fromkeys(cells["strategy"])), columns=[c for c in INTERVAL_COLUMNS if c in table.columns])
    shown = any((r["strategy"], r["metric"]) in wide for r in rows)
    return (f"<p>With {float(iv.get('level', 0)):.0%} intervals from {int(iv.get('draws', 0))} seeded draws of "
            f"{_e(iv.get('includes', 'the acceptance parameters'))} ({_e(iv.get('source', ''))}):</p>"
            + table_html(table.fillna("—"), index_name="strategy", headers=INTERVAL_COLUMNS)
            + (f'<p class="note">{_e(STRETCHED)}.</p>' if shown else ""))


def published_html(iv: Mapping[str, Any]) -> str:
    """The publication's figures against this run, as the terminal prints them (figure, strategy, published, predicted
    [interval], verdict); where the run's setting is not the publication's, the sentence saying so."""
    rows = published_rows(iv, INTERVAL_COLUMNS)
    if not rows:
        note = iv.get("published_setting_note")
        return f'<p class="note">{_e(note)}</p>' if note else ""
    cite = str((iv.get("published") or [{}])[0].get("source") or "")
    t = pd.DataFrame(rows)
    return ("<p>Published protocol figures against this run:</p>" + table_html(t, index=False)
            + f'<p class="note">Figures: {_e(cite)} (aggregates over models or benchmarks). {_e(VERDICTS)}.'
            + (f" {_e(STRETCHED)}." if any(r["predicted [interval]"].endswith(STRETCHED_MARK) for r in rows) else "")
            + (f" {_e(iv['published_setting_note'])}" if iv.get("published_setting_note") else "") + "</p>")


def _summary_html(data: ReportData) -> list[str]:
    """The ratios to Strong-only, their intervals and the publication's figures against them."""
    if not data.runs:
        return []
    out = ['<h2 id="summary">Summary relative to Strong-only</h2>']
    for r in data.runs:
        if len(data.runs) > 1:
            out.append(f"<h3>{_e(r.workload)}</h3>")
        s = r.summary
        if "wall_time_s_rel" in s:
            out.append(f"<p>Ratios to Strong-only on the same trajectories: {_e(BL.ratio_in_words(s))} (1.000× = the same; "
                       "lower is cheaper).</p>")
        if "api_usd" in s.columns and "strongonly" in s.index and float(s.loc["strongonly", "api_usd"]) > 0:
            s = s.assign(api_usd_rel=s["api_usd"] / float(s.loc["strongonly", "api_usd"]))
        out.append(table_html(_subset(s, HEADLINE_COLUMNS), index_name="strategy", headers=HEADLINE_COLUMNS))
        if r.intervals:
            out += [intervals_html(r.intervals), published_html(r.intervals)]
        out.append("<details><summary>Totals (absolute, summed over trajectories)</summary>"
                   + table_html(_subset(s, ABSOLUTE_COLUMNS), headers=ABSOLUTE_COLUMNS) + "</details>")
    return out


def _explain_html(data: ReportData) -> list[str]:
    """`specagent explain`'s table, from the job's stored decomposition: per phase, how much it moves each of SpecAgent's
    ratios from Strong-only's 1."""
    decs = (data.runs[0].views or {}).get("decompositions") if data.runs else None
    if not decs:
        return []
    order = ("wall", "model", "memory", "flops", "usd")  # as `specagent explain` prints them
    decs = {k: decs[k] for k in sorted(decs, key=lambda k: (order.index(k) if k in order else len(order), k))}
    labels = {t["phase"]: t["label"] for d in decs.values() for t in d["terms"]}
    table = pd.DataFrame({k: {labels[t["phase"]]: float(t["change"]) for t in d["terms"]} for k, d in decs.items()})
    cells = table[(table.abs() > 5e-4).any(axis=1)].map(lambda v: f"{v:+.3f}")
    cells.loc["SpecAgent ÷ Strong-only"] = [f"{float(d['ratio']):.3f}" for d in decs.values()]
    return ['<h2 id="explain">Why these ratios</h2>',
            "<p>Each phase's share of Strong-only's total in SpecAgent minus its share in Strong-only: the rows add up "
            "from 1 to the ratio in the last row (<code>specagent explain</code> prints the factors behind each row and "
            "reruns the ratios with one thing changed; docs/explain.md).</p>",
            table_html(cells, index_name="phase")]


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


#: The setting's keys in the order `predict` prints them: the models first.
SETTING_ORDER = ("weak", "strong", "serving_engine", "weight_mode", "prefix_caching", "verifier_prompt", "verifier_system_tokens")


def _setting_html(data: ReportData) -> list[str]:
    out = ['<h2 id="setting">Setting</h2>']
    if not data.runs:
        return out + ["<p>No simulator results were supplied; this report shows only the tables given.</p>"]
    for r in data.runs:
        a = r.assumptions
        setting = dict(a.get("setting") or {})
        ordered = {k: setting[k] for k in SETTING_ORDER if k in setting} | setting
        meta = {k: a[k] for k in ("workload", "trajectories", "engine", "seed", "quality") if k in a}
        meta["results from"] = r.source
        out.append((f"<h3>{_e(r.workload)}</h3>" if len(data.runs) > 1 else "") + kv_html({**ordered, **meta}))
    return out


def _figures_html(entries: Sequence[FigureEntry], image_note: str) -> list[str]:
    out = ['<h2 id="figures">Figures</h2>']
    if image_note:
        out.append(f"<p><em>{_e(image_note)}</em></p>")
    for f in entries:
        if f.figure is None:
            continue
        div = pio.to_html(f.figure, full_html=False, include_plotlyjs=False, div_id=f"plot-{f.key}",
                          config={"displaylogo": False, "responsive": True}, default_height=f"{int(f.figure.layout.height or 500)}px")
        out.append(f'<figure id="{_e(f.key)}" data-figure="{_e(f.key)}">{div}<figcaption>{_e(f.caption)}</figcaption></figure>')
    omitted = [f for f in entries if f.figure is None]
    if omitted:
        lis = "".join(f"<li><b>{_e(f.name)}</b> ({_e(f.key)}): {_e(f.reason)}</li>" for f in omitted)
        out.append(f'<div class="omitted"><b>Figures not shown</b> (the results given do not support them):<ul>{lis}</ul></div>')
    return out


def _phases_html(data: ReportData) -> list[str]:
    out = ['<h2 id="phases">Phase tables</h2>']
    units = (("phase_time", "Time by phase (s, summed over trajectories)", 1.0),
             ("phase_bytes", "HBM bytes read by phase (TB)", 1e-12),
             ("phase_flops", "FLOPs by phase (PFLOP)", 1e-15))
    labels = labels_of(data)
    for r in data.runs:
        if len(data.runs) > 1:
            out.append(f"<h3>{_e(r.workload)}</h3>")
        for attr, title, scale in units:
            t = getattr(r, attr).copy()
            t = t.drop(columns=[c for c in ("workload",) if c in t.columns]) * scale
            t = t[[c for c in F.PHASE_LABELS if c in t.columns] + [c for c in t.columns if c not in F.PHASE_LABELS]]
            t.index = [labels.get(i, i) for i in t.index]
            out.append(f"<h4>{_e(title)}</h4>" + table_html(t, headers=F.PHASE_LABELS))
    return out


def _tables_html(data: ReportData) -> list[tuple[str, str, list[str]]]:
    """The optional tables' sections: (anchor, nav name, HTML)."""
    out = []
    for name, df, title in (("balance", data.balance, "Fleet balance study"), ("calibration", data.calibration, "Calibration")):
        if df is not None:
            out.append((name, title, [f'<h2 id="{name}">{_e(title)}</h2>' + table_html(df.reset_index(drop=True), index=False)]))
    if data.plan is not None:
        out.append(("plan", "Capacity plan", _plan_html(data.plan)))
    if data.latency is not None:  # the rows are in the figure; the table is the error per metric
        lat = data.latency
        err = (lat["predicted"] / lat["measured"] - 1.0).abs()
        mape = err.groupby(lat["metric"]).agg(["count", "mean"]).rename(columns={"count": "figures", "mean": "MAPE"})
        out.append(("latency", "Latency validation",
                    ['<h2 id="latency">Latency validation</h2>' + table_html(mape.reset_index(), index=False)]))
    return out


def _assumptions_html(data: ReportData) -> list[str]:
    out = ['<h2 id="assumptions">Assumptions</h2>']
    for r in data.runs:
        if len(data.runs) > 1:
            out.append(f"<h3>{_e(r.workload)}</h3>")
        out.append(kv_html(r.assumptions) if r.assumptions else "<p>none recorded</p>")
    return out + [f"<p>{_e(n)}</p>" for n in data.notes]


def render_html(data: ReportData, entries: Sequence[FigureEntry], image_note: str = "") -> str:
    """The whole document as a string (deterministic for the same inputs); the nav links every section it has."""
    sections: list[tuple[str, str, list[str]]] = [("bottom-line", "Bottom line", _bottom_line_html(data)),
                                                  ("setting", "Setting", _setting_html(data)),
                                                  ("summary", "Summary", _summary_html(data)),
                                                  ("explain", "Why", _explain_html(data)),
                                                  ("figures", "Figures", _figures_html(entries, image_note))]
    if data.runs:
        sections.append(("phases", "Phase tables", _phases_html(data)))
    sections += _tables_html(data)
    sections.append(("assumptions", "Assumptions", _assumptions_html(data)))
    shown = [(a, n, parts) for a, n, parts in sections if parts]
    nav = "".join(f'<a href="#{a}">{_e(n)}</a>' for a, n, _ in shown)
    parts = [f"<h1>{_e(data.title)}</h1>",
             '<p class="lead">What each agent strategy costs when a small Weak model drafts tool-using steps and a '
             "large Strong model verifies them in one prefill, relative to the Strong model doing every step. "
             "Every number below comes from the prediction (the simulator and the cost model, as `specagent predict` "
             "stored them), a fleet study or a calibration run named in the assumptions; nothing is recomputed or "
             "invented here (quality appears only where measured success rates were supplied).</p>",
             f"<nav>{nav}</nav>"]
    for _, _, html_parts in shown:
        parts.extend(html_parts)
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
    """Write the HTML report for the predict job's result (`simulator.jobs.predict.run`), its stored summary.json (a
    path or its dict), several of them, results paths, or a ReportData.

    ``extra`` may hold ``balance``, ``calibration``, ``plan`` and ``latency`` DataFrames (columns as in
    specagent.reports.data) and ``sensitivity`` (a sensitivity study's dict). ``images``: a directory for PNG/SVG
    copies, True for ``<report stem>_figures/`` beside the HTML, False/None for none.
    """
    extra = dict(extra or {})
    unknown = set(extra) - {"balance", "calibration", "plan", "latency", "sensitivity"}
    if unknown:
        raise ValueError(f"write_report: unknown extra key(s) {', '.join(sorted(unknown))}; use balance, calibration, plan, latency, "
                         "sensitivity")
    data = as_report_data(results, title=title, **extra)
    entries = build_figures(data)
    out = Path(out_html)
    export: ImageExport | None = None
    img_dir = (out.with_name(out.stem + "_figures") if images is True else Path(images)) if images else None
    note = (f"Static {'/'.join(f.upper() for f in image_formats)} copies of these figures go to {img_dir.name}/, named by "
            "each figure's anchor (fig1, fig_cost, …), where the kaleido package and a Chrome/Chromium are both installed "
            "(the command says what it wrote)." if img_dir is not None else "")
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
    return ReportResult(path=out, figures=entries, images=export)
