"""Every ratio with its range: the acceptance distribution, the seeded Monte Carlo and its properties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specagent.common.errors import InputError
from specagent.measurements.published_ranges import load_published_ranges
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.ranges import AcceptanceDistribution, ParameterRange, RangesError, Uncertainty, value_of
from specagent.simulator.strategies.lockstep import plan_specagent_replicas
from specagent.simulator.run import plan_strategy, predict, to_episodes
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.strategies.catalog import make_strategy
from specagent.simulator.uncertainty import published_for, ratio_intervals
from specagent.simulator.protocol.workload import UnitTable
from specagent.traces import default_workload_path, load_trajectories

STRATS = ("strongonly", "specagent", "router")
#: The pre-calibration illustrative acceptance model: the ranges-file cases below are written around its values (the
#: mechanics under test, not the defaults).
ILLUSTRATIVE = AcceptanceModel(accept={"read": 0.90, "write": 0.75, "generic": 0.80, "think": 0.95, "reply": 0.85},
                               exact={"read": 0.55, "write": 0.45, "generic": 0.50, "think": 0.40, "reply": 0.10},
                               position_decay=0.98, correlation=0.3, weak_token_ratio=1.0, verdict_tokens=48,
                               accept_verdict_tokens=4, p_valid_replacement=0.5)


@pytest.fixture(scope="module")
def trajs():
    return load_trajectories(default_workload_path())[:30]


@pytest.fixture(scope="module")
def comp(trajs):
    sc = Scenario().replace(strategies=STRATS, uncertainty=Uncertainty(sources="acceptance"))  # the acceptance mechanics alone
    return predict(sc, trajs, "first 30")


# ------------------------------------------------------------------------------------------ the distribution
def test_priors_contain_the_scenarios_values_and_carry_a_rationale():
    base = AcceptanceModel()
    d = AcceptanceDistribution.priors(base)
    paths = {r.path for r in d.ranges}
    assert {"accept.read", "accept.write", "position_decay", "correlation", "weak_token_ratio", "verdict_tokens"} <= paths
    for r in d.ranges:
        assert r.low <= value_of(base, r.path) <= r.high
        assert r.low < r.high or value_of(base, r.path) in (0.0, 1.0), r  # a real range, unless pinned at a bound
        assert len(r.source) > 40  # a rationale, not a label
    # placed around whatever the scenario says: a low acceptance gets its range around it
    low = AcceptanceDistribution.priors(replace(base, accept={**base.accept, "read": 0.3}))
    r = next(r for r in low.ranges if r.path == "accept.read")
    assert (r.low, r.high) == pytest.approx((0.18, 0.42))  # ±0.12, centred on the value


@given(seed=st.integers(0, 2**32), factor=st.floats(0.0, 1.0))
def test_draws_are_seeded_lie_in_their_ranges_and_whole_tokens_stay_whole(seed, factor):
    d = AcceptanceDistribution.priors(AcceptanceModel()).narrowed(factor)
    a, b = d.sample(20, seed), d.sample(20, seed)
    assert a == b
    for m in a:
        for r in d.ranges:
            v = value_of(m, r.path)
            slack = 0.5 if r.path.endswith("tokens") else 1e-12  # rounding to a whole token
            assert r.low - slack <= v <= r.high + slack
        assert isinstance(m.verdict_tokens, int) and isinstance(m.accept_verdict_tokens, int)


def test_different_seeds_draw_differently_and_narrowed_zero_is_the_point():
    d = AcceptanceDistribution.priors(AcceptanceModel())
    assert d.sample(5, 1) != d.sample(5, 2)
    assert all(m == AcceptanceModel() for m in d.narrowed(0.0).sample(5, 3))


def test_normal_ranges_are_truncated_to_the_domain():
    base = ILLUSTRATIVE
    d = AcceptanceDistribution(base, (ParameterRange("accept.read", 0.5, 1.0, "normal"),))
    vals = np.array([m.accept["read"] for m in d.sample(500, 0)])
    assert vals.max() <= 1.0 and vals.min() >= 0.0
    assert abs(np.median(vals) - 0.9) < 0.03  # centred on the fitted point, not the interval's middle


def test_ranges_file_fitted_intervals_and_calibrated_points(tmp_path):
    f = tmp_path / "fit.toml"
    f.write_text('source = "fit of 3 logs"\n[ranges."accept.read"]\nlow = 0.85\nhigh = 0.95\nshape = "normal"\n'
                 '[ranges.verdict_tokens]\nlow = 30\nhigh = 60\n', encoding="utf-8")
    d = Uncertainty(ranges=str(f)).distribution(ILLUSTRATIVE)
    assert [r.path for r in d.ranges] == ["accept.read", "verdict_tokens"] and d.source == "fit of 3 logs"
    g = tmp_path / "cal.toml"
    g.write_text('source = "calibrated"\n[[points]]\nposition_decay = 0.9\n[[points]]\naccept = {read = 0.5}\n', encoding="utf-8")
    pts = Uncertainty(ranges=str(g)).distribution(ILLUSTRATIVE).sample(50, 0)
    assert {m.position_decay for m in pts} == {0.9, 0.98}
    assert {m.accept["read"] for m in pts} == {0.5, 0.9} and all(m.accept["write"] == 0.75 for m in pts)


@pytest.mark.parametrize("body, needle", [
    ('[ranges."accept.nope"]\nlow = 0.1\nhigh = 0.2\n', "accept.nope: not a numeric field"),
    ('[ranges.position_decay]\nlow = 0.99\nhigh = 0.95\n', "position_decay: expected 0 <= low <= high <= 1"),
    ('[ranges.position_decay]\nlow = 0.5\nhigh = 0.6\n', "must contain the scenario's value 0.98"),
    ('[ranges.position_decay]\nlow = 0.5\nhigh = 1.0\nshape = "beta"\n', "shape must be one of uniform, normal"),
    ('[ranges.position_decay]\nlow = 0.5\n', "needs low and high"),
    ('[[points]]\nposition_decay = 7\n', "points[0]: acceptance.position_decay must be a probability"),
    ('[[points]]\nnope = 1\n', "points[0]: unknown acceptance field 'nope'"),
    ('surprise = 1\n', "unknown key(s) surprise"),
    ('[ranges\n', "not valid TOML"),
])
def test_a_bad_ranges_file_is_one_located_line(tmp_path, body, needle):
    f = tmp_path / "r.toml"
    f.write_text(body, encoding="utf-8")
    with pytest.raises(RangesError) as e:
        AcceptanceDistribution.from_file(ILLUSTRATIVE, f)
    msg = str(e.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


def test_uncertainty_fields_are_validated_in_the_scenario():
    with pytest.raises(ScenarioError, match="uncertainty.draws must be a whole number"):
        Scenario().override({"uncertainty.draws": -1})
    with pytest.raises(ScenarioError, match=r"uncertainty.level must be a number in \(0, 1\)"):
        Scenario().override({"uncertainty.level": 1.0})


# ------------------------------------------------------------------------------------------ the planner
def test_replicas_in_one_lockstep_run_equal_each_model_planned_alone(trajs):
    table = UnitTable.from_episodes(to_episodes(trajs))
    setting = Scenario().setting()
    strat = make_strategy("specagent", k=4, review="on_write")
    models = AcceptanceDistribution.priors(AcceptanceModel()).sample(4, 7)
    big = plan_specagent_replicas(table, strat, models, 0, setting)
    n = table.n_traj
    for r, m in enumerate(models):
        one = plan_specagent_replicas(table, strat, [m], 0, setting)  # the model planned alone
        sel = big.traj // n == r
        for col in ("phase", "tokens", "context", "wait_s"):
            assert np.array_equal(getattr(one, col), getattr(big, col)[sel]), col
        assert np.array_equal(big.stats[r * n:(r + 1) * n], one.stats)


def test_per_episode_replicas_equal_plan_strategy(trajs):
    eps = to_episodes(trajs)
    setting = Scenario().setting()
    strat = make_strategy("collab", k=4, review="on_write")
    models = AcceptanceDistribution.priors(AcceptanceModel()).sample(3, 1)
    big = plan_strategy(eps, strat, setting, models, 0)
    for r, m in enumerate(models):
        one = plan_strategy(eps, strat, setting, m, 0)
        sel = big.traj // len(eps) == r
        assert np.array_equal(one.tokens, big.tokens[sel]) and np.array_equal(one.phase, big.phase[sel])


def test_strong_only_does_not_read_the_acceptance_model(trajs):
    setting = Scenario().setting()
    strat = make_strategy("strongonly", k=4, review="on_write")
    eps = to_episodes(trajs)
    models = [AcceptanceModel(), AcceptanceModel.constant(0.1, weak_token_ratio=3.0, verdict_tokens=500)]
    plan = plan_strategy(eps, strat, setting, models, 0)
    a, b = plan.traj < len(eps), plan.traj >= len(eps)
    assert np.array_equal(plan.tokens[a], plan.tokens[b]) and np.array_equal(plan.context[a], plan.context[b])


# ------------------------------------------------------------------------------------------ the intervals
def test_seeded_monte_carlo_is_byte_deterministic(comp, trajs):
    a = ratio_intervals(comp, trajs, draws=12)
    b = ratio_intervals(comp, trajs, draws=12)
    assert a.table.to_csv().encode() == b.table.to_csv().encode()
    c = ratio_intervals(predict(comp.scenario.override({"seed": 1}), trajs, "x"), trajs, draws=12)
    assert c.table.to_csv() != a.table.to_csv()


def test_intervals_contain_the_point_estimate(comp, trajs):
    # over the priors (the calibrated set's points are not placed around the point: its interval need not hold it)
    iv = ratio_intervals(comp, trajs, dist=AcceptanceDistribution.priors(comp.scenario.acceptance), draws=40)
    t = iv.table
    assert set(t["strategy"]) == set(STRATS)
    inside = (t["low"] <= t["point"] + 1e-12) & (t["point"] <= t["high"] + 1e-12)
    assert inside.all(), t[~inside]
    # the point is the comparison's own figure
    assert iv.get("specagent", "wall_time_s_rel")[0] == pytest.approx(float(comp.summary.loc["specagent", "wall_time_s_rel"]))
    # and the intervals are real: the priors move SpecAgent's memory ratio by more than 10% of its value
    p, lo, hi = iv.get("specagent", "total_bytes_read_rel")
    assert hi - lo > 0.1 * p


def test_a_narrower_input_range_gives_a_narrower_interval(comp, trajs):
    full = AcceptanceDistribution.priors(comp.scenario.acceptance)
    widths = {}
    for f in (1.0, 0.5, 0.0):
        t = ratio_intervals(comp, trajs, dist=full.narrowed(f), draws=30).table
        widths[f] = (t["high"] - t["low"]).to_numpy()
    assert np.all(widths[0.5] <= widths[1.0] + 1e-12)
    assert (widths[0.5] < widths[1.0]).sum() >= 10  # not merely equal: most ratios shrink
    assert np.all(widths[0.0] == 0.0)  # no uncertainty: every draw is the point estimate


def test_published_ranges_load_and_match_the_setting(comp):
    rows = load_published_ranges()
    assert {r.figure_id for r in rows} >= {"tau2_memory_ratio", "tau2_strong_share", "mcp_api_cost", "mcp_strong_decode"}
    mem = next(r for r in rows if r.figure_id == "tau2_memory_ratio")
    assert (mem.setting, mem.metric, mem.low, mem.high, mem.text()) == ("tau2", "total_bytes_read_rel", 0.43, 0.57, "0.43–0.57")
    share = next(r for r in rows if r.figure_id == "tau2_strong_share")
    assert share.relative_to == "" and share.metric == "strong_bytes_share"  # a share of SpecAgent's own traffic
    assert not {r.figure_id for r in rows} & {"vita_collab_bytes", "tau2_success_within_1pt", "h20_balance_point"}
    pub = published_for(comp)
    assert ("specagent", "api_usd_rel") not in pub  # edge figures left out of a self-hosted run
    assert pub[("specagent", "total_bytes_read_rel")].figure_id == "tau2_memory_ratio"  # the headline row, not the "< 1" one


def test_a_bad_protocol_figures_file_is_one_located_line(tmp_path):
    from specagent.measurements.protocol_figures import PROTOCOL_COLUMNS
    f = tmp_path / "p.csv"
    row = "x,tau2-bench,mars,specagent,bytes_ratio,0.1,0.2,ratio,strongonly,s,l,2026-12-01,"
    f.write_text(",".join(PROTOCOL_COLUMNS) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2.*setting"):
        load_published_ranges(f)


def test_fitted_intervals_stored_by_acceptance_fit_replace_the_priors_they_cover():
    base = replace(ILLUSTRATIVE, fit={"logs": ["a.jsonl"], "intervals": {"accept.read": [0.88, 0.93], "verdict_tokens": [40.2, 55.0]}})
    auto = Uncertainty().distribution(base)
    by = {r.path: r for r in auto.ranges}
    assert (by["accept.read"].low, by["accept.read"].high, by["accept.read"].shape) == (0.88, 0.93, "normal")
    assert by["verdict_tokens"].shape == "normal" and by["position_decay"].shape == "uniform"  # not fitted: its prior
    assert "fitted" in auto.source
    only = Uncertainty(ranges="fitted").distribution(base)
    assert [r.path for r in only.ranges] == ["accept.read", "verdict_tokens"]
    with pytest.raises(RangesError, match="carries no fitted intervals"):
        Uncertainty(ranges="fitted").distribution(ILLUSTRATIVE)
    # without stored intervals, 'auto' is the priors
    assert Uncertainty().distribution(ILLUSTRATIVE).ranges == AcceptanceDistribution.priors(ILLUSTRATIVE).ranges


def test_predict_on_a_fitted_acceptance_draws_from_its_intervals(tmp_path):
    """`acceptance fit` → `predict --acceptance FILE`: the intervals come from the fit (source (a) of the issue)."""
    from typer.testing import CliRunner

    from specagent.cli import app
    from specagent.simulator.acceptance.verdict_records import simulate_verdict_log
    from specagent.traces import save_trajectories
    from specagent.traces.verdict_log import write_verdict_log

    runner = CliRunner()
    log = write_verdict_log(simulate_verdict_log(AcceptanceModel(), 60, seed=3), tmp_path / "v.jsonl")
    fitted = tmp_path / "acc.toml"
    r = runner.invoke(app, ["acceptance", "fit", str(log), "-o", str(fitted)])
    assert r.exit_code == 0, r.output
    trace = tmp_path / "t.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:8], trace)
    out = tmp_path / "o"
    r = runner.invoke(app, ["predict", "--trace", str(trace), "--acceptance", str(fitted), "-o", str(out),
                            "--strategies", "strongonly,specagent", "--draws", "10"])
    assert r.exit_code == 0, r.output
    import json

    iv = json.loads((out / "summary.json").read_text())["intervals"]
    kinds = {x["parameter"]: x["range"] for x in iv["ranges"]}
    assert "(normal, 95%)" in kinds["accept.read"] and "fitted intervals" in iv["source"]


def test_predict_compares_the_published_figures_only_in_the_evaluated_setting_and_says_which(tmp_path):
    """The default run (recorded waits, cached verifier) prints no published range and names the setting the
    comparison uses; `--scenario wang2026-tau2` prints the table and says it is in the evaluated setting (issue 49)."""
    from typer.testing import CliRunner

    from specagent.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["predict", "--strategies", "specagent", "--draws", "4", "-o", str(tmp_path / "a")],
                        terminal_width=250)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "published protocol figures" not in text and "--scenario wang2026-tau2" in text
    assert "environment recorded, not none; verifier prompt cached, not fresh" in text
    ev = runner.invoke(app, ["predict", "--scenario", "wang2026-tau2", "--strategies", "specagent", "--draws", "4",
                             "--details", "-o", str(tmp_path / "b")], terminal_width=250)
    assert ev.exit_code == 0, ev.output
    text = " ".join(ev.output.split())
    assert "published protocol figures" in text and "tau2_flops_ratio" in text and "evaluated setting (this run's)" in text
