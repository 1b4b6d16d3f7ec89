"""Checks on the shipped data files: GPU profiles (hardware/profiles/*.toml) and
Hugging Face configs (costmodel/configs/**/config.json).

Why: every number the tool prints must carry a source, and the two facts the
project's argument rests on (the BF16 ridge of each GPU, SPEC §4, and the shapes of
the Qwen3.5 models, SPEC §3) must not drift when someone edits a data file.
These tests read the files directly with tomllib/json, so they do not depend on
the loader code.
"""

from __future__ import annotations

import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the profiles the installed package ships (the repository's hardware/profiles/ in an editable install), so these
# checks also run on a staged copy with a profile added (tests/test_extending.py)
PROFILES = Path(str(resources.files("specagent.hardware") / "profiles"))
CONFIGS = ROOT / "costmodel" / "configs"

# SPEC §4, BF16 ridge column (dense peak FLOP/s ÷ memory bandwidth, FLOP per byte).
SPEC_RIDGE = {
    "h20": 37,
    "rtx5090": 117,
    "h100_sxm": 295,
    "h200_sxm": 206,
    "a100_80gb_sxm": 153,
    "l40s": 419,
    "b200": 281,
    "mi300x": 247,
}

# SPEC §3: (num_hidden_layers, hidden_size, full-attention layers) of the Qwen3.5 text models.
SPEC_QWEN35 = {
    "Qwen/Qwen3.5-397B-A17B": (60, 4096, 15),
    "Qwen/Qwen3.5-122B-A10B": (48, 3072, 12),
    "Qwen/Qwen3.5-35B-A3B": (40, 2048, 10),
    "Qwen/Qwen3.5-27B": (64, 5120, 16),
    "Qwen/Qwen3.5-4B": (32, 2560, 8),
}

REQUIRED_LEAVES = {
    "peak_tflops": ("bf16", "fp16", "fp32"),
    "memory": ("capacity_gb", "bandwidth_tb_s", "kind"),
    "interconnect": ("kind", "bandwidth_gb_s", "unidirectional_gb_s"),
    "efficiency": ("prefill_mfu", "bandwidth", "pass_overhead_us"),
}
TOP_LEVEL_KEYS = ("schema_version", "id", "name", "vendor", "aliases")


def _stems() -> list[str]:
    """Every shipped profile file: a new GPU is schema- and source-checked the moment its file exists."""
    return sorted(f.stem for f in PROFILES.glob("*.toml"))


def _profiles() -> dict[str, dict]:
    files = sorted(PROFILES.glob("*.toml"))
    return {f.stem: tomllib.loads(f.read_text(encoding="utf-8")) for f in files}


def _leaves(table: dict, path: str = ""):
    """Yield (dotted path, node) for every value node below the section tables."""
    for key, node in table.items():
        dotted = f"{path}.{key}" if path else key
        if isinstance(node, dict) and "value" not in node:
            yield from _leaves(node, dotted)
        else:
            yield dotted, node


def test_specs_eight_profiles_present():
    assert set(_profiles()) >= set(SPEC_RIDGE)


@pytest.mark.parametrize("stem", _stems())
def test_profile_schema_and_sources(stem):
    data = _profiles()[stem]
    for key in TOP_LEVEL_KEYS:
        assert key in data, f"{stem}.toml: missing top-level key {key!r}"
    assert data["schema_version"] == 1
    assert data["id"] == stem, f"{stem}.toml: id must equal the file stem"
    assert all(a == a.lower() for a in data["aliases"]), f"{stem}.toml: aliases must be lowercase"
    for section, keys in REQUIRED_LEAVES.items():
        assert section in data, f"{stem}.toml: missing section [{section}]"
        for key in keys:
            assert key in data[section], f"{stem}.toml: missing {section}.{key}"
    sections = {k: v for k, v in data.items() if isinstance(v, dict)}
    n_leaves = 0
    for dotted, node in _leaves(sections):
        n_leaves += 1
        assert isinstance(node, dict), f"{stem}.toml: {dotted} must be an inline table with value and source"
        assert set(node) == {"value", "source"}, f"{stem}.toml: {dotted} keys {sorted(node)}"
        src = node["source"]
        assert isinstance(src, str) and src.strip(), f"{stem}.toml: {dotted} has an empty source"
        value = node["value"]
        if isinstance(value, str):
            assert value.strip(), f"{stem}.toml: {dotted} has an empty value"
        else:
            assert isinstance(value, (int, float)) and not isinstance(value, bool), dotted
            assert math.isfinite(value) and value > 0, f"{stem}.toml: {dotted} = {value} must be > 0"
    assert n_leaves >= 13


@pytest.mark.parametrize("stem", sorted(SPEC_RIDGE))
def test_bf16_ridge_matches_spec(stem):
    data = _profiles()[stem]
    flops = data["peak_tflops"]["bf16"]["value"] * 1e12
    bytes_per_s = data["memory"]["bandwidth_tb_s"]["value"] * 1e12
    ridge = flops / bytes_per_s
    assert abs(ridge - SPEC_RIDGE[stem]) <= 1.0, f"{stem}: ridge {ridge:.2f} vs SPEC {SPEC_RIDGE[stem]}"


@pytest.mark.parametrize("stem", _stems())
def test_efficiencies_are_fractions_and_directions_consistent(stem):
    data = _profiles()[stem]
    assert "decode_mfu" not in data["efficiency"], f"{stem}: decode_mfu is not read (issue 17); the loader rejects it"
    for key in ("prefill_mfu", "bandwidth"):
        assert 0 < data["efficiency"][key]["value"] <= 1, f"{stem}: efficiency.{key}"
    link = data["interconnect"]
    assert link["unidirectional_gb_s"]["value"] * 2 == pytest.approx(link["bandwidth_gb_s"]["value"])
    peaks = data["peak_tflops"]
    # Tensor-core BF16 exceeds scalar FP32 on every listed GPU; the tensor peaks are the datasheets' dense figures
    # with FP32 accumulate (below), not a rule of thumb
    assert peaks["bf16"]["value"] > peaks["fp32"]["value"]
    if stem in DATASHEET_TENSOR_TFLOPS:  # an extra check on the GPUs whose datasheet figures are written out below
        assert {k: peaks[k]["value"] for k in DATASHEET_TENSOR_TFLOPS[stem]} == DATASHEET_TENSOR_TFLOPS[stem]
        assert set(peaks) - {"fp32"} == set(DATASHEET_TENSOR_TFLOPS[stem])


# Dense tensor TFLOP/s with FP32 accumulate, as printed in each profile's cited datasheet (sparse figure / 2 where the
# datasheet prints only that). One accumulate convention for every profile: on data-center parts FP32 accumulate
# runs at the FP16-accumulate rate; on GeForce (RTX 5090) it runs at half of it (RTX Blackwell whitepaper, Table 3).
DATASHEET_TENSOR_TFLOPS = {
    "h20": {"bf16": 148.0, "fp16": 148.0, "fp8": 296.0},
    "rtx5090": {"bf16": 209.5, "fp16": 209.5, "fp8": 419.0, "fp4": 1676.0},
    "h100_sxm": {"bf16": 989.4, "fp16": 989.4, "fp8": 1979.0},
    "h200_sxm": {"bf16": 989.4, "fp16": 989.4, "fp8": 1979.0},
    "a100_80gb_sxm": {"bf16": 312.0, "fp16": 312.0},
    "l40s": {"bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
    "b200": {"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0},
    "mi300x": {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
}

@pytest.mark.parametrize("stem", _stems())
def test_every_source_is_a_primary_citation(stem):
    """No `source` may point at SPEC (a document not in the repository) or be empty; tensor peaks name their accumulate."""
    data = _profiles()[stem]
    sections = {k: v for k, v in data.items() if isinstance(v, dict)}  # every section, the efficiency leads included
    for dotted, node in _leaves(sections):
        src = node["source"]
        assert src.strip(), f"{stem}.toml: {dotted} has an empty source"
        assert "SPEC" not in src, f"{stem}.toml: {dotted} cites SPEC, which is not in the repository: {src!r}"
    for k in set(data["peak_tflops"]) - {"fp32"}:  # every tensor peak, on every profile
        assert "FP32 accumulate" in data["peak_tflops"][k]["source"], f"{stem}.toml: peak_tflops.{k} must state its accumulate"


def test_a100_has_no_fp8_and_rtx5090_states_accumulate_precision():
    profiles = _profiles()
    assert "fp8" not in profiles["a100_80gb_sxm"]["peak_tflops"]
    rtx = profiles["rtx5090"]["peak_tflops"]
    # RTX Blackwell whitepaper Table 3, FP32-accumulate rows: BF16 and FP16 209.5, FP8 419 dense (FP16 accumulate doubles them)
    assert (rtx["bf16"]["value"], rtx["fp16"]["value"], rtx["fp8"]["value"]) == (209.5, 209.5, 419.0)
    assert all("with FP32 Accumulate" in rtx[k]["source"] for k in ("bf16", "fp16", "fp8"))


def test_aliases_unique_across_profiles():
    seen: dict[str, str] = {}
    for stem, data in _profiles().items():
        for name in [stem, *data["aliases"]]:
            assert seen.setdefault(name, stem) == stem, f"alias {name!r} used by {seen[name]} and {stem}"


def _configs() -> dict[str, Path]:
    return {str(p.parent.relative_to(CONFIGS)): p for p in sorted(CONFIGS.rglob("config.json"))}


def test_every_config_parses_and_is_listed_in_readme():
    configs = _configs()
    assert set(SPEC_QWEN35) <= set(configs)
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    for model_id, path in configs.items():
        data = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(data, dict) and "model_type" in data, model_id
        assert model_id in readme, f"{model_id} missing from costmodel/configs/README.md"
        reconstructed = (path.parent / "PROVENANCE.md").exists()
        row = next(line for line in readme.splitlines() if line.startswith(f"| {model_id} |"))
        assert ("reconstructed" in row) == reconstructed, f"{model_id}: README status vs PROVENANCE.md"


@pytest.mark.parametrize("model_id", sorted(SPEC_QWEN35))
def test_qwen35_text_config_matches_spec(model_id):
    layers, hidden, n_full = SPEC_QWEN35[model_id]
    text = json.loads(_configs()[model_id].read_text(encoding="utf-8"))["text_config"]
    assert text["num_hidden_layers"] == layers
    assert text["hidden_size"] == hidden
    assert text["vocab_size"] == 248320 and text["head_dim"] == 256
    kinds = text["layer_types"]
    assert len(kinds) == layers and kinds.count("full_attention") == n_full
    interval = text["full_attention_interval"]
    assert all((kind == "full_attention") == ((i + 1) % interval == 0) for i, kind in enumerate(kinds))
