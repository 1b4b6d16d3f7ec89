"""Request datasets as `vllm bench serve` takes them, read as request traces (prompt and output lengths per request).

Three layouts (vLLM's benchmarks/datasets.py, `--dataset-name sharegpt` and `custom`, and what
`vllm bench serve --save-result --save-detailed` writes):

* **ShareGPT**: a JSON list of ``{"id", "conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}, ...]}``, or one such record per line (JSONL). As vLLM does,
  a request is the first two turns: the first turn's text is the prompt, the second's the
  reply whose length is the output length; a record with fewer than two turns is dropped
  (vLLM's reader drops it too), and so is one whose first or second turn has no text. Each
  drop is counted in the trace's notes with the first record dropped. Unlike vLLM, the
  records keep their file order (no shuffle) and no length pruning is applied (vLLM drops
  pairs under 4 tokens, prompts over 1,024 and pairs over 2,048 tokens of its tokenizer).
* **custom**: JSONL, one ``{"prompt": TEXT, "output_tokens": N}`` per line (vLLM's custom
  dataset; ``output_tokens`` is required here, there is no ``--custom-output-len``).
* **a saved vllm bench serve result**: a JSON object with the per-request ``input_lens`` and
  ``output_lens`` (``--save-detailed``): lengths exact, as vLLM counted them. A request whose
  ``errors`` entry is non-empty failed and is dropped (counted in the notes). Arrivals come
  from ``start_times`` where saved (each request's send time, ``time.perf_counter()`` seconds;
  taken as seconds from the first one, requests sorted by it where out of order); under
  ``--max-concurrency`` these are send times after the wait for a slot, not the schedule.
  Without ``start_times`` the trace has no arrival times (replay then needs ``--request-rate``).

Lengths from text are **estimates**: there is no tokenizer here. The rule is the project's
word-piece estimator (traces/tokens.py `estimate_text_tokens`: a run of ASCII letters, a run of
up to 3 digits, and every other non-space character each count one token), measured on
τ²-Bench messages against the providers' recorded usage at 13.4 % mean error per message and
+2.4 % in aggregate; other text (code, other languages) can differ more. The trace's notes say
which lengths are estimated, and replay prints them.

Hostile input (not JSON, wrong types, NaN, negative or huge lengths, deep nesting, a key
given twice) is refused with a TraceFormatError naming the file, the record, the field and
what was expected. Knows nothing of hardware.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from .errors import TraceFormatError
from .requests import RequestTrace
from .vocabulary import LIMIT_REASONS, MAX_CONTEXT_TOKENS
from .tokens import estimate_text_tokens

#: File name endings read as datasets; any other file whose first character is '[' or '{' is one too.
EXTENSIONS = (".json", ".jsonl")

ESTIMATE_RULE = ("estimated from the text by specagent's word-piece rule (a run of letters, a run of up to 3 digits, any "
                 "other non-space character: one token each; 13.4% mean error per message on tau2-bench, not the model's "
                 "tokenizer)")


class _NonFinite:
    """A NaN or Infinity where JSON has no such number (Python's reader accepts them): refused where it is read."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _Keys(dict):
    """An object that named a key twice (the reader would keep the last, silently)."""

    duplicate: str = ""


def _decoder():
    seen: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        d = dict(items)
        if len(d) == len(items):
            return d
        names: set[str] = set()
        out = _Keys(d)
        for k, _ in items:
            if k in names:
                out.duplicate = k
                break
            names.add(k)
        seen.append(out.duplicate)
        return out

    return json.JSONDecoder(object_pairs_hook=pairs, parse_constant=_NonFinite), seen


def _parse(text: str, decoder: json.JSONDecoder, path: str, where: str | None) -> Any:
    """One JSON value; `where` names the JSONL line (None: the whole file, the decoder's line and column)."""
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        loc = f"{where}, column {exc.colno}" if where else f"line {exc.lineno}, column {exc.colno}"
        raise TraceFormatError(path, loc, "contents", "JSON (a ShareGPT list, custom JSONL or a vllm bench serve result)",
                               found=exc.msg) from None
    except RecursionError:
        raise TraceFormatError(path, where or "file", "contents", "JSON nested no deeper than Python's reader allows "
                               "(a dataset record is a few levels deep)", found="deeper nesting") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise TraceFormatError(path, where or "file", "contents", "JSON numbers of a sensible size",
                               found=str(exc).splitlines()[0]) from None


def _check_keys(obj: Any, path: str, where: str, field: str) -> None:
    if isinstance(obj, _Keys):
        name = f"{field}.{obj.duplicate}" if field else obj.duplicate
        raise TraceFormatError(path, where, name, "each key once in an object", found="it twice (which one counts?)")


def _tokens(v: Any, path: str, where: str, field: str) -> int:
    """A length as saved: a whole number of tokens in [1, MAX_CONTEXT_TOKENS]; no bools, strings, NaN."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v == int(v) \
        and 1 <= v <= MAX_CONTEXT_TOKENS
    if not ok:
        raise TraceFormatError(path, where, field, f"a whole number of tokens in [1, {MAX_CONTEXT_TOKENS:,}] "
                               f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]})", got=v)
    return int(v)


def _estimate(text: str, path: str, where: str, field: str) -> int:
    n = estimate_text_tokens(text)
    if n > MAX_CONTEXT_TOKENS:
        raise TraceFormatError(path, where, field, f"text of at most {MAX_CONTEXT_TOKENS:,} tokens "
                               f"({LIMIT_REASONS[MAX_CONTEXT_TOKENS]})", found=f"an estimated {n:,} tokens")
    return n


class _Records:
    """Requests gathered record by record, with where each came from and what was dropped."""

    def __init__(self, path: str, label: str) -> None:
        self.path, self.label = path, label
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.names: list[int] = []
        self.dropped: dict[str, list[int]] = {}

    def add(self, name: int, prompt: int, output: int) -> None:
        self.prompt.append(prompt)
        self.output.append(output)
        self.names.append(name)

    def drop(self, name: int, why: str) -> None:
        self.dropped.setdefault(why, []).append(name)

    def notes(self) -> list[str]:
        return [f"dropped {len(v):,} {self.label}(s) with {why} (the first: {self.label} {v[0]})" for why, v in self.dropped.items()]


def _sharegpt(rec: Any, out: _Records, name: int, where: str) -> None:
    p = out.path
    if not isinstance(rec, dict):
        raise TraceFormatError(p, where, "<record>", "an object with 'conversations' (a list of turns)", got=rec)
    _check_keys(rec, p, where, "")
    if "conversations" not in rec:
        raise TraceFormatError(p, where, "conversations", "a list of turns {\"from\", \"value\"} (a ShareGPT record)",
                               found=f"keys {', '.join(map(repr, list(rec)[:8]))}")
    conv = rec["conversations"]
    if not isinstance(conv, list):
        raise TraceFormatError(p, where, "conversations", "a list of turns {\"from\", \"value\"}", got=conv)
    if len(conv) < 2:
        out.drop(name, "fewer than two turns")
        return
    lengths = []
    for j in (0, 1):
        turn = conv[j]
        if not isinstance(turn, dict):
            raise TraceFormatError(p, where, f"conversations[{j}]", "a turn {\"from\", \"value\"}", got=turn)
        _check_keys(turn, p, where, f"conversations[{j}]")
        if not isinstance(turn.get("value"), str):
            raise TraceFormatError(p, where, f"conversations[{j}].value", "the turn's text (a string)",
                                   got=turn.get("value"), found=None if "value" in turn else "no key 'value'")
        lengths.append(_estimate(turn["value"], p, where, f"conversations[{j}].value"))
    if min(lengths) < 1:
        out.drop(name, "an empty first or second turn")
        return
    out.add(name, lengths[0], lengths[1])


def _custom(rec: Any, out: _Records, name: int, where: str) -> None:
    p = out.path
    if not isinstance(rec, dict):
        raise TraceFormatError(p, where, "<record>", "an object {\"prompt\": TEXT, \"output_tokens\": N}", got=rec)
    _check_keys(rec, p, where, "")
    if not isinstance(rec.get("prompt"), str):
        raise TraceFormatError(p, where, "prompt", "the prompt's text (a string)", got=rec.get("prompt"),
                               found=None if "prompt" in rec else "no key 'prompt'")
    if "output_tokens" not in rec:
        raise TraceFormatError(p, where, "output_tokens", "the request's output length in tokens (vLLM's custom dataset "
                               "field; specagent has no --custom-output-len)", found="no key 'output_tokens'")
    prompt = _estimate(rec["prompt"], p, where, "prompt")
    if prompt < 1:
        raise TraceFormatError(p, where, "prompt", "a prompt with text in it (an empty one has no length)", got=rec["prompt"])
    out.add(name, prompt, _tokens(rec["output_tokens"], p, where, "output_tokens"))


def _kind_of(rec: Any, path: str, where: str) -> str:
    if isinstance(rec, dict) and "conversations" in rec:
        return "sharegpt"
    if isinstance(rec, dict) and "prompt" in rec:
        return "custom"
    raise TraceFormatError(path, where, "<record>", "a ShareGPT record (with 'conversations') or a custom one (with "
                           "'prompt' and 'output_tokens')", got=rec if not isinstance(rec, (dict, list)) else None,
                           found=f"keys {', '.join(map(repr, list(rec)[:8]))}" if isinstance(rec, dict) else
                           (f"a {type(rec).__name__}" if isinstance(rec, list) else None))


READERS = {"sharegpt": _sharegpt, "custom": _custom}


def _trace(out: _Records, kind: str, arrivals: np.ndarray | None = None, arrivals_note: str = "") -> RequestTrace:
    p = out.path
    if not out.prompt:
        found = "; ".join(out.notes()) or "no records"
        raise TraceFormatError(p, "file", "<records>", "at least one request", found=found)
    what = {"sharegpt": "ShareGPT: prompt and output lengths " + ESTIMATE_RULE,
            "custom": "custom dataset: prompt lengths " + ESTIMATE_RULE + "; output lengths the file's output_tokens",
            "vllm-result": "a vllm bench serve result: lengths exact (its input_lens, output_lens)"}[kind]
    return RequestTrace(np.asarray(out.prompt, dtype=np.int64), np.asarray(out.output, dtype=np.int64), arrivals, source=p,
                        notes=(f"{p}: {len(out.prompt):,} requests; {what}", *out.notes()),
                        record_names=np.asarray(out.names, dtype=np.int64), record_label=out.label,
                        estimated=kind != "vllm-result", arrivals_note=arrivals_note)


def _float_list(doc: dict, key: str, n: int, path: str) -> list | None:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != n:
        raise TraceFormatError(path, "file", key, f"a list of {n:,} entries, one per request (as input_lens)",
                               got=v if not isinstance(v, list) else None, found=f"{len(v):,} entries" if isinstance(v, list) else None)
    return v


def _result(doc: dict, path: str) -> RequestTrace:
    """A `vllm bench serve --save-result --save-detailed` JSON: exact lengths, arrivals from start_times where saved."""
    _check_keys(doc, path, "file", "")
    ins = doc.get("input_lens")
    if not isinstance(ins, list):
        raise TraceFormatError(path, "file", "input_lens", "a list of prompt lengths, one per request", got=ins)
    n = len(ins)
    outs = doc.get("output_lens")
    if not isinstance(outs, list) or len(outs) != n:
        raise TraceFormatError(path, "file", "output_lens", f"a list of {n:,} output lengths, one per input_lens entry",
                               got=outs if not isinstance(outs, list) else None,
                               found=f"{len(outs):,} entries" if isinstance(outs, list) else None)
    errors = _float_list(doc, "errors", n, path)
    starts = _float_list(doc, "start_times", n, path)
    rec = _Records(path, "request")
    times: list[float] = []
    for i in range(n):
        where = f"request {i}"
        if errors is not None and errors[i] not in (None, ""):
            if not isinstance(errors[i], str):
                raise TraceFormatError(path, where, f"errors[{i}]", "the request's error text, or an empty string", got=errors[i])
            rec.drop(i, "an error (failed requests have no output)")
            continue
        rec.add(i, _tokens(ins[i], path, where, f"input_lens[{i}]"), _tokens(outs[i], path, where, f"output_lens[{i}]"))
        if starts is not None:
            t = starts[i]
            if not (isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)):
                raise TraceFormatError(path, where, f"start_times[{i}]", "the request's send time, a finite number of seconds",
                                       got=t)
            times.append(float(t))
    note = ""
    arrivals = None
    if starts is not None and rec.prompt:
        t = np.asarray(times, dtype=np.float64)
        order = np.argsort(t, kind="stable")
        note = "arrival times: the result's start_times, seconds from the first request sent"
        if (t[1:] < t[:-1]).any():
            note += "; out of order (concurrent sends): requests sorted by their send time"
            rec.prompt = [rec.prompt[k] for k in order]
            rec.output = [rec.output[k] for k in order]
            rec.names = [rec.names[k] for k in order]
            t = t[order]
        with np.errstate(over="ignore"):  # -1e308 to 1e308 is inf: RequestTrace refuses it, naming the request
            arrivals = t - t[0]
        if doc.get("max_concurrency") is not None:
            note += f" (sent under --max-concurrency {doc['max_concurrency']}: send times after the wait for a slot)"
    elif isinstance(doc.get("request_rate"), (int, float, str)) and not isinstance(doc["request_rate"], bool):
        note = f"the result saved no start_times; it was run at --request-rate {doc['request_rate']}"
    return _trace(rec, "vllm-result", arrivals, note)


def _records(items: list, path: str, label: str, wheres: list[str] | None = None) -> RequestTrace:
    """ShareGPT or custom records (the first one decides which), in order."""
    if not items:
        raise TraceFormatError(path, "file", "<records>", "at least one record", found="an empty list")
    first = (wheres[0] if wheres else f"{label} 0")
    kind = _kind_of(items[0][1] if wheres else items[0], path, first)
    read = READERS[kind]
    out = _Records(path, label)
    if wheres:
        for (name, rec), where in zip(items, wheres):
            read(rec, out, name, where)
    else:
        for i, rec in enumerate(items):
            read(rec, out, i, f"{label} {i}")
    return _trace(out, kind)


def load_dataset(path: str | os.PathLike) -> RequestTrace:
    """A ShareGPT JSON or JSONL, a custom JSONL, or a saved vllm bench serve result, as a request trace.

    Errors name the file, the record (a JSON list's index from 0, a JSONL file's line from 1,
    a result's request index), the field and what was expected.
    """
    p = str(path)
    try:
        with open(p, encoding="utf-8-sig") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise TraceFormatError(p, "file", "contents", "UTF-8 text (JSON)", found=str(exc).splitlines()[0]) from None
    except OSError as exc:
        raise TraceFormatError(p, "file", "path", "a readable dataset file", found=exc.strerror or str(exc)) from None
    decoder, dups = _decoder()
    if not text.strip():
        raise TraceFormatError(p, "file", "contents", "JSON or JSONL records", found="an empty file")
    lines = p.lower().endswith(".jsonl")
    doc: Any = None
    if not lines:
        try:
            doc = decoder.decode(text)
        except json.JSONDecodeError as exc:
            # a second value after the first: JSONL under another name
            lines = exc.msg == "Extra data" and text.lstrip().startswith("{")
            if not lines:
                _parse(text, decoder, p, None)
        except (RecursionError, ValueError):
            _parse(text, decoder, p, None)
    if lines:
        items: list[tuple[int, Any]] = []
        wheres: list[str] = []
        for no, line in enumerate(text.splitlines(), 1):
            if line.strip():
                items.append((no, _parse(line, decoder, p, f"line {no}")))
                wheres.append(f"line {no}")
        trace = _records(items, p, "line", wheres)
    elif isinstance(doc, list):
        trace = _records(doc, p, "record")
    elif isinstance(doc, dict):
        if "input_lens" in doc or "output_lens" in doc:
            trace = _result(doc, p)
        elif "duration" in doc or "completed" in doc:
            raise TraceFormatError(p, "file", "input_lens", "per-request lengths: a vllm bench serve result saved with "
                                   "--save-detailed (this one has only the summary)")
        else:
            raise TraceFormatError(p, "file", "contents", "a list of ShareGPT records, custom JSONL, or a vllm bench serve "
                                   "result (with input_lens and output_lens)", found=f"an object with keys "
                                   f"{', '.join(map(repr, list(doc)[:8]))}")
    else:
        raise TraceFormatError(p, "file", "contents", "a list of records or a vllm bench serve result object", got=doc)
    if dups:  # a key twice in an object no reader looked at
        raise TraceFormatError(p, "file", dups[0], "each key once in an object", found="it twice in one object")
    return trace


def is_dataset(path: str | os.PathLike) -> bool:
    """A .json or .jsonl name, or a file whose first character (after a byte-order mark and white space) is '[' or '{'."""
    p = str(path)
    if p.lower().endswith(EXTENSIONS):
        return True
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] in (b"[", b"{")
