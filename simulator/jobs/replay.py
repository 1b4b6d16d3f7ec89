"""The replay job: a request trace served at its own timestamps on one Strong deployment, `vllm bench serve` style.

Why: a user coming from Vidur or `vllm bench serve` has a request trace and wants TTFT, TPOT
and end-to-end latency on a deployment, not an agent workload. The fleet engine already
serves plain requests (`fleet_build.request_tasks`); this module feeds it the trace in
chunks through the fleet builder's call records (`TaskPlan.call_records`), so memory stays
bounded at any trace length, and streams each request's result out.

`run(ReplayRequest(trace=...))` is the job (`specagent replay` prints its `ReplayResult`):
the trace read (a CSV, or a dataset `vllm bench serve` reads: traces/datasets.py), its
arrivals redrawn at `request_rate` when asked, the scenario's Strong deployment with the
engine's scheduler limits (or `max_seqs` / `max_tokens`), served `chunk` requests at a time,
and, with `rows`, every request's row streamed to a Parquet file written atomically (an
interruption leaves the earlier file as it was).

Chunking. Chunk k serves its requests after re-serving the last `overlap` requests of chunk
k-1 as a warm-up (the replicas then hold about the queue and batch they would hold in one
long run) and before serving the next `overlap` requests as a cool-down (its last requests
then compete with the arrivals after them); only the chunk's own requests are reported. Where the overlap is long enough,
the warm-up requests' times match those the previous chunk computed for them; the run
measures that match at every boundary and reports the largest gap, so an overlap too short
for the load (a queue longer than the overlap) is visible, never silent. `chunk=0` serves
the whole trace at once (exact; memory grows with the trace).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.vllm_result import (DEFAULT_METRICS, DEFAULT_PERCENTILES, VLLM_DEFAULT_METRICS, parse_metrics,
                                          parse_percentiles, percentile_word, stats_ms)
from specagent.simulator.capacity.fleet_build import build_fleet, check_requests_fit, request_tasks
from specagent.simulator.fleet.config import Scheduler, engine_scheduler
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, counted, report
from specagent.simulator.rates_prices import parse_prices, unused_prices
from specagent.traces.requests import RequestTrace, load_requests
from specagent.traces.vocabulary import LIMIT_REASONS, MAX_ARRIVAL_S

#: The scenario's fields a plain-serving replay does not read: everything about the agent and the Weak model.
NOT_READ = ("weak", "strong_api", "workload", "strategies", "k", "review", "acceptance", "verifier_prompt",
            "verifier_system_tokens", "engine", "prefix_caching",
            # user and tool waits, an API's verify sends, the pricing engine and the acceptance draws: agent things
            # a request trace has none of (issue #34: replay's help listed them)
            "environment", "api_verify_sends", "pricing_engine", "uncertainty")
#: Per-request result columns (what the Parquet output holds), each with its unit.
COLUMNS = ("request", "arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s", "queue_s", "replica")


#: Why replay's JSON has the mean ITL and nulls for its other figures (vLLM's block prints them as `-`).
ITL_NOTE = ("median, std and percentiles of ITL are null ('-'): the engine records each request's first and last token, "
            "not every token's time, so only the mean gap is known (exact: each request's decode time over its gaps, "
            "pooled)")


def undefined_notes(stats: dict, no_tpot: bool = False) -> list[str]:
    """Why a figure is null in the JSON (n/a in the table): each undefined figure is said, never left as NaN; `no_tpot`:
    no request has a second output token."""
    out = []
    if isinstance(stats.get("usd_per_hour"), float) and math.isnan(stats["usd_per_hour"]):
        out.append("usd_per_hour and usd_per_1k_requests are null: the GPU profile states no price (pass --price GPU=USD)")
    if no_tpot:
        out.append("TPOT and ITL figures are null: every request has one output token (TPOT is the time per output token "
                   "after the first)")
    if isinstance(stats.get("request_throughput"), float) and math.isnan(stats["request_throughput"]):
        out.append("throughputs are null: the replay took no time (every request finished as it arrived)")
    return out


def strict(stats: dict) -> dict:
    """`stats` with NaN (a figure the run does not define) as None: JSON has no NaN, and `undefined_notes` says why."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in stats.items()}


@dataclass
class ReplayResult(Result):
    """Totals and the per-request latencies (float32 arrays: 12 bytes a request) for the percentiles; `to_dict()` is
    what `specagent replay --json` prints (`vllm bench serve`'s figures, the deployment, its scheduler, the notes)."""

    requests: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    usd_per_hour: float
    gpus: int
    chunks: int
    #: The largest relative difference, over chunk boundaries, between the overlap requests' mean (and p90) end-to-end
    #: time as two neighbouring chunks computed it (0 for one chunk): how far the chunking is from one long run.
    boundary_gap: float = 0.0
    notes: list[str] = field(default_factory=list)
    output_tokens_each: np.ndarray | None = None  # per request, to weight ITL by the gaps each request has
    request_rate: float = math.inf  # --request-rate (inf: the trace's own timestamps, as vllm bench serve says 'inf')
    burstiness: float = 1.0
    max_concurrency: int | None = None
    replicas: int = 1
    deployment: str = ""  # the Strong deployment served on (Deployment.describe())
    scheduler: Scheduler | None = None  # its limits per iteration
    estimated: bool = False  # token counts estimated from a dataset's text (traces/datasets.py)
    #: --percentile-metrics and --metric-percentiles: the latency figures `vllm_result()` holds (vLLM's options)
    percentile_metrics: tuple[str, ...] = parse_metrics(DEFAULT_METRICS)
    metric_percentiles: tuple[float, ...] = parse_percentiles(DEFAULT_PERCENTILES)

    def totals(self) -> dict:
        """The run's counts, throughputs, price, chunking and arrival options (no per-request statistics: cheap)."""
        return {"requests": self.requests, "duration_s": self.duration_s, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "request_throughput_per_s": self.requests / self.duration_s if self.duration_s > 0 else math.nan,
                "output_throughput_tok_s": self.output_tokens / self.duration_s if self.duration_s > 0 else math.nan,
                "total_throughput_tok_s": (self.input_tokens + self.output_tokens) / self.duration_s
                if self.duration_s > 0 else math.nan,
                "gpus": self.gpus, "usd_per_hour": self.usd_per_hour,
                "usd_per_1k_requests": self.usd_per_hour * self.duration_s / 3600 / self.requests * 1000
                if self.requests else math.nan,
                "chunks": self.chunks, "chunk_boundary_gap": self.boundary_gap,
                # None: the trace's own timestamps (vllm bench serve prints 'inf'; JSON has no infinity)
                "request_rate_configured": None if math.isinf(self.request_rate) else self.request_rate,
                "burstiness": self.burstiness, "max_concurrency": self.max_concurrency}

    def stats(self) -> dict:
        """vllm bench serve's figures: throughput, and mean / median / p95 / p99 of TTFT, TPOT (ms) and E2E (s)."""
        out = self.totals()
        for name, x, scale in (("ttft_ms", self.ttft_s, 1e3), ("tpot_ms", self.tpot_s, 1e3), ("e2e_s", self.e2e_s, 1.0)):
            v = x[np.isfinite(x)].astype(np.float64) * scale
            for stat, f in (("mean", np.mean), ("median", np.median)):
                out[f"{stat}_{name}"] = float(f(v)) if len(v) else math.nan
            for q in (95, 99):
                out[f"p{q}_{name}"] = float(np.percentile(v, q)) if len(v) else math.nan
        out.update(self.itl_stats())
        return out

    def itl_stats(self, percentiles: tuple[float, ...] = (99.0,)) -> dict:
        """Inter-token latency (ms) as vllm bench serve reports it: over every gap between two output tokens, all
        requests pooled. The engine records a request's first and last token, not each one, so every gap of a request
        is its mean gap (its TPOT): the mean is exact; the median, std and percentiles miss the spread within a
        request."""
        keys = ["mean_itl_ms", "median_itl_ms", "std_itl_ms", *(f"p{percentile_word(p)}_itl_ms" for p in percentiles)]
        if self.output_tokens_each is None:
            return dict.fromkeys(keys, math.nan)
        gaps = np.maximum(self.output_tokens_each.astype(np.int64) - 1, 0)
        ok = np.isfinite(self.tpot_s) & (gaps > 0)
        v, w = self.tpot_s[ok].astype(np.float64) * 1e3, gaps[ok]
        if not len(v):
            return dict.fromkeys(keys, math.nan)
        order = np.argsort(v, kind="stable")
        cum = np.cumsum(w[order])

        def q(share: float) -> float:  # the gap at this share of all gaps (the lower one at a tie, as numpy's 'lower')
            return float(v[order][min(len(v) - 1, int(np.searchsorted(cum, share * cum[-1], side="left")))])

        mean = float(np.average(v, weights=w))
        return dict(zip(keys, (mean, q(0.5), math.sqrt(float(np.average((v - mean) ** 2, weights=w))),
                               *(q(p / 100) for p in percentiles))))

    def vllm_result(self) -> dict:
        """The run under `vllm bench serve`'s result keys (common/vllm_result.py; latencies in ms), the latency figures
        those of `percentile_metrics` at `metric_percentiles`: every value is one the replay computed (the percentiles
        over the simulated requests, numpy's linear rule as vLLM's). ITL's mean only: the engine records each
        request's first and last token, not every token's time, so the mean gap is known exactly (each request's decode
        time over its gaps, pooled) and the median, std and percentiles are not (NaN, said in the notes)."""
        s = self.totals()
        out: dict = {"num_prompts": self.requests, "request_rate": s["request_rate_configured"] or "inf",
                     "burstiness": self.burstiness, "max_concurrency": self.max_concurrency, "duration": self.duration_s,
                     "completed": self.requests, "failed": 0, "total_input_tokens": self.input_tokens,
                     "total_output_tokens": self.output_tokens, "request_throughput": s["request_throughput_per_s"],
                     "request_goodput": None, "output_throughput": s["output_throughput_tok_s"],
                     "total_token_throughput": s["total_throughput_tok_s"]}
        ps = self.metric_percentiles
        per_request = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2el": self.e2e_s}
        for m in self.percentile_metrics:
            if m == "itl":  # the mean alone: the spread of the gaps within a request is not simulated (ITL_NOTE)
                out.update({k: v if k == "mean_itl_ms" else math.nan for k, v in self.itl_stats(ps).items()})
            else:
                x = per_request[m]
                out.update(stats_ms(m, x[np.isfinite(x)].astype(np.float64) * 1e3, ps))
        return out

    def figures(self) -> dict:
        """`vllm_result()`, then under names of specagent's own: the GPUs and their price, the chunking, the deployment,
        its scheduler, how the token counts were known, the options and every note (NaN kept: the CSV row shows it
        empty)."""
        out = self.vllm_result()
        s = self.totals()
        for k in ("gpus", "usd_per_hour", "usd_per_1k_requests", "chunks", "chunk_boundary_gap"):
            out[k] = s[k]
        out["deployment"] = self.deployment
        sched = self.scheduler
        out["scheduler"] = {"max_num_seqs": sched.max_num_seqs, "max_batched_tokens": sched.max_batched_tokens,
                            "source": sched.source} if sched is not None else None
        out["token_counts"] = "estimated from text" if self.estimated else "as the trace gives them"
        out["percentile_metrics"] = ",".join(self.percentile_metrics)
        out["metric_percentiles"] = ",".join(percentile_word(p) for p in self.metric_percentiles)
        no_tpot = not np.isfinite(self.tpot_s).any()
        itl = [] if "itl" not in self.percentile_metrics or no_tpot else [ITL_NOTE]
        out["notes"] = [*self.notes, *itl, *undefined_notes(out, no_tpot=no_tpot)]
        return out

    def to_dict(self) -> dict[str, Any]:
        """`figures()` as strict JSON data: NaN as None, each said in the notes."""
        return strict(self.figures())

    def write(self, folder: str | Path) -> list[Path]:
        """replay.json (`to_dict()`) in `folder`, atomically (the per-request rows stream to `run`'s `rows` file)."""
        path = Path(folder) / "replay.json"
        atomic.write_text(path, atomic.json_text(self.to_dict()))
        return [path]


def _per_request(calls: np.ndarray, sub: RequestTrace, base: int, t0: float) -> dict[str, np.ndarray]:
    """One row per request from the engine's call records (one call per request), as columns (COLUMNS) in request
    order: numpy arrays, not a DataFrame, so replay's path never imports pandas (issue #34: start-up)."""
    c = calls[np.argsort(calls["task"], kind="stable")]  # task ids are unique: the one order a frame sort gives too
    idx = c["task"]
    submit, first, done = c["t_submit_s"], c["t_first_token_s"], c["t_done_s"]
    ttft = first - submit
    out_tok = sub.output_tokens[idx]
    # time per output token after the first, as vllm bench serve reports it (undefined for one-token outputs)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_tok > 1, (done - first) / np.maximum(out_tok - 1, 1), np.nan)
    return {"request": (base + idx).astype(np.int64), "arrival_s": sub.arrival_s[idx] + t0,  # type: ignore[index]
            "prompt_tokens": sub.prompt_tokens[idx], "output_tokens": out_tok, "ttft_s": ttft, "tpot_s": tpot,
            "e2e_s": done - submit, "queue_s": c["t_admit_s"] - submit, "replica": c["replica"].astype(np.int32)}


def _rows(cols: dict[str, np.ndarray], keep: np.ndarray | slice) -> dict[str, np.ndarray]:
    """The rows `keep` (a mask or a slice) of every column."""
    return {k: v[keep] for k, v in cols.items()}


def _skipna_max(x: np.ndarray) -> float:
    """The largest value that is not NaN (NaN when there is none), as a pandas Series' max."""
    v = x[~np.isnan(x)]
    return float(v.max()) if len(v) else math.nan


def resample_arrivals(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """n arrival times at `rate` requests/s, as vllm bench serve draws them: gaps from a gamma distribution of shape
    `burstiness` and mean 1/rate (burstiness 1: a Poisson process; below 1 burstier, above 1 more regular), seeded;
    the first request arrives at 0."""
    if not (rate > 0 and math.isfinite(rate)):
        raise JobError(f"must be a finite rate > 0 requests/s, got {rate}", field="request_rate")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise JobError(f"must be > 0, got {burstiness}", field="burstiness")
    # bounded where it enters: a mean gap past the trace clock's span (1e-320 requests/s gave gaps of inf, then
    # arrivals inf - inf = NaN and a mean E2E of -6e33 s) is refused, as is a draw that spans more than it
    if not 1.0 / rate <= MAX_ARRIVAL_S or not rate * burstiness > 0 or not math.isfinite(1.0 / (rate * burstiness)):
        raise JobError(f"{rate:g}: one request every {1.0 / rate:g} s on average, past the "
                       f"{MAX_ARRIVAL_S:g} s ({LIMIT_REASONS[MAX_ARRIVAL_S]}); expected a rate of at least "
                       f"{1.0 / MAX_ARRIVAL_S:g} requests/s", field="request_rate")
    gaps = np.random.default_rng([int(seed), 4099, 3]).gamma(burstiness, 1.0 / (rate * burstiness), n)
    out = np.cumsum(gaps)
    out = out - out[0] if n else out
    if n and not out[-1] <= MAX_ARRIVAL_S:
        raise JobError(f"{rate:g} (burstiness {burstiness:g}): the {n:,} requests would arrive over "
                       f"{out[-1]:g} s, past the {MAX_ARRIVAL_S:g} s ({LIMIT_REASONS[MAX_ARRIVAL_S]}); give a higher rate",
                       field="request_rate")
    return out


def concurrency_starts(arrival_s: np.ndarray, e2e_s: np.ndarray, limit: int) -> np.ndarray:
    """When each request is sent with at most `limit` in flight (vllm bench serve --max-concurrency: a semaphore): at
    its arrival, or when the earliest of the `limit` requests in flight finishes, whichever is later, in order."""
    starts = np.empty(len(arrival_s))
    flight: list[float] = []
    for i, (a, d) in enumerate(zip(arrival_s.tolist(), e2e_s.tolist())):
        while flight and flight[0] <= a:
            heapq.heappop(flight)
        s = a if len(flight) < limit else max(a, heapq.heappop(flight))
        starts[i] = s
        heapq.heappush(flight, s + (d if math.isfinite(d) else 0.0))
    return starts


#: Rounds of the fixed point that closes the loop under --max-concurrency (`replay_limited`), the step it takes towards
#: each round's send times (undamped it oscillates: late sends, a light load, early sends, a heavy one), and the change
#: in the mean and p99 end-to-end latency between two rounds under which it has settled.
CONCURRENCY_ROUNDS = 30
CONCURRENCY_DAMPING = 0.5
CONCURRENCY_TOL = 1e-3


def replay_limited(trace: RequestTrace, strong, replicas: int, scheduler: Scheduler | None, weight_mode: str,
                   prices: dict[str, float] | None, max_concurrency: int, **kw) -> ReplayResult:
    """`replay` with at most `max_concurrency` requests in flight: a request's send time depends on when earlier ones
    finish, which depends on the send times, so it is solved as a fixed point: replay at the send times, recompute
    them from the latencies (`concurrency_starts`), move half way there, until the mean and p99 end-to-end latency
    change by under CONCURRENCY_TOL between rounds (single send times keep moving by an iteration or so: the engine
    steps in iterations); at most CONCURRENCY_ROUNDS rounds, a note says if it stopped short. Latencies count from
    the send time, as vllm's do."""
    if max_concurrency < 1:
        raise JobError(f"must be >= 1, got {max_concurrency}", field="max_concurrency")
    assert trace.arrival_s is not None
    arrival = trace.arrival_s.astype(np.float64)
    sink, progress = kw.pop("sink", None), kw.pop("progress", None)
    starts = arrival
    before, change = None, math.inf
    for _ in range(CONCURRENCY_ROUNDS):
        res = replay(replace(trace, arrival_s=starts), strong, replicas, scheduler, weight_mode, prices, **kw)
        e2e = res.e2e_s.astype(np.float64)
        now = np.array([np.nanmean(e2e), np.nanpercentile(e2e, 99)])
        if before is not None:
            change = float(np.max(np.abs(now - before) / np.maximum(before, 1e-12)))
            if change <= CONCURRENCY_TOL:
                break
        before = now
        new = concurrency_starts(arrival, e2e, max_concurrency)
        starts = np.maximum.accumulate(starts + CONCURRENCY_DAMPING * (new - starts))  # in order, as sent
    res = replay(replace(trace, arrival_s=starts), strong, replicas, scheduler, weight_mode, prices, sink=sink,
                 progress=progress, **kw)
    res.max_concurrency = max_concurrency
    res.duration_s = float(np.max(starts + res.e2e_s)) - float(arrival[0]) if len(arrival) else 0.0
    if change > CONCURRENCY_TOL:
        res.notes.append(f"--max-concurrency: the latencies had not settled after {CONCURRENCY_ROUNDS} rounds (the last "
                         f"round moved the mean or p99 end-to-end time by {100 * change:.2f}%); the figures are the last round's")
    return res


def replay(trace: RequestTrace, strong, replicas: int = 1, scheduler: Scheduler | None = None, weight_mode: str = "union",
           prices: dict[str, float] | None = None, chunk: int = 100_000, overlap: int = 5_000,
           sink: Callable[[dict[str, np.ndarray]], None] | None = None,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Serve `trace` at its timestamps on `replicas` replicas of the deployment `strong`; `sink(columns)` receives each
    chunk's per-request rows (a dict of COLUMNS' arrays) in request order, `progress(k)` the number of requests just
    done."""
    if trace.arrival_s is None:
        raise ValueError(f"{trace.source or 'request trace'}: no arrival times to replay (a column arrival_s, Time or TIMESTAMP)")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if chunk < 0 or overlap < 0:
        raise ValueError("chunk and overlap must be >= 0")
    n = len(trace)
    size = n if chunk == 0 or chunk >= n else chunk
    overlap = min(overlap, size) if size < n else 0
    check_requests_fit(trace, lambda tokens: strong.check_fit(1, tokens))  # what plan and sweep refuse, replay refuses
    fleet = build_fleet(None, strong, 0, replicas, weight_mode=weight_mode, scheduler=scheduler, prices=prices)
    pool = fleet.strong
    price = pool.usd_per_gpu_hour if pool is not None and pool.usd_per_gpu_hour is not None else math.nan
    ttft, tpot, e2e = (np.empty(n, dtype=np.float32) for _ in range(3))
    last_done, gap, chunks = 0.0, 0.0, 0
    prev_tail: dict[str, np.ndarray] | None = None
    for start in range(0, n, size):
        # warm-up before the chunk, and as many requests after it: the chunk's last requests then share their
        # replicas with the arrivals that follow them, as in one long run
        lo, end, hi = max(0, start - overlap), min(n, start + size), min(n, start + size + overlap)
        t0 = float(trace.arrival_s[lo])
        sub = RequestTrace(trace.prompt_tokens[lo:hi], trace.output_tokens[lo:hi], trace.arrival_s[lo:hi] - t0, trace.source)
        rows = _per_request(request_tasks(sub).call_records(fleet, sub.arrival_s), sub, lo, t0)
        if prev_tail is not None and start > lo:  # the warm-up requests against the times the previous chunk gave them
            req = rows["request"]
            warm = req < start
            w = rows["e2e_s"][warm].astype(np.float64)
            # the previous chunk's time for each warm-up request (NaN where it has none); both are in request order
            prev_req, prev_e2e = prev_tail["request"], prev_tail["e2e_s"].astype(np.float64)
            at = np.minimum(np.searchsorted(prev_req, req[warm]), max(len(prev_req) - 1, 0))
            b = np.where(prev_req[at] == req[warm], prev_e2e[at], np.nan) if len(prev_req) else np.full(len(w), np.nan)
            # what is reported is distributions, so that is what must agree: the mean and the p99 of the overlap's
            # end-to-end times as this chunk and the previous one computed them (single requests can differ a lot:
            # one request's batch mates shift when an arrival lands one iteration earlier)
            ok = np.isfinite(w) & np.isfinite(b)
            if ok.any():
                for f in (np.mean, lambda x: np.percentile(x, 90)):  # p90: stable on a few thousand requests
                    ref = float(f(b[ok]))
                    gap = max(gap, abs(float(f(w[ok])) - ref) / ref if ref > 0 else 0.0)
        own = _rows(rows, (rows["request"] >= start) & (rows["request"] < end))
        i = own["request"]
        ttft[i], tpot[i], e2e[i] = own["ttft_s"], own["tpot_s"], own["e2e_s"]
        last_done = max(last_done, _skipna_max(own["arrival_s"] + own["e2e_s"]))
        prev_tail = _rows(own, slice(max(0, len(i) - overlap), None)) if overlap else None
        if sink is not None:
            sink(own)
        if progress is not None:
            progress(len(i))
        chunks += 1
    duration = last_done - float(trace.arrival_s[0])
    notes = []
    if chunks > 1 and gap > 0.02:
        notes.append(f"chunked replay: at a chunk boundary the overlap's mean or p90 end-to-end time differs by {100 * gap:.1f}% "
                     "between the two chunks (the queue outlasts the overlap at this load); raise --overlap or use --chunk 0 "
                     "for the exact run")
    gpus = replicas * int(strong.gpus)
    return ReplayResult(n, duration, int(trace.prompt_tokens.sum()), int(trace.output_tokens.sum()), ttft, tpot, e2e,
                        price * gpus, gpus, chunks, gap, notes, output_tokens_each=np.asarray(trace.output_tokens))


# ------------------------------------------------------------------------------------------------ the job
#: Guards against typos, not limits of the method.
MAX_REPLICAS = 1_000_000
MAX_SEQS = 1 << 20  # sequences per iteration (vLLM's default is 256-1024)
MAX_TOKENS = 1 << 24  # tokens per iteration
MAX_CHUNK = 100_000_000
MAX_CONCURRENCY = 10_000_000
#: (lowest, highest) whole number each count field takes.
COUNT_RANGES = {"replicas": (1, MAX_REPLICAS), "max_seqs": (1, MAX_SEQS), "max_tokens": (1, MAX_TOKENS),
                "chunk": (0, MAX_CHUNK), "overlap": (0, MAX_CHUNK), "max_concurrency": (1, MAX_CONCURRENCY)}

TRACE_HELP = ("Request trace CSV: arrival time, prompt tokens, output tokens (headers arrival_s,prompt_tokens,output_tokens; "
              "Vidur's and the Azure LLM traces' are read too), or a dataset vllm bench serve reads (.json / .jsonl: "
              "ShareGPT, custom JSONL with prompt and output_tokens, a --save-detailed result; lengths from text are estimated).")


@dataclass(frozen=True)
class ReplayRequest(Request):
    """A request trace to serve on the scenario's Strong deployment (its model, GPU, GPUs, dtypes, serving engine)."""

    trace: Path | None = field(default=None, metadata={"argument": True, "required": True, "help": TRACE_HELP})
    replicas: int = field(default=1, metadata={"help": "Strong replicas serving the trace (requests go to the least loaded)."})
    max_seqs: int | None = field(default=None, metadata={
        "help": "Sequences per iteration per replica (vLLM --max-num-seqs; default: the serving engine's default on this GPU)."})
    max_tokens: int | None = field(default=None, metadata={
        "help": "Tokens per iteration per replica (vLLM --max-num-batched-tokens; default: the engine's)."})
    price: tuple[str, ...] = field(default=(), metadata={
        "help": "$/GPU-hour, e.g. --price h20=1.85 (default: the profile's sourced price)."})
    chunk: int = field(default=100_000, metadata={
        "help": "Requests simulated at once (memory is bounded by this, not the trace); 0: the whole trace at once (exact)."})
    overlap: int = field(default=5_000, metadata={
        "help": "Requests re-served before and after each chunk so its edges see the queue of one long run; the run reports "
                "how well neighbouring chunks agree."})
    request_rate: float | None = field(default=None, metadata={
        "help": "Requests per second: new arrival times in the trace's order, Poisson (or gamma with --burstiness), seeded by "
                "--seed, as vllm bench serve draws them [default: the trace's own timestamps; required for a dataset without "
                "them: ShareGPT, custom JSONL]."})
    burstiness: float = field(default=1.0, metadata={
        "help": "Shape of the gamma gaps under --request-rate: 1 Poisson, below 1 burstier, above 1 more regular "
                "(vllm bench serve's)."})
    max_concurrency: int | None = field(default=None, metadata={
        "help": "At most this many requests in flight: a request waits for a free slot and its latency counts from when it "
                "is sent (vllm bench serve's)."})
    percentile_metrics: str = field(default=DEFAULT_METRICS, metadata={
        "help": "Comma list of the latencies to report percentiles of: ttft, tpot, itl, e2el (vllm bench serve's option; "
                f"its default is {VLLM_DEFAULT_METRICS}, this one also reports e2el, as specagent bench serve does)."})
    metric_percentiles: str = field(default=DEFAULT_PERCENTILES, metadata={
        "help": "Comma list of the percentiles to report, e.g. 50,90,99 (vllm bench serve's option and default)."})

    def check(self) -> None:
        if self.trace is None:
            raise JobError("a request trace to replay is required", field="trace")
        for name, (lo, hi) in COUNT_RANGES.items():
            v = getattr(self, name)
            if v is not None and not lo <= v <= hi:
                raise JobError(f"expected a whole number in [{lo:,}, {hi:,}], got {v}", field=name)
        prices(self)
        for name, parse in (("percentile_metrics", parse_metrics), ("metric_percentiles", parse_percentiles)):
            try:
                parse(getattr(self, name))
            except ValueError as exc:
                raise JobError(str(exc), field=name) from None
        if self.burstiness != 1.0 and self.request_rate is None:
            raise JobError("shapes the gaps of `request_rate`; give `request_rate` too", field="burstiness")


def prices(request: ReplayRequest) -> dict[str, float]:
    """The request's $/GPU-hour overrides by GPU type (a bad entry is a JobError on `price`)."""
    try:
        return parse_prices(request.price)
    except ValueError as exc:
        raise JobError(str(exc), field="price") from None


def scheduler_limits(dep: Any, max_seqs: int | None, max_tokens: int | None) -> Scheduler:
    """The serving engine's defaults on this GPU, with `max_seqs` / `max_tokens` laid over them; a bad pair names the
    field."""
    base = engine_scheduler(dep)
    if max_seqs is None and max_tokens is None:
        return base
    seqs = base.max_num_seqs if max_seqs is None else max_seqs
    tokens = base.max_batched_tokens if max_tokens is None else max_tokens
    if seqs < 1:
        raise JobError(f"expected sequences per iteration >= 1, got {seqs}", field="max_seqs")
    if tokens is not None and tokens < seqs:
        raise JobError(f"the token budget per iteration ({tokens}) must be at least `max_seqs` ({seqs}): every running "
                       "sequence decodes one token per iteration", field="max_tokens")
    return Scheduler(seqs, tokens, f"--max-seqs {seqs} / --max-tokens {tokens} over {base.source}")


def read_trace(request: ReplayRequest) -> RequestTrace:
    """The request's trace with its arrival times: the file's own, or drawn at `request_rate` (seeded by the scenario's
    seed); a trace without either is refused, naming the file."""
    path = request.trace
    try:
        trace = load_requests(path)  # type: ignore[arg-type]
    except InputError:
        raise
    except ValueError as exc:  # TraceFormatError names the file, the line and the field
        raise InputError(str(exc)) from exc
    if request.request_rate is not None:
        trace = dataclasses.replace(trace, arrival_s=resample_arrivals(len(trace), request.request_rate, request.burstiness,
                                                                       request.scenario.seed))
    if trace.arrival_s is None:  # named by its file; `request_rate` is the fix (the command line shows its flag)
        if trace.record_names is not None:  # a dataset: ShareGPT and custom records have none, a result without start_times
            raise JobError(f"{path}: no arrival times (a ShareGPT or custom dataset has none; a vllm bench serve result has "
                           "them as start_times): give `request_rate` RPS to send its requests at that rate, in file order, "
                           "as vllm bench serve does" + (f" ({trace.arrivals_note})" if trace.arrivals_note else ""))
        raise JobError(f"{path}: no arrival times (a column arrival_s, Time or TIMESTAMP): replay serves a trace at its own "
                       "timestamps; give `request_rate` to send its requests at a rate instead (a capacity plan of the "
                       "requests, `specagent plan --requests`, sizes a fleet for one)")
    return trace


@contextmanager
def parquet_rows(path: Path | None) -> Iterator[Callable[[dict[str, np.ndarray]], None] | None]:
    """A sink for the per-request rows (COLUMNS), streamed to a temp file beside `path` and moved onto it once the run
    has finished; a failure or an interruption removes the temp file and leaves `path` as it was (None: no rows kept)."""
    if path is None:
        yield None
        return
    atomic.make_parents(path)
    tmp = atomic.temp_beside(path, ".parquet")
    writer: list = []

    def sink(columns: dict[str, np.ndarray]) -> None:
        import pandas as pd  # only with rows: replay's import path stays without pandas and pyarrow (issue #34: start-up)
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(pd.DataFrame(columns, columns=list(COLUMNS)), preserve_index=False)
        if not writer:
            writer.append(pq.ParquetWriter(tmp, table.schema))
        writer[0].write_table(table)

    try:
        yield sink
        if writer:
            writer[0].close()
            os.replace(tmp, path)
    finally:
        if writer and tmp.exists():
            writer[0].close()
        if tmp.exists():
            tmp.unlink()


def run(request: ReplayRequest, progress: Progress | None = None, rows: str | Path | None = None) -> ReplayResult:
    """Replay the request's trace on the scenario's Strong deployment; with `rows`, every request's row (COLUMNS) is
    streamed to that Parquet file, which appears only once the run has finished."""
    request.check()
    out = Path(rows) if rows is not None else None
    if out is not None:
        atomic.check_writable(out)
    trace = read_trace(request)
    sc = request.scenario
    if sc.strong_api is not None:
        raise InputError(f"the scenario's Strong model is a hosted API ({sc.strong_api}); replay serves a trace on a "
                         "self-hosted deployment: give the scenario a [strong] deployment, not strong_api (the shipped edge "
                         "scenario has none)")
    # sized to the trace, as plan sizes to its longest task: `replay` holds the longest request (prompt + output) to the
    # model's window and the replica's memory, in plan's and sweep's words (a fixed 32,768-token sizing refused a model
    # with a shorter window, SmolLM2-135M: 8,192, before any request was read)
    strong = sc.deployment("strong", fit_context=None)  # the Weak pool's files are not read: replay serves no Weak model
    sched = scheduler_limits(strong, request.max_seqs, request.max_tokens)
    price = prices(request)
    n = len(trace)
    what = f"replaying {n:,} requests"
    advance = counted(progress, what, n)
    report(progress, what, 0, n)
    with parquet_rows(out) as sink:
        kw: dict[str, Any] = dict(chunk=request.chunk, overlap=request.overlap, sink=sink, progress=advance)
        try:
            if request.max_concurrency is not None:
                res = replay_limited(trace, strong, request.replicas, sched, sc.weight_mode, price, request.max_concurrency, **kw)
            else:
                res = replay(trace, strong, request.replicas, sched, sc.weight_mode, price, **kw)
        except InputError:
            raise
        except ValueError as exc:  # a request past the window or the replica's memory, named by its line
            raise InputError(str(exc)) from exc
    if request.request_rate is not None:
        res.request_rate, res.burstiness = request.request_rate, request.burstiness
    # what the reader said about the lengths and arrivals (estimated from text, records dropped) comes first
    arrivals_note = [trace.arrivals_note] if trace.arrivals_note and request.request_rate is None else []
    res.notes[:0] = [*trace.notes, *arrivals_note]
    res.notes += [f"--price {item}: no replica of this replay runs on that GPU (they run on {strong.hardware.id}); "
                  "the price is unused" for item in unused_prices(price, [strong.hardware])]
    res.replicas, res.deployment, res.scheduler, res.estimated = request.replicas, strong.describe(), sched, trace.estimated
    res.percentile_metrics = parse_metrics(request.percentile_metrics)
    res.metric_percentiles = parse_percentiles(request.metric_percentiles)
    return res
