"""Fuzz the new input paths of issue #23 items 4-5: ranges files, published-range rows, the sensitivity ranges and
the environment fields. Each must either load or fail with one located `InputError` line; never another exception."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specagent.cli import app
from specagent.common.errors import InputError
from specagent.measurements.protocol_figures import PROTOCOL_COLUMNS as COLUMNS
from specagent.measurements.published_ranges import load_published_ranges
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.ranges import AcceptanceDistribution
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.jobs.sensitivity import load_scenario_ranges

runner = CliRunner()
FS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_values = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                    st.booleans(), st.just([1, 2]))
_keys = st.sampled_from(["accept.read", "accept.*", "position_decay", "verdict_tokens", "weak_token_ratio", "nope", "accept.zzz",
                         "source", "exact.write", "route_strong.read"])


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return str(v).replace("'", '"')


@FS
@given(entries=st.lists(st.tuples(_keys, st.dictionaries(st.sampled_from(["low", "high", "shape", "source", "x"]), _values,
                                                         max_size=4)), max_size=4), tmp=st.just(None))
def test_ranges_files_load_or_fail_located(tmp_path, entries, tmp):
    body = ""
    for key, table in dict(entries).items():
        body += f'[ranges."{key}"]\n' + "".join(f"{k} = {_toml_value(v)}\n" for k, v in table.items())
    f = tmp_path / "r.toml"
    f.write_text(body, encoding="utf-8")
    try:
        d = AcceptanceDistribution.from_file(AcceptanceModel(), f)
    except InputError as exc:
        assert str(f) in str(exc) and "\n" not in str(exc)
        return
    for m in d.sample(3, 0):
        assert isinstance(m, AcceptanceModel)


@FS
@given(text=st.text(max_size=200))
def test_arbitrary_text_as_a_ranges_file(tmp_path, text):
    f = tmp_path / "r.toml"
    f.write_text(text, encoding="utf-8")
    try:
        AcceptanceDistribution.from_file(AcceptanceModel(), f)
    except InputError as exc:
        assert str(f) in str(exc)


@FS
@given(cells=st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n\x00"), max_size=6), min_size=0, max_size=12))
def test_published_rows_load_or_fail_located(tmp_path, cells):
    f = tmp_path / "p.csv"
    f.write_text(",".join(COLUMNS) + "\n" + ",".join('"' + c.replace('"', '""') + '"' for c in cells) + "\n", encoding="utf-8")
    try:
        rows = load_published_ranges(f)
    except InputError as exc:
        assert str(f) in str(exc)  # the file always; a line too, unless the file as a whole is wrong (no rows)
        assert "line" in str(exc) or "no figures" in str(exc)
        return
    for r in rows:
        assert r.low <= r.high


@FS
@given(table=st.dictionaries(st.sampled_from(["user_latency_scale", "tool_latency_s", "strong_batch"]),
                             st.dictionaries(st.sampled_from(["low", "high", "rationale"]), _values, max_size=3), max_size=3))
def test_sensitivity_ranges_load_or_fail_located(tmp_path, table):
    f = tmp_path / "s.toml"
    f.write_text("".join(f"[{k}]\n" + "".join(f"{kk} = {_toml_value(v)}\n" for kk, v in t.items()) for k, t in table.items()),
                 encoding="utf-8")
    try:
        r = load_scenario_ranges(f)
    except InputError as exc:
        assert str(f) in str(exc) and "\n" not in str(exc)
        return
    assert 1 <= r.strong_batch[0] <= r.strong_batch[1] and 0 <= r.user_latency_scale[0] <= r.user_latency_scale[1]


@FS
@given(field=st.sampled_from(["user_latency_scale", "tool_latency_scale", "user_latency_s", "tool_latency_s"]), value=_values)
def test_environment_values_are_validated(field, value):
    try:
        sc = Scenario().override({f"environment.{field}": value})
    except ScenarioError as exc:
        assert exc.where == f"environment.{field}" and "\n" not in str(exc)
        return
    v = getattr(sc.environment, field)
    assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


@pytest.mark.parametrize("args, needle", [
    (["--draws", "-3"], "uncertainty.draws must be a whole number"),
    (["--draws", "x"], "--draws"),
    (["--interval-level", "1.5"], "uncertainty.level must be a number in (0, 1)"),
    (["--acceptance-ranges", "/nonexistent/r.toml"], "/nonexistent/r.toml: no such ranges file"),
    (["--user-latency-s", "-2"], "user_latency_s must be a number of seconds"),
])
def test_bad_uncertainty_and_environment_flags_are_one_line(tmp_path, args, needle):
    r = runner.invoke(app, ["predict", "-o", str(tmp_path / "o"), "--strategies", "strongonly,specagent", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o" / "summary.json").exists()
