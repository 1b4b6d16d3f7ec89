"""Per-trajectory accounting from a priced plan, and summaries relative to Strong-only.

Reports read these frames only; column names are the contract between the simulator and
everything downstream (Parquet files, HTML reports, notebooks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specagent.simulator.protocol.phases import (
    DECODE_PHASES, PHASE_GROUPS, PHASE_NAMES, PREFILL_PHASES, STRONG_PHASES, TOOL, USER, WEAK_PHASES,
)
from specagent.simulator.protocol.plan import STAT_NAMES, CallPlan
from specagent.simulator.pricing.analytic import EventCosts, wall_time
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


METRICS = ("time_s", "flops", "bytes_read", "bytes_written", "tokens")
#: Headline per-trajectory figures compared across strategies.
HEADLINE = (
    "total_bytes_read", "strong_bytes_read", "weak_bytes_read", "wall_time_s", "model_wall_time_s", "total_flops", "strong_flops",
    "strong_decode_tokens", "strong_calls", "api_usd",
)


def per_trajectory(plan: CallPlan, costs: EventCosts) -> pd.DataFrame:
    """One row per trajectory: every metric by phase, totals by model, protocol counters."""
    nt = plan.n_traj
    n_ph = len(PHASE_NAMES)
    key = plan.traj * n_ph + plan.phase
    cols: dict[str, np.ndarray] = {}
    # the serving engine's per-request overhead is in a call's time (time_s_<phase>, the wall clock) and apart in
    # request_s_<phase>, but no pass runs for it: a model's busy time (<model>_model_time_s, what GPU-seconds bill)
    # leaves it out, as the fleet's replicas do
    values = {"time_s": costs.time_s, "flops": costs.flops, "bytes_read": costs.bytes_read,
              "bytes_written": costs.bytes_written, "tokens": plan.tokens, "request_s": costs.request_s}
    busy = np.bincount(key, weights=costs.time_s - costs.request_s, minlength=nt * n_ph).reshape(nt, n_ph)
    tables = {}
    for metric, v in values.items():
        tables[metric] = table = np.bincount(key, weights=v, minlength=nt * n_ph).reshape(nt, n_ph)
        for p, name in enumerate(PHASE_NAMES):
            cols[f"{metric}_{name}"] = table[:, p]
    for model, phases in (("weak", WEAK_PHASES), ("strong", STRONG_PHASES)):
        for metric in ("flops", "bytes_read", "bytes_written"):
            cols[f"{model}_{metric}"] = tables[metric][:, list(phases)].sum(axis=1)
        cols[f"{model}_prefill_tokens"] = tables["tokens"][:, [p for p in phases if p in PREFILL_PHASES]].sum(axis=1)
        cols[f"{model}_decode_tokens"] = tables["tokens"][:, [p for p in phases if p in DECODE_PHASES]].sum(axis=1)
        cols[f"{model}_model_time_s"] = busy[:, list(phases)].sum(axis=1)
        cols[f"{model}_request_s"] = tables["request_s"][:, list(phases)].sum(axis=1)
    for metric in ("flops", "bytes_read", "bytes_written"):
        cols[f"total_{metric}"] = cols[f"weak_{metric}"] + cols[f"strong_{metric}"]
    cols["wall_time_s"] = wall_time(plan, costs.time_s)
    # Agent time vs environment time: the wall time with tool and user waits taken out is what a
    # strategy can change; what the waits add to the wall clock (env_wall_time_s) it cannot.
    waits = (plan.phase == TOOL) | (plan.phase == USER)
    cols["model_wall_time_s"] = wall_time(plan, np.where(waits, 0.0, costs.time_s))
    cols["env_wall_time_s"] = cols["wall_time_s"] - cols["model_wall_time_s"]
    cols["api_usd"] = api_usd(plan, costs.usd)
    cols["strong_verdict_tokens"] = cols["tokens_strong_verdict"]
    cols["strong_repair_tokens"] = cols["tokens_strong_decode"]
    for i, name in enumerate(STAT_NAMES):
        cols[name] = plan.stats[:, i]
    return pd.DataFrame(cols)


def api_usd(plan: CallPlan, usd: np.ndarray) -> np.ndarray:
    """Per trajectory: the API charges of its events (`per_trajectory`'s api_usd; `usd` from `Pricer.price` or `.bill`)."""
    return np.bincount(plan.traj, weights=usd, minlength=plan.n_traj)


def summarize(frame: pd.DataFrame, baseline: str = "strongonly") -> pd.DataFrame:
    """Totals per strategy (summed over trajectories) and ratios to the baseline strategy."""
    num = frame.select_dtypes(include=[np.number]).columns.difference(["traj"])
    tot = frame.groupby("strategy", sort=False)[list(num)].sum()
    tot.insert(0, "trajectories", frame.groupby("strategy", sort=False).size())
    if "label" in frame:
        tot.insert(0, "label", frame.groupby("strategy", sort=False)["label"].first())
    if baseline in tot.index:
        base = tot.loc[baseline]
        for col in HEADLINE:
            if col in tot and float(base[col]) > 0:
                tot[f"{col}_rel"] = tot[col] / float(base[col])
    return tot


def phase_split(frame: pd.DataFrame, metric: str = "time_s") -> pd.DataFrame:
    """Per strategy, the metric summed per phase group (the publication's split)."""
    out = {}
    for group, phases in PHASE_GROUPS.items():
        cols = [f"{metric}_{p}" for p in phases if f"{metric}_{p}" in frame]
        if cols:
            out[group] = frame[cols].sum(axis=1)
    df = pd.DataFrame(out)
    df["strategy"] = frame["strategy"].values
    return df.groupby("strategy", sort=False).sum()
