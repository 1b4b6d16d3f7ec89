"""Command-line options generated from a job's Request, so a job's defaults and help live in one place.

`@request_options(PredictRequest, exclude=...)` gives a command the Scenario's generated flags (options.py:
`--scenario`, `--weak-gpus`, …, minus `exclude`) and one flag per field of the Request that has no
``cli: False`` in its metadata: ``--field-name`` (or the ``flag`` metadata), ``short`` (``-o``), its
``help``, its default shown; a field with ``argument: True`` is a positional argument instead (``TRACE``).
The command is called with ``request=`` the Request they describe, its ``provenance`` filled in (the
scenario file, the flags given, the files read). A bad value fails as one line naming the flag, whether
`check()` or the job found it: a ScenarioError by its scenario flag (or the scenario file's key, when no
flag set it), a JobError by the field's flag; a JobError's message names another field as `` `name` ``,
which the line shows as that field's flag.

Types a field may have: str, int, float, bool, Path, their ``X | None``, and ``tuple[str, ...]``,
``tuple[int, ...]`` or ``tuple[float, ...]`` (a repeatable option whose values may also be comma lists:
``--price h20=1.8,h200=3.5 --price b200=5``, ``--rates 0.1,0.2``; not given, the field keeps its default).
`@request_options(SweepRequest, scenario=False)` generates only the Request's own flags, for a job whose
scenario comes from somewhere else (a sweep's config file).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import typer

from specagent.cli.console import fail
from specagent.cli.options import build_scenario_for_request, scenario_failure, scenario_flags, scenario_parameters
from specagent.simulator.jobs.base import JobError, Provenance, Request
from specagent.simulator.scenario import ScenarioError


@dataclass(frozen=True)
class JobFlag:
    """One generated option of a Request field."""

    field: str
    names: tuple[str, ...]
    type: Any
    default: Any
    help: str
    panel: str | None
    argument: bool = False
    item: Any = str  # a repeated flag's item type: str, int or float

    @property
    def repeated(self) -> bool:
        return self.type is tuple

    def parameter(self) -> inspect.Parameter:
        if self.argument:  # positional and required, whatever the field's Python default
            return inspect.Parameter(f"job__{self.field}", inspect.Parameter.KEYWORD_ONLY, annotation=self.type,
                                     default=typer.Argument(..., metavar=self.field.upper(), help=self.help, show_default=False))
        if self.type is bool:
            decls: tuple[str, ...] = (f"{self.names[0]}/--no-{self.names[0][2:]}", *self.names[1:])
        else:
            decls = self.names
        annotation = {tuple: Optional[list[str]], Path: Optional[Path]}.get(self.type, Optional[self.type])
        default = [] if self.repeated else self.default
        shown: bool | str = self.default not in (None, (), "")
        if self.repeated and shown:  # a list's default as it is typed: 0.05,0.2
            shown = ",".join(map(str, self.default))
        return inspect.Parameter(f"job__{self.field}", inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                 default=typer.Option(default, *decls, help=self.help, rich_help_panel=self.panel,
                                                      show_default=shown))


def _base_type(t: Any) -> tuple[Any, Any]:
    """The flag type of a field annotation and a repeated flag's item type: X | None is X; tuple[float, ...] is
    (tuple, float)."""
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
        if typ not in (str, int, float, bool, Path, tuple) or item not in (str, int, float):
            raise TypeError(f"{request_type.__name__}.{f.name}: a {hints[f.name]} field cannot be a flag (cli: False)")
        name = "--" + f.metadata.get("flag", f.name).replace("_", "-")
        names = (name, *(f.metadata.get("short", ()) if isinstance(f.metadata.get("short", ()), tuple) else (f.metadata["short"],)))
        if f.metadata.get("argument"):
            names = (f.name.upper(),)  # an error names an argument as its help shows it: TRACE
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out.append(JobFlag(f.name, names, typ, default, f.metadata.get("help", f.name), f.metadata.get("panel"),
                           bool(f.metadata.get("argument")), item))
    return out


def flag_of(request_type: type[Request], field_name: str) -> str:
    """The flag a Request field is set by (its name when it has none)."""
    return next((fl.names[0] for fl in job_flags(request_type) if fl.field == field_name), field_name)


def job_failure(request_type: type[Request], exc: JobError, exclude: Iterable[str] | None = None) -> str:
    """The one line a JobError prints: its field's flag, then the message with every `` `field` `` it names (a field
    of the Request, or with `exclude` given a scenario field's dotted path: `` `strong.hardware` ``) shown as that
    field's flag (a Python caller reads the field names)."""
    flags = {fl.path: fl.names[0] for fl in scenario_flags(exclude)} if exclude is not None else {}
    flags.update({fl.field: fl.names[0] for fl in job_flags(request_type)})
    text = re.sub(r"`([\w.]+)`", lambda m: flags.get(m.group(1), m.group(0)), str(exc))
    return f"{flags.get(exc.field, exc.field)}: {text}" if exc.field else text


def _values(fl: JobFlag, v: Any) -> Any:
    """A flag's value as its field takes it: a repeated flag's items, each comma list split (its empty parts left out),
    an item given empty kept as '' for the job to refuse (`--price ""` is a slip, not "no prices"), each converted to
    the field's item type; not given, the field's default."""
    if not fl.repeated:
        return v
    if not v:
        return fl.default
    parts = [p for item in v for p in ([q.strip() for q in str(item).split(",") if q.strip()] if str(item).strip() else [""])]
    if fl.item is str:
        return tuple(parts)
    try:
        return tuple(fl.item(p) for p in parts)
    except ValueError:
        bad = next(p for p in parts if not _converts(fl.item, p))
        kind = "whole numbers" if fl.item is int else "numbers"
        raise JobError(f"expected {kind} (one, or a comma list), got {bad!r}", field=fl.field) from None


def _converts(kind: type, text: str) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def request_options(request_type: type[Request], exclude: Iterable[str] = (),
                    scenario: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the command gets the scenario's flags (none with `scenario` false) and the Request's, and is called
    with `request=`."""
    exclude = tuple(exclude)
    own_flags = job_flags(request_type)
    scenario_params, build = scenario_parameters(exclude) if scenario else ([], None)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(fn).parameters.values() if p.name != "request"]

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            given = build_scenario_for_request(build, kw) if build is not None else None
            provenance = given[1] if given is not None else Provenance()
            raw = {fl.field: kw.pop(f"job__{fl.field}") for fl in own_flags}
            try:
                values = {fl.field: _values(fl, v) for fl, v in zip(own_flags, raw.values())}
                scenario_fields = {"scenario": given[0], "provenance": provenance} if given is not None else {}
                request = request_type(**scenario_fields, **values)
                request.check()
                return fn(request=request, **kw)
            except JobError as exc:
                fail(job_failure(request_type, exc, exclude if scenario else None))
            except ScenarioError as exc:  # found while the job resolved its scenario: named as the scenario's flags are
                fail(scenario_failure(exc, provenance, exclude))

        params = [*own, *(fl.parameter() for fl in own_flags), *scenario_params]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate
