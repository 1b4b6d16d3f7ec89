"""What every job is: a Request (a Scenario plus the job's own fields) run into a Result.

A job module (one per command: predict, explain, plan, …) provides

* a ``Request`` subclass: the job's own fields beside ``scenario``, each with its default (the default
  everywhere: Python, the generated CLI flags, the docs) and its metadata — ``help`` (the flag's text),
  ``flag`` (the CLI name when it is not ``--field-name``), ``short`` (``-o``), ``cli: False`` (not a flag);
  ``check()`` raises a ``JobError`` naming the field of a bad value (the CLI turns the field into its flag);
* a ``Result`` subclass: everything any view shows, computed once — ``to_dict()`` is the plain JSON data the
  job stores (``summary.json``, ``plan.json``) and reports read, ``write(folder)`` writes the job's files
  atomically and returns their paths;
* ``run(request, progress=None) -> Result``: the work, reporting through ``progress`` (a ``Progress``
  callback: what is being done, how much of it) so that a Python caller and the CLI see the same
  stages; resume, estimates and clean interruption belong to the job, not to its caller.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.common.errors import InputError
from specagent.simulator.scenario import Scenario


class JobError(InputError):
    """A request field with a value the job cannot take; `field` is its name (the CLI names the flag instead)."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Provenance:
    """Where a request's scenario came from: the scenario file (a value read from it is named as its key, not as a
    flag the user never gave), the scenario fields set on the command line (dotted paths), and every file the
    request reads, by the flag or argument that named it (no output of the job may replace one)."""

    scenario_file: str | None = None
    given: frozenset[str] = frozenset()
    inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_inputs(self, **more: Any) -> "Provenance":
        """A copy with more input files (flag → a path or paths; None and '' left out)."""
        extra = {k.replace("_", "-"): tuple(str(p) for p in ((v,) if isinstance(v, (str, Path)) else v) if p)
                 for k, v in more.items() if v}
        return dataclasses.replace(self, inputs={**self.inputs, **{k: v for k, v in extra.items() if v}})


@dataclass(frozen=True)
class Request:
    """A job's input: the Scenario (models, deployments, workload, acceptance, …) and where it came from. A subclass
    adds the job's own fields (see the module docstring)."""

    scenario: Scenario = field(default_factory=Scenario, metadata={"cli": False})
    provenance: Provenance = field(default_factory=Provenance, metadata={"cli": False})

    def check(self) -> None:
        """Raise a JobError naming the field of a value this job cannot take (run() calls it first)."""


@dataclass(frozen=True)
class Step:
    """One progress report: what the job is doing, how much of it is done and of how much (None: not known)."""

    what: str
    done: float = 0.0
    total: float | None = None


Progress = Callable[[Step], None]


def report(progress: Progress | None, what: str, done: float = 0.0, total: float | None = None) -> None:
    """Tell `progress` (if any) where the job is."""
    if progress is not None:
        progress(Step(what, done, total))


def input_files(scenario: Scenario, provenance: Provenance | None = None) -> dict[str, tuple[str, ...]]:
    """Every file the scenario was read from or names, by the flag that gave it (--scenario, --acceptance, --trace; a GPU,
    engine, model or ranges file under 'the scenario's'): what no output of the command may replace
    (`common.paths.check_outputs`). A name that is not a file (`h20`, `Qwen/Qwen3-32B`) is not one."""
    given = {k: v[0] for k, v in (provenance.inputs if provenance is not None else {}).items()}
    found: list[str] = []

    def walk(obj: Any) -> None:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                if not f.name.startswith("_"):
                    walk(getattr(obj, f.name))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)
        elif isinstance(obj, (str, os.PathLike)) and str(obj) and os.path.isfile(obj):
            found.append(str(obj))

    walk(scenario)
    trace = str(scenario.workload.trace) if scenario.workload.trace is not None else None
    return {**{flag: (str(p),) for flag, p in given.items()},
            **({"--trace": (trace,)} if trace in found else {}),
            "a file the scenario names": tuple(p for p in dict.fromkeys(found) if p != trace)}


class Result:
    """What a job returns: a subclass holds everything any view shows (the terminal, the report, a notebook)."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def write(self, folder: str | Path) -> list[Path]:
        raise NotImplementedError


def read_workload(scenario: Scenario, progress: Progress | None = None) -> tuple[Any, str, str]:
    """The scenario's workload as `Scenario.load_workload` gives it (trajectories, where from, a short name), a trace
    file's bytes read told to `progress` ("reading NAME"); a bad trace is a ScenarioError on workload.trace."""
    from specagent.traces.io import default_workload_path

    w = scenario.workload
    path = Path(w.trace) if w.trace is not None else default_workload_path()
    return scenario.load_workload(progress=_bytes_read(progress, path) if w.synthetic is None else None)


def read_trace(path: Path, progress: Progress | None = None, skip_bad: bool = False,
               skipped: list[Any] | None = None) -> list[Any]:
    """A trace file's trajectories (`traces.io.load_trajectories`), its bytes read told to `progress` ("reading NAME")."""
    from specagent.traces.io import load_trajectories

    return load_trajectories(path, skip_bad=skip_bad, skipped=skipped, progress=_bytes_read(progress, path))


def counted(progress: Progress | None, what: str, total: float) -> Callable[[int], None]:
    """A worker's `advance(k)` (k more done) told to a job's `progress` as `what`, the running count of `total`."""
    done = 0

    def advance(k: int) -> None:
        nonlocal done
        done += k
        report(progress, what, done, total)

    return advance


def _bytes_read(progress: Progress | None, path: Path) -> Callable[[int], None] | None:
    """A reader's `progress(k)` (k more bytes read) told to a job's `progress` as "reading NAME", done of the file's
    size; None for what is not a file of known size (nothing to count against)."""
    size = path.stat().st_size if path.is_file() else 0
    return counted(progress, f"reading {path.name}", size) if size else None


def chosen_backend(backend: str | None, address: str | None, address_field: str = "address") -> str:
    """The backend a fleet job runs on: `backend` as given, or ray when a cluster `address` is given, else local; a
    JobError names the field at fault (the address's by `address_field`)."""
    from specagent.simulator.parallel import BACKENDS, ray_endpoint

    chosen = backend if backend is not None else ("ray" if address is not None else "local")
    if chosen not in BACKENDS:
        raise JobError(f"expected one of {', '.join(BACKENDS)}, got '{chosen}'", "backend")
    if address is not None and chosen != "ray":
        raise JobError(f"{address}: a Ray cluster address, for `backend` ray (the backend is '{chosen}')", address_field)
    if address is not None:
        try:
            ray_endpoint(address)
        except ValueError as exc:
            raise JobError(str(exc), address_field) from None
    return chosen


def records(frame: Any) -> list[dict[str, Any]]:
    """A frame's rows as JSON takes them: NaN, a frame's mark of a missing value (a strategy without a measured success
    rate), as None (JSON's null: missing, never a number)."""
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
            for row in frame.to_dict(orient="records")]
