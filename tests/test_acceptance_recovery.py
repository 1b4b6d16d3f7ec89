"""The recovery suite's generator (tools/verdict_recovery.py) writes valid verdict logs with the acceptance it was
given; the fit no longer reads per-task heterogeneity as correlation; the new interval and test formulas equal hand
calculations."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from specagent.simulator.acceptance.fit import (
    Judged, Segment, _ratio, heterogeneity_test, within_task_correlation_test,
)
from specagent.traces.verdict_log import read_verdict_log

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("verdict_recovery", ROOT / "tools" / "verdict_recovery.py")
vr = importlib.util.module_from_spec(_spec)
sys.modules["verdict_recovery"] = vr  # its dataclasses look their module up
_spec.loader.exec_module(vr)


def test_the_generator_writes_valid_logs_with_the_acceptance_it_was_given(tmp_path):
    t = vr.Truth("check", seed=5, correlation=0.0, position_decay=1.0, tasks=300)
    recs = vr.draw_log(t, np.random.default_rng(0))
    p = tmp_path / "v.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    back = read_verdict_log(p)  # every record validated by the shipped reader
    assert len(back) == 300 * 8
    firsts: dict[str, list[bool]] = {}
    for r in back:
        firsts.setdefault(r.drafted[0].kind, []).append(r.accepted_prefix > 0)
    for kind, ys in firsts.items():  # no decay, no correlation, no task effect: step 0 accepted with accept[kind]
        n, share = len(ys), sum(ys) / len(ys)
        assert abs(share - t.accept[kind]) < 4 * math.sqrt(t.accept[kind] * (1 - t.accept[kind]) / n), (kind, share, n)
    # seeded: the same replicate is the same log
    assert vr.draw_log(t, np.random.default_rng(0)) == recs


def test_the_cluster_robust_ratio_equals_the_hand_calculation():
    # two tasks: 10/10 and 30/20 -> R = 40/30; residuals -10/3, +10/3; var = 2/1 * (200/9) / 30^2
    f = _ratio([10, 30], [10, 20], [[10, 10], [30, 20]])
    r = 4 / 3
    se_log = math.sqrt(2 * (200 / 9) / 900) / r
    q = stats.t.ppf(0.975, 1)
    assert f.how == "cluster-robust by task (log scale)"
    assert math.isclose(f.estimate, r) and math.isclose(f.low, r * math.exp(-q * se_log))
    assert math.isclose(f.high, r * math.exp(q * se_log))
    # one task: the quasi-Poisson interval
    assert _ratio([10, 30], [10, 20], [[40, 30]]).how == "quasi-Poisson Fisher information"


def _judged(steps):
    """Judged cells by task from (task, kind, position, after, accepted) steps, one segment each step."""
    segs = [Segment((k,) * (pos + 1), aft, pos + (1 if y else 0), True, t) for t, k, pos, aft, y in steps]
    return Judged.of(segs, by_task=True)


def test_the_heterogeneity_score_equals_the_hand_calculation():
    # two tasks of position-0 steps (kind 0), p = 0.5: task 0 accepts both, task 1 rejects both -> each U_t = r1 r2
    # = 0.25; task 2 one of each -> -0.25. Z = 0.25 / sqrt(3 * 0.0625)
    jt = _judged([(0, 0, 0, False, True), (0, 0, 0, False, True), (1, 0, 0, False, False), (1, 0, 0, False, False),
                  (2, 0, 0, False, True), (2, 0, 0, False, False)])
    theta = np.array([0.5, 0, 0, 0, 0, 1.0, 0.0])
    h = heterogeneity_test(theta, jt)
    z = 0.25 / math.sqrt(3 * 0.0625)
    assert math.isclose(h["statistic"], round(z, 4)) and math.isclose(h["p_value"], round(stats.norm.sf(z), 6))


def test_the_within_task_correlation_test_equals_mantel_haenszel():
    # task 0: 4 first steps, 2 after a rejection (both rejected), 2 not (both accepted): N=4, R=2, n_a=2, r_a=2
    # E = 1, V = 2*2*2*2 / (16*3) = 1/3; task 1: N=3, R=1, n_a=1, r_a=0: E = 1/3, V = 1*2*1*2 / (9*2) = 2/9
    jt = _judged([(0, 0, 0, True, False), (0, 0, 0, True, False), (0, 0, 0, False, True), (0, 0, 0, False, True),
                  (1, 0, 0, True, True), (1, 0, 0, False, False), (1, 0, 0, False, True)])
    w = within_task_correlation_test(jt)
    z = ((2 - 1) + (0 - 1 / 3)) / math.sqrt(1 / 3 + 2 / 9)
    assert math.isclose(w["statistic"], round(z, 4)) and math.isclose(w["p_value"], round(stats.norm.sf(z), 6))


def test_the_fit_names_what_it_found():
    """Two replicates of each recovery scenario: correlation without heterogeneity, heterogeneity without
    correlation (which the fit used to call correlation)."""
    a, b = vr.SCENARIOS
    for rep in range(2):
        ra, rb = vr.fit_one(a, rep), vr.fit_one(b, rep)
        assert ra["supported"]["correlation"] and ra["found"] == "first-step correlation", ra
        assert not rb["supported"]["correlation"] and rb["supported"]["task_heterogeneity"], rb
        assert rb["found"] == "per-task heterogeneity (not correlation)"


def test_heterogeneity_is_not_read_as_correlation():
    """σ_task = 1 on the logit scale, correlation 0: correlation 'supported' in at most 2 of 20 replicates (it was
    20 of 20 before the within-task check)."""
    b = vr.SCENARIOS[1]
    said = [vr.fit_one(b, 100 + rep)["supported"]["correlation"] for rep in range(20)]
    assert sum(said) <= 2, said
