"""`specagent replay TRACE.csv`: plain serving of a request trace at its own timestamps on the scenario's Strong deployment.

The trace may also be a dataset `vllm bench serve` takes (ShareGPT, custom JSONL, a saved result; traces/datasets.py):
lengths estimated from its text are said so in the output, and one without arrival times needs --request-rate.

For users coming from Vidur or `vllm bench serve`: TTFT, TPOT and end-to-end latency (mean,
median, p95, p99) and throughput, printed the way `vllm bench serve` prints them; per-request
results streamed to Parquet (`-o`), so memory stays bounded at any trace length. No Weak pool
is built or priced.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from specagent.cli.console import check_format, error_line, fail, json_out
from specagent.cli.options import input_files, resolve, scenario_options
from specagent.cli.progress import progress_bar
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.paths import PARQUET, check_outputs
from specagent.common.redact import Redactor
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.simulator.fleet.config import Scheduler, engine_scheduler
from specagent.simulator.rates_prices import parse_prices, unused_prices
from specagent.simulator.replay import COLUMNS, ReplayResult, replay, replay_limited, resample_arrivals
from specagent.simulator.scenario import Scenario
from specagent.traces.requests import load_requests

#: Scenario fields a plain-serving replay does not use: everything about the agent and the Weak model.
REPLAY_EXCLUDES = ("weak", "strong_api", "workload", "strategies", "k", "review", "acceptance", "verifier_prompt",
                   "verifier_system_tokens", "engine", "prefix_caching",
                   # user and tool waits, an API's verify sends, the pricing engine and the acceptance draws: agent things
                   # a request trace has none of (issue #34: replay's help listed them)
                   "environment", "api_verify_sends", "pricing_engine", "uncertainty")
MAX_REPLICAS = 1_000_000
MAX_SEQS = 1 << 20  # sequences per iteration (vLLM's default is 256-1024)
MAX_TOKENS = 1 << 24  # tokens per iteration
MAX_CHUNK = 100_000_000
MAX_CONCURRENCY = 10_000_000


def _scheduler(dep, max_seqs: Optional[int], max_tokens: Optional[int]) -> Scheduler:
    """The engine's defaults on this GPU, with --max-seqs / --max-tokens laid over them; a bad pair names the flags."""
    base = engine_scheduler(dep)
    if max_seqs is None and max_tokens is None:
        return base
    seqs = base.max_num_seqs if max_seqs is None else max_seqs
    tokens = base.max_batched_tokens if max_tokens is None else max_tokens
    if seqs < 1:
        fail(f"--max-seqs: expected sequences per iteration >= 1, got {seqs}")
    if tokens is not None and tokens < seqs:
        fail(f"--max-tokens {tokens}: the token budget per iteration must be at least --max-seqs ({seqs}): every running "
             "sequence decodes one token per iteration")
    return Scheduler(seqs, tokens, f"--max-seqs {seqs} / --max-tokens {tokens} over {base.source}")


def _fig(v: float, fmt: str = ",.2f") -> str:
    """A figure as the table prints it; 'n/a' where the run defines none (TPOT of one-token answers, no price)."""
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def undefined_notes(stats: dict) -> list[str]:
    """Why a figure is null in the JSON (n/a in the table): each undefined figure is said, never left as NaN."""
    out = []
    if isinstance(stats.get("usd_per_hour"), float) and math.isnan(stats["usd_per_hour"]):
        out.append("usd_per_hour and usd_per_1k_requests are null: the GPU profile states no price (pass --price GPU=USD)")
    if isinstance(stats.get("mean_tpot_ms"), float) and math.isnan(stats["mean_tpot_ms"]):
        out.append("TPOT and ITL figures are null: every request has one output token (TPOT is the time per output token "
                   "after the first)")
    if isinstance(stats.get("request_throughput_per_s"), float) and math.isnan(stats["request_throughput_per_s"]):
        out.append("throughputs are null: the replay took no time (every request finished as it arrived)")
    return out


def strict(stats: dict) -> dict:
    """`stats` with NaN (a figure the run does not define) as None: JSON has no NaN, and `undefined_notes` says why."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in stats.items()}


def _print(res: ReplayResult, out: Optional[Path], label: str, scheduler: Scheduler, estimated: bool = False) -> None:
    """As `vllm bench serve` prints its result block, plus the deployment and its price."""
    s = res.stats()
    c = Console(highlight=False)
    line = lambda k, v: c.print(f"{k:<40}{v}")  # noqa: E731
    c.print(f"{' Serving replay result ':=^50}")
    line("Deployment:", label)
    line("Scheduler limits:", f"{scheduler.max_num_seqs:,} seqs, {scheduler.max_batched_tokens or 'unlimited'} tokens/iteration")
    line("Successful requests:", f"{s['requests']:,}")
    if estimated:  # a dataset's text, no tokenizer (traces/datasets.py): the notes below say which lengths
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
    for n in [*res.notes, *undefined_notes(s)]:
        c.print(red.line(f"note: {n}"), markup=False)
    if out is not None:
        c.print(f"wrote {out} (one row per request)")


@scenario_options(exclude=REPLAY_EXCLUDES)
def replay_command(
    scenario: Scenario,
    trace: Path = typer.Argument(..., help="Request trace CSV: arrival time, prompt tokens, output tokens (headers arrival_s,"
                                           "prompt_tokens,output_tokens; Vidur's and the Azure LLM traces' are read too), or a "
                                           "dataset vllm bench serve reads (.json / .jsonl: ShareGPT, custom JSONL with prompt "
                                           "and output_tokens, a --save-detailed result; lengths from text are estimated)."),
    replicas: int = typer.Option(1, help="Strong replicas serving the trace (requests go to the least loaded)."),
    max_seqs: Optional[int] = typer.Option(None, "--max-seqs", help="Sequences per iteration per replica (vLLM --max-num-seqs; "
                                                                    "default: the serving engine's default on this GPU)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Tokens per iteration per replica (vLLM "
                                                                        "--max-num-batched-tokens; default: the engine's)."),
    price: List[str] = typer.Option([], "--price", help="$/GPU-hour, e.g. --price h20=1.85 (default: the profile's sourced price)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Per-request results as Parquet (request, arrival_s, tokens, "
                                                                 "ttft_s, tpot_s, e2e_s, queue_s, replica), streamed as it runs."),
    chunk: int = typer.Option(100_000, help="Requests simulated at once (memory is bounded by this, not the trace); 0: the whole "
                                            "trace at once (exact)."),
    overlap: int = typer.Option(5_000, help="Requests re-served before and after each chunk so its edges see the queue of one long "
                                            "run; the run reports how well neighbouring chunks agree."),
    fmt: str = typer.Option("table", "--format", help="table (vllm bench serve's layout), json or csv (one row of figures)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors."),
    request_rate: Optional[float] = typer.Option(None, "--request-rate", help="Requests per second: new arrival times in the "
                                                 "trace's order, Poisson (or gamma with --burstiness), seeded by --seed, as "
                                                 "vllm bench serve draws them [default: the trace's own timestamps; "
                                                 "required for a dataset without them: ShareGPT, custom JSONL]."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Shape of the gamma gaps under --request-rate: 1 Poisson, below "
                                                               "1 burstier, above 1 more regular (vllm bench serve's)."),
    max_concurrency: Optional[int] = typer.Option(None, "--max-concurrency", help="At most this many requests in flight: a "
                                                  "request waits for a free slot and its latency counts from when it is sent "
                                                  "(vllm bench serve's)."),
) -> None:
    """Serve a request trace at its own timestamps on the scenario's Strong deployment; TTFT, TPOT and E2E like vllm bench serve.

    The deployment is the scenario's Strong one (--strong-model, --strong-hardware,
    --strong-gpus, dtypes, --strong-serving-engine); its scheduler limits are the engine's
    defaults for the GPU unless --max-seqs / --max-tokens say otherwise.
    """
    fmt = check_format(fmt, as_json)
    # guards against typos, not limits of the method
    for name, value, lo, hi in (("--replicas", replicas, 1, MAX_REPLICAS), ("--max-seqs", max_seqs, 1, MAX_SEQS),
                                ("--max-tokens", max_tokens, 1, MAX_TOKENS), ("--chunk", chunk, 0, MAX_CHUNK),
                                ("--overlap", overlap, 0, MAX_CHUNK), ("--max-concurrency", max_concurrency, 1, MAX_CONCURRENCY)):
        if value is not None and not lo <= value <= hi:
            fail(f"{name}: expected a whole number in [{lo:,}, {hi:,}], got {value}")
    try:
        prices = parse_prices(price)
    except ValueError as exc:
        fail(f"--price: {exc}")
    try:  # before any work: -o over the trace (it was replaced by Parquet), a scenario file, or a file -o did not write
        check_outputs({"-o": out}, {"TRACE": trace, **input_files(scenario)}, InputError, kinds={"-o": PARQUET})
    except InputError as exc:
        fail(str(exc))
    if out is not None:
        atomic.check_writable(out)
    try:
        requests = load_requests(trace)
    except (InputError, ValueError) as exc:  # TraceFormatError names the file, line and field
        fail(exc)
    if request_rate is not None or burstiness != 1.0:
        if request_rate is None:
            fail("--burstiness: shapes the gaps of --request-rate; give --request-rate too")
        try:
            requests = dataclasses.replace(requests, arrival_s=resample_arrivals(len(requests), request_rate, burstiness,
                                                                                 scenario.seed))
        except ValueError as exc:
            fail(str(exc))
    if requests.arrival_s is None:
        if requests.record_names is not None:  # a dataset: ShareGPT and custom records have none, a result without start_times
            fail(f"{trace}: no arrival times (a ShareGPT or custom dataset has none; a vllm bench serve result has them as "
                 "start_times): give --request-rate RPS to send its requests at that rate, in file order, as vllm bench serve "
                 "does" + (f" ({requests.arrivals_note})" if requests.arrivals_note else ""))
        fail(f"{trace}: no arrival times (a column arrival_s, Time or TIMESTAMP): replay serves a trace at its own timestamps; "
             "give --request-rate to send its requests at a rate instead (`specagent plan --requests` sizes a fleet for one)")
    if scenario.strong_api is not None:
        fail(f"the scenario's Strong model is a hosted API ({scenario.strong_api}); replay serves a trace on a self-hosted "
             "deployment: drop --edge or set [strong] in the scenario")
    # sized to the trace, as plan sizes to its longest task (planner.search_job): replay's check_requests_fit holds the
    # longest request (prompt + output) to the model's window and the replica's memory, in plan's and sweep's words; a
    # fixed 32,768-token sizing refused a model with a shorter window (SmolLM2-135M: 8,192) before any request was read
    setting = resolve(scenario, exclude=REPLAY_EXCLUDES, fit_context=None)
    strong = setting.strong
    sched = _scheduler(strong, max_seqs, max_tokens)
    writer: list = []
    if out is not None:
        atomic.make_parents(out)
    tmp = atomic.temp_beside(out, ".parquet") if out is not None else None

    def sink(columns: dict) -> None:
        import pandas as pd  # only with -o: replay's import path stays without pandas and pyarrow (issue #34: start-up)
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(pd.DataFrame(columns, columns=list(COLUMNS)), preserve_index=False)
        if not writer:
            writer.append(pq.ParquetWriter(tmp, table.schema))
        writer[0].write_table(table)

    try:
        with sigterm_as_interrupt(), \
                progress_bar(len(requests), f"replaying {len(requests):,} requests", show=fmt == "table" and not quiet) as advance:
            kw = dict(chunk=chunk, overlap=overlap, sink=sink if out is not None else None, progress=advance)
            if max_concurrency is not None:
                res = replay_limited(requests, strong, replicas, sched, setting.weight_mode, prices, max_concurrency, **kw)
            else:
                res = replay(requests, strong, replicas, sched, setting.weight_mode, prices, **kw)
            if request_rate is not None:
                res.request_rate, res.burstiness = request_rate, burstiness
            # what the reader said about the lengths and arrivals (estimated from text, records dropped) comes first
            arrivals_note = [requests.arrivals_note] if requests.arrivals_note and request_rate is None else []
            res.notes[:0] = [*requests.notes, *arrivals_note]
            res.notes += [f"--price {item}: no replica of this replay runs on that GPU (they run on {strong.hardware.id}); "
                          "the price is unused" for item in unused_prices(prices, [strong.hardware])]
        if writer:
            writer[0].close()
            os.replace(tmp, out)  # type: ignore[arg-type]
    except KeyboardInterrupt as exc:  # ^C, or SIGTERM (common.signals): the temp file goes, the earlier output stays
        error_line("interrupted: nothing written" + (f" ({out} untouched)" if out is not None else ""))
        raise typer.Exit(exit_code(exc)) from None
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))
    finally:
        if writer and tmp is not None and tmp.exists():
            writer[0].close()
        if tmp is not None and tmp.exists():
            tmp.unlink()
    if quiet:
        return
    stats = res.stats()
    stats["deployment"] = strong.describe()
    stats["scheduler"] = {"max_num_seqs": sched.max_num_seqs, "max_batched_tokens": sched.max_batched_tokens, "source": sched.source}
    stats["token_counts"] = "estimated from text" if requests.estimated else "as the trace gives them"
    stats["notes"] = [*res.notes, *undefined_notes(stats)]
    if fmt == "json":  # strict JSON, through the output guard every command's JSON passes (common/guard.py)
        print(json_out(strict(stats), indent=1, default=str))
    elif fmt == "csv":
        import pandas as pd
        sys.stdout.write(pd.DataFrame([{k: v for k, v in stats.items() if not isinstance(v, (dict, list))}]).to_csv(index=False))
    else:
        _print(res, out, f"{replicas} x {strong.describe()}", sched, requests.estimated)
