"""Independent jobs on a local process pool or on Ray, results in submission order.

Why: capacity searches (one per strategy, GPU pairing and rate) are independent and each
takes seconds to minutes; they are pure functions of their arguments (every draw seeded),
so they can run anywhere and still give the same rows, in the same order.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Sequence

BACKENDS = ("local", "ray")
#: Most processes a --workers flag takes: a guard against a typo, not a limit of the method.
MAX_WORKERS = 1024


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], backend: str = "local", workers: int = 1,
             address: str | None = None, on_done: Callable[[int, Any], None] | None = None,
             isolate: bool = False) -> list[Any]:
    """fn(*job) for every job; `workers` > 1 runs them in processes (local) or Ray tasks (ray).

    `on_done(i, result)` is called as each job finishes (in completion order), so a caller can keep every finished
    result even when a later job fails or the run is interrupted (^C): the local pool then reports the jobs already
    finished and stops its workers at once rather than after the queued jobs.
    `isolate` runs even one job on one worker in a process, so the caller's threads keep running beside it (the
    compiled fleet engine holds the GIL for as long as it simulates: a thread in the same process would wait).
    """
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
    elif (workers == 1 or len(jobs) <= 1) and not isolate:
        for i, job in enumerate(jobs):
            done(i, fn(*job))
    else:
        _run_pool(fn, jobs, max(1, min(workers, len(jobs))), done)
    return out


def job_runner(workers: int) -> Callable[[Callable[..., Any], Sequence[tuple], Callable[[int, Any], None]], list[Any]]:
    """`run_jobs` on a local pool of `workers` processes, in the shape a lower layer that cannot import this one takes
    (costmodel.latency_validation.JobRunner: fn, jobs, on_done)."""
    return lambda fn, jobs, on_done: run_jobs(fn, jobs, workers=workers, on_done=on_done)


def _run_pool(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, done: Callable[[int, Any], None]) -> None:
    """The jobs on a process pool, each reported as it finishes; on any exception (^C included) the finished ones are
    still reported and the workers stopped at once, not after the queued jobs have run."""
    ex = cf.ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(os.getpid(),))
    futs: dict[cf.Future, int] = {}
    reported: set[int] = set()
    try:
        futs = {ex.submit(fn, *job): i for i, job in enumerate(jobs)}
        for f in cf.as_completed(futs):
            done(futs[f], f.result())
            reported.add(futs[f])
    except BaseException:
        _stop_now(ex)
        for f, i in futs.items():
            if i not in reported and f.done() and not f.cancelled() and f.exception() is None:
                done(i, f.result())
                reported.add(i)
        raise
    ex.shutdown(wait=True)


def _stop_now(ex: cf.ProcessPoolExecutor) -> None:
    """Cancel the queued jobs and kill the running ones (shutdown alone would run every queued job first)."""
    kill = getattr(ex, "kill_workers", None)  # Python >= 3.14
    procs = list((getattr(ex, "_processes", None) or {}).values())  # before shutdown, which drops the list
    ex.shutdown(wait=False, cancel_futures=True)
    if kill is not None:  # pragma: no cover
        kill()
        return
    for p in procs:
        p.kill()
    for p in procs:
        p.join(timeout=5)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _worker_init(driver: int) -> None:
    """In each worker: leave ^C to the driver, and die with the driver.

    Linux: prctl(PR_SET_PDEATHSIG, SIGKILL) makes the kernel kill the worker the moment its
    parent exits, SIGKILL included, with no polling and no thread; a worker whose driver
    died before that call exits at once. Elsewhere on POSIX (no such prctl) a daemon thread
    checks every half second that the driver still exists. Without either, a SIGKILLed
    driver would leave its workers blocked on the task pipe for ever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _die_with_parent():
        if os.getppid() != driver and not _alive(driver):  # not the driver's child (forkserver) or already orphaned
            os._exit(1)
    elif os.name == "posix":  # pragma: no cover - not Linux
        threading.Thread(target=_watch_driver, args=(driver,), daemon=True, name="specagent-driver-watch").start()


def _die_with_parent() -> bool:
    if not sys.platform.startswith("linux"):
        return False  # pragma: no cover
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def _watch_driver(driver: int) -> None:  # pragma: no cover - not Linux
    while _alive(driver):
        time.sleep(0.5)
    os._exit(1)


#: How long the address probe waits for a Ray head to accept a connection.
RAY_PROBE_S = 5.0


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address (`host:port` or Ray Client's `ray://host:port`); None for `auto`.

    Raises ValueError naming what was expected, so a typo is one line before any work starts.
    """
    a = address.strip()
    if a == "auto":
        return None
    rest = a[len("ray://"):] if a.startswith("ray://") else a
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in rest:
        raise ValueError(f"Ray cluster address '{address}': expected HOST:PORT (the address `ray start --head` prints), "
                         "ray://HOST:PORT (Ray Client) or auto")
    return host, int(port)


def connect_ray(address: str, probe_s: float = RAY_PROBE_S) -> None:
    """ray.init on an existing cluster, failing in one line (never a minute of retries) when nothing is there.

    Why the probe: ray.init retries an unreachable head for about a minute, printing a warning per second.
    Why RAY_AUTH_MODE: a driver joining a cluster uses the token `ray start` wrote (~/.ray/auth_token) only when
    token mode is on in its own environment; without it the connect fails as "Authentication token is missing".
    """
    import socket

    endpoint = ray_endpoint(address)
    if endpoint is not None:
        try:
            socket.create_connection(endpoint, timeout=probe_s).close()
        except OSError as exc:
            raise RuntimeError(f"Ray cluster {address}: nothing answers at {endpoint[0]}:{endpoint[1]} within {probe_s:g} s "
                               f"({exc.strerror or exc}); start one with `ray start --head` and pass the address it prints") from None
    token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
        os.path.exists(os.path.expanduser("~/.ray/auth_token"))
    if "RAY_AUTH_MODE" not in os.environ and token:
        os.environ["RAY_AUTH_MODE"] = "token"  # read when Ray's config loads: before its first import
        if "ray" in sys.modules:  # imported already (a caller's own Ray): reload its config as `ray start` does
            try:
                from ray._raylet import Config

                Config.initialize("")
            except ImportError:  # pragma: no cover - another Ray layout; the connect below then says what failed
                pass
    import ray

    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError or its own AuthenticationError
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise RuntimeError(f"Ray cluster {address}: could not join it ({first})") from None


def _run_ray(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, address: str | None,
             done: Callable[[int, Any], None]) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("the ray backend needs Ray: pip install 'specagent[ray]' (ray[default])") from exc
    started = False
    if not ray.is_initialized():
        if address:
            connect_ray(address)
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
