"""`specagent bench serve`: a streaming load generator over an OpenAI-compatible chat-completions endpoint.

Why it is here: the time model is fitted to other people's servers; a user's own server is a better
source, and this writes its figures in `measurements/`'s serving-latency schema, which
`specagent latency fit --data` takes. The figures follow `vllm bench serve`'s definitions
(vllm-project/vllm `vllm/benchmarks/serve.py`): TTFT = first streamed content chunk − request
sent; ITL = the gaps between later chunks; TPOT = (E2E − TTFT) / (output tokens − 1), per request,
then averaged; E2E = last chunk − request sent. Output tokens are the server's
``usage.completion_tokens`` (asked with ``stream_options.include_usage``) or, where a server
reports none, the number of content chunks — which the summary then says.

Requests arrive open loop (``request_rate``: Poisson, or gamma with a burstiness factor, from a
seeded generator) and/or are capped at ``max_concurrency`` in flight (closed loop when the rate is
infinite). Nothing is retried: a failed request is a measured failure, counted with its reason. A
request the server refuses for a reason retrying cannot fix (401, 404, 400) stops the run with
the client's one-line error; the API key is only ever sent as a header (`Endpoint.headers`).
Requests go through `transport.Transport`, as the client's do: ``--timeout`` bounds each whole
streamed answer (connect to last byte, so a server that drips events cannot hold a slot), and ^C
cancels the requests in flight.

An answer is checked against its request and itself before it counts (`check_answer`): more content chunks than
``max_tokens``, a ``usage.completion_tokens`` above ``max_tokens`` or below the chunks streamed, a
``usage.prompt_tokens`` of 0 or more than the prompt's bytes (a token holds at least one byte) plus
`TEMPLATE_ALLOWANCE`, an error event mid-stream (vLLM's ``data: {"error": ...}``, or ``event: error``) and a stream
that stops with neither a ``finish_reason`` nor ``[DONE]`` (a cut connection) are each a failed request with the
reason, never a figure. Every text the server supplies (the answering model's name, error events, a quoted bad
event) is masked with the endpoint's key and the environment's (`common.redact.Redactor`) before it is cut or kept.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from specagent.common.errors import InputError, read_text
from specagent.common.redact import Redactor
from specagent.common.signals import interrupted_by
from specagent.common.vllm_result import METRIC_NAMES, format_block
from specagent.endpoints.client import Endpoint, EndpointError, one_line, refusal
from specagent.endpoints.transport import BodyTooLarge, Cancelled, DeadlineExceeded, Transport, lines
from specagent.traces.schema import MAX_CONTEXT_TOKENS
from specagent.traces.vocabulary import MAX_ARRIVAL_S

#: Words of one token each in the common BPE vocabularies (GPT-2, Llama, Qwen: a space + a short English word),
#: so a random prompt of N words is close to N tokens; the server's usage.prompt_tokens is what gets recorded.
_WORDS = ("the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as", "at", "by", "be", "this",
          "from", "or", "an", "are", "not", "but", "had", "have", "one", "all", "were", "we", "when", "there", "can", "more",
          "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "only", "time", "new", "some",
          "could", "these", "two", "may", "first", "then", "do", "any", "like", "my", "now", "over", "such", "our", "man")
#: The instruction before the filler: a model told to continue writes until max_tokens more often than one asked a question.
_LEAD = "Continue this text for as long as you can:"
MAX_CONCURRENCY = 1024
#: Tokens a chat template may add around a prompt (role markers, a default system prompt): room for an answer's
#: usage.prompt_tokens beyond the prompt itself before the count is called impossible. Generous on purpose: the
#: check is there for counts no tokenizer gives (10^7 for an 8-word prompt), not to police templates.
TEMPLATE_ALLOWANCE = 8192


@dataclass(frozen=True)
class BenchRequest:
    index: int
    prompt: str
    input_len: int  # the length asked for (the server's count of the prompt is recorded when it answers)
    output_len: int


@dataclass
class RequestResult:
    index: int
    input_len: int
    output_len: int
    ok: bool = False
    error: str = ""
    prompt_tokens: int | None = None
    output_tokens: int = 0
    usage_reported: bool = False
    finish_reason: str | None = None
    start_s: float = 0.0  # since the benchmark's start
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    chunks: int = 0
    model: str | None = None  # the model the server says answered

    @property
    def tpot_s(self) -> float | None:
        if not self.ok or self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["tpot_s"] = self.tpot_s
        return d


# ------------------------------------------------------------------------- workload
#: Most prompt words one run builds (every prompt is built before the first request, so this bounds its memory: about
#: 1.3 GB of text). Each flag is bounded on its own (--num-prompts 10^6, --input-len 10,485,760); their product was not,
#: and 10^6 prompts of 10^7 words would be built word by word for hours.
MAX_PROMPT_WORDS = 1 << 28


def check_prompt_words(words: int, what: str) -> None:
    """Refuse, before any prompt is built, a run whose prompts hold more than MAX_PROMPT_WORDS words."""
    if words > MAX_PROMPT_WORDS:
        raise InputError(f"{what} add up to {words:,} prompt words, past the {MAX_PROMPT_WORDS:,} one run builds before its "
                         "first request (about 1.3 GB); fewer or shorter prompts per run (run it in parts)", "input_len")


def random_requests(n: int, input_len: int, output_len: int, seed: int, range_ratio: float = 0.0) -> list[BenchRequest]:
    """`n` prompts of about `input_len` tokens asking for `output_len`; with range_ratio r, lengths uniform in [len(1-r), len(1+r)]."""
    if not 0.0 <= range_ratio < 1.0:
        raise InputError(f"--range-ratio: expected 0 <= r < 1, got {range_ratio}", "range_ratio")
    check_prompt_words(math.ceil(n * input_len * (1 + range_ratio)), f"--num-prompts {n:,} x --input-len {input_len:,}"
                       + (f" x (1 + --range-ratio {range_ratio:g})" if range_ratio else ""))
    rng = random.Random(f"bench:{seed}")
    out = []
    for i in range(n):
        il = max(1, round(input_len * rng.uniform(1 - range_ratio, 1 + range_ratio)))
        ol = max(1, round(output_len * rng.uniform(1 - range_ratio, 1 + range_ratio)))
        out.append(BenchRequest(i, _prompt(rng, il), il, ol))
    return out


def _prompt(rng: random.Random, tokens: int) -> str:
    lead = len(_LEAD.split())
    return " ".join([_LEAD, *(rng.choice(_WORDS) for _ in range(max(0, tokens - lead)))])


def dataset_requests(path: Path, n: int | None, seed: int) -> list[BenchRequest]:
    """Requests from a CSV of `input_tokens,output_tokens` per line (a request trace); the first `n` (default: all)."""
    text = read_text(path, InputError, "request trace")
    reader = csv.DictReader(io.StringIO(text))
    cols = set(reader.fieldnames or ())
    if not {"input_tokens", "output_tokens"} <= cols:
        raise InputError(f"{path}: line 1: expected columns input_tokens,output_tokens (one request per line), got "
                         f"{', '.join(sorted(cols)) or 'none'}", "dataset")
    rng = random.Random(f"bench:{seed}")
    lengths: list[tuple[int, int]] = []
    for line, row in enumerate(reader, start=2):
        vals = []
        for c in ("input_tokens", "output_tokens"):
            try:
                v = float(row[c])
            except (TypeError, ValueError):
                raise InputError(f"{path}: line {line}: {c} {row[c]!r} is not a number", "dataset") from None
            if not (math.isfinite(v) and v >= 1 and v == int(v)):
                raise InputError(f"{path}: line {line}: {c} must be a whole number >= 1, got {row[c]!r}", "dataset")
            if v > MAX_CONTEXT_TOKENS:  # as --input-len / --output-len: a 10^12-token prompt would be built word by word
                raise InputError(f"{path}: line {line}: {c} {row[c]!r} is past {MAX_CONTEXT_TOKENS:,} tokens (the largest "
                                 "public context window, Llama 4 Scout's; --input-len and --output-len have the same bound)",
                                 "dataset")
            vals.append(int(v))
        lengths.append((vals[0], vals[1]))
        if n is not None and len(lengths) >= n:
            break
    if not lengths:
        raise InputError(f"{path}: no request (expected one input_tokens,output_tokens line per request)", "dataset")
    check_prompt_words(sum(i for i, _ in lengths), f"{path}: the first {len(lengths):,} lines' input_tokens")
    return [BenchRequest(k, _prompt(rng, i), i, o) for k, (i, o) in enumerate(lengths)]


def arrival_times(n: int, request_rate: float, burstiness: float, seed: int) -> list[float]:
    """Seconds after the start at which each request is sent: all at 0 for an infinite rate, else gamma gaps.

    Gamma with shape `burstiness` and mean 1/rate, as `vllm bench serve` draws them: burstiness 1 is Poisson,
    below 1 burstier, above 1 more even.
    """
    if math.isinf(request_rate):
        return [0.0] * n
    if not (request_rate > 0 and burstiness > 0):
        raise InputError(f"--request-rate and --burstiness must be > 0, got {request_rate}, {burstiness}", "request_rate")
    # bounded where it enters, as replay's rates are (simulator/replay.resample_arrivals): 1e-320 requests/s drew
    # arrival times of inf, which a thread cannot wait for
    if not 1.0 / request_rate <= MAX_ARRIVAL_S:
        raise InputError(f"--request-rate {request_rate:g}: one request every {1.0 / request_rate:g} s on average, past "
                         f"{MAX_ARRIVAL_S:g} s (about 31.7 years); expected at least {1.0 / MAX_ARRIVAL_S:g} requests/s",
                         "request_rate")
    gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (request_rate * burstiness), size=n)
    gaps[0] = 0.0
    out = [float(x) for x in np.cumsum(gaps)]
    if n and not out[-1] <= MAX_ARRIVAL_S:
        raise InputError(f"--request-rate {request_rate:g}: the {n:,} requests would be sent over {out[-1]:g} s, past "
                         f"{MAX_ARRIVAL_S:g} s; give a higher rate", "request_rate")
    return out


# ------------------------------------------------------------------------- one streamed request
#: What `_sse_events` yields for ``data: [DONE]``: the server said the stream is whole.
DONE = object()


class ErrorEvent(ValueError):
    """The server reported a failure inside the stream (its text, masked and cut): the request failed."""


def _sse_events(text_lines: Any, red: Redactor = Redactor()) -> Any:
    """The stream's events, each checked by `_chunk`, then `DONE` at ``data: [DONE]``: a malformed event or an error
    event fails its request (a ValueError, its text masked by `red` before it is cut), never the run."""
    typed_error = False
    for line in text_lines:
        if line.startswith("event:"):
            typed_error = line[6:].strip().lower() == "error"
            continue
        if not line.startswith("data:"):
            if not line.strip():  # a blank line ends an event: its `event:` type with it
                typed_error = False
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            yield DONE
            return
        try:
            ev = json.loads(data)
        except (ValueError, RecursionError):
            if typed_error:
                raise ErrorEvent(red.line(data, 200)) from None
            raise ValueError(f"a streamed event is not JSON: {red.line(data, 80)}") from None
        problem = _error_event(ev, typed_error)
        if problem is not None:
            raise ErrorEvent(red.line(problem, 200))
        yield _chunk(ev, data, red)


def _error_event(ev: Any, typed: bool) -> str | None:
    """The server's error text when `ev` is an error event (vLLM writes ``data: {"error": {...}}`` when generation fails
    mid-stream, older versions ``{"object": "error", "message": ...}``; ``event: error`` marks any data as one), else None."""
    if not isinstance(ev, dict):
        return json.dumps(ev)[:400] if typed else None
    err = ev.get("error")
    if err is not None and err is not False:
        msg = err.get("message", err) if isinstance(err, dict) else err
        return str(msg)[:4000]
    if ev.get("object") == "error":
        return str(ev.get("message", ev))[:4000]
    return json.dumps(ev)[:400] if typed else None


def _chunk(ev: Any, data: str, red: Redactor = Redactor()) -> dict[str, Any]:
    """`ev` if it has the shape `stream_one` reads (an object; choices a list of objects with an object delta; usage
    counts whole numbers within any context), else a ValueError naming what is wrong."""
    if not isinstance(ev, dict) or not isinstance(ev.get("choices") or [], list) or not all(
            isinstance(ch, dict) and isinstance(ch.get("delta") or {}, dict) for ch in ev.get("choices") or []):
        raise ValueError(f"a streamed event is not a chat-completion chunk: {red.line(data, 80)}")
    u = ev.get("usage")
    for name in ("prompt_tokens", "completion_tokens"):
        v = u.get(name) if isinstance(u, dict) else None
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_CONTEXT_TOKENS):
            raise ValueError(f"usage.{name} {red.line(v, 40)} is not a token count (0 to {MAX_CONTEXT_TOKENS:,})")
    return ev


class Contradiction(ValueError):
    """An answer whose counts contradict its request or its own stream: a failed request, never a figure."""


def check_answer(res: "RequestResult", prompt: str, max_tokens: Any) -> None:
    """Raise `Contradiction` when the answer's counts cannot be right for the request it answers.

    * more content chunks than ``max_tokens`` (every chunk holds at least one token);
    * ``usage.completion_tokens`` above ``max_tokens``, or below the content chunks streamed;
    * ``usage.prompt_tokens`` of 0 for a prompt of words, or above the prompt's bytes (a token of a byte-level BPE
      holds at least one byte) plus `TEMPLATE_ALLOWANCE` for the chat template."""
    cap = max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0 else None
    if cap is not None and res.chunks > cap:
        raise Contradiction(f"{res.chunks} content chunks streamed for max_tokens {cap} (a chunk holds at least one token)")
    if res.usage_reported:
        if cap is not None and res.output_tokens > cap:
            raise Contradiction(f"usage.completion_tokens {res.output_tokens:,} is more than the max_tokens {cap:,} asked")
        if res.output_tokens < res.chunks:
            raise Contradiction(f"usage.completion_tokens {res.output_tokens:,} is fewer than the {res.chunks:,} content "
                                "chunks streamed")
    if res.prompt_tokens is not None:
        most = len(prompt.encode("utf-8")) + TEMPLATE_ALLOWANCE
        if res.prompt_tokens < 1:
            raise Contradiction(f"usage.prompt_tokens {res.prompt_tokens} for a prompt of {len(prompt.split()):,} words")
        if res.prompt_tokens > most:
            raise Contradiction(f"usage.prompt_tokens {res.prompt_tokens:,} for a prompt of {len(prompt.encode('utf-8')):,} "
                                f"bytes (at most {most:,} with a chat template's {TEMPLATE_ALLOWANCE:,})")


def stream_one(http: Transport, ep: Endpoint, req: BenchRequest, *, ignore_eos: bool, temperature: float,
               t_start: float, clock: Callable[[], float] = time.perf_counter, red: Redactor | None = None) -> RequestResult:
    """Send `req` streamed and time every content chunk; a failure is returned in the result, a refusal raised.

    Every text from the server kept in the result (the answering model's name, an error) is masked by `red` (default:
    the endpoint's key and the environment's) before it is cut."""
    red = red or Redactor.of(*ep.secrets)
    body: dict[str, Any] = {"model": ep.model, "messages": [{"role": "user", "content": req.prompt}], "stream": True,
                            "stream_options": {"include_usage": True}, "max_tokens": req.output_len,
                            "temperature": temperature, **ep.extra_body}
    if ignore_eos:
        body["ignore_eos"] = True
    cap = body.get("max_tokens")
    res = RequestResult(req.index, req.input_len, req.output_len)
    t0 = clock()
    res.start_s = t0 - t_start
    last = None
    whole = False  # [DONE] seen
    try:
        with http.stream("POST", ep.chat_url, json.dumps(body).encode("utf-8"), ep.headers()) as (status, headers, chunks):
            if status != 200:
                text = b"".join(chunks).decode("utf-8", "replace")
                if status == 429 or status >= 500:
                    res.error = f"HTTP {status} {one_line(text, secrets=red.secrets)}"
                    return res
                raise refusal(ep, status, text, headers.get("location"))
            for ev in _sse_events(lines(chunks), red):
                if ev is DONE:
                    whole = True
                    break
                now = clock()
                if isinstance(ev.get("model"), str):
                    res.model = red.line(ev["model"], 200)
                if isinstance(ev.get("usage"), dict):
                    u = ev["usage"]
                    if isinstance(u.get("completion_tokens"), int):
                        res.output_tokens, res.usage_reported = u["completion_tokens"], True
                    if isinstance(u.get("prompt_tokens"), int):
                        res.prompt_tokens = u["prompt_tokens"]
                for ch in ev.get("choices") or []:
                    delta = ch.get("delta") or {}
                    if ch.get("finish_reason"):
                        res.finish_reason = red.line(ch["finish_reason"], 40)
                    if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
                        res.chunks += 1
                        if last is None:
                            res.ttft_s = now - t0
                        else:
                            res.itl_s.append(now - last)
                        last = now
                if isinstance(cap, int) and res.chunks > cap:  # no need to read a million more: the answer is broken
                    raise Contradiction(f"more than {cap:,} content chunks streamed for max_tokens {cap:,} (a chunk holds "
                                        "at least one token)")
    except EndpointError:
        raise
    except (DeadlineExceeded, Cancelled) as exc:
        res.error = str(exc) or "cancelled (^C)"
        return res
    except httpx.TimeoutException:
        res.error = f"no whole answer within {http.timeout_s:g} s"
        return res
    except httpx.ConnectError as exc:
        raise EndpointError(f"--base-url {ep.shown_url}: cannot connect ({one_line(exc, secrets=red.secrets)})", "base_url") from None
    except Contradiction as exc:
        res.error = f"the answer contradicts its request ({red.line(exc)})"
        return res
    except ErrorEvent as exc:
        res.error = f"the server reported an error mid-stream ({exc})"
        return res
    except (httpx.HTTPError, ValueError, BodyTooLarge) as exc:
        res.error = f"the stream broke ({one_line(exc, secrets=red.secrets)})"
        return res
    if last is None:
        res.error = "the stream held no content"
        return res
    if not whole and res.finish_reason is None:
        res.error = ("the stream was cut (the connection closed with neither a finish_reason nor [DONE]: the answer may be "
                     "incomplete)")
        return res
    try:
        check_answer(res, req.prompt, cap)
    except Contradiction as exc:
        res.error = f"the answer contradicts its request ({red.line(exc)})"
        return res
    res.e2e_s = last - t0
    if not res.usage_reported:
        res.output_tokens = res.chunks
    res.ok = True
    return res


# ------------------------------------------------------------------------- a run
@dataclass
class BenchRun:
    """One load level: its settings, every request's result, and whether ^C ended it early."""

    max_concurrency: int | None
    request_rate: float
    results: list[RequestResult]
    duration_s: float
    interrupted: bool = False
    #: what interrupted it: '^C' or 'SIGTERM' (treated alike: what finished is kept)
    interrupted_by: str = "^C"

    @property
    def ok(self) -> list[RequestResult]:
        return [r for r in self.results if r.ok]

    def failures(self) -> Counter:
        return Counter(r.error.split(" (")[0] for r in self.results if not r.ok)

    def summary(self) -> dict[str, Any]:
        ok = self.ok
        out_tok = sum(r.output_tokens for r in ok)
        in_tok = sum(r.prompt_tokens if r.prompt_tokens is not None else r.input_len for r in ok)
        dur = self.duration_s if self.duration_s > 0 else None  # None: nothing was timed (^C during the warm-up)
        s: dict[str, Any] = {
            "completed": len(ok), "failed": len(self.results) - len(ok), "failures": dict(self.failures()),
            "max_concurrency": self.max_concurrency, "request_rate": None if math.isinf(self.request_rate) else self.request_rate,
            "duration_s": self.duration_s, "total_input_tokens": in_tok, "total_output_tokens": out_tok,
            "request_throughput": len(ok) / dur if dur else None, "output_throughput": out_tok / dur if dur else None,
            "total_token_throughput": (in_tok + out_tok) / dur if dur else None,
            "usage_reported": sum(r.usage_reported for r in ok), "prompt_tokens_reported": sum(r.prompt_tokens is not None for r in ok),
            "truncated": sum(r.finish_reason == "length" for r in ok), "interrupted": self.interrupted,
            "served_models": sorted({r.model for r in ok if r.model}),
            "mean_input_tokens": in_tok / len(ok) if ok else None, "mean_output_tokens": out_tok / len(ok) if ok else None,
        }
        figures = {"ttft": [r.ttft_s for r in ok if r.ttft_s is not None], "tpot": [t for r in ok if (t := r.tpot_s) is not None],
                   "itl": [g for r in ok for g in r.itl_s], "e2el": [r.e2e_s for r in ok if r.e2e_s is not None]}
        for name, xs in figures.items():
            ms = [1000.0 * x for x in xs]
            s[name] = ({"mean": statistics.fmean(ms), "median": float(np.median(ms)), "std": float(np.std(ms)),
                        "p99": float(np.percentile(ms, 99)), "n": len(ms)} if ms else None)
        return s


class Interrupted(Exception):
    """^C (or SIGTERM) during a run: what was measured is in `run`, the signal's KeyboardInterrupt in `cause`."""

    def __init__(self, run: BenchRun, cause: BaseException | None = None):
        super().__init__("interrupted")
        self.run = run
        self.cause = cause


def run_level(ep: Endpoint, requests: Sequence[BenchRequest], *, max_concurrency: int | None, request_rate: float,
              burstiness: float, seed: int, timeout_s: float, ignore_eos: bool, temperature: float, warmup: int = 1,
              progress: Callable[[int], None] = lambda k: None, red: Redactor | None = None) -> BenchRun:
    """Send `requests` at their arrival times, at most `max_concurrency` in flight; ^C → `Interrupted` with what finished."""
    if max_concurrency is not None and not 1 <= max_concurrency <= MAX_CONCURRENCY:
        raise InputError(f"--max-concurrency: expected 1..{MAX_CONCURRENCY}, got {max_concurrency}", "max_concurrency")
    workers = min(max_concurrency or len(requests), len(requests), MAX_CONCURRENCY) or 1
    red = red or Redactor.of(*ep.secrets)
    arrivals = arrival_times(len(requests), request_rate, burstiness, seed)
    stop = threading.Event()
    results: list[RequestResult] = []
    lock = threading.Lock()
    http = Transport(timeout_s, workers)
    try:
        try:
            for w in requests[:warmup]:  # not measured: loads the model, fills the caches the first request would pay for
                stream_one(http, ep, w, ignore_eos=ignore_eos, temperature=temperature, t_start=time.perf_counter(), red=red)
        except KeyboardInterrupt as exc:
            http.cancel()
            raise Interrupted(BenchRun(max_concurrency, request_rate, [], 0.0, True, interrupted_by(exc)), exc) from None
        t_start = time.perf_counter()

        def task(req: BenchRequest, at: float) -> None:
            if stop.wait(max(0.0, t_start + at - time.perf_counter())):
                return
            r = stream_one(http, ep, req, ignore_eos=ignore_eos, temperature=temperature, t_start=t_start, red=red)
            if stop.is_set():
                return  # cut by ^C: not a measurement
            with lock:
                results.append(r)
            progress(1)

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench")
        try:
            futures = [pool.submit(task, q, a) for q, a in zip(requests, arrivals)]
            for f in futures:
                while True:
                    try:
                        f.result(timeout=0.2)  # short waits keep the main thread responsive to ^C
                        break
                    except TimeoutError:
                        continue
        except KeyboardInterrupt as exc:  # ^C, or SIGTERM under common.signals.sigterm_as_interrupt
            stop.set()
            http.cancel()  # the requests in flight end within a slice, so the exit does not wait on a stalled server
            pool.shutdown(wait=False, cancel_futures=True)
            with lock:
                done = sorted(results, key=lambda r: r.index)
            raise Interrupted(BenchRun(max_concurrency, request_rate, done, time.perf_counter() - t_start, True,
                                       interrupted_by(exc)), exc) from None
        except BaseException:
            stop.set()
            http.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return BenchRun(max_concurrency, request_rate, sorted(results, key=lambda r: r.index), time.perf_counter() - t_start)
    finally:
        http.close()


# ------------------------------------------------------------------------- output
def vllm_result(summary: dict[str, Any]) -> dict[str, Any]:
    """A level's `BenchRun.summary()` under `vllm bench serve`'s result keys (common/vllm_result.py): what its printed
    block shows and what `bench compare` reads from a `bench serve --json` level, P99 the one percentile."""
    out: dict[str, Any] = {"completed": summary["completed"], "failed": summary["failed"],
                           "max_concurrency": summary["max_concurrency"],
                           "request_rate": "inf" if summary["request_rate"] is None else summary["request_rate"],
                           "duration": summary["duration_s"], "total_input_tokens": summary["total_input_tokens"],
                           "total_output_tokens": summary["total_output_tokens"]}
    for key in ("request_throughput", "output_throughput", "total_token_throughput"):
        out[key] = summary[key]
    for m in METRIC_NAMES:
        f = summary[m]
        for stat in ("mean", "median", "std", "p99"):
            out[f"{stat}_{m}_ms"] = None if f is None else f[stat]
    return out


def format_summary(run: BenchRun, title: str = " Serving Benchmark Result ") -> str:
    """The summary in `vllm bench serve`'s layout (vllm/benchmarks/serve.py: 40-column labels, 2 decimals), printed by
    the one printer `replay` uses too (common/vllm_result.py)."""
    return format_block(vllm_result(run.summary()), METRIC_NAMES, (99.0,), title)


def notes(run: BenchRun) -> list[str]:
    """What the figures rest on that a reader must know: estimated token counts, cut answers, a different model, failures."""
    s = run.summary()
    out = []
    n = s["completed"]
    if n and s["usage_reported"] < n:
        out.append(f"{n - s['usage_reported']} of {n} answers carried no usage: their output tokens are the number of "
                   "streamed content chunks (a chunk can hold several tokens), so TPOT there is per chunk")
    if n and s["prompt_tokens_reported"] < n:
        out.append(f"{n - s['prompt_tokens_reported']} of {n} answers did not report prompt_tokens: their input length is "
                   "the one asked for (about one token per word of the random prompt)")
    if s["truncated"]:
        out.append(f"{s['truncated']} of {n} answers stopped at max_tokens (finish_reason length), as a fixed output length asks")
    if n and s["truncated"] < n:
        out.append(f"{n - s['truncated']} of {n} answers ended before their max_tokens (the model stopped); pass --ignore-eos "
                   "where the server supports it (vLLM, SGLang) for fixed output lengths")
    for f, c in sorted(s["failures"].items()):
        out.append(f"{c} request(s) failed: {f}")
    if s["interrupted"]:
        out.append(f"interrupted: the figures are those of the requests that finished before {run.interrupted_by}")
    return out


ROW_ID_SAFE = str.maketrans({c: "-" for c in " /:.,=@"})


@dataclass(frozen=True)
class ServerFacts:
    """What the CSV's row says about the server: given by flags or read from the server, and which."""

    base_url: str
    model: str  # the architecture's HF id (or config.json) for the model column
    served_model: str
    gpu: str
    gpus: int
    tp: int | None
    engine: str
    engine_version: str
    weight_dtype: str = ""
    note: str = ""


def csv_rows(run: BenchRun, facts: ServerFacts, seed: int, ignore_eos: bool, when: _dt.datetime) -> list[dict[str, Any]]:
    """One serving_latency.csv row (statistic mean) for a load level: `latency fit --data` takes it.

    Each load level is its own `source`, so `latency validate --data` (leave one source out) holds out one
    concurrency at a time.
    """
    s = run.summary()
    if not s["completed"]:
        return []
    level = f"c{run.max_concurrency}" if run.max_concurrency is not None else "cinf"
    if s["request_rate"] is not None:
        level += f"-r{s['request_rate']:g}"
    il, ol = s["mean_input_tokens"], s["mean_output_tokens"]
    stamp = when.strftime("%Y%m%dT%H%M%S")
    # the model's last path part: a server that names its model by a local folder put that path in every row id (#51)
    name = facts.served_model.rstrip("/").rsplit("/", 1)[-1] or facts.served_model
    rid = f"bench-{name}-{level}-i{il:.0f}-o{ol:.0f}-{stamp}".translate(ROW_ID_SAFE)
    extra = [f"specagent bench serve --base-url {facts.base_url} --model {facts.served_model}, seed {seed}",
             f"{s['completed']} requests ({s['failed']} failed)", "ignore_eos" if ignore_eos else "model may stop before max_tokens",
             f"{s['truncated']} answers at max_tokens"]
    if s["usage_reported"] < s["completed"]:
        extra.append(f"{s['completed'] - s['usage_reported']} answers without usage: output tokens counted as streamed chunks")
    if facts.note:
        extra.append(facts.note)
    if run.interrupted:
        extra.append(f"interrupted by {run.interrupted_by}")

    def f(key: str) -> str:
        return "" if s[key] is None else f"{s[key]['mean']:.4g}"

    return [{
        "row_id": rid, "model": facts.model, "gpu": facts.gpu, "gpus": facts.gpus, "tp": facts.tp or "", "ep": "", "dp": "",
        "engine": facts.engine, "engine_version": facts.engine_version, "weight_dtype": facts.weight_dtype, "kv_dtype": "",
        "cuda_graphs": "", "concurrency": run.max_concurrency if run.max_concurrency is not None else "", "batch": "",
        "input_tokens": f"{il:.6g}", "output_tokens": f"{ol:.6g}", "tpot_ms": f("tpot"), "itl_ms": f("itl"),
        "ttft_ms": f("ttft"), "e2e_latency_ms": f("e2el"), "output_throughput_tok_s": f"{s['output_throughput']:.6g}",
        "total_throughput_tok_s": f"{s['total_token_throughput']:.6g}",
        "request_rate": "" if s["request_rate"] is None else f"{s['request_rate']:g}", "statistic": "mean",
        "source_kind": "bench-serve", "source": f"specagent bench serve {facts.base_url} {level} {stamp}",
        "source_url": facts.base_url, "source_locator": f"{level}, {s['completed']} requests, {when.isoformat(timespec='seconds')}",
        "retrieved": when.date().isoformat(), "notes": "; ".join(extra),
    }]


def server_facts(http: Transport, ep: Endpoint, red: Redactor | None = None) -> dict[str, str]:
    """What the server says about itself, where it says it: /v1/models' owned_by, and /version (vLLM) or
    /get_server_info (SGLang); {} for what it does not answer. Never raises: a benchmark does not need it.
    Every value is the server's text, so each is masked (`red`: the endpoint's key and the environment's) and cut
    to 200 characters as it is read: a server that answers with the Authorization header it got never has it shown."""
    red = red or Redactor.of(*ep.secrets)
    out: dict[str, str] = {}
    base = ep.url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        status, _, raw = http.get(f"{base}/models", ep.headers())
        if status == 200:
            data = json.loads(raw).get("data") or []
            ids = [m.get("id") for m in data if isinstance(m, dict)]
            out["models"] = ",".join(red.line(i, 200) for i in ids if i)
            mine = next((m for m in data if isinstance(m, dict) and m.get("id") == ep.model), data[0] if data else {})
            if isinstance(mine.get("owned_by"), str):
                out["owned_by"] = red.line(mine["owned_by"], 200)
    except (httpx.HTTPError, ValueError, AttributeError, RecursionError, DeadlineExceeded, BodyTooLarge):
        pass
    for path in ("/version", "/get_server_info"):
        try:
            status, _, raw = http.get(root + path, ep.headers())
            version = json.loads(raw).get("version") if status == 200 else None
            if isinstance(version, str):
                out["version"] = red.line(version, 200)
                break
        except (httpx.HTTPError, ValueError, AttributeError, RecursionError, DeadlineExceeded, BodyTooLarge):
            continue
    return out
