"""One check for every input-file argument: a regular file, or a one-line reason why not.

Why: opening a FIFO blocks forever, a device streams without end, a directory or a
symlink loop gives an OS message that names the wrong cause ("no such file"). Every
reader calls `check_input_file` before it opens anything, so no command can hang on
or misreport a path, and the message is the same wherever the path was given.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def input_file_problem(path: str | os.PathLike) -> str | None:
    """Why `path` is not a readable regular file (a short phrase), or None when it is one."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop (the link points, through other links, back at itself)"
        if exc.errno == errno.ENOENT:
            if os.path.islink(p):
                return f"a dangling symlink (to '{os.readlink(p)}', which does not exist)"
            return "no such file"
        if exc.errno == errno.ENOTDIR:
            return "no such file (a part of the path is a file, not a folder)"
        if exc.errno == errno.ENAMETOOLONG:
            return "a name too long for the file system"
        return f"not readable ({exc.strerror})"
    except ValueError:  # an embedded NUL byte
        return "not a valid path (it holds a NUL byte)"
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe): reading it would wait for a writer forever"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file"
    return "a special file"


def check_input_file(path: str | os.PathLike, error: type[Exception], what: str, missing: str | None = None) -> Path:
    """`path` as a Path when it names a regular file; else `error("PATH: cannot read WHAT: it is REASON")`.

    ``error`` takes one message argument (every layer's InputError subclass does); ``missing``, when
    given, is the whole message for a path that does not exist (a caller's own wording, e.g. listing
    the shipped names)."""
    problem = input_file_problem(path)
    if problem == "no such file" and missing is not None:
        raise error(missing)
    if problem is not None:
        raise error(f"{path}: cannot read {what}: {'it is ' if problem.startswith('a') else ''}{problem}")
    return Path(path)


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (through links, `..` and case-folding file systems), existing or not."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


#: How a command recognises a file it wrote itself in an earlier run (so a rerun may replace it): a test on the
#: first bytes of the file, and what those bytes are, for the message.
@dataclass(frozen=True)
class Kind:
    """What an output option writes, and how to tell an earlier output of that option from anything else."""

    what: str  # "Parquet", "a serving-engine profile TOML written by `specagent latency fit`", ...
    mine: Callable[[bytes], bool]  # given the file's first HEAD_BYTES bytes


HEAD_BYTES = 4096


def starts_with(*prefixes: bytes, what: str) -> Kind:
    """A kind recognised by its first bytes (after a UTF-8 byte-order mark and leading white space)."""
    low = tuple(p.lower() for p in prefixes)
    return Kind(what, lambda head: head.removeprefix(b"\xef\xbb\xbf").lstrip().lower().startswith(low))


PARQUET = Kind("Apache Parquet", lambda head: head[:4] == b"PAR1")
HTML = starts_with(b"<!doctype html", b"<html", what="an HTML page")
JSON_DOC = starts_with(b"{", what="a JSON document")


def _head(p: Path) -> bytes | None:
    """The first bytes of a regular, non-empty file; None for anything else (nothing there, a device, an empty file)."""
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        with open(p, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return None


Outputs = "Mapping[str, str | os.PathLike | None] | Iterable[tuple]"


def _pairs(items: Any) -> list[tuple]:
    return list(items.items()) if isinstance(items, Mapping) else [tuple(x) for x in items]


def check_outputs(outputs: Outputs, inputs: "Mapping[str, Any] | Iterable[tuple]", error: type[Exception], *,
                  kinds: Mapping[str, Kind] | None = None) -> None:
    """The one output guard, called once at a command's boundary before any work: refuse (``error(message)``, one line)

    * an output that is one of the inputs (through links, ``..`` and case-folding file systems): writing it would
      replace what was read (`replay t.csv -o t.csv` replaced the trace with Parquet);
    * two outputs that name one file: the second would replace the first (`bench serve --csv m.csv --requests-out
      m.csv` turned the earlier serving-latency rows into JSONL);
    * an output that exists, is not empty, and is not what that option writes (its `Kind`, recognised by its first
      bytes): a file this command did not create, which a rerun would silently replace. An earlier output of the same
      option (a rerun) is replaced as before; devices (/dev/null) and empty files are written as ever.

    ``outputs``: each output flag as the user typed it (``-o``, ``--requests-out``) with its path (None: not given),
    as a mapping or as (flag, path) or (flag, path, kind) tuples (a folder output is given as the files the command
    writes in it, each with its own kind). ``inputs``: each input flag or argument name (``TRACE``, ``--dataset``) with
    a path or a list of paths (None: not given). ``kinds``: the kind of each output flag given as a mapping."""
    given_in = [(flag, Path(p)) for flag, v in _pairs(inputs) if v is not None
                for p in ([v] if isinstance(v, (str, os.PathLike)) else v) if p is not None and str(p)]
    seen: list[tuple[str, Path]] = []
    for item in _pairs(outputs):
        flag, v = item[0], item[1]
        if v is None:
            continue
        kind = item[2] if len(item) > 2 else (kinds or {}).get(flag)
        out = Path(v)
        for in_flag, p in given_in:
            if same_file(out, p):
                raise error(f"{flag} {out}: it is one of the inputs ({in_flag} {p}); writing it would replace what was "
                            "read. Name another file")
        for other, q in seen:
            if same_file(out, q):
                raise error(f"{flag} {out}: it is also {other} {q}: two outputs cannot share one file (the second would "
                            "replace the first). Name another file")
        seen.append((flag, out))
        head = _head(out) if kind is not None else None
        if kind is not None and head is not None and not kind.mine(head):
            raise error(f"{flag} {out}: the file exists and is not {kind.what} (what {flag} writes), so this command did not "
                        "write it; it would be replaced. Name another file, or remove it first if it is meant to go")


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks (a trace may be larger than memory should hold at once).

    Why one home: the measurements' provenance, a plan's workload fingerprint and a sweep's cell ids all hash the files
    they read; one function keeps their digests the same for the same bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
