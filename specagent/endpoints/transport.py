"""Deadlines, not timeouts: one chat answer must arrive whole within ``--timeout``, and ^C stops it.

Why: ``httpx.Timeout(t)`` bounds each socket operation, so a server that drips a byte (or a header
line) every 0.3 s holds a call forever, and a blocked read ignores ^C until it ends. Here every
network operation of a request runs in slices of at most `SLICE_S`; between slices the request's
deadline (connect to last byte) and the client's cancel event are checked. So a dripping or stalled
server is a `DeadlineExceeded` after ``--timeout`` seconds, and a cancel ends every in-flight call
within a slice. Two operations cannot be sliced, so they run where they can be left behind: the name
lookup and the TCP connect run in a worker thread the request waits on in slices (a resolver that
takes a minute counts against ``--timeout`` and a ^C leaves it at once), and a request body is sent
in pieces of at most `WRITE_CHUNK` bytes, each send bounded by a slice (a server that never reads
holds a large body no longer than the deadline, and a ^C ends it within a slice).

The body is read raw and inflated here, not by httpx, with a bound (`MAX_BODY_BYTES`, 64 MiB) on
what it may inflate to: a 1 MB gzip answer of spaces cannot become 1 GB in memory. Only the
encodings asked for (``gzip``, ``deflate``, none) are accepted.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

#: Longest single blocking network operation (s): how late a deadline or a ^C may be noticed.
SLICE_S = 0.25
#: Largest answer body accepted, after decompression (a chat completion is kilobytes; 64 MiB is room for 10 MB replies).
MAX_BODY_BYTES = 64 << 20
ACCEPT_ENCODING = "gzip, deflate"
#: Largest piece of a request body given to one send: a send that cannot finish in a slice is retried whole.
WRITE_CHUNK = 64 << 10


class Cancelled(Exception):
    """The client was cancelled (^C) while this call was in flight."""


class DeadlineExceeded(Exception):
    """The whole answer did not arrive within the request's deadline."""


class BodyTooLarge(Exception):
    """The answer (after decompression) is larger than `MAX_BODY_BYTES`."""


class _Watch:
    """The deadline of the request running on this thread, and the client's cancel event."""

    def __init__(self, cancel: threading.Event):
        self.cancel = cancel
        self._local = threading.local()

    def start(self, seconds: float) -> None:
        self._local.deadline = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left for this thread's request; raises (as httpcore errors, so httpx maps them) when none."""
        if self.cancel.is_set():
            raise httpcore.ReadError("cancelled")
        deadline = getattr(self._local, "deadline", None)
        if deadline is None:
            return SLICE_S
        left = deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ReadTimeout("deadline")
        return left

    def slice(self, timeout: float | None) -> float:
        left = min(self.left(), SLICE_S)
        return left if timeout is None else min(left, timeout)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, watch: _Watch):
        self._inner, self._watch = inner, watch

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                return self._inner.read(max_bytes, self._watch.slice(None))
            except httpcore.ReadTimeout:
                self._watch.left()  # raises when the deadline passed or the call was cancelled; else read on

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._inner.get_extra_info("socket")
        if not isinstance(sock, socket.socket):  # a stream that is not one socket (TLS in TLS): bounded, not sliced
            self._inner.write(buffer, min(self._watch.left(), timeout or float("inf")))
            return
        view = memoryview(buffer)
        while view:
            sock.settimeout(self._watch.slice(None))  # raises when the deadline passed or the call was cancelled
            try:
                sent = sock.send(view[:WRITE_CHUNK])
            except TimeoutError:
                continue  # nothing was sent in this slice; the same piece again (TLS asks for the same length)
            except OSError as exc:
                raise httpcore.WriteError(str(exc)) from exc
            view = view[sent:]

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        left = min(self._watch.left(), timeout or float("inf"))
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, left), self._watch)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, watch: _Watch):
        self._inner, self._watch = httpcore.SyncBackend(), watch

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        """The name lookup and the connect in a worker thread, waited on in slices: neither takes a timeout of its own
        (getaddrinfo none at all), so a slow resolver would otherwise sit outside the deadline and deaf to ^C."""
        left = min(self._watch.left(), timeout or float("inf"))
        box: dict[str, Any] = {}
        lock, done = threading.Lock(), threading.Event()

        def connect() -> None:
            try:
                stream = self._inner.connect_tcp(host, port, left, local_address, socket_options)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                box["error"] = exc
                stream = None
            with lock:
                if box.get("abandoned") and stream is not None:
                    stream.close()  # the request gave up (deadline or ^C) while this connected
                else:
                    box["stream"] = stream
                done.set()

        threading.Thread(target=connect, name="specagent-connect", daemon=True).start()
        try:
            while not done.wait(self._watch.slice(None)):
                pass
        except BaseException:
            with lock:
                box["abandoned"] = True
                if box.get("stream") is not None:
                    box["stream"].close()
            raise
        if "error" in box:
            raise box["error"]
        return _Stream(box["stream"], self._watch)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, min(self._watch.left(), timeout or float("inf")), socket_options),
                       self._watch)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class Transport:
    """An httpx client whose requests each have a whole-answer deadline and can all be cancelled at once."""

    def __init__(self, timeout_s: float, concurrency: int, max_body_bytes: int = MAX_BODY_BYTES):
        self.timeout_s, self.max_body_bytes = timeout_s, max_body_bytes
        self.cancel_event = threading.Event()
        self._watch = _Watch(self.cancel_event)
        transport = httpx.HTTPTransport(limits=httpx.Limits(max_connections=concurrency))
        transport._pool._network_backend = _Backend(self._watch)  # httpx takes no backend argument; httpcore's pool does
        self._http = httpx.Client(transport=transport, timeout=httpx.Timeout(timeout_s), follow_redirects=False)

    def cancel(self) -> None:
        self.cancel_event.set()

    def close(self) -> None:
        self._http.close()

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, decoded body) of one POST of a JSON `body`; raises httpx errors, `DeadlineExceeded`, `Cancelled`, `BodyTooLarge`."""
        with self.stream("POST", url, body, headers) as (status, answer_headers, chunks):
            return status, answer_headers, b"".join(chunks)

    def get(self, url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """`post`'s answer to a GET (a server's /v1/models or /version): the same deadline and bounds."""
        with self.stream("GET", url, None, headers) as (status, answer_headers, chunks):
            return status, answer_headers, b"".join(chunks)

    @contextmanager
    def stream(self, method: str, url: str, body: bytes | None,
               headers: dict[str, str]) -> Iterator[tuple[int, dict[str, str], Iterator[bytes]]]:
        """(status, headers, decoded body pieces as they arrive) of one request: a streamed answer (`bench serve`'s
        server-sent events) is timed piece by piece, and still ends whole within the deadline; the same errors as `post`."""
        self._watch.start(self.timeout_s)
        sent = {**headers, "Accept-Encoding": ACCEPT_ENCODING, **({"Content-Type": "application/json"} if body is not None else {})}
        try:
            with self._http.stream(method, url, content=body, headers=sent) as r:
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_body_bytes:
                    raise BodyTooLarge(f"the answer declares {int(declared):,} bytes (more than {self.max_body_bytes:,})")
                yield r.status_code, dict(r.headers), _decoded(r.iter_raw(), r.headers.get("content-encoding", ""),
                                                               self.max_body_bytes)
        except (httpx.TimeoutException, httpx.ReadError, httpx.RemoteProtocolError) as exc:
            if self.cancel_event.is_set():
                raise Cancelled() from None
            if str(exc) == "deadline":
                raise DeadlineExceeded(f"no whole answer within {self.timeout_s:g} s (--timeout bounds connect to last byte)") from None
            raise
        finally:
            self._watch.start(float("inf"))


def lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """The text lines of a streamed body as they complete (LF or CRLF ends one), the last one even without an end.
    Each piece is scanned once, so a line that never ends costs linear time up to the body's cap."""
    held: list[bytes] = []
    for chunk in chunks:
        *done, rest = chunk.split(b"\n")
        for i, line in enumerate(done):
            if i == 0 and held:
                line, held = b"".join(held) + line, []
            yield line.rstrip(b"\r").decode("utf-8", errors="replace")
        if rest:
            held.append(rest)
    if held:
        yield b"".join(held).rstrip(b"\r").decode("utf-8", errors="replace")


def _decoded(chunks: Iterator[bytes], encoding: str, cap: int) -> Iterator[bytes]:
    """The body's pieces, decoded as its Content-Encoding says, refused past `cap` bytes in all however small on the wire."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        dec = None
    elif enc in ("gzip", "x-gzip"):
        dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif enc == "deflate":
        dec = zlib.decompressobj()
    else:
        raise httpx.DecodingError(f"the answer's Content-Encoding {encoding!r} was not asked for ({ACCEPT_ENCODING})")
    total = 0
    for chunk in chunks:
        while chunk:
            if dec is None:
                piece, chunk = chunk, b""
            else:
                try:
                    piece = dec.decompress(chunk, cap + 1 - total)
                except zlib.error as exc:
                    raise httpx.DecodingError(f"the answer's {enc} body is corrupt ({exc})") from None
                chunk = dec.unconsumed_tail
            total += len(piece)
            if total > cap:
                raise BodyTooLarge(f"the answer is larger than {cap:,} bytes{' once inflated' if dec else ''}")
            if piece:
                yield piece
            if dec is not None and not piece:
                break
