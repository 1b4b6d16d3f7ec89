"""The published protocol figures (Wang et al., arXiv:2610.21463) as data: one row per figure, each a [low, high] range.

They are the only public measurements of the protocol itself, so they are what
`specagent acceptance calibrate` holds the acceptance and verdict model to. This module
only reads and checks `protocol_figures.csv` (bottom layer, beside the serving rows); the
mapping from a row's `metric` to a simulated quantity lives in `simulator/jobs/acceptance_candidates.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specagent.measurements import MeasurementError, default_path, read_rows

PROTOCOL_COLUMNS = (
    "row_id", "benchmark", "setting", "strategy", "metric", "low", "high", "unit", "relative_to", "source",
    "source_locator", "retrieved", "notes",
)
#: Settings a figure is measured in: `h20` = the default scenario (the publication's H20 setting), `edge` = the edge–cloud scenario.
PROTOCOL_SETTINGS = ("h20", "edge")
#: What a row may measure. Ratios and shares are dimensionless; the quality metrics are recorded
#: for completeness, but the simulator models no quality, so calibration reports them as not modelled.
PROTOCOL_METRICS = (
    "bytes_ratio", "strong_bytes_share", "weak_bytes_share", "predictor_abs_error", "flops_ratio", "strong_calls_ratio",
    "wall_ratio", "strong_decode_ratio", "api_cost_ratio", "ridge_flop_per_byte",
    "success_delta_points", "pass_at_1", "gap_closed", "success_percent",
)
#: The ratio metrics and the per-trajectory total each divides by its baseline's (`total_bytes_read` of the
#: strategy over Strong-only's); a summary's ratio column is that total's name + `_rel`.
RATIO_TOTALS = {"bytes_ratio": "total_bytes_read", "flops_ratio": "total_flops", "strong_calls_ratio": "strong_calls",
                "wall_ratio": "wall_time_s", "strong_decode_ratio": "strong_decode_tokens", "api_cost_ratio": "api_usd"}
_REQUIRED = ("row_id", "benchmark", "setting", "metric", "low", "high", "unit", "source", "source_locator")


@dataclass(frozen=True)
class ProtocolFigure:
    """One published figure: `metric` of `strategy` relative to `relative_to`, in [low, high] (high may be inf)."""

    figure_id: str
    benchmark: str
    setting: str
    strategy: str
    metric: str
    low: float
    high: float
    unit: str
    relative_to: str
    source: str
    source_locator: str
    retrieved: str
    notes: str
    line: int = 0

    def contains(self, value: float) -> bool:
        """Whether a value meets the published range (NaN never does)."""
        return bool(self.low <= value <= self.high)

    def miss(self, value: float) -> float:
        """How far `value` lies outside the range, relative to the nearer bound (0 inside; inf for NaN)."""
        if not math.isfinite(value):
            return math.inf
        if value < self.low:
            return (self.low - value) / max(abs(self.low), 1e-12)
        if value > self.high:
            return (value - self.high) / max(abs(self.high), 1e-12)
        return 0.0

    def range_text(self) -> str:
        if self.low == self.high:
            return f"{self.low:g}"
        if math.isinf(self.high):
            return f">= {self.low:g}"
        return f"{self.low:g}–{self.high:g}"


def _bound(text: str, where: str, allow_inf: bool) -> float:
    t = text.strip().lower()
    if allow_inf and t in ("inf", "+inf"):
        return math.inf
    try:
        v = float(t)
    except ValueError:
        raise MeasurementError(f"{where}: expected a number{' or inf' if allow_inf else ''}, got {text!r}") from None
    if not math.isfinite(v):
        raise MeasurementError(f"{where}: expected a finite number{' (or inf)' if allow_inf else ''}, got {text!r}")
    return v


def load_protocol_figures(path: str | Path | None = None) -> list[ProtocolFigure]:
    """Rows of `protocol_figures.csv`, validated: known setting and metric, low <= high, a source on every row."""
    p = Path(path) if path else default_path("protocol_figures.csv")
    out: list[ProtocolFigure] = []
    for line, where, raw in read_rows(p, PROTOCOL_COLUMNS, _REQUIRED):
        setting, metric = raw["setting"].strip(), raw["metric"].strip()
        if setting not in PROTOCOL_SETTINGS:
            raise MeasurementError(f"{where}: field 'setting': expected one of {', '.join(PROTOCOL_SETTINGS)}, got {setting!r}")
        if metric not in PROTOCOL_METRICS:
            raise MeasurementError(f"{where}: field 'metric': expected one of {', '.join(PROTOCOL_METRICS)}, got {metric!r}")
        low = _bound(raw["low"], f"{where}: field 'low'", allow_inf=False)
        high = _bound(raw["high"], f"{where}: field 'high'", allow_inf=True)
        if low > high:
            raise MeasurementError(f"{where}: field 'high' ({high:g}) is below 'low' ({low:g})")
        out.append(ProtocolFigure(
            figure_id=raw["row_id"].strip(), benchmark=raw["benchmark"].strip(), setting=setting,
            strategy=raw["strategy"].strip(), metric=metric, low=low, high=high, unit=raw["unit"].strip(),
            relative_to=raw["relative_to"].strip(), source=raw["source"].strip(), source_locator=raw["source_locator"].strip(),
            retrieved=raw["retrieved"].strip(), notes=raw["notes"].strip(), line=line,
        ))
    if not out:
        raise MeasurementError(f"{p}: no figures (expected one row per published figure)")
    return out
