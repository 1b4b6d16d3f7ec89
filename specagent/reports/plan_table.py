"""The capacity plan's answer as one table, the same in the terminal and in the report.

Why: a plan row has ~60 columns (search counts, slices, scheduler sources); a reader needs
eight: the rate, the strategy, the GPU type, the fleet's shape, $/hour, $/task, the SLO
percentile with its interval, and what set the size (the throughput bound or the latency
objective). Everything else stays in plan.json and the report's collapsed details.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any


from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.common.lazy_import import lazy_module
from specagent.reports.published import bracket

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


#: (header with its unit, meaning): the columns of `curve_rows`.
COLUMNS = (
    ("tasks/s", "arrival rate"),
    ("strategy", ""),
    ("GPU", "GPU type of the Strong pool (W ... / S ...: Weak and Strong, when they differ)"),
    ("fleet", "replicas x GPUs per replica, per pool"),
    ("GPUs", "GPUs in all"),
    ("$/hour", "the fleet's price per hour"),
    ("$/task", "$/hour divided by tasks per hour"),
    ("p95 s [95% CI]", "the SLO percentile of task latency with its confidence interval"),
    ("sized by", "what set each pool's replica count: throughput (the fewest replicas whose analytic throughput covers "
                 "the rate) or the SLO (more replicas than that, to keep the latency percentile within the SLO; "
                 "'throughput alone: N' is the count the rate alone needs)"),
)


def as_number(v: Any) -> float:
    """A plan cell as a float: NaN where it is missing or not a number (a pool a strategy does not have)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def money(v: Any, digits: int = 2) -> str:
    f = as_number(v)
    return "unpriced" if math.isnan(f) else f"${f:,.{digits}f}"


def fleet_shape(r: dict) -> str:
    """'3 W×1 + 1 S×8': replicas × GPUs per replica for each pool that has replicas."""
    parts = []
    for name, short in (("weak", "W"), ("strong", "S")):
        n = as_number(r.get(f"{name}_replicas"))
        if n and not math.isnan(n):
            g = as_number(r.get(f"{name}_gpus_per_replica"))
            parts.append(f"{int(n):,} {short}×{int(g) if not math.isnan(g) else '?'}")
    return " + ".join(parts)


def pool_bounds(r: dict) -> dict[str, str]:
    """What set each pool with replicas: {"weak": "SLO", "strong": "throughput"}; the plan's own word where the row has
    it (`<pool>_sized_by`), else read off the counts (more replicas than the throughput bound: the SLO); a pool whose
    bound is unknown is left out."""
    out = {}
    for name in ("weak", "strong"):
        n, b = as_number(r.get(f"{name}_replicas")), as_number(r.get(f"{name}_bound_replicas"))
        if not n or math.isnan(n):
            continue
        said = r.get(f"{name}_sized_by")
        if isinstance(said, str) and said:
            out[name] = said
        elif not math.isnan(b):
            out[name] = "throughput" if n <= b else "SLO"
    return out


def sized_by(r: dict) -> str:
    """What set each pool's replica count, in words: 'Weak: SLO (throughput alone: 14); Strong: throughput'."""
    parts = []
    for name, how in pool_bounds(r).items():
        b = as_number(r.get(f"{name}_bound_replicas"))
        alone = f" (throughput alone: {int(b):,})" if how == "SLO" and not math.isnan(b) else ""
        parts.append(f"{name.capitalize()}: {how}{alone}")
    return "; ".join(parts) or "—"


@functools.lru_cache(maxsize=None)
def short_gpu(gpu: str) -> str:
    """The shortest name `--gpu` accepts for a profile id ('h200' for h200_sxm), so the column stays narrow."""
    try:
        hw = load_hardware(gpu)
    except HardwareProfileError:
        return gpu
    return min((hw.id, *hw.aliases), key=lambda n: (len(n), n))


def _gpu(r: dict) -> str:
    wg, sg = short_gpu(str(r.get("weak_gpu", ""))), short_gpu(str(r.get("strong_gpu", "")))
    uses_weak = as_number(r.get("weak_replicas")) > 0
    return sg if (not uses_weak or wg == sg) else f"W {wg} / S {sg}"  # which side is which, always (issue #34)


def curve_rows(best: pd.DataFrame, percentile: str = "p95") -> pd.DataFrame:
    """One display row per (rate, strategy) of the planner's `best` table, as strings with units in the headers."""
    rows = []
    for r in best.to_dict("records"):
        ci = (f"{as_number(r.get('slo_value_s')):,.0f} "
              + bracket(f"{as_number(r.get('slo_ci_low_s')):,.0f}", f"{as_number(r.get('slo_ci_high_s')):,.0f}")
              if "slo_value_s" in r else "—")
        rows.append({"tasks/s": f"{as_number(r.get('rate')):,.4g}", "strategy": str(r.get("strategy", "")), "GPU": _gpu(r),
                     "fleet": fleet_shape(r), "GPUs": f"{int(as_number(r.get('gpus'))):,}" if not math.isnan(as_number(r.get("gpus"))) else "—",
                     "$/hour": money(r.get("usd_per_hour"), 2), "$/task": money(r.get("usd_per_task"), 4),
                     f"{percentile} s [95% CI]": ci, "sized by": sized_by(r)})
    return pd.DataFrame(rows, columns=[c if c != "p95 s [95% CI]" else f"{percentile} s [95% CI]" for c, _ in COLUMNS])
