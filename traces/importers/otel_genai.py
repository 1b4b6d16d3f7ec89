"""OpenTelemetry GenAI spans exported as OTLP JSON: what the OpenAI Agents SDK, Pydantic AI, OpenLLMetry and most
observability backends write when an agent is instrumented.

Why its own reader: spans are not a conversation. A run is a tree of spans — ``invoke_agent`` (an agent
invocation), ``chat``/``text_completion``/``generate_content`` (one model call: ``gen_ai.usage.*`` tokens, the
span's duration), ``execute_tool`` (one tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, its
duration) — scattered over export batches. Conventions followed: OpenTelemetry semantic conventions for
GenAI (open-telemetry/semantic-conventions ``docs/gen-ai/gen-ai-spans.md``, ``gen-ai-agent-spans.md`` and
the attribute registry, as of their move to open-telemetry/semantic-conventions-genai); OTLP/JSON encoding
(open-telemetry/opentelemetry-proto ``docs/specification.md``: hex ids, integers possibly as strings).

* Input: one ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) or JSONL of them, one per line, as
  the collector's file exporter writes (camelCase or proto field names). A trace's spans may sit in any
  batch, so the whole file's spans are read first (a compact record per GenAI span: the attributes this
  reader uses, never the rest) and then grouped.
* Trajectories: spans grouped by ``gen_ai.conversation.id`` (on the span or an ancestor; a span without one
  in a trace whose spans name exactly one takes it), else by trace;
  an agent invoked inside another agent (an ``invoke_agent`` span under another) is its own trajectory
  (``<group>/<agent name>``). Within a group, spans in start order.
* A model-call span becomes one assistant message: its output (``gen_ai.output.messages``, or OpenLLMetry's
  older ``gen_ai.completion.N.*``) as text, tool calls and reasoning; its tokens
  ``gen_ai.usage.input_tokens``/``output_tokens`` (older ``prompt_tokens``/``completion_tokens``), cached input
  ``gen_ai.usage.cache_read.input_tokens`` and ``cache_creation.input_tokens`` (also the older
  ``cache_read_input_tokens`` names) and ``gen_ai.usage.reasoning.output_tokens`` — measured; the convention
  counts cached input inside ``input_tokens`` and the shared builder checks that against the data
  (usage.py); its duration is the model latency. A model-call span nested in another (a framework span
  around a provider SDK's) is the same call: the outer one is kept, the inner one's counts fill its gaps.
* What the next call's input adds after the last assistant message (``gen_ai.input.messages``) gives the
  tool results and new user messages; an ``execute_tool`` span gives a tool call's latency (matched by
  ``gen_ai.tool.call.id``) and, where no message content was captured, the call itself (name, id,
  arguments) and its result. A user message that opens a later ``invoke_agent`` span waits the gap since
  the previous model call ended (its user latency).
* Content capture is off by default in most instrumentations: then a model call has counts and a latency
  but no text — its output tokens are still measured (``usage``), the messages between calls are sized
  from the prompt growth, and ``metadata.content`` says ``not captured``.

* OpenInference spans (Arize Phoenix and its ``openinference-instrumentation-*`` packages write OTLP with
  ``openinference.span.kind`` and flattened ``llm.*`` attributes, no ``gen_ai.*``) are read through their GenAI
  equivalents (``from_openinference``; the mapping is Arize-ai/openinference ``spec/genai/README.md``).
* The Vercel AI SDK's own telemetry (``ai.operationId``: provider calls, ``ai.toolCall``, ``ai.generateText``) is
  read through its GenAI equivalents too (``from_ai_sdk``).
* A file that gives no trajectory says what its spans were: the operation and span names not read.

What the format cannot know: usage on ``invoke_agent`` spans (a sum over its calls: not read); tool tags
(no annotations in the conventions; ``gen_ai.tool.definitions`` with MCP annotations are read where an
instrumentation adds them); task success; reasoning text (only counts, where reported); the system prompt
when content is not captured (it is then measured as the first call's prompt minus what precedes it).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import files, jsonstream
from ..errors import NoTrajectoriesError, SkippedRecord, TraceFormatError, close_skips
from ..importing import check_count
from ..openai_chat import conversation_to_trajectory
from ..schema import Trajectory
from .base import FormatFacts, ImportOptions, Importer, Match, Probe

EXPECTED = "OTLP JSON trace export ({\"resourceSpans\": [...]}, or JSONL of such requests) with GenAI spans"
MODEL_OPS = frozenset({"chat", "text_completion", "generate_content"})
#: Span names instrumentations use where gen_ai.operation.name is missing (Pydantic AI's default names included).
_NAME_OPS = (("chat ", "chat"), ("text_completion", "text_completion"), ("generate_content", "generate_content"),
             ("execute_tool", "execute_tool"), ("running tool", "execute_tool"), ("invoke_agent", "invoke_agent"),
             ("agent run", "invoke_agent"))
#: Attribute keys kept from a span (everything else — resource attributes, headers, URLs — is dropped unread).
_KEEP = re.compile(r"^(gen_ai\.|llm\.usage\.|llm\.request\.type$|tool_arguments$|tool_response$|error\.type$)")
#: OpenLLMetry's older operation attribute (``llm.request.type``) on spans without gen_ai.operation.name.
_LLM_REQUEST_TYPES = {"chat": "chat", "completion": "text_completion"}
_USAGE = {
    "input": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens"),
    "output": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.usage.completion_tokens"),
    "cache_read": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
                   "gen_ai.usage.input_tokens.cached"),
    "cache_creation": ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
                       "gen_ai.usage.input_tokens.cache_write"),
    "reasoning": ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
                  "gen_ai.usage.output_tokens.reasoning"),
}
_JSONL = (".jsonl", ".ndjson")
_LEAD = re.compile(r"\s*")
_NONSPACE = re.compile(r"\S")


#: OpenInference (Arize Phoenix, the openinference-instrumentation-* packages): its span kind, the attributes kept
#: from its spans, and each one read as its OpenTelemetry GenAI equivalent (Arize-ai/openinference
#: spec/genai/README.md, "OpenInference ↔ OpenTelemetry GenAI Semantic Conventions", sections 1, 2 and 3).
_OI_KIND = "openinference.span.kind"
_OI_KEEP = re.compile(r"^(openinference\.span\.kind$|llm\.|session\.id$|tool\.|agent\.name$|input\.value$|"
                      r"output\.value$|error\.type$)")
_OI_OPS = {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent"}
_OI_SAME = {"llm.token_count.prompt": "gen_ai.usage.input_tokens",
            "llm.token_count.completion": "gen_ai.usage.output_tokens",
            "llm.token_count.prompt_details.cache_read": "gen_ai.usage.cache_read.input_tokens",
            "llm.token_count.prompt_details.cache_write": "gen_ai.usage.cache_creation.input_tokens",
            "llm.token_count.completion_details.reasoning": "gen_ai.usage.reasoning.output_tokens",
            "llm.model_name": "gen_ai.request.model", "session.id": "gen_ai.conversation.id",
            "tool.name": "gen_ai.tool.name", "tool.id": "gen_ai.tool.call.id", "agent.name": "gen_ai.agent.name",
            "error.type": "error.type"}
_OI_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_OI_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(?:function\.)?(id|name|arguments)$")
_OI_PART = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_OI_TOOL = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")


def from_openinference(attrs: dict[str, Any]) -> dict[str, Any]:
    """An OpenInference span's attributes as the GenAI attributes this reader reads: its kind as the operation (LLM:
    chat, TOOL: execute_tool, AGENT: invoke_agent; CHAIN and the rest: none), token counts, model, session, tool name,
    id, arguments (``input.value``) and result (``output.value``), its flattened messages as OpenLLMetry's flattened
    ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (the same layout), and its tools as ``gen_ai.tool.definitions``."""
    out = {new: attrs[old] for old, new in _OI_SAME.items() if old in attrs}
    kind = attrs.get(_OI_KIND)
    op = _OI_OPS.get(kind.upper()) if isinstance(kind, str) else None
    if op is not None:
        out["gen_ai.operation.name"] = op
    if op == "execute_tool":
        for old, new in (("input.value", "gen_ai.tool.call.arguments"), ("output.value", "gen_ai.tool.call.result")):
            if old in attrs:
                out[new] = attrs[old]
    parts: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    tools: list[tuple[int, Any]] = []
    for k, v in attrs.items():
        if (t := _OI_TOOL.match(k)) is not None:
            tools.append((int(t.group(1)), _json_attr(v)))
            continue
        m = _OI_MESSAGE.match(k)
        if m is None:
            continue
        which, i, rest = m.groups()
        prefix = f"gen_ai.{'prompt' if which == 'input' else 'completion'}.{i}."
        if (c := _OI_CALL.match(rest)) is not None:
            out[f"{prefix}tool_calls.{c.group(1)}.{c.group(2)}"] = v
        elif (p := _OI_PART.match(rest)) is not None:  # a message given as typed contents: its text parts, in order
            parts[prefix].append((int(p.group(1)), v))
        elif rest in ("role", "content", "tool_call_id"):
            out[prefix + rest] = v
    for prefix, texts in parts.items():
        out.setdefault(prefix + "content", "".join(t for _, t in sorted(texts) if isinstance(t, str)))
    if tools:
        out["gen_ai.tool.definitions"] = [d for _, d in sorted(tools, key=lambda x: x[0])]
    return out


#: The Vercel AI SDK's own telemetry (ai-sdk.dev docs/ai-sdk-core/telemetry, "Collected Data"): every span names its
#: ``ai.operationId``; a provider call (``ai.generateText.doGenerate``, ``ai.streamText.doStream``, the object
#: functions' likewise) is a model call carrying ``gen_ai.usage.*`` beside ``ai.prompt.messages``,
#: ``ai.response.text`` and ``ai.response.toolCalls``; ``ai.toolCall`` a tool call; ``ai.generateText`` (one or more
#: provider calls) an agent run. Names of SDK 4 and 5 both (args/input, result/output, promptTokens/inputTokens).
_AI_OPERATION = "ai.operationId"
_AI_KEEP = re.compile(r"^(ai\.operationId$|ai\.prompt\.messages$|ai\.prompt\.tools$|ai\.response\.(text|toolCalls)$|"
                      r"ai\.toolCall\.|ai\.usage\.|ai\.model\.id$|gen_ai\.|error\.type$)")
_AI_USAGE = {"gen_ai.usage.input_tokens": ("ai.usage.inputTokens", "ai.usage.promptTokens"),
             "gen_ai.usage.output_tokens": ("ai.usage.outputTokens", "ai.usage.completionTokens"),
             "gen_ai.usage.reasoning.output_tokens": ("ai.usage.reasoningTokens",),
             "gen_ai.usage.cache_read.input_tokens": ("ai.usage.cachedInputTokens",)}


def _ai_parts(content: Any) -> list[dict]:
    """An AI SDK message's content (a string, or text / tool-call / tool-result parts) as GenAI message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    out = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t in ("text", "reasoning") and isinstance(p.get("text"), str):
            out.append({"type": t, "content": p["text"]})
        elif t == "tool-call":
            out.append({"type": "tool_call", "id": p.get("toolCallId"), "name": p.get("toolName"),
                        "arguments": p.get("input", p.get("args"))})
        elif t == "tool-result":
            out.append({"type": "tool_call_response", "id": p.get("toolCallId"),
                        "response": p.get("output", p.get("result"))})
    return out


def from_ai_sdk(attrs: dict[str, Any]) -> dict[str, Any]:
    """A Vercel AI SDK span's attributes as the GenAI attributes this reader reads (``_AI_OPERATION``'s note)."""
    out = {k: v for k, v in attrs.items() if k.startswith("gen_ai.") or k == "error.type"}
    op_id = attrs.get(_AI_OPERATION)
    op = None
    if isinstance(op_id, str):
        op = ("chat" if op_id.endswith((".doGenerate", ".doStream")) else "execute_tool" if op_id == "ai.toolCall"
              else "invoke_agent" if op_id.count(".") == 1 and op_id.split(".")[1] in (
                  "generateText", "streamText", "generateObject", "streamObject") else None)
    if op is None:
        out.pop("gen_ai.operation.name", None)
        return out
    out["gen_ai.operation.name"] = op
    if op == "execute_tool":
        for new, olds in (("gen_ai.tool.name", ("ai.toolCall.name",)), ("gen_ai.tool.call.id", ("ai.toolCall.id",)),
                          ("gen_ai.tool.call.arguments", ("ai.toolCall.input", "ai.toolCall.args")),
                          ("gen_ai.tool.call.result", ("ai.toolCall.output", "ai.toolCall.result"))):
            v = _get(attrs, *olds)
            if v is not None:
                out[new] = v
        return out
    if op != "chat":
        return out
    for new, olds in _AI_USAGE.items():
        if new not in out and (v := _get(attrs, *olds)) is not None:
            out[new] = v
    if "gen_ai.request.model" not in out and isinstance(attrs.get("ai.model.id"), str):
        out["gen_ai.request.model"] = attrs["ai.model.id"]
    prompt = _json_attr(attrs.get("ai.prompt.messages"))
    if isinstance(prompt, list):
        out["gen_ai.input.messages"] = [{"role": m.get("role"), "parts": _ai_parts(m.get("content"))}
                                        for m in prompt if isinstance(m, dict)]
    text, calls = attrs.get("ai.response.text"), _json_attr(attrs.get("ai.response.toolCalls"))
    if text is not None or calls is not None:
        parts = [{"type": "text", "content": text}] if isinstance(text, str) and text else []
        parts += _ai_parts([{**c, "type": "tool-call"} for c in calls if isinstance(c, dict)] if isinstance(calls, list)
                           else [])
        out["gen_ai.output.messages"] = [{"role": "assistant", "parts": parts}]
    return out


def _get(d: dict, *keys: str) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    return None


class OTelGenAI(Importer):
    name = "otel-genai"
    title = ("OpenTelemetry GenAI spans as OTLP JSON (collector file exporter; OpenAI Agents SDK, Pydantic AI, "
             "OpenLLMetry instrumentations); OpenInference (Arize Phoenix) and Vercel AI SDK spans through their GenAI "
             "equivalents")
    spec = ("open-telemetry/semantic-conventions docs/gen-ai (gen-ai-spans.md, gen-ai-agent-spans.md, attribute "
            "registry); open-telemetry/opentelemetry-proto docs/specification.md (OTLP/JSON)")
    facts = FormatFacts(
        tokens="gen_ai.usage.* per model-call span (cached input inside input_tokens per the conventions; the data "
               "decides); spans without both counts: estimated from captured text",
        latency="span durations: model calls (chat spans), tool calls (execute_tool spans), user gaps between "
                "invoke_agent spans",
        tags="MCP annotations in gen_ai.tool.definitions where an instrumentation adds them; else --tags",
        reasoning="gen_ai.usage.reasoning.output_tokens; reasoning parts of captured output; else inferred",
        success="not in the format",
    )

    def sniff(self, probe: Probe) -> Match | None:
        first = probe.first
        if isinstance(first, dict) and isinstance(_get(first, "resourceSpans", "resource_spans"), list):
            if "gen_ai." in probe.head or probe.partial:
                return Match(1.0, "an OTLP trace export with GenAI attributes")
            if _OI_KIND in probe.head:  # Arize Phoenix / OpenInference instrumentations
                return Match(1.0, "an OTLP trace export with OpenInference attributes (openinference.span.kind), "
                                  "read as their OpenTelemetry GenAI equivalents")
            if _AI_OPERATION in probe.head:
                return Match(1.0, "an OTLP trace export of the Vercel AI SDK's telemetry (ai.operationId), read as "
                                  "its OpenTelemetry GenAI equivalents")
            return Match(0.6, "an OTLP trace export, but no gen_ai.* attribute in its first part")
        if probe.partial and re.match(r'\s*\{\s*"resource_?[sS]pans"', probe.head):
            return Match(1.0, "an OTLP trace export (resourceSpans)")
        return None

    def read(self, path: str | os.PathLike, options: ImportOptions) -> Iterator[Trajectory]:
        path = str(path)
        store = _Store(path)
        skipped_here: list[SkippedRecord] = []
        for where, req in _requests(path):
            try:
                if isinstance(req, TraceFormatError):
                    raise req
                store.add_request(req, where)
            except TraceFormatError as e:
                options.skip(e, skipped_here)
        n = 0
        for key, spans in store.groups():
            try:
                traj = _trajectory(key, spans, store, path, options, self.name)
            except TraceFormatError as e:
                options.tagger.marks()
                options.skip(e, skipped_here)
                continue
            n += 1
            yield traj
        if not n and not skipped_here:
            raise store.nothing_read()
        close_skips(n, path, skipped_here, options.skipped, "at least one trajectory of GenAI model-call spans")


def _requests(path: str) -> Iterator[tuple[str, Any]]:
    """(location, export request — or the located error) of each request: JSONL lines, or the `resourceSpans` items
    of one JSON document (read one at a time)."""
    jsonl = os.path.splitext(path)[1].lower() in _JSONL
    if not jsonl:
        text = files.read_text(path, EXPECTED)
        files.require_content(text, path, EXPECTED)
        start = _LEAD.match(text).end()
        nl = text.find("\n", start)
        try:  # a whole object on the first line and more after it: JSONL (the collector's file exporter)
            json.loads(text[start:nl] if nl >= 0 else text[start:])
            jsonl = nl >= 0 and _NONSPACE.search(text, nl) is not None
        except (ValueError, RecursionError):
            jsonl = False
        if not jsonl:
            try:
                top, items = jsonstream.members(text, "resourceSpans")
                if items is None:
                    top, items = jsonstream.members(text, "resource_spans")
                if items is None:
                    raise TraceFormatError(path, "top level", "resourceSpans", "a list of resource spans (OTLP JSON)",
                                           found=f"an object with keys {sorted(top)[:8]}")
                for i, rs in enumerate(items):
                    yield f"resourceSpans[{i}]", {"resourceSpans": [rs]}
            except json.JSONDecodeError as e:
                raise TraceFormatError(path, f"line {e.lineno}", "<json>", f"valid JSON ({e.msg} at column {e.colno})") from None
            return
        del text
    for lineno, line in files.iter_lines(path, EXPECTED):
        if line.strip():
            try:
                yield f"line {lineno}", files.parse_json_line(line, path, lineno)
            except TraceFormatError as e:
                yield f"line {lineno}", e


def _any_value(v: Any) -> Any:
    """An OTLP AnyValue as a Python value (int64 may come as a string: proto3 JSON mapping)."""
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "string_value"):
        if k in v:
            return v[k]
    for k in ("intValue", "int_value"):
        if k in v:
            try:
                return int(v[k])
            except (TypeError, ValueError):
                return v[k]
    for k in ("doubleValue", "double_value", "boolValue", "bool_value", "bytesValue", "bytes_value"):
        if k in v:
            return v[k]
    arr = _get(v, "arrayValue", "array_value")
    if isinstance(arr, dict):
        return [_any_value(x) for x in arr.get("values") or []]
    kv = _get(v, "kvlistValue", "kvlist_value")
    if isinstance(kv, dict):
        return {str(x.get("key")): _any_value(x.get("value")) for x in kv.get("values") or [] if isinstance(x, dict)}
    return None


def _attributes(raw: Any, err, field_name: str, keep: re.Pattern = _KEEP) -> dict[str, Any]:
    """The kept attributes (those `keep` matches) of an OTLP key-value list."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise err(field_name, "a list of {key, value} attributes", type(raw).__name__)
    out = {}
    for kv in raw:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise err(field_name, "attributes as {key, value} objects", kv)
        if keep.match(kv["key"]):
            out[kv["key"]] = _any_value(kv.get("value"))
    return out


#: OTLP's span times are fixed64 (opentelemetry-proto trace.proto): a larger value is no time an exporter wrote
_MAX_FIXED64 = 2**64 - 1
#: ... and UNIX epoch nanoseconds (trace.proto: start_time_unix_nano): one before 2000-01-01 is another unit (Unix
#: seconds, milliseconds or microseconds, ~1.7e9/e12/e15 today) or a clock since boot, whose gaps would be read 10^3-10^9
#: times too short
_EARLIEST_NS = 946_684_800 * 10**9


def _nanos(v: Any, err, field_name: str) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity, which a JSON decoder lets through
        raise err(field_name, "Unix nanoseconds (an integer or a decimal string)", v) from None
    if isinstance(v, bool) or not 0 <= n <= _MAX_FIXED64:
        raise err(field_name, "Unix nanoseconds (an integer or a decimal string, 0 to 2^64-1: OTLP's fixed64)", v)
    if n < _EARLIEST_NS:
        unit = next((u for u, lo in (("microseconds", 10**14), ("milliseconds", 10**11), ("seconds", 10**8)) if n >= lo), None)
        said = f"Unix {unit}?" if unit else "a clock that is not Unix time, or unset?"
        raise err(field_name, f"UNIX epoch nanoseconds, as OTLP writes them: a time after 2000-01-01 (this: {said})", v)
    return n


@dataclass
class _Span:
    trace: str
    sid: str
    parent: str | None
    name: str
    op: str | None
    start: int
    end: int
    attrs: dict[str, Any]
    where: str
    error: bool | None = None
    inner: list["_Span"] = field(default_factory=list)

    def label(self) -> str:
        return f"{self.where}, span {self.sid} ({self.name})"

    def err(self, field_name: str, expected: str, got: Any = None, file: str = "") -> TraceFormatError:
        return TraceFormatError(file, self.label(), field_name, expected, got)


def _operation(name: str, attrs: dict) -> str | None:
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op
    if attrs.get("llm.request.type") in _LLM_REQUEST_TYPES:
        return _LLM_REQUEST_TYPES[attrs["llm.request.type"]]
    for prefix, o in _NAME_OPS:
        if name.startswith(prefix):
            return o
    return None


class _Store:
    """Every span's parent and conversation id, and a compact record of each GenAI span."""

    def __init__(self, path: str):
        self.path = path
        self.parent: dict[tuple[str, str], str | None] = {}
        self.conv: dict[tuple[str, str], str] = {}
        self.genai: dict[tuple[str, str], _Span] = {}
        self.spans = 0
        #: spans of an LLM library this does not read as a model call, tool call or agent run ("operation 'x'",
        #: "span 'y'"): what a file that gives nothing is told
        self.unread: Counter[str] = Counter()

    def add_request(self, req: Any, where: str) -> None:
        def rerr(field_name: str, expected: str, got: Any = None) -> TraceFormatError:
            return TraceFormatError(self.path, where, field_name, expected, got)

        if not isinstance(req, dict):
            raise rerr("<request>", "an OTLP export request object", type(req).__name__)
        rss = _get(req, "resourceSpans", "resource_spans")
        if not isinstance(rss, list):
            raise rerr("resourceSpans", "a list of resource spans (OTLP JSON)", type(rss).__name__)
        staged: list[tuple[tuple[str, str], Any, str | None, _Span | None]] = []
        for i, rs in enumerate(rss):
            scopes = _get(rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans") if isinstance(rs, dict) else None
            if not isinstance(scopes, list):
                raise rerr(f"resourceSpans[{i}].scopeSpans", "a list of scope spans", type(scopes).__name__)
            for j, ss in enumerate(scopes):
                spans = ss.get("spans") if isinstance(ss, dict) else None
                if not isinstance(spans, list):
                    raise rerr(f"resourceSpans[{i}].scopeSpans[{j}].spans", "a list of spans", type(spans).__name__)
                for k, sp in enumerate(spans):
                    staged.append(self._span(sp, f"{where}, resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"))
        for key, parent, conv, rec in staged:  # the whole request parsed: commit it
            self.spans += 1
            self.parent[key] = parent
            if conv:
                self.conv[key] = conv
            if rec is not None:
                self.genai[key] = rec

    def _note_unread(self, name: str, op: str | None, keys: set[str]) -> None:
        """Count a span of an LLM library this reads as none of its operations (its attribute `keys` name one)."""
        if op is not None:
            self.unread[f"operation '{op}'"] += 1
        elif any(k.startswith(("gen_ai.", "llm.", "ai.")) for k in keys):
            self.unread[f"span '{name}'"] += 1

    def nothing_read(self) -> NoTrajectoriesError:
        """Why a file gave no trajectory: what its spans were, so the user knows whether a format is missing."""
        found = [f"none among {self.spans} span(s)" + (f" ({len(self.genai)} tool or agent span(s), no model call)"
                                                       if self.genai else "")]
        if self.unread:
            found.append("not read: " + ", ".join(f"{k} x{n}" for k, n in self.unread.most_common(5)))
        return NoTrajectoriesError(
            self.path, "file", "<spans>", "model-call spans (gen_ai.operation.name " + "/".join(sorted(MODEL_OPS)) +
            ", or spans named so), grouped with their execute_tool and invoke_agent spans",
            found="; ".join(found))

    def _span(self, sp: Any, where: str) -> tuple[tuple[str, str], str | None, str | None, _Span | None]:
        def err(field_name: str, expected: str, got: Any = None) -> TraceFormatError:
            return TraceFormatError(self.path, where, field_name, expected, got)

        if not isinstance(sp, dict):
            raise err("<span>", "a span object", type(sp).__name__)
        trace, sid = _get(sp, "traceId", "trace_id"), _get(sp, "spanId", "span_id")
        if not isinstance(trace, str) or not trace or not isinstance(sid, str) or not sid:
            raise err("traceId/spanId", "hex trace and span ids", {"traceId": trace, "spanId": sid})
        parent = _get(sp, "parentSpanId", "parent_span_id") or None
        if parent is not None and not isinstance(parent, str):  # a dict or list: named, not a crash on the id lookups
            raise err("parentSpanId", "a hex span id, an empty string or null", parent)
        name = sp.get("name") if isinstance(sp.get("name"), str) else ""
        raw = sp.get("attributes")
        keys = {kv["key"] for kv in raw if isinstance(kv, dict) and isinstance(kv.get("key"), str)} \
            if isinstance(raw, list) else set()
        oi, ai_sdk = _OI_KIND in keys, _AI_OPERATION in keys
        attrs = _attributes(raw, err, "attributes", keep=_OI_KEEP if oi else _AI_KEEP if ai_sdk else _KEEP)
        if oi:
            attrs = from_openinference(attrs)
        elif ai_sdk:
            attrs = from_ai_sdk(attrs)
        for e_i, ev in enumerate(sp.get("events") or []):  # the conventions' event carrying the messages
            if isinstance(ev, dict) and ev.get("name") == "gen_ai.client.inference.operation.details":
                for k, v in _attributes(ev.get("attributes"), err, f"events[{e_i}].attributes").items():
                    attrs.setdefault(k, v)
        conv = attrs.get("gen_ai.conversation.id")
        conv = conv if isinstance(conv, str) and conv else None
        op = _operation(name, attrs)
        if op not in MODEL_OPS and op not in ("execute_tool", "invoke_agent"):
            self._note_unread(name, op, keys)
        rec = None
        if op in MODEL_OPS or op in ("execute_tool", "invoke_agent"):
            start = _nanos(_get(sp, "startTimeUnixNano", "start_time_unix_nano"), err, "startTimeUnixNano")
            end = _nanos(_get(sp, "endTimeUnixNano", "end_time_unix_nano"), err, "endTimeUnixNano")
            if end < start:
                raise err("endTimeUnixNano", f"a time no earlier than startTimeUnixNano ({start})", end)
            status = sp.get("status") if isinstance(sp.get("status"), dict) else {}
            code = status.get("code")
            error = (True if code in (2, "STATUS_CODE_ERROR") or attrs.get("error.type")
                     else False if code in (1, "STATUS_CODE_OK") else None)
            rec = _Span(trace, sid, parent, name, op, start, end, attrs, where, error)
        return (trace, sid), parent, conv, rec

    def _ancestors(self, key: tuple[str, str]) -> Iterator[tuple[str, str]]:
        seen = {key}
        p = self.parent.get(key)
        while p:
            k = (key[0], p)
            if k in seen:  # a cycle in hostile input
                return
            seen.add(k)
            yield k
            p = self.parent.get(k)

    def groups(self) -> Iterator[tuple[str, list[_Span]]]:
        """(trajectory key, its model-call, tool and agent spans in start order), keys in first-start order."""
        out: dict[str, list[_Span]] = defaultdict(list)
        by_trace: dict[str, set[str]] = defaultdict(set)
        for (trace, _), c in self.conv.items():
            by_trace[trace].add(c)
        for key, rec in self.genai.items():
            chain = list(self._ancestors(key))
            conv = self.conv.get(key) or next((self.conv[a] for a in chain if a in self.conv), None)
            if conv is None and len(by_trace[key[0]]) == 1:  # a tool span outside the tree that names it
                conv = next(iter(by_trace[key[0]]))
            group = f"conversation {conv}" if conv else f"trace {key[0]}"
            agents = [self.genai[a] for a in chain if a in self.genai and self.genai[a].op == "invoke_agent"]
            if rec.op == "invoke_agent":
                agents = [rec] + agents
            nested = [str(a.attrs.get("gen_ai.agent.name") or a.name) for a in reversed(agents)][1:]
            if rec.op in MODEL_OPS and any(a in self.genai and self.genai[a].op in MODEL_OPS for a in chain):
                outer = next(self.genai[a] for a in reversed(chain) if a in self.genai and self.genai[a].op in MODEL_OPS)
                outer.inner.append(rec)
                continue
            out["/".join([group, *nested])].append(rec)
        ordered = sorted(out.items(), key=lambda kv: min(s.start for s in kv[1]))
        for k, spans in ordered:
            spans.sort(key=lambda s: (s.start, s.end))
            if any(s.op in MODEL_OPS for s in spans):
                yield k, spans


def _json_attr(v: Any) -> Any:
    """A structured attribute recorded as a JSON string (allowed on spans by the conventions), parsed."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _legacy_messages(attrs: dict, prefix: str) -> list[dict] | None:
    """OpenLLMetry's flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes as messages."""
    pat = re.compile(rf"^{re.escape(prefix)}\.(\d+)\.(.+)$")
    by: dict[int, dict[str, Any]] = defaultdict(dict)
    for k, v in attrs.items():
        m = pat.match(k)
        if m:
            by[int(m.group(1))][m.group(2)] = v
    if not by:
        return None
    out = []
    for i in sorted(by):
        d = by[i]
        parts: list[dict] = []
        if d.get("content") is not None:
            parts.append({"type": "text", "content": d["content"] if isinstance(d["content"], str) else json.dumps(d["content"])})
        calls: dict[int, dict[str, Any]] = defaultdict(dict)
        for k, v in d.items():
            m = re.match(r"^tool_calls\.(\d+)\.(id|name|arguments)$", k)
            if m:
                calls[int(m.group(1))][m.group(2)] = v
        for j in sorted(calls):
            parts.append({"type": "tool_call", **calls[j]})
        role = d.get("role") or ("assistant" if prefix.endswith("completion") else "user")
        if role == "tool" and d.get("tool_call_id"):
            parts = [{"type": "tool_call_response", "id": d["tool_call_id"], "response": d.get("content", "")}]
        out.append({"role": role, "parts": parts})
    return out


def _messages(span: _Span, which: str, file: str) -> list[dict] | None:
    """A span's input or output messages (``gen_ai.input.messages`` / ``output.messages``, else the legacy flattened
    attributes), as [{role, parts}]; None when not captured. Instrumentations that record the text itself (a string
    that is not JSON) or one message object instead of the conventions' list are read as that one message: the
    text is what the span recorded, and it only sizes the step."""
    v = _json_attr(span.attrs.get(f"gen_ai.{which}.messages"))
    if v is None:
        v = _legacy_messages(span.attrs, "gen_ai.prompt" if which == "input" else "gen_ai.completion")
    if v is None:
        return None
    if isinstance(v, str):
        v = [{"role": "user" if which == "input" else "assistant", "parts": [{"type": "text", "content": v}]}]
    elif isinstance(v, dict) and "role" in v:
        v = [v]
    if not isinstance(v, list) or not all(isinstance(m, dict) for m in v):
        raise span.err(f"gen_ai.{which}.messages", "a list of {role, parts} messages", v, file)
    return v


def _part_text(p: dict) -> str:
    for k in ("content", "text"):
        if isinstance(p.get(k), str):
            return p[k]
    return ""


def _content(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "".join(_part_text(p) for p in parts if isinstance(p, dict) and p.get("type") in ("text", None))


def _stringify(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else json.dumps(v, ensure_ascii=False)


def _usage(span: _Span, file: str) -> dict | None:
    """``usage`` for the shared builder from a model-call span (its nested duplicates fill missing counts)."""
    vals: dict[str, int | None] = {}
    for what, keys in _USAGE.items():
        v, key = None, keys[0]
        for s in [span, *span.inner]:
            key = next((k for k in keys if s.attrs.get(k) is not None), None)
            if key is not None:
                v = s.attrs[key]
                break
        vals[what] = None if v is None else check_count(v, key, lambda f, e, g: span.err(f, e, g, file))
    if vals["input"] is None or vals["output"] is None:
        return None
    u: dict[str, Any] = {"input_tokens": vals["input"], "output_tokens": vals["output"]}
    if vals["cache_read"]:
        u["cache_read_input_tokens"] = vals["cache_read"]
    if vals["cache_creation"]:
        u["cache_creation_input_tokens"] = vals["cache_creation"]
    if vals["reasoning"] is not None:
        if vals["reasoning"] > vals["output"]:
            raise span.err(_USAGE["reasoning"][0], "at most gen_ai.usage.output_tokens", vals["reasoning"], file)
        u["output_tokens_details"] = {"reasoning_tokens": vals["reasoning"]}
    return u


def _seconds(a: int, b: int) -> float:
    return (b - a) / 1e9


def _trajectory(key: str, spans: list[_Span], store: _Store, path: str, options: ImportOptions,
                importer: str) -> Trajectory:
    conv = _SpanConversation(spans, path).conversation(key)
    return conversation_to_trajectory(conv, file=path, where=key, domain=options.domain or "unknown",
                                      repairs=options.repairs, tagger=options.tagger, importer=importer)


class _SpanConversation:
    """One group's spans as a conversation for the shared builder, its state named: the messages so far, the last
    assistant message and its call ids still without a result, the tool spans already used, and what was counted."""

    def __init__(self, spans: list[_Span], path: str):
        self.path = path
        self.counts: Counter[str] = Counter()
        self.models = [s for s in spans if s.op in MODEL_OPS]
        self.tools = [s for s in spans if s.op == "execute_tool"]
        self.agents = [s for s in spans if s.op == "invoke_agent"]
        self.tool_by_id = {str(s.attrs["gen_ai.tool.call.id"]): s for s in self.tools if s.attrs.get("gen_ai.tool.call.id")}
        self.used_tools: set[int] = set()
        self.msgs: list[dict] = []
        self.pending: list[str] = []  # call ids of the last assistant message still without a result
        self.last: dict | None = None  # the last assistant message
        self.last_end: int | None = None  # the last model call's end and start
        self.last_start = 0
        self.captured = False
        self.definitions: list = []

    def conversation(self, key: str) -> dict:
        """The conversation (messages, tool definitions, task id, metadata) the shared builder reads."""
        for c in self.models:
            self._model_call(c)
        self._flush_tools(None)
        for m in self.msgs:
            m.pop("from_output", None)
        task = key.split(" ", 1)[1] if " " in key else key
        return {"messages": self.msgs, "tools": [t for t in self.definitions if isinstance(t, dict)], "task_id": task,
                "metadata": self._metadata(key)}

    def _tool_message(self, cid: str, content: str, span: _Span | None) -> dict:
        m: dict[str, Any] = {"role": "tool", "tool_call_id": cid, "content": content}
        if span is not None:
            self.used_tools.add(id(span))
            m["latency_s"] = _seconds(span.start, span.end)
            if span.error is not None:
                m["is_error"] = span.error
        self.pending.remove(cid)
        return m

    def _flush_tools(self, before: int | None) -> None:
        """Tool spans that ran since the last model call (and before `before`) answer its calls; where its output
        was not captured, they are its calls."""
        window = [s for s in self.tools if id(s) not in self.used_tools
                  and (self.last_end is None or s.start >= self.last_start) and (before is None or s.start < before)]
        for s in window:
            if self.last is None:
                self.counts["tool_spans_before_first_call"] += 1
                self.used_tools.add(id(s))
                continue
            cid = str(s.attrs.get("gen_ai.tool.call.id") or f"call_{len(self.msgs)}_{s.sid}")
            name = s.attrs.get("gen_ai.tool.name") or s.name.removeprefix("execute_tool ").strip() or "unknown_tool"
            if cid not in self.pending:
                if self.last.get("from_output"):
                    self.counts["tool_spans_unmatched"] += 1
                    self.used_tools.add(id(s))
                    continue
                args = _json_attr(s.attrs.get("gen_ai.tool.call.arguments", s.attrs.get("tool_arguments")))
                self.last.setdefault("tool_calls", []).append({"id": cid, "type": "function", "function": {
                    "name": str(name), "arguments": _stringify(args) or "{}"}})
                self.pending.append(cid)
            result = s.attrs.get("gen_ai.tool.call.result", s.attrs.get("tool_response"))
            self.msgs.append(self._tool_message(cid, _stringify(_json_attr(result)), s))

    def _captured_messages(self, c: _Span, which: str) -> list[dict] | None:
        """A model call's input or output messages, else those of the first nested duplicate that captured them."""
        found = _messages(c, which, self.path)
        if found is None:
            found = next((m for m in (_messages(i, which, self.path) for i in c.inner) if m is not None), None)
        return found

    def _model_call(self, c: _Span) -> None:
        """One model call: the messages its input adds since the last call, then its answer."""
        inputs = self._captured_messages(c, "input")
        outputs = self._captured_messages(c, "output")
        self.captured = self.captured or inputs is not None or outputs is not None
        if not self.definitions:
            defs = _json_attr(c.attrs.get("gen_ai.tool.definitions"))
            self.definitions = defs if isinstance(defs, list) else []
        if self.last is None:
            new = self._opening(c, inputs or [])
        else:
            if not inputs:  # nothing captured: the tool spans since the last call are its calls and results
                self._flush_tools(c.start)
            tail = inputs or []
            k = max((i for i, m in enumerate(tail) if m.get("role") == "assistant"), default=-1)
            new = tail[k + 1:]
        for m in new:
            self._input_message(m, c)
        if self.last is not None and inputs:
            self._flush_tools(c.start)  # tool spans whose results the input did not show
        self._answer(c, outputs)

    def _opening(self, c: _Span, history: list[dict]) -> list[dict]:
        """The first call's system prompt (its instructions and system/developer messages), appended; the rest of its
        input returned."""
        sys_text = _content(_json_attr(c.attrs.get("gen_ai.system_instructions")))
        sys_text += "".join(_content(m.get("parts")) for m in history if m.get("role") in ("system", "developer"))
        if sys_text:
            self.msgs.append({"role": "system", "content": sys_text})
        return [m for m in history if m.get("role") not in ("system", "developer")]

    def _input_message(self, m: dict, c: _Span) -> None:
        """One message a call's input adds: tool results (matched to the pending calls), a user message (waiting the
        gap since the last call where an invoke_agent span opens it), or replayed history before the first call."""
        role = m.get("role")
        parts = m.get("parts") if isinstance(m.get("parts"), list) else []
        if role == "tool" or any(isinstance(p, dict) and p.get("type") == "tool_call_response" for p in parts):
            for p in parts:
                if not (isinstance(p, dict) and p.get("type") == "tool_call_response"):
                    continue
                cid = str(p.get("id"))
                if cid not in self.pending:
                    self.counts["tool_results_unmatched"] += 1
                    continue
                self.msgs.append(self._tool_message(cid, _stringify(p.get("response")), self.tool_by_id.get(cid)))
        elif role == "user":
            um: dict[str, Any] = {"role": "user", "content": _content(parts)}
            last_end = self.last_end
            opener = [a for a in self.agents if last_end is not None and last_end <= a.start <= c.start]
            if opener:
                um["latency_s"] = _seconds(last_end, opener[0].start)
            self.msgs.append(um)
        elif role == "assistant" and self.last is None:  # earlier turns replayed as history: no usage of theirs
            self.counts["history_messages"] += 1
            self.msgs.append(_assistant(parts, None, None))
            self.pending = [t["id"] for t in self.msgs[-1].get("tool_calls", [])]

    def _answer(self, c: _Span, outputs: list[dict] | None) -> None:
        """The call's assistant message: its output parts, usage and latency; its tool calls become the pending ones."""
        out_parts = [p for m in outputs or [] if m.get("role", "assistant") == "assistant"
                     for p in (m.get("parts") if isinstance(m.get("parts"), list) else [])]
        usage = _usage(c, self.path)
        if usage is None:
            self.counts["model_spans_without_usage"] += 1
        self.counts["nested_model_spans"] += len(c.inner)
        last = self.last = _assistant(out_parts, usage, _seconds(c.start, c.end))
        last["from_output"] = outputs is not None
        if outputs is None:
            last["text_captured"] = False  # its reasoning is unknown, not the whole output (usage.split_completion)
        self.msgs.append(last)
        self.pending = [t["id"] for t in last.get("tool_calls", [])]
        self.last_end, self.last_start = c.end, c.start

    def _metadata(self, key: str) -> dict[str, Any]:
        """The counts, the grouping, the first call's trace, model and provider, the agent's name, content capture."""
        first = self.models[0]
        meta: dict[str, Any] = {k: v for k, v in self.counts.items() if v}
        meta["grouped_by"] = key.split(" ", 1)[0]
        meta["trace_id"] = first.trace
        meta["content"] = "captured" if self.captured else "not captured"
        for attr, name in (("gen_ai.request.model", "model"), ("gen_ai.response.model", "model"),
                           ("gen_ai.provider.name", "provider"), ("gen_ai.system", "provider")):
            v = first.attrs.get(attr)
            if isinstance(v, str) and name not in meta:
                meta[name] = v
        if self.agents and isinstance(self.agents[0].attrs.get("gen_ai.agent.name"), str):
            meta["agent"] = self.agents[0].attrs["gen_ai.agent.name"]
        return meta


def _assistant(parts: list, usage: dict | None, latency: float | None) -> dict:
    """An assistant message from output parts (text, tool_call, reasoning)."""
    text, reasoning, calls = [], [], []
    for k, p in enumerate(parts):
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t == "tool_call":
            calls.append({"id": str(p.get("id") or f"call_{k}"), "type": "function", "function": {
                "name": str(p.get("name") or "unknown_tool"), "arguments": _stringify(_json_attr(p.get("arguments"))) or "{}"}})
        elif t == "reasoning":
            reasoning.append(_part_text(p))
        elif t in ("text", None):
            text.append(_part_text(p))
    m: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        m["tool_calls"] = calls
    if reasoning:
        m["reasoning_content"] = "".join(reasoning)
    if usage is not None:
        m["usage"] = usage
    if latency is not None and math.isfinite(latency):
        m["latency_s"] = latency
    return m
