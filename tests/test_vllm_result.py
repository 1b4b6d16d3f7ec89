"""Issue #51: `replay` speaks `vllm bench serve` (its keys, ms, its block and options) and `bench compare` sets a
prediction beside a measurement.

The vLLM key set is `tests/fixtures/vllm/save_result.json`: the keys `vllm bench serve --save-result` writes for a
generative model with its defaults (--percentile-metrics ttft,tpot,itl, --metric-percentiles 99, no --save-detailed),
read off vllm-project/vllm `vllm/benchmarks/serve.py` at commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1 (`main_async`'s
result_json, `benchmark`'s result dict and `process_one_metric`); its values are made up, small and round.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.common.vllm_result import format_block, latency_keys, parse_metrics, parse_percentiles
from specagent.endpoints import bench
from specagent.traces.requests import save_requests, synthetic_requests

runner = CliRunner()
VLLM = Path(__file__).parent / "fixtures" / "vllm" / "save_result.json"
#: vLLM keys replay does not write, each for a reason: no clock date (outputs are byte-identical run to run), no
#: backend, label or tokenizer (no server, no tokenizer), no per-request lists (-o writes them as Parquet), no peak
#: output rate, peak concurrency or RTFx (the engine records a request's first and last token, not each one).
LEFT_OUT = {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "latencies", "queue_times",
            "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"}
#: replay's own keys, none of them a vLLM key.
OWN = {"gpus", "usd_per_hour", "usd_per_1k_requests", "chunks", "chunk_boundary_gap", "deployment", "scheduler",
       "token_counts", "percentile_metrics", "metric_percentiles", "notes"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("vllm") / "r.csv"
    save_requests(p, synthetic_requests(300, 3.0, seed=5))
    return p


def replay_json(*args: str) -> dict:
    r = runner.invoke(app, ["replay", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_replay_json_holds_vllms_result_keys_and_only_its_own_besides(trace):
    vllm = json.loads(VLLM.read_text())
    d = replay_json(trace, "--percentile-metrics", "ttft,tpot,itl")  # vLLM's default
    assert set(vllm) - LEFT_OUT == set(d) - OWN  # every other vLLM key, and no key of vLLM's under another meaning
    assert not OWN & set(vllm) and LEFT_OUT <= set(vllm)
    for k in set(vllm) - LEFT_OUT:  # the same kind of value: a number where vLLM writes one
        assert isinstance(d[k], (int, float)) == isinstance(vllm[k], (int, float)) or d[k] is None, k
    assert d["request_rate"] == "inf" and d["completed"] == d["num_prompts"] == 300 and d["failed"] == 0
    assert d["request_throughput"] == pytest.approx(d["completed"] / d["duration"], rel=1e-12)


def test_one_request_in_ms_by_hand(tmp_path):
    """One request alone: E2EL is its E2E in ms, TTFT + 4 TPOT for 5 output tokens, and every statistic is it."""
    p = tmp_path / "one.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n")
    out = tmp_path / "one.parquet"
    d = replay_json(p, "-o", out, "--metric-percentiles", "50,99")
    row = pd.read_parquet(out).iloc[0]
    e2e_ms, ttft_ms, tpot_ms = 1000 * float(row["e2e_s"]), 1000 * float(row["ttft_s"]), 1000 * float(row["tpot_s"])
    assert e2e_ms > 1  # a real time, so a seconds/ms slip is a factor of 1000 below
    assert d["mean_e2el_ms"] == pytest.approx(e2e_ms, rel=1e-6) == d["median_e2el_ms"] == d["p99_e2el_ms"]
    assert d["mean_e2el_ms"] == pytest.approx(ttft_ms + 4 * tpot_ms, rel=1e-4)
    assert d["mean_ttft_ms"] == pytest.approx(ttft_ms, rel=1e-6) and d["mean_tpot_ms"] == pytest.approx(tpot_ms, rel=1e-6)
    assert d["std_e2el_ms"] == 0 and d["mean_itl_ms"] == pytest.approx(tpot_ms, rel=1e-6)
    assert d["duration"] == pytest.approx(e2e_ms / 1000, rel=1e-6)  # the one request from its arrival at 0 to its end


def test_the_percentile_options_choose_the_keys_and_the_block(trace):
    d = replay_json(trace, "--percentile-metrics", "e2el,ttft", "--metric-percentiles", "50,95,99.9")
    want = latency_keys(("ttft", "e2el"), (50.0, 95.0, 99.9))
    assert [k for k in d if k.endswith("_ms")] == want  # vLLM's order: TTFT before E2EL, whatever order was given
    assert d["p50_ttft_ms"] == pytest.approx(d["median_ttft_ms"], rel=1e-12)
    assert d["p95_ttft_ms"] < d["p99.9_ttft_ms"] and d["percentile_metrics"] == "ttft,e2el"
    r = runner.invoke(app, ["replay", str(trace), "--percentile-metrics", "e2el,ttft", "--metric-percentiles", "50,95,99.9"])
    assert r.exit_code == 0, r.output
    assert "Mean TPOT" not in r.output and "Inter-token" not in r.output and "ITL:" not in r.output
    assert r.output.index("Time to First Token") < r.output.index("End-to-end Latency")
    assert f"{'P99.9 E2EL (ms):':<40} {d['p99.9_e2el_ms']:<10.2f}" in r.output
    assert f"{'P95 TTFT (ms):':<40} {d['p95_ttft_ms']:<10.2f}" in r.output


@pytest.mark.parametrize("flag, value", [("--percentile-metrics", "ttft,e2e"), ("--percentile-metrics", ""),
                                         ("--metric-percentiles", "101"), ("--metric-percentiles", "p99")])
def test_a_bad_option_is_one_line_naming_its_flag(trace, flag, value):
    r = runner.invoke(app, ["replay", str(trace), flag, value])
    assert r.exit_code == 2 and flag in r.output and len(r.output.strip().splitlines()) == 1, r.output
    with pytest.raises(ValueError):
        (parse_metrics if "metrics" in flag else parse_percentiles)(value)


def test_the_block_is_vllms_layout_by_hand():
    res = {"completed": 3, "failed": 0, "max_concurrency": 2, "request_rate": 1.5, "duration": 2.0, "total_input_tokens": 30,
           "total_output_tokens": 9, "request_throughput": 1.5, "output_throughput": 4.5, "total_token_throughput": 19.5,
           "mean_ttft_ms": 12.345, "median_ttft_ms": 10.0, "p90_ttft_ms": None}
    assert format_block(res, ("ttft",), (90.0,)).splitlines() == [
        "============ Serving Benchmark Result ============",
        "Successful requests:                     3         ",
        "Maximum request concurrency:             2         ",
        "Request rate configured (RPS):           1.50      ",
        "Benchmark duration (s):                  2.00      ",
        "Total input tokens:                      30        ",
        "Total generated tokens:                  9         ",
        "Request throughput (req/s):              1.50      ",
        "Output token throughput (tok/s):         4.50      ",
        "Total Token throughput (tok/s):          19.50     ",
        "---------------Time to First Token----------------",
        "Mean TTFT (ms):                          12.35     ",
        "Median TTFT (ms):                        10.00     ",
        "P90 TTFT (ms):                           -",
        "=================================================="]


# ------------------------------------------------------------------------------------------------ bench compare
def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def compare(*args: object) -> tuple[int, str]:
    r = runner.invoke(app, ["bench", "compare", *map(str, args)], env={"COLUMNS": "80"})
    return r.exit_code, r.output


def test_compare_arithmetic_by_hand(tmp_path):
    pred = write(tmp_path / "p.json", {"completed": 10, "duration": 5.0, "request_throughput": 2.0, "mean_ttft_ms": 110.0,
                                       "p99_ttft_ms": 90.0, "mean_e2el_ms": 1000.0, "std_ttft_ms": 1.0})
    meas = write(tmp_path / "m.json", {"completed": 10, "duration": 4.0, "request_throughput": 2.5, "mean_ttft_ms": 100.0,
                                       "p99_ttft_ms": 100.0, "std_ttft_ms": 0.0})
    code, out = compare(pred, meas, "--json")
    assert code == 0, out
    doc = json.loads(out)
    got = {r["key"]: r["error"] for r in doc["rows"]}
    assert got == {"completed": 0.0, "duration": pytest.approx(0.25), "request_throughput": pytest.approx(-0.2),
                   "mean_ttft_ms": pytest.approx(0.1), "std_ttft_ms": None, "p99_ttft_ms": pytest.approx(-0.1)}
    assert [r["key"] for r in doc["rows"]] == ["completed", "duration", "request_throughput", "mean_ttft_ms", "std_ttft_ms",
                                               "p99_ttft_ms"]
    assert doc["notes"] == ["only the predicted side has mean_e2el_ms (match --percentile-metrics and --metric-percentiles "
                            "on both to compare them)"]
    code, out = compare(pred, meas)
    assert code == 0, out
    lines = out.splitlines()
    assert f"{'Benchmark duration (s)':<34} {'5.00':>12} {'4.00':>12} {'+25.0%':>8}" in lines
    assert f"{'Mean TTFT (ms)':<34} {'110.00':>12} {'100.00':>12} {'+10.0%':>8}" in lines
    assert f"{'Std TTFT (ms)':<34} {'1.00':>12} {'0.00':>12} {'n/a':>8}" in lines  # measured 0: no relative error
    assert max(len(x) for x in lines) <= 80


def test_compare_reads_replay_json_against_vllms_save_result_and_bench_serves_json(tmp_path, trace):
    pred = tmp_path / "pred.json"
    pred.write_text(runner.invoke(app, ["replay", str(trace), "--json"]).output)
    code, out = compare(pred, VLLM, "--json")
    assert code == 0, out
    rows = {r["key"]: r for r in json.loads(out)["rows"]}
    assert rows["p99_itl_ms"]["measured"] == 70.0 and rows["mean_ttft_ms"]["predicted"] == json.loads(pred.read_text())["mean_ttft_ms"]
    # bench serve --json: the level's summary, read under vLLM's keys
    runs = [bench.BenchRun(c, math.inf, [bench.RequestResult(i, 100, 5, ok=True, output_tokens=5, ttft_s=0.1 * c, e2e_s=0.5,
                                                             itl_s=[0.1] * 4) for i in range(3)], 2.0) for c in (1, 2)]
    doc = write(tmp_path / "bench.json", {"levels": [r.summary() for r in runs], "rows": [], "server": {}})
    code, out = compare(pred, doc)
    assert code == 2 and "holds 2 load levels; pass --level 1..2" in out and len(out.strip().splitlines()) == 1
    code, out = compare(pred, doc, "--level", "2", "--json")
    assert code == 0, out
    rows = {r["key"]: r for r in json.loads(out)["rows"]}
    assert rows["mean_ttft_ms"]["measured"] == pytest.approx(200.0) and rows["mean_e2el_ms"]["measured"] == pytest.approx(500.0)
    assert rows["completed"]["measured"] == 3


@pytest.mark.parametrize("doc, says", [
    ({"completed": 1, "request_throughput": 1.0}, "no key 'duration'"),
    ([1, 2], "expected one JSON object"),
    ("not json", "not JSON"),
    ({"completed": 1, "duration": 1.0, "request_throughput": 1.0, "mean_ttft_ms": "fast"}, "key 'mean_ttft_ms' is 'fast'"),
    ({"levels": [{"completed": 1}]}, "load level 1 has no key"),
])
def test_a_bad_file_is_one_error_line_naming_it_and_the_key(tmp_path, doc, says):
    bad = tmp_path / "bad.json"
    bad.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, out = compare(bad, VLLM)
    assert code == 2 and out.startswith(f"error: {bad}") and says in out and len(out.strip().splitlines()) == 1, out
    code, out = compare(VLLM, bad)
    assert code == 2 and out.startswith(f"error: {bad}"), out


def test_compare_without_a_shared_latency_is_an_error_and_other_runs_are_said(tmp_path):
    head = {"completed": 4, "duration": 1.0, "request_throughput": 4.0}
    pred = write(tmp_path / "p.json", {**head, "mean_e2el_ms": 5.0})
    code, out = compare(pred, VLLM)
    assert code == 2 and "no latency figure in both" in out, out
    other = write(tmp_path / "o.json", {**head, "completed": 5, "total_input_tokens": 9, "mean_ttft_ms": 1.0})
    code, out = compare(other, VLLM, "--json")
    assert code == 0 and any("are they of the same trace?" in n for n in json.loads(out)["notes"]), out


def test_bench_serves_json_level_reads_as_its_printed_block():
    """The bench serve block and `vllm_result` are one: every figure printed is the key's value at 2 decimals."""
    run = bench.BenchRun(None, 2.0, [bench.RequestResult(0, 10, 3, ok=True, output_tokens=3, ttft_s=0.25, e2e_s=0.75,
                                                         itl_s=[0.2, 0.3])], 1.5)
    res = bench.vllm_result(run.summary())
    text = bench.format_summary(run)
    assert f"{'Mean ITL (ms):':<40} {res['mean_itl_ms']:<10.2f}" in text and res["mean_itl_ms"] == pytest.approx(250.0)
    assert res["mean_tpot_ms"] == pytest.approx(250.0) and res["mean_e2el_ms"] == pytest.approx(750.0)
    assert res["request_rate"] == 2.0 and np.isclose(res["request_throughput"], 1 / 1.5)


def test_level_is_refused_on_a_file_without_levels(tmp_path):
    code, out = compare(VLLM, VLLM, "--level", "1")
    assert code == 2 and "has no levels" in out and len(out.strip().splitlines()) == 1, out


def test_itl_has_its_exact_mean_and_no_made_up_spread(tmp_path):
    """Two requests alone, 11 and 3 output tokens: the pooled mean gap is (10 TPOT_a + 2 TPOT_b) / 12 (vLLM's mean over
    every gap); the median, std and percentiles would need each token's time, which the engine does not record."""
    p = tmp_path / "two.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,11\n1000,300,3\n")
    out = tmp_path / "two.parquet"
    d = replay_json(p, "-o", out, "--metric-percentiles", "50,99")
    rows = pd.read_parquet(out)
    tpot_ms = 1000 * rows["tpot_s"].to_numpy(dtype=np.float64)
    assert d["mean_itl_ms"] == pytest.approx((10 * tpot_ms[0] + 2 * tpot_ms[1]) / 12, rel=1e-6)
    assert d["median_itl_ms"] is d["std_itl_ms"] is d["p50_itl_ms"] is d["p99_itl_ms"] is None
    assert any(n.startswith("median, std and percentiles of ITL are null") for n in d["notes"])
    assert d["std_tpot_ms"] == pytest.approx(float(np.std(tpot_ms)), abs=1e-5) and d["std_tpot_ms"] > 1e-4  # TPOT's spread is over requests, as vLLM's
    r = runner.invoke(app, ["replay", str(p)], env={"COLUMNS": "80"})
    assert f"{'P99 ITL (ms):':<40} -\n" in r.output and "note: median, std and percentiles of ITL" in r.output
