"""Command-line options generated from a job's Request, so a job's defaults and help live in one place.

`@request_options(PredictRequest, exclude=...)` gives a command the Scenario's generated flags (options.py:
`--scenario`, `--weak-gpus`, …, minus `exclude`) and one flag per field of the Request that has no
``cli: False`` in its metadata: ``--field-name`` (or the ``flag`` metadata), ``short`` (``-o``), its
``help``, its default shown. The command is called with ``request=`` the Request they describe, its
``provenance`` filled in (the scenario file, the flags given, the files read). A bad value fails as one
line naming the flag: a ScenarioError by its scenario flag, a JobError by the field's flag.

Types a field may have: str, int, float, bool, Path, their ``X | None``, and ``tuple[str, ...]`` (a
repeatable option whose values may also be comma lists: ``--price h20=1.8,h200=3.5 --price b200=5``).
More metadata: ``argument: True`` makes the field a positional argument (a ``tuple[Path, ...]`` one takes several
files); ``min``/``max`` bound a number (typer refuses a value outside them with its usage error; the job's own
``check`` holds Python callers to the same bounds); a field without a default (a ``kw_only`` Request) is required.
A job that runs no scenario (``request_options(..., scenario=False)``) has none of the scenario's flags.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn, Optional

import typer

from specagent.cli.console import fail
from specagent.cli.options import build_scenario_for_request, scenario_parameters
from specagent.simulator.jobs.base import JobError, Request


@dataclass(frozen=True)
class JobFlag:
    """One generated option of a Request field."""

    field: str
    names: tuple[str, ...]
    type: Any
    default: Any
    help: str
    panel: str | None
    item: Any = str  # the type of a tuple's items (str, or Path for files)
    argument: bool = False
    bounds: tuple[Any, Any] = (None, None)  # (min, max) of a number, None: unbounded

    @property
    def repeated(self) -> bool:
        return self.type is tuple

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    def parameter(self) -> inspect.Parameter:
        if self.type is bool and not self.argument:
            decls: tuple[str, ...] = (f"{self.names[0]}/--no-{self.names[0][2:]}", *self.names[1:])
        else:
            decls = self.names
        annotation = {tuple: Optional[list[self.item]], Path: Optional[Path]}.get(self.type, Optional[self.type])  # type: ignore[name-defined]
        default = ... if self.required else [] if self.repeated else self.default
        lo, hi = self.bounds
        extra = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        if self.argument:
            make = typer.Argument(default, help=self.help, rich_help_panel=self.panel, show_default=False, **extra)
        else:
            make = typer.Option(default, *decls, help=self.help, rich_help_panel=self.panel,
                                show_default=not self.required and self.default not in (None, (), ""), **extra)
        return inspect.Parameter(f"job__{self.field}", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=make)


def _base_type(t: Any) -> tuple[Any, Any]:
    """The flag type of a field annotation and its items' type: X | None is X; tuple[str, ...] is (tuple, str)."""
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if type(None) in typing.get_args(t) and len(args) == 1:
        t = args[0]
    if typing.get_origin(t) is tuple:
        return tuple, typing.get_args(t)[0]
    return t, str


def job_flags(request_type: type[Request]) -> list[JobFlag]:
    """The options of a Request's own fields (the scenario and provenance are not options)."""
    hints = typing.get_type_hints(request_type)
    out = []
    for f in fields(request_type):
        if f.metadata.get("cli") is False:
            continue
        typ, item = _base_type(hints[f.name])
        if typ not in (str, int, float, bool, Path, tuple) or item not in (str, Path):
            raise TypeError(f"{request_type.__name__}.{f.name}: a {hints[f.name]} field cannot be a flag (cli: False)")
        name = "--" + f.metadata.get("flag", f.name).replace("_", "-")
        names = (name, *(f.metadata.get("short", ()) if isinstance(f.metadata.get("short", ()), tuple) else (f.metadata["short"],)))
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)  # type: ignore[misc]
        out.append(JobFlag(f.name, names, typ, default, f.metadata.get("help", f.name), f.metadata.get("panel"), item,
                           bool(f.metadata.get("argument")), (f.metadata.get("min"), f.metadata.get("max"))))
    return out


def flag_of(request_type: type[Request], field_name: str) -> str:
    """The flag a Request field is set by (its name when it has none); ``scenario.<path>`` is a field of the request's
    scenario, named by its scenario flag."""
    if field_name.startswith("scenario."):
        from specagent.cli.options import scenario_flags

        path = field_name.removeprefix("scenario.")
        return next((fl.names[0] for fl in scenario_flags() if fl.path == path and not fl.deprecated), f"scenario field {path}")
    return next((fl.names[0] for fl in job_flags(request_type) if fl.field == field_name), field_name)


def fail_job(request_type: type[Request], exc: BaseException) -> NoReturn:
    """One error line (exit 2) for a job's failure: a JobError about a field names the field's flag, and a field its
    message names as `` `name` `` is shown as that field's flag too (a Python caller reads the field names)."""
    text = str(exc)
    if isinstance(exc, JobError):
        fields_ = {fl.field for fl in job_flags(request_type)}
        text = re.sub(r"`(\w+)`", lambda m: flag_of(request_type, m.group(1)) if m.group(1) in fields_ else m.group(0), text)
        if exc.field:
            fail(f"{flag_of(request_type, exc.field)}: {text}")
    fail(text)


def _values(fl: JobFlag, v: Any) -> Any:
    if fl.repeated and fl.item is Path:  # files: each as given (a file name may hold a comma)
        return tuple(Path(p) for p in (v or []))
    if fl.repeated:
        return tuple(p.strip() for item in (v or []) for p in str(item).split(",") if p.strip())
    return v


def _no_scenario(kw: dict[str, Any]) -> tuple[Any, Any]:
    """A job that runs no scenario: the Request's defaults."""
    from specagent.simulator.jobs.base import Provenance
    from specagent.simulator.scenario import Scenario

    return Scenario(), Provenance()


def request_options(request_type: type[Request], exclude: Iterable[str] = (),
                    scenario: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the command gets the scenario's flags (none with `scenario=False`) and the Request's, and is called
    with `request=`."""
    own_flags = job_flags(request_type)
    scenario_params, build = scenario_parameters(exclude) if scenario else ([], _no_scenario)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(fn).parameters.values() if p.name != "request"]

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            scenario, provenance = build_scenario_for_request(build, kw)
            values = {fl.field: _values(fl, kw.pop(f"job__{fl.field}")) for fl in own_flags}
            try:
                request = request_type(scenario=scenario, provenance=provenance, **values)
                request.check()
            except JobError as exc:
                fail_job(request_type, exc)
            return fn(request=request, **kw)

        params = [*own, *(fl.parameter() for fl in own_flags), *scenario_params]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate
