"""The trace-statistics job: a trace file's steps per task, read/write/reply mix, tokens per kind, latencies and success,
and how much of it was measured (traces/stats.py, traces/quality.py). `traces stats` prints its Result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specagent.simulator.jobs.base import JobError, Progress, Request, Result, read_trace
from specagent.simulator.jobs.import_traces import SKIP_HELP

if TYPE_CHECKING:
    from specagent.traces.errors import SkippedRecord
    from specagent.traces.quality import DataQuality

@dataclass(frozen=True)
class StatsRequest(Request):
    """A trace file (.jsonl or .parquet, as `traces import` writes it) and whether to leave out bad records."""

    file: Path | None = field(default=None, metadata={"argument": True, "required": True,
                                                      "help": "Trace file (.jsonl or .parquet)."})
    skip_bad: bool = field(default=False, metadata={"help": SKIP_HELP})

    def check(self) -> None:
        if self.file is None:
            raise JobError("a trace file is required", "file")


@dataclass
class StatsResult(Result):
    """Every statistic (`traces.stats.trace_stats`), the data-quality summary, and the records left out."""

    request: StatsRequest
    stats: dict[str, Any]
    quality: DataQuality
    skipped: list[SkippedRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.stats, "data_quality": self.quality.to_dict()}

    def write(self, folder: str | Path) -> list[Path]:
        from specagent.common import atomic

        return [atomic.write_json(Path(folder) / "stats.json", self.to_dict())]


def run(request: StatsRequest, progress: Progress | None = None) -> StatsResult:
    """Read the trace (its bytes told to `progress`) and summarise it; a bad record is a TraceFormatError naming it."""
    from specagent.traces.quality import data_quality
    from specagent.traces.stats import trace_stats

    request.check()
    skipped: list[SkippedRecord] = []
    trajs = read_trace(Path(request.file), progress, request.skip_bad, skipped)  # type: ignore[arg-type]
    return StatsResult(request, trace_stats(trajs), data_quality(trajs), skipped)
