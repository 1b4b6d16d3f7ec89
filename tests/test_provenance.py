"""Stored runs carry what they were priced with (simulator/provenance.py), and reports use it.

`predict` stores a copy and the SHA-256 of each model config, GPU profile and serving-engine
profile; a report of that run is byte-identical after a profile is edited (it prices from the
copies), and the report command says which file changed. A run stored without copies is
priced from disk, which the same edit visibly changes: the check can fail.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.profile import load_hardware
from specagent.hardware.serving_engine import load_engine
from specagent.simulator.provenance import InputsError, changed_inputs, record_inputs, setting_from_inputs
from specagent.simulator.scenario import Scenario
from specagent.traces import default_workload_path, load_trajectories, save_trajectories

runner = CliRunner()


@pytest.fixture()
def run_dir(tmp_path):
    """A predict run on a GPU profile and an engine profile of its own (files in tmp_path), with its report."""
    trace = tmp_path / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:4], trace)
    hw = tmp_path / "mygpu.toml"
    hw.write_text(open(load_hardware("h200").path, encoding="utf-8").read(), encoding="utf-8")
    eng = tmp_path / "myengine.toml"
    eng.write_text(open(load_engine("vllm").path, encoding="utf-8").read(), encoding="utf-8")
    out = tmp_path / "run"
    r = runner.invoke(app, ["predict", "--trace", str(trace), "--strategies", "specagent", "-o", str(out),
                            "--weak-hardware", str(hw), "--strong-hardware", str(hw), "--strong-gpus", "4",
                            "--weak-serving-engine", f"{eng}:eager", "--strong-serving-engine", str(eng)])
    assert r.exit_code == 0, r.output
    return out, hw, eng


def _report(summary, html):
    r = runner.invoke(app, ["report", str(summary), "-o", str(html), "--no-images"])
    assert r.exit_code == 0, r.output
    return html.read_bytes(), r.output


def test_a_report_of_an_old_run_is_byte_identical_after_a_profile_edit(run_dir, tmp_path):
    out, hw, eng = run_dir
    doc = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert {k for k in doc["inputs"]["strong"]} == {"model", "hardware", "engine"}
    assert doc["inputs"]["strong"]["hardware"]["path"] == str(hw) and doc["inputs"]["weak"]["engine"]["path"] == str(eng)
    before, said = _report(out / "summary.json", tmp_path / "a.html")
    assert "changed since the run" not in said
    # without its copies, the same run is priced from disk (the edit below must show there: the check can fail)
    bare = dict(doc)
    bare.pop("inputs")
    (out / "bare.json").write_text(json.dumps(bare), encoding="utf-8")
    bare_before, _ = _report(out / "bare.json", tmp_path / "b.html")
    text = hw.read_text(encoding="utf-8")
    edited = text.replace("bandwidth_tb_s = { value = 4.8", "bandwidth_tb_s = { value = 2.4")
    assert edited != text
    hw.write_text(edited, encoding="utf-8")
    eng_text = eng.read_text(encoding="utf-8")
    eng_edited = re.sub(r"(\[per_pass\.iteration_us\]\s*value = )[0-9.e+-]+", r"\g<1>999.0", eng_text, count=1)
    assert eng_edited != eng_text
    eng.write_text(eng_edited, encoding="utf-8")
    after, said = _report(out / "summary.json", tmp_path / "a2.html")
    assert after == before
    assert said.count("changed since the run") == 4  # weak and strong, GPU and engine profile
    bare_after, _ = _report(out / "bare.json", tmp_path / "b2.html")
    assert bare_after != bare_before  # priced from disk: the edit shows


def test_the_stored_copies_rebuild_the_run_setting_exactly(run_dir):
    out, hw, eng = run_dir
    doc = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    sc = Scenario.from_dict(doc["scenario"])
    rebuilt = setting_from_inputs(sc, doc["inputs"])
    assert rebuilt == sc.setting(fit_context=None)  # the same objects the run priced with
    assert rebuilt.weak.serving_engine.cuda_graphs.value is False  # the :eager mode is re-applied to the copy
    assert record_inputs(rebuilt) == doc["inputs"] and changed_inputs(doc["inputs"]) == []
    damaged = json.loads(json.dumps(doc["inputs"]))
    damaged["strong"]["hardware"]["text"] += "\n# edited"
    with pytest.raises(InputsError, match="strong.hardware: the stored copy does not match its sha256"):
        setting_from_inputs(sc, damaged)
    hw.unlink()
    assert any("is gone" in line for line in changed_inputs(doc["inputs"]))
    assert setting_from_inputs(sc, doc["inputs"]).strong.hardware == rebuilt.strong.hardware  # no file needed


def test_fleet_commands_record_each_file_once_with_its_copy(tmp_path):
    """plan.json's `inputs` and a sweep folder's config.json `priced_with`: per role the model config and engine
    profile, per GPU type tried its profile, each a copy with its SHA-256; an API Strong model has none."""
    import hashlib

    from specagent.simulator.provenance import FLEET_SCHEMA, record_fleet_inputs
    from specagent.simulator.jobs.sweep import config_record
    from specagent.simulator.jobs.sweep import SweepRequest

    rec = record_fleet_inputs(Scenario(), ["h200", "h20", "h200"])
    assert rec["schema"] == FLEET_SCHEMA and list(rec["hardware"]) == ["h20", "h200"]
    for r in (rec["weak"]["model"], rec["strong"]["engine"], rec["hardware"]["h20"]):
        text = open(r["path"], encoding="utf-8").read()
        assert r["text"] == text and r["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert rec["weak"]["model"]["name"] == load_model_spec(Scenario().weak.model).name
    assert record_fleet_inputs(Scenario.load("edge"), ["h20"])["strong"] is None  # priced by its API's figures
    cfg = SweepRequest.from_dict({"grid": {"strategy": ["strongonly"], "rate": [1.0], "fleet": ["a"], "hardware": ["h20+h200"]},
                                 "fleet": {"a": {}}}, "sweep.toml")
    assert config_record(cfg)["priced_with"] == json.loads(json.dumps(record_fleet_inputs(cfg.scenario, ["h20", "h200"])))
