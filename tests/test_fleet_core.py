"""Fleet simulator: iteration roofline, closed-form decode runs, queueing theory, batch-1 equivalence, conservation."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.fleet.sim import C_CTX, C_DECODE, C_NEW, C_PHASE, C_POOL, CALL, KIND, P_LANES, PARALLEL, FleetSim, compile_steps
from specagent.simulator.capacity.fleet_build import fleet_from_setting, simulate_fleet
from specagent.simulator.fleet.config import Arrivals, Fleet, FleetError, ReplicaPool, Scheduler
from specagent.simulator.fleet.itercost import IterationCost, max_affine_sum, max_affine_sum3
from specagent.simulator.protocol.phases import PHASE_NAMES, STRONG_DECODE, STRONG_PREFILL
from specagent.simulator.protocol.plan import PlanBuilder
from specagent.costmodel.latency import latency_terms
from specagent.simulator.pricing.analytic import Pricer, wall_time
from specagent.simulator.protocol.phases import PREFILL_PHASES, STRONG_PHASES, WEAK_PHASES
from specagent.simulator.protocol.setting import ApiModel
from specagent.simulator.run import plan_strategy, simulate, to_episodes
from specagent.simulator.scenario import Scenario, default_setting, edge_setting
from specagent.simulator.strategies.catalog import make_strategy
from specagent.traces import default_workload_path, load_trajectories

NO_CHUNK = Scheduler(max_num_seqs=128, max_batched_tokens=None)


@pytest.fixture(scope="module")
def setting():
    return default_setting()


@pytest.fixture(scope="module")
def episodes():
    return to_episodes(load_trajectories(default_workload_path()))


# --- the iteration roofline ---------------------------------------------------------------
@pytest.mark.parametrize("which", ["weak", "strong"])
@pytest.mark.parametrize("mode", ["union", "active"])
def test_iteration_cost_equals_estimate_on_ragged_batches(setting, which, mode):
    dep = getattr(setting, which)
    ic = IterationCost(dep, mode)
    rng = np.random.default_rng(3)
    for _ in range(40):
        b = int(rng.integers(1, 12))
        new = np.where(rng.random(b) < 0.6, 1, rng.integers(1, 3000, b))
        ctx = rng.integers(0, 40000, b)
        ref = estimate(dep, Passes.from_batches([list(zip(new.tolist(), ctx.tolist()))]), mode)
        n = new.astype(float)
        c = ctx.astype(float)
        got = ic.one(n.sum(), float(b), float((n == 1).sum()), float((n * c + n * (n + 1) / 2).sum()), float((c + n).sum()),
                     float(sum(1 + (math.ceil(x / 64) if x > 1 else 0) for x in new)), float(b))
        assert got[0] == pytest.approx(float(ref.time_s[0]), rel=1e-9)
        assert got[1] == pytest.approx(float(ref.total_flops[0]), rel=1e-9)
        assert got[2] == pytest.approx(float(ref.total_bytes_read[0]), rel=1e-9)
        assert got[3] == pytest.approx(float(ref.total_bytes_written[0]), rel=1e-9)


@pytest.mark.parametrize("batch,k", [(1, 1), (1, 300), (7, 50), (64, 200)])
def test_decode_segment_sums_match_iteration_by_iteration(setting, batch, k):
    dep = setting.strong
    ic = IterationCost(dep)
    rng = np.random.default_rng(batch)
    ctx = rng.integers(100, 30000, batch).astype(float)
    seg = ic.decode_segment(batch, float(ctx.sum()))
    rows = [list(zip([1] * batch, (ctx + j).tolist())) for j in range(k)]
    ref = estimate(dep, Passes.from_batches(rows))
    tot = seg.totals(k)
    assert tot.time_s == pytest.approx(float(ref.time_s.sum()), rel=1e-9)
    assert tot.flops == pytest.approx(float(ref.total_flops.sum()), rel=1e-9)
    assert tot.bytes_read == pytest.approx(float(ref.total_bytes_read.sum()), rel=1e-9)
    assert tot.bytes_written == pytest.approx(float(ref.total_bytes_written.sum()), rel=1e-9)
    # the boundary a newcomer joins at: first iteration ending at or after dt
    ends = np.cumsum(ref.time_s)
    for dt in (0.0, ends[0] * 0.5, ends[-1] * 0.37, ends[-1]):
        j = seg.iterations_done_by(dt, k)
        assert j == int(np.searchsorted(ends, dt - 1e-15)) + 1, dt


@given(a1=st.floats(-5, 5), b1=st.floats(-1, 1), a2=st.floats(-5, 5), b2=st.floats(-1, 1), m=st.integers(0, 200))
@settings(max_examples=200, deadline=None)
def test_max_affine_sum_matches_loop(a1, b1, a2, b2, m):
    ref = sum(max(a1 + b1 * j, a2 + b2 * j) for j in range(m))
    assert max_affine_sum(a1, b1, a2, b2, m) == pytest.approx(ref, rel=1e-9, abs=1e-9)


@given(a=st.lists(st.floats(-5, 5), min_size=3, max_size=3), b=st.lists(st.floats(-1, 1), min_size=3, max_size=3),
       flat=st.booleans(), m=st.integers(0, 200))
@settings(max_examples=300, deadline=None)
def test_max_affine_sum3_matches_loop(a, b, flat, m):
    """Three branches (a decode segment's roofline branches and its constant launch branch when `flat`)."""
    if flat:
        b[2] = 0.0
    ref = sum(max(a[0] + b[0] * j, a[1] + b[1] * j, a[2] + b[2] * j) for j in range(m))
    assert max_affine_sum3(a[0], b[0], a[1], b[1], a[2], b[2], m) == pytest.approx(ref, rel=1e-9, abs=1e-9)


# --- closed-form advancement equals token-by-token stepping ----------------------------------
def test_closed_form_advance_matches_token_stepping(setting, episodes):
    eps = episodes[:12]
    plan = plan_strategy(eps, make_strategy("specagent"), setting, AcceptanceModel(), 5)
    fleet = fleet_from_setting(setting, 1, 1, scheduler=Scheduler(max_num_seqs=8, max_batched_tokens=512), prices={"h20": 1.0})
    arr = Arrivals(rate=0.5, seed=2).sample(plan.n_traj)
    fast = FleetSim(plan, fleet, arr).run()
    slow = FleetSim(plan, fleet, arr, step_by_token=True).run()
    # the slow run really steps every token; the fast one needs far fewer segments
    assert slow.segments["iterations"].max() == 1
    assert len(fast.segments) * 3 < len(slow.segments)
    key = ["task", "t_submit_s"]
    a, b = fast.calls.sort_values(key).reset_index(drop=True), slow.calls.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b)
    np.testing.assert_allclose(a["t_done_s"], b["t_done_s"], rtol=1e-9)
    np.testing.assert_allclose(fast.tasks["latency_s"], slow.tasks["latency_s"], rtol=1e-9)
    for col in ("flops", "bytes_read", "bytes_written", "busy_s", "iterations"):
        np.testing.assert_allclose(fast.replicas[col], slow.replicas[col], rtol=1e-9)
    # batching really happened in this case (else the check is vacuous)
    assert fast.summary["weak_mean_decode_batch"] > 1.2


# --- M/G/1: Pollaczek–Khinchine -------------------------------------------------------------
def test_single_replica_fifo_matches_pollaczek_khinchine(setting):
    """One replica, one sequence at a time, Poisson single-call tasks: mean queueing delay = λE[S²]/(2(1-ρ))."""
    rng = np.random.default_rng(11)
    n = 20000
    types = [(300, 40), (2000, 200), (800, 900)]  # (prompt tokens, decoded tokens)
    probs = np.array([0.5, 0.3, 0.2])
    kinds = rng.choice(len(types), n, p=probs)
    b = PlanBuilder()
    for t, kind in enumerate(kinds):
        p, m = types[kind]
        b.add(t, STRONG_PREFILL, p, 0)
        b.add(t, STRONG_DECODE, m, p)
        b.stats.append({})
    plan = b.build()
    # service time of each type from the batch-1 pricer (an independent code path from the fleet's)
    costs = Pricer(setting).price(plan)
    svc = np.bincount(plan.traj, weights=costs.time_s - costs.request_s, minlength=n)  # the replica's part: no overhead
    s_type = np.array([svc[np.flatnonzero(kinds == k)[0]] for k in range(len(types))])
    es, es2 = float(probs @ s_type), float(probs @ s_type**2)
    lam = 0.6 / es
    fleet = Fleet(weak=None, strong=ReplicaPool(setting.strong, 1, scheduler=Scheduler(max_num_seqs=1, max_batched_tokens=None)))
    res = FleetSim(plan, fleet, Arrivals(rate=lam, seed=4).sample(n), warmup=0.0).run()
    pk = lam * es2 / (2 * (1 - lam * es))
    wq = float(res.calls["queue_s"].mean())
    assert wq == pytest.approx(pk, rel=0.08)
    np.testing.assert_allclose(res.calls.sort_values("task")["service_s"].to_numpy(), svc, rtol=1e-9)
    assert res.summary["strong_utilisation"] == pytest.approx(0.6, rel=0.05)


# --- no contention: fleet equals the per-trajectory accounting ------------------------------
def _accounting_with_overhead(plan, setting, ref) -> np.ndarray:
    """The batch-1 accounting's wall time per task: it holds each prefilling call's per-request overhead itself
    (latency.request_overhead_s, the fleet's rule), which is what the no-contention fleet must reproduce."""
    costs = Pricer(setting).price(plan)
    np.testing.assert_allclose(wall_time(plan, costs.time_s), ref["wall_time_s"], rtol=1e-12)  # the same accounting
    want = np.zeros(len(plan))
    prefill = np.isin(plan.phase, PREFILL_PHASES)
    for dep, phases in ((setting.weak, WEAK_PHASES), (setting.strong, STRONG_PHASES)):
        if not isinstance(dep, ApiModel):
            want[prefill & np.isin(plan.phase, phases)] = latency_terms(dep).request_s
    np.testing.assert_array_equal(costs.request_s, want)  # once per served prefill, nothing for an API or a decode
    return wall_time(plan, costs.time_s)


def _queue_is_only_the_overhead(res, setting) -> None:
    """No contention: a call waits for admission only for its engine's per-request overhead (a prefilling call)."""
    calls = res.calls
    want = np.zeros(len(calls))
    for pool, dep in (("weak", setting.weak), ("strong", setting.strong)):
        if not isinstance(dep, ApiModel):
            want[((calls["pool"] == pool) & (calls["prefill_tokens"] > 0)).to_numpy()] = latency_terms(dep).request_s
    np.testing.assert_allclose(calls["queue_s"].to_numpy(), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("strategy", ["strongonly", "specagent", "exactmatch", "weakonly"])
def test_unlimited_replicas_equal_batch_one_accounting(setting, episodes, strategy):
    eps = episodes[:25]
    ref = simulate(eps, strategy, setting, seed=3)
    plan = plan_strategy(eps, make_strategy(strategy), setting, AcceptanceModel(), 3)
    fleet = fleet_from_setting(setting, None, None, scheduler=NO_CHUNK)
    arr = np.arange(len(eps)) * 1000.0  # arrival times are irrelevant with no contention
    res = FleetSim(plan, fleet, arr).run()
    np.testing.assert_allclose(res.tasks["latency_s"], _accounting_with_overhead(plan, setting, ref), rtol=1e-9)
    s = res.summary
    for model in ("weak", "strong"):
        for m in ("flops", "bytes_read", "bytes_written"):
            assert s[f"{model}_{m}"] == pytest.approx(float(ref[f"{model}_{m}"].sum()), rel=1e-9)
    assert s["strong_mean_decode_batch"] in (0.0, 1.0)
    _queue_is_only_the_overhead(res, setting)


def test_fleet_prices_verifier_reasoning_as_the_analytic_engine(setting, episodes):
    """Reasoning tokens are Strong decode: with none, tied to the workload or given, the fleet (no contention)
    equals the analytic accounting, and more reasoning reads more Strong bytes and takes longer."""
    eps = episodes[:25]
    out = {}
    for name, acc in (("off", AcceptanceModel(thinking=False)), ("tied", AcceptanceModel()),
                      ("given", AcceptanceModel(verify_reasoning_tokens=2000, repair_reasoning_tokens=2000))):
        ref = simulate(eps, "specagent", setting, seed=3, acceptance=acc)
        plan = plan_strategy(eps, make_strategy("specagent"), setting, acc, 3)
        res = FleetSim(plan, fleet_from_setting(setting, None, None, scheduler=NO_CHUNK), np.arange(len(eps)) * 1000.0).run()
        np.testing.assert_allclose(res.tasks["latency_s"], _accounting_with_overhead(plan, setting, ref), rtol=1e-9)
        assert res.summary["strong_bytes_read"] == pytest.approx(float(ref["strong_bytes_read"].sum()), rel=1e-9)
        out[name] = (res.summary["strong_bytes_read"], float(res.tasks["latency_s"].sum()))
    assert out["off"][0] < out["tied"][0] < out["given"][0] and out["off"][1] < out["tied"][1] < out["given"][1]


def test_api_strong_pool_equals_batch_one_accounting(episodes):
    edge = edge_setting()
    eps = episodes[:15]
    ref = simulate(eps, "specagent", edge, seed=1)
    plan = plan_strategy(eps, make_strategy("specagent"), edge, AcceptanceModel(), 1)
    res = FleetSim(plan, fleet_from_setting(edge, None, None, scheduler=NO_CHUNK), np.zeros(len(eps))).run()
    np.testing.assert_allclose(res.tasks["latency_s"], _accounting_with_overhead(plan, edge, ref), rtol=1e-9)
    np.testing.assert_allclose(res.tasks["api_usd"], ref["api_usd"], rtol=1e-9)
    assert res.summary["strong_replicas"] == 0 and res.summary["usd_per_hour"] == 0.0


def test_contention_slows_tasks_down(setting, episodes):
    """One shared replica at high load vs none shared: each task is slower by exactly its calls' queueing plus
    their slower (batched) service, and the summary's queue mean is the calls' admit - submit."""
    eps = episodes[:30]
    plan = plan_strategy(eps, make_strategy("strongonly"), setting, AcceptanceModel(), 0)
    arr = Arrivals(rate=2.0, seed=0).sample(len(eps))
    free = FleetSim(plan, fleet_from_setting(setting, None, None), arr).run()
    one = FleetSim(plan, fleet_from_setting(setting, 1, 1), arr).run()
    assert one.summary["latency_mean_s"] > free.summary["latency_mean_s"]
    assert one.summary["strong_mean_decode_batch"] > 2.0
    _queue_is_only_the_overhead(free, setting)
    slower = one.tasks.set_index("task")["latency_s"] - free.tasks.set_index("task")["latency_s"]
    per_call = [r.calls.assign(w=r.calls["t_done_s"] - r.calls["t_submit_s"]).groupby("task")["w"].sum() for r in (one, free)]
    np.testing.assert_allclose(slower.to_numpy(), (per_call[0] - per_call[1]).reindex(slower.index).to_numpy(), rtol=1e-9, atol=1e-9)
    strong = one.calls[one.calls["pool"] == "strong"]
    assert one.summary["strong_queue_mean_s"] == pytest.approx(float((strong["t_admit_s"] - strong["t_submit_s"]).mean()), rel=1e-12)
    assert one.summary["strong_queue_mean_s"] > 0.0  # newcomers wait for the running iteration to end


# --- conservation -------------------------------------------------------------------------
@given(
    n_tasks=st.integers(1, 12), seed=st.integers(0, 10**6), weak_n=st.integers(1, 3), strong_n=st.integers(1, 3),
    router=st.sampled_from(["session_affinity", "least_outstanding", "round_robin"]),
    max_seqs=st.integers(1, 16), budget=st.sampled_from([None, 64, 512, 2048]),
    strategy=st.sampled_from(["strongonly", "specagent", "exactmatch", "router", "collab"]), rate=st.floats(0.05, 5.0),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tasks_and_tokens_are_conserved(setting, episodes, n_tasks, seed, weak_n, strong_n, router, max_seqs, budget, strategy, rate):
    sched = Scheduler(max_num_seqs=max_seqs, max_batched_tokens=None if budget is None else max(budget, max_seqs))
    fleet = fleet_from_setting(setting, weak_n, strong_n, router=router, scheduler=sched)
    res = simulate_fleet(episodes, strategy, fleet, n_tasks, Arrivals(rate=rate, seed=seed), Scenario(seed=seed))
    t = res.tasks
    assert len(t) == n_tasks and t["task"].tolist() == list(range(n_tasks))
    assert np.isfinite(t["end_s"]).all() and (t["end_s"] >= t["start_s"]).all()
    steps = compile_steps(plan_strategy([e for e in _sampled(episodes, n_tasks, seed)], make_strategy(strategy), setting,
                                        AcceptanceModel(), seed))
    n_calls = sum(_count_calls(s) for s in steps)
    assert len(res.calls) == n_calls
    c = res.calls
    assert (c["t_done_s"] >= c["t_admit_s"]).all() and (c["t_admit_s"] >= c["t_submit_s"]).all()
    # every planned call ran exactly once, in its own pool and phase, on its own context and token counts;
    # a prefix-cache miss (another replica) prefills the whole context, a hit only the new tokens
    planned = Counter(k for t, seq in enumerate(steps) for k in _call_keys(t, seq))
    assert Counter(zip(c["task"], c["pool_i"], c["phase"], c["decode_context"], c["decode_tokens"])) == planned
    miss = ~c["cache_hit"].astype(bool)
    assert (c.loc[miss, "prefill_tokens"] == c.loc[miss, "decode_context"]).all()
    seg = res.segments
    decode_tok = np.where(seg["prefill_tokens"] == 0, seg["batch"] * seg["iterations"], seg["tokens"] - seg["prefill_tokens"])
    assert seg["prefill_tokens"].sum() == c["prefill_tokens"].sum()
    assert decode_tok.sum() == c["decode_tokens"].sum()
    assert (seg["batch"] <= max_seqs).all()
    if budget is not None:
        assert (seg["tokens"] <= max(budget, max_seqs)).all()


def _sampled(episodes, n, seed):
    from specagent.simulator.capacity.fleet_build import sample_tasks
    return [episodes[i] for i in sample_tasks(len(episodes), n, seed)]


def _call_keys(task: int, seq) -> list[tuple]:
    """(task, pool, phase name, context after the prefill, decode tokens) of every call in a compiled step sequence."""
    keys = []
    for s in seq:
        if s[KIND] == CALL:
            keys.append((task, s[C_POOL], PHASE_NAMES[s[C_PHASE]], s[C_CTX] + s[C_NEW], s[C_DECODE]))
        elif s[KIND] == PARALLEL:
            keys.extend(k for sub in s[P_LANES] for k in _call_keys(task, sub))
    return keys


def _count_calls(seq) -> int:
    n = 0
    for s in seq:
        if s[KIND] == CALL:
            n += 1
        elif s[KIND] == PARALLEL:
            n += sum(_count_calls(sub) for sub in s[P_LANES])
    return n


# --- arrivals, errors, trace output --------------------------------------------------------
def test_arrival_processes_have_the_stated_rate_and_burstiness():
    p = Arrivals("poisson", rate=2.0, seed=1).sample(20000)
    gaps = np.diff(np.concatenate([[0], p]))
    assert gaps.mean() == pytest.approx(0.5, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    b = Arrivals("bursty", rate=2.0, cv=3.0, seed=1).sample(20000)
    gb = np.diff(np.concatenate([[0], b]))
    assert gb.mean() == pytest.approx(0.5, rel=0.1)
    assert gb.std() / gb.mean() == pytest.approx(3.0, rel=0.15)
    assert np.array_equal(Arrivals(rate=2.0, seed=1).sample(50), Arrivals(rate=2.0, seed=1).sample(50))
    t = Arrivals("trace", times=(5.0, 3.0, 9.0)).sample(3)
    assert t.tolist() == [0.0, 2.0, 6.0]
    with pytest.raises(ValueError, match="only 3 timestamps"):
        Arrivals("trace", times=(5.0, 3.0, 9.0)).sample(4)
    with pytest.raises(ValueError, match="rate must be > 0"):
        Arrivals(rate=0.0)


def test_missing_pool_and_oversized_call_are_clear_errors(setting, episodes):
    plan = plan_strategy(episodes[:2], make_strategy("specagent"), setting, AcceptanceModel(), 0)
    with pytest.raises(FleetError, match="no weak pool"):
        FleetSim(plan, Fleet(weak=None, strong=ReplicaPool(setting.strong, 1)), np.zeros(2))
    b = PlanBuilder()
    b.add(0, STRONG_PREFILL, 50_000_000, 0)
    b.stats.append({})
    with pytest.raises(FleetError, match="strong pool: a call of task 0 needs"):
        FleetSim(b.build(), Fleet(weak=None, strong=ReplicaPool(setting.strong, 1)), np.zeros(1)).run()
    with pytest.raises(ValueError, match="max_batched_tokens"):
        Scheduler(max_num_seqs=256, max_batched_tokens=128)


def test_run_is_deterministic_and_writes_a_chrome_trace(setting, episodes, tmp_path):
    fleet = fleet_from_setting(setting, 2, 1, prices={"h20": 1.5})
    a = simulate_fleet(episodes, "specagent", fleet, 20, Arrivals(rate=1.0, seed=3), Scenario(seed=3), trace_path=tmp_path / "t.json")
    b = simulate_fleet(episodes, "specagent", fleet, 20, Arrivals(rate=1.0, seed=3), Scenario(seed=3))
    pd.testing.assert_frame_equal(a.calls, b.calls)
    assert a.summary == b.summary
    data = json.loads((tmp_path / "t.json").read_text())
    names = {e["name"] for e in data["traceEvents"]}
    assert any(n.startswith("decode x") for n in names) and any(n.startswith("task ") for n in names)
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]
    # $ per task: 3 replicas' GPUs x $1.5/h over the run's span, divided by tasks
    span = a.tasks["end_s"].max() - a.tasks["arrival_s"].min()
    assert a.summary["usd_per_task"] == pytest.approx((2 * 1 + 1 * 8) * 1.5 * span / 3600 / 20)
    hist = a.batch_histogram("weak")
    assert hist.sum() == pytest.approx(1.0)
