"""A fleet run as a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev): replica segments and tasks' calls."""

from __future__ import annotations

import json
from pathlib import Path

from specagent.common import atomic
from specagent.simulator.fleet.results import FleetResult


def write_chrome_trace(path: str | Path, result: FleetResult, max_tasks: int = 200) -> Path:
    """Replica segments per pool and the first `max_tasks` tasks' calls and waits, written atomically."""
    ev: list[dict] = []
    pid_of = {"weak": 1, "strong": 2}
    for name, pid in pid_of.items():
        ev.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"{name} pool"}})
    ev.append({"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "tasks"}})
    for row in result.segments.itertuples(index=False):
        ev.append({"name": "prefill+decode" if row.prefill_tokens else f"decode x{row.iterations}", "ph": "X",
                   "pid": pid_of[row.pool], "tid": int(row.replica), "ts": row.t_start_s * 1e6, "dur": row.duration_s * 1e6,
                   "args": {"batch": int(row.batch), "iterations": int(row.iterations), "tokens_per_iteration": float(row.tokens),
                            "prefill_tokens": int(row.prefill_tokens)}})
    keep = set(range(min(max_tasks, len(result.tasks))))
    for row in result.calls.itertuples(index=False):
        if row.task in keep:
            ev.append({"name": f"{row.pool} {row.phase}", "ph": "X", "pid": 3, "tid": int(row.task), "ts": row.t_submit_s * 1e6,
                       "dur": (row.t_done_s - row.t_submit_s) * 1e6,
                       "args": {"queue_s": row.queue_s, "replica": int(row.replica), "prefill_tokens": int(row.prefill_tokens),
                                "decode_tokens": int(row.decode_tokens), "cache_hit": bool(row.cache_hit)}})
    for row in result.tasks.itertuples(index=False):
        if row.task in keep:
            ev.append({"name": f"task {row.task_id}", "ph": "X", "pid": 3, "tid": int(row.task), "ts": row.start_s * 1e6,
                       "dur": row.latency_s * 1e6, "args": {}})
    return atomic.write_text(path, json.dumps({"traceEvents": ev, "displayTimeUnit": "ms"}))
