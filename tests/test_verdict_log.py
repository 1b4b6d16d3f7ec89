"""The verdict log reader: the documented example reads; every broken invariant is one located line."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from specagent.traces.errors import TraceFormatError
from specagent.traces.verdict_log import SCHEMA, make_record, previous_rejected, read_verdict_log, write_verdict_log

DOC = Path(__file__).resolve().parent.parent / "docs" / "verdict-log.md"

REJECTED = {"schema": SCHEMA, "task": "t1", "position": 4,
            "drafted": [{"kind": "read", "name": "get_reservation_details", "tokens": 41, "reference_tokens": 38},
                        {"kind": "write", "name": "cancel_reservation", "tokens": 35}],
            "ended_by": "write", "accepted_prefix": 1, "verdict_tokens": 52, "verify_reasoning_tokens": 388,
            "thinking": True, "replacement_offered": True, "replacement_valid": False, "repair_tokens": 61,
            "repair_reasoning_tokens": 240}
ACCEPTED = {"schema": SCHEMA, "task": "t1", "position": 6, "drafted": [{"kind": "reply", "name": None, "tokens": 20}],
            "ended_by": "reply", "accepted_prefix": 1, "verdict_tokens": 4, "verify_reasoning_tokens": 0, "thinking": True,
            "replacement_offered": False, "replacement_valid": None, "repair_tokens": None, "repair_reasoning_tokens": None}


def _write(tmp_path, *records) -> Path:
    p = tmp_path / "v.jsonl"
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return p


def test_the_documented_example_line_reads():
    line = next(ln for ln in DOC.read_text(encoding="utf-8").splitlines() if ln.startswith('{"schema"'))
    rec = make_record(**{k: v for k, v in json.loads(line).items() if k != "schema"})
    assert rec.rejected and rec.repaired and rec.accepted_prefix == 1 and rec.drafted[0].reference_tokens == 38


def test_round_trip_and_previous_rejection(tmp_path):
    p = _write(tmp_path, REJECTED, ACCEPTED, {**ACCEPTED, "task": "t2", "position": 0})
    recs = read_verdict_log(p)
    assert [r.task for r in recs] == ["t1", "t1", "t2"]
    assert previous_rejected(recs) == [False, True, False]
    q = write_verdict_log(recs, tmp_path / "w.jsonl")
    assert read_verdict_log(q) == recs
    assert json.loads(q.read_text().splitlines()[0]) == REJECTED


def _mut(base, path, value):
    r = copy.deepcopy(base)
    node = r
    *parents, leaf = path
    for k in parents:
        node = node[k]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return r


@pytest.mark.parametrize("base, path, value, field", [
    (REJECTED, ("accepted_prefix",), 3, "accepted_prefix"),
    (REJECTED, ("accepted_prefix",), -1, "accepted_prefix"),
    (REJECTED, ("accepted_prefix",), 1.0, "accepted_prefix"),
    (REJECTED, ("verdict_tokens",), -2, "verdict_tokens"),
    (REJECTED, ("verdict_tokens",), "52", "verdict_tokens"),
    (REJECTED, ("verdict_tokens",), True, "verdict_tokens"),
    (REJECTED, ("verify_reasoning_tokens",), KeyError, "verify_reasoning_tokens"),
    (REJECTED, ("drafted",), [], "drafted"),
    (REJECTED, ("drafted", 0, "kind"), "teleport", "drafted[0].kind"),
    (REJECTED, ("drafted", 0, "kind"), "write", "drafted[0].kind"),
    (REJECTED, ("drafted", 1, "tokens"), None, "drafted[1].tokens"),
    (REJECTED, ("drafted", 1, "colour"), "red", "drafted[1].colour"),
    (REJECTED, ("ended_by",), "timeout", "ended_by"),
    (REJECTED, ("schema",), "specagent.verdict/2", "schema"),
    (REJECTED, ("replacement_valid",), None, "replacement_valid"),
    (REJECTED, ("repair_tokens",), None, "repair_tokens"),
    (REJECTED, ("repair_reasoning_tokens",), None, "repair_reasoning_tokens"),
    (REJECTED, ("thinking",), False, "verify_reasoning_tokens"),
    (REJECTED, ("position",), 10**6, "position"),
    (REJECTED, ("task",), "", "task"),
    (REJECTED, ("surprise",), 1, "surprise"),
    (ACCEPTED, ("replacement_offered",), True, "replacement_offered"),
    (ACCEPTED, ("repair_tokens",), 5, "repair_tokens"),
    (ACCEPTED, ("replacement_valid",), False, "replacement_valid"),
    ({**REJECTED, "replacement_valid": True, "repair_tokens": None, "repair_reasoning_tokens": None},
     ("repair_tokens",), 9, "repair_tokens"),
    ({**REJECTED, "replacement_offered": False, "replacement_valid": None}, ("replacement_valid",), True, "replacement_valid"),
])
def test_bad_records_name_file_line_and_field(tmp_path, base, path, value, field):
    p = _write(tmp_path, ACCEPTED | {"task": "other"}, _mut(base, path, value))
    with pytest.raises(TraceFormatError) as e:
        read_verdict_log(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}: line 2") and f"field '{field}'" in msg and "expected" in msg, msg


@pytest.mark.parametrize("text, where, field", [
    ("not json", "line 1", "<json>"), ("[1, 2]", "line 1", "<record>"), ("", "file", "<content>"),
])
def test_not_a_verdict_log(tmp_path, text, where, field):
    p = tmp_path / "v.jsonl"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError, match=re.escape(f"{p}: {where}: field '{field}'")):
        read_verdict_log(p)


def test_overlapping_verifications_of_one_task_are_refused(tmp_path):
    p = _write(tmp_path, REJECTED, {**ACCEPTED, "position": 5})  # the rejection committed positions 4 and 5
    with pytest.raises(TraceFormatError, match=r"line 2: field 'position': expected at least 6"):
        read_verdict_log(p)
    p = _write(tmp_path, REJECTED, REJECTED)
    with pytest.raises(TraceFormatError, match="line 2: field 'position'"):
        read_verdict_log(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_verdict_log(tmp_path / "nope.jsonl")
    with pytest.raises(TraceFormatError, match="a directory"):
        read_verdict_log(tmp_path)
