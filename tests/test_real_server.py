"""The endpoint commands against a real OpenAI-compatible server: `transformers serve` with SmolLM2-135M on loopback
(tools/real_server.py; the `real_server` fixture in conftest.py skips with its reason where it cannot be installed).

A 135M model writes poor drafts and verdicts and makes no tool calls: these tests check the pipeline end to end —
figures measured, files written and read back, every position ending as a record or a counted skip with its reason —
not the answers' quality. Kept small (a few requests each): the server decodes a few tokens a second on a busy CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specagent.cli.app import app
from specagent.measurements import load_serving

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "traces" / "data" / "tau2_airline_sample.json"
pytestmark = pytest.mark.slow


def test_bench_serve_on_the_real_server_writes_figures_latency_fit_takes(real_server, tmp_path: Path):
    csv = tmp_path / "mine.csv"
    r = CliRunner().invoke(app, ["bench", "serve", "--base-url", real_server.url, "--model", real_server.model,
                                 "--num-prompts", "2", "--input-len", "16", "--output-len", "4", "--max-concurrency", "1,2",
                                 "--warmup", "1", "--timeout", "300", "--csv", str(csv), "--model-spec",
                                 str(Path(real_server.model) / "config.json"), "--weight-dtype", "fp32", "--engine", "transformers"])
    assert r.exit_code == 0, r.output
    assert "Mean TTFT (ms):" in r.output and "Mean TPOT (ms):" in r.output and "answered as" not in r.output
    rows = load_serving(csv)
    assert [row.concurrency for row in rows] == [1, 2]
    for row in rows:
        assert row.ttft_ms > 0 and row.e2e_latency_ms > row.ttft_ms and row.input_tokens > 16  # the chat template's tokens too
        assert row.output_tokens <= 4 and "answers without usage" not in row.notes  # transformers serve streams usage
    # the CSV is in the schema `latency fit --data` reads: with no hardware profile for the CPU every row is skipped, said so
    r = CliRunner().invoke(app, ["latency", "fit", "--data", str(csv), "--engine-id", "smollm2-cpu", "--base-engine", "vllm",
                                 "-o", str(tmp_path / "p.toml")])
    assert r.exit_code == 2 and "no row the cost model can describe (2 skipped)" in r.output


def test_acceptance_measure_on_the_real_server_counts_every_position(real_server, tmp_path: Path):
    out = tmp_path / "m"
    r = CliRunner().invoke(app, ["acceptance", "measure", str(FIXTURE), "--weak-url", real_server.url, "--weak-model",
                                 real_server.model, "--strong-url", real_server.url, "--strong-model", real_server.model,
                                 "-o", str(out), "--yes", "--limit", "2", "--k", "1", "--concurrency", "1", "--timeout", "300",
                                 "--retries", "2", "--weak-max-tokens", "24", "--strong-max-tokens", "96"])
    assert r.exit_code in (0, 3), r.output  # 3: no verdict parsed (said on stderr), which a 135M model may well do
    summary = json.loads((out / "summary.json").read_text())
    assert summary["positions"] == 2 and summary["records"] + summary["skipped"] == 2
    assert "verdict JSON asked via" in r.output
    if summary["skipped"]:  # a parse failure or a cut answer is counted with its reason, and each skip is logged
        assert sum(summary["skipped_by_reason"].values()) == summary["skipped"]
        assert "skipped" in r.output and len((out / "skips.jsonl").read_text().splitlines()) == summary["skipped"]
    calls = [json.loads(x) for x in (out / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c["prompt_tokens"] > 0 and c["finish_reason"] in ("stop", "length", "tool_calls") for c in calls)
    run = json.loads((out / "run.json").read_text())
    assert run["endpoints"]["weak"]["served_models"] and run["endpoints"]["strong"]["max_tokens"] == 96
    assert "answered as" not in r.output  # transformers serve names the model NAME@main: the same model
    assert "reported no cached prompt tokens" in r.output  # transformers serve reports none: said, not taken as 0


def test_live_on_the_real_server_runs_one_trajectory(real_server, tmp_path: Path):
    out = tmp_path / "live"
    r = CliRunner().invoke(app, ["live", "--weak-url", real_server.url, "--weak-model", real_server.model, "--strong-url",
                                 real_server.url, "--strong-model", real_server.model, "--trajectories", "1", "-o", str(out),
                                 "--timeout", "300", "--max-tokens", "24", "--strong-max-tokens", "96"])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "comparison.json").read_text())
    counts = report["counts"]
    assert counts["reviews"] == counts["accepted"] + counts["rejections"] + counts["unparseable_verdicts"]
    assert len((out / "verdicts.jsonl").read_text().splitlines()) == counts["reviews"] - counts["unparseable_verdicts"]
    assert report["weak"]["max_tokens"] == 24 and report["weak"]["served_models"]
    rows = {row["phase"]: row for row in report["comparison"]["rows"]}
    assert rows["weak_draft"]["measured_s"] > 0
    if counts["reviews"] == 0:
        assert "0 reviews" in r.output
