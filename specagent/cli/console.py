"""How every command fails: one red line on stderr, the message printed verbatim (never wrapped), exit code 2."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape


def fail(msg: object) -> NoReturn:
    # soft_wrap: one line however narrow the terminal (a wrapped path or id would read as two)
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(msg))}", highlight=False)
    raise typer.Exit(code=2)
