"""Independent jobs on a local process pool or on Ray, results in submission order.

Why: capacity searches (one per strategy, GPU pairing and rate) are independent and each
takes seconds to minutes; they are pure functions of their arguments (every draw seeded),
so they can run anywhere and still give the same rows, in the same order.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from typing import Any, Callable, Sequence

BACKENDS = ("local", "ray")


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], backend: str = "local", workers: int = 1,
             address: str | None = None, on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
    """fn(*job) for every job; `workers` > 1 runs them in processes (local) or Ray tasks (ray)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got '{backend}'")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out: list[Any] = [None] * len(jobs)

    def done(i: int, value: Any) -> None:
        out[i] = value
        if on_done is not None:
            on_done(i, value)

    if backend == "ray":
        _run_ray(fn, jobs, workers, address, done)
    elif workers == 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            done(i, fn(*job))
    else:
        with cf.ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            futs = {ex.submit(fn, *job): i for i, job in enumerate(jobs)}
            try:
                for f in cf.as_completed(futs):
                    done(futs[f], f.result())
            except BaseException:
                for f in futs:
                    f.cancel()
                raise
    return out


def _run_ray(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, address: str | None,
             done: Callable[[int, Any], None]) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("the ray backend needs Ray: pip install 'specagent[ray]' (ray[default])") from exc
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(fn)
        refs = {remote.remote(*job): i for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                done(refs[r], ray.get(r))
    finally:
        if started and not address:
            ray.shutdown()
