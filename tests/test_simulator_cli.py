"""`specagent predict`, `simulate` and `predictor validate` through typer's CliRunner."""

from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.traces import default_workload_path, load_trajectories, save_trajectories

runner = CliRunner()


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("trace") / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:12], p)
    return p


def test_predict_writes_outputs_and_shows_assumptions(small_trace, tmp_path):
    out = tmp_path / "out"
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(out), "--strategies", "strongonly,specagent,weakonly",
                            "--details"])
    assert r.exit_code == 0, r.output
    for text in ("Bottom line per task", "Relative to Strong-only", "add --phases", "Assumptions", "calibrated to the published", "K=4"):
        assert text in r.output
    assert "wrote " in " ".join(r.output.rstrip().splitlines()[-3:])  # the answer still comes last (long tmp paths wrap)
    assert "Per task, batch 1" in r.output.split("Assumptions", 1)[1]
    wall = json.loads((out / "summary.json").read_text())["summary"][1]["wall_time_s_rel"]
    assert f"specagent wall {wall:.3f} = {100 * wall:.1f}% of Strong-only" in " ".join(r.output.split())
    assert "Memory traffic by phase" not in r.output  # phase tables only with --phases
    assert r.output.index("Bottom line per task") < r.output.index("Relative to Strong-only")  # the bottom line first
    frame = pd.read_parquet(out / "per_trajectory.parquet")
    assert set(frame["strategy"]) == {"strongonly", "specagent", "weakonly"} and len(frame) == 36
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["strategy"]: r for r in summary["summary"]}
    assert rows["strongonly"]["total_bytes_read_rel"] == 1.0
    assert summary["assumptions"]["setting"]["weight_mode"] == "union"
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temp files


def test_predict_is_byte_identical_for_the_same_seed(small_trace, tmp_path):
    for name in ("a", "b"):
        r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path / name), "--strategies", "specagent", "--seed", "3"])
        assert r.exit_code == 0, r.output
    for f in ("per_trajectory.parquet", "summary.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_predict_json_and_active_mode(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent",
                            "--weight-mode", "active", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["assumptions"]["setting"]["weight_mode"] == "active"
    assert {row["strategy"] for row in d["summary"]} == {"strongonly", "specagent"}


def test_predict_edge_setting_reports_api_cost(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent", "--edge", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["strategy"]: row for row in json.loads(r.output)["summary"]}
    assert rows["strongonly"]["api_usd"] > rows["specagent"]["api_usd"] > 0
    assert "RTX 5090" in json.loads(r.output)["assumptions"]["setting"]["weak"]


def test_bad_inputs_get_clear_errors(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--trace", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "missing.jsonl" in r.output
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "--strategies", "nope"])
    assert r.exit_code == 2 and "--strategies: unknown strategy 'nope'" in r.output
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "--strong-dtype", "bf16"])
    assert r.exit_code == 2 and "does not fit" in r.output and "GPU" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": 1}\n')
    r = runner.invoke(app, ["simulate", "specagent", "--trace", str(bad)])
    assert r.exit_code == 2 and "bad.jsonl" in r.output


def test_simulate_one_strategy_json(small_trace):
    r = runner.invoke(app, ["simulate", "specagent", "--trace", str(small_trace), "--k", "2", "--review", "every_chunk", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["totals"]["reviews"] > 0 and d["totals"]["strong_calls"] >= d["totals"]["reviews"]


def test_a_scenario_of_the_retired_simpy_engine_runs_as_analytic(small_trace, tmp_path):
    """`pricing_engine = "simpy"` in a file written when it was a choice is read as analytic, with a warning: the
    figures are the same (the simpy model is the analytic engine's oracle: test_simulator_invariants.py); the flag is
    gone."""
    from specagent.common.errors import DeprecatedSpelling

    old = tmp_path / "old.toml"
    old.write_text('pricing_engine = "simpy"\n', encoding="utf-8")
    args = ["simulate", "exactmatch", "--trace", str(small_trace), "--json"]
    with pytest.warns(DeprecatedSpelling, match="pricing_engine = 'simpy' is read as 'analytic'"):
        r = runner.invoke(app, [*args, "--scenario", str(old)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["totals"] == json.loads(runner.invoke(app, args).output)["totals"]
    r = runner.invoke(app, [*args, "--pricing-engine", "simpy"])
    assert r.exit_code == 2 and "--pricing-engine" in r.output


def test_predictor_validate_reports_both_modes(small_trace, tmp_path):
    r = runner.invoke(app, ["predictor", "validate", "--trace", str(small_trace), "--synthetic", "5", "--strategies", "specagent",
                            "-o", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "p.json").read_text())
    assert {row["weight_mode"] for row in rows} == {"union", "active"}
    assert {row["workload"] for row in rows} >= {"small.jsonl", "synthetic:tau2_airline", "synthetic:mcp_tool_servers"}
    assert "|err|" in r.output and "|err| = |predicted - accounted|" in r.output


def test_help_explains_the_strategies():
    r = runner.invoke(app, ["predict", "--help"])
    assert r.exit_code == 0
    for s in ("strongonly", "specagent", "exactmatch", "router", "collab"):
        assert s in r.output


def test_simulate_synthetic_fast_path_equals_the_same_workload_read_from_a_file(tmp_path):
    """--synthetic (columns, lockstep planner) and `traces synth` + --trace (validated objects) agree exactly."""
    p = tmp_path / "synth.parquet"
    r = runner.invoke(app, ["traces", "synth", "--profile", "tau2_airline", "-n", "150", "--seed", "4", "-o", str(p)])
    assert r.exit_code == 0, r.output
    totals = []
    for args in (["--synthetic", "tau2_airline", "--trajectories", "150"], ["--trace", str(p)]):
        r = runner.invoke(app, ["simulate", "specagent", *args, "--seed", "4", "--json"])
        assert r.exit_code == 0, r.output
        totals.append(json.loads(r.output)["totals"])
    assert totals[0] == totals[1]
    assert totals[0]["rejections"] > 0 and totals[0]["reviews"] > totals[0]["rejections"]
    r = runner.invoke(app, ["simulate", "--synthetic", "tau2_airline", "--trace", str(p)])
    assert r.exit_code != 0 and "not both" in r.output
    r = runner.invoke(app, ["simulate", "--synthetic", "no_such_profile"])
    assert r.exit_code != 0 and "no shipped profile" in r.output


def test_predict_bottom_line_is_the_summary_per_task_at_each_gpu_price(small_trace, tmp_path):
    """s/task, GPU-s by pool and $/task recomputed by hand from summary.json's totals and the deployments."""
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent",
                            "--price", "h20=2,h200=9", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    tot = {row["strategy"]: row for row in d["summary"]}
    line = {row["strategy"]: row for row in d["bottom_line"]}
    for strat in ("strongonly", "specagent"):
        t, b = tot[strat], line[strat]
        n = t["trajectories"]
        assert n == 12
        assert b["wall_s_per_task"] == pytest.approx(t["wall_time_s"] / n)
        assert b["strong_gpu_s_per_task"] == pytest.approx(t["strong_model_time_s"] / n * 8)  # 8 H20s per Strong replica
        assert b["weak_gpu_s_per_task"] == pytest.approx(t["weak_model_time_s"] / n * 1)
        gpu_s = b["strong_gpu_s_per_task"] + b["weak_gpu_s_per_task"]
        assert b["gpu_h_per_task"] == pytest.approx(gpu_s / 3600)
        assert b["usd_per_task"] == pytest.approx(gpu_s * 2.0 / 3600)  # --price h20=2 applies to both pools
    # the saving shows per task (0.51x on these 12 tasks with the calibrated acceptance; the figures above are exact)
    assert line["specagent"]["strong_gpu_s_per_task"] < 0.6 * line["strongonly"]["strong_gpu_s_per_task"]
    assert d["assumptions"]["prices"]["h20"]["source"].startswith("user-supplied")


def test_predict_formats_brief_and_80_columns(small_trace, tmp_path):
    base = ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent"]
    r = runner.invoke(app, base + ["--format", "csv"])
    assert r.exit_code == 0, r.output
    frame = pd.read_csv(io.StringIO(r.output), index_col="strategy")
    assert list(frame.index) == ["strongonly", "specagent"] and frame.loc["strongonly", "wall_time_s_rel"] == 1.0
    assert frame.loc["specagent", "usd_per_task"] < frame.loc["strongonly", "usd_per_task"]
    for flags in ([], ["--brief"]):  # the answer is the default view; --brief, kept for scripts, is the same
        r = runner.invoke(app, base + flags, env={"COLUMNS": "80"})
        assert r.exit_code == 0, r.output
        assert "Per task, batch 1" in r.output and "specagent vs strongonly:" in r.output and "Assumptions" not in r.output
        assert len(r.output.splitlines()) <= 24  # one screen, the not-calibrated-here warning included
    r = runner.invoke(app, base + ["--details", "--phases"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and "Memory traffic by phase" in r.output
    assert "…" not in r.output and all(len(line) <= 80 for line in r.output.splitlines())
    r = runner.invoke(app, base + ["--quiet"])
    assert r.exit_code == 0 and r.output == "" and (tmp_path / "summary.json").is_file()
    for bad, msg in ((["--format", "xml"], "--format: expected one of table, json, csv"),
                     (["--price", "nosuchgpu=1"], "'nosuchgpu' is not a GPU type"), (["--json", "--format", "csv"], "not both")):
        r = runner.invoke(app, base + bad)
        assert r.exit_code == 2 and msg in r.output, r.output


def test_predict_hardware_sets_both_pools(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent",
                            "--hardware", "h200", "--weak-hardware", "h20", "--json"])
    assert r.exit_code == 0, r.output
    setting = json.loads(r.output)["assumptions"]["setting"]
    assert "8x NVIDIA H200" in setting["strong"] and "1x NVIDIA H20 " in setting["weak"]


def test_predict_edge_shows_api_dollars_and_absolute_phases_in_human_units_at_80_columns(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies", "specagent", "--edge",
                            "--details", "--phases"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output and all(len(line) <= 80 for line in r.output.splitlines())
    assert "API $" in r.output and "S GPU·s" not in r.output
    mem = r.output[r.output.index("Memory traffic by phase"):r.output.index("Wall time by phase")]
    assert re.search(r"\d+(\.\d+)? [TGP]B", mem), mem  # human units, per task
    assert "always 0, left out:" in mem and "user" not in mem.split("always 0, left out:")[0].split("┃")[-1]
