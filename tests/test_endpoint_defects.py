"""The defects a real llama.cpp server exposed in `acceptance measure` and `live` (issue 36, item 6), each shown on the
scripted loopback server (tests/chat_server.py), which can be made to cut at max_tokens, drop usage, answer under
another model name or fail: what the real server of tests/test_real_server.py cannot be made to do on demand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import VERIFY_MARK, ChatServer  # noqa: E402

from specagent.cli.app import app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "traces" / "data" / "tau2_airline_sample.json"


def measure(url: str, out: Path, *extra: str) -> list[str]:
    return ["acceptance", "measure", str(FIXTURE), "--weak-url", url, "--weak-model", "weak-test", "--strong-url", url,
            "--strong-model", "strong-test", "-o", str(out), "--yes", "--timeout", "20", "--backoff", "0.01", "--limit", "6", *extra]


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def bodies(out: Path) -> list[dict]:
    """Every request body the run sent, from its cache."""
    return [json.loads(p.read_text())["request"]["body"] for p in (out / "cache").rglob("*.json")]


def test_a_draft_cut_at_max_tokens_is_a_truncated_skip_not_a_step(tmp_path: Path):
    out = tmp_path / "m"
    with ChatServer() as s:  # the scripted Weak replies run to ~10 tokens: a cap of 2 cuts every reply
        r = CliRunner().invoke(app, measure(s.url, out, "--weak-max-tokens", "2"))
    s_ = summary(out)
    skips = [json.loads(x) for x in (out / "skips.jsonl").read_text().splitlines()]
    cut = [k for k in skips if k["reason"] == "truncated"]
    assert cut and all(k["stage"] == "draft" and "cut at max_tokens=2 (finish_reason length)" in k["detail"] for k in cut)
    assert s_["skipped_by_reason"]["draft:truncated"] == len(cut)
    assert s_["usage"]["weak_draft"]["truncated_calls"] >= len(cut)
    recs = [json.loads(x) for x in (out / "tau2_airline_sample.verdicts.jsonl").read_text().splitlines()]
    assert all(step["kind"] != "reply" for rec in recs for step in rec["drafted"])  # no cut reply became a step
    assert "answers cut at max_tokens" in r.output and "weak_draft" in r.output


def test_the_verdict_cap_is_its_own_and_a_cut_verdict_is_not_retried(tmp_path: Path):
    out = tmp_path / "m"
    with ChatServer() as s:
        r = CliRunner().invoke(app, measure(s.url, out, "--weak-max-tokens", "400", "--strong-max-tokens", "3"))
    verify = [b for b in bodies(out) if any(VERIFY_MARK in (m.get("content") or "") for m in b["messages"])]
    drafts = [b for b in bodies(out) if b["model"] == "weak-test"]
    assert {b["max_tokens"] for b in drafts} == {400} and {b["max_tokens"] for b in verify} == {3}
    s_ = summary(out)
    assert s_["records"] == 0 and s_["skipped_by_reason"] == {"verify:truncated": 6}
    assert len(verify) == 6  # one per position: a retry under the same cap would be cut again
    skip = json.loads((out / "skips.jsonl").read_text().splitlines()[0])
    assert "the verdict was cut at max_tokens=3 (finish_reason length); raise --strong-max-tokens" in skip["detail"]
    assert r.exit_code == 3 and "error: 0 verdicts from 6 positions (verify:truncated 6" in r.output


def test_zero_verdicts_exit_3_and_unparseable_ones_are_counted(tmp_path: Path):
    out = tmp_path / "m"
    with ChatServer(malformed=lambda key, body: True) as s:
        r = CliRunner().invoke(app, measure(s.url, out))
    assert r.exit_code == 3, r.output
    assert summary(out)["skipped_by_reason"] == {"verify:unparseable": 6} and "skipped" in r.output


def test_a_server_without_usage_stops_at_once(tmp_path: Path):
    out = tmp_path / "m"
    with ChatServer(usage=False) as s:
        r = CliRunner().invoke(app, measure(s.url, out, "--concurrency", "1"))
        assert s.received <= 2  # not retried (6 attempts each before): the first answer, and at most the next position's
    assert r.exit_code == 2 and "the server reports no usage" in r.output and "attempt 2/" not in r.output  # not retried (the estimate names the attempts it may take)


def test_a_wrong_model_name_warns_once_and_run_json_names_the_endpoints(tmp_path: Path):
    out = tmp_path / "m"
    with ChatServer(served_model="smollm2-135m") as s:
        r = CliRunner().invoke(app, measure(s.url, out, "--weak-max-tokens", "300", "--strong-max-tokens", "500"))
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())  # the warning wraps at the terminal's width
    assert flat.count("weak endpoint") == 1 and "asked for model 'weak-test', the server answered as 'smollm2-135m'" in flat
    assert flat.count("strong endpoint") == 1
    run = json.loads((out / "run.json").read_text())
    assert run["endpoints"]["weak"] == {"url": s.url, "model": "weak-test", "served_models": ["smollm2-135m"], "max_tokens": 300}
    assert run["endpoints"]["strong"]["max_tokens"] == 500


def test_retries_are_told_while_the_run_goes_on_and_progress_is_shown_off_a_terminal(tmp_path: Path):
    out = tmp_path / "m"
    first_fails = lambda key, attempt, body: "500" if attempt == 0 and body["model"] == "weak-test" else None  # noqa: E731
    with ChatServer(faults=first_fails) as s:
        r = CliRunner().invoke(app, measure(s.url, out))
    assert r.exit_code == 0, r.output
    assert "weak: HTTP 500" in r.output and "attempt 2/6 in" in r.output
    assert "verifying 6/6 ·" in r.output and "answered" in r.output  # plain progress lines: CliRunner is no terminal


def test_the_fixture_without_policy_is_warned_and_no_resume_hint_without_a_cache(tmp_path: Path):
    r = CliRunner().invoke(app, measure("http://127.0.0.1:9/v1", tmp_path / "m", "--retries", "2"))
    assert r.exit_code == 2
    said = " ".join(r.output.split())  # the warning wraps at the terminal's width
    assert "no domain policy" in said
    assert "cannot connect" in said and "answers so far are cached" not in said


def test_the_estimate_counts_the_prompts_to_be_sent(tmp_path: Path):
    import re

    out = tmp_path / "m"
    with ChatServer() as s:
        r = CliRunner().invoke(app, measure(s.url, out, "--k", "2"))
    m = re.search(r"([\d,]+)–([\d,]+) Weak and ([\d,]+)–([\d,]+) Strong prompt tokens", r.output)
    assert m, r.output
    least, most = (int(m.group(i).replace(",", "")) for i in (1, 2))
    measured = summary(out)["usage"]["weak_draft"]["prompt_tokens"]
    # the scripted server counts 4 characters a token and no tools; the estimate counts word pieces, tools included
    assert least <= most and 0.5 * measured <= least <= 3 * measured, (least, most, measured)


def test_live_sends_max_tokens_per_role(tmp_path: Path):
    out = tmp_path / "live"
    with ChatServer() as s:
        r = CliRunner().invoke(app, ["live", "--weak-url", s.url, "--weak-model", "weak-test", "--strong-url", s.url,
                                     "--strong-model", "strong-test", "-o", str(out), "--trajectories", "1", "--json",
                                     "--timeout", "20", "--max-tokens", "300", "--strong-max-tokens", "700"])
    assert r.exit_code == 0, r.output
    sent = bodies(out)
    assert {b["max_tokens"] for b in sent if b["model"] == "weak-test"} == {300}
    assert {b["max_tokens"] for b in sent if b["model"] == "strong-test"} == {700}
    report = json.loads((out / "comparison.json").read_text())
    assert report["weak"]["max_tokens"] == 300 and report["strong"]["served_models"] == ["strong-test"]


def test_live_says_what_the_server_does_not_report(tmp_path: Path):
    """A server whose usage has no prompt_tokens_details / completion_tokens_details (transformers serve's): live says
    that cached prompt tokens are unknown and that reasoning tokens were estimated, in the table and the report."""
    out = tmp_path / "live"
    with ChatServer(usage_details=False) as s:
        r = CliRunner().invoke(app, ["live", "--weak-url", s.url, "--weak-model", "weak-test", "--strong-url", s.url,
                                     "--strong-model", "strong-test", "-o", str(out), "--trajectories", "1", "--timeout", "20"])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "comparison.json").read_text())
    used = report["usage_reported"]
    assert used["weak"]["calls"] > 0 and used["strong"]["calls"] > 0
    assert used["weak"]["cached_tokens_reported_calls"] == used["strong"]["cached_tokens_reported_calls"] == 0
    assert used["strong"]["reasoning_estimated_calls"] > 0 and used["weak"]["reasoning_estimated_calls"] == 0
    flat = " ".join(r.output.split())
    for role in ("weak", "strong"):
        assert (f"note: {role}: {used[role]['calls']} of {used[role]['calls']} answers reported no cached prompt tokens"
                in flat), r.output
    assert "note: strong: reasoning tokens of" in flat and len(report["unreported"]) == 3  # 2 roles' cache + strong's reasoning
    # the full usage of the scripted server by default: nothing to say
    with ChatServer() as s:
        r = CliRunner().invoke(app, ["live", "--weak-url", s.url, "--weak-model", "weak-test", "--strong-url", s.url,
                                     "--strong-model", "strong-test", "-o", str(tmp_path / "full"), "--trajectories", "1",
                                     "--timeout", "20"])
    assert r.exit_code == 0, r.output
    assert "cached prompt tokens" not in r.output and "estimated from" not in r.output
    assert json.loads((tmp_path / "full" / "comparison.json").read_text())["unreported"] == []


def test_what_the_server_does_not_report_is_said():
    from specagent.endpoints.measure import unreported

    s = {"usage": {"weak_draft": {"calls": 3, "cached_tokens_reported_calls": 1, "reasoning_estimated_calls": 0},
                   "strong_verify": {"calls": 2, "cached_tokens_reported_calls": 2, "reasoning_estimated_calls": 2}}}
    lines = unreported(s)
    assert lines == [
        "weak_draft: 2 of 3 answers reported no cached prompt tokens (usage.prompt_tokens_details.cached_tokens): prefix-cache "
        "reuse is unknown there, not 0",
        "strong_verify: reasoning tokens of 2 of 2 answers are estimated from their reasoning text (the server reported no "
        "completion_tokens_details.reasoning_tokens)"]
