"""Per-GPU serving-engine terms follow the GPU, not its file name: a copy of a profile keeps them, an unknown GPU warns."""

from __future__ import annotations

import re
import warnings

import pytest

from specagent.costmodel.latency import latency_terms
from specagent.hardware.profile import HardwareProfileError, load_hardware, load_profile_file, shipped_profile_dir
from specagent.hardware.serving_engine import FittedTermsNotApplied
from specagent.simulator.scenario import DeploymentSpec, Scenario


def _copy(tmp_path, new_id: str, edit=lambda s: s):
    text = (shipped_profile_dir() / "h20.toml").read_text(encoding="utf-8")
    text = re.sub(r'(?m)^id = "h20"', f'id = "{new_id}"', text)
    text = re.sub(r"(?m)^aliases = .*$", "aliases = []", text)
    p = tmp_path / f"{new_id}.toml"
    p.write_text(edit(text), encoding="utf-8")
    return p


def _scenario(path) -> Scenario:
    return Scenario().replace(weak=DeploymentSpec(model="qwen3.5-4b", hardware=str(path), gpus=1, weight_dtype="bf16"),
                              strong=DeploymentSpec(model="qwen3.5-397b-a17b", hardware=str(path), gpus=8, weight_dtype="fp8"))


def _bandwidth(setting) -> float:
    return latency_terms(setting.weak).bandwidth_efficiency


def test_a_copy_under_another_id_keeps_the_fitted_terms(tmp_path):
    base = Scenario().setting()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FittedTermsNotApplied)
        copy = _scenario(_copy(tmp_path, "my_h20")).setting()
    assert _bandwidth(copy) == _bandwidth(base)
    assert base.weak.serving_engine.terms_key(copy.weak.hardware) == ("h20", "")


def test_terms_key_names_the_gpu_whose_terms_a_changed_copy_takes(tmp_path):
    edited = lambda s: s.replace("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = 4.1", 1)  # noqa: E731
    p = _copy(tmp_path, "other_h20", lambda s: 'terms_key = "h20"\n' + edited(s))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FittedTermsNotApplied)
        s = _scenario(p).setting()
    assert _bandwidth(s) == _bandwidth(Scenario().setting())


def test_an_unkeyed_gpu_is_a_located_warning_not_a_silent_fallback(tmp_path):
    p = _copy(tmp_path, "mystery", lambda s: s.replace("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = 4.1", 1))
    with pytest.warns(FittedTermsNotApplied, match=re.escape(str(p))) as rec:
        s = _scenario(p).setting()
    assert any("terms_key" in str(w.message) and "weak deployment" in str(w.message) for w in rec)
    assert _bandwidth(s) != _bandwidth(Scenario().setting())  # the engine-wide terms, said out loud


def test_a_terms_key_with_no_table_warns(tmp_path):
    p = _copy(tmp_path, "keyed", lambda s: 'terms_key = "b300"\n' + s)
    with pytest.warns(FittedTermsNotApplied, match="terms_key 'b300'"):
        _scenario(p).setting()


def test_a_shipped_gpu_without_fitted_terms_is_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FittedTermsNotApplied)
        Scenario().replace(weak=DeploymentSpec(model="qwen3.5-4b", hardware="h200", gpus=1, weight_dtype="bf16"),
                           strong=DeploymentSpec(model="qwen3.5-397b-a17b", hardware="h200", gpus=8, weight_dtype="fp8")).setting()


def test_a_bad_terms_key_is_a_located_error(tmp_path):
    p = _copy(tmp_path, "bad", lambda s: "terms_key = 3\n" + s)
    with pytest.raises(HardwareProfileError, match=r"bad\.toml: field 'terms_key'"):
        load_profile_file(p)
    assert load_hardware("h20").terms_key == ""
