"""What a trajectory format is to specagent: the ``Importer`` base class and the options every import takes.

Why a class per format: each format recognises its files by content, says what it
gives and what it cannot know, and yields trajectories one at a time (a 100 MB log
is never held parsed beside the trace it becomes). A subclass provides:

* ``name`` — the ``--format`` value (lowercase, ``-`` between words);
* ``title`` — one line: what writes such files;
* ``spec`` — the public specification or repository the reader follows (cited in docs/traces.md);
* ``facts`` — ``FormatFacts``: what the format gives for tokens, latency, tool tags, reasoning and
  success, in words (the format table of docs/traces.md is generated from them);
* ``sniff(probe)`` — a ``Match`` when the probed file looks like this format (``score`` 1.0: certain;
  below 1.0: a near miss, named as the closest match when nothing matches), else None;
* ``read(path, options)`` — an iterator of ``Trajectory``: a record it cannot read raises a located
  ``TraceFormatError`` (the caller skips it under ``--skip-bad``: ``options.skip``); at least one
  trajectory per file, or ``NoTrajectoriesError``.

Conversions to the trace schema go through ``openai_chat.conversation_to_trajectory`` (chat-shaped
formats) or ``tau2.simulation_to_trajectory`` (τ²-Bench's and its forks'), so estimates, repairs,
tags and the data-quality marks are the same whatever the format.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import Repair, SkippedRecord, TraceFormatError, close_skips, report_skipped
from ..records import Record
from ..schema import Trajectory
from ..tool_tags import ToolTagger


@dataclass(frozen=True)
class FormatFacts:
    """What a format records, in words (one cell each of docs/traces.md's format table)."""

    tokens: str
    latency: str
    tags: str
    reasoning: str
    success: str


@dataclass(frozen=True)
class Match:
    """A sniffer's verdict: ``score`` 1.0 when the content is this format, below it for a near miss; ``why`` says what
    was seen (or, for a near miss, what is missing)."""

    score: float
    why: str


@dataclass
class Probe:
    """What the detector shows each sniffer: the path, its suffix, the first characters of its text, and its first
    JSON value (the whole document when the file is small enough, else the first JSONL record; None when neither
    parses)."""

    path: str
    suffix: str
    head: str
    first: Any = None
    whole: bool = False  # `first` is the whole document, not just its first line
    partial: bool = False  # the file was too big to parse whole: `head` is all a sniffer sees of a JSON document


@dataclass
class ImportOptions:
    """What every import takes: the tool tagger (user tags first), a domain for logs that do not name one, and what
    to do with a bad record (``skip_bad``: leave it out and report it in ``skipped``); ``repairs`` collects the
    explicit repairs (estimates kept where a recorded count could not be trusted)."""

    tagger: ToolTagger = field(default_factory=ToolTagger)
    domain: str | None = None
    skip_bad: bool = False
    skipped: list[SkippedRecord] | None = None
    repairs: list[Repair] | None = None
    #: (k, n): convert only records whose index is k modulo n (one of n workers of a parallel import; importers that
    #: support it say so with `Importer.shares`); None: every record
    share: tuple[int, int] | None = None
    index: int = -1  # the record being converted (set by an importer that supports shares)

    def mine(self, i: int) -> bool:
        """Whether record `i` is this reader's to convert (every record, unless this is one share of several)."""
        self.index = i
        return self.share is None or i % self.share[1] == self.share[0]

    def close(self, n: int, path: str, here: list[SkippedRecord], what: str) -> None:
        """The end of one file: its skips handed on, and (a whole file, not a share) an error when nothing came out."""
        if self.share is None:
            close_skips(n, path, here, self.skipped, what)
        elif self.skipped is not None:
            self.skipped.extend(here)

    def skip(self, error: TraceFormatError, here: list[SkippedRecord]) -> None:
        """A bad record: raised, or (``skip_bad``) reported into `here`."""
        if not self.skip_bad:
            raise error
        report_skipped(error, here)


class Importer:
    """One trajectory format (see the module docstring for what a subclass provides)."""

    name: ClassVar[str]
    title: ClassVar[str]
    spec: ClassVar[str]
    facts: ClassVar[FormatFacts]
    #: `read` honours `options.share` (a big file of it is imported on several cores: importers/parallel.py)
    shares: ClassVar[bool] = False

    def sniff(self, probe: Probe) -> Match | None:
        raise NotImplementedError

    def read(self, path: str | os.PathLike, options: ImportOptions) -> Iterator[Trajectory]:
        raise NotImplementedError

    def read_records(self, path: str | os.PathLike, options: ImportOptions) -> Iterator[Record]:
        """What `read` yields, as the trace file's lines (records.py): each model dumped, unless the format has a
        faster way to the same bytes."""
        return map(Record.of, self.read(path, options))
