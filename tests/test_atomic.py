"""The one atomic writer: old file or new, never half; no temp file left; created as any tool would (0666 & ~umask)."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from specagent.common import atomic


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
