"""The request-trace reader without pandas (traces/requests.py `_read_plain`) against the pandas reader, and replay's
import path without pandas (issue #34: importing pandas was most of a small replay's whole-process time).

The plain reader takes only files whose every value it reads as pandas does (plain whole counts, arrival seconds of at
most 15 digits); everything else goes to pandas. These tests hold it to the same arrays, bit for bit, and check that
what it declines still reads (or fails) exactly as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from specagent.common.errors import InputError
from specagent.traces import requests as rq
from specagent.traces.requests import load_requests, save_requests, synthetic_requests


def _pandas_read(path, monkeypatch) -> rq.RequestTrace:
    """The trace as the pandas reader alone gives it."""
    with monkeypatch.context() as m:
        m.setattr(rq, "_read_plain", lambda p: None)
        return load_requests(path)


def _same(a: rq.RequestTrace, b: rq.RequestTrace) -> None:
    for name in ("prompt_tokens", "output_tokens", "arrival_s"):
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        assert x.dtype == y.dtype, name
        assert x.tobytes() == y.tobytes(), name  # bit for bit: replay's pinned bytes depend on it
    assert (a.source, a.notes, a.record_names, a.estimated, a.arrivals_note) == \
           (b.source, b.notes, b.record_names, b.estimated, b.arrivals_note)


TAKEN = {
    "vidur": "Date,Time,PromptTokenCount,CompletionTokenCount\n2023-08-21,0.000000,12,3\n2023-08-21,0.512345,7,1\n"
             "2023-08-21,1234.987654,4000,96\n",
    "canonical, CRLF": "arrival_s,prompt_tokens,output_tokens\r\n0,5,5\r\n0.25,1,2\r\n3,8,9\r\n",
    "lengths only": "num_prefill_tokens,num_decode_tokens\n100,20\n3,4\n",
    "no last newline, spaced header": " arrival_s , prompt_tokens,output_tokens\n1.5,10,10\n2.5,0010,1",
    "15 digits": "arrival_s,prompt_tokens,output_tokens\n0.12345678901234,1,1\n123456789.012345,1,1\n",
}


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_the_plain_reader_gives_what_pandas_gives(name, tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    path.write_bytes(TAKEN[name].encode())
    plain = rq._read_plain(str(path))
    assert plain is not None, "the plain reader declined a plain file"
    _same(plain, _pandas_read(path, monkeypatch))
    _same(load_requests(path), plain)


DECLINED = {
    "quoted": 'arrival_s,prompt_tokens,output_tokens\n"0",1,1\n',
    "byte-order mark": "\ufeffarrival_s,prompt_tokens,output_tokens\n0,1,1\n",
    "blank line": "arrival_s,prompt_tokens,output_tokens\n0,1,1\n\n1,2,2\n",
    "ragged": "arrival_s,prompt_tokens,output_tokens\n0,1,1,9\n",
    "16 digits": "arrival_s,prompt_tokens,output_tokens\n0.123456789012345,1,1\n",
    "exponent": "arrival_s,prompt_tokens,output_tokens\n1e3,1,1\n",
    "negative": "arrival_s,prompt_tokens,output_tokens\n-1,1,1\n0,1,1\n",
    "space in a value": "arrival_s,prompt_tokens,output_tokens\n0, 1,1\n",
    "zero tokens": "arrival_s,prompt_tokens,output_tokens\n0,0,1\n",
    "too many tokens": f"arrival_s,prompt_tokens,output_tokens\n0,{rq.MAX_CONTEXT_TOKENS + 1},1\n",
    "20 digits of tokens": "arrival_s,prompt_tokens,output_tokens\n0,20000000000000000000,10\n",
    "fractional tokens": "arrival_s,prompt_tokens,output_tokens\n0,1.5,1\n",
    "out of order": "arrival_s,prompt_tokens,output_tokens\n2,1,1\n1,1,1\n",
    "twice a column": "arrival_s,prompt_tokens,prompt_tokens,output_tokens\n0,1,1,1\n",
    "date-times": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,2\n2023-11-16 18:15:47.00,3,4\n",
    "nan": "arrival_s,prompt_tokens,output_tokens\nnan,1,1\n",
    "header only": "arrival_s,prompt_tokens,output_tokens\n",
    "no output column": "arrival_s,prompt_tokens\n0,1\n",
    "lone CR": "arrival_s,prompt_tokens,output_tokens\r0,1,1\r",
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_anything_else_goes_to_pandas_unchanged(name, tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    path.write_bytes(DECLINED[name].encode())
    assert rq._read_plain(str(path)) is None
    try:
        want = _pandas_read(path, monkeypatch)
    except (InputError, ValueError) as exc:
        with pytest.raises(type(exc)) as got:
            load_requests(path)
        assert str(got.value) == str(exc)
    else:
        _same(load_requests(path), want)


def test_seconds_of_up_to_15_digits_parse_bit_for_bit_as_pandas_does(tmp_path, monkeypatch):
    """Random spellings at every split of the digits between whole and fraction: the plain reader's numpy parse against
    pandas' (the precise_xstrtod path), bit for bit."""
    rng = np.random.default_rng(34)
    spelled = []
    for _ in range(4000):
        digits = int(rng.integers(1, 16))
        text = "".join(str(d) for d in rng.integers(0, 10, digits))
        point = int(rng.integers(0, digits))  # 0: a whole number
        spelled.append(text if point == 0 else f"{text[:point]}.{text[point:]}")
    ordered = sorted(spelled, key=float)
    want = pd.to_numeric(pd.Series(ordered)).to_numpy(dtype=np.float64)
    assert rq._plain_seconds([x.encode() for x in ordered]).tobytes() == (want - want[0]).tobytes()
    # as a file: the times a trace may hold (RequestTrace refuses arrivals past MAX_ARRIVAL_S, 1e9 s after the first)
    kept = [x for x in ordered if float(x) <= 1e9]
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{s},1,1" for s in kept]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    plain = rq._read_plain(str(path))
    assert plain is not None and len(plain) > 2000
    _same(plain, _pandas_read(path, monkeypatch))
    want = pd.to_numeric(pd.Series(kept)).to_numpy(dtype=np.float64)
    assert plain.arrival_s.tobytes() == (want - want[0]).tobytes()


def test_replay_imports_neither_pandas_nor_pyarrow(tmp_path):
    """`specagent replay TRACE.csv` without -o or --format csv, in a process of its own: pandas and pyarrow stay out, and
    with --format json so do rich's tables and progress bar (nothing is drawn; issue #34: replay's start-up)."""
    trace = tmp_path / "t.csv"
    save_requests(trace, synthetic_requests(200, 5.0, 256, 64, seed=3))
    code = ("import json, sys\nfrom specagent.cli import main\n"
            f"sys.argv = ['specagent', 'replay', {str(trace)!r}, '--strong-model', 'meta-llama/Llama-3.1-8B', "
            "'--strong-hardware', 'h100', '--format', 'json']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('LOADED=' + json.dumps(sorted(m for m in ('pandas', 'pyarrow', 'scipy', 'rich.table', 'rich.progress') if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr[-2000:]
    doc, loaded = out.stdout.rstrip().rsplit("\n", 1)
    assert json.loads(doc)["completed"] == 200
    assert loaded == "LOADED=[]", f"replay imported {loaded}"
