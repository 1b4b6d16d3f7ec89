"""Hostile servers and inputs for `specagent bench serve` (issue #35, item 3 and round four): a streamed answer is
bounded by the same whole-answer deadline as every other endpoint call (`endpoints/transport.py`), a malformed event
fails its request and never the run, and no key or URL credential reaches a file or the console.

Hang-prone cases run the command in a thread joined with a generous bound: the assertion is that it ended (an event),
not how fast."""

from __future__ import annotations

import json
import math
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402
from hostile_server import HostileServer, on  # noqa: E402
from test_fuzz_endpoints import SECRET, leaks  # noqa: E402

from specagent.cli.app import app  # noqa: E402
from specagent.endpoints import bench  # noqa: E402
from specagent.endpoints.client import Endpoint  # noqa: E402


def args(url: str, *extra: str) -> list[str]:
    return ["bench", "serve", "--base-url", url, "--model", "weak-test", "--num-prompts", "2", "--input-len", "20",
            "--output-len", "4", "--warmup", "0", *extra]


def run_cli(argv: list[str], env: dict[str, str] | None = None, bound_s: float = 90) -> tuple[int, str]:
    """The command's exit code and output; fails (instead of hanging the suite) when it has not ended after `bound_s`."""
    box: list = []
    t = threading.Thread(target=lambda: box.append(CliRunner().invoke(app, argv, env=env or {})), daemon=True)
    t.start()
    t.join(bound_s)
    assert not t.is_alive(), f"bench serve still running after {bound_s} s: {argv}"
    r = box[0]
    return r.exit_code, r.output + (repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else "")


# -- deadlines (item 3) -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sse_drip", "sse_endless", "drip_headers", "drip_body", "hang"])
def test_a_stream_that_never_ends_is_a_deadline_not_a_hang(tmp_path, mode):
    """A server that drips events (slowloris on SSE), streams forever, drips its headers or never answers: each request
    fails at --timeout (1 s) as a counted failure; the run ends with exit 3 (nothing completed). (--output-len 10^6:
    with 4, the fifth content chunk already fails the request, as more chunks than max_tokens.)"""
    with HostileServer(on("weak", mode), drip_s=0.05) as s:
        code, out = run_cli(args(s.url, "--timeout", "1", "--requests-out", str(tmp_path / "r.jsonl"), "--output-len", "1000000"))
    assert code == 3 and "Traceback" not in out and "no request completed" in out, out
    errors = [json.loads(x)["error"] for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(errors) == 2 and all(e.startswith(("no whole answer within 1 s", "the stream broke")) for e in errors), errors


def test_a_server_whose_facts_drip_is_bounded(tmp_path):
    """/v1/models and /version are asked before the run with at most 10 s each: a server that drips their headers holds
    each for --timeout (1 s here), then the run goes on without them."""
    with HostileServer(lambda role, body: None, get_mode="drip_headers", drip_s=0.05) as s:
        code, out = run_cli(args(s.url, "--timeout", "1"))
    assert code == 0 and "Successful requests:                     2" in out, out


def test_ctrl_c_leaves_no_request_running_against_a_stalled_server():
    """^C during a level whose requests hang: every request thread ends (the transport cancels them), so the
    process can exit at once instead of waiting out --timeout (120 s here)."""
    with HostileServer(on("weak", "hang")) as s:
        ep = Endpoint("base", s.url, "weak-test")
        reqs = bench.random_requests(2, 20, 4, 0)
        real = bench.ThreadPoolExecutor.submit
        calls = {"n": 0}

        def submit(self, fn, *a, **kw):
            calls["n"] += 1
            f = real(self, fn, *a, **kw)
            if calls["n"] == 2:
                while not s.received:  # the first request is in flight at the server
                    threading.Event().wait(0.01)
                raise KeyboardInterrupt
            return f

        bench.ThreadPoolExecutor.submit = submit
        try:
            with pytest.raises(bench.Interrupted):
                bench.run_level(ep, reqs, max_concurrency=2, request_rate=math.inf, burstiness=1.0, seed=0, timeout_s=120,
                                ignore_eos=True, temperature=0.0, warmup=0)
        finally:
            bench.ThreadPoolExecutor.submit = real
        for t in [t for t in threading.enumerate() if t.name.startswith("bench")]:
            t.join(30)  # an event: before the cancel, these held until the 120 s deadline
            assert not t.is_alive(), t.name


# -- malformed events (round four) ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sse_deep_json", "sse_not_object", "sse_bad_choices", "sse_usage_huge", "sse_usage_negative"])
def test_a_malformed_event_fails_its_request_never_the_run(tmp_path, mode):
    """100,000-deep JSON, an event that is a number, choices that are a number, usage of 10^30 or -5 tokens: each is
    a counted failure ('the stream broke'), never a traceback nor a figure built on an impossible count."""
    with HostileServer(on("weak", mode)) as s:
        code, out = run_cli(args(s.url, "--timeout", "10", "--json"))
    assert code == 3 and "Traceback" not in out and "no request completed" in out, out
    assert "1e+30" not in out and "-5" not in out.split("no request completed")[0].split('"failures"')[0]


# -- secrets (round four) ---------------------------------------------------------------------------------------------

def test_a_url_with_credentials_never_reaches_the_csv_the_json_or_the_console(tmp_path):
    with ChatServer() as s:
        url = s.url.replace("http://", f"http://me:{SECRET}@") + f"?api_key={SECRET}"
        code, out = run_cli(args(url, "--csv", str(tmp_path / "m.csv"), "--requests-out", str(tmp_path / "r.jsonl"),
                                 "--json", "--gpu", "h100_sxm"), {"OPENAI_API_KEY": SECRET})
    assert code == 0 and (tmp_path / "m.csv").exists(), out
    assert not leaks(SECRET, out, folder=tmp_path), leaks(SECRET, out, folder=tmp_path)
    assert "me:***@" in (tmp_path / "m.csv").read_text() or "***@" in (tmp_path / "m.csv").read_text()


#: a key whose URL-encoded and JSON forms differ from it (a '/' a '+' and a '=')
ODD_SECRET = "sk-planted/5f1c+9e0b=7a2d4c8e9f3a6b1d0e7c"


@pytest.mark.parametrize("mode", ["echo_auth_401", "echo_auth_500", "echo_auth_500_encoded"])
@pytest.mark.parametrize("secret", [SECRET, ODD_SECRET])
def test_a_server_that_echoes_the_key_never_gets_it_written(tmp_path, mode, secret):
    """Raw, URL-encoded, base64 and JSON-escaped echoes of the key, in the error line, the notes and --requests-out."""
    with HostileServer(on("weak", mode)) as s:
        code, out = run_cli(args(s.url, "--requests-out", str(tmp_path / "r.jsonl")), {"OPENAI_API_KEY": secret})
        assert s.auth_seen and all(a == f"Bearer {secret}" for a in s.auth_seen)
    assert code in (2, 3) and "Traceback" not in out, out
    assert not leaks(secret, out, folder=tmp_path), leaks(secret, out, folder=tmp_path)


@pytest.mark.parametrize("key", [SECRET + "\r\n", "\u2018" + SECRET + "\u2019", " " + SECRET])
def test_a_key_that_cannot_be_a_header_is_refused_before_any_request(key):
    with ChatServer() as s:
        code, out = run_cli(args(s.url), {"OPENAI_API_KEY": key})
        sent = s.received
    assert code == 2 and "$OPENAI_API_KEY" in out and "not a valid HTTP header value" in out and sent == 0, out
    assert not leaks(SECRET, out)
