"""Read and write trajectories: JSONL (one trajectory per line) and Parquet (one row per step).

Why two formats: JSONL is readable and diffable; Parquet is columnar and fast
for the simulator. Both round-trip losslessly (tests/test_traces_io.py). Writes
are atomic (specagent.common.atomic), so a crash never leaves a half-written trace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from specagent.common.atomic import atomic_write, write_text

from .columns import FRAME_DTYPES, from_frame, to_frame
from .errors import SkippedRecord, TraceFormatError, from_validation_error, report_skipped
from .schema import Trajectory

JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")


def _fmt(path: Path) -> str:
    suf = path.suffix.lower()
    if suf in JSONL_SUFFIXES:
        return "jsonl"
    if suf in PARQUET_SUFFIXES:
        return "parquet"
    raise TraceFormatError(str(path), "file name", "suffix", f"one of {JSONL_SUFFIXES + PARQUET_SUFFIXES}", suf)


def dumps_jsonl(trajs: Iterable[Trajectory]) -> str:
    """JSONL text: one compact JSON trajectory per line (deterministic)."""
    return "".join(t.model_dump_json() + "\n" for t in trajs)


def save_trajectories(trajs: Sequence[Trajectory], path: str | os.PathLike) -> Path:
    """Write trajectories to ``path`` (.jsonl or .parquet), atomically."""
    path = Path(path)
    if _fmt(path) == "jsonl":
        return write_text(path, dumps_jsonl(trajs))
    return save_frame(to_frame(trajs), path)


def save_frame(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a step frame (``columns.to_frame`` layout) as Parquet, atomically."""
    table = pa.Table.from_pandas(df[list(FRAME_DTYPES)], preserve_index=False)
    return atomic_write(path, lambda tmp: pq.write_table(table, str(tmp), compression="zstd"))


def load_trajectories(path: str | os.PathLike, skip_bad: bool = False,
                      skipped: list[SkippedRecord] | None = None) -> list[Trajectory]:
    """Read a .jsonl or .parquet trace file.

    Bad records raise ``TraceFormatError`` (file, line or trajectory/step, field,
    expectation). With ``skip_bad`` they are left out and each one is appended to
    ``skipped`` (or, if no list is given, emitted as a warning) — never dropped
    silently.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such trace file")
    if _fmt(path) == "parquet":
        return from_frame(load_frame(path), file=str(path), skip_bad=skip_bad, skipped=skipped)
    out: list[Trajectory] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(parse_jsonl_line(line, str(path), lineno))
            except TraceFormatError as e:
                if not skip_bad:
                    raise
                report_skipped(e, skipped)
    return out


def parse_jsonl_line(line: str, file: str, lineno: int) -> Trajectory:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise TraceFormatError(file, f"line {lineno}", "<json>", f"valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(file, f"line {lineno}", "<record>", "a JSON object (one trajectory)", type(obj).__name__)
    try:
        return Trajectory.model_validate(obj)
    except ValidationError as e:
        tid = obj.get("task_id")
        where = f"line {lineno}" + (f" (task_id={tid!r})" if tid is not None else "")
        raise from_validation_error(file, where, e) from None


def load_frame(path: str | os.PathLike) -> pd.DataFrame:
    """Read a Parquet step table into the ``columns.to_frame`` dtypes."""
    path = Path(path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise TraceFormatError(str(path), "file", "<parquet>", f"a readable Parquet file ({e})") from None
    df = table.to_pandas()
    missing = [c for c in FRAME_DTYPES if c not in df.columns]
    if missing:
        raise TraceFormatError(str(path), "columns", missing[0], "a step table with the trace schema's columns")
    try:
        return pd.DataFrame({c: df[c].astype(FRAME_DTYPES[c]) for c in FRAME_DTYPES})
    except (TypeError, ValueError) as e:
        bad = next(c for c in FRAME_DTYPES if not _castable(df[c], FRAME_DTYPES[c]))
        raise TraceFormatError(str(path), "columns", bad, f"dtype {FRAME_DTYPES[bad]} ({e})") from None


def _castable(s: pd.Series, dt: str) -> bool:
    try:
        s.astype(dt)
        return True
    except (TypeError, ValueError):
        return False


def default_workload_path() -> Path:
    """The shipped reference workload: every τ²-Bench airline simulation in the shared files."""
    return Path(str(resources.files("specagent.traces").joinpath("data/tau2_airline.jsonl")))


def data_path(name: str) -> Path:
    """Path of a file shipped in traces/data/."""
    return Path(str(resources.files("specagent.traces").joinpath("data", name)))
