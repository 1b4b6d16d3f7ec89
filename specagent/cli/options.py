"""Command-line flags generated from the Scenario's fields, so help and defaults cannot drift from it.

`scenario_parameters(...)` gives a command `--scenario FILE.toml`, `--edge`, `--accept` and one
flag per Scenario field (nested fields flattened: `--strong-gpus`, `--weak-ratio`, `--trace`),
each defaulting to "not given", and builds the Scenario they describe: the file (or the built-in
default), then every flag given, validated by the Scenario itself, with its Provenance (the file,
the fields given, the files read), which a job's Request carries (specagent/cli/requests.py).
A bad value fails as one line naming the flag. `Flag` is the one kind of generated flag; `deployment_flags` gives a
Request's deployment field its flags (the roofline commands).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import typer

from specagent.cli.console import fail
from specagent.cli.panels import SCENARIO, panel_of_path
from specagent.common.errors import InputError
from specagent.simulator.scenario import (
    DEPLOYMENT_FLAGS, FIT_CONTEXT, SHIPPED, SINGLE_DEPLOYMENT_FLAGS, DeploymentSpec, DoesNotFit, Scenario, ScenarioError,
    load_acceptance,
)
from specagent.simulator.protocol.setting import Setting
from specagent.simulator.jobs.base import Provenance


@dataclass(frozen=True)
class Flag:
    """One generated option (or argument): the field it sets (a Request field, a scenario field's dotted path,
    ``deployment.gpus``) and how it looks on the command line. The one kind of flag every command's options are made of
    (`scenario_flags` here, `requests.job_flags` for a Request's own fields)."""

    path: str
    param: str  # the Python parameter name typer passes it as
    names: tuple[str, ...]  # the flag and its aliases
    type: Any  # str, int, float, bool, Path, or tuple for a repeatable option
    help: str
    default: Any  # dataclasses.MISSING: the field has none
    panel: str | None = None
    item: Any = str  # the type of a tuple's items: str, int, float, or Path for files
    argument: bool = False  # a positional argument (metadata ``argument: True``), named by its metavar
    bounds: tuple[Any, Any] = (None, None)  # (min, max) of a number, None: unbounded
    must: bool = False  # metadata ``required: True``
    metavar: str | None = None  # an argument's name in the usage line (default: the field in upper case)
    unset: bool = False  # a scenario flag: "not given" (None) until typed, the value it would take shown in its help

    @property
    def repeated(self) -> bool:
        return self.type is tuple

    @property
    def required(self) -> bool:
        return self.must or self.default is dataclasses.MISSING

    @property
    def shown_name(self) -> str:
        """What an error names it by: the flag, or an argument's metavar."""
        return (self.metavar or self.path.upper()) if self.argument else self.names[0]

    def parameter(self) -> inspect.Parameter:
        decls = (f"{self.names[0]}/--no-{self.names[0][2:]}", *self.names[1:]) if self.type is bool else self.names
        # a list's items reach requests.values as typed (comma lists split there, numbers converted naming the flag)
        items = Path if self.item is Path else str
        annotation = {tuple: Optional[list[items]], Path: Optional[Path]}.get(self.type, Optional[self.type])  # type: ignore[valid-type]
        if self.unset:
            return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=typer.Option(
                None, *decls, help=f"{self.help} [default: {_shown(self.default)}]", show_default=False,
                rich_help_panel=self.panel))
        default = ... if self.required else [] if self.repeated else self.default
        lo, hi = self.bounds
        extra: dict[str, Any] = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        shown: bool | str = not self.required and self.default not in (None, (), "")
        if self.repeated and shown:  # a list's default as it is typed: 0.05,0.2
            shown = ",".join(map(str, self.default))
        if self.argument:
            make = typer.Argument(default, metavar=self.metavar or self.path.upper(), help=self.help,
                                  rich_help_panel=self.panel, show_default=shown, **extra)
        else:
            if self.repeated:  # not typer's "list[str]"
                extra["metavar"] = "FILE" if self.item is Path else "LIST"
            make = typer.Option(default, *decls, help=self.help, rich_help_panel=self.panel, show_default=shown, **extra)
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=make)


def _shown(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, tuple):
        return ",".join(map(str, v))
    return "none" if v is None else str(v)


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def deployment_flag(role: str, name: str) -> str:
    """The flag of deployment field `name`: `--strong-gpus`, `--weak-dtype` (weight_dtype); `--gpus`, `--weight-dtype`
    for a command about one deployment (role '')."""
    return f"--{_kebab(SINGLE_DEPLOYMENT_FLAGS.get(name, name))}" if not role else f"--{role}-{_kebab(DEPLOYMENT_FLAGS.get(name, name))}"


def _is_scalar(typ: Any) -> bool:
    return typ in (str, int, float, bool)


def scenario_flags(exclude: Iterable[str] = ()) -> list[Flag]:
    """A flag for every scalar field of the Scenario and its entries, except paths under `exclude`."""
    skip = tuple(exclude)
    default = Scenario()
    hints = _hints(Scenario)
    out: list[Flag] = []
    for f in fields(Scenario):
        value = getattr(default, f.name)
        if f.name in ("weak", "strong"):
            out += deployment_flags(f.name, value, role=f.name)
        elif dataclasses.is_dataclass(value):
            sub_hints = _hints(type(value))
            for g in fields(value):
                path = f"{f.name}.{g.name}"
                typ = sub_hints[g.name]
                if g.metadata.get("cli") is False or not _is_scalar(typ):
                    continue
                names = (f"--{_kebab(g.metadata.get('flag', g.name))}", *g.metadata.get("aliases", ()))
                out.append(Flag(path, path.replace(".", "__"), names, typ, g.metadata.get("help", g.name),
                                getattr(value, g.name), panel_of_path(path), unset=True))
        elif f.metadata.get("cli") is not False:
            typ = hints[f.name]
            if f.name == "strategies":
                typ = str
            if not _is_scalar(typ):
                continue
            out.append(Flag(f.name, f.name, (f"--{_kebab(f.metadata.get('flag', f.name))}",), typ,
                            f.metadata.get("help", f.name), value, panel_of_path(f.name), unset=True))
    return [fl for fl in out if not any(fl.path == s or fl.path.startswith(s + ".") for s in skip)]


def _hints(cls: type) -> dict[str, Any]:
    """Field types, with `X | None` read as X (the flag is optional anyway)."""
    out = {}
    for name, t in typing.get_type_hints(cls).items():
        args = [a for a in typing.get_args(t) if a is not type(None)]
        out[name] = args[0] if args and type(None) in typing.get_args(t) else t
    return out


# The flags every scenario command has besides the generated ones.
_SCENARIO_FILE = inspect.Parameter("scenario_file", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path], default=typer.Option(
    None, "--scenario", rich_help_panel=SCENARIO, help=f"Scenario TOML file (or a shipped one: {', '.join(SHIPPED)}); the flags below override it. "
                             "`specagent scenario show` prints the built-in default."))
_EDGE = inspect.Parameter("edge", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
    False, "--edge", rich_help_panel=SCENARIO, help="Start from the shipped edge–cloud scenario: Weak on one RTX 5090, Strong behind an API."))
_ACCEPT = inspect.Parameter("accept", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[float], default=typer.Option(
    None, "--accept", rich_help_panel=panel_of_path("acceptance"), help="One acceptance probability for every step kind, no position decay or correlation "
                           "(default: the per-kind calibrated table shown in the output)."))

_ACCEPTANCE_FILE = inspect.Parameter("acceptance_file", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path], default=typer.Option(
    None, "--acceptance", rich_help_panel=panel_of_path("acceptance"), help="An [acceptance] table (TOML, e.g. written by `specagent acceptance fit`) replacing the "
                               "scenario's acceptance model; --accept and the acceptance flags apply on top."))


_HARDWARE = inspect.Parameter("hardware", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Option(
    None, "--hardware", rich_help_panel=SCENARIO, help="GPU type for both pools (a hardware profile id or alias, e.g. h200); --weak-hardware and "
                             "--strong-hardware override it per pool."))


def scenario_parameters(exclude: Iterable[str] = ()) -> tuple[list[inspect.Parameter], Callable[[dict[str, Any]], tuple[Scenario, Provenance]]]:
    """The scenario's command parameters (--scenario, --edge, --acceptance, --accept, --hardware and the generated
    flags, minus `exclude`), and a function that pops their values from a command's keyword arguments and builds the
    Scenario they describe with its Provenance."""
    flags = scenario_flags(exclude)
    both = {"weak.hardware", "strong.hardware"} <= {fl.path for fl in flags}  # --hardware sets both pools' GPU type
    with_acc = "acceptance" not in tuple(exclude)
    gen = [fl.parameter() for fl in flags]
    params = [_SCENARIO_FILE, _EDGE, *([_ACCEPTANCE_FILE, _ACCEPT] if with_acc else []), *([_HARDWARE] if both else []), *gen]

    def build(kw: dict[str, Any]) -> tuple[Scenario, Provenance]:
        given = {fl.path: kw.pop(fl.param) for fl in flags}
        hw = kw.pop("hardware", None)
        if hw is not None:
            for path in ("weak.hardware", "strong.hardware"):
                given[path] = given[path] if given[path] is not None else hw
        return scenario_and_provenance({p: v for p, v in given.items() if v is not None}, kw.pop("scenario_file"),
                                       kw.pop("edge"), kw.pop("accept") if with_acc else None, flags,
                                       kw.pop("acceptance_file") if with_acc else None)

    return params, build


def scenario_and_provenance(values: dict[str, Any], scenario_file: Path | None, edge: bool, accept: float | None,
                            flags: list[Flag], acceptance_file: Path | None = None) -> tuple[Scenario, Provenance]:
    """`build_scenario`'s scenario, and its Provenance: the scenario file, the fields given (``acceptance`` too for
    --accept), the --scenario and --acceptance files among the inputs."""
    if scenario_file is not None and edge:
        fail("give --scenario or --edge, not both")
    try:
        base = Scenario.load(scenario_file) if scenario_file is not None else Scenario.load("edge") if edge else Scenario()
        if acceptance_file is not None:
            base = base.replace(acceptance=load_acceptance(acceptance_file))
    except ScenarioError as exc:
        fail(f"--acceptance: {exc}" if acceptance_file is not None and exc.where.startswith("acceptance") else str(exc))
    if accept is not None:
        try:
            base = base.replace(acceptance=base.acceptance.with_constant(accept))
        except InputError as exc:
            fail(f"--accept: {exc}")
    # a workload flag replaces the base's workload kind (`--edge --trace FILE` runs that trace, not the edge
    # scenario's synthetic profile); both flags at once are still refused by the Workload's own check
    values = dict(values)
    for given, other in (("workload.trace", "workload.synthetic"), ("workload.synthetic", "workload.trace")):
        if values.get(given) is not None and other not in values:
            values[other] = None
    try:
        out = base.override(values)
    except ScenarioError as exc:
        fail(located_error(exc, flags))
    given = frozenset(values) | ({"acceptance"} if accept is not None and scenario_file is not None else frozenset())
    inputs = {flag: (str(p),) for flag, p in (("--scenario", scenario_file), ("--acceptance", acceptance_file)) if p is not None}
    return out, Provenance(str(scenario_file) if scenario_file is not None else None, given, inputs)


def guard_outputs(outputs: Any, *, scenario: Scenario | None = None, inputs: Any = (), kinds: Any = None,
                  provenance: Provenance | None = None, writable: bool = False) -> None:
    """`common.paths.check_outputs` at a command's boundary, with the scenario's files among the inputs: one `error:`
    line (exit 2) before any work for an output over an input, two outputs in one file, or a file the option did not
    write; with `writable`, then every output given is checked writable (`common.atomic.check_writable`: before a long
    run, not after it)."""
    from specagent.common import atomic
    from specagent.common.paths import check_outputs
    from specagent.simulator.jobs.base import input_files

    ins = [*(inputs.items() if isinstance(inputs, dict) else inputs),
           *(input_files(scenario, provenance).items() if scenario is not None else ())]
    try:
        check_outputs(outputs, ins, InputError, kinds=kinds)
    except InputError as exc:
        fail(str(exc))
    for item in (outputs.items() if isinstance(outputs, dict) else outputs) if writable else ():
        if item[1] is not None:
            atomic.check_writable(item[1])


def located_error(exc: ScenarioError, flags: list[Flag], origin: tuple[str, frozenset[str]] | None = None) -> str:
    """The error prefixed with the flag that sets its field (the longest matching path), if any.

    With `origin` (the scenario file and the fields flags set), a field no flag set is named as
    the file's key: the value came from the file, and naming a flag the user never gave misleads."""
    if origin is not None and exc.where:
        path, given = origin
        if not any(exc.where == g or exc.where.startswith(g + ".") or g.startswith(exc.where + ".") for g in given):
            return f"{path}: {exc.where}: {exc}"
    for fl in sorted(flags, key=lambda f: -len(f.path)):
        if exc.where == fl.path or exc.where.startswith(fl.path + "."):
            return f"{fl.names[0]}: {exc}"
    if exc.where.startswith(("acceptance.accept", "acceptance.exact")):
        return f"--accept: {exc}"
    return f"scenario field {exc.where}: {exc}" if exc.where else str(exc)


def scenario_failure(exc: ScenarioError, provenance: Provenance | None = None, exclude: Iterable[str] = ()) -> str:
    """The one line a ScenarioError found while a job ran prints: a deployment too small names the flags that give it
    more GPUs or a smaller weight dtype; any other names the flag of its field, or the scenario file's key when no
    flag set that field (`provenance`: where the request's scenario came from)."""
    if isinstance(exc, DoesNotFit):
        role = exc.where
        return f"{exc}; set {deployment_flag(role, 'gpus')} or {deployment_flag(role, 'weight_dtype')}"
    origin = (provenance.scenario_file, provenance.given) if provenance is not None and provenance.scenario_file else None
    return located_error(exc, scenario_flags(exclude), origin)


def resolve(scenario: Scenario, hardware_dirs: Iterable[Path] = (), exclude: Iterable[str] = (),
            fit_context: int | None = FIT_CONTEXT) -> Setting:
    """The scenario's deployments, loaded and checked for fit (one `fit_context`-token sequence each; None: the caller
    checks the sequences it will serve); a failure names the flags that fix it (`scenario_failure`)."""
    try:
        return scenario.setting(hardware_dirs, fit_context)
    except ScenarioError as exc:
        fail(scenario_failure(exc, exclude=exclude))


# ------------------------------------------------------------------------------------- one deployment
def deployment_flags(name: str, default: DeploymentSpec, role: str = "") -> list[Flag]:  # type: ignore[valid-type]
    """The flags of a deployment field `name`, one per scalar field, defaulting to `default`'s values: a scenario's
    role (`--strong-gpus`, "not given" until typed) or a Request's one deployment (role '': `--gpus`, `roofline`)."""
    hints = _hints(DeploymentSpec)
    return [Flag(f"{name}.{f.name}", f"{name}__{f.name}", (deployment_flag(role, f.name),), hints[f.name],
                 f"{role.capitalize() + ': ' if role else ''}{f.metadata.get('help', f.name)}.", getattr(default, f.name),
                 panel_of_path(f"{name}.{f.name}") if role else None, unset=bool(role))
            for f in fields(DeploymentSpec) if _is_scalar(hints[f.name]) and f.metadata.get("cli") is not False]
