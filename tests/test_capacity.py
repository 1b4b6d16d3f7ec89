"""Capacity plans at sustained traffic (issue 13): steady-state windows, stability, slices, the analytic bound,
plain serving request traces, the central-queue router against Erlang C, and the engines' scheduler defaults.

Statistical checks are seeded and sized to run in seconds while a factor-of-two error (a
rate, a service time, a slice fraction) would fail them.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.serving_engine import EngineProfileError, load_engine, parse_engine
from specagent.hardware.profile import load_hardware
from specagent.simulator.capacity.bounds import pool_capacity, pool_work
from specagent.simulator.capacity.fleet_build import (
    GPU_COUNTS, build_fleet, episodes_of, fitting_deployment, plan_tasks, request_tasks, sized_deployment,
)
from specagent.simulator.fleet.config import STRONG_POOL, ReplicaPool, Scheduler, engine_scheduler
from specagent.simulator.jobs.plan import PlanRequest, plan_capacity
from specagent.simulator.jobs.plan_search import SLO
from specagent.simulator.rates_prices import parse_rates
from specagent.simulator.scenario import Scenario
from specagent.simulator.capacity.steady_state import (
    LOOK_TAIL, LOOKS, Metric, Window, choose_slice, look, measure_steady, mser5, percentile_ci, uncontended,
)
from specagent.traces import default_workload_path, load_trajectories
from specagent.traces.errors import TraceFormatError
from specagent.traces.requests import RequestTrace, load_requests, save_requests, synthetic_requests

SC = Scenario()


@pytest.fixture(scope="module")
def episodes():
    return episodes_of(load_trajectories(default_workload_path()))


@pytest.fixture(scope="module")
def strongonly(episodes):
    tasks = plan_tasks(episodes, "strongonly", SC, 2000)
    dep = fitting_deployment(SC.strong, "h200", tasks.max_context)
    build = lambda c: build_fleet(None, dep, c[0], c[1], weight_mode=SC.weight_mode)  # noqa: E731
    ref = float(uncontended(tasks, build((None, None))).tasks["latency_s"].quantile(0.95))
    return tasks, dep, build, ref


# --------------------------------------------------------------------------------------------- scheduler defaults
def test_pools_run_the_engines_own_scheduler_defaults_per_gpu_class():
    """vLLM picks 1,024 sequences / 8,192 tokens on GPUs of >= 70 GiB except A100, 256 / 2,048 elsewhere (arg_utils.py)."""
    vllm = load_engine("vllm")
    expect = {"h20": (1024, 8192), "h200": (1024, 8192), "h100": (1024, 8192), "mi300x": (1024, 8192), "b200": (1024, 8192),
              "a100_80gb_sxm": (256, 2048), "l40s": (256, 2048), "rtx5090": (256, 2048)}
    for gpu, (seqs, tokens) in expect.items():
        row = vllm.scheduler_for(load_hardware(gpu))
        assert (row.max_num_seqs, row.max_batched_tokens) == (seqs, tokens), gpu
        assert "arg_utils.py" in row.source
    assert load_hardware("a100_80gb_sxm").capacity_bytes / 2**30 >= 70  # excluded by name, not by memory
    ideal = load_engine("ideal").scheduler_for(load_hardware("h200"))
    assert (ideal.max_num_seqs, ideal.max_batched_tokens) == (128, 2048)  # what specagent ran before
    sgl = load_engine("sglang")
    assert sgl.scheduler_for(load_hardware("b200")).max_batched_tokens == 16384 + 4096
    assert sgl.scheduler_for(load_hardware("h200")).max_batched_tokens == 8192 + 4096
    dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h200"))
    pool = ReplicaPool(dep, 2)
    assert (pool.limits.max_num_seqs, pool.limits.max_batched_tokens) == (1024, 8192)
    assert "<= 1024 seqs, 8192 tokens/iteration" in pool.describe()
    assert ReplicaPool(dep, 2, scheduler=Scheduler(8, 256)).limits == Scheduler(8, 256)  # an explicit one wins
    a100 = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("a100_80gb_sxm"))
    assert engine_scheduler(a100).max_num_seqs == 256


def test_scheduler_rows_are_validated_with_the_file_and_row():
    data = {"id": "x", "name": "x", "version": "1"}
    base = dict(load_engine("ideal").__dict__)  # noqa: F841 (the shipped profile parses; below, bad rows do not)
    import tomllib
    from pathlib import Path

    good = tomllib.loads(Path(load_engine("ideal").path).read_text())
    with pytest.raises(EngineProfileError, match=r"e.toml: missing \[\[scheduler\]\] rows"):
        parse_engine({k: v for k, v in good.items() if k != "scheduler"}, "e.toml")
    with pytest.raises(EngineProfileError, match=r"row 1: 'max_num_seqs' must be a whole number >= 1"):
        parse_engine({**good, "scheduler": [{"min_gpu_memory_gib": 0, "max_num_seqs": 0, "max_batched_tokens": 8, "source": "s"}]},
                     "e.toml")
    with pytest.raises(EngineProfileError, match="the last \\[\\[scheduler\\]\\] row must match every GPU"):
        parse_engine({**good, "scheduler": [{"min_gpu_memory_gib": 70, "max_num_seqs": 8, "max_batched_tokens": 8, "source": "s"}]},
                     "e.toml")
    with pytest.raises(EngineProfileError, match="max_batched_tokens \\(4\\) must be >= max_num_seqs"):
        parse_engine({**good, "scheduler": [{"min_gpu_memory_gib": 0, "max_num_seqs": 8, "max_batched_tokens": 4, "source": "s"}]},
                     "e.toml")
    assert data  # the minimal header alone is not a profile
    with pytest.raises(EngineProfileError):
        parse_engine(data, "e.toml")


# --------------------------------------------------------------------------------------------- request traces
def test_request_traces_read_common_headers_and_name_bad_lines(tmp_path):
    p = tmp_path / "vidur.csv"
    p.write_text("Time,PromptTokenCount,CompletionTokenCount\n5.0,100,20\n5.5,7,1\n9.0,3000,400\n")
    t = load_requests(p)
    assert t.arrival_s.tolist() == [0.0, 0.5, 4.0] and t.prompt_tokens.tolist() == [100, 7, 3000]
    assert t.output_tokens.tolist() == [20, 1, 400] and t.rate == pytest.approx(2 / 4.0)
    az = tmp_path / "azure.csv"
    az.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.500,10,2\n2023-11-16 18:15:48.000,20,3\n")
    assert load_requests(az).arrival_s.tolist() == [0.0, 1.5]
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("num_prefill_tokens,num_decode_tokens\n10,2\n")
    assert load_requests(lengths).arrival_s is None
    bad = tmp_path / "bad.csv"
    head = "arrival_s,prompt_tokens,output_tokens\n"
    for text, msg in ((head + "0,10,2\n1,ten,2\n", r"bad.csv: line 3: field 'prompt_tokens': expected a whole number"),
                      (head + "2,10,2\n1,10,2\n", r"line 3: field 'arrival_s': expected times in arrival order"),
                      ("when,prompt_tokens,output_tokens\n1,10,0\n", r"line 2: field 'output_tokens'"),
                      ("a,b\n1,2\n", r"header: field 'prompt_tokens': expected a column named one of")):
        bad.write_text(text)
        with pytest.raises(TraceFormatError, match=msg):
            load_requests(bad)
    with pytest.raises(TraceFormatError, match="an existing CSV file"):
        load_requests(tmp_path / "missing.csv")
    syn = synthetic_requests(50, rate=3.0, seed=2)
    back = load_requests(save_requests(tmp_path / "rt.csv", syn))
    assert back.prompt_tokens.tolist() == syn.prompt_tokens.tolist()
    assert np.allclose(back.arrival_s, syn.arrival_s, atol=1e-6)


def test_a_request_is_one_call_whose_prefill_yields_the_first_token():
    trace = RequestTrace(np.array([100, 7]), np.array([20, 1]), np.array([0.0, 1.0]))
    tasks = request_tasks(trace)
    dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h200"))
    res = tasks.serve(build_fleet(None, dep, 0, 1, weight_mode="union"), trace.arrival_s)
    c = res.calls.sort_values("task")
    assert c["prefill_tokens"].tolist() == [100, 7] and c["decode_tokens"].tolist() == [19, 0]
    assert (c["pool"] == "strong").all() and res.summary["strategy"] == "serving"
    # a window longer than the plan replays its tasks cyclically
    res = tasks.serve(build_fleet(None, dep, 0, 1, weight_mode="union"), np.array([0.0, 1.0, 2.0, 3.0]))
    assert res.calls.sort_values("task")["prefill_tokens"].tolist() == [100, 7, 100, 7]


# --------------------------------------------------------------------------------------------- queueing theory
def _erlang_c_wait(lam: float, mu: float, c: int) -> tuple[float, float]:
    """(P(wait), mean wait in queue) of M/M/c, by hand."""
    a = lam / mu
    last = a**c / math.factorial(c) * c / (c - a)
    p_wait = last / (sum(a**k / math.factorial(k) for k in range(c)) + last)
    return p_wait, p_wait / (c * mu - lam)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_central_queue_with_batch_one_is_erlang_c(rho):
    """Single-call tasks, batch cap 1, c replicas behind one FIFO queue, near-exponential service: M/M/c."""
    dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h200"), serving_engine=load_engine("ideal"))
    c = 4
    trace = synthetic_requests(40_000, rate=1.0, prompt_mean=1.0, output_mean=200.0, seed=3)  # geometric: CV ~ 1
    tasks = request_tasks(trace)
    fleet = build_fleet(None, dep, 0, c, weight_mode="union", router="central_queue", scheduler=Scheduler(1, None))
    service = 0.5144  # about 200 decode iterations of the 4B model on one H200 (ideal engine); measured below
    arrivals = trace.arrival_s / (rho * c / service)
    calls = tasks.serve(fleet, arrivals).calls
    s = calls["service_s"].to_numpy()
    assert s.std() / s.mean() == pytest.approx(1.0, abs=0.03)
    lam = (len(arrivals) - 1) / arrivals[-1]
    p_wait, wq = _erlang_c_wait(lam, 1.0 / s.mean(), c)
    q = calls["queue_s"].to_numpy()
    assert q.mean() == pytest.approx(wq, rel=0.10)
    assert (q > 1e-12).mean() == pytest.approx(p_wait, abs=0.03)


# --------------------------------------------------------------------------------------------- steady-state statistics
def test_mser5_cuts_an_initial_transient_and_leaves_a_stationary_series():
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 1.0, 4000)
    assert mser5(x) <= 200  # stationary: little or nothing to drop
    y = x.copy()
    y[:600] += np.linspace(8.0, 0.0, 600)  # a fleet filling up
    d = mser5(y)
    assert 300 <= d <= 800
    z = x + np.linspace(0.0, 10.0, 4000)  # still rising: MSER wants the most it may
    assert mser5(z) >= 1900


def test_batch_quantile_interval_covers_the_true_percentile():
    true = -math.log(0.05)  # p95 of Exp(1)
    hits, widths = 0, []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        v = rng.exponential(1.0, 4000)
        t = np.sort(rng.uniform(0.0, 100.0, 4000))
        est, lo, hi = percentile_ci(v, t, 0.0, 100.0, 95.0)
        hits += lo <= true <= hi
        widths.append(hi - lo)
    assert 0.8 <= hits / 40 <= 1.0
    v = np.random.default_rng(1).exponential(1.0, 16000)
    t = np.linspace(0.0, 100.0, 16000)
    _, lo4, hi4 = percentile_ci(v, t, 0.0, 100.0, 95.0)
    assert (hi4 - lo4) < 0.75 * np.mean(widths)  # four times the data: about half the width
    # censored (still running) values are larger than any finished one
    est, lo, hi = percentile_ci(np.array([1.0] * 90 + [math.inf] * 10), np.linspace(0, 1, 100), 0.0, 1.01, 95.0)
    assert math.isinf(est) and math.isinf(hi)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.integers(1, 800)), st.integers(1, 5000), st.integers(1, 8), st.integers(2, 400))
def test_a_slice_never_carries_less_load_per_replica_than_the_fleet(n_w, n_s, min_rep, parts):
    sl = choose_slice((n_w, n_s), min_rep, parts)
    assert 0 < sl.fraction <= 1
    finite = [(k, n) for k, n in zip(sl.counts, (n_w, n_s)) if n]
    for k, n in zip(sl.counts, (n_w, n_s)):
        if n:
            assert 1 <= k <= n and sl.fraction >= k / n - 1e-12  # rate x fraction / k >= rate / n
        else:
            assert k == n  # unlimited stays unlimited
    if not sl.is_full:
        smallest = min(n for _, n in finite)
        k0 = next(k for k, n in finite if n == smallest)
        assert sl.fraction == k0 / smallest and k0 >= min_rep  # the smallest pool is cut exactly
        assert sl.load_excess == pytest.approx(max(sl.fraction / (k / n) - 1 for k, n in finite), abs=1e-12)
    assert sl.load_excess >= 0


def test_slice_examples_by_hand():
    sl = choose_slice((None, 64), 1, 8)
    assert sl.counts == (None, 8) and sl.fraction == 1 / 8 and sl.load_excess == 0
    # Weak 585, Strong 92: Strong (the smaller pool) is cut exactly; 1 or 2 Strong leave the Weak 6% over
    # (585 / 92 = 6.36 -> 6, 12.7 -> 12), 3 Strong 0.4% (19.08 -> 19)
    sl = choose_slice((585, 92), 1, 99)
    assert sl.counts == (19, 3) and sl.fraction == 3 / 92
    assert sl.load_excess == pytest.approx((585 * 3 / 92) / 19 - 1, abs=1e-12)
    assert choose_slice((3, 2), 4, 50).is_full  # too small to cut


# --------------------------------------------------------------------------------------------- stability and the bound
def test_an_overloaded_fleet_is_rejected_as_unstable_and_a_loaded_one_is_not(strongonly):
    tasks, dep, build, ref = strongonly
    cap = pool_capacity(dep, engine_scheduler(dep), pool_work(tasks, STRONG_POOL), SC.weight_mode)
    over = measure_steady(tasks, build, (0, 2), 1.3 * 2 * cap.tasks_per_s, Metric(95, "task"), ref, min_tasks=500)
    assert not over.stable and "fewer tasks than arrive" in over.reason
    # it completes at most 1/1.3 of what arrives (the bound is optimistic: less still), and at least 0.85/1.3: the
    # replica saturated runs at >= 85% of the bound (measured 93%, 87% / 96% with earlier engine fits; a bound that let
    # prompts ride in chunks smaller than the scheduler makes was 58% and failed here)
    assert 1 - 1 / 1.3 - 0.02 <= over.queue_growth <= 1 - 0.85 / 1.3
    fine = measure_steady(tasks, build, (0, 2), 0.5 * 2 * cap.tasks_per_s, Metric(95, "task"), ref, min_tasks=500)
    # at half the bound tasks take ~3.6x their uncontended time, so the in-flight count still grows through the window:
    # the deficit reads 5.4% here (3.5%, 4.3% / 4.7% and 1.8% / 4.2% with earlier fits), inside the detector's
    # noise allowance, against 21-35% for the overloaded fleet above
    assert fine.stable and abs(fine.queue_growth) < 0.08 and math.isfinite(fine.value_s)
    # it completes what arrives: the tasks arriving in the measured span (this seed's Poisson draw puts 7% fewer there
    # than the nominal 0.5 x 2 x cap; completions 96.5% of them)
    arrived = fine.tasks_measured / (fine.window.measure_end_s - fine.warmup_s)
    assert fine.throughput_per_s == pytest.approx(arrived, rel=0.1) and arrived == pytest.approx(cap.tasks_per_s, rel=0.1)


def test_the_analytic_bound_is_optimistic_by_little(episodes, strongonly):
    """n replicas at 1.15 x the bound's capacity are unstable in simulation; at 0.8 x they are stable.

    (At 1.05 x the fleet falls behind by about 4% of the arrivals, within the stability test's noise at 500 tasks; the
    bound's optimism itself is pinned by the saturated run of the test above.)"""
    tasks, dep, build, ref = strongonly
    cap = pool_capacity(dep, engine_scheduler(dep), pool_work(tasks, STRONG_POOL), SC.weight_mode)
    assert cap.replicas_for(3.001 * cap.tasks_per_s) == 4 and cap.replicas_for(2.999 * cap.tasks_per_s) == 3
    for factor, stable in ((1.15, False), (0.8, True)):
        r = measure_steady(tasks, build, (0, 3), factor * 3 * cap.tasks_per_s, Metric(95, "task"), ref, min_tasks=500)
        assert r.stable is stable, (factor, r.reason, r.queue_growth)
    # SpecAgent's Strong pool: mostly verification prefill, far more tasks per replica
    sa = plan_tasks(episodes, "specagent", SC, 2000)
    wdep = fitting_deployment(SC.weak, "h200", sa.max_context)
    scap = pool_capacity(dep, engine_scheduler(dep), pool_work(sa, STRONG_POOL), SC.weight_mode)
    assert scap.tasks_per_s > 2 * cap.tasks_per_s  # 2.8x with the fitted vLLM profile (verification is prefill-bound)
    sbuild = lambda c: build_fleet(wdep, dep, c[0], c[1], weight_mode=SC.weight_mode)  # noqa: E731
    sref = float(uncontended(sa, sbuild((None, None))).tasks["latency_s"].quantile(0.95))
    # 1.10 x: at 1.05 x this pool falls behind by about 5% of the arrivals since issue 49's third pass (the weight stream
    # at its own rate), within the stability test's noise as Strong-only's is at 1.05 x; at 1.10 x by 11%
    r = measure_steady(sa, sbuild, (None, 1), 1.10 * scap.tasks_per_s, Metric(95, "task"), sref, min_tasks=500)
    assert not r.stable


# --------------------------------------------------------------------------------------------- slices
def test_a_slice_matches_the_full_fleet_at_32_replicas(strongonly):
    """32 Strong replicas at 11 tasks/s against a slice of 4 at 4/32 of the rate: percentiles within their intervals.
    (The property needs a fleet several slices wide, not a large one: 32 keeps it at half the time of 64.)"""
    tasks, dep, build, ref = strongonly
    full = measure_steady(tasks, build, (0, 32), 11.0, Metric(95, "task"), ref, min_tasks=1000, slice_tasks=None)
    part = measure_steady(tasks, build, (0, 32), 11.0, Metric(95, "task"), ref, min_tasks=1000, slice_tasks=2500)
    assert full.slice.is_full and part.slice.counts == (0, 4) and part.slice.fraction == 4 / 32
    assert part.tasks_simulated < full.tasks_simulated / 5
    assert full.stable and part.stable
    half_full, half_part = (full.ci_high_s - full.ci_low_s) / 2, (part.ci_high_s - part.ci_low_s) / 2
    assert abs(full.value_s - part.value_s) <= half_full + half_part
    assert part.summary["window_latency_p50_s"] == pytest.approx(full.summary["window_latency_p50_s"], rel=0.1)
    assert part.throughput_per_s == pytest.approx(full.throughput_per_s, rel=0.1)  # scaled back to the whole fleet
    # the slice's $ per task is the whole fleet's: 64 replicas' $/hour over the whole fleet's throughput
    assert part.summary["usd_per_task"] == pytest.approx(full.summary["usd_per_task"], rel=0.1)


# --------------------------------------------------------------------------------------------- the planner
def test_plans_grow_with_the_rate_and_one_strong_replica_fewer_misses(episodes, strongonly):
    """The capacity curve is monotone in rate; at the moderate rate the answered fleet, simulated whole, meets the SLO
    and one Strong replica fewer does not (or is unstable)."""
    slo = SLO.parse("p95-task=300s")
    top_rate = 4.0  # monotonicity needs three rates, not a large fleet: 4/s keeps the whole-fleet checks below cheap
    req = PlanRequest(rate=(0.5, 2.0, top_rate), slo=slo, strategy=("strongonly",), gpu=("h200",), search_gpus=GPU_COUNTS)
    res = plan_capacity(episodes, req)
    best = res.best.sort_values("rate")
    assert best["rate"].tolist() == [0.5, 2.0, top_rate]
    gpus, usd = best["gpus"].to_numpy(), best["usd_per_hour"].to_numpy()
    assert (np.diff(gpus) > 0).all() and (np.diff(usd) > 0).all()
    for r in best.to_dict("records"):
        assert r["strong_bound_replicas"] <= r["strong_replicas"]  # the bound is a lower bound
        assert r["slo_ci_low_s"] <= r["slo_value_s"] <= min(r["slo_ci_high_s"], 300.0)
        assert r["usd_per_task"] == pytest.approx(r["usd_per_hour"] / 3600 / r["throughput_per_s"], rel=1e-9)
        assert r["throughput_per_s"] == pytest.approx(r["rate"], rel=0.1)  # paid for while it idles: $/h / tasks per hour
    top = best.iloc[-1]
    assert top["slice"] == "full fleet"  # planned on the whole fleet (slices: test_a_slice_matches_the_full_fleet_at_32_...)
    tasks, dep, build, ref = strongonly
    n = int(top["strong_replicas"])
    whole = measure_steady(tasks, build, (0, n), top_rate, slo.metric, ref, slo_s=300, min_tasks=1000, slice_tasks=None)
    assert whole.stable and whole.value_s <= 300
    fewer = measure_steady(tasks, build, (0, n - 1), top_rate, slo.metric, ref, slo_s=300, min_tasks=1000, slice_tasks=None)
    assert not fewer.stable or fewer.value_s > 300


def test_rate_lists_and_ranges_parse():
    assert parse_rates("2/s,50/s,1000/s") == (2.0, 50.0, 1000.0)
    assert parse_rates("0.5/s..8/s", points=5) == pytest.approx((0.5, 1.0, 2.0, 4.0, 8.0))
    with pytest.raises(ValueError, match="upper end must exceed"):
        parse_rates("8/s..1/s")
    with pytest.raises(ValueError, match="given twice"):
        parse_rates("1/s,60/min")
    for name in ("n_tasks", "max_replicas"):  # the error names the field (the command line names its flag)
        with pytest.raises(ValueError, match=r"expected a whole number in \[1, ") as e:
            PlanRequest(rate=1.0, **{name: 0})
        assert e.value.field == name


def test_an_slo_no_fleet_can_meet_is_said_at_once(episodes):
    res = plan_capacity(episodes, PlanRequest(rate=1.0, slo=SLO.parse("p95-task=20s"), strategy=("strongonly",), gpu=("h200",)))
    assert res.best.empty and not res.table["feasible"].any()
    assert res.table["evaluations"].iloc[0] == 0 and "cannot be met at any fleet size" in res.notes[0]


def test_plain_serving_fleets_are_planned_from_a_request_trace():
    trace = synthetic_requests(3000, rate=5.0, prompt_mean=2000.0, output_mean=300.0, seed=1)
    sc = SC.override({"strong.model": "qwen3.5-4b", "strong.weight_dtype": "bf16"})
    req = PlanRequest(rate=(20.0, 80.0), slo=SLO.parse("p95-task=20s"), gpu=("h200",), scenario=sc, workload=trace,
                      search_gpus=GPU_COUNTS)
    res = plan_capacity(None, req)
    best = res.best.sort_values("rate")
    assert best["strategy"].tolist() == ["serving", "serving"] and (best["weak_replicas"] == 0).all()
    assert best["strong_replicas"].iloc[1] > best["strong_replicas"].iloc[0]
    assert (best["slo_value_s"] <= 20.0).all()


def test_searches_give_the_same_plan_on_a_process_pool_and_on_ray():
    """Searches are pure jobs: one process, a local pool of two, or Ray give identical rows."""
    trace = synthetic_requests(2000, rate=5.0, prompt_mean=2000.0, output_mean=300.0, seed=4)
    sc = SC.override({"strong.model": "qwen3.5-4b", "strong.weight_dtype": "bf16"})
    base = dict(rate=(10.0, 40.0), slo=SLO.parse("p95-task=20s"), gpu=("h200", "h20"), scenario=sc, workload=trace,
                price=("h20=1.5",))
    one = plan_capacity(None, PlanRequest(**base, workers=1))  # in this process
    pool = plan_capacity(None, PlanRequest(**base, workers=2))
    assert one.table.equals(pool.table) and one.evaluations.equals(pool.evaluations)
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'specagent[ray]')")
    try:  # only a Ray runtime that cannot start here is a skip
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    except Exception as exc:  # pragma: no cover - environment without a working Ray runtime
        pytest.skip(f"a local Ray instance could not start here: {exc}")
    try:
        on_ray = plan_capacity(None, PlanRequest(**base, workers=2, backend="ray"))
    finally:
        ray.shutdown()
    assert one.table.equals(on_ray.table) and one.evaluations.equals(on_ray.evaluations)


def test_fleets_sharing_a_slice_each_name_their_own(episodes):
    """(10, 3) and (9, 3) replicas both run as 3 weak + 1 strong at a third of the rate: the one simulation is shared,
    but each evaluation names its own fleet's slice and load excess (the reused one used to name the other fleet's)."""
    # the pre-calibration illustrative acceptance without verifier reasoning: the search then evaluates the two fleets
    # this test is about (the naming, not the acceptance model, is under test); GPUs per replica searched, as the pinned
    # fleets were planned
    illustrative = {"acceptance.thinking": False, "acceptance.position_decay": 0.98, "acceptance.correlation": 0.3,
                    "acceptance.weak_token_ratio": 1.0, "acceptance.verdict_tokens": 48, "acceptance.accept_verdict_tokens": 4,
                    "acceptance.p_valid_replacement": 0.5,
                    "acceptance.accept": {"read": 0.90, "write": 0.75, "generic": 0.80, "think": 0.95, "reply": 0.85},
                    "acceptance.exact": {"read": 0.55, "write": 0.45, "generic": 0.50, "think": 0.40, "reply": 0.10}}
    # at 15 tasks/s (18 until the fixed-cost refit of issue 49, after which the search at 18/s no longer visits (9, 3); 17
    # until its third pass, the weight stream's own rate, after which 16-20/s no longer visit both (9, 3) and (10, 3))
    req = PlanRequest(rate=(15.0,), slo=SLO.parse("p95-task=400s"), strategy=("specagent",), gpu=("h200",),
                      slice_tasks=300, scenario=SC.override(illustrative), search_gpus=GPU_COUNTS)
    ev = plan_capacity(episodes, req).evaluations
    named = 0
    for r in ev.to_dict("records"):
        for k, n, pool in re.findall(r"(\d+) of (\d+) (weak|strong)", r["slice"]):
            assert int(n) == r[f"{pool}_replicas"], r
            named += 1
    shared = ev[(ev["weak_replicas"] == 10) & (ev["strong_replicas"] == 3)]
    assert named > 0 and len(shared) == 1 and "3 of 10 weak, 1 of 3 strong" in shared["slice"].iloc[0]
    assert "+11.1% load" in shared["slice"].iloc[0]  # 3 replicas for 1/3 of the rate against 10 for all of it
    other = ev[(ev["weak_replicas"] == 9) & (ev["strong_replicas"] == 3)]["slice"].iloc[0]
    assert "3 of 9 weak, 1 of 3 strong" in other and "+0.0% load" in other  # the same simulation, its own fleet named


# ------------------------------------------------------------------------------ the scenario's GPUs per replica (issue 25)
def test_fleet_commands_size_replicas_as_the_scenario_says_unless_asked_to_search():
    """8 Strong GPUs on H200 stay 8 (the planner used to pick 4 and say nothing); --search-gpus picks the fewest that fit."""
    assert SC.strong.gpus == 8
    as_given = sized_deployment(SC.strong, "h200", 32768)
    assert (as_given.gpus, as_given.hardware.id, as_given.parallelism) == (8, "h200_sxm", SC.strong.parallelism)
    assert sized_deployment(SC.strong, "h200", 32768, GPU_COUNTS).gpus == 4 == fitting_deployment(SC.strong, "h200", 32768).gpus
    assert sized_deployment(SC.strong, "h200", 32768, (2, 8)).gpus == 8  # only the counts asked for
    with pytest.raises(ValueError, match=r"does not fit a 32,768-token sequence.*--search-gpus 1,2,4,8"):
        sized_deployment(replace(SC.strong, gpus=2), "h200", 32768)
    from specagent.simulator.capacity.fleet_build import parse_gpu_counts
    assert parse_gpu_counts("8,1, 2") == (1, 2, 8) and parse_gpu_counts([4]) == (4,)
    for bad in ("", "0", "two", "1.5", "1,,x"):
        with pytest.raises(ValueError, match="GPU count"):
            parse_gpu_counts(bad)


def test_a_plan_records_the_replicas_it_ran_and_prices_them_with_the_fleet_formula():
    trace = synthetic_requests(400, rate=2.0, prompt_mean=1000.0, output_mean=100.0, seed=3)
    sc = SC.override({"strong.model": "qwen3.5-4b", "strong.weight_dtype": "bf16", "strong.gpus": 2})
    base = dict(rate=(2.0,), slo=SLO.parse("p95-task=60s"), gpu=("h200",), scenario=sc, workload=trace, n_tasks=100)
    given = plan_capacity(None, PlanRequest(**base)).best.iloc[0]
    searched = plan_capacity(None, PlanRequest(**base, search_gpus=GPU_COUNTS)).best.iloc[0]
    assert (given["strong_gpus_per_replica"], given["gpus_sizing"]) == (2, "as given by the scenario")
    assert searched["strong_gpus_per_replica"] == 1 and searched["gpus_sizing"].startswith("searched: the fewest of 1,2,4,8")
    for row in (given, searched):
        dep = sized_deployment(sc.strong, "h200", 1, None if row is given else GPU_COUNTS)
        fleet = build_fleet(None, dep, 0, int(row["strong_replicas"]), weight_mode=sc.weight_mode)
        assert row["gpus"] == fleet.gpus == row["strong_replicas"] * row["strong_gpus_per_replica"]
        assert row["usd_per_hour"] == fleet.usd_per_hour


def _dep(model: str = "llama-3.1-8b", gpus: int = 1) -> Deployment:
    return Deployment(load_model_spec(model), load_hardware("h20"), gpus=gpus, weight_dtype="bf16")


def test_a_pool_far_above_its_throughput_bound_says_what_set_its_size():
    """Issue #26: 3,480 replicas at 0.4% utilisation were printed without a word. The note names the SLO (not the rate),
    the multiple of the bound, the utilisation, how many of the longest task a replica holds, and the flags to change."""
    from specagent.simulator.jobs.plan_search import size_note

    dep = _dep()
    held = dep.max_sequences(120_000)
    note = size_note(1.0, SLO.parse("p95-task=300s"), 100_000, 120_000,
                     [("strong", 3480, 14, 0.004, 1.2, dep, 256)])
    assert "3,480 Strong replicas (3,480 GPUs)" in note and "248.6x the 14" in note, note
    assert "0.4% utilisation" in note and "p95-task=300s set this size, not the rate" in note, note
    assert f"KV memory holds {held:,} sequence(s) of the longest task (120,000 tokens)" in note and held < 256, note
    assert "memory, not compute" in note and "--slo" in note and "--max-replicas 100,000" in note, note
    # at the bound, busy, and small: nothing to explain; past LARGE_POOL at the bound: sized by the rate, said so
    assert size_note(1.0, SLO.parse("p95-task=300s"), 100_000, 4096, [("strong", 14, 14, 0.9, 30.0, dep, 256)]) == ""
    assert size_note(1.0, SLO.parse("p95-task=300s"), 100_000, 4096, [("strong", 50, 14, 0.9, 30.0, dep, 256)]) == ""
    big = size_note(500.0, SLO.parse("p95-task=300s"), 100_000, 4096, [("weak", 1500, 1500, 0.9, 30.0, dep, 256)])
    assert big.startswith("1,500 Weak replicas") and "sized by the rate" in big, big


def test_plan_prints_why_a_pool_is_large(monkeypatch, tmp_path):
    """The note reaches the plan's block for that fleet (here forced by a threshold of 0 replicas on a small plan)."""
    from typer.testing import CliRunner

    from specagent.cli import app
    from specagent.simulator.jobs import plan_search
    from specagent.traces import save_trajectories

    small = tmp_path / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:2], small)
    monkeypatch.setattr(plan_search, "LARGE_POOL", 0)
    r = CliRunner().invoke(app, ["plan", "--rate", "0.5/s", "--tasks", "6", "--trace", str(small), "--strategy", "strongonly",
                                 "--gpu", "h20", "--workers", "1", "--details"])  # the search blocks are details
    assert r.exit_code == 0, r.output
    assert re.search(r"why so large: \d+ Strong replicas \(\d+ GPUs\)", r.output), r.output


# --------------------------------------------------------------------------------------------- sequential stop
def _stops(seed: int, factor: float, bound: float = 100.0) -> bool:
    """Whether the looks stop a run as a miss when its task latencies are exponential with p95 `factor` x `bound`
    (Poisson arrivals at 5/s, 10 batches of 100 s; a task not ended by a look's clock is unseen there)."""
    rng = np.random.default_rng([seed, 34])
    win = Window(200.0, 1000.0, 300.0)
    span = win.measure_s / 10
    arr = np.cumsum(rng.exponential(0.2, 9000))
    arr = arr[arr < win.horizon_s]
    end = arr + rng.exponential(factor * bound / math.log(20.0), len(arr))  # exponential: p95 = mean x ln 20
    for k in LOOKS:
        clock = win.warmup_s + k * span + LOOK_TAIL * bound
        seen = np.where((end <= clock) & (arr <= clock), end, np.nan)
        if look(arr, seen, clock, win, k, span, Metric(95.0, "task"), bound) is not None:
            return True
    return False


def test_the_sequential_stop_keeps_its_error_rate_and_stops_clear_misses():
    """Three looks at 99% each: a fleet whose true p95 is exactly the bound is stopped as a miss in at most 1.5% of
    runs (Bonferroni; 3% allows for 300 runs' sampling error, while 95% looks would stop ~5%), one at 0.8x never,
    and one 30% over the bound nearly always (the saving the stop exists for)."""
    at_bound = np.mean([_stops(s, 1.0) for s in range(300)])
    assert at_bound <= 0.03, at_bound
    assert not any(_stops(s, 0.8) for s in range(100))
    assert np.mean([_stops(s, 1.3) for s in range(100)]) >= 0.95


def test_a_look_stops_a_growing_queue_as_unstable_with_no_negative_latency():
    """A fleet serving half of what arrives (latency growing with the arrival time) stops at the first look as unstable,
    and the interval it reports starts at 0 s or above (the 3-batch 99% interval can reach below 0: issue #34's curve
    printed nothing, refusing ci_low_s = -0.22 s)."""
    win = Window(200.0, 1000.0, 300.0)
    arr = np.cumsum(np.random.default_rng(3).exponential(0.2, 8000))
    arr = arr[arr < win.horizon_s]
    end = arr / 0.5 + 1.0  # completions at half the arrival rate: the backlog grows linearly (raw interval from -16 s)
    k, span, bound = LOOKS[0], 100.0, 100.0
    clock = win.warmup_s + k * span + LOOK_TAIL * bound
    out = look(arr, np.where(end <= clock, end, np.nan), clock, win, k, span, Metric(95.0, "task"), bound)
    assert out is not None
    est, lo, hi, t0, growth, stable, reason = out
    assert not stable and "fewer tasks than arrive" in reason and growth > 0.1
    assert lo == 0.0 and est > 200.0 and hi > est
