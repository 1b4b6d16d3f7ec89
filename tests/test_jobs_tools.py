"""The measurement and calibration commands as jobs (#50): a Python caller gets what the command line gets, a bad
field is refused by the job itself (the CLI names its flag), and the torch and network jobs import neither torch nor
their servers until they run."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.cli.requests import flag_of, job_flags
from specagent.simulator.jobs import JOBS
from specagent.simulator.jobs.base import JobError, Request

runner = CliRunner()


def _job_module(name: str):
    module = JOBS[name]
    return importlib.import_module(module if module.startswith("specagent.") else f"specagent.simulator.jobs.{module}")


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_registered_job_has_a_request_and_a_run(name):
    mod = _job_module(name)
    requests = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, Request) and v.__module__ == mod.__name__]
    assert requests and callable(mod.run)
    for req in requests:  # every field a flag can carry, or marked as not one
        job_flags(req)


def test_the_torch_and_network_jobs_import_no_torch_until_they_run():
    code = ("import sys\n"
            "import specagent.kernels.jobs.calibrate, specagent.kernels.jobs.live, specagent.endpoints.jobs.live\n"
            "import specagent.cli.kernels\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------ the job refuses, the CLI names the flag
def test_a_bad_field_is_refused_by_the_job_and_named_by_its_flag(tmp_path):
    from specagent.endpoints.jobs.acceptance_measure import MeasureRequest
    from specagent.endpoints.jobs.bench_serve import BenchServeRequest
    from specagent.endpoints.jobs.live import LiveRequest
    from specagent.simulator.jobs.acceptance_search import AcceptanceSearchRequest

    bad = [(AcceptanceSearchRequest(samples=0), "samples", "--samples"),
           (MeasureRequest(traces=(tmp_path / "t.json",), weak_url="http://x/v1", weak_model="w", strong_url="http://y/v1",
                           strong_model="s", out=tmp_path, limit=0), "limit", "--limit"),
           (BenchServeRequest(base_url="http://x/v1", model="m", request_rate="0"), "request_rate", "--request-rate"),
           (LiveRequest(strong_url="http://y/v1"), "strong_url", "--strong-url"),
           (LiveRequest(trajectories=0), "trajectories", "--trajectories")]
    for request, field, flag in bad:
        with pytest.raises(JobError) as err:
            request.check()
        assert err.value.field == field, (request, err.value)
        assert flag_of(type(request), field) == flag


def test_a_scenario_field_a_job_refuses_is_named_by_its_scenario_flag():
    from specagent.simulator.jobs.predictor_validate import PredictorValidateRequest
    from specagent.simulator.scenario import Scenario

    with pytest.raises(JobError) as err:
        PredictorValidateRequest(scenario=Scenario.load("edge")).check()
    assert err.value.field == "scenario.strong_api"
    assert flag_of(PredictorValidateRequest, "scenario.strong_api") == "--strong-api"
    r = runner.invoke(app, ["predictor", "validate", "--edge"])
    assert r.exit_code == 2 and "--strong-api: " in r.output and "self-hosted" in r.output


def test_a_job_error_found_while_running_names_its_flag(tmp_path):
    """A check the run makes after importing torch (the engine profile is the hardware profile's file) still names its
    flag, and nothing is measured or written."""
    pytest.importorskip("torch")
    r = runner.invoke(app, ["calibrate", "-o", str(tmp_path / "p.toml"), "--engine-output", str(tmp_path / "p.toml"),
                            "--engine-terms", "--scale", "tiny"])
    assert r.exit_code == 2, r.output
    assert "--engine-output: " in r.output and "is the hardware profile's --output" in r.output
    assert not (tmp_path / "p.toml").exists()


def test_commands_without_a_scenario_have_no_scenario_flags():
    for path in (["acceptance", "calibrate"], ["acceptance", "fit"], ["latency", "fit"], ["bench", "serve"], ["calibrate"], ["live"]):
        r = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert r.exit_code == 0, r.output
        assert "--weak-gpus" not in r.output and "--edge " not in r.output, path


# ------------------------------------------------------------------------------ the Python API gives what the CLI writes
def test_the_acceptance_search_from_python_is_what_the_command_writes(tmp_path):
    from specagent.measurements import default_path
    from specagent.simulator.jobs.acceptance_search import AcceptanceSearchRequest, run

    text = default_path("protocol_figures.csv").read_text(encoding="utf-8")
    figs = tmp_path / "figs.csv"
    figs.write_text("\n".join(ln for ln in text.splitlines() if ",h20," in ln or ln.startswith("row_id")) + "\n", encoding="utf-8")
    steps = []
    res = run(AcceptanceSearchRequest(figures=figs, samples=2, seed=5, workers=1), steps.append)
    assert steps and steps[-1].what == "simulating candidates" and steps[-1].done == steps[-1].total == 2
    r = runner.invoke(app, ["acceptance", "calibrate", "--figures", str(figs), "-n", "2", "--seed", "5", "--workers", "1",
                            "-o", str(tmp_path / "cli")], terminal_width=200)
    assert r.exit_code == 0, r.output
    written = res.write(tmp_path / "py")
    assert [p.name for p in written] == ["candidates.csv", "summary.json"]
    for name in ("candidates.csv", "summary.json"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert res.to_dict() == json.loads((tmp_path / "cli" / "summary.json").read_text(encoding="utf-8"))


def test_the_acceptance_fit_from_python_is_what_the_command_writes(tmp_path):
    from specagent.simulator.jobs.acceptance_fit import AcceptanceFitRequest, run
    from specagent.traces.io import data_path

    sample = data_path("verdict_log_simulated.jsonl")
    res = run(AcceptanceFitRequest(logs=(sample,)))
    res.write(tmp_path / "py.toml")
    r = runner.invoke(app, ["acceptance", "fit", str(sample), "-o", str(tmp_path / "cli.toml"), "--json"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "py.toml").read_bytes() == (tmp_path / "cli.toml").read_bytes()
    doc = json.loads(r.output)
    assert doc["estimates"] == json.loads(json.dumps(res.to_dict()["estimates"], default=float))
    with pytest.raises(JobError, match="no-such.jsonl"):
        run(AcceptanceFitRequest(logs=(tmp_path / "no-such.jsonl",)))


def test_latency_validation_from_python_is_what_the_command_prints():
    from specagent.simulator.jobs.latency_validate import LatencyValidateRequest, run

    res = run(LatencyValidateRequest(holdout=False, worst=3))
    r = runner.invoke(app, ["latency", "validate", "--no-holdout", "--worst", "3", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == json.loads(json.dumps(res.to_dict()))
    assert len(res.to_dict()["worst"]) == 3 and res.kind == "in sample (shipped engine profiles)"


def test_a_base_engine_without_an_engine_id_is_refused_by_the_job():
    from specagent.simulator.jobs.latency_fit import LatencyFitRequest

    with pytest.raises(JobError) as err:
        LatencyFitRequest(base_engine="vllm").check()
    assert err.value.field == "base_engine"
    r = runner.invoke(app, ["latency", "fit", "--base-engine", "vllm"])
    assert r.exit_code == 2 and "--base-engine: only with --engine-id" in r.output


def test_the_live_request_takes_k_seed_and_acceptance_from_a_named_scenario_only():
    from specagent.endpoints.jobs.live import LiveRequest
    from specagent.simulator.scenario import Scenario

    edge = Scenario.load("edge")
    sc, k, seed, acc = LiveRequest(scenario_file="edge").resolved()
    assert (k, seed) == (edge.k, edge.seed) and acc is not None and acc.weak_token_ratio == 1.0
    assert dataclasses.replace(acc, weak_token_ratio=edge.acceptance.weak_token_ratio) == edge.acceptance
    _, k, seed, acc = LiveRequest(k=2, seed=9).resolved()
    assert (k, seed, acc) == (2, 9, None)  # no scenario named: the live run's constant acceptance
    with pytest.raises(JobError, match="only 'specagent' runs live"):
        LiveRequest(strategy="collab").check()


def test_a_job_result_writes_the_outputs_a_request_names(tmp_path):
    from specagent.simulator.jobs.predictor_validate import PredictorValidateRequest, run

    res = run(PredictorValidateRequest(synthetic=0, strategies="specagent"))
    path = res.write(tmp_path / "v.json")[0]
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    assert rows and {r["weight_mode"] for r in rows} == {"union", "active"} and set(res.worst()) == {"union", "active"}


# ------------------------------------------------------------------------------ roofline, balance point, traces import
def test_roofline_and_balance_point_from_python_are_what_the_commands_print():
    """The jobs return the figures `roofline --json` and `roofline balance --json` print; their deployment field gives
    the one-deployment flags (`--gpus`), its default the Scenario's Strong deployment."""
    from specagent.simulator.jobs.balance_point import BalancePointRequest
    from specagent.simulator.jobs.balance_point import run as run_balance
    from specagent.simulator.jobs.roofline import RooflineRequest
    from specagent.simulator.jobs.roofline import run as run_roofline
    from specagent.simulator.scenario import Scenario

    request = RooflineRequest(phase="prefill", batch=4, context=2000)
    cli = runner.invoke(app, ["roofline", "--phase", "prefill", "--batch", "4", "--context", "2000", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == json.loads(json.dumps(run_roofline(request).to_dict()))
    assert request.deployment == Scenario.strong and request.new_tokens == 512
    cli = runner.invoke(app, ["roofline", "balance", "--gpus", "16", "--json"])
    assert cli.exit_code == 0, cli.output
    python = run_balance(BalancePointRequest(deployment=dataclasses.replace(Scenario.strong, gpus=16))).to_dict()
    assert json.loads(cli.stdout) == json.loads(json.dumps(python))
    assert flag_of(RooflineRequest, "deployment.weight_dtype") == "--weight-dtype"
    assert {f.path for f in job_flags(BalancePointRequest)} >= {"context", "weight_mode", "deployment.gpus"}


@pytest.mark.parametrize("request_kw, field, said", [
    ({"phase": "nope"}, "", "`phase` must be one of"),
    ({"batch": 0}, "batch", "expected sequences in one pass"),
    ({"context": -1}, "context", "expected tokens per sequence in [0,"),
    ({"weight_mode": "all"}, "weight_mode", "expected one of union, active"),
])
def test_the_roofline_request_refuses_a_bad_field_by_name(request_kw, field, said):
    from specagent.simulator.jobs.roofline import RooflineRequest

    with pytest.raises(JobError) as e:
        RooflineRequest(**request_kw).check()
    assert e.value.field == field and said in str(e.value)


def test_a_deployment_too_small_for_the_pass_names_what_to_lower():
    from specagent.simulator.jobs.roofline import RooflineRequest
    from specagent.simulator.jobs.roofline import run as run_roofline

    with pytest.raises(JobError, match=r"^`batch` 1000: .*one sequence fits: lower `batch` \(or `context`\)$"):
        run_roofline(RooflineRequest(batch=1000))
    r = runner.invoke(app, ["roofline", "--batch", "1000"])
    assert r.exit_code == 2 and r.output.startswith("error: --batch 1000: ") and "lower --batch (or --context)" in r.output


def test_the_import_request_reads_a_leading_format_and_its_aliases(tmp_path):
    from specagent.simulator.jobs.import_traces import ImportRequest

    log = tmp_path / "log.json"
    log.write_text("[]")
    assert ImportRequest(files=("openai", str(log))).split() == ("openai-chat", (str(log),))
    assert ImportRequest(files=(str(log),), format="tau2").split() == ("tau2", (str(log),))
    with pytest.raises(JobError, match="the format is given twice"):
        ImportRequest(files=("openai", str(log)), format="tau2").split()
    with pytest.raises(JobError) as e:
        ImportRequest(files=(str(log),), format="nope").check()
    assert e.value.field == "format"
    with pytest.raises(JobError, match="give at least one input file"):
        ImportRequest(files=("tau2",)).check()


def test_the_roofline_screen_from_python_is_what_the_command_prints():
    """`reports/screens/foundation.py` draws the job's Result: the same lines as `specagent roofline` at 80 columns, the
    fixed terms and collectives read from the Result (the screen imports nothing of the cost model)."""
    from rich.console import Console

    from specagent.reports.screens import foundation as screen
    from specagent.simulator.jobs.roofline import RooflineRequest
    from specagent.simulator.jobs.roofline import run as run_roofline

    res = run_roofline(RooflineRequest(phase="prefill", batch=4, context=2000))
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    for part in screen.roofline(res, console):
        console.print(part)
    cli = runner.invoke(app, ["roofline", "--phase", "prefill", "--batch", "4", "--context", "2000"], env={"COLUMNS": "80"})
    assert cli.exit_code == 0, cli.output
    assert console.export_text() == cli.stdout
    from specagent.costmodel.latency import FIXED_TERMS

    assert [label for label, _ in res.fixed_terms] == [t.label for t in FIXED_TERMS]  # every term, in the cost model's order
    assert all(key in res.record for _, key in res.fixed_terms)
    assert f"for {res.collectives[0]} all-reduces + {res.collectives[1]} all-to-alls" in " ".join(cli.stdout.split())


def test_the_calibrate_screen_reads_each_mape_and_fixed_time_from_the_result():
    """`reports/screens/kernels.py` measures nothing: the MAPEs and each layer kind's fixed time it prints are the ones
    the Result stores (`to_dict()`), shown here on a stand-in Result (no torch needed)."""
    from types import SimpleNamespace as NS

    from rich.console import Console

    from specagent.reports.screens import kernels as screen

    row = NS(batch=4, new_tokens=16, context=512, bound="compute", predicted_s=0.0211, measured_s=0.02, error=0.055)
    terms = NS(device_name="cpu", dtype="fp32", parts={"moe": NS(eager_s=50e-6, graph_s=None, roofline_s=2e-6, kernels=9)},
               launch_s=0.0, launch_note="none on a CPU", pass_kernels=3, iteration_s=5e-6, collectives_note="one device",
               collectives=None)
    res = NS(fit=NS(peak_tflops={"fp32": 2e11}, bandwidth_tb_s=0.02, bandwidth_efficiency=0.8, curve=[(16, 0.5)],
                    pass_overhead_us=120), hardware=NS(name="this cpu"), spec_name="tiny",
             request=NS(output="p.toml", engine_path="e.toml", dtype="fp32"), terms=terms, engine=NS(id="calibrated-cpu"),
             rows=[row], engine_rows=[row])
    stored = {"mape": 0.123, "engine": {"terms": {"layer_us": {"moe": 47.5}}, "validation_mape": 0.0456}}
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    for part in screen.calibration(res, stored):  # type: ignore[arg-type]
        console.print(part)
    text = console.export_text()
    assert "MAPE: 12.3% over 1 held-out points" in text and "MAPE: 4.6% over 1 held-out points" in text
    assert " 47.5" in text and "wrote p.toml (this cpu)" in text and "wrote e.toml (serving engine 'calibrated-cpu')" in text
    assert "200.00 GFLOP/s" in text and "+5.5%" in text
