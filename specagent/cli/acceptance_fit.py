"""`specagent acceptance fit LOG... -o acceptance.toml`: the acceptance and verdict model fitted to logs.

Prints only: reading and fitting are the job `simulator/jobs/acceptance_fit.py` (the fit itself
`simulator/acceptance/fit.py`); this prints the estimates with their 95% intervals, the likelihood-ratio tests and
the goodness of fit (reports/screens/acceptance.py), and has the job write the `[acceptance]` table (atomically) that
`--acceptance FILE` and scenarios take (docs/acceptance-fit.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.requests import fail_job, request_options
from specagent.common.errors import InputError
from specagent.common.paths import starts_with
from specagent.simulator.jobs.acceptance_fit import AcceptanceFitRequest
from specagent.traces.errors import TraceFormatError


#: What -o writes: the [acceptance] table with its header (a rerun may replace such a file, nothing else).
ACCEPTANCE_TOML = starts_with(b"# The acceptance and verdict model fitted by", what="an [acceptance] table `acceptance fit` wrote")


@request_options(AcceptanceFitRequest, scenario=False)
def fit(
    request: AcceptanceFitRequest,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the fitted [acceptance] table here (TOML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the fitted model and every estimate as JSON."),
) -> None:
    """Fit the acceptance and verdict model to logs by maximum likelihood, with 95% intervals and tests."""
    from specagent.simulator.jobs.acceptance_fit import run

    guard_outputs({"-o": output}, inputs={"LOGS": request.logs}, kinds={"-o": ACCEPTANCE_TOML})
    try:
        result = run(request)
    except (TraceFormatError, InputError) as exc:  # the job's errors name the logs (a format error, its file and field)
        fail_job(AcceptanceFitRequest, exc)
    if output is not None:
        result.write(output)
    if as_json:  # strict JSON through the output guard (common/guard.py), as every command's
        typer.echo(json_out({**result.to_dict(), "written": str(output) if output else None}, indent=2, default=float))
        return
    from specagent.reports.screens import acceptance as screen

    c = SafeConsole()
    for part in screen.fit(result.fit, c):
        c.print(part)
    c.print(f"wrote {output}" if output else "not written: give -o FILE to write the [acceptance] table", highlight=False)
