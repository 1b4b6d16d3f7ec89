"""What `specagent replay` prints in a table: `vllm bench serve`'s result block (one printer: common/vllm_result.py,
also `bench serve`'s), then what the block has no line for (the deployment, its scheduler, the arrivals, the price),
the chunks' agreement, the notes and the file written.

Reads a `ReplayResult` (`simulator/jobs/replay.py`): every figure is the job's (`figures()`). `--format json` never
loads this module (nor rich): replay's start-up is part of its speed (benchmarks/replay_vs_vidur.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from rich.console import RenderableType
from rich.text import Text

from specagent.common.redact import Redactor
from specagent.common.vllm_result import format_block

if TYPE_CHECKING:
    from specagent.simulator.jobs.replay import ReplayResult

HEADLINE = "Predicted by specagent replay (simulated, no server run):"


def block(res: ReplayResult, s: dict) -> str:
    """vLLM's result block of the figures `s` (`res.figures()`), as `vllm bench serve` prints it (plain text, never
    wrapped)."""
    return format_block(s, res.percentile_metrics, res.metric_percentiles)


def arrivals(res: ReplayResult) -> str:
    """How the requests were sent: the trace's timestamps, or drawn at --request-rate (vLLM's block prints a finite rate
    only)."""
    if math.isinf(res.request_rate):
        return "the trace's own timestamps"
    return (f"Poisson at {res.request_rate:g} RPS" if res.burstiness == 1.0 else
            f"gamma gaps at {res.request_rate:g} RPS, burstiness {res.burstiness:g}") + " (seeded)"


def extras(res: ReplayResult, s: dict, out: Optional[Path]) -> list[RenderableType]:
    """What vLLM's block of the figures `s` has no line for, below it; then the notes (no key of the user's files in
    them) and the file written."""
    sched = res.scheduler
    lines: list[RenderableType] = [Text(f"Deployment: {res.replicas} x {res.deployment}")]
    if sched is not None:
        lines.append(Text.from_markup(f"Scheduler limits: {sched.max_num_seqs} seqs, {sched.max_batched_tokens or 'unlimited'} "
                                      "tokens/iteration"))
    lines.append(Text.from_markup(f"Arrivals: {arrivals(res)}"))
    if res.estimated:  # a dataset's text, no tokenizer (traces/datasets.py): the notes below say which lengths
        lines.append(Text.from_markup("Token counts: estimated from text (see the notes)"))
    usd = "unpriced (pass --price GPU=USD)" if math.isnan(s["usd_per_hour"]) else f"${s['usd_per_hour']:,.2f}/hour"
    lines.append(Text.from_markup(f"GPUs / price: {s['gpus']:,} GPUs, {usd}" + (
        "" if math.isnan(s["usd_per_1k_requests"]) else f"; ${s['usd_per_1k_requests']:,.4f} per 1k requests")))
    if res.chunks > 1:
        lines.append(Text.from_markup(f"served in {res.chunks} chunks; overlap agreement at the boundaries: within "
                                      f"{100 * res.boundary_gap:.2f}% (mean and p90 end-to-end)"))
    red = Redactor.of()  # the notes quote the user's files (names, records): no key in them is printed
    lines += [Text(red.line(f"note: {n}")) for n in s["notes"]]
    if out is not None:
        lines.append(Text(f"wrote {out} (one row per request)"))
    return lines
