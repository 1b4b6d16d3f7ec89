"""An exclusive lock on an output folder, so two long jobs (sweeps) never write one folder at once."""

from __future__ import annotations

import os
from pathlib import Path

from specagent.common import atomic
from specagent.common.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


class FolderBusyError(InputError):
    """The folder is locked by another running sweep."""


class FolderLock:
    """An exclusive lock on a sweep folder: the file `.sweep.lock` in it, holding the sweep's pid.

    On POSIX the lock is an flock(2) on that file, which the kernel drops when its holder
    exits however it exits (SIGKILL included), so a lock left by a killed sweep is never
    stale: the next sweep takes it and writes its own pid. Without fcntl (Windows) the file is
    created exclusively and a leftover one names the pid to check before deleting it.
    """

    NAME = ".sweep.lock"

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / self.NAME
        self.fd: int | None = None

    def __enter__(self) -> "FolderLock":
        try:
            self.fd = self._flock() if fcntl is not None else self._exclusive()
            os.ftruncate(self.fd, 0)
            os.write(self.fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            if self.fd is not None:
                os.close(self.fd)
            raise atomic.output_error(self.path, exc) from exc
        return self

    def _flock(self) -> int:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                os.close(fd)
                raise FolderBusyError(f"{self.folder}: another sweep (pid {holder}) is running in this folder; "
                                       "wait for it to finish, or give another --out folder") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:  # else its holder removed it between our open and flock: lock the new one
                return fd
            os.close(fd)

    def _exclusive(self) -> int:  # pragma: no cover - not POSIX
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            fd = os.open(self.path, os.O_RDONLY)
            holder = _read_pid(fd)
            os.close(fd)
            raise FolderBusyError(f"{self.folder}: another sweep (pid {holder}) is running in this folder, or was killed; "
                                   f"if no process {holder} runs, delete {self.path}") from None

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # while still holding it
            os.close(self.fd)
            self.fd = None


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"
