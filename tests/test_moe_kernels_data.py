"""Checks on the published fused-MoE kernel times in ``measurements/moe_kernels.csv``.

One row is one published time of one fused-MoE layer call (both grouped GEMMs) at one token
count. These checks cover the schema and the provenance only: no timing is asserted to be
monotonic or to respect a roofline, because the rows exist to test such models.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections import Counter
from pathlib import Path

import pytest

from specagent.hardware.profile import list_profiles

PATH = Path(__file__).resolve().parents[1] / "measurements" / "moe_kernels.csv"

HEADER = [
    "row_id", "gpu", "num_experts", "shard_intermediate", "hidden", "top_k", "tp", "ep", "dtype", "tokens",
    "kernel_us", "config", "engine", "triton_version", "model", "statistic", "source_kind", "source",
    "source_url", "source_locator", "retrieved", "notes",
]
SOURCE_KINDS = {"github-pr", "github-issue", "repo-file", "paper", "vendor-doc", "blog", "dashboard"}
STATISTICS = {"", "mean", "median", "p50", "p90", "p99"}
DTYPES = {"bf16", "fp16", "fp8_w8a8", "fp8_w8a8_block128", "int8_w8a16", "int4_w4a16"}
CONFIGS = {"default", "tuned", "shipped", "main", "pr-default"}
ENGINES = {"vllm", "sglang", "flaggems", "hpc-ops", "aiter"}
INT_COLUMNS = ("num_experts", "shard_intermediate", "hidden", "top_k", "tp", "ep", "tokens")
PROFILE_IDS = {p.id for p in list_profiles()}


def _read() -> list[dict[str, str]]:
    with PATH.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == HEADER, "moe_kernels.csv: header differs from the documented schema"
        return list(reader)


ROWS = _read()


def test_file_ends_with_a_newline():
    assert PATH.read_bytes().endswith(b"\n")


def test_row_ids_are_unique():
    ids = [r["row_id"] for r in ROWS]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["row_id"])
def test_row_is_sourced_and_well_formed(row):
    where = f"moe_kernels.csv row {row['row_id']}"
    for col in ("source", "source_url", "source_locator", "retrieved"):
        assert row[col].strip(), f"{where}: empty {col}"
    assert row["source_url"].startswith("https://"), where
    assert row["source_kind"] in SOURCE_KINDS, where
    dt.date.fromisoformat(row["retrieved"])
    assert row["statistic"] in STATISTICS, where
    assert row["gpu"] in PROFILE_IDS, f"{where}: unknown GPU {row['gpu']!r}"
    for col in ("num_experts", "shard_intermediate", "tokens"):
        assert row[col], f"{where}: {col} is required"
    for col in INT_COLUMNS:
        if row[col]:
            assert int(row[col]) > 0, f"{where}: {col} must be a positive integer"
    if row["top_k"]:
        assert int(row["top_k"]) <= int(row["num_experts"]), where
    us = float(row["kernel_us"])
    assert math.isfinite(us) and us > 0, f"{where}: kernel_us must be positive"
    assert row["dtype"] in DTYPES, f"{where}: dtype {row['dtype']!r}"
    assert row["config"] in CONFIGS, f"{where}: config {row['config']!r}"
    assert row["engine"] in ENGINES, f"{where}: engine {row['engine']!r}"
    assert row["model"], f"{where}: model missing"
    assert f"M={row['tokens']}" in row["source_locator"], f"{where}: locator does not name the row"


def test_dataset_breadth():
    assert len(ROWS) >= 150, len(ROWS)
    assert len({r["gpu"] for r in ROWS}) >= 5
    assert len({r["source"] for r in ROWS}) >= 8
    assert {"bf16", "fp8_w8a8"} <= {r["dtype"] for r in ROWS}
