"""`specagent bench serve` against the scripted loopback server (tests/chat_server.py), streaming over a real socket:
figures from token arrival times, the vLLM layout, a CSV `latency fit --data` reads, failures and ^C kept."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402

from specagent.cli.app import app  # noqa: E402
from specagent.endpoints import bench  # noqa: E402
from specagent.endpoints.client import Endpoint  # noqa: E402
from specagent.measurements import load_serving  # noqa: E402


def args(url: str, *extra: str) -> list[str]:
    return ["bench", "serve", "--base-url", url, "--model", "weak-test", "--num-prompts", "6", "--input-len", "40",
            "--output-len", "8", "--warmup", "0", *extra]


def test_serve_prints_vllm_layout_and_writes_a_csv_latency_fit_reads(tmp_path: Path):
    out = tmp_path / "mine.csv"
    with ChatServer(chunk_delay_s=0.002) as s:
        r = CliRunner().invoke(app, args(s.url, "--ignore-eos", "--max-concurrency", "1,2", "--csv", str(out), "--gpu", "h100_sxm",
                                         "--model-spec", "Qwen/Qwen3.5-4B", "--engine", "vllm", "--requests-out",
                                         str(tmp_path / "req.jsonl")))
    assert r.exit_code == 0, r.output
    assert r.output.count("Serving Benchmark Result") == 2
    for label in ("Successful requests:                     6", "Maximum request concurrency:             2",
                  "Mean TTFT (ms):", "Median TPOT (ms):", "P99 ITL (ms):", "Mean E2EL (ms):"):
        assert label in r.output
    rows = load_serving(out)
    assert [row.concurrency for row in rows] == [1, 2]
    assert len({row.source for row in rows}) == 2  # one source per level: validation holds out a concurrency
    for row in rows:
        assert row.output_tokens == 8 and row.statistic == "mean" and row.gpu == "h100_sxm" and row.model == "Qwen/Qwen3.5-4B"
        # 8 chunks: TPOT = (E2E - TTFT) / 7 > 0, and E2E > TTFT
        assert 0 < row.tpot_ms and row.e2e_latency_ms > row.ttft_ms
    recs = [json.loads(x) for x in (tmp_path / "req.jsonl").read_text().splitlines()]
    assert len(recs) == 12 and all(len(x["itl_s"]) == 7 and x["finish_reason"] == "length" for x in recs)
    # appending a second run keeps the first's rows
    with ChatServer() as s:
        assert CliRunner().invoke(app, args(s.url, "--csv", str(out), "--gpu", "h100_sxm")).exit_code == 0
    assert len(load_serving(out)) == 3


def test_tpot_is_e2e_minus_ttft_over_later_tokens():
    r = bench.RequestResult(0, 10, 5, ok=True, output_tokens=5, ttft_s=0.1, e2e_s=0.5)
    assert r.tpot_s == pytest.approx(0.1)
    assert bench.RequestResult(0, 10, 1, ok=True, output_tokens=1, ttft_s=0.1, e2e_s=0.1).tpot_s is None


def test_no_usage_is_said_and_tokens_counted_as_chunks(tmp_path: Path):
    with ChatServer(usage=False) as s:
        r = CliRunner().invoke(app, args(s.url))
    assert r.exit_code == 0, r.output
    assert "carried no usage" in r.output and "Total generated tokens:                  48" in r.output  # 6 x 8 chunks


def test_served_model_differs_is_a_warning_and_unknown_model_a_refusal(tmp_path: Path):
    with ChatServer(served_model="smollm2-135m") as s:
        r = CliRunner().invoke(app, args(s.url))
    assert r.exit_code == 0, r.output
    assert "the server answered as smollm2-135m" in r.output and "not among the models the server lists" in r.output
    with ChatServer() as s:
        r = CliRunner().invoke(app, ["bench", "serve", "--base-url", s.url, "--model", "nope", "--num-prompts", "2", "--warmup", "0"])
    assert r.exit_code == 2 and "HTTP 404" in r.output and "Traceback" not in r.output


def test_an_engine_not_found_is_said_not_silently_recorded_unknown():
    with ChatServer() as s:  # the loopback server's /v1/models names its owner 'scripted': no engine
        r = CliRunner().invoke(app, args(s.url))
        named = CliRunner().invoke(app, args(s.url, "--engine", "vllm"))
    assert r.exit_code == 0 and "record engine 'unknown' (/v1/models names owner 'scripted'" in r.output, r.output
    assert "pass --engine" in r.output and "unknown" not in named.output, named.output


def test_failures_are_counted_not_retried_and_all_failed_exits_3(tmp_path: Path):
    with ChatServer(faults=lambda key, attempt, body: "500") as s:
        r = CliRunner().invoke(app, args(s.url))
        assert s.received == 6  # one attempt per request
    assert r.exit_code == 3 and "6 request(s) failed: HTTP 500" in r.output and "no request completed" in r.output


def test_dataset_lengths_and_bad_dataset(tmp_path: Path):
    trace = tmp_path / "trace.csv"
    trace.write_text("input_tokens,output_tokens\n30,3\n60,5\n")
    reqs = bench.dataset_requests(trace, None, 0)
    assert [(q.input_len, q.output_len) for q in reqs] == [(30, 3), (60, 5)]
    assert len(reqs[1].prompt.split()) == 60
    bad = tmp_path / "bad.csv"
    bad.write_text("input_tokens,output_tokens\n30,x\n")
    r = CliRunner().invoke(app, ["bench", "serve", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--dataset", str(bad)])
    assert r.exit_code == 2 and "bad.csv: line 2: output_tokens 'x' is not a number" in r.output


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 200), rate=st.floats(0.1, 1000), burst=st.floats(0.1, 10), seed=st.integers(0, 2**32))
def test_arrivals_are_seeded_sorted_and_at_the_rate(n, rate, burst, seed):
    a = bench.arrival_times(n, rate, burst, seed)
    assert a == bench.arrival_times(n, rate, burst, seed) and a[0] == 0.0 and a == sorted(a)
    assert bench.arrival_times(n, math.inf, burst, seed) == [0.0] * n


def test_arrival_rate_mean_gap():
    a = bench.arrival_times(20001, 4.0, 1.0, 7)
    assert a[-1] / 20000 == pytest.approx(0.25, rel=0.03)


def test_interrupt_keeps_what_finished(monkeypatch):
    with ChatServer() as s:
        ep = Endpoint("base", s.url, "weak-test")
        reqs = bench.random_requests(6, 20, 4, 0)
        # ^C arrives in the main thread: here while it submits the third request, after the first two finished
        monkeypatch.setattr(bench.ThreadPoolExecutor, "submit", _submit_then_interrupt(bench.ThreadPoolExecutor.submit, 3))
        with pytest.raises(bench.Interrupted) as exc:
            bench.run_level(ep, reqs, max_concurrency=1, request_rate=math.inf, burstiness=1.0, seed=0, timeout_s=5,
                            ignore_eos=True, temperature=0.0, warmup=0)
    run = exc.value.run
    assert run.interrupted and 2 <= len(run.results) <= 3 and all(r.ok for r in run.results)
    assert "interrupted" in " ".join(bench.notes(run))


def _submit_then_interrupt(submit, after: int):
    state = {"n": 0}

    def wrapped(self, fn, *a, **kw):
        state["n"] += 1
        f = submit(self, fn, *a, **kw)
        if state["n"] == after:
            f.result()
            raise KeyboardInterrupt
        return f
    return wrapped


@pytest.fixture(scope="module")
def mine(tmp_path_factory) -> Path:
    """A serving-latency CSV written by `bench serve` at concurrency 1, 2 and 4 (scripted server)."""
    out = tmp_path_factory.mktemp("bench") / "mine.csv"
    with ChatServer(chunk_delay_s=0.003) as s:
        r = CliRunner().invoke(app, args(s.url, "--ignore-eos", "--max-concurrency", "1,2,4", "--csv", str(out), "--gpu", "h100_sxm",
                                         "--model-spec", "Qwen/Qwen3.5-4B", "--engine", "vllm"))
    assert r.exit_code == 0, r.output
    return out


def test_fit_engine_id_writes_a_profile_serving_engine_takes(mine: Path, tmp_path: Path):
    import hashlib
    import tomllib

    from specagent.hardware.serving_engine import load_engine

    prof = tmp_path / "my-vllm.toml"
    r = CliRunner().invoke(app, ["latency", "fit", "--data", str(mine), "--engine-id", "my-vllm", "-o", str(prof)])
    assert r.exit_code == 0, r.output
    said = r.output
    left = [ln for ln in said.splitlines() if ln.startswith("not written (")]  # one line per reason, not a row per term
    assert left and all("no row on" in ln for ln in left) and len(left) < r.output.count("_us"), r.output
    eng = load_engine(str(prof))
    assert eng.id == "my-vllm"
    sha = hashlib.sha256(mine.read_bytes()).hexdigest()
    data = tomllib.loads(prof.read_text())
    assert f"{mine} (sha256 {sha}" in data["per_pass"]["iteration_us"]["source"]
    assert data["provenance"]["fit"]["dataset_sha256"] == sha and data["provenance"]["base_profile"] == "vllm"
    # only the GPU the rows ran on: a per-GPU term of another GPU is its prior, moved by no figure, and is not written
    assert data["provenance"]["fit"]["gpus"] == ["h100_sxm"]
    # (the base profile's own [hardware.*] tables, fitted to public figures with their sources, stay as they are)
    base = tomllib.loads(Path(load_engine("vllm").path).read_text())
    assert {g: t for g, t in data.get("hardware", {}).items() if g != "h100_sxm"} == \
        {g: t for g, t in base.get("hardware", {}).items() if g != "h100_sxm"}
    r = CliRunner().invoke(app, ["latency", "fit", "--data", str(mine), "--engine-id", "my-vllm", "-o", str(prof), "--json"])
    out = json.loads(r.output[r.output.index("{"):])
    assert out["not_fitted"] and all("no row on" in why and "h100_sxm" not in why for why in out["not_fitted"].values())
    # the fit's in-sample error, before and after: said, and the fit never worse on its own figures than where it began
    assert 0 <= out["mape_fitted"] <= out["mape_at_priors"] and "in-sample error on the" in said
    assert not set(out["not_fitted"]) & set(out["values"])
    r = CliRunner().invoke(app, ["predict", "--weak-serving-engine", str(prof), "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["latency", "fit", "--data", str(mine), "--engine-id", "x", "--base-engine", "nope", "-o",
                                 str(tmp_path / "x.toml")])
    assert r.exit_code == 2 and "--base-engine nope" in r.output


def test_validate_leaves_one_concurrency_out(mine: Path):
    r = CliRunner().invoke(app, ["latency", "validate", "--data", str(mine), "--hold-out", "concurrency", "--engine-id", "my-vllm",
                                 "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["predictions"] == "held out (leave one concurrency out)"
    assert {w["source"] for w in out["worst"]} == {"concurrency 1", "concurrency 2", "concurrency 4"}
    assert out["targets"]["tpot_c<=16"]["rows"] == 3


def test_a_run_cut_during_the_warmup_has_no_figures_and_no_nan():
    run = bench.BenchRun(1, math.inf, [], 0.0, True)
    s = run.summary()
    assert s["completed"] == 0 and s["request_throughput"] is None and s["ttft"] is None
    text = bench.format_summary(run)
    assert "Request throughput (req/s):              -" in text and "nan" not in text
    assert bench.csv_rows(run, bench.ServerFacts("u", "m", "m", "unknown", 1, None, "e", ""), 0, False,
                          __import__("datetime").datetime(2026, 1, 1)) == []


def test_a_model_served_from_a_local_folder_leaves_its_path_out_of_the_row_id():
    """A server naming its model by a local folder (`transformers serve /home/me/models/x`) put that path in every row id,
    which `latency validate` then printed (issue #51): the id keeps the folder's name only."""
    import datetime

    done = [bench.RequestResult(i, 8, 4, ok=True, output_tokens=4, ttft_s=0.1, e2e_s=0.4, usage_reported=True)
            for i in range(2)]
    run = bench.BenchRun(1, math.inf, done, 1.0)
    when = datetime.datetime(2026, 1, 1)
    [local] = bench.csv_rows(run, bench.ServerFacts("u", "m", "/home/me/models/smollm2-135m/", "unknown", 1, None, "e", ""),
                             0, False, when)
    [hub] = bench.csv_rows(run, bench.ServerFacts("u", "m", "HuggingFaceTB/SmolLM2-135M", "unknown", 1, None, "e", ""),
                           0, False, when)
    assert local["row_id"] == "bench-smollm2-135m-c1-i8-o4-20260101T000000"
    assert hub["row_id"] == "bench-SmolLM2-135M-c1-i8-o4-20260101T000000"
