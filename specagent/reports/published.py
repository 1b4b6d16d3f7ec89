"""The publication's figures against a run, in the words the terminal and the report share.

Why one module: the terminal (`specagent predict`, reports/screens/ranges.py) and the HTML report printed the same
comparison with different columns and verdicts (a report row said "yes: a calibration target" where the
terminal said "outside (interval too)"). Both now format an interval with `fmt_interval` and judge a
figure with `verdict`, from the same numbers: the predict job's stored `intervals` (summary.json).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

#: What each verdict means, said once under every table that prints one.
VERDICTS = ("'inside': the point estimate lies in the published range; 'outside (interval too)': the whole interval "
            "misses it; 'outside; interval overlaps': the point misses it but the interval reaches it; 'fitted': the "
            "acceptance was calibrated to meet that figure, so it is a fit, not a validation")
#: The mark after an interval stretched to reach its point estimate, and what it means.
STRETCHED_MARK = "*"
STRETCHED = "* stretched to reach the point estimate, which lies in the draws' tail"


def bracket(low: str, high: str) -> str:
    """`[222–260]`: the one range notation of every view (terminal, report, plan), an en dash between the bounds, so a
    hyphen is never read as a minus sign beside a point estimate."""
    return f"[{low}–{high}]"


def fmt_interval(point: float, low: float, high: float) -> str:
    """`0.877 [0.70–1.01]`: the point to three decimals, the interval to two, except a bound that rounds past the printed
    point (an interval stretched to reach it, `5.197` with low 5.197), which keeps three so the point reads inside it."""
    p = round(point, 3)
    lo = f"{low:.2f}" if round(low, 2) <= p or not math.isfinite(low) else f"{low:.3f}"
    hi = f"{high:.2f}" if round(high, 2) >= p or not math.isfinite(high) else f"{high:.3f}"
    return f"{point:.3f} {bracket(lo, hi)}"


def verdict(low: float | None, high: float | None, point: float, lo: float, hi: float, fitted: bool = False) -> str:
    """The point estimate and its interval [lo, hi] against the published range [low, high] (None: open)."""
    a = -math.inf if low is None else float(low)
    b = math.inf if high is None else float(high)
    if a <= point <= b:
        return "inside (fitted: a calibration target)" if fitted else "inside"
    if hi < a or lo > b:
        return "outside (interval too)"
    return "outside; interval overlaps"


def interval_of(iv: Mapping[str, Any], strategy: str, metric: str) -> tuple[float, float, float] | None:
    """(point, low, high) of one ratio from the stored intervals, or None where the run has none."""
    for r in iv.get("intervals") or []:
        if r.get("strategy") == strategy and r.get("metric") == metric and r.get("point") is not None:
            return float(r["point"]), float(r["low"]), float(r["high"])
    return None


def stretched(iv: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(strategy, metric) of every interval stretched to reach its point estimate."""
    return {(str(w.get("strategy")), str(w.get("metric"))) for w in iv.get("widened") or [] if isinstance(w, Mapping)}


def published_rows(iv: Mapping[str, Any], metric_names: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One row per published figure the run was compared with: figure, strategy, ratio, published, predicted [interval]
    and the verdict, as the terminal prints them (an empty list where the run's setting is not the publication's)."""
    names = dict(metric_names or {})
    wide = stretched(iv)
    rows = []
    for p in iv.get("published") or []:
        strategy, metric = str(p.get("strategy")), str(p.get("metric"))
        got = interval_of(iv, strategy, metric)
        base, _, other = metric.partition("_vs_")  # a '-vs-' figure is relative to another strategy (SpecAgent)
        ratio = names.get(base, base) + (f" vs {other}" if other else "")
        row = {"figure": str(p.get("figure_id", "")), "strategy": strategy, "ratio": ratio,
               "published": str(p.get("published", ""))}
        if got is None:
            row.update({"predicted [interval]": "not run", "verdict": "-"})
        else:
            mark = STRETCHED_MARK if (strategy, metric) in wide else ""
            row.update({"predicted [interval]": fmt_interval(*got) + mark,
                        "verdict": verdict(p.get("low"), p.get("high"), *got, fitted=bool(p.get("fitted")))})
        rows.append(row)
    return rows
