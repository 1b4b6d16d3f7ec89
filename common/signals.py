"""SIGTERM handled as ^C: what `timeout`, CI runners, schedulers and `kill` send is not a reason to lose a run's results.

Why: Python turns SIGINT into KeyboardInterrupt, and the commands that run long (bench serve, replay, plan) catch it
to keep what finished and leave no partial file; SIGTERM's default action kills the process at once, so the same
run stopped by a scheduler lost every measured request and left temp files behind. Inside `sigterm_as_interrupt`,
SIGTERM raises `Terminated`, a KeyboardInterrupt, in the main thread: every handler written for ^C runs as it does
for ^C. Only the main thread can install a handler; elsewhere (a command run in a test's thread) this does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The exit status of a process ended by SIGTERM (128 + 15), as a shell reports it.
EXIT_SIGTERM = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where ^C would be: `by` names it for the notes ('SIGTERM')."""

    by = "SIGTERM"


def interrupted_by(exc: BaseException) -> str:
    """'SIGTERM' for a `Terminated`, '^C' for any other KeyboardInterrupt."""
    return getattr(exc, "by", "^C")


def exit_code(exc: BaseException) -> int:
    """143 after SIGTERM, 130 after ^C: what a shell would report had the signal killed the process."""
    return EXIT_SIGTERM if isinstance(exc, Terminated) else 130


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated` in the main thread; the previous handler is restored on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise Terminated()

    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
