"""The trace-import job: agent logs of any format read into the trace schema, and how much of them was measured.

Each file's format is found from its content (traces/importers/: the registry), or named. The trajectories stream from
the log to the trace file (a window of the log and one record in memory); a big file of a format whose reader can
convert a share of its records is converted on several cores (traces/importers/parallel.py), with the same bytes.
The result carries the data-quality summary (traces/quality.py) that `traces import` prints and `predict` repeats.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.common.paths import check_input_file
from specagent.simulator.parallel import MAX_WORKERS
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.traces.errors import Repair, SkippedRecord
from specagent.traces.importers import IMPORTERS, ImportOptions, by_name, detect
from specagent.traces.importers.parallel import import_file, worth_it
from specagent.traces.io import JSONL_SUFFIXES, write_jsonl_lines, write_trajectories
from specagent.traces.quality import DataQuality, QualityTally
from specagent.traces.tool_tags import ToolTagger


@dataclass(frozen=True)
class ImportRequest(Request):
    """Logs to import, their format (None: found from each file's content), a tag file, a domain for logs naming
    none, whether to leave out bad records, and how many processes may convert a big file (0: one per core)."""

    files: tuple[str, ...] = field(default=(), metadata={"cli": False})
    format: str | None = field(default=None, metadata={"cli": False})
    tags: Path | None = field(default=None, metadata={"cli": False})
    domain: str | None = field(default=None, metadata={"cli": False})
    skip_bad: bool = field(default=False, metadata={"cli": False})
    workers: int = field(default=0, metadata={"cli": False})

    def check(self) -> None:
        if not self.files:
            raise JobError("give at least one agent log", "files")
        if self.format is not None:
            try:
                by_name(self.format)
            except ValueError:
                raise JobError(f"expected one of {', '.join(i.name for i in IMPORTERS)}, got {self.format!r}", "format") from None
        for f in self.files:  # a FIFO, folder or symlink loop named as one, before any importer opens it
            check_input_file(f, JobError, "agent log")
        if not 0 <= self.workers <= MAX_WORKERS:
            raise JobError(f"expected a number of processes in [0, {MAX_WORKERS:,}] (0: one per core), got {self.workers}",
                           "workers")


@dataclass
class ImportResult(Result):
    """Where the trace was written, how much it holds, each file's format, the data-quality summary, and every record
    left out or repaired."""

    request: ImportRequest
    out: Path
    trajectories: int
    steps: int
    formats: list[tuple[str, str]]
    quality: DataQuality
    skipped: list[SkippedRecord] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "trajectories": self.trajectories, "steps": self.steps, "formats": dict(self.formats),
                "quality": self.quality.to_dict(), "skipped": [str(s) for s in self.skipped],
                "repairs": [str(r) for r in self.repairs]}

    def write(self, folder: str | Path) -> list[Path]:
        return [self.out]  # written as the trajectories streamed in (`run`)


def run(request: ImportRequest, progress: Progress | None = None, out: str | Path = "trace.jsonl") -> ImportResult:
    """Import the request's files into `out` (.jsonl or .parquet), atomically."""
    request.check()
    out = Path(out)
    options = ImportOptions(ToolTagger(user=request.tags), request.domain, request.skip_bad, [], [])
    workers = request.workers or os.cpu_count() or 1
    tally = QualityTally()
    formats: list[tuple[str, str]] = []
    paths = [str(p) for p in request.files]
    chosen = [by_name(request.format) if request.format else detect(p) for p in paths]
    parallel = out.suffix.lower() != ".parquet" and all(worth_it([p], imp.shares, workers) for p, imp in zip(paths, chosen))

    def lines() -> Iterator[tuple[str, int]]:
        for k, (p, imp) in enumerate(zip(paths, chosen)):
            report(progress, f"importing {Path(p).name} ({imp.name})", k, len(paths))
            formats.append((p, imp.name))
            got, part = import_file(imp.name, p, options, workers)
            tally.merge(part)
            yield from got

    def trajectories() -> Iterator[Any]:
        for k, (p, imp) in enumerate(zip(paths, chosen)):
            report(progress, f"importing {Path(p).name} ({imp.name})", k, len(paths))
            formats.append((p, imp.name))
            yield from map(tally.add, imp.read(p, options))

    def records() -> Iterator[tuple[str, int]]:  # a JSONL trace in one process: the lines, no model where none is needed
        for k, (p, imp) in enumerate(zip(paths, chosen)):
            report(progress, f"importing {Path(p).name} ({imp.name})", k, len(paths))
            formats.append((p, imp.name))
            for rec in imp.read_records(p, options):
                tally.add_record(rec)
                yield rec.line, rec.steps

    if parallel:
        n, steps = write_jsonl_lines(lines(), out)
    elif out.suffix.lower() in JSONL_SUFFIXES:
        n, steps = write_jsonl_lines(records(), out)
    else:
        n, steps = write_trajectories(trajectories(), out)
    return ImportResult(request, out, n, steps, formats, tally.result(), options.skipped or [], options.repairs or [])
