"""The bottom line of a prediction: per task, for every strategy, seconds, GPU-seconds by pool and dollars (computed once, by
the predict job; specagent/reports/bottom_line.py formats it).

Why: the simulator's totals are sums over every trajectory and its headline is ratios; a
reader deciding whether to adopt a strategy wants "how long does one task take, how many
GPU-hours does it use, what does it cost" first. Everything here is a division of the
summary's totals by the trajectory count, times the deployments' GPU counts and prices, so
each figure traces back to the simulator and to a sourced (or user-given) $/GPU-hour.

At batch 1 a pool's GPU-seconds are its busy time times its GPUs per replica: what one task
occupies when every call runs alone. Dollars price those busy GPU-seconds (idle time is not
billed), so they are a floor; `specagent plan` sizes a shared fleet with queueing and batching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from specagent.simulator.fleet.config import resolve_price
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


#: (column, short header for an 80-column terminal, meaning with its unit): the per-task figures.
COLUMNS = (
    ("wall_s_per_task", "s/task", "seconds per task, tool and user waits included"),
    ("model_s_per_task", "model s", "seconds per task the models take (what a strategy can change)"),
    ("weak_gpu_s_per_task", "W GPU·s", "Weak pool GPU-seconds per task (busy time x GPUs per replica)"),
    ("strong_gpu_s_per_task", "S GPU·s", "Strong pool GPU-seconds per task (0 for a hosted API)"),
    ("usd_per_task", "$/task", "GPU-seconds at each GPU's $/GPU-hour plus API charges"),
)
#: Columns the machine-readable outputs carry besides COLUMNS.
EXTRA = ("env_s_per_task", "gpu_h_per_task", "gpu_usd_per_task", "api_usd_per_task")


@dataclass(frozen=True)
class Pool:
    """One self-hosted pool as the bottom line prices it."""

    role: str  # "weak" or "strong"
    gpu: str  # hardware profile id
    gpus: int  # GPUs per replica
    usd_per_gpu_hour: float | None  # None: unpriced (its dollars are then unknown, never zero)
    source: str


def pools(setting: Any, prices: Mapping[str, float] | None = None) -> list[Pool]:
    """The setting's self-hosted pools with their $/GPU-hour (the user's first, then the profile's)."""
    out = []
    for role in ("weak", "strong"):
        dep = getattr(setting, role)
        if role == "strong" and getattr(setting, "strong_is_api", False):
            continue
        price, source = resolve_price(dep.hardware, dict(prices or {}))
        out.append(Pool(role, dep.hardware.id, int(dep.gpus), price, source))
    return out


def pools_of(weak: Any, strong: Any | None, recorded: Mapping[str, Any] | None = None) -> list[Pool]:
    """Pools from deployments (`strong` None: a hosted API, no pool). A price `recorded` by the prediction (its
    summary.json's `assumptions.prices`: {gpu: {usd_per_gpu_hour, source}}) is used with its source; otherwise the
    profile's."""
    out = []
    for role, dep in (("weak", weak), ("strong", strong)):
        if dep is None:
            continue
        rec = (recorded or {}).get(dep.hardware.id)
        if isinstance(rec, Mapping) and "usd_per_gpu_hour" in rec:
            value = rec["usd_per_gpu_hour"]
            price = float(value) if isinstance(value, (int, float)) else None
            out.append(Pool(role, dep.hardware.id, int(dep.gpus), price, str(rec.get("source", ""))))
            continue
        price, source = resolve_price(dep.hardware, {})
        out.append(Pool(role, dep.hardware.id, int(dep.gpus), price, source))
    return out


def bottom_line(summary: pd.DataFrame, pool_list: list[Pool]) -> pd.DataFrame:
    """Per task, one row per strategy (the summary's index): the COLUMNS and EXTRA figures, with units in their names."""
    n = summary["trajectories"].astype(float)
    if (n <= 0).any():
        raise ValueError("a summary row has no trajectories: nothing to divide per task")
    by_role = {p.role: p for p in pool_list}
    out = pd.DataFrame(index=summary.index)
    out["wall_s_per_task"] = summary["wall_time_s"] / n
    out["model_s_per_task"] = summary["model_wall_time_s"] / n
    out["env_s_per_task"] = summary["env_wall_time_s"] / n
    gpu_usd = pd.Series(0.0, index=summary.index)
    gpu_s_total = pd.Series(0.0, index=summary.index)
    for role in ("weak", "strong"):
        p = by_role.get(role)
        gpu_s = summary[f"{role}_model_time_s"] / n * (p.gpus if p else 0)
        out[f"{role}_gpu_s_per_task"] = gpu_s
        gpu_s_total = gpu_s_total + gpu_s
        if p is not None:
            rate = math.nan if p.usd_per_gpu_hour is None else p.usd_per_gpu_hour
            # an unpriced pool that is used leaves the dollars unknown (NaN); one that is idle costs nothing
            gpu_usd = gpu_usd + gpu_s.where(gpu_s == 0, gpu_s * rate / 3600.0)
    out["gpu_h_per_task"] = gpu_s_total / 3600.0
    out["gpu_usd_per_task"] = gpu_usd
    out["api_usd_per_task"] = (summary["api_usd"] if "api_usd" in summary else 0.0) / n
    out["usd_per_task"] = out["gpu_usd_per_task"] + out["api_usd_per_task"]
    return out


#: Per-task columns an interval is given for (`bottom_line_intervals`), and the savings against the baseline.
INTERVAL_COLUMNS = ("wall_s_per_task", "model_s_per_task", "gpu_h_per_task", "usd_per_task")
SAVINGS = (("wall_s_per_task", "time saving %"), ("usd_per_task", "$ saving %"), ("gpu_h_per_task", "GPU·h saving %"))


def bottom_line_draws(totals: Mapping[str, pd.DataFrame], summary: pd.DataFrame, pool_list: list[Pool]) -> dict[str, pd.DataFrame]:
    """Per strategy, the bottom line of every draw (`Intervals.totals`: one row of summed totals per draw)."""
    out = {}
    for name, t in totals.items():
        frame = t.copy()
        frame["trajectories"] = float(summary.loc[name, "trajectories"])
        out[name] = bottom_line(frame, pool_list)
    return out


def bottom_line_intervals(draws: Mapping[str, pd.DataFrame], line: pd.DataFrame, level: float,
                          baseline: str = "strongonly") -> pd.DataFrame:
    """(strategy, column, point, low, high, widened) for every INTERVAL_COLUMNS figure and every saving % against
    the baseline.

    A saving is 100 (1 - strategy / baseline) of the same draw, so a draw where the baseline is slower too counts
    once; the intervals are the ratios' (`simulator.uncertainty.percentile_interval`: percentiles, reaching the point).
    """
    from specagent.simulator.uncertainty import percentile_interval

    rows = []
    base = draws.get(baseline)
    for name, d in draws.items():
        for col in INTERVAL_COLUMNS:
            x = d[col].to_numpy(dtype=float)
            point = float(line.loc[name, col])
            rows.append((name, col, point, *(percentile_interval(x, point, level) if np.isfinite(x).all()
                                             else (math.nan, math.nan, False))))
        if base is None or name == baseline:
            continue
        for col, label in SAVINGS:
            b = base[col].to_numpy(dtype=float)
            if not (np.isfinite(b).all() and (b > 0).all()):
                continue
            x = 100 * (1 - d[col].to_numpy(dtype=float) / b)
            point = float(100 * (1 - line.loc[name, col] / line.loc[baseline, col]))
            rows.append((name, label, point, *percentile_interval(x, point, level)))
    return pd.DataFrame(rows, columns=["strategy", "column", "point", "low", "high", "widened"])


def verdict(draws: Mapping[str, pd.DataFrame], level: float, strategy: str = "specagent", baseline: str = "strongonly") -> str | None:
    """One line: in how many draws the strategy is cheaper and faster than the baseline, and whether each is established.

    A saving is established at this uncertainty when at least (1 + level)/2 of the draws show it: the printed
    interval of the ratio then lies wholly below 1.
    """
    if strategy not in draws or baseline not in draws:
        return None
    a, b = draws[strategy], draws[baseline]
    n = len(a)
    need = math.ceil((1 + level) / 2 * n - 1e-9)
    parts, unsure = [], []
    for col, word, noun in (("usd_per_task", "cheaper", "cost"), ("wall_s_per_task", "faster", "time")):
        x, y = a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            continue
        k = int((x < y).sum())
        parts.append(f"{word} in {k}/{n} draws")
        if (n - need) < k < need:  # the side most draws fall on, said plainly ("faster in 47/100" is a slowdown)
            unsure.append(f"the {noun} saving is not established at this uncertainty" if 2 * k >= n else
                          f"{'dearer' if noun == 'cost' else 'slower'} in most draws, not established at this uncertainty")
        elif k <= n - need:
            unsure.append(f"it is {'dearer' if noun == 'cost' else 'slower'} at this uncertainty")
    if not parts:
        return None
    return f"{strategy} vs {baseline}: " + "; ".join(parts) + (f" — {'; '.join(unsure)}" if unsure else "")
