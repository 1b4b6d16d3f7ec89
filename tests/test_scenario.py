"""The Scenario: defaults defined once, stored whole, read back exactly, validated on construction."""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.profile import load_hardware
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.scenario import (
    DEFAULT_TITLE, RESOLVER_DEFAULTS, SPEC_NAMES, DeploymentSpec, DoesNotFit, Scenario, ScenarioError, Workload, default_setting, edge_setting, shipped_path,
)
from specagent.simulator.protocol.setting import Setting
from specagent.simulator.strategies.catalog import DEFAULT_K, DEFAULT_REVIEW, STRATEGY_NAMES


def test_default_is_spec_section_2():
    """Qwen3.5-4B on 1×H20 in BF16 as Weak, Qwen3.5-397B-A17B on 8×H20 in FP8 as Strong (SPEC §2), resolved exactly."""
    s = Scenario().setting()
    h20 = load_hardware("h20")
    assert s.weak == Deployment(load_model_spec("qwen3.5-4b"), h20, gpus=1, weight_dtype="bf16")
    assert s.strong == Deployment(load_model_spec("qwen3.5-397b-a17b"), h20, gpus=8, weight_dtype="fp8")
    assert (s.prefix_caching, s.weight_mode, s.verifier_prompt, s.verifier_system_tokens) == (True, "union", "cached", 1024)
    assert default_setting() == s


def test_defaults_are_read_from_where_they_are_defined():
    """K and the review policy from the strategies, the policy from Setting, acceptance from AcceptanceModel."""
    sc = Scenario()
    assert (sc.k, sc.review, sc.strategies) == (DEFAULT_K, DEFAULT_REVIEW, STRATEGY_NAMES)
    setting_defaults = {f.name: f.default for f in dataclasses.fields(Setting)}
    for name in ("prefix_caching", "weight_mode", "verifier_prompt", "verifier_system_tokens"):
        assert getattr(sc, name) == setting_defaults[name]
    assert sc.acceptance == AcceptanceModel()


def test_deployment_entries_have_exactly_the_deployment_fields():
    """One Deployment field more is one DeploymentSpec field more: the entry is generated from Deployment."""
    dep_fields = {SPEC_NAMES.get(f.name, f.name): f.default for f in dataclasses.fields(Deployment)}
    spec_fields = {f.name: f.default for f in dataclasses.fields(DeploymentSpec)}
    assert list(spec_fields) == list(dep_fields)  # the serving engine is `serving_engine` in a scenario (Deployment.serving_engine)
    assert "serving_engine" in spec_fields and "engine" not in spec_fields
    for name, default in dep_fields.items():
        if name in ("model", "hardware"):
            assert spec_fields[name] is dataclasses.MISSING
        elif name in {SPEC_NAMES.get(n, n) for n in RESOLVER_DEFAULTS}:  # an object made by a factory: named in the scenario
            assert spec_fields[name] == RESOLVER_DEFAULTS[name]
        else:
            assert spec_fields[name] == default
    assert set(Scenario().to_dict()["strong"]) == set(dep_fields)


def test_shipped_default_file_is_the_builtin_default_written_out():
    text = shipped_path("default").read_text(encoding="utf-8")
    # after a change of a default, a new field or a new strategy: `make scenarios` regenerates it
    assert text == Scenario().to_toml(DEFAULT_TITLE)
    assert Scenario.load("default") == Scenario() == Scenario.from_dict(tomllib.loads(text))


def test_shipped_edge_file_is_the_edge_setting():
    edge = Scenario.load("edge")
    assert (edge.weak.hardware, edge.strong_api) == ("rtx5090", "qwen3.5-397b-a17b-api")
    s = edge_setting()
    assert s.strong_is_api and s.weak.hardware.id == "rtx5090" and s.weak.gpus == 1
    # the edge setting's workload is MCP-like (SPEC §2: MCP-Atlas tasks on real tool servers), not the τ² trace
    assert (edge.workload.synthetic, edge.workload.trajectories) == ("mcp_tool_servers", 1000)
    # its acceptance is the MCP-Atlas point of the calibration (docs/protocol-calibration.md), not the τ²-Bench default
    assert "MCP-Atlas" in edge.acceptance.source and edge.acceptance != Scenario().acceptance
    # it differs from the default in these only
    assert edge.replace(strong_api=None, weak=Scenario().weak, workload=Scenario().workload,
                        acceptance=Scenario().acceptance) == Scenario()


def _scenarios():
    dep = st.builds(DeploymentSpec, model=st.sampled_from(["qwen3.5-4b", "qwen3.5-27b"]), hardware=st.sampled_from(["h20", "h200"]),
                    gpus=st.integers(1, 8), weight_dtype=st.sampled_from(["bf16", "fp8"]),
                    memory_utilization=st.floats(0.5, 1.0))
    prob = st.floats(0.0, 1.0)
    acc = st.builds(AcceptanceModel, position_decay=prob, correlation=prob, weak_token_ratio=st.floats(0.1, 4.0),
                    verdict_tokens=st.integers(0, 500), p_valid_replacement=prob,
                    accept=st.dictionaries(st.sampled_from(["read", "write", "reply"]), prob, min_size=1))
    return st.builds(Scenario, weak=dep, strong=dep, strong_api=st.none() | st.just("qwen3.5-397b-a17b-api"),
                     workload=st.builds(Workload, trace=st.none() | st.just("x.jsonl"), trajectories=st.integers(1, 10**6)),
                     strategies=st.lists(st.sampled_from(STRATEGY_NAMES), min_size=1, max_size=4, unique=True).map(tuple),
                     k=st.integers(1, 64), review=st.sampled_from(["on_write", "every_chunk"]), acceptance=acc,
                     prefix_caching=st.booleans(), weight_mode=st.sampled_from(["union", "active"]),
                     seed=st.integers(0, 2**63 - 1), pricing_engine=st.sampled_from(["analytic"]))


@settings(max_examples=60, deadline=None)
@given(_scenarios())
def test_round_trips_through_json_and_toml(sc):
    assert Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc
    assert Scenario.from_dict(tomllib.loads(sc.to_toml())) == sc


def test_override_by_dotted_path_and_partial_files(tmp_path):
    sc = Scenario().override({"strong.gpus": 4, "strong.hardware": "h200", "acceptance.verdict_tokens": 32, "k": 2})
    assert (sc.strong.gpus, sc.strong.hardware, sc.acceptance.verdict_tokens, sc.k) == (4, "h200", 32, 2)
    assert sc.weak == Scenario().weak and sc.acceptance.accept == AcceptanceModel().accept
    p = tmp_path / "s.toml"
    p.write_text('k = 3\n[strong]\ngpus = 16\n[acceptance.accept]\nread = 0.5\n')
    loaded = Scenario.load(p)
    assert (loaded.k, loaded.strong.gpus, loaded.strong.model) == (3, 16, Scenario().strong.model)
    # a partial table sets the kinds it names, the others keep their defaults
    assert loaded.acceptance.accept == {**AcceptanceModel().accept, "read": 0.5}


@pytest.mark.parametrize("changes, where", [
    ({"k": 0}, "k"), ({"k": -1}, "k"), ({"k": 2.5}, "k"), ({"k": True}, "k"), ({"seed": -1}, "seed"), ({"seed": 2**63}, "seed"),
    ({"pricing_engine": "x"}, "pricing_engine"), ({"review": "x"}, "review"), ({"weight_mode": "all"}, "weight_mode"),
    ({"verifier_prompt": "x"}, "verifier_prompt"), ({"verifier_system_tokens": -1}, "verifier_system_tokens"),
    ({"strategies": ("specagent", "nope")}, "strategies"), ({"strategies": ()}, "strategies"),
    ({"prefix_caching": "yes"}, "prefix_caching"), ({"strong_api": ""}, "strong_api"),
])
def test_bad_top_level_fields_are_named(changes, where):
    with pytest.raises(ScenarioError) as e:
        Scenario(**changes)
    assert e.value.where == where


@pytest.mark.parametrize("path, value, where", [
    ("acceptance.weak_token_ratio", 0, "acceptance.weak_token_ratio"),
    ("acceptance.weak_token_ratio", math.nan, "acceptance.weak_token_ratio"),
    ("acceptance.p_valid_replacement", 2, "acceptance.p_valid_replacement"),
    ("acceptance.verdict_tokens", -5, "acceptance.verdict_tokens"),
    ("acceptance.accept", {"read": math.nan}, "acceptance.accept.read"),
    ("strong.gpus", 0, "strong.gpus"), ("strong.gpus", 1.5, "strong.gpus"), ("weak.model", "", "weak.model"),
    ("workload.trajectories", 0, "workload.trajectories"), ("workload.synthetic", "tau2_airline", "workload.synthetic"),
])
def test_bad_nested_fields_are_named(path, value, where):
    base = Scenario(workload=Workload(trace="x.jsonl")) if path == "workload.synthetic" else Scenario()
    with pytest.raises(ScenarioError) as e:
        base.override({path: value})
    assert e.value.where == where


def test_file_errors_name_the_file_and_the_field(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[strong]\ngpus = 0\n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: strong\.gpus: gpus must be in \[1, 1,024\], got 0"):
        Scenario.load(p)
    p.write_text("kk = 3\n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: .*unknown scenario field\(s\) kk"):
        Scenario.load(p)
    p.write_text("[weak]\ngpu = 2\n")
    with pytest.raises(ScenarioError, match=r"weak\.gpu: unknown field\(s\) gpu"):
        Scenario.load(p)
    p.write_text("k = [\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        Scenario.load(p)
    with pytest.raises(ScenarioError, match="no such scenario file"):
        Scenario.load(tmp_path / "missing.toml")


def test_resolving_checks_names_and_fit():
    with pytest.raises(ScenarioError) as e:
        Scenario().override({"strong.model": "no-such-model"}).setting()
    assert e.value.where == "strong.model"
    with pytest.raises(DoesNotFit, match="does not fit") as e:
        Scenario().override({"strong.weight_dtype": "bf16"}).setting()  # ~793 GB of weights on 8×96 GB
    assert e.value.where == "strong"
    assert Scenario().override({"strong.weight_dtype": "bf16"}).setting(fit_context=None).strong.gpus == 8
    with pytest.raises(ScenarioError, match="unknown API model 'nope'"):
        Scenario(strong_api="nope").setting()


def test_a_new_deployment_field_needs_one_line(monkeypatch):
    """A field added to costmodel.Deployment becomes a scenario field, a TOML key and a flag with no other change."""
    import specagent.simulator.scenario as scenario_mod
    from specagent.cli.options import deployment_flag

    @dataclasses.dataclass(frozen=True)
    class Extended(Deployment):
        scheduler_name: str = "none"  # the one line

    monkeypatch.setattr(scenario_mod, "Deployment", Extended)
    fields = {name: f for name, _, f in scenario_mod._deployment_fields()}
    assert fields["scheduler_name"].default == "none"
    Spec = dataclasses.make_dataclass("Spec", scenario_mod._deployment_fields(), bases=(scenario_mod._DeploymentSpecMethods,),
                                      frozen=True)
    spec = Spec(model="qwen3.5-4b", hardware="h20", scheduler_name="vllm")
    assert spec.build().scheduler_name == "vllm"
    assert deployment_flag("strong", "scheduler_name") == "--strong-scheduler-name"
    with pytest.raises(ScenarioError) as e:
        Spec(model="qwen3.5-4b", hardware="h20", scheduler_name=3)
    assert e.value.where == "scheduler_name"


# ------------------------------------------------------------------------- the evaluated setting (issue 49)
def test_the_evaluated_tau2_setting_ships_as_a_named_scenario_with_its_reasons():
    """`wang2026-tau2` is Wang et al.'s evaluated τ²-Bench setting: their pair on H20 (4B BF16 on 1, 397B FP8 on 8),
    agent-side time and a verifier re-reading its context, each choice with the arithmetic written beside it."""
    from specagent.simulator.scenario import EVALUATED_TAU2, SHIPPED

    assert EVALUATED_TAU2 in SHIPPED
    sc = Scenario.load(EVALUATED_TAU2)
    assert (sc.weak.model, sc.weak.hardware, sc.weak.gpus, sc.weak.weight_dtype) == ("qwen3.5-4b", "h20", 1, "bf16")
    assert (sc.strong.model, sc.strong.hardware, sc.strong.gpus, sc.strong.weight_dtype) == ("qwen3.5-397b-a17b", "h20", 8, "fp8")
    assert sc.environment.preset == "none" and sc.verifier_prompt == "fresh" and sc.prefix_caching
    assert sc.acceptance == Scenario().acceptance  # the calibrated point, not a second one
    text = shipped_path(EVALUATED_TAU2).read_text(encoding="utf-8")
    for reason in ("gpt-4.1-2025-04-14", "(0.54 − 0.508) / (1 − 0.508) = 0.065", "1.30–1.87", "0.928", "1.437", "768 GB"):
        assert reason in text, reason


def test_evaluated_differences_name_what_separates_a_run_from_the_evaluated_setting():
    from specagent.simulator.applicability import evaluated_differences, evaluated_note

    assert evaluated_differences(Scenario.load("wang2026-tau2")) == []
    diff = {k: (want, here) for k, want, here in evaluated_differences(Scenario())}
    assert diff == {"environment": ("none", "recorded"), "verifier prompt": ("fresh", "cached")}
    assert "--scenario wang2026-tau2" in evaluated_note(Scenario())
    other = Scenario.load("wang2026-tau2").replace(strong=dataclasses.replace(Scenario().strong, gpus=16))
    assert [k for k, *_ in evaluated_differences(other)] == ["Strong GPUs"]
    assert evaluated_differences(Scenario.load("edge")) == []  # a hosted Strong model: the edge figures, its own scenario


# ------------------------------------------------------------------------------------------------ 80 columns (#51)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=30), min_size=0, max_size=40),
       st.sampled_from([" ", "  ", " \t"]))
def test_a_long_string_is_written_over_lines_within_80_columns_with_the_same_value(words, sep):
    """`scenario show` prints within 80 columns: a long string becomes a TOML multi-line string whose lines end in a
    backslash; TOML joins them back into the very same value, whatever its spaces, quotes or escapes."""
    from specagent.simulator.scenario import TOML_WIDTH, toml_entry

    value = sep.join(words)
    text = toml_entry("source", value)
    assert tomllib.loads(text)["source"] == value
    if all(len(w) < 30 for w in value.split(" ")) and "\t" not in value and all(c.isprintable() for c in value):
        assert all(len(line) <= TOML_WIDTH for line in text.splitlines()), text


def test_the_shipped_scenarios_print_within_80_columns():
    from specagent.simulator.scenario import SHIPPED

    for name in SHIPPED:
        text = Scenario.load(name).to_toml(f"scenario: {name}")
        assert max(len(line) for line in text.splitlines()) <= 80, name
        assert Scenario.from_dict(tomllib.loads(text)) == Scenario.load(name)
