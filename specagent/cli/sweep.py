"""`specagent sweep CONFIG`: a grid of fleet simulations, resumably (the job: simulator/jobs/sweep.py).

Its flags are the SweepRequest's own (no scenario flags: a sweep's scenario is its config's, or
--scenario's); this module guards the output folder, runs the job and prints its counts and table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, error_line, fail, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common.paths import JSON_DOC
from specagent.simulator.jobs.sweep import SweepRequest, default_folder, run

console = SafeConsole()


@request_options(SweepRequest, scenario=False)
def sweep_command(
    request: SweepRequest,
    out: Optional[Path] = typer.Option(None, help="Result directory (one Parquet file per cell under cells/); default "
                                                  "CONFIG's name + '_results'."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's counts as JSON (no progress bar)."),
) -> None:
    """Run a grid of fleet simulations (strategy x K x acceptance x rate x fleet x hardware), resumably.

    Each finished cell is written atomically as its own Parquet file, so rerunning the same
    command after an interruption (^C keeps every finished cell) skips the cells already
    done; extending the grid reuses them too. A folder holding cells of a different config is
    refused (--force replaces them), and a folder another sweep is running in is locked.
    """
    folder = out or default_folder(request)
    guard_outputs([("--out", folder / "config.json", JSON_DOC)],
                  inputs={"CONFIG": request.config, "--scenario": request.scenario_file})
    try:
        with job_progress(show=not as_json) as progress:
            res = run(request, folder, progress)
    except RuntimeError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        kept = len(list((folder / "cells").glob("*.parquet")))
        error_line(f"interrupted: {kept} finished cell(s) kept in {folder / 'cells'}; rerun the same command to resume")
        raise typer.Exit(130) from None
    if as_json:
        print(json_out(res.to_dict()))
        return
    console.print(f"{res.ran} cell(s) run, {res.skipped} already done, {res.total} in the grid -> {res.out_dir}/cells/*.parquet")
    table = res.table()
    if len(table):
        console.print(table.to_string(index=False))
