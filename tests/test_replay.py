"""`specagent replay`: a request trace served at its timestamps on the Strong deployment, vllm-bench-serve figures."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.replay import replay
from specagent.simulator.scenario import Scenario
from specagent.traces.requests import RequestTrace, save_requests, synthetic_requests

runner = CliRunner()


@pytest.fixture(scope="module")
def strong():
    return Scenario().setting().strong


def test_cli_prints_ttft_tpot_e2e_and_streams_every_request_to_parquet(tmp_path):
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(1500, 3.0, seed=4))
    out = tmp_path / "r.parquet"
    r = runner.invoke(app, ["replay", str(csv), "-o", str(out), "--chunk", "500", "--overlap", "200"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    for text in ("Time to First Token", "Time per Output Token (excl. 1st token)", "End-to-end Latency", "P99 TTFT (ms):",
                 "Median TPOT (ms):", "P95 E2E (s):", "Request throughput (req/s):", "8 GPUs", "served in 3 chunks"):
        assert text in r.output, text
    frame = pd.read_parquet(out)
    assert frame["request"].tolist() == list(range(1500))  # every request once, in order
    assert (frame["e2e_s"] >= frame["ttft_s"]).all() and (frame["ttft_s"] > 0).all()
    one = frame["output_tokens"] > 1
    # E2E is TTFT plus one TPOT per output token after the first, by definition, request by request
    assert np.allclose(frame.loc[one, "ttft_s"] + frame.loc[one, "tpot_s"] * (frame.loc[one, "output_tokens"] - 1),
                       frame.loc[one, "e2e_s"], rtol=1e-4)
    assert not list(tmp_path.glob(".*"))
    r = runner.invoke(app, ["replay", str(csv), "--json", "--chunk", "0"])
    d = json.loads(r.output)
    assert d["requests"] == 1500 and d["gpus"] == 8 and d["usd_per_hour"] == pytest.approx(8 * 1.043)  # no Weak pool priced
    assert d["median_ttft_ms"] == pytest.approx(float(np.median(frame["ttft_s"])) * 1e3, rel=0.02)


def test_chunked_replay_agrees_with_one_long_run(strong):
    tr = synthetic_requests(6000, 3.0, seed=1)
    whole = replay(tr, strong, chunk=0).stats()
    chunked = replay(tr, strong, chunk=2000, overlap=1000)
    c = chunked.stats()
    assert chunked.chunks == 3 and chunked.boundary_gap < 0.02 and not chunked.notes
    for key in ("mean_e2e_s", "p99_e2e_s", "median_ttft_ms", "mean_tpot_ms"):
        assert c[key] == pytest.approx(whole[key], rel=0.01), key
    short = replay(tr, strong, chunk=2000, overlap=20)  # an overlap far shorter than the queue is reported, not hidden
    assert short.boundary_gap > 0.02 and "raise --overlap" in short.notes[0]


def test_scheduler_limits_and_load_move_the_latencies(strong, tmp_path):
    tr = synthetic_requests(800, 3.0, seed=2)
    base = replay(tr, strong).stats()
    slow = replay(RequestTrace(tr.prompt_tokens, tr.output_tokens, tr.arrival_s / 4, "4x faster"), strong).stats()
    assert slow["p99_e2e_s"] > base["p99_e2e_s"] and slow["mean_ttft_ms"] > base["mean_ttft_ms"]
    from specagent.cli.replay import _scheduler
    from specagent.simulator.fleet.config import engine_scheduler
    one = replay(tr, strong, scheduler=_scheduler(strong, 4, None)).stats()
    assert engine_scheduler(strong).max_num_seqs > 4 and one["p99_e2e_s"] > 2 * base["p99_e2e_s"]


def test_replay_errors_name_the_flag_or_field(tmp_path):
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(50, 3.0, seed=4))
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n10,5\n", encoding="utf-8")
    for args, msg in (([str(lengths)], "no arrival times"), ([str(csv), "--max-seqs", "64", "--max-tokens", "32"], "--max-tokens 32"),
                      ([str(csv), "--replicas", "0"], "--replicas"), ([str(csv), "--edge"], "hosted API"),
                      ([str(tmp_path / "missing.csv")], "missing.csv"), ([str(csv), "--format", "xml"], "--format")):
        r = runner.invoke(app, ["replay", *args])
        assert r.exit_code == 2 and msg in r.output, (args, r.output)


def test_the_engine_without_segment_records_serves_the_same_calls(strong):
    """replay runs the engine with record_segments=False (it reads only the call records): the calls are the same
    bytes, no segment is packed, and `run()`, whose replica frame needs the segments, refuses."""
    from specagent.simulator.capacity.fleet_build import build_fleet, request_tasks
    from specagent.simulator.fleet.config import FleetError

    trace = synthetic_requests(400, 4.0, 256, 64, seed=5)
    fleet = build_fleet(None, strong, 0, 2, weight_mode="union")
    sims = {rec: request_tasks(trace).simulation(fleet, trace.arrival_s, 0.0, record_segments=rec) for rec in (True, False)}
    for sim in sims.values():
        sim.advance(sim.horizon)
    assert len(sims[True]._calls) > 0 and bytes(sims[True]._calls) == bytes(sims[False]._calls)
    assert len(sims[True]._seg) > 0 and len(sims[False]._seg) == 0
    with pytest.raises(FleetError, match="record_segments=False"):
        request_tasks(trace).simulation(fleet, trace.arrival_s, 0.0, record_segments=False).run()
