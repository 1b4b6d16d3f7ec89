"""SpecAgent run live on served models against the SQLite airline service (`specagent live --weak-url ... --strong-url ...`).

Why: `acceptance measure` teacher-forces recorded runs; this one lets the two served models act. The
Weak endpoint drafts with the airline service's tools; every drafted read (and non-holding GENERIC
call) runs on the database at once and its real result is what the next draft reads; the first held
call (WRITE tools, `transfer_to_human_agents`) stops drafting and the service refuses it until the
Strong endpoint has verified the segment (the verification prompt and JSON verdict of
`acceptance measure`). Accepted: the held call runs. Rejected at a step: the steps before it stand,
the rest are discarded (reads already ran; being reads, they changed nothing — checked on the
database digest), and a valid replacement runs, else one Strong repair turn acts as the agent and
commits without a second review. Chunks that end in a reply or after K Weak answers without a held
call commit unreviewed (the `on_write` policy). K counts Weak answers (a message with parallel calls is
one), as the simulator's replay does, so the protocol log prices exactly the run that happened.

The user is scripted, not simulated by a model: the task opens with a request naming the user's id and
one of their reservations, and each agent reply is answered with the next line of the script; the task
ends after the script's last line or `max_turns` agent replies. Everything the models answer is cached
by content (`cache.py`), so a rerun is replayed from disk.

Outputs: a protocol log in the trace schema (committed steps with speculation labels, measured tokens
and latencies) that `simulate` prices; one verdict log record per review; measured seconds per phase.
"""

from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass, field
from typing import Any

from specagent.endpoints.client import ChatClient, Endpoint, Reply, ResponseFormatUnsupported
from specagent.endpoints.verdict import VERDICT_SCHEMA, fill_prompt, parse_verdict, replacement_valid, verifier_prompt
from specagent.kernels.airline_env import KINDS, AirlineEnv, ToolError, UnreviewedWrite
from specagent.traces.schema import Actor, DraftedBy, SpecLabel, Step, StepKind, TokenSource, Trajectory, Verdict
from specagent.traces.tokens import compact_json, estimate_call_tokens, estimate_text_tokens, split_float, split_total
from specagent.traces.verdict_log import make_record

SYSTEM = ("You are an airline customer service agent. Use the tools to look up the user's profile, reservations and flights "
          "before acting; confirm with the user before any change; never invent ids. Answer the user briefly.")
#: JSON types of the airline tools' arguments that are not strings (kernels/airline_env.py's `_t_*` signatures).
ARG_TYPES = {"flights": "array", "passengers": "array", "total_baggages": "integer", "nonfree_baggages": "integer", "amount": "number"}
#: Most model answers per task, a guard against a model that never replies: τ²-Bench's own cap of 200 steps per
#: simulation (``info.max_steps`` in the shared results files).
MAX_AGENT_ANSWERS = 200
USER_SCRIPT = ("Yes, please go ahead.", "Thank you, that's all I needed.")
#: Measured phases of a live endpoint run, and the simulator's phases each one is compared with.
PHASE_MAP = {"weak_draft": ("weak_prefill", "weak_decode"), "strong_verify": ("strong_verify", "strong_verdict"),
             "strong_repair": ("strong_prefill", "strong_decode"), "tool": ("tool",)}


class LiveError(RuntimeError):
    """The protocol's safety rule broke (a held call ran unreviewed, the database changed while drafting)."""


def airline_tools() -> list[dict]:
    """OpenAI tool definitions of the airline service, from its tools' signatures."""
    out = []
    for name in sorted(KINDS):
        params = [p for p in inspect.signature(getattr(AirlineEnv, f"_t_{name}")).parameters if p not in ("c", "cls")]
        props = {p: {"type": ARG_TYPES.get(p, "string")} for p in params}
        out.append({"type": "function", "function": {"name": name, "description": f"airline {KINDS[name]} tool {name}",
                                                     "parameters": {"type": "object", "properties": props, "required": params}}})
    return out


@dataclass
class _Call:
    name: str
    arguments: Any
    id: str
    result: str | None = None
    result_tokens: int = 0
    tool_s: float = 0.0


@dataclass
class _Unit:
    """One agent answer: a reply or one or more tool calls."""

    reply: Reply
    calls: list[_Call]
    content: str
    by: DraftedBy
    held: bool = False

    @property
    def kind(self) -> str:
        return "reply" if not self.calls else KINDS.get(self.calls[0].name, "write")


@dataclass
class TaskResult:
    protocol_log: Trajectory
    verdicts: list[dict]
    seconds: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)


class LiveRun:
    def __init__(self, client: ChatClient, weak: Endpoint, strong: Endpoint, k: int, seed: int = 0, max_turns: int = 6,
                 temperature: float = 0.0, max_answers: int = MAX_AGENT_ANSWERS, max_tokens: int | None = None,
                 strong_max_tokens: int | None = None):
        self.client, self.weak, self.strong, self.k, self.seed = client, weak, strong, k, seed
        #: max_tokens per role (None: the server's default, which on llama.cpp decodes until the context is full)
        self.caps = {"weak": max_tokens, "strong": strong_max_tokens if strong_max_tokens is not None else max_tokens}
        self.max_answers = max_answers
        self.max_turns, self.temperature = max_turns, temperature
        self.tools = airline_tools()
        self.prompt = verifier_prompt()
        self.json_schema = True
        #: per endpoint role, what its answers reported: calls, those with usage.prompt_tokens_details.cached_tokens, those
        #: whose reasoning tokens had to be estimated from text (`acceptance_measure.unreported` says what is missing)
        self.usage: dict[str, dict[str, int]] = {}

    def _chat(self, ep: Endpoint, body: dict) -> Reply:
        r = self.client.chat(ep, body)
        u = self.usage.setdefault(ep.role, {"calls": 0, "cached_tokens_reported_calls": 0, "reasoning_estimated_calls": 0})
        u["calls"] += 1
        u["cached_tokens_reported_calls"] += r.usage.cached_tokens is not None
        u["reasoning_estimated_calls"] += r.usage.reasoning_source == "estimated"
        return r

    def _body(self, messages: list[dict], role: str = "weak", **extra: Any) -> dict:
        cap = {"max_tokens": self.caps[role]} if self.caps[role] is not None else {}
        return {"messages": messages, "tools": self.tools, "temperature": self.temperature, "seed": self.seed, **cap, **extra}

    @staticmethod
    def _messages(units: list[_Unit]) -> list[dict]:
        out: list[dict] = []
        for u in units:
            if not u.calls:
                out.append({"role": "assistant", "content": u.content})
                continue
            out.append({"role": "assistant", "content": u.content or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)}}
                for c in u.calls]})
            out += [{"role": "tool", "tool_call_id": c.id, "content": c.result or ""} for c in u.calls if c.result is not None]
        return out

    def _unit(self, r: Reply, by: DraftedBy, tag: str) -> _Unit:
        calls = [_Call(c.name, c.arguments, f"{tag}_{j}") for j, c in enumerate(r.tool_calls)]
        held = any(KINDS.get(c.name, "write") == "write" or c.name == "transfer_to_human_agents" for c in calls)
        return _Unit(r, calls, r.content, by, held)

    def _execute(self, env: AirlineEnv, c: _Call, reviewed: bool) -> None:
        t0 = time.perf_counter()
        try:
            out = env.execute(c.name, c.arguments if isinstance(c.arguments, dict) else {}, reviewed=reviewed)
            c.result = out.result if isinstance(out.result, str) else json.dumps(out.result)
            c.result_tokens = out.tokens
        except ToolError as exc:  # τ²-Bench returns a bad call's error to the agent as the tool's result
            c.result = f"Error: {exc}"
            c.result_tokens = max(1, estimate_text_tokens(c.result))
        c.tool_s = time.perf_counter() - t0

    def run_task(self, env: AirlineEnv, index: int) -> TaskResult:
        return _Task(self, env, index).play()

    @staticmethod
    def _step_tokens(seg: list[_Unit]) -> list[int]:
        out = []
        for u in seg:
            if not u.calls:
                out.append(u.reply.usage.completion_tokens)
                continue
            w = [estimate_call_tokens(c.name, c.arguments) for c in u.calls]
            w[0] += estimate_text_tokens(u.content)
            out += split_total(u.reply.usage.completion_tokens, w)
        return out

    @staticmethod
    def _position(log: list) -> int:
        n = 0
        for item in log:
            n += 1 if item[0] == "user" else max(1, len(item[1].calls)) + len([c for c in item[1].calls if c.result is not None])
        return n

    def _verify(self, context: list[dict], seg: list[_Unit], steps: list) -> tuple:
        lines = []
        for i, (u, c) in enumerate(steps):
            if c is None:
                lines.append(f"{i + 1}. reply to the user: {u.content}")
            elif c.result is None:
                lines.append(f"{i + 1}. call {c.name}({compact_json(c.arguments)})  [held: not executed]")
            else:
                lines.append(f"{i + 1}. call {c.name}({compact_json(c.arguments)})\n   result: {c.result}")
        msgs = context + [{"role": "user", "content": fill_prompt(self.prompt, "\n".join(lines), len(steps))}]
        seconds = 0.0
        last = None
        for _ in range(2):
            extra: dict[str, Any] = {"tool_choice": "none"}
            if self.json_schema:
                extra["response_format"] = {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA}}
            try:
                r = self._chat(self.strong, self._body(msgs, "strong", **extra))
            except ResponseFormatUnsupported:
                self.json_schema = False
                extra.pop("response_format")
                r = self._chat(self.strong, self._body(msgs, "strong", **extra))
            seconds += r.latency_s
            last = r
            if r.finish_reason == "length":  # cut at max_tokens: asking again under the same cap cuts it again
                return None, r, seconds
            try:
                return parse_verdict(r.content, len(steps)), r, seconds
            except ValueError as exc:
                msgs = msgs + [{"role": "assistant", "content": r.content},
                               {"role": "user", "content": f"That answer is not valid: {exc}. Answer again with only the JSON object described above."}]
        return None, last, seconds

    def _trajectory(self, log: list, index: int, user_id: str) -> Trajectory:
        steps: list[Step] = []
        first_prompt = next((it[1].reply.usage.prompt_tokens for it in log if it[0] == "unit" and it[1].reply.usage.prompt_tokens), 0)
        system_tokens = max(1, first_prompt - estimate_text_tokens(log[0][1])) if first_prompt else estimate_text_tokens(SYSTEM)
        for item in log:
            if item[0] == "user":
                steps.append(Step(index=len(steps), actor=Actor.USER, kind=StepKind.USER, new_context_tokens=estimate_text_tokens(item[1]),
                                  token_source=TokenSource.ESTIMATED, user_latency_s=0.0))
                continue
            u, label = item[1], item[2]
            usage = u.reply.usage
            if not u.calls:
                steps.append(Step(index=len(steps), actor=Actor.AGENT, kind=StepKind.REPLY, irreversible=label.verdict == Verdict.REPAIR,
                                  new_context_tokens=usage.visible_tokens,
                                  output_tokens=usage.completion_tokens, reasoning_tokens=usage.reasoning_tokens,
                                  model_latency_s=u.reply.latency_s, label=label))
                continue
            w = [estimate_call_tokens(c.name, c.arguments) for c in u.calls]
            w[0] += estimate_text_tokens(u.content)
            outs, vis, rea = (split_total(x, w) for x in (usage.completion_tokens, usage.visible_tokens, usage.reasoning_tokens))
            measured = usage.completion_tokens > 0
            if not measured:  # a verdict's replacement call: nobody decoded it apart, it joins the context as written
                vis = w
            lat = split_float(u.reply.latency_s, w)
            group = len(steps) if len(u.calls) > 1 else None
            for j, c in enumerate(u.calls):
                kind = StepKind(KINDS.get(c.name, "write"))
                held = kind == StepKind.WRITE or c.name == "transfer_to_human_agents"
                # the Strong step that replaced a rejected draft ends its segment, as the rejected held draft did: marked
                # held so the simulator's labelled replay reviews the segment the run reviewed (docs/endpoints.md)
                steps.append(Step(index=len(steps), actor=Actor.AGENT, kind=kind, tool_name=c.name,
                                  irreversible=held or label.verdict == Verdict.REPAIR,
                                  new_context_tokens=vis[j], output_tokens=outs[j], reasoning_tokens=rea[j],
                                  token_source=TokenSource.MEASURED if measured else TokenSource.ESTIMATED,
                                  model_latency_s=lat[j], parallel_group=group, label=label if j == 0 else label.model_copy(
                                      update={"verdict_tokens": 0, "repair_tokens": 0})))
            for c in u.calls:
                if c.result is not None:
                    steps.append(Step(index=len(steps), actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name=c.name,
                                      new_context_tokens=c.result_tokens, tool_latency_s=c.tool_s, parallel_group=group))
        return Trajectory(task_id=f"live-{index}", domain="airline", source=f"specagent live (endpoints: {self.weak.model} / {self.strong.model})",
                          system_prompt_tokens=system_tokens, steps=steps,
                          metadata={"live_strategy": "specagent", "live_k": self.k, "live_seed": self.seed, "user_id": user_id,
                                    "weak_model": self.weak.model, "strong_model": self.strong.model,
                                    "live_user": "scripted (specagent/endpoints/live.py USER_SCRIPT)"})


class _Task:
    """One task's live run, its state named: the context the models read, the committed log, the scripted user's
    remaining lines, the answers and replies so far, the segment number, measured seconds per phase, the verdict
    records and the counts."""

    def __init__(self, run: LiveRun, env: AirlineEnv, index: int):
        self.run, self.env, self.index = run, env, index
        users = env.user_ids()
        self.user_id = user_id = users[index % len(users)]
        found = env.execute("get_user_details", {"user_id": user_id}, reviewed=False).result
        profile = found if isinstance(found, dict) else {}
        env.log.clear()
        rid = (profile.get("reservations") or ["(none)"])[0]
        opening = f"Hi, I'm {user_id}. Please cancel my reservation {rid}."
        self.context: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": opening}]
        self.log: list[tuple[str, Any]] = [("user", opening)]  # committed items: ("user", text) | ("unit", _Unit, label)
        self.seconds = {p: 0.0 for p in PHASE_MAP}
        self.verdicts: list[dict] = []
        self.counts = {"reviews": 0, "accepted": 0, "rejections": 0, "replacements": 0, "repairs": 0, "held_blocked": 0,
                       "unparseable_verdicts": 0, "answer_limit": 0, "truncated_weak_answers": 0}
        self.script = list(USER_SCRIPT)
        self.replies = 0
        self.seg_no = 0
        self.answers = 0

    def play(self) -> TaskResult:
        """Segments until the scripted user's last line, `max_turns` replies, `max_answers` answers or a verdict
        that could not be read; then the protocol log and the counts of executed calls."""
        run, env, counts = self.run, self.env, self.counts
        while self.replies < run.max_turns:
            if self.answers >= run.max_answers:  # a model that never replies must not loop for ever
                counts["answer_limit"] = 1
                break
            digest = env.digest()
            seg = self._draft()
            if not seg[-1].held:  # on_write: commit without review
                if not self._commit_unreviewed(seg):
                    break
                continue
            if env.digest() != digest:
                raise LiveError(f"the database changed while drafting segment {self.seg_no}")
            if not self._review(seg, digest):
                break
        counts["writes_executed"] = sum(1 for t, _, _ in env.log if AirlineEnv.holds(t))
        counts["reads_executed"] = len(env.log) - counts["writes_executed"]
        counts["writes_unreviewed"] = sum(1 for t, _, reviewed in env.log if AirlineEnv.holds(t) and not reviewed)
        return TaskResult(run._trajectory(self.log, self.index, self.user_id), self.verdicts, self.seconds, counts)

    def _execute(self, calls: list[_Call], reviewed: bool) -> None:
        for c in calls:
            self.run._execute(self.env, c, reviewed=reviewed)
            self.seconds["tool"] += c.tool_s

    def _draft(self) -> list[_Unit]:
        """Weak answers up to K: each answer's reads run at once; a reply or a held call (tried on the service, which
        must refuse it) ends the segment."""
        run, seg = self.run, []
        while len(seg) < run.k:
            r = run._chat(run.weak, run._body(self.context + run._messages(seg)))
            self.answers += 1
            if r.finish_reason == "length":
                self.counts["truncated_weak_answers"] += 1
            self.seconds["weak_draft"] += r.latency_s
            u = run._unit(r, DraftedBy.WEAK, f"w{self.seg_no}_{len(seg)}")
            seg.append(u)
            if u.held:
                for c in u.calls:
                    if c.name in KINDS and AirlineEnv.holds(c.name):
                        try:
                            self.env.execute(c.name, c.arguments if isinstance(c.arguments, dict) else {}, reviewed=False)
                        except UnreviewedWrite:
                            self.counts["held_blocked"] += 1
                        else:
                            raise LiveError(f"{c.name} ran before review")
                break  # the held answer's reads, if any, wait for the verdict with it
            self._execute(u.calls, reviewed=False)
            if not u.calls:
                break
        return seg

    def _after_reply(self, unit: _Unit) -> bool:
        """After an answer that replied to the user, the scripted user's next line; False when the task ends."""
        if not unit.calls:
            self.replies += 1
            if not _next_user_turn(self.script, self.log, self.context):
                return False
        return True

    def _commit_unreviewed(self, seg: list[_Unit]) -> bool:
        for u in seg:
            self.log.append(("unit", u, SpecLabel(drafted_by=DraftedBy.WEAK, segment=self.seg_no)))
        self.context += self.run._messages(seg)
        self.seg_no += 1
        return self._after_reply(seg[-1])

    def _review(self, seg: list[_Unit], digest: str) -> bool:
        """Strong verifies the segment; accepted, the held call runs; rejected, the valid prefix stands and a
        replacement or repair takes the first bad step's place. False when the task ends here."""
        run = self.run
        self.counts["reviews"] += 1
        steps = [(u, c) for u in seg for c in (u.calls or [None])]
        verdict, vr, vs = run._verify(self.context, seg, steps)
        self.seconds["strong_verify"] += vs
        if verdict is None:
            self.counts["unparseable_verdicts"] += 1
            return False  # no verdict: the held call never runs; the task ends here (counted)
        a = verdict.accepted_prefix
        bad_unit = len(steps) if a == len(steps) else seg.index(steps[a][0])
        offered = verdict.replacement is not None
        valid = replacement_valid(verdict.replacement, run.tools) if offered else None
        rec = {"schema": "specagent.verdict/1", "task": f"live-{self.index}", "position": run._position(self.log),
               "drafted": [{"kind": u.kind if c is None else KINDS.get(c.name, "write"), "name": None if c is None else c.name,
                            "tokens": tk} for (u, c), tk in zip(steps, run._step_tokens(seg))],
               "ended_by": "write", "accepted_prefix": a, "verdict_tokens": vr.usage.visible_tokens,
               "verify_reasoning_tokens": vr.usage.reasoning_tokens, "thinking": vr.usage.reasoning_tokens > 0 or bool(vr.reasoning),
               "replacement_offered": offered, "replacement_valid": valid, "repair_tokens": None, "repair_reasoning_tokens": None,
               "verify_prompt_tokens": vr.usage.prompt_tokens, "source": "live"}
        if bad_unit == len(seg):
            self._accept(seg, rec, vr.usage.completion_tokens, vs)
            return True
        self.counts["rejections"] += 1
        if self.env.digest() != digest:
            raise LiveError(f"segment {self.seg_no} was rejected but the database changed")
        return self._reject(seg[:bad_unit], verdict.replacement, vr, valid, rec, vs)

    def _record(self, rec: dict) -> None:
        make_record(**{k: v for k, v in rec.items() if k != "schema"})
        self.verdicts.append(rec)
        self.seg_no += 1

    def _accept(self, seg: list[_Unit], rec: dict, vt: int, vs: float) -> None:
        """All accepted: the held call runs now."""
        self.counts["accepted"] += 1
        self._execute(seg[-1].calls, reviewed=True)
        for j, u in enumerate(seg):
            self.log.append(("unit", u, SpecLabel(drafted_by=DraftedBy.WEAK, verdict=Verdict.ACCEPTED,
                                                  verdict_tokens=vt if j == len(seg) - 1 else 0, segment=self.seg_no)))
        self.context += self.run._messages(seg)
        rec["latency_s"] = {"draft": 0.0, "verify": round(vs, 6), "repair": 0.0}
        self._record(rec)

    def _reject(self, kept: list[_Unit], replacement: dict[str, Any] | None, vr: Reply, valid: bool | None, rec: dict,
                vs: float) -> bool:
        """The steps before the first bad one stand; a valid replacement runs, else one Strong repair turn acts and
        commits without a second review. False when the task ends here."""
        run, seg_no = self.run, self.seg_no
        for u in kept:
            self.log.append(("unit", u, SpecLabel(drafted_by=DraftedBy.WEAK, verdict=Verdict.ACCEPTED, segment=seg_no)))
        self.context += run._messages(kept)
        repair_s = 0.0
        if valid:
            self.counts["replacements"] += 1
            rep = replacement
            assert rep is not None
            fake = Reply("", None, (), vr.usage.__class__(0, 0, 0, None, "none"), 0.0, None, False)
            fixed = _Unit(fake, [_Call(rep["name"], rep["arguments"], f"s{seg_no}_r")], "", DraftedBy.STRONG)
            rt = 0
        else:
            self.counts["repairs"] += 1
            rr = run._chat(run.strong, run._body(self.context, "strong"))
            self.answers += 1
            repair_s = rr.latency_s
            self.seconds["strong_repair"] += repair_s
            fixed = run._unit(rr, DraftedBy.STRONG, f"s{seg_no}_r")
            rt = max(1, rr.usage.completion_tokens)
            rec["repair_tokens"], rec["repair_reasoning_tokens"] = rr.usage.visible_tokens, rr.usage.reasoning_tokens
        self._execute(fixed.calls, reviewed=True)  # the repair commits without a second review
        self.log.append(("unit", fixed, SpecLabel(drafted_by=DraftedBy.STRONG, verdict=Verdict.REPAIR,
                                                  verdict_tokens=vr.usage.completion_tokens, repair_tokens=rt, segment=seg_no,
                                                  rejected_kind=StepKind(rec["drafted"][rec["accepted_prefix"]]["kind"]))))
        self.context += run._messages([fixed])
        rec["latency_s"] = {"draft": 0.0, "verify": round(vs, 6), "repair": round(repair_s, 6)}
        rec["thinking"] = rec["thinking"] or bool(rec["repair_reasoning_tokens"])
        self._record(rec)
        return self._after_reply(fixed)


def compare_phases(results: list[TaskResult], setting: Any, k: int) -> dict[str, Any]:
    """Measured seconds per phase next to the simulator's price of the same protocol logs on `setting`'s deployments.

    An endpoint call cannot be split into its prefill and decode from outside, so phases are compared
    per call kind: Weak drafting (prefill + decode), Strong verification (+ verdict), Strong repair, tools.
    """
    from specagent.simulator.run import simulate

    df = simulate([r.protocol_log for r in results], "specagent", setting=setting, k=k)
    rows = []
    for phase, sim_phases in PHASE_MAP.items():
        measured = sum(r.seconds[phase] for r in results)
        predicted = float(sum(df[f"time_s_{p}"].sum() for p in sim_phases if f"time_s_{p}" in df))
        rows.append({"phase": phase, "simulator_phases": list(sim_phases), "measured_s": round(measured, 6),
                     "predicted_s": round(predicted, 6),
                     "error": round((predicted - measured) / measured, 6) if measured > 0 else None})
    measured_total = sum(row["measured_s"] for row in rows)
    predicted_total = sum(row["predicted_s"] for row in rows)
    return {"rows": rows, "measured_s": round(measured_total, 6), "predicted_s": round(predicted_total, 6),
            "error": round((predicted_total - measured_total) / measured_total, 6) if measured_total > 0 else None}


def _next_user_turn(script: list[str], log: list, context: list[dict]) -> bool:
    """After a reply to the user, the scripted user's next line joins the log and the context; False when the
    script has run out (the task ends there)."""
    if not script:
        return False
    text = script.pop(0)
    log.append(("user", text))
    context.append({"role": "user", "content": text})
    return True
