"""Engine generation as a dimension of the serving-engine terms (issue 32): a generation's profile overlays its engine's,
each measured row is priced by the generation its version names, and a fitted generation term is a factor that a current
engine never inherits."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from specagent.costmodel import latency_fit as lf
from specagent.costmodel.latency_targets import targets_from_rows
from specagent.hardware.serving_engine import EngineCatalog, EngineProfileError, load_engine, load_engine_file, version_key
from specagent.measurements import default_path, load_serving

SHIPPED = Path(load_engine("sglang").path).parent


def test_generation_profile_overlays_its_engine_and_keeps_its_own_h20_term():
    old, cur = load_engine("sglang-0.4"), load_engine("sglang")
    assert old.lineage == ("sglang-0.4", "sglang") and cur.lineage == ("sglang",)
    raw = tomllib.loads(Path(old.path).read_text(encoding="utf-8"))
    on_h20 = old.for_hardware("h20")
    assert on_h20.bandwidth.value == raw["hardware"]["h20"]["kernels"]["bandwidth"]["value"]
    assert on_h20.bandwidth.value < cur.for_hardware("h20").bandwidth.value  # the old decode path, not the current one's
    # every term the generation file does not state is its engine's, on every GPU
    for gpu in ("h100_sxm", "b200", "mi300x"):
        assert old.for_hardware(gpu).figures() == cur.for_hardware(gpu).figures()
    assert old.request_us == cur.request_us and old.scheduler == cur.scheduler and old.aliases == ()


def test_default_vllm_on_h20_takes_the_current_engine_term_not_sglang_0_4s():
    vllm, sgl, old = (load_engine(e).for_hardware("h20").bandwidth.value for e in ("vllm", "sglang", "sglang-0.4"))
    assert vllm == sgl != old


@pytest.mark.parametrize("engine, version, want", [
    ("sglang", "0.4.6.post1", "sglang-0.4"), ("sglang", "0.3.0", "sglang-0.4"), ("sglang", "0.5.15.post1", "sglang"),
    ("sglang", "0.5.8+", "sglang"), ("sglang", "", "sglang"), ("sgl", "0.4.6", "sglang-0.4"), ("vllm", "0.6.0", "vllm"),
    ("vllm", "main as of 2025-08-19 (version not stated)", "vllm"), ("sglang-0.4", "0.5.15", "sglang-0.4"),
])
def test_a_rows_engine_and_version_name_its_profile(engine, version, want):
    assert EngineCatalog().for_version(engine, version).id == want


def test_version_key_reads_the_leading_release_numbers_only():
    assert [version_key(v) for v in ("0.4.6.post1", "v0.5", "1.2.0rc1", "", "main", None)] == [
        (0, 4, 6), (0, 5), (1, 2, 0), None, None, None]


def test_the_dataset_rows_are_priced_by_their_generation():
    rows = load_serving(default_path("serving_latency.csv"))
    targets, _ = targets_from_rows(rows)
    by_row = {t.row.row_id: t.dep.serving_engine.id for t in targets}
    old = {t.row.row_id for t in targets if t.row.engine == "sglang" and version_key(t.row.engine_version) and
           version_key(t.row.engine_version) < (0, 5)}
    assert len(old) >= 72 and all(by_row[r] == "sglang-0.4" for r in old)
    assert all(by_row[t.row.row_id] == "sglang" for t in targets if t.row.source == "sgl-project/sglang#10467")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_generation_profile_errors_are_located(tmp_path):
    head = 'schema_version = 1\nid = "x-old"\nname = "X old"\nversion = "1"\n'
    missing = _write(tmp_path, "a.toml", head + 'extends = "nosuchengine"\n')
    with pytest.raises(EngineProfileError, match=r"a\.toml: extends 'nosuchengine'"):
        load_engine_file(missing)
    (tmp_path / "sglang-0.4.toml").write_text((SHIPPED / "sglang-0.4.toml").read_text(encoding="utf-8"), encoding="utf-8")
    chained = _write(tmp_path, "b.toml", head + 'extends = "sglang-0.4"\n')
    with pytest.raises(EngineProfileError, match="one level only"):
        load_engine_file(chained)
    orphan = _write(tmp_path, "vllm-x.toml", (SHIPPED / "vllm.toml").read_text(encoding="utf-8").replace('id = "vllm"', 'id = "vllm-x"')
                    + '\n[versions.below]\nvalue = "0.9"\nsource = "s"\n')
    with pytest.raises(EngineProfileError, match=r"\[versions\] needs 'extends'"):
        load_engine_file(orphan)
    bad = _write(tmp_path, "c.toml", head + 'extends = "sglang"\n[versions.below]\nvalue = "soon"\nsource = "s"\n')
    with pytest.raises(EngineProfileError, match="must be a version"):
        load_engine_file(bad)


def test_a_factor_multiplies_the_value_before_it_and_is_written_as_that_value():
    ps = [lf.Param("bw", "bandwidth", 0.7, 0.1, 1.0, "s"),
          lf.Param("bw@h20", "bandwidth", 0.7, 0.1, 1.0, "s", gpus=("h20",)),
          lf.Param("f", "bandwidth", 1.0, 0.25, 4.0, "s", engines=("sglang-0.4",), gpus=("h20",), scale_of="bandwidth")]
    vals = [0.7, 0.5, 0.8]
    assert lf.engine_with(load_engine("sglang-0.4"), "h20", ps, vals, "src").bandwidth.value == pytest.approx(0.4)
    assert lf.engine_with(load_engine("sglang"), "h20", ps, vals, "src").bandwidth.value == 0.5  # not carried to sglang
    assert lf.engine_with(load_engine("sglang-0.4"), "h100_sxm", ps, vals, "src").bandwidth.value == 0.7
    # the factor multiplies the per-GPU value, so neither is overwritten for the old generation on h20
    assert lf.moves_price(ps, ("sglang-0.4", "sglang"), "h20", False) == (1, 2)
    assert lf.moves_price(ps, "sglang", "h20", False) == (1,)
    prov = dict(dataset="d.csv", dataset_sha256="0" * 64, rows=1, rows_used=1, figures_fitted=1, sources=1, date="2026-01-01")
    tables = lf.fitted_tables(lf.FitResult(ps, np.array(vals), 0, [], 0.0, True, ""), prov)
    item = tables["sglang-0.4"]["hardware"]["h20"]["kernels"]["bandwidth"]
    assert item["value"] == 0.4 and item["source"].startswith("0.8 x the bandwidth the engine it extends has here (0.5); ")


def test_ones_own_engine_from_a_generation_profile_claims_no_versions(tmp_path):
    """`latency fit --engine-id mine --base-engine sglang-0.4` writes a whole profile (the generation's read over sglang's),
    without the generation's [versions]: visible on the search path, it must not take over the dataset's SGLang 0.4 rows."""
    import csv

    data = tmp_path / "mine.csv"
    rows = [r for r in csv.DictReader(default_path("serving_latency.csv").open(encoding="utf-8")) if r["row_id"].startswith("qwen3speed-h20-8b")]
    with data.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    from typer.testing import CliRunner

    from specagent.cli import app

    out = tmp_path / "engines" / "mine.toml"
    out.parent.mkdir()
    r = CliRunner().invoke(app, ["latency", "fit", "--data", str(data), "--engine-id", "mine", "--base-engine", "sglang-0.4",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    written = tomllib.loads(out.read_text(encoding="utf-8"))
    assert "extends" not in written and "versions" not in written  # a whole profile, read over sglang's
    mine = load_engine_file(out)
    assert mine.lineage == ("mine",) and mine.versions_below is None
    assert mine.for_hardware("h100_sxm").request_us.value == load_engine("sglang").request_us.value  # not fitted: sglang's
    assert EngineCatalog([out.parent]).for_version("sglang", "0.4.6.post1").id == "sglang-0.4"
