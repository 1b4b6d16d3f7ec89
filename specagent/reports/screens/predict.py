"""What `specagent predict` prints: the answer (every strategy per task with its change against Strong-only, SpecAgent's
changes with their intervals, the verdict, the waits), and with --details the bottom line, its ranges and every table
of the comparison; `--format csv`'s one row per strategy.

Each function reads a `PredictResult` (`simulator/jobs/predict.py`): the bottom line, its intervals and the verdict
are fields the job computed, so a notebook gets the terminal's screen from `answer(result, console)` and prices
nothing here. `answer` and `details` return renderables in print order; the command prints them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from specagent.common.lazy_import import lazy_module
from specagent.reports import bottom_line as BL
from specagent.reports.screens.comparison import (REL_COLUMNS, assumption_table, environment_line, phase_tables, rel_table,
                                                  strategy_column)
from specagent.reports.screens.ranges import ranges_tables
from specagent.reports.screens.tables import Col, fitted, legend
from specagent.simulator.jobs.bottom_line import COLUMNS, EXTRA, INTERVAL_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from specagent.simulator.jobs.predict import PredictResult
else:  # loaded on first use, as by the command that imports this module
    pd = lazy_module("pandas")


def bottom_line_table(line: pd.DataFrame, title: str, pool_list) -> Table:
    """Every strategy per task: seconds, GPU-seconds by pool, dollars (API charges for a hosted Strong model); the
    pools and their prices in the caption."""
    t = Table(title=title, show_edge=False)
    strategy_column(t, line.index)
    columns = list(COLUMNS)
    if not any(p.role == "strong" for p in pool_list):  # a hosted Strong model: its API charges instead of its GPU-seconds
        columns[3] = ("api_usd_per_task", "API $", "API charges per task for the hosted Strong model")
    cells = [[BL.fmt_cell(c, float(row[c])) if c != "api_usd_per_task" else BL.fmt_usd(float(row[c])) for c, _, _ in columns]
             for _, row in line.iterrows()]
    for i, (_, head, _) in enumerate(columns):  # figures are never cut: each column at its widest cell
        t.add_column(head, justify="right", no_wrap=True, min_width=max([len(c[i]) for c in cells] + [len(head)]))
    for strat, c in zip(line.index, cells):
        t.add_row(str(strat), *c)
    priced = "; ".join(f"{p.role.capitalize()} {p.gpus}x {p.gpu} at "
                       f"{'no price (pass --price ' + p.gpu + '=USD)' if p.usd_per_gpu_hour is None else f'${p.usd_per_gpu_hour:,.2f}/GPU-h'}"
                       f" ({'--price' if p.source.startswith('user') else 'profile'})" for p in pool_list)
    t.caption = (legend((head, meaning) for _, head, meaning in columns) + f". Pools: {priced}; "
                 "`specagent hardware show GPU` gives each price's source. Batch 1: dollars price busy GPU-seconds only "
                 "(a floor); `specagent plan` sizes a shared fleet.")
    return t


#: The ranges table's columns: (bottom_line_intervals column, header, may leave at 80 columns). The savings are shown
#: as changes, the headline's sign convention (negative: less than Strong-only).
RANGE_COLUMNS = (("wall_s_per_task", "s/task", False), ("model_s_per_task", "model s", True),
                 ("gpu_h_per_task", "GPU·s", False), ("usd_per_task", "$/task", False),
                 ("time saving %", "s Δ%", False), ("$ saving %", "$ Δ%", False))


def range_cell(col: str, low: float, high: float) -> str:
    """A magnitude's range as the bottom line writes one, `lo–hi`, in the units of the table above it (GPU-seconds,
    dollars); a saving's as the change it is, signed, `lo to hi` (the headline's notation)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    if col.endswith("%"):
        return f"{round(-high) + 0:+d} to {round(-low) + 0:+d}"  # + 0: never "-0"
    # the bottom line's `[lo–hi]` without its brackets, which mark a range beside a point: here the cell is the range
    return (BL.fmt_range("gpu_s_per_task", 3600 * low, 3600 * high) if col == "gpu_h_per_task" else
            BL.fmt_range(col, low, high)).strip("[]")


def ranges_table(iv: pd.DataFrame, level: float, n: int, includes: str, console: Console) -> RenderableType:
    """The bottom line's intervals, right under it: each per-task figure and each change against Strong-only."""
    lohi = {(r.strategy, r.column): (r.low, r.high) for r in iv.itertuples()}
    rows = [[str(strat), *[range_cell(col, *lohi[(strat, col)]) if (strat, col) in lohi else "-" for col, _, _ in RANGE_COLUMNS]]
            for strat in dict.fromkeys(iv["strategy"])]
    caption = (f"{level:.0%} intervals over draws of {includes}; GPU·s = both pools' GPU-seconds per task; s Δ%, $ Δ% = "
               "change vs Strong-only in the same draw (negative: faster, cheaper)")
    shown = {c for c, _, _ in RANGE_COLUMNS}
    n_wide = int(sum(bool(r.widened) for r in iv.itertuples() if r.column in shown)) if "widened" in iv else 0
    if n_wide:
        caption += (f"; {n_wide} interval{'s' if n_wide > 1 else ''} stretched to reach the point estimate "
                    "(the point lies in the draws' tail)")
    cols = [Col("strategy", "left"), *(Col(head, optional=opt) for _, head, opt in RANGE_COLUMNS)]
    return fitted(console, cols, rows, title=f"Bottom line ranges ({level:.0%} of {n} draws)", caption=caption,
                  left_out="--format csv has them")


def csv_frame(line: pd.DataFrame, summary: pd.DataFrame, iv: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per strategy: the per-task figures (with `<col>_low`/`<col>_high` where intervals were drawn), then the
    ratios to Strong-only."""
    rel = [c for c, _, _ in REL_COLUMNS if c in summary]
    cols = [c for c, _, _ in COLUMNS] + list(EXTRA)
    out = line[cols].copy()
    if iv is not None:
        for col in INTERVAL_COLUMNS:
            sub = iv[iv["column"] == col].set_index("strategy")
            out[f"{col}_low"], out[f"{col}_high"] = sub["low"], sub["high"]
    out = out.join(summary[rel])
    out.index.name = "strategy"
    return out


def answer_table(result: PredictResult, console: Console) -> Table:
    """Every strategy per task: seconds, GPU-hours and dollars, each with its change against Strong-only."""
    line = result.bottom_line
    t = Table(title=f"Per task, batch 1 — {result.n_trajectories:,} trajectories of {result.name}",
              show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1))
    t.add_column("strategy", no_wrap=True)
    for head in ("s/task", "GPU·h/task", "$/task"):
        t.add_column(head, justify="right", no_wrap=True)
    for strat, row in line.iterrows():
        ch = BL.changes(line, str(strat)) if strat != "strongonly" and "strongonly" in line.index else {}
        t.add_row(str(strat), *(f"{fmt(float(row[c]))}{' ' + ch[c].split(' ')[0] if c in ch else ''}"
                                for c, fmt in (("wall_s_per_task", lambda v: f"{v:,.1f}"),
                                               ("gpu_h_per_task", lambda v: f"{v:.3g}"), ("usd_per_task", BL.fmt_usd))))
    pools = ", ".join(f"{p.role.capitalize()} {p.gpus}x {p.gpu}" for p in result.pools)
    if not any(p.role == "strong" for p in result.pools):
        pools += (", " if pools else "") + "Strong a hosted API"
    t.caption = f"vs Strong-only: negative = less; {pools}"
    t.min_width = min(max(len(t.title), len(t.caption)), console.width)  # a narrow table keeps its title and caption on a line
    return t


def answer(result: PredictResult, console: Console) -> list[RenderableType]:
    """The answer in at most 24 lines of 80 columns (with the command's files line): the warnings about the inputs,
    every strategy per task with its change against Strong-only, SpecAgent's changes with their intervals and the
    verdict, the waits and the setting of the published comparison."""
    quality = result.quality.warnings() if result.quality else ()
    notes = (result.applies, *(f"warning: workload {result.name}: {w}" for w in quality),
             f"note: {result.unused_prices}" if result.unused_prices else "")
    iv, records = result.intervals, result.comparison.intervals
    head = BL.change_line(result.bottom_line, "specagent", iv=result.bottom_line_intervals, level=iv.level if iv else None)
    env = result.request.scenario.environment
    waits = environment_line(result.comparison.summary, env.preset, result.waits_recorded, short=True,
                             changed=None if env.recorded else env.describe())
    lines = (head, result.verdict, waits, records and records.get("published_setting_note"))
    # json/csv carry the notes in assumptions (acceptance_applies, data_quality, unused_prices)
    return [*(Text(n) for n in notes if n), answer_table(result, console), *(Text(x) for x in lines if x)]


def details(result: PredictResult, console: Console, *, phases: bool = False) -> list[RenderableType]:
    """Every table (--details): the bottom line with its ranges, the ratios with their intervals and the published
    figures, the phases (`phases`) and the assumptions."""
    comp, records, sc = result.comparison, result.comparison.intervals, result.request.scenario
    out: list[RenderableType] = [bottom_line_table(result.bottom_line, f"Bottom line per task — {result.n_trajectories:,} "
                                                   f"trajectories from {result.name}, batch 1", result.pools)]
    if result.bottom_line_intervals is not None and records is not None:
        out.append(ranges_table(result.bottom_line_intervals, records["level"], records["draws"], records["includes"], console))
    out.append(rel_table(comp.summary, f"Relative to Strong-only ({BL.ratio_in_words(comp.summary)}; lower is cheaper; "
                                       f"{comp.setting.weight_mode} weight reads, {sc.pricing_engine} engine)", console))
    out += ranges_tables(records, list(comp.summary.index), console) if records is not None else []
    out += phase_tables(comp) if phases else [Text("Phase tables (memory traffic, time and FLOPs by phase): add --phases.")]
    out.append(assumption_table(comp.assumptions, console))
    return out
