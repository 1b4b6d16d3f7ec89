"""`acceptance measure` below the command line: positions to sample, the estimate shown before any call, the outputs.

Outputs (all written atomically, all a function of the inputs and the answers, so a rerun from
the cache is byte-identical): one verdict log per input trace (``<stem>.verdicts.jsonl``,
docs/verdict-log.md), ``skips.jsonl`` (every position that produced no record, with why),
``calls.jsonl`` (every call made: which, for which position, its usage, latency and finish reason),
``summary.json`` (what was measured), and ``run.json`` (what this run sent, retried and
found in the cache — the one file that differs between a first run and a rerun).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specagent.common.atomic import json_text, text_writer, write_together
from specagent.endpoints.cache import request_key
from specagent.endpoints.recorded import RecordedTask
from specagent.endpoints.shadow import PositionResult, ShadowRun
from specagent.traces.tokens import estimate_text_tokens

#: Drafted tokens assumed per Weak call and verdict tokens per Strong call when the trace records none (estimate only).
FALLBACK_OUTPUT_TOKENS = 64


def select_positions(tasks: list[RecordedTask], limit: int | None, seed: int) -> list[tuple[RecordedTask, int]]:
    """Every agent position, or a seeded sample of `limit` of them, in trace order."""
    every = [(t, p) for t in tasks for p in t.agent_positions()]
    if limit is None or limit >= len(every):
        return every
    keep = sorted(random.Random(seed).sample(range(len(every)), limit))
    return [every[i] for i in keep]


@dataclass(frozen=True)
class Estimate:
    positions: int
    positions_cached: int
    weak_calls_max: int
    strong_calls_max: int
    weak_prompt_tokens: int
    strong_prompt_tokens: int
    output_tokens: int
    usd: float | None
    #: one Weak draft and one verdict per position: what a run whose drafts end at their first step sends
    weak_prompt_tokens_least: int = 0
    strong_prompt_tokens_least: int = 0

    def lines(self) -> list[str]:
        out = [f"{self.positions} positions ({self.positions_cached} already started in the cache)",
               f"at most {self.weak_calls_max:,} Weak calls and {self.strong_calls_max:,} Strong calls "
               "(K drafts; one verdict, one retry and one repair per position)",
               f"{self.weak_prompt_tokens_least:,}–{self.weak_prompt_tokens:,} Weak and {self.strong_prompt_tokens_least:,}–"
               f"{self.strong_prompt_tokens:,} Strong prompt tokens (one draft and one verdict per position – every call above; "
               f"counted from the prompts to be sent), ~{self.output_tokens:,} output tokens (from the recorded steps)"]
        out.append(f"estimated cost at most ${self.usd:,.2f}" if self.usd is not None else
                   "cost: no prices given (--weak-usd-per-mtok / --strong-usd-per-mtok IN,OUT)")
        return out


def _context_tokens(body: dict[str, Any]) -> int:
    """The prompt a request will send, in estimated tokens: its messages and its tools as the server's template sees them.

    Counted from what is sent, not from the recorded run's usage: a recording made with a longer policy or another
    model's tokenizer put the estimate 5-12x above the measured prompts (docs/endpoints.md).
    """
    return estimate_text_tokens(json.dumps(body.get("messages", []), ensure_ascii=False)) + \
        estimate_text_tokens(json.dumps(body.get("tools", []), ensure_ascii=False))


def estimate(positions: list[tuple[RecordedTask, int]], k: int, run: ShadowRun,
             weak_price: tuple[float, float] | None, strong_price: tuple[float, float] | None) -> Estimate:
    cached = 0
    wp = sp = out = wp1 = sp1 = 0
    for t, p in positions:
        body = run.request_body([{"role": "system", "content": t.system}, *t.prefix(p)], run.task_tools(t))
        ctx = _context_tokens(body)
        steps = [s for s in t.trajectory.steps[t.step_of[p]:] if s.actor.value == "agent"][:k]
        step_out = sum(s.output_tokens for s in steps) or FALLBACK_OUTPUT_TOKENS * k
        wp += k * ctx + (k * (k - 1) // 2) * max(1, step_out // max(1, len(steps)))
        sp += 3 * (ctx + step_out + 600)  # verdict, its retry, the repair; ~600 tokens of verification prompt
        wp1 += ctx
        sp1 += ctx + step_out // max(1, len(steps)) + 600
        out += step_out + 3 * FALLBACK_OUTPUT_TOKENS
        if run.client.cache.get(request_key(run.weak.chat_url, {"model": run.weak.model, **body, **run.weak.extra_body})) is not None:
            cached += 1
    usd = None
    if weak_price is not None and strong_price is not None:
        usd = (wp * weak_price[0] + sp * strong_price[0] + out * max(weak_price[1], strong_price[1])) / 1e6
    return Estimate(len(positions), cached, k * len(positions), 3 * len(positions), wp, sp, out, usd, wp1, sp1)


def summarize(positions: list[tuple[RecordedTask, int]], results: list[PositionResult], response_format: str) -> dict[str, Any]:
    """What was measured, from the records and skips alone (deterministic)."""
    recs = [r.record for r in results if r.record is not None]
    skips = [r.skip for r in results if r.skip is not None]
    drafted = sum(len(r["drafted"]) for r in recs)
    accepted = sum(r["accepted_prefix"] for r in recs)
    by_kind: dict[str, list[int]] = {}
    for r in recs:
        for j, s in enumerate(r["drafted"]):
            c = by_kind.setdefault(s["kind"], [0, 0])
            c[0] += 1
            c[1] += j < r["accepted_prefix"]
    usage: dict[str, dict[str, int | float]] = {}
    for res in results:
        for role, rep in res.usage:
            u = usage.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0,
                                        "reasoning_estimated_calls": 0, "truncated_calls": 0, "cached_tokens_reported_calls": 0,
                                        "latency_s": 0.0})
            u["calls"] += 1
            u["truncated_calls"] += rep.finish_reason == "length"
            u["cached_tokens_reported_calls"] += rep.usage.cached_tokens is not None
            u["prompt_tokens"] += rep.usage.prompt_tokens
            u["completion_tokens"] += rep.usage.completion_tokens
            u["reasoning_tokens"] += rep.usage.reasoning_tokens
            u["reasoning_estimated_calls"] += rep.usage.reasoning_source == "estimated"
            u["latency_s"] = round(u["latency_s"] + rep.latency_s, 6)
    return {
        "positions": len(positions), "records": len(recs), "skipped": len(skips),
        "skipped_by_reason": dict(sorted(Counter(f"{s.stage}:{s.reason}" for s in skips).items())),
        "drafted_steps": drafted, "accepted_steps": accepted,
        "step_acceptance": round(accepted / drafted, 6) if drafted else None,
        "segments_fully_accepted": sum(r["accepted_prefix"] == len(r["drafted"]) for r in recs),
        "ended_by": dict(sorted(Counter(r["ended_by"] for r in recs).items())),
        "acceptance_by_kind": {k: {"drafted": v[0], "accepted": v[1], "rate": round(v[1] / v[0], 6)} for k, v in sorted(by_kind.items())},
        "replacements_offered": sum(r["replacement_offered"] for r in recs),
        "replacements_valid": sum(r["replacement_valid"] is True for r in recs),
        "repair_turns": sum(r["repair_tokens"] is not None for r in recs),
        "thinking_records": sum(r["thinking"] for r in recs),
        "usage": dict(sorted(usage.items())),
        "response_format": response_format,
    }


def write_outputs(out: Path, stems: dict[str, str], positions: list[tuple[RecordedTask, int]], results: list[PositionResult],
                  summary: dict[str, Any], run_info: dict[str, Any]) -> list[Path]:
    """The verdict logs (one per input file, even when empty), skips, summary and run info, together."""
    logs: dict[str, list[str]] = {f: [] for f in stems}
    for (t, _), r in zip(positions, results):
        if r.record is not None:
            logs[t.file].append(json.dumps(r.record, ensure_ascii=False, separators=(", ", ": ")))
    writes = {out / f"{stems[f]}.verdicts.jsonl": text_writer("".join(line + "\n" for line in lines)) for f, lines in logs.items()}
    skips = [json.dumps({"file": t.file, **r.skip.as_dict()}, ensure_ascii=False) for (t, _), r in zip(positions, results) if r.skip]
    calls = []
    for (t, p), r in zip(positions, results):
        for role, rep in r.usage:
            u = rep.usage
            calls.append(json.dumps({"file": t.file, "task": t.task, "position": t.step_of[p], "call": role,
                                     "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                                     "reasoning_tokens": u.reasoning_tokens, "reasoning_source": u.reasoning_source,
                                     "cached_prompt_tokens": u.cached_tokens, "latency_s": round(rep.latency_s, 6),
                                     "finish_reason": rep.finish_reason, "tool_calls": [c.name for c in rep.tool_calls]},
                                    ensure_ascii=False))
    writes[out / "calls.jsonl"] = text_writer("".join(c + "\n" for c in calls))
    writes[out / "skips.jsonl"] = text_writer("".join(s + "\n" for s in skips))
    writes[out / "summary.json"] = text_writer(json_text(summary))
    writes[out / "run.json"] = text_writer(json_text(run_info))
    return write_together(writes)


def unreported(summary: dict[str, Any]) -> list[str]:
    """What the server did not report, said rather than silently taken as zero (issue 36, item 5): a line per role
    whose answers carried no cached prompt tokens, or reasoning tokens only as text (estimated)."""
    out = []
    for role, u in summary["usage"].items():
        if u["calls"] and u.get("cached_tokens_reported_calls", 0) < u["calls"]:
            out.append(f"{role}: {u['calls'] - u['cached_tokens_reported_calls']} of {u['calls']} answers reported no cached "
                       "prompt tokens (usage.prompt_tokens_details.cached_tokens): prefix-cache reuse is unknown there, not 0")
        if u["calls"] and u["reasoning_estimated_calls"]:
            out.append(f"{role}: reasoning tokens of {u['reasoning_estimated_calls']} of {u['calls']} answers are estimated from "
                       "their reasoning text (the server reported no completion_tokens_details.reasoning_tokens)")
    return out
