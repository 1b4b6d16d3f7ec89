"""Sweeps: grid expansion, config errors, resumption after an interruption, identical results across backends."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from specagent.simulator.jobs.sweep import SweepRequest, SweepConfigError, load_sweep, run as run_sweep

CONFIG = {  # bursts of 12 tasks: the sweep machinery, fast (steady-state cells: test_steady_cells_...)
    "sweep": {"tasks": 12, "seed": 3, "prices": {"h20": 1.9}, "steady": False},
    "grid": {"strategy": ["strongonly", "specagent"], "k": [2, 4], "acceptance": [0.8], "rate": [0.5, 1.0],
             "fleet": ["small"], "hardware": ["h20"]},
    "fleet": {"small": {"weak_replicas": 1, "strong_replicas": 1}},
}


def _cfg() -> SweepRequest:
    return SweepRequest.from_dict(CONFIG, "test.toml")


def test_grid_collapses_k_for_strategies_without_it():
    cells = _cfg().cells()
    assert len(cells) == 6  # strongonly x 2 rates + specagent x 2 K x 2 rates
    assert {c["k"] for c in cells if c["strategy"] == "strongonly"} == {0}
    assert len({c["cell_id"] for c in cells}) == 6


def test_config_errors_name_the_file_and_field(tmp_path):
    bad = dict(CONFIG, grid=dict(CONFIG["grid"], fleet=["huge"]))
    with pytest.raises(SweepConfigError, match=r"test.toml: \[grid\].fleet names 'huge'"):
        SweepRequest.from_dict(bad, "test.toml")
    with pytest.raises(SweepConfigError, match=r"\[grid\].acceptance"):
        SweepRequest.from_dict(dict(CONFIG, grid=dict(CONFIG["grid"], acceptance=[1.5])), "test.toml")
    p = tmp_path / "s.toml"
    p.write_text("[grid\n")
    with pytest.raises(SweepConfigError, match="s.toml: cannot read"):
        SweepRequest.from_toml(p)


def test_interrupted_sweep_resumes_and_equals_an_uninterrupted_one(tmp_path):
    cfg = _cfg()
    full = run_sweep(cfg, tmp_path / "full")
    assert (full.total, full.ran, full.skipped) == (6, 6, 0)
    ref = load_sweep(tmp_path / "full")
    part = run_sweep(cfg, tmp_path / "part", stop_after=2)  # interrupted after two cells
    assert part.ran == 2 and len(load_sweep(tmp_path / "part")) == 2
    files = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "part" / "cells").iterdir()}
    assert all(n.endswith(".parquet") for n in files)  # no temp files left behind
    again = run_sweep(cfg, tmp_path / "part")
    assert (again.skipped, again.ran) == (2, 4)
    for name, mtime in files.items():  # finished cells were not recomputed
        assert (tmp_path / "part" / "cells" / name).stat().st_mtime_ns == mtime
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "part"), ref)
    # SpecAgent uses fewer Strong decode iterations than Strong-only in every matching cell
    so = ref[ref.strategy == "strongonly"].set_index("rate")["strong_iterations"]
    sa = ref[(ref.strategy == "specagent") & (ref.k == 4)].set_index("rate")["strong_iterations"]
    assert (sa < so).all()
    assert ref["usd_per_hour"].iloc[0] == pytest.approx((1 * 1 + 1 * 8) * 1.9)


def test_process_pool_gives_the_same_rows(tmp_path):
    cfg = _cfg()
    run_sweep(cfg, tmp_path / "a")
    run_sweep(replace(cfg, workers=2), tmp_path / "b")
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "a"), load_sweep(tmp_path / "b"))


def test_ray_backend_gives_the_same_rows(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'specagent[ray]')")
    cfg = SweepRequest.from_dict(dict(CONFIG, grid=dict(CONFIG["grid"], rate=[0.5])), "test.toml")
    run_sweep(cfg, tmp_path / "local")
    # only a Ray runtime that cannot start here is a skip; a failure of the sweep on a running Ray is a failure
    try:
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    except Exception as exc:  # pragma: no cover - environment without a working Ray runtime
        pytest.skip(f"a local Ray instance could not start here: {exc}")
    try:
        run_sweep(replace(cfg, backend="ray", workers=2), tmp_path / "ray")
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "local"), load_sweep(tmp_path / "ray"))


def test_the_scenario_comes_from_the_config_or_the_command_line(tmp_path):
    sc = tmp_path / "sc.toml"
    sc.write_text("seed = 9\n[acceptance]\nverdict_tokens = 20\n")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('[sweep]\ntasks = 4\nscenario = "sc.toml"\nstrong_dtype = "fp8"\n[grid]\nstrategy = ["specagent"]\n'
                   'rate = [1.0]\nfleet = ["f"]\n[fleet.f]\nweak_replicas = 1\nstrong_replicas = 1\n')
    a = SweepRequest.from_toml(cfg)  # relative to the config file
    assert (a.scenario.seed, a.scenario.acceptance.verdict_tokens) == (9, 20)
    cfg.write_text(cfg.read_text().replace('scenario = "sc.toml"\n', "seed = 4\n"))
    b = SweepRequest.from_toml(cfg, scenario=sc)  # --scenario; [sweep].seed overrides it
    assert (b.scenario.seed, b.scenario.acceptance.verdict_tokens) == (4, 20)
    assert b.cells()[0]["cell_id"] != SweepRequest.from_toml(cfg).cells()[0]["cell_id"]  # the id hashes the scenario
    with pytest.raises(SweepConfigError, match=r"\[sweep\]\.seed: seed must be"):
        SweepRequest.from_dict({**CONFIG, "sweep": {"seed": -1}}, "t.toml")


def test_steady_cells_measure_a_sustained_rate_with_an_interval(tmp_path):
    """By default a cell is measured in steady state: a window at the rate, a detected warm-up, p95 with its 95% CI."""
    cfg = SweepRequest.from_dict({"sweep": {"tasks": 300, "seed": 1},
                                 "grid": {"strategy": ["strongonly", "specagent"], "rate": [0.2], "fleet": ["f"], "hardware": ["h200"]},
                                 "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, "steady.toml")
    run_sweep(cfg, tmp_path)
    df = load_sweep(tmp_path).set_index("strategy")
    for s in ("strongonly", "specagent"):
        r = df.loc[s]
        assert bool(r["steady_stable"]) and r["steady_tasks_measured"] >= 300 and r["steady_warmup_s"] > 0
        assert r["steady_ci_low_s"] < r["steady_value_s"] < r["steady_ci_high_s"]
        assert r["steady_throughput_per_s"] == pytest.approx(0.2, rel=0.15)  # a stable fleet completes what arrives
    # SpecAgent reads fewer Strong bytes per task over the same window of arrivals
    per_task = df["strong_bytes_read"] / df["steady_tasks_simulated"]
    assert per_task["specagent"] < 0.5 * per_task["strongonly"]
    with pytest.raises(SweepConfigError, match=r"\[sweep\].steady must be true or false"):
        SweepRequest.from_dict({**CONFIG, "sweep": {"steady": "yes"}}, "t.toml")


def test_a_request_trace_sweeps_in_a_burst_as_well_as_in_steady_state(tmp_path):
    """[sweep].requests with steady = false serves a burst of `tasks` requests from the trace (it used to fail with
    "unknown strategy 'serving'"): one call per request on the Strong pool, none on the Weak."""
    trace = tmp_path / "requests.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},{200 + 37 * i},{20 + i}\n" for i in range(8)))
    cfg = SweepRequest.from_dict({"sweep": {"tasks": 12, "seed": 2, "steady": False, "requests": str(trace)},
                                 "grid": {"strategy": ["serving"], "rate": [0.5, 2.0], "fleet": ["f"], "hardware": ["h200"]},
                                 "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, "req.toml")
    run_sweep(cfg, tmp_path / "out")
    df = load_sweep(tmp_path / "out").sort_values("rate")
    assert df["strategy"].tolist() == ["serving", "serving"] and (df["tasks"] == 12).all()
    assert (df["weak_bytes_read"] == 0).all() and (df["strong_bytes_read"] > 0).all()
    # the same 12 requests (8 replayed cyclically) at a higher rate wait longer for the one replica
    assert df["latency_p95_s"].iloc[1] >= df["latency_p95_s"].iloc[0]


def test_replicas_are_sized_for_the_longest_sequence_of_the_cell_as_plan_sizes_them(tmp_path, monkeypatch):
    """A cell sizes its replicas for its own longest sequence (planner.search_job does the same), not for a fixed
    131,072-token context that made a sweep ask for more GPUs per replica than plan for the same workload."""
    import specagent.simulator.jobs.sweep as sweep

    contexts: list[int] = []
    real = sweep.sized_deployment

    def recording(spec, gpu, context, search=None):
        contexts.append(int(context))
        return real(spec, gpu, context, search)

    monkeypatch.setattr(sweep, "sized_deployment", recording)
    trace = tmp_path / "requests.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},{200 + 37 * i},{20 + i}\n" for i in range(8)))
    cfg = SweepRequest.from_dict({"sweep": {"tasks": 8, "seed": 2, "steady": False, "requests": str(trace)},
                                 "grid": {"strategy": ["serving"], "rate": [1.0], "fleet": ["f"], "hardware": ["h200"]},
                                 "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, "req.toml")
    run_sweep(cfg, tmp_path / "out")
    longest = sweep.request_tasks(sweep.load_requests(trace)).max_context  # what plan sizes for: the last request's
    assert 480 <= longest <= 486  # prompt 459 tokens and 27 output tokens, the last of which is not read again
    # the fit check probes each request's own length; the two pools are then sized for the longest
    assert contexts[-2:] == [longest, longest]
    assert max(contexts) <= longest + 1  # the fit check asks for prompt + output; nothing sized for 131,072
