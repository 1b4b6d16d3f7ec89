"""Build hook: compile the fleet engine's hot modules with mypyc, when the machine can.

Metadata lives in pyproject.toml; this file only adds the native build.
`specagent.simulator.fleet.sim`, `.config` and `.itercost` (native.NATIVE_MODULES) are plain, typed Python;
mypyc (a build requirement) compiles the very same source to C extensions that run the
fleet simulation 1.7-2.5x faster with bit-identical results (tests/test_native_engine.py).
The build records each compiled module's source hash beside it, and
`specagent.simulator.fleet.native` imports the sources instead when an extension is missing,
stale (the source was edited after the build) or disabled (SPECAGENT_PURE_PYTHON=1).
Without a C compiler the build warns and installs pure Python; with
SPECAGENT_PURE_PYTHON=1 at build time it does not try. A type error in those modules
fails the build: it is a bug in the source, not a limit of the machine.
`specagent --version` says which engine runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PACKAGE = "specagent.simulator.fleet"
# the module names, manifest file and switch, from the module that reads them at import (stdlib only)
_spec = importlib.util.spec_from_file_location("_specagent_native", ROOT / "simulator" / "fleet" / "native.py")
native = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # registered first, as dataclasses need
_spec.loader.exec_module(native)
NATIVE_MODULES = native.NATIVE_MODULES  # compiled together: fleet calls fleet_config's and itercost's classes natively
GROUP = f"{PACKAGE}._native"  # mypyc's shared library: specagent.simulator.fleet._native__mypyc
# Strict IEEE double arithmetic, as CPython does it: no fused multiply-add (the default on aarch64)
COMPILE_ARGS = ["-ffp-contract=off"] if os.name == "posix" else []


def _names() -> list[str]:
    return [f"{GROUP}__mypyc", *(f"{PACKAGE}.{m}" for m in NATIVE_MODULES)]


class BuildNative(build_ext):
    """build_ext that fills the placeholder extensions with mypyc's output when it builds them.

    mypy and the C generation run here, in `run`, not at every `setup.py` evaluation
    (pip evaluates it three times, twice only for metadata).
    """

    def run(self) -> None:
        try:
            generated = {e.name: e for e in self._generate()}
        except _PurePython as e:
            self.warn(f"specagent: building the pure-Python fleet engine only ({e})")
            self.extensions = []
            return
        for ext in self.extensions:  # already prepared by finalize_options under these names
            ext.__dict__.update({k: v for k, v in vars(generated[ext.name]).items() if not k.startswith("_")})
            ext.extra_compile_args = [*ext.extra_compile_args, *COMPILE_ARGS]
            ext.optional = True  # a failed C compile warns and installs pure Python, which native.py then loads
        super().run()
        self._write_manifest()

    def _generate(self) -> list[Extension]:
        if os.environ.get(native.PURE_ENV, "") not in ("", "0"):
            raise _PurePython(f"{native.PURE_ENV} is set")
        try:
            from mypyc.build import mypycify
        except ImportError as e:
            raise _PurePython("mypyc is not installed in the build environment") from e
        package_dir = self.distribution.package_dir or {}
        stage = ROOT / "build" / "mypyc-src"
        # mypy names a module by its path, so compile a copy laid out as the installed package
        shutil.rmtree(stage, ignore_errors=True)
        for pkg in self.distribution.packages or []:
            src = ROOT / package_dir.get(pkg, pkg.replace(".", "/"))
            dst = stage.joinpath(*pkg.split("."))
            dst.mkdir(parents=True, exist_ok=True)
            for f in src.glob("*.py"):
                shutil.copy2(f, dst / f.name)
        paths = [str((stage / PACKAGE.replace(".", "/") / f"{m}.py").relative_to(ROOT)) for m in NATIVE_MODULES]
        # the hashes of the very files compiled (a source edited while this runs must read as stale)
        self.compiled_sha256 = {m: native.source_sha256(ROOT / p) for m, p in zip(NATIVE_MODULES, paths)}
        print(f"specagent: compiling {', '.join(paths)} with mypyc", file=sys.stderr)
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            exts = mypycify(["--follow-imports=silent", "--ignore-missing-imports", "--python-version",
                             f"{sys.version_info.major}.{sys.version_info.minor}", *paths],
                            opt_level="3", group_name=GROUP, target_dir=str(ROOT / "build" / "mypyc"))
        except SystemExit as e:  # mypy reports type errors (printed above) by exiting: a bug in the source, not the machine
            raise SystemExit(f"specagent: mypyc found type errors in {', '.join(paths)} (listed above); fix them, "
                             f"or install the pure-Python engine with {native.PURE_ENV}=1") from e
        finally:
            os.chdir(cwd)
        if sorted(e.name for e in exts) != sorted(_names()):
            raise _PurePython(f"mypyc produced {[e.name for e in exts]}, expected {_names()}")
        return exts

    def _write_manifest(self) -> None:
        src = ROOT / (self.distribution.package_dir or {}).get(PACKAGE, PACKAGE.replace(".", "/"))
        manifest = json.dumps(self.compiled_sha256, indent=1, sort_keys=True) + "\n"
        # beside the built extensions (the wheel) and, for in-place/editable builds, beside the sources
        targets = {Path(self.get_ext_fullpath(f"{PACKAGE}.{NATIVE_MODULES[0]}")).parent}
        if self.inplace or getattr(self, "editable_mode", False):
            targets.add(src)
        for d in targets:
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{native.MANIFEST}.tmp"
            tmp.write_text(manifest)
            os.replace(tmp, d / native.MANIFEST)


class _PurePython(Exception):
    """Why the native build is skipped."""


# Placeholders with the extensions' final names, so setuptools runs build_ext and tags the
# wheel for this platform; BuildNative.run fills them with mypyc's sources (or drops them).
setup(ext_modules=[Extension(name, sources=[]) for name in _names()], cmdclass={"build_ext": BuildNative})
