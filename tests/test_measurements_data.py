"""Checks on the public serving and collective measurements in ``measurements/``.

The latency fit is only as good as these rows, so every row must carry its provenance, parse,
describe a deployment the cost model can load, and respect the one bound no real server can
beat: a decode step cannot be faster than reading the active weights once from HBM.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections import Counter
from pathlib import Path

import pytest

from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.profile import list_profiles, load_hardware

ROOT = Path(__file__).resolve().parents[1] / "measurements"
SERVING = ROOT / "serving_latency.csv"
COLLECTIVES = ROOT / "collectives.csv"

SERVING_HEADER = [
    "row_id", "model", "gpu", "gpus", "tp", "ep", "dp", "engine", "engine_version", "weight_dtype", "kv_dtype",
    "cuda_graphs", "concurrency", "batch", "input_tokens", "output_tokens", "tpot_ms", "itl_ms", "ttft_ms",
    "e2e_latency_ms", "output_throughput_tok_s", "total_throughput_tok_s", "request_rate", "statistic",
    "source_kind", "source", "source_url", "source_locator", "retrieved", "notes",
]
COLLECTIVE_HEADER = [
    "row_id", "op", "gpu", "gpus", "interconnect", "implementation", "cuda_graph", "message_bytes", "latency_us",
    "statistic", "source_kind", "source", "source_url", "source_locator", "retrieved", "notes",
]
SOURCE_KINDS = {"github-pr", "github-issue", "repo-file", "paper", "vendor-doc", "blog", "dashboard"}
STATISTICS = {"", "mean", "median", "p50", "p90", "p99"}
INT_COLUMNS = ("gpus", "tp", "ep", "dp", "concurrency", "batch")
FLOAT_COLUMNS = (
    "input_tokens", "output_tokens", "tpot_ms", "itl_ms", "ttft_ms", "e2e_latency_ms",
    "output_throughput_tok_s", "total_throughput_tok_s", "request_rate",
)
#: Bytes per stored weight for the formats the rows use (a lower bound where a checkpoint keeps
#: some layers wider, which only loosens the floor below).
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "nvfp4": 0.5, "awq-int4": 0.5}
PROFILE_IDS = {p.id for p in list_profiles()}


def _read(path: Path, header: list[str]) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == header, f"{path.name}: header differs from the documented schema"
        return list(reader)


SERVING_ROWS = _read(SERVING, SERVING_HEADER)
COLLECTIVE_ROWS = _read(COLLECTIVES, COLLECTIVE_HEADER)


def _num(row: dict[str, str], col: str) -> float | None:
    return float(row[col]) if row[col] else None


def _step_ms(row: dict[str, str]) -> float | None:
    """Decode time per output token the row implies, when it states enough to say."""
    for col in ("tpot_ms", "itl_ms"):
        if row[col]:
            return float(row[col])
    if row["e2e_latency_ms"] and row["output_tokens"]:
        return float(row["e2e_latency_ms"]) / float(row["output_tokens"])
    if row["total_throughput_tok_s"] and row["batch"] and row["input_tokens"] and row["output_tokens"]:
        # a static batch's (prompt + generated tokens) / time: the whole run's time, prefill included (an upper bound)
        e2e_ms = int(row["batch"]) * (float(row["input_tokens"]) + float(row["output_tokens"])) * 1000.0 / float(row["total_throughput_tok_s"])
        return e2e_ms / float(row["output_tokens"])
    if row["output_throughput_tok_s"] and row["concurrency"]:
        return int(row["concurrency"]) * 1000.0 / float(row["output_throughput_tok_s"])
    return None


def _check_provenance(row: dict[str, str], where: str) -> None:
    for col in ("source", "source_url", "source_locator", "retrieved"):
        assert row[col].strip(), f"{where}: empty {col}"
    assert row["source_url"].startswith("https://"), f"{where}: source_url is not an https URL"
    assert row["source_kind"] in SOURCE_KINDS, f"{where}: source_kind {row['source_kind']!r}"
    dt.date.fromisoformat(row["retrieved"])
    assert row["statistic"] in STATISTICS, f"{where}: statistic {row['statistic']!r}"


def test_headers_are_exact_and_files_end_with_a_newline():
    for path in (SERVING, COLLECTIVES):
        assert path.read_bytes().endswith(b"\n"), path.name


def test_row_ids_are_unique():
    for rows in (SERVING_ROWS, COLLECTIVE_ROWS):
        ids = [r["row_id"] for r in rows]
        assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]


@pytest.mark.parametrize("row", SERVING_ROWS, ids=lambda r: r["row_id"])
def test_serving_row_is_sourced_and_well_formed(row):
    where = f"serving_latency.csv row {row['row_id']}"
    _check_provenance(row, where)
    for col in INT_COLUMNS:
        if row[col]:
            assert int(row[col]) > 0, f"{where}: {col} must be a positive integer"
    for col in FLOAT_COLUMNS:
        if row[col]:
            value = float(row[col])
            assert math.isfinite(value) and value > 0, f"{where}: {col} must be positive"
    gpus, tp, dp = int(row["gpus"]), int(row["tp"]), int(row["dp"] or 1)
    assert gpus == tp * dp, f"{where}: gpus {gpus} != tp {tp} x dp {dp}"
    if row["ep"]:
        assert int(row["ep"]) <= gpus, f"{where}: ep larger than the GPU count"
    assert row["engine"], f"{where}: engine missing"
    assert row["cuda_graphs"] in {"", "true", "false"}, where
    assert row["weight_dtype"] in WEIGHT_BYTES or row["weight_dtype"] == "", where
    assert row["gpu"] in PROFILE_IDS or "no profile" in row["notes"], f"{where}: unknown GPU {row['gpu']!r}"
    load = [c for c in ("concurrency", "batch", "request_rate") if row[c]]
    assert len(load) == 1 or (not load and "[burst]" in row["notes"]), f"{where}: load shape {load}"
    assert _step_ms(row) is not None or row["ttft_ms"], f"{where}: no latency or throughput figure"
    if row["ttft_ms"] and row["e2e_latency_ms"]:
        assert float(row["ttft_ms"]) < float(row["e2e_latency_ms"]), where


@pytest.mark.parametrize("model_id", sorted({r["model"] for r in SERVING_ROWS}))
def test_every_measured_model_loads(model_id):
    spec = load_model_spec(model_id)
    assert spec.name == model_id


def test_dataset_breadth():
    gpus = Counter(r["gpu"] for r in SERVING_ROWS if r["gpu"] in PROFILE_IDS)
    engines = Counter(r["engine"] for r in SERVING_ROWS)
    sources = {r["source"] for r in SERVING_ROWS}
    assert len(SERVING_ROWS) >= 60
    assert len(gpus) >= 4, gpus
    assert {"vllm", "sglang"} <= set(engines), engines
    assert len(sources) >= 6, sources


def test_decode_is_never_faster_than_reading_the_active_weights():
    """Step time >= active weight bytes / (GPUs x HBM bandwidth): a floor no engine can beat.

    Catches a wrong GPU count, a dropped unit conversion or a weight dtype off by 2x.
    """
    failures = []
    for row in SERVING_ROWS:
        step = _step_ms(row)
        if step is None or row["gpu"] not in PROFILE_IDS:
            continue
        spec = load_model_spec(row["model"])
        weight_bytes = spec.param_counts().active_without_embedding * WEIGHT_BYTES[row["weight_dtype"] or "bf16"]
        floor_ms = weight_bytes / (int(row["gpus"]) * load_hardware(row["gpu"]).bandwidth_bytes_s) * 1e3
        if step < floor_ms:
            failures.append(f"{row['row_id']}: {step:.3f} ms < floor {floor_ms:.3f} ms")
    assert not failures, failures


def test_single_stream_throughput_does_not_beat_its_own_tpot():
    """At concurrency 1 a client cannot receive tokens faster than one per TPOT (2% for rounding)."""
    checked = 0
    for row in SERVING_ROWS:
        step = _num(row, "tpot_ms") or _num(row, "itl_ms")
        thr = _num(row, "output_throughput_tok_s")
        if row["concurrency"] == "1" and step and thr:
            assert thr <= 1000.0 / step * 1.02, row["row_id"]
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("row", COLLECTIVE_ROWS, ids=lambda r: r["row_id"])
def test_collective_row_is_sourced_and_plausible(row):
    where = f"collectives.csv row {row['row_id']}"
    _check_provenance(row, where)
    assert row["op"] in {"all_reduce", "all_to_all", "all_gather"}, where
    assert row["gpu"] in PROFILE_IDS, where
    assert row["implementation"] and row["interconnect"], where
    assert row["cuda_graph"] in {"true", "false"}, where
    gpus, size, lat = int(row["gpus"]), int(row["message_bytes"]), float(row["latency_us"])
    assert gpus >= 2 and size > 0 and lat > 0, where
    # Each GPU must at least move its 1/n share once over its link: a loose floor that still
    # catches a ms/us mix-up on large messages; a collective inside one node never takes 0.1 s.
    floor_us = size / (gpus * load_hardware(row["gpu"]).link_bytes_s) * 1e6
    assert floor_us <= lat < 1e5, f"{where}: {lat} us outside [{floor_us:.2f}, 1e5)"
