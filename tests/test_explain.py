"""`specagent explain`: its factors add back to predict's printed ratios, and where the saving cannot come from."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli.app import app
from specagent.simulator.jobs import bottom_line as JB
from specagent.simulator import explain as X
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.workload import Action, Episode
from specagent.simulator.run import compare, predict
from specagent.simulator.scenario import Scenario, default_setting
from tests.test_simulator_invariants import episodes

SETTING = default_setting()
POOLS = JB.pools(SETTING)
#: A slice of the shipped workload: the accounting is the same per trajectory, the test faster.
N_TRAJ = 24


@pytest.fixture(scope="module")
def run():
    sc = Scenario().replace(strategies=("strongonly", "specagent"))
    trajs, _, name = sc.load_workload()
    trajs = trajs[:N_TRAJ]
    comp = predict(sc, trajs, name, setting=SETTING)
    return comp, trajs


def test_factors_add_back_to_predicts_ratios(run):
    comp, _ = run
    decs = X.decompose(comp.summary, POOLS)
    spec = comp.summary.loc["specagent"]
    line = JB.bottom_line(comp.summary, POOLS)
    printed = {k: float(spec[col]) for k, (_, col) in X.RESOURCES.items() if col in spec}
    printed["usd"] = float(line.loc["specagent", "usd_per_task"] / line.loc["strongonly", "usd_per_task"])
    assert set(decs) == set(printed)
    for key, dec in decs.items():
        assert dec.ratio == pytest.approx(printed[key], rel=1e-9, abs=1e-12), key
        assert dec.total() == pytest.approx(printed[key], rel=1e-9, abs=1e-12), key
        assert 1 + math.fsum(t.delta for t in dec.terms) == pytest.approx(printed[key], rel=1e-9, abs=1e-12), key
        for t in dec.terms:
            if t.factors:
                assert math.prod(f.value for f in t.factors) == pytest.approx(t.specagent, rel=1e-9, abs=1e-12), (key, t.phase)


def test_the_default_waits_are_a_floor(run):
    comp, _ = run
    wall = X.decompose(comp.summary, POOLS)["wall"]
    waits = sum(t.strongonly for t in wall.terms if t.phase in ("tool", "user"))
    base = comp.summary.loc["strongonly"]
    assert waits == pytest.approx(float(base["env_wall_time_s"]) / float(base["wall_time_s"]), rel=1e-9)
    assert wall.ratio > waits  # SpecAgent keeps every wait and adds model time above it


def test_counterfactuals_change_one_thing(run):
    comp, trajs = run
    result = X.explain(comp, trajs, POOLS)
    assert set(result.counterfactuals) == set(X.COUNTERFACTUALS) - {"environment recorded", "verifier cached"}  # as run
    given_ = {k: d.ratio for k, d in result.decompositions.items()}
    none = result.counterfactuals["environment none"]
    assert none["wall"] == pytest.approx(given_["model"], rel=1e-9)  # no waits: wall is model time
    assert none["memory"] == pytest.approx(given_["memory"], rel=1e-12)  # waits move no bytes
    assert result.counterfactuals["verifier fresh"]["flops"] > given_["flops"]  # a fresh prompt re-reads the history
    assert result.counterfactuals["zero acceptance"]["memory"] > given_["memory"]


FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FEW
@given(eps=st.lists(episodes(), min_size=1, max_size=3), k=st.integers(1, 6), seed=st.integers(0, 10**6),
       ratio=st.floats(0.05, 3.0), thinking=st.booleans())
def test_nothing_accepted_nothing_replaced_every_chunk_reviewed_costs_at_least_strongonly(eps, k, seed, ratio, thinking):
    """With zero acceptance, no valid replacement and review of every chunk, the Strong model writes every step
    itself after reading the Weak model's draft: SpecAgent can only cost more, on every resource. Not thinking, a
    repair turn decodes only the step's visible message, where Strong-only replays the recorded step with its hidden
    reasoning (a step of 400 tokens, none visible: $ 0.38x), so there the steps record none."""
    if not thinking:
        eps = [dataclasses.replace(e, units=tuple(u._replace(out_tokens=min(u.out_tokens, u.ctx_tokens)) if isinstance(u, Action)
                                      else u for u in e.units)) for e in eps]
    zero = {kind: 0.0 for kind in AcceptanceModel().accept}
    acc = AcceptanceModel(accept=zero, exact=dict(zero), p_valid_replacement=0.0, weak_token_ratio=ratio, thinking=thinking)
    comp = compare(eps, ("strongonly", "specagent"), SETTING, acc, seed, k=k, review="every_chunk")
    base = comp.summary.loc["strongonly"]
    assume(float(base["model_wall_time_s"]) > 0 and float(base["total_bytes_read"]) > 0)
    for key, dec in X.decompose(comp.summary, POOLS).items():
        assert dec.ratio >= 1 - 1e-9, (key, dec.ratio)


def test_a_non_thinking_repair_does_not_redo_the_recorded_reasoning():
    """The exception above, pinned: one read of 400 decoded tokens, none visible (all hidden reasoning), rejected and
    repaired by a non-thinking Strong turn: the repair decodes 0 tokens where Strong-only replays 400, so SpecAgent's
    Strong decode is only its verdict. Thinking, the repair reasons as recorded and SpecAgent costs more."""
    ep = Episode(task_id="h", system_tokens=0, units=(Action(kind="read", held=False, has_tool=True, out_tokens=400,
                                                              ctx_tokens=0, result_tokens=0, tool_s=0.0),))
    zero = {kind: 0.0 for kind in AcceptanceModel().accept}
    ratios = {}
    for thinking in (False, True):
        acc = AcceptanceModel(accept=zero, exact=dict(zero), p_valid_replacement=0.0, weak_token_ratio=1.0,
                              thinking=thinking)
        comp = compare([ep], ("strongonly", "specagent"), SETTING, acc, 0, k=1, review="every_chunk")
        assert comp.summary.loc["strongonly", "strong_repair_tokens"] == 400
        assert comp.summary.loc["specagent", "strong_repair_tokens"] == (400 if thinking else 0)
        ratios[thinking] = X.decompose(comp.summary, POOLS)["usd"].ratio
    assert ratios[False] < 0.5 and ratios[True] > 1


def test_explain_cli_prints_the_tables_and_json(tmp_path):
    r = CliRunner().invoke(app, ["explain", "--no-counterfactuals", "--json", "--trace", _slice(tmp_path)])
    assert r.exit_code == 0, r.output
    import json

    data = json.loads(r.stdout)
    assert set(data["decompositions"]) >= {"wall", "model", "memory", "flops"}
    fig = tmp_path / "w.html"
    r = CliRunner().invoke(app, ["explain", "--trace", _slice(tmp_path), "--figure", str(fig)])
    assert r.exit_code == 0, r.output
    assert "zero acceptance" in r.stdout and "Tool and user waits are" in r.stdout
    assert "waterfall" in fig.read_text(encoding="utf-8")


def test_explain_cli_bad_price_is_one_line():
    r = CliRunner().invoke(app, ["explain", "--price", "nosuchgpu=1"])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "--price" in r.output


def _slice(tmp_path) -> str:
    """The shipped trace's first trajectories as a JSONL file (explain's CLI on all 118 is slower)."""
    from specagent.traces import default_workload_path

    out = tmp_path / "slice.jsonl"
    if not out.exists():
        lines = default_workload_path().read_text(encoding="utf-8").splitlines()[:8]
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(out)


def test_environment_preset_none_is_model_time_only(run):
    from specagent.common.errors import InputError
    from specagent.simulator.protocol.environment import Environment

    comp, trajs = run
    none = predict(Scenario().replace(strategies=("strongonly", "specagent")), Environment(preset="none").apply(trajs), "x",
                   setting=SETTING).summary
    assert float(none["env_wall_time_s"].abs().max()) == 0.0
    assert none.loc["specagent", "wall_time_s_rel"] == pytest.approx(comp.summary.loc["specagent", "model_wall_time_s_rel"],
                                                                     rel=1e-9)
    with pytest.raises(InputError, match="preset") as exc:
        Environment(preset="api")
    assert exc.value.where == "preset"


def test_explain_cli_under_preset_none_shows_the_recorded_ratio(tmp_path):
    r = CliRunner().invoke(app, ["explain", "--trace", _slice(tmp_path), "--environment", "none", "--json"])
    assert r.exit_code == 0, r.output
    import json

    data = json.loads(r.stdout)
    assert "environment recorded" in data["counterfactuals"] and "environment none" not in data["counterfactuals"]
    rec, none = data["counterfactuals"]["environment recorded"]["wall"], data["decompositions"]["wall"]["ratio"]
    assert (rec - 1) * (none - 1) > 0 and abs(rec - 1) < abs(none - 1)  # waits, the same for both, pull the ratio to 1
    bad = CliRunner().invoke(app, ["explain", "--environment", "api"])
    assert bad.exit_code == 2 and "--environment" in bad.output and "Traceback" not in bad.output


def test_explain_edge_leaves_out_what_a_hosted_strong_model_hides(tmp_path):
    """A hosted Strong model reads no bytes the run can see: memory has no ratio to explain; $ is API charges."""
    r = CliRunner().invoke(app, ["explain", "--edge", "--trace", _slice(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    import json

    data = json.loads(r.stdout)
    assert "memory" not in data["decompositions"] and "wall" in data["decompositions"]
    usd = data["decompositions"]["usd"]
    assert sum(t["specagent"] for t in usd["terms"]) == pytest.approx(usd["ratio"], rel=1e-9)
    assert any(t["phase"] == "rest" and t["strongonly"] > 0 for t in usd["terms"])  # the API charges


def test_published_gaps_are_the_ratio_against_the_range_and_each_factor_alone_reaches_it(run):
    """`published_gaps`: the gap is the ratio minus the range's nearer end; each part's factors multiply to its share;
    each factor set to the value printed for it (the others held) moves the ratio exactly onto that end (issue 49)."""
    comp, trajs = run
    result = X.explain(comp, trajs, POOLS, ())
    wall = result.decompositions["wall"].ratio
    low, high = 0.2, wall - 0.1  # a range the ratio lies above
    (g,) = X.published_gaps(result, {"wall": ("test_wall", low, high)})
    assert g.gap == pytest.approx(wall - high, rel=1e-12) and g.parts
    for label, share, factors, needs in g.parts:
        assert math.prod(f.value for f in factors) == pytest.approx(share, rel=1e-9)
        for i, need in enumerate(needs, start=1):
            if need is None:
                continue
            moved = share * need / factors[i].value
            assert wall - share + moved == pytest.approx(high, rel=1e-9), (label, factors[i].name)
    (inside,) = X.published_gaps(result, {"wall": ("test_wall", 0.0, 2.0)})
    assert inside.gap == 0.0 and inside.parts == () and inside.closes == ()


def test_explain_prints_the_published_gap_only_in_the_evaluated_setting(tmp_path):
    ev = CliRunner().invoke(app, ["explain", "--scenario", "wang2026-tau2", "--no-counterfactuals"],  # the shipped trace: its setting
                            terminal_width=400)
    assert ev.exit_code == 0, ev.output
    text = " ".join(ev.stdout.split())
    assert "in their evaluated setting (this run's)" in text and "tau2_wall_ratio" in text
    default = CliRunner().invoke(app, ["explain", "--no-counterfactuals"], terminal_width=400)
    assert default.exit_code == 0, default.output
    text = " ".join(default.stdout.split())
    assert "Against the published" not in text and "--scenario wang2026-tau2" in text


# ------------------------------------------------------------------------------------------------ the takeaway (#51)
def _wall(**terms: tuple[float, float, tuple[float, ...]]) -> X.Explanation:
    """An Explanation whose wall decomposition holds `terms` (phase -> (Strong-only share, SpecAgent share, factors))."""
    ts = tuple(X.Term(p, X.PHASE_LABEL[p], sa, so, tuple(X.Factor(f"f{i}", v) for i, v in enumerate(fs)))
               for p, (so, sa, fs) in terms.items())
    dec = X.Decomposition("wall", "wall", math.fsum(t.specagent for t in ts), ts)
    return X.Explanation({"wall": dec}, {"environment share of Strong-only wall": terms.get("user", (0, 0, ()))[0]}, {})


def test_the_takeaway_names_a_weak_gpu_slower_per_token_when_drafting_costs_more_than_it_saves():
    from specagent.simulator.jobs.explain import takeaway

    slow = _wall(weak_decode=(0.0, 0.522, (0.583, 0.581, 1.543)), strong_decode=(0.583, 0.005, (0.583, 0.009, 0.997)),
                 strong_verdict=(0.0, 0.155, (0.583, 0.266, 0.999)), user=(0.417, 0.417, (0.417, 1.0)))
    assert takeaway(slow) == (
        "SpecAgent is slower than Strong-only here (wall 1.099 of Strong-only's): your Weak GPU is slower per token than "
        "your Strong GPU (a drafted token takes 1.54x the time of a Strong-only decode token), so drafting (0.522 of "
        "Strong-only's wall) costs more time than the Strong decode it replaces saves (0.578).")
    # slower, with a Weak token cheaper than a Strong one: what SpecAgent adds, named, against what it saves
    reasons = _wall(weak_decode=(0.0, 0.3, (0.6, 0.58, 0.86)), strong_decode=(0.6, 0.01, (0.6, 0.01, 1.0)),
                    strong_verdict=(0.0, 0.45, (0.6, 0.75, 1.0)), user=(0.4, 0.4, (0.4, 1.0)))
    assert takeaway(reasons) == (
        "SpecAgent is slower than Strong-only here (wall 1.160 of Strong-only's): what SpecAgent adds, 0.750 of Strong-only's "
        "wall (most of it Strong verdict decode (0.450) and Weak drafting (0.300)), is more than the 0.590 that the Strong "
        "decode it avoids saves.")
    fast = _wall(weak_decode=(0.0, 0.211, (0.483, 0.581, 0.754)), strong_decode=(0.483, 0.004, (0.483, 0.009, 1.0)),
                 user=(0.517, 0.517, (0.517, 1.0)))
    assert takeaway(fast) == (
        "SpecAgent is faster than Strong-only here (wall 0.732 of Strong-only's): the Strong decode it avoids saves 0.479 "
        "of Strong-only's wall, while Weak drafting (0.211) gives back 0.211; tool and user waits are 0.517 of "
        "Strong-only's wall, a floor no strategy shortens.")


def test_explain_leads_with_the_takeaway_and_repeats_predicts_warning(tmp_path):
    """The slower Weak GPU of the first-use walkthrough (Qwen3-4B on an L40S drafting for Qwen3-32B on 4xH100): the
    takeaway, computed from the run, and the not-calibrated-here warning come first; the takeaway again last."""
    flags = ["--weak-model", "qwen3-4b", "--weak-hardware", "l40s", "--strong-model", "qwen3-32b", "--strong-hardware",
             "h100", "--strong-gpus", "4", "--strong-dtype", "bf16", "--trace", _slice(tmp_path)]
    r = CliRunner().invoke(app, ["explain", "--no-counterfactuals", *flags], env={"COLUMNS": "2000"})  # one line each
    assert r.exit_code == 0, r.output
    data = CliRunner().invoke(app, ["explain", "--no-counterfactuals", "--json", *flags])
    import json

    doc = json.loads(data.stdout)
    cost = next(t for t in doc["decompositions"]["wall"]["terms"] if t["phase"] == "weak_decode")["factors"][2]["value"]
    assert cost > 1 and f"a drafted token takes {cost:.2f}x the time" in doc["takeaway"], doc["takeaway"]
    lines = r.stdout.splitlines()
    assert lines[0] == doc["takeaway"] and lines[-1] == f"In short: {doc['takeaway']}"
    assert lines[1] == doc["acceptance_warning"]
    assert lines[1].startswith("warning: acceptance calibrated for another setting (Weak model qwen3-4b, not qwen3.5-4b;")
    default = json.loads(CliRunner().invoke(app, ["explain", "--no-counterfactuals", "--json", "--trace", _slice(tmp_path)]).stdout)
    assert default["acceptance_warning"] is None or "workload" in default["acceptance_warning"]
