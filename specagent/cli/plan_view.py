"""`specagent plan` at the terminal: its progress on stderr (live lines in place on a terminal), and the screens of
reports/screens/plan.py (the answer last; every search's block before it with --details) printed with the files line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from rich.console import RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from specagent.cli.console import SafeConsole
from specagent.reports.screens import plan as screen
from specagent.simulator.jobs.base import Step
from specagent.simulator.jobs.plan import PlanResult

console = SafeConsole()


class StatusBar(Progress):
    """A progress bar with one status line under it (`status`), redrawn in place with it."""

    status = ""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        if self.status:
            yield Text(self.status, no_wrap=True, overflow="ellipsis")


class PlanLines:
    """plan's progress on stderr: the lines the job tells, and on a terminal one bar naming the running searches (the
    first the pool started, and how many more) with the latest live line under it, in place (transient: gone when the
    plan ends, so it never buries the answer); off a terminal each finished search's line with the pace so far, and the
    live lines as a log."""

    def __init__(self, err: SafeConsole | None = None) -> None:
        self.err = err if err is not None else SafeConsole(stderr=True)
        # one line at 80 columns: the first search running and how many more are left
        self.bar = StatusBar(TextColumn("{task.description}"), BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
                             TextColumn("ETA"), TimeRemainingColumn(), console=self.err, transient=True,
                             disable=not self.err.is_terminal)
        self.searches: TaskID | None = None
        self.reading: TaskID | None = None

    def __enter__(self) -> "PlanLines":
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, step: Step) -> None:
        kind, running = getattr(step, "kind", "say"), getattr(step, "running", ())
        described = running[0] + (f" +{len(running) - 1}" if len(running) > 1 else "") if running else "done"
        handle: dict[str, Callable[[], None]] = {
            "read": lambda: self._read(step), "start": lambda: self._start(step, described),
            "search": lambda: self._search(step, described), "live": lambda: self._live(step.what),
            "say": lambda: self.err.print(step.what, highlight=False, markup=False)}
        handle.get(kind, handle["say"])()
        if kind != "read" and self.reading is not None:
            self.bar.remove_task(self.reading)
            self.reading = None

    def _read(self, step: Step) -> None:  # the workload file, as it is read
        if self.reading is None:
            self.reading = self.bar.add_task(step.what, total=step.total)
        self.bar.update(self.reading, completed=step.done)

    def _start(self, step: Step, described: str) -> None:
        self.searches = self.bar.add_task(described, total=step.total, completed=step.done)

    def _search(self, step: Step, described: str) -> None:
        if self.searches is not None:
            self.bar.update(self.searches, completed=step.done, description=described)
        if not self.err.is_terminal:  # a log, not a bar: the ETA in words, from the pace of the searches run so far
            self.err.print(step.what, highlight=False, markup=False)

    def _live(self, line: str) -> None:
        """A live line inside a search: in place under the bar on a terminal (replaced within seconds), else a log line."""
        if self.err.is_terminal:
            self.bar.status = line.strip()
        else:
            self.err.print(line, highlight=False, markup=False)


def show(res: PlanResult, *, details: bool, out: Path | None, images: str) -> None:
    """The plan for people: with `details` every search's block first, then the answer."""
    for part in (*(screen.details(res) if details else ()), *screen.answer(res, console, screen.files_line(out, images, details))):
        console.print(part)

