"""Issue #34: `replay` at parity with `vllm bench serve`: ITL, --request-rate (Poisson or gamma), --max-concurrency,
and only the flags that apply to a request trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.jobs.replay import ReplayResult, concurrency_starts, replay, replay_limited, resample_arrivals
from specagent.simulator.scenario import Scenario
from specagent.traces.requests import save_requests, synthetic_requests

runner = CliRunner()


@pytest.fixture(scope="module")
def strong():
    return Scenario().setting().strong


def test_resampled_arrivals_are_seeded_at_the_rate_and_as_bursty_as_asked():
    a = resample_arrivals(20_000, 4.0, 1.0, seed=3)
    assert a[0] == 0 and np.all(np.diff(a) >= 0) and np.array_equal(a, resample_arrivals(20_000, 4.0, 1.0, seed=3))
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03) and gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    bursty = np.diff(resample_arrivals(20_000, 4.0, 0.25, seed=3))  # gamma shape k: coefficient of variation 1/sqrt(k)
    assert bursty.mean() == pytest.approx(0.25, rel=0.05) and bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.08)
    for bad in ((4.0, 0.0), (0.0, 1.0), (float("inf"), 1.0)):
        with pytest.raises(ValueError):
            resample_arrivals(10, *bad)


@settings(max_examples=80, deadline=None)
@given(gaps=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=60), e2e=st.data(), limit=st.integers(1, 6))
def test_never_more_than_the_limit_in_flight_and_never_sent_before_arriving(gaps, e2e, limit):
    arrival = np.cumsum(gaps)
    lat = np.array(e2e.draw(st.lists(st.floats(0.01, 20.0), min_size=len(gaps), max_size=len(gaps))))
    s = concurrency_starts(arrival, lat, limit)
    assert np.all(s >= arrival - 1e-12) and np.all(np.diff(s) >= -1e-12)
    for t in s:  # at every send, at most `limit` requests are running (ends are exclusive: a slot frees as one finishes)
        assert np.sum((s <= t) & (s + lat > t)) <= limit
    assert np.array_equal(concurrency_starts(arrival, lat, len(gaps)), arrival)  # a limit never reached changes nothing


def test_itl_is_token_weighted_over_every_gap():
    tpot = np.array([0.010, 0.030, np.nan], dtype=np.float32)
    res = ReplayResult(3, 1.0, 3, 13, np.zeros(3), tpot, np.ones(3), 0.0, 1, 1, output_tokens_each=np.array([10, 2, 1]))
    itl = res.itl_stats()
    assert itl["mean_itl_ms"] == pytest.approx((9 * 10 + 1 * 30) / 10)  # 9 gaps at 10 ms, 1 gap at 30 ms
    assert itl["median_itl_ms"] == pytest.approx(10.0) and itl["p99_itl_ms"] == pytest.approx(30.0)


def test_a_concurrency_limit_caps_throughput_and_a_loose_one_changes_nothing(strong):
    tr = synthetic_requests(600, 6.0, seed=2)
    free = replay(tr, strong, chunk=0).stats()
    loose = replay_limited(tr, strong, 1, None, "union", None, 10_000, chunk=0).stats()
    assert loose["mean_e2e_s"] == pytest.approx(free["mean_e2e_s"], rel=1e-9) and loose["max_concurrency"] == 10_000
    tight = replay_limited(tr, strong, 1, None, "union", None, 2, chunk=0)
    t = tight.stats()
    # two in flight at a time: throughput at most 2 / mean latency (Little's law), and lower than unlimited
    assert t["request_throughput_per_s"] <= 2.0 / t["mean_e2e_s"] * 1.02 and t["request_throughput_per_s"] < free["request_throughput_per_s"]
    assert not tight.notes


def test_cli_prints_the_bench_serve_lines_and_itl(tmp_path):
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(400, 3.0, seed=4))
    r = runner.invoke(app, ["replay", str(csv), "--request-rate", "5", "--burstiness", "0.5", "--max-concurrency", "8"],
                      env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    for text in (f"{'Request rate configured (RPS):':<40} 5.00", "Arrivals: gamma gaps at 5 RPS, burstiness 0.5 (seeded)",
                 f"{'Maximum request concurrency:':<40} 8", "Inter-token Latency", "Mean ITL (ms):", "Median ITL (ms):",
                 "P99 ITL (ms):"):
        assert text in r.output, (text, r.output)
    plain = runner.invoke(app, ["replay", str(csv), "--json"])
    d = json.loads(plain.output)
    assert d["request_rate"] == "inf" and d["max_concurrency"] is None and d["mean_itl_ms"] > 0
    r = runner.invoke(app, ["replay", str(csv)], env={"COLUMNS": "100"})
    assert "Request rate configured" not in r.output and "Arrivals: the trace's own timestamps" in r.output  # as vLLM: no line for inf
    assert "Maximum request concurrency" not in r.output


def test_replay_help_lists_only_flags_that_apply_to_a_request_trace():
    out = runner.invoke(app, ["replay", "--help"], env={"COLUMNS": "200"}).output
    for gone in ("--user-latency-scale", "--tool-latency-scale", "--user-latency-s", "--tool-latency-s", "--api-verify-sends",
                 "--pricing-engine", "--draws", "--interval-level"):
        assert gone not in out, gone
    for kept in ("--request-rate", "--burstiness", "--max-concurrency", "--strong-hardware", "--max-seqs"):
        assert kept in out, kept


@pytest.mark.parametrize("args, message", [
    (["--burstiness", "2"], "--burstiness: shapes the gaps of --request-rate; give --request-rate too"),
    (["--request-rate", "0"], "--request-rate: must be a finite rate > 0"),
    (["--max-concurrency", "0"], "--max-concurrency: expected a whole number"),
])
def test_bad_bench_flags_fail_in_one_line(tmp_path, args, message):
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(20, 3.0, seed=4))
    r = runner.invoke(app, ["replay", str(csv), *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_a_burstgpt_csv_as_vllm_bench_serve_reads_it_loads_with_its_lengths(tmp_path):
    """BurstGPT (`vllm bench serve --dataset-name burstgpt`) carries token counts, so its lengths can be read."""
    from specagent.traces.requests import load_requests

    p = tmp_path / "burstgpt.csv"
    p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,250,1337,Conversation log\n", encoding="utf-8")
    t = load_requests(p)
    assert t.prompt_tokens.tolist() == [472, 1087] and t.output_tokens.tolist() == [18, 250]
    assert t.arrival_s.tolist() == [0.0, 40.0]
