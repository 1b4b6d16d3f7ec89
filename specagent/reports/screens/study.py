"""What `specagent study balance` prints: SpecAgent's Strong time and memory saving against Strong-only, per Strong GPU
and arrival rate, beside the Strong replica's mean decode batch and its balance point.

Reads a `BalanceResult` (`simulator/jobs/study.py`): every figure is a column of its table; this words them at 80
columns (short headers, spelled out in the caption; the Parquet/CSV/JSON keep the long names).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.table import Table

from specagent.reports.screens.tables import legend

if TYPE_CHECKING:
    from specagent.simulator.jobs.study import BalanceResult

#: The study's table at 80 columns: (column of the result's table, short header, what it means).
BALANCE_COLUMNS = (
    ("hardware", "Strong\nGPU", ""),
    ("rate", "rate/s", "arrival rate, tasks per second"),
    ("strongonly_decode_batch", "SO\nbatch", "Strong-only's mean Strong decode batch"),
    ("specagent_decode_batch", "SA\nbatch", "SpecAgent's mean Strong decode batch"),
    ("balance_batch", "balance\nbatch", "decode batch where the Strong replica turns compute-bound"),
    ("strong_time_saving", "time\nsaving", "SpecAgent's Strong busy time saved vs Strong-only (share)"),
    ("strong_bytes_saving", "bytes\nsaving", "Strong HBM bytes saved (share)"),
    ("strongonly_strong_utilisation", "SO\nutil.", "Strong-only's Strong replica utilisation"),
)


def cell(v, nd: int = 2) -> str:
    """A figure with `nd` decimals ("—" for none); anything else as it is."""
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:,.{nd}f}"
    return str(v)


def balance(res: BalanceResult) -> Table:
    """The balance-point table: one row per Strong GPU and rate, no identifier or figure ever cut."""
    sc = res.scenario
    t = Table(title=f"Balance-point study: SpecAgent vs Strong-only on one Strong replica (Weak: {sc.weak.model} on "
                    f"{sc.weak.hardware}, uncontended)", show_edge=False, pad_edge=False)
    cells = [[cell(r[c], 2) if isinstance(r[c], float) else str(r[c]) for c, _, _ in BALANCE_COLUMNS]
             for r in res.table.to_dict("records")]
    for i, (_, head, _) in enumerate(BALANCE_COLUMNS):  # each column at its widest cell
        t.add_column(head, justify="left" if i == 0 else "right", no_wrap=True,
                     min_width=max([len(c[i]) for c in cells] + [len(w) for w in head.split("\n")]))
    for c in cells:
        t.add_row(*c)
    t.caption = legend((head, meaning) for _, head, meaning in BALANCE_COLUMNS[1:])
    return t
