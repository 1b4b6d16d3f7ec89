"""Generate synthetic trajectories from a WorkloadProfile, vectorized with numpy, in blocks.

Why vectorized: sweeps over thousands of tasks should not wait on the
generator (target ≥ 200,000 steps/s; benchmarks/traces.py measures it).
The Markov chain is stepped for all tasks of a block at once (one numpy pass
per turn position), then turns are expanded into steps with ``np.repeat``.

Why blocks: memory must not grow with the number of trajectories (10⁶
synthetic trajectories are simulated within 2 GB, benchmarks/synthetic_scale.py).
Trajectories are drawn in blocks of ``block_size(profile)`` (at most 4,096,
fewer when the profile's trajectories are long, so a block holds about
``BLOCK_STEPS`` steps); each block has its own random stream, so a run may hold
one block or all of them and the trajectories are the same either way.

Determinism: block *b* draws from ``PCG64(SeedSequence(seed, spawn_key=(b,)))``
— block 0 from ``PCG64(seed)`` itself, so a workload that fits in one block
is exactly what generator version 1 drew — every draw in a fixed order with
sizes that depend only on earlier draws; the same profile, n and seed give the
same arrays and byte-identical files.

Every drawn trajectory must be one the schema accepts (schema.py limits): a
trajectory with more than ``MAX_STEPS`` steps, or an agent context beyond
``MAX_CONTEXT_TOKENS``, stops generation with an error naming the profile and
the limit (the profile's bounds allow it; tighten them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .columns import FRAME_DTYPES, KIND_CODES, from_frame
from .errors import TraceFormatError
from .profile import EVENT_KINDS, TOOL_EVENT_KINDS, WorkloadProfile
from .schema import LIMIT_REASONS, MAX_CONTEXT_TOKENS, MAX_STEPS, SCHEMA_VERSION, Trajectory
from .vocabulary import MAX_TRAJECTORIES

from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")


GENERATOR_VERSION = 2
#: Most trajectories in one generation block (and the block size of every shipped profile).
MAX_BLOCK = 4096
#: Steps a block is sized to hold, by the profile's expected steps per trajectory (~100 MB of columns).
BLOCK_STEPS = 1_000_000
_EV = {k: i for i, k in enumerate(EVENT_KINDS)}
_TOOL_CODES = np.array([_EV[k] for k in TOOL_EVENT_KINDS])
# step kind codes used internally: the event kinds, plus tool_result
_STEP_KINDS = list(EVENT_KINDS) + ["tool_result"]
_TR = len(EVENT_KINDS)
_TO_KIND_CODE = np.array([KIND_CODES[k] for k in _STEP_KINDS], dtype=np.int8)  # internal code -> columns.KIND_CODES
_ACTOR_CODE = np.array([1] + [0] * (len(EVENT_KINDS) - 1) + [2], dtype=np.int8)  # user, agent kinds..., tool


def _clipped_mean(d) -> float:
    lo, hi = d.support()
    return float(min(max(d.mean(), lo), hi))


def block_size(profile: WorkloadProfile) -> int:
    """Trajectories per block: a power of two ≤ MAX_BLOCK whose expected steps stay within BLOCK_STEPS.

    A function of the profile alone (never of n or of how a run is chunked), so the blocks,
    and with them every draw, are the same however many blocks a run holds at once.
    """
    calls = 1 + float(profile.parallel.vector().max()) * _clipped_mean(profile.parallel.extra_calls)
    steps = max(1.0, _clipped_mean(profile.turns)) * 2 * calls  # every turn as a tool call with its results
    b = MAX_BLOCK
    while b > 1 and b * steps > BLOCK_STEPS:
        b //= 2
    return b


def _rng(seed: int, block: int) -> np.random.Generator:
    if block == 0:
        return np.random.Generator(np.random.PCG64(seed))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(block,))))


@dataclass(frozen=True)
class Block:
    """One block's draws as numpy columns: per step (kind in internal codes) and per trajectory."""

    first: int  # global index of the block's first trajectory
    traj: np.ndarray  # global trajectory index per step
    index: np.ndarray
    kind: np.ndarray
    group: np.ndarray  # -1: no parallel group
    ctx: np.ndarray
    out_tok: np.ndarray
    rea_col: np.ndarray  # -1: unknown (non-agent steps)
    tool_lat: np.ndarray  # NaN: none
    user_lat: np.ndarray
    irrev: np.ndarray
    sys_tok: np.ndarray  # per trajectory
    success: np.ndarray

    @property
    def n(self) -> int:
        return len(self.sys_tok)


def _draw(profile: WorkloadProfile, n: int, rng: np.random.Generator, first: int) -> Block:
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
    ev_kind[offsets] = np.searchsorted(cum_init, u[offsets], side="right")
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
    steps_per_traj = np.bincount(ev_traj, weights=per_ev, minlength=n)
    if steps_per_traj.max() > MAX_STEPS:
        i = int(np.argmax(steps_per_traj))
        raise TraceFormatError(f"profile {profile.name!r}", f"synthetic trajectory {first + i}", "turns",
                               f"at most {MAX_STEPS:,} steps per trajectory ({LIMIT_REASONS[MAX_STEPS]}); lower the "
                               "profile's turns or parallel.extra_calls bounds", int(steps_per_traj[i]))
    # parallel group ids, numbered within each task
    multi = (g > 1).astype(np.int64)
    cm = np.cumsum(multi) - multi
    grp_ev = np.where(multi == 1, cm - cm[offsets][ev_traj], -1)
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
    del st_ev, starts, pos, st_is_result, u, par_u, extra, ev_kind, ev_traj
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
    _check_context(profile, first, traj, ctx, out_tok, agent, sys_tok)
    return Block(first=first, traj=traj + first, index=index.astype(np.int64), kind=kind, group=group, ctx=ctx,
                 out_tok=out_tok.astype(np.int64), rea_col=rea_col, tool_lat=tool_lat, user_lat=user_lat, irrev=irrev,
                 sys_tok=sys_tok, success=success)


def _check_context(profile: WorkloadProfile, first: int, traj: np.ndarray, ctx: np.ndarray, out_tok: np.ndarray,
                   agent: np.ndarray, sys_tok: np.ndarray) -> None:
    """Each agent call's context plus its output within the largest context window (schema.Trajectory's rule)."""
    cum = np.cumsum(ctx) - ctx
    before = cum - cum[np.searchsorted(traj, traj, side="left")] + sys_tok[traj]  # context before each step
    need = np.where(agent, before + out_tok, before + ctx)
    if len(need) and need.max() > MAX_CONTEXT_TOKENS:
        i = int(traj[int(np.argmax(need))])
        raise TraceFormatError(f"profile {profile.name!r}", f"synthetic trajectory {first + i}", "tokens",
                               f"an agent context of at most {MAX_CONTEXT_TOKENS:,} tokens "
                               f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]}); lower the profile's token or turn bounds",
                               int(need.max()))


def iter_blocks(profile: WorkloadProfile, n: int, seed: int, progress: Callable[[int], None] | None = None) -> Iterator[Block]:
    """The n trajectories block by block; `progress(k)` is called after each block with the k trajectories it held."""
    if not 1 <= n <= MAX_TRAJECTORIES:
        raise ValueError(f"n must be in [1, {MAX_TRAJECTORIES:,}], got {n}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    size = block_size(profile)
    for b, first in enumerate(range(0, n, size)):
        blk = _draw(profile, min(size, n - first), _rng(seed, b), first)
        yield blk
        if progress is not None:
            progress(blk.n)


def block_frame(profile: WorkloadProfile, blk: Block, seed: int) -> pd.DataFrame:
    """A block as a step frame (``columns.to_frame`` layout; ``traj`` is the global trajectory index)."""
    n, n_steps = blk.n, len(blk.traj)
    local = blk.traj - blk.first
    kind = blk.kind
    actor_code = np.where(kind == _TR, 2, np.where(kind == _EV["user"], 1, 0))
    head = json.dumps({"profile": profile.name, "seed": seed, "generator_version": GENERATOR_VERSION})[:-1]
    meta = [f'{head}, "synthetic_index": {blk.first + i}}}' for i in range(n)]  # == json.dumps of the full dict
    task_ids = [f"{profile.name}-{seed}-{blk.first + i:06d}" for i in range(n)]
    src = f"synth:{profile.name}:seed={seed}"
    zeros = np.zeros(n_steps, dtype=np.int64)
    none_str = _str_col([None], zeros)
    none_int = pd.arrays.IntegerArray(zeros, np.ones(n_steps, dtype=bool))
    rea_col, group, tool_lat, user_lat = blk.rea_col, blk.group, blk.tool_lat, blk.user_lat
    cols = {
        "traj": blk.traj,
        "schema_version": np.full(n_steps, SCHEMA_VERSION, dtype=np.int64),
        "task_id": _str_col(task_ids, local),
        "domain": _str_col([profile.domain], zeros),
        "source": _str_col([src], zeros),
        "reward": pd.arrays.FloatingArray(blk.success.astype(float)[local], np.zeros(n_steps, dtype=bool)),
        "success": pd.arrays.BooleanArray(blk.success[local], np.zeros(n_steps, dtype=bool)),
        "system_prompt_tokens": blk.sys_tok[local],
        "system_prompt_source": _str_col(["estimated"], zeros),
        "metadata_json": _str_col(meta, local),
        "index": blk.index,
        "actor": _str_col(["agent", "user", "tool"], actor_code),
        "kind": _str_col(_STEP_KINDS, kind),
        "tool_name": none_str,
        "irreversible": blk.irrev,
        "in_agent_context": np.ones(n_steps, dtype=bool),
        "new_context_tokens": blk.ctx,
        "output_tokens": blk.out_tok,
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


def block_step_arrays(blk: Block) -> dict[str, np.ndarray]:
    """``columns.step_arrays`` of the block's frame, straight from the draws (no frame, no strings).

    Trajectory indices are the block's own (0..n-1), as step_arrays renumbers them.
    """
    local = blk.traj - blk.first
    n_steps = len(local)
    change = np.ones(n_steps, dtype=bool)
    change[1:] = local[1:] != local[:-1]
    starts = np.flatnonzero(change)
    ctx = blk.ctx
    cum = np.cumsum(ctx) - ctx
    sys_step = blk.sys_tok[local]
    return {
        "traj": local.astype(np.int64),
        "index": blk.index,
        "actor": _ACTOR_CODE[blk.kind],
        "kind": _TO_KIND_CODE[blk.kind],
        "new_context_tokens": ctx,
        "output_tokens": blk.out_tok,
        "reasoning_tokens": np.maximum(blk.rea_col, -1).astype(np.int64),
        "irreversible": blk.irrev,
        "in_agent_context": np.ones(n_steps, dtype=bool),
        "model_latency_s": np.full(n_steps, np.nan),
        "tool_latency_s": blk.tool_lat,
        "user_latency_s": blk.user_lat,
        "parallel_group": blk.group.astype(np.int64),
        "context_before": (cum - cum[starts][local] + sys_step).astype(np.int64),
        "traj_offsets": np.append(starts, n_steps).astype(np.int64),
        "system_prompt_tokens": blk.sys_tok,
        "success": blk.success.astype(np.int8),
        "reward": blk.success.astype(np.float64),
    }


def block_task_ids(profile: WorkloadProfile, blk: Block, seed: int) -> list[str]:
    return [f"{profile.name}-{seed}-{blk.first + i:06d}" for i in range(blk.n)]


def iter_frames(profile: WorkloadProfile, n: int, seed: int, progress: Callable[[int], None] | None = None) -> Iterator[pd.DataFrame]:
    """n synthetic trajectories as step frames, one per block (memory bounded by one block)."""
    for blk in iter_blocks(profile, n, seed, progress):
        yield block_frame(profile, blk, seed)


def synthesize_frame(profile: WorkloadProfile, n: int, seed: int) -> pd.DataFrame:
    """n synthetic trajectories as one step frame (``columns.to_frame`` layout)."""
    frames = list(iter_frames(profile, n, seed))
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _str_col(values: list[str | None], idx: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A pandas string column built by indexing a small list (fast, Arrow-backed)."""
    return pd.arrays.ArrowStringArray(pa.array(values, pa.large_string()).take(pa.array(idx)))


def iter_synthesize(profile: WorkloadProfile, n: int, seed: int,
                    progress: Callable[[int], None] | None = None) -> Iterator[list[Trajectory]]:
    """n synthetic trajectories as objects, one list per block (built without re-validation: the generator
    only emits valid steps; tests validate samples)."""
    for frame in iter_frames(profile, n, seed, progress):
        yield from_frame(frame, file=f"synth:{profile.name}", validate=False)


def synthesize(profile: WorkloadProfile, n: int, seed: int) -> list[Trajectory]:
    """n synthetic trajectories (see `iter_synthesize`)."""
    return [t for part in iter_synthesize(profile, n, seed) for t in part]
