"""`specagent replay TRACE.csv`: plain serving of a request trace at its own timestamps on the scenario's Strong deployment.

The trace may also be a dataset `vllm bench serve` takes (ShareGPT, custom JSONL, a saved result; traces/datasets.py):
lengths estimated from its text are said so in the output, and one without arrival times needs --request-rate.

For users coming from Vidur or `vllm bench serve`: TTFT, TPOT, ITL and E2EL (mean, median and
--metric-percentiles of --percentile-metrics, in ms) and throughput, in `vllm bench serve`'s block
printed by `bench serve`'s printer, and its result keys in --format json (`bench compare` sets one
beside a measurement); per-request
results streamed to Parquet (`-o`), so memory stays bounded at any trace length. No Weak pool
is built or priced. The job is `simulator/jobs/replay.py` (its flags are its Request's fields);
this module prints its result.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from specagent.cli.console import check_format, error_line, fail, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common.paths import PARQUET
from specagent.common.redact import Redactor
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.common.vllm_result import format_block
from specagent.simulator.jobs.replay import ReplayRequest, ReplayResult, run

#: Scenario fields a plain-serving replay does not use: everything about the agent and the Weak model.
REPLAY_EXCLUDES = ("weak", "strong_api", "workload", "strategies", "k", "review", "acceptance", "verifier_prompt",
                   "verifier_system_tokens", "engine", "prefix_caching",
                   # user and tool waits, an API's verify sends, the pricing engine and the acceptance draws: agent things
                   # a request trace has none of (issue #34: replay's help listed them)
                   "environment", "api_verify_sends", "pricing_engine", "uncertainty")


def _arrivals(res: ReplayResult) -> str:
    """How the requests were sent: the trace's timestamps, or drawn at --request-rate (vLLM's block prints a finite rate
    only)."""
    if math.isinf(res.request_rate):
        return "the trace's own timestamps"
    return (f"Poisson at {res.request_rate:g} RPS" if res.burstiness == 1.0 else
            f"gamma gaps at {res.request_rate:g} RPS, burstiness {res.burstiness:g}") + " (seeded)"


def _print_extras(res: ReplayResult, s: dict, c: Any) -> None:
    """What vLLM's block has no line for, below it: the deployment, its scheduler, the arrivals, the price."""
    sched = res.scheduler
    c.print(f"Deployment: {res.replicas} x {res.deployment}", markup=False)
    if sched is not None:
        c.print(f"Scheduler limits: {sched.max_num_seqs} seqs, {sched.max_batched_tokens or 'unlimited'} tokens/iteration")
    c.print(f"Arrivals: {_arrivals(res)}")
    if res.estimated:  # a dataset's text, no tokenizer (traces/datasets.py): the notes below say which lengths
        c.print("Token counts: estimated from text (see the notes)")
    usd = "unpriced (pass --price GPU=USD)" if math.isnan(s["usd_per_hour"]) else f"${s['usd_per_hour']:,.2f}/hour"
    c.print(f"GPUs / price: {s['gpus']:,} GPUs, {usd}" + ("" if math.isnan(s["usd_per_1k_requests"]) else
                                                         f"; ${s['usd_per_1k_requests']:,.4f} per 1k requests"))


def _print(res: ReplayResult, out: Optional[Path]) -> None:
    """`vllm bench serve`'s result block, as `bench serve` prints it (one printer: common/vllm_result.py), then what
    it has no line for and the notes."""
    from rich.console import Console  # only for the notes: --format json draws nothing

    s = res.figures()
    c = Console(highlight=False)
    c.print("Predicted by specagent replay (simulated, no server run):", markup=False)
    print(format_block(s, res.percentile_metrics, res.metric_percentiles), flush=True)
    _print_extras(res, s, c)
    if res.chunks > 1:
        c.print(f"served in {res.chunks} chunks; overlap agreement at the boundaries: within {100 * res.boundary_gap:.2f}% "
                "(mean and p90 end-to-end)")
    red = Redactor.of()  # the notes quote the user's files (names, records): no key in them is printed
    for n in s["notes"]:
        c.print(red.line(f"note: {n}"), markup=False)
    if out is not None:
        c.print(f"wrote {out} (one row per request)", markup=False)


@request_options(ReplayRequest, exclude=REPLAY_EXCLUDES)
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
