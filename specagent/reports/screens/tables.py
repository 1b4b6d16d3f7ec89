"""Tables that fit the terminal with every cell whole: narrower layouts, then a vertical form, below the width they need.

Why: at 80 columns the tables of `hardware list` (112 wide), `models list` (81) and the plan's capacity curve (93)
wrapped mid-number, one cell over two lines (issue #51). A table here is its columns (`Col`: the header, its
justification, whether it may be left out) and its rows as strings; `fitted` gives the widest layout that fits the
console:

1. every column at its widest cell, nothing wrapped or cut;
2. too wide: the optional columns leave, the last first, and the caption names them and where they still are;
3. still too wide: a vertical form, one block per row (its first cell, then each other cell as `header: value`).

The same rows print in every layout, so a test can render a command at 80 columns and hold every line to it. Every
screen's tables (and the command line's own) are built here; rich is imported by this module only, which a command
loads when it draws a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def legend(pairs) -> str:
    """A table caption spelling out short column headers: "head = meaning; ..." (a header's line breaks as spaces)."""
    return "; ".join(f"{head.replace(chr(10), ' ')} = {meaning}" for head, meaning in pairs)


@dataclass(frozen=True)
class Col:
    """One column: its header (a line break splits it over two header lines), its justification, and whether it may be
    left out where the table would not fit (`optional`)."""

    head: str
    justify: str = "right"
    optional: bool = False


def table_of(cols: Sequence[Col], rows: Sequence[Sequence[str]], *, title: str = "", caption: str = "") -> Table:
    """The table with every column at its widest cell (header words included): nothing in it wraps or is cut."""
    # every string as Text: plain, never rich markup (a cell or title "[union weight reads]" or a header
    # "predicted [interval]" was read as a markup tag and vanished)
    t = Table(title=Text(title, style="table.title") if title else None,
              caption=Text(caption, style="table.caption") if caption else None, box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, padding=(0, 0, 0, 1), title_justify="left", caption_justify="left")
    for i, c in enumerate(cols):
        widest = max([len(r[i]) for r in rows] + [len(line) for line in c.head.split("\n")])
        t.add_column(Text(c.head), justify=c.justify, no_wrap=True, min_width=widest)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*(Text(v) for v in r))
    return t


def width_of(console: Console, table: Table) -> int:
    """Columns the table needs with every cell whole (its title and caption wrap to the table's width: not counted)."""
    return Measurement.get(console, console.options.update(max_width=100_000), table).maximum


def vertical(cols: Sequence[Col], rows: Sequence[Sequence[str]], *, title: str = "", caption: str = "") -> Group:
    """One block per row: its first cell, then each other non-empty cell as `header: value` (or the value alone, under
    an empty header), indented."""
    lines: list[RenderableType] = [Text(title, style="table.title")] if title else []
    for r in rows:
        lines.append(Text(r[0], style="bold"))
        lines += [Text(f"  {c.head.replace(chr(10), ' ')}: {v}" if c.head else f"  {v}") for c, v in zip(cols[1:], r[1:]) if v]
    if caption:
        lines.append(Text(caption, style="table.caption"))
    return Group(*lines)


def fitted(console: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]], *, title: str = "", caption: str = "",
           left_out: str = "--json has them") -> RenderableType:
    """The widest layout of the table that fits `console` (module docstring); `left_out` says where the columns a
    narrower layout leaves out can still be read."""
    rows = [[str(v) for v in r] for r in rows]
    cols, shown = list(cols), list(range(len(cols)))
    while True:
        t = table_of([cols[i] for i in shown], [[r[i] for i in shown] for r in rows], title=title,
                     caption=_caption(caption, [cols[i] for i in range(len(cols)) if i not in shown], left_out))
        if width_of(console, t) <= console.width:
            return t
        optional = [i for i in shown if cols[i].optional]
        if not optional:
            return vertical(cols, rows, title=title, caption=caption)
        shown.remove(optional[-1])


def _caption(caption: str, dropped: Sequence[Col], left_out: str) -> str:
    if not dropped:
        return caption
    names = ", ".join(c.head.replace("\n", " ") for c in dropped)
    note = f"left out at this width: {names} (a wider terminal shows {'it' if len(dropped) == 1 else 'them'}; {left_out})"
    return f"{caption}; {note}" if caption else note
