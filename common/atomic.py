"""Atomic file writes: a reader sees the old file or the new one, never half of one.

The one writer every output goes through. The temp file is created the way any tool
creates a file (mode 0666 less the umask), not 0600 as `tempfile.mkstemp` would, so an
output is as readable as the user's other files. A write that fails for the machine's
reasons (read-only folder, a parent that is a file, a full disk) raises `OutputError`
naming the path and the OS's reason, and leaves nothing behind: no temp file, no folder it
created, and for `write_together` none of the files of the set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Callable, Mapping


from specagent.common.errors import OutputError

from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


Writer = Callable[[Path], None]


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


def _fill(tmp: Path, write: Writer) -> None:
    """Run one writer on its temp file: where a full disk shows up (tests make this raise ENOSPC)."""
    write(tmp)


def output_error(path: Path, exc: OSError) -> OutputError:
    """`exc` (from writing `path` or making its folder) as one line naming the path and the OS's reason."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in (errno.EEXIST, errno.ENOTDIR, errno.ENOENT, errno.ELOOP):  # a parent on the way is a file or a bad link
        for parent in (path, *path.parents):
            if parent.is_symlink() and not parent.exists():  # a dangling link or a loop: exists() follows it and fails
                try:
                    os.stat(parent)
                    continue
                except OSError as e:
                    what = "a symlink loop" if e.errno == errno.ELOOP else f"a dangling symlink (to '{os.readlink(parent)}', which does not exist)"
                reason = f"{parent} is {what}"
                break
            if parent.is_file() and parent != path:
                reason = f"{parent} is a file, not a folder"
                break
    return OutputError(f"cannot write {path}: {reason}", str(path))


def make_parents(path: Path) -> list[Path]:
    """Create `path`'s missing parent folders; returns those it created (deepest first), to remove on failure."""
    missing = []
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            break
        missing.append(parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    return missing


def remove_folders(folders: list[Path]) -> None:
    """Remove folders this write created, deepest first, if still empty."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


def is_special(p: Path) -> bool:
    """A device, FIFO or socket (/dev/null, /dev/stdout, a named pipe): written straight through, never replaced."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _target(p: Path) -> Path:
    """The file to replace: a symlink's target (the link keeps pointing at the new file), else the path itself."""
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def refuse_dash(path: str | os.PathLike) -> None:
    """`-` (or a path under it) is refused, not written as a file or folder named `-`.

    Why: `-o -` reads as "standard output" in most tools; silently creating `./-` (as `predict -o -` did)
    leaves the user looking at stdout for a result that went to a hidden-looking folder. No writer here
    streams its files (Parquet, several files per folder), so the answer is a clear refusal."""
    p = Path(path)
    if p.parts[:1] == ("-",):
        raise OutputError(f"cannot write {p}: '-' is not standard output here, and a file or folder named '-' is refused "
                          "as a likely mistake; give a path (to print results, use the command's --json or --format json "
                          "where it has one)", str(p))


def write_together(writes: Mapping[str | os.PathLike, Writer]) -> list[Path]:
    """Write several files that belong together: each to a temp file first, then all renamed.

    A failure before the renames leaves none of them changed (and no temp file, no folder this
    call created); an OS error becomes `OutputError`. A path naming a device or a pipe
    (/dev/null, /dev/stdout) is written into directly: replacing it would replace the device.
    """
    items = [(Path(p), w) for p, w in writes.items()]
    for p, _ in items:
        refuse_dash(p)
    created: list[Path] = []
    temps: list[tuple[Path, Path]] = []  # (temp, the file it replaces)
    current = items[0][0] if items else Path()
    try:
        for p, write in items:
            current = p
            if is_special(p):
                _fill(p, write)
                continue
            target = _target(p)
            created += make_parents(target)
            temps.append((temp_beside(target), target))
            _fill(temps[-1][0], write)
        for tmp, target in temps:
            current = target
            os.replace(tmp, target)
    except BaseException as exc:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        remove_folders(created)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise output_error(current, exc) from exc
        raise
    return [p for p, _ in items]


def atomic_write(path: str | os.PathLike, write: Writer) -> Path:
    """Call `write(tmp_path)` on a temp file beside `path`, then rename it over `path`."""
    return write_together({path: write})[0]


def check_writable(path: str | os.PathLike) -> None:
    """Fail now, with `OutputError`, if `path` could not be written later (before a long run, not after it).

    Creates and removes a temp file beside `path`; leaves no folder behind.
    """
    p = Path(path)
    refuse_dash(p)
    if p.is_dir():
        raise OutputError(f"cannot write {p}: it is a folder (expected a file name)", str(p))
    if is_special(p):
        if not os.access(p, os.W_OK):
            raise OutputError(f"cannot write {p}: Permission denied", str(p))
        return
    p = _target(p)
    created: list[Path] = []
    try:
        created = make_parents(p)
        temp_beside(p).unlink()
    except OSError as exc:
        raise output_error(p, exc) from exc
    finally:
        remove_folders(created)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 text with the newlines as given (no platform translation)."""
    return atomic_write(path, text_writer(text))


def text_writer(text: str) -> Writer:
    def write(t: Path) -> None:
        with open(t, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    return write


def json_text(obj: Any, what: str = "a JSON output") -> str:
    """The JSON a results file holds; an impossible number in it is a defect (`common.guard`), not a file."""
    from specagent.common.guard import check_output

    return json.dumps(check_output(obj, what), indent=2, sort_keys=True, default=_json_default) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json_text(obj))


def parquet_writer(frame: pd.DataFrame) -> Writer:
    return lambda t: frame.to_parquet(t, index=False)


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> Path:
    return atomic_write(path, parquet_writer(frame))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
