"""`specagent replay TRACE.csv`: plain serving of a request trace at its own timestamps on the scenario's Strong deployment.

The trace may also be a dataset `vllm bench serve` takes (ShareGPT, custom JSONL, a saved result; traces/datasets.py):
lengths estimated from its text are said so in the output, and one without arrival times needs --request-rate.

For users coming from Vidur or `vllm bench serve`: TTFT, TPOT, ITL and E2EL (mean, median and
--metric-percentiles of --percentile-metrics, in ms) and throughput, in `vllm bench serve`'s block
printed by `bench serve`'s printer, and its result keys in --format json (`bench compare` sets one
beside a measurement); per-request
results streamed to Parquet (`-o`), so memory stays bounded at any trace length. No Weak pool
is built or priced. The job is `simulator/jobs/replay.py` (its flags are its Request's fields);
this module prints its result (reports/screens/replay.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import check_format, error_line, fail, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common.paths import PARQUET
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.simulator.jobs.replay import NOT_READ, ReplayRequest, ReplayResult, run

def _print(res: ReplayResult, out: Optional[Path]) -> None:
    """`vllm bench serve`'s result block, as `bench serve` prints it, then what it has no line for and the notes
    (reports/screens/replay.py)."""
    from rich.console import Console  # only here: --format json draws nothing

    from specagent.reports.screens import replay as screen

    s = res.figures()
    c = Console(highlight=False)
    c.print(screen.HEADLINE, markup=False)
    print(screen.block(res, s), flush=True)
    for line in screen.extras(res, s, out):
        c.print(line)


@request_options(ReplayRequest, exclude=NOT_READ)
def replay_command(
    request: ReplayRequest,
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Per-request results as Parquet (request, arrival_s, tokens, "
                                                                 "ttft_s, tpot_s, e2e_s, queue_s, replica), streamed as it runs."),
    fmt: str = typer.Option("table", "--format", help="table (vllm bench serve's block), json (its result keys) or csv (one row of figures)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors."),
) -> None:
    """Serve a request trace at its own timestamps on the Strong deployment; vllm bench serve's figures, predicted.

    The deployment is the scenario's Strong one (--strong-model, --strong-hardware,
    --strong-gpus, dtypes, --strong-serving-engine); its scheduler limits are the engine's
    defaults for the GPU unless --max-seqs / --max-tokens say otherwise. The block and the
    --format json keys are vllm bench serve's (latencies in ms); `specagent bench compare
    PREDICTED.json MEASURED.json` sets them beside a measurement of the same trace.
    """
    fmt = check_format(fmt, as_json)
    # before any work: -o over the trace (it was replaced by Parquet), a scenario file, or a file -o did not write
    guard_outputs({"-o": out}, scenario=request.scenario, inputs={"TRACE": request.trace, **request.provenance.inputs},
                  kinds={"-o": PARQUET})
    try:
        with sigterm_as_interrupt(), job_progress(show=fmt == "table" and not quiet) as progress:
            res = run(request, progress, rows=out)
    except KeyboardInterrupt as exc:  # ^C, or SIGTERM (common.signals): the temp file goes, the earlier output stays
        error_line("interrupted: nothing written" + (f" ({out} untouched)" if out is not None else ""))
        raise typer.Exit(exit_code(exc)) from None
    except RuntimeError as exc:
        fail(str(exc))
    if quiet:
        return
    if fmt == "json":  # strict JSON, through the output guard every command's JSON passes (common/guard.py)
        print(json_out(res.to_dict(), indent=1, default=str))
    elif fmt == "csv":
        import pandas as pd
        sys.stdout.write(pd.DataFrame([{k: v for k, v in res.figures().items() if not isinstance(v, (dict, list))}]).to_csv(index=False))
    else:
        _print(res, out)
