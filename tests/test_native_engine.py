"""The compiled (mypyc) and pure-Python fleet engines: which one loads, and that they agree bit for bit.

`make test` runs this file and the fleet tests twice: once on the installed engine
(compiled wherever a C compiler exists) and once with SPECAGENT_PURE_PYTHON=1.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import specagent.simulator as simulator_pkg
import specagent.simulator.fleet as fleet_pkg
from specagent.simulator.fleet import sim as fleet_mod
from specagent.simulator.fleet.native import MANIFEST, NATIVE_MODULES, PURE_ENV, engine_status, source_sha256

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _fake_package(root: Path, name: str, with_extensions: bool, manifest: dict | None) -> Path:
    """A package laid out as an install: .py sources, (unloadable) extension files, a build manifest."""
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        from specagent.simulator.fleet.native import select_engine
        ENGINE = select_engine("{name}", Path(__file__).resolve().parent)
    """))
    (pkg / "itercost.py").write_text("SOURCE = 'itercost.py'\n")
    (pkg / "config.py").write_text("SOURCE = 'config.py'\n")
    (pkg / "sim.py").write_text(f"from {name}.itercost import SOURCE as ITERCOST\nSOURCE = 'sim.py'\n")
    if with_extensions:
        for m in NATIVE_MODULES:
            (pkg / f"{m}{SUFFIX}").write_bytes(b"not a shared object: importing this would fail")
    if manifest is not None:
        (pkg / MANIFEST).write_text(json.dumps(manifest))
    return pkg


def test_engine_status_says_why_the_pure_engine_runs(tmp_path):
    pkg = _fake_package(tmp_path, "pkg_status", with_extensions=False, manifest=None)
    s = engine_status(pkg, env={})
    assert not s.compiled and not s.stale and "no extension for itercost, config, sim" in s.reason
    for m in NATIVE_MODULES:
        (pkg / f"{m}{SUFFIX}").write_bytes(b"")
    s = engine_status(pkg, env={})
    assert not s.compiled and s.stale and MANIFEST in s.reason  # extensions, but no record of their sources
    (pkg / MANIFEST).write_text("[]")
    s = engine_status(pkg, env={})
    assert not s.compiled and s.stale and "expected an object of source hashes" in s.reason
    fresh = {m: source_sha256(pkg / f"{m}.py") for m in NATIVE_MODULES}
    (pkg / MANIFEST).write_text(json.dumps(fresh))
    assert engine_status(pkg, env={}).compiled
    assert engine_status(pkg, env={PURE_ENV: "0"}).compiled
    s = engine_status(pkg, env={PURE_ENV: "1"})
    assert not s.compiled and not s.stale and PURE_ENV in s.reason
    (pkg / "sim.py").write_text("SOURCE = 'edited after the build'\n")
    s = engine_status(pkg, env={})
    assert not s.compiled and s.stale and "sim built from another sim.py" in s.reason and "itercost" not in s.reason


@pytest.mark.parametrize("case", ["stale", "disabled"])
def test_sources_load_instead_of_extensions_that_cannot_run(tmp_path, monkeypatch, case):
    """Extensions shadow .py files on import; when they are stale or disabled, the sources must load instead."""
    name = f"pkg_{case}"
    manifest = {m: "0" * 64 for m in NATIVE_MODULES}  # recorded hashes that match no source
    if case == "disabled":
        monkeypatch.setenv(PURE_ENV, "1")
    else:
        monkeypatch.delenv(PURE_ENV, raising=False)  # `make test` runs this file again with it set
    _fake_package(tmp_path, name, with_extensions=True, manifest=manifest)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # select_engine's finder goes with the test
    for mod in [m for m in sys.modules if m.split(".")[0] == name]:
        monkeypatch.delitem(sys.modules, mod)
    if case == "stale":
        with pytest.warns(RuntimeWarning, match=f"pure-Python fleet engine: compiled {', '.join(NATIVE_MODULES)} built from another"):
            pkg = importlib.import_module(name)
    else:
        pkg = importlib.import_module(name)
    fleet = importlib.import_module(f"{name}.sim")
    assert not pkg.ENGINE.compiled
    assert fleet.SOURCE == "sim.py" and fleet.ITERCOST == "itercost.py"
    assert fleet.__file__.endswith("sim.py")
    for mod in [m for m in sys.modules if m.split(".")[0] == name]:
        del sys.modules[mod]


def _has_c_compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


def test_the_install_runs_the_compiled_engine_where_it_can():
    """A silent fallback to pure Python would halve the fleet's speed unnoticed: the install must compile."""
    assert simulator_pkg.FLEET_BACKEND is simulator_pkg.ENGINE is fleet_pkg.FLEET_BACKEND  # the old spots, for one release
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        assert not fleet_pkg.FLEET_BACKEND.compiled and fleet_mod.__file__.endswith("sim.py")
        return
    if not _has_c_compiler():
        pytest.skip("no C compiler on this machine: the pure-Python engine is the expected one")
    assert fleet_pkg.FLEET_BACKEND.compiled, fleet_pkg.FLEET_BACKEND.reason
    assert fleet_mod.__file__.endswith(SUFFIX)


DIGEST = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, {tests!r})
    import specagent.simulator as pkg
    from test_fleet_golden import synthetic_plan
    from specagent.simulator.fleet.sim import FleetSim
    from specagent.simulator.fleet.config import Arrivals, Fleet, ReplicaPool, Scheduler
    from specagent.simulator.scenario import default_setting
    s = default_setting()
    h = hashlib.sha256()
    plan = synthetic_plan(60, 5)
    for fleet in (Fleet(ReplicaPool(s.weak, 2, scheduler=Scheduler(8, 256)), ReplicaPool(s.strong, 1, scheduler=Scheduler(16, 512))),
                  Fleet(ReplicaPool(s.weak, None), ReplicaPool(s.strong, 2, router="least_outstanding"))):
        res = FleetSim(plan, fleet, Arrivals(rate=3.0, seed=2).sample(60)).run()
        for frame in (res.tasks, res.calls, res.turns, res.segments, res.replicas):
            h.update(frame.to_csv(float_format="%.17g").encode())
        h.update(repr(sorted(res.summary.items())).encode())
    print(pkg.ENGINE.compiled, h.hexdigest())
""")


def test_compiled_and_pure_engines_give_identical_results():
    if not fleet_pkg.FLEET_BACKEND.compiled:
        pytest.skip(f"only the pure-Python engine is here ({fleet_pkg.FLEET_BACKEND.reason})")
    script = DIGEST.format(tests=str(Path(__file__).parent))
    out = {}
    for pure in ("0", "1"):
        env = {**os.environ, PURE_ENV: pure}
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr
        compiled, digest = run.stdout.split()
        assert compiled == ("True" if pure == "0" else "False")
        out[pure] = digest
    assert out["0"] == out["1"]


def test_version_says_which_engine_runs():
    from typer.testing import CliRunner

    from specagent import __version__
    from specagent.cli import app

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"specagent {__version__} (fleet engine: {fleet_pkg.FLEET_BACKEND.describe()})"
    assert ("compiled (mypyc)" in res.output) == fleet_pkg.FLEET_BACKEND.compiled
