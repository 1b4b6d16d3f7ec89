"""Import τ²-Bench simulation-results files into the trace schema.

What maps to what (one simulation → one Trajectory):

* assistant message with text and no tool calls → one ``reply`` step;
* assistant message with N tool calls → N agent steps (kind from the tool's
  READ/WRITE/GENERIC/THINK tag, ``parallel_group`` shared when N > 1), then each
  ``tool`` message → a ``tool_result`` step (linked to its call by id);
* user text message → ``user`` step; user-side tool calls (telecom's device
  tools) → user steps of the tagged kind with ``in_agent_context=False`` (the
  agent never sees them), and their results → ``tool_result`` steps, also outside
  the agent's context.

Tags: τ²-Bench's own READ/WRITE/GENERIC/THINK tags (tool_tags.py, shared with
the OpenAI-chat importer); a tool with no known tag is a WRITE (held).

Token counts (all from the recorded ``usage``; ``token_source=measured``):

* agent step ``output_tokens`` = visible ``completion_tokens`` + hidden reasoning;
  ``new_context_tokens`` = the visible part. Hidden reasoning is not in
  ``usage`` but is in the recorded ``cost``: reasoning = (cost − prompt·p_in −
  completion·p_out) / p_out with the model's list prices ``MODEL_PRICES``
  (grok-3 has no reasoning and its costs are reproduced to the cent by these
  prices; for grok-4 and grok-4-fast the derived reasoning matches the growth
  of the next prompt inside tool loops to within the ~12-token tool-message
  size). Unknown model → reasoning unknown (None).
* N parallel calls split the message's completion and reasoning tokens, and
  its model latency, in proportion to each call's text length (name + compact
  JSON arguments; the message's text content is added to the first call's
  weight) with largest-remainder rounding, so the parts sum exactly.
* user message: the user simulator's own ``completion_tokens`` for it (the
  user simulator decoded exactly that text).
* tool results: the measured prompt growth between the assistant call before
  and after them, ``Δprompt − completion_prev − retained_reasoning``, split over
  the results by content length. Whether a model keeps its reasoning in the
  prompt within a tool loop is decided per file from the data (majority of
  tool-only gaps where Δprompt − completion ≥ reasoning) and recorded in
  ``metadata['reasoning_retained']``. Where this residual is unavailable (no
  following assistant call) or smaller than one token per result, the count
  comes from the text estimator and the step is marked ``estimated``.
* ``system_prompt_tokens`` = prompt tokens of the first assistant call minus
  the tokens of the messages before it (the fixed greeting is estimated: ~9
  tokens of a ~4,000-token prompt).

Latencies: the wall-clock gap between a message's timestamp and the previous
message's (the first one: the simulation's ``start_time``); assistant gaps are
model latency, tool gaps tool latency, user gaps user latency. The greeting
("Hi! How can I help you today?") is fixed text, not decoded: output 0, latency
None.

Outcome: ``reward_info.reward``; success means reward == 1 (τ²-Bench's pass
criterion).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import files
from .errors import Repair, SkippedRecord, TraceFormatError, close_skips, from_validation_error, report_repair, report_skipped
from .importing import PendingCalls, Timeline, check_usage, iso_time, usage_dips
from .schema import LIMIT_REASONS, MAX_CONTEXT_TOKENS, Actor, StepKind, TokenSource, Trajectory
from .tool_tags import TagMap, default_tag_map, merged_tag_map, tool_kind
from .tokens import compact_json, estimate_call_tokens, estimate_text_tokens, split_float, split_total

#: USD per million tokens (input, output), xAI list prices as used by litellm's
#: price table (which τ²-Bench uses to fill ``cost``). Check: grok-3 costs in
#: the shared files equal prompt·3e-6 + completion·15e-6 exactly.
MODEL_PRICES: dict[str, tuple[float, float]] = {
    "xai/grok-3": (3.0, 15.0),
    "xai/grok-3-mini": (0.3, 0.5),
    "xai/grok-4": (3.0, 15.0),
    "xai/grok-4-fast-reasoning": (0.2, 0.5),
}

#: Chat-template tokens around a user message in the agent's prompt, beyond the
#: text the user simulator decoded: median of (prompt growth − user-simulator
#: completion tokens) over the user-only gaps of the non-reasoning grok-3 files.
USER_TEMPLATE_TOKENS = 8

def _gap_s(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def _reasoning(msg: dict, model: str) -> int | None:
    usage = msg.get("usage") or {}
    price = MODEL_PRICES.get(model)
    cost = msg.get("cost")
    if price is None or cost is None:
        return None
    pin, pout = price
    extra = (float(cost) - usage["prompt_tokens"] * pin / 1e6 - usage["completion_tokens"] * pout / 1e6) / (pout / 1e6)
    return max(0, int(round(extra)))


class _Ctx:
    def __init__(self, file: str, where: str):
        self.file, self.where = file, where

    def err(self, field: str, expected: str, got: Any = None) -> TraceFormatError:
        return TraceFormatError(self.file, self.where, field, expected, got)


def _check_usage(m: dict, mc: _Ctx) -> None:
    if m.get("usage") is None:
        return
    check_usage(m["usage"], mc.err)
    cost = m.get("cost")
    if cost is not None and (not isinstance(cost, (int, float)) or isinstance(cost, bool) or not math.isfinite(cost) or cost < 0):
        raise mc.err("cost", "a non-negative number of USD or null", cost)


def _check_messages(sim: dict, ctx: _Ctx) -> list[dict]:
    msgs = sim.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ctx.err("messages", "a non-empty list of messages", type(msgs).__name__)
    for j, m in enumerate(msgs):
        mc = _Ctx(ctx.file, f"{ctx.where}, message {j}")
        if not isinstance(m, dict):
            raise mc.err("<message>", "an object", type(m).__name__)
        role = m.get("role")
        if role not in ("assistant", "user", "tool"):
            raise mc.err("role", "'assistant', 'user' or 'tool'", role)
        if m.get("content") is not None and not isinstance(m.get("content"), str):
            raise mc.err("content", "a string or null", m.get("content"))
        if role == "tool":
            if not isinstance(m.get("id"), str):
                raise mc.err("id", "the id of the tool call this result answers", m.get("id"))
        else:
            tcs = m.get("tool_calls")
            if tcs is not None and not isinstance(tcs, list):
                raise mc.err("tool_calls", "a list or null", tcs)
            for k, tc in enumerate(tcs or []):
                if not isinstance(tc, dict) or not isinstance(tc.get("name"), str) or not tc.get("name"):
                    raise mc.err(f"tool_calls[{k}].name", "a non-empty tool name", tc)
                if not isinstance(tc.get("id"), str):
                    raise mc.err(f"tool_calls[{k}].id", "a string call id", tc.get("id"))
            _check_usage(m, mc)
    return msgs


def _agent_visible(m: dict) -> bool:
    """Messages the agent sees: its tools' results and the user's text messages (not user-side tool activity)."""
    if m["role"] == "tool":
        return m.get("requestor", "assistant") != "user"
    return m["role"] == "user" and not m.get("tool_calls")


def simulation_to_trajectory(sim: dict, *, domain: str, model: str | None, tags: TagMap, file: str,
                             sim_index: int, reasoning_retained: bool, repairs: list[Repair] | None = None) -> Trajectory:
    """Convert one τ²-Bench simulation (already parsed JSON) into a Trajectory."""
    sid = sim.get("id")
    ctx = _Ctx(file, f"simulation {sim_index} (id={sid!r})")
    msgs = _check_messages(sim, ctx)
    model = model or ""
    # ---- per-message visible-context tokens for non-assistant messages ----
    n = len(msgs)
    ctx_tokens: list[int | None] = [None] * n  # tokens added to agent context by message j
    measured = [False] * n
    calls_idx = [j for j, m in enumerate(msgs) if m["role"] == "assistant" and m.get("usage")]
    user_gap = [False] + [any(msgs[j]["role"] == "user" for j in range(a + 1, b)) for a, b in zip(calls_idx, calls_idx[1:])]
    # a reasoning model that keeps its reasoning inside tool loops drops it at a user turn: a dip there is by design
    dips = usage_dips([msgs[a]["usage"]["prompt_tokens"] for a in calls_idx],
                      [msgs[a]["usage"]["completion_tokens"] for a in calls_idx],
                      [reasoning_retained and u for u in user_gap])
    for i, (a, b) in enumerate(zip(calls_idx, calls_idx[1:])):
        visible = [j for j in range(a + 1, b) if _agent_visible(msgs[j])]
        if not visible:
            continue
        if dips[i] or dips[i + 1]:
            continue  # the prompt growth around a dip is not the size of these messages: keep the estimates
        has_user = any(msgs[j]["role"] == "user" for j in visible)
        if has_user and reasoning_retained:
            continue  # retained reasoning is dropped at a user turn: the residual is not the messages' size
        ua, ub = msgs[a]["usage"], msgs[b]["usage"]
        resid = ub["prompt_tokens"] - ua["prompt_tokens"] - ua["completion_tokens"]
        if reasoning_retained:
            resid -= _reasoning(msgs[a], model) or 0
        if resid >= len(visible):
            weights = [max(1, estimate_text_tokens(msgs[j].get("content"))) for j in visible]
            for j, t in zip(visible, split_total(resid, weights)):
                ctx_tokens[j] = t
                measured[j] = True

    # ---- build steps ----
    steps: list[dict] = []
    calls: PendingCalls[tuple[str, int | None, bool]] = PendingCalls.new()  # call id -> (name, group, user_side)
    group_counter = 0
    clock: Timeline[datetime] = Timeline(iso_time, _gap_s, "an ISO-8601 time (e.g. 2025-06-01T12:00:00.123456)")
    clock.gap(sim.get("start_time"), "start_time", ctx.err)
    first_call_prompt: int | None = None
    ctx_before_first_call = 0
    for j, m in enumerate(msgs):
        role = m["role"]
        mc = _Ctx(file, f"{ctx.where}, message {j}")
        gap = clock.gap(m.get("timestamp"), "timestamp", mc.err)
        if role == "assistant":
            usage = m.get("usage")
            tcs = m.get("tool_calls") or []
            content = m.get("content") or ""
            if usage:
                c = int(usage["completion_tokens"])
                r = _reasoning(m, model)
                if r is not None and r > MAX_CONTEXT_TOKENS:
                    raise mc.err("cost", f"a cost implying at most {MAX_CONTEXT_TOKENS:,} hidden reasoning tokens at "
                                         f"{model}'s list prices ({LIMIT_REASONS[MAX_CONTEXT_TOKENS]}); it implies {r:,}",
                                 m.get("cost"))
                src = TokenSource.MEASURED
                lat = gap
                if first_call_prompt is None:
                    first_call_prompt = int(usage["prompt_tokens"])
            else:  # fixed greeting: not decoded by the model
                c = estimate_text_tokens(content) + sum(estimate_call_tokens(t["name"], t.get("arguments")) for t in tcs)
                r = None
                src = TokenSource.ESTIMATED
                lat = None
            if not tcs:
                steps.append(dict(
                    actor=Actor.AGENT, kind=StepKind.REPLY, new_context_tokens=c,
                    output_tokens=(c + (r or 0)) if usage else 0, reasoning_tokens=r if usage else None,
                    token_source=src, model_latency_s=lat,
                ))
            else:
                weights = [len(t["name"]) + len(compact_json(t.get("arguments"))) for t in tcs]
                weights[0] += len(content)
                cs = split_total(c, weights)
                rs = split_total(r, weights) if r is not None else [None] * len(tcs)
                lats = split_float(lat, weights) if lat is not None else [None] * len(tcs)
                group = None
                if len(tcs) > 1:
                    group = group_counter
                    group_counter += 1
                for t, ck, rk, lk in zip(tcs, cs, rs, lats):
                    kind, irrev = tool_kind(t["name"], domain, tags)
                    calls.call(t["id"], (t["name"], group, False), "tool_calls.id", mc.err)
                    steps.append(dict(
                        actor=Actor.AGENT, kind=kind, tool_name=t["name"], irreversible=irrev,
                        new_context_tokens=ck, output_tokens=(ck + (rk or 0)) if usage else 0,
                        reasoning_tokens=rk if usage else None, token_source=src,
                        model_latency_s=lk, parallel_group=group,
                    ))
        elif role == "user" and m.get("tool_calls"):
            tcs = m["tool_calls"]
            group = None
            if len(tcs) > 1:
                group = group_counter
                group_counter += 1
            lats = split_float(gap, [1] * len(tcs)) if gap is not None else [None] * len(tcs)
            for t, lk in zip(tcs, lats):
                kind, irrev = tool_kind(t["name"], domain, tags, user_side=True)
                calls.call(t["id"], (t["name"], group, True), "tool_calls.id", mc.err)
                steps.append(dict(
                    actor=Actor.USER, kind=kind, tool_name=t["name"], irreversible=irrev,
                    in_agent_context=False, new_context_tokens=0, output_tokens=0,
                    token_source=TokenSource.MEASURED if m.get("usage") else TokenSource.ESTIMATED,
                    user_latency_s=lk, parallel_group=group,
                ))
        elif role == "user":
            tok = ctx_tokens[j]
            src = TokenSource.MEASURED
            if tok is None and m.get("usage"):
                tok = int(m["usage"]["completion_tokens"]) + USER_TEMPLATE_TOKENS
            if tok is None:
                tok, src = estimate_text_tokens(m.get("content")), TokenSource.ESTIMATED
            steps.append(dict(actor=Actor.USER, kind=StepKind.USER, new_context_tokens=tok,
                              token_source=src, user_latency_s=gap))
            if first_call_prompt is None:
                ctx_before_first_call += tok
        else:  # tool result
            name, group, user_side = calls.result(m["id"], "id", mc.err)
            if user_side:
                tok, src, inctx = 0, TokenSource.MEASURED, False
            else:
                inctx = True
                tok = ctx_tokens[j]
                src = TokenSource.MEASURED
                if tok is None:
                    tok, src = estimate_text_tokens(m.get("content")), TokenSource.ESTIMATED
            err = m.get("error")
            steps.append(dict(actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name=name,
                              in_agent_context=inctx, new_context_tokens=tok, token_source=src,
                              tool_latency_s=gap, parallel_group=group,
                              tool_error=bool(err) if err is not None else None))
        if role == "assistant" and first_call_prompt is None:
            ctx_before_first_call += steps[-1]["new_context_tokens"] if not m.get("tool_calls") else sum(
                s["new_context_tokens"] for s in steps[-len(m["tool_calls"]):])

    for i, s in enumerate(steps):
        s["index"] = i
    if first_call_prompt is not None:
        sys_tok = first_call_prompt - ctx_before_first_call
        if sys_tok < 0:
            raise ctx.err("usage.prompt_tokens", f"the first call's prompt to hold the {ctx_before_first_call} tokens "
                                                 "of the messages before it", first_call_prompt)
        sys_src = TokenSource.MEASURED
    else:
        sys_tok, sys_src = 0, TokenSource.ESTIMATED
    ri = sim.get("reward_info") or {}
    reward = ri.get("reward") if isinstance(ri, dict) else None
    if reward is not None and (not isinstance(reward, (int, float)) or isinstance(reward, bool)):
        raise ctx.err("reward_info.reward", "a number or null", reward)
    if reward is not None and not 0.0 <= reward <= 1.0:  # τ²-Bench's reward is a product of [0, 1] checks (NaN too)
        raise ctx.err("reward_info.reward", "a reward in [0, 1] (τ²-Bench multiplies checks that each score 0 or 1)", reward)
    if not isinstance(sim.get("task_id"), (str, int)) or isinstance(sim.get("task_id"), bool):
        raise ctx.err("task_id", "the task's id (a string)", sim.get("task_id"))
    meta = {
        "simulation_id": sid, "trial": sim.get("trial"), "seed": sim.get("seed"),
        "termination_reason": sim.get("termination_reason"), "duration_s": sim.get("duration"),
        "agent_cost_usd": sim.get("agent_cost"), "user_cost_usd": sim.get("user_cost"),
        "agent_llm": model or None, "reasoning_retained": reasoning_retained,
        "start_time": sim.get("start_time"), "importer": "tau2",
    }
    meta = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}
    if any(dips):
        meta["usage_dips"] = sum(dips)
    d = dict(
        task_id=str(sim.get("task_id")), domain=domain, source=f"{Path(file).name}#simulation={sid}",
        outcome=dict(reward=None if reward is None else float(reward),
                     success=None if reward is None else bool(abs(float(reward) - 1.0) < 1e-9)),
        system_prompt_tokens=sys_tok, system_prompt_source=sys_src, steps=steps, metadata=meta,
    )
    try:
        traj = Trajectory.model_validate(d)
    except ValidationError as e:
        raise from_validation_error(file, ctx.where, e) from None
    for i, dip in enumerate(dips):
        if dip:
            a, b = msgs[calls_idx[i - 1]]["usage"], msgs[calls_idx[i]]["usage"]
            report_repair(Repair(file, f"{ctx.where}, message {calls_idx[i]}", (
                f"usage.prompt_tokens {b['prompt_tokens']} is below the previous call's prompt + completion "
                f"({a['prompt_tokens'] + a['completion_tokens']}): the messages on both sides of it keep estimated counts")),
                repairs)
    return traj


def _detect_retention(sims: list[Any], model: str) -> bool:
    """Does the model keep its hidden reasoning in the prompt within a tool loop? Majority vote over the data
    (simulations that do not validate take no part; they fail, or are skipped, on their own)."""
    yes = no = 0
    for i, sim in enumerate(sims):
        try:
            msgs = _check_messages(sim, _Ctx("", "")) if isinstance(sim, dict) else []
        except TraceFormatError:
            continue
        calls = [j for j, m in enumerate(msgs) if m.get("role") == "assistant" and m.get("usage")]
        for a, b in zip(calls, calls[1:]):
            if not all(msgs[j].get("role") == "tool" for j in range(a + 1, b)) or b == a + 1:
                continue
            r = _reasoning(msgs[a], model)
            if not r:
                continue
            resid = msgs[b]["usage"]["prompt_tokens"] - msgs[a]["usage"]["prompt_tokens"] - msgs[a]["usage"]["completion_tokens"]
            if resid >= r:
                yes += 1
            else:
                no += 1
    return yes > no


def _info_str(info: dict, path: str, key: str, sub: str) -> str | None:
    v = (info.get(key) or {}) if isinstance(info, dict) else {}
    v = v.get(sub) if isinstance(v, dict) else None
    if v is not None and not isinstance(v, str):
        raise TraceFormatError(path, "info", f"info.{key}.{sub}", "a string or null", v)
    return v or None


def read_tau2_file(path: str | os.PathLike, tags: TagMap | None = None, skip_bad: bool = False,
                   skipped: list[SkippedRecord] | None = None, repairs: list[Repair] | None = None) -> list[Trajectory]:
    """Import every simulation of one τ²-Bench results file (at least one must import)."""
    path = str(path)
    tags = tags if tags is not None else default_tag_map()
    text = files.read_text(path, files.TAU2_FORMAT)
    files.require_content(text, path, files.TAU2_FORMAT)
    data = files.parse_json(text, path, files.TAU2_FORMAT, want="tau2")
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise (files.wrong_format(path, files.TAU2_FORMAT, files.kind_of(data), "tau2")
               or TraceFormatError(path, "top level", "simulations", files.TAU2_FORMAT,
                                   found=f"a JSON {type(data).__name__} without a 'simulations' list"))
    info = data.get("info") or {}
    if not isinstance(info, dict):
        raise TraceFormatError(path, "top level", "info", "an object or null", type(info).__name__)
    domain = _info_str(info, path, "environment_info", "domain_name") or Path(path).name.split("__")[0]
    model = _info_str(info, path, "agent_info", "llm")
    sims = data["simulations"]
    retained = _detect_retention(sims, model or "")
    out: list[Trajectory] = []
    skipped_here: list[SkippedRecord] = []
    first_of: dict[Any, int] = {}  # simulation id -> its first index: one run listed twice would count twice
    for i, sim in enumerate(sims):
        try:
            if not isinstance(sim, dict):
                raise TraceFormatError(path, f"simulation {i}", "<simulation>", "an object", type(sim).__name__)
            sim_id = sim.get("id")
            if isinstance(sim_id, (str, int)) and not isinstance(sim_id, bool):
                if sim_id in first_of:
                    raise TraceFormatError(path, f"simulation {i}", "id", f"a simulation id not seen before (simulation "
                                           f"{first_of[sim_id]} has it: the same run listed twice would be imported twice)",
                                           sim_id)
                first_of[sim_id] = i
            out.append(simulation_to_trajectory(sim, domain=domain, model=model, tags=tags, file=path,
                                                sim_index=i, reasoning_retained=retained, repairs=repairs))
        except TraceFormatError as e:
            if not skip_bad:
                raise
            report_skipped(e, skipped_here)
    close_skips(len(out), path, skipped_here, skipped, "at least one simulation")
    return out


def import_tau2(paths: str | os.PathLike | Iterable[str | os.PathLike], tag_map: TagMap | str | os.PathLike | None = None,
                skip_bad: bool = False, skipped: list[SkippedRecord] | None = None,
                repairs: list[Repair] | None = None,
                progress: Callable[[int], None] | None = None) -> list[Trajectory]:
    """Import τ²-Bench results files (one path or many). ``tag_map``: dict or JSON file; merged over the defaults.

    Every file must yield at least one trajectory (``NoTrajectoriesError`` otherwise, also when
    ``skip_bad`` left out all of a file's simulations); ``repairs`` collects the explicit repairs
    (see importing.py), or they are emitted as warnings. ``progress(1)`` is called after each file.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    tags = merged_tag_map(tag_map)
    out: list[Trajectory] = []
    for p in paths:
        out.extend(read_tau2_file(p, tags, skip_bad=skip_bad, skipped=skipped, repairs=repairs))
        if progress is not None:
            progress(1)
    return out


def raw_counts(path: str | os.PathLike) -> dict[str, Any]:
    """Counts computed directly from a raw results file (for loss checks): messages per role,
    tool calls per requestor, completion-token sum of assistant messages with usage, simulations."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    c: dict[str, Any] = {"simulations": len(data["simulations"]), "assistant": 0, "user_text": 0, "user_tool_msgs": 0,
                         "tool": 0, "agent_tool_calls": 0, "user_tool_calls": 0, "agent_completion_tokens": 0,
                         "assistant_no_tool": 0}
    for s in data["simulations"]:
        for m in s["messages"]:
            r = m["role"]
            if r == "assistant":
                c["assistant"] += 1
                c["agent_tool_calls"] += len(m.get("tool_calls") or [])
                c["assistant_no_tool"] += not m.get("tool_calls")
                if m.get("usage"):
                    c["agent_completion_tokens"] += m["usage"]["completion_tokens"]
            elif r == "user":
                if m.get("tool_calls"):
                    c["user_tool_msgs"] += 1
                    c["user_tool_calls"] += len(m["tool_calls"])
                else:
                    c["user_text"] += 1
            else:
                c["tool"] += 1
    return c


def shared_tau2_files(root: str | os.PathLike | None = None) -> list[Path]:
    """The shared τ²-Bench result files (empty list if the shared data is absent)."""
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "data" / "tau2"
    if not base.is_dir():
        base = Path("/work/shared/data/tau2")
    return sorted(p for p in base.glob("*__*.json")) if base.is_dir() else []

