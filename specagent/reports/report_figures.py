"""Which figures a report shows, each drawn from what the predict job stored and the tables given with it.

Reports price nothing: the bottom line, its ranges, the explain decomposition (figure "why"), the
verification saving against the decode batch (figure 4 without a fleet study) and the roofline's
derates (figure 5) are fields of the stored result (summary.json's `bottom_line`, `intervals`,
`views`). A summary written before one of them was stored gets the figure listed as not shown,
with "rerun `specagent predict`", never recomputed here. Figures are numbered in the order the
report shows them; their keys (fig1, fig_cost, ...) name the anchors and the PNG/SVG copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd
import plotly.graph_objects as go

from specagent.reports import figures as F
from specagent.reports.data import ReportData, Run, roofline_profile

#: Each figure's short name, for the list of figures not shown and the command's output.
NAMES = {"fig_cost": "time and cost per task", "fig1": "memory reads", "fig2": "operating points",
         "fig_time": "agent vs environment time", "fig_explain": "why the wall ratio is what it is", "fig3": "cost by phase",
         "fig4": "saving against the decode batch", "fig5": "roofline", "fig6": "calibration", "fig7": "capacity plan",
         "fig_tornado": "sensitivity", "fig_break_even": "break-even map", "fig8": "serving latency"}


@dataclass
class FigureEntry:
    key: str  # fig1 .. fig8, fig_cost, ... (fig3_<n> for several workloads): the anchor and the image file's name
    caption: str
    figure: go.Figure | None
    reason: str = ""  # why it was left out, when figure is None

    @property
    def name(self) -> str:
        return NAMES.get(self.key.split("_")[0] if self.key.startswith("fig3_") else self.key, self.key)


def labels_of(data: ReportData) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in data.runs:
        if "label" in r.summary.columns:
            out.update({str(k): str(v) for k, v in r.summary["label"].items()})
    return out


def _single_run_intervals(data: ReportData) -> dict | None:
    """The intervals a combined figure can draw: one run's (several workloads' rows would be ambiguous by strategy)."""
    return data.runs[0].intervals if len(data.runs) == 1 else None


def bottom_line_ranges(r: Run) -> pd.DataFrame:
    """The stored ranges of the bottom line (empty where none were drawn)."""
    return pd.DataFrame((r.intervals or {}).get("bottom_line") or [], columns=["strategy", "column", "point", "low", "high"])


def _cost_figure(data: ReportData) -> go.Figure:
    r = data.runs[0]
    if r.bottom_line is None:
        raise F.FigureNotSupported(r.missing("the bottom line per task"))
    iv = r.intervals or {}
    return F.bottom_line_figure(r.bottom_line, bottom_line_ranges(r), float(iv.get("level", 0) or 0) or None,
                                str(iv.get("includes", "")), labels_of(data))


def _explain_figure(data: ReportData) -> go.Figure:
    from specagent.reports.explain_figure import waterfall_figure

    r = data.runs[0]
    decs = (r.views or {}).get("decompositions")
    if not decs:
        if r.views is not None:  # stored, and empty: the run had no SpecAgent and Strong-only to compare
            raise F.FigureNotSupported("the results have no SpecAgent and Strong-only rows with per-phase totals")
        raise F.FigureNotSupported(r.missing("the explain decomposition"))
    return waterfall_figure(decs["wall"], resource="wall")


def _balance_figure(data: ReportData) -> tuple[str, go.Figure]:
    """Figure 4's caption and figure: the fleet study when one was given, else the job's roofline curve."""
    if data.balance is not None:
        bb: dict[str, float | None] = {}
        if "balance_batch" in data.balance.columns:
            for hw, g in data.balance.groupby("hardware", sort=False):
                v = pd.to_numeric(g["balance_batch"], errors="coerce").dropna()
                bb[str(hw)] = float(v.iloc[0]) if len(v) else None
        return ("SpecAgent's saving against the Strong replica's mean decode batch, from the fleet study. The saving "
                "vanishes as decode batches approach the balance point, where decode stops being bandwidth-bound.",
                F.balance_figure(data.balance, "fleet study", bb, saving_axis="Strong pool's busy time and HBM reads saved (%)"))
    r = data.runs[0]
    view = (r.views or {}).get("balance")
    if view is None:
        raise F.FigureNotSupported(r.missing("the verification saving against the decode batch") if r.views is None
                                   else "no fleet balance study supplied, and no Strong deployment the job could draw it "
                                        "for (a hosted Strong model)")
    fig = F.balance_figure(pd.DataFrame(view["curve"]), "roofline; no fleet study supplied", view.get("balance_batch") or {},
                           saving_axis="saving per verified token (%)")
    return ("Per-token saving of a verification prefill against decoding the same tokens, as the Strong replica's decode "
            "batch grows (each sequence's share of a batched decode pass). From the cost model, because no fleet balance "
            "study was supplied. Shaded: batches whose KV cache and recurrent state do not fit next to the weights. "
            f"Inputs: {view.get('note', '')}.", fig)


def _roofline(data: ReportData) -> tuple[str, go.Figure]:
    """Figure 5's caption and figure, from the job's stored derates and the stored GPU profile."""
    r = data.runs[0]
    view = (r.views or {}).get("roofline")
    if view is None:
        raise F.FigureNotSupported(r.missing("the serving engine's derates on the GPU") if r.views is None
                                   else "no deployment of a simulated model (a hosted model only)")
    hw = roofline_profile(data)
    keep = [k for k in ("strongonly", "specagent") if k in r.summary.index] or list(r.summary.index[:2])
    pts = F.phase_operating_points(r.summary, view.get("gpus") or {}, view.get("compute_dtypes") or {}, keep)
    derate = (float(view["derate"][0]), float(view["derate"][1]))
    caption = (F.roofline_caption(hw, pts, derate) if len(pts) else
               "The hardware's roofline per GPU and where each phase of the run operates.")
    return caption, F.roofline_figure(hw, pts, derate=derate)


def build_figures(data: ReportData) -> list[FigureEntry]:
    """Every figure the results support, numbered in order, and for each one left out, the reason."""
    out: list[FigureEntry] = []
    labels = labels_of(data)
    summary = data.combined_summary()

    def attempt(key: str, caption: str, make: Callable[[], go.Figure]) -> None:
        try:
            out.append(FigureEntry(key, caption, make()))
        except F.FigureNotSupported as exc:
            out.append(FigureEntry(key, caption, None, str(exc)))

    if data.runs:
        attempt("fig_cost", "What a task takes and costs under each strategy: seconds per task (model time, and the "
                            "tool and user waits no strategy changes) and dollars per task, with the prediction's "
                            "ranges as error bars where they were drawn."
                            + (f" Strategies compared in {data.runs[0].workload}; further workloads are in the bottom-line table."
                               if len(data.runs) > 1 else ""), lambda: _cost_figure(data))
        attempt("fig1", "Memory reads of the Strong model, and of both models together, relative to Strong-only. "
                        "SpecAgent moves Strong tokens from decode (weights re-read per token) into one verification "
                        "prefill per drafted segment.", lambda: F.memory_reads_figure(summary, _single_run_intervals(data)))
        attempt("fig2", "Each strategy's operating point relative to Strong-only, with its intervals as error bars where "
                        "they were drawn. Quality comes only from measured success rates supplied with the results.",
                lambda: F.operating_points_figure(summary, _single_run_intervals(data)))
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
                    lambda r=r: F.phase_cost_figure(r.phase_flops, r.phase_bytes, r.phase_time, labels,
                                                    workload=r.workload if len(data.runs) > 1 else None))
        for key, make in (("fig4", _balance_figure), ("fig5", _roofline)):
            try:
                caption, fig = make(data)
                out.append(FigureEntry(key, caption, fig))
            except F.FigureNotSupported as exc:
                out.append(FigureEntry(key, "", None, str(exc)))
    else:
        for key in ("fig_cost", "fig1", "fig2", "fig_time", "fig3", "fig4", "fig5"):
            out.append(FigureEntry(key, "", None, "no simulator results (summary JSON or per-trajectory Parquet) supplied"))
    _tables(data, attempt, out)
    for n, e in enumerate((e for e in out if e.figure is not None), start=1):
        e.figure.update_layout(title_text=f"{n} · {e.figure.layout.title.text}")  # type: ignore[union-attr]
    return out


def _tables(data: ReportData, attempt: Callable, out: list[FigureEntry]) -> None:
    """The figures of the optional tables: calibration, capacity plan, sensitivity, serving latency."""
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
                lambda: latency_figure(data.latency.to_dict("records"), "Predicted vs measured").update_layout(width=None))
    else:
        out.append(FigureEntry("fig8", "", None, "no latency validation rows supplied (`specagent latency validate --rows FILE`)"))
