"""One check for every input-file argument: a regular file, or a one-line reason why not.

Why: opening a FIFO blocks forever, a device streams without end, a directory or a
symlink loop gives an OS message that names the wrong cause ("no such file"). Every
reader calls `check_input_file` before it opens anything, so no command can hang on
or misreport a path, and the message is the same wherever the path was given.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path


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


def check_not_an_input(output: str | os.PathLike | None, inputs: Iterable[str | os.PathLike], flag: str,
                       error: type[Exception]) -> None:
    """Refuse an output path that is one of the inputs: writing it would replace the evidence it was computed from
    (`acceptance fit -o LOG LOG` replaced a measured verdict log with the fitted table)."""
    if output is None:
        return
    for p in inputs:
        if same_file(output, p):
            raise error(f"{flag} {output}: it is one of the inputs ({p}); writing it would replace what was read. "
                        f"Name another file")
