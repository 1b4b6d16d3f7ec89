"""Import OpenAI chat-completions message lists (as most agent frameworks log them).

Accepted layouts (``.json`` or ``.jsonl``; in JSONL each line is one conversation):

* a list of messages;
* an object ``{"messages": [...], "tools": [...]?, "task_id"/"id"?, "domain"?,
  "reward"?, "success"?, "metadata"?}``;
* a JSON file holding a list of such objects (several conversations).

Messages: ``system``/``developer`` (the agent's instructions), ``user``,
``assistant`` (``content`` and/or ``tool_calls[{id, type, function{name,
arguments}}]``), ``tool`` (``tool_call_id``, ``content``). ``content`` may be a
string or a list of ``{"type": "text", "text": ...}`` parts. Optional per
assistant message: ``usage{prompt_tokens, completion_tokens,
completion_tokens_details{reasoning_tokens}}`` (OpenAI convention: completion
tokens *include* reasoning) and ``timestamp`` (ISO-8601 or Unix seconds) on any
message.

Mapping is the same as for τ²-Bench (see tau2.py; tool kinds from tool_tags.py): N parallel calls → N agent
steps sharing ``parallel_group``, completion tokens split by call text length
with exact totals; a reply is a ``reply`` step. Kinds come from a tag map
(``{tool: TAG}`` or ``{domain: {tool: TAG}}``, laid over τ²-Bench's own tags, which
apply when the conversation's ``domain`` is airline/retail/telecom); a tool with
no known tag is WRITE (held).

Where ``usage`` is missing, counts come from ``tokens.estimate_*`` and the step
is marked ``estimated``. Measured error of that estimator against the τ²-Bench
usage: assistant replies MAPE 7.3 % (bias +3.0 %), tool calls MAPE 5.6 % (bias
−1.6 %), user messages MAPE 24 % (median 6.5 %, bias +6.2 %); see tokens.py.
Where two consecutive assistant messages carry usage, the prompt growth
between them (minus the earlier visible completion) is the measured size of the
messages in between, split over them by estimated size. The system prompt and
tool schemas are measured as the first call's prompt minus the messages before
it when usage is present, else estimated (tool schemas as compact JSON text).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import files
from .errors import Repair, SkippedRecord, TraceFormatError, close_skips, from_validation_error, report_repair, report_skipped
from .importing import PendingCalls, Timeline, check_usage, iso_or_unix_time, usage_dips
from .schema import Actor, StepKind, TokenSource, Trajectory
from .tool_tags import TagMap, merged_tag_map, tool_kind
from .tokens import compact_json, estimate_call_tokens, estimate_text_tokens, split_float, split_total

_ROLES = ("system", "developer", "user", "assistant", "tool")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _args(fn: dict) -> Any:
    a = fn.get("arguments")
    if isinstance(a, str):
        try:
            return json.loads(a)
        except json.JSONDecodeError:
            return a
    return a


class _Where:
    def __init__(self, file: str, where: str):
        self.file, self.where = file, where

    def err(self, field: str, expected: str, got: Any = None) -> TraceFormatError:
        return TraceFormatError(self.file, self.where, field, expected, got)


def _validate(msgs: Any, w: _Where) -> list[dict]:
    if not isinstance(msgs, list) or not msgs:
        raise w.err("messages", "a non-empty list of chat messages", type(msgs).__name__)
    for j, m in enumerate(msgs):
        mw = _Where(w.file, f"{w.where}, message {j}")
        if not isinstance(m, dict):
            raise mw.err("<message>", "an object with a 'role'", type(m).__name__)
        if m.get("role") not in _ROLES:
            raise mw.err("role", f"one of {_ROLES}", m.get("role"))
        tcs = m.get("tool_calls")
        if tcs is not None and not isinstance(tcs, list):
            raise mw.err("tool_calls", "a list of tool calls or null", tcs)
        for k, tc in enumerate(tcs or []):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise mw.err(f"tool_calls[{k}].function.name", "a non-empty tool name", tc)
            if tc.get("id") is not None and not isinstance(tc["id"], str):
                raise mw.err(f"tool_calls[{k}].id", "a string call id or null", tc["id"])
        if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise mw.err("tool_call_id", "the id of the assistant tool call this result answers", m.get("tool_call_id"))
        if m.get("usage") is not None:
            u = check_usage(m["usage"], mw.err)
            d = u.get("completion_tokens_details")
            if d is not None and not isinstance(d, dict):
                raise mw.err("usage.completion_tokens_details", "an object or null", d)
            r = (d or {}).get("reasoning_tokens")
            if r is not None and (not isinstance(r, int) or isinstance(r, bool) or r < 0 or r > u["completion_tokens"]):
                raise mw.err("usage.completion_tokens_details.reasoning_tokens",
                             "an integer between 0 and completion_tokens", r)
    return msgs


def _reasoning_of(u: dict) -> int | None:
    return (u.get("completion_tokens_details") or {}).get("reasoning_tokens")


def conversation_to_trajectory(conv: Any, *, file: str, where: str, tags: TagMap, domain: str = "unknown",
                               task_id: str | None = None, repairs: list[Repair] | None = None) -> Trajectory:
    """Convert one conversation (a message list or an object with ``messages``)."""
    w = _Where(file, where)
    if isinstance(conv, list):
        conv = {"messages": conv}
    if not isinstance(conv, dict):
        raise w.err("<conversation>", "a list of messages or an object with 'messages'", type(conv).__name__)
    msgs = _validate(conv.get("messages"), w)
    domain = str(conv.get("domain") or domain)
    tools = conv.get("tools") or []

    # visible-context estimate of each non-assistant message, and measured residuals
    n = len(msgs)
    est = [0] * n
    for j, m in enumerate(msgs):
        if m["role"] != "assistant":
            est[j] = estimate_text_tokens(_text(m.get("content")))
    ctx_tok: list[int | None] = [None] * n
    calls = [j for j, m in enumerate(msgs) if m["role"] == "assistant" and m.get("usage")]

    def visible(m: dict) -> int:
        u = m["usage"]
        return u["completion_tokens"] - (_reasoning_of(u) or 0)

    dips = usage_dips([msgs[a]["usage"]["prompt_tokens"] for a in calls], [visible(msgs[a]) for a in calls], [False] * len(calls))
    for i, (a, b) in enumerate(zip(calls, calls[1:])):
        between = [j for j in range(a + 1, b) if msgs[j]["role"] in ("user", "tool")]
        if not between or any(msgs[j]["role"] == "assistant" for j in range(a + 1, b)):
            continue
        if dips[i] or dips[i + 1]:
            continue  # the prompt growth around a dip is not the size of these messages: keep the estimates
        resid = msgs[b]["usage"]["prompt_tokens"] - msgs[a]["usage"]["prompt_tokens"] - visible(msgs[a])
        if resid >= len(between):
            for j, t in zip(between, split_total(resid, [max(1, est[j]) for j in between])):
                ctx_tok[j] = t

    steps: list[dict] = []
    pending: PendingCalls[tuple[str, int | None]] = PendingCalls.new()  # call id -> (name, group)
    group_counter = 0
    clock: Timeline[float] = Timeline(iso_or_unix_time, lambda a, b: b - a, "Unix seconds or an ISO-8601 time")
    sys_est = estimate_text_tokens(compact_json(tools)) if tools else 0
    sys_measured: int | None = None
    ctx_before_first = 0
    for j, m in enumerate(msgs):
        role = m["role"]
        mw = _Where(file, f"{where}, message {j}")
        gap = clock.gap(m.get("timestamp"), "timestamp", mw.err)
        if role in ("system", "developer"):
            if steps:
                raise mw.err("role", "system/developer messages only before the first user or assistant message", role)
            sys_est += est[j]
            continue
        if role == "assistant":
            tcs = m.get("tool_calls") or []
            content = _text(m.get("content"))
            u = m.get("usage")
            if u:
                r = _reasoning_of(u)
                vis = u["completion_tokens"] - (r or 0)
                src = TokenSource.MEASURED
                if sys_measured is None:
                    sys_measured = u["prompt_tokens"] - ctx_before_first
            else:
                r = None
                vis = estimate_text_tokens(content) + sum(
                    estimate_call_tokens(tc["function"]["name"], _args(tc["function"])) for tc in tcs)
                src = TokenSource.ESTIMATED
            if not tcs:
                steps.append(dict(actor=Actor.AGENT, kind=StepKind.REPLY, new_context_tokens=vis,
                                  output_tokens=vis + (r or 0), reasoning_tokens=r, token_source=src,
                                  model_latency_s=gap))
            else:
                weights = [len(tc["function"]["name"]) + len(compact_json(_args(tc["function"]))) for tc in tcs]
                weights[0] += len(content)
                vs = split_total(vis, weights)
                rs = split_total(r, weights) if r is not None else [None] * len(tcs)
                ls = split_float(gap, weights) if gap is not None else [None] * len(tcs)
                group = None
                if len(tcs) > 1:
                    group, group_counter = group_counter, group_counter + 1
                for k, (tc, vk, rk, lk) in enumerate(zip(tcs, vs, rs, ls)):
                    name = tc["function"]["name"]
                    kind, irrev = tool_kind(name, domain, tags)
                    pending.call(tc.get("id") or f"__call_{j}_{k}", (name, group), f"tool_calls[{k}].id", mw.err)
                    steps.append(dict(actor=Actor.AGENT, kind=kind, tool_name=name, irreversible=irrev,
                                      new_context_tokens=vk, output_tokens=vk + (rk or 0), reasoning_tokens=rk,
                                      token_source=src, model_latency_s=lk, parallel_group=group))
            if sys_measured is None:
                ctx_before_first += vis
        elif role == "user":
            tok, src = (ctx_tok[j], TokenSource.MEASURED) if ctx_tok[j] is not None else (est[j], TokenSource.ESTIMATED)
            steps.append(dict(actor=Actor.USER, kind=StepKind.USER, new_context_tokens=tok, token_source=src,
                              user_latency_s=gap))
            if sys_measured is None:
                ctx_before_first += tok
        else:  # tool
            name, group = pending.result(m["tool_call_id"], "tool_call_id", mw.err)
            tok, src = (ctx_tok[j], TokenSource.MEASURED) if ctx_tok[j] is not None else (est[j], TokenSource.ESTIMATED)
            steps.append(dict(actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name=name, new_context_tokens=tok,
                              token_source=src, tool_latency_s=gap, parallel_group=group))
            if sys_measured is None:
                ctx_before_first += tok
    for i, s in enumerate(steps):
        s["index"] = i
    fixes: list[Repair] = []
    if sys_measured is not None and sys_measured >= 0:
        sys_tok, sys_src = sys_measured, TokenSource.MEASURED
    else:
        sys_tok, sys_src = sys_est, TokenSource.ESTIMATED
        if sys_measured is not None:
            fixes.append(Repair(file, f"{where}, message {calls[0]}", (
                f"usage.prompt_tokens {msgs[calls[0]]['usage']['prompt_tokens']} is smaller than the messages before "
                f"it ({ctx_before_first} tokens): the system prompt keeps its estimate ({sys_est} tokens)")))
    for i, dip in enumerate(dips):
        if dip:
            a = msgs[calls[i - 1]]
            fixes.append(Repair(file, f"{where}, message {calls[i]}", (
                f"usage.prompt_tokens {msgs[calls[i]]['usage']['prompt_tokens']} is below the previous call's prompt + "
                f"visible completion ({a['usage']['prompt_tokens'] + visible(a)}): the messages on both sides of it "
                "keep estimated counts")))
    reward = conv.get("reward")
    success = conv.get("success")
    if reward is not None and (not isinstance(reward, (int, float)) or isinstance(reward, bool)):
        raise w.err("reward", "a number or null", reward)
    if success is not None and not isinstance(success, bool):
        raise w.err("success", "true, false or null", success)
    meta = conv.get("metadata") or {}
    if not isinstance(meta, dict):
        raise w.err("metadata", "an object", meta)
    meta = {str(k): v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}
    meta["importer"] = "openai_chat"
    if any(dips):
        meta["usage_dips"] = sum(dips)
    tid = conv.get("task_id") or conv.get("id") or task_id or where
    d = dict(task_id=str(tid), domain=domain, source=f"{Path(file).name}#{where}",
             outcome=dict(reward=None if reward is None else float(reward), success=success),
             system_prompt_tokens=sys_tok, system_prompt_source=sys_src, steps=steps, metadata=meta)
    try:
        traj = Trajectory.model_validate(d)
    except ValidationError as e:
        raise from_validation_error(file, where, e) from None
    for r in fixes:
        report_repair(r, repairs)
    return traj


def _is_single_conversation(obj: Any) -> bool:
    return isinstance(obj, list) and bool(obj) and all(isinstance(m, dict) and "role" in m for m in obj)


def read_openai_file(path: str | os.PathLike, tags: TagMap, domain: str = "unknown", skip_bad: bool = False,
                     skipped: list[SkippedRecord] | None = None, repairs: list[Repair] | None = None) -> list[Trajectory]:
    """Every conversation of one file (at least one must import)."""
    path = str(path)
    text = files.read_text(path, files.OPENAI_FORMAT)
    files.require_content(text, path, files.OPENAI_FORMAT)
    units: list[tuple[str, Any]] = []  # (location, conversation or the error to report there)
    if Path(path).suffix.lower() in (".jsonl", ".ndjson"):
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = files.parse_json_line(line, path, lineno)
            except TraceFormatError as e:  # reported in file order below
                whole = files.wrong_format(path, files.OPENAI_FORMAT, files.kind_of(_whole(text)), "openai") if lineno == 1 else None
                if whole:  # a pretty-printed JSON file of another format
                    raise whole from None
                obj = e
            if not units and not isinstance(obj, TraceFormatError):
                err = files.wrong_format(path, files.OPENAI_FORMAT, files.kind_of(obj), "openai")
                if err:
                    raise err
            units.append((f"line {lineno}", obj))
    else:
        obj = files.parse_json(text, path, files.OPENAI_FORMAT, want="openai")
        err = files.wrong_format(path, files.OPENAI_FORMAT, files.kind_of(obj), "openai")
        if err:
            raise err
        if isinstance(obj, dict) or _is_single_conversation(obj):
            units.append(("conversation 0", obj))
        elif isinstance(obj, list):
            units.extend((f"conversation {i}", c) for i, c in enumerate(obj))
        else:
            raise TraceFormatError(path, "top level", "<json>", files.OPENAI_FORMAT, found=f"a JSON {type(obj).__name__}")
    out = []
    skipped_here: list[SkippedRecord] = []
    for where, conv in units:
        try:
            if isinstance(conv, TraceFormatError):
                raise conv
            out.append(conversation_to_trajectory(conv, file=path, where=where, tags=tags, domain=domain, repairs=repairs))
        except TraceFormatError as e:
            if not skip_bad:
                raise
            report_skipped(e, skipped_here)
    close_skips(len(out), path, skipped_here, skipped, "at least one conversation")
    return out


def _whole(text: str) -> Any:
    """The text as one JSON document, or None (to name a pretty-printed JSON file given as JSONL)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def import_openai(paths: str | os.PathLike | Iterable[str | os.PathLike], tag_map: TagMap | str | os.PathLike | None = None,
                  domain: str = "unknown", skip_bad: bool = False, skipped: list[SkippedRecord] | None = None,
                  repairs: list[Repair] | None = None,
                  progress: Callable[[int], None] | None = None) -> list[Trajectory]:
    """Import OpenAI-chat logs (JSON or JSONL). ``tag_map``: dict or JSON file of tool tags (unknown → WRITE).

    Every file must yield at least one trajectory (``NoTrajectoriesError`` otherwise); ``repairs``
    collects the explicit repairs (see importing.py), or they are emitted as warnings. ``progress(1)`` is
    called after each file.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    tags = merged_tag_map(tag_map)  # τ²-Bench tags apply when the conversation's domain matches
    out: list[Trajectory] = []
    for p in paths:
        out.extend(read_openai_file(p, tags, domain=domain, skip_bad=skip_bad, skipped=skipped, repairs=repairs))
        if progress is not None:
            progress(1)
    return out


def tau2_simulation_to_openai(sim: Mapping[str, Any], keep_usage: bool = True) -> list[dict]:
    """Rewrite a τ²-Bench simulation as an OpenAI-chat message list (used for cross-checks and fixtures).

    User-side tool activity (telecom device tools) is dropped: the agent never sees it.
    """
    out: list[dict] = []
    for m in sim["messages"]:
        if m["role"] == "user" and m.get("tool_calls"):
            continue
        if m["role"] == "tool" and m.get("requestor") == "user":
            continue
        d: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        if m["role"] == "assistant" and m.get("tool_calls"):
            d["tool_calls"] = [{"id": tc["id"], "type": "function",
                                "function": {"name": tc["name"], "arguments": json.dumps(tc["arguments"])}}
                               for tc in m["tool_calls"]]
        if m["role"] == "tool":
            d["tool_call_id"] = m["id"]
        if keep_usage and m["role"] == "assistant" and m.get("usage"):
            d["usage"] = dict(m["usage"])
        if m.get("timestamp"):
            d["timestamp"] = m["timestamp"]
        out.append(d)
    return out
