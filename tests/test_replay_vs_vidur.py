"""benchmarks/replay_vs_vidur.py without Vidur: it skips with a message (so `make bench` runs anywhere), and the inputs
it gives both tools are what it says: one seeded trace both read alike, a Vidur profile from the H100 roofline."""

from __future__ import annotations

import importlib.util
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specagent.hardware.profile import load_hardware
from specagent.traces.requests import load_requests

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "replay_vs_vidur.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("replay_vs_vidur", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_without_vidur_it_says_so_and_exits_0():
    for argv in ([], ["--vidur-python", "/nonexistent/python"], ["--vidur-python", sys.executable]):
        r = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        assert "skipped" in r.stdout and "Traceback" not in r.stderr + r.stdout


def test_the_trace_is_seeded_and_specagent_reads_vidurs_columns(bench, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    bench.write_trace(a, 3000, 7.0)
    bench.write_trace(b, 3000, 7.0)
    assert a.read_bytes() == b.read_bytes()
    raw = pd.read_csv(a)
    assert list(raw.columns) == ["Date", "Time", "PromptTokenCount", "CompletionTokenCount"]  # Vidur 0.0.26's trace_replay
    tr = load_requests(a)
    assert np.array_equal(tr.prompt_tokens, raw["PromptTokenCount"]) and np.array_equal(tr.output_tokens, raw["CompletionTokenCount"])
    assert np.allclose(tr.arrival_s, raw["Time"])
    assert (tr.prompt_tokens + tr.output_tokens).max() <= bench.WINDOW
    assert tr.rate == pytest.approx(7.0, rel=0.05)


def test_vidurs_profile_is_the_h100_roofline_per_operator(bench, tmp_path):
    gpu = load_hardware("h100")
    bench.write_vidur_profile(tmp_path, gpu)
    snap = tmp_path / "profiling_data" / "compute" / f"datasets--{bench.COMPUTE_REPO.replace('/', '--')}" / "snapshots" / bench.SNAPSHOT
    with lzma.open(snap / "mlp.csv.xz", "rt") as f:
        mlp = pd.read_csv(f)
    with lzma.open(snap / "attention.csv.xz", "rt") as f:
        attn = pd.read_csv(f)
    big = mlp[mlp["num_tokens"] == 4096].iloc[0]  # compute-bound: 2 * tokens * 4096 * 2 * 14336 FLOPs at peak x MFU
    want = 1e3 * 2 * 4096 * 4096 * 2 * 14336 / (gpu.peak_tflops["bf16"].value * 1e12 * gpu.prefill_mfu.value)
    assert big["time_stats.mlp_up_proj.median"] == pytest.approx(want + 0.004, rel=1e-6)
    one = mlp[mlp["num_tokens"] == 1].iloc[0]  # memory-bound: the weights once at bandwidth x efficiency
    bw = gpu.memory_bandwidth_tb_s.value * 1e12 * gpu.bandwidth_efficiency.value
    assert one["time_stats.mlp_up_proj.median"] == pytest.approx(1e3 * 2 * (4096 * 2 * 14336 + 4096 + 2 * 14336) / bw + 0.004)
    dec = attn[attn["prefill_chunk_size"] == 0]
    t = dec.set_index(["batch_size", "kv_cache_size"])["time_stats.attn_decode.median"]
    assert t[(64, 2048)] > t[(8, 2048)] > t[(8, 256)]  # more sequences, longer caches: more KV read
    for col in ("n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers"):  # what Vidur filters on
        assert attn[col].nunique() == 1
