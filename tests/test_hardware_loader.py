"""Hardware profile loading: lookup, user directories, and errors that name file and field."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from specagent.hardware.profile import (
    ENV_VAR,
    HardwareProfileError,
    list_profiles,
    load_hardware,
    load_profile_file,
)

SPEC_EIGHT = {"h20", "rtx5090", "h100_sxm", "h200_sxm", "a100_80gb_sxm", "l40s", "b200", "mi300x"}
#: every profile file shipped (a GPU added by its file alone is covered; SPEC's eight must stay among them)
SHIPPED = {tomllib.loads(f.read_text(encoding="utf-8"))["id"]
           for f in Path(str(resources.files("specagent.hardware") / "profiles")).glob("*.toml")}


def _h20_text() -> str:
    return (Path(str(resources.files("specagent.hardware") / "profiles")) / "h20.toml").read_text()


def _custom_text(pid: str = "mygpu", name: str = "My GPU", bf16: float = 100.0, bw: float = 2.0) -> str:
    t = _h20_text()
    t = t.replace('id = "h20"', f'id = "{pid}"').replace('name = "NVIDIA H20"', f'name = "{name}"')
    t = t.replace('aliases = ["h20", "h20-96gb", "nvidia-h20"]', f'aliases = ["{pid}-alias"]')
    t = t.replace("bf16 = { value = 148.0", f"bf16 = {{ value = {bf16}")
    t = t.replace("bandwidth_tb_s = { value = 4.0", f"bandwidth_tb_s = {{ value = {bw}")
    return t


def test_shipped_profiles_present():
    assert {p.id for p in list_profiles()} == SHIPPED >= SPEC_EIGHT


def test_h20_ridge_is_37():
    h = load_hardware("h20")
    # 148 TFLOP/s / 4.0 TB/s = 37 FLOP per byte (SPEC §1, §4)
    assert h.ridge("bf16") == pytest.approx(148e12 / 4.0e12, rel=1e-12) == pytest.approx(37.0)
    assert h.ridge("fp8") == pytest.approx(74.0)
    assert h.capacity_bytes == 96e9 and h.bandwidth_bytes_s == 4.0e12
    assert h.link_bytes_s == 450e9  # one direction of 900 GB/s NVLink


@pytest.mark.parametrize("alias", ["h20", "H20", "nvidia-h20", "NVIDIA H20", "h20-96gb"])
def test_lookup_by_alias_and_name(alias):
    assert load_hardware(alias).id == "h20"


def test_unknown_name_lists_known_ids():
    with pytest.raises(HardwareProfileError) as e:
        load_hardware("tpu-v9")
    msg = str(e.value)
    assert "tpu-v9" in msg
    for pid in SHIPPED:
        assert pid in msg


def test_missing_field_names_file_and_field(tmp_path):
    f = tmp_path / "broken.toml"
    text = _custom_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("bandwidth_tb_s")]
    assert len(lines) == len(text.splitlines()) - 1
    f.write_text("\n".join(lines))
    with pytest.raises(HardwareProfileError) as e:
        load_profile_file(f)
    assert str(f) in str(e.value) and "memory.bandwidth_tb_s" in str(e.value)


def test_missing_source_names_field(tmp_path):
    f = tmp_path / "nosource.toml"
    text, n = re.subn(r'capacity_gb = \{ value = 96\.0, source = "[^"]*" \}', "capacity_gb = { value = 96.0 }", _custom_text())
    assert n == 1
    f.write_text(text)
    with pytest.raises(HardwareProfileError) as e:
        load_profile_file(f)
    assert str(f) in str(e.value) and "memory.capacity_gb" in str(e.value)


def test_bad_toml_names_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("id = \n")
    with pytest.raises(HardwareProfileError, match="bad.toml"):
        load_profile_file(f)


def test_hardware_dir_adds_profile(tmp_path):
    (tmp_path / "mygpu.toml").write_text(_custom_text(bf16=100.0, bw=2.0))
    with pytest.raises(HardwareProfileError):
        load_hardware("mygpu")
    p = load_hardware("mygpu", [tmp_path])
    assert p.id == "mygpu" and p.ridge("bf16") == pytest.approx(50.0)
    assert load_hardware("mygpu-alias", [tmp_path]).id == "mygpu"
    assert {q.id for q in list_profiles([tmp_path])} == SHIPPED | {"mygpu"}


def test_env_var_adds_profile(tmp_path, monkeypatch):
    (tmp_path / "envgpu.toml").write_text(_custom_text("envgpu", "Env GPU"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert load_hardware("envgpu").name == "Env GPU"


def test_user_dir_shadows_shipped(tmp_path):
    """A user profile with a shipped id wins, so calibrated profiles can replace defaults."""
    (tmp_path / "h20.toml").write_text(_custom_text("h20", "Calibrated H20", bf16=140.0))
    assert load_hardware("h20", [tmp_path]).peak_flops("bf16") == 140e12
    assert load_hardware("h20").peak_flops("bf16") == 148e12


def test_path_loads(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text(_custom_text("xgpu", "X"))
    assert load_hardware(str(f)).id == "xgpu"


def test_unknown_dtype_peak_names_it():
    with pytest.raises(HardwareProfileError, match="fp8"):
        load_hardware("a100_80gb_sxm").peak_flops("fp8")
