"""Summary statistics of a set of trajectories (what `specagent traces stats` prints).

Why: to compare real and synthetic workloads on the numbers the simulator is
sensitive to — steps and turns per task, the read/write/reply mix, tokens per
kind, latencies and success.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .columns import to_frame
from .schema import Trajectory


def _dist(x: pd.Series | np.ndarray) -> dict[str, float]:
    a = np.asarray(pd.Series(x).dropna(), dtype=float)
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)), "max": float(a.max())}


def trace_stats(trajs: Sequence[Trajectory]) -> dict:
    """Steps/turns per task, kind mix, tokens per kind, latencies, success (plain JSON-able dict)."""
    if not trajs:
        raise ValueError("trace_stats needs at least one trajectory")
    df = to_frame(trajs)
    n = len(trajs)
    kinds = df["kind"].value_counts()
    mix = {str(k): float(v / len(df)) for k, v in kinds.sort_index().items()}
    agent = df[df["actor"] == "agent"]
    calls = agent[agent["kind"] != "reply"]
    tokens = {}
    for k, g in df.groupby("kind", sort=True):
        tokens[str(k)] = {"new_context_tokens": _dist(g["new_context_tokens"])}
        if (g["actor"] == "agent").any():
            tokens[str(k)]["output_tokens"] = _dist(g["output_tokens"])
            tokens[str(k)]["reasoning_tokens"] = _dist(g["reasoning_tokens"])
    succ = [t.outcome.success for t in trajs if t.outcome.success is not None]
    return {
        "trajectories": n,
        "steps": int(len(df)),
        "domains": sorted({t.domain for t in trajs}),
        "steps_per_task": _dist(df.groupby("traj").size()),
        "turns_per_task": _dist([t.n_turns for t in trajs]),
        "kind_mix": mix,
        "tool_call_mix": {str(k): float(v / max(len(calls), 1)) for k, v in calls["kind"].value_counts().sort_index().items()},
        "irreversible_share_of_agent_steps": float(agent["irreversible"].mean()) if len(agent) else 0.0,
        "parallel_call_share": float(calls["parallel_group"].notna().mean()) if len(calls) else 0.0,
        "tokens": tokens,
        "system_prompt_tokens": _dist([t.system_prompt_tokens for t in trajs]),
        "measured_token_share": float((df["token_source"] == "measured").mean()),
        "latency_s": {"model": _dist(df["model_latency_s"]), "tool": _dist(df["tool_latency_s"]),
                      "user": _dist(df["user_latency_s"])},
        "success_rate": float(np.mean(succ)) if succ else None,
        "success_known": len(succ),
        "protocol_logs": int(sum(t.is_protocol_log for t in trajs)),
    }
