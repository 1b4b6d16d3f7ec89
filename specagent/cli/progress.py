"""Progress for long runs, on stderr: a rich bar on a terminal, plain lines elsewhere (a log, `| tee`, CI), none with --json.

Why plain lines off a terminal: a run of several minutes under `2>&1 | tee log` otherwise printed nothing after
its estimate. `status` (optional) says what is going on inside a step — requests answered, retries — so a bar
that waits on a slow position still shows the run moving.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specagent.simulator.jobs.base import Step

#: Seconds between two plain progress lines when nothing finished in between (a heartbeat, with the status).
HEARTBEAT_S = 30.0
#: Fewest seconds between two plain lines for steps done (the last step is always told).
MIN_GAP_S = 2.0


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
        with _lines(total, what, status, heartbeat_s) as advance:
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
def _lines(total: int, what: str, status: Callable[[], str] | None, heartbeat_s: float) -> Iterator[Callable[[int], None]]:
    t0 = time.monotonic()
    done = [0]
    last = [-MIN_GAP_S]
    lock = threading.Lock()
    stop = threading.Event()

    def line() -> None:
        last[0] = time.monotonic()
        s = int(last[0] - t0)
        extra = f" · {status()}" if status is not None else ""
        print(f"{what} {done[0]}/{total} · {s // 60}m{s % 60:02d}s{extra}", file=sys.stderr, flush=True)

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            with lock:
                line()

    def advance(k: int) -> None:
        with lock:
            done[0] += k
            if done[0] >= total or time.monotonic() - last[0] >= MIN_GAP_S:
                line()

    t = threading.Thread(target=beat, daemon=True, name="progress-heartbeat")
    t.start()
    try:
        yield advance
    finally:
        stop.set()
        t.join(timeout=1.0)


@contextmanager
def job_progress(show: bool = True) -> Iterator[Callable[[Step], None]]:
    """A job's `progress` callback (simulator.jobs.base.Step) drawn as `progress_bar` draws a count: a bar for each
    stage that states its total (a new `what` closes the last one), advanced as `done` grows; stages without a total
    draw nothing. With `show` false it draws nothing at all."""
    with ExitStack() as stack:
        state: dict = {"what": None, "done": 0.0, "advance": None}

        def on_step(step: Step) -> None:
            if not show:
                return
            if step.what != state["what"]:
                stack.close()
                state.update(what=step.what, done=0.0, advance=None)
                if step.total:
                    state["advance"] = stack.enter_context(progress_bar(int(step.total), step.what))
            if state["advance"] is not None and step.done > state["done"]:
                state["advance"](int(step.done) - int(state["done"]))
                state["done"] = step.done

        yield on_step
