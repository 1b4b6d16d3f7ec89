"""The live protocol run: safety on the real database, exact token match with the simulator, replay."""

from __future__ import annotations

import random
import sqlite3

import pytest
import torch

from specagent.hardware.profile import load_hardware
from specagent.kernels.airline_env import KINDS, AirlineEnv, ToolError, UnreviewedWrite, result_tokens
from specagent.kernels.configs import strong_spec, weak_spec
from specagent.kernels.live import LiveConfig, compare_live, run_trajectory, scale_trajectory, synthetic_airline_trajectory, units_of
from specagent.kernels.modules import Model
from specagent.simulator.acceptance.model import AcceptanceModel

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
        user = env.user_ids()[0]
        args = env.arguments_for("cancel_reservation", user, random.Random(0))
        before = env.snapshot()
        with pytest.raises(UnreviewedWrite):
            env.execute("cancel_reservation", args, reviewed=False)
        with pytest.raises(sqlite3.OperationalError):
            env._ro.execute("DELETE FROM users")
        assert env.snapshot() == before
        r = env.execute("cancel_reservation", args, reviewed=True)
        assert r.changed_rows == 1 and r.result["status"] == "cancelled"
        d = AirlineEnv.diff(before, env.snapshot())
        assert list(d) == ["reservations"]
        assert d["reservations"]["added"][0][-1] == "cancelled"
        assert [t for t, _, _ in env.log] == ["cancel_reservation"]  # the refused call never ran


@pytest.mark.parametrize("seed", [0, 7])
def test_reads_hit_real_rows_with_real_sizes(seed):
    """Arguments drawn from the database name rows that exist: no read returns an error or nothing, and results
    have the sizes of τ²-Bench's (the shipped traces' median: user 322, reservation 264 tokens)."""
    reads = [t for t in KINDS if not AirlineEnv.holds(t)]
    sizes: dict[str, list[int]] = {t: [] for t in reads}
    with AirlineEnv(seed=seed) as env:
        for i, user in enumerate(env.user_ids()[:16]):
            for tool in reads:
                r = env.execute(tool, env.arguments_for(tool, user, random.Random(f"{i}:{tool}")), reviewed=False)
                assert r.result not in ([], None, {}, "") and not (isinstance(r.result, str) and r.result.startswith("Error")), (tool, r)
                assert r.tokens == result_tokens(r.result) >= 1
                sizes[tool].append(r.tokens)
        assert all(k == "read" or t == "calculate" for t, k, _ in env.log)
    med = {t: sorted(v)[len(v) // 2] for t, v in sizes.items()}
    assert 200 <= med["get_user_details"] <= 700 and 200 <= med["get_reservation_details"] <= 600
    assert med["get_flight_status"] <= 3 and med["search_onestop_flight"] > med["search_direct_flight"] > 50


def test_service_is_deterministic_and_writes_act_on_own_rows():
    with AirlineEnv(seed=3) as a, AirlineEnv(seed=3) as b, AirlineEnv(seed=4) as c:
        assert a.digest() == b.digest() != c.digest()
        user = a.user_ids()[2]
        for tool in [t for t in KINDS if AirlineEnv.holds(t)]:
            args = a.arguments_for(tool, user, random.Random(tool))
            assert args == b.arguments_for(tool, user, random.Random(tool))
            r = a.execute(tool, args, reviewed=True)
            assert b.execute(tool, args, reviewed=True) == r
            assert not (isinstance(r.result, str) and r.result.startswith("Error")), (tool, r.result)
            if "reservation_id" in args and tool != "book_reservation":
                owner = a._ro.execute("SELECT user_id FROM reservations WHERE reservation_id=?", (args["reservation_id"],)).fetchone()[0]
                assert owner == user
        with pytest.raises(ToolError, match="unknown airline tool"):
            a.arguments_for("delete_everything", user, random.Random(0))


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


@pytest.mark.parametrize("thinking, reasoning", [(False, 0), (True, 9)])
def test_accept_all_strong_decodes_only_verdicts(models, thinking, reasoning):
    """The live runner decodes each verification's reasoning tokens on the real Strong model, as the simulator prices them."""
    w, s = models
    acc = AcceptanceModel.constant(1.0, thinking=thinking, verify_reasoning_tokens=reasoning)
    r = run_trajectory(_traj(4), w, s, LiveConfig(k=4, seed=1, acceptance=acc), index=0)
    assert r.tokens.get("strong_decode", 0) == 0
    assert r.tokens["strong_verdict"] == (acc.accept_verdict_tokens + reasoning) * r.safety["segments_reviewed"]
    assert r.safety["held_writes_accepted"] == r.safety["segments_reviewed"]
    assert r.db_diff  # accepted writes did reach the database


def test_simulator_prices_the_same_tokens(mixed_run, models):
    w, s = models
    hw = load_hardware("h20")
    comp = compare_live(mixed_run, w.spec, s.spec, hw, hw, "fp32", 3)
    assert comp.tokens_exact, comp.rows
    by = {r["phase"]: r for r in comp.rows}
    assert by["weak_decode"]["measured_tokens"] > 0 and by["strong_verify"]["measured_tokens"] > 0
    from specagent.kernels.live import PHASES
    from specagent.simulator.protocol.phases import PHASE_NAMES

    assert PHASES == PHASE_NAMES  # the live phases are the simulator's, name for name
    # tool time in the log is the measured one, so the simulator's tool phase matches it exactly when every tool
    # call ran once (acceptance 1: no rejected draft re-runs a read; with re-runs the log keeps the last latency)
    once = run_trajectory(_traj(4), w, s, LiveConfig(k=4, seed=1, acceptance=AcceptanceModel.constant(1.0)), index=0)
    tool = {r["phase"]: r for r in compare_live([once], w.spec, s.spec, hw, hw, "fp32", 4).rows}["tool"]
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
    from specagent.simulator.strategies.catalog import SpecAgent

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
    from specagent.simulator.protocol.workload import episode_from_trajectory
    from specagent.traces import default_workload_path, load_trajectories

    for t in [_traj(0), *load_trajectories(default_workload_path())[:20]]:
        live, ep = units_of(t), episode_from_trajectory(t)
        owned = sorted(i for u in live for i in u.steps + u.results)
        assert owned == [s.index for s in t.steps]
        assert [u.is_user for u in live] == [b.is_user for b in ep.units]
        calls = {s.index: s.tool_name for s in t.steps if s.is_tool_call and s.tool_name}
        assert [n for u in live for n in u.tools] == [calls[i] for u in live for i in u.steps if i in calls]


# --------------------------------------------------------------------------- real reads, counts, repeats, workloads
def test_real_results_enter_the_context_and_the_log(mixed_run):
    """Each tool-result step of the protocol log carries the real size of the call that produced it (at the run's
    token scale); the simulator prices those sizes, and its token counts equal the live run's (test above)."""
    for r in mixed_run:
        log, scale = r.protocol_log, r.protocol_log.metadata.get("token_scale", 1.0)
        units = units_of(log)
        last: dict[tuple[int, int], int] = {}
        per_unit: dict[int, int] = {}
        for ui, _tool, _rev, tokens in r.calls:
            j = per_unit.get(ui, 0) % len(units[ui].tools)
            last[(ui, j)] = tokens
            per_unit[ui] = per_unit.get(ui, 0) + 1
        checked = 0
        for ui, u in enumerate(units):
            for j, ri in enumerate(u.results):
                if (ui, j) in last:
                    assert log.steps[ri].new_context_tokens == max(1, round(last[(ui, j)] * scale))
                    checked += 1
        assert checked > 0
        assert log.metadata["live_tool_results"].startswith("executed on the SQLite airline service")


def test_executed_calls_match_the_protocol_log(mixed_run, models):
    from specagent.kernels.live import LogMismatch, tool_runs_in_log

    for r in mixed_run:
        implied = tool_runs_in_log(r.protocol_log, 3)
        assert (r.counts["reads_executed"], r.counts["writes_executed"]) == (implied["reads"], implied["writes"])
        assert r.counts["reads_executed"] == sum(1 for _, t, _, _ in r.calls if not AirlineEnv.holds(t)) > 0
        assert r.counts["writes_held"] == r.counts["writes_accepted"] + r.counts["writes_discarded"]
        assert r.counts["rejections"] == r.counts["repairs"] + r.counts["replacements"]

    class Stutter(AirlineEnv):
        """A service that runs every read twice: the run must notice."""

        def execute(self, tool, args, reviewed):
            if not self.holds(tool):
                super().execute(tool, args, reviewed)
            return super().execute(tool, args, reviewed)

    w, s = models
    with Stutter(seed=5) as env, pytest.raises(LogMismatch, match="protocol log implies"):
        run_trajectory(_traj(0), w, s, LiveConfig(k=3, seed=5, acceptance=AcceptanceModel.constant(0.5, verdict_tokens=6)), env=env)


def test_same_seed_same_run(models):
    w, s = models
    cfg = LiveConfig(k=3, seed=2, acceptance=AcceptanceModel.constant(0.5, verdict_tokens=6))
    a, b = (run_trajectory(_traj(1), w, s, cfg, index=1) for _ in range(2))
    assert a.tokens == b.tokens and a.events == b.events and a.counts == b.counts and a.calls == b.calls

    def untimed(r):
        return [st.model_copy(update={"tool_latency_s": None}) for st in r.protocol_log.steps]

    assert untimed(a) == untimed(b)


def test_longer_tau2_run_is_safe_on_every_segment(models):
    """Three τ²-Bench trajectories (the live workload's first three) with real reads: every held write refused
    before review, the database unchanged through every chunk's drafting and after every rejection."""
    from specagent.kernels.live_compare import live_workload

    w, s = models
    cfg = LiveConfig(k=4, seed=0, acceptance=AcceptanceModel.constant(0.6, verdict_tokens=4))
    for i, t in enumerate(live_workload(3)):
        r = run_trajectory(scale_trajectory(t, 0.05), w, s, cfg, index=i)
        sf, c = r.safety, r.counts
        chunks = sum(1 for e in r.events if e[0] in ("commit_unreviewed", "accept", "reject"))
        assert sf["db_unchanged_while_drafting"] == chunks > 0
        assert sf["unreviewed_write_attempts_blocked"] == sf["segments_reviewed"] == c["writes_held"]
        assert sf["db_restored_after_rejection"] == c["rejections"]
        trace_reads = sum(1 for st in t.steps if st.is_tool_call and not AirlineEnv.holds(st.tool_name))
        assert c["reads_executed"] >= trace_reads > 0  # every drafted read ran (again, when re-drafted)


def test_live_workload_is_the_documented_subset():
    from specagent.kernels.live_compare import live_workload
    from specagent.traces import default_workload_path, load_trajectories

    every = load_trajectories(default_workload_path())
    pool = [t for t in every if t.domain == "airline" and any(st.is_tool_call and st.kind.value == "read" for st in t.steps)]
    sub = live_workload()
    assert len(sub) == 24 and len({id(t) for t in sub}) == 24
    assert [pool.index(t) for t in sub] == [((2 * i + 1) * len(pool)) // 48 for i in range(24)]
    assert {t.source.split("#")[0] for t in sub} == {t.source.split("#")[0] for t in pool}  # every source model of the file
    assert sum(1 for t in sub for st in t.steps if st.is_tool_call and st.kind.value == "read") == 128
    with pytest.raises(ValueError, match="between 1 and"):
        live_workload(0)
    with pytest.raises(ValueError, match="between 1 and"):
        live_workload(len(pool) + 1)


def _fake(passes, total):
    from specagent.kernels.live import LiveResult

    tokens = {}
    seconds: dict[str, float] = {}
    for ph, t in passes:
        seconds[ph] = seconds.get(ph, 0.0) + t
    return LiveResult(protocol_log=None, seconds=seconds, wall_seconds=seconds, passes=passes, tokens=tokens, total_s=total,
                      wall_s=total, clock="cpu", safety={})


def test_measure_takes_each_pass_at_its_fastest():
    from specagent.kernels.live import measure

    r1 = [_fake([("weak_decode", 1.0), ("strong_verify", 2.0), ("weak_decode", 3.0)], 6.5)]
    r2 = [_fake([("weak_decode", 2.0), ("strong_verify", 1.5), ("weak_decode", 2.5)], 6.2)]
    m = measure([r1, r2])
    assert m.seconds["weak_decode"] == 1.0 + 2.5 and m.seconds["strong_verify"] == 1.5
    assert m.total_s == pytest.approx(1.0 + 1.5 + 2.5 + min(0.5, 0.2))  # fastest passes + the least time between them
    assert [rep["weak_decode"] for rep in m.repeats] == [4.0, 4.5] and m.repeat_totals == [6.5, 6.2]
    with pytest.raises(ValueError, match="did not run the same passes"):
        measure([r1, [_fake([("weak_decode", 1.0)], 1.0)]])


def test_cpu_clock_leaves_out_time_off_the_core():
    import time as _time

    from specagent.kernels.live import Clock

    for kind in ("cpu", "wall"):
        c = Clock(kind)
        with c.phase("tool"):
            _time.sleep(0.05)
        assert c.wall_seconds["tool"] >= 0.05
        assert (c.seconds["tool"] < 0.02) if kind == "cpu" else (c.seconds["tool"] >= 0.05)
    with pytest.raises(ValueError, match="clock must be"):
        Clock("gpu")
    with pytest.raises(ValueError, match="clock must be"):
        LiveConfig(clock="gpu")


def test_predictor_validates_on_live_protocol_logs(mixed_run, tmp_path):
    """Live logs are checked under SpecAgent at their recorded K (decisions from their labels), next to traces."""
    import json

    from typer.testing import CliRunner

    from specagent.cli import app as main_app
    from specagent.simulator.predictor import validate_predictor
    from specagent.simulator.run import simulate
    from specagent.traces.io import save_trajectories

    logs = [r.protocol_log for r in mixed_run]
    ref = [_traj(i) for i in range(2)]
    table = validate_predictor({"live": logs, "ref": ref}, strategies=("specagent", "router"))
    live = table[table["workload"] == "live"]
    assert set(live["strategy"]) == {"specagent"} and set(live["source"]) == {"protocol log (recorded verdicts)"}
    assert set(table[table["workload"] == "ref"]["strategy"]) == {"specagent", "router"}
    frame = simulate(logs, "specagent", k=3)  # live_k = 3 recorded in the logs; verdicts from their labels
    assert int(live.iloc[0]["strong_verdict_repair_tokens"]) == int((frame["tokens_strong_verdict"] + frame["tokens_strong_decode"]).sum())
    assert int(live.iloc[0]["strong_verdict_repair_tokens"]) == sum(r.tokens.get("strong_verdict", 0) + r.tokens.get("strong_decode", 0)
                                                                     for r in mixed_run)
    path = save_trajectories(logs, tmp_path / "live.jsonl")
    r = CliRunner().invoke(main_app, ["predictor", "validate", "--trace", str(path), "--synthetic", "2", "--strategies",
                                      "specagent,router", "-o", str(tmp_path / "p.json")], env={"COLUMNS": "240"})
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "p.json").read_text())
    assert {(x["workload"], x["strategy"]) for x in rows if x["workload"] == "live.jsonl"} == {("live.jsonl", "specagent")}
    assert {x["source"] for x in rows if x["workload"] == "live.jsonl"} == {"protocol log (recorded verdicts)"}
    assert any(x["workload"].startswith("synthetic:") for x in rows) and "live.jsonl (protocol log)" in r.output
    mixed = save_trajectories(logs + ref, tmp_path / "mixed.jsonl")
    r = CliRunner().invoke(main_app, ["predictor", "validate", "--trace", str(mixed), "--synthetic", "0"])
    assert r.exit_code == 2 and "separate workloads" in " ".join(r.output.split())  # the console wraps lines


def test_live_takes_k_seed_and_acceptance_from_a_scenario(tmp_path):
    """`live --scenario` runs the scenario's K, seed and acceptance model; flags override; other review policies are refused."""
    import json

    from typer.testing import CliRunner

    from specagent.cli import app as main_app

    sc = tmp_path / "s.toml"
    sc.write_text('k = 2\nseed = 5\n[acceptance]\nposition_decay = 0.9\n[acceptance.accept]\nread = 0.6\n')
    base = ["live", "--scenario", str(sc), "--synthetic", "--trajectories", "1", "--scale", "tiny", "--no-compare", "--json"]
    r = CliRunner().invoke(main_app, base + ["-o", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    setup = json.loads(r.output)["setup"]
    assert (setup["k"], setup["seed"]) == (2, 5)
    assert setup["acceptance"]["position_decay"] == 0.9 and setup["acceptance"]["accept"]["read"] == 0.6
    r = CliRunner().invoke(main_app, base + ["-o", str(tmp_path / "b"), "--k", "3", "--accept", "0.5"])
    setup = json.loads(r.output)["setup"]
    assert (setup["k"], setup["seed"], setup["accept"]) == (3, 5, 0.5) and "acceptance" not in setup
    sc.write_text('review = "every_chunk"\n')
    r = CliRunner().invoke(main_app, base + ["-o", str(tmp_path / "c")])
    assert r.exit_code == 2 and "the live runner implements 'on_write' only" in r.output
    assert not (tmp_path / "c").exists()


def test_live_writes_a_verdict_log_that_acceptance_fit_reads(models, tmp_path):
    """A live run with the default acceptance model (thinking, tied reasoning) writes one verdict record per review;
    its tokens are the ones the real Strong model decoded, and `acceptance fit` reads it and the protocol log."""
    from specagent.simulator.acceptance.fit import read_logs, fit_acceptance
    from specagent.traces.io import save_trajectories
    from specagent.traces.verdict_log import read_verdict_log, write_verdict_log

    w, s = models
    runs = [run_trajectory(_traj(i), w, s, LiveConfig(k=3, seed=2), index=i) for i in range(3)]
    recs = [v for r in runs for v in r.verdict_records]
    assert len(recs) == sum(r.safety["segments_reviewed"] for r in runs) > 0
    assert sum(v.verdict_tokens + v.verify_reasoning_tokens for v in recs) == sum(r.tokens.get("strong_verdict", 0) for r in runs)
    assert sum((v.repair_tokens or 0) + (v.repair_reasoning_tokens or 0) for v in recs) == sum(r.tokens.get("strong_decode", 0) for r in runs)
    assert all(v.thinking and v.source == "live" for v in recs)
    vlog, plog = write_verdict_log(recs, tmp_path / "verdict_log.jsonl"), tmp_path / "protocol_log.jsonl"
    save_trajectories([r.protocol_log for r in runs], plog)
    assert read_verdict_log(vlog) == recs
    for logs in ([vlog], [plog]):
        res = fit_acceptance(read_logs(logs))
        assert res.data.records == len(recs)
        assert 0 < res.model.accept["read"] <= 1 and "accept.read" in res.model.fit["intervals"]
