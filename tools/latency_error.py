"""Write the latency model's held-out error per phase: measurements/latency_error_rows.csv and
simulator/data/latency_error.toml (the σ `predict`'s intervals draw from; simulator/latency_error.py).

Why a script: the σ must come from `specagent latency validate`'s leave-one-source-out residuals,
never be typed in. Prefill is the TTFT rows, decode the TPOT rows, both at concurrency 1: what a
batch-1 prediction prices (every call alone on its replica; `latency validate`'s "concurrency 1" slice). σ = sqrt(mean(log(predicted / measured)^2)): a source's bias counts as
error, since the user's deployment may be biased the same way.

    python tools/latency_error.py            # refit (minutes: one fit per held-out source) and write both files
    python tools/latency_error.py --rows FILE # only recompute σ from rows `latency validate --rows` wrote
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "measurements" / "latency_error_rows.csv"
TOML = ROOT / "simulator" / "data" / "latency_error.toml"
#: latency phase -> the `latency validate` metric whose rows measure it; only rows at this concurrency (batch 1)
METRICS = {"prefill": "ttft", "decode": "tpot"}
CONCURRENCY = 1
COLUMNS = ("row_id", "source", "model", "gpu", "engine", "metric", "load_class", "concurrency", "measured", "predicted", "unit")


def held_out_rows() -> pd.DataFrame:
    """`latency validate`'s held-out predictions for every describable row of the shipped measurements."""
    from specagent.costmodel.latency_fit import serving_params
    from specagent.costmodel.latency_targets import targets_from_rows
    from specagent.costmodel.latency_validation import validate
    from specagent.measurements import default_path, load_serving

    targets, skipped = targets_from_rows(load_serving(default_path("serving_latency.csv")))
    params, _ = serving_params(None)
    val = validate(targets, skipped, held_out=True, params=params, progress=lambda m: print(m, file=sys.stderr))
    return pd.DataFrame(val.rows())


def sigmas(rows: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """Per phase: (lognormal σ, rows) of log(predicted / measured) over its metric's rows at concurrency 1."""
    out = {}
    for phase, metric in METRICS.items():
        r = rows[(rows["metric"] == metric) & (rows["concurrency"] <= CONCURRENCY) & (rows["measured"] > 0) & (rows["predicted"] > 0)]
        if r.empty:
            raise SystemExit(f"no held-out {metric} row at concurrency {CONCURRENCY}: cannot size the {phase} error")
        lr = np.log(r["predicted"].to_numpy(float) / r["measured"].to_numpy(float))
        out[phase] = (float(math.sqrt(np.mean(lr ** 2))), int(len(r)))
    return out


def toml_text(sig: dict[str, tuple[float, int]]) -> str:
    lines = ["# Written by tools/latency_error.py from measurements/latency_error_rows.csv: do not edit by hand.",
             "# Lognormal σ of the latency model's error per phase: sqrt(mean(log(predicted / measured)^2)) over",
             "# `specagent latency validate`'s leave-one-source-out rows at concurrency 1 (prefill: TTFT; decode: TPOT).",
             'source = "held-out residuals of `specagent latency validate` (leave one source out) on measurements/serving_latency.csv"',
             ""]
    for phase, (s, n) in sig.items():
        lines += [f"[phase.{phase}]", f"sigma = {s:.4f}", f"rows = {n}", f'metric = "{METRICS[phase]}"', f"concurrency = {CONCURRENCY}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, help="rows written by `specagent latency validate --rows` (default: refit)")
    ap.add_argument("--check", action="store_true", help="only check that the shipped TOML matches the shipped rows")
    a = ap.parse_args(argv)
    if a.check:
        want = toml_text(sigmas(pd.read_csv(ROWS)))
        if TOML.read_text(encoding="utf-8") != want:
            print(f"{TOML} is stale: run python tools/latency_error.py --rows {ROWS}", file=sys.stderr)
            return 1
        return 0
    rows = pd.read_csv(a.rows) if a.rows else held_out_rows()
    missing = [c for c in COLUMNS if c not in rows]
    if missing:
        raise SystemExit(f"{a.rows}: missing column(s) {', '.join(missing)}")
    rows = rows[list(COLUMNS)].sort_values("row_id", kind="stable")
    rows.to_csv(ROWS, index=False, float_format="%.6g")
    sig = sigmas(pd.read_csv(ROWS))
    TOML.write_text(toml_text(sig), encoding="utf-8")
    for phase, (s, n) in sig.items():
        print(f"{phase}: σ {s:.3f} over {n} held-out rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
