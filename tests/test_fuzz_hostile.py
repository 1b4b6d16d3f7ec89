"""Hostile input beyond malformed files (issue #26, the case table 2026-12-01-hostile-inputs.md): special files,
symlinks, terminals that cannot encode UTF-8 or are 40 columns wide, profiles that shadow each other, sweeps whose
inputs change under them, results that cannot be right, and hypothesis over the numbers profiles, scenarios and
model configs carry (nan, inf and huge values included).

Every case that could hang runs in a subprocess under a timeout (SIGALRM per case inside, a wall-clock limit
outside), so a regression fails the suite instead of blocking it. Findings that belong to other issues (the partial
[acceptance.accept] table, plan's ^C/resume and its file set on a full disk) are tested there.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.cli.console import SafeConsole
from specagent.common.encodable import ASCII_FALLBACK, ascii_fallback
from specagent.common.guard import ResultDefect, check_output, problems
from specagent.common.paths import input_file_problem
from specagent.costmodel.deployment import Deployment, tp_problem, valid_gpu_counts
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, parse_config, shipped_models
from specagent.hardware.serving_engine import EngineProfileError, parse_engine
from specagent.hardware.profile import HardwareProfileError, load_hardware, parse_profile
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.jobs.sweep import SweepRequest, SweepFolderError, run as run_sweep, sweep_table
from specagent.traces import load_trajectories, save_trajectories
from specagent.traces.io import default_workload_path

ROOT = Path(__file__).resolve().parents[1]
H20 = tomllib.loads((ROOT / "hardware/profiles/h20.toml").read_text(encoding="utf-8"))
IDEAL = tomllib.loads((ROOT / "hardware/engines/ideal.toml").read_text(encoding="utf-8"))
CONFIG = json.loads(shipped_models()["Qwen/Qwen3.5-4B"].read_text(encoding="utf-8"))
runner = CliRunner()
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("hostile") / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:2], p)
    return p


def _cli(args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed CLI in a subprocess (its own terminal settings), bounded by `timeout`."""
    code = "import sys; from specagent.cli import main; sys.argv = ['specagent', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


# ---------------------------------------------------------------- F7 special files: one helper, no hang
def test_the_one_helper_names_every_kind_of_path(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    os.symlink("nowhere", tmp_path / "dangling")
    assert input_file_problem(tmp_path / "f") is None
    assert input_file_problem(tmp_path / "d") == "a directory"
    assert "FIFO" in input_file_problem(tmp_path / "fifo")
    assert "symlink loop" in input_file_problem(tmp_path / "a")
    assert "dangling symlink" in input_file_problem(tmp_path / "dangling")
    assert input_file_problem(tmp_path / "missing") == "no such file"
    assert input_file_problem("/dev/null") == "a device, not a file"


FIFO_CASES = {  # the nine commands that blocked forever, and the trace readers that already refused
    "scenario show": ["scenario", "show", "{d}/f.toml"],
    "hardware show": ["hardware", "show", "{d}/f.toml"],
    "sweep": ["sweep", "{d}/f.toml", "--out", "{d}/O"],
    "plan --requests": ["plan", "--requests", "{d}/f.csv", "--rate", "1/s", "--gpu", "h20"],
    "models show": ["models", "show", "{d}/m/config.json"],
    "predict --success": ["predict", "--trace", "{small}", "--strategies", "specagent", "--success", "{d}/f.json", "-o", "{d}/O"],
    "report": ["report", "{d}/f.json", "-o", "{d}/r.html", "--no-images"],
    "latency engine": ["latency", "engine", "{d}/f.toml"],
    "latency validate --data": ["latency", "validate", "--data", "{d}/f.csv", "--no-holdout"],
    "traces stats": ["traces", "stats", "{d}/f.json"],
    "predict --scenario": ["predict", "--scenario", "{d}/f.toml", "-o", "{d}/O"],
    "roofline --hardware": ["roofline", "--hardware", "{d}/f.toml"],
}
#: Runs every case in one interpreter, each under SIGALRM: a hang becomes a 'HANG' record, not a stuck suite.
_DRIVER = textwrap.dedent("""
    import json, signal, sys
    from typer.testing import CliRunner
    from specagent.cli import app
    class Hang(Exception): pass
    def alarm(*_): raise Hang()
    signal.signal(signal.SIGALRM, alarm)
    out = {}
    for name, argv in json.loads(sys.argv[1]).items():
        signal.alarm(15)
        try:
            r = CliRunner().invoke(app, argv, catch_exceptions=True)
            out[name] = {"code": r.exit_code, "output": r.output, "exc": repr(r.exception) if r.exception else None}
        except Hang:
            out[name] = {"code": "HANG", "output": "", "exc": None}
        finally:
            signal.alarm(0)
    print(json.dumps(out))
""")


def test_fifos_and_special_files_are_refused_in_one_line_never_read(tmp_path, small):
    d = tmp_path
    for name in ("f.toml", "f.csv", "f.json"):
        os.mkfifo(d / name)
    (d / "m").mkdir()
    os.mkfifo(d / "m" / "config.json")
    cases = {k: [a.replace("{d}", str(d)).replace("{small}", str(small)) for a in v] for k, v in FIFO_CASES.items()}
    r = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(cases)], capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    for name, res in results.items():
        assert res["code"] == 2, (name, res)
        errors = [ln for ln in res["output"].splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in res["output"], (name, res["output"])
        assert "FIFO" in errors[0] or "special file" in errors[0] or "regular" in errors[0], (name, errors[0])


# ---------------------------------------------------------------- F18, F19 symlinks named as what they are
def test_a_symlink_loop_is_named_as_one(tmp_path):
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    for argv in (["traces", "import", "tau2", str(tmp_path / "a.json"), "-o", str(tmp_path / "t.jsonl")],
                 ["scenario", "show", str(tmp_path / "a.json")], ["hardware", "show", str(tmp_path / "a.json")]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 2 and "symlink loop" in r.output and "Traceback" not in r.output, (argv, r.output)


def test_a_dangling_output_symlink_is_named_as_one(tmp_path, small):
    link = tmp_path / "LINK"
    os.symlink(tmp_path / "gone" / "dir", link)
    r = runner.invoke(app, ["predict", "--trace", str(small), "--strategies", "strongonly", "-o", str(link)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "File exists" not in r.output and "symlink" in r.output.lower(), r.output


# ---------------------------------------------------------------- F13, F22 terminals
@pytest.mark.parametrize("argv", [["hardware", "list"], ["traces", "stats", "{small}"],
                                  ["predict", "--trace", "{small}", "--strategies", "strongonly,specagent", "-o", "{out}"]],
                         ids=["hardware-list", "traces-stats", "predict"])
def test_an_ascii_terminal_gets_ascii_not_a_traceback(argv, small, tmp_path):
    args = [a.replace("{small}", str(small)).replace("{out}", str(tmp_path / "o")) for a in argv]
    r = _cli(args, env={"PYTHONIOENCODING": "ascii", "COLUMNS": "160"})
    assert r.returncode == 0, r.stderr.decode("ascii", "replace")[-2000:]
    r.stdout.decode("ascii")  # every byte is ASCII
    assert b"Traceback" not in r.stderr


def test_the_ascii_fallback_maps_the_characters_the_commands_print():
    text = "Relative to Strong-only — 2 trajectories … τ² 5×H20 ≤ ┃│━"
    out = text.encode("ascii", errors="specagent-ascii") if _register() else b""
    assert out == b"Relative to Strong-only - 2 trajectories ... tau2 5xH20 <= ||-"
    assert all(ord(c) < 128 for v in ASCII_FALLBACK.values() for c in v)


def _register() -> bool:
    import codecs

    codecs.register_error("specagent-ascii", ascii_fallback)
    return True


def test_a_narrow_terminal_gets_every_cell_whole(small, tmp_path):
    r = _cli(["predict", "--trace", str(small), "--strategies", "strongonly,specagent", "-o", str(tmp_path / "o"),
              "--details"], env={"COLUMNS": "40"})  # the ratio table is among the details
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    text = r.stdout.decode()
    assert "(table" in text and "its lines wrap" in text  # said, not silently cropped
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())["summary"]
    spec = next(s for s in summary if s["strategy"] == "specagent")
    for key in ("wall_time_s_rel", "model_wall_time_s_rel", "total_bytes_read_rel"):
        assert f"{spec[key]:.3f}" in text, key  # the whole number, not '0.'
    # the ratio table, too wide for 40 columns, in its vertical form: each ratio whole beside its header
    assert f"  wall: {spec['wall_time_s_rel']:.3f}" in text and f"  bytes: {spec['total_bytes_read_rel']:.3f}" in text, text


def test_safe_console_prints_a_wide_table_whole():
    from rich.table import Table

    t = Table()
    for h in ("strategy", "bytes", "S bytes", "wall", "model", "FLOPs", "S dec", "S calls"):
        t.add_column(h, justify="right", no_wrap=True)
    t.add_row("strongonly", *["0.918"] * 7)
    c = SafeConsole(width=40, record=True, file=open(os.devnull, "w"))
    c.print(t)
    text = c.export_text()
    assert text.count("0.918") == 7 and "strongonly" in text and "its lines wrap" in text


def test_a_table_caption_is_printed_flush_left():
    """A caption is prose (what the columns mean): rich centres it by default, which reads as ragged lines."""
    from rich.table import Table

    t = Table(caption="s/task = seconds per task, tool and user waits included; model s = seconds the models take")
    t.add_column("strategy")
    t.add_row("a very long strategy name that makes the table wide")
    c = SafeConsole(width=60, record=True, file=open(os.devnull, "w"))
    c.print(t)
    lines = [ln for ln in c.export_text().splitlines() if ln.strip()]
    assert lines[-2].startswith("s/task = seconds") and lines[-1].startswith("included; model s")


# ---------------------------------------------------------------- F6 aliases that take over another profile
def _write_profile(path: Path, **changes) -> None:
    import tomli_w

    data = json.loads(json.dumps(H20))
    data.update(changes)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")


def test_plan_out_with_home_unset_prints_no_traceback(tmp_path, small):
    """F14: with HOME unset, the PNG/SVG export's browser driver printed two tracebacks (exit 0). Needs a Chromium."""
    from specagent.reports.static import find_browser

    if find_browser() is None:
        pytest.skip("no Chrome/Chromium: the PNG/SVG export (and its driver) is not run")
    env = {k: v for k, v in os.environ.items() if k != "HOME"}  # _cli() merges os.environ back in: run it here
    code = "import sys; from specagent.cli import main; sys.argv = ['specagent', *sys.argv[1:]]; main()"
    r = subprocess.run([sys.executable, "-c", code, "plan", "--rate", "0.5/s", "--tasks", "6", "--trace", str(small), "--strategy",
                        "strongonly", "--gpu", "h20", "--workers", "1", "--out", str(tmp_path / "O")], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "JSONError" not in r.stderr, r.stderr
    assert {"plan.json", "capacity_curve.html", "capacity_curve.png"} <= {p.name for p in (tmp_path / "O").iterdir()}  # the driver ran


def test_an_alias_that_shadows_a_shipped_id_is_refused(tmp_path):
    _write_profile(tmp_path / "zz.toml", id="zz", name="ZZ", aliases=["h200"])
    with pytest.raises(HardwareProfileError, match=r"zz\.toml: alias 'h200' is also the alias of hardware profile 'h200_sxm'"):
        load_hardware("h200", [tmp_path])
    r = runner.invoke(app, ["roofline", "--hardware", "h200", "--hardware-dir", str(tmp_path), "--json"])
    assert r.exit_code == 2 and "zz.toml" in r.output and "h200" in r.output


def test_two_user_profiles_with_one_alias_are_refused(tmp_path):
    _write_profile(tmp_path / "aa.toml", id="aa", name="AA", aliases=["same"])
    _write_profile(tmp_path / "bb.toml", id="bb", name="BB", aliases=["same"])
    with pytest.raises(HardwareProfileError, match="alias 'same'.*'bb'"):
        load_hardware("same", [tmp_path])


def test_a_profile_with_a_shipped_id_replaces_it_on_purpose(tmp_path):
    _write_profile(tmp_path / "mine.toml", name="my H20")  # same id "h20": earlier directories shadow later ones
    assert load_hardware("h20", [tmp_path]).path == str(tmp_path / "mine.toml")


def test_a_repeated_display_name_selects_nothing_by_name(tmp_path):
    _write_profile(tmp_path / "copy.toml", id="copy", aliases=[])  # name "NVIDIA H20", as the shipped one: allowed
    assert load_hardware("h20", [tmp_path]).id == "h20" and load_hardware("copy", [tmp_path]).id == "copy"
    _write_profile(tmp_path / "lab1.toml", id="lab1", name="Lab GPU", aliases=[])
    _write_profile(tmp_path / "lab2.toml", id="lab2", name="Lab GPU", aliases=[])
    with pytest.raises(HardwareProfileError, match="is the name of 2 profiles"):
        load_hardware("Lab GPU", [tmp_path])


# ---------------------------------------------------------------- F4, F5 sweeps that never mix inputs
def _sweep_cfg(tmp_path: Path, workload: Path, hardware: list[str]) -> SweepRequest:
    return SweepRequest.from_dict({
        "sweep": {"tasks": 6, "seed": 3, "steady": False, "workload": str(workload), "prices": {"myhw": 2.0}},
        "grid": {"strategy": ["strongonly"], "rate": [0.5], "fleet": ["f"], "hardware": hardware},
        "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, str(tmp_path / "s.toml"))


def test_an_edited_input_makes_exactly_its_cells_stale(tmp_path, small, monkeypatch):
    hw = tmp_path / "hw"
    hw.mkdir()
    _write_profile(hw / "myhw.toml", id="myhw", name="My GPU", aliases=[])
    monkeypatch.setenv("SPECAGENT_HARDWARE_DIR", str(hw))
    wl = tmp_path / "wl.jsonl"
    wl.write_bytes(small.read_bytes())
    out = tmp_path / "out"
    cfg = _sweep_cfg(tmp_path, wl, ["myhw", "h20"])
    assert run_sweep(cfg, out).ran == 2
    before = {p.name: p.read_bytes() for p in (out / "cells").glob("*.parquet")}
    # the GPU profile's contents change (same path): only the cell on that GPU is stale
    _write_profile(hw / "myhw.toml", id="myhw", name="My GPU", aliases=[],
                   memory={**H20["memory"], "bandwidth_tb_s": {"value": 1.0, "source": "edited"}})
    cfg = _sweep_cfg(tmp_path, wl, ["myhw", "h20"])
    with pytest.raises(SweepFolderError, match=r"holds 1 cell\(s\).*inputs\.hardware\.myhw"):
        run_sweep(cfg, out)
    rep = run_sweep(replace(cfg, force=True), out)
    assert (rep.ran, rep.skipped) == (1, 1)
    after = {p.name: p.read_bytes() for p in (out / "cells").glob("*.parquet")}
    assert len(set(before) & set(after)) == 1  # the h20 cell kept, byte for byte
    kept = (set(before) & set(after)).pop()
    assert before[kept] == after[kept]
    # the workload's contents change: every cell reads it
    save_trajectories(load_trajectories(default_workload_path())[2:4], wl)
    with pytest.raises(SweepFolderError, match=r"holds 2 cell\(s\).*inputs\.workload"):
        run_sweep(_sweep_cfg(tmp_path, wl, ["myhw", "h20"]), out)


def test_the_sweep_table_reads_each_steady_cells_window():
    df = pd.DataFrame([
        dict(strategy="specagent", k=2, acceptance="default", rate=0.5, fleet="f", hardware="h20", latency_p50_s=math.nan,
             latency_p95_s=math.nan, window_latency_p50_s=49.2, window_latency_p95_s=225.8, usd_per_task=0.0196,
             strong_mean_decode_batch=1.1, steady_stable=True),
        dict(strategy="strongonly", k=0, acceptance="default", rate=0.5, fleet="f", hardware="h20", latency_p50_s=30.0,
             latency_p95_s=90.0, window_latency_p50_s=math.nan, window_latency_p95_s=math.nan, usd_per_task=0.02,
             strong_mean_decode_batch=9.4, steady_stable=None)])
    t = sweep_table(df)
    assert t["latency_p50_s"].tolist() == [49.2, 30.0] and t["latency_p95_s"].tolist() == [225.8, 90.0]
    assert t["stable"].tolist() == ["yes", "-"]


# ---------------------------------------------------------------- F25 a BOM is not a TOML error
def test_a_scenario_with_a_bom_reads(tmp_path):
    f = tmp_path / "s.toml"
    f.write_bytes("\ufeffk = 3\n".encode("utf-8"))
    assert Scenario.load(f).k == 3
    f2 = tmp_path / "h.toml"
    import tomli_w

    f2.write_bytes(b"\xef\xbb\xbf" + tomli_w.dumps({**H20, "id": "bom", "aliases": []}).encode())
    assert load_hardware(f2).id == "bom"


# ---------------------------------------------------------------- F3 tensor parallelism
def test_valid_gpu_counts_divide_every_head_count():
    for hf_id, path in shipped_models().items():
        spec = load_model_spec(path)
        for g in valid_gpu_counts(spec, 64):
            a = spec.attention
            assert a.num_heads % g == 0 and (a.num_kv_heads % g == 0 or g % a.num_kv_heads == 0), (hf_id, g)
        assert 1 in valid_gpu_counts(spec, 1)


def test_the_does_not_fit_advice_is_a_valid_tp_degree():
    q = load_model_spec("qwen3.5-397b-a17b")
    dep = Deployment(q, load_hardware("h20"), gpus=2, weight_dtype="fp8")
    g = dep.min_gpus(1, 8192)
    assert g is not None and tp_problem(q, g) is None and g == 8  # memory alone: 5 GPUs, not a TP degree for 32 heads


# ---------------------------------------------------------------- item 2: results that cannot be right
def test_the_output_guard_refuses_impossible_numbers():
    good = {"summary": [{"strategy": "a", "wall_time_s": 10.0, "time_s_user": 4.0, "tokens_weak_decode": 5, "time_s_weak_decode": 1.0,
                         "weak_calls": 2, "model_wall_time_s": 6.0}]}
    assert problems(good) == [] and check_output(good, "x") is good
    cases = {
        "nan": ("wall_time_s", math.nan, "not a finite number"),
        "inf": ("time_s_user", math.inf, "not a finite number"),
        "negative": ("time_s_user", -1.0, "cannot be negative"),
        "zero-time-for-work": ("time_s_weak_decode", 0.0, "processed"),
        "wall-shorter-than-waits": ("wall_time_s", 0.0, "shorter than its part"),
        "no-model-time-for-calls": ("model_wall_time_s", 0.0, "model calls"),
    }
    for name, (key, value, phrase) in cases.items():
        doc = json.loads(json.dumps(good))
        doc["summary"][0][key] = value
        with pytest.raises(ResultDefect, match="defect: x would report an impossible number") as e:
            check_output(doc, "x")
        assert f"summary[0].{key}" in str(e.value) or "summary[0]" in str(e.value), name
        assert phrase in str(e.value), (name, str(e.value))


def test_predict_turns_an_impossible_result_into_a_defect_report(small, tmp_path, monkeypatch):
    """F1's symptom (wall 0.0 next to 14.8 s of user waits) as a defect injected after the simulator: one line, no file."""
    import specagent.simulator.jobs.predict as sim_cli

    real = sim_cli.run_predict

    def broken(*a, **kw):
        comp = real(*a, **kw)
        comp.summary.loc["specagent", "wall_time_s"] = 0.0
        return comp

    monkeypatch.setattr(sim_cli, "run_predict", broken)
    out = tmp_path / "o"
    r = runner.invoke(app, ["predict", "--trace", str(small), "--strategies", "strongonly,specagent", "-o", str(out)])
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "Traceback" not in r.output, r.output
    assert "defect" in r.output and "wall_time_s" in r.output
    assert not out.exists() or not any(out.iterdir())


# ---------------------------------------------------------------- hypothesis: the numbers profiles, scenarios, configs carry
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30),
                    st.sampled_from([0, -0.0, 1e-320, 1e308, math.nan, math.inf, -math.inf, 10**19, 2**63, 0.5, 1, 4.0]))
HW_FIELDS = [("memory", "capacity_gb"), ("memory", "bandwidth_tb_s"), ("interconnect", "bandwidth_gb_s"),
             ("interconnect", "unidirectional_gb_s"), ("efficiency", "prefill_mfu"), ("efficiency", "bandwidth"),
             ("efficiency", "pass_overhead_us"), ("peak_tflops", "bf16"), ("peak_tflops", "fp8")]


def _finite_profile_numbers(prof) -> bool:
    vals = [prof.memory_capacity_gb.value, prof.memory_bandwidth_tb_s.value, prof.interconnect_gb_s.value,
            prof.prefill_mfu.value, prof.bandwidth_efficiency.value, prof.pass_overhead_us.value,
            *(v.value for v in prof.peak_tflops.values())]
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in vals) and prof.bandwidth_bytes_s > 0


@settings(FUZZ, max_examples=150)
@given(where=st.sampled_from(HW_FIELDS), value=NUMBERS)
def test_fuzz_hardware_profile_numbers(where, value):
    data = json.loads(json.dumps(H20))
    section, key = where
    data[section][key] = {"value": value, "source": "fuzz"}
    try:
        prof = parse_profile(data, "fuzz.toml")
    except HardwareProfileError as exc:
        assert str(exc).startswith("fuzz.toml: ") and f"{section}.{key}" in str(exc), str(exc)
        return
    assert _finite_profile_numbers(prof) and math.isfinite(prof.ridge("bf16")) and prof.ridge("bf16") > 0


ENGINE_FIELDS = [("per_pass", "launch_us"), ("per_pass", "per_sequence_us"), ("per_request", "request_us"),
                 ("collectives", "allreduce_alpha_us"), ("kernels", "bandwidth_half_mb"), ("kernels", "moe_pad_tokens"),
                 ("per_layer_us", "moe"), ("kernels_per_layer", "dense_mlp"), ("cuda_graphs", "max_batch"), ("per_pass", "kernels"),
                 ("kernels", "weight_stream")]


@settings(FUZZ, max_examples=150)
@given(where=st.sampled_from(ENGINE_FIELDS), value=NUMBERS)
def test_fuzz_engine_profile_numbers(where, value):
    data = json.loads(json.dumps(IDEAL))
    section, key = where
    data[section][key] = {"value": value, "source": "fuzz"}
    try:
        eng = parse_engine(data, "fuzz.toml")
    except EngineProfileError as exc:
        assert str(exc).startswith("fuzz.toml: ") and f"{section}.{key}" in str(exc), str(exc)
        return
    for name, v, _src in eng.figures():
        assert not isinstance(v, float) or (math.isfinite(v) and v >= 0), (name, v)


SCENARIO_FIELDS = ["strong.gpus", "weak.gpus", "strong.memory_utilization", "k", "seed", "acceptance.weak_token_ratio",
                   "acceptance.verdict_tokens", "acceptance.position_decay", "verifier_system_tokens"]


@settings(FUZZ, max_examples=150)
@given(path=st.sampled_from(SCENARIO_FIELDS), value=NUMBERS)
def test_fuzz_scenario_numbers(path, value):
    """Any number in a scenario file: a scenario whose numbers are finite, or a ScenarioError naming the field."""
    *parents, leaf = path.split(".")
    data: dict = {}
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    try:
        sc = Scenario.from_dict(data, "fuzz.toml")
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.toml: ") and leaf in str(exc), str(exc)
        return
    got = sc.to_dict()
    for p in parents:
        got = got[p]
    v = got[leaf]
    assert isinstance(v, (int, float)) and math.isfinite(v), (path, v)
    if path.endswith("gpus"):  # a GPU count that passes the scenario must still pass the TP check, or be refused there
        try:
            getattr(sc, parents[0]).build()
        except ScenarioError as exc:
            assert "gpus" in exc.where or "does not divide" in str(exc) or "fit" in str(exc), str(exc)


CONFIG_FIELDS = ["hidden_size", "intermediate_size", "vocab_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                 "linear_num_value_heads", "linear_key_head_dim", "max_position_embeddings", "num_hidden_layers"]


@settings(FUZZ, max_examples=150)
@given(field=st.sampled_from(CONFIG_FIELDS), value=NUMBERS)
def test_fuzz_model_config_numbers(field, value):
    """Any shape number: a spec of bounded size (under 10^15 parameters), or a ModelSpecError naming the field."""
    cfg = json.loads(json.dumps(CONFIG))
    cfg["text_config"][field] = value
    try:
        spec = parse_config(cfg, path="fuzz/config.json")
    except ModelSpecError as exc:
        assert str(exc).startswith("fuzz/config.json: "), str(exc)
        return
    assert 0 < spec.param_counts().total < 10**15, (field, value)
