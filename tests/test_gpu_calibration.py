"""The prepared GPU calibration (benchmarks/gpu_calibration.sh + .py) on its CPU dry path, and the offline
install helper it uses (tools/offline_env.py): nothing here needs a GPU or the network."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import types
import zipfile
from pathlib import Path

import pytest
import torch

from specagent.hardware.serving_engine import LAYER_KINDS, load_engine
from specagent.hardware.profile import load_hardware

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gpucal = _load("gpu_calibration_script", ROOT / "benchmarks" / "gpu_calibration.py")
offline = _load("offline_env_tool", ROOT / "tools" / "offline_env.py")


def _run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"), "SPECAGENT_WHEELS": str(tmp_path / "no-wheels")}
    (tmp_path / "out").mkdir()
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_calibration.sh"), "--device", "cpu", "--record-root", str(tmp_path / "rec"), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_dry_path_end_to_end_writes_a_dated_record(tmp_path):
    """The shell entry point on the CPU: staged package, tiny models, every stage, the record folder and $OUT."""
    res = _run_script(tmp_path, "--budget-s", "60")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "== staging specagent" in res.stdout and "calibrate weak fp32: done" in res.stdout and "record written to" in res.stdout
    [folder] = list((tmp_path / "rec").iterdir())
    rec = json.loads((folder / "record.json").read_text())
    assert folder.name == f"{rec['date'][:10]}-{folder.name[11:]}" and rec["device"]["device"] == "cpu"
    assert sorted(p.name for p in folder.iterdir()) == ["engine-fp32.toml", "record.json", "record.md", "strong-fp32.toml", "weak-fp32.toml"]
    assert [s["name"] for s in rec["stages"]] == ["device facts", "calibrate weak fp32", "calibrate strong fp32", "engine terms fp32",
                                                   "live comparison (fp32)"]
    assert all(s["status"] == "done" for s in rec["stages"]), rec["stages"]
    assert rec["device"]["torch"] == torch.__version__ and rec["budget_s"] == 60 and 0 < rec["elapsed_s"] < 60
    # every file loads through the project's own loaders; the engine profile is the measured one
    for c in rec["calibrations"]:
        hw = load_hardware(str(folder / c["profile"]))
        assert hw.provenance["dtype"] == "fp32" and len(c["validation"]) == len(gpucal.make_plan(_args()).validation_points)
        assert c["mape"] == pytest.approx(sum(abs(r["error"]) for r in c["validation"]) / len(c["validation"]), rel=1e-12)
        assert len(c["validation_engine"]) == len(c["validation"])
    [e] = rec["engine_terms"]
    eng = load_engine(str(folder / e["profile"]))
    assert eng.id == e["id"] and set(e["terms"]["layer_us"]) == set(LAYER_KINDS) and eng.max_gpus.value == 1
    live = rec["live"]
    assert live["report"]["comparison"]["tokens_exact"] and live["engine_comparison"]["measured_s"] == live["report"]["comparison"]["measured_s"]
    assert live["report"]["setup"]["device"] == "cpu" and live["report"]["repeats"] == 1
    assert any("not measured: CPU device" in x for x in rec["not_measured"])
    md = (folder / "record.md").read_text()
    for heading in ("## Hardware and software", "## Held-out validation", "## Engine terms (fp32)", "## Live comparison", "## Not measured"):
        assert heading in md
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["record.json", "record.md", "record.tar.gz", "run.log"]
    with tarfile.open(out / "record.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted([folder.name] + [f"{folder.name}/{p.name}" for p in folder.iterdir()])
    assert (out / "record.json").read_text() == (folder / "record.json").read_text()
    assert "record written to" in (out / "run.log").read_text()


def _args(**kw) -> types.SimpleNamespace:
    base = dict(device="cpu", budget_s=None, scale=None, dtypes=None, live_dtype=None, repeats=None, live_trajectories=None,
                live_repeats=None, token_scale=None, k=4, no_live=False, record_root=None, out=None)
    return types.SimpleNamespace(**{**base, **kw})


def test_a_budget_too_small_skips_every_stage_and_says_so(tmp_path):
    res = _run_script(tmp_path, "--budget-s", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads(next((tmp_path / "rec").iterdir()).joinpath("record.json").read_text())
    assert rec["stages"][0] == {"name": "device facts", "status": "done", "seconds": rec["stages"][0]["seconds"]}
    assert [s["status"].split(":")[0] for s in rec["stages"][1:]] == ["skipped"] * 2 + ["skipped"]
    assert rec["stages"][-1]["name"] == "live comparison" and "no calibrated fp32 profiles" in rec["stages"][-1]["status"]
    assert all("skipped: budget" in s["status"] for s in rec["stages"][1:3])
    assert rec["calibrations"] == [] and rec["live"] is None


def test_plan_defaults_and_errors():
    cpu = gpucal.make_plan(_args())
    assert (cpu.device, cpu.scale, cpu.dtypes, cpu.budget_s, cpu.live_trajectories, cpu.live_repeats) == ("cpu", "tiny", ["fp32"], 60.0, 2, 1)
    assert cpu.record_root == ROOT / "out" / "gpu-calibration" and cpu.cfg.clock == "cpu"
    with pytest.raises(SystemExit, match="unknown dtype 'fp8'"):
        gpucal.make_plan(_args(dtypes="fp8"))
    with pytest.raises(SystemExit, match="--live-dtype bf16 must be one of the calibrated --dtypes"):
        gpucal.make_plan(_args(live_dtype="bf16"))
    with pytest.raises(SystemExit, match="--budget-s must be > 0"):
        gpucal.make_plan(_args(budget_s=0))
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="--device cuda: CUDA is not available here"):
            gpucal.make_plan(_args(device="cuda"))


def test_live_size_takes_the_largest_run_whose_first_repeat_fits():
    per_traj = 2.0  # predicted seconds per trajectory
    pick = lambda room, largest=(24, 3): gpucal.live_size(lambda n: n * per_traj, room, largest=largest)  # noqa: E731
    assert pick(24 * 2.0 * gpucal.LIVE_MARGIN) == (24, 3)  # repeats after the first stop at the deadline in the run itself
    assert pick(24 * 2.0 * gpucal.LIVE_MARGIN - 0.1) == (12, 1)
    assert pick(2.0 * gpucal.LIVE_MARGIN) == (1, 1) and pick(1.0) is None
    assert pick(100.0, largest=(2, 1)) == (2, 1)  # the caller's limits clip every size
    assert gpucal.live_size(lambda n: 0.0, 1.0, largest=(5, 2)) == (5, 2)


def test_stage_runs_layout_matches_pyproject_and_imports_without_site_packages(tmp_path):
    """The staged package imports with no site-packages at all (python -S): layout and package data."""
    layout = offline.package_layout()
    assert layout["specagent.common"] == ROOT / "common" and layout["specagent.cli"] == ROOT / "specagent" / "cli"
    dest = offline.stage(tmp_path / "stage")
    for pkg, src in layout.items():  # a code package with its __init__, a data folder (no Python) with its files
        staged = dest.joinpath(*pkg.split("."))
        if (src / "__init__.py").is_file():
            assert (staged / "__init__.py").is_file(), pkg
        else:
            assert sorted(p.name for p in staged.iterdir()) == sorted(p.name for p in src.iterdir()), pkg
    assert not list(dest.rglob("__pycache__")) and not list(dest.rglob("*.so"))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import specagent.hardware.serving_engine as e; "
            "assert e.__file__.startswith(sys.argv[1]), e.__file__; print(e.load_engine('vllm').id)")
    res = subprocess.run([sys.executable, "-S", "-c", code, str(dest)], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "vllm", res.stderr


def test_every_runtime_dependency_is_carried_or_on_the_device():
    deps = offline.runtime_dependencies()
    assert "pydantic" in deps and "tomli-w" in deps and "numpy" in deps
    uncovered = [d for d in deps if d not in {offline.normalise(w) for w in offline.WHEELS} and d not in offline.DEVICE_PROVIDES]
    assert uncovered == []
    assert set(offline.IMPORT_NAMES) == set(deps)
    for name, version in offline.WHEELS.items():  # the versions carried are the ones tested here
        from importlib.metadata import version as installed

        assert installed(name) == version, name


def test_download_and_install_commands(tmp_path):
    cmd = offline.download_command(tmp_path, "3.12")
    assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd.count("--platform") == len(offline.PLATFORMS)
    assert "pydantic-core==2.50.5" in cmd and cmd[cmd.index("-d") + 1] == str(tmp_path)
    with pytest.raises(FileNotFoundError, match="no wheels in"):
        offline.install_command(tmp_path, tmp_path / "site")


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A minimal pure-Python wheel (one module), as pip builds them."""
    w = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(w, "w") as z:
        z.writestr(f"{name}.py", "VALUE = 42\n")
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{name}.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return w


def test_offline_install_of_carried_wheels_and_their_requirements(tmp_path):
    """pip --no-index --no-deps --target with a local wheel: no index is contacted; the module imports from the target."""
    wheels = tmp_path / "whl"
    wheels.mkdir()
    w = _wheel(wheels, "specagent_probe", "1.0", ["numpy>=1", "missingpkg; python_version >= '3'", "extra-only; extra == 'test'"])
    assert offline.requirements_of(w) == ["numpy>=1", "missingpkg; python_version >= '3'"]
    assert offline.unmet_requirements({w.name: offline.requirements_of(w)}, {"specagent_probe"}) == \
        [f"{w.name}: missingpkg; python_version >= '3'"]
    assert offline.unmet_requirements({"p.whl": ["Typing_Extensions>=4"]}, {"typing-extensions"}) == []  # names normalised
    target = tmp_path / "site"
    cmd = offline.install_command(wheels, target)
    assert "--no-index" in cmd and "--no-deps" in cmd and cmd[cmd.index("--target") + 1] == str(target)
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/nowhere", "PIP_NO_INPUT": "1"}
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    res = subprocess.run([sys.executable, "-c", "import specagent_probe as p; print(p.VALUE, p.__file__)"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path)
    assert res.stdout.split()[0] == "42" and res.stdout.split()[1].startswith(str(target))
    assert offline.missing_imports({"specagent-nothing": "specagent_nothing_here"})[0].startswith("specagent-nothing (ModuleNotFoundError")
    assert offline.missing_imports({"numpy": "numpy"}) == []
