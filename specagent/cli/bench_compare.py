"""`specagent bench compare PREDICTED.json MEASURED.json`: a `replay` prediction beside a measurement, figure by figure.

Prints only: the reading and the arithmetic are `specagent/reports/serve_compare.py`, the lines and the JSON
`specagent/reports/screens/bench.py`. Under `bench` because the measured side is what `bench serve` (or `vllm bench
serve --save-result`) wrote; the predicted side is `specagent replay --format json` of the same trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.common.errors import InputError
from specagent.reports.screens import bench as screen
from specagent.reports.serve_compare import MAX_LEVELS, compare, load_result


def compare_command(
    predicted: Path = typer.Argument(..., help="specagent replay --format json output (the prediction)."),
    measured: Path = typer.Argument(..., help="specagent bench serve --json output, or vllm bench serve's --save-result "
                                              "JSON (the measurement of the same trace)."),
    level: Optional[int] = typer.Option(None, "--level", min=1, max=MAX_LEVELS, help="The load level of a bench serve --json file that "
                                                                      "holds several (1 = the first printed)."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
) -> None:
    """Set a replay prediction beside a bench serve measurement of the same trace, with the error.

    Each figure both files hold (vllm bench serve's result keys: throughputs, and the mean,
    median, std and percentiles of TTFT, TPOT, ITL and E2EL in ms), with the signed relative
    error (predicted - measured) / measured.
    """
    try:
        pred, meas = load_result(predicted), load_result(measured, level)
        rows, notes = compare(pred, meas, (predicted, measured))
    except InputError as exc:
        fail(str(exc))
    if as_json:
        print(json_out(screen.compare_record(rows, notes, (predicted, measured)), indent=1))
        return
    out = SafeConsole(highlight=False)
    for line in screen.compare_lines(rows, notes, (predicted, measured)):
        out.print(line, markup=False)
