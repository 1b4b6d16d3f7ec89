"""Protocol invariants under hypothesis: safety, conservation, limiting cases, engine agreement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.pricing.des import run_des
from specagent.simulator.protocol.phases import (
    PHASE_NAMES, STRONG_DECODE, STRONG_PREFILL, STRONG_VERDICT, STRONG_VERIFY, WEAK_DECODE, WEAK_PREFILL,
)
from specagent.simulator.protocol.workload import Action, Episode, UserTurn, episode_from_trajectory
from specagent.simulator.pricing.analytic import Pricer, wall_time
from specagent.simulator.run import plan_strategy, simulate
from specagent.simulator.scenario import default_setting
from specagent.simulator.strategies.catalog import STRATEGY_NAMES, make_strategy

SETTING = default_setting()
KINDS = ("read", "write", "generic", "think", "reply")


@st.composite
def episodes(draw):
    n = draw(st.integers(1, 14))
    units = []
    for _ in range(n):
        if draw(st.integers(0, 4)) == 0:
            units.append(UserTurn(tokens=draw(st.integers(0, 300)), latency_s=draw(st.floats(0, 5))))
            continue
        kind = draw(st.sampled_from(KINDS))
        held = kind == "write" or (kind == "generic" and draw(st.booleans()))
        units.append(Action(kind=kind, held=held, has_tool=kind != "reply", out_tokens=draw(st.integers(0, 400)),
                            ctx_tokens=draw(st.integers(0, 200)), result_tokens=draw(st.integers(0, 800)) if kind != "reply" else 0,
                            tool_s=draw(st.floats(0, 2))))
    return Episode(task_id="h", system_tokens=draw(st.integers(0, 4000)), units=tuple(units))


def _audit(ep, strategy, acc, seed=0):
    audits: list = []
    plan = plan_strategy([ep], strategy, SETTING, acc, seed, audits)
    return plan, audits[0]


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(ep=episodes(), p=st.floats(0, 1), k=st.integers(1, 6), seed=st.integers(0, 10**6),
       review=st.sampled_from(["on_write", "hold_replies", "every_chunk"]), verifier=st.sampled_from(["semantic", "exact"]))
def test_no_held_action_executes_before_review(ep, p, k, seed, review, verifier):
    from specagent.simulator.strategies.catalog import SpecAgent

    acc = AcceptanceModel.constant(p)
    _, audit = _audit(ep, SpecAgent(k=k, review=review, verifier=verifier), acc, seed)
    reviewed: set[int] = set()
    for ev in audit:
        if ev[0] == "review":
            reviewed.update(ev[1])
        elif ev[0] == "exec":
            _, idx, by, was_reviewed = ev
            if ep.units[idx].held:
                assert by == 1 or idx in reviewed, f"held action {idx} executed by Weak without review"
                assert was_reviewed


@FAST
@given(ep=episodes(), p=st.floats(0, 1), k=st.integers(1, 6), seed=st.integers(0, 10**6), name=st.sampled_from(STRATEGY_NAMES))
def test_every_reference_action_committed_exactly_once(ep, p, k, seed, name):
    acc = AcceptanceModel.constant(p)
    plan, audit = _audit(ep, make_strategy(name, k=k), acc, seed)
    commits = [ev[1] for ev in audit if ev[0] == "commit"]
    actions = [i for i, u in enumerate(ep.units) if isinstance(u, Action)]
    assert sorted(commits) == actions
    assert plan.stat("committed_weak")[0] + plan.stat("committed_strong")[0] == len(actions)


@FAST
@given(ep=episodes(), name=st.sampled_from(["strongonly", "specagent", "router", "collab", "exactmatch"]), seed=st.integers(0, 1000))
def test_committed_context_tokens_conserved(ep, name, seed):
    """With equal Weak/Strong token counts, every strategy ends on the same committed context."""
    acc = AcceptanceModel.constant(0.6, weak_token_ratio=1.0)
    ref = plan_strategy([ep], make_strategy("strongonly"), SETTING, acc, 0)
    plan = plan_strategy([ep], make_strategy(name), SETTING, acc, seed)
    expect = ep.system_tokens + sum(u.tokens if isinstance(u, UserTurn) else u.ctx_tokens + u.result_tokens for u in ep.units)
    assert ref.stat("committed_context_tokens")[0] == expect
    assert plan.stat("committed_context_tokens")[0] == expect


@FAST
@given(ep=episodes(), k=st.integers(1, 6))
def test_acceptance_one_strong_decodes_only_verdicts(ep, k):
    acc = AcceptanceModel.constant(1.0, thinking=False)
    plan = plan_strategy([ep], make_strategy("specagent", k=k), SETTING, acc, 0)
    assert not np.any(plan.phase == STRONG_DECODE)
    verdict_tokens = plan.tokens[plan.phase == STRONG_VERDICT].sum()
    assert verdict_tokens == acc.accept_verdict_tokens * plan.stat("reviews")[0]
    assert plan.stat("rejections")[0] == 0


@FAST
@given(ep=episodes(), k=st.integers(1, 6), seed=st.integers(0, 1000))
def test_acceptance_zero_every_review_repairs_one_step(ep, k, seed):
    acc = AcceptanceModel.constant(0.0)
    plan = plan_strategy([ep], make_strategy("specagent", k=k), SETTING, acc, seed)
    reviews = plan.stat("reviews")[0]
    assert plan.stat("rejections")[0] == reviews
    assert plan.stat("repairs")[0] + plan.stat("replacements")[0] == reviews
    assert plan.stat("committed_strong")[0] == reviews


def _strong_decoded(plan) -> int:
    return int(plan.tokens[np.isin(plan.phase, [STRONG_VERDICT, STRONG_DECODE])].sum())


@FAST
@given(ep=episodes(), p=st.floats(0, 1), k=st.integers(1, 6), seed=st.integers(0, 10**6),
       vr=st.integers(0, 2000), rr=st.integers(0, 2000), dv=st.integers(0, 500), dr=st.integers(0, 500))
def test_more_reasoning_never_lowers_strong_decode_tokens(ep, p, k, seed, vr, rr, dv, dr):
    """Reasoning tokens are decoded tokens: more of them per verification or repair never decodes fewer; thinking
    off decodes no more than thinking on (tied to the workload); the verdicts themselves do not change."""
    base = AcceptanceModel.constant(p)
    strat = make_strategy("specagent", k=k)
    lo = plan_strategy([ep], strat, SETTING, base.__class__(**{**base.__dict__, "verify_reasoning_tokens": vr,
                                                               "repair_reasoning_tokens": rr}), seed)
    hi = plan_strategy([ep], strat, SETTING, base.__class__(**{**base.__dict__, "verify_reasoning_tokens": vr + dv,
                                                               "repair_reasoning_tokens": rr + dr}), seed)
    off = plan_strategy([ep], strat, SETTING, base.__class__(**{**base.__dict__, "thinking": False}), seed)
    tied = plan_strategy([ep], strat, SETTING, base, seed)
    assert _strong_decoded(hi) >= _strong_decoded(lo)
    assert _strong_decoded(off) <= _strong_decoded(tied)
    # exactly: every review adds dv more verification reasoning tokens, every repair turn dr more
    assert _strong_decoded(hi) - _strong_decoded(lo) == dv * lo.stat("reviews")[0] + dr * lo.stat("repairs")[0]
    np.testing.assert_array_equal(hi.stats, lo.stats)


def test_no_reviews_needed_means_no_strong_work():
    """Only reads and replies, on_write policy: Strong is never called."""
    units = tuple(Action("read", False, True, 50, 20, 100, 0.1) for _ in range(5)) + (Action("reply", False, False, 30, 30, 0, 0.0),)
    ep = Episode("r", 1000, units)
    plan = plan_strategy([ep], make_strategy("specagent", k=3), SETTING, AcceptanceModel.constant(1.0), 0)
    assert plan.stat("strong_calls")[0] == 0 and not np.any(np.isin(plan.phase, [STRONG_PREFILL, STRONG_VERIFY, STRONG_DECODE, STRONG_VERDICT]))


@settings(max_examples=25, deadline=None)
@given(ep=episodes(), model=st.sampled_from(["strongonly", "weakonly"]))
def test_single_model_equals_roofline_of_its_steps_to_the_byte(ep, model):
    """Strong-only / Weak-only cost = the roofline cost of each prefill and decode run they make."""
    frame = simulate([ep], model, SETTING, AcceptanceModel(weak_token_ratio=1.0))
    plan = plan_strategy([ep], make_strategy(model), SETTING, AcceptanceModel(weak_token_ratio=1.0), 0)
    dep = SETTING.strong if model == "strongonly" else SETTING.weak
    pre, dec = (STRONG_PREFILL, STRONG_DECODE) if model == "strongonly" else (WEAK_PREFILL, WEAK_DECODE)
    expect_bytes = 0.0
    for e in range(len(plan)):
        if plan.phase[e] == pre:
            expect_bytes += float(estimate(dep, Passes.uniform(plan.tokens[e], plan.context[e])).total_bytes_read[0])
        elif plan.phase[e] == dec:
            # the closed form must equal stepping token by token
            for j in range(int(plan.tokens[e])):
                expect_bytes += float(estimate(dep, Passes.uniform(1, plan.context[e] + j)).total_bytes_read[0])
    got = float(frame[f"{'strong' if model == 'strongonly' else 'weak'}_bytes_read"].iloc[0])
    assert got == pytest.approx(expect_bytes, rel=1e-9)
    other = "weak" if model == "strongonly" else "strong"
    assert frame[f"{other}_bytes_read"].iloc[0] == 0


def test_engines_agree_step_for_step(tmp_path):
    """The simpy model of the protocol (pricing/des.py, simpy processes on unlimited resources) is the analytic
    engine's oracle: every trajectory ends where the analytic sum says, and so does every prefix of one."""
    from specagent.traces import default_workload_path, load_trajectories

    trajs = load_trajectories(default_workload_path())[:30]
    for name in STRATEGY_NAMES:
        a = simulate(trajs, name, SETTING, seed=3, engine="analytic")
        plan = plan_strategy([episode_from_trajectory(t) for t in trajs], make_strategy(name), SETTING, AcceptanceModel(), 3)
        times = Pricer(SETTING).price(plan).time_s
        start, end = run_des(plan, times)
        np.testing.assert_allclose(a["wall_time_s"], end - start, rtol=1e-12, atol=1e-9)
        # and step for step: the simpy replay of each group ends where the analytic sum says
        for t in range(3):
            idx = plan.events_of(t)
            one = type(plan)(traj=np.zeros(len(idx), dtype=np.int64), phase=plan.phase[idx], tokens=plan.tokens[idx], context=plan.context[idx],
                             wait_s=plan.wait_s[idx], group=plan.group[idx], lane=plan.lane[idx], stats=plan.stats[t:t + 1], n_traj=1)
            for cut in range(1, len(idx) + 1):
                sub = type(plan)(traj=one.traj[:cut], phase=one.phase[:cut], tokens=one.tokens[:cut], context=one.context[:cut],
                                 wait_s=one.wait_s[:cut], group=one.group[:cut], lane=one.lane[:cut], stats=one.stats, n_traj=1)
                _, end = run_des(sub, times[idx][:cut])
                assert end[0] == pytest.approx(wall_time(sub, times[idx][:cut])[0], rel=1e-12, abs=1e-12)


def test_deterministic_same_seed_same_bytes(tmp_path):
    from specagent.traces import default_workload_path, load_trajectories

    trajs = load_trajectories(default_workload_path())[:20]
    a = simulate(trajs, "specagent", SETTING, seed=7)
    b = simulate(trajs, "specagent", SETTING, seed=7)
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    c = simulate(trajs, "specagent", SETTING, seed=8)
    assert not a["strong_bytes_read"].equals(c["strong_bytes_read"])


def test_phase_names_cover_every_phase():
    """Each phase code lands in its own named column, priced on its own model: trajectory i holds one event of phase i."""
    from specagent.simulator.protocol.phases import TOOL, USER
    from specagent.simulator.protocol.plan import PlanBuilder
    from specagent.simulator.pricing.results import per_trajectory

    names = {WEAK_PREFILL: "weak_prefill", WEAK_DECODE: "weak_decode", STRONG_PREFILL: "strong_prefill",
             STRONG_VERIFY: "strong_verify", STRONG_DECODE: "strong_decode", STRONG_VERDICT: "strong_verdict",
             TOOL: "tool", USER: "user"}
    assert PHASE_NAMES == tuple(names[i] for i in range(8))
    b = PlanBuilder()
    for ph in range(8):
        if ph in (TOOL, USER):
            b.add(ph, ph, wait_s=1.5 + ph)
        else:
            b.add(ph, ph, 10 + ph, 100)
        b.stats.append({})
    plan = b.build()
    df = per_trajectory(plan, Pricer(SETTING).price(plan))
    prefill = (WEAK_PREFILL, STRONG_PREFILL, STRONG_VERIFY)
    for ph, name in names.items():
        row = df.iloc[ph]
        for other in names.values():
            assert row[f"tokens_{other}"] == (10 + ph if other == name and ph not in (TOOL, USER) else 0), (name, other)
            assert (row[f"time_s_{other}"] > 0) == (other == name), (name, other)
        if ph in (TOOL, USER):
            assert row[f"time_s_{name}"] == 1.5 + ph and row["total_flops"] == 0
            continue
        dep = SETTING.weak if name.startswith("weak") else SETTING.strong
        ref = estimate(dep, Passes.uniform(10 + ph, 100, 1) if ph in prefill else Passes.uniform(1, 100 + np.arange(10 + ph), 1))
        model, idle = ("weak", "strong") if dep is SETTING.weak else ("strong", "weak")
        assert row[f"{model}_flops"] == pytest.approx(float(ref.total_flops.sum()), rel=1e-9) and row[f"{idle}_flops"] == 0
        kind = "prefill" if ph in prefill else "decode"
        assert row[f"{model}_{kind}_tokens"] == 10 + ph
