"""The root's sub-commands, imported when first asked for.

`specagent --help` and a usage error must answer at once; importing every command module (and with
them pandas, scipy, plotly, the simulator) took seconds. The root group lists each command from its
entry here (name and one-line help) and imports its module only when the command runs, shows its
own help, or completes a word. tests/test_cli_lazy.py checks each entry's help against the command's.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Optional

import typer
import typer.main


@dataclass(frozen=True)
class LazyCommand:
    """A command (a function) or a command group (a Typer) in `module`, mounted under `name`."""

    name: str
    module: str
    attr: str
    short_help: str
    group: bool = False
    #: the function's command class, by name in specagent.cli.panels (scenario flags grouped into panels)
    panels: bool = False
    #: an attribute of `module` holding the command's help, where the function has none of its own
    help_attr: Optional[str] = None
    #: the group's help where the Typer has none of its own
    group_help: Optional[str] = None

    def load(self) -> Any:
        """The click command, built by typer exactly as mounting it on the root (plain help, no rich markup) would."""
        module = importlib.import_module(self.module)
        obj = getattr(module, self.attr)
        holder = typer.Typer(rich_markup_mode=None)
        if self.group:
            holder.add_typer(obj, name=self.name, **({"help": self.group_help} if self.group_help is not None else {}))
        else:
            kw: dict[str, Any] = {}
            if self.panels:
                from specagent.cli.panels import PanelCommand
                kw["cls"] = PanelCommand
            if self.help_attr:
                kw["help"] = getattr(module, self.help_attr)
            holder.command(self.name, **kw)(obj)
            holder.callback()(lambda: None)  # two entries make a group: the command is built as a sub-command
        return typer.main.get_group(holder).commands[self.name]


class LazyCommands(MutableMapping[str, Any]):
    """A click group's `commands` mapping whose lazy entries load on first access.

    Iterating lists names without importing (click's `list_commands`); `[name]`, `.get`, `.items()`
    load. Order is typer's: functions first, then groups, each in the order given.
    """

    def __init__(self, loaded: dict[str, Any], lazy: tuple[LazyCommand, ...]) -> None:
        self._loaded = dict(loaded)
        self._lazy = {c.name: c for c in lazy if c.name not in loaded}
        self._order = list(dict.fromkeys([*(c.name for c in lazy if not c.group), *loaded, *(c.name for c in lazy if c.group)]))

    def entry(self, name: str) -> Optional[LazyCommand]:
        """The lazy entry of a command not imported yet, else None."""
        return None if name in self._loaded else self._lazy.get(name)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = self._lazy[name].load()  # KeyError for an unknown name, as a dict
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        if name not in self:
            self._order.append(name)
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)
        self._order.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy
