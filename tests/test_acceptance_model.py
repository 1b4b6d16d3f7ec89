"""The acceptance model's own fields: partial tables merge onto the defaults, unknown kinds and bad reasoning
counts are refused with the field named, and the reasoning rule of its docstring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specagent.common.errors import InputError
from specagent.simulator.acceptance.model import DEFAULT_ACCEPT, DEFAULT_EXACT, KINDS, AcceptanceModel
from specagent.simulator.scenario import Scenario, ScenarioError


@pytest.mark.parametrize("table, default", [("accept", DEFAULT_ACCEPT), ("exact", DEFAULT_EXACT)])
def test_a_partial_table_merges_onto_the_defaults(table, default):
    m = AcceptanceModel(**{table: {"read": 0.5}})
    assert getattr(m, table) == {**default, "read": 0.5}
    assert list(getattr(m, table)) == list(KINDS)
    assert m.p_accept("write", 0, False, exact=table == "exact") == default["write"]  # not 0.0 (finding F2)


def test_a_partial_table_in_a_scenario_file_merges(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text("[acceptance.accept]\nread = 0.5\n[acceptance.route_strong]\nreply = 0.0\n", encoding="utf-8")
    sc = Scenario.load(p)
    assert sc.acceptance.accept == {**DEFAULT_ACCEPT, "read": 0.5}
    assert sc.acceptance.route_strong["reply"] == 0.0 and sc.acceptance.route_strong["write"] == 1.0


@pytest.mark.parametrize("table", ["accept", "exact", "route_strong"])
def test_an_unknown_kind_is_refused_with_its_location(tmp_path, table):
    p = tmp_path / "s.toml"
    p.write_text(f"[acceptance.{table}]\nread = 0.9\nteleport = 0.5\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as e:
        Scenario.load(p)
    msg = str(e.value)
    assert e.value.where == f"acceptance.{table}.teleport"
    assert msg.startswith(f"{p}: acceptance.{table}.teleport: ") and "unknown step kind 'teleport'" in msg
    assert "read, write, generic, think, reply" in msg and "\n" not in msg


@pytest.mark.parametrize("field, value", [
    ("thinking", "yes"), ("thinking", 1), ("verify_reasoning_tokens", -1), ("verify_reasoning_tokens", 2.5),
    ("verify_reasoning_tokens", True), ("repair_reasoning_tokens", 10**9), ("repair_reasoning_tokens", math.nan),
    ("fit", []), ("fit", {"colour": 1}), ("fit", {"intervals": {"accept.read": [0.9, 0.1]}}),
    ("fit", {"intervals": {"accept.read": [0.1, math.inf]}}), ("fit", {"intervals": {"accept.read": 0.5}}),
])
def test_bad_reasoning_and_fit_fields_are_named(field, value):
    with pytest.raises(InputError) as e:
        AcceptanceModel(**{field: value})
    assert e.value.where.split(".")[0] == field


def test_reasoning_rule():
    out, ctx = np.array([40, 30, 0, 10]), np.array([25, 30, 12, 20])
    tied = AcceptanceModel()
    assert tied.thinking
    np.testing.assert_array_equal(tied.verify_reasoning(out, ctx), [15, 0, 0, 0])   # decoded less visible, never < 0
    np.testing.assert_array_equal(tied.repair_decode(out, ctx), out)                # the step's recorded output
    off = AcceptanceModel(thinking=False, verify_reasoning_tokens=500, repair_reasoning_tokens=500)
    np.testing.assert_array_equal(off.verify_reasoning(out, ctx), [0, 0, 0, 0])
    np.testing.assert_array_equal(off.repair_decode(out, ctx), [25, 30, 0, 10])     # visible part only
    given = AcceptanceModel(verify_reasoning_tokens=300, repair_reasoning_tokens=200)
    np.testing.assert_array_equal(given.verify_reasoning(out, ctx), [300] * 4)
    np.testing.assert_array_equal(given.repair_decode(out, ctx), [225, 230, 200, 210])
    assert int(given.verify_reasoning(40, 25)) == 300 and int(tied.verify_reasoning(40, 25)) == 15


def test_the_fields_round_trip_through_a_scenario():
    acc = AcceptanceModel(thinking=False, verify_reasoning_tokens=12, repair_reasoning_tokens=7,
                          fit={"method": "maximum likelihood", "intervals": {"accept.read": [0.8, 0.95]}})
    sc = Scenario().replace(acceptance=acc)
    import tomllib
    assert Scenario.from_dict(tomllib.loads(sc.to_toml())) == sc
    assert Scenario.from_dict(sc.to_dict()) == sc
