"""Hostile servers and keys against every command that takes an endpoint (findings 2026-12-03, F3-01 to F3-08, F3-14,
F3-15, F3-19): no secret in any byte written or printed, no hang past the deadline, no traceback.

Every case plants a known secret in ``OPENAI_API_KEY`` and searches stdout, stderr and every file under the
case's folder for it (raw, stripped, and as JSON or repr would escape it).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.parse
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402
from hostile_server import HostileServer, RawServer, on, status_answer  # noqa: E402

from specagent.cli.app import app  # noqa: E402
from specagent.common.errors import InputError  # noqa: E402
from specagent.common.redact import clean, mask, printable, redact, redact_url  # noqa: E402
from specagent.endpoints.cache import ResponseCache, request_key  # noqa: E402
from specagent.endpoints.client import ChatClient, Endpoint, RetryPolicy, TransientFailure  # noqa: E402
from specagent.endpoints.transport import Cancelled  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "traces" / "data" / "tau2_airline_sample.json"
SPECAGENT = str(Path(sys.executable).with_name("specagent"))
SECRET = "sk-planted-5f1c9e0b7a2d4c8e9f3a6b1d0e7c2a4b"
FAST = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.02)
BODY = {"messages": [{"role": "user", "content": "hello, my id is ivan_rossi_8555"}], "temperature": 0.0}


def forms(secret: str) -> set[str]:
    """The key as a server may quote it back (raw, escaped, URL-encoded, base64) and its middle (no half of a key either)."""
    s = secret.strip()
    b64 = base64.b64encode(s.encode()).decode().rstrip("=")
    return {s, json.dumps(s)[1:-1], repr(s)[1:-1], s[4:-4], urllib.parse.quote(s, safe=""), b64[4:-4],
            base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")[4:-4]}


def leaks(secret: str, *texts: str, folder: Path | None = None) -> list[str]:
    """Where any form of `secret` occurs: in the texts, or in any file under `folder`."""
    found = [f"output {i}" for i, t in enumerate(texts) for f in forms(secret) if f and f in (t or "")]
    if folder is not None:
        for p in folder.rglob("*"):
            if p.is_file():
                data = p.read_bytes()
                found += [str(p) for f in forms(secret) if f.encode() in data]
    return found


def measure_args(url: str, out: Path, *extra: str) -> list[str]:
    return ["acceptance", "measure", str(FIXTURE), "--weak-url", url, "--weak-model", "weak-test", "--strong-url", url,
            "--strong-model", "strong-test", "-o", str(out), "--yes", "--limit", "2", "--retries", "2", "--backoff", "0.01",
            "--timeout", "5", *extra]


def live_args(url: str, out: Path, *extra: str) -> list[str]:
    return ["live", "--weak-url", url, "--weak-model", "weak-test", "--strong-url", url, "--strong-model", "strong-test",
            "-o", str(out), "--trajectories", "1", "--timeout", "5", "--retries", "2", "--backoff", "0.01", *extra]


def cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, args, env=env)
    return r.exit_code, r.output + (str(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else "")


# -- the redaction rule ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    f"Illegal header value b'Bearer {SECRET}\\r\\n'", f"Authorization: Bearer {SECRET}", f"api-key: {SECRET}",
    f'{{"Authorization": "Bearer {SECRET}"}}', f"http://me:{SECRET}@host/v1", f"http://host/v1?api_key={SECRET}&x=1",
    f"https://host/v1?x=1&token={SECRET}", f"key {SECRET} echoed",
])
def test_the_rule_masks_a_key_wherever_it_stands(text):
    out = redact(text, [SECRET])
    assert not leaks(SECRET, out), out


@pytest.mark.parametrize("text", [
    "Authorization: Bearer unknown-key-123456789", "api-key: unknown-key-123456789", "http://me:unknown-key-123456789@h/v1",
    "http://h/v1?token=unknown-key-123456789", "the key sk-unknownkey123456789 was refused",
])
def test_the_rule_masks_a_key_it_was_not_told_by_where_it_stands(text):
    assert "unknown-key-123456789" not in redact(text, []) and "sk-unknownkey123456789" not in redact(text, [])


def test_the_rule_masks_a_key_from_any_key_like_variable(monkeypatch):
    monkeypatch.setenv("MY_GATEWAY_TOKEN", "zz-9f8e7d6c5b4a")
    assert "zz-9f8e7d6c5b4a" not in redact("the gateway said zz-9f8e7d6c5b4a")
    assert mask(SECRET) == "sk-…4b"


def test_urls_and_control_characters():
    assert redact_url("http://u:p@h:1/v1?api_key=abc&model=x") == "http://***@h:1/v1?api_key=***&model=x"
    assert printable("\x1b]0;owned\x07\x1b[31m") == "\\x1b]0;owned\\x07\\x1b[31m"
    assert clean("a\tb\nc") == "a\tb\nc"


# -- keys that cannot be a header value: refused before the first call (F3-01, F3-08) ---------------------------------

@pytest.mark.parametrize("key", [SECRET + "\r\n", SECRET + "\n", "\u2018" + SECRET + "\u2019", SECRET + "\x07", " " + SECRET])
@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_key_that_cannot_be_a_header_is_refused_before_any_call_naming_the_variable(tmp_path, key, command):
    with ChatServer() as s:
        args = (measure_args if command == "measure" else live_args)(s.url, tmp_path / "o")
        code, out = cli(args, {"OPENAI_API_KEY": key})
        assert s.received == 0
    assert code == 2 and "$OPENAI_API_KEY" in out and "not a valid HTTP header value" in out, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert not leaks(key, out, folder=tmp_path)


@pytest.mark.parametrize("flag,value,said", [
    ("--weak-extra-body", '{"top_p": NaN}', "NaN is not JSON"), ("--strong-extra-body", '{"x": Infinity}', "Infinity is not JSON"),
    ("--weak-extra-body", "[" * 100_000, "nested too deep"),
])
def test_an_extra_body_no_json_can_carry_is_one_line(tmp_path, flag, value, said):
    with ChatServer() as s:
        code, out = cli(measure_args(s.url, tmp_path / "o", flag, value), {"OPENAI_API_KEY": SECRET})
        assert s.received == 0
    assert code == 2 and flag in out and said in out and "Traceback" not in out, out


# -- servers that echo the key (F3-04), escape sequences (F3-14) --------------------------------------------------------

@pytest.mark.parametrize("mode", ["echo_auth_200", "echo_auth_401", "echo_auth_500"])
@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_server_that_echoes_the_key_never_gets_it_printed_or_written(tmp_path, mode, command):
    with HostileServer(on("weak", mode)) as s:
        args = (measure_args if command == "measure" else live_args)(s.url, tmp_path / "o")
        code, out = cli(args, {"OPENAI_API_KEY": SECRET})
        assert s.auth_seen and all(a == f"Bearer {SECRET}" for a in s.auth_seen)  # the key did reach the server
    assert "Traceback" not in out and not leaks(SECRET, out, folder=tmp_path), (out, leaks(SECRET, out, folder=tmp_path))
    assert mode == "echo_auth_200" or "Authorization: Bearer ***" in out or (tmp_path / "o" / "skips.jsonl").exists()


def test_the_help_of_every_endpoint_command_holds_no_key():
    for args in (["acceptance", "measure", "--help"], ["live", "--help"]):
        code, out = cli(args, {"OPENAI_API_KEY": SECRET})
        assert code == 0 and not leaks(SECRET, out)


def test_a_url_with_credentials_is_masked_in_every_output(tmp_path):
    with ChatServer() as s:
        url = s.url.replace("http://", f"http://me:{SECRET}@") + f"?api_key={SECRET}"
        for command in (measure_args, live_args):
            cli(command(url, tmp_path / command.__name__), {"OPENAI_API_KEY": SECRET})
    assert not leaks(SECRET, folder=tmp_path)


def test_escape_sequences_in_a_servers_error_are_escaped(tmp_path):
    with HostileServer(on("weak", "ansi_401")) as s:
        code, out = cli(measure_args(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
    assert code == 2 and "\x1b" not in out and "\x07" not in out and "\\x1b]0;owned" in out, repr(out)


# -- malformed bodies are broken answers: retried, then a counted skip (F3-06, F3-07, F3-19) ----------------------------

@pytest.mark.parametrize("role,mode", [("weak", "tool_calls_int"), ("weak", "tool_calls_true"), ("weak", "deep_json"),
                                       ("verify", "deep_json"), ("weak", "usage_huge"), ("verify", "usage_huge")])
def test_a_malformed_answer_is_a_counted_skip_not_a_traceback(tmp_path, role, mode):
    out = tmp_path / "o"
    with HostileServer(on(role, mode)) as s:
        code, text = cli(measure_args(s.url, out, "--json"), {"OPENAI_API_KEY": SECRET})
    assert code == 3 and "Traceback" not in text, text  # 0 verdicts: exit 3 (#36), the skips say why
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"] == 2 and summary["records"] == 0, summary
    skips = [json.loads(line) for line in (out / "skips.jsonl").read_text().splitlines()]
    assert all("not a chat completion" in sk["detail"] and "endpoint http://127.0.0.1" in sk["detail"] for sk in skips), \
        [sk["detail"] for sk in skips]


@pytest.mark.parametrize("role,mode", [("weak", "tool_calls_int"), ("weak", "deep_json"), ("verify", "deep_json"),
                                       ("weak", "usage_huge"), ("repair", "usage_huge"), ("weak", "gzip_bomb")])
def test_live_on_a_malformed_answer_ends_in_one_line_or_a_counted_skip(tmp_path, role, mode):
    with HostileServer(on(role, mode), bomb_mb=70) as s:
        code, out = cli(live_args(s.url, tmp_path / "o", "--trajectories", "2"), {"OPENAI_API_KEY": SECRET})
    assert code in (0, 2) and "Traceback" not in out, out
    assert code == 0 or "no live task finished" in out and "not a chat completion" in out, out


def test_a_key_given_in_an_extra_body_is_not_cached_in_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_API_KEY", SECRET)
    with ChatServer() as s:
        code, out = cli(measure_args(s.url, tmp_path / "o", "--weak-extra-body", json.dumps({"user": SECRET})),
                        {"OPENAI_API_KEY": SECRET})
    assert code == 0 and not leaks(SECRET, out, folder=tmp_path), leaks(SECRET, out, folder=tmp_path)


def test_a_decompression_bomb_is_refused_at_the_cap_with_bounded_memory(tmp_path):
    with HostileServer(on("weak", "gzip_bomb"), bomb_mb=64) as s:
        s.bomb()  # built before memory is traced (the server shares this process)
        ep = Endpoint("weak", s.url, "weak-test")
        with ChatClient(ResponseCache(None), retry=FAST, timeout_s=30, max_body_bytes=4 << 20) as c:
            tracemalloc.start()
            with pytest.raises(TransientFailure, match="larger than 4,194,304 bytes once inflated"):
                c.chat(ep, BODY)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert peak < 24 << 20, peak  # the cap plus one inflated slice, never the 64 MB the body inflates to


def test_a_plain_answer_under_the_cap_reads(tmp_path):
    with ChatServer() as s, ChatClient(ResponseCache(None), retry=FAST, timeout_s=30) as c:
        assert c.chat(Endpoint("weak", s.url, "weak-test"), BODY).tool_calls


def test_a_gzip_answer_reads():
    from specagent.endpoints.transport import _decoded

    data = gzip.compress(b'{"a": 1}')
    assert b"".join(_decoded(iter([data[:5], data[5:]]), "gzip", 100)) == b'{"a": 1}'


# -- a tampered cache entry is asked again (F3-15) ---------------------------------------------------------------------

@pytest.mark.parametrize("edit", [{"latency_s": "NaN"}, {"latency_s": -1}, {"response": [[[]]]}, {"latency_s": "inf"}])
def test_a_tampered_cache_entry_is_asked_again(tmp_path, edit):
    with ChatServer() as s, ChatClient(ResponseCache(tmp_path / "c"), retry=FAST, timeout_s=30) as c:
        ep = Endpoint("weak", s.url, "weak-test")
        c.chat(ep, BODY)
        key = request_key(ep.chat_url, {"model": ep.model, **BODY})
        path = ResponseCache(tmp_path / "c")._path(key)
        path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
        n = s.received
        reply = c.chat(ep, BODY)
        assert s.received == n + 1 and not reply.from_cache


def test_a_truncated_cache_entry_is_asked_again(tmp_path):
    with ChatServer() as s, ChatClient(ResponseCache(tmp_path / "c"), retry=FAST, timeout_s=30) as c:
        ep = Endpoint("weak", s.url, "weak-test")
        c.chat(ep, BODY)
        path = next((tmp_path / "c").glob("*/*.json"))
        path.write_bytes(path.read_bytes()[:40])
        n = s.received
        c.chat(ep, BODY)
        assert s.received == n + 1


# -- deadlines and ^C (F3-02, F3-03) ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["drip_body", "drip_headers"])
def test_a_dripping_server_is_a_deadline_not_a_hang(mode):
    with HostileServer(on("weak", mode), drip_s=0.05) as s, \
            ChatClient(ResponseCache(None), retry=RetryPolicy(attempts=1), timeout_s=0.5) as c:
        with pytest.raises(TransientFailure, match=r"no whole answer within 0.5 s"):
            c.chat(Endpoint("weak", s.url, "weak-test"), BODY)


def test_a_cancel_stops_a_call_in_flight():
    with HostileServer(on("weak", "hang")) as s, ChatClient(ResponseCache(None), retry=FAST, timeout_s=60) as c:
        errors: list[BaseException] = []

        def call() -> None:
            try:
                c.chat(Endpoint("weak", s.url, "weak-test"), BODY)
            except BaseException as exc:  # noqa: BLE001 - what the thread ended with is the assertion
                errors.append(exc)

        t = threading.Thread(target=call)
        t.start()
        while not s.received:
            t.join(0.01)
        c.cancel()
        t.join(30)  # an event, not a stopwatch: the thread ends because of the cancel, long before 60 s
        assert not t.is_alive() and isinstance(errors[0], Cancelled)


def test_the_worst_case_of_one_call_is_stated(tmp_path):
    with ChatServer() as s:
        code, out = cli(measure_args(s.url, tmp_path / "o"), {})
    assert code == 0 and "each call gives up after at most" in out and "connect to last byte" in out


@pytest.mark.slow
def test_measure_against_a_dripping_server_ends_in_a_located_error(tmp_path):
    """The issue's 'done when': `--timeout 2` against a dripping server ends in at most 10 s (2 attempts of 2 s: about 4 s),
    counted from the first request (the interpreter's start-up on a loaded machine is not the client's to bound)."""
    with HostileServer(on("weak", "drip_body")) as s:
        r = subprocess.run([SPECAGENT, *measure_args(s.url, tmp_path / "o", "--limit", "1")[:-2], "--timeout", "2"],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": SECRET})
        took = time.monotonic() - s.first_request_at
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr  # 0 verdicts: exit 3 (#36)
    skips = (tmp_path / "o" / "skips.jsonl").read_text()
    assert "no whole answer within 2 s" in skips and "weak endpoint" in skips
    assert took < 10, took


@pytest.mark.slow
def test_ctrl_c_during_a_call_exits_130_within_two_seconds_and_keeps_the_answers(tmp_path):
    out = tmp_path / "o"
    with HostileServer(lambda role, body: "hang" if role == "verify" else None) as s:
        proc = subprocess.Popen([SPECAGENT, *measure_args(s.url, out, "--timeout", "60")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "OPENAI_API_KEY": SECRET})
        deadline = time.monotonic() + 60
        while s.statuses["hang"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    # 2 s promised (a call in flight stops within a 0.25 s slice: test_a_cancel_stops_a_call_in_flight); the margin is for
    # the interpreter's exit on a loaded shared machine
    assert took < 6.0, took
    assert len(ResponseCache(out / "cache")) >= 1  # the Weak drafts answered before ^C are kept
    assert not leaks(SECRET, err, folder=tmp_path)


def test_endpoint_refuses_nan_in_the_extra_body_built_in_code():
    with pytest.raises(InputError, match="not JSON"):
        Endpoint("weak", "http://h/v1", "m", extra_body={"top_p": float("nan")})


@pytest.mark.parametrize("text,said", [('[{"type": "function", "function": {"name": "f", "parameters": {"x": NaN}}}]', "NaN is not JSON"),
                                       ("[" * 100_000, "nested too deep")])
def test_a_hostile_tools_file_is_one_line(tmp_path, text, said):
    tools = tmp_path / "tools.json"
    tools.write_text(text)
    with ChatServer() as s:
        code, out = cli(measure_args(s.url, tmp_path / "o", "--tools", str(tools)), {"OPENAI_API_KEY": SECRET})
        assert s.received == 0
    assert code == 2 and str(tools) in out and said in out and "Traceback" not in out, out


def test_a_request_json_cannot_carry_is_one_line_never_sent(tmp_path):
    with ChatServer() as s, ChatClient(ResponseCache(None), retry=FAST, timeout_s=30) as c:
        with pytest.raises(InputError, match="the request cannot be sent as JSON"):
            c.chat(Endpoint("weak", s.url, "weak-test"), {"messages": [{"role": "user", "content": "x"}], "top_p": float("nan")})
        assert s.received == 0


# -- round four: the lookup, the write, redirects (issue #35, items 1, 2 and 5) ----------------------------------------

class _NeverReads:
    """A loopback server that accepts connections and never reads a byte: a large request body fills the socket
    buffers and the client's send blocks, as it does against a stalled proxy."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.accepted = threading.Event()
        self.conns: list = []
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self) -> None:
        try:
            while True:
                c, _ = self.sock.accept()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                self.conns.append(c)
                self.accepted.set()
        except OSError:
            return

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


#: a request body larger than any loopback socket's buffers (send and receive together are a few MB at most)
BIG_BODY = {"messages": [{"role": "user", "content": "x" * (48 << 20)}]}


def _in_thread(fn):
    box: list[BaseException | object] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # noqa: BLE001 - what the thread ended with is the assertion
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_a_cancel_stops_a_large_body_a_server_never_reads():
    srv = _NeverReads()
    try:
        with ChatClient(ResponseCache(None), retry=FAST, timeout_s=120) as c:
            t, box = _in_thread(lambda: c.chat(Endpoint("weak", srv.url, "weak-test"), BIG_BODY))
            assert srv.accepted.wait(30)
            t.join(1.0)
            assert t.is_alive()  # the send is blocked: the server reads nothing
            c.cancel()
            t.join(30)  # an event, not a stopwatch: before the sliced write, the send held until the 120 s deadline
            assert not t.is_alive() and isinstance(box[0], Cancelled), box
    finally:
        srv.close()


def test_a_large_body_a_server_never_reads_is_bounded_by_the_deadline():
    srv = _NeverReads()
    try:
        with ChatClient(ResponseCache(None), retry=RetryPolicy(attempts=1), timeout_s=1.0) as c:
            with pytest.raises(TransientFailure, match=r"no whole answer within 1 s"):
                c.chat(Endpoint("weak", srv.url, "weak-test"), BIG_BODY)
    finally:
        srv.close()


@pytest.fixture
def slow_resolver(monkeypatch):
    """getaddrinfo that takes as long as the test lets it (an event, so no thread outlives the test by minutes)."""
    release, asked = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def lookup(host, *a, **kw):
        if host == "slow.example":
            asked.set()
            release.wait(60)
            host = "127.0.0.1"
        return real(host, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    yield asked
    release.set()


def test_a_slow_name_lookup_counts_against_the_deadline(slow_resolver):
    with ChatClient(ResponseCache(None), retry=RetryPolicy(attempts=1), timeout_s=0.5) as c:
        t, box = _in_thread(lambda: c.chat(Endpoint("weak", "http://slow.example:9/v1", "weak-test"), BODY))
        t.join(30)  # the resolver holds for 60 s: the call ends because the deadline covers the lookup
        assert not t.is_alive() and slow_resolver.is_set()
        assert isinstance(box[0], TransientFailure) and "no whole answer within 0.5 s" in str(box[0]), box


def test_a_cancel_stops_a_slow_name_lookup(slow_resolver):
    with ChatClient(ResponseCache(None), retry=FAST, timeout_s=120) as c:
        t, box = _in_thread(lambda: c.chat(Endpoint("weak", "http://slow.example:9/v1", "weak-test"), BODY))
        assert slow_resolver.wait(30)
        c.cancel()
        t.join(30)
        assert not t.is_alive() and isinstance(box[0], Cancelled), box


def test_a_redirect_loop_is_one_line_never_followed(tmp_path):
    with HostileServer(on("weak", "redirect_loop")) as s:
        code, out = cli(measure_args(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
        asked = s.received
    assert code == 2 and "HTTP 302" in out and "redirects are not followed" in out and "Traceback" not in out, out
    assert asked <= 2  # one per position in flight (--limit 2): a followed loop would ask 20 times
    assert not leaks(SECRET, out, folder=tmp_path)


@pytest.mark.parametrize("command", ["measure", "live"])
@pytest.mark.parametrize("env", [
    {"OPENAI_API_KEY": "sk-planted/5f1c+9e0b=7a2d4c8e9f3a6b1d0e7c"},  # URL-encoded and base64 echoes differ from the key
    {"MY_LLM": SECRET, "__flag": "--weak-api-key-env=MY_LLM"},  # a variable whose name says nothing of a key
])
def test_an_encoded_echo_of_the_key_is_masked(tmp_path, command, env):
    env = dict(env)
    flag = env.pop("__flag", None)
    secret = next(iter(env.values()))
    mode = "echo_auth_500_encoded" if flag is None else "echo_auth_500"
    with HostileServer(on("weak", mode)) as s:
        args = (measure_args if command == "measure" else live_args)(s.url, tmp_path / "o", *([flag] if flag else []))
        code, out = cli(args, env)
        assert s.auth_seen and all(a == f"Bearer {secret}" for a in s.auth_seen)
    assert "Traceback" not in out and not leaks(secret, out, folder=tmp_path), (out, leaks(secret, out, folder=tmp_path))


def test_a_proxy_password_is_a_secret_too(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", f"http://me:{SECRET}@proxy.example:3128")
    text = f"proxy refused me with password {SECRET} (b64 {base64.b64encode(SECRET.encode()).decode()})"
    assert not leaks(SECRET, clean(text)), clean(text)


# -- "Handled well", case by case (findings 2026-12-03): transports ----------------------------------------------------
# Each case of the findings file's 'Handled well' classes is a test here: a hostile server the harness used, the outcome
# the findings file calls right, and the planted-secret search over every byte the run printed or wrote.

#: (RawServer mode, what the skip says): the transport breaks, the client retries it and the position is a counted skip
BROKEN_TRANSPORTS = [
    ("never_answers", "no whole answer within 1 s"), ("reset_mid_body", "the connection broke mid-answer"),
    ("close_at_once", "the connection broke mid-answer"), ("chunked_garbage", "illegal chunk header"),
    ("non_http_banner", "Server disconnected without sending a response"),
    ("content_length_10gb", "declares 10,737,418,240 bytes"), ("header_1mb", "the connection broke mid-answer"),
    ("invalid_gzip", "gzip body is corrupt"), ("html", "not a chat completion"), ("empty_body", "not a chat completion"),
    ("empty_object", "not a chat completion (no choices in the response)"),
]


def error_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("mode,said", BROKEN_TRANSPORTS, ids=[m for m, _ in BROKEN_TRANSPORTS])
def test_a_broken_transport_is_retried_then_a_counted_transient_skip(tmp_path, mode, said):
    out = tmp_path / "o"
    timeout = ["--timeout", "1"] if mode == "never_answers" else []
    with RawServer(mode) as s:
        code, text = cli(measure_args(s.url, out, "--json", *timeout), {"OPENAI_API_KEY": SECRET})
        received, seen = s.received, list(s.auth_seen)
    assert code == 3 and "Traceback" not in text, text  # 0 verdicts: exit 3, the skips say why
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 0 and summary["skipped_by_reason"] == {"draft:transient": 2}, summary
    skips = [json.loads(line) for line in (out / "skips.jsonl").read_text().splitlines()]
    assert len(skips) == 2 and all(said in sk["detail"] and "(after 2 attempts)" in sk["detail"]
                                   and sk["detail"].startswith("weak endpoint http://127.0.0.1") for sk in skips), skips
    assert received == 4  # 2 positions x --retries 2: retried, never more
    assert mode == "close_at_once" or seen == [f"Bearer {SECRET}"] * 4  # the key did reach the server
    assert not leaks(SECRET, text, folder=tmp_path), leaks(SECRET, text, folder=tmp_path)


def test_a_broken_transport_under_live_ends_in_one_line(tmp_path):
    with RawServer("reset_mid_body") as s:
        code, out = cli(live_args(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
    assert code == 2 and "Traceback" not in out and error_lines(out) == [line for line in out.splitlines() if "error" in line]
    assert "no live task finished" in out and "the connection broke mid-answer" in out and "(after 2 attempts)" in out, out
    assert not leaks(SECRET, out, folder=tmp_path)


@pytest.mark.parametrize("status,hint", [
    (401, "(is $OPENAI_API_KEY set to a valid key?)"), (403, "(is $OPENAI_API_KEY allowed to use this model?)"),
    (404, "(is the URL the server's /v1 and the model name one it serves?)"), (204, "(no body) (not a chat completion, which comes with HTTP 200: is the URL the server's /v1"),
])
@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_refusal_stops_at_once_in_one_line_with_a_hint(tmp_path, status, hint, command):
    body = json.dumps({"error": {"message": "no entry"}}).encode()
    with RawServer(status_answer(status, body)) as s:
        code, out = cli((measure_args if command == "measure" else live_args)(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
        received = s.received
    assert code == 2 and "Traceback" not in out, out
    (line,) = error_lines(out)
    assert f"HTTP {status}: " in line and hint in line, line
    assert received <= 2  # not retried: one call per position in flight (--limit 2)
    assert not leaks(SECRET, out, folder=tmp_path)


def test_rich_markup_in_a_servers_error_prints_literally(tmp_path):
    markup = "[bold red]denied[/] [link=http://evil.example]click[/link] [/]"
    with RawServer(status_answer(401, json.dumps({"error": {"message": markup}}).encode())) as s:
        code, out = cli(measure_args(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
    (line,) = error_lines(out)
    assert code == 2 and markup in line and "Traceback" not in out, out


def test_a_5_mb_error_body_is_cut_to_160_characters(tmp_path):
    with RawServer(status_answer(401, json.dumps({"error": {"message": "denied " + "x" * (5 << 20)}}).encode())) as s:
        code, out = cli(measure_args(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
    (line,) = error_lines(out)
    quoted = line.split("HTTP 401: ", 1)[1].split(" (is $OPENAI_API_KEY", 1)[0]
    assert code == 2 and len(quoted) == 160 and quoted.startswith("denied xxx") and quoted.endswith("…"), (len(quoted), line[:300])
    assert len(out) < 4000  # the estimate lines and one error line: not 5 MB on the terminal


# -- Retry-After: a server's wait is honoured up to 120 s; one that is not a wait counts as none -----------------------

@pytest.mark.parametrize("value,waited", [
    ("1000000000", 120.0), ("inf", 120.0), ("Fri, 31 Dec 9999 23:59:59 GMT", 120.0),  # capped (MAX_RETRY_AFTER_S)
    ("-5", 0.0), ("NaN", 0.0), ("soon, maybe", 0.0), ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),  # no wait beyond the jitter
])
def test_retry_after_is_capped_at_120_s_and_nonsense_counts_as_no_wait(value, waited):
    waits: list[float] = []
    answer = status_answer(429, b'{"error": {"message": "slow down"}}', {"Retry-After": value})
    with RawServer(answer) as s, ChatClient(ResponseCache(None), retry=RetryPolicy(attempts=2, base_s=1e-3, cap_s=1e-3),
                                            timeout_s=5, sleep=waits.append) as c:
        with pytest.raises(TransientFailure, match=r"HTTP 429 .*\(after 2 attempts\)"):
            c.chat(Endpoint("weak", s.url, "weak-test"), BODY)
        assert s.received == 2
    assert len(waits) == 1 and (waits[0] == waited if waited else 0.0 <= waits[0] <= 1e-3), waits


def test_the_retry_after_cap_is_in_the_worst_case_a_run_states():
    from specagent.endpoints.client import MAX_RETRY_AFTER_S

    with ChatClient(ResponseCache(None), retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=0.02), timeout_s=5) as c:
        assert c.worst_case_s() == 3 * 5 + 2 * MAX_RETRY_AFTER_S == 255.0


# -- redirects: never followed, so the key never reaches the place a redirect names ------------------------------------

@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_redirect_is_not_followed_and_the_other_port_never_gets_the_key(tmp_path, status, command):
    with ChatServer() as other, HostileServer(lambda role, body: None) as spy:  # spy: an honest server that records keys
        target = (other if status in (301, 302) else spy).url + "/chat/completions"
        with RawServer(status_answer(status, b"", {"Location": target})) as s:
            code, out = cli((measure_args if command == "measure" else live_args)(s.url, tmp_path / "o"), {"OPENAI_API_KEY": SECRET})
            assert s.auth_seen and all(a == f"Bearer {SECRET}" for a in s.auth_seen)
        assert other.received == 0 and spy.received == 0 and spy.auth_seen == []
    (line,) = error_lines(out)
    assert code == 2 and f"HTTP {status}: " in line and "redirects are not followed" in line and target in line, line
    assert "Traceback" not in out and not leaks(SECRET, out, folder=tmp_path)


# -- the cache: keyed by what was asked of whom; a refusal remembered where it was said; the key in no entry -----------

def with_strong_url(args: list[str], url: str) -> list[str]:
    i = args.index("--strong-url")
    return [*args[:i + 1], url, *args[i + 2:]]


def test_the_cache_is_keyed_by_url_model_and_extra_body(tmp_path):
    with ChatServer() as a, ChatServer() as b, ChatClient(ResponseCache(tmp_path / "c"), retry=FAST, timeout_s=30) as c:
        c.chat(Endpoint("weak", a.url, "weak-test"), BODY)
        c.chat(Endpoint("weak", a.url, "weak-test"), BODY)
        assert (a.received, c.stats.cached) == (1, 1)  # the same request: from the cache
        c.chat(Endpoint("weak", b.url, "weak-test"), BODY)
        assert b.received == 1  # another port: asked again
        c.chat(Endpoint("weak", a.url, "strong-test"), BODY)
        assert a.received == 2  # another model (the scripted server serves both names)
        c.chat(Endpoint("weak", a.url, "weak-test", extra_body={"top_k": 1}), BODY)
        assert a.received == 3  # another extra body
        c.chat(Endpoint("weak", a.url, "weak-test", extra_body={"top_k": 1}), BODY)
        assert a.received == 3 and c.stats.cached == 2


def test_another_strong_extra_body_asks_the_strong_side_again_never_the_weak(tmp_path):
    out, asked = tmp_path / "o", []
    with ChatServer(faults=lambda key, attempt, body: asked.append(body["model"])) as s:  # append returns None: no fault
        assert cli(measure_args(s.url, out), {"OPENAI_API_KEY": SECRET})[0] == 0
        assert set(asked) == {"weak-test", "strong-test"}
        asked.clear()
        code, text = cli(measure_args(s.url, out, "--strong-extra-body", '{"top_k": 1}'), {"OPENAI_API_KEY": SECRET})
    assert code == 0 and asked and set(asked) == {"strong-test"}, (text, asked)


def test_a_response_format_refusal_is_remembered_per_url_and_model(tmp_path):
    from specagent.endpoints.client import ResponseFormatUnsupported
    from specagent.endpoints.shadow import _Format

    with ChatClient(ResponseCache(tmp_path / "c"), retry=FAST, timeout_s=5) as c:
        said = Endpoint("strong", "http://127.0.0.1:9/v1", "strong-test")
        _Format("auto", c, said).refused(ResponseFormatUnsupported("HTTP 400: response_format is not supported"))
        assert not _Format("auto", c, said).supported()  # remembered (in the cache folder: a rerun asks nothing)
        assert _Format("auto", c, Endpoint("strong", "http://127.0.0.1:10/v1", "strong-test")).supported()  # another URL
        assert _Format("auto", c, Endpoint("strong", "http://127.0.0.1:9/v1", "other-model")).supported()  # another model


def test_a_response_format_refusal_is_not_carried_to_another_endpoint(tmp_path):
    out = tmp_path / "o"
    with ChatServer(json_schema=False) as plain, ChatServer() as schema:
        assert cli(measure_args(plain.url, out), {"OPENAI_API_KEY": SECRET})[0] == 0
        assert json.loads((out / "summary.json").read_text())["response_format"] == "prompt"
        code, text = cli(with_strong_url(measure_args(plain.url, out), schema.url), {"OPENAI_API_KEY": SECRET})
        assert code == 0 and schema.received > 0, text
    assert json.loads((out / "summary.json").read_text())["response_format"] == "json_schema"


def test_a_run_whose_strong_side_was_down_resumes_without_resending_the_weak_drafts(tmp_path):
    out, asked, down = tmp_path / "o", [], [True]

    def faults(key, attempt, body):
        asked.append(body["model"])
        return "500" if down[0] and body["model"] == "strong-test" else None

    with ChatServer(faults=faults) as s:
        code, text = cli(measure_args(s.url, out, "--limit", "3"), {"OPENAI_API_KEY": SECRET})
        assert code == 3 and json.loads((out / "summary.json").read_text())["skipped_by_reason"] == {"verify:transient": 3}, text
        assert "weak-test" in asked
        asked.clear()
        down[0] = False
        code, text = cli(measure_args(s.url, out, "--limit", "3"), {"OPENAI_API_KEY": SECRET})
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0 and summary["records"] == 3 and summary["skipped"] == 0, text
    assert asked and "weak-test" not in asked  # the Weak drafts came from the cache
    assert not leaks(SECRET, text, folder=tmp_path)


@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_normal_run_writes_the_key_into_no_file(tmp_path, command):
    out = tmp_path / "o"
    with ChatServer(api_key=SECRET) as s:  # the server refuses any other key: the key was sent
        code, text = cli((measure_args if command == "measure" else live_args)(s.url, out), {"OPENAI_API_KEY": SECRET})
    assert code == 0, text
    written = {p.relative_to(out).parts[0] for p in out.rglob("*") if p.is_file()}
    expected = {"cache", "calls.jsonl", "run.json", "summary.json", "skips.jsonl"} if command == "measure" else \
        {"cache", "comparison.json", "protocol_log.jsonl", "verdicts.jsonl"}
    assert expected - {"skips.jsonl"} <= written, written
    assert not leaks(SECRET, text, folder=tmp_path), leaks(SECRET, text, folder=tmp_path)


# -- flags: each refused in one line naming the flag, before any request -----------------------------------------------

BAD_ENDPOINT_FLAGS = [
    (["--weak-api-key-env", "bad-name"], "--weak-api-key-env: expected an environment variable name"),
    (["--strong-api-key-env", "1KEY"], "--strong-api-key-env: expected an environment variable name"),
    (["--strong-api-key-env", ""], "--strong-api-key-env: expected an environment variable name"),
    (["--weak-url", "file:///etc/passwd"], "--weak-url: expected http(s)://HOST[:PORT]/v1"),
    (["--weak-url", "http://127.0.0.1:0/v1"], "--weak-url: expected a port in [1, 65535]"),
    (["--strong-url", "http://127.0.0.1:99999/v1"], "--strong-url: expected a port in [1, 65535]"),
    (["--weak-extra-body", '{"model": "x"}'], "--weak-extra-body: model are set by the measurement"),
    (["--strong-extra-body", '{"tools": []}'], "--strong-extra-body: tools are set by the measurement"),
    (["--weak-extra-body", "[1]"], "--weak-extra-body: expected a JSON object, got a JSON list"),
    (["--weak-extra-body", '"s"'], "--weak-extra-body: expected a JSON object, got a JSON str"),
    (["--strong-extra-body", "42"], "--strong-extra-body: expected a JSON object, got a JSON int"),
    (["--timeout", "inf"], "--timeout: "), (["--timeout", "nan"], "--timeout: "), (["--timeout", "0"], "--timeout: "),
]
PRICE_FLAGS = [  # acceptance measure only (live prices nothing)
    (["--weak-usd-per-mtok", "nan,1"], "--weak-usd-per-mtok: prices must be finite and >= 0"),
    (["--weak-usd-per-mtok", "inf,1"], "--weak-usd-per-mtok: prices must be finite and >= 0"),
    (["--strong-usd-per-mtok", "1,2,3"], "--strong-usd-per-mtok: expected IN,OUT in USD per million tokens"),
]


def _replace_flag(args: list[str], flag: str, value: str) -> list[str]:
    if flag in args:
        i = args.index(flag)
        return [*args[:i + 1], value, *args[i + 2:]]
    return [*args, flag, value]


@pytest.mark.parametrize("command,extra,said", [(c, e, s) for c in ("measure", "live") for e, s in BAD_ENDPOINT_FLAGS]
                         + [("measure", e, s) for e, s in PRICE_FLAGS], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_endpoint_flag_is_one_line_before_any_request(tmp_path, command, extra, said):
    with ChatServer() as s:
        args = _replace_flag((measure_args if command == "measure" else live_args)(s.url, tmp_path / "o"), *extra)
        code, out = cli(args, {"OPENAI_API_KEY": SECRET})
        assert s.received == 0
    assert code == 2 and "Traceback" not in out, out
    (line,) = error_lines(out)
    assert said in line, line
    assert not (tmp_path / "o").exists() and not leaks(SECRET, out)


# -- live --weak-url: hostile answers are counted, never a traceback or a guess ----------------------------------------

def once(role: str, mode: str):
    """Misbehave as `mode` on the first request of `role` only (a model that does it once, then recovers)."""
    seen: list[int] = []

    def pick(r: str, body: dict) -> str | None:
        if r != role or seen:
            return None
        seen.append(1)
        return mode
    return pick


def live_report(out: str) -> dict:
    return json.loads(out[out.index("{"):])


@pytest.mark.parametrize("verdict", [
    json.dumps({"accepted_prefix": 99, "reason": "r", "replacement": None}),  # out of range
    json.dumps({"accepted_prefix": -1, "reason": "r", "replacement": None}),
    json.dumps({"accepted_prefix": "1", "reason": "r", "replacement": None}),  # a string
])
def test_live_counts_a_verdict_out_of_range_or_a_string_as_unparseable(tmp_path, verdict):
    with HostileServer(on("verify", "verdict"), verdict=verdict) as s:
        code, out = cli(live_args(s.url, tmp_path / "o", "--json", "--trajectories", "2"), {"OPENAI_API_KEY": SECRET})
    assert code == 0 and "Traceback" not in out, out
    counts = live_report(out)["counts"]
    assert counts["reviews"] >= 1 and counts["unparseable_verdicts"] == counts["reviews"] and counts["accepted"] == 0, counts
    assert not leaks(SECRET, out, folder=tmp_path)


@pytest.mark.parametrize("pick", [on("weak", "reply_10mb"), once("weak", "unknown_tool_1mb"), once("weak", "args_not_json")],
                         ids=["reply-10MB", "unknown-tool-1MB-arguments", "arguments-not-JSON"])
def test_live_handles_a_huge_reply_an_unknown_tool_and_arguments_that_are_not_json(tmp_path, pick):
    with HostileServer(pick) as s:
        code, out = cli(live_args(s.url, tmp_path / "o", "--json"), {"OPENAI_API_KEY": SECRET})
        assert s.statuses  # the hostile answer was sent
    assert code == 0 and "Traceback" not in out, out
    report = live_report(out)
    assert report["skipped"] == [] and (tmp_path / "o" / "protocol_log.jsonl").exists(), report
    assert not leaks(SECRET, out, folder=tmp_path)


def test_live_against_a_server_that_never_answers_ends_in_one_line(tmp_path):
    with RawServer("never_answers") as s:
        code, out = cli(live_args(s.url, tmp_path / "o", "--timeout", "1"), {"OPENAI_API_KEY": SECRET})
    (line,) = error_lines(out)
    assert code == 2 and "no live task finished" in line and "no whole answer within 1 s" in line and "Traceback" not in out, out
    assert not leaks(SECRET, out, folder=tmp_path)


# -- hostile verdicts: retried once, then counted unparseable, never guessed --------------------------------------------

def _v(prefix: object = 0, **kw: object) -> str:
    return json.dumps({"accepted_prefix": prefix, "reason": "r", "replacement": None, **kw})


REP = {"name": "get_user_details", "arguments": {"user_id": "ivan_rossi_8555"}}
HOSTILE_VERDICTS = {
    "prefix-over-n": _v(99), "prefix-minus-1": _v(-1), "prefix-string": _v("1"), "prefix-float": _v(1.0), "prefix-true": _v(True),
    "prefix-10e100": _v(10**100), "prefix-NaN": '{"accepted_prefix": NaN, "reason": "r", "replacement": null}',
    "no-reason": json.dumps({"accepted_prefix": 0, "replacement": None}),
    "replacement-although-all-kept": _v("<n>", replacement=REP).replace('"<n>"', "<n>"),
    "arguments-not-an-object": _v(0, replacement={"name": "get_user_details", "arguments": "ivan_rossi_8555"}),
    "an-array": "[0, \"r\", null]", "prose": "The drafted steps look fine to me.", "ansi": "\x1b[31mall good\x1b[0m\x1b]0;owned\x07",
}
ACCEPTED_VERDICTS = {
    "code-fence": f"```json\n{_v('<n>')}\n```".replace('"<n>"', "<n>"), "reason-5MB": _v(0, reason="x" * (5 << 20)),
    "extra-field": _v(0, confidence=0.9),  # the schema says additionalProperties: false; an extra field is harmless
}


@pytest.mark.parametrize("name", HOSTILE_VERDICTS)
def test_a_hostile_verdict_is_retried_once_then_counted_unparseable(tmp_path, name):
    out = tmp_path / "o"
    with HostileServer(on("verify", "verdict"), verdict=HOSTILE_VERDICTS[name]) as s:
        code, text = cli(measure_args(s.url, out), {"OPENAI_API_KEY": SECRET})
        asked = s.statuses["verdict"]
    assert code == 3 and "Traceback" not in text, text  # 0 verdicts: exit 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 0 and summary["skipped_by_reason"] == {"verify:unparseable": 2}, summary
    assert asked == 4  # each of the 2 positions: the verdict and one retry
    skips = (out / "skips.jsonl").read_bytes()
    assert b"after one retry" in skips and b"\x1b" not in skips and b"\x07" not in skips
    assert not leaks(SECRET, text, folder=tmp_path)


@pytest.mark.parametrize("name", ACCEPTED_VERDICTS)
def test_a_fenced_verdict_a_5_mb_reason_and_an_extra_field_are_read(tmp_path, name):
    out = tmp_path / "o"
    with HostileServer(on("verify", "verdict"), verdict=ACCEPTED_VERDICTS[name]) as s:
        code, text = cli(measure_args(s.url, out), {"OPENAI_API_KEY": SECRET})
    assert code == 0 and "Traceback" not in text, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 2 and summary["skipped"] == 0, summary
    assert not leaks(SECRET, text, folder=tmp_path)
