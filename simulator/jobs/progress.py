"""A job's progress as a reader sees it: a stage at a time, a line per step done and a heartbeat while a step is slow.

`Stages` turns a job's `Step` reports (base.py) into one counter per stage that states its total, which is what the
command line draws as a bar; `printed()` is the same with plain lines, for a Python caller (a notebook, a script's log,
CI) that wants to see a long job move without the CLI: ``run(request, progress=printed())``. The lines carry the time
so far and, with `status`, what is going on inside a slow step (requests answered, retries).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TextIO

from specagent.simulator.jobs.base import Step

#: Seconds between two plain progress lines when nothing finished in between (a heartbeat, with the status).
HEARTBEAT_S = 30.0
#: Fewest seconds between two plain lines for steps done (the last step is always told).
MIN_GAP_S = 2.0

#: a stage's counter: given (total, what), a context manager whose value is `advance(k)`
Counter = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


class PlainLines:
    """A stage's progress as plain lines on `stream` (stderr): a line per step done (at most one per `MIN_GAP_S`; the
    last always), and one every `heartbeat_s` while none is (from a thread of its own), each with the time so far and
    `status()`."""

    def __init__(self, total: int, what: str, status: Callable[[], str] | None = None, heartbeat_s: float = HEARTBEAT_S,
                 stream: TextIO | None = None) -> None:
        self.total, self.what, self.status, self.heartbeat_s = total, what, status, heartbeat_s
        self.stream = stream
        self.t0 = time.monotonic()
        self.done = 0
        self.last = -MIN_GAP_S  # when the last line was printed
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True, name="progress-heartbeat")

    def __enter__(self) -> Callable[[int], None]:
        self.thread.start()
        return self.advance

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=1.0)

    def line(self) -> None:
        self.last = time.monotonic()
        s = int(self.last - self.t0)
        extra = f" · {self.status()}" if self.status is not None else ""
        print(f"{self.what} {self.done}/{self.total} · {s // 60}m{s % 60:02d}s{extra}", file=self.stream or sys.stderr,
              flush=True)

    def beat(self) -> None:
        while not self.stop.wait(self.heartbeat_s):
            with self.lock:
                self.line()

    def advance(self, k: int) -> None:
        with self.lock:
            self.done += k
            if self.done >= self.total or time.monotonic() - self.last >= MIN_GAP_S:
                self.line()


class Stages:
    """A job's `progress` callback: a counter (`counter(total, what)`) per stage that states its total (a step of a new
    `what`, e.g. each load level of `bench serve`, closes the last one; a job tells a stage's 0 of its total as it
    starts it), advanced as `done` grows; stages without a total show nothing. A context manager: leaving it closes
    the open counter (`close()` does too, before printing between stages)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.what: str | None = None
        self.open: Any = None
        self.advance: Callable[[int], None] | None = None
        self.seen = 0

    def __call__(self, step: Step) -> None:
        if step.what != self.what:
            self.close()
            self.what, self.seen = step.what, 0
            if step.total:
                self.open = self.counter(int(step.total), step.what)
                self.advance = self.open.__enter__()
        done = int(step.done)
        if self.advance is not None and done > self.seen:
            self.advance(done - self.seen)
            self.seen = done

    def close(self) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
        self.open, self.what, self.advance = None, None, None

    def __enter__(self) -> "Stages":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def printed(status: Callable[[], str] | None = None, heartbeat_s: float = HEARTBEAT_S, stream: TextIO | None = None) -> Stages:
    """Plain progress lines for a Python caller (stderr by default): ``with printed() as p: run(request, p)``."""
    return Stages(lambda total, what: PlainLines(total, what, status, heartbeat_s, stream))
