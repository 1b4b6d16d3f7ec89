"""`specagent replay`: a request trace served at its timestamps on the Strong deployment, vllm-bench-serve figures."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.jobs.replay import replay
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
                 "Median TPOT (ms):", "P99 E2EL (ms):", "Request throughput (req/s):", "8 GPUs", "served in 3 chunks"):
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
    assert d["completed"] == 1500 and d["gpus"] == 8 and d["usd_per_hour"] == pytest.approx(8 * 1.043)  # no Weak pool priced
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
    from specagent.simulator.fleet.config import engine_scheduler
    from specagent.simulator.jobs.replay import scheduler_limits
    one = replay(tr, strong, scheduler=scheduler_limits(strong, 4, None)).stats()
    assert engine_scheduler(strong).max_num_seqs > 4 and one["p99_e2e_s"] > 2 * base["p99_e2e_s"]


def test_replay_errors_name_the_flag_or_field(tmp_path):
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(50, 3.0, seed=4))
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n10,5\n", encoding="utf-8")
    for args, msg in (([str(lengths)], "no arrival times"), ([str(csv), "--max-seqs", "64", "--max-tokens", "32"], "--max-tokens: the token budget per iteration (32)"),
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
    calls = {rec: sim.call_records() for rec, sim in sims.items()}
    assert len(calls[True]) > 0 and calls[True].tobytes() == calls[False].tobytes()
    # the fleet builder's reader serves the same calls
    assert request_tasks(trace).call_records(fleet, trace.arrival_s).tobytes() == calls[True].tobytes()
    assert len(sims[True]._seg) > 0 and len(sims[False]._seg) == 0
    with pytest.raises(FleetError, match="record_segments=False"):
        request_tasks(trace).simulation(fleet, trace.arrival_s, 0.0, record_segments=False).run()


# ------------------------------------------------------------------------------------------------ the job (#50)
def test_the_job_from_python_is_what_the_command_prints(tmp_path):
    """`specagent replay --json` prints `run(ReplayRequest(...)).to_dict()`: the CLI builds nothing of its own."""
    from specagent.simulator.jobs.replay import ReplayRequest, run

    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(300, 3.0, seed=6))
    r = runner.invoke(app, ["replay", str(csv), "--json", "--replicas", "2", "--max-seqs", "32", "--price", "h20=2"])
    assert r.exit_code == 0, r.output
    res = run(ReplayRequest(trace=csv, replicas=2, max_seqs=32, price=("h20=2",)))
    assert json.loads(r.output) == json.loads(json.dumps(res.to_dict()))
    assert res.to_dict()["usd_per_hour"] == pytest.approx(2 * 8 * 2.0) and res.scheduler.max_num_seqs == 32
    (path,) = res.write(tmp_path / "out")
    assert json.loads(path.read_text()) == json.loads(json.dumps(res.to_dict()))


@pytest.mark.parametrize("fields, field, said", [
    ({"replicas": 0}, "replicas", "expected a whole number in [1, 1,000,000], got 0"),
    ({"burstiness": 2.0}, "burstiness", "shapes the gaps of `request_rate`; give `request_rate` too"),
    ({"price": ("h999=3",)}, "price", "'h999' is not a GPU type"),
    ({"trace": None}, "trace", "a request trace to replay is required"),
])
def test_a_bad_request_names_its_field(tmp_path, fields, field, said):
    from specagent.simulator.jobs.base import JobError
    from specagent.simulator.jobs.replay import ReplayRequest

    with pytest.raises(JobError, match=None) as err:
        ReplayRequest(**{"trace": tmp_path / "r.csv", **fields}).check()
    assert err.value.field == field and said in str(err.value)


def test_a_job_error_names_the_flags_of_the_fields_it_mentions():
    """A JobError's message names other fields as `name`; the command line shows their flags instead."""
    from specagent.cli.requests import error_text
    from specagent.simulator.jobs.base import JobError
    from specagent.simulator.jobs.replay import ReplayRequest

    assert error_text(ReplayRequest, JobError("shapes `request_rate`, not `nope`", field="burstiness")) == \
        "--burstiness: shapes --request-rate, not `nope`"
    assert error_text(ReplayRequest, JobError("no field")) == "no field"


def test_a_scenario_error_found_by_the_job_names_the_flag_or_the_files_key(tmp_path):
    """The deployment is resolved inside the job; its errors still name --strong-gpus (a flag given) or the scenario
    file's key (a value the file gave), as `resolve` names them for the commands not yet on the jobs layer."""
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(20, 3.0, seed=4))
    r = runner.invoke(app, ["replay", str(csv), "--strong-hardware", "h2000"])
    assert r.exit_code == 2 and "--strong-hardware" in r.output and "Traceback" not in r.output, r.output
    sc = tmp_path / "s.toml"
    sc.write_text('[strong]\nhardware = "h2000"\n', encoding="utf-8")
    r = runner.invoke(app, ["replay", str(csv), "--scenario", str(sc)])
    assert r.exit_code == 2 and f"{sc}: strong.hardware" in r.output and "--strong-hardware" not in r.output, r.output


def test_interrupted_rows_leave_the_earlier_file(tmp_path):
    """`rows` streams to a temp file beside the output; an interruption removes it and the earlier output stays."""
    from specagent.simulator.jobs.replay import ReplayRequest, run

    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(600, 3.0, seed=4))
    out = tmp_path / "rows.parquet"
    run(ReplayRequest(trace=csv, chunk=200, overlap=50), rows=out)
    before = out.read_bytes()
    steps = []

    def stop(step):
        steps.append(step)
        if step.done >= 200:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(ReplayRequest(trace=csv, chunk=200, overlap=50, max_seqs=8), progress=stop, rows=out)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "rows.parquet"]
    assert steps[0].what == "replaying 600 requests" and (steps[0].done, steps[0].total) == (0, 600)
