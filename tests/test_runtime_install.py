"""A fresh `pip install .` with no extras imports every module and runs `specagent predict --brief`.

An import that pyproject.toml does not declare (click, once: typer 0.29 stopped installing it) passes
every other test, because the test extras pull it in. Here the package is installed the way a user
installs it, at the locked versions (requirements/run.lock, hashes stripped to constraints), into a
virtual environment of its own, from a copy of the tracked files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the optional extras' top-level packages: a module may need one (kernels/ needs torch), nothing else
EXTRA_IMPORTS = {"torch": "torch", "ray[default]": "ray"}

IMPORT_ALL = r"""
import importlib, json, pkgutil, sys
import specagent
failed = {}
for info in pkgutil.walk_packages(specagent.__path__, "specagent."):
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        failed[info.name] = exc.name
print(json.dumps(failed))
"""


def _constraints(lock: Path, out: Path) -> Path:
    pins = re.findall(r"^([A-Za-z0-9_.\-]+==[^\s\\]+)", lock.read_text(), flags=re.M)
    out.write_text("\n".join(pins) + "\n")
    return out


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, files.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.slow
def test_a_base_install_imports_every_module_and_predicts(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout (the tracked files are what a user installs)")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    allowed = {EXTRA_IMPORTS[req.split("=")[0].split(">")[0].strip()] for extra in ("torch", "ray") for req in declared[extra]}
    src = _tracked_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {**os.environ, "SPECAGENT_PURE_PYTHON": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # the compiled engine is tested elsewhere
    env.pop("PYTHONPATH", None)
    cons = _constraints(ROOT / "requirements" / "run.lock", tmp_path / "constraints.txt")
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "-c", str(cons), str(src)], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "elsewhere"  # not the source tree: only the installed package is importable
    run.mkdir()
    done = subprocess.run([str(py), "-c", IMPORT_ALL], cwd=run, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    failed = json.loads(done.stdout.strip().splitlines()[-1])
    undeclared = {mod: missing for mod, missing in failed.items() if missing.split(".")[0] not in allowed}
    assert not undeclared, f"modules importing a package pyproject.toml does not declare: {undeclared}"
    done = subprocess.run([str(venv / "bin" / "specagent"), "predict", "--brief", "-o", str(run / "out")], cwd=run, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "specagent" in done.stdout and "strongonly" in done.stdout, done.stdout
