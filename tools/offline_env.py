"""Run specagent from this working tree on a machine with no network (the lent GPU machine).

Why: that machine has Python 3.12 with torch, numpy, scipy, pandas, pyarrow, typer and
rich, but not every runtime dependency of specagent, and nothing can be fetched there.
Three steps, each a subcommand:

* ``download`` (here, with network): wheels of the missing pure-Python packages (and
  pydantic-core's manylinux wheel) for the target Python into a git-ignored folder
  (default ``.whl/``), then checks that every requirement of every wheel is either carried
  or provided by the target machine (`unmet_requirements`);
* ``stage DEST`` (there): the package laid out as installed (``pyproject.toml``'s
  package-dir mapping: ``common/`` becomes ``specagent/common`` …, package data included)
  by copying, so ``PYTHONPATH=DEST`` imports it — nothing compiled, no pip, no build
  backend (the fleet engine then runs from source, as with SPECAGENT_PURE_PYTHON=1);
* ``install WHEELS TARGET`` (there): ``pip install --no-index --no-deps --target`` of the
  carried wheels (`install_command`).

``check`` imports every runtime dependency and names the missing ones.
"""

from __future__ import annotations

import argparse
import email.parser
import importlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Wheels to carry (versions as this project's tested environment has them): the runtime
#: dependencies the GPU machine's image lacks, with their own requirements. typing-extensions
#: is carried because pydantic 2.14 needs >= 4.16 and the image's version is not known.
WHEELS: dict[str, str] = {
    "pydantic": "2.14.4",
    "pydantic-core": "2.50.5",
    "annotated-types": "0.8.0",
    "typing-inspection": "0.4.5",
    "typing-extensions": "4.16.0",
    "simpy": "4.1.2",
    "tomli-w": "1.2.0",
    "plotly": "7.1.0",
}
#: Packages the GPU machine's image provides (the workplace's device notes, package list read
#: 2026-11-17: /work/.library/device/KINDS.md); torch and numpy are used as they are there.
DEVICE_PROVIDES = frozenset({
    "numpy", "scipy", "pandas", "pyarrow", "typer", "rich", "torch", "narwhals", "packaging", "click",
    "shellingham", "markdown-it-py", "pygments", "mdurl", "python-dateutil", "six", "tzdata", "pytz", "transformers",
    "httpx", "httpcore", "h11", "anyio", "certifi", "idna",
})
#: pip's platform tags for a manylinux x86-64 machine (the device notes' recipe).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


def normalise(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_dependencies(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """Distribution names of [project].dependencies."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [normalise(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in deps]


#: Runtime distribution -> the module it installs (each one's name with '-' as '_').
IMPORT_NAMES = {d: d.replace("-", "_") for d in runtime_dependencies()}


def package_layout(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Path]:
    """Installed package name -> source folder, from [tool.setuptools] packages and package-dir."""
    tool = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    dirs = tool.get("package-dir", {})

    def folder(pkg: str) -> str:  # as setuptools resolves it: the nearest mapped parent, then the rest of the name
        parts = pkg.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in dirs:
                return "/".join([dirs[".".join(parts[:i])], *parts[i:]])
        return pkg.replace(".", "/")

    return {pkg: pyproject.parent / folder(pkg) for pkg in tool["packages"]}


def stage(dest: Path, pyproject: Path = ROOT / "pyproject.toml") -> Path:
    """Copy every package (its .py files and data, not caches or compiled extensions) to dest/<package path>."""
    dest = Path(dest)
    layout = package_layout(pyproject)
    if (dest / "specagent").exists():
        shutil.rmtree(dest / "specagent")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_native_build.json", "*.egg-info")
    for pkg, src in sorted(layout.items()):  # a package inside another's folder (specagent/cli) is copied twice, identically
        if not (src / "__init__.py").is_file():
            if src.is_dir():
                continue  # a data folder listed as a package: copied with its parent
            raise FileNotFoundError(f"{pyproject}: package {pkg} maps to {src}, which does not exist")
        shutil.copytree(src, dest.joinpath(*pkg.split(".")), ignore=skip, dirs_exist_ok=True)
    return dest


def requirements_of(wheel: Path) -> list[str]:
    """Requires-Dist lines of a wheel's METADATA that apply without extras."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = email.parser.Parser().parsestr(z.read(meta).decode())
    return [r for r in msg.get_all("Requires-Dist") or [] if "extra ==" not in r.replace("extra==", "extra ==")]


def unmet_requirements(requirements: dict[str, list[str]], carried: set[str], provided: frozenset[str] = DEVICE_PROVIDES) -> list[str]:
    """'wheel: requirement' for every requirement neither carried nor provided (pure; markers for other
    Pythons than 3.12 are not evaluated: a requirement is listed unless its name is covered)."""
    have = {normalise(n) for n in carried} | {normalise(n) for n in provided}
    out = []
    for wheel, reqs in sorted(requirements.items()):
        for r in reqs:
            name = normalise(re.split(r"[\s<>=!~;\[(]", r.strip(), maxsplit=1)[0])
            if name not in have:
                out.append(f"{wheel}: {r}")
    return out


def download_command(dest: Path, python_version: str = "3.12", wheels: dict[str, str] = WHEELS) -> list[str]:
    """pip download of the carried wheels for `python_version` on manylinux x86-64 (binary only, no dependencies)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
           "--implementation", "cp"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    return cmd + ["-d", str(dest)] + [f"{n}=={v}" for n, v in sorted(wheels.items())]


def install_command(wheels: Path, target: Path, python: str = sys.executable) -> list[str]:
    """pip install of every wheel in `wheels` into `target`, offline (--no-index), no dependency resolution."""
    files = sorted(str(p) for p in Path(wheels).glob("*.whl"))
    if not files:
        raise FileNotFoundError(f"no wheels in {wheels}: run `python tools/offline_env.py download` where pip has network")
    return [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade",
            "--target", str(target), *files]


def missing_imports(names: dict[str, str] = IMPORT_NAMES) -> list[str]:
    """Distributions whose import fails here (with the error)."""
    out = []
    for dist, mod in sorted(names.items()):
        try:
            importlib.import_module(mod)
        except Exception as exc:  # any import failure names the package
            out.append(f"{dist} ({type(exc).__name__}: {exc})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="download the carried wheels (needs network) and check their requirements")
    d.add_argument("--dest", type=Path, default=ROOT / ".whl")
    d.add_argument("--python-version", default="3.12")
    s = sub.add_parser("stage", help="lay the package out as installed under DEST (no build, no pip)")
    s.add_argument("dest", type=Path)
    i = sub.add_parser("install", help="pip install --no-index --no-deps --target TARGET the wheels in WHEELS")
    i.add_argument("wheels", type=Path)
    i.add_argument("target", type=Path)
    sub.add_parser("check", help="import every runtime dependency; exit 1 naming the missing ones")
    args = ap.parse_args(argv)
    if args.cmd == "download":
        args.dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(download_command(args.dest, args.python_version), check=True)
        reqs = {w.name: requirements_of(w) for w in sorted(args.dest.glob("*.whl"))}
        names = {normalise(w.split("-")[0]) for w in reqs}
        missing = set(map(normalise, WHEELS)) - names
        bad = unmet_requirements(reqs, names) + [f"not downloaded: {m}" for m in sorted(missing)]
        uncovered = [d for d in runtime_dependencies() if d not in names and d not in DEVICE_PROVIDES]
        bad += [f"runtime dependency neither carried nor on the device: {d}" for d in uncovered]
        for b in bad:
            print(f"offline_env: {b}", file=sys.stderr)
        print(f"offline_env: {len(reqs)} wheels in {args.dest}, {sum(w.stat().st_size for w in args.dest.glob('*.whl')) / 1e6:.1f} MB")
        return 1 if bad else 0
    if args.cmd == "stage":
        print(stage(args.dest))
        return 0
    if args.cmd == "install":
        subprocess.run(install_command(args.wheels, args.target), check=True)
        return 0
    bad = missing_imports()
    for b in bad:
        print(f"offline_env: missing {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
