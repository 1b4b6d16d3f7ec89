"""Storage: lossless JSONL <-> Parquet round trips (hypothesis), atomic writes, located errors, skip reports."""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specagent.traces import (
    Actor, SpecLabel, Step, StepKind, TokenSource, TraceFormatError, Trajectory, from_frame, load_trajectories,
    save_trajectories, step_arrays, to_frame,
)
from specagent.traces.io import default_workload_path
from specagent.traces.schema import MAX_STEP_LATENCY_S

_ACTOR_KINDS = [
    (Actor.AGENT, k) for k in (StepKind.READ, StepKind.WRITE, StepKind.GENERIC, StepKind.THINK, StepKind.REPLY)
] + [(Actor.USER, StepKind.USER), (Actor.USER, StepKind.READ), (Actor.TOOL, StepKind.TOOL_RESULT)]

_fl = st.one_of(st.none(), st.floats(min_value=0, max_value=MAX_STEP_LATENCY_S, allow_nan=False, allow_infinity=False))
_txt = st.text(min_size=1, max_size=12)


@st.composite
def steps(draw, i):
    actor, kind = draw(st.sampled_from(_ACTOR_KINDS))
    agent = actor == Actor.AGENT
    out = draw(st.integers(0, 10**6)) if agent else 0
    inctx = draw(st.booleans())
    return Step(
        index=i, actor=actor, kind=kind,
        tool_name=draw(st.one_of(st.none(), _txt)) if kind not in (StepKind.REPLY, StepKind.USER) else None,
        irreversible=draw(st.booleans()), in_agent_context=inctx,
        new_context_tokens=draw(st.integers(0, 10**6)) if inctx else 0, output_tokens=out,
        reasoning_tokens=draw(st.one_of(st.none(), st.integers(0, out))),
        token_source=draw(st.sampled_from(list(TokenSource))),
        model_latency_s=draw(_fl), tool_latency_s=draw(_fl), user_latency_s=draw(_fl),
        parallel_group=draw(st.one_of(st.none(), st.integers(0, 50))),
        tool_error=draw(st.one_of(st.none(), st.booleans())),
        label=draw(st.one_of(st.none(), st.builds(
            SpecLabel, drafted_by=st.sampled_from(["weak", "strong"]),
            verdict=st.sampled_from([None, "accepted", "rejected", "repair"]),
            verdict_tokens=st.integers(0, 999), repair_tokens=st.integers(0, 999), segment=st.integers(0, 99)))) if agent else None,
    )


@st.composite
def trajectories(draw):
    n = draw(st.integers(1, 6))
    meta = draw(st.dictionaries(st.text(max_size=8), st.one_of(
        st.none(), st.booleans(), st.integers(-10**9, 10**9), _txt,
        st.floats(allow_nan=False, allow_infinity=False)), max_size=3))
    reward = draw(st.one_of(st.none(), st.floats(-1, 1, allow_nan=False)))
    return Trajectory(
        task_id=draw(_txt), domain=draw(_txt), source=draw(st.text(max_size=20)),
        outcome=dict(reward=reward, success=draw(st.one_of(st.none(), st.booleans()))),
        system_prompt_tokens=draw(st.integers(0, 10**6)),
        system_prompt_source=draw(st.sampled_from(list(TokenSource))),
        steps=[draw(steps(i)) for i in range(n)], metadata=meta,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trajs=st.lists(trajectories(), min_size=1, max_size=4))
def test_round_trip_jsonl_parquet_frame(tmp_path, trajs):
    assert from_frame(to_frame(trajs)) == trajs
    pj, pp = tmp_path / "t.jsonl", tmp_path / "t.parquet"
    save_trajectories(trajs, pj)
    save_trajectories(trajs, pp)
    a, b = load_trajectories(pj), load_trajectories(pp)
    assert a == trajs and b == trajs
    # JSONL -> Parquet -> JSONL gives the same bytes
    save_trajectories(b, tmp_path / "u.jsonl")
    assert (tmp_path / "u.jsonl").read_bytes() == pj.read_bytes()


def test_step_arrays_context_before_hand_computed():
    t = Trajectory(task_id="a", domain="d", source="s", system_prompt_tokens=100, steps=[
        Step(index=0, actor="user", kind="user", new_context_tokens=10),
        Step(index=1, actor="agent", kind="read", tool_name="x", new_context_tokens=5, output_tokens=30, reasoning_tokens=25),
        Step(index=2, actor="user", kind="read", tool_name="dev", in_agent_context=False, new_context_tokens=0),
        Step(index=3, actor="tool", kind="tool_result", new_context_tokens=7),
        Step(index=4, actor="agent", kind="reply", new_context_tokens=3, output_tokens=3),
    ])
    u = t.model_copy(update={"system_prompt_tokens": 50})
    a = step_arrays([t, u])
    assert a["context_before"].tolist() == [100, 110, 115, 115, 122, 50, 60, 65, 65, 72]
    assert a["traj_offsets"].tolist() == [0, 5, 10]
    assert a["kind"].tolist()[:5] == [5, 0, 0, 6, 4]
    assert a["reasoning_tokens"].tolist()[:2] == [-1, 25]


def test_schema_rejects_inconsistent_steps():
    with pytest.raises(ValueError, match="output_tokens must be 0"):
        Step(index=0, actor="user", kind="user", new_context_tokens=1, output_tokens=3)
    with pytest.raises(ValueError, match="reasoning_tokens"):
        Step(index=0, actor="agent", kind="reply", new_context_tokens=1, output_tokens=3, reasoning_tokens=4)
    with pytest.raises(ValueError, match="actor 'tool'"):
        Step(index=0, actor="agent", kind="tool_result", new_context_tokens=1)
    with pytest.raises(ValueError, match="index"):
        Trajectory(task_id="a", domain="d", source="s", system_prompt_tokens=1,
                   steps=[Step(index=1, actor="user", kind="user", new_context_tokens=1)])


def _good_line():
    return load_trajectories(default_workload_path())[0].model_dump(mode="json")


def test_jsonl_error_names_file_line_step_field(tmp_path):
    good = _good_line()
    bad = json.loads(json.dumps(good))
    bad["steps"][3]["new_context_tokens"] = -1
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n" + "{not json\n")
    with pytest.raises(TraceFormatError) as ei:
        load_trajectories(p)
    e = ei.value
    assert e.file == str(p) and e.location.startswith("line 2") and "step 3" in e.location
    assert e.field == "steps[3].new_context_tokens" and "greater than or equal to 0" in e.expected
    skipped = []
    ok = load_trajectories(p, skip_bad=True, skipped=skipped)
    assert len(ok) == 1 and [s.location.split()[1] for s in skipped] == ["2", "3"]
    assert "valid JSON" in skipped[1].reason


def test_parquet_error_names_trajectory_and_step(tmp_path):
    tr = load_trajectories(default_workload_path())[:3]
    df = to_frame(tr)
    df.loc[df.index[df["traj"] == 1][2], "kind"] = "dance"
    p = tmp_path / "bad.parquet"
    from specagent.traces.io import save_frame

    save_frame(df, p)
    with pytest.raises(TraceFormatError) as ei:
        load_trajectories(p)
    assert "trajectory 1" in ei.value.location and "step 2" in ei.value.location and ei.value.field == "steps[2].kind"
    skipped = []
    assert len(load_trajectories(p, skip_bad=True, skipped=skipped)) == 2 and len(skipped) == 1


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "t.jsonl"
    tr = load_trajectories(default_workload_path())[:2]
    save_trajectories(tr, p)
    before = p.read_bytes()

    class Boom(Exception):
        pass

    def boom(*a, **k):
        raise Boom

    import specagent.traces.io as io

    monkeypatch.setattr(io, "dumps_jsonl", boom)
    with pytest.raises(Boom):
        save_trajectories(tr[:1], p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["t.jsonl"]


def test_unknown_suffix_is_a_clear_error(tmp_path):
    with pytest.raises(TraceFormatError, match="suffix"):
        save_trajectories([], tmp_path / "x.csv")
