"""A scripted hostile chat-completions server: `ChatServer`'s honest policy, with one misbehaviour per request role.

Why a real socket again: the failures of docs/reliability.md's endpoint rows (a server that drips one byte
every 0.3 s, a gzip bomb, error bodies echoing the Authorization header, escape sequences) are what the OS
and httpx do with bytes on a wire; only a real server sends them. ``mode(role, body)`` picks the
misbehaviour of each request ('weak', 'verify' or 'repair'), None answers honestly.

Modes: drip_body, drip_headers, hang, echo_auth_200, echo_auth_401, echo_auth_500, ansi_401, tool_calls_int, tool_calls_true,
deep_json, usage_huge, gzip_bomb; verdict (a verification answered with the text `verdict`), reply_10mb, unknown_tool_1mb
(a call of a tool no one offered, with 1 MB of arguments), args_not_json; redirect_loop (302 to itself), echo_auth_500_encoded (the key URL-encoded, base64 and
JSON-escaped); for streamed requests (`bench serve`): sse_drip (one content event every `drip_s`, never ending),
sse_endless (events as fast as the socket takes them, no [DONE]), sse_deep_json, sse_not_object, sse_bad_choices,
sse_usage_huge, sse_usage_negative. ``get_mode`` misbehaves on GETs (/v1/models, /version): drip_headers or hang.

`RawServer` is below HTTP: it answers every request with scripted bytes no http.server handler sends (a reset mid-body,
a close at once, broken chunks, an SSH banner, a Content-Length of 10 GB, a 1 MB header, a body that is not gzip, HTML,
an empty body; `RAW_MODES`), or with any whole answer `status_answer` builds (a 401 quoting 5 MB, a 204, a redirect).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from chat_server import VERIFY_MARK, ChatServer, body_key

MODES = ("drip_body", "drip_headers", "hang", "echo_auth_200", "echo_auth_401", "echo_auth_500", "ansi_401", "tool_calls_int",
         "tool_calls_true", "deep_json", "usage_huge", "gzip_bomb", "redirect_loop", "echo_auth_500_encoded", "verdict", "reply_10mb",
         "unknown_tool_1mb", "args_not_json")
SSE_MODES = ("sse_drip", "sse_endless", "sse_deep_json", "sse_not_object", "sse_bad_choices", "sse_usage_huge", "sse_usage_negative")


def role_of(body: dict) -> str:
    if body.get("model") != "strong-test":
        return "weak"
    verify = any(m["role"] == "user" and VERIFY_MARK in (m.get("content") or "") for m in body.get("messages") or [])
    return "verify" if verify else "repair"


def on(role: str, mode: str) -> Callable[[str, dict], str | None]:
    """Misbehave as `mode` on every request of `role`, answer the others honestly."""
    return lambda r, body: mode if r == role else None


class HostileServer(ChatServer):
    def __init__(self, mode: Callable[[str, dict], str | None], *, drip_s: float = 0.3, bomb_mb: int = 100,
                 get_mode: str | None = None, verdict: str = "", **kw: Any):
        super().__init__(**kw)
        self.mode, self.drip_s, self.bomb_mb, self.get_mode = mode, drip_s, bomb_mb, get_mode
        self.verdict = verdict  # the text mode 'verdict' answers a verification with
        self.auth_seen: list[str] = []
        self.first_request_at: float | None = None  # time.monotonic() of the first request: a run's clock starts there
        self._bomb: bytes | None = None

    def bomb(self) -> bytes:
        """`bomb_mb` MB of spaces, gzipped (about 1/1000 of that on the wire); built once."""
        if self._bomb is None:
            self._bomb = gzip.compress(b" " * (self.bomb_mb << 20), compresslevel=9)
        return self._bomb

    def _raw(self, h, status: int, data: bytes, headers: dict[str, str]) -> None:
        # a hostile answer ends its connection (`_handle`), and says so, as HTTP/1.1 asks: unsaid, the client kept the
        # connection for its retry, which on a loaded machine went out before the close arrived and met a dead socket
        # ("Server disconnected without sending a response") instead of the answer the test is about
        close = {"Connection": "close"} if h.close_connection else {}
        h.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **close, **headers}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def _get(self, h) -> None:
        if self.get_mode is None:
            return super()._get(h)
        h.close_connection = True
        if self.get_mode == "hang":
            self.release.wait(60)
            return
        self._drip(h, "drip_headers")

    def _drip(self, h, mode: str) -> None:
        """200 headers then a space every `drip_s` (drip_body), or one header line every `drip_s` (drip_headers)."""
        try:
            h.wfile.write(b"HTTP/1.1 200 OK\r\n")
            if mode == "drip_body":
                h.wfile.write(b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            for i in range(10_000):
                if self.release.wait(self.drip_s):
                    return
                h.wfile.write(b" " if mode == "drip_body" else f"X-Drip-{i}: x\r\n".encode())
                h.wfile.flush()
        except OSError:
            return  # the client gave up: what it should do

    def _sse(self, h, mode: str, body: dict) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        event = {"id": "x", "object": "chat.completion.chunk", "model": body.get("model"),
                 "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]}
        bad = {"sse_deep_json": "[" * 100_000, "sse_not_object": "5", "sse_bad_choices": json.dumps({**event, "choices": 5}),
               "sse_usage_huge": json.dumps({**event, "usage": {"prompt_tokens": 10, "completion_tokens": 10**30}}),
               "sse_usage_negative": json.dumps({**event, "usage": {"prompt_tokens": 10, "completion_tokens": -5}})}
        try:
            if mode in bad:
                h.wfile.write(f"data: {json.dumps(event)}\n\ndata: {bad[mode]}\n\ndata: [DONE]\n\n".encode())
                h.wfile.flush()
                return
            line = f"data: {json.dumps(event)}\n\n".encode()
            for _ in range(10_000_000):
                if self.release.wait(self.drip_s if mode == "sse_drip" else 0):
                    return
                h.wfile.write(line if mode == "sse_drip" else line * 64)
                h.wfile.flush()
        except OSError:
            return

    def _handle(self, h) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            return self._raw(h, 400, b'{"error": {"message": "not JSON"}}', {})
        auth = h.headers.get("Authorization") or ""
        with self.lock:
            self.received += 1
            self.auth_seen.append(auth)
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
        mode = self.mode(role_of(body), body)
        if mode is None:
            if body.get("stream"):  # bench serve's requests: streamed as ChatServer streams them
                return self._stream(h, self._reply(body_key(body), body), True)
            self._send(h, 200, self._reply(body_key(body), body))
            return
        with self.lock:
            self.statuses[mode] += 1
        h.close_connection = True
        if mode in ("drip_body", "drip_headers"):
            return self._drip(h, mode)
        if mode in SSE_MODES:
            return self._sse(h, mode, body)
        if mode == "redirect_loop":
            return self._raw(h, 302, b"", {"Location": h.path})
        if mode == "echo_auth_500_encoded":  # a gateway that quotes the key in other encodings
            key = auth.removeprefix("Bearer ")
            text = (f"denied: key={urllib.parse.quote(key, safe='')} b64={base64.b64encode(key.encode()).decode()} "
                    f"json={json.dumps(key)}")
            return self._raw(h, 500, json.dumps({"error": {"message": text}}).encode(), {})
        if mode == "hang":
            self.release.wait(60)
            return
        if mode in ("echo_auth_401", "echo_auth_500"):
            text = f"upstream rejected request with headers Authorization: {auth}"
            return self._raw(h, 401 if mode == "echo_auth_401" else 500, json.dumps({"error": {"message": text}}).encode(), {})
        if mode == "ansi_401":
            return self._raw(h, 401, json.dumps({"error": {"message": "\x1b]0;owned\x07\x1b[31m denied \x1b[0m"}}).encode(), {})
        if mode == "deep_json":
            return self._raw(h, 200, b"[" * 100_000, {})
        reply = self._reply(body_key(body), body)
        if mode == "echo_auth_200":  # an honest answer whose text quotes the key (a debugging proxy, a leaky model)
            reply["choices"][0]["message"]["content"] = f"you sent Authorization: {auth}"
            reply["choices"][0]["message"].pop("tool_calls", None)
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode in ("tool_calls_int", "tool_calls_true"):
            reply["choices"][0]["message"]["tool_calls"] = 5 if mode == "tool_calls_int" else True
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode == "verdict":  # a hostile verdict: the honest answer's envelope around `verdict` ('<n>': the drafted steps)
            n = re.search(r"The drafted steps \((\d+) in all\)", json.dumps(body["messages"]))
            reply["choices"][0]["message"]["content"] = self.verdict.replace("<n>", n.group(1) if n else "1")
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode == "reply_10mb":  # a Weak reply of 10 MB of text, no tool call
            reply["choices"][0]["message"] = {"role": "assistant", "content": "word " * (2 << 20)}
            reply["choices"][0]["finish_reason"] = "stop"
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode in ("unknown_tool_1mb", "args_not_json"):
            fn = {"name": "no_such_tool", "arguments": json.dumps({"blob": "a" * (1 << 20)})} if mode == "unknown_tool_1mb" \
                else {"name": "get_user_details", "arguments": '{"user_id": ivan_rossi_8555'}
            reply["choices"][0]["message"] = {"role": "assistant", "content": None,
                                              "tool_calls": [{"id": "call_x", "type": "function", "function": fn}]}
            reply["choices"][0]["finish_reason"] = "tool_calls"
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode == "usage_huge":
            reply["usage"]["completion_tokens"] = 10**30
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode == "gzip_bomb":
            return self._raw(h, 200, self.bomb(), {"Content-Encoding": "gzip"})
        raise AssertionError(f"unknown mode {mode!r}")



#: What `RawServer` answers, by mode: bytes no http.server handler sends (a reset, a banner, a broken chunk), or an honest
#: status line with a hostile body. None: read the request and never answer. A whole answer says `Connection: close` (the
#: server closes after it): unsaid, the client's retry could go out on the closed connection and fail another way.
_HTML = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
RAW_MODES: dict[str, bytes | None] = {
    "never_answers": None,
    "reset_mid_body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"choices\": [",
    "close_at_once": b"",
    "chunked_garbage": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n",
    "non_http_banner": b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n",
    "content_length_10gb": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{\"choices\": ",
    "header_1mb": b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * (1 << 20) + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    "invalid_gzip": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 16\r\n"
                    b"Connection: close\r\n\r\nthis is not gzip",
    "html": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(_HTML) + _HTML,
    "empty_body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "empty_object": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
}


def status_answer(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    """One whole HTTP/1.1 answer of `status` (a 204 carries no body, as RFC 9110 says)."""
    body = b"" if status == 204 else body
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Type": "application/json", **(headers or {})}.items())
    return f"HTTP/1.1 {status} X\r\n{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


class RawServer:
    """A loopback TCP server that reads each request whole and answers with the scripted bytes `answer` (a `RAW_MODES` name
    or the bytes themselves), then closes; 'reset_mid_body' closes with an RST (SO_LINGER 0). Counts the requests it read
    and keeps each one's Authorization header, so a test can see the key reached it (and that a redirect target never
    got it). Threads are daemons and every wait ends at `stop`, so a test that goes wrong cannot hang."""

    def __init__(self, answer: str | bytes):
        self.mode = answer if isinstance(answer, str) else "bytes"
        self.answer = RAW_MODES[answer] if isinstance(answer, str) else answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.lock = threading.Lock()
        self.received = 0
        self.auth_seen: list[str] = []
        self.release = threading.Event()
        self._conns: list[socket.socket] = []

    def __enter__(self) -> "RawServer":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.release.set()
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> bytes | None:
        conn.settimeout(30)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
        n = int(fields.get(b"content-length", b"0"))
        while len(body) < n:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        with self.lock:
            self.received += 1
            self.auth_seen.append(fields.get(b"authorization", b"").decode("latin-1"))
        return head

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.mode == "close_at_once":
                conn.close()  # before reading a byte: the client's send may fail too, or its read finds the end
                with self.lock:
                    self.received += 1
                return
            if self._read_request(conn) is None:
                return
            if self.answer is None:
                self.release.wait(60)
                return
            conn.sendall(self.answer)
            if self.mode == "reset_mid_body":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            return  # the client gave up: what it should do
        finally:
            try:
                conn.close()
            except OSError:
                pass


#: `StreamServer`'s scripted misbehaviours (the round-four findings' bench-serve cases): the server's texts that echo
#: the Authorization header (model_echo, models_echo, version_echo, malformed_echo), error events and a cut stream
#: (error_mid, error_typed, cut_clean), usage that contradicts the request or the stream (usage_high, usage_zero,
#: usage_one, prompt_zero, prompt_huge, million_chunks). None: an honest vLLM-like stream.
STREAM_MODES = ("model_echo", "models_echo", "version_echo", "malformed_echo", "error_mid", "error_typed", "cut_clean",
                "usage_high", "usage_zero", "usage_one", "prompt_zero", "prompt_huge", "million_chunks")


class StreamServer:
    """A close-delimited streaming chat server on 127.0.0.1 (an ephemeral port) for `bench serve`: /v1/models lists 'm'
    (owned_by vllm), /version says 0.9.9, and every POST streams `max_tokens` one-word content events, the last with
    finish_reason 'length', then the usage event and [DONE] — unless `mode` scripts one misbehaviour."""

    def __init__(self, mode: str | None = None):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        assert mode is None or mode in STREAM_MODES, mode
        self.mode = mode
        self.auth_seen: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # every answer ends with the connection: a close-delimited stream

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._get(self)

            def do_POST(self) -> None:
                server._post(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "StreamServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _json(self, h, payload: Any) -> None:
        data = json.dumps(payload).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _get(self, h) -> None:
        auth = h.headers.get("Authorization") or ""
        if h.path.rstrip("/").endswith("/v1/models"):
            mid = f"served-for-{auth}" if self.mode == "models_echo" else "m"
            return self._json(h, {"object": "list", "data": [{"id": mid, "object": "model", "owned_by": "vllm"}]})
        if h.path.rstrip("/").endswith("/version"):
            return self._json(h, {"version": f"0.9.9 ({auth})" if self.mode == "version_echo" else "0.9.9"})
        h.send_error(404)

    def _post(self, h) -> None:
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length") or 0)))
        auth = h.headers.get("Authorization") or ""
        with self.lock:
            self.auth_seen.append(auth)
        cap = int(body.get("max_tokens") or 4)
        words = len((body["messages"][-1].get("content") or "").split())
        mode = self.mode
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        model = f"m-{auth}" if mode == "model_echo" else body.get("model")

        def event(content: str | None, finish: str | None = None, **extra: Any) -> bytes:
            choices = [] if content is None else [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]
            return f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'model': model, 'choices': choices, **extra})}\n\n".encode()

        usage = {"prompt_tokens": words + 1, "completion_tokens": cap}
        try:
            if mode == "malformed_echo":  # a non-JSON event: 60 bytes of padding, then the key
                h.wfile.write(event("word ") + f"data: {'p' * 60}{auth.removeprefix('Bearer ')}\n\n".encode())
                return
            if mode in ("error_mid", "error_typed", "cut_clean"):
                h.wfile.write(event("word ") + event("word "))
                err = {"error": {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB", "type":
                                 "InternalServerError", "param": None, "code": 500}}
                if mode == "error_mid":
                    h.wfile.write(f"data: {json.dumps(err)}\n\ndata: [DONE]\n\n".encode())
                elif mode == "error_typed":
                    h.wfile.write(f"event: error\ndata: {json.dumps(err)}\n\n".encode())
                return  # cut_clean: the connection closes after two whole events
            n = 1_000_000 if mode == "million_chunks" else cap
            usage = {"usage_high": {**usage, "completion_tokens": 10_000_000}, "usage_zero": {**usage, "completion_tokens": 0},
                     "usage_one": {**usage, "completion_tokens": 1}, "prompt_zero": {**usage, "prompt_tokens": 0},
                     "prompt_huge": {**usage, "prompt_tokens": 10_000_000},
                     "million_chunks": {**usage, "completion_tokens": n}}.get(mode or "", usage)
            for i in range(n):
                h.wfile.write(event("word ", "length" if i == n - 1 else None))
            h.wfile.write(event(None, usage=usage) + b"data: [DONE]\n\n")
        except OSError:
            return  # the client stopped reading: what it should do
