"""What `specagent bench compare` prints: a `replay` prediction beside a measurement, figure by figure, and its `--json`.

The rows and notes are `reports/serve_compare.compare`'s (the reading and the arithmetic: the signed relative error
(predicted − measured) / measured); this module only lays them out, 70 columns wide, and prints nothing. (`bench
serve`'s own level summary is vLLM's layout, `endpoints.bench.format_summary`.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from specagent.reports.serve_compare import Row

#: Figures that count things, written without decimals; the rest are rates and milliseconds, two decimals.
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")


def value(v: float | None, key: str) -> str:
    """One side's figure, or a dash where that side lacks it."""
    if v is None:
        return "-"
    return f"{v:.0f}" if key in COUNTS else f"{v:.2f}"


def compare_lines(rows: Sequence[Row], notes: Sequence[str], paths: tuple[Path, Path]) -> list[str]:
    """The side-by-side table, 70 columns wide, then the notes (the caller wraps them to the terminal)."""
    out = [f"predicted: {paths[0]}", f"measured:  {paths[1]}",
           f"{'figure':<34} {'predicted':>12} {'measured':>12} {'error':>8}"]
    for r in rows:
        e = "n/a" if r.error is None else f"{100 * r.error:+.1f}%"
        out.append(f"{r.label:<34} {value(r.predicted, r.key):>12} {value(r.measured, r.key):>12} {e:>8}")
    out.append("error: (predicted - measured) / measured")
    return out + [f"note: {n}" for n in notes]


def compare_record(rows: Sequence[Row], notes: Sequence[str], paths: tuple[Path, Path]) -> dict[str, Any]:
    """`bench compare --json`: both files, the notes, and each figure with both sides and the error."""
    return {"predicted": str(paths[0]), "measured": str(paths[1]), "notes": list(notes),
            "rows": [{"key": r.key, "figure": r.label, "predicted": r.predicted, "measured": r.measured, "error": r.error}
                     for r in rows]}
