"""traces/records.py: the import's fast path writes exactly what the schema's model writes, or stays out of the way.

Every line `record_json` gives must equal `Trajectory.model_validate(d).model_dump_json()` for the same dict, and a
dict the model refuses must get None (so the model raises its located error, as before). Checked on every τ²-Bench
fixture and the packaged sample, on generated records (limits, odd floats, escaped strings), and through the
`traces import` job, whose bytes must equal the model's path's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specagent.simulator.jobs.import_traces import ImportRequest, run
from specagent.traces.io import data_path
from specagent.traces.openai_chat import iter_openai_file
from specagent.traces.quality import QualityTally
from specagent.traces.records import record_json
from specagent.traces.schema import MAX_CONTEXT_TOKENS, MAX_STEP_LATENCY_S, Actor, StepKind, TokenSource, Trajectory
from specagent.traces.tau2 import iter_tau2_file
from specagent.traces.tool_tags import ToolTagger

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"
FILES = [("tau2", data_path("tau2_airline_sample.json")), *(("tau2", p) for p in sorted((FIXTURES / "tau2").glob("*.json"))),
         ("openai", data_path("openai_chat_sample.jsonl")),
         *(("openai", p) for p in sorted((FIXTURES / "openai_chat").glob("*.json*")) if not p.name.endswith("_tags.json"))]
READERS = {"tau2": iter_tau2_file, "openai": iter_openai_file}


def model_line(d: dict) -> str | None:
    try:
        return Trajectory.model_validate(d).model_dump_json()
    except ValidationError:
        return None


@pytest.mark.parametrize("reader, path", FILES, ids=lambda p: getattr(p, "name", p))
def test_fixtures_take_the_fast_path_with_the_models_bytes(reader: str, path: Path) -> None:
    recs = list(READERS[reader](path, ToolTagger(), as_records=True, skip_bad=True, skipped=[], repairs=[]))
    fast = [r for r in recs if r.data is not None]
    for r in fast:
        assert r.line == model_line(r.data)
        assert r.steps == len(json.loads(r.line)["steps"])
    if path.name in ("tau2_airline_sample.json", "openai_chat_sample.jsonl"):
        assert len(fast) == len(recs) > 0  # the packaged samples are plain logs: every record takes the fast path
    models = list(READERS[reader](path, ToolTagger(), skip_bad=True, skipped=[], repairs=[]))
    assert [r.line for r in recs] == [t.model_dump_json() for t in models]
    a, b = QualityTally(), QualityTally()
    for r, t in zip(recs, models):
        a.add_record(r)
        b.add(t)
    assert a.result() == b.result()


def test_the_import_job_writes_the_models_bytes(tmp_path: Path) -> None:
    """The job's fast path (one process, JSONL) against the model's path (Parquet's, dumped): same lines."""
    src = data_path("tau2_airline_sample.json")
    out = run(ImportRequest(files=(str(src),), workers=1), out=tmp_path / "t.jsonl")
    models = list(iter_tau2_file(src, ToolTagger()))
    assert (tmp_path / "t.jsonl").read_text(encoding="utf-8") == "".join(t.model_dump_json() + "\n" for t in models)
    tally = QualityTally()
    for t in models:
        tally.add(t)
    assert out.quality == tally.result()


def base_step(i: int, **kw) -> dict:
    return {**dict(index=i, actor=Actor.AGENT, kind=StepKind.REPLY, new_context_tokens=5, output_tokens=7), **kw}


def base_record(steps: list[dict], **kw) -> dict:
    d = dict(task_id="t", domain="airline", source="f.json#simulation=1", outcome=dict(reward=1.0, success=True),
             system_prompt_tokens=100, system_prompt_source=TokenSource.MEASURED, steps=steps,
             metadata={"importer": "tau2", "x": 1, "y": 0.5, "z": None, "b": True})
    d.update(kw)
    return d


def test_a_plain_record_is_vouched_for_and_matches() -> None:
    d = base_record([base_step(0, model_latency_s=1.25, reasoning_tokens=2),
                     dict(index=1, actor=Actor.TOOL, kind=StepKind.TOOL_RESULT, tool_name="get_user", new_context_tokens=3,
                          tool_latency_s=0.5, tool_error=False)])
    assert record_json(d) is not None
    assert record_json(d) == model_line(d)


@pytest.mark.parametrize("change, why", [
    (dict(steps=[base_step(0, output_tokens=MAX_CONTEXT_TOKENS + 1)]), "a count over the limit"),
    (dict(steps=[base_step(0, model_latency_s=MAX_STEP_LATENCY_S * 2)]), "a wait over a week"),
    (dict(steps=[base_step(0, model_latency_s=float("nan"))]), "NaN"),
    (dict(steps=[base_step(0, reasoning_tokens=8)]), "reasoning above output"),
    (dict(steps=[base_step(1)]), "an index out of order"),
    (dict(steps=[]), "no steps"),
    (dict(steps=[dict(index=0, actor=Actor.USER, kind=StepKind.USER, new_context_tokens=1, output_tokens=1)]),
     "a user decoding tokens"),
    (dict(steps=[dict(index=0, actor=Actor.TOOL, kind=StepKind.REPLY, new_context_tokens=1)]), "a tool replying"),
    (dict(steps=[base_step(0, tool_name="x")]), "a tool name on a reply"),
    (dict(steps=[dict(index=0, actor=Actor.USER, kind=StepKind.USER, new_context_tokens=1, in_agent_context=False)]),
     "context outside the agent's context"),
    (dict(system_prompt_tokens=MAX_CONTEXT_TOKENS), "an agent step past the window"),
    (dict(outcome=dict(reward=float("inf"))), "an infinite reward"),
    (dict(steps=[base_step(0, extra=1)]), "an unknown field"),
])
def test_what_the_model_refuses_is_left_to_the_model(change: dict, why: str) -> None:
    d = base_record([base_step(0)])
    d.update(change)
    assert model_line(d) is None, why
    assert record_json(d) is None, why


@pytest.mark.parametrize("change", [
    dict(steps=[base_step(0, model_latency_s=3)]),  # an int latency: the model writes 3.0
    dict(steps=[base_step(0, actor="agent")]),  # a string for an enum: the model converts it
    dict(outcome=dict(reward=1)),
    dict(metadata={"big": 1 << 70}),
    dict(metadata={"inf": float("inf")}),  # MetaValue allows it: the model writes null
])
def test_what_the_model_would_convert_is_left_to_the_model(change: dict) -> None:
    d = base_record([base_step(0)])
    d.update(change)
    assert record_json(d) is None
    assert model_line(d) is not None


floats = st.one_of(st.floats(min_value=0.0, max_value=MAX_STEP_LATENCY_S * 1.5), st.floats(), st.floats(0, 1e-4),
                   st.sampled_from([0.0, -0.0, 1e-05, 1.5e-07, 5e-324, 0.1, 2.0, 604800.0, 604800.00000000001]),
                   st.integers(0, 10), st.none())
texts = st.one_of(st.text(max_size=12), st.sampled_from(['a"b', "a\\b", "line\nbreak", "é✓😀", "\x7f\x1f", "", "\ud800"]))
counts = st.one_of(st.integers(-1, 30), st.sampled_from([MAX_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS + 1]), st.booleans())


@st.composite
def steps(draw, i: int) -> dict:
    actor = draw(st.sampled_from(list(Actor)))
    kind = draw(st.sampled_from(list(StepKind)))
    s = dict(index=i, actor=actor, kind=kind, new_context_tokens=draw(counts))
    for key, strat in [("output_tokens", counts), ("reasoning_tokens", st.one_of(st.none(), counts)),
                       ("model_latency_s", floats), ("tool_latency_s", floats), ("user_latency_s", floats),
                       ("tool_name", st.one_of(st.none(), texts)), ("in_agent_context", st.booleans()),
                       ("irreversible", st.one_of(st.booleans(), st.integers(0, 1))),
                       ("token_source", st.sampled_from(list(TokenSource))), ("parallel_group", st.one_of(st.none(), counts)),
                       ("tool_error", st.one_of(st.none(), st.booleans()))]:
        if draw(st.booleans()):
            s[key] = draw(strat)
    return s


@st.composite
def records(draw) -> dict:
    n = draw(st.integers(1, 4))
    meta = draw(st.dictionaries(texts, st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), texts,
                                                 st.floats(allow_nan=True, allow_infinity=True)), max_size=3))
    reward = draw(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 1)))
    return base_record([draw(steps(i)) for i in range(n)], task_id=draw(texts), source=draw(texts),
                       system_prompt_tokens=draw(counts), metadata=meta,
                       outcome=dict(reward=reward, success=draw(st.one_of(st.none(), st.booleans()))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_generated_records_fast_line_is_the_models_line(d: dict) -> None:
    fast = record_json(d)
    if fast is None:
        return
    assert fast == Trajectory.model_validate(d).model_dump_json()


PAIRS = [(Actor.AGENT, k) for k in StepKind if k not in (StepKind.USER, StepKind.TOOL_RESULT)] + [
    (Actor.USER, StepKind.USER), (Actor.USER, StepKind.WRITE), (Actor.TOOL, StepKind.TOOL_RESULT)]


@st.composite
def plain_records(draw) -> dict:
    """Records the schema keeps as they are (the fast path's domain), odd floats and escaped strings included."""
    out = []
    for i in range(draw(st.integers(1, 5))):
        actor, kind = draw(st.sampled_from(PAIRS))
        agent, tool = actor == Actor.AGENT, kind != StepKind.REPLY and kind != StepKind.USER
        o = draw(st.integers(0, 50)) if agent else 0
        inctx = draw(st.booleans()) if actor == Actor.USER else True
        s = dict(index=i, actor=actor, kind=kind, new_context_tokens=draw(st.integers(0, 50)) if inctx else 0,
                 output_tokens=o, reasoning_tokens=draw(st.one_of(st.none(), st.integers(0, o))), in_agent_context=inctx,
                 tool_name=draw(texts.filter(lambda t: t and "\ud800" not in t)) if tool else None,
                 model_latency_s=draw(st.one_of(st.none(), st.floats(0, MAX_STEP_LATENCY_S), st.floats(0, 1e-4))),
                 tool_error=draw(st.one_of(st.none(), st.booleans())))
        out.append(s)
    meta = draw(st.dictionaries(texts.filter(lambda t: "\ud800" not in t), st.one_of(
        st.none(), st.booleans(), st.integers(-2**62, 2**62), st.floats(allow_nan=False, allow_infinity=False)), max_size=3))
    return base_record(out, metadata=meta, outcome=dict(reward=draw(st.one_of(st.none(), st.floats(0, 1))), success=None))


def test_plain_generated_records_take_the_fast_path_with_the_models_bytes() -> None:
    """The property above must not pass by always saying None: records the schema keeps as they are take the fast
    path, with the model's bytes."""
    seen = []

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plain_records())
    def check(d: dict) -> None:
        fast = record_json(d)
        seen.append(fast is not None)
        if fast is not None:
            assert fast == Trajectory.model_validate(d).model_dump_json()

    check()
    assert sum(seen) == len(seen)
