"""`specagent replay` against Vidur on the same request trace, each tool as its own whole process (issue #34 item 6).

    .venv/bin/python benchmarks/replay_vs_vidur.py --vidur-python /path/to/vidur-venv/bin/python
        [--requests 10000,100000] [--repeat 3] [--workdir DIR]

Vidur (microsoft/vidur, PyPI `vidur==0.0.26`) goes in a venv of its own, never the project's: its dependencies
(wandb, streamlit, scikit-learn, ...) are not specagent's. Without --vidur-python (or $VIDUR_PYTHON) the script says
so and exits 0, so `make bench` runs on a machine without Vidur.

What both tools are given:
- one seeded synthetic trace (Poisson arrivals; geometric prompt and output lengths of mean 512 and 128 tokens, a
  request at most 4,096 tokens: Vidur's Llama-3-8B window) in Vidur 0.0.26's trace-replay layout (Date, Time,
  PromptTokenCount, CompletionTokenCount; specagent reads the same columns), at half of specagent's analytic capacity
  of the replica;
- Llama-3-8B (Vidur's built-in `meta-llama/Llama-3-8B`; specagent the shipped Llama-3.1-8B config.json, the same
  layers, heads and widths) in bf16 on one H100 SXM, one replica;
- the same scheduler limits: at most 128 sequences and 4,096 tokens per iteration (Vidur's `vllm` scheduler,
  specagent's `--max-seqs/--max-tokens`).

What differs: Vidur prices each operator from a kernel profile it fits a model to (its default random forest,
here one point of its grid); its shipped profiles (a HuggingFace dataset, Git LFS files in its repository) cannot be fetched offline,
so this script writes one in Vidur's profile layout from a per-operator roofline on specagent's H100 profile (peak
bf16, bandwidth and their sourced efficiencies): not a measurement. specagent prices whole passes from its own
roofline and serving-engine terms. Vidur's `vllm` scheduler runs prefills in batches of their own; specagent's
engine mixes prefill chunks with decodes. The mean E2E/TTFT lines are a sanity check that both served the same
load, not an accuracy comparison.

Vidur runs with wandb off (WANDB_MODE=disabled, no project), no plots, no Chrome or JSON trace, no batch or utilisation
metrics; its per-request metrics stay on (the counterpart of replay's printed figures; Vidur then also writes a CSV per
request metric beside request_metrics.csv, 91 MB at 10^5 requests; with them off a 10^4 run took 13.8 s against 14.8 s,
within this machine's noise); its fitted predictions
are cached in --workdir by one untimed warm-up run, so the timed runs load them as a user's second run does.
Wall and CPU time per run via os.wait4 (the child's own usage), best of --repeat; the ratio is Vidur's over
specagent's.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SPECAGENT = str(Path(sys.executable).with_name("specagent"))
GOAL = 50.0
SEED = 0
MAX_SEQS = 128
MAX_TOKENS = 4096
WINDOW = 4096  # Vidur's Llama-3-8B max_model_len
VIDUR_MODEL = "meta-llama/Llama-3-8B"
SPECAGENT_MODEL = "meta-llama/Llama-3.1-8B"
# Llama-3-8B's shape (Vidur's Llama38BModelConfig; the shipped Llama-3.1-8B config.json has the same)
H, QH, KVH, HD, FFN, VOCAB = 4096, 32, 8, 128, 14336, 128256
COMPUTE_REPO = "bench/roofline-llama-3-8b-h100"
NETWORK_REPO = "bench/roofline-h100-dgx"
SNAPSHOT = "0" * 40


def write_trace(path: Path, n: int, rate: float) -> None:
    """Vidur 0.0.26's trace-replay CSV (Date, Time, PromptTokenCount, CompletionTokenCount), seeded."""
    rng = np.random.default_rng([SEED, n])
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    arrivals -= arrivals[0]
    out = np.minimum(rng.geometric(1 / 128, n), 1024)
    prompt = np.minimum(rng.geometric(1 / 512, n), WINDOW - out)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Date", "Time", "PromptTokenCount", "CompletionTokenCount"])
        for t, p, o in zip(arrivals, prompt, out):
            w.writerow(["2023-08-21", f"{t:.6f}", int(p), int(o)])


def _roofline_ms(flops, nbytes, gpu) -> np.ndarray:
    """max(compute, memory) of one operator in ms at the profile's peak bf16 and bandwidth times their efficiencies."""
    peak = gpu.peak_tflops["bf16"].value * 1e12 * gpu.prefill_mfu.value
    bw = gpu.memory_bandwidth_tb_s.value * 1e12 * gpu.bandwidth_efficiency.value
    return 1e3 * np.maximum(np.asarray(flops, float) / peak, np.asarray(nbytes, float) / bw) + 0.004  # 4 us a launch


def write_vidur_profile(cache: Path, gpu) -> None:
    """Vidur's compute and network profiles in the HuggingFace-cache layout under Vidur's cache_dir (with
    HF_HUB_OFFLINE=1 its snapshot_download returns them without a network)."""
    tok = np.unique(np.concatenate([np.arange(1, 129), np.arange(128, WINDOW + 1, 32)]))
    gemm = {"attn_pre_proj": (H, (QH + 2 * KVH) * HD), "attn_post_proj": (QH * HD, H), "mlp_up_proj": (H, 2 * FFN),
            "mlp_down_proj": (FFN, H)}
    mlp = {"n_head": QH, "n_kv_head": KVH, "n_embd": H, "n_expanded_embd": FFN, "vocab_size": VOCAB,
           "use_gated_mlp": True, "num_tokens": tok, "num_tensor_parallel_workers": 1}
    for name, (k, m) in gemm.items():
        mlp[f"time_stats.{name}.median"] = _roofline_ms(2 * tok * k * m, 2 * (k * m + tok * (k + m)), gpu)
    for name, width in (("mlp_act", 3 * FFN), ("input_layernorm", 2 * H), ("post_attention_layernorm", 2 * H),
                        ("attn_rope", 2 * (QH + KVH) * HD), ("add", 3 * H)):
        mlp[f"time_stats.{name}.median"] = _roofline_ms(0, 2 * tok * width, gpu)
    rows = []
    kv_bytes = 2 * 2 * KVH * HD  # K and V, bf16, per token
    for kv in range(0, WINDOW + 1, 256):
        for c in range(32, WINDOW - kv + 1, 32):  # prefill chunks over a cache of kv tokens
            t = _roofline_ms(4 * c * (kv + c / 2) * HD * QH, kv_bytes * (kv + c) + 2 * 2 * c * QH * HD, gpu)
            rows.append((1, c, kv, float(t), np.nan, float(_roofline_ms(0, kv_bytes * c, gpu))))
        for b in range(1, MAX_SEQS + 1):  # decode: b sequences of kv cached tokens each
            t = _roofline_ms(4 * b * max(kv, 1) * HD * QH, b * (kv_bytes * max(kv, 1) + 4 * QH * HD), gpu)
            rows.append((b, 0, kv, np.nan, float(t), float(_roofline_ms(0, kv_bytes * b, gpu))))
    attn = np.array(rows)
    import pandas as pd

    def put(kind: str, repo: str, config: dict, frames: dict) -> None:
        snap = cache / "profiling_data" / kind / f"datasets--{repo.replace('/', '--')}"  # where Vidur's snapshot_download looks
        (snap / "refs").mkdir(parents=True, exist_ok=True)
        (snap / "refs" / "main").write_text(SNAPSHOT)
        d = snap / "snapshots" / SNAPSHOT
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(config))
        for name, frame in frames.items():
            with lzma.open(d / f"{name}.csv.xz", "wt") as f:
                frame.to_csv(f, index=False)

    attention = pd.DataFrame({"n_embd": H, "n_q_head": QH, "n_kv_head": KVH, "block_size": 16, "num_tensor_parallel_workers": 1,
                              "batch_size": attn[:, 0].astype(int), "prefill_chunk_size": attn[:, 1].astype(int),
                              "kv_cache_size": attn[:, 2].astype(int), "time_stats.attn_prefill.median": attn[:, 3],
                              "time_stats.attn_decode.median": attn[:, 4], "time_stats.attn_kv_cache_save.median": attn[:, 5]})
    put("compute", COMPUTE_REPO, {"model": VIDUR_MODEL, "device_sku": "h100"}, {"mlp": pd.DataFrame(mlp), "attention": attention})
    # one replica on one GPU moves nothing between GPUs: Vidur reads these files' names only
    net = pd.DataFrame({"size": [1024], "num_workers": [2], "devices_per_node": [2], "collective": ["all_reduce"],
                        "time_stats.all_reduce.median": [0.01]})
    put("network", NETWORK_REPO, {"sku": "h100_dgx"}, {"all_reduce": net, "send_recv": net.assign(collective="send_recv")})


def vidur_cmd(python: str, trace: Path, out: Path, cache: Path) -> list[str]:
    p = "--random_forrest_execution_time_predictor_config_"
    return [python, "-m", "vidur.main", "--seed", str(SEED), "--log_level", "warning",
            "--cluster_config_num_replicas", "1", "--replica_config_model_name", VIDUR_MODEL,
            "--replica_config_device", "h100", "--replica_config_network_device", "h100_dgx",
            "--replica_config_tensor_parallel_size", "1", "--replica_config_num_pipeline_stages", "1",
            "--replica_scheduler_config_type", "vllm", "--vllm_scheduler_config_batch_size_cap", str(MAX_SEQS),
            "--vllm_scheduler_config_max_tokens_in_batch", str(MAX_TOKENS),
            "--request_generator_config_type", "trace_replay", "--trace_request_generator_config_trace_file", str(trace),
            "--trace_request_generator_config_max_tokens", str(WINDOW),
            "--trace_request_generator_config_prefill_scale_factor", "1",
            "--trace_request_generator_config_decode_scale_factor", "1",
            "--trace_request_generator_config_time_scale_factor", "1",
            "--execution_time_predictor_config_type", "random_forrest",  # Vidur's default (0.0.26's linear one is abstract)
            # one point of the fit's grid search, 2 folds: only the untimed warm-up fits; the timed runs read the cache
            p + "num_estimators", "50", p + "max_depth", "32", p + "min_samples_split", "2", p + "k_fold_cv_splits", "2",
            p + "model_profiling_dataset", COMPUTE_REPO, p + "network_profiling_dataset", NETWORK_REPO,
            p + "cache_dir", str(cache), p + "prediction_max_tokens_per_request", str(WINDOW),
            p + "prediction_max_batch_size", str(MAX_SEQS), p + "prediction_max_prefill_chunk_size", str(MAX_TOKENS),
            "--metrics_config_output_dir", str(out), "--no-metrics_config_write_json_trace",
            "--no-metrics_config_enable_chrome_trace", "--no-metrics_config_store_plots",
            "--no-metrics_config_save_table_to_wandb", "--no-metrics_config_store_batch_metrics",
            "--no-metrics_config_store_utilization_metrics", "--metrics_config_store_request_metrics"]


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, str, float]:
    """(wall seconds, stdout, CPU seconds) of one command in its own process (os.wait4: the child's own usage); exits
    naming the command if it fails. On a shared machine wall time grows with others' load, CPU time much less."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd,
                                env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{Path(cmd[0]).name} {' '.join(cmd[1:4])} ... failed:\n{err.read().decode()[-3000:]}")
        return dt, out.read().decode(), usage.ru_utime + usage.ru_stime


def vidur_means(out: Path) -> tuple[float, float, int]:
    """(mean E2E s, mean TTFT ms, requests) from the newest request_metrics.csv Vidur wrote under out."""
    import pandas as pd

    files = sorted(glob.glob(str(out / "**" / "request_metrics.csv"), recursive=True), key=os.path.getmtime)
    if not files:
        raise SystemExit(f"Vidur wrote no request_metrics.csv under {out}")
    df = pd.read_csv(files[-1])
    ttft = "prefill_e2e_time" if "prefill_e2e_time" in df else "request_ttft"
    return float(df["request_e2e_time"].mean()), 1e3 * float(df[ttft].mean()), len(df)


def capacity_rate() -> float:
    """Half of specagent's analytic request capacity of one replica on a probe of the trace's length mix."""
    from specagent.simulator.capacity.bounds import pool_capacity, pool_work
    from specagent.simulator.capacity.fleet_build import request_tasks
    from specagent.simulator.fleet.config import STRONG_POOL, Scheduler
    from specagent.simulator.scenario import Scenario
    from specagent.traces.requests import load_requests

    with tempfile.TemporaryDirectory() as d:
        write_trace(Path(d) / "probe.csv", 2000, 1.0)
        probe = request_tasks(load_requests(Path(d) / "probe.csv"))
    from dataclasses import replace

    sc = Scenario()
    dep = replace(sc.strong, model=SPECAGENT_MODEL, weight_dtype="bf16", hardware="h100", gpus=1).build()
    cap = pool_capacity(dep, Scheduler(MAX_SEQS, MAX_TOKENS, "bench"), pool_work(probe, STRONG_POOL), sc.weight_mode)
    return 0.5 * cap.tasks_per_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vidur-python", default=os.environ.get("VIDUR_PYTHON"),
                    help="a Python with vidur==0.0.26 installed (default: $VIDUR_PYTHON)")
    ap.add_argument("--requests", default="10000,100000", help="trace sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool and size; the best is reported")
    ap.add_argument("--workdir", type=Path, default=None, help="traces, Vidur's profile and cache (default: a temp dir)")
    args = ap.parse_args()
    try:
        sizes = [int(s) for s in args.requests.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--requests: expected whole numbers separated by commas, got {args.requests!r}")
    if not sizes or min(sizes) < 1 or args.repeat < 1:
        ap.error("--requests needs sizes >= 1 and --repeat >= 1")
    if not args.vidur_python:
        print("replay_vs_vidur: Vidur is not installed here (pass --vidur-python PATH or set VIDUR_PYTHON to a Python with "
              "vidur==0.0.26, e.g. `python3 -m venv V && V/bin/pip install vidur==0.0.26`); skipped")
        return 0
    try:
        probe = subprocess.run([args.vidur_python, "-c", "import vidur.main"], capture_output=True, text=True)
        problem = (probe.stderr.strip().splitlines() or ["?"])[-1] if probe.returncode != 0 else ""
    except OSError as exc:
        problem = str(exc)
    if problem:
        print(f"replay_vs_vidur: {args.vidur_python} cannot import vidur.main ({problem}); install vidur==0.0.26 there; skipped")
        return 0
    from specagent.hardware.profile import load_hardware

    work = args.workdir or Path(tempfile.mkdtemp(prefix="replay-vs-vidur-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "vidur_cache"
    write_vidur_profile(cache, load_hardware("h100"))
    venv = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(work / "hf"), "WANDB_MODE": "disabled",
            "WANDB_SILENT": "true"}
    rate = capacity_rate()
    load0 = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load0[0]:.2f} before; trace at {rate:.3f} req/s "
          f"(half of specagent's analytic capacity of 1 x Llama-3-8B bf16 on H100)")
    spec = [SPECAGENT, "replay", "--strong-model", SPECAGENT_MODEL, "--strong-hardware", "h100", "--strong-gpus", "1",
            "--strong-dtype", "bf16", "--replicas", "1", "--max-seqs", str(MAX_SEQS), "--max-tokens", str(MAX_TOKENS),
            "--format", "json"]
    warm_trace = work / "trace_warmup.csv"
    write_trace(warm_trace, 100, rate)
    warm = run(vidur_cmd(args.vidur_python, warm_trace, work / "vidur_out_warmup", cache), venv, cwd=work)[0]
    print(f"Vidur warm-up (fits its predictors on the profile, caches them; 100 requests): {warm:.1f} s")
    for n in sizes:
        trace = work / f"trace_{n}.csv"
        write_trace(trace, n, rate)
        out = work / f"vidur_out_{n}"
        run(spec[:2] + [str(trace)] + spec[2:], {"PYTHONDONTWRITEBYTECODE": ""})  # untimed: byte-compiles, as a user's first run does
        vt, st, vc, sc = [], [], [], []
        for _ in range(args.repeat):
            shutil.rmtree(out, ignore_errors=True)
            dt, _, cpu = run(vidur_cmd(args.vidur_python, trace, out, cache), venv, cwd=work)
            vt.append(dt)
            vc.append(cpu)
            dt, text, cpu = run(spec[:2] + [str(trace)] + spec[2:])
            st.append(dt)
            sc.append(cpu)
        doc = json.loads(text)
        v_e2e, v_ttft, v_n = vidur_means(out)
        ratio = min(vt) / min(st)
        print(f"{n:>8,} requests: Vidur {min(vt):7.2f} s, specagent replay {min(st):6.2f} s wall: "
              f"{ratio:5.1f}x (goal {GOAL:g}x: {'met' if ratio >= GOAL else 'missed'}); CPU {min(vc):.2f} s / {min(sc):.2f} s: "
              f"{min(vc) / min(sc):.1f}x; wall runs V {['%.2f' % t for t in vt]} S {['%.2f' % t for t in st]}")
        print(f"{'':>18}mean E2E Vidur {v_e2e:.3f} s / specagent {doc['mean_e2el_ms'] / 1000:.3f} s; mean TTFT Vidur {v_ttft:.1f} ms"
              f" / specagent {doc['mean_ttft_ms']:.1f} ms; requests {v_n:,} / {doc['completed']:,}")
    print(f"load average after {os.getloadavg()[0]:.2f} (the machine may be shared: wall time under load is longer)")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
