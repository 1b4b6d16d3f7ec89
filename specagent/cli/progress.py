"""Progress bars for long runs: rich, on stderr, only when a person is watching (a terminal, not --json)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


@contextmanager
def progress_bar(total: int, what: str, show: bool = True) -> Iterator[Callable[[int], None]]:
    """Yields `advance(k)`; draws nothing when `show` is false or stderr is not a terminal (pipes, CI, tests)."""
    err = Console(stderr=True)
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=err, transient=True, disable=not (show and err.is_terminal)) as p:
        task = p.add_task(what, total=total)
        yield lambda k: p.advance(task, k)
