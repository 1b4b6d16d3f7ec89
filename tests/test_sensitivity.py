"""The sensitivity study (tornado, break-even map) and the environment what-ifs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.environment import Environment
from specagent.simulator.protocol.phases import WEAK_PHASES
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.pricing.results import per_trajectory
from specagent.simulator.run import plan_strategy, predict, simulate, to_episodes
from specagent.simulator.scenario import Scenario
from specagent.simulator.jobs.sensitivity import BatchedStrongPricer, assumption_curve, break_even, load_scenario_ranges, tornado
from specagent.simulator.strategies.catalog import make_strategy
from specagent.simulator.protocol.workload import UnitTable
from specagent.traces import default_workload_path, load_trajectories, save_trajectories

runner = CliRunner()


@pytest.fixture(scope="module")
def trajs():
    return load_trajectories(default_workload_path())[:30]


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory, trajs):
    p = tmp_path_factory.mktemp("trace") / "small.jsonl"
    save_trajectories(trajs[:10], p)
    return p


def _monotone(x, increasing=True):
    d = np.diff(np.asarray(x, dtype=float))
    return bool(np.all(d >= -1e-12)) if increasing else bool(np.all(d <= 1e-12))


# ------------------------------------------------------------------------------------------ environment
def test_scaling_user_latency_by_zero_removes_user_time_exactly(trajs):
    base = Scenario().replace(strategies=("strongonly", "specagent"))
    a = predict(base, trajs, "x").summary
    b = predict(base, Environment(user_latency_scale=0.0).apply(trajs), "x").summary
    assert (b["time_s_user"] == 0.0).all()
    assert a["time_s_user"].min() > 0
    for s in ("strongonly", "specagent"):
        assert b.loc[s, "wall_time_s"] == pytest.approx(a.loc[s, "wall_time_s"] - a.loc[s, "time_s_user"], rel=0, abs=1e-9)
        assert b.loc[s, "model_wall_time_s"] == pytest.approx(a.loc[s, "model_wall_time_s"], rel=1e-12)


def test_the_scenario_applies_its_environment_when_it_loads_the_workload():
    sc = Scenario().override({"environment.user_latency_s": 2.0, "environment.user_latency_scale": 0.5,
                              "environment.tool_latency_scale": 0.0})
    trajs, _, _ = sc.load_workload()
    table = UnitTable.from_episodes(to_episodes(trajs))
    assert np.all(table.user_s[table.is_user] == 1.0)  # replaced by 2 s, then halved
    assert np.all(table.tool_s == 0.0)
    # a unit table (synthetic workloads) and episodes (sweeps) get the same waits
    same = Environment(user_latency_s=2.0, user_latency_scale=0.5, tool_latency_scale=0.0)
    raw = UnitTable.from_episodes(to_episodes(load_trajectories(default_workload_path())))
    t2 = same.apply(raw)
    assert np.array_equal(t2.user_s, table.user_s) and np.array_equal(t2.tool_s, table.tool_s)
    eps = same.apply(to_episodes(load_trajectories(default_workload_path())))
    assert np.array_equal(UnitTable.from_episodes(eps).user_s, table.user_s)


@pytest.mark.parametrize("flag, value, needle", [
    ("--user-latency-scale", "-1", "user_latency_scale must be a number in [0, 1000]"),
    ("--tool-latency-s", "nan", "tool_latency_s must be a number of seconds"),
])
def test_bad_environment_flags_are_one_line(flag, value, needle, tmp_path):
    r = runner.invoke(app, ["predict", "-o", str(tmp_path), flag, value])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output


def test_the_environment_and_the_api_latency_are_named_in_the_assumptions(small_trace, tmp_path):
    r = runner.invoke(app, ["predict", "--edge", "--trace", str(small_trace), "-o", str(tmp_path), "--strategies",
                            "strongonly,specagent", "--draws", "3", "--user-latency-scale", "0.5", "--details"])
    assert r.exit_code == 0, r.output
    assert "×0.5" in r.output
    assert "TTFT 0.6 s" in r.output and "output tokens/s" in r.output
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["assumptions"]["environment"].startswith("user waits as recorded ×0.5")
    # the edge acceptance was calibrated on the MCP-like workload, not this τ² trace: no published figure is compared
    assert doc["intervals"]["draws"] == 3 and doc["intervals"]["published"] == [] and not doc["intervals"]["published_compared"]
    assert "synthetic:mcp_tool_servers" in doc["assumptions"]["acceptance_applies"]
    assert "every ratio with its range" in r.output and "mcp_api_cost" not in r.output


# ------------------------------------------------------------------------------------------ tornado
def test_tornado_covers_every_assumption_and_its_ends_bracket_the_base(trajs):
    sc = Scenario()
    df = tornado(sc, trajs)
    names = set(df["assumption"])
    for a in ("accept.read", "accept.write", "position_decay", "correlation", "weak_token_ratio", "verdict_tokens",
              "user latency scale", "tool latency (s per call)", "Strong decode batch", "weight reads", "verifier prompt",
              "Strong reasoning (thinking)"):
        assert a in names, a
    assert set(df["metric"]) == {"wall_time_s_rel", "model_wall_time_s_rel", "total_bytes_read_rel", "total_flops_rel", "cost_rel"}
    base = df.groupby("metric")["base"].nunique()
    assert (base == 1).all()  # one scenario value per metric
    wall = df[df["metric"] == "wall_time_s_rel"]
    assert _monotone(wall["swing"].to_numpy(), increasing=False)  # sorted by the swing of wall time
    # batch 1 is the scenario itself; the user scale at 1 would be too
    b1 = wall[wall["assumption"] == "Strong decode batch"].iloc[0]
    assert b1["at_low"] == pytest.approx(b1["base"], rel=1e-12)


def test_tornado_bars_are_monotone_where_the_model_is(trajs):
    sc = Scenario()
    # more verdict tokens: more Strong decode, nothing decided differently
    v = assumption_curve(sc, trajs, "verdict_tokens", [0, 24, 48, 96, 192, 384])
    for col in ("wall_time_s_rel", "model_wall_time_s_rel", "total_bytes_read_rel", "total_flops_rel", "cost_rel"):
        assert _monotone(v[col]), col
    assert v["total_bytes_read_rel"].iloc[-1] > v["total_bytes_read_rel"].iloc[0]
    # a more verbose Weak model: more Weak tokens drafted and read
    w = assumption_curve(sc, trajs, "weak_token_ratio", [0.5, 0.75, 1.0, 1.5, 2.0])
    for col in ("wall_time_s_rel", "model_wall_time_s_rel", "total_bytes_read_rel"):
        assert _monotone(w[col]), col
    # user waits added to both strategies pull the wall ratio towards 1 (SpecAgent is below 1 here)
    walls = []
    for scale in (0.0, 0.5, 1.0, 2.0, 4.0):
        s = predict(sc.replace(strategies=("strongonly", "specagent")), Environment(user_latency_scale=scale).apply(trajs), "x").summary
        walls.append(float(s.loc["specagent", "wall_time_s_rel"]))
    assert _monotone(walls) and walls[-1] < 1.0
    # a larger Strong decode batch amortises Strong-only's weight reads: SpecAgent's memory saving shrinks
    setting = sc.setting()
    table = UnitTable.from_episodes(to_episodes(trajs))
    ratios = []
    for b in (1, 4, 16, 32):
        pr = BatchedStrongPricer(setting, b)
        tot = {}
        for name in ("strongonly", "specagent"):
            plan = plan_strategy(table, make_strategy(name, k=4, review="on_write"), setting, sc.acceptance, sc.seed)
            tot[name] = per_trajectory(plan, pr.price(plan))["total_bytes_read"].sum()
        ratios.append(tot["specagent"] / tot["strongonly"])
    assert _monotone(ratios) and ratios[-1] > ratios[0] * 1.5


def test_batched_strong_pricer_at_batch_one_is_the_plain_pricer(trajs):
    setting = Scenario().setting()
    plan = plan_strategy(to_episodes(trajs), make_strategy("strongonly", 4, "on_write"), setting, AcceptanceModel(), 0)
    a, b = Pricer(setting).price(plan), BatchedStrongPricer(setting, 1).price(plan)
    assert np.array_equal(a.time_s, b.time_s) and np.array_equal(a.bytes_read, b.bytes_read)


def test_scenario_ranges_file_is_validated(tmp_path):
    r = load_scenario_ranges()
    assert r.strong_batch == (1, 32) and r.user_latency_scale == (0.0, 2.0) and all(len(v) > 30 for v in r.rationale.values())
    bad = tmp_path / "s.toml"
    bad.write_text("[user_latency_scale]\nlow = 2\nhigh = 1\nrationale = 'x'\n", encoding="utf-8")
    with pytest.raises(Exception, match="user_latency_scale"):
        load_scenario_ranges(bad)


# ------------------------------------------------------------------------------------------ break-even
def test_break_even_line_at_a_hand_computed_point(trajs):
    sc = Scenario()
    a = 0.7
    be = break_even(sc, trajs, acceptance=(0.5, a, 0.9))
    # by hand: SpecAgent's events run one after another, so with Weak passes s times longer its wall is S + s W + E
    # (S: the Strong time and the calls' per-request overheads, which a slower Weak model does not stretch)
    acc = sc.acceptance.__class__(**{**sc.acceptance.__dict__, "accept": {k: a for k in sc.acceptance.accept}})
    setting = sc.setting()
    so = simulate(trajs, "strongonly", setting, acc, sc.seed)
    sa = simulate(trajs, "specagent", setting, acc, sc.seed)
    S = sa["strong_model_time_s"].sum() + sa["strong_request_s"].sum() + sa["weak_request_s"].sum()
    W = sa["weak_model_time_s"].sum()
    assert sa["weak_request_s"].sum() > 0  # the default engines have an overhead: S without it would miss the point
    E = sa["time_s_tool"].sum() + sa["time_s_user"].sum()
    s_star = (so["wall_time_s"].sum() - S - E) / W
    own = simulate(trajs, "specagent", setting, sc.acceptance, sc.seed)  # r0 is read off the scenario's own run
    r0 = ((own["time_s_weak_decode"].sum() / own["tokens_weak_decode"].sum())
          / (so["time_s_strong_decode"].sum() / so["tokens_strong_decode"].sum()))
    row = be.line[be.line["acceptance"] == a].iloc[0]
    assert be.r0 == pytest.approx(r0, rel=1e-12)
    assert row["wall_break_even"] == pytest.approx(s_star * r0, rel=1e-9)
    # and the point is where the ratio is 1: price SpecAgent with every Weak event s* times longer
    plan = plan_strategy(UnitTable.from_episodes(to_episodes(trajs)), make_strategy("specagent", 4, "on_write"), setting, acc, sc.seed)
    costs = Pricer(setting).price(plan)
    weak = np.isin(plan.phase, WEAK_PHASES)
    wall = float(np.where(weak, (costs.time_s - costs.request_s) * s_star + costs.request_s, costs.time_s).sum())
    assert wall / so["wall_time_s"].sum() == pytest.approx(1.0, rel=1e-9)
    # the map agrees with the line: below it SpecAgent is faster, above it slower
    g = be.grid[be.grid["acceptance"] == a]
    below, above = g[g["time_ratio"] < row["wall_break_even"]], g[g["time_ratio"] > row["wall_break_even"]]
    assert (below["wall_time_s_rel"] < 1).all() and (above["wall_time_s_rel"] > 1).all()
    # more acceptance, more room: the line rises with acceptance
    assert _monotone(be.line["wall_break_even"])


# ------------------------------------------------------------------------------------------ the command
def test_study_sensitivity_writes_its_figures_and_the_report_takes_them(small_trace, tmp_path):
    out = tmp_path / "sens"
    r = runner.invoke(app, ["study", "sensitivity", "--trace", str(small_trace), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "Sensitivity" in r.output and "Break-even" in r.output and "…" not in r.output  # no figure cut
    doc = json.loads((out / "sensitivity.json").read_text())
    assert doc["kind"] == "specagent.sensitivity/1" and doc["tornado"] and doc["break_even"]["line"]
    html = (out / "sensitivity.html").read_text()
    assert 'data-figure="fig_tornado"' in html and 'data-figure="fig_break_even"' in html
    pred = tmp_path / "pred"
    r = runner.invoke(app, ["predict", "--trace", str(small_trace), "-o", str(pred), "--strategies", "strongonly,specagent",
                            "--draws", "4"])
    assert r.exit_code == 0, r.output
    rep = tmp_path / "report.html"
    r = runner.invoke(app, ["report", str(pred / "summary.json"), str(out / "sensitivity.json"), "-o", str(rep)])
    assert r.exit_code == 0, r.output
    html = rep.read_text()
    # a 12-trajectory trace is not the workload the acceptance was calibrated on: its published figures are not compared
    assert 'data-figure="fig_tornado"' in html and "Published protocol figures" not in html and "tau2-memory" not in html.split("<body>")[0]
    assert "No simulator results" not in (out / "sensitivity.html").read_text()  # a page of its own
    assert "intervals from 4 seeded draws" in html


def test_study_sensitivity_refuses_a_protocol_log(tmp_path):
    from specagent.traces.schema import SpecLabel

    t = load_trajectories(default_workload_path())[0]
    steps = [s.model_copy(update={"label": SpecLabel(drafted_by="weak")}) if s.actor.value == "agent" else s for s in t.steps]
    p = tmp_path / "log.jsonl"
    save_trajectories([t.model_copy(update={"steps": steps})], p)
    r = runner.invoke(app, ["study", "sensitivity", "--trace", str(p), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "protocol log" in r.output and "Traceback" not in r.output
