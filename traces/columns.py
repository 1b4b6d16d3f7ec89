"""Columnar view of trajectories: one row per step.

Why: Parquet storage and the simulator's vectorized path both want flat arrays
instead of nested objects. ``to_frame``/``from_frame`` are exact inverses
(tested with hypothesis), and ``step_arrays`` gives plain numpy arrays with
integer codes for actor and kind.

Trajectory-level fields are repeated on every step row; ``metadata`` is stored
as a JSON string. Nullable fields use pandas' nullable dtypes (Int64, Float64,
boolean, string) so that "not recorded" survives the round trip as null, not 0
or NaN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
from collections.abc import Sequence

import numpy as np
from pydantic import ValidationError

from .errors import TraceFormatError, from_validation_error, report_skipped
from .schema import (
    Actor,
    Outcome,
    SpecLabel,
    Step,
    StepKind,
    TokenSource,
    Trajectory,
)

from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


#: Integer codes for the vectorized path (stable: part of the schema version).
KIND_CODES: dict[str, int] = {
    "read": 0,
    "write": 1,
    "generic": 2,
    "think": 3,
    "reply": 4,
    "user": 5,
    "tool_result": 6,
}
KIND_NAMES: list[str] = [k for k, _ in sorted(KIND_CODES.items(), key=lambda kv: kv[1])]
ACTOR_CODES: dict[str, int] = {"agent": 0, "user": 1, "tool": 2}
ACTOR_NAMES: list[str] = [k for k, _ in sorted(ACTOR_CODES.items(), key=lambda kv: kv[1])]

#: Column name -> pandas dtype of the step frame (order is the file's column order).
FRAME_DTYPES: dict[str, str] = {
    "traj": "int64",
    "schema_version": "int64",
    "task_id": "string",
    "domain": "string",
    "source": "string",
    "reward": "Float64",
    "success": "boolean",
    "system_prompt_tokens": "int64",
    "system_prompt_source": "string",
    "metadata_json": "string",
    "index": "int64",
    "actor": "string",
    "kind": "string",
    "tool_name": "string",
    "irreversible": "bool",
    "in_agent_context": "bool",
    "new_context_tokens": "int64",
    "output_tokens": "int64",
    "reasoning_tokens": "Int64",
    "token_source": "string",
    "model_latency_s": "Float64",
    "tool_latency_s": "Float64",
    "user_latency_s": "Float64",
    "parallel_group": "Int64",
    "tool_error": "boolean",
    "label_drafted_by": "string",
    "label_verdict": "string",
    "label_verdict_tokens": "Int64",
    "label_repair_tokens": "Int64",
    "label_segment": "Int64",
}

_TRAJ_COLS = ["schema_version", "task_id", "domain", "source", "reward", "success",
              "system_prompt_tokens", "system_prompt_source", "metadata_json"]


#: Step fields stored as they are (enums by value), and SpecLabel fields stored as label_<field>.
_STEP_COLS = ("index", "actor", "kind", "tool_name", "irreversible", "in_agent_context", "new_context_tokens", "output_tokens",
              "reasoning_tokens", "token_source", "model_latency_s", "tool_latency_s", "user_latency_s", "parallel_group",
              "tool_error")
_LABEL_FIELDS = ("drafted_by", "verdict", "verdict_tokens", "repair_tokens", "segment")


def _val(x):
    return x.value if hasattr(x, "value") else x


def to_frame(trajs: Sequence[Trajectory]) -> pd.DataFrame:
    """One row per step; ``traj`` is the trajectory's position in ``trajs``."""
    cols: dict[str, list] = {c: [] for c in FRAME_DTYPES}
    for ti, t in enumerate(trajs):
        n = len(t.steps)
        tvals = {
            "schema_version": t.schema_version,
            "task_id": t.task_id,
            "domain": t.domain,
            "source": t.source,
            "reward": t.outcome.reward,
            "success": t.outcome.success,
            "system_prompt_tokens": t.system_prompt_tokens,
            "system_prompt_source": _val(t.system_prompt_source),
            "metadata_json": json.dumps(t.metadata, ensure_ascii=False),
        }
        cols["traj"].extend([ti] * n)
        for c in _TRAJ_COLS:
            cols[c].extend([tvals[c]] * n)
        for s in t.steps:
            for c in _STEP_COLS:
                cols[c].append(_val(getattr(s, c)))
            lab = s.label
            for c in _LABEL_FIELDS:
                cols["label_" + c].append(None if lab is None else _val(getattr(lab, c)))
    return pd.DataFrame({c: pd.array(v, dtype=FRAME_DTYPES[c]) for c, v in cols.items()})


def from_frame(df: pd.DataFrame, file: str = "<frame>", validate: bool = True,
               skip_bad: bool = False, skipped: list | None = None) -> list[Trajectory]:
    """Inverse of ``to_frame``. Rows are grouped by ``traj`` in order of first appearance.

    ``validate=False`` builds the models without validation (for generator
    output already known to be valid; ~10x faster).
    """
    missing = [c for c in FRAME_DTYPES if c not in df.columns]
    if missing:
        raise TraceFormatError(file, "columns", missing[0], f"a step table with columns {list(FRAME_DTYPES)}")
    recs = {c: df[c].astype(object).where(df[c].notna(), None).tolist() for c in FRAME_DTYPES}
    n = len(df)
    out: list[Trajectory] = []
    start = 0
    traj = recs["traj"]
    while start < n:
        end = start
        while end < n and traj[end] == traj[start]:
            end += 1
        try:
            out.append(_build(recs, start, end, validate, file))
        except TraceFormatError as e:
            if not skip_bad:
                raise
            report_skipped(e, skipped)
        start = end
    return out


def _build(recs: dict[str, list], a: int, b: int, validate: bool, file: str) -> Trajectory:
    task_id = recs["task_id"][a]
    where = f"trajectory {recs['traj'][a]} (task_id={task_id!r})"
    steps = []
    for r in range(a, b):
        lab = None
        if recs["label_drafted_by"][r] is not None:
            lab = dict(
                drafted_by=recs["label_drafted_by"][r],
                verdict=recs["label_verdict"][r],
                verdict_tokens=recs["label_verdict_tokens"][r],
                repair_tokens=recs["label_repair_tokens"][r],
                segment=recs["label_segment"][r],
            )
        steps.append(dict(
            index=recs["index"][r], actor=recs["actor"][r], kind=recs["kind"][r],
            tool_name=recs["tool_name"][r], irreversible=bool(recs["irreversible"][r]),
            in_agent_context=bool(recs["in_agent_context"][r]),
            new_context_tokens=recs["new_context_tokens"][r], output_tokens=recs["output_tokens"][r],
            reasoning_tokens=recs["reasoning_tokens"][r], token_source=recs["token_source"][r],
            model_latency_s=recs["model_latency_s"][r], tool_latency_s=recs["tool_latency_s"][r],
            user_latency_s=recs["user_latency_s"][r], parallel_group=recs["parallel_group"][r],
            tool_error=recs["tool_error"][r], label=lab,
        ))
    try:
        meta = json.loads(recs["metadata_json"][a] or "{}")
    except json.JSONDecodeError as e:
        raise TraceFormatError(file, where, "metadata_json", f"a JSON object ({e.msg})") from None
    d = dict(
        schema_version=recs["schema_version"][a], task_id=task_id, domain=recs["domain"][a],
        source=recs["source"][a],
        outcome=dict(reward=recs["reward"][a], success=recs["success"][a]),
        system_prompt_tokens=recs["system_prompt_tokens"][a],
        system_prompt_source=recs["system_prompt_source"][a], steps=steps, metadata=meta,
    )
    if validate:
        try:
            return Trajectory.model_validate(d)
        except ValidationError as e:
            raise from_validation_error(file, where, e) from None
    return _construct(d)


def _construct(d: dict) -> Trajectory:
    """Build without validation (trusted generator output)."""
    steps = []
    for s in d["steps"]:
        s = dict(s)
        s["actor"] = Actor(s["actor"])
        s["kind"] = StepKind(s["kind"])
        s["token_source"] = TokenSource(s["token_source"])
        if s["label"] is not None:
            s["label"] = SpecLabel.model_construct(**s["label"])
        steps.append(Step.model_construct(**s))
    return Trajectory.model_construct(
        schema_version=d["schema_version"], task_id=d["task_id"], domain=d["domain"], source=d["source"],
        outcome=Outcome.model_construct(**d["outcome"]), system_prompt_tokens=d["system_prompt_tokens"],
        system_prompt_source=TokenSource(d["system_prompt_source"]), steps=steps, metadata=d["metadata"],
    )


def step_arrays(trajs: Sequence[Trajectory] | pd.DataFrame) -> dict[str, np.ndarray]:
    """Numpy arrays for the simulator's vectorized path.

    Per step (length = total steps): ``traj``, ``index``, ``actor`` (ACTOR_CODES),
    ``kind`` (KIND_CODES), ``new_context_tokens``, ``output_tokens``,
    ``reasoning_tokens`` (-1 = unknown), ``irreversible``, ``in_agent_context``,
    ``model_latency_s``/``tool_latency_s``/``user_latency_s`` (NaN = not recorded),
    ``parallel_group`` (-1 = none), ``context_before`` (agent context tokens
    before the step: system prompt + earlier agent-visible steps).
    Per trajectory: ``traj_offsets`` (length n+1, steps of trajectory i are
    ``offsets[i]:offsets[i+1]``), ``system_prompt_tokens``, ``success``
    (1/0/-1 unknown), ``reward`` (NaN unknown).
    """
    df = trajs if isinstance(trajs, pd.DataFrame) else to_frame(trajs)
    traj = df["traj"].to_numpy(np.int64)
    # renumber trajectories 0..n-1 in order of appearance
    change = np.ones(len(traj), dtype=bool)
    change[1:] = traj[1:] != traj[:-1]
    tid = np.cumsum(change) - 1
    starts = np.flatnonzero(change)
    offsets = np.append(starts, len(traj)).astype(np.int64)
    ctx = df["new_context_tokens"].to_numpy(np.int64) * df["in_agent_context"].to_numpy(bool)
    cum = np.cumsum(ctx) - ctx  # exclusive prefix over the whole table
    sys_tok = df["system_prompt_tokens"].to_numpy(np.int64)
    context_before = cum - cum[starts][tid] + sys_tok
    succ = df["success"].to_numpy(dtype=object)[starts]
    return {
        "traj": tid.astype(np.int64),
        "index": df["index"].to_numpy(np.int64),
        "actor": df["actor"].map(ACTOR_CODES).to_numpy(np.int8),
        "kind": df["kind"].map(KIND_CODES).to_numpy(np.int8),
        "new_context_tokens": df["new_context_tokens"].to_numpy(np.int64),
        "output_tokens": df["output_tokens"].to_numpy(np.int64),
        "reasoning_tokens": df["reasoning_tokens"].fillna(-1).to_numpy(np.int64),
        "irreversible": df["irreversible"].to_numpy(bool),
        "in_agent_context": df["in_agent_context"].to_numpy(bool),
        "model_latency_s": df["model_latency_s"].to_numpy(np.float64, na_value=np.nan),
        "tool_latency_s": df["tool_latency_s"].to_numpy(np.float64, na_value=np.nan),
        "user_latency_s": df["user_latency_s"].to_numpy(np.float64, na_value=np.nan),
        "parallel_group": df["parallel_group"].fillna(-1).to_numpy(np.int64),
        "context_before": context_before.astype(np.int64),
        "traj_offsets": offsets,
        "system_prompt_tokens": sys_tok[starts],
        "success": np.array([-1 if s is None or s is pd.NA else int(bool(s)) for s in succ], dtype=np.int8),
        "reward": df["reward"].to_numpy(np.float64, na_value=np.nan)[starts],
    }
