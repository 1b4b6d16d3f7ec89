"""The lockstep SpecAgent planner equals the per-episode reference planner, row for row.

The invariant tests (test_simulator_invariants.py) run on the reference planner with its
audit log; this equality carries them over to the lockstep planner that `predict`,
`simulate` and the benchmarks use.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specagent.simulator.acceptance.model import AcceptanceModel, unit_uniforms
from specagent.simulator.protocol.plan import STAT_NAMES
from specagent.simulator.protocol.workload import (
    Action, Episode, UnitTable, UserTurn, episodes_from_arrays, unit_table_from_arrays,
)
from specagent.simulator.run import plan_strategy
from specagent.simulator.scenario import default_setting
from specagent.simulator.strategies.catalog import REGISTRY, STRONG, SingleModel, SpecAgent, StrategyEntry, make_strategy
from specagent.simulator.protocol.workload import episode_from_trajectory
from specagent.traces import default_workload_path, load_trajectories

SETTING = default_setting()
KINDS = ("read", "write", "generic", "think", "reply")


@st.composite
def episode(draw):
    units = []
    for _ in range(draw(st.integers(0, 16))):
        if draw(st.integers(0, 4)) == 0:
            units.append(UserTurn(tokens=draw(st.integers(0, 300)), latency_s=draw(st.sampled_from([0.0, 1.5]))))
            continue
        kind = draw(st.sampled_from(KINDS))
        held = kind == "write" or (kind in ("generic", "reply") and draw(st.booleans()))
        units.append(Action(kind=kind, held=held, has_tool=kind != "reply" and draw(st.integers(0, 5)) > 0,
                            out_tokens=draw(st.sampled_from([0, 1, 37, 400])), ctx_tokens=draw(st.sampled_from([0, 3, 120])),
                            result_tokens=draw(st.sampled_from([0, 800])), tool_s=draw(st.sampled_from([0.0, 0.25]))))
    return Episode(task_id="h", system_tokens=draw(st.integers(0, 4000)), units=tuple(units))


def assert_same_plan(a, b) -> None:
    assert len(a) == len(b)
    for col in ("traj", "phase", "tokens", "context", "wait_s", "group", "lane"):
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col), err_msg=col)
    for j, name in enumerate(STAT_NAMES):
        np.testing.assert_array_equal(a.stats[:, j], b.stats[:, j], err_msg=name)


def both(episodes, strategy, acc, seed, setting=SETTING):
    fast = plan_strategy(episodes, strategy, setting, acc, seed)
    ref = plan_strategy(episodes, strategy, setting, acc, seed, lockstep=False)
    return fast, ref


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(eps=st.lists(episode(), min_size=1, max_size=5), p=st.sampled_from([0.0, 0.3, 0.8, 1.0]), k=st.integers(1, 7),
       seed=st.integers(0, 2**31), review=st.sampled_from(["on_write", "hold_replies", "every_chunk"]),
       exact=st.booleans(), caching=st.booleans(), prompt=st.sampled_from(["cached", "fresh"]),
       ratio=st.sampled_from([1.0, 0.7, 1.3]), corr=st.sampled_from([0.0, 0.5]), decay=st.sampled_from([1.0, 0.9]),
       replacement=st.sampled_from([0.0, 0.5, 1.0]), verdict=st.sampled_from([0, 48]), accept_verdict=st.sampled_from([0, 4]),
       thinking=st.booleans(), vr=st.sampled_from([None, 0, 250]), rr=st.sampled_from([None, 0, 90]),
       task_sd=st.sampled_from([0.0, 0.0, 1.5]))
def test_lockstep_equals_reference_planner(eps, p, k, seed, review, exact, caching, prompt, ratio, corr, decay, replacement,
                                           verdict, accept_verdict, thinking, vr, rr, task_sd):
    acc = dataclasses.replace(AcceptanceModel.constant(p), weak_token_ratio=ratio, correlation=corr, position_decay=decay,
                              p_valid_replacement=replacement, verdict_tokens=verdict, accept_verdict_tokens=accept_verdict,
                              thinking=thinking, verify_reasoning_tokens=vr, repair_reasoning_tokens=rr, task_sd=task_sd)
    setting = dataclasses.replace(SETTING, prefix_caching=caching, verifier_prompt=prompt)
    strat = SpecAgent(k=k, review=review, verifier="exact" if exact else "semantic")
    assert_same_plan(*both(eps, strat, acc, seed, setting))


def test_lockstep_equals_reference_on_a_synthetic_workload():
    from specagent.traces import step_arrays
    from specagent.traces.profile import load_profile
    from specagent.traces.synth import synthesize_frame

    arrays = step_arrays(synthesize_frame(load_profile("tau2_airline"), 300, seed=3))
    table = unit_table_from_arrays(arrays)
    fast, ref = both(table, SpecAgent(k=4), AcceptanceModel(), 11)
    assert_same_plan(fast, ref)
    assert fast.stat("rejections").sum() > 50 and fast.stat("replacements").sum() > 10  # the repair paths were exercised
    # the table and its Episode objects describe the same units
    assert _tables_equal(UnitTable.from_episodes(episodes_from_arrays(arrays)), table)


def _synthetic_table(n: int = 200):
    from specagent.traces import step_arrays
    from specagent.traces.profile import load_profile
    from specagent.traces.synth import synthesize_frame

    return unit_table_from_arrays(step_arrays(synthesize_frame(load_profile("tau2_airline"), n, seed=3)))


def test_a_task_effect_is_drawn_once_per_trajectory_in_both_planners():
    """task_sd > 0: the lockstep and per-episode planners draw the same u per trajectory (row for row equal, replicas
    included); a replica at task_sd 0 plans exactly what that model alone plans; and the effect is felt in the
    direction the mean of a logit-normal acceptance moves."""
    table = _synthetic_table()
    base = AcceptanceModel()
    het = dataclasses.replace(base, task_sd=2.0)
    fast, ref = both(table, SpecAgent(k=4), het, 11)
    assert_same_plan(fast, ref)
    reps = plan_strategy(table, SpecAgent(k=4), SETTING, [base, het], 11)  # replicas: the second equals het alone
    n = table.n_traj
    np.testing.assert_array_equal(reps.stats[n:], fast.stats)
    plain = plan_strategy(table, SpecAgent(k=4), SETTING, base, 11)
    np.testing.assert_array_equal(reps.stats[:n], plain.stats)
    # the default accepts ~0.4 for the median task; over tasks E[expit(logit 0.4 + 2 z)] ~ 0.45 > 0.4, so fewer
    # verifications reject (0.70 -> 0.60 here, ~330 verifications each: 4 binomial SE apart)
    share = lambda plan: plan.stat("rejections").sum() / plan.stat("reviews").sum()  # noqa: E731
    assert share(fast) < share(plain) - 0.05, (share(fast), share(plain))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(low=st.floats(0.05, 0.6), gap=st.floats(0.2, 0.39), sd=st.floats(0.1, 3.0), seed=st.integers(0, 2**31))
def test_a_task_effect_keeps_the_kind_order_and_conserves_steps(low, gap, sd, seed):
    """Every task's shift is the same monotone map of every kind's acceptance, so a kind accepted more often for the
    median task is accepted at least as often for every task; and every reference action is committed exactly once
    (by the Weak model or the Strong one) whatever the effect."""
    acc = dataclasses.replace(AcceptanceModel(), accept={"read": low + gap, "write": low, "generic": low, "think": low + gap,
                                                         "reply": low}, task_sd=sd)
    z = np.linspace(-4, 4, 41)
    for u in z:
        t = acc.for_task(float(u))
        assert t.task_sd == 0.0 and t.accept["read"] >= t.accept["write"] and 0.0 < t.accept["write"] < 1.0
    table = _synthetic_table(40)
    plan = plan_strategy(table, SpecAgent(k=4), SETTING, acc, seed)
    np.testing.assert_array_equal(plan.stat("committed_weak") + plan.stat("committed_strong"), plan.stat("reference_actions"))


def _tables_equal(a: UnitTable, b: UnitTable) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))


def test_draws_depend_only_on_seed_trajectory_and_position():
    a = unit_uniforms(5, np.array([0, 0, 1, 7]), np.array([0, 1, 0, 3]))
    b = unit_uniforms(5, np.array([7, 1]), np.array([3, 0]))
    np.testing.assert_array_equal(a[[3, 2]], b)
    assert not np.array_equal(unit_uniforms(6, [0], [0]), unit_uniforms(5, [0], [0]))
    many = unit_uniforms(0, np.repeat(np.arange(2000), 50), np.tile(np.arange(50), 2000))
    assert many.shape == (100_000, 2) and many.min() >= 0.0 and many.max() < 1.0
    # uniform: mean 1/2 and variance 1/12 within ~5 standard errors; the two streams uncorrelated
    assert abs(many.mean() - 0.5) < 5 * (1 / 12 / many.size) ** 0.5
    assert abs(many.var() - 1 / 12) < 0.002
    assert abs(np.corrcoef(many[:, 0], many[:, 1])[0, 1]) < 0.02
    with pytest.raises(ValueError):
        unit_uniforms(-1, [0], [0])


def test_labelled_logs_and_audits_use_the_reference_planner():
    ep = Episode(task_id="log", system_tokens=10, units=(Action("write", True, True, 5, 5, 5, 0.0, verdict="repair", verdict_tokens=7),),
                 labelled=True)
    with pytest.raises(ValueError, match="protocol logs"):
        UnitTable.from_episodes([ep])
    plan = plan_strategy([ep], SpecAgent(), SETTING, AcceptanceModel(), 0)  # falls back, does not raise
    assert plan.stat("repairs")[0] + plan.stat("replacements")[0] == 1



def test_a_subclass_of_specagent_plans_through_its_own_run():
    """Only SpecAgent itself takes the lockstep path; a subclass that changes `run` is planned by that `run`."""

    class Shy(SpecAgent):
        def run(self, ep, st_, acc, draws, verifier_prompt, vsys):  # never drafts: Strong-only in disguise
            SingleModel(STRONG).run(ep, st_, acc, draws, verifier_prompt, vsys)

    episodes = [episode_from_trajectory(t) for t in load_trajectories(default_workload_path())[:4]]
    shy = plan_strategy(episodes, Shy(), SETTING, AcceptanceModel(), 0)
    assert_same_plan(shy, plan_strategy(episodes, make_strategy("strongonly"), SETTING, AcceptanceModel(), 0))
    assert not Shy().lockstep and SpecAgent().lockstep
    for entry in REGISTRY:  # the registry says which strategies the vectorised planner plans, and it is right
        s = entry.make(3, "on_write")
        assert (s.name, s.lockstep) == (entry.name, entry.lockstep)
        assert not entry.takes_k or isinstance(s, SpecAgent)  # only SpecAgent's family reads K
    assert {e.name for e in REGISTRY if e.takes_k} >= {"specagent", "specagent_exact", "specagent_hold_replies",
                                                       "specagent_every_chunk"}
    assert not {e.name for e in REGISTRY if e.takes_k} & {"strongonly", "weakonly", "exactmatch", "router", "collab"}
    # both are read off the strategy, not restated: a SpecAgent variant with K fixed takes no K, a subclass is not lockstep
    fixed_k = StrategyEntry("specagent_k1", "K = 1 always", lambda k, r: SpecAgent(k=1, review=r, name="specagent_k1"))
    shy_entry = StrategyEntry("shy", "a subclass", lambda k, r: Shy(k=k, review=r))
    assert (fixed_k.takes_k, fixed_k.lockstep) == (False, True)
    assert (shy_entry.takes_k, shy_entry.lockstep) == (True, False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(0, 5)), max_size=80))
def test_row_order_is_lexsort(rows):
    """The plan's rows sort by one stable sort of a combined key: the permutation lexsort gives, ties kept in order."""
    from specagent.simulator.strategies.lockstep import _row_order

    traj, rnd, slot = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    assert np.array_equal(_row_order(traj, rnd, slot, 7), np.lexsort((slot, rnd, traj)))
    if rows:  # a key too wide for 63 bits falls back to lexsort itself
        assert np.array_equal(_row_order(traj, rnd, slot * 2**58, 7), np.lexsort((slot * 2**58, rnd, traj)))
