"""Mutation run on the cost model: how many small bugs in costmodel/*.py do its tests catch?

Usage (from the repository root):

    .venv/bin/python tools/mutation.py                 # every mutant of costmodel/*.py
    .venv/bin/python tools/mutation.py --tests 'tests/test_costmodel_*.py,tests/test_latency_fit.py' --max-children 2

Why a mutation run: a test suite that passes says nothing about whether it would fail
on a wrong formula. mutmut (https://github.com/boxed/mutmut, pinned below) makes one
small change at a time to the cost model (an operator, a constant, a comparison, an
argument dropped) and runs the tests that cover the changed function; a mutant the tests
do not notice ("survived") is either a gap in the tests or an equivalent program.

How it runs: mutmut 3 expects the package it mutates to be importable under the path it
copies, but specagent maps its sub-packages from top-level folders (pyproject's
[tool.setuptools] package-dir). So the script stages a plain package layout under
build/mutation/ (read from that mapping, nothing hard-coded about the files' contents),
writes mutmut's configuration there, and runs `mutmut run` in it. mutmut records which
tests call which function, then runs only those tests per mutant, in forked workers, so
the whole cost model takes minutes on two cores and no mutant is sampled.

Equivalent mutants (a change that cannot alter any result) are listed, with the reason,
in tools/mutation_equivalent.toml, matched by file, function and the mutated line's text
(not by mutmut's numbering, which shifts when the code changes); the score is printed
with and without them. Exit status: 0 when the surviving share (excluding documented
equivalents) is at most the target, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "mutation"
MUTMUT = "mutmut==3.8.1"
TARGET_SURVIVING = 0.10
TARGET_PACKAGE = "specagent.costmodel"
DEFAULT_TESTS = "tests/test_costmodel_*.py,tests/test_latency_fit.py"  # the cost model's own tests (costmodel/*.py)
EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.toml"
IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "_native_build.json")


def ensure_mutmut() -> Path:
    """mutmut is a developer tool, not a test dependency: installed here, pinned, on first use."""
    exe = Path(sys.executable).with_name("mutmut")
    try:
        from importlib.metadata import version

        if version("mutmut") == MUTMUT.split("==")[1] and exe.exists():
            return exe
    except Exception:  # noqa: BLE001 - not installed, or metadata unreadable: install
        pass
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", MUTMUT], check=True)
    return exe


def stage(tests: list[str]) -> Path:
    """A plain package tree (specagent/costmodel/... as folders) plus the selected tests."""
    if STAGE.exists():
        shutil.rmtree(STAGE)
    STAGE.mkdir(parents=True)
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    for pkg, src in sorted(setup["package-dir"].items(), key=lambda kv: kv[0].count(".")):
        dest = STAGE / pkg.replace(".", "/")
        shutil.copytree(ROOT / src, dest, ignore=IGNORE, dirs_exist_ok=True)
    (STAGE / "tests").mkdir()
    for t in tests:
        shutil.copy2(ROOT / t, STAGE / "tests" / Path(t).name)
    target = TARGET_PACKAGE.replace(".", "/") + "/"
    selection = ", ".join(f'"tests/{Path(t).name}"' for t in tests)
    (STAGE / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        f'source_paths = ["{target}"]\n'
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        # fixed hypothesis seed: the same mutant gets the same verdict on every run
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "--hypothesis-seed=0"]\n'
        "use_git_change_detection = false\n"
        "\n[tool.pytest.ini_options]\n"
        'testpaths = ["tests"]\n',
        encoding="utf-8",
    )
    return STAGE


def run_mutmut(exe: Path, max_children: int) -> float:
    env = dict(os.environ, SPECAGENT_PURE_PYTHON="1")  # the compiled fleet engine is not staged
    env.pop("PYTHONPATH", None)
    t0 = time.perf_counter()
    r = subprocess.run([str(exe), "run", "--max-children", str(max_children)], cwd=STAGE, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    (STAGE / "mutmut-run.log").write_text(r.stdout, encoding="utf-8")
    if r.returncode != 0:
        sys.exit(f"mutmut run failed (exit {r.returncode}); its output is in {STAGE / 'mutmut-run.log'}:\n"
                 + "\n".join(r.stdout.splitlines()[-30:]))
    return wall


# Run inside build/mutation/ with mutmut's own readers: every mutant's outcome, and for the undetected ones the
# function and the changed lines (one process, instead of one `mutmut show` per mutant).
_COLLECT = r"""
import json, re
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files
from mutmut.utils.format_utils import orig_function_and_class_names_from_key
out = []
for path in walk_mutatable_files():
    m = SourceFileMutationData(path=path)
    m.load()
    for key, code in m.exit_code_by_key.items():
        rec = {"name": key, "status": status_by_exit_code[code], "path": str(path)}
        if rec["status"] in ("survived", "no tests"):
            func, cls = orig_function_and_class_names_from_key(key)
            rec["function"] = f"{cls}.{func}" if cls else func
            diff = get_diff_for_mutant(key, path=path).splitlines()
            hunk = next((ln for ln in diff if ln.startswith("@@")), "@@ -1 @@")
            rec["offset"] = int(re.match(r"@@ -(\d+)", hunk).group(1))
            body = diff[diff.index(hunk) + 1:] if hunk in diff else []
            rec["lead"] = next((i for i, ln in enumerate(body) if ln[:1] in "-+"), 0)
            rec["before"] = [ln[1:] for ln in body if ln.startswith("-")]
            rec["after"] = [ln[1:] for ln in body if ln.startswith("+")]
        out.append(rec)
print(json.dumps(out))
"""


def collect() -> list[dict]:
    env = dict(os.environ, SPECAGENT_PURE_PYTHON="1")
    r = subprocess.run([sys.executable, "-c", _COLLECT], cwd=STAGE, env=env, check=True, stdout=subprocess.PIPE, text=True)
    recs = json.loads(r.stdout)
    for rec in recs:
        if "function" in rec:
            locate(rec)
    return recs


def locate(rec: dict) -> None:
    """File and absolute line of a mutation in the repository's own file (mutmut's diff numbers lines per function)."""
    rel = Path(rec["path"]).relative_to(TARGET_PACKAGE.replace(".", "/"))
    src_dir = _package_dirs()[TARGET_PACKAGE]
    path = ROOT / src_dir / rel
    rec["file"] = f"{src_dir}/{rel}"
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    span = (1, len(lines))
    want = rec["function"].split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and len(want) == 2 and node.name == want[0]:
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == want[1]:
                    span = (f.lineno, f.end_lineno or f.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(want) == 1 and node.name == want[0]:
            if node.col_offset == 0:
                span = (node.lineno, node.end_lineno or node.lineno)
    guess = span[0] + rec["offset"] - 1 + rec["lead"]
    first = rec["before"][0].strip() if rec["before"] else ""
    hits = [i for i in range(span[0], span[1] + 1) if lines[i - 1].strip() == first]
    rec["line"] = min(hits, key=lambda i: abs(i - guess)) if hits else guess
    rec["before"] = " ".join(x.strip() for x in rec["before"])
    rec["after"] = " ".join(x.strip() for x in rec["after"])


def _package_dirs() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]


def load_equivalents() -> list[dict[str, str]]:
    if not EQUIVALENT_FILE.exists():
        return []
    return tomllib.loads(EQUIVALENT_FILE.read_text(encoding="utf-8")).get("equivalent", [])


def _norm(s: str) -> str:
    return " ".join(s.split())


def _strip_dtype(s: str) -> str:
    """The line without its dtype=/count= arguments and astype targets (for kind = "dtype" rules)."""
    s = re.sub(r"\b(dtype|count)=(np\.\w+|None|len\(\w+\))", "", _norm(s))
    s = re.sub(r"astype\((np\.\w+|None)\)", "astype()", s)
    return re.sub(r"(,\s*)+\)", ")", s)


def is_equivalent(d: dict, eq: dict) -> bool:
    """A surviving mutant matches a documented rule: file and function regexes, then the changed line."""
    if not (re.fullmatch(eq["file"], d["file"]) and re.fullmatch(eq["function"], d["function"])):
        return False
    if eq.get("kind") == "dtype":
        return d["before"] != d["after"] and _strip_dtype(d["before"]) == _strip_dtype(d["after"])
    return bool(re.fullmatch(eq["before"], _norm(d["before"])) and re.fullmatch(eq["after"], _norm(d["after"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", default=DEFAULT_TESTS, help=f"comma-separated globs of test files to run against the mutants "
                                                          f"(default {DEFAULT_TESTS})")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 1, help="parallel mutant workers (default: CPU count)")
    ap.add_argument("--report-only", action="store_true", help="re-read the last run's results under build/mutation/")
    args = ap.parse_args(argv)

    exe = ensure_mutmut()
    tests = sorted({str(Path(p).relative_to(ROOT)) for g in args.tests.split(",") if g.strip() for p in glob.glob(str(ROOT / g.strip()))})
    if not tests:
        sys.exit(f"--tests {args.tests!r} matches no file")
    wall = float("nan")
    if not args.report_only:
        stage(tests)
        wall = run_mutmut(exe, args.max_children)
    recs = collect()
    if not recs:
        sys.exit("mutmut reported no mutants (is costmodel/ staged? see build/mutation/mutmut-run.log)")
    res = {r["name"]: r["status"] for r in recs}
    counts = Counter(res.values())
    details = {r["name"]: r for r in recs if "function" in r}
    undetected = sorted(details)
    eqs = load_equivalents()
    equivalent = {n for n, d in details.items() if any(is_equivalent(d, e) for e in eqs)}
    used = {i for i, e in enumerate(eqs) for d in details.values() if is_equivalent(d, e)}

    total = len(res)
    print(f"mutation run on {TARGET_PACKAGE} ({mutmut_version()}), tests: {', '.join(tests)}")
    if wall == wall:
        print(f"wall time {wall:.0f} s with {args.max_children} workers; every mutant run (no sampling)")
    print("mutants by outcome: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    by_file = Counter(d["file"] for d in details.values())
    print("undetected by file: " + (", ".join(f"{f} {n}" for f, n in sorted(by_file.items())) or "none"))
    print(f"\n{'file:line':<28} {'function':<34} mutation")
    for n, d in sorted(details.items(), key=lambda kv: (kv[1]["file"], kv[1]["line"], kv[0])):
        tag = "  [equivalent]" if n in equivalent else ("  [no test covers it]" if res[n] == "no tests" else "")
        print(f"{d['file'] + ':' + str(d['line']):<28} {d['function']:<34} {d['before']!r} -> {d['after']!r}{tag}")
    stale = [e for i, e in enumerate(eqs) if i not in used]
    for e in stale:
        print(f"note: a documented equivalent rule matched no surviving mutant (stale?): {e['file']} {e['function']}: "
              f"{e.get('kind') or e['before'][:60]!r}")
    raw = len(undetected) / total
    real = (len(undetected) - len(equivalent)) / (total - len(equivalent))
    print(f"\nsurviving (survived + no tests) {len(undetected)}/{total} = {raw:.1%}; "
          f"excluding {len(equivalent)} documented equivalent mutants {len(undetected) - len(equivalent)}/"
          f"{total - len(equivalent)} = {real:.1%}; target <= {TARGET_SURVIVING:.0%}: "
          f"{'met' if real <= TARGET_SURVIVING else 'NOT met'} (ratio to target {real / TARGET_SURVIVING:.2f})")
    return 0 if real <= TARGET_SURVIVING else 1


def mutmut_version() -> str:
    from importlib.metadata import version

    return f"mutmut {version('mutmut')}"


if __name__ == "__main__":
    sys.exit(main())
