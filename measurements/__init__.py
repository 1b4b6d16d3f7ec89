"""Public serving-latency and collective measurements, shipped as CSV and validated at the boundary.

`serving_latency.csv` holds published whole-model measurements (TPOT/ITL, TTFT, end-to-end
latency, throughput by concurrency or batch, with engine, GPUs, parallelism and dtypes);
`collectives.csv` holds published collective latencies by message size. Every row names
its source (see README.md in this folder). This module only reads and checks them: it
sits at the bottom layer beside the hardware profiles and knows nothing of the cost
model (`costmodel.latency_fit` maps rows onto passes and fits the engine terms).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from specagent.common.errors import read_text
from specagent.common.paths import file_sha256 as file_sha256  # re-exported: the measurements' provenance names it

SERVING_COLUMNS = (
    "row_id", "model", "gpu", "gpus", "tp", "ep", "dp", "engine", "engine_version", "weight_dtype", "kv_dtype", "cuda_graphs",
    "concurrency", "batch", "input_tokens", "output_tokens", "tpot_ms", "itl_ms", "ttft_ms", "e2e_latency_ms",
    "output_throughput_tok_s", "total_throughput_tok_s", "request_rate", "statistic", "source_kind", "source", "source_url",
    "source_locator", "retrieved", "notes",
)
COLLECTIVE_COLUMNS = (
    "row_id", "op", "gpu", "gpus", "interconnect", "implementation", "cuda_graph", "message_bytes", "latency_us", "statistic",
    "source_kind", "source", "source_url", "source_locator", "retrieved", "notes",
)
#: Columns every row must fill: what was measured where, and where it was published.
_REQUIRED = ("row_id", "model", "gpu", "gpus", "engine", "source", "source_url", "source_locator")
_INTS = ("gpus", "tp", "ep", "dp")
_FLOATS = ("concurrency", "batch", "input_tokens", "output_tokens", "tpot_ms", "itl_ms", "ttft_ms", "e2e_latency_ms",
           "output_throughput_tok_s", "total_throughput_tok_s", "request_rate")
LATENCY_FIGURES = ("tpot_ms", "itl_ms", "ttft_ms", "e2e_latency_ms", "output_throughput_tok_s", "total_throughput_tok_s")
#: Typo guards on a row's figures (a row past one is refused naming its line; the fit never reads it): a latency of more
#: than one week (as traces' longest recorded wait) is a unit or clock error, and a throughput past 10^8 tokens/s,
#: about 4,000 times the largest figure in the shipped rows (25,447 tok/s), is a slip, not a server (bench serve once
#: wrote 2.4e9 tok/s from a usage count no server gives). Token counts share the traces' bound (Llama 4 Scout's
#: 10,485,760-token window, `traces.vocabulary.MAX_CONTEXT_TOKENS`; this module sits below traces, so it is repeated).
MAX_LATENCY_MS = 604_800_000.0
MAX_THROUGHPUT_TOK_S = 1e8
MAX_ROW_TOKENS = 10_485_760
_FIGURE_BOUNDS = {**{c: (MAX_LATENCY_MS, "ms (one week)") for c in ("tpot_ms", "itl_ms", "ttft_ms", "e2e_latency_ms")},
                  **{c: (MAX_THROUGHPUT_TOK_S, "tokens/s") for c in ("output_throughput_tok_s", "total_throughput_tok_s")},
                  **{c: (float(MAX_ROW_TOKENS), "tokens (the largest public context window)") for c in ("input_tokens", "output_tokens")},
                  # sequences in flight and requests per second: 2^20, the most sequences replay lets an iteration hold
                  **{c: (float(1 << 20), "(requests in flight or per second)") for c in ("concurrency", "batch", "request_rate")}}


class MeasurementError(ValueError):
    """A measurements file is missing, malformed, or has a row without its source."""


@dataclass(frozen=True)
class ServingRow:
    """One published measurement of a served model (numbers parsed; None where the source gives none)."""

    row_id: str
    model: str
    gpu: str
    gpus: int
    tp: int | None
    ep: int | None
    dp: int | None
    engine: str
    engine_version: str
    weight_dtype: str
    kv_dtype: str
    cuda_graphs: bool | None
    concurrency: float | None
    batch: float | None
    input_tokens: float | None
    output_tokens: float | None
    tpot_ms: float | None
    itl_ms: float | None
    ttft_ms: float | None
    e2e_latency_ms: float | None
    output_throughput_tok_s: float | None
    total_throughput_tok_s: float | None
    request_rate: float | None
    statistic: str
    source_kind: str
    source: str
    source_url: str
    source_locator: str
    retrieved: str
    notes: str
    line: int = 0  # line in the CSV file (header = 1)


@dataclass(frozen=True)
class CollectiveRow:
    row_id: str
    op: str
    gpu: str
    gpus: int
    interconnect: str
    implementation: str
    cuda_graph: bool | None
    message_bytes: float
    latency_us: float
    statistic: str
    source_kind: str
    source: str
    source_url: str
    source_locator: str
    retrieved: str
    notes: str
    line: int = 0


def default_path(name: str) -> Path:
    """A shipped measurements file (`serving_latency.csv` or `collectives.csv`)."""
    return Path(str(resources.files("specagent.measurements") / name))


def _bool(text: str, where: str) -> bool | None:
    t = text.strip().lower()
    if t == "":
        return None
    if t in ("true", "yes", "1"):
        return True
    if t in ("false", "no", "0"):
        return False
    raise MeasurementError(f"{where}: expected true/false or empty, got {text!r}")


def _number(text: str, where: str, integer: bool = False) -> Any:
    t = text.strip()
    if t == "":
        return None
    try:
        v = float(t)
    except ValueError:
        raise MeasurementError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise MeasurementError(f"{where}: expected a finite number >= 0, got {text!r}")
    if integer:
        if v != int(v):
            raise MeasurementError(f"{where}: expected an integer, got {text!r}")
        return int(v)
    return v


def read_rows(path: Path, columns: tuple[str, ...], required: tuple[str, ...]) -> list[tuple[int, str, dict[str, str]]]:
    """(line, "file: line N", raw row) of every data row: columns present, required fields filled, row ids unique."""
    text = read_text(path, MeasurementError, "measurements")
    reader = csv.DictReader(text.splitlines())
    header = tuple(reader.fieldnames or ())
    missing = [c for c in columns if c not in header]
    if missing:
        raise MeasurementError(f"{path}: line 1: missing columns {missing} (expected {', '.join(columns)})")
    rows = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(reader, start=2):
        where = f"{path}: line {i}"
        if None in raw:
            raise MeasurementError(f"{where}: more fields than the header has")
        raw = {k: (v or "") for k, v in raw.items()}
        for c in required:
            if not raw[c].strip():
                raise MeasurementError(f"{where}: field '{c}' is empty (every row needs what was measured and its source)")
        rid = raw["row_id"].strip()
        if rid in seen:
            raise MeasurementError(f"{where}: row_id '{rid}' repeats line {seen[rid]}")
        seen[rid] = i
        rows.append((i, where, raw))
    return rows


def load_serving(path: str | Path | None = None) -> list[ServingRow]:
    """Rows of `serving_latency.csv`, validated: sources present, numbers numeric, ids unique, a latency figure given."""
    p = Path(path) if path else default_path("serving_latency.csv")
    out: list[ServingRow] = []
    for line, where, raw in read_rows(p, SERVING_COLUMNS, _REQUIRED):
        vals: dict[str, Any] = {}
        for f in fields(ServingRow):
            if f.name == "line":
                continue
            text = raw.get(f.name, "")
            if f.name in _INTS:
                vals[f.name] = _number(text, f"{where}: field '{f.name}'", integer=True)
            elif f.name in _FLOATS:
                vals[f.name] = _number(text, f"{where}: field '{f.name}'")
            elif f.name == "cuda_graphs":
                vals[f.name] = _bool(text, f"{where}: field 'cuda_graphs'")
            else:
                vals[f.name] = text.strip()
        if vals["gpus"] is None or vals["gpus"] < 1:
            raise MeasurementError(f"{where}: field 'gpus' must be an integer >= 1")
        _check_row(vals, where)
        if all(vals[c] is None for c in LATENCY_FIGURES):
            raise MeasurementError(f"{where}: no latency or throughput figure (one of {', '.join(LATENCY_FIGURES)})")
        out.append(ServingRow(**vals, line=line))
    return out


def _check_row(vals: dict[str, Any], where: str) -> None:
    """A row's figures against each other and their typo guards: what no server produced is refused, naming the line
    (`latency fit` fitted a TPOT of 1e300 ms and rows of TP 8 on one GPU, as bench serve wrote them)."""
    for c in ("tp", "ep"):
        if vals[c] is not None and vals[c] > vals["gpus"]:
            raise MeasurementError(f"{where}: field '{c}' is {vals[c]}, more than the {vals['gpus']} GPU(s) of one replica "
                                   f"(field 'gpus'): {c.upper()} splits a replica over its own GPUs")
        if vals[c] is not None and vals[c] < 1:
            raise MeasurementError(f"{where}: field '{c}' must be an integer >= 1 (or empty)")
    for c, (hi, unit) in _FIGURE_BOUNDS.items():
        v = vals[c]
        if v is not None and c in LATENCY_FIGURES and v <= 0:  # a length of 0 is the fit's to skip, with its reason
            raise MeasurementError(f"{where}: field '{c}' is 0: a latency or throughput that was measured is > 0 "
                                   "(leave the field empty where the source gives none)")
        if v is not None and v > hi:
            raise MeasurementError(f"{where}: field '{c}' is {v:g}, past {hi:,.0f} {unit}: a unit or typing error, not a "
                                   "measurement")
    if vals["ttft_ms"] is not None and vals["e2e_latency_ms"] is not None and vals["ttft_ms"] > vals["e2e_latency_ms"]:
        raise MeasurementError(f"{where}: field 'ttft_ms' ({vals['ttft_ms']:g}) is more than 'e2e_latency_ms' "
                               f"({vals['e2e_latency_ms']:g}): a request's first token cannot come after its last (for a "
                               "mean, a median or any percentile alike)")


def load_collectives(path: str | Path | None = None) -> list[CollectiveRow]:
    """Rows of `collectives.csv`, validated like `load_serving`."""
    p = Path(path) if path else default_path("collectives.csv")
    out: list[CollectiveRow] = []
    required = ("row_id", "op", "gpu", "gpus", "implementation", "message_bytes", "latency_us", "source", "source_url")
    for line, where, raw in read_rows(p, COLLECTIVE_COLUMNS, required):
        out.append(CollectiveRow(
            row_id=raw["row_id"].strip(), op=raw["op"].strip(), gpu=raw["gpu"].strip(), gpus=_number(raw["gpus"], f"{where}: field 'gpus'", True),
            interconnect=raw["interconnect"].strip(), implementation=raw["implementation"].strip(),
            cuda_graph=_bool(raw["cuda_graph"], f"{where}: field 'cuda_graph'"),
            message_bytes=_number(raw["message_bytes"], f"{where}: field 'message_bytes'"),
            latency_us=_number(raw["latency_us"], f"{where}: field 'latency_us'"), statistic=raw["statistic"].strip(),
            source_kind=raw["source_kind"].strip(), source=raw["source"].strip(), source_url=raw["source_url"].strip(),
            source_locator=raw["source_locator"].strip(), retrieved=raw["retrieved"].strip(), notes=raw["notes"].strip(),
            line=line,
        ))
    return out


MOE_KERNEL_COLUMNS = (
    "row_id", "gpu", "num_experts", "shard_intermediate", "hidden", "top_k", "tp", "ep", "dtype", "tokens", "kernel_us", "config",
    "engine", "triton_version", "model", "statistic", "source_kind", "source", "source_url", "source_locator", "retrieved", "notes",
)


@dataclass(frozen=True)
class MoeKernelRow:
    """One published time of one fused-MoE layer call (both grouped GEMMs) at `tokens` tokens on one GPU."""

    row_id: str
    gpu: str
    num_experts: int  # experts in this GPU's call
    shard_intermediate: int  # N of the engine's config name: the per-GPU expert intermediate size
    hidden: int | None  # K; None where the publication does not state it
    top_k: int | None  # None where not stated
    dtype: str  # bf16, fp16, fp8_w8a8, fp8_w8a8_block128, ...
    tokens: int
    kernel_us: float
    config: str  # default | tuned | shipped | main | pr-default (measurements/README.md)
    engine: str
    model: str
    source: str
    source_url: str
    source_locator: str
    notes: str
    line: int = 0


def load_moe_kernels(path: str | Path | None = None) -> list[MoeKernelRow]:
    """Rows of `moe_kernels.csv` (published per-operator fused-MoE times), validated like `load_serving`."""
    p = Path(path) if path else default_path("moe_kernels.csv")
    out: list[MoeKernelRow] = []
    required = ("row_id", "gpu", "num_experts", "shard_intermediate", "dtype", "tokens", "kernel_us", "source",
                "source_url", "source_locator")
    for line, where, raw in read_rows(p, MOE_KERNEL_COLUMNS, required):
        ints = {c: _number(raw[c], f"{where}: field '{c}'", True) for c in ("num_experts", "shard_intermediate", "hidden", "top_k", "tokens")}
        for c, v in ints.items():
            if v is not None and v < 1:
                raise MeasurementError(f"{where}: field '{c}' must be an integer >= 1, got {v}")
        if ints["top_k"] is not None and ints["top_k"] > ints["num_experts"]:
            raise MeasurementError(f"{where}: field 'top_k' ({ints['top_k']}) exceeds 'num_experts' ({ints['num_experts']})")
        us = _number(raw["kernel_us"], f"{where}: field 'kernel_us'")
        if not us:
            raise MeasurementError(f"{where}: field 'kernel_us' must be > 0")
        out.append(MoeKernelRow(
            row_id=raw["row_id"].strip(), gpu=raw["gpu"].strip(), **ints, dtype=raw["dtype"].strip(), kernel_us=us,
            config=raw["config"].strip(), engine=raw["engine"].strip(), model=raw["model"].strip(), source=raw["source"].strip(),
            source_url=raw["source_url"].strip(), source_locator=raw["source_locator"].strip(), notes=raw["notes"].strip(), line=line,
        ))
    return out
