"""`specagent study balance` and `study sensitivity`: studies built on the simulator (the jobs: simulator/jobs/study.py,
simulator/jobs/sensitivity.py; their flags are the Requests' and the scenario's). This module prints the balance table;
cli/sensitivity.py prints the sensitivity study."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from specagent.cli import sensitivity as sensitivity_cli
from specagent.cli.console import SafeConsole
from specagent.reports.screens.tables import legend
from specagent.cli.options import guard_outputs
from specagent.cli.panels import PanelCommand
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common import atomic
from specagent.simulator.jobs.study import BalanceRequest, BalanceResult, run

console = SafeConsole()
#: Scenario fields the study chooses itself (the strategies: Strong-only and SpecAgent) or does not use.
STUDY_EXCLUDES = ("strategies", "pricing_engine", "strong_api")
#: The study's table at 80 columns: short headers, spelled out in the caption (the Parquet/CSV/JSON keep the long names).
BALANCE_COLUMNS = (
    ("hardware", "Strong\nGPU", ""),
    ("rate", "rate/s", "arrival rate, tasks per second"),
    ("strongonly_decode_batch", "SO\nbatch", "Strong-only's mean Strong decode batch"),
    ("specagent_decode_batch", "SA\nbatch", "SpecAgent's mean Strong decode batch"),
    ("balance_batch", "balance\nbatch", "decode batch where the Strong replica turns compute-bound"),
    ("strong_time_saving", "time\nsaving", "SpecAgent's Strong busy time saved vs Strong-only (share)"),
    ("strong_bytes_saving", "bytes\nsaving", "Strong HBM bytes saved (share)"),
    ("strongonly_strong_utilisation", "SO\nutil.", "Strong-only's Strong replica utilisation"),
)

study_app = typer.Typer(help="Studies built on the fleet simulator.", no_args_is_help=True)


def _fmt(v, nd: int = 2) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:,.{nd}f}"
    return str(v)


def _print_balance(res: BalanceResult) -> None:
    from rich.table import Table

    sc = res.scenario
    t = Table(title=f"Balance-point study: SpecAgent vs Strong-only on one Strong replica (Weak: {sc.weak.model} on "
                    f"{sc.weak.hardware}, uncontended)", show_edge=False, pad_edge=False)
    cells = [[_fmt(r[c], 2) if isinstance(r[c], float) else str(r[c]) for c, _, _ in BALANCE_COLUMNS]
             for r in res.table.to_dict("records")]
    for i, (_, head, _) in enumerate(BALANCE_COLUMNS):  # no identifier or figure is ever cut: each column at its widest cell
        t.add_column(head, justify="left" if i == 0 else "right", no_wrap=True,
                     min_width=max([len(c[i]) for c in cells] + [len(w) for w in head.split("\n")]))
    for c in cells:
        t.add_row(*c)
    t.caption = legend((head, meaning) for _, head, meaning in BALANCE_COLUMNS[1:])
    console.print(t)


@study_app.command("balance", cls=PanelCommand)
@request_options(BalanceRequest, exclude=STUDY_EXCLUDES)
def study_balance(
    request: BalanceRequest,
    out: Optional[Path] = typer.Option(None, help="Write the table as Parquet (.parquet) or CSV (anything else), atomically."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """SpecAgent's Strong time and memory saving vs Strong-only against the Strong replica's mean decode batch.

    The balance point is the decode batch at which a replica turns compute-bound; below it,
    moving Strong tokens from decode into one verification prefill saves time and traffic.
    Load rises with the rate; where the saving columns reach zero, SpecAgent stops paying.
    """
    guard_outputs({"--out": out}, scenario=request.scenario, inputs=request.provenance.inputs)
    if out is not None:
        atomic.check_writable(out)
    with job_progress(show=not as_json) as progress:
        res = run(request, progress)
    if out is not None:
        res.save(out)
    if as_json:
        print(res.table.to_json(orient="records"))
        return
    _print_balance(res)


study_app.command("sensitivity", cls=PanelCommand)(sensitivity_cli.sensitivity)
