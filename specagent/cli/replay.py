"""`specagent replay TRACE.csv`: plain serving of a request trace at its own timestamps on the scenario's Strong deployment.

The trace may also be a dataset `vllm bench serve` takes (ShareGPT, custom JSONL, a saved result; traces/datasets.py):
lengths estimated from its text are said so in the output, and one without arrival times needs --request-rate.

For users coming from Vidur or `vllm bench serve`: TTFT, TPOT and end-to-end latency (mean,
median, p95, p99) and throughput, printed the way `vllm bench serve` prints them; per-request
results streamed to Parquet (`-o`), so memory stays bounded at any trace length. No Weak pool
is built or priced. The job is `simulator/jobs/replay.py` (its flags are its Request's fields);
this module prints its result.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Callable, Optional

import typer

from specagent.cli.console import check_format, error_line, fail, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress
from specagent.cli.requests import request_options
from specagent.common.paths import PARQUET
from specagent.common.redact import Redactor
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.simulator.jobs.replay import ReplayRequest, ReplayResult, run

#: Scenario fields a plain-serving replay does not use: everything about the agent and the Weak model.
REPLAY_EXCLUDES = ("weak", "strong_api", "workload", "strategies", "k", "review", "acceptance", "verifier_prompt",
                   "verifier_system_tokens", "engine", "prefix_caching",
                   # user and tool waits, an API's verify sends, the pricing engine and the acceptance draws: agent things
                   # a request trace has none of (issue #34: replay's help listed them)
                   "environment", "api_verify_sends", "pricing_engine", "uncertainty")


def _fig(v: float, fmt: str = ",.2f") -> str:
    """A figure as the table prints it; 'n/a' where the run defines none (TPOT of one-token answers, no price)."""
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _print_totals(res: ReplayResult, s: dict, line: Callable[[str, str], None]) -> None:
    """The result block's head: the deployment, the load as configured, the totals, throughputs and price."""
    sched = res.scheduler
    line("Deployment:", f"{res.replicas} x {res.deployment}")
    if sched is not None:
        line("Scheduler limits:", f"{sched.max_num_seqs:,} seqs, {sched.max_batched_tokens or 'unlimited'} tokens/iteration")
    line("Successful requests:", f"{s['requests']:,}")
    if res.estimated:  # a dataset's text, no tokenizer (traces/datasets.py): the notes below say which lengths
        line("Token counts:", "estimated from text (see the notes)")
    rate = s["request_rate_configured"]
    line("Request rate configured (RPS):", "inf (the trace's own timestamps)" if rate is None else
         f"{rate:,.2f}" + ("" if s["burstiness"] == 1.0 else f" (gamma arrivals, burstiness {s['burstiness']:g})"))
    if s["max_concurrency"] is not None:
        line("Maximum request concurrency:", f"{s['max_concurrency']:,}")
    line("Replay duration (s):", _fig(s["duration_s"]))
    line("Total input tokens:", f"{s['input_tokens']:,}")
    line("Total generated tokens:", f"{s['output_tokens']:,}")
    line("Request throughput (req/s):", _fig(s["request_throughput_per_s"]))
    line("Output token throughput (tok/s):", _fig(s["output_throughput_tok_s"]))
    line("Total token throughput (tok/s):", _fig(s["total_throughput_tok_s"]))
    usd = "unpriced (pass --price GPU=USD)" if math.isnan(s["usd_per_hour"]) else f"${s['usd_per_hour']:,.2f}/hour"
    line("GPUs / price:", f"{s['gpus']:,} GPUs, {usd}")
    if not math.isnan(s["usd_per_1k_requests"]):
        line("Cost per 1k requests:", f"${s['usd_per_1k_requests']:,.4f}")


def _print(res: ReplayResult, out: Optional[Path]) -> None:
    """As `vllm bench serve` prints its result block, plus the deployment and its price."""
    from rich.console import Console  # only for the table: --format json draws nothing

    s = res.figures()
    c = Console(highlight=False)
    line = lambda k, v: c.print(f"{k:<40}{v}")  # noqa: E731
    c.print(f"{' Serving replay result ':=^50}")
    _print_totals(res, s, line)
    for title, key, unit in (("Time to First Token", "ttft_ms", "ms"), ("Time per Output Token (excl. 1st token)", "tpot_ms", "ms"),
                             ("End-to-end Latency", "e2e_s", "s")):
        c.print(f"{title:-^50}")
        short = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "E2E"}[key]
        for stat, name in (("mean", "Mean"), ("median", "Median"), ("p95", "P95"), ("p99", "P99")):
            line(f"{name} {short} ({unit}):", _fig(s[f"{stat}_{key}"]))
    c.print(f"{'Inter-token Latency':-^50}")
    for stat, name in (("mean", "Mean"), ("median", "Median"), ("p99", "P99")):
        line(f"{name} ITL (ms):", _fig(s[f"{stat}_itl_ms"]))
    c.print("=" * 50)
    c.print("ITL: each request's gaps at its mean gap (the engine records first and last tokens): the mean is exact, the "
            "median and P99 miss the spread within a request")
    if res.chunks > 1:
        c.print(f"served in {res.chunks} chunks; overlap agreement at the boundaries: within {100 * res.boundary_gap:.2f}% "
                "(mean and p90 end-to-end)")
    red = Redactor.of()  # the notes quote the user's files (names, records): no key in them is printed
    for n in s["notes"]:
        c.print(red.line(f"note: {n}"), markup=False)
    if out is not None:
        c.print(f"wrote {out} (one row per request)")


@request_options(ReplayRequest, exclude=REPLAY_EXCLUDES)
def replay_command(
    request: ReplayRequest,
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Per-request results as Parquet (request, arrival_s, tokens, "
                                                                 "ttft_s, tpot_s, e2e_s, queue_s, replica), streamed as it runs."),
    fmt: str = typer.Option("table", "--format", help="table (vllm bench serve's layout), json or csv (one row of figures)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors."),
) -> None:
    """Serve a request trace at its own timestamps on the scenario's Strong deployment; TTFT, TPOT and E2E like vllm bench serve.

    The deployment is the scenario's Strong one (--strong-model, --strong-hardware,
    --strong-gpus, dtypes, --strong-serving-engine); its scheduler limits are the engine's
    defaults for the GPU unless --max-seqs / --max-tokens say otherwise.
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
