"""The simulate job: one strategy on the scenario's workload with every parameter as a flag; per-model totals.

A trace is simulated whole (its per-trajectory rows kept); a synthetic workload of up to 10⁶ trajectories block by
block (`simulator/synthetic.py`), its rows streamed to a Parquet file when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specagent.common import atomic
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, counted, read_workload, report
from specagent.simulator.run import simulate
from specagent.simulator.scenario import ScenarioError
from specagent.simulator.strategies.catalog import STRATEGY_NAMES
from specagent.simulator.synthetic import simulate_synthetic, totals_of

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class SimulateRequest(Request):
    """The scenario, and the one strategy to run on it."""

    strategy: str = field(default="specagent", metadata={"argument": True, "help": "Strategy: " + ", ".join(STRATEGY_NAMES)})

    def check(self) -> None:
        try:
            self.scenario.replace(strategies=(self.strategy,))
        except ScenarioError as exc:
            raise JobError(str(exc), "strategy") from None


@dataclass
class SimulateResult(Result):
    """The strategy's label, how many trajectories ran, their totals, and (a trace) the per-trajectory rows."""

    request: SimulateRequest
    label: str
    n_traj: int
    totals: dict[str, float]
    trace: str
    name: str
    setting: Any
    frame: pd.DataFrame | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.request.strategy, "trace": self.trace, "setting": self.setting.describe(), "totals": self.totals,
                "scenario": self.request.scenario.replace(strategies=(self.request.strategy,)).to_dict()}

    def write(self, folder: str | Path) -> list[Path]:
        if self.frame is None:
            return []
        return [atomic.write_parquet(Path(folder) / "per_trajectory.parquet", self.frame)]


def run(request: SimulateRequest, progress: Progress | None = None, workload: Any = None, out: Path | None = None) -> SimulateResult:
    """Simulate (a trace read first, its bytes told to `progress`; `workload`: the trace's (trajectories, path, name)
    already loaded; `out`: a synthetic run's rows streamed to this Parquet file as its blocks finish)."""
    request.check()
    sc = request.scenario.replace(strategies=(request.strategy,))
    w = sc.workload
    loaded = None if w.synthetic is not None else workload if workload is not None else read_workload(sc, progress)
    setting = sc.setting()
    try:
        if w.synthetic is not None:
            prof = sc.synthetic_profile()
            name = sc.synthetic_name(prof)
            advance = counted(progress, f"simulating {w.trajectories:,} synthetic trajectories", w.trajectories)
            res = simulate_synthetic(prof, w.trajectories, sc.seed, request.strategy, setting, sc.acceptance, sc.pricing_engine,
                                     sc.k, sc.review, out=out, progress=advance, environment=sc.environment)
            return SimulateResult(request, res.label, res.n_traj, res.totals, name, name, setting)
        trajs, path, name = loaded
        report(progress, f"simulating {request.strategy}")
        frame = simulate(trajs, request.strategy, setting, sc.acceptance, sc.seed, sc.pricing_engine, sc.k, sc.review)
    except ValueError as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise JobError(str(exc)) from None
    return SimulateResult(request, frame["label"].iloc[0], len(frame), totals_of(frame), str(path), name, setting, frame)
