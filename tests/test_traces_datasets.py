"""Datasets as `vllm bench serve` reads them (traces/datasets.py): ShareGPT JSON and JSONL, custom JSONL, saved results.

Every layout from a small shipped file (tests/fixtures/datasets/), its lengths checked by hand
against the documented rule; every hostile input refused in one located line, never a traceback;
and the readers wired into replay (arrivals from --request-rate where the file has none), plan
and the window check.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.simulator.capacity.fleet_build import check_requests_fit
from specagent.traces.datasets import is_dataset, load_dataset
from specagent.traces.errors import TraceFormatError
from specagent.traces.requests import load_requests

DATA = Path(__file__).parent / "fixtures" / "datasets"
runner = CliRunner()


def test_sharegpt_json_takes_the_first_two_turns_and_estimates_their_lengths():
    t = load_requests(DATA / "sharegpt.json")
    # by hand, the word-piece rule (a letter run, a run of <= 3 digits, any other non-space character: 1 token):
    # "Hello, world!" = Hello , world ! = 4; "What is 12345?" = What is 123 45 ? = 5;
    # "Write a haiku about the sea." = 7; "The sea: grey, wide, calm; gulls cry." = 12 (the third turn of record 0 is not read)
    assert t.prompt_tokens.tolist() == [4, 7] and t.output_tokens.tolist() == [5, 12]
    assert t.arrival_s is None and t.estimated and t.record_names.tolist() == [0, 2]
    notes = " ".join(t.notes)
    # records 1 (no turns) and 3 (one turn) dropped as vLLM drops them, record 4 (an empty reply) too: counted, not hidden
    assert "dropped 2 record(s) with fewer than two turns (the first: record 1)" in notes
    assert "dropped 1 record(s) with an empty first or second turn (the first: record 4)" in notes
    assert "estimated from the text" in t.notes[0] and "2 requests" in t.notes[0]


def test_sharegpt_jsonl_reads_the_same_requests_and_names_lines():
    t = load_requests(DATA / "sharegpt.jsonl")
    assert t.prompt_tokens.tolist() == [4, 7] and t.output_tokens.tolist() == [5, 12]
    assert [t.location(i) for i in range(len(t))] == ["line 1", "line 3"]  # a blank line 2 is skipped


def test_custom_jsonl_prompts_estimated_outputs_exact():
    t = load_requests(DATA / "custom.jsonl")
    assert t.output_tokens.tolist() == [10, 1520, 819]
    assert t.prompt_tokens.tolist() == [7, 7, 7]  # "What is the capital of India?" = 6 words + "?"
    assert "output lengths the file's output_tokens" in t.notes[0]


def test_vllm_result_lengths_exact_failures_dropped_arrivals_from_start_times():
    t = load_requests(DATA / "vllm_result.json")
    # request 2 failed (its error is set, its output 0): dropped; the rest sorted by send time (4 was sent before 3)
    assert t.record_names.tolist() == [0, 1, 4, 3]
    assert t.prompt_tokens.tolist() == [100, 200, 100, 400] and t.output_tokens.tolist() == [32, 64, 192, 256]
    assert t.arrival_s.tolist() == [0.0, 0.25, 1.0, 1.25] and not t.estimated
    assert "dropped 1 request(s) with an error" in " ".join(t.notes) and "sorted by their send time" in t.arrivals_note


def test_vllm_result_without_start_times_has_no_arrivals_and_says_the_rate_it_ran_at():
    t = load_requests(DATA / "vllm_result_no_times.json")
    assert t.arrival_s is None and t.prompt_tokens.tolist() == [128, 256] and "--request-rate 8.0" in t.arrivals_note


def test_reading_is_deterministic():
    for name in ("sharegpt.json", "custom.jsonl", "vllm_result.json"):
        a, b = load_dataset(DATA / name), load_dataset(DATA / name)
        assert a.prompt_tokens.tolist() == b.prompt_tokens.tolist() and a.notes == b.notes


HOSTILE = [
    ("hostile_not_json.json", "line 1, column 1", "contents"),
    ("hostile_truncated.json", "line 2, column 1", "contents"),
    ("hostile_wrong_types.json", "record 1", "conversations[0].value"),
    ("hostile_empty_conversations.json", "file", "<records>"),
    ("hostile_nan.jsonl", "line 2", "output_tokens"),
    ("hostile_negative.jsonl", "line 1", "output_tokens"),
    ("hostile_huge.jsonl", "line 3", "output_tokens"),
    ("hostile_huge_result.json", "request 1", "input_lens[1]"),
    ("hostile_duplicate_keys.jsonl", "line 2", "output_tokens"),
    ("hostile_bool.jsonl", "line 1", "output_tokens"),
    ("vllm_summary_only.json", "file", "input_lens"),
]


@pytest.mark.parametrize("name,where,field", HOSTILE)
def test_hostile_files_are_refused_where_they_are_wrong(name, where, field):
    with pytest.raises(TraceFormatError) as e:
        load_requests(DATA / name)
    assert (e.value.location, e.value.field) == (where, field)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(DATA / name))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("name,text,where,field", [
    # 100,000 levels: deeper than Python's reader recurses (a RecursionError, caught)
    ("deep.json", "[" * 100_000 + "]" * 100_000, "file", "contents"),
    ("deep.jsonl", '{"prompt": "x", "output_tokens": 1}\n{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "line 2",
     "contents"),
    # an integer of 5,000 digits: past Python's int-from-text limit
    ("digits.jsonl", '{"prompt": "x", "output_tokens": ' + "9" * 5000 + "}\n", "line 1", "contents"),
    ("float.jsonl", '{"prompt": "x", "output_tokens": 12.5}\n', "line 1", "output_tokens"),
    ("text.jsonl", '{"prompt": "x", "output_tokens": "12"}\n', "line 1", "output_tokens"),
    ("inf.json", '{"input_lens": [10], "output_lens": [Infinity]}', "request 0", "output_lens[0]"),
    ("nan_time.json", '{"input_lens": [10], "output_lens": [5], "start_times": [NaN]}', "request 0", "start_times[0]"),
    ("short.json", '{"input_lens": [10, 20], "output_lens": [5]}', "file", "output_lens"),
    ("empty.json", "[]", "file", "<records>"),
    ("blank.json", "  \n", "file", "contents"),
    ("scalar.json", "42", "file", "contents"),
    ("other.json", '{"model": "x"}', "file", "contents"),
    ("list_of_lists.json", "[[1, 2]]", "record 0", "<record>"),
    ("no_output.jsonl", '{"prompt": "x"}\n', "line 1", "output_tokens"),
    ("empty_prompt.jsonl", '{"prompt": "   ", "output_tokens": 3}\n', "line 1", "prompt"),
    ("conv_not_list.json", '[{"conversations": "hi"}]', "record 0", "conversations"),
    ("turn_not_object.json", '[{"conversations": ["hi", "there"]}]', "record 0", "conversations[0]"),
    ("mixed.jsonl", '{"prompt": "x", "output_tokens": 3}\n{"conversations": []}\n', "line 2", "prompt"),
    # a key twice where no reader looks still counts: which value did the author mean?
    ("dup_nested.json", '[{"conversations": [{"value": "a"}, {"value": "b"}], "meta": {"k": 1, "k": 2}}]', "file", "k"),
    ("dup_turn.json", '[{"conversations": [{"value": "a", "value": "b"}, {"value": "c"}]}]', "record 0",
     "conversations[0].value"),
    ("not_utf8.json", "", "file", "contents"),
])
def test_hostile_inputs_made_here_are_located_one_line_errors(tmp_path, name, text, where, field):
    p = _write(tmp_path, name, text)
    if name == "not_utf8.json":
        p.write_bytes(b'[{"prompt": "\xff\xfe"}]')
    with pytest.raises(TraceFormatError) as e:
        load_requests(p)
    assert (e.value.location, e.value.field) == (where, field), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_content_sniffing_reads_json_under_any_name_and_csv_stays_csv(tmp_path):
    p = _write(tmp_path, "data.txt", "\ufeff  " + (DATA / "custom.jsonl").read_text(encoding="utf-8"))
    assert is_dataset(p) and load_requests(p).output_tokens.tolist() == [10, 1520, 819]
    # JSONL under .json (a second value after the first) is read as JSONL
    q = _write(tmp_path, "lines.json", (DATA / "sharegpt.jsonl").read_text(encoding="utf-8"))
    assert load_requests(q).prompt_tokens.tolist() == [4, 7]
    c = _write(tmp_path, "r.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,5\n")
    assert not is_dataset(c) and load_requests(c).prompt_tokens.tolist() == [10]


def test_the_window_check_names_a_dataset_record():
    t = load_requests(DATA / "vllm_result.json")

    def fits(tokens: int) -> None:
        if tokens > 400:
            raise ValueError("over the window")

    with pytest.raises(ValueError, match=r"vllm_result.json: request 3: its request of 656 tokens"):
        check_requests_fit(t, fits)


def test_replay_a_dataset_needs_a_rate_and_says_its_lengths_are_estimated():
    r = runner.invoke(app, ["replay", str(DATA / "sharegpt.json")])
    assert r.exit_code == 2 and "--request-rate" in r.output and "no arrival times" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["replay", str(DATA / "vllm_result_no_times.json")])
    assert r.exit_code == 2 and "it was run at --request-rate 8.0" in r.output
    r = runner.invoke(app, ["replay", str(DATA / "sharegpt.json"), "--request-rate", "2"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Token counts:" in r.output and "estimated from text" in r.output and "Successful requests:" in r.output
    assert "note: " in r.output and "dropped 2 record(s)" in r.output
    r = runner.invoke(app, ["replay", str(DATA / "sharegpt.json"), "--request-rate", "2", "--json"])
    d = json.loads(r.output)
    assert d["completed"] == 2 and d["total_input_tokens"] == 11 and d["total_output_tokens"] == 17
    assert d["token_counts"] == "estimated from text" and any("word-piece rule" in n for n in d["notes"])


def test_replay_a_saved_result_at_its_start_times():
    r = runner.invoke(app, ["replay", str(DATA / "vllm_result.json"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["completed"] == 4 and d["total_input_tokens"] == 800 and d["total_output_tokens"] == 544
    assert d["token_counts"] == "as the trace gives them" and any("start_times" in n for n in d["notes"])
    assert d["duration"] >= 1.25  # the last request is sent 1.25 s after the first
    r2 = runner.invoke(app, ["replay", str(DATA / "vllm_result.json"), "--json"])
    assert r2.output == r.output  # byte-identical
    # under --request-rate the saved send times are replaced, and not claimed in the notes
    r = runner.invoke(app, ["replay", str(DATA / "vllm_result.json"), "--json", "--request-rate", "1"])
    assert not any("start_times" in n for n in json.loads(r.output)["notes"])


@pytest.mark.parametrize("name", [h[0] for h in HOSTILE])
def test_replay_refuses_each_hostile_file_in_one_line(name):
    r = runner.invoke(app, ["replay", str(DATA / name), "--request-rate", "1"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert lines and lines[0].startswith("error:") and name in r.output



def test_plan_reads_a_dataset_and_its_window_check_names_the_line(tmp_path):
    p = _write(tmp_path, "w.jsonl", '{"prompt": "fine", "output_tokens": 10}\n{"prompt": "too long", "output_tokens": 300000}\n')
    r = runner.invoke(app, ["plan", "--requests", str(p), "--rate", "1/s", "--strong-model", "qwen3.5-4b", "--strong-dtype", "bf16",
                            "--gpu", "h20"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "w.jsonl: line 2: its request of 300,002 tokens" in r.output and "262,144" in r.output
    assert "note: " in r.output and "estimated from the text" in r.output  # the lengths' origin, before the plan runs


def test_a_sweep_serves_a_dataset_as_its_requests(tmp_path):
    from specagent.simulator.jobs.sweep import SweepRequest, load_sweep, run as run_sweep

    cfg = SweepRequest.from_dict({"sweep": {"tasks": 6, "seed": 2, "steady": False, "requests": str(DATA / "vllm_result.json")},
                                 "grid": {"strategy": ["serving"], "rate": [1.0], "fleet": ["f"], "hardware": ["h200"]},
                                 "fleet": {"f": {"weak_replicas": 1, "strong_replicas": 1}}}, "req.toml")
    run_sweep(cfg, tmp_path / "out")
    df = load_sweep(tmp_path / "out")
    assert df["strategy"].tolist() == ["serving"] and (df["tasks"] == 6).all() and (df["strong_bytes_read"] > 0).all()


_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(["conversations", "value", "from", "prompt", "output_tokens", "input_lens", "output_lens", "start_times",
                     "errors", "id"]), inner, max_size=5), max_leaves=20)


@settings(max_examples=150)
@given(_JSON, st.sampled_from(["d.json", "d.jsonl"]))
def test_any_json_value_is_a_trace_or_a_located_error(value, name):
    """Whatever JSON a dataset file holds (the reader's own field names, wrong types, NaN, huge numbers): a request trace
    whose lengths are in range, or a TraceFormatError in one line, never another exception."""
    text = json.dumps(value) if name == "d.json" else "\n".join(json.dumps(v) for v in (value if isinstance(value, list) else [value]))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_text(text, encoding="utf-8")
        try:
            t = load_requests(p)
        except TraceFormatError as e:
            assert "\n" not in str(e) and str(e).startswith(str(p))
            return
    assert len(t) >= 1 and (t.prompt_tokens >= 1).all() and (t.output_tokens >= 1).all()
    assert t.arrival_s is None or (t.arrival_s[0] == 0 and (t.arrival_s[1:] >= t.arrival_s[:-1]).all())
