"""Teacher-forced shadow verification: what `specagent acceptance measure` does at each sampled position.

At a position (a recorded agent turn), the Weak endpoint drafts from the recorded prefix with
the trajectory's tools. A drafted read (or non-holding GENERIC call) whose name and arguments
equal a recorded call that saw the same database state — no recorded write between the two —
gets that call's recorded result and drafting goes on; any other read ends the segment
(`unmatched_read`). Drafting stops at the first held call (`write`: WRITE tools and
conversation-ending GENERIC ones, as the importer marks them), a reply (`reply`) or K steps
(`k`). The Strong endpoint then sees the same prefix (so a prefix cache serves it) plus the
shipped verification prompt with the segment, and answers a JSON verdict (`verdict.py`). A
rejection with no valid replacement runs one Strong repair turn: the prefix, the accepted
steps with their results, and the tools — Strong acting as the agent for one step. One verdict
log record (docs/verdict-log.md) per verified segment, checked by the shared reader's rules
(`traces/verdict_log.py`) as it is built.

Task ids: each shadow verification is teacher-forced on the recorded prefix, so it is independent
of every other position of the same trajectory (none follows a rejection; they overlap freely). Its
`task` is therefore its own, ``<domain>-<task_id>/<trial>@<position>``: the reader's rule that one
task's verifications follow each other without overlap, and the fit's after-a-rejection condition,
are about one protocol run, which a shadow position is not.

Failures: a call the server keeps failing (429/5xx/timeouts/broken bodies through every retry)
and a verdict still unreadable after one corrected retry end the position as a counted,
logged skip, never a record; a failure no retry can fix (`EndpointError`) stops the run with
one line. Everything answered is in the cache, so a rerun resumes where it stopped.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from specagent.common.redact import clean
from specagent.endpoints.cache import request_key
from specagent.endpoints.client import ChatClient, Endpoint, Reply, ResponseFormatUnsupported, TransientFailure
from specagent.endpoints.recorded import RecordedTask
from specagent.endpoints.verdict import VERDICT_SCHEMA, fill_prompt, parse_verdict, replacement_valid, verifier_prompt
from specagent.traces.tokens import compact_json, estimate_call_tokens, estimate_text_tokens, split_total
from specagent.traces.tool_tags import TagMap, tool_kind
from specagent.traces.verdict_log import make_record

VERDICT_SCHEMA_ID = "specagent.verdict/1"
SOURCE = "acceptance measure"
RESPONSE_FORMATS = ("auto", "json_schema", "prompt")


@dataclass(frozen=True)
class MeasureConfig:
    k: int
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int | None = None  # every call's, unless the role's own cap below is set
    response_format: str = "auto"  # auto: json_schema, falling back to the prompt's words when the server refuses it
    concurrency: int = 4
    #: a cap that stops a rambling Weak model must not cut the Strong verdict: each role has its own
    weak_max_tokens: int | None = None
    strong_max_tokens: int | None = None

    def cap(self, role: str) -> int | None:
        """max_tokens sent to `role` ('weak' or 'strong'), None: the server's default."""
        own = self.weak_max_tokens if role == "weak" else self.strong_max_tokens
        return own if own is not None else self.max_tokens


@dataclass(frozen=True)
class Skip:
    task: str
    position: int
    stage: str  # draft | verify | repair
    reason: str  # unparseable | transient | truncated (the answer stopped at max_tokens: finish_reason length)
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "position": self.position, "stage": self.stage, "reason": self.reason,
                "detail": clean(self.detail)}  # the one place a skip's text reaches a file


@dataclass
class _Step:
    kind: str
    name: str | None
    tokens: int
    call: dict[str, Any] | None  # {"id", "name", "arguments"} of a tool call
    content: str | None  # a reply's text
    result: str | None  # the recorded result a matched call got
    note: str  # how the step is shown to the verifier
    group: int  # which Weak answer it came from (parallel calls share one)
    reference_tokens: int | None = None
    exact_match: bool | None = None


@dataclass
class PositionResult:
    record: dict[str, Any] | None = None
    skip: Skip | None = None
    usage: list[tuple[str, Reply]] = field(default_factory=list)  # (role, reply) of every call made for it


class _Format:
    """Whether the Strong server takes ``response_format``; remembered in the cache so a rerun never re-asks."""

    def __init__(self, mode: str, client: ChatClient, ep: Endpoint):
        self.mode, self.client, self.ep = mode, client, ep
        self._lock = threading.Lock()
        self._key = f"response-format-unsupported:{ep.chat_url}:{ep.model}"
        self._cache_key = request_key(self._key, {})

    def supported(self) -> bool:
        if self.mode == "prompt":
            return False
        with self._lock:
            return self.client.cache.get(self._cache_key) is None

    def refused(self, exc: ResponseFormatUnsupported) -> None:
        if self.mode == "json_schema":
            raise exc
        with self._lock:
            self.client.cache.put(self._cache_key, {"note": self._key, "error": str(exc)})

    def used(self) -> str:
        return "json_schema" if self.supported() else "prompt"


class ShadowRun:
    """Drafts, verifies and repairs at given positions; `run` returns one `PositionResult` per position, in order."""

    def __init__(self, client: ChatClient, weak: Endpoint, strong: Endpoint, tools: dict[str, list[dict]], tags: TagMap,
                 cfg: MeasureConfig):
        self.client, self.weak, self.strong, self.tools, self.tags, self.cfg = client, weak, strong, tools, tags, cfg
        self.prompt = verifier_prompt()
        self.format = _Format(cfg.response_format, client, strong)

    def task_tools(self, task: RecordedTask) -> list[dict]:
        """The tools a task's requests offer: its own, else its domain's (given or inferred from the recorded calls)."""
        return list(task.tools) if task.tools else self.tools[task.domain]

    # -- requests ------------------------------------------------------------------------------------------------
    def request_body(self, messages: list[dict], tools: list[dict] | None, role: str = "weak", **extra: Any) -> dict[str, Any]:
        """A chat-completions body as this run sends it (temperature, seed, the role's max_tokens): the estimate keys
        its cache look-ups on the same body."""
        body: dict[str, Any] = {"messages": messages, "temperature": self.cfg.temperature, "seed": self.cfg.seed}
        if tools:
            body["tools"] = tools
        cap = self.cfg.cap(role)
        if cap is not None:
            body["max_tokens"] = cap
        body.update(extra)
        return body

    def run(self, positions: list[tuple[RecordedTask, int]], advance: Callable[[int], None] = lambda k: None) -> list[PositionResult]:
        out: list[PositionResult | None] = [None] * len(positions)
        with ThreadPoolExecutor(max_workers=self.cfg.concurrency) as pool:
            futures = [pool.submit(self._guarded, t, p) for t, p in positions]
            try:
                for i, f in enumerate(futures):
                    out[i] = f.result()
                    advance(1)
            except BaseException:  # ^C (or a failure no retry fixes): stop the calls in flight too, not just the queued ones
                self.client.cancel()
                for f in futures:
                    f.cancel()
                raise
        return [r for r in out if r is not None]

    def _guarded(self, task: RecordedTask, p: int) -> PositionResult:
        """`position`, with answers of shapes no reader foresaw counted as an unparseable skip (said with the error's
        type), never a traceback that ends a 10,000-position run and loses the others' outputs."""
        try:
            return self.position(task, p)
        except (TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            res = PositionResult()
            res.skip = Skip(task.task, task.step_of[p], "answer", "unparseable",
                            f"an answer of an unexpected shape ({type(exc).__name__}: {exc})")
            return res

    # -- one position --------------------------------------------------------------------------------------------
    def position(self, task: RecordedTask, p: int) -> PositionResult:
        res = PositionResult()
        pos = task.step_of[p]
        try:
            steps, ended_by, draft_s = self._draft(task, p, res)
        except TransientFailure as exc:
            res.skip = Skip(task.task, pos, "draft", "transient", str(exc))
            return res
        except _Truncated as exc:
            res.skip = Skip(task.task, pos, "draft", "truncated", str(exc))
            return res
        try:
            verdict, vreply, verify_s = self._verify(task, p, steps, res)
        except TransientFailure as exc:
            res.skip = Skip(task.task, pos, "verify", "transient", str(exc))
            return res
        except _Truncated as exc:
            res.skip = Skip(task.task, pos, "verify", "truncated", str(exc))
            return res
        except _Unparseable as exc:
            res.skip = Skip(task.task, pos, "verify", "unparseable", str(exc))
            return res
        n, a = len(steps), verdict.accepted_prefix
        offered = verdict.replacement is not None
        valid = replacement_valid(verdict.replacement, self.task_tools(task)) if offered else None
        repair_tokens = repair_reasoning = None
        repair_s = 0.0
        if a < n and not valid:
            try:
                r = self.client.chat(self.strong, self.request_body(self._context(task, p, steps[:a]), self.task_tools(task), "strong"))
            except TransientFailure as exc:
                res.skip = Skip(task.task, pos, "repair", "transient", str(exc))
                return res
            res.usage.append(("strong_repair", r))
            if r.finish_reason == "length":
                res.skip = Skip(task.task, pos, "repair", "truncated", self._cut("repair", "strong"))
                return res
            repair_tokens, repair_reasoning, repair_s = r.usage.visible_tokens, r.usage.reasoning_tokens, r.latency_s
        drafted = []
        for s in steps:
            d: dict[str, Any] = {"kind": s.kind, "name": s.name, "tokens": s.tokens}
            if s.reference_tokens is not None:
                d["reference_tokens"] = s.reference_tokens
            if s.exact_match is not None:
                d["exact_match"] = s.exact_match
            drafted.append(d)
        u = vreply.usage
        rec: dict[str, Any] = {
            "schema": VERDICT_SCHEMA_ID, "task": f"{task.task}@{pos}", "position": pos, "drafted": drafted, "ended_by": ended_by,
            "accepted_prefix": a, "verdict_tokens": u.visible_tokens, "verify_reasoning_tokens": u.reasoning_tokens,
            "thinking": u.reasoning_tokens > 0 or bool(vreply.reasoning) or bool(repair_reasoning),
            "replacement_offered": offered, "replacement_valid": valid,
            "repair_tokens": repair_tokens, "repair_reasoning_tokens": repair_reasoning,
            "verify_prompt_tokens": u.prompt_tokens,
        }
        if u.cached_tokens is not None:
            rec["cached_prompt_tokens"] = min(u.cached_tokens, u.prompt_tokens)
        rec["latency_s"] = {"draft": round(draft_s, 6), "verify": round(verify_s, 6), "repair": round(repair_s, 6)}
        rec["source"] = SOURCE
        try:
            make_record(**{k: v for k, v in rec.items() if k != "schema"})  # the shared reader's invariants, checked as written
        except ValueError as exc:  # answers that parse but make no valid record: the position is skipped, said why
            res.skip = Skip(task.task, pos, "record", "unparseable", clean(exc))
            return res
        res.record = rec
        return res

    def _recorded_result(self, task: RecordedTask, p: int, name: str, args: Any) -> str | None:
        """The recorded result of an identical call that saw the same state as position p (no write in between)."""
        held = [i for i, m in enumerate(task.raw)  # state changes: the agent's held calls and the user's own writes (telecom)
                if any(tool_kind(c["name"], task.domain, self.tags, user_side=m["role"] == "user")[1] for c in m.get("tool_calls") or [])]
        results = {m["id"]: m.get("content") or "" for m in task.raw if m["role"] == "tool"}
        want = compact_json(args) if isinstance(args, dict) else None
        if want is None:
            return None
        for i, m in enumerate(task.raw):
            if m["role"] != "assistant":
                continue
            lo, hi = min(i, p), max(i, p)  # a write at p itself comes after the drafting state, one at i may precede its read
            if any(lo <= h <= hi and not (i < p and h == p) for h in held):
                continue
            for c in m.get("tool_calls") or []:
                if c["name"] == name and compact_json(c.get("arguments") or {}) == want and c["id"] in results:
                    return results[c["id"]]
        return None

    def _reference(self, task: RecordedTask, p: int) -> list[tuple[dict | None, str | None, int]]:
        """The recorded agent steps from position p up to the next user message: (call, reply text, output tokens)."""
        out = []
        for i in range(p, len(task.raw)):
            m = task.raw[i]
            if m["role"] == "user":
                break
            if m["role"] != "assistant":
                continue
            s0 = task.step_of[i]
            if m.get("tool_calls"):
                for j, c in enumerate(m["tool_calls"]):
                    out.append((c, None, task.trajectory.steps[s0 + j].output_tokens))
            else:
                out.append((None, m.get("content") or "", task.trajectory.steps[s0].output_tokens))
                break
        return out

    def _draft(self, task: RecordedTask, p: int, res: PositionResult) -> tuple[list[_Step], str, float]:
        msgs = [{"role": "system", "content": task.system}, *task.prefix(p)]
        ref = self._reference(task, p)
        steps: list[_Step] = []
        seconds = 0.0
        group = 0
        while True:
            r = self.client.chat(self.weak, self.request_body(msgs, self.task_tools(task)))
            res.usage.append(("weak_draft", r))
            seconds += r.latency_s
            if r.finish_reason == "length":  # a cut answer is not the step the model meant: no draft to verify
                raise _Truncated(self._cut("draft", "weak"))
            if not r.tool_calls:
                steps.append(_Step("reply", None, r.usage.completion_tokens, None, r.content, None,
                                   f"reply to the user: {r.content}", group))
                self._compare(steps[-1], ref, len(steps) - 1)
                return steps, "reply", seconds
            weights = [estimate_call_tokens(c.name, c.arguments) for c in r.tool_calls]
            weights[0] += estimate_text_tokens(r.content)
            tokens = split_total(r.usage.completion_tokens, weights)
            calls, results = [], []
            for j, (c, tk) in enumerate(zip(r.tool_calls, tokens)):
                kind, held = tool_kind(c.name, task.domain, self.tags)
                cid = f"draft_{task.step_of[p]}_{len(steps)}"
                call = {"id": cid, "name": c.name, "arguments": c.arguments}
                shown = f"call {c.name}({compact_json(c.arguments)})"
                if held:
                    steps.append(_Step(kind.value, c.name, tk, call, None, None, f"{shown}  [held: not executed]", group))
                    self._compare(steps[-1], ref, len(steps) - 1)
                    return steps, "write", seconds
                result = self._recorded_result(task, p, c.name, c.arguments)
                if result is None:
                    steps.append(_Step(kind.value, c.name, tk, call, None, None,
                                       f"{shown}  [not executed: no recorded call matches it]", group))
                    self._compare(steps[-1], ref, len(steps) - 1)
                    return steps, "unmatched_read", seconds
                steps.append(_Step(kind.value, c.name, tk, call, None, result, f"{shown}\n   result: {result}", group))
                self._compare(steps[-1], ref, len(steps) - 1)
                calls.append(call)
                results.append(result)
                if len(steps) == self.cfg.k:
                    return steps, "k", seconds
            msgs = msgs + _as_messages(calls, results, r.content)
            group += 1

    @staticmethod
    def _compare(s: _Step, ref: list[tuple[dict | None, str | None, int]], j: int) -> None:
        if j >= len(ref):
            return
        call, text, tokens = ref[j]
        s.reference_tokens = tokens
        if s.call is None:
            s.exact_match = call is None and (text or "").strip() == (s.content or "").strip()
        else:
            s.exact_match = (call is not None and call["name"] == s.call["name"]
                             and isinstance(s.call["arguments"], dict)
                             and compact_json(call.get("arguments") or {}) == compact_json(s.call["arguments"]))

    def _context(self, task: RecordedTask, p: int, accepted: list[_Step]) -> list[dict]:
        """The prefix plus the accepted steps with their results, as the agent's conversation (for a repair turn)."""
        msgs = [{"role": "system", "content": task.system}, *task.prefix(p)]
        by_group: dict[int, list[_Step]] = {}
        for s in accepted:
            by_group.setdefault(s.group, []).append(s)
        for g in sorted(by_group):
            ss = [s for s in by_group[g] if s.call is not None]
            if ss:
                msgs += _as_messages([s.call for s in ss], [s.result or "" for s in ss], None)
        return msgs

    def _verify(self, task: RecordedTask, p: int, steps: list[_Step], res: PositionResult):
        segment = "\n".join(f"{i + 1}. {s.note}" for i, s in enumerate(steps))
        msgs = [{"role": "system", "content": task.system}, *task.prefix(p),
                {"role": "user", "content": fill_prompt(self.prompt, segment, len(steps))}]
        tools = self.task_tools(task)
        seconds = 0.0
        error = ""
        for attempt in range(2):
            rf = self.format.supported()
            extra: dict[str, Any] = {"tool_choice": "none"}
            if rf:
                extra["response_format"] = {"type": "json_schema",
                                            "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA}}
            try:
                r = self.client.chat(self.strong, self.request_body(msgs, tools, "strong", **extra))
            except ResponseFormatUnsupported as exc:
                self.format.refused(exc)
                extra.pop("response_format")
                r = self.client.chat(self.strong, self.request_body(msgs, tools, "strong", **extra))
            res.usage.append(("strong_verify", r))
            seconds += r.latency_s
            if r.finish_reason == "length":  # asking again under the same cap cuts it again
                raise _Truncated(self._cut("verdict", "strong"))
            try:
                return parse_verdict(r.content, len(steps)), r, seconds
            except ValueError as exc:
                error = str(exc)
                msgs = msgs + [{"role": "assistant", "content": r.content},
                               {"role": "user", "content": f"That answer is not valid: {error}. Answer again with only the "
                                                           "JSON object described above."}]
        raise _Unparseable(f"verdict unreadable after one retry: {error}")


    def _cut(self, what: str, role: str) -> str:
        cap = self.cfg.cap(role)
        where = f"max_tokens={cap}" if cap is not None else "the server's max_tokens"
        return f"the {what} was cut at {where} (finish_reason length); raise --{role}-max-tokens"


class _Unparseable(Exception):
    pass


class _Truncated(Exception):
    """An answer that stopped at max_tokens: not the step or verdict the model meant (the message says which cap)."""


def _as_messages(calls: list[dict], results: list[str], content: str | None) -> list[dict]:
    msg = {"role": "assistant", "content": content or None,
           "tool_calls": [{"id": c["id"], "type": "function",
                           "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)
                                        if not isinstance(c["arguments"], str) else c["arguments"]}} for c in calls]}
    return [msg, *({"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, results))]
