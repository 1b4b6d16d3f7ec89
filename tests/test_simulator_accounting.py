"""Hand-traced protocol plans, caching policies, API pricing, protocol-log replay, predictor."""

from __future__ import annotations

import numpy as np
import pytest

from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.phases import (
    STRONG_DECODE, STRONG_PREFILL, STRONG_VERDICT, STRONG_VERIFY, TOOL, USER, WEAK_DECODE, WEAK_PREFILL,
)
from specagent.simulator.protocol.workload import Action, Episode, UserTurn, episode_from_trajectory, episodes_from_arrays
from specagent.simulator.predictor import validate_predictor
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.run import compare, plan_strategy, simulate
from specagent.simulator.scenario import default_setting
from specagent.simulator.protocol.setting import ApiModel, Setting
from specagent.simulator.strategies.catalog import SpecAgent, make_strategy
from specagent.traces import default_workload_path, load_trajectories, step_arrays
from specagent.traces.schema import Actor, SpecLabel, Step, StepKind, Trajectory

SETTING = default_setting()
READ = Action("read", False, True, 30, 20, 100, 0.5)
WRITE = Action("write", True, True, 40, 25, 10, 0.25)
EP = Episode("hand", 1000, (UserTurn(50, 2.0), READ, READ, WRITE))


def rows(plan):
    return [(int(p), int(t), int(c), float(w)) for p, t, c, w in zip(plan.phase, plan.tokens, plan.context, plan.wait_s)]


def test_specagent_all_accepted_hand_trace():
    acc = AcceptanceModel.constant(1.0, weak_token_ratio=1.0)
    plan = plan_strategy([EP], SpecAgent(k=4), SETTING, acc, 0)
    # context: 1000 system + 50 user = 1050 committed before drafting
    assert rows(plan) == [
        (USER, 0, 0, 2.0),
        (WEAK_PREFILL, 1050, 0, 0.0), (WEAK_DECODE, 30, 1050, 0.0), (TOOL, 0, 0, 0.5),          # read 1, result 100
        (WEAK_PREFILL, 100, 1070, 0.0), (WEAK_DECODE, 30, 1170, 0.0), (TOOL, 0, 0, 0.5),        # read 2
        (WEAK_PREFILL, 100, 1190, 0.0), (WEAK_DECODE, 40, 1290, 0.0),                           # write held
        (STRONG_VERIFY, 1050 + 120 + 120 + 25, 0, 0.0),                                          # one prefill of everything
        # thinking (the default): the verdict on the held write reasons as long as the workload's write step did,
        # its 40 decoded tokens less its 25 visible ones
        (STRONG_VERDICT, acc.accept_verdict_tokens + (40 - 25), 1315, 0.0),
        (TOOL, 0, 0, 0.25),                                                                       # the write runs after review
    ]
    assert plan.stat("reviews")[0] == 1 and plan.stat("strong_calls")[0] == 1 and plan.stat("committed_weak")[0] == 3
    assert plan.stat("committed_context_tokens")[0] == 1000 + 50 + 120 + 120 + 25 + 10


def test_specagent_rejection_with_repair_turn_hand_trace():
    acc = AcceptanceModel.constant(0.0, p_valid_replacement=0.0, verdict_tokens=48, weak_token_ratio=1.0)
    plan = plan_strategy([Episode("r", 1000, (READ, WRITE))], SpecAgent(k=4), SETTING, acc, 0)
    r = rows(plan)
    # drafted read then held write; review rejects the first step (the read)
    assert r[:5] == [(WEAK_PREFILL, 1000, 0, 0.0), (WEAK_DECODE, 30, 1000, 0.0), (TOOL, 0, 0, 0.5),
                     (WEAK_PREFILL, 100, 1020, 0.0), (WEAK_DECODE, 40, 1120, 0.0)]
    assert r[5] == (STRONG_VERIFY, 1145, 0, 0.0)
    # reason + replacement call (the read's 20 visible tokens) + the read's recorded reasoning (30 - 20)
    assert r[6] == (STRONG_VERDICT, 48 + 20 + 10, 1145, 0.0)
    # rolled back to the committed 1000 tokens, Strong decodes the repair turn there (visible 20 + reasoning 10),
    # then the read runs again
    assert r[7] == (STRONG_DECODE, 30, 1000, 0.0)
    assert r[8] == (TOOL, 0, 0, 0.5)
    # Weak resumes: it must prefill the repaired step and its result, then re-drafts the write
    assert r[9] == (WEAK_PREFILL, 120, 1000, 0.0)
    assert plan.stat("rejections")[0] == 2 and plan.stat("repairs")[0] == 2
    assert plan.stat("wasted_weak_tokens")[0] == 70 + 40


@pytest.mark.parametrize("thinking, vr, rr, verdict, repair", [
    (False, None, None, 48 + 20, 20),            # no reasoning: the reason + the visible call; the repair's visible step
    (True, None, None, 48 + 20 + 10, 20 + 10),   # tied to the workload: the read's recorded reasoning, 30 - 20
    (True, 300, 200, 48 + 20 + 300, 20 + 200),   # given: N reasoning tokens per verification / per repair
    (False, 300, 200, 48 + 20, 20),              # thinking off overrides the given counts
])
def test_reasoning_tokens_in_one_rejected_segment_by_hand(thinking, vr, rr, verdict, repair):
    acc = AcceptanceModel.constant(0.0, p_valid_replacement=0.0, verdict_tokens=48, weak_token_ratio=1.0, thinking=thinking,
                                   verify_reasoning_tokens=vr, repair_reasoning_tokens=rr)
    plan = plan_strategy([Episode("r", 1000, (READ, WRITE))], SpecAgent(k=4), SETTING, acc, 0)
    r = rows(plan)
    assert r[6] == (STRONG_VERDICT, verdict, 1145, 0.0)
    assert r[7] == (STRONG_DECODE, repair, 1000, 0.0)
    # Strong decode tokens of the whole episode: two rejections (the read, then the re-drafted write), each a verdict
    # and a repair; the write's visible 25 tokens, its recorded reasoning 15
    wv = {None: 15}.get(vr, vr) if thinking else 0
    wr = {None: 15}.get(rr, rr) if thinking else 0
    strong_decoded = plan.tokens[np.isin(plan.phase, [STRONG_VERDICT, STRONG_DECODE])].sum()
    assert strong_decoded == verdict + repair + (48 + 25 + wv) + (25 + wr)


@pytest.mark.parametrize("thinking, vr, verdict", [(False, None, 4), (True, None, 4 + 15), (True, 100, 104)])
def test_reasoning_tokens_in_one_accepted_segment_by_hand(thinking, vr, verdict):
    acc = AcceptanceModel.constant(1.0, weak_token_ratio=1.0, accept_verdict_tokens=4, thinking=thinking, verify_reasoning_tokens=vr)
    plan = plan_strategy([EP], SpecAgent(k=4), SETTING, acc, 0)
    assert plan.tokens[plan.phase == STRONG_VERDICT].tolist() == [verdict]
    assert not np.any(plan.phase == STRONG_DECODE)


def test_fresh_verifier_prompt_costs_flops_not_memory():
    """With many reviews per task (every chunk reviewed), re-reading the history each time shows."""
    from specagent.costmodel.passes import Passes
    from specagent.costmodel.roofline import estimate

    trajs = load_trajectories(default_workload_path())[:40]
    fresh_setting = Setting(**{**SETTING.__dict__, "verifier_prompt": "fresh"})
    cached = simulate(trajs, "specagent_every_chunk", SETTING)
    fresh = simulate(trajs, "specagent_every_chunk", fresh_setting)
    # each review re-reads verifier system prompt + the whole history from scratch: (n, c) cached -> (vsys + n + c, 0)
    eps = [episode_from_trajectory(t) for t in trajs]
    a = plan_strategy(eps, make_strategy("specagent_every_chunk"), SETTING, AcceptanceModel(), 0)
    b = plan_strategy(eps, make_strategy("specagent_every_chunk"), fresh_setting, AcceptanceModel(), 0)
    va, vb = a.phase == STRONG_VERIFY, b.phase == STRONG_VERIFY
    assert va.sum() == vb.sum() > 40  # every chunk reviewed
    assert (b.tokens[vb] == fresh_setting.verifier_system_tokens + a.tokens[va] + a.context[va]).all() and (b.context[vb] == 0).all()
    hand = {name: estimate(SETTING.strong, Passes.uniform(p.tokens[v], p.context[v], 1)) for name, p, v in (("c", a, va), ("f", b, vb))}
    assert cached["flops_strong_verify"].sum() == pytest.approx(float(hand["c"].total_flops.sum()), rel=1e-9)
    assert fresh["flops_strong_verify"].sum() == pytest.approx(float(hand["f"].total_flops.sum()), rel=1e-9)
    assert fresh["bytes_read_strong_verify"].sum() == pytest.approx(float(hand["f"].total_bytes_read.sum()), rel=1e-9)
    f_ratio = fresh["flops_strong_verify"].sum() / cached["flops_strong_verify"].sum()
    b_ratio = fresh["bytes_read_strong_verify"].sum() / cached["bytes_read_strong_verify"].sum()
    assert f_ratio > 5            # re-reading the whole history each review multiplies prefill FLOPs
    assert b_ratio < 1.5          # ...while the verification pass still reads the weights about once
    assert fresh["verifier_prompt"].iloc[0] == "fresh"


def test_no_prefix_caching_reprefills_everything():
    ep = Episode("c", 500, (READ, UserTurn(10, 0.0), READ))
    on = plan_strategy([ep], make_strategy("strongonly"), SETTING, AcceptanceModel(), 0)
    off = plan_strategy([ep], make_strategy("strongonly"), Setting(**{**SETTING.__dict__, "prefix_caching": False}), AcceptanceModel(), 0)
    pre_on = on.tokens[on.phase == STRONG_PREFILL]
    pre_off = off.tokens[off.phase == STRONG_PREFILL]
    assert pre_on.tolist() == [500, 100 + 10]  # second call: the read result and the user turn
    assert pre_off.tolist() == [500, 500 + 20 + 100 + 10]
    assert (off.context[off.phase == STRONG_PREFILL] == 0).all()


def test_api_pricing_by_hand():
    api = ApiModel("x", usd_per_mtok_input=2.0, usd_per_mtok_cached_input=0.5, usd_per_mtok_output=8.0, ttft_s=0.4,
                   output_tokens_per_s=100.0, source="test")
    s = Setting(weak=SETTING.weak, strong=api)
    ep = Episode("a", 1000, (READ, UserTurn(10, 0.0), READ))
    frame = simulate([ep], "strongonly", s)
    # call 1: 1000 new input; call 2: 110 new + 1020 cached; outputs 30 + 30
    expect = (1000 * 2.0 + 110 * 2.0 + 1020 * 0.5 + 60 * 8.0) / 1e6
    assert frame["api_usd"].iloc[0] == pytest.approx(expect, rel=1e-12)
    assert frame["strong_model_time_s"].iloc[0] == pytest.approx(2 * 0.4 + 60 / 100.0)
    assert frame["strong_bytes_read"].iloc[0] == 0  # a hosted model's traffic is not visible


def test_columnar_fast_path_equals_object_path():
    trajs = load_trajectories(default_workload_path())
    a = [episode_from_trajectory(t) for t in trajs]
    b = episodes_from_arrays(step_arrays(trajs), [t.task_id for t in trajs])
    assert a == b


def _labelled_log() -> Trajectory:
    """Committed steps of a live run: read accepted, write repaired by Strong (repair turn of 33 tokens)."""
    L = SpecLabel
    steps = [
        Step(index=0, actor=Actor.USER, kind=StepKind.USER, new_context_tokens=40, user_latency_s=1.0),
        Step(index=1, actor=Actor.AGENT, kind=StepKind.READ, tool_name="get_user", new_context_tokens=20, output_tokens=30,
             label=L(drafted_by="weak", verdict="accepted", segment=0)),
        Step(index=2, actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name="get_user", new_context_tokens=100, tool_latency_s=0.1),
        Step(index=3, actor=Actor.AGENT, kind=StepKind.WRITE, tool_name="book", irreversible=True, new_context_tokens=25,
             output_tokens=40, label=L(drafted_by="strong", verdict="repair", verdict_tokens=17, repair_tokens=33, segment=0)),
        Step(index=4, actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name="book", new_context_tokens=10, tool_latency_s=0.2),
    ]
    return Trajectory(task_id="log", domain="airline", source="test", system_prompt_tokens=900, steps=steps)


def test_protocol_log_replayed_exactly_without_acceptance_model():
    log = _labelled_log()
    assert log.is_protocol_log
    # whatever the acceptance model says, the labels decide
    for acc in (AcceptanceModel.constant(1.0, weak_token_ratio=1.0), AcceptanceModel.constant(0.0, weak_token_ratio=1.0)):
        plan = plan_strategy([episode_from_trajectory(log)], SpecAgent(k=4), SETTING, acc, seed=5)
        verdicts = plan.tokens[plan.phase == STRONG_VERDICT].tolist()
        repairs = plan.tokens[plan.phase == STRONG_DECODE].tolist()
        assert verdicts == [17] and repairs == [33]
        assert plan.stat("rejections")[0] == 1 and plan.stat("committed_weak")[0] == 1 and plan.stat("committed_strong")[0] == 1


def test_rejected_label_is_refused_with_a_clear_error():
    log = _labelled_log()
    steps = list(log.steps)
    steps[1] = steps[1].model_copy(update={"label": SpecLabel(drafted_by="weak", verdict="rejected")})
    bad = log.model_copy(update={"steps": steps})
    with pytest.raises(ValueError, match="step 1 is labelled 'rejected'"):
        episode_from_trajectory(bad)


def test_predictor_error_is_the_gap_between_prediction_and_accounting():
    trajs = load_trajectories(default_workload_path())[:30]
    table = validate_predictor({"w": trajs}, strategies=("specagent",))
    assert set(table["weight_mode"]) == {"union", "active"}
    from specagent.costmodel.phases import decode

    for _, r in table.iterrows():
        assert 0 < r["predicted_strong_share"] < 1 and 0 < r["accounted_strong_share"] < 1
        assert r["abs_error"] == pytest.approx(abs(r["predicted_strong_share"] - r["accounted_strong_share"]))
        # by hand: accounted = Strong bytes / all bytes of the run; predicted = decoded tokens x batch-1 decode bytes
        # per token at half the mean committed context, Strong (verdicts + repairs) against Weak (drafts)
        setting = Setting(**{**SETTING.__dict__, "weight_mode": r["weight_mode"]})
        f = simulate(trajs, "specagent", setting, seed=0)
        assert r["accounted_strong_share"] == pytest.approx(f["strong_bytes_read"].sum() / f["total_bytes_read"].sum(), rel=1e-12)
        ctx = f["committed_context_tokens"].mean() / 2
        per_tok = {m: float(decode(getattr(setting, m), context=ctx, weight_mode=r["weight_mode"]).total_bytes_read[0]) for m in ("weak", "strong")}
        pred_s = (f["tokens_strong_verdict"] + f["tokens_strong_decode"]).sum() * per_tok["strong"]
        pred_w = f["tokens_weak_decode"].sum() * per_tok["weak"]
        assert r["predicted_strong_share"] == pytest.approx(pred_s / (pred_s + pred_w), rel=1e-12)
    # union mode adds verification-prefill expert reads the decode-token predictor does not see
    union = table.set_index("weight_mode").loc["union"]
    active = table.set_index("weight_mode").loc["active"]
    assert union["accounted_strong_share"] > active["accounted_strong_share"]


def test_compare_summary_ratios_and_assumptions():
    trajs = load_trajectories(default_workload_path())[:20]
    c = compare(trajs, ["strongonly", "specagent", "weakonly"], success_rates={"strongonly": 0.5})
    s = c.summary
    assert s.loc["strongonly", "total_bytes_read_rel"] == 1.0
    assert s.loc["weakonly", "strong_bytes_read_rel"] == 0.0
    # Strong-only decodes every agent message; SpecAgent's Strong model decodes only verdicts and repairs
    out_tokens = sum(u.out_tokens for t in trajs for u in episode_from_trajectory(t).units if not u.is_user)
    f = c.per_trajectory
    sa = f[f["strategy"] == "specagent"]
    verdicts_and_repairs = float((sa["tokens_strong_verdict"] + sa["tokens_strong_decode"]).sum())
    assert s.loc["strongonly", "strong_decode_tokens"] == out_tokens
    assert s.loc["specagent", "strong_decode_tokens_rel"] == pytest.approx(verdicts_and_repairs / out_tokens, rel=1e-12)
    assert s.loc["specagent", "strong_decode_tokens_rel"] < 0.5
    assert s.loc["strongonly", "measured_success"] == 0.5 and np.isnan(s.loc["specagent", "measured_success"])
    assert "calibrated" in c.assumptions["acceptance_model"]["source"]
    assert c.phase_time.loc["strongonly", "weak_drafting"] == 0
    # the phase split adds up to the wall time for purely sequential strategies
    assert c.phase_time.loc["specagent"].sum() == pytest.approx(s.loc["specagent", "wall_time_s"], rel=1e-9)


def test_pricer_events_match_roofline_for_verify():
    from specagent.costmodel.phases import verify

    plan = plan_strategy([EP], SpecAgent(k=4), SETTING, AcceptanceModel.constant(1.0, weak_token_ratio=1.0), 0)
    costs = Pricer(SETTING).price(plan)
    i = int(np.flatnonzero(plan.phase == STRONG_VERIFY)[0])
    ref = verify(SETTING.strong, plan.tokens[i], plan.context[i])
    assert costs.bytes_read[i] == pytest.approx(float(ref.total_bytes_read[0]), rel=1e-12)
    # a verification is one request to the Strong engine: its one pass plus the engine's per-request overhead, once
    from specagent.costmodel.latency import latency_terms
    request_s = latency_terms(SETTING.strong).request_s
    assert request_s > 1e-3 and costs.request_s[i] == request_s
    assert costs.time_s[i] == pytest.approx(float(ref.time_s[0]) + request_s, rel=1e-12)


def test_agent_time_and_environment_time_split_the_wall_time():
    """model_wall_time_s is the wall time with tool and user waits at zero; env_wall_time_s is the rest.

    For strategies whose events run one after another the wall time is a plain sum, so the model
    time must equal the two models' phase times and the environment time the recorded waits; the
    lane strategy (exact match runs Weak and Strong side by side) must still split its wall exactly.
    """
    trajs = load_trajectories(default_workload_path())[:12]
    comp = compare(trajs, ["strongonly", "specagent", "exactmatch"])
    f = comp.per_trajectory
    assert np.allclose(f["model_wall_time_s"] + f["env_wall_time_s"], f["wall_time_s"], rtol=0, atol=1e-9)
    plain = f[f["strategy"] != "exactmatch"]
    # the models' busy time plus the per-request overheads their calls waited (no pass runs for those)
    busy_and_requests = plain["weak_model_time_s"] + plain["strong_model_time_s"] + plain["weak_request_s"] + plain["strong_request_s"]
    assert (plain["strong_request_s"] > 0).all()
    assert np.allclose(plain["model_wall_time_s"], busy_and_requests, rtol=1e-12)
    assert np.allclose(plain["env_wall_time_s"], plain["time_s_tool"] + plain["time_s_user"], rtol=1e-12, atol=1e-9)
    waits = f["time_s_tool"] + f["time_s_user"]
    assert (waits > 0).all()  # the recorded workload has waits, so the split is not trivially zero
    lanes = f[f["strategy"] == "exactmatch"]  # side-by-side models: model wall < sum of both models' time
    assert (lanes["model_wall_time_s"] < lanes["weak_model_time_s"] + lanes["strong_model_time_s"] + lanes["weak_request_s"]
            + lanes["strong_request_s"]).all()
    s = comp.summary
    assert s.loc["specagent", "model_wall_time_s_rel"] == pytest.approx(
        s.loc["specagent", "model_wall_time_s"] / s.loc["strongonly", "model_wall_time_s"], rel=1e-12)


def test_the_verdict_token_predictor_counts_reasoning_tokens():
    """The predictor's Strong tokens are the verdict and repair decode, reasoning included: N more reasoning tokens
    per verification and repair add exactly N per review and per repair turn."""
    from specagent.simulator.predictor import predict_strong_share

    trajs = load_trajectories(default_workload_path())[:20]
    base = AcceptanceModel(verify_reasoning_tokens=0, repair_reasoning_tokens=0)
    more = AcceptanceModel(verify_reasoning_tokens=250, repair_reasoning_tokens=100)
    a = predict_strong_share(simulate(trajs, "specagent", SETTING, acceptance=base, seed=2), SETTING)
    b = predict_strong_share(simulate(trajs, "specagent", SETTING, acceptance=more, seed=2), SETTING)
    plan = plan_strategy([episode_from_trajectory(t) for t in trajs], SpecAgent(), SETTING, base, 2)
    extra = 250 * plan.stat("reviews") + 100 * plan.stat("repairs")
    np.testing.assert_array_equal(b["strong_verdict_repair_tokens"].to_numpy() - a["strong_verdict_repair_tokens"].to_numpy(), extra)
    assert (b["predicted_strong_share"] >= a["predicted_strong_share"]).all() and extra.sum() > 0


def test_reasoning_tokens_are_api_output_tokens_at_the_edge():
    """Behind an API, each reasoning token is billed at the output price (and decoded at the provider's speed)."""
    from specagent.simulator.scenario import edge_setting

    edge = edge_setting()
    trajs = load_trajectories(default_workload_path())[:20]
    base = AcceptanceModel(verify_reasoning_tokens=0, repair_reasoning_tokens=0)
    more = AcceptanceModel(verify_reasoning_tokens=250, repair_reasoning_tokens=100)
    a = simulate(trajs, "specagent", edge, acceptance=base, seed=2)
    b = simulate(trajs, "specagent", edge, acceptance=more, seed=2)
    plan = plan_strategy([episode_from_trajectory(t) for t in trajs], SpecAgent(), edge, base, 2)
    extra = 250 * plan.stat("reviews") + 100 * plan.stat("repairs")
    np.testing.assert_allclose(b["api_usd"].to_numpy() - a["api_usd"].to_numpy(), extra * edge.strong.usd_per_mtok_output / 1e6,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b["wall_time_s"].to_numpy() - a["wall_time_s"].to_numpy(), extra / edge.strong.output_tokens_per_s,
                               rtol=1e-9, atol=1e-9)
