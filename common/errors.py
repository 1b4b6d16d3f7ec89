"""The error types for bad input and unwritable outputs, shared by every layer.

An `InputError` is a mistake of the user's (a file, field, flag or value), not a bug: its
message names where it is and what was expected, and the command line prints it as one
line instead of a traceback. `where` names the offending field as a dotted path
(e.g. ``strong.gpus``) so a caller can translate it into its own terms (a flag, a TOML key).
An `OutputError` is an output that could not be written (read-only folder, a parent that
is a file, a full disk): the user's environment, not a bug, so it is reported the same way.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad input; `where` is the dotted field path it concerns ('' when not one field)."""

    def __init__(self, message: str, where: str = ""):
        super().__init__(message)
        self.where = where


class DeprecatedSpelling(FutureWarning):
    """An old name for a flag or a scenario key, still read (for one release) as its new name; the message says which."""


class OutputError(InputError):
    """An output path that cannot be written; the message names the path and the OS's reason."""

    def __init__(self, message: str, path: str = ""):
        super().__init__(message)
        self.path = path


def read_text(path: str | Path, error: type[ValueError], what: str) -> str:
    """A UTF-8 input file's text (a leading BOM dropped, as editors on Windows write one); unreadable,
    special or non-UTF-8 files raise `error` naming the file and the reason."""
    from specagent.common.paths import check_input_file  # a FIFO or device would block the read below

    p = check_input_file(path, error, what)
    try:
        return p.read_text(encoding="utf-8").removeprefix("\ufeff")
    except OSError as exc:
        raise error(f"{p}: cannot read {what} ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{p}: cannot read {what} (not UTF-8 text: byte {exc.start})") from None
