"""`--serving-engine` and `specagent latency validate|fit` from the command line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.phases import decode
from specagent.hardware.serving_engine import load_engine, parse_engine
from specagent.hardware.profile import load_hardware
from specagent.measurements import default_path, file_sha256
from tests.test_latency_fit import _csv

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("engine", ["ideal", "sglang", "vllm:eager"])
def test_roofline_prices_the_named_serving_engine(engine):
    r = _run("roofline", "--model", "qwen3.5-4b", "--gpus", "1", "--weight-dtype", "bf16", "--context", "2000",
             "--serving-engine", engine, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h20"), serving_engine=load_engine(engine))
    assert d["time_s"] == pytest.approx(decode(dep, 2000).time_s[0], rel=1e-12)
    assert f"engine {engine.split(':')[0]}" in d["deployment"]
    assert d["efficiencies"]["bandwidth_source"].strip() and d["efficiencies"]["gemm_source"].strip()


def test_unknown_serving_engine_is_one_clear_line():
    r = _run("roofline", "--serving-engine", "tgi")
    assert r.exit_code == 2
    assert "unknown serving engine 'tgi'" in r.output and "Traceback" not in r.output


def test_latency_validate_and_fit_on_a_small_file(tmp_path: Path):
    data = _csv(tmp_path, [dict(concurrency=c, input_tokens=512, output_tokens=256, tpot_ms=t, ttft_ms=40, source=f"s{c % 2}")
                           for c, t in ((1, 7.3), (2, 7.4), (4, 7.6), (8, 7.9))])
    r = _run("latency", "validate", "--data", str(data), "--no-holdout", "--json", "--figure", str(tmp_path / "fig.html"))
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["figures"] == 8 and d["targets"]["tpot_c<=16"]["rows"] == 4
    assert (tmp_path / "fig.html").read_text().count("plotly") > 0
    off = d["source_offsets"]["tpot_c<=16"]
    assert sorted(off["sources"]) == ["s0", "s1"] and off["figures"] == 4
    assert off["mape"] == pytest.approx(d["targets"]["tpot_c<=16"]["mape"])
    text = _run("latency", "validate", "--data", str(data), "--no-holdout", "--worst", "0").output
    assert "Error between sources vs within them" in text and "all sources" in text
    out = tmp_path / "fit.toml"
    prof = tmp_path / "profiles"
    r = _run("latency", "fit", "--data", str(data), "-o", str(out), "--write-profiles", str(prof), "--json")
    assert r.exit_code == 0, r.output
    fitted = tomllib.loads(out.read_text())
    assert fitted["provenance"]["rows"] == 4 and len(fitted["provenance"]["dataset_sha256"]) == 64
    assert fitted["provenance"]["moe_kernels"] == "moe_kernels.csv"
    assert fitted["provenance"]["moe_kernels_sha256"] == file_sha256(default_path("moe_kernels.csv"))
    vllm = parse_engine(tomllib.loads((prof / "vllm.toml").read_text()), "vllm.toml")
    assert " us per kernel x 14 kernels per layer (kernels_per_layer.moe); fit: specagent latency fit" in vllm.layer_us["moe"].source
    assert "fused-MoE kernel fit on measurements/moe_kernels.csv (" in vllm.moe_tflops.source  # the prior and where it came from


def test_latency_kernel_file_errors_are_one_line_and_a_custom_file_is_named(tmp_path: Path):
    data = _csv(tmp_path, [dict(concurrency=1, input_tokens=512, output_tokens=256, tpot_ms=7.3, ttft_ms=40)])
    r = _run("latency", "validate", "--data", str(data), "--no-holdout", "--kernels", str(tmp_path / "none.csv"))
    assert r.exit_code == 2 and "none.csv: cannot read measurements" in r.output and "Traceback" not in r.output
    kern = tmp_path / "k.csv"
    kern.write_text(default_path("moe_kernels.csv").read_text(encoding="utf-8"), encoding="utf-8")
    r = _run("latency", "validate", "--data", str(data), "--no-holdout", "--kernels", str(kern))
    assert r.exit_code == 0 and f"fused-MoE kernel fit on {kern} (74 kernel times, 6 sources" in r.output.replace("\n", "")


def test_latency_validate_reports_a_bad_file_in_one_line(tmp_path: Path):
    bad = _csv(tmp_path, [dict(tpot_ms="slow")])
    r = _run("latency", "validate", "--data", str(bad))
    assert r.exit_code == 2 and "field 'tpot_ms': expected a number" in r.output


def test_latency_validate_prints_every_excluded_row_and_why(tmp_path: Path):
    data = _csv(tmp_path, [dict(concurrency=1, input_tokens=512, output_tokens=256, tpot_ms=7.3, ttft_ms=40),
                           dict(concurrency=100, input_tokens=512, output_tokens=256, tpot_ms=30, ttft_ms=9000,
                                notes="[queued] mean TTFT >10x the concurrency-1 TTFT"),
                           dict(engine="acme-serve", concurrency=1, input_tokens=512, output_tokens=256, tpot_ms=7.3)])
    r = _run("latency", "validate", "--data", str(data), "--no-holdout")
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "excluded 2 of 3 rows, by rule:" in text
    assert "1 × [queued]: requests waited behind an admission limit the source does not state" in text and ": r1" in text
    assert "1 × no serving-engine profile for 'acme-serve': r2" in text
    r = _run("latency", "validate", "--data", str(data), "--no-holdout", "--json")
    assert [s["row_id"] for s in json.loads(r.output)["skipped"]] == ["r1", "r2"]
