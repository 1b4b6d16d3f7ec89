"""CLI: import, stats (table and --json), fit, synth determinism, profiles, error exit codes."""

import json

from typer.testing import CliRunner

from specagent.cli.traces import app
from specagent.traces.io import data_path, load_trajectories

runner = CliRunner()


def test_import_stats_fit_synth(tmp_path):
    out = tmp_path / "a.parquet"
    r = runner.invoke(app, ["import", "tau2", str(data_path("tau2_airline_sample.json")), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert len(load_trajectories(out)) == 3
    r = runner.invoke(app, ["stats", str(out), "--json"])
    s = json.loads(r.output)
    assert s["trajectories"] == 3 and s["steps"] == 56
    r = runner.invoke(app, ["stats", str(out)])
    assert r.exit_code == 0 and "steps per task" in r.output
    prof = tmp_path / "p.toml"
    assert runner.invoke(app, ["fit", str(out), "-o", str(prof), "--name", "mine"]).exit_code == 0
    a, b = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    for f in (a, b):
        r = runner.invoke(app, ["synth", "--profile", str(prof), "-n", "20", "--seed", "0", "-o", str(f)])
        assert r.exit_code == 0, r.output
    assert a.read_bytes() == b.read_bytes() and len(load_trajectories(a)) == 20


def test_import_openai_and_profiles(tmp_path):
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["import", "openai", str(data_path("openai_chat_sample.jsonl")), "-o", str(out)])
    assert r.exit_code == 0 and len(load_trajectories(out)) == 3
    r = runner.invoke(app, ["profiles", "--json"])
    names = [p["name"] for p in json.loads(r.output)]
    assert {"tau2_airline", "tau2_telecom", "long_customer_service", "everyday_life", "mcp_tool_servers"} <= set(names)


def test_bad_input_exit_code_and_skip_report(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = data_path("openai_chat_sample.jsonl").read_text().splitlines()[2]
    bad.write_text(good + "\n{broken\n")
    r = runner.invoke(app, ["import", "openai", str(bad), "-o", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 2 and "line 2" in " ".join(r.output.split())  # the console wraps long paths' lines
    r = runner.invoke(app, ["import", "openai", str(bad), "-o", str(tmp_path / "x.jsonl"), "--skip-bad"])
    assert r.exit_code == 0 and "skipped" in r.output and "line 2" in " ".join(r.output.split())  # wrapped likewise


def test_stats_fit_synth_from_python_are_what_the_commands_print_and_write(tmp_path):
    """#50: `traces stats`, `fit` and `synth` are jobs: a Python caller gets the command's JSON and the same file bytes,
    and a bad field is refused by the job, named by its field (the command names its flag)."""
    import pytest

    from specagent.simulator.jobs import trace_fit, trace_stats, trace_synth
    from specagent.simulator.jobs.base import JobError

    trace = tmp_path / "t.jsonl"
    assert runner.invoke(app, ["import", "tau2", str(data_path("tau2_airline_sample.json")), "-o", str(trace)]).exit_code == 0
    printed = json.loads(runner.invoke(app, ["stats", str(trace), "--json"]).output)
    assert trace_stats.run(trace_stats.StatsRequest(file=trace)).to_dict() == printed
    assert runner.invoke(app, ["fit", str(trace), "-o", str(tmp_path / "cli.toml"), "--name", "n"]).exit_code == 0
    res = trace_fit.run(trace_fit.FitProfileRequest(files=(trace,), out=tmp_path / "py.toml", name="n"))
    assert res.trajectories == 3 and (tmp_path / "py.toml").read_text() == (tmp_path / "cli.toml").read_text()
    assert runner.invoke(app, ["synth", "--profile", str(tmp_path / "py.toml"), "-n", "7", "--seed", "3",
                               "-o", str(tmp_path / "cli.jsonl")]).exit_code == 0
    syn = trace_synth.run(trace_synth.SynthRequest(profile=str(tmp_path / "py.toml"), out=tmp_path / "py.jsonl",
                                                   trajectories=7, seed=3))
    assert (tmp_path / "py.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes() and syn.steps > 7
    with pytest.raises(JobError) as e:
        trace_synth.run(trace_synth.SynthRequest(profile="tau2_airline", out=tmp_path / "x.jsonl", trajectories=0))
    assert e.value.field == "trajectories"
    with pytest.raises(JobError) as e:
        trace_fit.run(trace_fit.FitProfileRequest(files=(trace,), out=tmp_path / "p.txt"))
    assert e.value.field == "out" and "TOML" in str(e.value)
