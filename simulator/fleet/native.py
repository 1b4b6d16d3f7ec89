"""Which fleet engine runs: the mypyc-compiled modules, or the same modules from source.

`pip install` compiles the fleet engine (`fleet`, its configuration types `fleet_config`,
and `itercost`) with mypyc when it can (setup.py). An
extension shadows its .py file (Python's importer tries extensions first), so one
built from an older source would silently run old code. The build therefore records
each compiled module's source hash beside it; `select_engine()` runs when
`specagent.simulator` is imported, before either module, and when an extension is
missing, stale or disabled (SPECAGENT_PURE_PYTHON=1) it has both imported from source.
The two engines are the same code with the same float operations, so the results are
identical (tests/test_native_engine.py); only the speed differs.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

NATIVE_MODULES = ("itercost", "config", "sim")
MANIFEST = "_native_build.json"
PURE_ENV = "SPECAGENT_PURE_PYTHON"
REBUILD = "rebuild with `make setup` (or `pip install -e .`)"


@dataclass(frozen=True)
class EngineStatus:
    compiled: bool
    reason: str = ""  # why the pure-Python engine runs
    stale: bool = False  # compiled modules present but not built from the current sources

    def describe(self) -> str:
        return "compiled (mypyc)" if self.compiled else f"pure Python ({self.reason})"


def engine_status(package_dir: Path, env: dict[str, str] | None = None) -> EngineStatus:
    """Whether the compiled modules in `package_dir` can run: present, built from the current sources, not disabled."""
    env = os.environ if env is None else env
    if env.get(PURE_ENV, "") not in ("", "0"):
        return EngineStatus(False, f"{PURE_ENV} is set")
    missing = [m for m in NATIVE_MODULES if _extension(package_dir, m) is None]
    if missing:
        return EngineStatus(False, f"not compiled: no extension for {', '.join(missing)} (see setup.py)")
    try:
        built = json.loads((package_dir / MANIFEST).read_text())
        if not isinstance(built, dict):
            raise ValueError(f"expected an object of source hashes, got {type(built).__name__}")
    except (OSError, ValueError) as e:
        return EngineStatus(False, f"compiled modules without a readable {MANIFEST} ({e}); {REBUILD}", stale=True)
    stale = [m for m in NATIVE_MODULES if built.get(m) != source_sha256(package_dir / f"{m}.py")]
    if stale:
        return EngineStatus(False, f"compiled {', '.join(stale)} built from another {' and '.join(m + '.py' for m in stale)}; "
                                   f"{REBUILD}", stale=True)
    return EngineStatus(True)


def select_engine(package: str, package_dir: Path) -> EngineStatus:
    """Import the native modules from source from now on unless their compiled versions can run."""
    status = engine_status(package_dir)
    if not status.compiled:
        names = {f"{package}.{m}": package_dir / f"{m}.py" for m in NATIVE_MODULES}
        if not any(isinstance(f, _FromSource) and f.files == names for f in sys.meta_path):
            sys.meta_path.insert(0, _FromSource(names))
        if status.stale:
            warnings.warn(f"specagent: running the pure-Python fleet engine: {status.reason}", RuntimeWarning, stacklevel=3)
    return status


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds the named modules' .py files, ahead of the extensions that would shadow them."""

    def __init__(self, files: dict[str, Path]):
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        f = self.files.get(fullname)
        return importlib.util.spec_from_file_location(fullname, f) if f is not None else None


def _extension(package_dir: Path, module: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = package_dir / f"{module}{suffix}"
        if p.exists():
            return p
    return None


def source_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
