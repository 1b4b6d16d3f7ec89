"""Tables of every ratio with its interval, and the publication's ranges beside them (`predict`).

The published figures are Wang et al.'s (CITATION); they are compared only where this run's setting is the one the
acceptance was calibrated on (`simulator.applicability`), and the figures that were calibration targets say "fitted".

Self-contained so `predict`'s layout (owned elsewhere) needs one call: `ranges_tables(comp, intervals, console)`.
The intervals come from `simulator.uncertainty.ratio_intervals`; this module only formats them.
"""

from __future__ import annotations


from rich.console import Console, RenderableType
from rich.table import Table

from specagent.cli.fit_table import Col, fitted
from specagent.reports.published import STRETCHED, STRETCHED_MARK, VERDICTS, fmt_interval, published_rows
from specagent.simulator.jobs.predict import (CITATION, SHORT_CITATION, comparable, intervals_records,
                                              setting_note)
from specagent.simulator.run import Comparison
from specagent.simulator.uncertainty import Intervals, published_for

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


def ranges_tables(comp: Comparison, iv: Intervals, console: Console, focus: str = "specagent") -> list[RenderableType]:
    """SpecAgent's ratios with intervals and published ranges; the other strategies' intervals; the published figures
    against this run (only where the setting matches the calibration's), fitted to `console`."""
    pub = published_for(comp) if comparable(comp) else {}
    tables = []
    if focus in comp.summary.index:
        tables.append(_focus_table(comp, iv, focus, pub))
    others = [s for s in comp.summary.index if s not in (focus, "strongonly")]
    cols = [(m, h) for m, h, _ in SHOWN if any(iv.get(s, m) is not None for s in others)][:COMPACT]
    if others and cols:
        tables.append(_others_table(iv, others, cols))
    if pub:
        tables.append(_published_table(intervals_records(iv, comp), console))
    return tables


def _stretched(iv: Intervals, strategies) -> str:
    w = [f"{s} {m}" for s, m in iv.widened if s in strategies]
    return (f"; {len(w)} stretched to reach the point estimate, which lies in the draws' tail "
            f"({', '.join(w[:3])}{', …' if len(w) > 3 else ''})") if w else ""


def _focus_table(comp: Comparison, iv: Intervals, focus: str, pub: dict) -> Table:
    t = Table(title=f"{focus}: every ratio with its range", show_edge=False)
    for col in ("ratio", "predicted [interval]", f"published ({SHORT_CITATION})" if pub else "published"):
        t.add_column(col, justify="left" if col == "ratio" else "right")
    for metric, head, _ in SHOWN:
        got = iv.get(focus, metric)
        if got is None:
            continue
        p = pub.get((focus, metric))
        t.add_row(head, fmt_interval(*got), p.text() if p else "-")
    origin = iv.source.split(":", 1)[0]
    t.caption = (f"{iv.level:.0%} intervals: {iv.n_draws} seeded draws of {iv.includes()} (acceptance from {origin})"
                 + _stretched(iv, {focus}) + " (see the assumptions). S share = the Strong model's share of its memory traffic")
    note = setting_note(comp)
    if note:
        t.caption += ". " + note
    elif pub:
        t.caption += ". Published figures compared in the publication's evaluated setting (this run's)"
    return t


def _others_table(iv: Intervals, others: list, cols: list) -> Table:
    t = Table(title="the other strategies' intervals (point estimates above)", show_edge=False)
    t.add_column("strategy", no_wrap=True)
    for _, h in cols:
        t.add_column(h, justify="right")
    for s in others:
        cells = []
        for m, _ in cols:
            got = iv.get(s, m)
            cells.append("-" if got is None else f"{got[1]:.2f}–{got[2]:.2f}")
        t.add_row(str(s), *cells)
    t.caption = f"{iv.level:.0%} intervals, same draws for every strategy" + _stretched(iv, set(others))
    return t


#: The published-figures table, in the report's words (reports/published.py): below the width it needs the figure id
#: leaves first (strategy and ratio still name the row), then each figure prints as a block.
PUBLISHED_COLUMNS = (Col("figure", "left", optional=True), Col("strategy", "left"), Col("ratio", "left"),
                     Col("published"), Col("predicted [interval]"), Col("verdict", "left"))


def _published_table(records: dict, console: Console) -> RenderableType:
    """The rows `published_rows` gives the HTML report too, so the terminal and the report cannot disagree."""
    rows = published_rows(records, {m: head for m, head, _ in SHOWN})
    keys = ("figure", "strategy", "ratio", "published", "predicted [interval]", "verdict")
    caption = (f"figures: {CITATION}, transcribed in measurements/protocol_figures.csv (aggregates over models or "
               f"benchmarks; a 'vs' ratio is relative to that strategy, not to Strong-only). {VERDICTS}")
    if any(r["predicted [interval]"].endswith(STRETCHED_MARK) for r in rows):
        caption += f". {STRETCHED}"
    return fitted(console, PUBLISHED_COLUMNS, [[r[k] for k in keys] for r in rows], caption=caption,
                  title=f"published protocol figures ({SHORT_CITATION}) against this run", left_out="summary.json and the report have it")
