"""The predict job (simulator/jobs/predict.py): Python callers get what `specagent predict` prints, from one place."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specagent.cli.app import app
from specagent.cli.requests import flag_of, job_flags
from specagent.simulator.jobs.base import JobError
from specagent.simulator.jobs.predict import PredictRequest, run
from specagent.simulator.scenario import Scenario

runner = CliRunner()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from specagent.traces import load_trajectories, save_trajectories
    from specagent.traces.io import default_workload_path

    p = tmp_path_factory.mktemp("w") / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:6], p)
    return p


def test_the_job_returns_the_bottom_line_intervals_and_verdict_the_command_prints(small, tmp_path):
    sc = Scenario().override({"workload.trace": str(small), "strategies": ("strongonly", "specagent"),
                              "uncertainty.draws": 20})
    result = run(PredictRequest(sc))
    out = tmp_path / "p"
    r = runner.invoke(app, ["predict", "--trace", str(small), "--strategies", "strongonly,specagent", "--draws", "20",
                            "--json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output)
    assert printed["bottom_line"] == json.loads(json.dumps(result.to_dict()["bottom_line"]))
    assert printed["intervals"]["verdict"] == result.verdict and result.verdict.startswith("specagent vs strongonly")
    assert set(result.bottom_line_intervals["strategy"]) == {"strongonly", "specagent"}
    stored = json.loads((out / "summary.json").read_text())
    assert stored["bottom_line"] == printed["bottom_line"] and "inputs" in stored


def test_request_fields_are_flags_with_their_defaults_in_one_place():
    flags = {f.path: f for f in job_flags(PredictRequest)}
    assert set(flags) == {"success", "price"} and flags["price"].default == ()
    assert flag_of(PredictRequest, "price") == "--price" and flag_of(PredictRequest, "acceptance_ranges") == "--acceptance-ranges"
    with pytest.raises(JobError) as e:
        PredictRequest(price=("nope=1",)).check()
    assert e.value.field == "price"
    r = runner.invoke(app, ["predict", "--price", "nope=1"])
    assert r.exit_code == 2 and r.output.startswith("error: --price:")


def test_a_workload_of_replies_only_predicts(tmp_path):
    """No tool call anywhere: SpecAgent makes no Strong call, so the ratios relative to SpecAgent are undefined and
    left out (they divided by zero)."""
    from specagent.traces import save_trajectories
    from specagent.traces.openai_chat import conversation_to_trajectory

    msgs = [{"role": "user", "content": "where is my order?"}, {"role": "assistant", "content": "It shipped yesterday."}]
    trajs = [conversation_to_trajectory({"messages": msgs, "task_id": f"t{k}"}, file="x", where=str(k)) for k in range(3)]
    p = tmp_path / "replies.jsonl"
    save_trajectories(trajs, p)
    result = run(PredictRequest(Scenario().override({"workload.trace": str(p), "uncertainty.draws": 10})))
    metrics = set(result.intervals.table["metric"])
    assert "wall_time_s_rel" in metrics and not any(m.startswith("strong_calls_rel_vs") for m in metrics)


def test_the_screens_python_gets_are_what_the_command_prints(small, tmp_path):
    """Issue #50: the answer and every --details table come from reports/screens/predict.py, which reads the Result; a
    notebook rendering them at the command's width sees the command's text, line for line (the files line aside)."""
    import io

    from specagent.cli import simulate
    from specagent.cli.console import SafeConsole
    from specagent.reports.screens import predict as screen

    sc = Scenario().override({"workload.trace": str(small), "strategies": ("strongonly", "specagent"),
                              "uncertainty.draws": 20})
    result = run(PredictRequest(sc))
    buf = io.StringIO()
    console = SafeConsole(file=buf, width=simulate.console.width)
    for part in (*screen.details(result, console), *screen.answer(result, console)):
        console.print(part)
    r = runner.invoke(app, ["predict", "--trace", str(small), "--strategies", "strongonly,specagent", "--draws", "20",
                            "--details", "-o", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    drawn = buf.getvalue()
    assert "Bottom line per task" in drawn and "Assumptions" in drawn and result.verdict.split(":")[0] in drawn
    assert r.stdout.startswith(drawn) and r.stdout[len(drawn):].startswith("wrote ")  # then the files line (wrapped)
