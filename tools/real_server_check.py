"""The held-out check on a real server: fit an engine profile on some loads and lengths, predict a request trace.

Why: `bench serve` → `latency fit --engine-id` → `replay` is the path a user with their own server takes
(docs/calibration.md, "Calibrating on your own server"); this runs it end to end against the real local server
of the tests (tools/real_server.py: `transformers serve` with SmolLM2-135M on the CPU) and scores the replay of a
request trace the fit never saw — other lengths, another concurrency — against `bench serve`'s measurement of
the same trace on the same server.

    python tools/real_server_check.py --out measurements/real_server/DATE   # 2026-12-04: calibrate 52 s + bench 161 s

Steps, each a `specagent` command whose output is kept under --out:
1. `calibrate --device cpu --dtype fp32 --threads 1 --engine-terms`: the hardware profile of this machine and the
   measured engine terms of specagent's torch modules on it (the fit's base profile), unless --hardware is given;
2. the server, one torch thread (`OMP_NUM_THREADS=1`), plain (one request at a time: `transformers serve` without
   --continuous-batching runs every `model.generate` on one inference thread, transformers/cli/serving/utils.py
   `InferenceThread` / `GenerateManager`) unless --continuous-batching;
3. the fit loads: `bench serve` at --fit-lengths × --fit-concurrency (random prompts, 16 output tokens);
4. the trace: --trace-requests requests of seeded random lengths in ranges the fit loads do not cover, written as
   trace.csv, measured by `bench serve --dataset trace.csv --max-concurrency C` (C not among the fit's);
5. `latency fit --data fit.csv --engine-id smollm2-cpu --base-engine cpu.engine.toml --max-num-seqs 1` (plain) —
   fitted on the fit loads only;
6. `replay` of the trace (the lengths the server reported for each request, all sent at 0 under the same
   --max-concurrency) on the fitted profile, and `latency validate --hold-out concurrency` of the fit loads;
7. record.json and README.md: predicted vs measured mean TTFT, TPOT and E2E with % error, the load average
   (`/proc/loadavg`) before and after every measurement, the machine and every version.

A measurement whose 1-minute load average moved by more than --max-load-change between its start and end is run
again (at most --repeats times in all) and every attempt is recorded; the figures used are the last attempt's.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_server import MODEL_DIR, RealServer, Unavailable, prepare  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENGINE_ID = "smollm2-cpu"
OUTPUT_LEN = 16
#: the record's own names (every command runs in the record's folder)
SPEC = f"{MODEL_DIR.name}/config.json"
HW = "cpu.toml"
BASE_ENGINE = "cpu.engine.toml"


def loadavg() -> list[float]:
    """The 1, 5 and 15-minute load averages (what `uptime` prints)."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return list(os.getloadavg())


def specagent(args: list[str], log: Path, timeout_s: float = 1800.0) -> subprocess.CompletedProcess:
    """Run `specagent ARGS` (this interpreter's install) in the record's folder (`log`'s), every path in ARGS relative
    to it (so the record names no path of this machine and replays where it is shipped); its output kept in `log`;
    a failure stops the check."""
    exe = shutil.which("specagent", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-c", "from specagent.cli import main; main()"]
    t0 = time.time()
    p = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout_s, cwd=log.parent)
    log.write_text(f"$ specagent {' '.join(args)}\n# exit {p.returncode}, {time.time() - t0:.1f} s\n{p.stdout}\n{p.stderr}")
    if p.returncode != 0:
        sys.exit(f"error: specagent {args[0]} {args[1] if len(args) > 1 else ''} failed (exit {p.returncode}); see {log}")
    return p


def measured(args: list[str], csv_out: Path, log: Path, attempts: list[dict], repeats: int, max_change: float) -> dict:
    """`bench serve ARGS --json`, again while the load average moved more than `max_change` during it; the last
    attempt's CSV rows are appended to `csv_out` (every attempt's are kept beside its log)."""
    for k in range(repeats):
        before, t0 = loadavg(), time.time()
        mine = log.with_suffix(f".{k}.csv")
        mine.unlink(missing_ok=True)
        p = specagent([*args, "--csv", mine.name, "--json"], log.with_suffix(f".{k}.log"))
        after = loadavg()
        out = json.loads(p.stdout)
        attempts.append({"args": args, "attempt": k + 1, "load_before": before, "load_after": after,
                         "wall_s": round(time.time() - t0, 1), "levels": out["levels"]})
        if abs(after[0] - before[0]) <= max_change:
            break
    lines = mine.read_text().splitlines(keepends=True)
    with csv_out.open("a") as f:
        f.writelines(lines if f.tell() == 0 else lines[1:])
    return out


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("torch", "transformers", "fastapi", "uvicorn", "gguf", "specagent"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        out["specagent_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                                 cwd=ROOT, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "system": platform.platform()}


def write_trace(path: Path, n: int, seed: int, input_range: tuple[int, int], output_range: tuple[int, int]) -> None:
    rng = random.Random(f"real-server-check:{seed}")
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["input_tokens", "output_tokens"])
        for _ in range(n):
            w.writerow([rng.randint(*input_range), rng.randint(*output_range)])


def replay_trace(requests_jsonl: Path, path: Path) -> int:
    """The measured trace as `replay` reads it: every request at 0 (the concurrency cap sends them), with the prompt and
    output lengths the server reported for it (the lengths are the trace; the times are what is predicted)."""
    rows = [json.loads(x) for x in requests_jsonl.read_text().splitlines() if x.strip()]
    ok = sorted((r for r in rows if r["ok"]), key=lambda r: r["index"])
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "prompt_tokens", "output_tokens"])
        for r in ok:
            w.writerow([0, r["prompt_tokens"] or r["input_len"], r["output_tokens"]])
    return len(ok)


def pct(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="Folder for the record and every command's output.")
    ap.add_argument("--hardware", type=Path, default=None, help="A `calibrate` TOML of this machine (with NAME.engine.toml "
                    "beside it): skip step 1.")
    ap.add_argument("--continuous-batching", action="store_true", help="Serve with transformers' continuous batching.")
    ap.add_argument("--fit-lengths", default="64,256", help="Random-prompt lengths of the fit loads.")
    ap.add_argument("--fit-concurrency", default="1,2", help="Concurrency levels of the fit loads.")
    ap.add_argument("--fit-prompts", type=int, default=4, help="Requests per fit load level.")
    ap.add_argument("--trace-requests", type=int, default=12)
    ap.add_argument("--trace-concurrency", type=int, default=3)
    ap.add_argument("--trace-input", default="32,480", help="Range of the trace's prompt lengths (asked).")
    ap.add_argument("--trace-output", default="8,24", help="Range of the trace's output lengths (max_tokens).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="Attempts per measurement while the load moves.")
    ap.add_argument("--max-load-change", type=float, default=2.0, help="Largest change of the 1-min load average accepted.")
    ap.add_argument("--analyse-only", action="store_true", help="Steps 5-7 only, on the measurements already in --out.")
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rec: dict[str, Any] = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
                           "versions": versions(), "command": " ".join(sys.argv), "settings": vars(a) | {"out": str(a.out)},
                           "server": "transformers serve --device cpu --dtype float32" +
                           (" --continuous-batching" if a.continuous_batching else "") + ", OMP_NUM_THREADS=1",
                           "measurements": []}
    rec["settings"]["hardware"] = a.hardware.name if a.hardware else None
    rec["command"] = private(rec["command"])
    if a.analyse_only:
        analyse(a, out, json.loads((out / "measured.json").read_text()))
        return
    try:
        model_dir = prepare()
    except Unavailable as exc:
        sys.exit(f"error: {exc}")
    (out / MODEL_DIR.name).mkdir(exist_ok=True)  # the architecture the cost model reads, shipped with the record
    shutil.copyfile(model_dir / "config.json", out / SPEC)
    if a.hardware is None:
        before = loadavg()
        specagent(["calibrate", "--device", "cpu", "--dtype", "fp32", "--threads", "1", "--engine-terms", "--no-validate",
                   "-o", HW], out / "calibrate.log")
        rec["calibrate"] = {"load_before": before, "load_after": loadavg()}
    else:
        src = a.hardware.resolve()
        for name, f in ((HW, src), (BASE_ENGINE, src.with_name(src.stem + ".engine.toml"))):
            if not f.exists():
                sys.exit(f"error: {f}: no such file (calibrate --engine-terms writes NAME.toml and NAME.engine.toml)")
            shutil.copyfile(f, out / name)
    if not (out / BASE_ENGINE).exists():
        sys.exit(f"error: {out / BASE_ENGINE}: no engine profile beside the hardware profile (calibrate --engine-terms writes it)")
    fit_csv = out / "fit.csv"
    for f in (fit_csv, out / "trace_measured.csv"):
        f.unlink(missing_ok=True)
    write_trace(out / "trace.csv", a.trace_requests, a.seed, tuple(map(int, a.trace_input.split(","))),  # type: ignore[arg-type]
                tuple(map(int, a.trace_output.split(","))))  # type: ignore[arg-type]
    extra = ("--continuous-batching",) if a.continuous_batching else ()
    with RealServer(start_timeout_s=900.0, log=out / "server.log", extra_args=extra, relative=True) as server:
        common = ["--base-url", server.url, "--model", server.model, "--model-spec", SPEC, "--gpu", HW, "--weight-dtype", "fp32",
                  "--engine", "transformers", "--engine-version", rec["versions"]["transformers"], "--output-len",
                  str(OUTPUT_LEN), "--warmup", "1", "--timeout", "900", "--seed", str(a.seed)]
        for length in a.fit_lengths.split(","):
            measured(["bench", "serve", *common, "--input-len", length, "--num-prompts", str(a.fit_prompts),
                      "--max-concurrency", a.fit_concurrency], fit_csv, out / f"fit-{length}", rec["measurements"],
                     a.repeats, a.max_load_change)
        trace = measured(["bench", "serve", *common, "--dataset", "trace.csv", "--num-prompts", str(a.trace_requests),
                          "--max-concurrency", str(a.trace_concurrency), "--requests-out", "trace_requests.jsonl"],
                         out / "trace_measured.csv", out / "trace", rec["measurements"], a.repeats, a.max_load_change)
    rec["trace_summary"] = trace["levels"][0]
    rec["hardware_profile"] = HW
    (out / "measured.json").write_text(json.dumps(rec, indent=2) + "\n")
    analyse(a, out, rec)


def analyse(a: argparse.Namespace, out: Path, rec: dict[str, Any]) -> None:
    """Steps 5-7: fit on the fit loads, replay the trace on the fitted profile, score it, write the record."""
    profile = f"{ENGINE_ID}.toml"
    seqs = [] if a.continuous_batching else ["--max-num-seqs", "1"]
    before = loadavg()
    fitted = json.loads(specagent(["latency", "fit", "--data", "fit.csv", "--engine-id", ENGINE_ID, "--base-engine",
                                   BASE_ENGINE, *seqs, "-o", profile, "--json"], out / "fit.log").stdout)
    rec["fit"] = {"values": fitted["values"], "converged": fitted["converged"], "not_fitted": fitted["not_fitted"],
                  "profile": profile}
    n = replay_trace(out / "trace_requests.jsonl", out / "trace_replay.csv")
    rep = json.loads(specagent(["replay", "trace_replay.csv", *replay_args(a.trace_concurrency, profile), "--format", "json"],
                               out / "replay.log").stdout)
    val = json.loads(specagent(["latency", "validate", "--data", "fit.csv", "--hold-out", "concurrency", "--engine-id",
                                ENGINE_ID, "--base-engine", BASE_ENGINE, *seqs, "--rows", "validate_rows.csv", "--json"],
                               out / "validate.log").stdout)
    rec["analysis_load"] = {"load_before": before, "load_after": loadavg()}
    rec["validate"] = {"mape": val["mape"]["metric"], "rows": "validate_rows.csv"}
    lvl = rec["trace_summary"]
    table = []
    for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e")):
        m = lvl["e2el" if key == "e2e" else key]["mean"]
        p = rep["mean_e2el_ms"] if key == "e2e" else rep[f"mean_{key}_ms"]  # replay's JSON: vLLM's keys, ms (issue 51)
        table.append({"figure": name, "measured_ms": round(m, 1), "predicted_ms": round(p, 1), "error_pct": round(pct(p, m), 1)})
    rec["trace"] = {"requests": n, "concurrency": a.trace_concurrency, "mean_prompt_tokens": lvl["mean_input_tokens"],
                    "mean_output_tokens": lvl["mean_output_tokens"], "comparison": table, "replay": rep}
    (out / "record.json").write_text(json.dumps(rec, indent=2) + "\n")
    lines = [f"# Held-out replay on the real server ({rec['date']})", "",
             f"{rec['server']}; {rec['machine']['cpu']}, {rec['machine']['cores']} cores; " +
             ", ".join(f"{k} {v}" for k, v in rec["versions"].items()), "",
             f"Trace: {n} requests, mean prompt {lvl['mean_input_tokens']:.0f} / output {lvl['mean_output_tokens']:.1f} tokens, "
             f"concurrency {a.trace_concurrency}; fit on lengths {a.fit_lengths} at concurrency {a.fit_concurrency}.", "",
             "| figure | measured (ms) | predicted (ms) | error |", "|---|---:|---:|---:|"]
    lines += [f"| {r['figure']} | {r['measured_ms']:,.1f} | {r['predicted_ms']:,.1f} | {r['error_pct']:+.1f}% |" for r in table]
    lines += ["", "Leave-one-concurrency-out MAPE of the fit loads (`latency validate --hold-out concurrency`): " +
              ", ".join(f"{k.upper()} {100 * v['mape']:.1f}%" for k, v in rec["validate"]["mape"].items()), ""]
    lines += ["Load average (1, 5, 15 min) before → after each measurement:", ""]
    if "calibrate" in rec:
        lines.append(f"- calibrate: {rec['calibrate']['load_before']} → {rec['calibrate']['load_after']}")
    lines += [f"- {' '.join(m['args'][m['args'].index('--max-concurrency'):][:2])} "
              f"{'dataset' if '--dataset' in m['args'] else 'input ' + m['args'][m['args'].index('--input-len') + 1]}"
              f" (attempt {m['attempt']}): {m['load_before']} → {m['load_after']}, {m['wall_s']} s" for m in rec["measurements"]]
    lines.append(f"- fit, replay, validate: {rec['analysis_load']['load_before']} → {rec['analysis_load']['load_after']}")
    lines += ["", "Commands (in this folder; the server's URL was a loopback port):", "", "```bash",
              f"python {rec['command']}"]
    lines += sorted({ln.split("\n", 1)[0][2:] for ln in (f.read_text() for f in sorted(out.glob("*.log")))
                     if ln.startswith("$ specagent")}, key=_order)
    lines += ["```", ""]
    (out / "README.md").write_text("\n".join(lines))
    for f in out.glob("*.log"):  # the logs are not hashed by anything: a path of this machine there is written as <repo>
        f.write_text(private(f.read_text(errors="replace")))
    leaks = [f.name for f in out.rglob("*") if f.is_file() and str(ROOT) in f.read_text(errors="replace")]
    if leaks:
        sys.exit(f"error: {', '.join(leaks)}: a path of this machine ({ROOT}) is in the record")
    print("\n".join(lines))


STEPS = ("calibrate", "bench", "latency fit", "replay", "latency validate")


def _order(cmd: str) -> tuple[int, bool, str]:
    """The commands in the order they ran: calibrate, the bench loads, fit, replay, validate."""
    body = cmd.removeprefix("$ ").removeprefix("specagent ")
    return next((i for i, s in enumerate(STEPS) if body.startswith(s)), len(STEPS)), "--dataset" in cmd, cmd


def replay_args(concurrency: int, profile: str) -> list[str]:
    """`replay`'s flags for the trace: the record's model, hardware and fitted engine profile, the bench's concurrency."""
    return ["--strong-model", SPEC, "--strong-hardware", HW, "--strong-gpus", "1", "--strong-dtype", "fp32",
            "--strong-serving-engine", profile, "--max-concurrency", str(concurrency), "--chunk", "0"]


def private(text: str) -> str:
    """`text` with this checkout's absolute path written as <repo> (and the home folder as ~)."""
    text = text.replace(str(ROOT), "<repo>")
    home = str(Path.home())
    return text.replace(home + "/", "~/") if len(home) > 1 else text


if __name__ == "__main__":
    main()
