"""`specagent predict`, `specagent simulate` and `specagent predictor validate`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from specagent import atomic
from specagent.console import fail
from specagent.costmodel.deployment import Deployment, DeploymentDoesNotFit
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.hardware.engine import DEFAULT_ENGINE, EngineProfileError, load_engine
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.acceptance import AcceptanceModel
from specagent.simulator.predictor import validate_predictor
from specagent.simulator.run import DEFAULT_STRATEGIES, ENGINES, compare, simulate
from specagent.simulator.setting import Setting, edge_setting, load_api_models
from specagent.simulator.strategies import REVIEW_POLICIES, STRATEGY_HELP, STRATEGY_NAMES

console = Console()
err = Console(stderr=True)

predictor_app = typer.Typer(help="The verdict-token cost predictor: Strong verdict + repair tokens → Strong share of memory traffic.", no_args_is_help=True)


def _default_trace() -> Path:
    from specagent.traces import default_workload_path

    return Path(default_workload_path())


def load_trace(path: Optional[Path]):
    from specagent.traces import load_trajectories

    p = path or _default_trace()
    try:
        return load_trajectories(p), p
    except FileNotFoundError:
        fail(f"{p}: no such trace file")
    except ValueError as exc:
        fail(str(exc))


def synthetic_table(profile: str, n: int, seed: int):
    """--synthetic: the workload as a UnitTable, and how to name it."""
    from specagent.simulator.plan import synthetic_unit_table
    from specagent.traces.profile import load_profile

    if n < 1:
        fail(f"--trajectories must be >= 1, got {n}")
    try:
        prof = load_profile(profile)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    return synthetic_unit_table(prof, n, seed), f"synthetic {prof.name} ×{n:,} (seed {seed})"


def build_setting(weak_model: str, weak_hardware: str, weak_gpus: int, weak_dtype: str, strong_model: str, strong_hardware: str,
                  strong_gpus: int, strong_dtype: str, strong_api: Optional[str], edge: bool, prefix_caching: bool,
                  weight_mode: str, verifier_prompt: str, serving_engine: str = DEFAULT_ENGINE) -> Setting:
    try:
        eng = load_engine(serving_engine)
        if edge:
            s = edge_setting(api=strong_api or "qwen3.5-397b-a17b-api", prefix_caching=prefix_caching,
                             weight_mode=weight_mode, verifier_prompt=verifier_prompt)
            return dataclasses.replace(s, weak=dataclasses.replace(s.weak, engine=eng))
        weak = Deployment(load_model_spec(weak_model), load_hardware(weak_hardware), gpus=weak_gpus, weight_dtype=weak_dtype, engine=eng)
        if strong_api:
            apis = load_api_models()
            if strong_api not in apis:
                fail(f"unknown --strong-api '{strong_api}'; known: {', '.join(apis)}")
            strong = apis[strong_api]
        else:
            strong = Deployment(load_model_spec(strong_model), load_hardware(strong_hardware), gpus=strong_gpus, weight_dtype=strong_dtype,
                                engine=eng)
        setting = Setting(weak=weak, strong=strong, prefix_caching=prefix_caching, weight_mode=weight_mode, verifier_prompt=verifier_prompt)
        weak.check_fit(1, 32768)
        if isinstance(strong, Deployment):
            strong.check_fit(1, 32768)
        return setting
    except (ModelSpecError, HardwareProfileError, EngineProfileError, DeploymentDoesNotFit, ValueError) as exc:
        fail(str(exc))


def _acceptance(accept: Optional[float], weak_ratio: float, verdict_tokens: int, p_valid_replacement: float) -> AcceptanceModel:
    base = AcceptanceModel.constant(accept) if accept is not None else AcceptanceModel()
    return dataclasses.replace(base, weak_token_ratio=weak_ratio, verdict_tokens=verdict_tokens, p_valid_replacement=p_valid_replacement)


# Shared options -------------------------------------------------------------------
O = typer.Option
TRACE = O(None, "--trace", help="Trajectories (JSONL or Parquet in specagent's trace schema). Default: the shipped τ²-Bench airline workload.")
SYNTH = O(None, "--synthetic", help="Instead of --trace: synthetic trajectories from a workload profile (name or TOML; "
          "`specagent traces profiles` lists them), generated as columns and planned in lockstep: the fast path for 10^4-10^6 trajectories.")
SYNTH_N = O(10_000, "--trajectories", help="How many synthetic trajectories --synthetic generates (seeded by --seed).")
WEAK_MODEL = O("qwen3.5-4b", help="Weak model (HF id, short name or config.json).")
WEAK_HW = O("h20", help="Weak model's GPU profile.")
WEAK_GPUS = O(1, help="GPUs per Weak replica.")
WEAK_DTYPE = O("bf16", help="Weak weight dtype.")
STRONG_MODEL = O("qwen3.5-397b-a17b", help="Strong model.")
STRONG_HW = O("h20", help="Strong model's GPU profile.")
STRONG_GPUS = O(8, help="GPUs per Strong replica (the default 8×H20 needs fp8 weights to fit).")
STRONG_DTYPE = O("fp8", help="Strong weight dtype.")
STRONG_API = O(None, help="Price the Strong model as a hosted API instead (see simulator/data/api_models.toml).")
EDGE = O(False, "--edge", help="Edge–cloud setting: Weak on one RTX 5090, Strong behind an API.")
PREFIX = O(True, "--prefix-caching/--no-prefix-caching", help="Each call prefills only what its model has not cached.")
WMODE = O("union", help="'union': a pass reads every distinct expert its tokens touch; 'active': only the active parameters.")
VPROMPT = O("cached", help="Verifier prompt: 'cached' (append-only, reads only what is new) or 'fresh' (re-reads a system prompt + whole history each review).")
K = O(4, "--k", help="K: most steps the Weak model drafts before a chunk ends.")
REVIEW = O("on_write", help=f"Review trigger: {', '.join(REVIEW_POLICIES)}.")
ACCEPT = O(None, help="One acceptance probability for every step kind (default: the per-kind illustrative table shown in the output).")
WEAK_RATIO = O(1.0, help="Weak tokens per Strong token for the same step.")
VERDICT = O(48, help="Tokens in a rejection verdict's reason (its replacement call is counted on top).")
PVALID = O(0.5, help="Chance a verdict's replacement call is valid (else one Strong repair turn).")
SEED = O(0, help="Seed of every random draw (same seed, same bytes out).")
SERVING_ENGINE = O(DEFAULT_ENGINE, "--serving-engine", help="Serving-engine profile whose fixed costs every pass pays (hardware/engines/: "
                   "vllm, sglang, tensorrt-llm, ideal = the bare roofline; or a .toml path; NAME:eager turns CUDA graphs off).")


def _rel_table(summary: pd.DataFrame, title: str) -> Table:
    t = Table(title=title, show_edge=False)
    t.add_column("strategy", no_wrap=True, min_width=max(len(str(s)) for s in summary.index))
    cols = [("total_bytes_read_rel", "memory traffic (both)"), ("strong_bytes_read_rel", "Strong memory traffic"),
            ("wall_time_s_rel", "wall time"), ("total_flops_rel", "FLOPs (both)"),
            ("strong_decode_tokens_rel", "Strong decode tokens"), ("strong_calls_rel", "Strong calls"), ("api_usd_rel", "API $")]
    cols = [c for c in cols if c[0] in summary]
    for _, name in cols:
        t.add_column(name, justify="right", min_width=5)  # figures are never cut; headers wrap instead
    if "measured_success" in summary:
        t.add_column("measured success", justify="right", min_width=5)
    for strat, row in summary.iterrows():
        cells = [f"{row[c]:.3f}" for c, _ in cols]
        if "measured_success" in summary:
            cells.append("-" if pd.isna(row["measured_success"]) else f"{row['measured_success']:.2f}")
        t.add_row(str(strat), *cells)
    if "label" in summary:
        t.caption = "; ".join(f"{s} = {label}" for s, label in summary["label"].items())
    return t


def _phase_table(phase: pd.DataFrame, baseline_total: float, title: str, unit: str) -> Table:
    t = Table(title=title, show_edge=False)
    t.add_column("strategy", no_wrap=True, min_width=max(len(str(s)) for s in phase.index))
    for c in phase.columns:
        t.add_column(c.replace("_", " "), justify="right", min_width=5)
    for strat, row in phase.iterrows():
        t.add_row(str(strat), *[f"{v / baseline_total:.3f}" if baseline_total else f"{v:.3g}" for v in row.values])
    t.caption = (f"each phase's {unit} relative to Strong-only's total" if baseline_total
                 else f"absolute {unit}: Strong-only's is 0 here (a hosted Strong model's traffic is not visible)")
    return t


def _assumption_table(assumptions: dict) -> Table:
    t = Table(title="Assumptions (every figure above depends on these)", show_header=False)
    t.add_column("what")
    t.add_column("value", overflow="fold")
    for k, v in assumptions["setting"].items():
        t.add_row(k, v)
    acc = assumptions["acceptance_model"]
    t.add_row("acceptance (semantic) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["accept"].items()))
    t.add_row("acceptance (exact step) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["exact"].items()))
    t.add_row("position decay / correlation", f"{acc['position_decay']:g} / {acc['correlation']:g}")
    t.add_row("weak token ratio", f"{acc['weak_token_ratio']:g}")
    t.add_row("verdict tokens (reject / accept)", f"{acc['verdict_tokens']} (+ replacement call) / {acc['accept_verdict_tokens']}")
    t.add_row("p(valid replacement)", f"{acc['p_valid_replacement']:g}")
    t.add_row("router p(Strong) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["route_strong"].items()))
    t.add_row("escalation recall (collab)", f"{acc['escalation_recall']:g}")
    t.add_row("acceptance source", acc["source"])
    for name in ("workload", "trajectories", "seed", "engine", "quality"):
        t.add_row(name, str(assumptions[name]))
    sa = assumptions["strategies"].get("specagent")
    if sa:
        t.add_row("SpecAgent", f"K={sa['k']}, review={sa['review']}, verifier={sa['verifier']}")
    return t


def predict(
    trace: Optional[Path] = TRACE,
    strategies: str = O(",".join(DEFAULT_STRATEGIES), help="Comma-separated strategies: " + "; ".join(f"{k} = {v}" for k, v in STRATEGY_HELP.items())),
    out: Path = O(Path("out/predict"), "-o", "--out", help="Directory for per_trajectory.parquet and summary.json."),
    report: Optional[Path] = O(None, "--report", help="Also write a self-contained HTML report here."),
    success: Optional[Path] = O(None, help="JSON {strategy: measured success rate} to carry into the outputs (never invented)."),
    weak_model: str = WEAK_MODEL, weak_hardware: str = WEAK_HW, weak_gpus: int = WEAK_GPUS, weak_dtype: str = WEAK_DTYPE,
    strong_model: str = STRONG_MODEL, strong_hardware: str = STRONG_HW, strong_gpus: int = STRONG_GPUS, strong_dtype: str = STRONG_DTYPE,
    strong_api: Optional[str] = STRONG_API, edge: bool = EDGE, prefix_caching: bool = PREFIX, weight_mode: str = WMODE,
    verifier_prompt: str = VPROMPT, k: int = K, review: str = REVIEW, accept: Optional[float] = ACCEPT,
    weak_ratio: float = WEAK_RATIO, verdict_tokens: int = VERDICT, p_valid_replacement: float = PVALID, seed: int = SEED,
    serving_engine: str = SERVING_ENGINE,
    engine: str = O("analytic", help=f"Engine: {', '.join(ENGINES)} (they agree on uncontended resources)."),
    as_json: bool = O(False, "--json", help="Print the summary as JSON instead of tables."),
) -> None:
    """Predict what every strategy costs relative to Strong-only, on the built-in default setting.

    Default: Qwen3.5-4B Weak (1×H20, bf16) and Qwen3.5-397B-A17B Strong (8×H20, fp8 weights)
    on the shipped τ²-Bench airline workload, K=4, review on writes, batch 1 (no fleet
    contention; see `specagent plan` for fleets). Every assumption is printed with the results.
    """
    trajs, path = load_trace(trace)
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    unknown = [s for s in names if s not in STRATEGY_NAMES]
    if unknown:
        fail(f"unknown strategies {unknown}; known: {', '.join(STRATEGY_NAMES)}")
    if "strongonly" not in names:
        names.insert(0, "strongonly")
    setting = build_setting(weak_model, weak_hardware, weak_gpus, weak_dtype, strong_model, strong_hardware, strong_gpus,
                            strong_dtype, strong_api, edge, prefix_caching, weight_mode, verifier_prompt, serving_engine)
    acc = _acceptance(accept, weak_ratio, verdict_tokens, p_valid_replacement)
    rates = None
    if success:
        try:
            rates = {str(k2): float(v) for k2, v in json.loads(success.read_text()).items()}
        except (OSError, ValueError, AttributeError) as exc:
            fail(f"{success}: expected a JSON object {{strategy: success rate}} ({exc})")
    with Progress(console=err, transient=True) as prog:
        task = prog.add_task(f"simulating {len(names)} strategies × {len(trajs)} trajectories", total=None)
        comp = compare(trajs, names, setting, acc, seed, engine, k, review, workload=Path(path).name, success_rates=rates)
        prog.update(task, completed=1)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_parquet(out / "per_trajectory.parquet", comp.per_trajectory)
    summary_obj = {
        "summary": comp.summary.reset_index().to_dict(orient="records"),
        "phase_time": comp.phase_time.reset_index().to_dict(orient="records"),
        "phase_bytes": comp.phase_bytes.reset_index().to_dict(orient="records"),
        "phase_flops": comp.phase_flops.reset_index().to_dict(orient="records"),
        "assumptions": comp.assumptions,
        "trace": str(path),
        "per_trajectory": "per_trajectory.parquet",
    }
    atomic.write_json(out / "summary.json", summary_obj)
    if as_json:
        print(json.dumps(summary_obj, indent=2, default=str))
    else:
        console.print(_rel_table(comp.summary, f"Relative to Strong-only — {len(trajs)} trajectories from {Path(path).name} "
                                               f"[{setting.weight_mode} weight reads, {engine} engine]"))
        base = comp.summary.loc["strongonly"]
        console.print(_phase_table(comp.phase_bytes, float(base["total_bytes_read"]), "Memory traffic by phase", "memory reads"))
        console.print(_phase_table(comp.phase_time, float(base["wall_time_s"]), "Wall time by phase", "wall time"))
        console.print(_phase_table(comp.phase_flops, float(base["total_flops"]), "FLOPs by phase", "FLOPs"))
        console.print(_assumption_table(comp.assumptions))
        console.print(f"wrote {out / 'per_trajectory.parquet'} and {out / 'summary.json'}")
    if report:
        try:
            from specagent.reports.html import write_report
        except ImportError as exc:
            fail(f"the HTML report needs specagent.reports ({exc})")
        written = write_report(comp, report, extra={"setting": setting}, images=True)
        console.print(f"wrote report {report} ({len(written.included)} figures)")
        if written.images is not None:
            console.print(written.images.message or f"wrote {len(written.images.written)} PNG/SVG figure files")
        for key, reason in written.omitted.items():
            console.print(f"  figure {key} left out: {reason}")


def simulate_cmd(
    strategy: str = typer.Argument("specagent", help="Strategy: " + ", ".join(STRATEGY_NAMES)),
    trace: Optional[Path] = TRACE,
    synthetic: Optional[str] = SYNTH, trajectories: int = SYNTH_N,
    out: Optional[Path] = O(None, "-o", "--out", help="Write the per-trajectory results as Parquet here."),
    weak_model: str = WEAK_MODEL, weak_hardware: str = WEAK_HW, weak_gpus: int = WEAK_GPUS, weak_dtype: str = WEAK_DTYPE,
    strong_model: str = STRONG_MODEL, strong_hardware: str = STRONG_HW, strong_gpus: int = STRONG_GPUS, strong_dtype: str = STRONG_DTYPE,
    strong_api: Optional[str] = STRONG_API, edge: bool = EDGE, prefix_caching: bool = PREFIX, weight_mode: str = WMODE,
    verifier_prompt: str = VPROMPT, k: int = K, review: str = REVIEW, accept: Optional[float] = ACCEPT,
    weak_ratio: float = WEAK_RATIO, verdict_tokens: int = VERDICT, p_valid_replacement: float = PVALID, seed: int = SEED,
    serving_engine: str = SERVING_ENGINE,
    engine: str = O("analytic", help=f"Engine: {', '.join(ENGINES)}."),
    as_json: bool = O(False, "--json"),
) -> None:
    """Run one strategy on a trace with every parameter as a flag; print per-model totals."""
    if strategy not in STRATEGY_NAMES:
        fail(f"unknown strategy '{strategy}'; known: {', '.join(STRATEGY_NAMES)}")
    if synthetic and trace:
        fail("give --trace or --synthetic, not both")
    trajs, path = synthetic_table(synthetic, trajectories, seed) if synthetic else load_trace(trace)
    setting = build_setting(weak_model, weak_hardware, weak_gpus, weak_dtype, strong_model, strong_hardware, strong_gpus,
                            strong_dtype, strong_api, edge, prefix_caching, weight_mode, verifier_prompt, serving_engine)
    try:
        frame = simulate(trajs, strategy, setting, _acceptance(accept, weak_ratio, verdict_tokens, p_valid_replacement), seed, engine, k, review)
    except ValueError as exc:
        fail(str(exc))
    if out:
        atomic.write_parquet(out, frame)
    cols = ["weak_flops", "strong_flops", "weak_bytes_read", "strong_bytes_read", "weak_prefill_tokens", "weak_decode_tokens",
            "strong_prefill_tokens", "strong_decode_tokens", "weak_calls", "strong_calls", "reviews", "rejections", "repairs",
            "wall_time_s", "api_usd"]
    totals = {c: float(frame[c].sum()) for c in cols}
    if as_json:
        print(json.dumps({"strategy": strategy, "trace": str(path), "setting": setting.describe(), "totals": totals}, indent=2))
        return
    source = path if synthetic else Path(path).name
    t = Table(title=f"{frame['label'].iloc[0]} — {len(frame):,} trajectories from {source} [{weight_mode}, {engine}]")
    t.add_column("total")
    t.add_column("value", justify="right")
    for c, v in totals.items():
        t.add_row(c, f"{v:,.4g}" if abs(v) >= 1e6 else f"{v:,.0f}" if v.is_integer() else f"{v:,.2f}")
    console.print(t)
    if out:
        console.print(f"wrote {out}")


@predictor_app.command("validate")
def predictor_validate(
    trace: list[Path] = O(None, "--trace", help="One or more traces (each a workload). Default: the shipped τ²-Bench airline workload."),
    synthetic: int = O(60, help="Also validate on this many synthetic trajectories from every shipped workload profile (0: none)."),
    strategies: str = O("specagent,specagent_every_chunk,specagent_hold_replies,collab,router", help="Comma-separated strategies to check."),
    k: int = K, seed: int = SEED,
    out: Optional[Path] = O(None, "-o", "--out", help="Write the validation table as JSON here."),
    as_json: bool = O(False, "--json"),
) -> None:
    """Predict the Strong share of memory traffic from verdict + repair tokens alone; report its error.

    The error is shown under both weight-read modes: 'union' (a verification prefill reads
    every expert its tokens touch) and 'active' (only active parameters), since the
    predictor's accuracy depends on which one describes your serving stack.
    """
    from specagent.traces import load_trajectories
    from specagent.traces.profile import list_profiles, load_profile
    from specagent.traces.synth import synthesize

    paths = trace or [_default_trace()]
    workloads = {}
    for p in paths:
        try:
            workloads[p.name] = load_trajectories(p)
        except (OSError, ValueError) as exc:
            fail(f"{p}: {exc}")
    if synthetic > 0:
        for name in list_profiles():
            workloads[f"synthetic:{name}"] = synthesize(load_profile(name), synthetic, seed)
    with Progress(console=err, transient=True) as prog:
        prog.add_task(f"validating on {len(workloads)} workloads", total=None)
        table = validate_predictor(workloads, strategies=[s.strip() for s in strategies.split(",")], seed=seed, k=k)
    if out:
        atomic.write_json(out, table.to_dict(orient="records"))
    if as_json:
        print(table.to_json(orient="records", indent=2))
        return
    t = Table(title="Verdict-token predictor: Strong share of memory reads (both models)")
    for c in ("workload", "strategy", "weight mode"):
        t.add_column(c, overflow="fold")
    for c in ("predicted", "accounted", "abs error", "mean |err| per traj"):
        t.add_column(c, justify="right")
    for _, r in table.iterrows():
        t.add_row(r["workload"], r["strategy"], r["weight_mode"], f"{r['predicted_strong_share']:.4f}", f"{r['accounted_strong_share']:.4f}",
                  f"{r['abs_error']:.4f}", f"{r['mean_abs_error_per_trajectory']:.4f}")
    console.print(t)
    worst = table.groupby("weight_mode")["abs_error"].max()
    console.print("largest absolute error of the share: " + ", ".join(f"{m} {v:.4f}" for m, v in worst.items()))
