"""`latency validate`'s same-source model pairs: the per-token time ratio of two models, predicted against measured."""

from __future__ import annotations

import dataclasses

import pytest

from specagent.costmodel.latency_targets import targets_from_rows
from specagent.costmodel.latency_validation import PAIR_TOLERANCE, validate
from specagent.measurements import default_path, load_serving


@pytest.fixture(scope="module")
def pairs():
    targets, skipped = targets_from_rows(load_serving(default_path("serving_latency.csv")))
    val = validate(targets, skipped, held_out=False)
    return val, val.model_pairs()


def test_pairs_share_source_gpu_engine_lengths_and_load(pairs):
    val, ps = pairs
    assert ps, "the shipped measurements hold same-source model pairs"
    by_label = {}
    for t, p in zip(val.targets, val.predicted):
        alone = t.batch == 1 and t.concurrency <= 1 and t.output_tokens > 0
        per_token = {"tpot": (t.measured, float(p)),
                     "e2e": (t.measured / t.output_tokens, float(p) / t.output_tokens) if alone else None,
                     "throughput": (1 / t.measured, 1 / float(p)) if alone else None}.get(t.metric)
        if per_token:
            by_label.setdefault((t.row.source, t.row.gpu, t.concurrency, t.input_tokens, t.output_tokens,
                                 f"{t.row.model} ({t.row.gpus}x {t.row.weight_dtype})"), []).append(per_token)
    for p in ps:
        assert p["faster"].split(" ")[0] != p["slower"].split(" ")[0]
        assert 0 < p["measured_ratio"] <= 1  # faster over slower, as measured
        key = (p["source"], p["gpu"], p["concurrency"], p["input_tokens"], p["output_tokens"])
        (mf, pf), = by_label[(*key, p["faster"])]
        (ms, ps_), = by_label[(*key, p["slower"])]
        assert p["measured_ratio"] == pytest.approx(mf / ms, rel=1e-12)
        assert p["predicted_ratio"] == pytest.approx(pf / ps_, rel=1e-12)
        assert p["within"] == (abs(p["predicted_ratio"] / p["measured_ratio"] - 1) <= PAIR_TOLERANCE)


def test_the_default_models_and_the_h20_rows_are_among_the_pairs(pairs):
    _, ps = pairs
    assert any(p["faster"].startswith("Qwen/Qwen3.5-4B ") and "397B" in p["slower"] for p in ps)
    assert any(p["gpu"] == "h20" for p in ps)  # the Qwen3 Speed Benchmark's batch-1 end-to-end times


def test_recorded_ssm_dtype_flag_prices_a_bfloat16_state():
    """A row whose recorded server flags say `--mamba-ssm-dtype bfloat16` is priced with half the float32 state bytes;
    one without the flag keeps the configs' float32 state (sglang#32323's H200 FP8 cells ran the flag)."""
    from specagent.costmodel.latency_targets import state_dtype_of

    rows = {r.row_id: r for r in load_serving(default_path("serving_latency.csv"))}
    flagged, plain = rows["sgl32323-h200-35b-fp8-c100"], rows["sgl32323-h200-35b-bf16-c100"]
    assert "--mamba-ssm-dtype bfloat16" in flagged.notes and "--mamba-ssm-dtype" not in plain.notes
    assert (state_dtype_of(flagged), state_dtype_of(plain)) == ("bf16", "fp32")
    (t_flagged, *_), _ = targets_from_rows([flagged])
    (t_plain, *_), _ = targets_from_rows([dataclasses.replace(flagged, notes="")])  # the same row without its flags
    assert t_flagged.dep.state_dtype == "bf16"
    m = t_flagged.dep.model
    fp32 = m.state_bytes_per_sequence(4.0, 2.0)
    assert t_flagged.dep.state_bytes_per_sequence() == pytest.approx(m.state_bytes_per_sequence(2.0, 2.0))
    assert t_flagged.dep.state_bytes_per_sequence() < 0.6 * fp32
    assert t_plain.dep.state_dtype == "fp32"
