"""On a GPU, one command: calibrate, measure the engine terms, validate, run the protocol live, write a dated record.

    bash benchmarks/gpu_calibration.sh --budget-s 420          # the lent GPU machine (benchmarks/README.md)
    .venv/bin/python benchmarks/gpu_calibration.py --device cpu --budget-s 60   # the dry path: tiny models, seconds

Stages, in this order (each prints progress; each is skipped, and the record says so, when
the time left cannot hold it; a stage that fails is recorded with its error and the rest run):

1. the device: name, memory, compute capability, driver, CUDA, torch, cuDNN, clocks (nvidia-smi);
2. per dtype (bf16 then fp32 on a GPU): both scaled models calibrated (`kernels/calibrate.py`:
   peak GEMMs in every dtype the GPU has — fp8 through torch._scaled_mm from compute
   capability 8.9 —, copy bandwidth, memory-bound kernels, anchor passes) and validated on
   held-out passes (MAPE printed); then the engine terms in that dtype
   (`kernels/engine_terms.py`: per-layer fixed time from CUDA-graph replays, launch cost,
   kernels, per-iteration host work; NCCL all-reduce and all-to-all where >= 2 GPUs are
   visible, else "not measured: 1 GPU"), and the held-out passes priced with them too;
3. the live comparison (`kernels/live_compare.py`) on the device in the live dtype, sized to
   the time left from the simulator's own prediction of it, repeats stopped at the budget,
   priced with the calibrated profiles (ideal engine) and with the measured engine terms;
4. the record: a folder ``<record root>/<UTC date>-<device>/`` with the profiles (TOML),
   ``record.json`` (every figure, residual and table) and ``record.md``; with ``--out`` (the
   shell script passes $OUT) also ``record.tar.gz`` of that folder, ``record.json`` and
   ``record.md`` there.

Budget (`--budget-s`): the work scales down with it — dtypes after the first and the live
run's size are chosen from measured stage times; the live run keeps `LIVE_SHARE` of the
budget. Sized for an H200 (KINDS.md: ~790 TFLOP/s bf16 GEMM, 4.3 TB/s copies), where the
eager scaled models are launch-bound: about 20-40 s per calibrated model, seconds for the
engine terms, 1-3 min for 24 trajectories x 3 repeats.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parent.parent
#: Share of the budget kept for the live run while calibrating dtypes after the first.
LIVE_SHARE = 0.35
#: Seconds kept at the end for writing the record.
RESERVE_S = 10.0
#: Live run sizes tried, largest first: (trajectories, repeats).
LIVE_SIZES = ((24, 3), (24, 2), (24, 1), (12, 1), (6, 1), (3, 1), (1, 1))
#: The simulator's prediction of a live repeat is multiplied by this before it is compared with the time left
#: (the prediction prices model passes only; models are built and SQLite reads run besides).
LIVE_MARGIN = 1.5


@dataclass
class Plan:
    """What the run measures, from the device and the command line."""

    device: str
    cuda: bool
    budget_s: float
    scale: str
    dtypes: list[str]
    live_dtype: str
    cfg: Any  # microbench.TimingConfig
    tokens: tuple[int, ...]
    contexts: tuple[int, ...]
    decode_anchors: tuple[tuple[int, int, int], ...]
    validation_points: tuple[tuple[int, int, int], ...]
    live_trajectories: int
    live_repeats: int
    token_scale: float
    k: int
    live: bool
    record_root: Path
    out: Path | None


def make_plan(args: argparse.Namespace) -> Plan:
    """Defaults by device: the full run on a GPU; on a CPU the dry path (tiny models, one dtype, a small live run)."""
    from specagent.kernels import calibrate as cal
    from specagent.kernels import microbench as mb
    from specagent.kernels.configs import LIVE_TOKEN_SCALE, LIVE_TRAJECTORIES

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"gpu_calibration: --device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu for the dry path")
    if args.budget_s is not None and args.budget_s <= 0:
        raise SystemExit(f"gpu_calibration: --budget-s must be > 0, got {args.budget_s}")
    dtypes = [d.strip() for d in (args.dtypes or ("bf16,fp32" if cuda else "fp32")).split(",") if d.strip()]
    for d in dtypes + ([args.live_dtype] if args.live_dtype else []):
        if d not in mb.DTYPES:
            raise SystemExit(f"gpu_calibration: unknown dtype '{d}' (--dtypes/--live-dtype); known: {', '.join(mb.DTYPES)}")
    live_dtype = args.live_dtype or dtypes[0]
    if live_dtype not in dtypes:
        raise SystemExit(f"gpu_calibration: --live-dtype {live_dtype} must be one of the calibrated --dtypes {dtypes}")
    if cuda:
        cfg = mb.TimingConfig(repeats=args.repeats or 7, statistic="median", clock="wall")
        tokens, contexts, anchors, points = cal.CURVE_TOKENS, (256, 1024, 4096), cal.DECODE_ANCHOR_POINTS, cal.VALIDATION_POINTS
    else:
        torch.set_num_threads(1)
        cfg = mb.TimingConfig(warmup=1, repeats=args.repeats or 3, rotate=2, max_seconds=0.2, statistic="min", clock="cpu")
        tokens, contexts, anchors = (1, 16), (256,), cal.DECODE_ANCHOR_POINTS[:1]
        points = ((1, 1, 256), (4, 1, 64), (1, 8, 128), (1, 32, 0))
    return Plan(device=device, cuda=cuda, budget_s=float(args.budget_s or (420.0 if cuda else 60.0)),
                scale=args.scale or ("bench" if cuda else "tiny"), dtypes=dtypes, live_dtype=live_dtype, cfg=cfg, tokens=tokens,
                contexts=contexts, decode_anchors=anchors, validation_points=points,
                live_trajectories=args.live_trajectories or (LIVE_TRAJECTORIES if cuda else 2),
                live_repeats=args.live_repeats or (3 if cuda else 1), token_scale=args.token_scale or LIVE_TOKEN_SCALE, k=args.k,
                live=not args.no_live,
                record_root=Path(args.record_root or (ROOT / ("measurements/calibrations" if cuda else "out/gpu-calibration"))),
                out=Path(args.out) if args.out else None)


# --------------------------------------------------------------------------- the device
def nvidia_smi() -> dict[str, Any]:
    """GPU name, driver, clocks, power and temperature as nvidia-smi reports them (or why it could not)."""
    fields = ("index", "name", "driver_version", "pci.bus_id", "memory.total", "clocks.sm", "clocks.mem", "clocks.max.sm",
              "clocks.max.mem", "power.draw", "power.limit", "temperature.gpu", "pstate")
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"not readable: {type(exc).__name__}: {exc}"}
    gpus = [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.strip().splitlines()]
    cuda_driver = next((line.split("CUDA Version:")[1].split()[0] for line in head.splitlines() if "CUDA Version:" in line), None)
    return {"gpus": gpus, "cuda_driver_version": cuda_driver}


def device_record(plan: Plan) -> dict[str, Any]:
    from specagent.kernels import calibrate as cal
    from specagent.kernels.engine_terms import versions

    facts = cal.device_facts(plan.device)
    rec: dict[str, Any] = {"device": plan.device, "name": facts.name, "memory_bytes": facts.memory_bytes, "memory_source": facts.memory_source,
                           "capability": list(facts.capability) if facts.capability else None, "fp8_gemm": facts.has_fp8,
                           **versions(plan.device), "python": sys.version.split()[0], "torch_threads": torch.get_num_threads()}
    if plan.cuda:
        rec["gpus_visible"] = torch.cuda.device_count()
        rec["nvidia_smi_before"] = nvidia_smi()
    else:
        rec["processor"] = cal.processor_name()
    return rec


# --------------------------------------------------------------------------- the run
@dataclass
class Run:
    """The stages run so far, the time budget, and everything the record holds."""

    plan: Plan
    t0: float = field(default_factory=time.monotonic)
    stages: list[dict] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # file name in the record folder -> text

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.plan.budget_s - self.elapsed()

    def say(self, msg: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {msg}", flush=True)

    def stage(self, name: str, fn: Callable[[], Any], estimate_s: float = 0.0, keep_s: float = 0.0, force: bool = False) -> Any:
        """Run `fn` (`force`: whatever the time left) unless the time left, minus `keep_s` kept for later stages, cannot hold
        `estimate_s`; record how it went."""
        room = self.left() - keep_s - RESERVE_S
        if not force and estimate_s > room:
            status = f"skipped: budget (needs ~{estimate_s:.0f} s, {max(room, 0):.0f} s left for it)"
            self.say(f"{name}: {status}")
            self.stages.append({"name": name, "status": status, "seconds": 0.0})
            return None
        self.say(f"{name} ...")
        t = time.monotonic()
        try:
            out = fn()
            status = "done"
        except Exception as exc:  # recorded, and the other stages still run
            traceback.print_exc()
            out, status = None, f"failed: {type(exc).__name__}: {exc}"
        secs = time.monotonic() - t
        self.stages.append({"name": name, "status": status, "seconds": round(secs, 2)})
        self.say(f"{name}: {status} ({secs:.1f} s)")
        return out


def _rows(rows) -> list[dict]:
    return [{"batch": r.batch, "new_tokens": r.new_tokens, "context": r.context, "bound": r.bound, "predicted_s": r.predicted_s,
             "measured_s": r.measured_s, "error": r.error} for r in rows]


def calibrate_one(run: Run, name: str, spec, dtype: str) -> dict:
    """One model in one dtype: calibrate, write its profile, validate on held-out passes."""
    from specagent.hardware.profile import load_hardware
    from specagent.kernels import calibrate as cal

    p = run.plan
    fit, hw, data = cal.calibrate(spec, dtype, p.device, p.cfg, tokens=p.tokens, contexts=p.contexts, decode_anchors=p.decode_anchors,
                                  progress=lambda m: None)
    fname = f"{name}-{dtype}.toml"
    run.files[fname] = cal.write_profile_toml(data, Path(run.record["_tmp"]) / fname).read_text()
    hw = load_hardware(str(Path(run.record["_tmp"]) / fname))
    rows = cal.validate(spec, hw, dtype, p.validation_points, p.device, p.cfg)
    mape = cal.mape(rows)
    run.say(f"  {spec.name} {dtype}: peaks " + ", ".join(f"{d} {v / 1e12:.4g} TFLOP/s" for d, v in fit.peak_tflops.items())
            + f"; copy {fit.bandwidth_tb_s:.4g} TB/s; overhead {fit.pass_overhead_us:.0f} us; held-out MAPE {mape:.1%} over {len(rows)} passes")
    return {"model": name, "spec": spec.name, "dtype": dtype, "profile": fname, "hw": hw, "rows": rows, "mape": mape,
            "peak_tflops": {d: v / 1e12 for d, v in fit.peak_tflops.items()}, "bandwidth_tb_s": fit.bandwidth_tb_s,
            "bandwidth_efficiency": fit.bandwidth_efficiency, "pass_overhead_us": fit.pass_overhead_us, "curve": fit.curve,
            "decode_curve": fit.decode_curve, "anchors": fit.anchors, "fit_residuals": fit.residuals,
            "microbenchmarks": [m.as_dict() for m in fit.measurements]}


def engine_one(run: Run, dtype: str, cals: dict[str, dict], collectives: bool) -> dict:
    """The engine terms in `dtype`, written as a profile; both models' held-out passes priced with them."""
    from specagent.hardware.serving_engine import parse_engine
    from specagent.kernels import calibrate as cal
    from specagent.kernels import engine_terms as et
    from specagent.kernels.configs import strong_spec, weak_spec

    p = run.plan
    specs = {"weak": weak_spec(p.scale), "strong": strong_spec(p.scale)}
    terms = et.measure_engine_terms(specs, {n: c["hw"] for n, c in cals.items()}, dtype, p.device, p.cfg, scale=p.scale,
                                    collectives=collectives, progress=lambda m: run.say(f"  {m}"))
    if not collectives and run.record.get("collectives"):  # measured once, in the first dtype
        terms.collectives, terms.collectives_note = run.record["collectives"], run.record["collectives_note"]
    run.record.setdefault("collectives", terms.collectives)
    run.record.setdefault("collectives_note", terms.collectives_note)
    data = et.engine_profile_dict(terms)
    fname = f"engine-{dtype}.toml"
    run.files[fname] = et.write_engine_toml(data, Path(run.record["_tmp"]) / fname).read_text()
    eng = parse_engine(data, fname)
    for name, c in cals.items():
        c["engine_rows"] = et.price_rows(specs[name], c["hw"], eng, dtype, c["rows"])
        c["engine_mape"] = cal.mape(c["engine_rows"])
        run.say(f"  {c['spec']} {dtype}: held-out MAPE with the engine terms {c['engine_mape']:.1%} (calibrated profile alone {c['mape']:.1%})")
    run.say(f"  launch {terms.launch_s * 1e6:.2f} us/kernel, iteration {terms.iteration_s * 1e6:.1f} us, layer us "
            + ", ".join(f"{k} {et.layer_fixed_s(pt, terms.launch_s) * 1e6:.1f}" for k, pt in terms.parts.items()) + f"; collectives: {terms.collectives_note}")
    return {"dtype": dtype, "profile": fname, "id": eng.id, "engine": eng, "terms": terms.as_dict()}


def predict_live_seconds(trajs, hw_weak, hw_strong, plan: Plan) -> float:
    """The simulator's model time (every phase but tool and user waits) for one live repeat of `trajs`."""
    from specagent.kernels import calibrate as cal
    from specagent.kernels.configs import LIVE_ACCEPT, LIVE_VERDICT_TOKENS, strong_spec, weak_spec
    from specagent.kernels.live import PHASES, scale_trajectory
    from specagent.simulator.acceptance.model import AcceptanceModel
    from specagent.simulator.run import simulate
    from specagent.simulator.protocol.setting import Setting

    setting = Setting(weak=cal.deployment_for(weak_spec(plan.scale), hw_weak, plan.live_dtype),
                      strong=cal.deployment_for(strong_spec(plan.scale), hw_strong, plan.live_dtype))
    df = simulate([scale_trajectory(t, plan.token_scale) for t in trajs], "specagent", setting=setting,
                  acceptance=AcceptanceModel.constant(LIVE_ACCEPT, verdict_tokens=LIVE_VERDICT_TOKENS), k=plan.k)
    return float(sum(df[f"time_s_{ph}"].sum() for ph in PHASES if ph not in ("tool", "user") and f"time_s_{ph}" in df))


def live_size(predict: Callable[[int], float], room_s: float, sizes=LIVE_SIZES, largest: tuple[int, int] = (24, 3)) -> tuple[int, int] | None:
    """The largest (trajectories, repeats) no larger than `largest` whose first repeat, predicted x LIVE_MARGIN, fits `room_s`
    (later repeats are stopped at the deadline by the live run itself); None if not even one trajectory fits."""
    seen: list[tuple[int, int]] = []
    for n, r in sizes:
        size = (min(n, largest[0]), min(r, largest[1]))
        if size not in seen:
            seen.append(size)
    for n, r in seen:
        if predict(n) * LIVE_MARGIN <= room_s:
            return n, r
    return None


def live_stage(run: Run, cals: dict[str, dict], engine: dict | None) -> dict:
    from specagent.kernels.live import compare_live
    from specagent.kernels.live_compare import live_comparison, live_workload, print_report
    from specagent.kernels.configs import strong_spec, weak_spec

    p = run.plan
    hw_w, hw_s = cals["weak"]["hw"], cals["strong"]["hw"]
    room = run.left() - RESERVE_S
    cache: dict[int, float] = {}

    def predict(n: int) -> float:
        if n not in cache:
            cache[n] = predict_live_seconds(live_workload(n), hw_w, hw_s, p)
        return cache[n]

    size = live_size(predict, room, largest=(p.live_trajectories, p.live_repeats))
    if size is None:
        raise RuntimeError(f"not even one trajectory fits the {room:.0f} s left (predicted {predict(1):.1f} s x {LIVE_MARGIN})")
    n, reps = size
    run.say(f"  live: {n} trajectories x up to {reps} repeats (simulator predicts {predict(n):.1f} s per repeat, {room:.0f} s left)")
    tmp = Path(run.record["_tmp"])
    report = live_comparison(trajectories=n, token_scale=p.token_scale, device=p.device, dtype=p.live_dtype, scale=p.scale, k=p.k,
                             repeats=reps, weak_profile=str(tmp / cals["weak"]["profile"]), strong_profile=str(tmp / cals["strong"]["profile"]),
                             out_dir=tmp / "live", deadline_s=max(run.left() - RESERVE_S, 1.0),
                             progress=lambda m, *a: run.say(f"  {m}") if not a or a[0] % max(a[1] // 6, 1) == 0 else None)
    print_report(report)
    out = {"report": report.as_dict(), "predicted_repeat_s": predict(n)}
    if engine is not None and report.comparison is not None:
        c = compare_live(report.runs, weak_spec(p.scale), strong_spec(p.scale), hw_w, hw_s, p.live_dtype, p.k, engine["engine"])
        out["engine_comparison"] = c.as_dict()
        run.say(f"  priced with the engine terms ({engine['id']}): total {c.predicted_s:.3f} s vs measured {c.measured_s:.3f} s ({c.error:+.1%})")
    return out


# --------------------------------------------------------------------------- the record
def _jsonable(o: Any) -> Any:
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items() if not k.startswith("_") and k not in ("hw", "engine", "rows", "engine_rows")}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    return o


def build_record(run: Run, cals: list[dict], engines: list[dict], live: dict | None) -> dict:
    rec = {"record": "specagent GPU calibration (benchmarks/gpu_calibration.py)", **{k: v for k, v in run.record.items() if not k.startswith("_")}}
    rec["budget_s"], rec["elapsed_s"] = run.plan.budget_s, round(run.elapsed(), 1)
    rec["plan"] = {"scale": run.plan.scale, "dtypes": run.plan.dtypes, "live_dtype": run.plan.live_dtype,
                   "timing": dataclasses.asdict(run.plan.cfg), "curve_tokens": list(run.plan.tokens), "contexts": list(run.plan.contexts),
                   "validation_points": [list(x) for x in run.plan.validation_points], "k": run.plan.k, "token_scale": run.plan.token_scale}
    rec["stages"] = run.stages
    rec["calibrations"] = []
    for c in cals:
        entry = _jsonable(c)
        entry["validation"] = _rows(c["rows"])
        if "engine_rows" in c:
            entry["validation_engine"] = _rows(c["engine_rows"])
        rec["calibrations"].append(entry)
    rec["engine_terms"] = [_jsonable(e) for e in engines]
    rec["live"] = _jsonable(live) if live else None
    if run.plan.cuda:
        rec["device"]["nvidia_smi_after"] = nvidia_smi()
    rec["not_measured"] = not_measured(run, cals, engines, live)
    return rec


def not_measured(run: Run, cals: list[dict], engines: list[dict], live: dict | None) -> list[str]:
    out = [f"{s['name']}: {s['status']}" for s in run.stages if s["status"] != "done"]
    note = run.record.get("collectives_note")
    if note and not note.startswith("measured"):
        out.append(f"all-reduce / all-to-all latency: {note}")
    for e in engines:
        for kind, pt in e["terms"]["parts"].items():
            if pt.get("graph_error"):
                out.append(f"CUDA graph of the {kind} part ({e['dtype']}): {pt['graph_error']}; its layer_us is eager - roofline - kernels x launch")
    if cals and not any("fp8" in c["peak_tflops"] for c in cals):
        out.append("fp8 peak: this device has no FP8 tensor cores (compute capability < 8.9) or no CUDA")
    out.append("fp8 models: the torch models run in fp32/bf16/fp16; fp8 is measured as a peak GEMM rate only")
    return out


def _md_rows(rows, engine_rows=None) -> list[str]:
    head = "| batch | new tokens | context | bound | measured ms | predicted ms | error |" + (" engine ms | engine error |" if engine_rows else "")
    lines = [head, "|" + "---|" * (9 if engine_rows else 7)]
    for i, r in enumerate(rows):
        line = f"| {r.batch} | {r.new_tokens} | {r.context} | {r.bound} | {r.measured_s * 1e3:.3f} | {r.predicted_s * 1e3:.3f} | {r.error:+.1%} |"
        if engine_rows:
            e = engine_rows[i]
            line += f" {e.predicted_s * 1e3:.3f} | {e.error:+.1%} |"
        lines.append(line)
    return lines


def markdown(rec: dict, cals: list[dict], engines: list[dict], live: dict | None) -> str:
    from specagent.kernels.engine_terms import LAYER_KINDS

    d = rec["device"]
    md = [f"# Calibration record: {d['name']}, {rec['date'][:10]}", "",
          f"Written by `benchmarks/gpu_calibration.py` ({rec['elapsed_s']:.0f} s of a {rec['budget_s']:.0f} s budget). Every figure below "
          "is measured on this device; `record.json` holds all of them (microbenchmarks, anchors, residuals, tables).", "",
          "## Hardware and software", "", "| | |", "|---|---|"]
    for k in ("name", "device", "memory_bytes", "capability", "fp8_gemm", "torch", "cuda", "cudnn", "python", "gpus_visible", "processor"):
        if d.get(k) is not None:
            md.append(f"| {k} | {d[k]} |")
    for when in ("nvidia_smi_before", "nvidia_smi_after"):
        smi = d.get(when)
        if smi:
            if "error" in smi:
                md.append(f"| {when} | {smi['error']} |")
            else:
                g = smi["gpus"][0] if smi["gpus"] else {}
                md.append(f"| {when} | driver {g.get('driver_version')}, CUDA (driver) {smi.get('cuda_driver_version')}, SM {g.get('clocks.sm')} "
                          f"(max {g.get('clocks.max.sm')}), memory {g.get('clocks.mem')} (max {g.get('clocks.max.mem')}), {g.get('power.draw')}, "
                          f"{g.get('temperature.gpu')} C, {g.get('pstate')} |")
    md += ["", "## Stages", "", "| stage | status | seconds |", "|---|---|---|"]
    md += [f"| {s['name']} | {s['status']} | {s['seconds']} |" for s in rec["stages"]]
    if cals:
        md += ["", "## Calibrated hardware profiles", "", "| model | dtype | peaks TFLOP/s | copy TB/s | bandwidth eff | pass overhead us | compute curve (tokens: eff) | profile |",
               "|---|---|---|---|---|---|---|---|"]
        for c in cals:
            peaks = ", ".join(f"{k} {v:.4g}" for k, v in sorted(c["peak_tflops"].items()))
            curve = ", ".join(f"{t:.0f}: {e:.3g}" for t, e in c["curve"])
            md.append(f"| {c['spec']} | {c['dtype']} | {peaks} | {c['bandwidth_tb_s']:.4g} | {c['bandwidth_efficiency']:.3f} | "
                      f"{c['pass_overhead_us']:.1f} | {curve} | `{c['profile']}` |")
        md += ["", "## Held-out validation", ""]
        for c in cals:
            em = f"; with the engine terms {c['engine_mape']:.1%}" if "engine_mape" in c else ""
            md += [f"**{c['spec']} {c['dtype']}**: MAPE {c['mape']:.1%} on the calibrated profile{em}", ""]
            md += _md_rows(c["rows"], c.get("engine_rows")) + [""]
            md.append("Anchor residuals (measured − profile) us: " + ", ".join(f"{tuple(a['point'])} {a['residual_s'] * 1e6:+.1f}" for a in c["anchors"]))
            md.append("")
    for e in engines:
        t = e["terms"]
        md += [f"## Engine terms ({e['dtype']}): `{e['profile']}`, engine id `{e['id']}`", "",
               "| layer kind | eager us | graph us | roofline us | kernels | fixed (layer_us) us |", "|---|---|---|---|---|---|"]
        for k in LAYER_KINDS:
            pt = t["parts"][k]
            g = pt.get("graph_s")
            md.append(f"| {k} | {pt['eager_s'] * 1e6:.2f} | {'-' if g is None else f'{g * 1e6:.2f}'} | {pt['roofline_s'] * 1e6:.3f} | "
                      f"{pt['kernels']} | {t['layer_us'][k]:.2f} |")
        md += ["", f"Launch per kernel {t['launch_us']:.3f} us ({t['launch_note']}); kernels per pass outside the layers {t['pass_kernels']}; "
               f"per-iteration host work {t['iteration_us']:.1f} us; collectives: {t['collectives_note']}.", ""]
        if t.get("collectives"):
            for op in ("all_reduce", "all_to_all"):
                c = t["collectives"][op]
                md.append(f"- {op}: alpha {c['alpha_us']:.2f} us, beta {c['beta_gb_s']:.1f} GB/s; "
                          + ", ".join(f"{pt['bytes']} B {pt['seconds'] * 1e6:.1f} us" for pt in c["points"]))
            md.append("")
    if live:
        r = live["report"]
        c = r.get("comparison")
        s = r["setup"]
        md += [f"## Live comparison ({s['dtype']} on {s['device']}, {r['trajectories']} trajectories x {r['repeats']} repeats, K={s['k']}, "
               f"token scale {s['token_scale']}, {s['clock']} clock)", ""]
        if c:
            eng = {row["phase"]: row for row in live["engine_comparison"]["rows"]} if live.get("engine_comparison") else {}
            md += ["| phase | measured s | repeats s | simulator s | error |" + (" engine s | engine error |" if eng else ""),
                   "|" + "---|" * (7 if eng else 5)]
            for row in c["rows"]:
                m = row["measured_s"]
                err = f"{(row['predicted_s'] - m) / m:+.1%}" if m > 0 else "-"
                line = f"| {row['phase']} | {m:.3f} | {row['spread_s'][0]:.3f}-{row['spread_s'][1]:.3f} | {row['predicted_s']:.3f} | {err} |"
                if eng:
                    p = eng[row["phase"]]["predicted_s"]
                    line += f" {p:.3f} | {(p - m) / m:+.1%} |" if m > 0 else f" {p:.3f} | - |"
                md.append(line)
            tot = f"| total | {c['measured_s']:.3f} | | {c['predicted_s']:.3f} | {c['error']:+.1%} |"
            if eng:
                ec = live["engine_comparison"]
                tot += f" {ec['predicted_s']:.3f} | {ec['error']:+.1%} |"
            md += [tot, ""]
        md.append("Protocol: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r["counts"].items()))
        md.append("Safety: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r["safety"].items()))
        md += [f"Targets: {r['targets']}", ""] + [f"Note: {n}" for n in r.get("notes", [])] + [""]
    md += ["## Not measured", ""] + [f"- {x}" for x in rec["not_measured"]] + [""]
    return "\n".join(md)


def write_record(run: Run, rec: dict, md: str) -> Path:
    """The record folder `<root>/<date>-<device>/` (profiles, record.json, record.md); with --out, also a tarball of it there."""
    from specagent.common import atomic
    from specagent.kernels.calibrate import slug

    name = f"{rec['date'][:10]}-{slug(rec['device']['name'].removeprefix('NVIDIA '))}"
    folder = run.plan.record_root / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, text in run.files.items():
        atomic.write_text(folder / fname, text)
    atomic.write_text(folder / "record.json", json.dumps(rec, indent=1, default=str) + "\n")
    atomic.write_text(folder / "record.md", md)
    if run.plan.out:
        out = run.plan.out
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / "record.tar.gz", "w:gz") as tar:
            tar.add(folder, arcname=name)
        for f in ("record.json", "record.md"):
            shutil.copyfile(folder / f, out / f)
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="cuda, cuda:N, cpu, or auto (cuda when available)")
    ap.add_argument("--budget-s", type=float, default=None, help="seconds the whole run may take (default 420 on a GPU, 60 on a CPU)")
    ap.add_argument("--scale", choices=("tiny", "bench"), default=None, help="model scale (default bench on a GPU, tiny on a CPU)")
    ap.add_argument("--dtypes", default=None, help="model dtypes to calibrate, in order (default bf16,fp32 on a GPU, fp32 on a CPU)")
    ap.add_argument("--live-dtype", default=None, help="dtype of the live run (default: the first of --dtypes)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per benchmark (default 7 on a GPU, 3 on a CPU)")
    ap.add_argument("--live-trajectories", type=int, default=None, help="at most this many trajectories live (default 24 on a GPU, 2 on a CPU)")
    ap.add_argument("--live-repeats", type=int, default=None, help="at most this many repeats (default 3 on a GPU, 1 on a CPU)")
    ap.add_argument("--token-scale", type=float, default=None, help="token scale of the live workload (default kernels.configs.LIVE_TOKEN_SCALE)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--no-live", action="store_true", help="skip the live comparison")
    ap.add_argument("--record-root", default=None, help="folder of dated records (default measurements/calibrations on a GPU, out/gpu-calibration on a CPU)")
    ap.add_argument("--out", default=None, help="also put record.tar.gz, record.json and record.md here (the shell script passes $OUT)")
    args = ap.parse_args(argv)
    plan = make_plan(args)
    run = Run(plan)
    from specagent.kernels.configs import strong_spec, weak_spec

    run.say(f"specagent GPU calibration: device {plan.device}, budget {plan.budget_s:.0f} s, scale {plan.scale}, dtypes {plan.dtypes}, "
            f"torch {torch.__version__}")
    tmp = tempfile.TemporaryDirectory(prefix="specagent-gpucal-")
    run.record["_tmp"] = tmp.name
    run.record["date"] = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    run.record["device"] = run.stage("device facts", lambda: device_record(plan), force=True) or {"name": plan.device}
    run.say(f"  {run.record['device'].get('name')}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    cals: list[dict] = []
    engines: list[dict] = []
    by_dtype: dict[str, dict[str, dict]] = {}
    first_cal_s: float | None = None
    for i, dtype in enumerate(plan.dtypes):
        keep = 0.0 if (i == 0 or not plan.live) else LIVE_SHARE * plan.budget_s
        for name, spec in (("weak", weak_spec(plan.scale)), ("strong", strong_spec(plan.scale))):
            est = 0.0 if first_cal_s is None else first_cal_s * (1.5 if name == "strong" else 1.0) * (1.3 if dtype == "fp32" else 1.0)
            t = time.monotonic()
            c = run.stage(f"calibrate {name} {dtype}", lambda spec=spec, name=name, dtype=dtype: calibrate_one(run, name, spec, dtype), est, keep)
            if c is not None:
                first_cal_s = first_cal_s or (time.monotonic() - t)
                cals.append(c)
                by_dtype.setdefault(dtype, {})[name] = c
        if set(by_dtype.get(dtype, {})) == {"weak", "strong"}:
            est = 0.0 if not engines else 0.5 * (first_cal_s or 0.0)
            e = run.stage(f"engine terms {dtype}", lambda dtype=dtype: engine_one(run, dtype, by_dtype[dtype], collectives=not engines), est, keep)
            if e is not None:
                engines.append(e)
    live = None
    if plan.live:
        if set(by_dtype.get(plan.live_dtype, {})) == {"weak", "strong"}:
            eng = next((e for e in engines if e["dtype"] == plan.live_dtype), None)
            live = run.stage(f"live comparison ({plan.live_dtype})", lambda: live_stage(run, by_dtype[plan.live_dtype], eng))
        else:
            run.stages.append({"name": "live comparison", "status": f"skipped: no calibrated {plan.live_dtype} profiles of both models", "seconds": 0.0})
    rec = build_record(run, cals, engines, live)
    folder = write_record(run, rec, markdown(rec, cals, engines, live))
    tmp.cleanup()
    failed = [s for s in run.stages if s["status"].startswith("failed")]
    run.say(f"record written to {folder}" + (f" and {plan.out}" if plan.out else "") + f"; {len(failed)} stage(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
