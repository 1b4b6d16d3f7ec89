"""CLI: `plan`, `sweep`, `study balance` through typer's runner, and the planner's search against brute force."""

from __future__ import annotations

import json
from pathlib import Path
import re

import pytest
from typer.testing import CliRunner

from specagent.cli.app import app as root
from specagent.cli.fleet import app
from specagent.simulator.jobs.plan_search import SLO, smallest_count
from specagent.simulator.rates_prices import parse_prices, parse_rate

runner = CliRunner()


def test_parsers_and_their_errors():
    assert parse_rate("2/s") == 2.0 and parse_rate("120/min") == 2.0 and parse_rate("7200/h") == 2.0
    s = SLO.parse("p95-task=2min")
    assert (s.percentile, s.target, s.seconds) == (95.0, "task", 120.0)
    with pytest.raises(ValueError, match="expected pNN-task"):
        SLO.parse("95=120")
    with pytest.raises(ValueError, match="expected tasks per time"):
        parse_rate("fast")
    assert parse_prices(["H20=2.5"]) == {"h20": 2.5}
    with pytest.raises(ValueError, match="GPU=USD"):
        parse_prices(["h20"])


@pytest.mark.parametrize("threshold", [1, 2, 3, 5, 8, 13, 64])
def test_search_finds_the_smallest_feasible_count(threshold):
    calls = []

    def ok(n):
        calls.append(n)
        return n >= threshold

    assert smallest_count(ok, 0, 64) == threshold
    assert len(calls) <= 2 * 7 + 1
    assert smallest_count(lambda n: False, 0, 16) is None


def test_plan_command_answers_with_prices_and_savings():
    r = runner.invoke(app, ["plan", "--rate", "1/s", "--slo", "p95-task=300s", "--gpu", "h200", "--tasks", "300", "--workers", "1",
                            "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    best = {b["strategy"]: b for b in d["best"]}
    assert set(best) == {"strongonly", "specagent"}
    from specagent.hardware.profile import load_hardware

    price = float(load_hardware("h200").price_usd_per_gpu_hour.value)
    for b in best.values():
        assert b["slo_ci_low_s"] <= b["slo_value_s"] <= 300.0 and b["latency_p95_s"] == b["slo_value_s"]
        assert b["gpus"] == b["weak_replicas"] * b["weak_gpus_per_replica"] + b["strong_replicas"] * b["strong_gpus_per_replica"]
        assert b["usd_per_hour"] == pytest.approx(price * b["gpus"], rel=1e-9)
        assert b["usd_saving_vs_strongonly"] == pytest.approx(1 - b["usd_per_hour"] / best["strongonly"]["usd_per_hour"], rel=1e-9, abs=1e-12)
        assert 1 <= b["strong_bound_replicas"] <= b["strong_replicas"] and b["slice"] == "full fleet"
        assert (b["strong_max_num_seqs"], b["strong_max_batched_tokens"]) == (1024, 8192)  # vLLM's defaults on an H200
        assert b["tasks_measured"] >= 300 and b["warmup_s"] > 0
    assert "RunPod" in d["price_sources"]["h200_sxm"]
    assert best["strongonly"]["weak_replicas"] == 0 and best["specagent"]["weak_replicas"] >= 1
    assert {e["verdict"].split(":")[0] for e in d["evaluations"]} <= {"meets the SLO", "misses the SLO", "unstable"}


def test_plan_text_never_cuts_an_identifier_at_80_columns(tmp_path):
    r = runner.invoke(app, ["plan", "--rate", "1/s,3/s", "--slo", "p95-task=300s", "--strategy", "strongonly", "--gpu", "h200",
                            "--tasks", "300", "--workers", "1", "--out", str(tmp_path), "--details"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output and all(len(line) <= 80 for line in r.output.splitlines())
    for word in ("strongonly", "h200_sxm", "analytic bound", "95% CI", "full fleet", "1,024 sequences", "Capacity plan for"):
        assert word in r.output, word
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert [b["rate"] for b in doc["best"]] == [1.0, 3.0] and (tmp_path / "capacity_curve.html").exists()
    from specagent.reports.data import load_results

    assert load_results([tmp_path / "plan.json"]).plan["rate"].tolist() == [1.0, 3.0]  # the report reads it (figure 7)
    # and it carries copies of what it was priced with (the files' SHA-256 and text, as predict's summary.json)
    import hashlib

    from specagent.hardware.profile import load_hardware

    h200 = doc["inputs"]["hardware"]["h200"]
    assert list(doc["inputs"]["hardware"]) == ["h200"] and h200["path"] == str(load_hardware("h200").path)
    text = open(h200["path"], encoding="utf-8").read()
    assert h200["text"] == text and h200["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    for role in ("weak", "strong"):
        for kind in ("model", "engine"):
            rec = doc["inputs"][role][kind]
            assert rec["sha256"] == hashlib.sha256(open(rec["path"], encoding="utf-8").read().encode()).hexdigest()


def test_study_text_never_cuts_an_identifier_or_a_figure_at_80_columns():
    r = runner.invoke(root, ["study", "balance", "--tasks", "6", "--rates", "0.5", "--gpu", "h20,h200"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output and all(len(line) <= 80 for line in r.output.splitlines())
    assert "h200_sxm" in r.output and "balance batch = decode batch where the Strong replica turns" in r.output
    assert re.search(r"h200_sxm +│ +0\.50 │ .* │ +\d{1,3}(,\d{3})*\.\d\d │", r.output), r.output  # the balance batch whole


def test_plan_command_refuses_unpriced_gpu_up_front_and_takes_user_prices(tmp_path):
    from specagent.hardware.profile import load_hardware
    text = Path(load_hardware("h20").path).read_text(encoding="utf-8")
    unpriced = tmp_path / "h20_unpriced.toml"
    unpriced.write_text(text[:text.index("[price]")].replace('id = "h20"', 'id = "h20x"').replace('aliases = ["h20", "h20-96gb", "nvidia-h20"]', 'aliases = []'),
                        encoding="utf-8")
    r = runner.invoke(app, ["plan", "--rate", "0.5/s", "--gpu", str(unpriced), "--tasks", "200"])
    assert r.exit_code == 2 and "has no $/GPU-hour" in r.output and f"--price {unpriced}=" in r.output, r.output
    for bad in ("h20=2,h200", "nosuchgpu=2"):
        r = runner.invoke(app, ["plan", "--rate", "0.5/s", "--price", bad])
        assert r.exit_code == 2 and "--price" in r.output, r.output
    args = ["plan", "--rate", "0.5/s", "--slo", "p95-task=300s", "--gpu", "h20", "--tasks", "200", "--strategy", "strongonly",
            "--workers", "1", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["price_sources"]["h20"].startswith("profile: gpu-price-index")
    assert d["best"][0]["usd_per_hour"] == pytest.approx(1.043 * d["best"][0]["gpus"])
    r = runner.invoke(app, args + ["--price", "h200=9,h20=2"])
    d = json.loads(r.output)
    assert d["price_sources"]["h20"].startswith("user-supplied") and d["best"][0]["usd_per_hour"] == 2.0 * d["best"][0]["gpus"]
    r = runner.invoke(app, ["plan", "--rate", "fast"])
    assert r.exit_code == 2 and "expected tasks per time" in r.output
    for bad, msg in ((["--tasks", "0"], "--tasks: expected a whole number in [1,"), (["--rate", "9/s..1/s"], "upper end must exceed"),
                     (["--requests", "missing.csv"], "missing.csv")):
        r = runner.invoke(app, ["plan", "--rate", "1/s", *bad] if bad[0] != "--rate" else ["plan", *bad])
        assert r.exit_code == 2 and msg in r.output, r.output


def test_sweep_command_runs_and_resumes(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\ntasks = 8\n[grid]\nstrategy = ["strongonly", "specagent"]\nrate = [0.5]\nfleet = ["f"]\n'
                   'hardware = ["h200"]\n[fleet.f]\nweak_replicas = 1\nstrong_replicas = 1\n')
    r = runner.invoke(root, ["sweep", str(cfg), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"cells": 2, "skipped_existing": 0, "ran": 2, "out": str(tmp_path / "s_results")}
    r = runner.invoke(root, ["sweep", str(cfg), "--json"])
    assert json.loads(r.output)["skipped_existing"] == 2
    cfg.write_text("[grid]\nstrategy = [\"nope\"]\n")
    r = runner.invoke(root, ["sweep", str(cfg)])
    assert r.exit_code == 2 and "s.toml" in r.output


def test_study_balance_command(tmp_path):
    out = tmp_path / "b.parquet"
    r = runner.invoke(root, ["study", "balance", "--gpu", "h200", "--rates", "0.05,1.5", "--tasks", "40", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == 2 and out.exists()
    lo, hi = rows
    assert hi["strongonly_decode_batch"] > lo["strongonly_decode_batch"]
    # SpecAgent saves Strong replica time at light load (SPEC §1's mechanism)
    assert lo["strong_time_saving"] > 0.3 and lo["strong_bytes_saving"] > 0.3
    # each saving is 1 - SpecAgent / Strong-only of the per-task figures in the same row (a swap or sign slip fails)
    for r in rows:
        assert r["strong_time_saving"] == pytest.approx(1 - r["specagent_strong_s_per_task"] / r["strongonly_strong_s_per_task"], rel=1e-9)
        assert r["strong_bytes_saving"] == pytest.approx(
            1 - r["specagent_strong_bytes_per_task"] / r["strongonly_strong_bytes_per_task"], rel=1e-9)
        assert r["latency_p50_saving"] == pytest.approx(1 - r["specagent_latency_p50_s"] / r["strongonly_latency_p50_s"], rel=1e-9)
        assert r["hardware_ridge"] == pytest.approx(1979.0 / 4.8, rel=1e-9)  # FP8 compute on H200: dense TFLOP/s / TB/s
    assert [r["tasks"] for r in rows] == [40, 90]  # max(--tasks, rate x 60 s horizon)
