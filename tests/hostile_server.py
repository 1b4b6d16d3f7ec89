"""A scripted hostile chat-completions server: `ChatServer`'s honest policy, with one misbehaviour per request role.

Why a real socket again: the failures of docs/reliability.md's endpoint rows (a server that drips one byte
every 0.3 s, a gzip bomb, error bodies echoing the Authorization header, escape sequences) are what the OS
and httpx do with bytes on a wire; only a real server sends them. ``mode(role, body)`` picks the
misbehaviour of each request ('weak', 'verify' or 'repair'), None answers honestly.

Modes: drip_body, drip_headers, hang, echo_auth_200, echo_auth_401, echo_auth_500, ansi_401, tool_calls_int, tool_calls_true,
deep_json, usage_huge, gzip_bomb.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from typing import Any

from chat_server import VERIFY_MARK, ChatServer, body_key

MODES = ("drip_body", "drip_headers", "hang", "echo_auth_200", "echo_auth_401", "echo_auth_500", "ansi_401", "tool_calls_int",
         "tool_calls_true", "deep_json", "usage_huge", "gzip_bomb")


def role_of(body: dict) -> str:
    if body.get("model") != "strong-test":
        return "weak"
    verify = any(m["role"] == "user" and VERIFY_MARK in (m.get("content") or "") for m in body.get("messages") or [])
    return "verify" if verify else "repair"


def on(role: str, mode: str) -> Callable[[str, dict], str | None]:
    """Misbehave as `mode` on every request of `role`, answer the others honestly."""
    return lambda r, body: mode if r == role else None


class HostileServer(ChatServer):
    def __init__(self, mode: Callable[[str, dict], str | None], *, drip_s: float = 0.3, bomb_mb: int = 100, **kw: Any):
        super().__init__(**kw)
        self.mode, self.drip_s, self.bomb_mb = mode, drip_s, bomb_mb
        self.auth_seen: list[str] = []
        self.first_request_at: float | None = None  # time.monotonic() of the first request: a run's clock starts there
        self._bomb: bytes | None = None

    def bomb(self) -> bytes:
        """`bomb_mb` MB of spaces, gzipped (about 1/1000 of that on the wire); built once."""
        if self._bomb is None:
            self._bomb = gzip.compress(b" " * (self.bomb_mb << 20), compresslevel=9)
        return self._bomb

    def _raw(self, h, status: int, data: bytes, headers: dict[str, str]) -> None:
        h.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

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
            self._send(h, 200, self._reply(body_key(body), body))
            return
        with self.lock:
            self.statuses[mode] += 1
        h.close_connection = True
        if mode in ("drip_body", "drip_headers"):
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
            return
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
        if mode == "usage_huge":
            reply["usage"]["completion_tokens"] = 10**30
            return self._raw(h, 200, json.dumps(reply).encode(), {})
        if mode == "gzip_bomb":
            return self._raw(h, 200, self.bomb(), {"Content-Encoding": "gzip"})
        raise AssertionError(f"unknown mode {mode!r}")

