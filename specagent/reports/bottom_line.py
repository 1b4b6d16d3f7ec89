"""How the bottom line of a prediction is written for people: seconds, GPU-hours and dollars per task, ranges,
the headline sentence (the figures themselves: simulator/jobs/bottom_line.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from specagent.common.lazy_import import lazy_module
from specagent.simulator.jobs.bottom_line import SAVINGS

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


def fmt_range(col: str, low: float, high: float) -> str:
    """`[49–77]` in the cell's own units (dollars with their sign), for a bottom-line cell."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    if col == "usd_per_task":
        return f"[{fmt_usd(low)}–{high:.2g}]" if 0 < abs(high) < 1 else f"[{fmt_usd(low)}–{fmt_usd(high)}]"
    if col == "gpu_h_per_task":
        return f"[{low:.2g}–{high:.2g}]"
    if col.endswith("%"):
        return f"[{low:.0f} to {high:.0f}]"
    return f"[{low:,.0f}–{high:,.0f}]" if max(abs(low), abs(high)) >= 10 else f"[{low:.2g}–{high:.2g}]"


def percent_of_baseline(value: float) -> str:
    """0.923 -> '92.3% of Strong-only'; how every ratio reads in words."""
    return f"{100 * value:.1f}% of Strong-only"


def fmt_change(point: float, low: float | None = None, high: float | None = None) -> str:
    """A change against the baseline in percent, with its interval where known: `-13.0% [-29.9% to +2.2%]`
    (negative: less time, fewer GPU-hours, fewer dollars than the baseline; the one sign convention of every view)."""
    if not math.isfinite(point):
        return "—"
    rng = f" [{low:+.1f}% to {high:+.1f}%]" if low is not None and high is not None and math.isfinite(low) and math.isfinite(high) else ""
    return f"{point:+.1f}%{rng}"


def changes(line: pd.DataFrame, strategy: str, baseline: str = "strongonly", iv: pd.DataFrame | None = None) -> dict[str, str]:
    """The strategy's change against the baseline in time, GPU-hours and dollars per task, each with its interval (the
    negated saving of `bottom_line_intervals`, where `iv` has one)."""
    a, b = line.loc[strategy], line.loc[baseline]
    saving = {} if iv is None else {r.column: (r.low, r.high) for r in iv.itertuples() if r.strategy == strategy}
    out = {}
    for col, label in SAVINGS:
        x, y = float(a[col]), float(b[col])
        if not (y and math.isfinite(x) and math.isfinite(y)):
            out[col] = "—"
            continue
        r = saving.get(label)
        out[col] = fmt_change(100 * (x / y - 1), *((-r[1], -r[0]) if r else (None, None)))
    return out


def change_line(line: pd.DataFrame, strategy: str = "specagent", baseline: str = "strongonly",
                iv: pd.DataFrame | None = None, level: float | None = None) -> str | None:
    """The strategy's changes against the baseline per task, each with its interval: the first screen's sentence."""
    if strategy not in line.index or baseline not in line.index:
        return None
    ch = changes(line, strategy, baseline, iv)
    head = f"{strategy} vs {baseline}" + (f", {level:.0%} intervals" if iv is not None and level else "")
    return (f"{head}: time {ch['wall_s_per_task']}; GPU·h {ch['gpu_h_per_task']}; $ {ch['usd_per_task']}")


def headline(line: pd.DataFrame, strategy: str = "specagent", baseline: str = "strongonly",
             iv: pd.DataFrame | None = None) -> str | None:
    """One sentence: the strategy against the baseline in s/task, GPU-h/task and $/task, with the change in percent
    (and its interval, the negated saving, where `iv` from `bottom_line_intervals` has one)."""
    if strategy not in line.index or baseline not in line.index:
        return None
    a, b = line.loc[strategy], line.loc[baseline]
    ch = changes(line, strategy, baseline, iv)
    parts = [f"{fmt_seconds(a['wall_s_per_task'])}/task vs {fmt_seconds(b['wall_s_per_task'])} ({ch['wall_s_per_task']})",
             f"{fmt_gpu_hours(a['gpu_h_per_task'])}/task vs {fmt_gpu_hours(b['gpu_h_per_task'])} ({ch['gpu_h_per_task']})",
             f"{fmt_usd(a['usd_per_task'])}/task vs {fmt_usd(b['usd_per_task'])} ({ch['usd_per_task']})"]
    return f"{strategy} vs {baseline}: " + "; ".join(parts)


def ratio_in_words(summary: pd.DataFrame) -> str:
    """How to read a ratio, on this run's own headline figure: 'specagent wall 0.870 = 87.0% of Strong-only'."""
    others = [s for s in summary.index if s != "strongonly"]
    strat = "specagent" if "specagent" in summary.index else (others[0] if others else "strongonly")
    v = float(summary.loc[strat, "wall_time_s_rel"])
    return f"{strat} wall {v:.3f} = {percent_of_baseline(v)}"


def waits_share(summary: pd.DataFrame) -> float | None:
    """Strong-only's tool and user waits as a share of its wall time in this run (None without the totals)."""
    if "strongonly" not in summary.index or not {"env_wall_time_s", "wall_time_s"} <= set(summary.columns):
        return None
    wall = float(summary.loc["strongonly", "wall_time_s"])
    return float(summary.loc["strongonly", "env_wall_time_s"]) / wall if wall > 0 else None


def fmt_seconds(s: float) -> str:
    """Human seconds: 0.18 ms, 12.3 s, 4.2 min, 1.5 h."""
    if not math.isfinite(s):
        return "—"
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if a < 1:
        return f"{s * 1e3:.3g} ms"
    if a < 600:
        return f"{s:,.1f} s"
    if a < 36_000:
        return f"{s / 60:,.1f} min"
    return f"{s / 3600:,.1f} h"


def fmt_gpu_hours(h: float) -> str:
    return "—" if not math.isfinite(h) else f"{h:.3g} GPU·h"


def fmt_usd(v: float) -> str:
    """Dollars with enough digits for a cost per task: $0.0124, $1.23, $1,234."""
    if not math.isfinite(v):
        return "unpriced"
    if v == 0:
        return "$0"
    if abs(v) >= 100:
        return f"${v:,.0f}"
    return f"${v:.3g}" if abs(v) < 1 else f"${v:,.2f}"


def fmt_cell(col: str, v: float) -> str:
    """A COLUMNS cell at terminal width: the unit is in the header, so figures are bare except dollars."""
    if col == "usd_per_task":
        return fmt_usd(v)
    if not math.isfinite(v):
        return "—"
    return f"{v:,.1f}" if abs(v) >= 0.05 or v == 0 else f"{v:.2g}"
