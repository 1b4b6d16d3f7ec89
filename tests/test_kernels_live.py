"""The live protocol run: safety on the real database, exact token match with the simulator, replay."""

from __future__ import annotations

import sqlite3

import pytest
import torch

from specagent.hardware.profile import load_hardware
from specagent.kernels.airline_env import AirlineEnv, UnreviewedWrite
from specagent.kernels.configs import strong_spec, weak_spec
from specagent.kernels.live import LiveConfig, compare, run_trajectory, scale_trajectory, synthetic_airline_trajectory, units_of
from specagent.kernels.modules import Model
from specagent.simulator.acceptance import AcceptanceModel

torch.set_num_threads(1)  # robust on a shared 2-core machine (OpenMP spin-waits under contention)


@pytest.fixture(scope="module")
def models():
    return Model(weak_spec("tiny"), seed=1), Model(strong_spec("tiny"), seed=2)


def _traj(seed=0):
    return synthetic_airline_trajectory(seed=seed, turns=2, scale=0.15, system_tokens=200)


@pytest.fixture(scope="module")
def mixed_run(models):
    w, s = models
    return [run_trajectory(_traj(i), w, s, LiveConfig(k=3, seed=5, acceptance=AcceptanceModel.constant(0.5, verdict_tokens=6)), index=i) for i in range(2)]


def test_env_refuses_unreviewed_writes_and_readonly_reads():
    with AirlineEnv(seed=1) as env:
        before = env.snapshot()
        with pytest.raises(UnreviewedWrite):
            env.execute("cancel_reservation", {"reservation_id": "R00000"}, reviewed=False)
        with pytest.raises(sqlite3.OperationalError):
            env._ro.execute("DELETE FROM users")
        assert env.snapshot() == before
        r = env.execute("cancel_reservation", {"reservation_id": "R00000"}, reviewed=True)
        assert r.changed_rows == 1
        d = AirlineEnv.diff(before, env.snapshot())
        assert list(d) == ["reservations"]
        assert d["reservations"]["added"][0][-1] == "cancelled"


def test_safety_checks_and_protocol_log(mixed_run):
    for r in mixed_run:
        s = r.safety
        assert s["segments_reviewed"] > 0
        assert s["unreviewed_write_attempts_blocked"] == s["segments_reviewed"]  # every held write was refused first
        assert s["db_restored_after_rejection"] == sum(1 for e in r.events if e[0] == "reject")
        assert s["held_writes_accepted"] + s["held_writes_discarded"] == s["segments_reviewed"]
        log = r.protocol_log
        assert log.is_protocol_log
        agent = [st for st in log.steps if st.actor.value == "agent"]
        assert all(st.label is not None for st in agent)  # every committed agent step carries a label


def test_rejected_writes_leave_no_trace(models):
    """Acceptance 0: every held write is rejected and replaced by a repair; the rejected one never ran."""
    w, s = models
    r = run_trajectory(_traj(3), w, s, LiveConfig(k=4, seed=1, acceptance=AcceptanceModel.constant(0.0, verdict_tokens=6)), index=0)
    assert all(e[0] != "accept" for e in r.events)
    assert r.safety["held_writes_accepted"] == 0
    assert r.safety["db_restored_after_rejection"] == r.safety["segments_reviewed"]


def test_accept_all_strong_decodes_only_verdicts(models):
    w, s = models
    acc = AcceptanceModel.constant(1.0)
    r = run_trajectory(_traj(4), w, s, LiveConfig(k=4, seed=1, acceptance=acc), index=0)
    assert r.tokens.get("strong_decode", 0) == 0
    assert r.tokens["strong_verdict"] == acc.accept_verdict_tokens * r.safety["segments_reviewed"]
    assert r.safety["held_writes_accepted"] == r.safety["segments_reviewed"]
    assert r.db_diff  # accepted writes did reach the database


def test_simulator_prices_the_same_tokens(mixed_run, models):
    w, s = models
    hw = load_hardware("h20")
    comp = compare(mixed_run, w.spec, s.spec, hw, hw, "fp32", 3)
    assert comp.tokens_exact, comp.rows
    by = {r["phase"]: r for r in comp.rows}
    assert by["weak_decode"]["measured_tokens"] > 0 and by["strong_verify"]["measured_tokens"] > 0
    from specagent.kernels.live import PHASES
    from specagent.simulator.phases import PHASE_NAMES

    assert PHASES == PHASE_NAMES  # the live phases are the simulator's, name for name
    # tool time in the log is the measured one, so the simulator's tool phase matches it exactly when every tool
    # call ran once (acceptance 1: no rejected draft re-runs a read; with re-runs the log keeps the last latency)
    once = run_trajectory(_traj(4), w, s, LiveConfig(k=4, seed=1, acceptance=AcceptanceModel.constant(1.0)), index=0)
    tool = {r["phase"]: r for r in compare([once], w.spec, s.spec, hw, hw, "fp32", 4).rows}["tool"]
    assert tool["measured_s"] > 0
    assert tool["predicted_s"] == pytest.approx(tool["measured_s"], rel=1e-6, abs=1e-8)  # logged to 1 ns per step


def test_replaying_the_protocol_log_live_reproduces_the_run(mixed_run, models):
    w, s = models
    first = mixed_run[0]
    again = run_trajectory(first.protocol_log, w, s, LiveConfig(k=3, seed=5), index=0)
    assert again.events == first.events
    assert again.tokens == first.tokens


def test_units_group_parallel_calls_and_results():
    t = _traj(0)
    us = units_of(t)
    assert sum(len(u.steps) for u in us) == len(t.steps) - sum(len(u.results) for u in us)
    assert any(u.held for u in us) and any(u.is_user for u in us)


def test_scale_trajectory_scales_tokens():
    t = synthetic_airline_trajectory(seed=0)
    h = scale_trajectory(t, 0.5)
    assert h.system_prompt_tokens == round(t.system_prompt_tokens * 0.5)
    assert all((a.new_context_tokens == 0) == (b.new_context_tokens == 0) for a, b in zip(t.steps, h.steps))
    with pytest.raises(ValueError):
        scale_trajectory(t, 0)


def test_live_run_makes_the_simulators_decisions(mixed_run):
    """Same trace, K and seed: the live run rejects, repairs and replaces exactly where `simulate` does."""
    from specagent.simulator.run import simulate
    from specagent.simulator.strategies import SpecAgent

    acc = AcceptanceModel.constant(0.5, verdict_tokens=6)
    sim = simulate([_traj(i) for i in range(2)], SpecAgent(k=3), acceptance=acc, seed=5)
    for r, (_, row) in zip(mixed_run, sim.iterrows()):
        rejects = [e for e in r.events if e[0] == "reject"]
        assert row["reviews"] == r.safety["segments_reviewed"]
        assert row["rejections"] == len(rejects)
        assert row["replacements"] == sum(1 for e in rejects if e[3] == "replacement")
        assert row["repairs"] == sum(1 for e in rejects if e[3] == "repair")
    assert sim["rejections"].sum() > 0 and sim["reviews"].sum() > sim["rejections"].sum()  # both outcomes occur


def test_units_cover_every_step_once_with_the_simulators_fields():
    """Live units are the simulator's units plus step indices: every step belongs to exactly one unit."""
    from specagent.simulator.workload import episode_from_trajectory
    from specagent.traces import default_workload_path, load_trajectories

    for t in [_traj(0), *load_trajectories(default_workload_path())[:20]]:
        live, ep = units_of(t), episode_from_trajectory(t)
        owned = sorted(i for u in live for i in u.steps + u.results)
        assert owned == [s.index for s in t.steps]
        assert [u.is_user for u in live] == [b.is_user for b in ep.units]
        calls = {s.index: s.tool_name for s in t.steps if s.is_tool_call and s.tool_name}
        assert [n for u in live for n in u.tools] == [calls[i] for u in live for i in u.steps if i in calls]
