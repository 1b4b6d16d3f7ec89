"""The acceptance fit (`specagent acceptance fit LOG...`): the acceptance and verdict model fitted to verdict logs.

The fit itself is `simulator/acceptance/fit.py` (maximum likelihood, 95% intervals, likelihood-ratio tests,
goodness of fit); this job reads the logs, fits them, and says a failure in terms of the logs that caused it (a
fitted value outside the model's range is the logs' doing, not a setting's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.simulator.acceptance.fit import FitResult, acceptance_toml, fit_acceptance, read_logs
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.traces.errors import TraceFormatError


@dataclass(frozen=True, kw_only=True)
class AcceptanceFitRequest(Request):
    """The logs to fit (the `scenario` is not read: the fit starts from the model's defaults)."""

    logs: tuple[Path, ...] = field(metadata={
        "argument": True, "help": "Verdict logs (docs/verdict-log.md) and/or `specagent live` protocol logs."})

    def check(self) -> None:
        if not self.logs:
            raise JobError("expected at least one verdict or protocol log", "logs")


@dataclass
class AcceptanceFitResult(Result):
    """The fit: the model, every estimate with its interval, the tests and the goodness of fit (`fit`)."""

    request: AcceptanceFitRequest
    fit: FitResult

    def to_dict(self) -> dict[str, Any]:
        """The fitted model and every estimate (what `--json` prints, less the file written)."""
        r = self.fit
        return {"acceptance": r.model.describe(), "estimates": [p.row() for p in r.params],
                **({"at_edge": r.diagnostics["at_edge"]} if "at_edge" in r.diagnostics else {})}

    def toml(self) -> str:
        """The `[acceptance]` table, with its header, that `--acceptance FILE` and scenarios take."""
        return acceptance_toml(self.fit)

    def write(self, folder: str | Path) -> list[Path]:
        """The `[acceptance]` table at `folder` (a file: this job writes one), atomically."""
        path = Path(folder)
        atomic.write_text(path, self.toml())
        return [path]


def run(request: AcceptanceFitRequest, progress: Progress | None = None) -> AcceptanceFitResult:
    """Read the logs and fit them; a failure names the logs (and what is wrong in them)."""
    request.check()
    names = ", ".join(map(str, request.logs))
    report(progress, "reading logs")
    try:
        data = read_logs(request.logs)
    except (TraceFormatError, InputError):  # both name the file and what was expected
        raise
    except FileNotFoundError as exc:
        raise JobError(str(exc).strip("'\"")) from None
    except ValueError as exc:
        raise JobError(f"{names}: {exc}") from None
    report(progress, "fitting")
    try:
        fitted = fit_acceptance(data)
    except InputError as exc:  # the model's own guard on a fitted value: the logs are the cause, not a setting
        raise JobError(f"{names}: the fitted {exc.where or 'model'} is outside the model's range, so nothing was written "
                       f"({exc}); check the logs' token counts") from None
    except ValueError as exc:
        raise JobError(f"{names}: {exc}") from None
    return AcceptanceFitResult(request, fitted)
