"""Simulate a large synthetic workload chunk by chunk: memory bounded by one chunk, results as one run.

Why: 10⁶ synthetic trajectories held at once take ~18 GB (generation, unit table,
plan and per-trajectory frame). Trajectories do not interact in `simulate` (batch 1:
the analytic engine and simpy with unlimited slots), every random draw is keyed by
the trajectory's global index (`acceptance.unit_uniforms`, `traces.synth` blocks),
so simulating the generation blocks one by one gives exactly the rows one big run
gives; totals are summed over the same column, in the same order, as the one-frame
path sums them (tests/test_synthetic_scale.py checks both, byte for byte).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specagent.common import atomic
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.environment import Environment
from specagent.simulator.protocol.workload import synthetic_unit_tables
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.run import simulate
from specagent.simulator.protocol.setting import Setting
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")
    pq = lazy_module("pyarrow.parquet")


#: Per-trajectory columns `simulate` totals (the CLI's table and --json).
TOTAL_COLUMNS = ("weak_flops", "strong_flops", "weak_bytes_read", "strong_bytes_read", "weak_prefill_tokens",
                 "weak_decode_tokens", "strong_prefill_tokens", "strong_decode_tokens", "weak_calls", "strong_calls",
                 "reviews", "rejections", "repairs", "wall_time_s", "api_usd")


def totals_of(frame: pd.DataFrame) -> dict[str, float]:
    """Column totals of a per-trajectory frame, as `simulate` reports them."""
    return {c: float(frame[c].sum()) for c in TOTAL_COLUMNS}


@dataclass(frozen=True)
class SyntheticRun:
    label: str
    n_traj: int
    totals: dict[str, float]


def simulate_synthetic(profile, n: int, seed: int, strategy: str, setting: Setting, acceptance: AcceptanceModel,
                       engine: str = "analytic", k: int = 4, review: str = "on_write", out: str | Path | None = None,
                       progress: Callable[[int], None] | None = None, environment: Environment | None = None) -> SyntheticRun:
    """`simulate` on n synthetic trajectories of `profile`, one generation block at a time.

    `out`: also write the per-trajectory rows as Parquet (streamed, one row group per block;
    atomic). `progress(k)` is called after each block with the k trajectories it held. `environment`
    changes each block's user and tool waits (the scenario's what-if).
    """
    pricer = Pricer(setting)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in TOTAL_COLUMNS}
    label = ""
    n_done = 0

    def run(writer_path: Path | None) -> None:
        nonlocal label, n_done
        writer: pq.ParquetWriter | None = None
        schema = None
        try:
            for table in synthetic_unit_tables(profile, n, seed, progress):
                if environment is not None:
                    table = environment.apply(table)
                frame = simulate(table, strategy, setting, acceptance, seed, engine, k, review, pricer=pricer)
                label = str(frame["label"].iloc[0])
                n_done += len(frame)
                for c in TOTAL_COLUMNS:
                    parts[c].append(frame[c].to_numpy())
                if writer_path is not None:
                    t = pa.Table.from_pandas(frame, preserve_index=False)
                    if writer is None:
                        schema = t.schema
                        writer = pq.ParquetWriter(writer_path, schema)
                    writer.write_table(t.cast(schema).replace_schema_metadata(schema.metadata))
        finally:
            if writer is not None:
                writer.close()

    if out is not None:
        atomic.atomic_write(out, run)
    else:
        run(None)
    totals = {c: float(pd.Series(np.concatenate(parts[c])).sum()) for c in TOTAL_COLUMNS}
    return SyntheticRun(label=label, n_traj=n_done, totals=totals)
