"""`specagent acceptance fit LOG... -o acceptance.toml`: the acceptance and verdict model fitted to logs.

Prints only: reading and fitting are the job `simulator/jobs/acceptance_fit.py` (the fit itself
`simulator/acceptance/fit.py`); this prints the estimates with their 95% intervals, the likelihood-ratio tests and
the goodness of fit, and has the job write the `[acceptance]` table (atomically) that `--acceptance FILE` and
scenarios take (docs/acceptance-fit.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rich.table import Table

from specagent.cli.console import SafeConsole, json_out
from specagent.reports.screens.tables import Col, fitted, legend
from specagent.cli.options import guard_outputs
from specagent.cli.requests import fail_job, request_options
from specagent.common.errors import InputError
from specagent.common.paths import starts_with
from specagent.simulator.acceptance.fit import FitResult
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
    _print(result.fit)
    SafeConsole().print(f"wrote {output}" if output else "not written: give -o FILE to write the [acceptance] table",
                        highlight=False)


_SHORT = {"profile likelihood": "profile", "Fisher information (NB2, log scale)": "Fisher NB2",
          "exact Poisson (Garwood)": "Garwood", "quasi-Poisson Fisher information": "quasi-Poisson",
          "cluster-robust by task (log scale)": "cluster-robust",
          "profile likelihood (the median task: u = 0)": "profile, median task",
          "profile likelihood; 0 tested against ½χ²₀ + ½χ²₁": "profile, boundary",
          "profile likelihood; 0 tested against ½χ²₀ + ½χ²₁ (open at 0)": "profile, boundary, open at 0"}


#: The fitted parameters and the likelihood-ratio tests, fitted to the terminal (reports/screens/tables.py): the interval's method
#: leaves first (the caption's legend names the methods).
PARAM_COLUMNS = (Col("parameter", "left"), Col("estimate"), Col("95% interval", "left"), Col("n"),
                 Col("interval", "left", optional=True))
TEST_COLUMNS = (Col("parameter", "left"), Col("null", "left"), Col("statistic"), Col("p"),
                Col("the data\nsupport it", "left"))


def _num(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def _print(r: FitResult) -> None:
    c = SafeConsole()
    rows = [[p.name, _num(p.estimate), f"[{_num(p.low)}, {_num(p.high)}]", f"{p.n:,}", _SHORT.get(p.how, p.how)]
            for p in r.params]
    c.print(fitted(c, PARAM_COLUMNS, rows, title=f"Acceptance model fitted to {r.data.records:,} verifications (maximum "
                                                 "likelihood)",
                   caption=legend([(s, how) for how, s in _SHORT.items() if any(p.how == how for p in r.params)])))
    for why in r.diagnostics.get("at_edge", {}).values():  # an end of a range is not an estimate: said, every time
        c.print(f"note: {why}", highlight=False, markup=False)
    if r.not_fitted:
        c.print("not fitted (the defaults stay): " + "; ".join(f"{k} ({why})" for k, why in r.not_fitted.items()),
                highlight=False)
    if r.tests:
        rows = [[name, v["null"], f"{v['statistic']:.3f}", f"{v['p_value']:.3g}", "yes" if v["supported"] else "no (p ≥ 0.05)"]
                for name, v in r.tests.items()]
        c.print(fitted(c, TEST_COLUMNS, rows, title="Likelihood-ratio tests (boundary null: ½χ²₀ + ½χ²₁)"))
        if "dependence" in r.diagnostics:
            c.print(f"dependence between verdicts found: {r.diagnostics['dependence']}", highlight=False)
    if r.goodness:
        g = Table(title="Goodness of fit: accepted-prefix length, observed / expected, by kind of the segment's last step",
                  caption="columns 0, 1, ...: segments whose verifier kept that many drafted steps")
        width = max(len(v["observed"]) for v in r.goodness.values())
        g.add_column("kind")
        g.add_column("segments", justify="right")
        for m in range(width):
            g.add_column(f"{m}", justify="right")
        g.add_column("χ² (df)")
        g.add_column("p")
        for kind, v in r.goodness.items():
            cells = [f"{o}/{e:.0f}" for o, e in zip(v["observed"], v["expected"])] + [""] * (width - len(v["observed"]))
            g.add_row(kind, str(v["segments"]), *cells, f"{v['chi2']:.2f} ({v['df']})", f"{v['p_value']:.3g}")
        c.print(g)
