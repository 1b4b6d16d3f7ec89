"""The one atomic writer: old file or new, never half; no temp file left; created as any tool would (0666 & ~umask)."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading

import pandas as pd
import pytest

from specagent.common import atomic
from specagent.common.errors import OutputError


@pytest.fixture
def umask():
    """Set the process umask for one test, restoring it afterwards."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda m: os.umask(m)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o000, 0o666)])
def test_files_get_0666_less_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    for p, write in ((tmp_path / "a.txt", lambda p: atomic.write_text(p, "x\n")),
                     (tmp_path / "b.json", lambda p: atomic.write_json(p, {"a": 1})),
                     (tmp_path / "c.parquet", lambda p: atomic.write_parquet(p, pd.DataFrame({"a": [1]})))):
        write(p)
        assert stat.S_IMODE(p.stat().st_mode) == mode, p.name


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    p = tmp_path / "out.txt"
    atomic.write_text(p, "old\n")

    def boom(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic.atomic_write(p, boom)
    assert p.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_text_is_written_as_given_and_folders_are_made(tmp_path):
    p = tmp_path / "new" / "dir" / "t.txt"
    atomic.write_text(p, "a\r\nb\n")
    assert p.read_bytes() == b"a\r\nb\n"
    t = atomic.temp_beside(p, suffix=".png")
    assert t.parent == p.parent and t.name.startswith(".t.txt.") and t.suffix == ".png" and t.stat().st_size == 0


# ---------------------------------------------------------------- outputs that cannot be written (issue #14)
def _listing(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_a_parent_that_is_a_file_is_named_and_nothing_is_created(tmp_path):
    (tmp_path / "f").write_text("x")
    for target in (tmp_path / "f" / "out.json", tmp_path / "f" / "deeper" / "out.json"):
        with pytest.raises(OutputError, match=rf"^cannot write {target}: {tmp_path / 'f'} is a file, not a folder$"):
            atomic.write_json(target, {"a": 1})
        with pytest.raises(OutputError, match="is a file, not a folder"):
            atomic.check_writable(target)
    assert _listing(tmp_path) == ["f"] and (tmp_path / "f").read_text() == "x"


def test_a_read_only_folder_is_named_with_the_os_reason(unwritable):
    scratch, ro, as_unprivileged = unwritable
    target = ro / "sub" / "out.parquet"
    with as_unprivileged():
        with pytest.raises(OutputError, match=rf"^cannot write {target}: Permission denied$"):
            atomic.write_parquet(target, pd.DataFrame({"a": [1]}))
        with pytest.raises(OutputError, match="Permission denied"):
            atomic.check_writable(ro / "x.json")
    assert list(ro.iterdir()) == []


def test_a_full_disk_leaves_the_old_file_no_temp_and_no_new_folder(tmp_path, monkeypatch):
    """ENOSPC arrives while the temp file is being written (tmpfs cannot be mounted unprivileged: simulated)."""
    old = tmp_path / "out.txt"
    atomic.write_text(old, "old\n")
    real = atomic._fill

    def full(tmp, write):
        real(tmp, write)  # the bytes land, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic, "_fill", full)
    with pytest.raises(OutputError, match=rf"^cannot write {old}: No space left on device$"):
        atomic.write_text(old, "new\n")
    with pytest.raises(OutputError, match="No space left on device"):
        atomic.write_text(tmp_path / "a" / "b" / "new.txt", "new\n")
    assert old.read_text() == "old\n" and _listing(tmp_path) == ["out.txt"]


def test_files_written_together_are_all_or_none(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    atomic.write_json(a, {"v": 1})

    def boom(tmp):
        tmp.write_text("half")
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with pytest.raises(OutputError, match=rf"cannot write {b}: Input/output error"):
        atomic.write_together({a: atomic.text_writer("new"), b: boom})
    assert json.loads(a.read_text()) == {"v": 1} and _listing(tmp_path) == ["a.json"]
    atomic.write_together({a: atomic.text_writer("A"), b: atomic.text_writer("B")})
    assert (a.read_text(), b.read_text()) == ("A", "B")


def test_a_pipe_is_written_through_and_a_symlink_keeps_pointing_at_the_new_file(tmp_path):
    """A device or pipe (/dev/null, /dev/stdout, a FIFO) is written into: replacing it by rename would replace the
    device itself (the command fuzz suite found `-o /dev/null` doing that, as root). A FIFO stands in for a device."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    atomic.check_writable(fifo)
    atomic.write_text(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    target = tmp_path / "real.txt"
    link = tmp_path / "link.txt"
    target.write_text("old")
    link.symlink_to(target.name)
    atomic.write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and _listing(tmp_path) == ["link.txt", "pipe", "real.txt"]


def test_check_writable_refuses_a_folder_and_leaves_nothing(tmp_path):
    with pytest.raises(OutputError, match="it is a folder"):
        atomic.check_writable(tmp_path)
    atomic.check_writable(tmp_path / "new" / "deeper" / "x.json")
    assert _listing(tmp_path) == []
