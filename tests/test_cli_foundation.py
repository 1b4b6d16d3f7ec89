"""The foundation commands (hardware, models, roofline) through typer's CliRunner.

JSON outputs are checked against the Python API they wrap, so the CLI cannot drift from
the estimator; every command's --help must exit 0.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from specagent.cli import app
from specagent.costmodel.balance import balance_point
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.phases import decode, verify
from specagent.hardware.profile import load_hardware

runner = CliRunner()


def _run(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env)


def _json(*args: str, env: dict | None = None):
    r = _run(*args, "--json", env=env)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ---------------------------------------------------------------------- help
def _all_commands():
    """Every command path reachable from the top-level app, e.g. ('roofline', 'balance')."""
    out = [()]

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append(path + (name,))
            walk(sub, path + (name,))

    walk(get_command(app), ())
    return out


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "specagent")
def test_every_help_exits_zero(path):
    r = _run(*path, "--help")
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output


def test_foundation_commands_present():
    paths = set(_all_commands())
    for p in [("hardware", "list"), ("hardware", "show"), ("models", "list"), ("models", "show"), ("roofline", "balance")]:
        assert p in paths


def test_top_level_help_explains_terms():
    out = _run("--help").output
    for term in ("phase", "ridge", "balance point"):
        assert term in out
    assert "prefill" in out and "decode" in out and "verify" in out and "repair" in out
    assert "FLOP" in out and "bandwidth" in out


def test_top_level_help_terms_not_garbled():
    out = _run("--help").output.split("Options:")[0]  # the terms block (click aligns the options list itself)
    # the written layout has at most 10 spaces between a term and its definition
    garbled = [ln for ln in out.splitlines() if re.search(r"\S {15,}\S", ln)]
    assert not garbled, garbled


def test_subcommand_help_explains():
    assert "ridge" in _run("roofline", "--help").output
    bal = _run("roofline", "balance", "--help").output
    assert "compute-bound" in bal and "ridge" in bal
    assert "ridge" in _run("hardware", "list", "--help").output


# ---------------------------------------------------------------------- hardware
def test_hardware_list_json():
    rows = {r["id"]: r for r in _json("hardware", "list")}
    assert set(rows) >= {"h20", "rtx5090", "h100_sxm", "h200_sxm", "a100_80gb_sxm", "l40s", "b200", "mi300x"}
    assert rows["h20"]["ridge_bf16"] == 37.0
    assert rows["h20"]["bf16_tflops"] == 148.0 and rows["h20"]["bandwidth_tb_s"] == 4.0
    for r in rows.values():  # ridge column = peak / bandwidth
        assert r["ridge_bf16"] == pytest.approx(r["bf16_tflops"] / r["bandwidth_tb_s"], abs=0.051)


def test_hardware_show_json_has_sources():
    d = _json("hardware", "show", "h20")
    figs = {f["name"]: f for f in d["figures"]}
    assert figs["peak bf16 TFLOP/s"]["value"] == 148.0
    assert figs["ridge bf16 FLOP/B"]["value"] == 37.0
    assert all(f["source"].strip() for f in d["figures"])


def test_hardware_show_table_and_unknown():
    r = _run("hardware", "show", "h20")
    assert r.exit_code == 0 and "148" in r.output
    r = _run("hardware", "show", "tpu-v9")
    assert r.exit_code == 2 and "tpu-v9" in r.output and "h20" in r.output


def test_hardware_dir_option_and_env(tmp_path):
    from importlib import resources
    from pathlib import Path

    text = (Path(str(resources.files("specagent.hardware") / "profiles")) / "h20.toml").read_text()
    text = text.replace('id = "h20"', 'id = "labgpu"').replace('aliases = ["h20", "h20-96gb", "nvidia-h20"]', "aliases = []")
    text = text.replace("bf16 = { value = 148.0", "bf16 = { value = 200.0")
    (tmp_path / "labgpu.toml").write_text(text)
    d = _json("hardware", "show", "labgpu", "--hardware-dir", str(tmp_path))
    assert {f["name"]: f["value"] for f in d["figures"]}["ridge bf16 FLOP/B"] == 50.0
    rows = _json("hardware", "list", env={"SPECAGENT_HARDWARE_DIR": str(tmp_path)})
    assert "labgpu" in {r["id"] for r in rows}


# ---------------------------------------------------------------------- models
def test_models_show_json():
    d = _json("models", "show", "qwen3.5-4b")
    assert d["params"]["total"] == 4_205_751_296
    assert d["kv_bytes_per_token_bf16"] == 32 * 1024
    assert d["linear_attention_layers"] == 24 and d["full_attention_layers"] == 8
    d = _json("models", "show", "qwen3.5-397b-a17b")
    assert abs(d["params"]["total"] - 396.35e9) < 0.001 * 396.35e9
    assert abs(d["params"]["active"] - 17.35e9) < 0.001 * 17.35e9


def test_models_list_json():
    rows = {r["model"]: r for r in _json("models", "list")}
    assert rows["Qwen/Qwen3.5-397B-A17B"]["kv_kib_per_token"] == 30.0
    assert rows["Qwen/Qwen3.5-4B"]["total_b"] == 4.206


def test_models_show_unsupported_type(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "gpt2", "hidden_size": 8}))
    r = _run("models", "show", str(f))
    assert r.exit_code == 2 and "gpt2" in r.output


# ---------------------------------------------------------------------- roofline
def test_roofline_decode_json_matches_estimate():
    d = _json("roofline", "--model", "qwen3.5-397b-a17b", "--hardware", "h20", "--gpus", "8", "--phase", "decode",
              "--batch", "1", "--context", "8192")
    dep = Deployment(load_model_spec("qwen3.5-397b-a17b"), load_hardware("h20"), gpus=8, weight_dtype="fp8")
    c = decode(dep, 8192, 1)
    assert d["flops"] == pytest.approx(c.total_flops[0], rel=1e-12)
    assert d["bytes_read"] == pytest.approx(c.total_bytes_read[0], rel=1e-12)
    assert d["bytes_written"] == pytest.approx(c.total_bytes_written[0], rel=1e-12)
    assert d["time_s"] == pytest.approx(c.time_s[0], rel=1e-12)
    assert d["read_kv"] == 8193 * 30 * 1024
    assert d["bound"] == "memory"
    assert d["ridge_flop_per_byte"] == pytest.approx(74.0)
    assert d["intensity_flop_per_byte"] == pytest.approx(c.total_flops[0] / c.total_bytes[0], rel=1e-12)
    assert d["experts_touched"] == pytest.approx(10.0)
    assert d["efficiencies"]["bandwidth_source"].strip()
    # the dense weight stream's own rate (issue 49): the engine's factor on its H20 bandwidth, capped at the datasheet
    eng = dep.serving_engine.for_hardware(dep.hardware)
    eff = d["efficiencies"]
    assert eff["weight_stream"] == pytest.approx(min(1.0, eff["bandwidth"] * float(eng.weight_stream.value)), rel=1e-12)
    assert eff["weight_stream"] > eff["bandwidth"] and eff["weight_stream_source"] == eng.weight_stream.source
    r = _run("roofline", "--model", "qwen3.5-397b-a17b", "--hardware", "h20", "--gpus", "8", "--context", "8192",
             env={"COLUMNS": "100"})
    assert r.exit_code == 0 and f"memory: bandwidth efficiency {eff['bandwidth']:.3g}, dense weight stream {eff['weight_stream']:.3g}" in r.output


def test_roofline_verify_json_matches_estimate():
    d = _json("roofline", "--model", "qwen3.5-4b", "--gpus", "1", "--weight-dtype", "bf16", "--phase", "verify",
              "--tokens", "700", "--context", "3000", "--batch", "2")
    c = verify(Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h20")), 700, 3000, 2)
    for k in ("flops_attention", "read_state", "write_kv", "compute_s", "memory_s"):
        assert d[k] == pytest.approx(c.to_frame()[k].iloc[0], rel=1e-12), k
    assert d["bound"] == ("compute" if c.compute_bound[0] else "memory")
    assert d["new_tokens_per_sequence"] == 700


def test_roofline_table_mentions_bound():
    r = _run("roofline", "--model", "qwen3.5-4b", "--gpus", "1", "--phase", "prefill", "--tokens", "8192", "--context", "0")
    assert r.exit_code == 0, r.output
    assert "compute" in r.output and "bound" in r.output


def test_roofline_does_not_fit_is_clean_error():
    r = _run("roofline", "--weight-dtype", "bf16")
    assert r.exit_code == 2
    assert "does not fit" in r.output and "16 GPU" in r.output  # 10 hold the weights; 16 is the next TP degree dividing 32 heads


def test_roofline_bad_phase():
    r = _run("roofline", "--phase", "sample")
    assert r.exit_code == 2 and "sample" in r.output


def test_roofline_balance_json_matches_api():
    d = _json("roofline", "balance", "--model", "qwen3-4b", "--gpus", "1", "--weight-dtype", "bf16")
    bp = balance_point(Deployment(load_model_spec("qwen3-4b"), load_hardware("h20")))
    assert d["balance_batch_peak"] == bp.balance_batch_peak == 38
    assert d["balance_batch_effective"] == bp.balance_batch_effective
    assert d["hardware_ridge_bf16"] == 37.0
    d2 = _json("roofline", "balance")  # defaults: 397B fp8 on 8x H20
    assert d2["balance_batch_peak"] > d["balance_batch_peak"]


@pytest.mark.parametrize("args", [("--batch", "0"), ("--context", "-5"), ("--phase", "prefill", "--tokens", "0")])
def test_roofline_bad_numbers_clean_error(args):
    r = _run("roofline", *args)
    assert r.exit_code == 2, r.output
    assert "error" in r.output


@pytest.mark.parametrize("sub", [(), ("balance",)])
def test_roofline_fp8_weights_without_fp8_peak_run_at_bf16(sub):
    """A GPU without FP8 tensor cores (A100) dequantises FP8 weights and runs BF16 GEMMs."""
    r = _run("roofline", *sub, "--hardware", "a100_80gb_sxm", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    if sub:
        assert d["compute_dtype"] == "bf16" and d["hardware_ridge"] == pytest.approx(312 / 2.039, rel=1e-3)
    else:
        assert d["ridge_flop_per_byte"] == pytest.approx(312 / 2.039, rel=1e-3)


def test_a_console_made_at_import_follows_columns_at_print(monkeypatch):
    """The commands' consoles are made when their module is imported; the width is the one in force at print time
    (rich alone fixes COLUMNS at construction, so a test run's import order decided how wide a later table was)."""
    from specagent.cli.console import SafeConsole

    monkeypatch.setenv("COLUMNS", "50")
    c = SafeConsole()
    monkeypatch.setenv("COLUMNS", "240")
    assert c.width == 240
    assert SafeConsole(width=70).width == 70  # an explicit width is kept
