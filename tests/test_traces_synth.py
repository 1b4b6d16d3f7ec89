"""Profiles, fitting and synthesis: fidelity to real runs, determinism, shipped profiles' provenance."""

import collections

import numpy as np
import pytest

from specagent.traces import (
    Actor, Trajectory, fit_profile, list_profiles, load_profile, load_trajectories, save_trajectories, synthesize,
    synthesize_frame, to_frame,
)
from specagent.traces.errors import TraceFormatError
from specagent.traces.fit import build_shipped_profiles, fit_dist
from specagent.traces.io import default_workload_path, save_frame
from specagent.traces.profile import Dist, profiles_dir
from specagent.traces.tau2 import shared_tau2_files


def _summary(trajs):
    """Mean steps, kind shares and token means, leaving out fixed text the model did not decode."""
    steps = [s for t in trajs for s in t.steps if not (s.actor == Actor.AGENT and s.output_tokens == 0 and s.reasoning_tokens is None)]
    c = collections.Counter(s.kind.value for s in steps)
    tok = {k: np.mean([s.new_context_tokens for s in steps if s.kind.value == k]) for k in ("user", "reply", "read", "tool_result")}
    out = {k: np.mean([s.output_tokens for s in steps if s.kind.value == k]) for k in ("reply", "read")}
    return len(steps) / len(trajs), {k: v / len(steps) for k, v in c.items()}, tok, out


def test_fitted_profile_regenerates_real_statistics():
    """Tolerances: mean steps ±10 %, read share ±0.02 absolute, write share ±30 % relative,
    mean tokens per kind ±15 % (context and output)."""
    real = load_trajectories(default_workload_path())
    prof = fit_profile(real, name="t")
    syn = synthesize(prof, 2000, seed=1)
    (sr, mr, tr_, orr), (ss, ms, ts, os_) = _summary(real), _summary(syn)
    assert abs(ss / sr - 1) < 0.10, (ss, sr)
    assert abs(ms["read"] - mr["read"]) < 0.02
    assert abs(ms["write"] / mr["write"] - 1) < 0.30, (ms["write"], mr["write"])
    for k in tr_:
        assert abs(ts[k] / tr_[k] - 1) < 0.15, (k, ts[k], tr_[k])
    for k in orr:
        assert abs(os_[k] / orr[k] - 1) < 0.15, (k, os_[k], orr[k])
    succ = np.mean([t.outcome.success for t in syn])
    assert abs(succ - np.mean([t.outcome.success for t in real])) < 0.03


def test_same_seed_byte_identical_files(tmp_path):
    prof = load_profile("tau2_airline")
    for suffix in (".jsonl", ".parquet"):
        a, b, c = (tmp_path / f"{x}{suffix}" for x in "abc")
        save_trajectories(synthesize(prof, 200, seed=7), a)
        save_trajectories(synthesize(prof, 200, seed=7), b)
        save_trajectories(synthesize(prof, 200, seed=8), c)
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()
    # the fast frame path writes the same Parquet as the object path
    save_frame(synthesize_frame(prof, 200, 7), tmp_path / "d.parquet")
    assert (tmp_path / "d.parquet").read_bytes() == (tmp_path / "a.parquet").read_bytes()


@pytest.mark.parametrize("name", list_profiles())
def test_synthetic_trajectories_are_valid_and_respect_turn_ranges(name):
    prof = load_profile(name)
    syn = synthesize(prof, 150, seed=3)
    for t in syn:
        assert Trajectory.model_validate(t.model_dump()) == t  # the generator only emits valid steps
        # every call is followed (after its group) by a result; write calls are held
        for i, s in enumerate(t.steps):
            if s.kind.value == "write":
                assert s.irreversible
    turns = np.array([t.n_turns for t in syn])
    if prof.turns.family == "uniform":
        assert turns.min() >= prof.turns.low and turns.max() <= prof.turns.high
    df = to_frame(syn)
    assert (df.groupby("traj")["index"].apply(lambda s: (s.to_numpy() == np.arange(len(s))).all())).all()


def test_parameterised_profiles_match_spec_ranges():
    assert (load_profile("long_customer_service").turns.low, load_profile("long_customer_service").turns.high) == (30, 80)
    assert load_profile("everyday_life").turns.high == 100
    assert (load_profile("mcp_tool_servers").turns.low, load_profile("mcp_tool_servers").turns.high) == (20, 30)
    for name in list_profiles():
        text = (profiles_dir() / f"{name}.toml").read_text()
        p = load_profile(name)
        # every Dist/Param carries a source
        assert text.count("source =") >= 20 and p.source


@pytest.mark.skipif(not shared_tau2_files(), reason="shared τ²-Bench data absent")
def test_shipped_profiles_equal_a_fresh_fit():
    fresh = build_shipped_profiles(shared_tau2_files())
    assert set(fresh) == set(list_profiles())
    for name, prof in fresh.items():
        assert load_profile(name) == prof, name


def test_fit_dist_preserves_mean_and_handles_constants():
    x = np.array([10, 20, 30, 400])
    d = fit_dist(x, "t")
    assert d.family == "lognormal" and abs(d.mean() / x.mean() - 1) < 1e-5
    assert fit_dist([5, 5, 5], "t").family == "constant"
    rng = np.random.Generator(np.random.PCG64(0))
    s = Dist(family="uniform", low=2, high=4, integer=True, source="t").sample(rng, 10000)
    assert set(np.unique(s)) == {2, 3, 4}


def test_bad_profile_file_names_field(tmp_path):
    text = (profiles_dir() / "tau2_airline.toml").read_text().replace('family = "lognormal"', 'family = "weird"', 1)
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(TraceFormatError) as ei:
        load_profile(p)
    assert "bad.toml" in str(ei.value) and ei.value.field.startswith("turns")
    with pytest.raises(FileNotFoundError, match="shipped"):
        load_profile("no_such_profile")


def test_mcp_profile_tool_latency_is_the_public_mcp_measurement():
    """Real MCP tools are network calls (hundreds of ms), not τ²-Bench's in-process tools (~0.1 ms)."""
    from specagent.traces.fit import MCP_HANDSHAKE_MS, MCP_LATENCY_SOURCE

    prof = load_profile("mcp_tool_servers")
    assert prof.tool_latency_s == fit_dist(np.array(MCP_HANDSHAKE_MS) / 1000.0, MCP_LATENCY_SOURCE, integer=False)
    draws = prof.tool_latency_s.sample(np.random.default_rng(0), 20000)
    assert draws.min() >= 0.097 and np.median(draws) == pytest.approx(np.exp(-0.230941), rel=0.03)  # median of the lognormal
    assert load_profile("tau2_airline").tool_latency_s.mean() < 1e-3  # τ²-Bench's own tools stay as measured there
