"""`acceptance calibrate`: members of the returned set really meet what they claim, and impossible ranges conflict."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.measurements import default_path
from specagent.measurements.protocol_figures import load_protocol_figures
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.jobs import acceptance_candidates
from specagent.simulator.jobs.acceptance_candidates import (
    PARAMETERS, TIED, candidate_acceptance, evaluate, evaluate_batch, evaluate_point, evaluate_scenarios, figure_status,
    latin_hypercube, load_context, simulate_candidates, strategies_needed,
)
from specagent.simulator.run import simulate, to_episodes
from specagent.simulator.scenario import Scenario

runner = CliRunner()


def _scenarios() -> dict[str, Scenario]:
    """The calibration's scenarios, the edge one on fewer synthetic trajectories (test speed; same code path)."""
    edge = Scenario.load("edge")
    return {"h20": Scenario(), "edge": edge.replace(workload=dataclasses.replace(edge.workload, trajectories=60))}


@pytest.fixture(scope="module")
def small():
    figs = load_protocol_figures()
    return figs, simulate_candidates(figs, samples=5, seed=3, scenarios=_scenarios())


def test_claimed_memberships_hold_when_re_simulated(small):
    """Every (candidate, figure) the search says is met is met when that candidate is simulated afresh, and vice versa."""
    figs, cal = small
    meets = cal.meets()
    assert meets.shape == (5, len(cal.scored)) and meets.to_numpy().any() and not meets.to_numpy().all()
    for row in range(5):
        acc = candidate_acceptance(cal.candidates.loc[row].to_dict())
        fresh = evaluate_point(figs, acc, _scenarios())
        for f in cal.scored:
            assert fresh[f.figure_id] == pytest.approx(cal.values.at[row, f.figure_id], rel=1e-12)
            assert f.contains(fresh[f.figure_id]) == bool(meets.at[row, f.figure_id])
    assert (cal.accepted() == meets.all(axis=1)).all()


def test_figures_are_read_as_predict_computes_them(small):
    """The forward model's ratios are the simulator's totals (an independent recomputation for one candidate)."""
    figs, cal = small
    acc = candidate_acceptance(cal.candidates.loc[0].to_dict())
    sc = Scenario()
    eps = to_episodes(sc.load_workload()[0])
    setting = sc.setting(fit_context=None)
    so = simulate(eps, "strongonly", setting, acc)
    sa = simulate(eps, "specagent", setting, acc)
    ex = simulate(eps, "specagent_exact", setting, acc)
    v = cal.values.loc[0]
    assert v["tau2_memory_ratio"] == pytest.approx(sa.total_bytes_read.sum() / so.total_bytes_read.sum())
    assert v["tau2_strong_share"] == pytest.approx(sa.strong_bytes_read.sum() / sa.total_bytes_read.sum())
    assert v["tau2_weak_share"] == pytest.approx(1 - v["tau2_strong_share"])
    assert v["retail_exact_flops"] == pytest.approx(ex.total_flops.sum() / sa.total_flops.sum())
    assert v["tau2_below_strong_wall"] == pytest.approx(sa.wall_time_s.sum() / so.wall_time_s.sum())


def test_only_modelled_figures_are_scored(small):
    figs, cal = small
    status = {f.figure_id: figure_status(f) for f in figs}
    assert status["tau2_success_within_1pt"] == status["mcp_gap_closed"] == "quality"
    assert status["vita_collab_bytes"] == "no workload" and status["h20_balance_point"] == "hardware"
    assert cal.hardware["h20_balance_point"] == pytest.approx(37.0)
    assert {f.figure_id for f in cal.scored} >= {"tau2_memory_ratio", "mcp_strong_decode", "mcp_api_cost", "predictor_error"}
    assert not any(figure_status(f) == "scored" for f in figs if f.metric in ("pass_at_1", "gap_closed"))


def test_api_send_modes_order_the_bill(small):
    """A cache miss on the re-sent context costs more than a hit; on MCP-length contexts the segment alone costs least."""
    _, cal = small
    seg, hit, miss = (cal.values[f"mcp_api_cost@{m}"] for m in ("segment", "context", "context_uncached"))
    assert (seg <= hit + 1e-12).all() and (hit < miss).all()
    assert (cal.values["mcp_api_cost"] == hit).all()  # the edge scenario's own mode is 'context'


def test_same_seed_same_candidates_and_values(small):
    figs, cal = small
    again = simulate_candidates(figs, samples=5, seed=3, scenarios=_scenarios())
    assert again.candidates.equals(cal.candidates) and again.values.equals(cal.values)
    other = latin_hypercube(5, 4)
    assert not other.equals(cal.candidates)


def _figure_rows(figs, **changes):
    return [dataclasses.replace(f, **changes.get(f.figure_id, {})) for f in figs]


def test_impossible_range_is_reported_as_conflicting(small):
    figs, _ = small
    h20 = [f for f in figs if f.setting == "h20"]
    bad = _figure_rows(h20, tau2_memory_ratio={"low": 0.0, "high": 0.01})
    cal = simulate_candidates(bad, samples=3, seed=0, scenarios=_scenarios())
    c = cal.conflicts()
    assert "tau2_memory_ratio" in c["unreachable"] and not cal.accepted().any()
    assert "tau2_memory_ratio" in c["best_misses"]
    # two ranges each reachable alone but never together are a conflicting pair
    vals = cal.values["tau2_below_strong_bytes"]
    cut = float(np.median(vals))
    pair = _figure_rows(h20, tau2_memory_ratio={"low": 0.0, "high": cut}, tau2_below_strong_bytes={"low": cut + 1e-9, "high": 10.0})
    cal2 = simulate_candidates(pair, samples=3, seed=0, scenarios=_scenarios())
    assert ("tau2_memory_ratio", "tau2_below_strong_bytes") in cal2.conflicts()["conflicting_pairs"]


def test_a_range_set_around_a_candidate_accepts_it(small):
    """The search can accept: ranges drawn around candidate 2's own values accept it (and central() picks an accepted one)."""
    figs, cal = small
    mine = [f for f in cal.scored if f.setting == "h20"]
    changes = {f.figure_id: {"low": cal.values.at[2, f.figure_id] * 0.999, "high": cal.values.at[2, f.figure_id] * 1.001}
               for f in mine}
    cal2 = simulate_candidates(_figure_rows(mine, **changes), samples=5, seed=3, scenarios=_scenarios())
    assert bool(cal2.accepted().iloc[2]) and cal2.central() == 2
    r = cal2.parameter_ranges()
    assert r.at["accept_scale", "accepted_low"] <= cal.candidates.at[2, "accept_scale"] <= r.at["accept_scale", "accepted_high"]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 2**32))
def test_latin_hypercube_has_one_sample_per_stratum(n, seed):
    d = latin_hypercube(n, seed)
    for p in PARAMETERS:
        v = d[p.name].to_numpy(dtype=float)
        assert (((v >= p.low - 0.5) & (v <= p.high + 0.5)) | (v == p.off) if p.p_off else (v >= p.low - 0.5) & (v <= p.high + 0.5)).all()
        if not p.integer and not p.p_off:
            strata = np.floor((v - p.low) / (p.high - p.low) * n).astype(int)
            assert sorted(strata) == list(range(n))


def test_candidate_acceptance_is_a_valid_model_and_keeps_order():
    d = latin_hypercube(20, 1)
    for values in d.to_dict(orient="records"):
        acc = candidate_acceptance(values)
        assert all(acc.exact[k] <= acc.accept[k] <= 1 for k in acc.accept)
        assert acc.accept["think"] >= acc.accept["read"] >= acc.accept["generic"] - 1e-12 or acc.accept["read"] == 1
        for name in ("verify_reasoning_tokens", "repair_reasoning_tokens"):
            assert getattr(acc, name) == (None if values[name] == TIED else values[name])
        assert acc.verdict_tokens == values["verdict_tokens"] and acc.thinking


def _h20_figures_file(tmp_path, replace_row: tuple[str, str] | None = None, loose: bool = False):
    text = default_path("protocol_figures.csv").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ",h20," in ln or ln.startswith("row_id")]
    if replace_row:
        lines = [ln.replace(*replace_row) for ln in lines]
    if loose:  # every scored range opened wide: every candidate meets them
        rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
        for r in rows:
            r["low"], r["high"] = "-1000", "inf"
        out = io.StringIO()
        w = csv.DictWriter(out, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        lines = out.getvalue().splitlines()
    p = tmp_path / "figs.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_cli_reports_conflicts_and_writes_outputs(tmp_path):
    src = _h20_figures_file(tmp_path, ("tau2_memory_ratio,tau2-bench airline+retail,h20,specagent,bytes_ratio,0.43,0.57",
                                       "tau2_memory_ratio,tau2-bench airline+retail,h20,specagent,bytes_ratio,0,0.01"))
    out = tmp_path / "cal"
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(src), "-n", "2", "-o", str(out),
                            "--acceptance-out", str(tmp_path / "acc.toml")], terminal_width=200)
    text = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "0 of 2 candidates meet every scored figure" in text and "Met by no candidate: tau2_memory_ratio" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accepted"] == 0 and "tau2_memory_ratio" in summary["conflicts"]["unreachable"]
    assert (out / "candidates.csv").exists()
    # the point written is one of the set that meets the rest, and its source says what was set aside
    if summary["point_set"] is not None:
        assert "set aside: " in Scenario.load(tmp_path / "acc.toml").acceptance.source


def test_cli_point_not_written_when_no_set_exists(tmp_path):
    src = _h20_figures_file(tmp_path, ("tau2_memory_ratio,tau2-bench airline+retail,h20,specagent,bytes_ratio,0.43,0.57",
                                       "tau2_memory_ratio,tau2-bench airline+retail,h20,specagent,bytes_ratio,0,0.01"))
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(src), "-n", "2", "-o", str(tmp_path / "cal"),
                            "--edge-acceptance-out", str(tmp_path / "edge.toml")])
    assert r.exit_code == 2 and "edge.toml: not written" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "edge.toml").exists() and (tmp_path / "cal" / "summary.json").exists()


def test_cli_writes_the_point_as_a_scenario_file(tmp_path):
    src = _h20_figures_file(tmp_path, loose=True)
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(src), "-n", "2", "-o", str(tmp_path / "cal"),
                            "--acceptance-out", str(tmp_path / "acc.toml")], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "2 of 2 candidates meet every scored figure" in " ".join(r.output.split())
    sc = Scenario.load(tmp_path / "acc.toml")  # the written point is a scenario file a run can take
    assert "calibrate --samples 2 --seed 0: candidate" in sc.acceptance.source and sc.acceptance != AcceptanceModel()
    summary = json.loads((tmp_path / "cal" / "summary.json").read_text())
    cand = summary["point_parameters"]
    assert sc.acceptance.weak_token_ratio == pytest.approx(cand["weak_token_ratio"], rel=1e-3)


def test_cli_bad_figures_file_is_one_located_line(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("row_id,benchmark\n", encoding="utf-8")
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(p), "-n", "1", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "line 1: missing columns" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["acceptance", "calibrate", "-n", "0"])
    assert r.exit_code == 2 and "--samples" in r.output
    r = runner.invoke(app, ["acceptance", "calibrate", "--api-verify-sends", "all", "-n", "1"])
    assert r.exit_code == 2 and "--api-verify-sends" in r.output


def test_shipped_defaults_are_points_that_meet_their_figures():
    """Scored in the publication's evaluated setting (`--scenario wang2026-tau2`), the default acceptance meets every
    τ²-Bench figure but the one no candidate meets (retail exact-step FLOPs) and the wall time, which no candidate meets
    together with the rest; the edge scenario's meets every MCP-Atlas figure (the claims of their `source` and of
    docs/protocol-calibration.md)."""
    figs = load_protocol_figures()
    v = evaluate_scenarios(figs)
    scored = [f for f in figs if figure_status(f) == "scored"]
    missed = [f.figure_id for f in scored if not f.contains(v[f.figure_id])]
    assert missed == ["tau2_wall_ratio", "retail_exact_flops"]
    assert 0.54 < v["tau2_wall_ratio"] < 0.9 and 1.30 <= v["tau2_flops_ratio"] <= 1.87  # FLOPs met: the verifier re-reads
    # in the default scenario (recorded waits, cached verifier) the FLOPs figure is missed too: why the comparison
    # with the publication runs in its evaluated setting
    default = evaluate_scenarios(figs, {"h20": Scenario(), "edge": Scenario.load("edge")})
    assert not next(f for f in figs if f.figure_id == "tau2_flops_ratio").contains(default["tau2_flops_ratio"])
    assert "calibrated" in Scenario().acceptance.source and "calibrated" in Scenario.load("edge").acceptance.source
    assert Scenario().acceptance.verify_reasoning_tokens is None and Scenario().acceptance.thinking


def test_cli_writes_the_calibrated_set_as_points_a_ranges_file_reads(tmp_path):
    import tomllib

    from specagent.simulator.acceptance.ranges import AcceptanceDistribution

    src = _h20_figures_file(tmp_path, loose=True)
    pts = tmp_path / "set.toml"
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(src), "-n", "2", "-o", str(tmp_path / "cal"),
                            "--points-out", str(pts)], terminal_width=200)
    assert r.exit_code == 0, r.output
    data = tomllib.loads(pts.read_text(encoding="utf-8"))
    assert 1 <= len(data["points"]) <= 2 and "--points-out" in data["source"]
    assert all("source" not in p and "calibrated_on" not in p and isinstance(p["candidate"], int) for p in data["points"])
    dist = AcceptanceDistribution.from_file(AcceptanceModel(), pts)
    assert len(dist.points) == len(data["points"]) and all(m in dist.points for m in dist.sample(20, 1))


def test_batched_candidates_equal_each_candidate_alone(monkeypatch):
    """The sweep plans and prices a batch of candidates at once (replicas of one lockstep run); every value it gives is
    what the per-candidate forward model (`evaluate`) gives that candidate alone, bit for bit, whatever the batches."""
    figs = load_protocol_figures()
    scs = _scenarios()
    cands = latin_hypercube(7, 11).to_dict(orient="records")
    alone_of = {}
    for name, sc in scs.items():
        ctx = load_context(name, sc, strategies_needed(figs, name))
        accs = [candidate_acceptance(v, sc.acceptance) for v in cands]
        alone = alone_of[name] = [evaluate(ctx, a, figs) for a in accs]
        batched = evaluate_batch(ctx, accs, figs) + evaluate_batch(ctx, accs[:1], figs)
        assert len(batched) == 8 and batched[0] == batched[7]
        for got, want in zip(batched, alone):
            assert list(got) == list(want)  # the same figures, in the same order (candidates.csv's columns)
            for k, v in want.items():
                assert got[k] == v or (math.isnan(got[k]) and math.isnan(v)), (name, k, got[k], v)
        assert name != "edge" or any("@" in k for k in alone[0])  # the API bill of every send mode is among them
    # chunks of 4 candidates in batches of 3 (partial ones too): the same calibration, progress told per chunk
    ref = simulate_candidates(figs, samples=7, seed=11, scenarios=scs)
    seen = []
    monkeypatch.setattr(acceptance_candidates, "CHUNK", 4)
    monkeypatch.setattr(acceptance_candidates, "BATCH_UNITS", 3 * max(load_context(n, s, ["specagent"]).units for n, s in scs.items()))
    again = simulate_candidates(figs, samples=7, seed=11, scenarios=scs, progress=lambda i, n: seen.append((i, n)))
    assert again.values.equals(ref.values) and seen == [(4, 7), (7, 7)]
    assert ref.values.loc[3].to_dict() == {**alone_of["h20"][3], **alone_of["edge"][3]}


def test_workers_give_the_same_calibration(monkeypatch):
    """Chunks of candidates on two processes: the same values, in candidate order, as on one."""
    figs = [f for f in load_protocol_figures() if f.setting == "h20"]
    one = simulate_candidates(figs, samples=7, seed=2, scenarios=_scenarios())
    monkeypatch.setattr(acceptance_candidates, "CHUNK", 3)  # three jobs
    seen = []
    two = simulate_candidates(figs, samples=7, seed=2, scenarios=_scenarios(), workers=2, progress=lambda i, n: seen.append(i))
    assert two.values.equals(one.values) and two.candidates.equals(one.candidates)
    assert sorted(seen) == seen and seen[-1] == 7 and len(seen) == 3
    with pytest.raises(ValueError, match="workers must be at least 1"):
        simulate_candidates(figs, samples=1, workers=0)
    r = runner.invoke(app, ["acceptance", "calibrate", "-n", "1", "--workers", "-1"])
    assert r.exit_code == 2 and "--workers: expected a whole number in [0, 1,024], got -1" in r.output
    assert "Traceback" not in r.output
