"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pandas as pd


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)` on a temp file beside `path`, then rename it over `path`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda t: t.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_parquet(path: str | Path, frame: pd.DataFrame) -> Path:
    return atomic_write(path, lambda t: frame.to_parquet(t, index=False))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
