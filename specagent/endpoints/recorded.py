"""Recorded runs (τ²-Bench results, OpenAI chat logs) as the conversations a served model is teacher-forced on.

Why a reader of its own: the trace schema (`traces/schema.py`) keeps counts, not words, and
shadow verification must send the recorded words — the user's messages, the calls with their
arguments, the tools' results. This reads the same results file `traces import tau2` reads
(it is validated by that importer first, so a bad file fails with the importer's located
error) and keeps, per simulation, the messages in OpenAI chat form, the step index of each
message in the imported trajectory (the verdict log's `position`), and the imported
trajectory itself (for the recorded step's tokens).

Tools: a τ²-Bench results file records calls, not the tools' JSON schemas. Unless a tools file
is given (`--tools`, an OpenAI ``tools`` list), each tool's schema is inferred from every
recorded call to it in the file: the union of its argument names, the JSON type of each, and
as required the names present in every call. A tool the file never calls is not offered.

The system prompt is τ²-Bench's agent instruction wrapped around the domain policy the file
records (``info.environment_info.policy``), in the words of tau2's `LLMAgent`.

OpenAI chat logs (the layouts `traces import openai` reads) are read the same way: validated by that
importer, their system/developer messages as the system prompt, the rest as recorded, and the
conversation's own ``tools`` where it logs them (else inferred as above).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specagent.common.errors import InputError
from specagent.traces import files
from specagent.traces.schema import Trajectory
from specagent.traces.openai_chat import call_arguments, content_text, read_openai_file
from specagent.traces.tau2 import read_tau2_file
from specagent.traces.tool_tags import TagMap, default_tag_map

AGENT_INSTRUCTION = (
    "You are a customer service agent that helps the user according to the <policy> provided below.\n"
    "In each turn you can either:\n- Send a message to the user.\n- Make a tool call.\n"
    "You cannot do both at the same time.\n\n"
    "Try to be helpful and always follow the policy. Always make sure you generate valid JSON only.")
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))


@dataclass(frozen=True)
class RecordedTask:
    """One simulation: its OpenAI-form messages (index-aligned with the recorded ones) and where each maps."""

    task: str  # the verdict log's task id: "<domain>-<task_id>/<trial>"
    file: str
    domain: str
    system: str
    raw: tuple[dict, ...]  # the recorded τ²-Bench messages
    chat: tuple[dict | None, ...]  # the same messages as OpenAI chat messages (None: one the agent never sees)
    step_of: tuple[int, ...]  # index, in the imported trajectory, of each message's first step
    trajectory: Trajectory
    tools: tuple[dict, ...] | None = None  # the conversation's own tools (OpenAI logs that record them)

    def prefix(self, p: int) -> list[dict]:
        """The chat messages before message p that the agent saw (user-side tool activity left out)."""
        return [m for m in self.chat[:p] if m is not None]

    def agent_positions(self) -> list[int]:
        """Message indices where the agent acts on a prefix ending with the user's or a tool's message."""
        return [i for i, m in enumerate(self.raw) if i > 0 and m["role"] == "assistant" and self.raw[i - 1]["role"] != "assistant"]


def _json_type(v: Any) -> str:
    return next((name for t, name in _JSON_TYPES if isinstance(v, t)), "string")


def infer_tools(calls: list[dict]) -> list[dict]:
    """OpenAI tool definitions inferred from recorded calls (see the module docstring), sorted by name."""
    seen: dict[str, list[dict]] = {}
    for c in calls:
        args = c.get("arguments")
        seen.setdefault(c["name"], []).append(args if isinstance(args, dict) else {})
    tools = []
    for name in sorted(seen):
        argsets = seen[name]
        props: dict[str, dict] = {}
        for a in argsets:
            for k in sorted(a):
                props.setdefault(k, {"type": _json_type(a[k])})
        required = sorted(k for k in props if all(k in a for a in argsets))
        tools.append({"type": "function", "function": {
            "name": name, "description": f"τ²-Bench tool {name} (schema inferred from {len(argsets)} recorded calls)",
            "parameters": {"type": "object", "properties": dict(sorted(props.items())), "required": required}}})
    return tools


def load_tools(path: str | os.PathLike) -> list[dict]:
    """An OpenAI ``tools`` list from a JSON file, each entry checked for a function name and parameters."""
    text = files.read_text(path, "an OpenAI tools list (JSON)")
    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        tools = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep to be an OpenAI tools list", "tools") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc}); expected an OpenAI tools list", "tools") from None
    if isinstance(tools, dict) and isinstance(tools.get("tools"), list):
        tools = tools["tools"]
    if not isinstance(tools, list) or not tools:
        raise InputError(f"{path}: expected a non-empty JSON list of tools ({{'type': 'function', 'function': {{...}}}})", "tools")
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise InputError(f"{path}: tools[{i}].function.name: expected a tool name", "tools")
        if not isinstance(fn.get("parameters", {}), dict):
            raise InputError(f"{path}: tools[{i}].function.parameters: expected a JSON schema object", "tools")
    return tools


def _chat(m: dict, i: int) -> dict | None:
    if m["role"] == "tool" and m.get("requestor") == "user" or m["role"] == "user" and m.get("tool_calls"):
        return None  # user-side tool activity (telecom's device tools): outside the agent's context, as the importer keeps it
    if m["role"] == "tool":
        return {"role": "tool", "tool_call_id": m["id"], "content": m.get("content") or ""}
    if m["role"] == "user":
        return {"role": "user", "content": m.get("content") or ""}
    out: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False)}}
                             for c in m["tool_calls"]]
    return out


def read_recorded(path: str | os.PathLike, tags: TagMap | None = None) -> tuple[list[RecordedTask], list[dict]]:
    """Every simulation of a τ²-Bench results file (or conversation of an OpenAI chat log), and the tools inferred from its calls."""
    tags = tags if tags is not None else default_tag_map()
    text = files.read_text(path, files.TAU2_FORMAT)
    first = files.first_json_record(text) if Path(path).suffix.lower() in (".jsonl", ".ndjson") else None
    kind = files.kind_of(first) if first is not None else files.kind_of(_whole(text))
    if kind == "openai":
        return _read_openai(path, tags, text)
    trajs = read_tau2_file(path, tags)  # validates the file, with located errors
    data = json.loads(files.read_text(path, files.TAU2_FORMAT))
    info = data.get("info") or {}
    env = info.get("environment_info") or {}
    policy = env.get("policy") if isinstance(env.get("policy"), str) else ""
    system = f"<instructions>\n{AGENT_INSTRUCTION}\n</instructions>\n<policy>\n{policy}\n</policy>"
    tasks, calls = [], []
    for i, (sim, traj) in enumerate(zip(data["simulations"], trajs)):
        raw = sim["messages"]
        step_of, s = [], 0
        for m in raw:
            step_of.append(s)
            s += len(m["tool_calls"]) if m.get("tool_calls") else 1
            if m["role"] == "assistant":
                calls += m.get("tool_calls") or []
        if s != len(traj.steps):
            raise InputError(f"{path}: simulation {i}: {s} steps from its messages but the importer made {len(traj.steps)}; "
                             "cannot align positions", "trace")
        task = f"{traj.domain}-{traj.task_id}/{sim.get('trial', i)}"
        tasks.append(RecordedTask(task, str(path), traj.domain, system, tuple(raw), tuple(_chat(m, j) for j, m in enumerate(raw)),
                                  tuple(step_of), traj))
    return tasks, infer_tools(calls)


def _whole(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _conversations(path: str | os.PathLike, text: str) -> list[Any]:
    """The conversations of an OpenAI chat log, in the order `read_openai_file` imports them."""
    if Path(path).suffix.lower() in (".jsonl", ".ndjson"):
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    obj = json.loads(text)
    if isinstance(obj, dict) or (isinstance(obj, list) and obj and all(isinstance(m, dict) and "role" in m for m in obj)):
        return [obj]
    return list(obj)


def _tau2_form(m: dict) -> dict:
    """An OpenAI message in the recorded form shadow verification reads (τ²-Bench's: calls with parsed arguments)."""
    if m["role"] == "tool":
        return {"role": "tool", "id": m.get("tool_call_id"), "content": content_text(m.get("content"))}
    out: dict[str, Any] = {"role": m["role"], "content": content_text(m.get("content"))}
    if m["role"] == "assistant":
        out["tool_calls"] = [{"id": tc.get("id") or f"call_{k}", "name": tc["function"]["name"], "arguments": call_arguments(tc["function"])}
                             for k, tc in enumerate(m.get("tool_calls") or [])] or None
        if m.get("usage"):
            out["usage"] = m["usage"]
    return out


def _read_openai(path: str | os.PathLike, tags: TagMap, text: str) -> tuple[list[RecordedTask], list[dict]]:
    trajs = read_openai_file(path, tags)  # validates every conversation, with located errors
    tasks, calls = [], []
    for i, (conv, traj) in enumerate(zip(_conversations(path, text), trajs)):
        conv = {"messages": conv} if isinstance(conv, list) else conv
        msgs = conv["messages"]
        system = "\n\n".join(content_text(m.get("content")) for m in msgs if m["role"] in ("system", "developer"))
        raw = [_tau2_form(m) for m in msgs if m["role"] not in ("system", "developer")]
        step_of, s = [], 0
        for m in raw:
            step_of.append(s)
            s += len(m["tool_calls"]) if m.get("tool_calls") else 1
            calls += m.get("tool_calls") or []
        if s != len(traj.steps):
            raise InputError(f"{path}: conversation {i}: {s} steps from its messages but the importer made {len(traj.steps)}; "
                             "cannot align positions", "trace")
        own = tuple(conv["tools"]) if isinstance(conv.get("tools"), list) and conv["tools"] else None
        tasks.append(RecordedTask(f"{traj.task_id}/{i}", str(path), traj.domain, system, tuple(raw),
                                  tuple(_chat(m, j) for j, m in enumerate(raw)), tuple(step_of), traj, own))
    return tasks, infer_tools(calls)


def unique_stems(paths: list[Path]) -> list[str]:
    """A distinct output name per input file: its stem, with a counter where two stems coincide."""
    out, seen = [], {}
    for p in paths:
        stem = p.name.split(".")[0] or "trace"
        n = seen.get(stem, 0)
        seen[stem] = n + 1
        out.append(stem if n == 0 else f"{stem}-{n + 1}")
    return out
