"""Generate synthetic trajectories from a WorkloadProfile, vectorized with numpy.

Why vectorized: sweeps over thousands of tasks should not wait on the
generator (target ≥ 200,000 steps/s; benchmarks/traces.py measures it).
The Markov chain is stepped for all tasks at once (one numpy pass per turn
position), then turns are expanded into steps with ``np.repeat``.

Determinism: one ``numpy.random.Generator(PCG64(seed))``, every draw made in a
fixed order with sizes that depend only on earlier draws, so the same profile,
n and seed give the same arrays and byte-identical files.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from .columns import FRAME_DTYPES, from_frame
from .profile import EVENT_KINDS, TOOL_EVENT_KINDS, WorkloadProfile
from .schema import SCHEMA_VERSION, Trajectory

GENERATOR_VERSION = 1
_EV = {k: i for i, k in enumerate(EVENT_KINDS)}
_TOOL_CODES = np.array([_EV[k] for k in TOOL_EVENT_KINDS])
# step kind codes used internally: the event kinds, plus tool_result
_STEP_KINDS = list(EVENT_KINDS) + ["tool_result"]
_TR = len(EVENT_KINDS)


def synthesize_frame(profile: WorkloadProfile, n: int, seed: int) -> pd.DataFrame:
    """n synthetic trajectories as a step frame (``columns.to_frame`` layout)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.Generator(np.random.PCG64(seed))
    turns = np.maximum(profile.turns.sample(rng, n), 1).astype(np.int64)
    n_ev = int(turns.sum())
    # --- Markov chain over turn kinds, all tasks at once ---
    # events are stored task by task; at position t only tasks longer than t are stepped
    cum_init = np.cumsum(profile.initial.vector())
    cum_t = np.cumsum(profile.transitions.array(), axis=1)
    u = rng.random(n_ev)
    offsets = np.cumsum(turns) - turns
    order = np.argsort(-turns, kind="stable")
    sorted_len = turns[order]
    ev_kind = np.empty(n_ev, dtype=np.int64)
    first = offsets
    ev_kind[first] = np.searchsorted(cum_init, u[first], side="right")
    for t in range(1, int(sorted_len[0])):
        k = int(np.searchsorted(-sorted_len, -t, side="left"))  # tasks with turns > t
        pos = offsets[order[:k]] + t
        rows = cum_t[ev_kind[pos - 1]]
        ev_kind[pos] = (u[pos, None] >= rows).sum(axis=1)
    np.minimum(ev_kind, len(EVENT_KINDS) - 1, out=ev_kind)
    ev_traj = np.repeat(np.arange(n), turns)
    # --- parallel calls ---
    is_tool = np.isin(ev_kind, _TOOL_CODES)
    par_u = rng.random(n_ev)
    extra = profile.parallel.extra_calls.sample(rng, n_ev).astype(np.int64)
    g = np.where(is_tool & (par_u < profile.parallel.vector()[ev_kind]), 1 + np.maximum(extra, 1), 1)
    g = np.where(is_tool, g, 1)
    per_ev = np.where(is_tool, 2 * g, 1)
    # parallel group ids, numbered within each task
    multi = (g > 1).astype(np.int64)
    cm = np.cumsum(multi) - multi
    task_first_ev = offsets
    grp_ev = np.where(multi == 1, cm - cm[task_first_ev][ev_traj], -1)
    # --- expand turns into steps ---
    n_steps = int(per_ev.sum())
    st_ev = np.repeat(np.arange(n_ev), per_ev)
    starts = np.cumsum(per_ev) - per_ev
    pos = np.arange(n_steps) - starts[st_ev]
    st_is_result = is_tool[st_ev] & (pos >= g[st_ev])
    kind = np.where(st_is_result, _TR, ev_kind[st_ev])
    traj = ev_traj[st_ev]
    tstart = np.concatenate([[0], np.flatnonzero(np.diff(traj)) + 1])
    index = np.arange(n_steps) - np.repeat(tstart, np.diff(np.append(tstart, n_steps)))
    group = np.where(g[st_ev] > 1, grp_ev[st_ev], -1)
    # --- tokens, latencies, flags (fixed draw order over _STEP_KINDS) ---
    ctx = np.zeros(n_steps, dtype=np.int64)
    rea = np.zeros(n_steps, dtype=np.int64)
    for kc, kname in enumerate(_STEP_KINDS):
        m = kind == kc
        cnt = int(m.sum())
        spec = profile.tokens[kname]
        ctx[m] = spec.context.sample(rng, cnt)
        if spec.reasoning is not None:
            rea[m] = spec.reasoning.sample(rng, cnt)
    agent = (kind != _EV["user"]) & (kind != _TR)
    out_tok = np.where(agent, ctx + rea, 0)
    rea_col = np.where(agent, rea, -1)
    tool_lat = np.full(n_steps, np.nan)
    user_lat = np.full(n_steps, np.nan)
    mt, mu = kind == _TR, kind == _EV["user"]
    tool_lat[mt] = profile.tool_latency_s.sample(rng, int(mt.sum()))
    user_lat[mu] = profile.user_latency_s.sample(rng, int(mu.sum()))
    gen = kind == _EV["generic"]
    irrev = (kind == _EV["write"]) | (gen & (rng.random(n_steps) < profile.irreversible_generic_prob.value))
    sys_tok = profile.system_prompt_tokens.sample(rng, n).astype(np.int64)
    success = rng.random(n) < profile.success_rate.value
    # --- assemble the frame ---
    actor_code = np.where(kind == _TR, 2, np.where(kind == _EV["user"], 1, 0))
    head = json.dumps({"profile": profile.name, "seed": seed, "generator_version": GENERATOR_VERSION})[:-1]
    meta = [f'{head}, "synthetic_index": {i}}}' for i in range(n)]  # == json.dumps of the full dict
    task_ids = [f"{profile.name}-{seed}-{i:06d}" for i in range(n)]
    src = f"synth:{profile.name}:seed={seed}"
    zeros = np.zeros(n_steps, dtype=np.int64)
    none_str = _str_col([None], zeros)
    none_int = pd.arrays.IntegerArray(zeros, np.ones(n_steps, dtype=bool))
    cols = {
        "traj": traj,
        "schema_version": np.full(n_steps, SCHEMA_VERSION, dtype=np.int64),
        "task_id": _str_col(task_ids, traj),
        "domain": _str_col([profile.domain], zeros),
        "source": _str_col([src], zeros),
        "reward": pd.arrays.FloatingArray(success.astype(float)[traj], np.zeros(n_steps, dtype=bool)),
        "success": pd.arrays.BooleanArray(success[traj], np.zeros(n_steps, dtype=bool)),
        "system_prompt_tokens": sys_tok[traj],
        "system_prompt_source": _str_col(["estimated"], zeros),
        "metadata_json": _str_col(meta, traj),
        "index": index.astype(np.int64),
        "actor": _str_col(["agent", "user", "tool"], actor_code),
        "kind": _str_col(_STEP_KINDS, kind),
        "tool_name": none_str,
        "irreversible": irrev,
        "in_agent_context": np.ones(n_steps, dtype=bool),
        "new_context_tokens": ctx,
        "output_tokens": out_tok.astype(np.int64),
        "reasoning_tokens": pd.arrays.IntegerArray(np.maximum(rea_col, 0).astype(np.int64), rea_col < 0),
        "token_source": _str_col(["estimated"], zeros),
        "model_latency_s": pd.arrays.FloatingArray(np.zeros(n_steps), np.ones(n_steps, dtype=bool)),
        "tool_latency_s": pd.arrays.FloatingArray(np.nan_to_num(tool_lat), np.isnan(tool_lat)),
        "user_latency_s": pd.arrays.FloatingArray(np.nan_to_num(user_lat), np.isnan(user_lat)),
        "parallel_group": pd.arrays.IntegerArray(np.maximum(group, 0).astype(np.int64), group < 0),
        "tool_error": pd.arrays.BooleanArray(np.zeros(n_steps, dtype=bool), np.ones(n_steps, dtype=bool)),
        "label_drafted_by": none_str,
        "label_verdict": none_str,
        "label_verdict_tokens": none_int,
        "label_repair_tokens": none_int,
        "label_segment": none_int,
    }
    return pd.DataFrame(cols, columns=list(FRAME_DTYPES))


def _str_col(values: list[str | None], idx: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A pandas string column built by indexing a small list (fast, Arrow-backed)."""
    return pd.arrays.ArrowStringArray(pa.array(values, pa.large_string()).take(pa.array(idx)))


def synthesize(profile: WorkloadProfile, n: int, seed: int) -> list[Trajectory]:
    """n synthetic trajectories (built without re-validation: the generator only emits valid steps;
    tests validate samples)."""
    return from_frame(synthesize_frame(profile, n, seed), file=f"synth:{profile.name}", validate=False)
