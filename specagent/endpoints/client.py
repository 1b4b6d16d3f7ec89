"""An OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs), built on httpx.

What a measurement needs from it, and why each part is here:

* a concurrency limit (a semaphore around every request), because a served model degrades, and a
  provider refuses, past some number of requests in flight;
* retries with exponential backoff and seeded jitter on 429, 5xx, timeouts, dropped connections
  and truncated or non-JSON bodies, honouring ``Retry-After``: those are the server's transient
  states, not answers. The jitter of attempt *a* of request *key* is drawn from
  ``Random(f"{seed}:{key}:{a}")``, so a rerun waits the same and thread order changes nothing;
* other 4xx (a bad key, an unknown model, a malformed request) fail at once with one line
  (`EndpointError`): retrying cannot fix them. A 400 that names ``response_format`` is reported
  as `ResponseFormatUnsupported`, so the caller can fall back to asking for JSON in words;
* every answer goes through the on-disk cache (`cache.py`) keyed by the request's content,
  with its measured latency, so a rerun is byte-identical and asks nothing twice;
* usage parsed from both conventions in use: ``completion_tokens_details.reasoning_tokens``
  (OpenAI, vLLM, SGLang) and, where a server reports reasoning only as text
  (``reasoning_content`` in SGLang and older vLLM, ``reasoning`` in newer vLLM, or ``<think>``
  inline when no reasoning parser runs), a text estimate, marked as estimated.

API keys come from an environment variable named per endpoint (default ``OPENAI_API_KEY``); a
missing variable sends no Authorization header (local vLLM/SGLang need none).
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from specagent.common.errors import InputError
from specagent.common.redact import clean, env_secrets, header_value_problem, redact_url, redact_values
from specagent.endpoints.cache import ResponseCache, request_key
from specagent.endpoints.transport import BodyTooLarge, Cancelled, DeadlineExceeded, Transport
from specagent.traces.schema import MAX_CONTEXT_TOKENS
from specagent.traces.tokens import estimate_text_tokens

#: Request fields the measurement itself sets; extra body fields may not replace them.
RESERVED_FIELDS = frozenset({"model", "messages", "tools", "tool_choice", "response_format", "stream", "n"})
#: Longest Retry-After honoured (s): a server asking for more is treated as asking for this much.
MAX_RETRY_AFTER_S = 120.0
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


class EndpointError(InputError):
    """A failure retrying cannot fix (bad URL, key or model; the server refuses the request): one line."""


class TransientFailure(RuntimeError):
    """The server stayed in a transient state (429, 5xx, timeouts, broken bodies) through every retry."""


class ResponseFormatUnsupported(EndpointError):
    """The server rejected ``response_format`` (JSON-schema output): the caller may ask in words instead."""


class NoUsage(EndpointError):
    """The server answers without ``usage``: the measurement needs the token counts, and asking again cannot add them."""


def same_model(asked: str, served: str | None) -> bool:
    """Whether a response's ``model`` names the model asked for: equal, or with a revision suffix (``NAME@main``, as
    `transformers serve` answers). A server that gives no name is taken at its word."""
    if not served:
        return True
    return served == asked or served.split("@")[0] == asked.split("@")[0]


@dataclass(frozen=True)
class Endpoint:
    """One served model: its base URL (``http://host:8000/v1``), the model name it serves, the env var of its key."""

    role: str
    url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    #: fields added to every request body (e.g. {"chat_template_kwargs": {"enable_thinking": false}} for Qwen3.5 on vLLM/SGLang)
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        taken = sorted(set(self.extra_body) & RESERVED_FIELDS)
        if taken:
            raise InputError(f"--{self.role}-extra-body: {', '.join(taken)} are set by the measurement, not by extra fields",
                             f"{self.role}_extra_body")
        if not re.match(r"^https?://[^/\s]+", self.url or ""):
            raise InputError(f"--{self.role}-url: expected http(s)://HOST[:PORT]/v1, got {self.url!r}", f"{self.role}_url")
        try:  # a port no server listens on (0, past 65535) is the flag's fault, not a connection to retry
            port = urllib.parse.urlsplit(self.url).port
        except ValueError:
            port = -1
        if port is not None and not 1 <= port <= 65535:
            raise InputError(f"--{self.role}-url: expected a port in [1, 65535], got {redact_url(self.url)!r}", f"{self.role}_url")
        if not self.model or not self.model.strip():
            raise InputError(f"--{self.role}-model: expected the model name the server serves, got {self.model!r}",
                             f"{self.role}_model")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env or ""):
            raise InputError(f"--{self.role}-api-key-env: expected an environment variable name, got {self.api_key_env!r}",
                             f"{self.role}_api_key_env")
        _check_json(self.extra_body, f"--{self.role}-extra-body")
        self.check_key()

    def check_key(self) -> None:
        """Refuse, before any call, a key that cannot be a header value (a key is not a transient state); never quote it."""
        key = os.environ.get(self.api_key_env)
        problem = header_value_problem(key) if key else None
        if problem:
            raise InputError(f"${self.api_key_env} (the {self.role} endpoint's API key): not a valid HTTP header value: "
                             f"{problem}; the value is not shown", f"{self.role}_api_key_env")

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the key this endpoint sends (the redaction rule adds every key-like variable)."""
        key = os.environ.get(self.api_key_env)
        return (key,) if key else ()

    @property
    def shown_url(self) -> str:
        """The URL as messages, logs and reports show it: user-info and key-like query parameters masked."""
        return redact_url(self.url)

    @property
    def where(self) -> str:
        return f"{self.role} endpoint {self.shown_url}"

    @property
    def chat_url(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cached_tokens: int | None
    #: where reasoning_tokens came from: 'usage' (reported), 'estimated' (from reasoning text), 'none' (no reasoning seen)
    reasoning_source: str

    @property
    def visible_tokens(self) -> int:
        return max(0, self.completion_tokens - self.reasoning_tokens)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any  # the parsed JSON arguments, or the raw string when it is not JSON
    arguments_json: bool


@dataclass(frozen=True)
class Reply:
    """One chat completion: the message, its usage and the measured wall time of the call that produced it."""

    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    latency_s: float
    finish_reason: str | None
    from_cache: bool


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, seed: int, key: str, attempt: int, retry_after: float | None) -> float:
        """Full jitter on an exponential ceiling, never below what the server asked for."""
        ceiling = min(self.cap_s, self.base_s * 2 ** attempt)
        wait = random.Random(f"{seed}:{key}:{attempt}").uniform(0.0, ceiling)
        return max(wait, min(retry_after, MAX_RETRY_AFTER_S)) if retry_after is not None else wait


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def parse_reply(raw: Any, latency_s: float, from_cache: bool) -> Reply:
    """The first choice of a chat-completions body; ValueError when the body is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("choices"), list) or not raw["choices"]:
        raise ValueError("no choices in the response")
    choice = raw["choices"][0]
    msg = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(msg, dict):
        raise ValueError("choices[0] has no message")
    content = msg.get("content") or ""
    if not isinstance(content, str):
        raise ValueError("choices[0].message.content is not a string")
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        reasoning = None
    m = _THINK.match(content)
    if m and reasoning is None:  # no reasoning parser on the server: the thinking is inline
        reasoning, content = m.group(1), content[m.end():]
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ValueError(f"choices[0].message.tool_calls is a JSON {type(raw_calls).__name__}, not a list")
    calls = []
    for c in raw_calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError("a tool call without a function name")
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                calls.append(ToolCall(fn["name"], json.loads(args) if args.strip() else {}, True))
            except ValueError:
                calls.append(ToolCall(fn["name"], args, False))
        else:
            calls.append(ToolCall(fn["name"], args if args is not None else {}, isinstance(args, dict)))
    usage = _usage(raw.get("usage"), reasoning)
    return Reply(content, reasoning, tuple(calls), usage, latency_s, choice.get("finish_reason"), from_cache)


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


def _usage(u: Any, reasoning: str | None) -> Usage:
    if not isinstance(u, dict) or _int(u.get("prompt_tokens")) is None or _int(u.get("completion_tokens")) is None:
        raise ValueError("usage.prompt_tokens / usage.completion_tokens missing (the measurement needs both)")
    for name in ("prompt_tokens", "completion_tokens"):
        if u[name] > MAX_CONTEXT_TOKENS:  # a broken answer (retried, then skipped), not a record the log refuses later
            raise ValueError(f"usage.{name} = {u[name]:.3g} is past any context ({MAX_CONTEXT_TOKENS:,} tokens)")
    completion = u["completion_tokens"]
    details = u.get("completion_tokens_details") or {}
    reported = _int(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    if reported is not None and (reported > 0 or not reasoning):
        r, source = min(reported, completion), "usage"
    elif reasoning:
        r, source = min(estimate_text_tokens(reasoning), completion), "estimated"
    else:
        r, source = 0, "none"
    pdetails = u.get("prompt_tokens_details") or {}
    cached = _int(pdetails.get("cached_tokens")) if isinstance(pdetails, dict) else None
    return Usage(u["prompt_tokens"], completion, r, cached, source)


@dataclass
class ClientStats:
    """What the client did: requests sent, answers from the cache, retries by reason (for the summary)."""

    sent: int = 0
    cached: int = 0
    answered: int = 0
    retries: Counter = field(default_factory=Counter)
    failed: int = 0
    #: per endpoint role: the model names its answers gave (a server may answer as another model than the one asked)
    served: dict[str, set] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"requests_sent": self.sent, "answers_received": self.answered, "answers_from_cache": self.cached,
                "retries": dict(sorted(self.retries.items())), "requests_failed": self.failed}

    def status_line(self) -> str:
        """Requests answered and retried so far: what a progress bar shows moving while a position waits on a slow server."""
        retried = sum(self.retries.values())
        return f"{self.answered} answered, {self.cached} from cache" + (f", {retried} retried" if retried else "")

    def served_models(self, role: str) -> list[str]:
        return sorted(self.served.get(role, ()))


class ChatClient:
    """Thread-safe: call `chat` from as many threads as you like; at most `concurrency` requests are in flight.

    `cancel()` (on ^C) ends every in-flight call within `transport.SLICE_S` and every wait between retries at once:
    each raises `Cancelled`; whatever was answered before is in the cache."""

    def __init__(self, cache: ResponseCache, *, concurrency: int = 4, timeout_s: float = 300.0, seed: int = 0,
                 retry: RetryPolicy = RetryPolicy(), sleep: Callable[[float], None] | None = None,
                 max_body_bytes: int | None = None, on_event: Callable[[str], None] | None = None):
        if concurrency < 1:
            raise InputError(f"--concurrency: expected >= 1, got {concurrency}", "concurrency")
        if not timeout_s > 0:
            raise InputError(f"--timeout: expected seconds > 0, got {timeout_s}", "timeout")
        self.cache, self.seed, self.retry, self.timeout_s = cache, seed, retry, timeout_s
        #: told, as one line each, what a person watching a run should know while it goes on: each retry and its reason,
        #: and the first answer of an endpoint that names another model than the one asked
        self.on_event = on_event or (lambda _line: None)
        self._gate = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self.stats = ClientStats()
        kw = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}
        self._http = Transport(timeout_s, concurrency, **kw)
        self.sleep = sleep if sleep is not None else self._wait

    def _wait(self, seconds: float) -> None:
        if self._http.cancel_event.wait(seconds):
            raise Cancelled()

    def cancel(self) -> None:
        """Stop every call in flight and every retry wait (^C): each raises `Cancelled`."""
        self._http.cancel()

    @property
    def cancelled(self) -> bool:
        return self._http.cancel_event.is_set()

    def worst_case_s(self) -> float:
        """The longest one call can take through every retry: attempts x --timeout plus the longest waits between them."""
        waits = sum(max(min(self.retry.cap_s, self.retry.base_s * 2 ** a), MAX_RETRY_AFTER_S)
                    for a in range(self.retry.attempts - 1))
        return self.retry.attempts * self.timeout_s + waits

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "ChatClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def chat(self, ep: Endpoint, body: dict[str, Any]) -> Reply:
        """The answer to `body` (model filled in from `ep`): from the cache, or asked and stored before it is returned."""
        body = {"model": ep.model, **body, **ep.extra_body}
        key = request_key(ep.chat_url, body)
        hit = self.cache.get(key)
        if hit is not None:
            try:
                latency = float(hit["latency_s"])
                if not (math.isfinite(latency) and latency >= 0):
                    raise ValueError("latency_s is not a finite number of seconds")
                reply = parse_reply(hit["response"], latency, True)
                self._count(cached=1)
                self._served(ep, hit["response"])
                return reply
            except (KeyError, TypeError, ValueError, RecursionError):
                pass  # an entry this version cannot read (or one edited by hand): ask again
        raw, latency = self._ask(ep, body, key)
        raw = _masked(raw, ep.secrets)  # a server that echoes the key in its answer: the key is not stored nor shown
        reply = parse_reply(raw, latency, False)  # _ask checked it parses
        self.cache.put(key, {"request": {"url": redact_url(ep.chat_url), "body": _masked(body, (*ep.secrets, *env_secrets()))},
                             "response": raw, "latency_s": latency})
        self._count(answered=1)
        self._served(ep, raw)
        return reply

    def _served(self, ep: Endpoint, raw: Any) -> None:
        name = raw.get("model") if isinstance(raw, dict) and isinstance(raw.get("model"), str) else None
        if name is None:
            return
        with self._lock:
            seen = self.stats.served.setdefault(ep.role, set())
            first = name not in seen
            seen.add(name)
        if first and not same_model(ep.model, name):
            self.on_event(f"warning: {ep.role} endpoint {ep.shown_url}: asked for model {ep.model!r}, the server answered as {name!r} "
                          f"(a server that serves whatever it loaded ignores the name; check --{ep.role}-url / --{ep.role}-model)")

    def _ask(self, ep: Endpoint, body: dict[str, Any], key: str) -> tuple[Any, float]:
        last = ""
        secrets = ep.secrets
        try:  # encoded once, here: a NaN from a recorded trace or a tools file is the request's fault, not a retry's
            payload = json.dumps(body, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except (ValueError, RecursionError) as exc:
            self._count(failed=1)
            raise EndpointError(f"{ep.where}: the request cannot be sent as JSON ({one_line(exc, secrets=secrets)}; a NaN or "
                                "infinity, or nesting too deep, in the recorded trace, the tools or an extra body)",
                                f"{ep.role}_url") from None
        for attempt in range(self.retry.attempts):
            if self.cancelled:
                raise Cancelled()
            after: float | None = None
            with self._gate:
                self._count(sent=1)
                t0 = time.perf_counter()
                try:
                    status, headers, data = self._http.post(ep.chat_url, payload, ep.headers())
                    latency = time.perf_counter() - t0
                    text = data.decode("utf-8", errors="replace")
                except DeadlineExceeded as exc:
                    reason, last = "timeout", str(exc)
                except BodyTooLarge as exc:
                    reason, last = "bad_body", f"the answer is not a chat completion ({exc})"
                except httpx.TimeoutException:
                    reason, last = "timeout", f"no whole answer within {self.timeout_s:g} s"
                except httpx.ConnectError as exc:
                    reason, last = "connect", f"cannot connect ({one_line(exc, secrets=secrets)})"
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:  # WriteError: closed
                    # before the request was all sent (on a loaded machine, a server's immediate close lands there)
                    reason, last = "broken_body", f"the connection broke mid-answer ({one_line(exc, secrets=secrets)})"
                except httpx.HTTPError as exc:
                    reason, last = "http", one_line(exc, secrets=secrets)
                else:
                    if status == 200:
                        raw = None
                        try:
                            raw = json.loads(text)
                            parse_reply(raw, latency, False)
                            return raw, latency
                        except (ValueError, TypeError, RecursionError) as exc:
                            if (isinstance(exc, ValueError) and isinstance(raw, dict) and raw.get("choices") and raw.get("usage") is None
                                    and str(exc).startswith("usage.")):  # usage absent (not malformed): asking again cannot help
                                self._count(failed=1)
                                raise NoUsage(f"{ep.role} endpoint {ep.shown_url} (model {ep.model!r}): the server reports no usage; "
                                              "the measurement needs usage.prompt_tokens and usage.completion_tokens (asking "
                                              "again cannot add them: serve with usage reporting on, or without the proxy "
                                              "that strips it)", f"{ep.role}_url") from None
                            why = "nested too deep" if isinstance(exc, RecursionError) else exc
                            reason, last = "bad_body", f"the answer is not a chat completion ({one_line(why, secrets=secrets)})"
                    elif status == 429 or status >= 500:
                        reason, last = f"http_{status}", f"HTTP {status} {one_line(text, secrets=secrets)}"
                        after = retry_after_s(headers.get("retry-after"))
                    else:
                        self._count(failed=1)
                        raise refusal(ep, status, text, headers.get("location"))
            with self._lock:
                self.stats.retries[reason] += 1
            if attempt + 1 < self.retry.attempts:
                wait = self.retry.delay(self.seed, key, attempt, after)
                self.on_event(f"{ep.role}: {last} — attempt {attempt + 2}/{self.retry.attempts} in {wait:.1f} s")
                self.sleep(wait)
        self._count(failed=1)
        if reason == "connect":
            raise EndpointError(f"--{ep.role}-url {ep.shown_url}: {last} after {self.retry.attempts} attempts", f"{ep.role}_url")
        raise TransientFailure(f"{ep.where}: {last} (after {self.retry.attempts} attempts)")


def one_line(x: object, n: int = 160, secrets: tuple[str, ...] = ()) -> str:
    """Server or library text as one safe line: keys masked (before any cut), control characters escaped, at most n chars."""
    s = " ".join(clean(x, (*secrets, *env_secrets())).split())
    return s if len(s) <= n else s[:n - 1] + "…"


def _masked(obj: Any, secrets: tuple[str, ...]) -> Any:
    """`obj` with every string in it stripped of the given secrets (by value only: an answer's text is data)."""
    if not secrets:
        return obj
    if isinstance(obj, str):
        return redact_values(obj, secrets)
    if isinstance(obj, dict):
        return {k: _masked(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_masked(v, secrets) for v in obj]
    return obj


def _check_json(obj: Any, flag: str, depth: int = 0) -> None:
    """Refuse what no JSON body can carry (NaN, infinities) and nesting no server reads, naming the flag."""
    if depth > 64:
        raise InputError(f"{flag}: nested more than 64 levels deep")
    if isinstance(obj, float) and not math.isfinite(obj):
        raise InputError(f"{flag}: {obj!r} is not JSON (JSON has no NaN or infinity)")
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_json(v, flag, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_json(v, flag, depth + 1)


def refusal(ep: Endpoint, status: int, text: str, location: str | None = None) -> EndpointError:
    """The error a server's refusal (a status that is not a retryable failure) raises: its message, and a hint per status."""
    try:
        detail = json.loads(text).get("error", text)
        detail = detail.get("message", detail) if isinstance(detail, dict) else detail
    except (ValueError, AttributeError, RecursionError):
        detail = text
    where = f"{ep.where} (model {ep.model!r})"
    short = one_line(detail, secrets=ep.secrets)
    if status in (400, 422) and re.search(r"response_format|json_schema|guided", str(detail), re.I):
        return ResponseFormatUnsupported(f"{where}: HTTP {status}: {short}", f"{ep.role}_url")
    hint = {401: f" (is ${ep.api_key_env} set to a valid key?)", 403: f" (is ${ep.api_key_env} allowed to use this model?)",
            404: " (is the URL the server's /v1 and the model name one it serves?)"}.get(status, "")
    if 200 <= status < 300:  # 201, 202, 204: not the 200 a chat completion comes with
        hint = " (not a chat completion, which comes with HTTP 200: is the URL the server's /v1 and not a proxy's or a health check's?)"
    short = short or "(no body)"
    if 300 <= status < 400:
        to = f" to {one_line(redact_url(location), 120)}" if location else ""
        hint = f" (a redirect{to}: redirects are not followed, so the key goes nowhere else; give the URL it names)"
    return EndpointError(f"{where}: HTTP {status}: {short}{hint}", f"{ep.role}_url")


def parse_extra_body(value: str | None) -> dict[str, Any]:
    """Fields to add to every request body, given as a JSON object on the command line ({} for None); an InputError
    says what is wrong (the caller names the option)."""
    if value is None:
        return {}

    def no_constant(name: str) -> None:
        raise InputError(f"{name} is not JSON (JSON has no NaN or infinity)")

    try:
        obj = json.loads(value, parse_constant=no_constant)
    except RecursionError:
        raise InputError("nested too deep to be a request's fields") from None
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"expected a JSON object, got {value!r} ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got a JSON {type(obj).__name__}")
    return obj


def token_prices(value: str | None) -> tuple[float, float] | None:
    """`IN,OUT` in USD per million tokens (None for None); an InputError says what is wrong (the caller names the option)."""
    if value is None:
        return None
    try:
        a, b = (float(x) for x in value.split(","))
    except ValueError:
        raise InputError(f"expected IN,OUT in USD per million tokens (e.g. 0.243,1.736), got {value!r}") from None
    if not (a >= 0 and b >= 0 and a < float("inf") and b < float("inf")):
        raise InputError(f"prices must be finite and >= 0, got {value!r}")
    return a, b
