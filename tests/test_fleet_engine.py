"""The fleet engine's fast paths give exactly what the plain ones give.

The speed work (benchmarks/fleet.py) replaced a bisection by a guided search, fused a
decode run's pricing with its first `elapsed`, and scans replicas instead of keeping a
lazy heap for session affinity. Each must agree bit for bit with the path it replaced,
or the pinned outputs in test_fleet_golden.py would only be luck.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from specagent.hardware.serving_engine import load_engine
from specagent.simulator.fleet import sim as fleet_mod
from specagent.simulator.fleet.sim import FleetSim
from specagent.simulator.fleet.config import Arrivals, Fleet, ReplicaPool, Scheduler
from specagent.simulator.fleet.itercost import IterationCost
from specagent.simulator.scenario import default_setting

from test_fleet_golden import synthetic_plan

SETTING = default_setting()
COSTS = {name: IterationCost(getattr(SETTING, name)) for name in ("weak", "strong")}
# without CUDA graphs a decode segment may be launch-bound (a third, constant branch), then memory-bound as contexts grow
COSTS.update({f"{name}_eager": IterationCost(dataclasses.replace(getattr(SETTING, name), serving_engine=load_engine("sglang:eager")))
              for name in ("weak", "strong")})
WHICH = st.sampled_from(sorted(COSTS))


def _bisect(seg, dt: float, k: int) -> int:
    """The search `DecodeSegment.iterations_done_by` used before: plain bisection over [1, k]."""
    lo, hi = 1, k
    while lo < hi:
        mid = (lo + hi) // 2
        if seg.elapsed(mid) >= dt:
            hi = mid
        else:
            lo = mid + 1
    return lo


@given(which=WHICH, batch=st.integers(1, 256), ctx=st.floats(0, 5e6),
       k=st.integers(1, 5000), frac=st.floats(-0.2, 1.3))
@settings(max_examples=400, deadline=None)
def test_guided_boundary_equals_bisection(which, batch, ctx, k, frac):
    seg = COSTS[which].decode_segment(batch, ctx)
    dt = frac * seg.elapsed(k)  # before the run, inside it, and past its end
    j, e = seg.boundary(dt, k)
    assert j == _bisect(seg, dt, k)
    assert e == seg.elapsed(j)
    assert seg.iterations_done_by(dt, k) == j


@pytest.mark.parametrize("which", ["strong", "strong_eager"])
def test_boundary_lands_on_exact_iteration_ends(which):
    """At an iteration's exact end time the newcomer joins right there, one ulp later at the next one."""
    seg = COSTS[which].decode_segment(37, 250_000.0)
    k = 400
    for j in (1, 2, 17, 199, 399, 400):
        end = seg.elapsed(j)
        assert seg.boundary(end, k)[0] == j
        assert seg.boundary(np.nextafter(end, np.inf), k)[0] == min(j + 1, k)
        assert seg.boundary(np.nextafter(end, -np.inf), k)[0] == j


@given(which=WHICH, batch=st.integers(1, 300), ctx=st.floats(0, 8e6), k=st.integers(0, 4000))
@settings(max_examples=300, deadline=None)
def test_decode_run_is_decode_segment_then_elapsed_bit_for_bit(which, batch, ctx, k):
    cost = COSTS[which]
    seg, e = cost.decode_run(batch, ctx, k)
    ref = cost.decode_segment(batch, ctx)
    assert e == ref.elapsed(k)
    for name in ("c0", "c1", "m0", "m1", "fixed", "fixed1", "f0", "f1", "r0", "r1", "w0", "w1", "busy", "busy1", "launch"):
        assert getattr(seg, name) == getattr(ref, name), name


def test_session_affinity_scan_picks_what_the_lazy_heap_picks(monkeypatch):
    """Scanning for the least-loaded replica (small pools) routes every call as the heap does (large pools)."""
    plan = synthetic_plan(40, 21)
    fleet = Fleet(ReplicaPool(SETTING.weak, 5, scheduler=Scheduler(16, 512)), ReplicaPool(SETTING.strong, 3, scheduler=Scheduler(16, 512)))
    arr = Arrivals(rate=4.0, seed=9).sample(40)
    scan = FleetSim(plan, fleet, arr).run()
    monkeypatch.setattr(fleet_mod, "_SCAN_REPLICAS", 0)
    heap = FleetSim(plan, fleet, arr).run()
    assert heap.calls["replica"].nunique() > 1  # the router really had choices to make
    for frame in ("tasks", "calls", "segments", "replicas"):
        pd.testing.assert_frame_equal(getattr(scan, frame), getattr(heap, frame), check_exact=True)
    assert scan.summary.keys() == heap.summary.keys()
    for key, value in scan.summary.items():
        other = heap.summary[key]
        assert value == other or (value != value and other != other), key


def test_packed_frames_have_the_inferred_dtypes():
    """Records packed as structs come back with the dtypes pandas infers from the same Python values."""
    res = FleetSim(synthetic_plan(6, 3), Fleet(ReplicaPool(SETTING.weak, 1), ReplicaPool(SETTING.strong, 1)), Arrivals(rate=1.0, seed=2).sample(6)).run()
    seg, calls = res.segments, res.calls
    assert {c: str(seg[c].dtype) for c in ("replica", "iterations", "batch", "prefill_tokens")} == dict.fromkeys(
        ("replica", "iterations", "batch", "prefill_tokens"), "int64")
    assert {str(seg[c].dtype) for c in ("t_start_s", "duration_s", "tokens", "flops", "bytes_read", "bytes_written")} == {"float64"}
    assert calls["cache_hit"].dtype == bool and calls["decode_tokens"].dtype == np.int64
    assert set(calls["phase"]) <= {"weak_prefill", "weak_decode", "strong_prefill", "strong_verify", "strong_decode", "strong_verdict"}
    assert res.summary["plan_steps"] == int(calls["plan_events"].sum()) + sum(
        1 for t in range(6) for s in fleet_mod.flatten_steps(fleet_mod.compile_steps(synthetic_plan(6, 3))[t]) if s[fleet_mod.KIND] == fleet_mod.WAIT)


@pytest.mark.parametrize("cut", [False, True])
def test_advancing_in_steps_gives_the_run_bit_for_bit(cut):
    """`FleetSim.advance` pauses between events (the planner's sequential stop looks there): paused at several clocks,
    then run, the engine gives the same frames as one run, and at each pause every task ended is one that ended by then."""
    plan = synthetic_plan(40, 21)
    fleet = Fleet(ReplicaPool(SETTING.weak, 2, scheduler=Scheduler(16, 512)), ReplicaPool(SETTING.strong, 1, scheduler=Scheduler(16, 512)))
    arr = Arrivals(rate=4.0, seed=9).sample(40)
    horizon = float(np.median(FleetSim(plan, fleet, arr).run().tasks["end_s"])) if cut else np.inf  # half the tasks end
    whole = FleetSim(plan, fleet, arr, horizon=horizon).run()
    paused = FleetSim(plan, fleet, arr, horizon=horizon)
    ends = whole.tasks["end_s"].to_numpy()
    last = float(np.nanmax(ends))
    for clock in (0.0, 0.2 * last, 0.5 * last, 0.5 * last, 0.8 * last, 2.0 * last):
        paused.advance(clock)
        assert paused.now <= min(clock, horizon)
        seen = np.array(paused.end, dtype=np.float64)
        assert np.array_equal(np.isfinite(seen), ends <= min(clock, horizon)), clock
    res = paused.run()
    assert np.isfinite(ends).sum() > 5 and (np.isnan(ends).any() == (horizon < np.inf))
    for frame in ("tasks", "calls", "segments", "replicas", "turns"):
        pd.testing.assert_frame_equal(getattr(whole, frame), getattr(res, frame), check_exact=True)
    for key, value in whole.summary.items():
        other = res.summary[key]
        assert value == other or (value != value and other != other), key
