"""How every command fails: one red line on stderr, the message printed verbatim, exit code 2."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape


def fail(msg: object) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(msg))}", highlight=False)  # one line, never wrapped
    raise typer.Exit(code=2)
