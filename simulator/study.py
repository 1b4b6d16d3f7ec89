"""The balance-point study: SpecAgent's saving against the Strong replica's decode batch.

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
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from specagent.costmodel.balance import balance_point
from specagent.simulator.capacity.fleet_build import build_fleet, episodes_of, plan_tasks, sized_deployment
from specagent.simulator.fleet.config import Arrivals, Scheduler
from specagent.simulator.protocol.phases import STRONG_PHASES
from specagent.simulator.scenario import Scenario

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
