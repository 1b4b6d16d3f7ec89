"""Tables of every ratio with its interval, and the publication's ranges beside them (`predict`).

The published figures are Wang et al.'s (CITATION); they are compared only where this run's setting is the one the
acceptance was calibrated on (`simulator.applicability`), and the figures that were calibration targets say "fitted".

Self-contained so `predict`'s layout (owned elsewhere) needs one call: `ranges_tables(comp, intervals)`.
The intervals come from `simulator.uncertainty.ratio_intervals`; this module only formats them.
"""

from __future__ import annotations

import math

from rich.table import Table

from specagent.simulator.applicability import applies, evaluated_differences, evaluated_note
from specagent.simulator.run import Comparison
from specagent.simulator.uncertainty import Intervals, published_for

#: How every table cites the published protocol figures (never a file users do not have).
CITATION = ("Wang et al., Trajectory-Level Speculation with Semantic Verification for Tool-Using Agents, "
            "arXiv:2610.21463")
SHORT_CITATION = "Wang et al., arXiv:2610.21463"


def calibration_targets(comp: Comparison) -> set[str]:
    """Figure ids the scenario's acceptance was calibrated to meet: every scored figure of its setting, when the
    acceptance records a calibration setting (a fitted or user-given acceptance has none)."""
    from specagent.measurements.protocol_figures import load_protocol_figures
    from specagent.simulator.jobs.acceptance_candidates import figure_status

    sc = comp.scenario
    if sc is None or not getattr(sc.acceptance, "calibrated_on", None):
        return set()
    return {f.figure_id for f in load_protocol_figures() if figure_status(f) == "scored"}


def comparable(comp: Comparison) -> bool:
    """The published figures apply to this run: its setting is the one the acceptance was calibrated on, and (τ²) the
    publication's evaluated setting (`--scenario wang2026-tau2`: `applicability.evaluated_differences`)."""
    return comp.scenario is None or (applies(comp.scenario) and not evaluated_differences(comp.scenario))


def setting_note(comp: Comparison) -> str | None:
    """Which setting the published comparison uses, when this run is not it (`applicability.evaluated_note`)."""
    return None if comp.scenario is None or not applies(comp.scenario) else evaluated_note(comp.scenario)

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


def fmt_interval(point: float, low: float, high: float) -> str:
    """`0.92 [0.88–0.97]`."""
    return f"{point:.3f} [{low:.2f}–{high:.2f}]"


def _verdict(pub, point: float, low: float, high: float, fitted: bool = False) -> str:
    if pub.contains(point):
        return "inside (fitted: a calibration target)" if fitted else "inside"
    if high < pub.low or low > pub.high:
        return "outside (interval too)"
    return "outside; interval overlaps"


def ranges_tables(comp: Comparison, iv: Intervals, focus: str = "specagent") -> list[Table]:
    """SpecAgent's ratios with intervals and published ranges; the other strategies' intervals; the published figures
    against this run (only where the setting matches the calibration's)."""
    pub = published_for(comp) if comparable(comp) else {}
    targets = calibration_targets(comp)
    tables = []
    origin = iv.source.split(":", 1)[0]
    what = f"{iv.level:.0%} intervals: {iv.n_draws} seeded draws of {iv.includes()} (acceptance from {origin})"

    def stretched(strategies) -> str:
        w = [f"{s} {m}" for s, m in iv.widened if s in strategies]
        return (f"; {len(w)} stretched to reach the point estimate, which lies in the draws' tail "
                f"({', '.join(w[:3])}{', …' if len(w) > 3 else ''})") if w else ""

    if focus in comp.summary.index:
        t = Table(title=f"{focus}: every ratio with its range", show_edge=False)
        for col in ("ratio", "predicted [interval]", f"published ({SHORT_CITATION})" if pub else "published"):
            t.add_column(col, justify="left" if col == "ratio" else "right")
        for metric, head, _ in SHOWN:
            got = iv.get(focus, metric)
            if got is None:
                continue
            p = pub.get((focus, metric))
            t.add_row(head, fmt_interval(*got), p.text() if p else "-")
        t.caption = what + stretched({focus}) + " (see the assumptions). S share = the Strong model's share of its memory traffic"
        note = setting_note(comp)
        if note:
            t.caption += ". " + note
        elif pub:
            t.caption += ". Published figures compared in the publication's evaluated setting (this run's)"
        tables.append(t)
    others = [s for s in comp.summary.index if s not in (focus, "strongonly")]
    cols = [(m, h) for m, h, _ in SHOWN if any(iv.get(s, m) is not None for s in others)][:COMPACT]
    if others and cols:
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
        t.caption = f"{iv.level:.0%} intervals, same draws for every strategy" + stretched(set(others))
        tables.append(t)
    if pub:
        t = Table(title=f"published protocol figures ({SHORT_CITATION}) against this run", show_edge=False)
        for col in ("figure", "published", "predicted [interval]", "verdict"):
            t.add_column(col, justify="left" if col in ("figure", "verdict") else "right", overflow="fold")
        for (strategy, metric), p in pub.items():
            got = iv.get(strategy, metric)
            if got is None:
                t.add_row(p.figure_id, p.text(), "not run", "-")
                continue
            t.add_row(p.figure_id, p.text(), fmt_interval(*got), _verdict(p, *got, fitted=p.figure_id in targets))
        t.caption = (f"figures: {CITATION}, transcribed in measurements/protocol_figures.csv (aggregates over models or "
                     "benchmarks; '-vs-' figures are relative to SpecAgent). 'inside': the point estimate lies in the "
                     "published range; 'fitted': the acceptance was calibrated to meet that figure, so it is a fit, "
                     "not a validation")
        tables.append(t)
    return tables


def intervals_records(iv: Intervals, comp: Comparison) -> dict:
    """What summary.json stores: every interval, and every published range with the matching prediction."""
    pub = published_for(comp) if comparable(comp) else {}
    targets = calibration_targets(comp)
    return {
        "draws": iv.n_draws, "level": iv.level, "source": iv.source, "sources": list(iv.sources), "includes": iv.includes(),
        "widened": [{"strategy": s, "metric": m} for s, m in iv.widened],
        "ranges": [{"parameter": p, "range": r, "source": src} for p, r, src in iv.ranges],
        "intervals": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                      for r in iv.table.to_dict(orient="records")],
        "published": [{"figure_id": p.figure_id, "strategy": s, "metric": m, "figure": p.figure, "published": p.text(),
                       "low": None if math.isinf(p.low) else p.low, "high": None if math.isinf(p.high) else p.high,
                       "source": CITATION, "source_locator": f"measurements/protocol_figures.csv, row {p.figure_id}", "fitted": p.figure_id in targets}
                      for (s, m), p in pub.items()],
        "published_compared": comparable(comp),
        "published_setting_note": setting_note(comp),
    }
