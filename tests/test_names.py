"""Names that say what they are (issue 25): the serving engine, the pricing engine, the fleet backend.

Engine profiles are found through `--hardware-dir D` (in `D/engines/`), and one run reads
each engine profile file once (`EngineCatalog`, owned by the run: no process-wide cache).
"""

from __future__ import annotations

import json

import pytest

from typer.testing import CliRunner

import specagent.hardware.serving_engine as se
from specagent import simulator
from specagent.cli import app
from specagent.hardware.serving_engine import EngineCatalog, load_engine
from specagent.simulator.scenario import Scenario


def _my_engine(d, iteration_us=777.0):
    """vLLM's profile as `mine`, with its own per-iteration time, in d/engines/."""
    text = open(load_engine("vllm").path, encoding="utf-8").read()
    text = text.replace('id = "vllm"', 'id = "mine"').replace('name = "vLLM"', 'name = "Mine"').replace('"vllm-v1",', '"mine-v1",')
    start = text.index("[per_pass.iteration_us]\nvalue = ")
    end = text.index("\n", start + len("[per_pass.iteration_us]\n"))
    text = text[:start] + f"[per_pass.iteration_us]\nvalue = {iteration_us}" + text[end:]
    (d / "engines").mkdir(parents=True, exist_ok=True)
    (d / "engines" / "mine.toml").write_text(text, encoding="utf-8")


def test_engine_profiles_are_found_through_hardware_dir(tmp_path):
    _my_engine(tmp_path)
    r = CliRunner().invoke(app, ["roofline", "--json", "--model", "qwen3.5-4b", "--hardware", "h20", "--gpus", "1",
                                 "--serving-engine", "mine", "--hardware-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["fixed_iteration_s"] == pytest.approx(777.0e-6, rel=1e-12)
    r = CliRunner().invoke(app, ["roofline", "--json", "--model", "qwen3.5-4b", "--hardware", "h20", "--gpus", "1",
                                 "--serving-engine", "mine"])
    assert r.exit_code == 2 and "unknown serving engine 'mine'" in r.output  # not found without the folder
    setting = Scenario().override({"weak.serving_engine": "mine"}).setting([tmp_path])
    assert setting.weak.serving_engine.id == "mine" and setting.strong.serving_engine.id == "vllm"


def test_one_run_reads_each_engine_profile_once(tmp_path, monkeypatch):
    _my_engine(tmp_path)
    reads: list[str] = []
    real = se.load_engine_file
    monkeypatch.setattr(se, "load_engine_file", lambda p: reads.append(str(p)) or real(p))
    Scenario().override({"weak.serving_engine": "mine", "strong.serving_engine": "vllm:eager"}).setting([tmp_path])
    assert sorted(reads) == sorted(set(reads)) and len(reads) == len(EngineCatalog.for_hardware_dirs([tmp_path]).profiles())
    reads.clear()
    _my_engine(tmp_path, iteration_us=5.0)  # an edited profile is read afresh by the next run
    s = Scenario().override({"weak.serving_engine": "mine"}).setting([tmp_path])
    assert float(s.weak.serving_engine.iteration_us.value) == 5.0 and reads


def test_the_fleet_backend_is_not_called_an_engine():
    assert simulator.FLEET_BACKEND is simulator.ENGINE  # the old name, for one release
    assert isinstance(simulator.FLEET_BACKEND.compiled, bool)
    assert "pricing_engine" in Scenario().to_dict() and "serving_engine" in Scenario().to_dict()["strong"]
    assert "engine" not in Scenario().to_dict() and "engine" not in Scenario().to_dict()["strong"]


def test_deployment_engine_is_the_old_name_of_serving_engine():
    """Deployment.engine (attribute and keyword) reads and sets serving_engine for one release, with a warning."""
    import dataclasses

    from specagent.common.errors import DeprecatedSpelling
    from specagent.costmodel.deployment import Deployment
    from specagent.costmodel.model_spec import load_model_spec
    from specagent.hardware.profile import load_hardware

    dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h20"), serving_engine=load_engine("sglang"))
    assert "engine" not in {f.name for f in dataclasses.fields(Deployment)}
    with pytest.warns(DeprecatedSpelling, match="Deployment.engine is now Deployment.serving_engine"):
        assert dep.engine is dep.serving_engine
    with pytest.warns(DeprecatedSpelling):
        old = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h20"), engine=load_engine("ideal"))
    assert old.serving_engine.id == "ideal"
    with pytest.raises(TypeError, match="give serving_engine or its old spelling engine, not both"):
        dataclasses.replace(dep, engine=load_engine("vllm"))  # replace passes serving_engine as well
    assert dataclasses.replace(dep, gpus=1).serving_engine is dep.serving_engine
