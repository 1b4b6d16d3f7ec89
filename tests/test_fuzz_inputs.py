"""Malformed, hostile and edge-case input through every importer, loader and `traces` command, and
`simulate --trace` / `predict --trace`: each must exit ≠ 0 with one `error:` line naming the file and
what was expected, print no traceback, leave no output file behind, and never exit 0 with an
impossible number (issue #14).

Two parts: a table of hand-made bad files (generated here from the shipped samples, one
mutation each), run through the CLI; and hypothesis, which mutates valid records at random
and feeds them to the library loaders and importers, which may accept a record only when every
count it holds is within the schema's limits, and otherwise must raise `TraceFormatError`.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, shipped_models
from specagent.traces import TraceFormatError, load_trajectories, save_trajectories
from specagent.traces.io import data_path, default_workload_path
from specagent.traces.openai_chat import import_openai
from specagent.traces.profile import load_profile, profiles_dir
from specagent.traces.schema import MAX_CONTEXT_TOKENS, MAX_STEP_LATENCY_S, Trajectory
from specagent.traces.tau2 import import_tau2

runner = CliRunner()


# ---------------------------------------------------------------- valid material to break
def _trace_lines() -> list[dict]:
    return [t.model_dump(mode="json") for t in load_trajectories(default_workload_path())[:2]]


TRACE = _trace_lines()
TAU2 = json.loads(data_path("tau2_airline_sample.json").read_text(encoding="utf-8"))
OPENAI = [json.loads(line) for line in data_path("openai_chat_sample.jsonl").read_text(encoding="utf-8").split("\n") if line]
PROFILE_TOML = (profiles_dir() / "tau2_airline.toml").read_text(encoding="utf-8")
CONFIG = json.loads(shipped_models()["Qwen/Qwen3.5-4B"].read_text(encoding="utf-8"))


def jsonl(objs: list) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def mutate(obj: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(obj)
    d = out
    for k in path[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[path[-1]]
    else:
        d[path[-1]] = value
    return out


_DELETE = object()


def trace_with(path: tuple, value: Any) -> str:
    return jsonl([mutate(TRACE[0], path, value), TRACE[1]])


def tau2_with(path: tuple, value: Any) -> str:
    """A one-simulation results file with one mutation (so --skip-bad, too, is left with nothing)."""
    return json.dumps(mutate({**TAU2, "simulations": TAU2["simulations"][:1]}, path, value))


def openai_with(path: tuple, value: Any) -> str:
    return jsonl([mutate(OPENAI[0], path, value)])


def _sim_msgs(i: int = 0) -> list[dict]:
    return TAU2["simulations"][i]["messages"]


def _first(msgs: list[dict], pred: Callable[[dict], bool]) -> int:
    return next(j for j, m in enumerate(msgs) if pred(m))


TAU2_ASSIST = _first(_sim_msgs(), lambda m: m["role"] == "assistant" and m.get("usage"))
TAU2_TOOL = _first(_sim_msgs(), lambda m: m["role"] == "tool")
TAU2_CALL = _first(_sim_msgs(), lambda m: m["role"] == "assistant" and m.get("tool_calls"))
OA_MSGS = OPENAI[0]["messages"]
OA_ASSIST = _first(OA_MSGS, lambda m: m["role"] == "assistant" and m.get("usage"))
OA_TS = _first(OA_MSGS, lambda m: m.get("timestamp") is not None and OA_MSGS.index(m) > 2)


def _openai_calls_conv() -> dict:
    """The shipped sample's conversation with tool calls (the third line)."""
    return next(c for c in OPENAI if any(m.get("tool_calls") for m in c["messages"]))


OA_CALLS = _openai_calls_conv()
OA_CALL = _first(OA_CALLS["messages"], lambda m: bool(m.get("tool_calls")))
OA_RESULT = _first(OA_CALLS["messages"], lambda m: m["role"] == "tool")


def openai_calls_with(path: tuple, value: Any) -> str:
    return jsonl([mutate(OA_CALLS, path, value)])


def parquet_bytes(tmp: Path) -> bytes:
    p = tmp / "_real.parquet"
    save_trajectories(load_trajectories(default_workload_path())[:2], p)
    return p.read_bytes()


# ---------------------------------------------------------------- the table
@dataclass(frozen=True)
class Bad:
    """One bad input file: its name, content (text, bytes, a callable of the tmp dir, or DIR) and what the error must say."""

    id: str
    name: str
    content: Any
    expect: tuple[str, ...]


DIR = object()

BAD_TRACES = [
    Bad("empty", "t.jsonl", "", ("empty file",)),
    Bad("blank_lines", "t.jsonl", "\n\n  \n", ("empty",)),
    Bad("directory", "t.jsonl", DIR, ("directory",)),
    Bad("non_utf8", "t.jsonl", b'{"task_id": "\xff\xfe"}\n', ("UTF-8", "line 1")),
    Bad("parquet_named_jsonl", "t.jsonl", parquet_bytes, ("Parquet",)),
    Bad("json_named_parquet", "t.parquet", jsonl(TRACE), ("Parquet", "JSON")),
    Bad("truncated_parquet", "t.parquet", b"PAR1\x00\x01garbage", ("Parquet",)),
    Bad("tau2_results_as_trace", "t.jsonl", json.dumps(TAU2, indent=1), ("τ²-Bench", "import tau2")),
    Bad("openai_chat_as_trace", "t.jsonl", jsonl(OPENAI), ("OpenAI", "import openai")),
    Bad("wrong_suffix", "t.txt", jsonl(TRACE), ("suffix",)),
    Bad("bad_json", "t.jsonl", jsonl(TRACE) + "{broken\n", ("line 3", "JSON")),
    Bad("json_array_record", "t.jsonl", "[1, 2]\n", ("line 1", "object")),
    Bad("deep_nesting", "t.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", ("line 1", "nested")),
    Bad("int_literal_5000_digits", "t.jsonl", '{"task_id": ' + "9" * 5000 + "}\n", ("line 1", "JSON")),
    Bad("tokens_1e15", "t.jsonl", trace_with(("steps", 0, "new_context_tokens"), 10**15), ("new_context_tokens", "10,485,760")),
    Bad("tokens_1e18_output", "t.jsonl", trace_with(("steps", 1, "output_tokens"), 10**18), ("output_tokens", "10,485,760")),
    Bad("system_prompt_1e16", "t.jsonl", trace_with(("system_prompt_tokens",), 10**16), ("system_prompt_tokens",)),
    Bad("tokens_negative", "t.jsonl", trace_with(("steps", 0, "new_context_tokens"), -5), ("new_context_tokens",)),
    Bad("tokens_string", "t.jsonl", trace_with(("steps", 0, "new_context_tokens"), "12"), ("new_context_tokens", "integer")),
    Bad("tokens_bool", "t.jsonl", trace_with(("steps", 0, "new_context_tokens"), True), ("new_context_tokens", "integer")),
    Bad("tokens_float", "t.jsonl", trace_with(("steps", 0, "new_context_tokens"), 1.5), ("new_context_tokens",)),
    Bad("latency_nan", "t.jsonl", trace_with(("steps", 1, "model_latency_s"), math.nan), ("model_latency_s", "finite")),
    Bad("latency_inf", "t.jsonl", trace_with(("steps", 1, "model_latency_s"), math.inf), ("model_latency_s", "finite")),
    Bad("latency_1e9", "t.jsonl", trace_with(("steps", 1, "model_latency_s"), 1e9), ("model_latency_s", "604,800")),
    Bad("latency_negative", "t.jsonl", trace_with(("steps", 1, "model_latency_s"), -1.0), ("model_latency_s",)),
    Bad("context_past_window", "t.jsonl",
        trace_with(("steps",), [dict(index=i, actor="user", kind="user", new_context_tokens=4_000_000) for i in range(3)]),
        ("steps[2]", "10,485,760")),
    Bad("no_steps", "t.jsonl", trace_with(("steps",), []), ("steps",)),
    Bad("too_many_steps", "t.jsonl",
        trace_with(("steps",), [dict(index=i, actor="user", kind="user", new_context_tokens=0) for i in range(100_001)]),
        ("steps", "100,000")),
    Bad("reward_nan", "t.jsonl", trace_with(("outcome", "reward"), math.nan), ("reward", "finite")),
    Bad("missing_field", "t.jsonl", trace_with(("system_prompt_tokens",), _DELETE), ("system_prompt_tokens",)),
    Bad("unknown_kind", "t.jsonl", trace_with(("steps", 0, "kind"), "teleport"), ("kind",)),
]


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bad")


def materialise(bad: Bad, tmp: Path) -> Path:
    d = tmp / bad.id
    d.mkdir(parents=True, exist_ok=True)
    p = d / bad.name
    content = bad.content(tmp) if callable(bad.content) else bad.content
    if content is DIR:
        p.mkdir(exist_ok=True)
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


def assert_clear_error(r, expect: tuple[str, ...], file: Path | None, outputs: tuple[Path, ...] = ()) -> None:
    """Exit 2, one `error:` line (naming the file and every expected phrase), no traceback, no output left."""
    out = r.output
    assert r.exit_code == 2, f"exit {r.exit_code}: {out}"
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, out
    line = errors[0]
    if file is not None:
        assert str(file) in line or file.name in line, line
    for phrase in expect:
        assert phrase.lower() in line.lower(), (phrase, line)
    for o in outputs:
        assert not o.exists() or (o.is_dir() and not any(o.iterdir())), f"{o} left behind"


LOADER_COMMANDS = {
    "traces_stats": lambda f, out: ["traces", "stats", str(f)],
    "traces_fit": lambda f, out: ["traces", "fit", str(f), "-o", str(out / "p.toml")],
    "simulate": lambda f, out: ["simulate", "specagent", "--trace", str(f), "-o", str(out / "r.parquet")],
    "predict": lambda f, out: ["predict", "--trace", str(f), "-o", str(out / "pred"), "--strategies", "strongonly,specagent"],
}


@pytest.mark.parametrize("command", list(LOADER_COMMANDS))
@pytest.mark.parametrize("bad", BAD_TRACES, ids=lambda b: b.id)
def test_bad_trace_files(bad, command, cases_dir):
    f = materialise(bad, cases_dir)
    out = cases_dir / bad.id / f"out_{command}"
    r = runner.invoke(app, LOADER_COMMANDS[command](f, out))
    assert_clear_error(r, bad.expect, f, outputs=(out / "p.toml", out / "r.parquet", out / "pred"))


def test_missing_trace_file(tmp_path):
    f = tmp_path / "nope.jsonl"
    for cmd in LOADER_COMMANDS.values():
        assert_clear_error(runner.invoke(app, cmd(f, tmp_path)), ("no such",), f)


def test_skip_bad_that_skips_everything_fails(tmp_path):
    f = tmp_path / "allbad.jsonl"
    f.write_text(trace_with(("steps", 0, "new_context_tokens"), -1).split("\n")[0] + "\n{broken\n", encoding="utf-8")
    r = runner.invoke(app, ["traces", "stats", str(f), "--skip-bad"])
    assert_clear_error(r, ("all 2 record(s) skipped", "new_context_tokens"), f)


def test_skip_bad_reports_what_it_skipped(tmp_path):
    f = tmp_path / "somebad.jsonl"
    f.write_text(jsonl(TRACE) + "{broken\n", encoding="utf-8")
    r = runner.invoke(app, ["traces", "stats", str(f), "--skip-bad", "--json"])
    assert r.exit_code == 0
    assert "line 3" in r.output and "1 record(s) skipped" in r.output


def test_empty_parquet_is_an_error(tmp_path):
    import pandas as pd

    from specagent.traces.columns import to_frame
    from specagent.traces.io import save_frame

    f = tmp_path / "empty.parquet"
    save_frame(to_frame(load_trajectories(default_workload_path())[:1]).iloc[0:0], f)
    for name, cmd in LOADER_COMMANDS.items():
        assert_clear_error(runner.invoke(app, cmd(f, tmp_path / name)), ("no records",), f, (tmp_path / name,))
    df = pd.read_parquet(f)
    assert len(df) == 0


# ---------------------------------------------------------------- importers
def _tau2_two_calls_same_id() -> str:
    msgs = copy.deepcopy(_sim_msgs())
    call = copy.deepcopy(msgs[TAU2_CALL]["tool_calls"][0])
    msgs[TAU2_CALL]["tool_calls"].append(call)
    return tau2_with(("simulations", 0, "messages"), msgs)


def _tau2_backwards() -> str:
    return tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "timestamp"), "2019-01-01T00:00:00")


BAD_TAU2 = [
    Bad("empty", "r.json", "", ("empty",)),
    Bad("directory", "r.json", DIR, ("directory",)),
    Bad("non_utf8", "r.json", b'{"simulations": ["\xff"]}', ("UTF-8",)),
    Bad("parquet", "r.json", parquet_bytes, ("Parquet",)),
    Bad("openai_jsonl", "r.json", jsonl(OPENAI), ("OpenAI", "import openai")),
    Bad("trace_jsonl", "r.json", jsonl(TRACE), ("specagent trace",)),
    Bad("not_json", "r.json", "simulations: []", ("valid JSON",)),
    Bad("int_literal_5000_digits", "r.json", '{"simulations": [' + "9" * 5000 + "]}", ("valid JSON",)),
    Bad("no_simulations", "r.json", tau2_with(("simulations",), []), ("at least one simulation", "no records")),
    Bad("info_not_object", "r.json", tau2_with(("info",), [1, 2]), ("info",)),
    Bad("llm_not_string", "r.json", tau2_with(("info", "agent_info", "llm"), {"x": 1}), ("agent_info.llm",)),
    Bad("timestamp_backwards", "r.json", _tau2_backwards(), ("timestamp", "no earlier", f"message {TAU2_ASSIST}")),
    Bad("timestamp_garbage", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "timestamp"), "yesterday"),
        ("timestamp", "ISO-8601")),
    Bad("timestamp_number", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "timestamp"), 12345),
        ("timestamp", "ISO-8601")),
    Bad("start_time_garbage", "r.json", tau2_with(("simulations", 0, "start_time"), "noon"), ("start_time",)),
    Bad("completion_tokens_string", "r.json",
        tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "usage", "completion_tokens"), "33"), ("usage.completion_tokens",)),
    Bad("completion_tokens_nan", "r.json",
        tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "usage", "completion_tokens"), math.nan), ("usage.completion_tokens",)),
    Bad("prompt_tokens_1e18", "r.json",
        tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "usage", "prompt_tokens"), 10**18), ("usage.prompt_tokens", "10,485,760")),
    Bad("usage_not_object", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "usage"), [1]), ("usage",)),
    Bad("cost_string", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "cost"), "cheap"), ("cost",)),
    Bad("cost_nan", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "cost"), math.nan), ("cost",)),
    Bad("result_without_call", "r.json", tau2_with(("simulations", 0, "messages", TAU2_TOOL, "id"), "call_nobody"),
        ("call_nobody", "pending")),
    Bad("two_pending_same_id", "r.json", _tau2_two_calls_same_id(), ("tool_calls.id", "awaiting")),
    Bad("content_not_string", "r.json", tau2_with(("simulations", 0, "messages", TAU2_ASSIST, "content"), {"a": 1}), ("content",)),
    Bad("role_unknown", "r.json", tau2_with(("simulations", 0, "messages", 1, "role"), "narrator"), ("role",)),
    Bad("reward_string", "r.json", tau2_with(("simulations", 0, "reward_info", "reward"), "full"), ("reward",)),
    Bad("reward_bool", "r.json", tau2_with(("simulations", 0, "reward_info", "reward"), True), ("reward",)),
    # 2026-12-01-hostile-inputs F23: rewards outside [0, 1], one simulation listed twice
    Bad("reward_7.5", "r.json", tau2_with(("simulations", 0, "reward_info", "reward"), 7.5), ("reward", "[0, 1]")),
    Bad("reward_negative", "r.json", tau2_with(("simulations", 0, "reward_info", "reward"), -1.0), ("reward", "[0, 1]")),
    Bad("reward_nan", "r.json", tau2_with(("simulations", 0, "reward_info", "reward"), math.nan), ("reward", "[0, 1]")),

    Bad("task_id_missing", "r.json", tau2_with(("simulations", 0, "task_id"), None), ("task_id",)),
    Bad("messages_empty", "r.json", tau2_with(("simulations", 0, "messages"), []), ("messages",)),
    Bad("tool_call_no_name", "r.json", tau2_with(("simulations", 0, "messages", TAU2_CALL, "tool_calls", 0, "name"), ""),
        ("name",)),
]


def _openai_two_pending() -> str:
    conv = copy.deepcopy(OA_CALLS)
    m = conv["messages"][OA_CALL]
    m["tool_calls"].append(copy.deepcopy(m["tool_calls"][0]))
    return jsonl([conv])


BAD_OPENAI = [
    Bad("empty", "c.jsonl", "", ("empty",)),
    Bad("directory", "c.jsonl", DIR, ("directory",)),
    Bad("non_utf8", "c.jsonl", b'{"messages": [{"role": "user", "content": "\xc3\x28"}]}\n', ("UTF-8",)),
    Bad("parquet", "c.jsonl", parquet_bytes, ("Parquet",)),
    Bad("tau2_results", "c.json", json.dumps(TAU2), ("τ²-Bench", "import tau2")),
    Bad("tau2_results_pretty_jsonl", "c.jsonl", json.dumps(TAU2, indent=2), ("τ²-Bench", "import tau2")),
    Bad("trace_jsonl", "c.jsonl", jsonl(TRACE), ("specagent trace",)),
    Bad("completion_tokens_string", "c.jsonl", openai_with(("messages", OA_ASSIST, "usage", "completion_tokens"), "38"),
        ("usage.completion_tokens", "line 1")),
    Bad("completion_tokens_nan", "c.jsonl", openai_with(("messages", OA_ASSIST, "usage", "completion_tokens"), math.nan),
        ("usage.completion_tokens",)),
    Bad("completion_tokens_1e17", "c.jsonl", openai_with(("messages", OA_ASSIST, "usage", "completion_tokens"), 10**17),
        ("usage.completion_tokens", "10,485,760")),
    Bad("reasoning_bool", "c.jsonl",
        openai_with(("messages", OA_ASSIST, "usage", "completion_tokens_details"), {"reasoning_tokens": True}), ("reasoning_tokens",)),
    Bad("details_not_object", "c.jsonl",
        openai_with(("messages", OA_ASSIST, "usage", "completion_tokens_details"), "lots"), ("completion_tokens_details",)),
    Bad("timestamp_backwards", "c.jsonl", openai_with(("messages", OA_TS, "timestamp"), "2001-01-01T00:00:00"),
        ("timestamp", "no earlier")),
    Bad("timestamp_garbage", "c.jsonl", openai_with(("messages", OA_TS, "timestamp"), "soon"), ("timestamp",)),
    Bad("timestamp_bool", "c.jsonl", openai_with(("messages", OA_TS, "timestamp"), True), ("timestamp",)),
    Bad("tool_calls_not_list", "c.jsonl", openai_calls_with(("messages", OA_CALL, "tool_calls"), 5), ("tool_calls",)),
    Bad("result_without_call", "c.jsonl", openai_calls_with(("messages", OA_RESULT, "tool_call_id"), "nobody"),
        ("tool_call_id", "pending")),
    Bad("two_pending_same_id", "c.jsonl", _openai_two_pending(), ("id", "awaiting")),
    Bad("messages_missing", "c.jsonl", jsonl([{"task_id": "x"}]), ("messages",)),
    Bad("role_unknown", "c.jsonl", openai_with(("messages", 1, "role"), "narrator"), ("role",)),
    Bad("reward_string", "c.jsonl", openai_with(("reward",), "yes"), ("reward",)),
    Bad("top_level_number", "c.json", "42", ("found a JSON int",)),
]

IMPORTERS = {"tau2": BAD_TAU2, "openai": BAD_OPENAI}


@pytest.mark.parametrize("kind,bad", [(k, b) for k, bs in IMPORTERS.items() for b in bs],
                         ids=[f"{k}-{b.id}" for k, bs in IMPORTERS.items() for b in bs])
@pytest.mark.parametrize("skip_bad", [False, True], ids=["strict", "skip_bad"])
def test_bad_importer_inputs(kind, bad, skip_bad, cases_dir):
    """With --skip-bad a per-record problem is skipped, so a file whose every record is bad still fails."""
    f = materialise(bad, cases_dir / f"imp_{kind}")
    out = cases_dir / f"imp_{kind}" / bad.id / ("out_skip.jsonl" if skip_bad else "out.jsonl")
    r = runner.invoke(app, ["traces", "import", kind, str(f), "-o", str(out)] + (["--skip-bad"] if skip_bad else []))
    assert_clear_error(r, bad.expect, f, (out,))


def test_a_simulation_listed_twice_is_refused_or_skipped_once(tmp_path):
    """F23: the same τ²-Bench simulation twice was imported as two trajectories."""
    f = tmp_path / "r.json"
    f.write_text(json.dumps({**TAU2, "simulations": [TAU2["simulations"][0]] * 2}), encoding="utf-8")
    out = tmp_path / "o.jsonl"
    assert_clear_error(runner.invoke(app, ["traces", "import", "tau2", str(f), "-o", str(out)]),
                       ("simulation 1", "'id'", "listed twice"), f, (out,))
    r = runner.invoke(app, ["traces", "import", "tau2", str(f), "-o", str(out), "--skip-bad"])
    assert len(_imported(r, out)) == 1 and "listed twice" in r.output


def _imported(r, out: Path) -> list[Trajectory]:
    assert r.exit_code == 0, r.output
    return load_trajectories(out)


def test_skip_bad_import_keeps_good_records_and_says_why(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(openai_with(("messages", OA_ASSIST, "usage", "completion_tokens"), "38") + jsonl(OPENAI[1:]), encoding="utf-8")
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["traces", "import", "openai", str(f), "-o", str(out), "--skip-bad"])
    assert len(_imported(r, out)) == len(OPENAI) - 1
    assert "line 1" in r.output and "usage.completion_tokens" in r.output and "1 record(s) skipped" in r.output


def test_tag_map_errors(tmp_path):
    src = data_path("tau2_airline_sample.json")
    for name, content, phrase in [("t.json", "{bad", "valid JSON"), ("t.json", '{"get_user_details": "MAYBE"}', "one of"),
                                  ("d.json", DIR, "directory"), ("u.json", b"\xff", "UTF-8")]:
        p = tmp_path / name
        if content is DIR:
            p.mkdir()
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        out = tmp_path / "o.jsonl"
        r = runner.invoke(app, ["traces", "import", "tau2", str(src), "--tags", str(p), "-o", str(out)])
        assert_clear_error(r, (phrase,), p, (out,))
        p.rmdir() if p.is_dir() else p.unlink()


# ---------------------------------------------------------------- profiles, synth, config.json
def _profile_with(edit: Callable[[dict], None]) -> str:
    import tomllib

    import tomli_w

    d = tomllib.loads(PROFILE_TOML)
    edit(d)
    return tomli_w.dumps(d)


def _turns(**kw) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        d["turns"] = {"family": "uniform", "integer": True, "source": "test", **kw}
    return edit


BAD_PROFILES = [
    Bad("turns_1e9", "p.toml", _profile_with(_turns(low=1e9, high=2e9)), ("turns", "10,000")),
    Bad("turns_negative", "p.toml", _profile_with(_turns(low=-5, high=-1, lo=-10)), ("turns", "at least 1")),
    Bad("turns_zero", "p.toml", _profile_with(_turns(low=0, high=3)), ("turns", "at least 1")),
    Bad("turns_lognormal_unbounded", "p.toml", _profile_with(lambda d: d["turns"].pop("hi")), ("turns", "set hi")),
    Bad("turns_float", "p.toml", _profile_with(lambda d: d["turns"].update(integer=False)), ("turns", "integer")),
    Bad("tokens_1e18", "p.toml", _profile_with(lambda d: d["tokens"]["read"]["context"].update(hi=1e18)),
        ("tokens.read.context", "10,485,760")),
    Bad("tokens_negative", "p.toml", _profile_with(lambda d: d["tokens"]["read"].update(
        context={"family": "uniform", "low": -50, "high": 10, "lo": -100, "integer": True, "source": "test"})),
        ("tokens.read.context", "at least 0")),
    Bad("latency_1e12", "p.toml", _profile_with(lambda d: d["user_latency_s"].update(hi=1e12)), ("user_latency_s", "604,800")),
    Bad("prob_nan", "p.toml", _profile_with(lambda d: d["initial"]["probs"].update(user=math.nan)), ("finite",)),
    Bad("prob_sum", "p.toml", _profile_with(lambda d: d["initial"]["probs"].update(user=0.5)), ("sum to 1",)),
    Bad("success_2", "p.toml", _profile_with(lambda d: d["success_rate"].update(value=2.0)), ("success_rate",)),
    Bad("unknown_token_kind", "p.toml", _profile_with(lambda d: d["tokens"].update(teleport=d["tokens"]["read"])), ("teleport",)),
    Bad("not_toml", "p.toml", "turns = [", ("TOML",)),
    Bad("non_utf8", "p.toml", b"name = '\xff'", ("UTF-8",)),
    Bad("directory", "p.toml", DIR, ("directory",)),
]


PROFILE_COMMANDS = {
    "synth_jsonl": lambda f, out: ["traces", "synth", "--profile", str(f), "-n", "5", "-o", str(out / "s.jsonl")],
    "synth_parquet": lambda f, out: ["traces", "synth", "--profile", str(f), "-n", "5", "-o", str(out / "s.parquet")],
    "simulate_synthetic": lambda f, out: ["simulate", "specagent", "--synthetic", str(f), "--trajectories", "5",
                                          "-o", str(out / "r.parquet")],
}


@pytest.mark.parametrize("command", list(PROFILE_COMMANDS))
@pytest.mark.parametrize("bad", BAD_PROFILES, ids=lambda b: b.id)
def test_bad_profiles(bad, command, cases_dir):
    f = materialise(bad, cases_dir / "prof")
    out = cases_dir / "prof" / bad.id / f"out_{command}"
    r = runner.invoke(app, PROFILE_COMMANDS[command](f, out))
    assert_clear_error(r, bad.expect, f, (out / "s.jsonl", out / "s.parquet", out / "r.parquet"))


def test_profile_that_draws_past_the_context_window_stops_with_an_error(tmp_path):
    """Bounds that each pass (per-step tokens ≤ the window) can still add up past it over a trajectory."""
    def edit(d: dict) -> None:
        _turns(low=50, high=50)(d)
        d["tokens"]["user"]["context"] = {"family": "constant", "value": 1_000_000, "integer": True, "source": "test"}
    f = tmp_path / "p.toml"
    f.write_text(_profile_with(edit))
    for name, cmd in PROFILE_COMMANDS.items():
        assert_clear_error(runner.invoke(app, cmd(f, tmp_path / name)), ("agent context", "10,485,760"), None,
                           (tmp_path / name / "s.jsonl", tmp_path / name / "s.parquet", tmp_path / name / "r.parquet"))


BAD_CONFIGS = [
    ("layers_0", ("num_hidden_layers",), 0, "at least 1"),
    ("layers_negative", ("num_hidden_layers",), -4, "at least 1"),
    ("layers_1e9", ("num_hidden_layers",), 10**9, "at most 1024"),
    ("kv_heads_0", ("num_key_value_heads",), 0, "at least 1"),
    ("kv_heads_not_dividing", ("num_key_value_heads",), 3, "multiple"),
    ("vocab_0", ("vocab_size",), 0, "at least 1"),
    ("hidden_0", ("hidden_size",), 0, "at least 1"),
    ("hidden_string", ("hidden_size",), "big", "integer"),
    ("hidden_bool", ("hidden_size",), True, "integer"),
    ("head_dim_float", ("head_dim",), 1.5, "integer"),
    ("heads_0", ("num_attention_heads",), 0, "at least 1"),
    ("linear_heads_not_dividing", ("linear_num_value_heads",), 20, "multiple"),
    ("conv_0", ("linear_conv_kernel_dim",), 0, "at least 1"),
    ("intermediate_negative", ("intermediate_size",), -1, "at least 0"),
    ("layer_types_unknown", ("layer_types",), ["teleport"] * 32, "layer_types"),
    ("layer_types_short", ("layer_types",), ["full_attention"], "layer_types"),
    ("tie_string", ("tie_word_embeddings",), "false", "true or false"),
    ("max_positions_negative", ("max_position_embeddings",), -1, "at least 1"),
    # 2026-12-01-hostile-inputs F12, F21: a window of 0, a zero FFN reported as missing, shapes with no typo guard
    ("max_positions_0", ("max_position_embeddings",), 0, "at least 1"),
    ("intermediate_0", ("intermediate_size",), 0, "at least 1 for dense FFN"),
    ("hidden_1e15", ("hidden_size",), 10**15, "at most 131,072"),
    ("intermediate_1e15", ("intermediate_size",), 10**15, "at most 1,048,576"),
    ("vocab_1e13", ("vocab_size",), 10**13, "at most 16,777,216"),
    ("head_dim_1e9", ("head_dim",), 10**9, "at most 4,096"),
    ("linear_value_heads_1e9", ("linear_num_value_heads",), 10**9, "at most 4,096"),
    ("model_type_list", ("model_type",), ["qwen3_5_text"], "model_type"),
]


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=lambda c: c[0])
def test_bad_model_configs(case, tmp_path):
    name, path, value, phrase = case
    cfg = mutate(CONFIG, ("text_config",) + path, value)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    field = path[0]
    with pytest.raises(ModelSpecError) as e:
        load_model_spec(f)
    assert str(f) in str(e.value) and field in str(e.value) and phrase in str(e.value)
    for cmd in (["models", "show", str(f)], ["simulate", "specagent", "--weak-model", str(f)]):
        assert_clear_error(runner.invoke(app, cmd), (field, phrase), f)


def test_text_config_that_is_not_an_object_is_named(tmp_path):
    """F21a: `text_config: [1]` was reported as a missing hidden_size."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**CONFIG, "text_config": [1]}))
    with pytest.raises(ModelSpecError, match="field 'text_config' must be a JSON object"):
        load_model_spec(f)


@pytest.mark.parametrize("content", [b"\xff\xfe{}", "[" * 100_000, "", "{}"], ids=["non_utf8", "deep", "empty", "no_fields"])
def test_unreadable_model_configs(content, tmp_path):
    f = tmp_path / "config.json"
    f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    assert_clear_error(runner.invoke(app, ["models", "show", str(f)]), (), f)


# ---------------------------------------------------------------- hypothesis: random mutations of valid records
HOSTILE = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20), st.sampled_from([10**15, 10**18, -1, 0, 2**63, MAX_CONTEXT_TOKENS + 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:12]):
            out.append(prefix + (i,))
            out.extend(_paths(v, prefix + (i,)))
    return out


TRACE_PATHS = _paths(TRACE[0])
TAU2_SIM = {"info": TAU2["info"], "simulations": [TAU2["simulations"][0]]}
TAU2_PATHS = [p for p in _paths(TAU2_SIM) if p[:1] == ("simulations",)]
OPENAI_PATHS = _paths(OA_CALLS)


def _within_limits(trajs: list[Trajectory]) -> None:
    """What an accepted record must satisfy: every count and wait is a possible one."""
    for t in trajs:
        ctx = t.system_prompt_tokens
        for s in t.steps:
            for v in (s.new_context_tokens, s.output_tokens, s.reasoning_tokens or 0):
                assert 0 <= v <= MAX_CONTEXT_TOKENS
            for lat in (s.model_latency_s, s.tool_latency_s, s.user_latency_s):
                assert lat is None or (math.isfinite(lat) and 0 <= lat <= MAX_STEP_LATENCY_S)
            ctx += s.new_context_tokens if s.in_agent_context else 0
            assert ctx <= MAX_CONTEXT_TOKENS


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(path=st.sampled_from(TRACE_PATHS), value=HOSTILE)
def test_fuzz_trace_loader(tmp_path, path, value):
    f = tmp_path / "t.jsonl"
    f.write_text(jsonl([mutate(TRACE[0], path, value)]), encoding="utf-8")
    try:
        trajs = load_trajectories(f)
    except TraceFormatError as e:
        assert str(f) in str(e) and "\n" not in str(e)
        return
    _within_limits(trajs)


_IMPORTER_FUZZ = {
    "tau2": (TAU2_SIM, TAU2_PATHS, "r.json", lambda obj: json.dumps(obj), import_tau2),
    "openai": (OA_CALLS, OPENAI_PATHS, "c.jsonl", lambda obj: jsonl([obj]), import_openai),
}


@pytest.mark.parametrize("kind", list(_IMPORTER_FUZZ))
@FUZZ
@given(data=st.data())
def test_fuzz_importers(tmp_path, kind, data):
    base, paths, name, dump, read = _IMPORTER_FUZZ[kind]
    f = tmp_path / name
    f.write_text(dump(mutate(base, data.draw(st.sampled_from(paths)), data.draw(HOSTILE))), encoding="utf-8")
    try:
        trajs = read(f, repairs=[])
    except TraceFormatError as e:
        assert str(f) in str(e) and "\n" not in str(e)
        return
    _within_limits(trajs)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=64), suffix=st.sampled_from([".jsonl", ".parquet"]))
def test_fuzz_random_bytes(tmp_path, data, suffix):
    """Arbitrary bytes under either suffix: a located error (or, by luck, valid trajectories) — nothing else."""
    for name, read in (("t" + suffix, load_trajectories), ("r.json", import_tau2), ("c.jsonl", import_openai)):
        f = tmp_path / name
        f.write_bytes(data)
        try:
            _within_limits(read(f))
        except TraceFormatError as e:
            assert str(f) in str(e)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["turns", "system_prompt_tokens", "tool_latency_s", "user_latency_s", "parallel.extra_calls"]),
       field=st.sampled_from(["low", "high", "value", "lo", "hi", "mu", "sigma"]),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**12), 10**12)))
def test_fuzz_profile_bounds(tmp_path, path, field, value):
    """A mutated profile either loads and generates trajectories the schema accepts, or fails with a located error."""
    import tomllib

    import tomli_w

    from specagent.traces.synth import synthesize

    d = tomllib.loads(PROFILE_TOML)
    node = d
    for k in path.split("."):
        node = node[k]
    node[field] = value
    f = tmp_path / "p.toml"
    try:
        f.write_text(tomli_w.dumps(d))
    except (TypeError, ValueError):
        return  # not representable in TOML
    try:
        prof = load_profile(f)
        trajs = synthesize(prof, 3, seed=0)
    except TraceFormatError as e:
        assert str(f) in str(e) or "profile" in str(e)
        return
    _within_limits([Trajectory.model_validate(t.model_dump()) for t in trajs])
