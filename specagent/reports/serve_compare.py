"""A `replay` prediction beside a measurement of the same trace, figure by figure, with the signed relative error.

Why: `replay` predicts what `vllm bench serve` would measure; the reader's question is how far off it is. Both sides
are read under vLLM's result keys (common/vllm_result.py): the predicted side is `specagent replay --format json`;
the measured side is `specagent bench serve --json` (one load level: `level`) or vLLM's own ``--save-result`` file,
whose keys are the same. The error is (predicted − measured) / measured, the convention of the real-server check
(docs/calibration.md): positive where the prediction is high. Only the figures both files hold are compared; a
latency figure one file has and the other lacks is named, never priced as a zero.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specagent.common.errors import InputError, read_text
from specagent.common.vllm_result import METRICS
from specagent.endpoints.bench import vllm_result

#: Keys both sides must hold (every vLLM result has them), so a file of another kind is named as such.
REQUIRED = ("completed", "duration", "request_throughput")
#: The head figures, in vLLM's block order: (key, label).
HEAD = (("completed", "Successful requests"), ("duration", "Benchmark duration (s)"),
        ("total_input_tokens", "Total input tokens"), ("total_output_tokens", "Total generated tokens"),
        ("request_throughput", "Request throughput (req/s)"), ("output_throughput", "Output token throughput (tok/s)"),
        ("total_token_throughput", "Total token throughput (tok/s)"))
LATENCY = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
KINDS = "a replay --format json, bench serve --json or vllm bench serve --save-result file"
#: A guard against typos: bench serve runs one load level per --max-concurrency value.
MAX_LEVELS = 10_000


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    predicted: float | None
    measured: float | None

    @property
    def error(self) -> float | None:
        """(predicted − measured) / measured; None where either is absent or the measured figure is 0."""
        p, m = self.predicted, self.measured
        if p is None or m is None or m == 0:
            return None
        return (p - m) / m


def _number(path: Path, key: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{path}: key {key!r} is {v!r}, expected a number or null")
    return v


def load_result(path: Path, level: int | None = None) -> dict[str, Any]:
    """`path`'s figures under vLLM's keys: a `bench serve --json` document's load level `level` (1-based; needed
    where it holds several), else the object itself. A file that is not one names itself and the key it lacks."""
    path = Path(path)
    text = read_text(path, InputError, "result JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg}); expected {KINDS}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected one JSON object ({KINDS})")
    if "levels" in doc:  # bench serve --json: one summary per load level
        levels = doc["levels"] if isinstance(doc["levels"], list) else []
        if level is None and len(levels) != 1:
            raise InputError(f"{path}: holds {len(levels)} load levels; pass --level 1..{len(levels)}")
        i = 1 if level is None else level
        if not 1 <= i <= len(levels) or not isinstance(levels[i - 1], dict):
            raise InputError(f"{path}: no load level {i} (it holds {len(levels)})")
        try:
            doc = vllm_result(levels[i - 1])
        except KeyError as exc:
            raise InputError(f"{path}: load level {i} has no key {exc.args[0]!r} (expected bench serve's summary)") from None
    elif level is not None:
        raise InputError(f"{path}: --level picks a load level of a bench serve --json file; this file has no levels")
    for key in REQUIRED:
        if key not in doc:
            raise InputError(f"{path}: no key {key!r}; expected {KINDS}")
    return doc


def _latency_order(key: str) -> tuple[int, int, float]:
    stat, p, metric = LATENCY.match(key).groups()  # type: ignore[union-attr]
    rank = {"mean": 0, "median": 1, "std": 2}.get(stat, 3)
    return [x for x, _, _ in METRICS].index(metric), rank, float(p or 0)


def _label(key: str) -> str:
    stat, p, metric = LATENCY.match(key).groups()  # type: ignore[union-attr]
    name = {m: n for m, n, _ in METRICS}[metric]
    return f"{'P' + p if p else stat.capitalize()} {name} (ms)"


def compare(predicted: dict[str, Any], measured: dict[str, Any], paths: tuple[Path, Path]) -> tuple[list[Row], list[str]]:
    """The rows both sides hold, head figures then latencies in vLLM's order, and the notes: latency figures only one
    side holds, and runs that did not serve the same requests."""
    rows = [Row(k, label, _number(paths[0], k, predicted[k]), _number(paths[1], k, measured[k]))
            for k, label in HEAD if k in predicted and k in measured]
    lat = [k for k in predicted if LATENCY.match(k)]
    both = sorted((k for k in lat if k in measured), key=_latency_order)
    rows += [Row(k, _label(k), _number(paths[0], k, predicted[k]), _number(paths[1], k, measured[k])) for k in both]
    notes = []
    for side, doc, other in (("predicted", predicted, measured), ("measured", measured, predicted)):
        alone = sorted((k for k in doc if LATENCY.match(k) and k not in other), key=_latency_order)
        if alone:
            notes.append(f"only the {side} side has {', '.join(alone)} (match --percentile-metrics and "
                         "--metric-percentiles on both to compare them)")
    if not both:
        raise InputError(f"{paths[0]} and {paths[1]}: no latency figure in both (mean_ttft_ms, p99_e2el_ms, ...)")
    for key, what in (("completed", "requests completed"), ("total_input_tokens", "input tokens")):
        p, m = predicted.get(key), measured.get(key)
        if p is not None and m is not None and p != m:
            notes.append(f"the two runs differ in {what} ({p} predicted, {m} measured): are they of the same trace?")
    return rows, notes
