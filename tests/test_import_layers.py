"""Imports run one way: common → hardware → measurements → costmodel → traces → simulator → kernels → endpoints → reports → cli.

endpoints (the only network I/O: the chat-completions client, shadow verification, the live runner on served models)
sits above kernels because its live runner drives the SQLite airline service there, and below the command line.

Every module's imports are read from its source (the ones inside functions too, which a
runtime check would miss) and each arrow must point to the same layer or one below. Inside
the simulator the same holds for its own layers: the fleet engine and the pricing engines
never import the strategies, the scenario or the entry points above them. A module the
table does not place fails the test, so a new module gets a layer when it is added.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: package -> folder: pyproject.toml's package-dir mapping (the one place it is written), top-level packages only
FOLDERS = {pkg: folder for pkg, folder in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
           ["tool"]["setuptools"]["package-dir"].items() if pkg.count(".") == 1}
FOLDERS.update({p: f"specagent/{p.split('.')[1]}" for p in ("specagent.endpoints", "specagent.reports", "specagent.cli")})
LAYERS = ["specagent.common", "specagent.hardware", "specagent.measurements", "specagent.costmodel", "specagent.traces", "specagent.simulator",
          "specagent.kernels", "specagent.endpoints", "specagent.reports", "specagent.cli"]
#: The package root re-exports the public API lazily; only the command line may import it.
ROOT_RANK = LAYERS.index("specagent.cli")
#: The simulator's own layers, by module under specagent.simulator (a module may import its own layer or one below).
#: The subpackages follow them: protocol/ and acceptance/ (data and decisions), pricing/ and fleet/ (the engines),
#: strategies/, capacity/; the entry points sit at the top of the package. A subpackage's __init__ is listed as itself.
SIMULATOR = [
    {"protocol", "acceptance", "pricing", "strategies", "capacity", "fleet", "fleet.native",
     "protocol.phases", "protocol.plan", "acceptance.model", "acceptance.io", "acceptance.task_effect", "parallel",
     "rates_prices"},
    {"protocol.workload", "protocol.decisions", "protocol.setting", "protocol.environment",
     "acceptance.verdict_records", "acceptance.fit", "acceptance.ranges", "latency_error"},
    {"fleet.itercost", "fleet.config", "fleet.sim", "fleet.results", "fleet.trace",
     "pricing.des", "pricing.analytic", "pricing.results"},  # engines
    {"strategies.catalog", "strategies.lockstep"},
    {"scenario"},
    {"run", "synthetic", "provenance", "applicability"},
    {"capacity.fleet_build", "capacity.bounds", "capacity.steady_state", "predictor", "uncertainty", "explain"},
    {"jobs", "jobs.base"},  # the jobs layer: every module under jobs/ (a job composes everything below it)
]


def modules() -> dict[str, Path]:
    return dict(_modules())


@functools.cache
def _modules() -> dict[str, Path]:
    """The tree is scanned once per run (it was once per module: 23 s of the suite)."""
    out = {"specagent": ROOT / "specagent" / "__init__.py"}
    for pkg, folder in FOLDERS.items():
        for f in sorted((ROOT / folder).rglob("*.py")):  # subpackages too (simulator/fleet/, ...)
            parts = f.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((pkg, *parts))] = f
    return out


def rank(module: str) -> tuple[int, int]:
    """(layer, sub-layer) of a specagent module; KeyError for a module no layer holds."""
    if module == "specagent":
        return ROOT_RANK, 0
    for i, pkg in reversed(list(enumerate(LAYERS))):
        if module == pkg or module.startswith(pkg + "."):
            if pkg == "specagent.simulator" and module != pkg:
                sub = module.removeprefix(pkg + ".")
                sub = "jobs" if sub.startswith("jobs.") and sub != "jobs.base" else sub
                return i, next(j for j, group in enumerate(SIMULATOR) if sub in group)
            return i, 0
    raise KeyError(module)


def imports(module: str, source: str, known: set[str]) -> list[tuple[str, int]]:
    """(imported specagent module, line) for every import statement, at any depth."""
    is_package = module in FOLDERS or module == "specagent" or _modules().get(module, Path()).name == "__init__.py"
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(_parsed(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "specagent"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != "specagent":
                continue
            for a in node.names:  # `from pkg import submodule` imports the submodule
                out.append((f"{base}.{a.name}" if f"{base}.{a.name}" in known else base, node.lineno))
    return out


@functools.cache
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


def upward(mods: dict[str, str]) -> list[str]:
    """Every import arrow pointing to a higher layer, as 'importer:line -> imported'."""
    known = set(mods)
    bad = []
    for mod, source in mods.items():
        for target, line in imports(mod, source, known):
            if target == mod or rank(target) <= rank(mod):
                continue
            bad.append(f"{mod}:{line} -> {target}")
    return bad


def test_every_module_has_a_layer():
    unplaced = []
    for mod in modules():
        try:
            rank(mod)
        except (KeyError, StopIteration):
            unplaced.append(mod)
    assert not unplaced, f"give these modules a layer in tests/test_import_layers.py: {unplaced}"


def test_every_folder_of_modules_is_an_installed_package():
    """A subpackage missing from pyproject.toml's `packages` imports from the checkout and is absent from a wheel
    (reports/screens/ was, until the base-install test in the slow tier caught it)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {m for m, f in modules().items() if f.name == "__init__.py"}
    assert sorted(found - listed) == []


def test_no_import_points_up():
    mods = {m: p.read_text(encoding="utf-8") for m, p in modules().items()}
    assert upward(mods) == []


@pytest.mark.parametrize("importer, source", [
    ("specagent.costmodel.roofline", "def f():\n    from specagent.simulator.run import simulate\n"),  # inside a function
    ("specagent.simulator.fleet.sim", "from specagent.simulator import run\n"),  # engine -> entry points
    ("specagent.simulator.fleet.sim", "from specagent.simulator.strategies.catalog import SpecAgent\n"),  # fleet -> strategies
    ("specagent.simulator.protocol.plan", "from specagent.simulator.capacity import bounds\n"),  # `from subpackage import module`
    ("specagent.traces.io", "from specagent import atomic\n"),  # the package root, from the core
    ("specagent.simulator.scenario", "from ..reports import html\n"),  # relative
])
def test_the_check_fails_on_an_upward_arrow(importer, source):
    mods = {m: "" for m in modules()}
    mods[importer] = source
    assert len(upward(mods)) == 1


def test_the_core_imports_nothing_at_the_package_root():
    """Importing a layer does not import the layers above it (the root re-exports lazily)."""
    import subprocess
    import sys

    code = ("import sys; import specagent.costmodel.roofline, specagent.traces.io; "
            "print(sorted(m for m in sys.modules if m.startswith(('specagent.simulator', 'specagent.reports', 'specagent.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def private_uses(module: str, source: str) -> list[str]:
    """Every private name (one leading underscore) one module takes from another, as 'importer:line name':
    `from x import _name`, and `x._name` where `x` names a specagent module this one imported. A private name is the
    module's own business; a caller that needs it needs a public name instead."""
    imported = {}  # local name -> specagent module it is bound to
    bad = []
    for node in ast.walk(_parsed(source)):
        if isinstance(node, ast.ImportFrom):
            if not node.level and (node.module or "").split(".")[0] != "specagent":
                continue  # another package's names are its own business
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    bad.append(f"{module}:{node.lineno} {a.name}")
                else:
                    imported[a.asname or a.name] = a.name
        elif isinstance(node, ast.Import):
            imported.update({a.asname or a.name.split(".")[0]: a.name for a in node.names
                             if a.name.split(".")[0] == "specagent"})
    for node in ast.walk(_parsed(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in imported):
            bad.append(f"{module}:{node.lineno} {node.value.id}.{node.attr}")
    return bad


def test_no_private_name_crosses_a_module():
    mods = {m: p.read_text(encoding="utf-8") for m, p in modules().items()}
    assert [b for m, s in mods.items() for b in private_uses(m, s)] == []


@pytest.mark.parametrize("source", [
    "from specagent.simulator.fleet.sim import _Engine\n",
    "from .sim import _Engine as Engine\n",
    "def f():\n    from specagent.common import atomic\n    return atomic._tmp_name('x')\n",
    "import specagent.simulator.fleet.sim\nspecagent._x\n",
])
def test_the_private_check_fails_on_a_private_name(source):
    assert len(private_uses("specagent.simulator.fleet.config", source)) == 1


#: The longest a function may be (issue #50): a command body in specagent/cli parses flags, runs its job and prints; any
#: other function that grows past the package limit is split into named steps.
CLI_LIMIT, PACKAGE_LIMIT = 60, 120


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function (methods and nested ones too) longer than `limit` lines."""
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(_parsed(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_is_longer_than_its_limit():
    long = {m: long_functions(p.read_text(encoding="utf-8"), CLI_LIMIT if m.startswith("specagent.cli") else PACKAGE_LIMIT)
            for m, p in modules().items()}
    assert {m: f for m, f in long.items() if f} == {}


def test_the_length_check_fails_on_a_long_function():
    body = "".join(f"    x{i} = {i}\n" for i in range(CLI_LIMIT))
    assert long_functions(f"def f():\n{body}", CLI_LIMIT) == [("f", 1, CLI_LIMIT + 1)]
    assert long_functions(f"def f():\n{body[:-len(body.splitlines(True)[-1])]}", CLI_LIMIT) == []
