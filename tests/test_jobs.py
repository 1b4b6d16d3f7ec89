"""The replay, sweep, study and sensitivity jobs (#50) as Python callers see them: a Request checked field by field, run
into a Result whose `to_dict()` is what the command prints; and the pieces of the jobs layer they share (the generated
flags' list types, the workload read with progress, a job's progress drawn as a bar)."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli.app import app
from specagent.simulator.jobs.base import JobError, Provenance, Step, read_workload
from specagent.simulator.scenario import Scenario

runner = CliRunner()

SWEEP = {"sweep": {"tasks": 6, "seed": 2, "steady": False},
         "grid": {"strategy": ["strongonly"], "rate": [0.5], "fleet": ["f"], "hardware": ["h200"]},
         "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}


# ------------------------------------------------------------------------------------------------ sweep
def test_a_sweep_request_read_from_its_file_keeps_how_it_runs(tmp_path):
    from specagent.simulator.jobs.sweep import SweepRequest

    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\ntasks = 6\n[grid]\nstrategy = ["strongonly"]\nrate = [0.5]\nfleet = ["f"]\nhardware = ["h20"]\n'
                   '[fleet.f]\nweak_replicas = 1\nstrong_replicas = 1\n')
    req = SweepRequest(config=cfg, workers=2, force=True, strong_hardware="h200").read()
    assert (req.workers, req.force, req.config, req.tasks) == (2, True, cfg, 6)
    assert req.grid["hardware"] == [f"{Scenario().weak.hardware}+h200"]  # the per-pool GPU replaces [grid].hardware
    given = SweepRequest.from_dict(SWEEP)
    assert given.read() is given  # no file: itself


@pytest.mark.parametrize("fields, field, said", [
    ({"workers": 0}, "workers", "expected a count in [1,"),
    ({"backend": "nope"}, "backend", "expected one of local, ray, got 'nope'"),
    ({"ray_address": "localhost:6379", "backend": "local"}, "ray_address", "for `backend` ray"),
    ({"weak_hardware": "h2000"}, "weak_hardware", "h2000"),
    ({"grid": {}}, "config", "needs a config file"),
])
def test_a_bad_sweep_request_names_its_field(fields, field, said):
    from specagent.simulator.jobs.sweep import SweepRequest

    with pytest.raises(JobError) as err:
        replace(SweepRequest.from_dict(SWEEP), **fields).check()
    assert err.value.field == field and said in str(err.value)


def test_the_sweep_result_is_what_the_command_prints(tmp_path):
    from specagent.simulator.jobs.sweep import SweepRequest, run

    steps: list[Step] = []
    res = run(SweepRequest.from_dict(SWEEP), tmp_path / "out", progress=steps.append)
    assert res.to_dict() == {"cells": 1, "skipped_existing": 0, "ran": 1, "out": str(tmp_path / "out")}
    assert [(s.what, s.done, s.total) for s in steps] == [("sweep", 0, 1), ("sweep", 1, 1)]
    (path,) = res.write(tmp_path / "copy")
    pd.testing.assert_frame_equal(pd.read_parquet(path), res.rows())
    assert list(res.table()["strategy"]) == ["strongonly"]
    with pytest.raises(JobError, match="needs an output folder"):
        run(SweepRequest.from_dict(SWEEP))  # no config file: no folder beside it


# ------------------------------------------------------------------------------------------------ study balance
def test_the_balance_request_checks_its_fields_and_takes_the_pools_gpu():
    from specagent.simulator.jobs.study import DEFAULT_GPUS, MAX_STUDY_TASKS, BalanceRequest

    assert BalanceRequest().gpus() == DEFAULT_GPUS and BalanceRequest(gpu=("h100",)).gpus() == ("h100",)
    given = BalanceRequest(scenario=Scenario().override({"strong.hardware": "h100"}),
                           provenance=Provenance(given=frozenset({"strong.hardware"})))
    assert given.gpus() == ("h100",)
    for bad, field, said in (({"rates": (0.1, float("nan"))}, "rates", "got nan"), ({"rates": ()}, "rates", "at least one"),
                             ({"tasks": MAX_STUDY_TASKS + 1}, "tasks", "tasks per rate"), ({"gpu": ("h2000",)}, "gpu", "h2000"),
                             ({"search_gpus": (0,)}, "search_gpus", "whole numbers >= 1")):
        with pytest.raises(JobError) as err:
            BalanceRequest(**bad).check()
        assert err.value.field == field and said in str(err.value), bad
    with pytest.raises(JobError, match="`scenario.strong.hardware` fixes one") as err:
        replace(given, gpu=("h20",)).check()
    assert err.value.field == "gpu"


def test_list_flags_convert_their_items_and_name_the_flag(tmp_path):
    """`--rates 0.5,x` and `--search-gpus 1.5` fail naming the flag; a list flag not given keeps the field's default."""
    for args, said in ((["--rates", "0.5,x"], "--rates: expected numbers (one, or a comma list), got 'x'"),
                       (["--search-gpus", "1.5"], "--search-gpus: expected whole numbers (one, or a comma list), got '1.5'"),
                       (["--gpu", "h20", "--strong-hardware", "h100"], "--gpu: lists Strong GPU types to study, while "
                                                                      "--strong-hardware fixes one")):
        r = runner.invoke(app, ["study", "balance", *args])
        assert r.exit_code == 2 and said in r.output, r.output
    from specagent.cli.requests import job_flags
    from specagent.simulator.jobs.study import BalanceRequest

    rates = next(f for f in job_flags(BalanceRequest) if f.path == "rates")
    assert (rates.item, rates.default) == (float, (0.05, 0.2, 0.8, 3.2, 12.8))


# ------------------------------------------------------------------------------------------------ shared pieces
def test_the_workload_is_read_with_its_progress(tmp_path):
    from specagent.traces import default_workload_path, load_trajectories, save_trajectories

    p = tmp_path / "small.parquet"  # read at once: one step (a JSONL trace tells one per MB read)
    save_trajectories(load_trajectories(default_workload_path())[:5], p)
    steps: list[Step] = []
    trajs, where, name = read_workload(Scenario().override({"workload.trace": str(p)}), steps.append)
    assert (len(trajs), name) == (5, "small.parquet")
    assert [(s.what, s.done, s.total) for s in steps] == [("reading small.parquet", p.stat().st_size, p.stat().st_size)]


def test_a_jobs_steps_draw_one_bar_per_stage(monkeypatch):
    from specagent.cli import progress as progress_cli

    drawn: list[tuple] = []

    class Bar:
        def __init__(self, total, what, **_):
            self.what = what
            drawn.append(("open", what, total))

        def __enter__(self):
            return lambda k: drawn.append(("advance", self.what, k))

        def __exit__(self, *exc):
            drawn.append(("close", self.what))

    monkeypatch.setattr(progress_cli, "progress_bar", Bar)
    with progress_cli.job_progress() as on_step:
        for step in (Step("a", 0, 10), Step("a", 4, 10), Step("a", 10, 10), Step("b", 0, None), Step("c", 3, 5)):
            on_step(step)
    assert drawn == [("open", "a", 10), ("advance", "a", 4), ("advance", "a", 6), ("close", "a"),
                     ("open", "c", 5), ("advance", "c", 3), ("close", "c")]


def test_a_python_caller_gets_plain_progress_lines_and_a_heartbeat():
    """`jobs.progress.printed()`: a line per stage step done (the last always), none for a stage without a total, and a
    heartbeat while a step is slow, each with `status` (#50: heartbeats belong to the job, not to the CLI)."""
    import io
    import time

    from specagent.simulator.jobs.progress import printed

    out = io.StringIO()
    with printed(status=lambda: "3 answered", heartbeat_s=0.05, stream=out) as on_step:
        on_step(Step("reading t.jsonl", 0, 2))
        on_step(Step("reading t.jsonl", 2, 2))
        on_step(Step("pricing", 0, None))
        on_step(Step("serving", 0, 4))
        time.sleep(0.2)
        on_step(Step("serving", 4, 4))
    lines = out.getvalue().splitlines()
    assert lines[0] == "reading t.jsonl 2/2 · 0m00s · 3 answered"
    assert not any(line.startswith("pricing") for line in lines)
    beats = [line for line in lines if line.startswith("serving 0/4")]
    assert len(beats) >= 2 and lines[-1] == "serving 4/4 · 0m00s · 3 answered"


def test_sensitivity_from_python_is_what_the_command_writes(tmp_path):
    """`study sensitivity`'s sensitivity.json is `run(SensitivityRequest(scenario)).to_dict()`."""
    from specagent.simulator.jobs.sensitivity import SensitivityRequest, run
    from specagent.traces import default_workload_path, load_trajectories, save_trajectories

    p = tmp_path / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:6], p)
    r = runner.invoke(app, ["study", "sensitivity", "--trace", str(p), "-o", str(tmp_path / "s"), "--json"])
    assert r.exit_code == 0, r.output
    res = run(SensitivityRequest(scenario=Scenario().override({"workload.trace": str(p)})))
    (path,) = res.write(tmp_path / "py")
    assert path.read_bytes() == (tmp_path / "s" / "sensitivity.json").read_bytes()
    assert json.loads(path.read_text())["workload"] == "small.jsonl"
