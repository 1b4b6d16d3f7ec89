"""What `specagent simulate` prints: one strategy's totals over the trajectories, with the setting in the title.

Reads a `SimulateResult` (`simulator/jobs/simulate.py`); prints nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from specagent.simulator.jobs.simulate import SimulateResult


def totals_table(result: SimulateResult) -> Table:
    """Each total as a number a person reads: four significant figures from a million, whole where it is whole."""
    sc = result.request.scenario
    t = Table(title=f"{result.label} — {result.n_traj:,} trajectories from {result.name} [{sc.weight_mode}, {sc.pricing_engine}]")
    t.add_column("total")
    t.add_column("value", justify="right")
    for c, v in result.totals.items():
        t.add_row(c, f"{v:,.4g}" if abs(v) >= 1e6 else f"{v:,.0f}" if v.is_integer() else f"{v:,.2f}")
    return t
