"""Plain LLM serving request traces: one row per request (arrival time, prompt tokens, output tokens).

Serving simulators take this shape (Vidur's trace replay reads `Time`, `PromptTokenCount`,
`CompletionTokenCount`; its length traces `num_prefill_tokens`, `num_decode_tokens`; the
Azure LLM inference traces `TIMESTAMP`, `ContextTokens`, `GeneratedTokens`; BurstGPT, one of `vllm bench serve`'s
datasets, `Timestamp`, `Request tokens`, `Response tokens`), so specagent
reads them too, under any of those names, and its fleet serves each request as one call
(a prefill of the prompt that yields the first output token, then one decode iteration per
further token) on one model. The arrival column is optional: a length-only trace is served
at a rate the caller gives. Knows nothing of hardware.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specagent.common import atomic
from specagent.common.lazy_import import lazy_module
from specagent.common.paths import input_file_problem

from .errors import TraceFormatError
from .vocabulary import LIMIT_REASONS, MAX_ARRIVAL_S, MAX_CONTEXT_TOKENS

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: the plain-numbers reader (_read_plain), replay's usual path, never needs it
    pd = lazy_module("pandas")

#: Accepted header names per field, first the canonical one (case-insensitive).
COLUMNS = {
    "arrival_s": ("arrival_s", "arrived_at", "arrival_time", "time", "timestamp"),
    "prompt_tokens": ("prompt_tokens", "num_prefill_tokens", "prompttokencount", "contexttokens", "input_tokens",
                      "request tokens"),
    "output_tokens": ("output_tokens", "num_decode_tokens", "completiontokencount", "generatedtokens", "response tokens"),
}


@dataclass(frozen=True)
class RequestTrace:
    """Requests in arrival order; `arrival_s` starts at 0 (None: lengths only, arrivals come from a rate)."""

    prompt_tokens: np.ndarray  # int64, >= 1
    output_tokens: np.ndarray  # int64, >= 1
    arrival_s: np.ndarray | None = None  # float64, non-decreasing, from 0
    source: str = ""
    #: what a reader says about the trace (where lengths and arrivals come from, records dropped), printed by replay
    notes: tuple[str, ...] = ()
    #: per request, the record it came from in a dataset file (None: a CSV, request i on line i + 2), and its word
    record_names: np.ndarray | None = None
    record_label: str = "line"
    #: some lengths are estimates from text (traces/datasets.py), not counts
    estimated: bool = False
    #: where a dataset's arrival times come from, or, without them, a hint for the rate (a saved result's request rate)
    arrivals_note: str = ""

    def __post_init__(self) -> None:
        n = len(self.prompt_tokens)
        if len(self.output_tokens) != n or (self.arrival_s is not None and len(self.arrival_s) != n):
            raise ValueError("a request trace needs as many output lengths (and arrival times) as prompt lengths")
        if n == 0:
            raise ValueError(f"{self.source or 'request trace'}: no requests")
        if self.arrival_s is not None:  # bounded where it enters: no inf, NaN or 1e300 s reaches the engine's clock
            bad = np.flatnonzero(~((self.arrival_s >= 0) & (self.arrival_s <= MAX_ARRIVAL_S)))
            if len(bad):
                i = int(bad[0])
                raise TraceFormatError(self.source or "request trace", self.location(i), "arrival_s",
                                       f"a finite time in [0, {MAX_ARRIVAL_S:g}] s after the first request "
                                       f"({LIMIT_REASONS[MAX_ARRIVAL_S]})", got=float(self.arrival_s[i]))

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    @property
    def rate(self) -> float:
        """Mean arrival rate over the trace (requests per second); NaN without arrival times."""
        if self.arrival_s is None or len(self) < 2 or self.arrival_s[-1] <= 0:
            return float("nan")
        return (len(self) - 1) / float(self.arrival_s[-1])

    def location(self, i: int) -> str:
        """Where request i is in its file: a CSV's line, a dataset's record."""
        if self.record_names is None:
            return f"line {i + 2}"
        return f"{self.record_label} {int(self.record_names[i])}"

    def head(self, n: int) -> "RequestTrace":
        return dataclasses.replace(self, prompt_tokens=self.prompt_tokens[:n], output_tokens=self.output_tokens[:n],
                                   arrival_s=None if self.arrival_s is None else self.arrival_s[:n],
                                   record_names=None if self.record_names is None else self.record_names[:n])


def _column(frame: pd.DataFrame, field: str, path: str, required: bool) -> str | None:
    lower = {c.strip().lower(): c for c in frame.columns}
    hits = [lower[name] for name in COLUMNS[field] if name in lower]
    if len(hits) > 1:  # two spellings of one field (prompt_tokens and input_tokens): which one the trace means is a guess
        raise TraceFormatError(path, "header", field, "one column for it (its accepted names: "
                               f"{', '.join(COLUMNS[field])})", found=f"{len(hits)} columns: {', '.join(map(str, hits))}; "
                               "keep the one that holds it and rename or drop the others")
    for name in COLUMNS[field]:
        if name in lower:
            return lower[name]
    if required:
        raise TraceFormatError(path, "header", field, f"a column named one of {', '.join(COLUMNS[field])}",
                               found=f"columns {', '.join(map(str, frame.columns))}")
    return None


def _counts(frame: pd.DataFrame, col: str, field: str, path: str) -> np.ndarray:
    raw = frame[col]
    num = pd.to_numeric(raw, errors="coerce").astype(np.float64)  # 2**64 and up stay numbers (no int64 wrap-around)
    bad = num.isna() | (num < 1) | (num != np.floor(num)) | (num > MAX_CONTEXT_TOKENS)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceFormatError(path, f"line {i + 2}", field, f"a whole number of tokens in [1, {MAX_CONTEXT_TOKENS:,}] "
                               f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]})", got=raw.iloc[i])
    return num.to_numpy(dtype=np.int64)


def _check_header(path: str) -> None:
    """Refuse a column name given twice (pandas would read the first and rename the second `NAME.1`, silently)."""
    head = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
    seen: dict[str, int] = {}
    for i, name in enumerate(head):
        key = str(name).strip().lower().removeprefix("\ufeff")
        if key in seen:
            raise TraceFormatError(path, "header", str(name).strip(), "each column once",
                                   found=f"it is both column {seen[key] + 1} and column {i + 1}")
        seen[key] = i


#: How a non-finite number is spelled in a CSV: a number, not a date-time (pandas reads 'nan' as a missing value).
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _arrivals(frame: pd.DataFrame, col: str, path: str) -> np.ndarray:
    raw = frame[col]
    spelled = raw.astype(str).str.strip().str.lower().isin(_NON_FINITE)
    if spelled.any():
        i = int(np.flatnonzero(spelled.to_numpy())[0])
        raise TraceFormatError(path, f"line {i + 2}", "arrival_s", "a finite number of seconds", got=raw.iloc[i])
    num = pd.to_numeric(raw, errors="coerce")
    if num.isna().any():  # timestamps such as the Azure traces' "2023-11-16 18:15:46.68": seconds from the first one
        if num.notna().any():  # one column, two kinds: no single clock to subtract
            i, j = int(np.flatnonzero(num.notna().to_numpy())[0]), int(np.flatnonzero(num.isna().to_numpy())[0])
            raise TraceFormatError(path, f"line {i + 2}", "arrival_s", f"the same kind of time on every line (line {j + 2} "
                                   "holds a date-time, this one a number of seconds)", got=raw.iloc[i])
        aware = raw.str.contains(r"(?:[+-]\d\d:?\d\d|Z)\s*$", regex=True)
        if aware.any() and not aware.all():
            i, j = int(np.flatnonzero(aware.to_numpy())[0]), int(np.flatnonzero((~aware).to_numpy())[0])
            raise TraceFormatError(path, f"line {j + 2}", "arrival_s", f"date-times that all carry a UTC offset or all do not "
                                   f"(line {i + 2} has one, this one has none)", got=raw.iloc[j])
        try:
            stamps = pd.to_datetime(raw, errors="coerce", format="mixed", utc=bool(aware.all()))
        except (ValueError, TypeError) as exc:
            raise TraceFormatError(path, "file", "arrival_s", "date-times of one form", found=str(exc).splitlines()[0]) from None
        if stamps.isna().any():
            i = int(np.flatnonzero(stamps.isna().to_numpy())[0])
            raise TraceFormatError(path, f"line {i + 2}", "arrival_s", "seconds (a number) or a date-time", got=raw.iloc[i])
        t = (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy(dtype=np.float64)
    else:
        t = num.to_numpy(dtype=np.float64)
    if not np.isfinite(t).all():
        i = int(np.flatnonzero(~np.isfinite(t))[0])
        raise TraceFormatError(path, f"line {i + 2}", "arrival_s", "a finite number of seconds", got=raw.iloc[i])
    back = np.flatnonzero(t[1:] < t[:-1])
    if len(back):
        i = int(back[0]) + 1
        raise TraceFormatError(path, f"line {i + 2}", "arrival_s", f"times in arrival order (not before line {i + 1}'s "
                               f"{t[i - 1]:g})", got=raw.iloc[i])
    with np.errstate(over="ignore"):  # -1e308 to 1e308 overflows to inf: RequestTrace refuses it, naming the line
        return t - t[0]


#: What the plain-numbers reader takes: whole token counts, and arrival seconds of at most 15 digits (one point
#: between two of them at most; no sign or exponent). pandas reads such a number as the digits' integer divided by an
#: exact power of ten, which is then the correctly rounded double, as Python's float() gives; longer spellings go to
#: pandas, whose parse may differ by an ulp.
_DIGITS = b"0123456789"
_MAX_SECONDS_DIGITS = 15
_PLAIN_BYTES = 64 << 20  # a larger file goes to pandas' C reader: the text is held once here, and split in Python


def _plain_counts(values: list[bytes]) -> np.ndarray | None:
    """Whole token counts in [1, MAX_CONTEXT_TOKENS], each spelled with digits only; None otherwise (a spelling over 18
    digits too, which int64 cannot hold: pandas' reader then says which line)."""
    if b"" in values or b",".join(values).translate(None, _DIGITS) != b"," * (len(values) - 1):
        return None
    if max(map(len, values)) > 18:
        return None
    x = np.array(list(map(int, values)), dtype=np.int64)
    return x if x.min() >= 1 and x.max() <= MAX_CONTEXT_TOKENS else None


def _plain_seconds(values: list[bytes]) -> np.ndarray | None:
    """Seconds spelled `digits` or `digits.digits`, at most 15 digits, non-decreasing; None otherwise."""
    joined = b",".join(values)
    rest = joined.translate(None, _DIGITS)  # each field's points, between the commas
    if b"" in values or rest.replace(b".", b"") != b"," * (len(values) - 1) or b".." in rest:
        return None
    if joined[:1] == b"." or joined[-1:] == b"." or b",." in joined or b".," in joined:
        return None
    if max(map(len, values)) > _MAX_SECONDS_DIGITS and any(len(v) - v.count(b".") > _MAX_SECONDS_DIGITS for v in values):
        return None
    t = np.array(list(map(float, values)), dtype=np.float64)
    return None if (t[1:] < t[:-1]).any() else t - t[0]


def _read_plain(p: str) -> RequestTrace | None:
    """The trace when the file is the common case, read without pandas (issue #34: importing it is most of a small
    replay's time): ASCII, one header, every line that many comma-separated fields, no quotes or blank lines, the
    columns found, each count a plain whole number in range and each arrival a plain number, in order. The result is
    then the one pandas gives (tests/test_trace_plain_reader.py); anything else is None, and pandas reads it, with its
    messages."""
    try:
        if os.path.getsize(p) > _PLAIN_BYTES:
            return None
        with open(p, "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    if not data.isascii() or b'"' in data:  # a byte-order mark is not ASCII either
        return None
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            return None
    head, _, body = data.removesuffix(b"\n").partition(b"\n")
    lines = body.split(b"\n")
    if not body or b"" in lines:
        return None
    header = head.decode("ascii").split(",")
    keys = [h.strip().lower() for h in header]
    if "" in keys or len(set(keys)) != len(keys):
        return None
    where = {}
    for field, names in COLUMNS.items():
        hit = [keys.index(n) for n in names if n in keys]
        if len(hit) > 1:
            return None  # two columns for one field: pandas' reader refuses it, naming both
        if hit:
            where[field] = hit[0]
    if "prompt_tokens" not in where or "output_tokens" not in where:
        return None
    width = len(header)
    if set(map(bytes.count, lines, itertools.repeat(b","))) != {width - 1}:
        return None
    fields = body.replace(b"\n", b",").split(b",")
    prompt = _plain_counts(fields[where["prompt_tokens"]::width])
    output = _plain_counts(fields[where["output_tokens"]::width])
    arrival = _plain_seconds(fields[where["arrival_s"]::width]) if "arrival_s" in where else None
    if prompt is None or output is None or ("arrival_s" in where and arrival is None):
        return None
    return RequestTrace(prompt, output, arrival, source=p)


def load_requests(path: str | os.PathLike) -> RequestTrace:
    """A request trace CSV, or a dataset `vllm bench serve` reads (a .json / .jsonl file, or one that starts with '[' or
    '{': ShareGPT, custom JSONL, a saved result; traces/datasets.py); errors name the file, the line or record and the field."""
    p = str(path)
    problem = input_file_problem(p)  # a FIFO would block pandas forever
    if problem is not None:
        raise TraceFormatError(p, "file", "path", "an existing CSV file of requests, or a dataset file (JSON, JSONL)", found=problem)
    from . import datasets  # it builds RequestTrace: imported here, not at the top

    if datasets.is_dataset(p):
        return datasets.load_dataset(p)
    plain = _read_plain(p)
    if plain is not None:
        return plain
    try:  # the general reader: date-times, quoting, odd spellings and every error message
        frame = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise TraceFormatError(p, "file", "contents", "a CSV file with a header row", found=str(exc).splitlines()[0]) from None
    if frame.empty:
        raise TraceFormatError(p, "file", "rows", "at least one request after the header")
    _check_header(p)
    prompt = _counts(frame, _column(frame, "prompt_tokens", p, True), "prompt_tokens", p)  # type: ignore[arg-type]
    output = _counts(frame, _column(frame, "output_tokens", p, True), "output_tokens", p)  # type: ignore[arg-type]
    acol = _column(frame, "arrival_s", p, False)
    return RequestTrace(prompt, output, None if acol is None else _arrivals(frame, acol, p), source=p)


def save_requests(path: str | os.PathLike, trace: RequestTrace) -> Path:
    """Write the canonical CSV (arrival_s, prompt_tokens, output_tokens), atomically."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            if trace.arrival_s is None:
                w.writerow(["prompt_tokens", "output_tokens"])
                w.writerows(zip(trace.prompt_tokens.tolist(), trace.output_tokens.tolist()))
            else:
                w.writerow(["arrival_s", "prompt_tokens", "output_tokens"])
                w.writerows(zip((f"{t:.6f}" for t in trace.arrival_s.tolist()), trace.prompt_tokens.tolist(),
                                trace.output_tokens.tolist()))
    return atomic.atomic_write(path, write)


def synthetic_requests(n: int, rate: float, prompt_mean: float = 1024.0, output_mean: float = 256.0, seed: int = 0) -> RequestTrace:
    """n requests arriving Poisson at `rate`, prompt and output lengths geometric with the given means (seeded).

    For benchmarks and tests, not a workload anyone measured: geometric lengths make a
    request's service time close to exponential, which queueing theory can check.
    """
    if n < 1 or not rate > 0 or prompt_mean < 1 or output_mean < 1:
        raise ValueError("synthetic_requests needs n >= 1, rate > 0 and mean lengths >= 1")
    rng = np.random.default_rng([int(seed), 1301])
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    prompt = rng.geometric(1.0 / prompt_mean, n).astype(np.int64)
    output = rng.geometric(1.0 / output_mean, n).astype(np.int64)
    return RequestTrace(prompt, output, arrivals - arrivals[0], source=f"synthetic requests (n={n}, rate={rate:g}/s, seed={seed})")
