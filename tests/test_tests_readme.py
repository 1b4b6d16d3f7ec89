"""tests/README.md maps every module to its tests and names every test file (a contributor's first stop)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "costmodel", "hardware", "simulator", "traces", "kernels", "measurements", "specagent")


def _tracked(pattern: str) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the git checkout")
    return out.split()


def _rows() -> list[str]:
    return [line.split("|")[1] for line in (ROOT / "tests" / "README.md").read_text().splitlines()
            if line.startswith("|") and line.count("|") >= 3]


def _covered(module: str, rows: list[str]) -> bool:
    """Named by its path, or by its file name in a row that names its folder (`simulator/pricing/` (`des.py`))."""
    folder, name = str(Path(module).parent), Path(module).name
    return any(module in r or (f"{folder}/" in r and (f"`{name}`" in r or f"`{folder}/`" in r and "(" not in r)) for r in rows)


def test_every_module_is_mapped():
    rows = _rows()
    modules = [m for m in _tracked("*.py") if m.split("/")[0] in PACKAGES and not m.endswith("__init__.py")]
    missing = [m for m in modules if not _covered(m, rows)]
    assert not missing, f"tests/README.md maps no tests to: {missing}"


def test_every_test_file_is_named():
    text = (ROOT / "tests" / "README.md").read_text()
    missing = [t for t in _tracked("tests/test_*.py") if Path(t).name not in text]
    assert not missing, f"tests/README.md does not name: {missing}"


def test_every_slow_file_and_test_exists():
    from conftest import SLOW_FILES, SLOW_TESTS

    missing = [name for name in SLOW_FILES if not (ROOT / "tests" / name).exists()]
    for prefix in SLOW_TESTS:
        file, test = prefix.split("::")
        test, _, case = test.partition("[")  # a parametrized case: its id (or the id's start) is written in the file
        path = ROOT / "tests" / file
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if f"def {test}" not in text or (case and f'"{case.rstrip("]")}' not in text):
            missing.append(prefix)
    assert not missing, f"tests/conftest.py names files or tests that do not exist: {missing}"
