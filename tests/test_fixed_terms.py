"""The fixed costs are one list (`costmodel.latency.FIXED_TERMS`), and every consumer prices the same pass.

An engine profile with every optional term set non-zero (CUDA graphs off, so launches are
exposed on small passes and hidden on large ones) prices random ragged batches through
`estimate`, the fleet's `IterationCost` (and `decode_segment`), `DecodeRun` and the CLI's
`roofline --json`; all agree to 1e-9. A term added to the list reaches all of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib

import numpy as np
import pytest
import tomli_w
from typer.testing import CliRunner

from specagent.cli import app
from specagent.costmodel import latency, roofline
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.latency import FIXED_TERMS, FixedTerm, latency_terms
from specagent.costmodel.model_spec import load_model_spec
from specagent.costmodel.passes import GDN_CHUNK, Passes
from specagent.costmodel.phases import DecodeRun, decode
from specagent.costmodel.roofline import estimate
from specagent.hardware.profile import load_hardware
from specagent.hardware.serving_engine import load_engine, load_engine_file
from specagent.simulator.fleet.itercost import IterationCost

MODEL = "Qwen/Qwen3.5-35B-A3B"  # MoE + Gated DeltaNet + full attention: every layer kind and every collective


@pytest.fixture(scope="module")
def every_term(tmp_path_factory):
    """vLLM's profile with every optional term non-zero and CUDA graphs off; (profile, its .toml path)."""
    src = load_engine("vllm").path
    with open(src, "rb") as f:
        data = tomllib.load(f)
    data["id"], data["name"], data["aliases"] = "every-term", "every term", []
    data["cuda_graphs"]["decode"]["value"] = False
    data["cuda_graphs"]["mixed"]["value"] = False
    data.pop("hardware", None)  # no per-GPU overrides: the values below are the ones priced
    for section in ("per_pass", "per_layer_us", "collectives"):
        for key, item in data[section].items():
            if isinstance(item.get("value"), float):
                item["value"] = max(item["value"], 3.0)
    data["kernels"]["bandwidth_half_mb"]["value"] = 2.5  # the achieved-bandwidth ramp (vLLM's fit has none)
    data["kernels"]["weight_stream"] = {"value": 1.2, "source": "test"}  # the dense weight stream at its own rate
    data["per_pass"]["launch_us"]["value"] = 10.0  # launch-bound at batch 1, hidden under large prefills
    path = tmp_path_factory.mktemp("engines") / "every-term.toml"
    path.write_text(tomli_w.dumps(data))
    return load_engine_file(path), path


def _dep(engine, gpus=4):
    return Deployment(load_model_spec(MODEL), load_hardware("h200"), gpus=gpus, parallelism="tp+ep", serving_engine=engine)


def test_the_profile_really_sets_every_term(every_term):
    eng, _ = every_term
    lt = latency_terms(_dep(eng))
    for term in FIXED_TERMS:
        assert getattr(lt, term.attr) > 0, term.name
    assert lt.collective_latency_s > 0 and lt.moe_pad_tokens > 0 and lt.bandwidth_ramp_s > 0 and lt.weight_stream_s < 0
    assert lt.attention_mfu is not None and lt.moe_mfu is not None and not lt.cuda_graphs
    big = estimate(_dep(eng), Passes.uniform(16384, [0.0], 1))
    small = estimate(_dep(eng), Passes.uniform(1, [0.0], 1))
    assert small.fixed["launch"][0] > 0 and big.fixed["launch"][0] == 0  # both branches of the launch overlap are exercised
    for cost in (big, small):
        assert list(cost.fixed) == [t.name for t in FIXED_TERMS]
        assert cost.overhead_s[0] == pytest.approx(sum(float(v[0]) for v in cost.fixed.values()), rel=1e-15)


def _aggregates(new: np.ndarray, ctx: np.ndarray) -> tuple[float, ...]:
    n, c = new.astype(float), ctx.astype(float)
    return (n.sum(), float(len(n)), float((n == 1).sum()), float((n * c + n * (n + 1) / 2).sum()), float((c + n).sum()),
            float(sum(1 + (math.ceil(x / GDN_CHUNK) if x > 1 else 0) for x in new)), float(len(n)))


def test_estimate_iteration_cost_and_decode_run_agree(every_term):
    dep = _dep(every_term[0])
    ic = IterationCost(dep)
    rng = np.random.default_rng(25)
    launch_bound = 0
    for i in range(40):
        b = int(rng.integers(1, 48))
        new = np.where(rng.random(b) < (0.4 if i % 2 else 1.0), 1, rng.integers(2, 2000, b))
        ctx = rng.integers(0, 20_000, b)
        ref = estimate(dep, Passes.from_batches([list(zip(new.tolist(), ctx.tolist()))]))
        launch_bound += bool(ref.fixed["launch"][0] > 0)
        assert ic.one(*_aggregates(new, ctx))[0] == pytest.approx(float(ref.time_s[0]), rel=1e-9)
    assert 0 < launch_bound < 40
    for batch, k in ((1, 30), (16, 20)):
        ctx = rng.integers(100, 5000, batch).astype(float)
        ref = estimate(dep, Passes.from_batches([list(zip([1] * batch, (ctx + j).tolist())) for j in range(k)]))
        assert ic.decode_segment(batch, float(ctx.sum())).totals(k).time_s == pytest.approx(float(ref.time_s.sum()), rel=1e-9)
    run = DecodeRun(dep)
    for c0, m in ((0, 1), (7, 300), (30_000, 50)):
        ref = decode(dep, c0 + np.arange(m, dtype=float), 1)
        assert float(run.totals(np.array([c0], float), np.array([m], float))["time_s"][0]) == pytest.approx(float(ref.time_s.sum()), rel=1e-9)


def test_roofline_json_prices_the_same_pass(every_term):
    eng, path = every_term
    dep = _dep(eng)
    for batch, context in ((1, 100), (32, 8192)):
        r = CliRunner().invoke(app, ["roofline", "--json", "--model", MODEL, "--hardware", "h200", "--gpus", "4",
                                     "--parallelism", "tp+ep", "--weight-dtype", "bf16", "--serving-engine", str(path),
                                     "--batch", str(batch), "--context", str(context)])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        ref = decode(dep, np.array([float(context)]), batch)
        assert out["time_s"] == pytest.approx(float(ref.time_s[0]), rel=1e-9)
        for term in FIXED_TERMS:
            assert out[f"fixed_{term.name}_s"] == pytest.approx(float(ref.fixed[term.name][0]), rel=1e-9)
        assert out["overhead_s"] == pytest.approx(sum(out[f"fixed_{t.name}_s"] for t in FIXED_TERMS), rel=1e-12)


def test_a_term_added_to_the_list_reaches_every_consumer(every_term, monkeypatch):
    """The trap the maintainer review found (a term in `overhead_s` but not `time_s`) cannot recur."""
    dep = _dep(every_term[0])
    passes = Passes.from_batches([[(1, 500), (1, 900), (300, 2000)]])
    before, run_before = float(estimate(dep, passes).time_s[0]), DecodeRun(dep).totals(np.array([10.0]), np.array([100.0]))["time_s"][0]
    ic_before = IterationCost(dep).one(*_aggregates(np.array([1, 1, 300]), np.array([500, 900, 2000])))[0]
    # a second per-sequence CPU term and a second GPU-side term, priced from existing coefficients
    extra = (FixedTerm("extra_cpu", "test", "per_sequence_s", "seqs", "cpu", "extra cpu"),
             FixedTerm("extra_gpu", "test", "layers_s", "pass", "gpu", "extra gpu"))
    terms = (*FIXED_TERMS[:-1], *extra, FIXED_TERMS[-1])
    for mod in (latency, roofline):
        monkeypatch.setattr(mod, "FIXED_TERMS", terms)
        monkeypatch.setattr(mod, "CPU_TERMS", tuple(t.name for t in terms if t.enters == "cpu"))
        monkeypatch.setattr(mod, "GPU_TERMS", tuple(t.name for t in terms if t.enters == "gpu"))
    lt = latency_terms(dep)
    added = 3 * lt.per_sequence_s + lt.layers_s
    after = estimate(dep, passes)
    assert float(after.fixed["extra_cpu"][0]) == pytest.approx(3 * lt.per_sequence_s, rel=1e-12)
    assert float(after.fixed["launch"][0]) == 0.0  # launches hidden under this pass's GPU time: the terms add plainly
    assert float(after.time_s[0]) - before == pytest.approx(added, rel=1e-9)
    ic = IterationCost(dep).one(*_aggregates(np.array([1, 1, 300]), np.array([500, 900, 2000])))[0]
    assert ic - ic_before == pytest.approx(added, rel=1e-9)
    run = DecodeRun(dep).totals(np.array([10.0]), np.array([100.0]))["time_s"][0]
    ref = decode(dep, 10 + np.arange(100, dtype=float), 1)
    assert run == pytest.approx(float(ref.time_s.sum()), rel=1e-9) and run > run_before
    assert dataclasses.is_dataclass(after) and "fixed_extra_cpu_s" in after.to_frame().columns
