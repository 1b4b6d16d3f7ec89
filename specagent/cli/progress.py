"""Progress for long runs, on stderr: a rich bar on a terminal, plain lines elsewhere (a log, `| tee`, CI), none with --json.

Why plain lines off a terminal: a run of several minutes under `2>&1 | tee log` otherwise printed nothing after
its estimate. `status` (optional) says what is going on inside a step — requests answered, retries — so a bar
that waits on a slow position still shows the run moving. The plain lines, their heartbeat and the stage logic are
the jobs layer's (simulator/jobs/progress.py), so a Python caller gets them too; this module adds the bars.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from specagent.simulator.jobs.progress import HEARTBEAT_S, PlainLines, Stages


def _status_column(status: Callable[[], str]):
    """A column showing `status()`, re-rendered on every refresh, so it follows the run."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class _Status(ProgressColumn):
        def render(self, task) -> Text:
            return Text(status(), style="dim")

    return _Status()


@contextmanager
def progress_bar(total: int, what: str, show: bool = True, status: Callable[[], str] | None = None,
                 plain: bool = False, heartbeat_s: float = HEARTBEAT_S) -> Iterator[Callable[[int], None]]:
    """Yields `advance(k)`. On a terminal a bar (with `status` beside it); elsewhere, with `plain` (the runs against
    servers, whose steps take seconds), a line per step done (at most one per `MIN_GAP_S`) and one every `heartbeat_s`
    while none is; nothing when `show` is false."""
    if not show:  # nothing shown: no bar built, and rich.progress (with rich.table) stays off --json's start-up
        yield lambda k: None
        return
    from rich.console import Console

    err = Console(stderr=True)
    if plain and not err.is_terminal:
        with PlainLines(total, what, status, heartbeat_s) as advance:
            yield advance
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    cols = [TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    if status is not None:
        cols.append(_status_column(status))
    with Progress(*cols, console=err, transient=True) as p:
        task = p.add_task(what, total=total)
        yield lambda k: p.advance(task, k)


@contextmanager
def spinner(what: str, show: bool = True, err: Any = None) -> Iterator[Callable[[Any], None]]:
    """A transient line on stderr (`err`: a rich Console; a plain one by default) whose text follows a job's steps (a
    bar once a step says its total): for jobs whose stages are of unknown length (predicting, calibrating, a live run).
    Nothing, and no rich, with `show` false. Off a terminal it draws nothing (a plain Console ends with one empty line)."""
    if not show:
        yield lambda step: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn

    with Progress(SpinnerColumn(), *Progress.get_default_columns(), console=err or Console(stderr=True), transient=True) as prog:
        task = prog.add_task(what, total=None)

        def told(step: Any) -> None:
            prog.update(task, description=step.what, **({"completed": step.done, "total": step.total} if step.total else {}))

        yield told


def job_progress(show: bool = True, plain: bool = False, status: Callable[[], str] | None = None) -> Stages:
    """A job's `progress` callback drawn as `progress_bar` draws a count: a bar per stage that states its total, with
    `status` beside it (jobs.progress.Stages); nothing with `show` false. A context manager: the open bar closes when
    the job ends."""
    return Stages(lambda total, what: progress_bar(total, what, show=show, status=status, plain=plain))
