"""How every command fails: one red line on stderr, the message printed verbatim (never wrapped), exit code 2.

`fail` is what a command calls. `OneLineErrors`, the root command group, turns what would
otherwise print a usage block or a traceback into that same line: click's usage errors (a
flag of the wrong type, a missing or unknown option), and the bad input and unwritable
outputs the layers below raise (`InputError`, `OutputError`) or the OS reports (`OSError`
with a file name). A bug still shows its traceback.

rich is imported where something is drawn (an error line, a table: `SafeConsole`, in safe_console.py, is loaded on
first use), so a command that prints JSON never loads it (issue #50: start-up).
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from typing import Any, Iterator, NoReturn

import typer
from typer.core import TyperGroup

from specagent.common.errors import InputError
from specagent.common.encodable import ensure_encodable_output
from specagent.common.guard import check_output
from specagent.common.redact import Redactor, clean

try:  # typer >= 0.2x bundles its own click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer on the click package
    from click import exceptions as click_errors  # type: ignore[no-redef]

_NO_ARGS_IS_HELP = getattr(click_errors, "NoArgsIsHelpError", ())


def __getattr__(name: str) -> Any:
    """`SafeConsole`, loaded on first use (it is a rich Console: rich stays off the path of a command that draws nothing)."""
    if name == "SafeConsole":
        from specagent.cli.safe_console import SafeConsole

        return SafeConsole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def error_line(msg: object) -> None:
    from rich.console import Console
    from rich.markup import escape

    # soft_wrap: one line however narrow the terminal (a wrapped path or id would read as two)
    ensure_encodable_output()
    # clean: no key (common/redact.py) and no control sequence from a server's text reaches the terminal
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(clean(msg))}", highlight=False)


def json_out(obj: Any, *, red: Redactor | None = None, **kw: Any) -> str:
    """The JSON a command prints, after the last check that no impossible number is in it (`common.guard`): strict (no
    NaN or Infinity, which the guard refuses anyway), and with every secret value masked (`red`: the command's endpoints'
    keys and the environment's; default the environment's), wherever in the document it sits."""
    import json

    try:  # typer >= 0.2x bundles its own click, whose context stack is the one commands run in
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer on the click package
        from click import get_current_context

    ctx = get_current_context(silent=True)
    check_output(obj, f"'{ctx.command_path}'" if ctx is not None else "this command")
    return json.dumps((red or Redactor.of()).doc(obj, values_only=True), allow_nan=False, **kw)


def fail(msg: object) -> NoReturn:
    error_line(msg)
    raise typer.Exit(code=2)


def usage_message(exc: Any) -> str:
    """A click usage error as one line: the flag, what was wrong, and where the flags are listed."""
    param = getattr(exc, "param", None)
    if isinstance(exc, click_errors.BadParameter) and not isinstance(exc, click_errors.MissingParameter) and param is not None:
        names = getattr(param, "opts", None) or [getattr(param, "human_readable_name", None) or param.name]
        msg = f"{' / '.join(names)}: {exc.message.rstrip('.')}{_given(exc)}"
    else:
        msg = exc.format_message().rstrip(".")
    ctx = getattr(exc, "ctx", None)
    return f"{msg} (see '{ctx.command_path} --help')" if ctx is not None else msg


def _given(exc: Any) -> str:
    """The value typed, when the conversion error (pydantic's, in typer >= 0.2x) does not already quote it."""
    errors = getattr(exc.__cause__, "errors", None)
    try:
        value = errors()[0].get("input") if callable(errors) else None
    except (IndexError, AttributeError, TypeError):
        value = None
    return f", got {value!r}" if isinstance(value, str) and repr(value) not in exc.message else ""


class _OneLine(click_errors.ClickException):
    """A failure already worded as one line; click's handler calls `show`, which prints just that."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        error_line(self.message)


def _one_line(exc: BaseException) -> BaseException:
    if isinstance(exc, _NO_ARGS_IS_HELP) or isinstance(exc, _OneLine):
        return exc  # the help text itself, as before
    if isinstance(exc, click_errors.UsageError):
        return _OneLine(usage_message(exc))
    if isinstance(exc, InputError):
        return _OneLine(str(exc))
    if isinstance(exc, OSError) and exc.errno != errno.EPIPE and (exc.filename is not None or exc.strerror):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return _OneLine(f"{where}{exc.strerror or exc}")
    return exc


class OneLineErrors(TyperGroup):
    """The root group: every usage error, input error and OS error of any sub-command ends as one `error:` line, exit 2.

    Parsing errors of the root surface in `make_context`, those of sub-commands (parsed when
    the root invokes them) and everything the commands raise in `invoke`.
    """

    def make_context(self, *args: Any, **kw: Any) -> Any:
        with _one_line_errors():
            return super().make_context(*args, **kw)

    def invoke(self, ctx: Any) -> Any:
        ensure_encodable_output()
        with _one_line_errors():
            return super().invoke(ctx)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Re-raise what `_one_line` turns into a one-line error as that; anything else unchanged."""
    try:
        yield
    except Exception as exc:
        new = _one_line(exc)
        if new is exc:
            raise
        raise new from exc


FORMATS = ("table", "json", "csv")


def check_format(fmt: str, as_json: bool) -> str:
    """--format table|json|csv (--json is --format json); a bad value names the flag."""
    if fmt not in FORMATS:
        fail(f"--format: expected one of {', '.join(FORMATS)}, got '{fmt}'")
    if as_json and fmt not in ("table", "json"):
        fail(f"give --json or --format {fmt}, not both")
    return "json" if as_json else fmt
