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
