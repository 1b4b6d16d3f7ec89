"""Sweeps under interruption and misuse (issue #14): workers die with a SIGKILLed driver, ^C keeps the cells finished
so far and a rerun completes them bit for bit, one folder holds one config's cells, and two sweeps never share a folder.

The signal tests run the real command in a child process (`specagent sweep ... --workers 2`) and read the
process table from /proc, so they run on Linux.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w
from typer.testing import CliRunner

from specagent.cli import app
from specagent.common.folder_lock import FolderBusyError, FolderLock
from specagent.simulator.jobs.sweep import SweepRequest, SweepFolderError, config_record, run as run_sweep

runner = CliRunner()
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table from /proc")

#: 16 cells of about a quarter of a second each: long enough to interrupt mid-way, short enough for the suite.
SLOW = {
    "sweep": {"tasks": 1500, "seed": 3, "prices": {"h20": 1.9}},
    "grid": {"strategy": ["strongonly", "specagent"], "k": [2, 4, 6], "acceptance": [0.6, 0.8], "rate": [2.0, 4.0],
             "fleet": ["small"], "hardware": ["h20"]},
    "fleet": {"small": {"weak_replicas": 1, "strong_replicas": 1}},
}
QUICK = {**SLOW, "sweep": {**SLOW["sweep"], "tasks": 12},
         "grid": {**SLOW["grid"], "k": [2], "acceptance": [0.8], "rate": [0.5, 1.0]}}


def _toml(tmp: Path, data: dict, name: str = "sweep.toml") -> Path:
    p = tmp / name
    p.write_text(tomli_w.dumps(data))
    return p


def _cells(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "cells").glob("*")) if p.is_file()}


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc/*/stat; the name field may hold spaces, so split after its ')')."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie (exited, not yet reaped by init) is dead."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_for(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _sweep_process(cfg: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from specagent.cli import main; main()", "sweep", str(cfg), "--out", str(out),
                             "--workers", "2", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@linux_only
def test_killing_the_driver_kills_its_workers(tmp_path):
    """SIGKILL gives the driver no chance to clean up; the workers must still go (prctl PR_SET_PDEATHSIG)."""
    proc = _sweep_process(_toml(tmp_path, SLOW), tmp_path / "out")
    workers: list[int] = []
    try:
        workers = _wait_for(lambda: [c for c in _children(proc.pid) if _alive(c)] if len(_children(proc.pid)) >= 2 else None, 120,
                            "two workers")
        proc.kill()
        proc.communicate(timeout=60)
        survivors = workers
        end = time.monotonic() + 10  # "a few seconds later"
        while survivors and time.monotonic() < end:
            time.sleep(0.1)
            survivors = [w for w in workers if _alive(w)]
        assert survivors == [], f"workers {survivors} outlived their driver"
    finally:
        proc.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    # the lock the killed sweep held is released by the kernel: a rerun takes the folder and finishes
    rep = run_sweep(SweepRequest.from_toml(tmp_path / "sweep.toml"), tmp_path / "out")
    assert rep.skipped + rep.ran == rep.total == 16 and not (tmp_path / "out" / FolderLock.NAME).exists()


@linux_only
def test_interrupting_keeps_the_finished_cells_and_a_rerun_finishes_them_bit_for_bit(tmp_path):
    cfg = _toml(tmp_path, SLOW)
    ref = run_sweep(SweepRequest.from_toml(cfg), tmp_path / "ref")  # uninterrupted, one process
    assert ref.ran == 16
    out = tmp_path / "part"
    proc = _sweep_process(cfg, out)
    try:
        _wait_for(lambda: len(list((out / "cells").glob("*.parquet"))) >= 2 if (out / "cells").is_dir() else False, 120,
                  "two finished cells")
        before = {n: d for n, d in _cells(out).items() if n.endswith(".parquet")}  # finished cells, not one being written
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted:") and "rerun the same command to resume" in lines[0], err
    kept = _cells(out)
    assert all(kept[name] == data for name, data in before.items())  # every cell finished before ^C is kept, unchanged
    assert all(n.endswith(".parquet") for n in kept)  # no temp file left
    assert 2 <= len(kept) < 16  # the queued cells were cancelled, not run to the end first
    assert f"{len(kept)} finished cell(s) kept" in lines[0]
    assert not [w for w in workers if _alive(w)]
    again = run_sweep(SweepRequest.from_toml(cfg), out)
    assert (again.skipped, again.ran) == (len(kept), 16 - len(kept))
    assert _cells(out) == _cells(tmp_path / "ref")  # every cell byte-identical to the uninterrupted run


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path):
    cfg = SweepRequest.from_dict(QUICK, "quick.toml")
    out = tmp_path / "out"
    out.mkdir()
    with FolderLock(out):
        assert (out / FolderLock.NAME).read_text() == f"{os.getpid()}\n"
        with pytest.raises(FolderBusyError, match=rf"{out}: another sweep \(pid {os.getpid()}\) is running in this folder"):
            run_sweep(cfg, out)
        r = runner.invoke(app, ["sweep", str(_toml(tmp_path, QUICK)), "--out", str(out)])
        assert r.exit_code == 2 and r.output.count("error:") == 1 and f"another sweep (pid {os.getpid()})" in r.output
    assert not (out / "cells").exists() or not list((out / "cells").iterdir())


def test_a_lock_left_by_a_dead_sweep_is_taken(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out"
    out.mkdir()
    (out / FolderLock.NAME).write_text(f"{dead.pid}\n")  # what a SIGKILLed sweep leaves
    (out / "cells").mkdir()
    (out / "cells" / ".strongonly_k0_0123.parquet.ab12cd34ef56.tmp").write_text("half a cell")  # and its half-written cell
    rep = run_sweep(SweepRequest.from_dict(QUICK, "quick.toml"), out)
    assert rep.ran == rep.total == 4
    assert sorted(_cells(out)) == sorted(f"{c['cell_id']}.parquet" for c in SweepRequest.from_dict(QUICK, "q").cells())
    assert not (out / FolderLock.NAME).exists()


def test_a_changed_config_is_refused_naming_what_changed_unless_forced(tmp_path):
    out = tmp_path / "out"
    a = SweepRequest.from_dict(QUICK, "a.toml")
    run_sweep(a, out)
    first = _cells(out)
    changed = {**QUICK, "sweep": {**QUICK["sweep"], "tasks": 13, "seed": 4}}
    b = SweepRequest.from_dict(changed, "b.toml")
    with pytest.raises(SweepFolderError, match=r"holds 4 cell\(s\) of a different sweep config \(changed fixed.scenario.seed: 3 -> 4; "
                                               r"fixed.tasks: 12 -> 13\); give a new --out folder, or --force"):
        run_sweep(b, out)
    assert _cells(out) == first and json.loads((out / "config.json").read_text()) == config_record(a)  # untouched
    r = runner.invoke(app, ["sweep", str(_toml(tmp_path, changed)), "--out", str(out)])
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "fixed.tasks: 12 -> 13" in r.output
    r = runner.invoke(app, ["sweep", str(_toml(tmp_path, changed)), "--out", str(out), "--force", "--json"])
    assert r.exit_code == 0, r.output
    assert sorted(_cells(out)) == sorted(f"{c['cell_id']}.parquet" for c in b.cells())  # a's cells deleted, b's written
    assert json.loads((out / "config.json").read_text()) == config_record(b)


def test_extending_the_grid_reuses_the_cells_and_shrinking_it_is_refused(tmp_path):
    out = tmp_path / "out"
    run_sweep(SweepRequest.from_dict(QUICK, "a.toml"), out)
    first = _cells(out)
    wider = SweepRequest.from_dict({**QUICK, "grid": {**QUICK["grid"], "rate": [0.5, 1.0, 2.0]}}, "wide.toml")
    rep = run_sweep(wider, out)
    assert (rep.skipped, rep.ran) == (4, 2) and all(_cells(out)[n] == d for n, d in first.items())
    assert json.loads((out / "config.json").read_text()) == config_record(wider)
    narrower = SweepRequest.from_dict({**QUICK, "grid": {**QUICK["grid"], "rate": [0.5]}}, "narrow.toml")
    with pytest.raises(SweepFolderError, match=r"holds 4 cell\(s\) of a different sweep config \(changed grid.rate: \[0.5, 1.0, 2.0\] -> \[0.5\]\)"):
        run_sweep(narrower, out)
