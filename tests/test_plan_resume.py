"""`specagent plan --out`: ^C mid-plan exits cleanly keeping every finished search; a rerun runs only the rest.

A real SIGINT to a real process (the way a terminal's ^C arrives), on the process pool
(--workers 2, the path whose ^C used to print a concurrent.futures traceback).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specagent.simulator.jobs import plan_store

ARGS = ["plan", "--rate", "0.5/s,1/s", "--gpu", "h20", "--tasks", "60", "--strategy", "strongonly,specagent", "--workers", "2"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from specagent.cli.app import main; main()", *args]


def _env() -> dict:
    # no Chrome for the optional PNG/SVG copies: the test is about the searches
    return {**os.environ, "COLUMNS": "120", "PATH": str(Path(sys.executable).parent), "BROWSER_PATH": ""}


def test_sigint_mid_plan_keeps_finished_searches_and_a_rerun_runs_only_the_rest(tmp_path):
    out = tmp_path / "plan"
    searches = out / plan_store.FOLDER
    proc = subprocess.Popen(_cli(*ARGS, "--out", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None and not (searches.is_dir() and any(searches.glob("*.json"))):
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail(f"plan ended before a search was kept: {proc.communicate()}")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    kept = sorted(p.name for p in searches.glob("*.json"))
    if proc.returncode == 0:  # every search had finished just before the signal: nothing to resume, still no traceback
        assert len(kept) == 4
    else:
        assert proc.returncode == 130, (stdout, stderr)
        assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
        m = re.search(r"interrupted: (\d+) of 4 searches kept in (\S+); rerun the same command to resume", stderr)
        assert m and int(m.group(1)) == len(kept) >= 1, stderr
        assert not (out / "plan.json").exists()  # the plan's own files only when every search is done
    assert not list(searches.glob(".*"))  # no temp file of a search cut short
    mtimes = {p.name: p.stat().st_mtime_ns for p in searches.glob("*.json")}

    rerun = subprocess.run(_cli(*ARGS, "--out", str(out)), capture_output=True, text=True, env=_env(), timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    m = re.search(r"(\d+) search\(es\) reused from \S+, (\d+) run", rerun.stderr)
    if len(kept) == 4:
        assert m and m.group(1) == "4" and m.group(2) == "0", rerun.stderr
    else:
        assert m and int(m.group(1)) == len(kept) and int(m.group(1)) + int(m.group(2)) == 4, rerun.stderr
    assert {p.name: p.stat().st_mtime_ns for p in searches.glob("*.json") if p.name in mtimes} == mtimes  # none rerun
    assert len(list(searches.glob("*.json"))) == 4

    fresh = tmp_path / "fresh"
    once = subprocess.run(_cli(*ARGS, "--out", str(fresh), "--quiet"), capture_output=True, text=True, env=_env(), timeout=600)
    assert once.returncode == 0 and once.stdout == "", once.stderr
    assert (out / "plan.json").read_bytes() == (fresh / "plan.json").read_bytes()  # resumed = uninterrupted, byte for byte


def test_a_changed_flag_never_reuses_a_stored_search(tmp_path):
    """A stored search is reused only under the same fingerprint (scenario, SLO, prices, settings, workload, version)."""
    from specagent.simulator.jobs.plan import PlanRequest, search_keys
    from specagent.simulator.jobs.plan_search import SLO

    req = PlanRequest(rate=(0.5, 1.0), slo=SLO.parse("p95-task=300s"), gpu=("h20",), n_tasks=60)
    store = plan_store.PlanStore(tmp_path, plan_store.fingerprint(req, "w", "1"))
    key = search_keys(req)[0]
    store.save(key, {"row": {"x": 1.5}, "evaluations": [], "prices": {}})
    assert store.load(search_keys(req)) == {key: {"row": {"x": 1.5}, "evaluations": [], "prices": {}}}
    for other in (PlanRequest(rate=(0.5,), slo=SLO.parse("p95-task=200s"), gpu=("h20",), n_tasks=60),
                  PlanRequest(rate=(0.5,), slo=SLO.parse("p95-task=300s"), gpu=("h20",), n_tasks=61),
                  PlanRequest(rate=(0.5,), slo=SLO.parse("p95-task=300s"), gpu=("h20",), n_tasks=60, price=("h20=2.0",))):
        assert plan_store.PlanStore(tmp_path, plan_store.fingerprint(other, "w", "1")).load([key]) == {}
    assert plan_store.PlanStore(tmp_path, plan_store.fingerprint(req, "other workload", "1")).load([key]) == {}
    assert plan_store.PlanStore(tmp_path, plan_store.fingerprint(req, "w", "2")).load([key]) == {}
    store.path(key).write_text("{not json", encoding="utf-8")  # a damaged file is rerun, not fatal
    assert store.load([key]) == {}
    assert json.loads(json.dumps(plan_store.roundtrip({"a": float("nan")})))["a"] != 0
