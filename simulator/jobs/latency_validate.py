"""The latency validation (`specagent latency validate`): predicted vs measured for every describable row of the
serving measurements; MAPE per GPU, engine, model class and target class, held out by default.

With `holdout` each row is predicted by a fit that never saw its source (leave-one-source-out; `hold_out =
"concurrency"` leaves one load level out instead, for one server's own CSV), so the MAPE is a held-out error. The
validation is costmodel/latency_validation.py; the rows and parameters are read as the fit reads them
(`latency_fit.LatencyDataRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.simulator.jobs.base import JobError, Progress, Result, report
from specagent.simulator.jobs.latency_fit import LatencyDataRequest

#: What a held-out fit may leave out.
HOLD_OUT = ("source", "concurrency")


@dataclass(frozen=True)
class LatencyValidateRequest(LatencyDataRequest):
    """The measurements to validate on, held out how."""

    holdout: bool = field(default=True, metadata={"help": "Leave-one-source-out refits (default), or the shipped engine profiles "
                                                          "as they are."})
    worst: int = field(default=10, metadata={"min": 0, "help": "How many of the worst rows to list."})
    hold_out: str = field(default="source", metadata={"help": "What each held-out fit leaves out: 'source' (one publication) or "
                                                              "'concurrency' (one load level: for one server's own CSV from `bench serve`)."})
    workers: int = field(default=0, metadata={"help": "Processes running the held-out fits (0: one per CPU); the answers do not "
                                                      "depend on it."})

    def check(self) -> None:
        from specagent.simulator.parallel import MAX_WORKERS

        if self.hold_out not in HOLD_OUT:
            raise JobError(f"expected source or concurrency, got {self.hold_out!r}", "hold_out")
        if not 0 <= self.workers <= MAX_WORKERS:
            raise JobError(f"expected a whole number in [0, {MAX_WORKERS:,}], got {self.workers}", "workers")
        if self.worst < 0:
            raise JobError(f"expected a count >= 0, got {self.worst}", "worst")
        super().check()


@dataclass
class LatencyValidateResult(Result):
    """The validation (`validation`: every row's prediction and the MAPEs), and the summary `to_dict` reports."""

    request: LatencyValidateRequest
    path: Path
    rows: list
    targets: list
    skipped: list
    validation: Any  # costmodel.latency_validation.Validation
    kernel_fit: Any
    table: list[dict[str, Any]] = field(default_factory=list)  # every row: measured, predicted, error

    @property
    def kind(self) -> str:
        """How the predictions were made, in words."""
        return (f"held out (leave one {self.request.hold_out} out)" if self.request.holdout
                else "in sample (shipped engine profiles)")

    @property
    def pair_tolerance(self) -> float:
        """How far a same-source pair's predicted per-token ratio may miss the measured one (`PAIR_TOLERANCE`)."""
        from specagent.costmodel.latency_validation import PAIR_TOLERANCE

        return PAIR_TOLERANCE

    @property
    def target_classes(self) -> tuple[str, ...]:
        """The load classes with a MAPE target (`TARGETS`), in their order."""
        from specagent.costmodel.latency_validation import TARGETS

        return tuple(TARGETS)

    def skipped_by_reason(self) -> list[tuple[str, list[str]]]:
        """(reason, row ids) for every exclusion reason, most rows first (`latency_targets.skipped_by_reason`)."""
        from specagent.costmodel.latency_targets import skipped_by_reason

        return skipped_by_reason(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        val = self.validation
        return {
            "dataset": str(self.path), "rows": len(self.rows), "figures": len(self.targets),
            "skipped": [dict(row_id=s.row.row_id, reason=s.reason) for s in self.skipped],
            "predictions": self.kind, "targets": val.targets_met(),
            "mape": {k: val.mape(k) for k in ("load_class", "metric", "gpu", "engine", "model_class", "source")},
            "worst": sorted(self.table, key=lambda r: -abs(r["error"]))[:self.request.worst],
            "source_offsets": val.source_offsets(),
            "slices": val.slices(),
            "model_pairs": val.model_pairs(),
            "default_pair": val.pair_slice(),
            "fit": ({p.name: float(v) for p, v in zip(val.full_fit.params, val.full_fit.values)} if val.full_fit else None),
            "moe_kernels": self.kernel_fit.summary(),
        }

    def write(self, folder: str | Path) -> list[Path]:
        """Every row's prediction as CSV at `folder` (a file)."""
        import pandas as pd

        from specagent.common import atomic

        path = Path(folder)
        atomic.atomic_write(path, lambda t: pd.DataFrame(self.table).to_csv(t, index=False))
        return [path]


def run(request: LatencyValidateRequest, progress: Progress | None = None) -> LatencyValidateResult:
    """Load the rows, then predict each (held out: by a fit without its source or load level) and score the MAPEs."""
    from specagent.costmodel.latency_validation import validate
    from specagent.simulator.parallel import default_workers, job_runner

    request.check()
    path, rows, targets, skipped = request.load(by_concurrency=request.hold_out == "concurrency")
    params, kfit = request.params(targets)
    procs = request.workers or default_workers()
    val = validate(targets, skipped, held_out=request.holdout, params=params, progress=lambda m: report(progress, m),
                   shares=procs, run=job_runner(procs))
    return LatencyValidateResult(request, Path(path), rows, targets, skipped, val, kfit, val.rows())
