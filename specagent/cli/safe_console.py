"""`SafeConsole`: the rich Console the commands draw tables with (specagent.cli.console loads it on first use)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


class SafeConsole(Console):
    """A rich Console whose tables never lose a cell: one too wide for the terminal is shown whole, not cropped.

    Why: rich crops every line of a table whose narrowest layout is wider than the console, so a
    number is cut in the middle with no mark (COLUMNS=40 showed '0.' for 0.918 and dropped columns).
    Such a table is rendered at the width it needs (the terminal wraps its lines), after a note saying so;
    a column rich narrows still marks what it cuts with an ellipsis.
    The width follows COLUMNS and the terminal at each print, not as they were when the module was imported: rich fixes
    COLUMNS at construction, and the commands' consoles are made at import."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if kw.get("width") is None:
            self._width = None  # read live (rich's size property reads COLUMNS and the terminal when this is unset)

    def print(self, *objects: Any, **kw: Any) -> None:  # type: ignore[override]
        from rich.measure import Measurement
        from rich.table import Table

        for obj in objects:
            if isinstance(obj, Table) and obj.caption and obj.caption_justify == "center":
                obj.caption_justify = "left"  # a caption here is prose (what the columns mean): centred lines read as ragged
            if isinstance(obj, Table) and "width" not in kw:
                m = Measurement.get(self, self.options.update(max_width=100_000), obj)
                # a table that can wrap needs its narrowest layout; one with unwrappable columns (figures) needs every
                # cell whole, which rich's minimum does not promise (it would cut 0.918 to 0.9…)
                need = m.maximum if any(col.no_wrap for col in obj.columns) else m.minimum
                if need > self.width:
                    super().print(f"(table {need} columns wide, terminal {self.width}: its lines wrap)", style="dim",
                                  highlight=False, soft_wrap=True)
                    old = self._width
                    self.width = need  # print() caps a width argument at the console's own
                    try:
                        super().print(obj, crop=False, **kw)
                    finally:
                        self._width = old
                    continue
            super().print(obj, **kw)
