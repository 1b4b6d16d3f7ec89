"""Reading `vllm bench serve` datasets (traces/datasets.py) of 10^4 and 10^5 records: wall time, CPU time and peak RSS.

    .venv/bin/python benchmarks/dataset_read.py [--records 10000 --records 100000] [--json out.json]

For each size, three seeded synthetic files: a ShareGPT JSON list (two turns per record, then a
third the reader skips; English-like text from a fixed 2,000-word vocabulary, prompt and reply
word counts geometric with means 60 and 150), the same requests as custom JSONL (the prompt's
text and an output_tokens count), and a saved `--save-detailed` result (input_lens, output_lens,
start_times, errors). Each file is read by `load_requests` (what replay, plan and sweep call) in
a process of its own; the figures are that process's: the read's wall and CPU time (imports not
included) and its peak RSS (VmHWM, the interpreter and imports included). The text's size, not the record count,
drives the ShareGPT and custom reads (JSON decoding and the word-piece token estimate).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import json, sys, time
from specagent.traces.requests import load_requests
t0, c0 = time.perf_counter(), time.process_time()
t = load_requests(sys.argv[1])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec (the parent's, which held the file it wrote)
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"requests": len(t), "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": hwm / 1024,
                  "prompt_tokens": int(t.prompt_tokens.sum()), "output_tokens": int(t.output_tokens.sum())}))
"""


def _texts(rng: np.random.Generator, vocab: np.ndarray, n: int, mean_words: float) -> list[str]:
    counts = rng.geometric(1.0 / mean_words, n)
    words = vocab[rng.integers(0, len(vocab), int(counts.sum()))]
    out, at = [], 0
    for c in counts.tolist():
        out.append(" ".join(words[at:at + c].tolist()) + ".")
        at += c
    return out


def write_files(folder: Path, n: int, seed: int = 34) -> dict[str, Path]:
    rng = np.random.default_rng([seed, n])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = np.array(["".join(rng.choice(letters, int(k))) for k in rng.integers(2, 10, 2000)])
    prompts, replies = _texts(rng, vocab, n, 60.0), _texts(rng, vocab, n, 150.0)
    files = {"sharegpt": folder / f"sharegpt_{n}.json", "custom": folder / f"custom_{n}.jsonl",
             "vllm-result": folder / f"result_{n}.json"}
    with open(files["sharegpt"], "w", encoding="utf-8") as f:
        json.dump([{"id": f"r{i}", "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": r},
                                                      {"from": "human", "value": "thanks"}]}
                   for i, (p, r) in enumerate(zip(prompts, replies))], f)
    outs = rng.geometric(1.0 / 200.0, n)
    with open(files["custom"], "w", encoding="utf-8") as f:
        for p, o in zip(prompts, outs.tolist()):
            f.write(json.dumps({"prompt": p, "output_tokens": o}) + "\n")
    starts = 1000.0 + np.cumsum(rng.exponential(0.1, n))
    with open(files["vllm-result"], "w", encoding="utf-8") as f:
        json.dump({"backend": "vllm", "request_rate": 10.0, "input_lens": rng.geometric(1 / 500, n).tolist(),
                   "output_lens": outs.tolist(), "start_times": starts.tolist(), "errors": [""] * n}, f)
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, action="append", help="records per file (repeat; default 10000 and 100000)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as d:
        for n in args.records or [10_000, 100_000]:
            for kind, path in write_files(Path(d), n).items():
                run = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"{kind} ({n:,}): {run.stderr.strip()}")
                res = {"format": kind, "records": n, "file_mb": round(path.stat().st_size / 2**20, 1), **json.loads(run.stdout)}
                for k in ("wall_s", "cpu_s", "peak_rss_mb"):
                    res[k] = round(res[k], 2)
                res["load_1min"] = round(os.getloadavg()[0], 2)
                print(json.dumps(res), flush=True)
                results.append(res)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
