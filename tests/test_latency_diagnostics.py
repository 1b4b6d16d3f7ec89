"""benchmarks/latency_diagnostics.py: the CUDA-graph bucket rule, the within-source batch-growth shape, bad input."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("latency_diagnostics", ROOT / "benchmarks" / "latency_diagnostics.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["latency_diagnostics"] = mod
    spec.loader.exec_module(mod)
    return mod


diag = _module()


@pytest.mark.parametrize("batch,graph", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16), (17, 24), (32, 32),
                                         (50, 56), (100, 104), (255, 256), (256, 256)])
def test_a_decode_batch_replays_the_next_captured_graph(batch: int, graph: int):
    """SGLang [1, 2, 4, 8] + range(16, 161, 8) (+ multiples of 8 to 256) and vLLM [1, 2, 4] + range(8, ., 8) agree here."""
    assert diag.padded_batch(batch) == graph


def _row(c: float, measured: float, predicted: float, **kw) -> dict:
    r = dict(row_id=f"r{c}", source="s", model="m", gpu="h100_sxm", gpus="1", engine="vllm", metric="tpot", concurrency=str(c),
             batch=str(int(c)), input_tokens="100", output_tokens="10", measured=str(measured), predicted=str(predicted),
             error=str(predicted / measured - 1))
    r.update(kw)
    return r


def test_shape_is_predicted_growth_over_measured_growth_and_a_source_offset_cancels():
    # measured TPOT doubles from C=1 to C=64, predicted stays flat: shape 0.5, whatever constant factor the source has
    rows = [_row(1, 10.0, 30.0), _row(64, 20.0, 30.0), _row(64, 5.0, 5.0, metric="ttft")]
    (s,) = diag.shapes(rows)
    assert (s["c0"], s["c"]) == (1.0, 64.0)
    assert s["measured_growth"] == pytest.approx(2.0) and s["predicted_growth"] == pytest.approx(1.0)
    assert s["shape"] == pytest.approx(0.5)
    # a setup measured at one load has no shape; another source's rows are a separate setup
    assert diag.shapes([_row(1, 10.0, 10.0), _row(8, 10.0, 10.0, source="t")]) == []


def test_padding_bound_prices_the_padded_batch_no_cheaper_than_the_batch(tmp_path: Path):
    rows = [_row(50, 59.73, 50.0, row_id="nim-l33-70b-5000-500-c50"), _row(32, 1.0, 1.0, row_id="not-in-the-dataset")]
    (p,) = diag.padding_bounds(rows)
    assert (p["batch"], p["padded"]) == (50, 56)
    assert 1.0 < p["step_ratio_upper_bound"] < 56 / 50  # more rows cost more, but less than proportionally (weights are shared)


def test_a_file_without_the_validate_columns_is_one_line_naming_it(tmp_path: Path, capsys):
    bad = tmp_path / "rows.csv"
    bad.write_text("a,b\n1,2\n")
    assert diag.main(["--rows", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad}: line 1: expected the columns of `latency validate --rows`") and "\n" not in err
    assert diag.main(["--rows", str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
