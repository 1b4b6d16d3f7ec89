"""Atomic file writes: a reader sees the old file or the new one, never half of one.

The one writer every output goes through. The temp file is created the way any tool
creates a file (mode 0666 less the umask), not 0600 as `tempfile.mkstemp` would, so an
output is as readable as the user's other files.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable

import pandas as pd


def temp_beside(p: Path, suffix: str = ".tmp") -> Path:
    """A new empty file beside `p` (same folder, hidden name), created with O_EXCL and mode 0666 less the umask.

    For writers that must rename several files at once; everything else calls `atomic_write`.
    """
    while True:
        tmp = p.with_name(f".{p.name}.{secrets.token_hex(6)}{suffix}")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return tmp
        except FileExistsError:
            continue


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)` on a temp file beside `path`, then rename it over `path`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(p)
    try:
        write(tmp)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 text with the newlines as given (no platform translation)."""
    def write(t: Path) -> None:
        with open(t, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    return atomic_write(path, write)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> Path:
    return atomic_write(path, lambda t: frame.to_parquet(t, index=False))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
