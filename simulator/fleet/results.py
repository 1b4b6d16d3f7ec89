"""What a fleet run produced: frames per task, call, turn, replica segment and replica, and the headline summary."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specagent.common.lazy_import import lazy_module
from specagent.simulator.fleet.config import STRONG_POOL, WEAK_POOL, Fleet

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: replay imports the engine, and with it this module, but never builds a FleetResult
    pd = lazy_module("pandas")


@dataclass
class FleetResult:
    """Everything one fleet run produced; frames are the contract with reports and the planner."""

    tasks: pd.DataFrame  # one row per task
    calls: pd.DataFrame  # one row per model call
    turns: pd.DataFrame  # one row per agent turn (between user messages)
    segments: pd.DataFrame  # one row per replica segment (one or more identical-composition iterations)
    replicas: pd.DataFrame  # one row per replica
    summary: dict
    fleet: Fleet

    def batch_histogram(self, pool: str = "strong", kind: str = "decode") -> pd.Series:
        """Share of the pool's busy time spent at each batch size (sequences per iteration)."""
        s = self.segments[self.segments["pool"] == pool]
        if kind == "decode":
            s = s[s["prefill_tokens"] == 0]
        if s.empty:
            return pd.Series(dtype=float)
        h = s.groupby("batch")["duration_s"].sum()
        return h / h.sum()


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else math.nan


def summarize_fleet(tasks: pd.DataFrame, calls: pd.DataFrame, seg: pd.DataFrame, replicas: pd.DataFrame, fleet: Fleet,
                    warmup: float, steps: int) -> dict:
    """Headline figures: latency percentiles after a warm-up share of tasks, utilisation, batches, traffic, $ per task.

    $ per task here is the burst basis: the fleet's $/hour over the wall-clock span from the
    first arrival to the last completion (a fleet is paid for while it idles), divided by the
    tasks, plus API charges. It includes the fill and the drain; for a sustained rate use the
    steady-state basis of `steady_state.analyse` (fleet $/hour over tasks completed per hour
    in the measurement window, plus API charges), which the planner and sweep cells report.
    """
    n = len(tasks)
    measured = tasks.sort_values("arrival_s").iloc[int(math.floor(warmup * n)):]
    lat = measured["latency_s"].to_numpy()
    makespan = float(tasks["end_s"].max()) if n else 0.0
    span = makespan - float(tasks["arrival_s"].min()) if n else 0.0
    out: dict = {
        "tasks": n, "tasks_completed": int(np.isfinite(tasks["end_s"]).sum()), "warmup_share": warmup,
        "tasks_measured": len(measured), "latency_p50_s": _pct(lat, 50), "latency_p95_s": _pct(lat, 95),
        "latency_p99_s": _pct(lat, 99), "latency_mean_s": float(lat.mean()) if len(lat) else math.nan,
        "makespan_s": makespan, "plan_steps": steps, "calls": len(calls),
        "gpus": fleet.gpus, "usd_per_hour": fleet.usd_per_hour,
        "weight_mode": fleet.weight_mode,
    }
    turns = tasks["turn_latency_mean_s"] if "turn_latency_mean_s" in tasks else None
    out["turn_latency_mean_s"] = float(turns.mean()) if turns is not None and len(turns.dropna()) else math.nan
    gpu_usd = fleet.usd_per_hour * span / 3600.0
    api = float(tasks["api_usd"].sum())
    out["usd_per_task"] = (gpu_usd + api) / n if n else math.nan
    out["api_usd_per_task"] = api / n if n else math.nan
    for name, i in (("weak", WEAK_POOL), ("strong", STRONG_POOL)):
        pool = fleet.pool(i)
        s = seg[seg["pool_i"] == i] if len(seg) else seg
        c = calls[calls["pool_i"] == i] if len(calls) else calls
        r = replicas[replicas["pool"] == name]
        dec = s[s["prefill_tokens"] == 0] if len(s) else s
        it = float(s["iterations"].sum()) if len(s) else 0.0
        dit = float(dec["iterations"].sum()) if len(dec) else 0.0
        out.update({
            f"{name}_replicas": (len(r) if pool is not None and not pool.is_api else 0),
            f"{name}_utilisation": float(r["utilisation"].mean()) if len(r) else 0.0,
            f"{name}_busy_s": float(r["busy_s"].sum()) if len(r) else 0.0,
            f"{name}_iterations": it,
            f"{name}_mean_batch": float((s["batch"] * s["iterations"]).sum() / it) if it else 0.0,
            f"{name}_mean_decode_batch": float((dec["batch"] * dec["iterations"]).sum() / dit) if dit else 0.0,
            f"{name}_flops": float(s["flops"].sum()) if len(s) else 0.0,
            f"{name}_bytes_read": float(s["bytes_read"].sum()) if len(s) else 0.0,
            f"{name}_bytes_written": float(s["bytes_written"].sum()) if len(s) else 0.0,
            f"{name}_queue_mean_s": float(c["queue_s"].mean()) if len(c) else 0.0,
            f"{name}_service_mean_s": float(c["service_s"].mean()) if len(c) else 0.0,
            f"{name}_cache_misses": int((~c["cache_hit"].astype(bool)).sum()) if len(c) else 0,
            f"{name}_pool": pool.describe() if pool is not None else "none",
        })
    out["fleet_flops"] = out["weak_flops"] + out["strong_flops"]
    out["fleet_bytes_read"] = out["weak_bytes_read"] + out["strong_bytes_read"]
    out["fleet_bytes"] = out["fleet_bytes_read"] + out["weak_bytes_written"] + out["strong_bytes_written"]
    return out
