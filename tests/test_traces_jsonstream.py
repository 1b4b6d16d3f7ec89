"""traces/jsonstream.py: one big JSON document read a record at a time, errors located as json.loads locates them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from specagent.traces import jsonstream as J

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(before=st.dictionaries(st.text(max_size=4).filter(lambda k: k != "sims"), JSON, max_size=3),
       sims=st.lists(JSON, max_size=5), indent=st.sampled_from([None, 1]))
def test_members_and_items_equal_json_loads(before, sims, indent):
    doc = {**before, "sims": sims}
    text = json.dumps(doc, indent=indent)
    out, items = J.members(text, "sims")
    assert items is not None and list(items) == sims and out == before


def test_a_member_after_the_array_is_read_before_the_first_item_when_needed():
    text = json.dumps({"sims": [1, 2], "info": {"a": 1}})
    out, items = J.members(text, "sims", need=("info",))
    assert out == {"info": {"a": 1}} and list(items) == [1, 2]
    out, items = J.members(text, "sims")  # not needed: read when the array ends
    assert out == {} and list(items) == [1, 2] and out == {"info": {"a": 1}}


@pytest.mark.parametrize("text,msg", [('{"sims": [1, 2,]}', "Expecting value"), ('{"sims": [1 2]}', "Expecting ','"),
                                      ('{"a": 1} x', "Extra data"), ('{"sims": [1], }', "property name"),
                                      ('[1, 2', "Expecting ','")])
def test_syntax_errors_carry_the_offset(text, msg):
    with pytest.raises(json.JSONDecodeError, match=msg) as e:
        if text.startswith("["):
            list(J.iter_array(text, 0))
        else:
            _, items = J.members(text, "sims")
            list(items or [])
    assert e.value.pos > 0 and e.value.lineno == 1


def test_no_array_member():
    assert J.members('{"a": [1]}', "sims") == ({"a": [1]}, None)


@settings(max_examples=200, deadline=None)
@given(sims=st.lists(JSON, max_size=6), chunk=st.integers(1, 40), indent=st.sampled_from([None, 1]))
def test_a_file_read_in_small_windows_gives_the_same_items(sims, chunk, indent):
    """Windows of 1..40 characters: every value cut at every place, numbers included, decodes as json.loads does."""
    import io

    doc = {"info": {"n": 12345}, "sims": sims, "after": [1.5e10]}
    text = json.dumps(doc, indent=indent)
    w = J.Window(io.StringIO(text), chunk=chunk)
    out, items = J.members(w, "sims")
    assert list(items) == sims and out == {"info": {"n": 12345}, "after": [1.5e10]}


@pytest.mark.parametrize("chunk", [3, 64, 1 << 20])
def test_a_syntax_error_deep_in_a_file_is_located_as_json_loads_locates_it(chunk, tmp_path):
    import io

    good = json.dumps({"info": 1, "sims": [{"a": [1, 2, 3]}] * 50}, indent=1)
    cut = [i for i in range(len(good)) if good.startswith("2,", i)][29]
    bad = good[:cut] + "2 2," + good[cut + 2:]  # the 30th item breaks
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(bad)
    with pytest.raises(json.JSONDecodeError) as got:
        _, items = J.members(J.Window(io.StringIO(bad), chunk=chunk), "sims")
        list(items)
    assert (got.value.lineno, got.value.colno, got.value.pos) == (want.value.lineno, want.value.colno, want.value.pos)
