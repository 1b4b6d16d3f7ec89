"""Searches on a real multi-process Ray cluster given by address (`--ray-address`), as a user starts one.

A head and a second node are started with `ray start --block` (docs/capacity-planning.md), each in its own
process group so the test stops exactly what it started (never `ray stop`, which would stop every Ray on the
machine). The plan and the sweep must give the rows the local process pool gives.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

RAY = Path(sys.executable).with_name("ray")
CLI = Path(sys.executable).with_name("specagent")
pytestmark = pytest.mark.skipif(not RAY.exists(), reason="Ray is not installed (pip install 'specagent[ray]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_env(tmp: str) -> dict[str, str]:
    """Every `ray` command of one cluster: its temp folder, and token mode where a token exists (a joining node and
    `ray status` use ~/.ray/auth_token only in token mode, as `connect_ray` sets it for the CLI)."""
    env = {**os.environ, "RAY_TMPDIR": tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    if "RAY_AUTH_MODE" not in env and Path("~/.ray/auth_token").expanduser().exists():
        env["RAY_AUTH_MODE"] = "token"
    return env


def _start(args: list[str], tmp: str, log: Path) -> subprocess.Popen:
    env = _ray_env(tmp)
    head = ["--include-dashboard=false"] if "--head" in args else []  # a flag `ray start` takes for the head only
    return subprocess.Popen([str(RAY), "start", "--block", "--disable-usage-stats", *head,
                             "--node-ip-address", "127.0.0.1", "--dashboard-agent-listen-port", str(_free_port()),
                             "--metrics-export-port", str(_free_port()), *args],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_for_nodes(address: str, n: int, tmp: str, timeout: float = 120.0) -> None:
    """Until `ray status` lists n nodes alive (each `ray start` returns long before its node has joined)."""
    end = time.monotonic() + timeout
    out = ""
    while time.monotonic() < end:
        r = subprocess.run([str(RAY), "status", "--address", address], capture_output=True, text=True,
                           env=_ray_env(tmp), timeout=60)
        out = r.stdout
        if r.returncode == 0 and out.count("node_") >= n:
            return
        time.sleep(2)
    raise AssertionError(f"the Ray cluster at {address} did not show {n} nodes in {timeout:.0f} s:\n{out}")


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short: not pytest's tmp_path
    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs = []
    try:
        procs.append(_start(["--head", "--port", str(port), "--num-cpus", "1", "--ray-client-server-port", str(_free_port())],
                            tmp, Path(tmp) / "head.log"))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(1)
        procs.append(_start(["--address", address, "--num-cpus", "1"], tmp, Path(tmp) / "node.log"))
        _wait_for_nodes(address, 2, tmp)
        yield address, tmp
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


def _cli(*args: str, tmp: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}
    if tmp:
        env["RAY_TMPDIR"] = tmp
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, env=env, timeout=600)


PLAN = ("plan", "--rate", "1/s,2/s", "--slo", "p95-task=600s", "--gpu", "h20", "--strategy", "strongonly,specagent",
        "--tasks", "30", "--json")


def test_a_plan_on_a_two_node_cluster_gives_the_local_pools_fleets(cluster):
    address, tmp = cluster
    local = _cli(*PLAN)
    assert local.returncode == 0, local.stderr
    on_ray = _cli(*PLAN, "--ray-address", address, tmp=tmp)
    assert on_ray.returncode == 0, on_ray.stderr
    a, b = json.loads(local.stdout), json.loads(on_ray.stdout)
    assert a["request"]["backend"] == "local" and b["request"]["backend"] == "ray"  # --ray-address alone implies ray
    for doc in (a, b):
        doc["request"].pop("backend")
        doc["request"].pop("address", None)
    assert a == b


def test_a_sweep_on_the_cluster_gives_the_local_rows(cluster, tmp_path):
    import pandas as pd

    from specagent.simulator.jobs.sweep import load_sweep

    address, tmp = cluster
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\ntasks = 8\nseed = 3\n[grid]\nstrategy = ["strongonly", "specagent"]\nrate = [0.5]\n'
                   'fleet = ["small"]\nhardware = ["h20"]\n[fleet.small]\nweak_replicas = 1\nstrong_replicas = 1\n')
    assert _cli("sweep", str(cfg), "--out", str(tmp_path / "local"), "--json").returncode == 0
    r = _cli("sweep", str(cfg), "--out", str(tmp_path / "ray"), "--ray-address", address, "--workers", "2", "--json", tmp=tmp)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "local"), load_sweep(tmp_path / "ray"))


def test_an_address_where_no_cluster_runs_is_one_line_within_seconds():
    t0 = time.monotonic()
    r = _cli(*PLAN, "--ray-address", f"127.0.0.1:{_free_port()}")
    assert r.returncode != 0 and "nothing answers at 127.0.0.1" in r.stderr and "ray start --head" in r.stderr
    assert "Traceback" not in r.stderr and time.monotonic() - t0 < 60
    r = _cli(*PLAN, "--ray-address", "head-without-port")
    assert r.returncode == 2 and "expected HOST:PORT" in r.stderr
    r = _cli(*PLAN, "--backend", "local", "--ray-address", "auto")
    assert r.returncode == 2 and "for --backend ray" in r.stderr
