"""Tables of every ratio with its interval, and the publication's ranges beside them (what `predict --details` prints).

The published figures are Wang et al.'s (CITATION); they are compared only where the run's setting is the one the
acceptance was calibrated on (`simulator.applicability`), and the figures that were calibration targets say "fitted".

Everything here reads the intervals the predict job stores (`summary.json`'s `intervals`: `PredictResult.to_dict()`),
so a stored run prints the same tables as the run that wrote it; the intervals themselves come from
`simulator.uncertainty.ratio_intervals`, inside the job. This module only formats them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console, RenderableType
from rich.table import Table

from specagent.reports.published import STRETCHED, STRETCHED_MARK, VERDICTS, fmt_interval, interval_of, published_rows
from specagent.reports.screens.tables import Col, fitted
from specagent.simulator.jobs.predict import CITATION, SHORT_CITATION

#: (metric, short name, meaning) in print order; a metric the run lacks (Strong bytes behind an API) is skipped.
SHOWN = (
    ("total_bytes_read_rel", "bytes", "HBM bytes read by both models"),
    ("strong_bytes_read_rel", "S bytes", "bytes read by the Strong model"),
    ("wall_time_s_rel", "wall", "wall time per task, waits included"),
    ("model_wall_time_s_rel", "model", "wall time without tool and user waits"),
    ("total_flops_rel", "FLOPs", "FLOPs of both models"),
    ("strong_decode_tokens_rel", "S dec", "tokens the Strong model decodes"),
    ("strong_calls_rel", "S calls", "Strong model calls"),
    ("api_usd_rel", "API $", "API charges"),
    ("strong_bytes_share", "S share", "the Strong model's share of the strategy's own memory traffic (not a ratio to Strong-only)"),
)
#: The compact table of the other strategies shows these (the first four of SHOWN present in the run).
COMPACT = 4


def ranges_tables(records: Mapping[str, Any], strategies: Sequence[str], console: Console,
                  focus: str = "specagent") -> list[RenderableType]:
    """SpecAgent's ratios with intervals and published ranges; the other strategies' intervals; the published figures
    against this run (only where the setting matches the calibration's), fitted to `console`. `records`: the stored
    intervals (`PredictResult.to_dict()["intervals"]`); `strategies`: the run's, in its order."""
    pub = {(str(p["strategy"]), str(p["metric"])): str(p["published"]) for p in records.get("published") or []}
    tables = []
    if focus in strategies:
        tables.append(focus_table(records, focus, pub))
    others = [s for s in strategies if s not in (focus, "strongonly")]
    cols = [(m, h) for m, h, _ in SHOWN if any(interval_of(records, s, m) is not None for s in others)][:COMPACT]
    if others and cols:
        tables.append(others_table(records, others, cols))
    if pub:
        tables.append(published_table(records, console))
    return tables


def stretched_note(records: Mapping[str, Any], strategies) -> str:
    w = [f"{r['strategy']} {r['metric']}" for r in records.get("widened") or [] if r["strategy"] in strategies]
    return (f"; {len(w)} stretched to reach the point estimate, which lies in the draws' tail "
            f"({', '.join(w[:3])}{', …' if len(w) > 3 else ''})") if w else ""


def focus_table(records: Mapping[str, Any], focus: str, pub: Mapping[tuple[str, str], str]) -> Table:
    """One strategy's ratios, each with its interval and the published range (`pub`: (strategy, metric) -> its text)."""
    t = Table(title=f"{focus}: every ratio with its range", show_edge=False)
    for col in ("ratio", "predicted [interval]", f"published ({SHORT_CITATION})" if pub else "published"):
        t.add_column(col, justify="left" if col == "ratio" else "right")
    for metric, head, _ in SHOWN:
        got = interval_of(records, focus, metric)
        if got is None:
            continue
        p = pub.get((focus, metric))
        t.add_row(head, fmt_interval(*got), p if p else "-")
    origin = str(records["source"]).split(":", 1)[0]
    t.caption = (f"{records['level']:.0%} intervals: {records['draws']} seeded draws of {records['includes']} (acceptance "
                 f"from {origin})" + stretched_note(records, {focus})
                 + " (see the assumptions). S share = the Strong model's share of its memory traffic")
    note = records.get("published_setting_note")
    if note:
        t.caption += ". " + note
    elif pub:
        t.caption += ". Published figures compared in the publication's evaluated setting (this run's)"
    return t


def others_table(records: Mapping[str, Any], others: list, cols: list) -> Table:
    t = Table(title="the other strategies' intervals (point estimates above)", show_edge=False)
    t.add_column("strategy", no_wrap=True)
    for _, h in cols:
        t.add_column(h, justify="right")
    for s in others:
        cells = []
        for m, _ in cols:
            got = interval_of(records, s, m)
            cells.append("-" if got is None else f"{got[1]:.2f}–{got[2]:.2f}")
        t.add_row(str(s), *cells)
    t.caption = f"{records['level']:.0%} intervals, same draws for every strategy" + stretched_note(records, set(others))
    return t


#: The published-figures table, in the report's words (reports/published.py): below the width it needs the figure id
#: leaves first (strategy and ratio still name the row), then each figure prints as a block.
PUBLISHED_COLUMNS = (Col("figure", "left", optional=True), Col("strategy", "left"), Col("ratio", "left"),
                     Col("published"), Col("predicted [interval]"), Col("verdict", "left"))


def published_table(records: Mapping[str, Any], console: Console) -> RenderableType:
    """The rows `published_rows` gives the HTML report too, so the terminal and the report cannot disagree."""
    rows = published_rows(records, {m: head for m, head, _ in SHOWN})
    keys = ("figure", "strategy", "ratio", "published", "predicted [interval]", "verdict")
    caption = (f"figures: {CITATION}, transcribed in measurements/protocol_figures.csv (aggregates over models or "
               f"benchmarks; a 'vs' ratio is relative to that strategy, not to Strong-only). {VERDICTS}")
    if any(r["predicted [interval]"].endswith(STRETCHED_MARK) for r in rows):
        caption += f". {STRETCHED}"
    return fitted(console, PUBLISHED_COLUMNS, [[r[k] for k in keys] for r in rows], caption=caption,
                  title=f"published protocol figures ({SHORT_CITATION}) against this run", left_out="summary.json and the report have it")
