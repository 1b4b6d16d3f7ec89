"""The published protocol figures (Wang et al., arXiv:2610.21463) as data: the shipped CSV loads, covers every figure of
the evaluation's results, and bad files fail located."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from specagent.measurements import MeasurementError
from specagent.measurements.protocol_figures import PROTOCOL_COLUMNS, PROTOCOL_METRICS, load_protocol_figures

SHIPPED = Path(__file__).resolve().parents[1] / "measurements" / "protocol_figures.csv"


def test_shipped_figures_load_and_cover_every_spec_row():
    figs = load_protocol_figures()
    assert len(figs) == 26
    assert len({f.figure_id for f in figs}) == len(figs)
    # every published result (11 statements of the evaluation) is represented, each cited as the publication
    assert len({f.source_locator for f in figs}) == 11
    assert all(f.source_locator.startswith("evaluation results, ") and "arXiv:2610.21463" in f.source for f in figs)
    for f in figs:
        assert f.low <= f.high and math.isfinite(f.low) and f.source and f.unit and f.metric in PROTOCOL_METRICS
    by_id = {f.figure_id: f for f in figs}
    # the numbers as published (a transcription slip of any bound is caught)
    assert (by_id["tau2_memory_ratio"].low, by_id["tau2_memory_ratio"].high) == (0.43, 0.57)
    assert (by_id["tau2_strong_share"].low, by_id["tau2_strong_share"].high) == (0.39, 0.66)
    assert (by_id["tau2_weak_share"].low, by_id["tau2_weak_share"].high) == (0.34, 0.61)
    assert (by_id["mcp_strong_decode"].low, by_id["mcp_strong_decode"].high) == (0.36, 0.50)
    assert (by_id["mcp_api_cost"].low, by_id["mcp_api_cost"].high) == (0.59, 0.81)
    assert by_id["predictor_error"].high == 0.01 and by_id["retail_exact_pass1"].low == 82.5
    assert math.isinf(by_id["review_replies_calls"].high) and by_id["review_replies_calls"].low == 3
    assert by_id["mcp_strong_decode"].setting == "edge" and by_id["tau2_memory_ratio"].setting == "h20"
    assert (by_id["tau2_wall_ratio"].low, by_id["tau2_wall_ratio"].high) == (0.41, 0.54)
    assert (by_id["tau2_flops_ratio"].low, by_id["tau2_flops_ratio"].high) == (1.30, 1.87)


def test_contains_and_miss():
    f = {x.figure_id: x for x in load_protocol_figures()}["tau2_memory_ratio"]
    assert f.contains(0.5) and f.contains(0.43) and not f.contains(0.42) and not f.contains(float("nan"))
    assert f.miss(0.5) == 0 and f.miss(0.215) == pytest.approx(0.5) and f.miss(1.14) == pytest.approx(1.0)
    assert math.isinf(f.miss(float("nan")))


def _write(tmp_path: Path, edit) -> Path:
    rows = list(csv.DictReader(io.StringIO(SHIPPED.read_text(encoding="utf-8"))))
    edit(rows)
    out = io.StringIO()
    w = csv.DictWriter(out, PROTOCOL_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "figures.csv"
    p.write_text(out.getvalue(), encoding="utf-8")
    return p


@pytest.mark.parametrize("edit, expect", [
    (lambda rows: rows[2].update(metric="bytes"), r"line 4: field 'metric': expected one of"),
    (lambda rows: rows[0].update(setting="h100"), r"line 2: field 'setting': expected one of h20, edge"),
    (lambda rows: rows[1].update(low="0.6"), r"line 3: field 'high' \(0.57\) is below 'low' \(0.6\)"),
    (lambda rows: rows[1].update(low="abc"), r"line 3: field 'low': expected a number, got 'abc'"),
    (lambda rows: rows[1].update(low="nan"), r"line 3: field 'low': expected a finite number"),
    (lambda rows: rows[1].update(low="inf"), r"line 3: field 'low': expected a finite number, got 'inf'"),
    (lambda rows: rows[5].update(source=""), r"line 7: field 'source' is empty"),
    (lambda rows: rows[3].update(row_id=rows[1]["row_id"]), r"line 5: row_id 'tau2_memory_ratio' repeats line 3"),
    (lambda rows: rows.clear(), r"no figures"),
])
def test_bad_figures_fail_with_the_file_line_and_field(tmp_path, edit, expect):
    p = _write(tmp_path, edit)
    with pytest.raises(MeasurementError, match=expect) as e:
        load_protocol_figures(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_missing_column_and_missing_file(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("row_id,benchmark\nx,y\n", encoding="utf-8")
    with pytest.raises(MeasurementError, match="line 1: missing columns"):
        load_protocol_figures(p)
    with pytest.raises(MeasurementError, match="nope.csv"):
        load_protocol_figures(tmp_path / "nope.csv")
