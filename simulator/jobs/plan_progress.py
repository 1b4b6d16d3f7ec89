"""The plan job's live lines inside each search: the searches' Heartbeats, told at least every HEARTBEAT_S seconds.

Why: a search can take minutes (issue #34: nothing was printed for up to 10 minutes between
finished searches). Searches run in worker processes, so each sends its beats to a
`FileHeartbeat` folder; a thread here reads it on its own clock and tells one line per
running search (to the job's progress: the CLI prints it, a notebook may too): the candidate
being measured, the candidates tried, the best percentile so far, how long it has run, and
the plan's time left against the estimate's range.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from specagent.simulator.jobs.plan_estimate import PlanEstimate, duration
from specagent.simulator.jobs.plan_search import Heartbeat, pairing

#: The longest the printer stays silent while a search runs (the issue's bound is 10 s).
HEARTBEAT_S = 8.0


class FileHeartbeat:
    """A Heartbeat sink that pickles to worker processes: each search's latest beat is one small JSON file in `folder`
    (written whole, then renamed), which the caller reads on its own clock."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, beat: Heartbeat) -> None:
        name = os.path.join(self.folder, hashlib.sha256(repr(beat.key).encode()).hexdigest()[:16] + ".json")
        tmp = f"{name}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({**dataclasses.asdict(beat), "key": list(beat.key)}, f)
        os.replace(tmp, name)

    def read(self) -> list[Heartbeat]:
        """Every search's latest beat (a file being replaced is skipped this time)."""
        out = []
        for n in sorted(os.listdir(self.folder)):
            if n.endswith(".json"):
                try:
                    with open(os.path.join(self.folder, n), encoding="utf-8") as f:
                        d = json.load(f)
                except (OSError, ValueError):
                    continue
                out.append(Heartbeat(**{**d, "key": tuple(d["key"])}))
        return out


def beat_line(b: Heartbeat, metric: str, now: float) -> str:
    """One running search, in words."""
    strat, wg, sg, rate = b.key
    where = f"{strat} {pairing(Path(wg).stem, Path(sg).stem, strat)} at {rate:,.4g}/s"
    if b.stage == "pilot":
        what = "uncontended pilot (the best any fleet can do)"
    else:
        cand = " + ".join(f"{n:,} {name}" for n, name in ((b.weak_replicas, "Weak"), (b.strong_replicas, "Strong")) if n)
        what = f"{b.stage}: candidate {cand or 'fleet'}"
    best = f"{metric} so far {b.best_s:,.1f} s" if isinstance(b.best_s, float) and math.isfinite(b.best_s) else f"no {metric} yet"
    return f"  {where}: {what}, {b.tried} tried, {best}, {duration(now - b.started)} in"


class HeartbeatPrinter:
    """Tells `say` the running searches' beats every HEARTBEAT_S seconds (a context manager: a daemon thread)."""

    def __init__(self, say: Callable[[str], None], metric: str, estimate: PlanEstimate | None, every: float | None = None):
        self._say, self._metric, self._estimate = say, metric, estimate
        self._every = HEARTBEAT_S if every is None else every
        self._dir = tempfile.TemporaryDirectory(prefix="specagent-plan-")
        self.sink = FileHeartbeat(self._dir.name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="specagent-plan-heartbeat")
        self._t0 = time.time()

    def __enter__(self) -> "HeartbeatPrinter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self._every)
        self._dir.cleanup()

    def left(self, now: float) -> str:
        """The plan's time left against the estimate's range ('' without one)."""
        if self._estimate is None:
            return ""
        spent = now - self._t0
        lo, hi = self._estimate.low_s - spent, self._estimate.high_s - spent
        if hi <= 0:
            return f"; past the estimate's high end ({duration(self._estimate.high_s)})"
        return f"; plan time left {duration(max(lo, 0))} to {duration(hi)} (estimate)"

    def lines(self, now: float) -> list[str]:
        running = [b for b in self.sink.read() if b.stage != "done"]
        return [beat_line(b, self._metric, now) + (self.left(now) if i == len(running) - 1 else "")
                for i, b in enumerate(running)]

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            for line in self.lines(time.time()):
                self._say(line)
