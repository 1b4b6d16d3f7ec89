"""OpenAI-chat importer: parallel calls, missing usage (estimated), measured residuals, errors."""

import json

import pytest

from specagent.traces import Actor, StepKind, TokenSource, TraceFormatError, step_arrays
from specagent.traces.io import data_path
from specagent.traces.openai_chat import import_openai, tau2_simulation_to_openai
from specagent.traces.tau2 import import_tau2, shared_tau2_files
from specagent.traces.tokens import estimate_call_tokens, estimate_text_tokens

SAMPLE = data_path("openai_chat_sample.jsonl")


def test_sample_parallel_calls_and_estimates():
    trs = import_openai(SAMPLE, tag_map={"get_weather": "READ"})
    assert [t.task_id for t in trs] == ["airline-0", "airline-0-nousage", "weather-demo"]
    w = trs[2]
    kinds = [(s.actor, s.kind) for s in w.steps]
    assert kinds == [(Actor.USER, StepKind.USER), (Actor.AGENT, StepKind.READ), (Actor.AGENT, StepKind.READ),
                     (Actor.TOOL, StepKind.TOOL_RESULT), (Actor.TOOL, StepKind.TOOL_RESULT), (Actor.AGENT, StepKind.REPLY)]
    assert w.steps[1].parallel_group == w.steps[2].parallel_group == w.steps[3].parallel_group == 0
    assert all(s.token_source == TokenSource.ESTIMATED for s in w.steps)
    # hand computation: the call text is name + compact args, plus 14 framing tokens
    assert w.steps[1].output_tokens == estimate_call_tokens("get_weather", {"city": "Paris"})
    assert w.steps[1].output_tokens == 3 + 9 + 14  # get/_/weather ; { " city " : " Paris " } ; framing
    assert w.steps[5].new_context_tokens == estimate_text_tokens("Paris is 18 °C and cloudy; Tokyo is 24 °C and clear.")
    # system prompt = system text + tool schema, estimated
    assert w.system_prompt_source == TokenSource.ESTIMATED and w.system_prompt_tokens > estimate_text_tokens("You are a helpful assistant.")


def test_unknown_tool_defaults_to_write():
    w = import_openai(SAMPLE)[2]
    assert w.steps[1].kind == StepKind.WRITE and w.steps[1].irreversible


def test_usage_gives_measured_counts_equal_to_tau2_import():
    """The fixture's first conversation is τ²-Bench airline__grok-3 simulation 1 rewritten as OpenAI chat."""
    with_usage, no_usage, _ = import_openai(SAMPLE)
    agent = [s for s in with_usage.steps if s.actor == Actor.AGENT and s.token_source == TokenSource.MEASURED]
    # grok-3 reasons not at all: no completion exceeds its visible text's estimate by the threshold (usage.py)
    assert agent and all(s.reasoning_tokens == 0 for s in agent) and with_usage.metadata["reasoning_source"] == "inferred"
    raw = [json.loads(line) for line in SAMPLE.read_text().splitlines()][0]
    comp = sum(m["usage"]["completion_tokens"] for m in raw["messages"] if m.get("usage"))
    assert sum(s.output_tokens for s in agent) == comp
    # without usage every count is estimated, and the totals stay within 25 % of measured
    assert all(s.token_source == TokenSource.ESTIMATED for s in no_usage.steps)
    tot_m = sum(s.new_context_tokens for s in with_usage.steps)
    tot_e = sum(s.new_context_tokens for s in no_usage.steps)
    assert abs(tot_e / tot_m - 1) < 0.25


@pytest.mark.skipif(not shared_tau2_files(), reason="shared τ²-Bench data absent")
def test_cross_check_against_tau2_importer_on_grok3():
    path = [p for p in shared_tau2_files() if p.name == "airline__grok-3.json"][0]
    raw = json.loads(path.read_text())
    t2 = import_tau2(path)
    lines = [json.dumps({"task_id": s["task_id"], "domain": "airline", "messages": tau2_simulation_to_openai(s)})
             for s in raw["simulations"]]
    import tempfile
    import os

    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "conv.jsonl")
        open(p, "w").write("\n".join(lines) + "\n")
        oa = import_openai(p)
    for a, b in zip(t2, oa):
        ka = [(s.kind, s.tool_name, s.new_context_tokens) for s in a.steps if s.token_source == TokenSource.MEASURED]
        kb = [(s.kind, s.tool_name, s.new_context_tokens) for s in b.steps if s.token_source == TokenSource.MEASURED]
        # same steps and measured counts, except tau2 measures the first user message from the user simulator
        assert [k for k in ka if k[0] != StepKind.USER] == [k for k in kb if k[0] != StepKind.USER]
        # the context before the first model call is its recorded prompt in both imports
        ca, cb = step_arrays([a])["context_before"], step_arrays([b])["context_before"]
        fa = next(i for i, s in enumerate(a.steps) if s.actor == Actor.AGENT and s.output_tokens > 0)
        fb = next(i for i, s in enumerate(b.steps) if s.actor == Actor.AGENT and s.token_source == TokenSource.MEASURED)
        assert ca[fa] == cb[fb]


def test_json_list_of_messages_and_reasoning_details(tmp_path):
    conv = [
        {"role": "user", "content": [{"type": "text", "text": "hi there"}]},
        {"role": "assistant", "content": "hello", "usage": {"prompt_tokens": 50, "completion_tokens": 30,
                                                             "completion_tokens_details": {"reasoning_tokens": 20}}},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "ok", "usage": {"prompt_tokens": 70, "completion_tokens": 2}},
    ]
    p = tmp_path / "c.json"
    p.write_text(json.dumps(conv))
    (t,) = import_openai(p)
    s = t.steps
    assert (s[1].output_tokens, s[1].reasoning_tokens, s[1].new_context_tokens) == (30, 20, 10)
    # prompt growth 70 - 50 - 10 visible = 10 tokens for "bye": measured
    assert s[2].new_context_tokens == 10 and s[2].token_source == TokenSource.MEASURED
    assert t.system_prompt_tokens == 50 - s[0].new_context_tokens


def test_errors_name_file_line_message_field(tmp_path):
    good = SAMPLE.read_text().splitlines()[2]
    bad = json.loads(good)
    bad["messages"][3]["tool_call_id"] = "missing"
    p = tmp_path / "bad.jsonl"
    p.write_text(good + "\n" + json.dumps(bad) + "\n[1,2\n")
    with pytest.raises(TraceFormatError) as ei:
        import_openai(p)
    e = ei.value
    assert e.file == str(p) and e.location == "line 2, message 3" and e.field == "tool_call_id"
    skipped = []
    ok = import_openai(p, skip_bad=True, skipped=skipped)
    assert len(ok) == 1 and [s.location for s in skipped] == ["line 2, message 3", "line 3"]


def test_bad_usage_and_role(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps([{"role": "assistant", "content": "x", "usage": {"prompt_tokens": 1, "completion_tokens": "3"}}]))
    with pytest.raises(TraceFormatError, match="usage.completion_tokens.*non-negative integer"):
        import_openai(p)
    p.write_text(json.dumps([{"role": "robot", "content": "x"}]))
    with pytest.raises(TraceFormatError, match="field 'role'"):
        import_openai(p)


def _conv(*msgs, **extra) -> str:
    return json.dumps({"task_id": "t", "messages": list(msgs), **extra}) + "\n"


def _call(cid, name="get_user_details"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_tool_call_id_reused_after_its_result_is_matched_to_the_pending_call(tmp_path):
    """Real logs reuse an id once its result is back: each result answers the call pending with that id."""
    f = tmp_path / "c.jsonl"
    f.write_text(_conv(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "get_user_details")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "user"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "cancel_reservation")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
        {"role": "assistant", "content": "ok"}, domain="airline"))
    t = import_openai(f)[0]
    results = [s.tool_name for s in t.steps if s.kind == StepKind.TOOL_RESULT]
    assert results == ["get_user_details", "cancel_reservation"]
    assert [s.kind for s in t.steps if s.actor == Actor.AGENT][:2] == [StepKind.READ, StepKind.WRITE]
    # a third result for call_1, with no call pending, is still an error
    f.write_text(f.read_text().replace('{"role": "assistant", "content": "ok"}',
                                       '{"role": "tool", "tool_call_id": "call_1", "content": "again"}'))
    with pytest.raises(TraceFormatError, match="already answered"):
        import_openai(f)


def test_prompt_tokens_that_shrink_are_a_counted_repair_not_a_measured_turn(tmp_path):
    """Issue #14: prompt 5000 → 800 → 5100 made the user turn after the dip 'measured' at 4,248 tokens."""
    from specagent.traces.errors import Repair

    def asst(p, c=20):
        return {"role": "assistant", "content": "x " * 10, "usage": {"prompt_tokens": p, "completion_tokens": c}}
    f = tmp_path / "c.jsonl"
    f.write_text(_conv({"role": "user", "content": "hello there"}, asst(5000), {"role": "user", "content": "and?"},
                       asst(800), {"role": "user", "content": "fine thanks"}, asst(5100), {"role": "user", "content": "bye now"},
                       asst(5130)))
    repairs: list[Repair] = []
    t = import_openai(f, repairs=repairs)[0]
    users = [s for s in t.steps if s.kind == StepKind.USER]
    # before the first call: estimated (it sizes the system prompt); the gaps into and out of the dip keep
    # their estimates; the gap after them is measured again
    assert [u.token_source for u in users] == [TokenSource.ESTIMATED, TokenSource.ESTIMATED, TokenSource.ESTIMATED,
                                               TokenSource.MEASURED]
    assert users[2].new_context_tokens == estimate_text_tokens("fine thanks") != 5100 - 800 - 20
    assert users[3].new_context_tokens == 5130 - 5100 - 20
    assert len(repairs) == 1 and "message 3" in repairs[0].location and "800" in repairs[0].what
    assert t.metadata["usage_dips"] == 1
    with pytest.warns(UserWarning, match="repaired"):  # no list given: a warning, never silence
        import_openai(f)


def test_timestamps_equal_naive_aware_and_unix_mix(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(_conv({"role": "user", "content": "a", "timestamp": "2025-01-01T00:00:00"},
                       {"role": "assistant", "content": "b", "timestamp": "2025-01-01T00:00:00+00:00"},
                       {"role": "user", "content": "c", "timestamp": 1735689602.5},
                       {"role": "assistant", "content": "d", "timestamp": "2025-01-01T01:00:03+01:00"}))
    t = import_openai(f)[0]
    assert [s.user_latency_s or s.model_latency_s for s in t.steps[1:]] == [0.0, 2.5, 0.5]


def test_a_file_that_yields_nothing_is_an_error(tmp_path):
    from specagent.traces.errors import NoTrajectoriesError

    f = tmp_path / "c.jsonl"
    f.write_text('{"messages": []}\n')
    with pytest.raises(NoTrajectoriesError, match="all 1 record"):
        import_openai(f, skip_bad=True, skipped=[])


def test_importers_share_tool_tags_without_importing_each_other():
    """Issue #15: the tool classification is its own module; neither importer imports the other."""
    import ast
    from pathlib import Path

    import specagent.traces as traces_pkg

    root = Path(traces_pkg.__file__).parent
    for mod, other in (("openai_chat", "tau2"), ("tau2", "openai_chat")):
        tree = ast.parse((root / f"{mod}.py").read_text(encoding="utf-8"))
        names = {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(name.split(".")[-1] == other for name in names), (mod, names)
        assert "tool_tags" in names
