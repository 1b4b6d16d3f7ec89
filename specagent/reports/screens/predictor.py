"""What `specagent predictor validate` prints: the verdict-token predictor's Strong share of memory reads against the
simulator's accounting, per workload, strategy and weight-read mode, and its largest error.

Reads a `PredictorValidateResult` (`simulator/jobs/predictor_validate.py`): every figure is a column of its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, RenderableType

from specagent.reports.screens.tables import Col, fitted

if TYPE_CHECKING:
    from specagent.simulator.jobs.predictor_validate import PredictorValidateResult

#: The validation table's columns (tables.py): |err| = the absolute error of the share; below 80 columns the
#: per-trajectory error leaves first.
COLUMNS = (Col("workload", "left"), Col("strategy", "left"), Col("weight\nmode", "left"), Col("predicted"), Col("accounted"),
           Col("|err|"), Col("mean |err|\nper traj", optional=True))


def validation(res: PredictorValidateResult, console: Console) -> list[RenderableType]:
    """The table, then the largest absolute error of the share per weight mode."""
    rows = []
    for _, r in res.table.iterrows():
        name = f"{r['workload']} (protocol log)" if r["source"].startswith("protocol log") else r["workload"]
        rows.append([name, r["strategy"], r["weight_mode"], f"{r['predicted_strong_share']:.4f}", f"{r['accounted_strong_share']:.4f}",
                     f"{r['abs_error']:.4f}", f"{r['mean_abs_error_per_trajectory']:.4f}"])
    return [fitted(console, COLUMNS, rows, title="Verdict-token predictor: Strong share of memory reads (both models)",
                   caption="|err| = |predicted - accounted|", left_out="--json has them"),
            "largest absolute error of the share: " + ", ".join(f"{m} {v:.4f}" for m, v in res.worst().items())]
