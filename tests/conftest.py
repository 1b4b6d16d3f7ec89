"""Shared fixtures: a folder this process cannot write into, even as root.

Root ignores file modes, so a read-only folder alone proves nothing when the suite runs as
root (as it does in containers): `unwritable` gives a 0o555 folder inside a world-readable
scratch folder and a context manager that drops the effective user and group to nobody
(65534) for the block and restores them after. Inputs a command reads inside the block must
lie in the scratch folder (or the repository), which nobody can read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

NOBODY = 65534

#: Files whose every test is slow, and why: `make check` (`-m "not slow"`) leaves them out, `make test` runs them.
#: A slow test in another file carries `@pytest.mark.slow` itself (docs/development.md).
SLOW_FILES = {
    "test_kernels_modules.py": "torch", "test_kernels_reference.py": "torch and transformers",
    "test_kernels_calibrate.py": "torch microbenchmarks", "test_kernels_live.py": "torch models run live",
    "test_engine_terms.py": "torch microbenchmarks", "test_gpu_calibration.py": "the GPU script on torch's CPU build",
    "test_reports_browser.py": "headless Chromium", "test_reports_notebooks.py": "executes the notebooks",
    "test_fuzz_commands.py": "fuzz suite", "test_fuzz_inputs.py": "fuzz suite", "test_fuzz_hostile.py": "fuzz suite",
    "test_fuzz_ranges.py": "fuzz suite",
    "test_capacity.py": "long fleet runs (and Ray)", "test_fleet_sweep.py": "fleet sweeps (and Ray)",
    "test_sweep_robust.py": "sweeps in subprocesses", "test_plan_resume.py": "plans in subprocesses",
    "test_runtime_install.py": "a fresh virtual environment from the package index",
    "test_extending.py": "the recipes in a staged copy of the package",
    "test_cli_without_torch.py": "predict in a subprocess",
}


def pytest_ignore_collect(collection_path, config):
    """Under `-m "not slow"` a slow file is not even imported (importing torch alone costs seconds)."""
    if collection_path.name in SLOW_FILES and "not slow" in (config.getoption("markexpr", "") or ""):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        why = SLOW_FILES.get(item.path.name)
        if why is not None:
            item.add_marker(pytest.mark.slow(reason=why))

#: Every run tests the same examples (each test's draws are seeded from its own hash), so a CI run is reproducible
#: and a failure found once is found again; SPECAGENT_HYPOTHESIS=explore draws fresh examples on each run.
hypothesis_settings.register_profile("deterministic", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("SPECAGENT_HYPOTHESIS", "deterministic"))


@contextmanager
def _unprivileged():
    if os.geteuid() != 0:
        yield
        return
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def unwritable():
    """(scratch, read_only, as_unprivileged): a world-readable scratch folder, a read-only folder in it, and the context
    manager under which the read-only folder cannot be written."""
    scratch = Path(tempfile.mkdtemp(prefix="specagent-ro-"))
    scratch.chmod(0o755)
    ro = scratch / "read_only"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        yield scratch, ro, _unprivileged
    finally:
        ro.chmod(0o755)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def real_server():
    """A real OpenAI-compatible server (tools/real_server.py: `transformers serve` with SmolLM2-135M) on a loopback port,
    for the session; skipped with the reason where it cannot be installed or started (no network, a missing package).

    Bounded: the first-time download and conversion (about 2 min on 2 cores) and the start each have a timeout, so the
    fixture never hangs. SPECAGENT_REAL_SERVER=off skips it on purpose.
    """
    if os.environ.get("SPECAGENT_REAL_SERVER", "").lower() in ("off", "0", "no"):
        pytest.skip("real server: SPECAGENT_REAL_SERVER=off")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    try:
        import real_server as rs
    finally:
        sys.path.pop(0)
    try:
        rs.prepare(timeout_s=900.0)
        server = rs.RealServer(start_timeout_s=300.0).start()
    except rs.Unavailable as exc:
        pytest.skip(f"real server unavailable: {exc}")
    try:
        yield server
    finally:
        server.stop()
