"""Public measurements: the loader's checks, how a row becomes passes, and a fit that can fail."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from specagent.costmodel import latency_fit as lf
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import estimate
from specagent.hardware.engine import load_engine
from specagent.hardware.profile import load_hardware
from specagent.measurements import SERVING_COLUMNS, MeasurementError, load_collectives, load_serving

BASE = dict(model="Qwen/Qwen3-8B", gpu="h100_sxm", gpus="1", tp="1", engine="vllm", engine_version="0.11", weight_dtype="bf16",
            source="test/source", source_url="https://example.org/x", source_locator="table 1", retrieved="2026-12-01", notes="")


def _csv(tmp_path: Path, rows: list[dict], name: str = "serving.csv") -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SERVING_COLUMNS)
    w.writeheader()
    for i, r in enumerate(rows):
        w.writerow({c: "" for c in SERVING_COLUMNS} | BASE | {"row_id": f"r{i}"} | {k: str(v) for k, v in r.items()})
    p = tmp_path / name
    p.write_text(buf.getvalue(), encoding="utf-8")
    return p


# ------------------------------------------------------------------------- the loader
def test_shipped_measurements_load_and_every_row_has_a_source():
    rows = load_serving()
    assert len(rows) >= 60
    assert all(r.source and r.source_url and r.source_locator for r in rows)
    assert len({r.row_id for r in rows}) == len(rows)
    assert {r.gpu for r in rows} >= {"h100_sxm", "h200_sxm", "a100_80gb_sxm"}
    assert load_collectives()


def test_loader_errors_name_file_line_and_field(tmp_path: Path):
    p = _csv(tmp_path, [dict(concurrency=1, input_tokens=100, output_tokens=100, tpot_ms=5), dict(source="", tpot_ms=3)])
    with pytest.raises(MeasurementError, match=r"serving\.csv: line 3: field 'source' is empty"):
        load_serving(p)
    p = _csv(tmp_path, [dict(tpot_ms="fast")])
    with pytest.raises(MeasurementError, match=r"line 2: field 'tpot_ms': expected a number, got 'fast'"):
        load_serving(p)
    p = _csv(tmp_path, [dict(concurrency=4)])
    with pytest.raises(MeasurementError, match=r"line 2: no latency or throughput figure"):
        load_serving(p)
    p = _csv(tmp_path, [dict(tpot_ms=1, row_id="a"), dict(tpot_ms=2, row_id="a")])
    p.write_text(p.read_text().replace("r0,", "a,", 1).replace("r1,", "a,", 1))
    with pytest.raises(MeasurementError, match=r"line 3: row_id 'a' repeats line 2"):
        load_serving(p)
    bad = tmp_path / "cols.csv"
    bad.write_text("row_id,model\nx,y\n")
    with pytest.raises(MeasurementError, match=r"cols\.csv: line 1: missing columns"):
        load_serving(bad)


# ------------------------------------------------------------------------- rows -> passes
def test_rows_the_model_cannot_describe_are_skipped_with_the_reason(tmp_path: Path):
    rows = load_serving(_csv(tmp_path, [
        dict(model="acme/Unknown-7B", concurrency=1, input_tokens=10, output_tokens=10, tpot_ms=5),
        dict(weight_dtype="nvfp4", concurrency=1, input_tokens=10, output_tokens=10, tpot_ms=5),
        dict(engine="acme-serve", concurrency=1, input_tokens=10, output_tokens=10, tpot_ms=5),
        dict(input_tokens=10, output_tokens=10, tpot_ms=5),  # no concurrency: a burst run
        dict(concurrency=4, tpot_ms=5),  # no lengths
        dict(gpu="tpu-v9", concurrency=1, input_tokens=10, output_tokens=10, tpot_ms=5),
    ]))
    targets, skipped = lf.targets_from_rows(rows)
    assert not targets
    reasons = [s.reason for s in skipped]
    assert "model not describable" in reasons[0] and "nvfp4" in reasons[1] and "'acme-serve'" in reasons[2]
    assert "burst" in reasons[3] and "length" in reasons[4] and "tpu-v9" in reasons[5]


def test_sglang_random_dataset_without_range_ratio_means_half_the_nominal_lengths(tmp_path: Path):
    rows = load_serving(_csv(tmp_path, [
        dict(concurrency=1, input_tokens=8192, output_tokens=1024, tpot_ms=5, notes="sglang.bench_serving --dataset-name random"),
        dict(concurrency=1, input_tokens=8192, output_tokens=1024, tpot_ms=5,
             notes="sglang.bench_serving --dataset-name random --random-range-ratio 1"),
    ]))
    assert lf.mean_lengths(rows[0]) == (4096.5, 512.0)
    assert lf.mean_lengths(rows[1]) == (8192, 1024)


def test_static_batch_end_to_end_is_one_prefill_and_the_decode_steps(tmp_path: Path):
    rows = load_serving(_csv(tmp_path, [dict(batch=4, input_tokens=128, output_tokens=64, e2e_latency_ms=1000)]))
    (t,), _ = lf.targets_from_rows(rows)
    assert t.metric == "e2e" and t.batch == 4
    dep = Deployment(load_model_spec("Qwen/Qwen3-8B"), load_hardware("h100_sxm"), engine=load_engine("vllm"))
    want = estimate(dep, Passes.uniform(128, 0, 4)).time_s[0] + estimate(dep, Passes.uniform(1, 128 + np.arange(1, 64.0), 4)).time_s.sum()
    assert lf.predict([t])[0] == pytest.approx(want, rel=1e-12)


def test_queued_rows_are_skipped_with_the_reason_and_nim_runs_tensorrt_llm(tmp_path: Path):
    rows = load_serving(_csv(tmp_path, [
        dict(concurrency=100, input_tokens=1000, output_tokens=100, tpot_ms=30, ttft_ms=9000, notes="x; [queued] mean TTFT >10x"),
        dict(engine="nim", concurrency=1, input_tokens=1000, output_tokens=100, tpot_ms=9),
    ]))
    targets, skipped = lf.targets_from_rows(rows)
    assert [s.row.row_id for s in skipped] == ["r0"] and skipped[0].reason.startswith("[queued]: ")
    assert "running batch" in skipped[0].reason
    assert [t.dep.engine.id for t in targets] == ["tensorrt-llm"]


def test_closed_loop_at_concurrency_one_is_a_decode_step_and_a_prefill(tmp_path: Path):
    rows = load_serving(_csv(tmp_path, [dict(concurrency=1, input_tokens=1000, output_tokens=200, tpot_ms=10, ttft_ms=50)]))
    targets, _ = lf.targets_from_rows(rows)
    dep = targets[0].dep
    d = estimate(dep, Passes.uniform(1, 1000 + 100, 1)).time_s[0]
    p = estimate(dep, Passes.uniform(1000, 0, 1)).time_s[0]
    got = lf.predict(targets)
    # nothing else runs: TPOT is one decode step, TTFT the request overhead plus the prefill, nothing to wait for
    assert got[0] == pytest.approx(d, rel=1e-12)
    assert got[1] == pytest.approx(float(dep.engine.request_us.value) * 1e-6 + p, rel=1e-12)


def test_closed_loop_tpot_and_ttft_satisfy_their_defining_equations(tmp_path: Path):
    """At concurrency 8 the prediction is the fixed point of the closed loop, checked equation by equation."""
    rows = load_serving(_csv(tmp_path, [dict(concurrency=8, input_tokens=1000, output_tokens=200, tpot_ms=10, ttft_ms=50)]))
    targets, _ = lf.targets_from_rows(rows)
    tpot, ttft = lf.predict(targets)
    dep = targets[0].dep
    d = estimate(dep, Passes.uniform(1, 1000 + 100, 8)).time_s[0]
    p = estimate(dep, Passes.uniform(1000, 0, 1)).time_s[0]
    req = float(dep.engine.request_us.value) * 1e-6
    life = ttft + 199 * tpot
    lam = 7 / life  # the other 7 clients start a request whenever one of theirs ends
    rho = lam * p
    assert tpot * (1 - rho) == pytest.approx(d, rel=1e-9)  # decode steps fill what the others' prefills leave
    busy = 1 - (1 - 199 * tpot / life) ** 7
    resid = busy * ((1 - rho) * d / 2 + rho * p / 2)
    assert ttft == pytest.approx(req + resid + p * (1 + lam * resid), rel=1e-6)
    # the stalls are real but bounded: slower than one decode step, faster than a step plus a whole prefill
    assert d < tpot < d + p and req + p < ttft < req + 2 * p + d
    # an output throughput row of the same run is B x O over the lifetime
    rows = load_serving(_csv(tmp_path, [dict(concurrency=8, input_tokens=1000, output_tokens=200, output_throughput_tok_s=500)]))
    (thr,), _ = lf.targets_from_rows(rows)
    assert lf.predict([thr])[0] == pytest.approx(8 * 200 / life, rel=1e-6)


# ------------------------------------------------------------------------- the fit can fail
def _synthetic(tmp_path: Path, scale_source: str | None = None, factor: float = 1.0):
    """Rows whose 'measurements' are the model's own predictions under known coefficients (two sources)."""
    truth = [0.65, 20.0]
    params = [lf.Param("bandwidth", "bandwidth", 0.72, 0.3, 1.0, "test"), lf.Param("layer_us", "layer_us.*", 16.0, 0.0, 300.0, "test")]
    spec = [dict(source=f"src{s}", concurrency=c, input_tokens=i, output_tokens=256, tpot_ms=1.0, model=m)
            for s, (m, i) in enumerate((("Qwen/Qwen3-8B", 512), ("Qwen/Qwen3-14B", 2048)))
            for c in (1, 4, 16)]
    rows = load_serving(_csv(tmp_path, spec, "synthetic.csv"))
    targets, _ = lf.targets_from_rows(rows)
    engine_for = lf.fitted_engine_for(lf.FitResult(params, np.array(truth), 0, [], 0.0, True, ""))
    pred = lf.predict(targets, engine_for)
    out = []
    for t, v in zip(targets, pred):
        f = factor if t.row.source == scale_source else 1.0
        out.append(lf.Target(t.row, t.metric, float(v) * f, t.dep, t.concurrency, t.batch, t.input_tokens, t.output_tokens, t.key))
    return out, params, truth


def test_fit_recovers_known_coefficients_and_a_factor_of_two_error_is_caught(tmp_path: Path):
    targets, params, truth = _synthetic(tmp_path)
    res = lf.fit(targets, params, max_nfev=60, prior_scale=100.0)  # a negligible prior: the data alone
    assert res.values == pytest.approx(truth, rel=0.02)
    good = lf.validate(targets, held_out=True, params=params, prior_scale=100.0)
    assert float(np.max(np.abs(good.errors))) < 0.02
    assert good.targets_met()["tpot_c<=16"]["met"] is True
    # one source measured twice as slow as the model says: its held-out rows are caught ~50% off
    bad_targets, _, _ = _synthetic(tmp_path, scale_source="src1", factor=2.0)
    bad = lf.validate(bad_targets, held_out=True, params=params, prior_scale=100.0)
    off = [abs(e) for t, e in zip(bad.targets, bad.errors) if t.row.source == "src1"]
    assert min(off) > 0.3
    assert bad.targets_met()["tpot_c<=16"]["met"] is False


def test_shipped_all_reduce_alpha_is_the_fit_on_collectives_csv():
    """SGLang's and TensorRT-LLM's alpha is the least-squares alpha of their custom all-reduce on 8x H100 (collectives.csv)."""
    alpha, beta, n = lf.collective_alpha(load_collectives(), "all_reduce", "custom", "h100_sxm", 8)
    assert n >= 4 and 0 < alpha < 20
    for name in ("sglang", "tensorrt-llm"):
        assert load_engine(name).allreduce_alpha_us.value == pytest.approx(round(alpha, 1), abs=0.05)
    with pytest.raises(ValueError, match="need two or more"):
        lf.collective_alpha(load_collectives(), "all_reduce", "custom", "b200", 8)
