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
from typing import TYPE_CHECKING, Any

from specagent.common.paths import check_input_file
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report

if TYPE_CHECKING:  # the importers load when the job runs: `traces stats` and the other `traces` commands import this
    from specagent.traces.errors import Repair, SkippedRecord
    from specagent.traces.quality import DataQuality


#: the format names `traces import FORMAT FILE...` took before detection (kept: scripts use them)
FORMAT_ALIASES = {"openai": "openai-chat"}
SKIP_HELP = "Leave out malformed records and report each one, instead of stopping at the first."
TAGS_HELP = ("JSON tool-tag map ({tool: READ|WRITE|GENERIC|THINK} or {domain: {...}}): the first source of a tool's tag, "
             "before the benchmark's own (τ²-Bench, VitaBench) and MCP annotations. A tool no source tags is held as a "
             "WRITE and named (docs/traces.md#tool-tags).")


def _canonical(fmt: str) -> str:
    return FORMAT_ALIASES.get(fmt, fmt)


@dataclass(frozen=True)
class ImportRequest(Request):
    """Logs to import (a leading format name, as `traces import FORMAT FILE...` takes it, names their format), their
    format (None: found from each file's content), whether to leave out bad records, a tag file, a domain for logs
    naming none, and how many processes may convert a big file (0: one per core)."""

    files: tuple[Path, ...] = field(default=(), metadata={
        "argument": True, "required": True, "metavar": "[FORMAT] FILE...",
        "help": "Agent logs: τ²-Bench/VitaBench results, τ-bench runs, OpenAI chat logs, BFCL multi-turn results, "
                "MCP-Atlas CSV, … (`specagent traces formats`). The format is found from each file's content; a leading "
                "FORMAT (or --format) names it instead."})
    skip_bad: bool = field(default=False, metadata={"help": SKIP_HELP})
    tags: Path | None = field(default=None, metadata={"help": TAGS_HELP})
    format: str | None = field(default=None, metadata={
        "help": "Read every file as this format instead of detecting it (`traces formats`)."})
    domain: str | None = field(default=None, metadata={
        "help": "Domain for logs that name none (τ²-Bench's domains take their tool tags). Default: the log's own, else "
                "the benchmark domain whose tools it calls."})
    workers: int = field(default=0, metadata={"min": 0, "help": "Processes that convert a big file (0: one per core; a "
                                                                 "file under 4 MB, or a format without shares, uses one)."})

    def split(self) -> tuple[str | None, tuple[str, ...]]:
        """The format (`format`, or a first file that names a format and no file; aliases resolved) and the logs."""
        from specagent.traces.importers import IMPORTERS

        names = {i.name for i in IMPORTERS} | set(FORMAT_ALIASES)
        fmt, files = self.format, tuple(str(f) for f in self.files)
        if fmt is not None and _canonical(fmt).lower().replace("_", "-") not in names:
            raise JobError(f"expected one of {', '.join(sorted(names))}, got {fmt!r}", "format")
        if files and files[0] in names and not Path(files[0]).exists():
            if fmt is not None and _canonical(files[0]) != _canonical(fmt):
                raise JobError(f"the format is given twice: '{files[0]}' and `format` {fmt}")
            fmt, files = files[0], files[1:]
        return (_canonical(fmt) if fmt is not None else None), files

    def check(self) -> None:
        from specagent.simulator.parallel import MAX_WORKERS

        fmt, files = self.split()
        if not files:
            raise JobError("give at least one input file (an agent log: `specagent traces formats` lists what is read)")
        for f in files:  # a FIFO, folder or symlink loop named as one, before any importer opens it
            check_input_file(f, JobError, "agent log")
        seen: dict[tuple[int, int], str] = {}
        for f in files:  # the same file twice (by another name too) would import every task twice, unsaid
            st = os.stat(f)
            if (st.st_dev, st.st_ino) in seen:
                raise JobError(f"{f}: the same file as {seen[st.st_dev, st.st_ino]}, given twice (its tasks would "
                               "be counted twice)", "files")
            seen[st.st_dev, st.st_ino] = f
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
    from specagent.common.alloc import paused_gc
    from specagent.traces.importers import ImportOptions, by_name, detect
    from specagent.traces.importers.parallel import import_file, worth_it
    from specagent.traces.io import JSONL_SUFFIXES, write_jsonl_bytes, write_jsonl_lines, write_trajectories
    from specagent.traces.quality import QualityTally
    from specagent.traces.records import masked
    from specagent.traces.tool_tags import ToolTagger

    request.check()
    out = Path(out)
    options = ImportOptions(ToolTagger(user=request.tags), request.domain, request.skip_bad, [], [])
    workers = request.workers or os.cpu_count() or 1
    tally = QualityTally()
    formats: list[tuple[str, str]] = []
    fmt, paths = request.split()
    chosen = [by_name(fmt) if fmt else detect(p) for p in paths]
    parallel = out.suffix.lower() != ".parquet" and all(worth_it([p], imp.shares, workers) for p, imp in zip(paths, chosen))

    def lines() -> Iterator[tuple[bytes, int]]:  # a parallel import: the workers' lines, as bytes
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
            yield from map(tally.add, map(masked, imp.read(p, options)))  # no key copied from a log's ids (records.py)

    def records() -> Iterator[tuple[str, int]]:  # a JSONL trace in one process: the lines, no model where none is needed
        for k, (p, imp) in enumerate(zip(paths, chosen)):
            report(progress, f"importing {Path(p).name} ({imp.name})", k, len(paths))
            formats.append((p, imp.name))
            for rec in imp.read_records(p, options):
                tally.add_record(rec)
                yield rec.line, rec.steps

    # an import builds millions of small acyclic objects (decoded records, step dicts): the cyclic collector's passes
    # over them cost about a tenth of the import's CPU (docs/benchmarks.md, import_scale); reference counting frees them
    with paused_gc():
        if parallel:
            n, steps = write_jsonl_bytes(lines(), out)
        elif out.suffix.lower() in JSONL_SUFFIXES:
            n, steps = write_jsonl_lines(records(), out)
        else:
            n, steps = write_trajectories(trajectories(), out)
    return ImportResult(request, out, n, steps, formats, tally.result(), options.skipped or [], options.repairs or [])
