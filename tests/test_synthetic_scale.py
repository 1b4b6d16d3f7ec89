"""Synthetic workloads in blocks: generation, `traces synth` and `simulate --synthetic` hold one block at a time,
and give exactly what one unchunked run gives (same seed, same bytes). Memory and speed at 10⁶ trajectories are
measured in benchmarks/synthetic_scale.py, not asserted here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.workload import synthetic_unit_table, synthetic_unit_tables
from specagent.simulator.run import simulate
from specagent.simulator.scenario import default_setting
from specagent.simulator.synthetic import simulate_synthetic, totals_of
from specagent.traces import load_profile, load_trajectories, save_trajectories, step_arrays, synthesize, synthesize_frame
from specagent.traces import synth
from specagent.traces.io import save_frame, save_synthetic
from specagent.traces.profile import list_profiles

PROFILE = load_profile("tau2_airline")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 32 trajectories, so a few hundred span several blocks."""
    monkeypatch.setattr(synth, "MAX_BLOCK", 32)
    assert synth.block_size(PROFILE) == 32


def test_shipped_profiles_use_full_blocks_and_long_profiles_smaller_ones():
    assert all(synth.block_size(load_profile(n)) == synth.MAX_BLOCK for n in list_profiles())
    long = PROFILE.model_copy(update={"turns": PROFILE.turns.model_copy(update=dict(family="uniform", low=5000, high=5000))})
    # by hand: turns clip to hi = 796; calls per turn 1 + 0.176136·E[extra], E[extra] = exp(0.929811 + 0.78352²/2)
    # = 3.447 → 1.607; steps per trajectory ≈ 796·2·1.607 = 2,558; 256·2,558 = 654,9xx ≤ 10⁶ < 512·2,558
    assert synth.block_size(long) == 256


def test_blocks_are_independent_of_how_many_are_held(small_blocks):
    """n trajectories = the first n of a larger run, block by block: a block's draws depend on its index only."""
    a = synthesize_frame(PROFILE, 96, seed=4)
    b = synthesize_frame(PROFILE, 150, seed=4)
    pd.testing.assert_frame_equal(a, b[b["traj"] < 96].reset_index(drop=True))
    assert a["traj"].nunique() == 96 and a["task_id"].iloc[-1] == "tau2_airline-4-000095"


def test_block_step_arrays_equal_step_arrays_of_the_frame(small_blocks):
    for blk in synth.iter_blocks(PROFILE, 70, seed=2):
        ref, fast = step_arrays(synth.block_frame(PROFILE, blk, 2)), synth.block_step_arrays(blk)
        assert ref.keys() == fast.keys()
        for k in ref:
            assert ref[k].dtype == fast[k].dtype, k
            np.testing.assert_array_equal(ref[k], fast[k], err_msg=k)


@pytest.mark.parametrize("strategy,engine", [("specagent", "analytic"), ("router", "analytic")])
def test_simulating_block_by_block_equals_one_run(small_blocks, tmp_path, strategy, engine):
    setting, acc = default_setting(), AcceptanceModel()
    one = simulate(synthetic_unit_table(PROFILE, 100, 5), strategy, setting, acc, 5, engine)
    assert len(list(synthetic_unit_tables(PROFILE, 100, 5))) == 4
    out = tmp_path / "rows.parquet"
    run = simulate_synthetic(PROFILE, 100, 5, strategy, setting, acc, engine, out=out)
    pd.testing.assert_frame_equal(pd.read_parquet(out), one, check_exact=True)
    assert run.totals == totals_of(one) and run.n_traj == 100 and run.label == one["label"].iloc[0]


def test_simulate_synthetic_cli_equals_the_unchunked_totals(small_blocks, tmp_path):
    r = CliRunner().invoke(app, ["simulate", "specagent", "--synthetic", "tau2_airline", "--trajectories", "90",
                                 "--seed", "3", "--json"])
    assert r.exit_code == 0, r.output
    ref = totals_of(simulate(synthetic_unit_table(PROFILE, 90, 3), "specagent", default_setting(), AcceptanceModel(), 3))
    assert json.loads(r.output)["totals"] == ref


def test_streamed_synth_files_equal_the_in_memory_ones(small_blocks, tmp_path):
    for suffix in (".jsonl", ".parquet"):
        streamed, ref = tmp_path / f"s{suffix}", tmp_path / f"r{suffix}"
        steps = save_synthetic(PROFILE, 80, 9, streamed)
        save_trajectories(synthesize(PROFILE, 80, 9), ref)
        assert load_trajectories(streamed) == load_trajectories(ref)
        assert steps == len(synthesize_frame(PROFILE, 80, 9))
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()


def test_one_block_parquet_is_byte_identical_to_save_frame(tmp_path):
    save_synthetic(PROFILE, 50, 1, tmp_path / "a.parquet")
    save_frame(synthesize_frame(PROFILE, 50, 1), tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_progress_is_reported_per_block(small_blocks):
    seen: list[int] = []
    list(synth.iter_blocks(PROFILE, 70, 0, progress=seen.append))
    assert seen == [32, 32, 6]
