"""The importer registry: every agent-trajectory format specagent reads, and the one entry point that detects them.

Reading guide: ``base.py`` says what a format provides (``Importer``); each other module is one format;
``IMPORTERS`` lists them, most specific first (a file two formats could read goes to the first).
``detect(path)`` probes a file's content (never its name alone) and returns its importer, or raises an error
naming every format it checked and the closest match; ``iter_import(paths, ...)`` yields each file's
trajectories one at a time, so an import streams from the log to the trace file.

Adding a format: a module with an ``Importer`` subclass, one line in ``IMPORTERS``, fixtures shaped after its
public schema in tests/fixtures/trajectories/, tests in tests/test_traces_importers.py, a row in
docs/traces.md (the format table there is checked against ``IMPORTERS``): four touch points.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from .. import files
from ..errors import TraceFormatError
from ..schema import Trajectory
from .base import FormatFacts, ImportOptions, Importer, Match, Probe
from .atif import ATIF
from .bfcl import BFCLMultiTurn
from .mcp_atlas import MCPAtlasCSV
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .otel_genai import OTelGenAI
from .tau2 import Tau2Results
from .tau_bench import TauBench

#: Every format, most specific first.
IMPORTERS: tuple[Importer, ...] = (Tau2Results(), TauBench(), BFCLMultiTurn(), MCPAtlasCSV(), ATIF(), OTelGenAI(),
                                   OpenAIResponses(), OpenAIChat())

#: Bytes of a file every sniffer sees as text; a file up to WHOLE_BYTES is also parsed whole for them.
HEAD_BYTES = 1 << 18
WHOLE_BYTES = 8 << 20

__all__ = ["IMPORTERS", "FormatFacts", "ImportOptions", "Importer", "Match", "Probe", "by_name", "detect", "iter_import",
           "probe_file"]


def by_name(name: str) -> Importer:
    """The importer called `name` (``--format``); an error listing the names otherwise."""
    for imp in IMPORTERS:
        if imp.name == name.lower().replace("_", "-"):
            return imp
    raise TraceFormatError("--format", "option", "--format", f"one of {', '.join(i.name for i in IMPORTERS)}", name)


def probe_file(path: str | os.PathLike) -> Probe:
    """What the sniffers see of a file: its head as text, and its first JSON value where one parses."""
    p = files.check_input_path(path, "an agent log")
    size = p.stat().st_size
    with open(p, "rb") as fh:
        raw = fh.read(WHOLE_BYTES if size <= WHOLE_BYTES else HEAD_BYTES)
    if raw.startswith(files.PARQUET_MAGIC):
        return Probe(str(p), p.suffix.lower(), "", None)
    head = raw[:HEAD_BYTES].decode("utf-8", errors="ignore").removeprefix("\ufeff")
    first, whole = None, False
    if size <= WHOLE_BYTES:
        text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
        try:
            first, whole = json.loads(text), True
        except (ValueError, RecursionError):
            first = files.first_json_record(text)
        return Probe(str(p), p.suffix.lower(), head, first, whole)
    line = head.split("\n", 1)[0]
    try:
        first = json.loads(line)
    except (ValueError, RecursionError):
        first = None
    return Probe(str(p), p.suffix.lower(), head, first, partial=first is None)


def detect(path: str | os.PathLike) -> Importer:
    """The format of a file, by content: the first importer whose sniffer is certain; else an error naming every
    format checked and the closest match."""
    probe = probe_file(path)
    if files.kind_of(probe.first) == "trace":
        raise TraceFormatError(str(path), "file", "<format>", "an agent log to import", found=(
            "a specagent trace already: pass it to `traces stats`, `predict --trace` or `simulate --trace`"))
    near: list[tuple[float, Importer, Match]] = []
    for imp in IMPORTERS:
        m = imp.sniff(probe)
        if m is None:
            continue
        if m.score >= 1.0:
            return imp
        near.append((m.score, imp, m))
    if not probe.head.strip() and probe.first is None:
        found = "a Parquet file or no text" if Path(path).stat().st_size else "an empty file"
    else:
        found = "none of them"
    closest = ""
    if near:
        score, imp, m = max(near, key=lambda t: t[0])
        closest = f"; closest: {imp.name} ({m.why})"
    raise TraceFormatError(str(path), "file", "<format>",
                           f"an agent log in a format specagent reads (checked: {', '.join(i.name for i in IMPORTERS)})",
                           found=found + closest + "; pass --format NAME to read it as one of them")


def iter_import(paths: Iterable[str | os.PathLike], options: ImportOptions, fmt: str | None = None
                ) -> Iterator[tuple[str, Importer, Iterator[Trajectory]]]:
    """(path, its importer, its trajectories) for each file: the named format, or the one `detect` finds."""
    forced = by_name(fmt) if fmt else None
    for p in paths:
        imp = forced or detect(p)
        yield str(p), imp, imp.read(p, options)
