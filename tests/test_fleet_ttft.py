"""The fleet's first token is priced as the latency fit prices a TTFT: the per-request overhead plus the prefill.

`latency validate` scores a measured TTFT with `closed_loop` (request_us + the iteration in
progress + the prefill); at concurrency 1 nothing else runs, so it is request_us + one prefill
pass. The fleet, serving that row's request alone on that row's deployment, must give the
same number: otherwise every TTFT-bound plan is sized with a term the fit says is there left out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specagent.costmodel.latency import latency_terms
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.costmodel.latency_targets import predict, targets_from_rows
from specagent.measurements import load_serving
from specagent.simulator.capacity.fleet_build import request_tasks
from specagent.simulator.fleet.config import Fleet, ReplicaPool
from specagent.simulator.fleet.sim import FleetSim
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.pricing.des import run_des
from specagent.simulator.pricing.results import per_trajectory
from specagent.simulator.protocol.phases import STRONG_DECODE, STRONG_PREFILL
from specagent.simulator.protocol.plan import PlanBuilder
from specagent.simulator.protocol.setting import ApiModel
from specagent.simulator.scenario import default_setting, edge_setting
from specagent.traces.requests import RequestTrace
from tests.test_latency_fit import _csv


def _fleet_ttft(dep, prompt: int, output: int) -> float:
    """TTFT of one request served alone on one replica of `dep` (the fleet engine, plain serving)."""
    tasks = request_tasks(RequestTrace(np.array([prompt]), np.array([output])))
    res = tasks.serve(Fleet(weak=None, strong=ReplicaPool(dep, 1)), np.array([0.0]), warmup=0.0)
    calls = res.calls
    assert len(calls) == 1
    return float(calls["t_first_token_s"].iloc[0] - calls["t_submit_s"].iloc[0])


@pytest.mark.parametrize("row", [
    dict(model="Qwen/Qwen3-8B", gpu="h100_sxm", engine="vllm", input_tokens=1000, output_tokens=128),
    dict(model="Qwen/Qwen3-8B", gpu="h100_sxm", engine="sglang", input_tokens=3000, output_tokens=64),
    dict(model="Qwen/Qwen3-8B", gpu="h200_sxm", engine="vllm", input_tokens=200, output_tokens=16),
])
def test_a_concurrency_1_fleet_ttft_is_latency_validates_prediction(tmp_path, row):
    rows = load_serving(_csv(tmp_path, [dict(concurrency=1, ttft_ms=50.0, **row)]))
    targets, skipped = targets_from_rows(rows)
    assert not skipped
    (target,) = [t for t in targets if t.metric == "ttft"]
    predicted = float(predict([target])[0])
    request_s = latency_terms(target.dep).request_s
    assert request_s > 1e-3  # the shipped engines' fitted overhead (milliseconds): the comparison below would see it missing
    fleet = _fleet_ttft(target.dep, row["input_tokens"], row["output_tokens"])
    assert fleet == pytest.approx(predicted, rel=1e-9)
    assert fleet - request_s < predicted * (1 - 1e-6)  # without the overhead the fleet would be short of the fit


def test_the_overhead_delays_the_call_not_the_engine(tmp_path):
    """The overhead is outside any pass: it moves the first token and the end of a lone request by the same amount,
    and the replica's busy time (its passes) not at all."""
    rows = load_serving(_csv(tmp_path, [dict(concurrency=1, ttft_ms=50.0, input_tokens=500, output_tokens=32)]))
    (target,) = [t for t in targets_from_rows(rows)[0] if t.metric == "ttft"]
    dep = target.dep
    res = request_tasks(RequestTrace(np.array([500]), np.array([32]))).serve(
        Fleet(weak=None, strong=ReplicaPool(dep, 1)), np.array([0.0]), warmup=0.0)
    call, seg = res.calls.iloc[0], res.segments
    request_s = latency_terms(dep).request_s
    assert call["t_admit_s"] == pytest.approx(request_s, rel=1e-12)
    assert float(seg["t_start_s"].min()) == pytest.approx(request_s, rel=1e-12)
    assert call["t_done_s"] - call["t_admit_s"] == pytest.approx(float(seg["duration_s"].sum()), rel=1e-9)


def _one_call_plan(prompt: int, decode: int):
    """One task of one Strong call: a prefill of `prompt` tokens, then `decode` tokens that continue it."""
    b = PlanBuilder()
    b.add(0, STRONG_PREFILL, prompt, 0)
    b.add(0, STRONG_DECODE, decode, prompt)
    b.stats.append({})
    return b.build()


@pytest.mark.parametrize("row", [
    dict(model="Qwen/Qwen3-8B", gpu="h100_sxm", engine="vllm", input_tokens=1000, output_tokens=128),
    dict(model="Qwen/Qwen3-8B", gpu="h200_sxm", engine="sglang", input_tokens=3000, output_tokens=64),
])
def test_predicts_call_time_is_the_fleets_and_the_fits(tmp_path, row):
    """`predict`'s batch-1 pricing (analytic and simpy engines) of a lone call = the fleet's concurrency-1 call =
    `latency validate`'s TTFT for that row + the call's decode passes, priced one by one (an independent sum)."""
    rows = load_serving(_csv(tmp_path, [dict(concurrency=1, ttft_ms=50.0, **row)]))
    (target,) = [t for t in targets_from_rows(rows)[0] if t.metric == "ttft"]
    dep, prompt, decode = target.dep, row["input_tokens"], row["output_tokens"]
    request_s = latency_terms(dep).request_s
    assert request_s > 1e-3  # a fitted overhead of milliseconds: leaving it out anywhere shows below
    plan = _one_call_plan(prompt, decode)
    setting = dataclasses.replace(default_setting(), strong=dep)
    costs = Pricer(setting).price(plan)
    predicted = float(per_trajectory(plan, costs)["wall_time_s"].iloc[0])
    start, end = run_des(plan, costs.time_s, strong_slots=1)
    fleet = FleetSim(plan, Fleet(weak=None, strong=ReplicaPool(dep, 1)), np.array([0.0]), warmup=0.0).run()
    fit = float(predict([target])[0]) + sum(float(estimate(dep, Passes.uniform(1, prompt + j, 1)).time_s[0]) for j in range(decode))
    assert predicted == pytest.approx(float(fleet.tasks["latency_s"].iloc[0]), rel=1e-9)
    assert predicted == pytest.approx(fit, rel=1e-9)
    assert float(end[0] - start[0]) == pytest.approx(predicted, rel=1e-12)
    np.testing.assert_array_equal(costs.request_s, [request_s, 0.0])  # once per call: on its prefill, not its decode


def test_an_api_call_pays_only_its_own_ttft():
    """A hosted API's latency model already holds its per-request time (its TTFT): no engine overhead is added."""
    edge = edge_setting()
    assert isinstance(edge.strong, ApiModel)
    costs = Pricer(edge).price(_one_call_plan(500, 20))
    assert costs.time_s[0] == edge.strong.ttft_s and costs.request_s[0] == 0.0
