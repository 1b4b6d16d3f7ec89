"""The balance-point study (`specagent study balance`): SpecAgent's saving against the Strong replica's decode batch.

SpecAgent moves Strong tokens from bandwidth-bound decode into compute-bound verification
prefills; that pays while the Strong replica's decode batch is below its balance point
(Wang et al., arXiv:2610.21463). Here load is the knob: one Strong replica per GPU type, a Weak pool without
contention (so only the Strong replica's batching changes), and a range of arrival rates.
At each rate Strong-only and SpecAgent replay the same tasks at the same arrival times;
the row says how large Strong-only's mean decode batch got and how much Strong replica
time and memory traffic SpecAgent saved per task. Where the saving columns reach zero is
where SpecAgent stops paying; `balance_batch` (costmodel.balance_point at the workload's
median Strong context) is the roofline's prediction of that batch (NaN: decode never turns
compute-bound up to the searched batch, e.g. when per-sequence state reads dominate).

`run(BalanceRequest(...))` is the job: the scenario's workload, the GPU types (`gpu`, or the
scenario's Strong GPU when that was set), the rates; `BalanceResult.table` is the study.
"""

from __future__ import annotations

import math
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.costmodel.balance import balance_point
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.capacity.fleet_build import build_fleet, episodes_of, parse_gpu_counts, plan_tasks, sized_deployment
from specagent.simulator.fleet.config import Arrivals, Scheduler
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, read_workload, report
from specagent.simulator.protocol.phases import STRONG_PHASES
from specagent.simulator.scenario import Scenario, ScenarioError

if TYPE_CHECKING:
    from specagent.simulator.capacity.fleet_build import Workload

STUDY_COLUMNS = (
    "hardware", "strong_gpus", "rate", "strongonly_decode_batch", "specagent_decode_batch", "balance_batch",
    "hardware_ridge", "strong_time_saving", "strong_bytes_saving", "fleet_bytes_saving", "latency_p50_saving",
    "strongonly_strong_utilisation", "specagent_strong_utilisation", "strongonly_latency_p50_s", "specagent_latency_p50_s",
    "strongonly_strong_s_per_task", "specagent_strong_s_per_task", "strongonly_strong_bytes_per_task",
    "specagent_strong_bytes_per_task", "tasks", "k", "weight_mode",
)


def balance_study(trajectories: Workload, hardware: Sequence[str] = ("h20", "h200"),
                  rates: Sequence[float] = (0.05, 0.2, 0.8, 3.2, 12.8), n_tasks: int = 150, horizon_s: float = 60.0,
                  scenario: Scenario | None = None, max_num_seqs: int = 256,
                  search_gpus: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per (hardware, rate); columns STUDY_COLUMNS (savings are 1 - SpecAgent / Strong-only, per task).

    The Strong replica has the scenario's GPUs per replica (`strong_gpus` records them), or
    with `search_gpus` the fewest of those that hold the longest context.

    The scenario gives the models, dtypes, K, acceptance, seed and weight reads (the default
    scenario when None); the Strong replica runs on each GPU type of `hardware` in turn.
    Each rate simulates max(n_tasks, rate * horizon_s) tasks, so high rates reach a steady
    batch. The Weak pool is uncontended (one replica per task at batch 1), so
    `fleet_bytes_saving` is a lower bound: a shared Weak pool would batch its decodes.
    """
    sc = scenario or Scenario()
    if sc.strong_api is not None:
        raise ValueError(f"the scenario prices the Strong model as an API ({sc.strong_api}); the study needs a Strong replica")
    eps = episodes_of(trajectories)
    counts = sorted({max(n_tasks, int(r * horizon_s)) for r in rates})
    plans_by_n = {n: {name: plan_tasks(eps, name, sc, n) for name in ("strongonly", "specagent")} for n in counts}
    ref = plans_by_n[counts[-1]]["strongonly"].plan
    strong_ev = np.isin(ref.phase, STRONG_PHASES)
    med_ctx = int(np.median(ref.context[strong_ev])) if strong_ev.any() else 0
    max_ctx = max(t.max_context for pl in plans_by_n.values() for t in pl.values())
    sched = Scheduler(max_num_seqs=max_num_seqs, max_batched_tokens=max(2048, max_num_seqs))
    weak = sc.weak.build()
    rows = []
    for hw in hardware:
        sdep = sized_deployment(sc.strong, hw, max_ctx, search_gpus)
        bp = balance_point(sdep, context=med_ctx, weight_mode=sc.weight_mode, max_batch=4096)
        fleet = build_fleet(weak, sdep, None, 1, weight_mode=sc.weight_mode, scheduler=sched)
        for rate in rates:
            n = max(n_tasks, int(rate * horizon_s))
            plans = plans_by_n[n]
            arr = Arrivals("poisson", rate=float(rate), seed=sc.seed).sample(n)
            s = {name: tasks.serve(fleet, arr).summary for name, tasks in plans.items()}
            so, sa = s["strongonly"], s["specagent"]

            def saving(a: float, b: float) -> float:
                return 1.0 - a / b if b > 0 else math.nan

            rows.append({
                "hardware": sdep.hardware.id, "strong_gpus": sdep.gpus, "rate": float(rate),
                "strongonly_decode_batch": so["strong_mean_decode_batch"], "specagent_decode_batch": sa["strong_mean_decode_batch"],
                "balance_batch": float(bp.balance_batch_effective) if bp.balance_batch_effective else math.nan,
                "hardware_ridge": bp.hardware_ridge,
                "strong_time_saving": saving(sa["strong_busy_s"], so["strong_busy_s"]),
                "strong_bytes_saving": saving(sa["strong_bytes_read"] + sa["strong_bytes_written"],
                                              so["strong_bytes_read"] + so["strong_bytes_written"]),
                "fleet_bytes_saving": saving(sa["fleet_bytes"], so["fleet_bytes"]),
                "latency_p50_saving": saving(sa["latency_p50_s"], so["latency_p50_s"]),
                "strongonly_strong_utilisation": so["strong_utilisation"], "specagent_strong_utilisation": sa["strong_utilisation"],
                "strongonly_latency_p50_s": so["latency_p50_s"], "specagent_latency_p50_s": sa["latency_p50_s"],
                "strongonly_strong_s_per_task": so["strong_busy_s"] / n, "specagent_strong_s_per_task": sa["strong_busy_s"] / n,
                "strongonly_strong_bytes_per_task": (so["strong_bytes_read"] + so["strong_bytes_written"]) / n,
                "specagent_strong_bytes_per_task": (sa["strong_bytes_read"] + sa["strong_bytes_written"]) / n,
                "tasks": n, "k": sc.k, "weight_mode": sc.weight_mode,
            })
    return pd.DataFrame(rows, columns=list(STUDY_COLUMNS))


# ------------------------------------------------------------------------------------------------ the job
#: The scenario's fields the study chooses itself (the strategies: Strong-only and SpecAgent) or does not read.
NOT_READ = ("strategies", "pricing_engine", "strong_api")
#: The Strong GPU types studied when neither `gpu` nor the scenario's Strong GPU is given.
DEFAULT_GPUS = ("h20", "h200")
#: Guards against a typo, not limits of the method: the study simulates every task (10^6 take minutes), and each rate
#: runs at least rate x 60 s of arrivals, so a rate is bounded by the same count.
MAX_STUDY_TASKS = 1_000_000
MAX_STUDY_RATE = MAX_STUDY_TASKS / 60


@dataclass(frozen=True)
class BalanceRequest(Request):
    """The balance study of the scenario's workload: Strong GPU types, arrival rates, tasks per rate."""

    gpu: tuple[str, ...] = field(default=(), metadata={"help": (
        f"Comma-separated GPU types for the Strong replica, one study each [default: {','.join(DEFAULT_GPUS)}]; "
        "--strong-hardware instead studies that one (the Weak pool is on --weak-hardware).")})
    rates: tuple[float, ...] = field(default=(0.05, 0.2, 0.8, 3.2, 12.8), metadata={
        "help": "Comma-separated arrival rates (tasks/s): the load knob."})
    tasks: int = field(default=150, metadata={"help": "Minimum tasks per rate (each rate runs at least rate x 60 s of arrivals)."})
    search_gpus: tuple[int, ...] | None = field(default=None, metadata={"help": (
        "GPUs per replica to search, e.g. 1,2,4,8: each pool gets the fewest that hold the longest context (default: the "
        "scenario's --weak-gpus / --strong-gpus, as given).")})
    horizon_s: float = field(default=60.0, metadata={"cli": False})
    max_num_seqs: int = field(default=256, metadata={"cli": False})

    def check(self) -> None:
        if self.gpu and "strong.hardware" in self.provenance.given:
            raise JobError("lists Strong GPU types to study, while `scenario.strong.hardware` fixes one: give one or the other",
                           field="gpu")
        for g in self.gpu:
            try:
                load_hardware(g)
            except HardwareProfileError as exc:
                raise JobError(str(exc), field="gpu") from None
        for r in self.rates:
            if not 0 < r <= MAX_STUDY_RATE:  # NaN fails too
                raise JobError(f"expected comma-separated tasks/s in (0, {MAX_STUDY_RATE:,.0f}], got {r!r}", field="rates")
        if not self.rates:
            raise JobError("expected at least one arrival rate", field="rates")
        if not 1 <= self.tasks <= MAX_STUDY_TASKS:
            raise JobError(f"expected tasks per rate in [1, {MAX_STUDY_TASKS:,}], got {self.tasks}", field="tasks")
        if self.search_gpus is not None:
            try:
                parse_gpu_counts(list(self.search_gpus))
            except ValueError as exc:
                raise JobError(str(exc), field="search_gpus") from None

    def gpus(self) -> tuple[str, ...]:
        """The Strong GPU types studied: the scenario's Strong GPU when the command line set it (`provenance.given`),
        else `gpu`, else DEFAULT_GPUS."""
        if "strong.hardware" in self.provenance.given:
            return (self.scenario.strong.hardware,)
        return self.gpu or DEFAULT_GPUS


@dataclass(frozen=True)
class BalanceResult(Result):
    """The study: one row per (Strong GPU type, rate), columns STUDY_COLUMNS."""

    table: pd.DataFrame
    scenario: Scenario

    def to_dict(self) -> dict[str, Any]:
        """The rows as JSON records (what `--json` prints as a list) and the scenario they ran on."""
        return {"kind": "specagent.balance/1", "scenario": self.scenario.to_dict(),
                "rows": json.loads(self.table.to_json(orient="records"))}

    def save(self, path: str | Path) -> Path:
        """The table as Parquet (a .parquet path) or CSV (anything else), atomically: what `specagent report` reads."""
        p = Path(path)
        if p.suffix == ".parquet":
            return atomic.write_parquet(p, self.table)
        return atomic.atomic_write(p, lambda tmp: self.table.to_csv(tmp, index=False))

    def write(self, folder: str | Path) -> list[Path]:
        """balance.parquet in `folder` (`save`)."""
        return [self.save(Path(folder) / "balance.parquet")]


def run(request: BalanceRequest, progress: Progress | None = None) -> BalanceResult:
    """The balance study of the request's scenario workload on each Strong GPU type (`BalanceRequest.gpus`)."""
    request.check()
    sc = request.scenario
    if "strong.hardware" in request.provenance.given:
        try:
            load_hardware(sc.strong.hardware)
        except HardwareProfileError as exc:
            raise ScenarioError(str(exc), "strong.hardware") from None
    trajs = read_workload(sc, progress)[0]
    report(progress, "planning and serving", 0, None)
    try:
        table = balance_study(trajs, hardware=request.gpus(), rates=request.rates, n_tasks=request.tasks,
                              horizon_s=request.horizon_s, scenario=sc, max_num_seqs=request.max_num_seqs,
                              search_gpus=request.search_gpus)
    except InputError:
        raise
    except ValueError as exc:  # a model that fits no GPU, an API Strong model: one line
        raise InputError(str(exc)) from exc
    return BalanceResult(table, sc)
