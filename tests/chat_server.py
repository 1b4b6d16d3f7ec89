"""A real chat-completions server on loopback for the endpoint tests: a scripted agent policy, scripted verdicts,
and injected failures (429 with Retry-After, 500, timeouts, truncated bodies, malformed verdicts).

Why a real socket: the client's retries, timeouts and broken-body handling are httpx's and the OS's
behaviour, which a mocked transport would not exercise. The server binds 127.0.0.1 on an ephemeral
port in a daemon thread, answers at most `max_requests` requests and shuts itself down after
`lifetime_s`, so a test that goes wrong cannot hang or leave it running.

The policy (deterministic in the request's content):
* Weak (model 'weak-test'): after a user message naming a user id → get_user_details(user_id); after a
  get_user_details result → get_reservation_details(the first); after a reservation → by its id, a reply, a
  get_flight_status of its first flight (a read no recorded call matches) or cancel_reservation (a held write).
* Strong verification (the last message is the verifier prompt): by the request's hash, accept all, reject the
  first step with a valid replacement, reject it with none (so a repair turn runs), or (scripted) answer
  malformed text. Reports reasoning as ``reasoning_content`` and ``completion_tokens_details.reasoning_tokens``.
* Strong repair (tools, no verifier prompt): one tool call.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VERIFY_MARK = "The drafted steps ("


def body_key(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def no_faults(key: str, attempt: int, body: dict) -> str | None:
    return None


def some_faults(key: str, attempt: int, body: dict) -> str | None:
    """First attempts fail by hash: 429, 500, timeout, truncated body; later attempts succeed."""
    if attempt > 0:
        return None
    return {1: "429", 2: "500", 3: "timeout", 4: "truncate"}.get(int(key[:8], 16) % 9)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-request (a call cancelled after a fatal error) is not an error of the server: no
    traceback on stderr, where a test reading the command's output would see it."""

    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ChatServer:
    def __init__(self, *, faults: Callable[[str, int, dict], str | None] = no_faults, json_schema: bool = True,
                 malformed: Callable[[str, dict], bool] = lambda key, body: False, max_requests: int = 5000,
                 lifetime_s: float = 120.0, timeout_sleep_s: float = 1.0, api_key: str | None = None,
                 usage: bool = True, served_model: str | None = None, chunk_delay_s: float = 0.001, usage_details: bool = True):
        self.faults, self.json_schema, self.malformed = faults, json_schema, malformed
        #: usage=False: a server that reports no usage (some proxies); served_model: the name every answer gives (a server
        #: that answers with whatever it loaded, as llama.cpp does); chunk_delay_s: the gap between streamed chunks
        self.usage, self.served_model, self.chunk_delay_s = usage, served_model, chunk_delay_s
        #: usage_details=False: usage without prompt_tokens_details / completion_tokens_details (transformers serve's)
        self.usage_details = usage_details
        self.max_requests, self.timeout_sleep_s, self.api_key = max_requests, timeout_sleep_s, api_key
        self.lock = threading.Lock()
        self.attempts: Counter = Counter()  # per body key: requests received
        self.answered: Counter = Counter()  # per body key: 200 chat completions fully written
        self.statuses: Counter = Counter()
        self.received = 0
        self.hold_after: int | None = None  # answer this many, then hold every later request unanswered
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

            def do_GET(self) -> None:
                server._get(self)

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- protocol ---------------------------------------------------------------------------------------------
    def _get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path.rstrip("/").endswith("/v1/models"):
            names = [self.served_model] if self.served_model else ["weak-test", "strong-test"]
            return self._send(h, 200, {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "scripted"}
                                                                  for n in names]})
        return self._send(h, 404, {"error": {"message": "not found"}})

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None,
              truncate: bool = False) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data) + (100 if truncate else 0)))
        h.send_header("Connection", "close" if truncate else "keep-alive")
        h.end_headers()
        h.wfile.write(data[: len(data) // 2] if truncate else data)
        h.wfile.flush()
        if truncate:
            h.close_connection = True

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        try:
            body = json.loads(h.rfile.read(n))
        except ValueError:
            return self._send(h, 400, {"error": {"message": "body is not JSON"}})
        key = body_key(body)
        with self.lock:
            self.received += 1
            attempt = self.attempts[key]
            self.attempts[key] += 1
            over = self.received > self.max_requests
            hold = self.hold_after is not None and sum(self.answered.values()) >= self.hold_after
        if over:
            return self._send(h, 503, {"error": {"message": "test server request budget spent"}})
        if hold:
            self.release.wait(30)
            h.close_connection = True
            return  # never answered
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send(h, 401, {"error": {"message": "invalid api key"}})
        if body.get("model") not in ("weak-test", "strong-test"):
            return self._send(h, 404, {"error": {"message": f"model {body.get('model')!r} does not exist"}})
        if "response_format" in body and not self.json_schema:
            return self._send(h, 400, {"error": {"message": "response_format json_schema is not supported by this server"}})
        fault = self.faults(key, attempt, body)
        if fault == "429":
            self.statuses[429] += 1
            return self._send(h, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0.05"})
        if fault == "500":
            self.statuses[500] += 1
            return self._send(h, 500, {"error": {"message": "internal error"}})
        if fault == "timeout":
            self.statuses["timeout"] += 1
            time.sleep(self.timeout_sleep_s)
            h.close_connection = True
            return
        reply = self._reply(key, body)
        if body.get("stream"):
            self._stream(h, reply, bool((body.get("stream_options") or {}).get("include_usage")))
            with self.lock:
                self.answered[key] += 1
            return
        if fault == "truncate":
            self.statuses["truncate"] += 1
            return self._send(h, 200, reply, truncate=True)
        self._send(h, 200, reply)
        with self.lock:
            self.answered[key] += 1

    def _stream(self, h: BaseHTTPRequestHandler, reply: dict, include_usage: bool) -> None:
        """Server-sent events as vLLM streams them: one chunk per word of the content, then the usage chunk, then [DONE]."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        choice = reply["choices"][0]
        words = re.findall(r"\S+\s*", choice["message"].get("content") or "")
        base = {"id": reply["id"], "object": "chat.completion.chunk", "model": reply["model"]}
        for i, w in enumerate(words):
            last = i == len(words) - 1
            ev = {**base, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": choice["finish_reason"] if last else None}]}
            h.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
            h.wfile.flush()
            time.sleep(self.chunk_delay_s)
        if include_usage and "usage" in reply:
            h.wfile.write(f"data: {json.dumps({**base, 'choices': [], 'usage': reply['usage']})}\n\n".encode())
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()

    def _reply(self, key: str, body: dict) -> dict:
        msgs = body["messages"]
        prompt = _tokens(json.dumps(msgs))
        reasoning = None
        content: str | None = None
        calls: list[dict] = []
        cap = body.get("max_tokens")
        if msgs and (msgs[-1].get("content") or "").startswith("Continue this text"):  # bench serve's prompts
            n = cap or 16
            n = n if body.get("ignore_eos") else min(n, 12)
            content = " ".join("word" for _ in range(n))
            usage = {"prompt_tokens": len(msgs[-1]["content"].split()), "completion_tokens": n, "total_tokens": 0}
            return self._finish(key, body, {"role": "assistant", "content": content}, "length" if cap and n >= cap else "stop", usage)
        if body["model"] == "strong-test" and any(m["role"] == "user" and VERIFY_MARK in (m.get("content") or "") for m in msgs):
            content, reasoning = self._verdict(key, body)
        elif body["model"] == "strong-test":
            calls = [("get_user_details", {"user_id": "ivan_rossi_8555"})]
            reasoning = "The user needs their profile first."
        else:
            content, calls = self._weak(msgs)
        r_tokens = _tokens(reasoning) if reasoning else 0
        visible = _tokens(content or "") + sum(_tokens(n + json.dumps(a)) for n, a in calls)
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = [{"id": f"call_{key[:6]}_{i}", "type": "function",
                                  "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in enumerate(calls)]
        finish = "tool_calls" if calls else "stop"
        if cap is not None and visible + r_tokens > cap and content:  # cut at max_tokens, as a real server does
            content = content[: max(0, cap - r_tokens) * 4]
            msg["content"], visible, finish = content, _tokens(content), "length"
        return self._finish(key, body, msg, finish,
                            {"prompt_tokens": prompt, "completion_tokens": visible + r_tokens, "total_tokens": prompt + visible + r_tokens,
                             "completion_tokens_details": {"reasoning_tokens": r_tokens},
                             "prompt_tokens_details": {"cached_tokens": prompt // 2}})

    def _finish(self, key: str, body: dict, msg: dict, finish: str, usage: dict) -> dict:
        out = {"id": f"chatcmpl-{key[:12]}", "object": "chat.completion", "model": self.served_model or body["model"],
               "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}
        if self.usage:
            out["usage"] = usage if self.usage_details else {k: v for k, v in usage.items() if not k.endswith("_details")}
        return out

    def _weak(self, msgs: list[dict]) -> tuple[str | None, list[tuple[str, dict]]]:
        last = msgs[-1]
        if last["role"] == "user":
            m = re.search(r"\b([a-z]+_[a-z]+_\d{3,5})\b", last.get("content") or "")
            if m:
                return None, [("get_user_details", {"user_id": m.group(1)})]
            return "Could you please tell me your user id?", []
        if last["role"] == "tool":
            try:
                result = json.loads(last.get("content") or "")
            except ValueError:
                result = None
            if isinstance(result, dict) and isinstance(result.get("reservations"), list) and result["reservations"]:
                return None, [("get_reservation_details", {"reservation_id": result["reservations"][0]})]
            if isinstance(result, dict) and "reservation_id" in result:
                rid = result["reservation_id"]
                if sum(map(ord, rid)) % 3 == 0:
                    return f"Your reservation {rid} is confirmed. Anything else?", []
                if sum(map(ord, rid)) % 3 == 1 and result.get("flights"):  # a read no recorded call matches
                    f = result["flights"][0]
                    return None, [("get_flight_status", {"flight_number": f.get("flight_number"), "date": f.get("date")})]
                return None, [("cancel_reservation", {"reservation_id": rid})]
        return "Is there anything else I can help you with?", []

    def _verdict(self, key: str, body: dict) -> tuple[str, str]:
        text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user" and VERIFY_MARK in (m.get("content") or ""))
        n = int(re.search(r"The drafted steps \((\d+) in all\)", text).group(1))
        reasoning = "Checking each step against the policy. " * 3
        if self.malformed(key, body):
            return "I think the steps look fine overall.", reasoning
        h = int(key[8:16], 16) % 3
        if h == 0:
            return json.dumps({"accepted_prefix": n, "reason": "all steps are valid", "replacement": None}), reasoning
        rep = {"name": "get_user_details", "arguments": {"user_id": "ivan_rossi_8555"}} if h == 1 else None
        return json.dumps({"accepted_prefix": 0, "reason": "the first step is premature", "replacement": rep}), reasoning
