"""The endpoint client and `acceptance measure`, over real sockets against the loopback chat server (tests/chat_server.py).

What must hold: transient failures are retried (429 honouring Retry-After, 500, timeouts, truncated
bodies) and the rest fail as one line; every answer is cached by content so a rerun — also after a
SIGKILL halfway — asks nothing twice and writes byte-identical outputs; malformed verdicts are
retried once and then counted as unparseable, never turned into a record; the verdict logs follow
docs/verdict-log.md and `acceptance fit` turns them into a scenario `predict` takes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer, body_key, some_faults  # noqa: E402

from specagent.cli.app import app  # noqa: E402
from specagent.endpoints.cache import ResponseCache, request_key  # noqa: E402
from specagent.endpoints.client import (  # noqa: E402
    ChatClient, Endpoint, EndpointError, ResponseFormatUnsupported, RetryPolicy, TransientFailure, parse_reply, retry_after_s,
)
from specagent.endpoints.verdict import parse_verdict, replacement_valid  # noqa: E402
from specagent.traces.verdict_log import read_verdict_log  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "traces" / "data" / "tau2_airline_sample.json"
SPECAGENT = str(Path(sys.executable).with_name("specagent"))
FAST = RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)
BODY = {"messages": [{"role": "user", "content": "hello, my id is ivan_rossi_8555"}], "temperature": 0.0}


def settled(count, seconds: float = 5.0):
    """`count()` once the server's handler threads have finished counting (they count an answer after writing it)."""
    deadline, last = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        now = count()
        if now == last:
            return now
        last = now
        time.sleep(0.05)
    return count()


def client(tmp_path: Path, **kw) -> ChatClient:
    return ChatClient(ResponseCache(tmp_path / "cache"), timeout_s=kw.pop("timeout_s", 20.0), retry=kw.pop("retry", FAST), **kw)


def weak(url: str, **kw) -> Endpoint:
    return Endpoint("weak", url, kw.pop("model", "weak-test"), **kw)


# -- the client -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fault, reason", [("429", "http_429"), ("500", "http_500"), ("timeout", "timeout"), ("truncate", "broken_body")])
def test_a_transient_failure_is_retried_and_then_answered(tmp_path, fault, reason):
    with ChatServer(faults=lambda key, attempt, body: fault if attempt == 0 else None, timeout_sleep_s=3.0) as s, \
            client(tmp_path, timeout_s=1.0 if fault == "timeout" else 20.0) as c:
        r = c.chat(weak(s.url), BODY)
        assert r.tool_calls[0].name == "get_user_details" and r.tool_calls[0].arguments == {"user_id": "ivan_rossi_8555"}
        assert dict(c.stats.retries) == {reason: 1} and c.stats.sent == 2 and c.stats.answered == 1
        assert settled(lambda: sum(s.answered.values())) == 1


def test_retry_after_is_honoured_and_the_jitter_is_seeded(tmp_path):
    waits = []
    with ChatServer(faults=lambda key, attempt, body: "429" if attempt < 2 else None) as s, \
            client(tmp_path, sleep=waits.append, retry=RetryPolicy(attempts=4, base_s=0.001, cap_s=0.002)) as c:
        c.chat(weak(s.url), BODY)
    assert len(waits) == 2 and all(w >= 0.05 for w in waits)  # the server's Retry-After: 0.05, above the jitter ceiling
    p = RetryPolicy(base_s=1.0, cap_s=8.0)
    draws = [p.delay(7, "k", a, None) for a in range(5)]
    assert draws == [p.delay(7, "k", a, None) for a in range(5)]  # same seed, same waits
    assert all(0 <= d <= min(8.0, 2 ** a) for a, d in enumerate(draws)) and draws != [p.delay(8, "k", a, None) for a in range(5)]
    assert retry_after_s("3") == 3.0 and retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_s("soon") is None


def test_a_server_that_keeps_failing_ends_in_a_transient_failure(tmp_path):
    with ChatServer(faults=lambda key, attempt, body: "500") as s, client(tmp_path) as c:
        with pytest.raises(TransientFailure, match=r"HTTP 500 .*after 4 attempts"):
            c.chat(weak(s.url), BODY)
        assert s.attempts[body_key({"model": "weak-test", **BODY})] == 4 and len(c.cache) == 0


@pytest.mark.parametrize("model, key_env, message", [
    ("no-such-model", None, r"HTTP 404: model 'no-such-model' does not exist \(is the URL the server's /v1"),
    ("weak-test", "SPECAGENT_TEST_KEY", r"HTTP 401: invalid api key \(is \$SPECAGENT_TEST_KEY set to a valid key\?\)"),
])
def test_a_refusal_fails_at_once_as_one_line(tmp_path, monkeypatch, model, key_env, message):
    monkeypatch.delenv("SPECAGENT_TEST_KEY", raising=False)
    with ChatServer(api_key="secret" if key_env else None) as s, client(tmp_path) as c:
        ep = weak(s.url, model=model, **({"api_key_env": key_env} if key_env else {}))
        with pytest.raises(EndpointError, match=message) as e:
            c.chat(ep, BODY)
        assert "\n" not in str(e.value) and s.received == 1
        if key_env:
            monkeypatch.setenv(key_env, "secret")
            assert c.chat(ep, BODY).tool_calls


def test_an_unreachable_server_is_one_line(tmp_path):
    with ChatServer() as s:
        url = s.url
    with client(tmp_path) as c, pytest.raises(EndpointError, match=r"--weak-url http://127\.0\.0\.1:\d+/v1: cannot connect"):
        c.chat(weak(url), BODY)


def test_a_refused_response_format_is_told_apart(tmp_path):
    with ChatServer(json_schema=False) as s, client(tmp_path) as c:
        with pytest.raises(ResponseFormatUnsupported):
            c.chat(weak(s.url), {**BODY, "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": {}}}})


def test_an_answer_is_cached_by_content_and_never_asked_twice(tmp_path):
    with ChatServer() as s:
        with client(tmp_path) as c:
            a = c.chat(weak(s.url), BODY)
        with client(tmp_path) as c:  # a new client on the same folder: a rerun
            b = c.chat(weak(s.url), dict(reversed(list(BODY.items()))))  # same content, other key order
            assert c.stats.sent == 0 and c.stats.cached == 1
        assert s.received == 1 and (a.usage, a.latency_s, a.tool_calls) == (b.usage, b.latency_s, b.tool_calls) and b.from_cache
    assert request_key("u", {"a": 1, "b": 2}) == request_key("u", {"b": 2, "a": 1}) != request_key("u", {"a": 1, "b": 3})


@pytest.mark.parametrize("message, usage, reasoning, source", [
    ({"content": "ok"}, {"prompt_tokens": 10, "completion_tokens": 50, "completion_tokens_details": {"reasoning_tokens": 40}}, 40, "usage"),
    ({"content": "ok", "reasoning_content": "one two three four"}, {"prompt_tokens": 10, "completion_tokens": 50}, 4, "estimated"),
    ({"content": "ok", "reasoning": "one two"}, {"prompt_tokens": 10, "completion_tokens": 50, "completion_tokens_details": {"reasoning_tokens": 0}}, 2, "estimated"),
    ({"content": "<think>a b c</think>ok"}, {"prompt_tokens": 10, "completion_tokens": 5}, 3, "estimated"),
    ({"content": "ok"}, {"prompt_tokens": 10, "completion_tokens": 5}, 0, "none"),
])
def test_reasoning_tokens_in_both_conventions(message, usage, reasoning, source):
    r = parse_reply({"choices": [{"message": message}], "usage": usage}, 0.1, False)
    assert (r.usage.reasoning_tokens, r.usage.reasoning_source, r.content) == (reasoning, source, "ok")
    assert r.usage.visible_tokens == usage["completion_tokens"] - reasoning


@pytest.mark.parametrize("raw", [{}, {"choices": []}, {"choices": [{"message": {"content": "x"}}]},
                                 {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1}}])
def test_a_body_that_is_not_a_completion_is_refused(raw):
    with pytest.raises(ValueError):
        parse_reply(raw, 0.0, False)


def test_endpoint_flags_are_checked():
    for kw, flag in [({"url": "localhost:8000"}, "--weak-url"), ({"model": " "}, "--weak-model"), ({"api_key_env": "A-B"}, "--weak-api-key-env")]:
        with pytest.raises(ValueError, match=flag):
            Endpoint("weak", kw.get("url", "http://h/v1"), kw.get("model", "m"), kw.get("api_key_env", "OPENAI_API_KEY"))
    assert Endpoint("weak", "http://h:1/v1/", "m").chat_url == "http://h:1/v1/chat/completions"


# -- the verdict ----------------------------------------------------------------------------------------------------

@given(n=st.integers(1, 8), data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_well_formed_verdict_reads_back_exactly(n, data):
    a = data.draw(st.integers(0, n))
    rep = None if a == n else data.draw(st.none() | st.fixed_dictionaries({"name": st.sampled_from(["x", "get_user_details"]),
                                                                            "arguments": st.dictionaries(st.text(max_size=3), st.integers())}))
    text = json.dumps({"accepted_prefix": a, "reason": "r", "replacement": rep})
    v = parse_verdict(data.draw(st.sampled_from([text, f"```json\n{text}\n```"])), n)
    assert (v.accepted_prefix, v.replacement) == (a, rep)


@given(n=st.integers(1, 8), bad=st.integers())
def test_an_out_of_range_prefix_is_never_clipped(n, bad):
    if 0 <= bad <= n:
        return
    with pytest.raises(ValueError, match="accepted_prefix"):
        parse_verdict(json.dumps({"accepted_prefix": bad, "reason": "", "replacement": None}), n)


@pytest.mark.parametrize("text, why", [
    ("looks fine", "not JSON"), ("[1]", "not an object"), ('{"accepted_prefix": 1}', "lacks reason, replacement"),
    ('{"accepted_prefix": true, "reason": "", "replacement": null}', "accepted_prefix"),
    ('{"accepted_prefix": 2, "reason": "", "replacement": {"name": "x", "arguments": {}}}', "although all 2"),
    ('{"accepted_prefix": 0, "reason": "", "replacement": {"name": "x"}}', "replacement must be"),
])
def test_a_malformed_verdict_is_refused(text, why):
    with pytest.raises(ValueError, match=why):
        parse_verdict(text, 2)


def test_a_replacement_is_valid_only_against_the_tools_schema():
    tools = [{"type": "function", "function": {"name": "get_user_details", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]
    assert replacement_valid({"name": "get_user_details", "arguments": {"user_id": "a"}}, tools)
    for bad in [{"name": "nope", "arguments": {}}, {"name": "get_user_details", "arguments": {}},
                {"name": "get_user_details", "arguments": {"user_id": 3}},
                {"name": "get_user_details", "arguments": {"user_id": "a", "extra": 1}}]:
        assert not replacement_valid(bad, tools)


# -- acceptance measure ---------------------------------------------------------------------------------------------

def measure_args(url: str, out: Path, *extra: str, timeout: str = "20") -> list[str]:
    """The command line; a generous timeout unless a test injects timeouts (a slow answer to a busy machine is no fault)."""
    return ["acceptance", "measure", str(FIXTURE), "--weak-url", url, "--weak-model", "weak-test", "--strong-url", url,
            "--strong-model", "strong-test", "-o", str(out), "--yes", "--timeout", timeout, "--backoff", "0.01", *extra]


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "tau2_airline_sample.verdicts.jsonl").read_text().splitlines()]


def check_verdict_log(recs: list[dict], path: Path | None = None) -> None:
    """The shared reader (traces/verdict_log.py) takes the file; and docs/verdict-log.md's invariants, stated again."""
    if path is not None:
        assert [r.model_dump(by_alias=True, exclude_unset=True) for r in read_verdict_log(path)] == recs
    for r in recs:
        assert r["schema"] == "specagent.verdict/1" and r["source"] == "acceptance measure"
        n, a = len(r["drafted"]), r["accepted_prefix"]
        assert n >= 1 and 0 <= a <= n and r["ended_by"] in ("write", "reply", "k", "unmatched_read", "end")
        assert all(s["kind"] in ("read", "write", "generic", "think", "reply") and s["tokens"] >= 0 for s in r["drafted"])
        assert all(s["kind"] != "write" for s in r["drafted"][:-1])
        assert (r["drafted"][-1]["kind"] == "write") == (r["ended_by"] == "write")
        if a < n:
            assert r["replacement_offered"] or r["repair_tokens"] is not None
            assert (r["replacement_valid"] is True) == (r["repair_tokens"] is None)
        else:
            assert (r["replacement_offered"], r["replacement_valid"], r["repair_tokens"]) == (False, None, None)
        assert (r["repair_tokens"] is None) == (r["repair_reasoning_tokens"] is None)
        assert r["verdict_tokens"] >= 0 and r["verify_reasoning_tokens"] >= 0 and r["thinking"] == (r["verify_reasoning_tokens"] > 0)


def test_measure_end_to_end_writes_verdict_logs_that_fit_and_predict_take(tmp_path):
    out = tmp_path / "m"
    with ChatServer(faults=some_faults, timeout_sleep_s=2.5) as s:
        r = CliRunner().invoke(app, measure_args(s.url, out, timeout="1"))
        assert r.exit_code == 0, r.output
        assert sum(s.statuses.values()) > 0  # failures were injected and retried through
    recs = records(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["positions"] == 19 and summary["records"] == len(recs) == 19 and summary["skipped"] == 0
    check_verdict_log(recs, out / "tau2_airline_sample.verdicts.jsonl")
    # the scripted policy: reads of the recorded user and of unrecorded reservations, writes, replies; every verdict kind
    assert set(summary["ended_by"]) == {"write", "reply", "unmatched_read"}
    assert 0 < summary["accepted_steps"] < summary["drafted_steps"] and summary["repair_turns"] > 0 and summary["replacements_valid"] > 0
    assert summary["accepted_steps"] == sum(r["accepted_prefix"] for r in recs)
    # positions are step indices of the imported trajectory, and what was drafted there is a matched or recorded call
    first = recs[0]
    assert (first["task"], first["position"], first["drafted"][0]) == (
        "airline-32/3@2", 2, {"kind": "read", "name": "get_user_details", "tokens": first["drafted"][0]["tokens"],
                            "reference_tokens": 351, "exact_match": True})
    assert summary["usage"]["strong_verify"]["reasoning_tokens"] == sum(r["verify_reasoning_tokens"] for r in recs)
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == sum(u["calls"] for u in summary["usage"].values())
    assert sum(c["prompt_tokens"] for c in calls if c["call"] == "weak_draft") == summary["usage"]["weak_draft"]["prompt_tokens"]
    assert all(c["latency_s"] > 0 and c["reasoning_source"] in ("usage", "none") for c in calls)
    fitted = tmp_path / "acceptance.toml"
    r = CliRunner().invoke(app, ["acceptance", "fit", str(out / "tau2_airline_sample.verdicts.jsonl"), "-o", str(fitted), "--json"])
    assert r.exit_code == 0, r.output
    text = fitted.read_text()
    assert "19 verdict records" in text and "thinking = true" in text
    r = CliRunner().invoke(app, ["predict", "--acceptance", str(fitted), "--json"])
    assert r.exit_code == 0, r.output
    default = CliRunner().invoke(app, ["predict", "--json"])
    assert default.exit_code == 0 and json.loads(r.output) != json.loads(default.output)  # the measured verdicts move the answer


def test_a_rerun_asks_nothing_and_writes_the_same_bytes(tmp_path):
    out = tmp_path / "m"
    with ChatServer() as s:
        assert CliRunner().invoke(app, measure_args(s.url, out, "--limit", "6", "--seed", "3")).exit_code == 0
        first = {p.name: p.read_bytes() for p in out.glob("*.json*") if p.name != "run.json"}
        n = s.received
        r = CliRunner().invoke(app, measure_args(s.url, out, "--limit", "6", "--seed", "3"))
        assert r.exit_code == 0 and s.received == n
    assert {p.name: p.read_bytes() for p in out.glob("*.json*") if p.name != "run.json"} == first
    assert json.loads((out / "run.json").read_text())["client"]["requests_sent"] == 0
    assert len(records(out)) == 6


def test_killed_halfway_and_rerun_it_asks_nothing_twice_and_loses_nothing(tmp_path):
    out, ref = tmp_path / "killed", tmp_path / "whole"
    cmd = [SPECAGENT, *measure_args("URL", out, "--concurrency", "2")]
    with ChatServer() as s:
        s.hold_after = 25
        proc = subprocess.Popen([s.url if a == "URL" else a for a in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (sum(s.answered.values()) >= 25 and len(ResponseCache(out / "cache")) >= 25):
                assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled before the kill"
                time.sleep(0.02)
            time.sleep(0.1)  # the next requests are now held unanswered
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        done = settled(lambda: sum(s.answered.values()))  # 25, or one more answered by a request in flight at the hold
        assert not (out / "summary.json").exists() and len(ResponseCache(out / "cache")) == done >= 25
        s.hold_after = None
        s.release.set()
        r = subprocess.run([s.url if a == "URL" else a for a in cmd], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert max(s.answered.values()) == 1  # no finished request was asked again
        assert json.loads((out / "run.json").read_text())["client"]["answers_from_cache"] == done
    with ChatServer() as s:
        assert CliRunner().invoke(app, measure_args(s.url, ref)).exit_code == 0
    strip = lambda rs: [{k: v for k, v in r.items() if k != "latency_s"} for r in rs]  # noqa: E731
    assert strip(records(out)) == strip(records(ref)) and len(records(out)) == 19  # nothing lost


def test_a_malformed_verdict_is_retried_once_then_counted_never_guessed(tmp_path):
    out = tmp_path / "m"
    always = lambda key, body: "The drafted steps (1 in all)" in json.dumps(body)  # noqa: E731  every 1-step segment
    once = lambda key, body: "not valid" not in json.dumps(body) and int(key[:4], 16) % 2 == 0  # noqa: E731
    with ChatServer(malformed=lambda key, body: always(key, body) or once(key, body)) as s:
        r = CliRunner().invoke(app, measure_args(s.url, out))
        assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    skips = [json.loads(line) for line in (out / "skips.jsonl").read_text().splitlines()]
    assert summary["skipped"] == len(skips) > 0 and summary["skipped_by_reason"] == {"verify:unparseable": len(skips)}
    assert summary["records"] + summary["skipped"] == 19 and all("after one retry" in s["detail"] for s in skips)
    assert summary["usage"]["strong_verify"]["calls"] > 19  # the retries were asked
    assert all(len(r["drafted"]) > 1 for r in records(out))  # no 1-step segment got an invented verdict


def test_a_position_whose_calls_keep_failing_is_a_counted_skip(tmp_path):
    out = tmp_path / "m"
    fail_weak = lambda key, attempt, body: "500" if body["model"] == "weak-test" and int(key[:8], 16) % 4 == 0 else None  # noqa: E731
    with ChatServer(faults=fail_weak) as s:
        r = CliRunner().invoke(app, measure_args(s.url, out, "--retries", "2"))
        assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"] > 0 and set(summary["skipped_by_reason"]) == {"draft:transient"}
    assert summary["records"] + summary["skipped"] == 19


def test_a_server_without_json_schema_falls_back_and_remembers(tmp_path):
    out = tmp_path / "m"
    with ChatServer(json_schema=False) as s:
        assert CliRunner().invoke(app, measure_args(s.url, out, "--limit", "4")).exit_code == 0
        assert json.loads((out / "summary.json").read_text())["response_format"] == "prompt"
        assert sum(n for k, n in s.statuses.items()) == 0 and len(records(out)) == 4
        n = s.received
        assert CliRunner().invoke(app, measure_args(s.url, out, "--limit", "4")).exit_code == 0
        assert s.received == n  # the refusal is remembered too: the rerun sends nothing
        r = CliRunner().invoke(app, measure_args(s.url, tmp_path / "strict", "--limit", "4", "--response-format", "json_schema"))
        assert r.exit_code == 2 and "response_format" in r.output and "Traceback" not in r.output


def test_without_yes_and_without_a_terminal_it_refuses_before_any_request(tmp_path):
    with ChatServer() as s:
        args = [a for a in measure_args(s.url, tmp_path / "m") if a != "--yes"]
        r = CliRunner().invoke(app, args, input="")
        assert r.exit_code == 2 and "pass --yes" in r.output and s.received == 0
        assert "19 positions" in r.output and "at most 76 Weak calls" in r.output  # the estimate came first


def test_a_fatal_endpoint_error_is_one_line(tmp_path):
    with ChatServer() as s:
        r = CliRunner().invoke(app, [a if a != "strong-test" else "missing" for a in measure_args(s.url, tmp_path / "m")])
    assert r.exit_code == 2 and "HTTP 404" in r.output and "rerun to resume" in r.output and "Traceback" not in r.output


# -- live on endpoints ----------------------------------------------------------------------------------------------

def test_live_on_endpoints_holds_writes_for_review_and_writes_logs_the_simulator_prices(tmp_path):
    from specagent.traces.io import load_trajectories

    out = tmp_path / "live"
    args = ["live", "--weak-url", "URL", "--weak-model", "weak-test", "--strong-url", "URL", "--strong-model", "strong-test",
            "-o", str(out), "--trajectories", "4", "--json", "--timeout", "20"]
    with ChatServer() as s:
        r = CliRunner().invoke(app, [s.url if a == "URL" else a for a in args])
        assert r.exit_code == 0, r.output
        n = s.received
        again = CliRunner().invoke(app, [s.url if a == "URL" else a for a in args])  # a rerun is replayed from the cache
        assert again.exit_code == 0 and s.received == n > 0
    report = json.loads(r.output)
    model_rows = lambda rep: [row for row in rep["comparison"]["rows"] if row["phase"] != "tool"]  # noqa: E731  tools rerun for real
    assert model_rows(json.loads(again.output)) == model_rows(report)
    counts = report["counts"]
    assert counts["writes_unreviewed"] == 0 and counts["reviews"] > 0 and counts["held_blocked"] >= counts["reviews"]
    assert counts["reviews"] == counts["accepted"] + counts["rejections"] + counts["unparseable_verdicts"]
    logs = load_trajectories(out / "protocol_log.jsonl")
    assert len(logs) == 4 and all(t.is_protocol_log for t in logs)
    recs = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(recs) == counts["reviews"] - counts["unparseable_verdicts"] and all(r["source"] == "live" for r in recs)
    check_verdict_log([{**r, "source": "acceptance measure"} for r in recs])
    assert len(read_verdict_log(out / "verdicts.jsonl")) == len(recs)  # also the reader's no-overlap rule within a task
    rows = {row["phase"]: row for row in report["comparison"]["rows"]}
    assert rows["weak_draft"]["measured_s"] > 0 and rows["weak_draft"]["predicted_s"] > 0
    assert rows["strong_verify"]["predicted_s"] > 0  # the replay reviews the segments the run reviewed
    # the protocol log is what `simulate --trace` takes
    r = CliRunner().invoke(app, ["simulate", "--trace", str(out / "protocol_log.jsonl")])
    assert r.exit_code == 0, r.output


def test_a_live_task_whose_calls_keep_failing_is_a_counted_skip(tmp_path):
    fail_some = lambda key, attempt, body: "500" if body["model"] == "strong-test" else None  # noqa: E731
    with ChatServer(faults=fail_some) as s:
        args = ["live", "--weak-url", s.url, "--weak-model", "weak-test", "--strong-url", s.url, "--strong-model", "strong-test",
                "-o", str(tmp_path / "live"), "--trajectories", "3", "--json", "--timeout", "20"]
        r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)  # stderr told the retries as they happened
    # a task that reaches a review fails there (every Strong call does): left out of the logs, counted, with why
    assert report["skipped"] and all("HTTP 500" in sk["detail"] and sk["reason"] == "transient" for sk in report["skipped"])
    from specagent.traces.io import load_trajectories
    assert len(load_trajectories(tmp_path / "live" / "protocol_log.jsonl")) + len(report["skipped"]) == 3


@given(completion=st.integers(0, 10_000), reported=st.none() | st.integers(0, 20_000), text=st.none() | st.text(max_size=200))
def test_reasoning_never_exceeds_completion(completion, reported, text):
    usage = {"prompt_tokens": 1, "completion_tokens": completion}
    if reported is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reported}
    msg = {"content": "x", **({"reasoning_content": text} if text is not None else {})}
    u = parse_reply({"choices": [{"message": msg}], "usage": usage}, 0.0, False).usage
    assert 0 <= u.reasoning_tokens <= completion and u.visible_tokens == completion - u.reasoning_tokens


def test_bad_prices_and_formats_are_one_line(tmp_path):
    base = measure_args("http://127.0.0.1:9/v1", tmp_path / "m")
    for extra, msg in [(["--weak-usd-per-mtok", "abc"], "--weak-usd-per-mtok: expected IN,OUT"),
                       (["--response-format", "xml"], "--response-format: expected one of"),
                       (["--weak-api-key-env", "bad-name"], "--weak-api-key-env: expected an environment variable name")]:
        r = CliRunner().invoke(app, base + extra)
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_measure_reads_openai_chat_logs_too(tmp_path):
    out = tmp_path / "m"
    log = ROOT / "traces" / "data" / "openai_chat_sample.jsonl"
    with ChatServer() as s:
        args = [str(log) if a == str(FIXTURE) else a for a in measure_args(s.url, out)]
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        sent = [json.loads(line) for line in (out / "cache").glob("*/*.json") for line in [line.read_text()]]
    recs = read_verdict_log(out / "openai_chat_sample.verdicts.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert len(recs) == summary["records"] == summary["positions"] == 14
    # the conversation that logs its own tools is drafted with them, the others with the inferred ones
    tools_of = {tuple(sorted(t["function"]["name"] for t in e["request"]["body"].get("tools", []))) for e in sent}
    assert ("get_weather",) in tools_of and ("get_reservation_details", "get_weather", "transfer_to_human_agents") in tools_of


def test_extra_body_fields_reach_the_server_and_cannot_replace_the_measurements_own(tmp_path):
    out = tmp_path / "m"
    off = '{"chat_template_kwargs": {"enable_thinking": false}}'
    with ChatServer() as s:
        r = CliRunner().invoke(app, measure_args(s.url, out, "--limit", "2", "--weak-extra-body", off))
        assert r.exit_code == 0, r.output
        bodies = [json.loads(p.read_text())["request"]["body"] for p in (out / "cache").glob("*/*.json")]
        weak_bodies = [b for b in bodies if b["model"] == "weak-test"]
        assert weak_bodies and all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in weak_bodies)
        assert all("chat_template_kwargs" not in b for b in bodies if b["model"] == "strong-test")
        for value, msg in [('{"messages": []}', "messages are set by the measurement"), ("[1]", "expected a JSON object")]:
            r = CliRunner().invoke(app, measure_args(s.url, tmp_path / "x", "--strong-extra-body", value))
            assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_user_side_tool_activity_is_left_out_of_the_agents_prompt(tmp_path):
    """Telecom's user runs device tools the agent never sees: they count as steps (the importer's) but are not sent."""
    from specagent.endpoints.recorded import read_recorded

    doc = json.loads(FIXTURE.read_text())
    sim = doc["simulations"][0]
    m1 = sim["messages"][1]
    sim["messages"][2:2] = [
        {"role": "user", "content": None, "tool_calls": [{"id": "u1", "name": "toggle_airplane_mode", "arguments": {},
                                                          "requestor": "user"}],
         "turn_idx": 2, "timestamp": m1["timestamp"], "cost": 0.0, "usage": m1["usage"], "raw_data": None},
        {"id": "u1", "role": "tool", "content": "Airplane mode is now OFF", "requestor": "user", "turn_idx": 3,
         "timestamp": m1["timestamp"]},
    ]
    doc["simulations"] = [sim]
    path = tmp_path / "with_user_tools.json"
    path.write_text(json.dumps(doc))
    (task,), tools = read_recorded(path)
    p = task.agent_positions()[0]
    assert task.raw[p - 1]["role"] == "tool" and task.raw[p - 1].get("requestor") == "user"
    sent = task.prefix(p)
    assert [m["role"] for m in sent] == ["assistant", "user"] and "toggle_airplane_mode" not in json.dumps(sent)
    assert task.step_of[p] == len(task.trajectory.steps[:task.step_of[p]]) == 4  # greeting, user, user's call, its result
    assert "toggle_airplane_mode" not in [t["function"]["name"] for t in tools]


def test_a_live_model_that_never_replies_stops_at_the_answer_limit(tmp_path):
    from specagent.endpoints.live import LiveRun
    from specagent.kernels.airline_env import AirlineEnv

    class ReadsForever(ChatServer):
        def _weak(self, msgs):
            return None, [("list_all_airports", {})]

    with ReadsForever() as s, client(tmp_path) as c, AirlineEnv(seed=0) as env:
        res = LiveRun(c, weak(s.url), Endpoint("strong", s.url, "strong-test"), k=4, max_answers=12).run_task(env, 0)
        assert res.counts["answer_limit"] == 1 and s.received <= 12 and res.verdicts == []
        assert res.protocol_log.is_protocol_log and all(st.label is None or st.label.verdict is None for st in res.protocol_log.steps)
