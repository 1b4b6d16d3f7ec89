"""`vllm bench serve`'s result vocabulary: its metric names, result keys, percentile options and printed block.

Why one module: `bench serve` measures a server and `replay` predicts the same trace; a reader sets the two side by
side, and `bench compare` does it for them, so both must print the same block and write the same keys. The names,
units and layout are vLLM's own (vllm-project/vllm `vllm/benchmarks/serve.py`, read at commit
009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): latencies in milliseconds; for each metric selected by
``--percentile-metrics`` the keys ``mean_<m>_ms``, ``median_<m>_ms``, ``std_<m>_ms`` and ``p<P>_<m>_ms`` for each
``--metric-percentiles`` value P (``P99``, ``P99.9``: an integral P is written without its decimals); the sections
always in the order TTFT, TPOT, ITL, E2EL whatever order the option lists them in; 40-column labels, values to two
decimals. A figure the run does not define (None or NaN) prints as ``-``, as `bench serve` prints a figure with no
request behind it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: (metric, its name in a label, its section header), in the order vLLM prints them.
METRICS = (("ttft", "TTFT", "Time to First Token"), ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
           ("itl", "ITL", "Inter-token Latency"), ("e2el", "E2EL", "End-to-end Latency"))
METRIC_NAMES = tuple(m for m, _, _ in METRICS)
#: vLLM's own default for a generative model ("ttft,tpot,itl"); `specagent bench serve` prints E2EL as well.
VLLM_DEFAULT_METRICS = "ttft,tpot,itl"
DEFAULT_METRICS = "ttft,tpot,itl,e2el"
DEFAULT_PERCENTILES = "99"
#: The head of the block: (result key, label, format), in vLLM's order.
HEAD = (("duration", "Benchmark duration (s):", ".2f"), ("total_input_tokens", "Total input tokens:", ""),
        ("total_output_tokens", "Total generated tokens:", ""), ("request_throughput", "Request throughput (req/s):", ".2f"),
        ("output_throughput", "Output token throughput (tok/s):", ".2f"),
        ("total_token_throughput", "Total Token throughput (tok/s):", ".2f"))


def percentile_word(p: float) -> str:
    """How vLLM writes a percentile in a key and a label: 99 for 99.0, 99.9 as it is."""
    return str(int(p)) if int(p) == p else str(p)


def parse_metrics(text: str) -> tuple[str, ...]:
    """A ``--percentile-metrics`` value: comma-separated names out of METRIC_NAMES, returned in vLLM's print order."""
    names = [t.strip() for t in str(text).split(",")]
    bad = [n for n in names if n not in METRIC_NAMES]
    if bad or not names:
        raise ValueError(f"expected a comma list of {', '.join(METRIC_NAMES)}, got {text!r}")
    return tuple(m for m in METRIC_NAMES if m in names)


def parse_percentiles(text: str) -> tuple[float, ...]:
    """A ``--metric-percentiles`` value: comma-separated numbers in [0, 100], in the order given (vLLM's order)."""
    out = []
    for t in str(text).split(","):
        try:
            p = float(t.strip())
        except ValueError:
            p = math.nan
        if not 0 <= p <= 100:
            raise ValueError(f"expected a comma list of percentiles in [0, 100] such as 50,90,99, got {text!r}")
        if p not in out:
            out.append(p)
    return tuple(out)


def latency_keys(metrics: Iterable[str], percentiles: Iterable[float]) -> list[str]:
    """The result keys a run with these options writes, in vLLM's order."""
    ps = list(percentiles)
    return [k for m in metrics for k in (f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms",
                                         *(f"p{percentile_word(p)}_{m}_ms" for p in ps))]


def stats_ms(metric: str, values_ms: np.ndarray, percentiles: Iterable[float]) -> dict[str, float]:
    """mean, median, std (numpy's, over the population) and the percentiles (numpy's linear rule) of `values_ms`, as
    vLLM computes them; NaN for each where there is no value."""
    v = np.asarray(values_ms, dtype=np.float64)
    some = len(v) > 0
    out = {f"mean_{metric}_ms": float(np.mean(v)) if some else math.nan,
           f"median_{metric}_ms": float(np.median(v)) if some else math.nan,
           f"std_{metric}_ms": float(np.std(v)) if some else math.nan}
    for p in percentiles:
        out[f"p{percentile_word(p)}_{metric}_ms"] = float(np.percentile(v, p)) if some else math.nan
    return out


def _absent(v: Any) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def format_block(result: Mapping[str, Any], metrics: Iterable[str] = METRIC_NAMES, percentiles: Iterable[float] = (99.0,),
                 title: str = " Serving Benchmark Result ") -> str:
    """`result` (vLLM's keys) as `vllm bench serve` prints it: failures, the concurrency limit and a finite configured
    rate only where there are some, then the totals and one section per selected metric."""
    lines = [f"{title:=^50}"]

    def row(label: str, value: Any, fmt: str = "") -> None:
        lines.append(f"{label:<40} -" if _absent(value) else f"{label:<40} {value:<10{fmt}}")

    row("Successful requests:", result.get("completed"))
    if result.get("failed"):
        row("Failed requests:", result["failed"])
    if result.get("max_concurrency") is not None:
        row("Maximum request concurrency:", result["max_concurrency"])
    rate = result.get("request_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        row("Request rate configured (RPS):", rate, ".2f")
    for key, label, fmt in HEAD:
        row(label, result.get(key), fmt)
    ps = list(percentiles)
    for m, name, head in METRICS:
        if m not in metrics:
            continue
        lines.append(f"{head:-^50}")
        row(f"Mean {name} (ms):", result.get(f"mean_{m}_ms"), ".2f")
        row(f"Median {name} (ms):", result.get(f"median_{m}_ms"), ".2f")
        for p in ps:
            w = percentile_word(p)
            row(f"P{w} {name} (ms):", result.get(f"p{w}_{m}_ms"), ".2f")
    lines.append("=" * 50)
    return "\n".join(lines)
