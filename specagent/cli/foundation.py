"""The foundation commands (hardware, models, roofline): thin wrappers over the cost model's building blocks.

Apart from the root (app.py) so that the root's start-up, and every other command's, imports neither the cost model nor
the scenario (issue #34: `replay` and `--help` start-up); mounted lazily like the rest (lazy.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.cli.options import deployment_flag, deployment_options, does_not_fit
from specagent.costmodel.balance import balance_point
from specagent.costmodel.deployment import Deployment, DeploymentDoesNotFit
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, shipped_models
from specagent.costmodel.phases import PHASE_FUNCTIONS, PHASES
from specagent.costmodel.latency import FIXED_TERMS
from specagent.costmodel.roofline import WEIGHT_MODES, coefficients
from specagent.hardware.profile import ENV_VAR, HardwareProfileError, list_profiles, load_hardware
from specagent.simulator.scenario import DeploymentSpec, Scenario, ScenarioError
from specagent.traces.schema import MAX_CONTEXT_TOKENS

hardware_app = typer.Typer(help="GPU profiles: peak FLOP/s, memory, bandwidth, efficiencies, each with its source.", no_args_is_help=True)
models_app = typer.Typer(help="Model specs read from Hugging Face config.json files.", no_args_is_help=True)
roofline_app = typer.Typer(
    help="Roofline estimate of one forward pass: FLOPs and HBM bytes by component, time, and the bound.\n\n"
    "A pass is compute-bound when its arithmetic intensity (FLOP/byte) exceeds the hardware ridge.",
    invoke_without_command=True,
)

console = SafeConsole()


HardwareDirOpt = typer.Option(None, "--hardware-dir", help=f"Extra directory of hardware profile TOML files (also ${ENV_VAR}); serving-engine profiles in its engines/ folder.")


def _hardware_dirs(hardware_dir: Optional[Path]) -> list[Path]:
    if hardware_dir is not None and not hardware_dir.is_dir():
        fail(f"--hardware-dir {hardware_dir}: {'not a folder' if hardware_dir.exists() else 'no such folder'} "
             "(expected a folder of hardware profile TOML files)")
    return [hardware_dir] if hardware_dir else []


def build_deployment(spec: DeploymentSpec, hardware_dir: Optional[Path] = None) -> Deployment:  # type: ignore[valid-type]
    try:
        return spec.build(_hardware_dirs(hardware_dir))
    except ScenarioError as exc:
        fail(f"{deployment_flag('', exc.where)}: {exc}" if exc.where else str(exc))


# ---------------------------------------------------------------- hardware
@hardware_app.command("list")
def hardware_list(hardware_dir: Optional[Path] = HardwareDirOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """List known GPU profiles with their BF16 ridge point (peak FLOP/s ÷ bandwidth)."""
    try:
        profs = list_profiles(_hardware_dirs(hardware_dir))
    except HardwareProfileError as exc:
        fail(str(exc))
    rows = [
        dict(id=p.id, name=p.name, bf16_tflops=p.peak_tflops["bf16"].value, memory_gb=p.memory_capacity_gb.value,
             bandwidth_tb_s=p.memory_bandwidth_tb_s.value, ridge_bf16=round(p.ridge("bf16"), 1),
             usd_per_gpu_hour=p.price_usd_per_gpu_hour.value if p.price_usd_per_gpu_hour else None)
        for p in profs
    ]
    if as_json:
        print(json_out(rows, indent=2))
        return
    from specagent.reports.screens.tables import Col, fitted  # rich: only where a table is printed

    cols = (Col("id", "left"), Col("name", "left", optional=True), Col("BF16\nTFLOP/s"), Col("memory\nGB"),
            Col("HBM\nTB/s"), Col("ridge\nFLOP/B"), Col("$ per\nGPU-h"))
    cells = [(r["id"], r["name"], f"{r['bf16_tflops']:g}", f"{r['memory_gb']:g}", f"{r['bandwidth_tb_s']:g}",
              f"{r['ridge_bf16']:.0f}", "-" if r["usd_per_gpu_hour"] is None else f"{r['usd_per_gpu_hour']:.2f}") for r in rows]
    console.print(fitted(console, cols, cells, title="Hardware profiles (dense peaks, per GPU)",
                         caption="id: what --hardware, --gpu and --price take (aliases work too); ridge: BF16 peak FLOP/s ÷ "
                                 "HBM bandwidth; $ per GPU-h: the profile's sourced price (`hardware show ID` cites it)",
                         left_out="`hardware show ID` and --json have them"))


@hardware_app.command("show")
def hardware_show(name: str = typer.Argument(..., help="Profile id, alias or path to a .toml file."),
                  hardware_dir: Optional[Path] = HardwareDirOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """Every figure of one profile with its source, and its ridge points."""
    try:
        p = load_hardware(name, _hardware_dirs(hardware_dir))
    except HardwareProfileError as exc:
        fail(str(exc))
    items: list[tuple[str, object, str]] = []
    for k, v in p.peak_tflops.items():
        items.append((f"peak {k} TFLOP/s", v.value, v.source))
    for label, v in (("memory GB", p.memory_capacity_gb), ("bandwidth TB/s", p.memory_bandwidth_tb_s), ("memory kind", p.memory_kind),
                     ("interconnect", p.interconnect_kind), ("interconnect GB/s", p.interconnect_gb_s),
                     ("interconnect GB/s one way", p.interconnect_unidirectional_gb_s), ("GEMM MFU (prefill_mfu)", p.prefill_mfu),
                     ("bandwidth efficiency", p.bandwidth_efficiency),
                     ("pass overhead µs", p.pass_overhead_us), ("$/GPU-hour", p.price_usd_per_gpu_hour)):
        if v is not None:
            items.append((label, v.value, v.source))
    ridges = {k: p.ridge(k) for k in p.peak_tflops}
    for k, r in ridges.items():
        items.append((f"ridge {k} FLOP/B", round(r, 1), "derived: peak ÷ bandwidth"))
    if p.compute_efficiency_curve:
        items.append(("compute efficiency curve", list(p.compute_efficiency_curve), "calibration (tokens per pass → MFU)"))
    if p.decode_efficiency_curve:
        items.append(("decode efficiency curve", list(p.decode_efficiency_curve), "calibration (decode batch → MFU of pure-decode passes)"))
    if as_json:
        print(json_out({"id": p.id, "name": p.name, "path": p.path, "figures": [dict(name=a, value=b, source=c) for a, b, c in items]}, indent=2, default=str))
        return
    _print_figures(f"{p.name} ({p.id})", p.path, items)


def _print_figures(title: str, path: object, items: list[tuple[str, object, str]]) -> None:
    """Each figure with its value and a numbered source, the sources (each once) below as prose, so the table fits
    80 columns and no source is cut; a list (a calibrated curve) is written out below the table too."""
    from specagent.reports.screens.tables import Col, fitted  # rich: only where a table is printed

    sources: dict[str, int] = {}
    cells, lists = [], []
    for a, b, c in items:
        ref = f"[{sources.setdefault(c, len(sources) + 1)}]"
        if isinstance(b, (list, tuple)):
            lists.append(f"{a}: {b}")
            b = f"{len(b)} points, below"
        cells.append((a, str(b), ref))
    console.print(fitted(console, (Col("figure", "left"), Col("value"), Col("source", "left")), cells, title=title))
    for line in (f"file: {path}", *lists, "Sources:", *(f"[{i}] {c}" for c, i in sources.items())):
        console.print(line, highlight=False, markup=False)


# ---------------------------------------------------------------- models
@models_app.command("list")
def models_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Shipped model configs with parameter counts (total / active per token) re-derived from their fields."""
    rows = []
    for hf_id in shipped_models():
        s = load_model_spec(hf_id)
        p = s.param_counts()
        rows.append(dict(model=hf_id, type=s.model_type, layers=s.num_layers, full=s.num_full_layers, linear=s.num_linear_layers,
                         total_b=round(p.total / 1e9, 3), active_b=round(p.active / 1e9, 3),
                         kv_kib_per_token=s.kv_bytes_per_token() / 1024, state_mb=round(s.state_bytes_per_sequence() / 1e6, 1)))
    if as_json:
        print(json_out(rows, indent=2))
        return
    # the name is what a user types: never cut; figures never cut either (cli/fit_table.py)
    from specagent.reports.screens.tables import Col, fitted  # rich: only where a table is printed

    orgs = sorted({r["model"].split("/", 1)[0] for r in rows})
    cols = (Col("model", "left"), Col("type", "left", optional=True), Col("lin/\nfull"), Col("total\nB"), Col("act.\nB"),
            Col("KV\nKiB"), Col("state\nMB"))
    cells = [(r["model"].split("/", 1)[1], r["type"], f"{r['linear']}/{r['full']}", f"{r['total_b']:.2f}", f"{r['active_b']:.2f}",
              f"{r['kv_kib_per_token']:.0f}", f"{r['state_mb']:.1f}") for r in rows]
    console.print(fitted(console, cols, cells, title="Shipped model specs (text model, MTP head excluded)",
                         caption=f"model: the name to pass as --model / --weak-model / --strong-model (the full id "
                                 f"{' or '.join(o + '/<model>' for o in orgs)} works too); lin/full: linear/full-attention "
                                 "layers; total/act.: parameters in billions (all / active per token); KV cache per token "
                                 "(bf16); Gated DeltaNet state per sequence", left_out="`models show MODEL` and --json have them"))


@models_app.command("show")
def models_show(model: str = typer.Argument(..., help="HF id, short name, or path to a config.json."), as_json: bool = typer.Option(False, "--json")) -> None:
    """Parameter counts by component, KV bytes per token and recurrent state per sequence."""
    try:
        s = load_model_spec(model)
    except ModelSpecError as exc:
        fail(str(exc))
    p = s.param_counts().as_dict()
    info = dict(model=s.name, model_type=s.model_type, source=s.source, layers=s.num_layers, full_attention_layers=s.num_full_layers,
                linear_attention_layers=s.num_linear_layers, moe_layers=s.num_moe_layers, params=p,
                kv_bytes_per_token_bf16=s.kv_bytes_per_token(), state_bytes_per_sequence=s.state_bytes_per_sequence())
    if as_json:
        print(json_out(info, indent=2))
        return
    from rich.table import Table  # only where a table is printed: off every other command's start-up
    t = Table(title=f"{s.name} ({s.model_type}) — {s.source}")
    t.add_column("component")
    t.add_column("parameters", justify="right")
    for k, v in p.items():
        t.add_row(k, f"{v:,}")
    t.add_row("KV bytes / token (bf16)", f"{s.kv_bytes_per_token():,.0f}")
    t.add_row("recurrent state bytes / sequence", f"{s.state_bytes_per_sequence():,.0f}")
    console.print(t)


# ---------------------------------------------------------------- roofline
#: Sequences in one pass: a guard against a typo (vLLM's default max_num_seqs is 256-1024), not a limit of the model.
MAX_BATCH = 1 << 20


def _check_tokens(**counts: int) -> None:
    """--context >= 0, --tokens >= 1, each at most the largest context window a public model has."""
    for name, v in counts.items():
        lo = 0 if name == "context" else 1
        if not lo <= v <= MAX_CONTEXT_TOKENS:
            fail(f"--{name}: expected tokens per sequence in [{lo}, {MAX_CONTEXT_TOKENS:,}] (the largest context window), got {v}")


def _check_weight_mode(weight_mode: str) -> None:
    if weight_mode not in WEIGHT_MODES:
        fail(f"--weight-mode: expected one of {', '.join(WEIGHT_MODES)}, got '{weight_mode}'")


def _fmt_bytes(x: float) -> str:
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} B"


def _fmt_flops(x: float) -> str:
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} FLOP"


def _pass_does_not_fit(dep: Deployment, batch: int, context: int, new: int, exc: DeploymentDoesNotFit) -> str:
    """Name what does not fit: the batch's KV cache and state, the context's, or the weights themselves."""
    if batch > 1 and dep.max_sequences(context + new) >= 1:
        return f"--batch {batch}: {exc}; one sequence fits: lower --batch (or --context)"
    if context > 0 and dep.max_sequences(new) >= 1:
        return f"--context {context}: {exc}; lower --context"
    return does_not_fit(str(exc), "")


@roofline_app.callback()
@deployment_options(Scenario.strong)
def roofline(
    ctx: typer.Context,
    deployment: DeploymentSpec,  # type: ignore[valid-type]  # the deployment flags, generated (default: the Scenario's Strong)
    phase: str = typer.Option("decode", help=f"One of {', '.join(PHASES)}."),
    batch: int = typer.Option(1, help="Sequences in the pass."),
    context: int = typer.Option(8192, help="Cached tokens per sequence before the pass."),
    tokens: int = typer.Option(512, help="New tokens per sequence (prefill/verify only; decode adds 1)."),
    weight_mode: str = typer.Option("union", help="'union': an MoE pass reads every distinct expert its tokens touch; 'active': only top-k per layer."),
    hardware_dir: Optional[Path] = HardwareDirOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Break one pass down into FLOPs and bytes by component, and say which bound applies."""
    if ctx.invoked_subcommand is not None:
        return
    if phase not in PHASES:
        fail(f"--phase must be one of {', '.join(PHASES)}, got '{phase}'")
    _check_tokens(context=context, tokens=tokens)
    if not 1 <= batch <= MAX_BATCH:
        fail(f"--batch: expected sequences in one pass in [1, {MAX_BATCH:,}], got {batch}")
    _check_weight_mode(weight_mode)
    dep = build_deployment(deployment, hardware_dir)
    new = 1 if phase in ("decode", "repair") else tokens
    try:
        dep.check_fit(batch, context + new)
    except DeploymentDoesNotFit as exc:
        fail(_pass_does_not_fit(dep, batch, context, new, exc))
    fn = PHASE_FUNCTIONS[phase]
    cost = fn(dep, context=context, batch=batch, weight_mode=weight_mode) if phase in ("decode", "repair") else fn(dep, tokens, context, batch, weight_mode=weight_mode)
    out = _roofline_record(dep, cost, phase, batch, context, new, weight_mode)
    if as_json:
        print(json_out(out, indent=2))
        return
    _print_roofline(dep, cost, out, phase, batch, context, new, weight_mode)


def _roofline_record(dep, cost, phase: str, batch: int, context: int, new: int, weight_mode: str) -> dict:
    """The pass's figures and where its efficiencies come from (what --json prints)."""
    row = cost.to_frame().iloc[0].to_dict()
    hw = dep.hardware
    lt = coefficients(dep).terms
    eng = dep.serving_engine.for_hardware(hw)
    out = dict(
        deployment=dep.describe(), serving_engine=dep.serving_engine.describe(), phase=phase, batch=batch, context=context,
        new_tokens_per_sequence=new, weight_mode=weight_mode,
        ridge_flop_per_byte=hw.ridge(dep.compute_dtype), intensity_flop_per_byte=float(cost.intensity[0]),
        efficiencies=dict(gemm=lt.gemm_mfu, gemm_source=(eng.gemm_mfu or hw.prefill_mfu).source,
                          attention=lt.attention_mfu if lt.attention_mfu is not None else lt.gemm_mfu,
                          attention_source=(eng.attention_mfu or eng.gemm_mfu or hw.prefill_mfu).source,
                          moe=lt.moe_mfu if lt.moe_mfu is not None else lt.gemm_mfu, moe_pad_tokens=lt.moe_pad_tokens,
                          bandwidth=lt.bandwidth_efficiency, bandwidth_source=(eng.bandwidth or hw.bandwidth_efficiency).source),
        engine_terms={name: value for name, value, _ in eng.figures()},
        **{k: (v if isinstance(v, str) else float(v)) for k, v in row.items()},
    )
    return out


def _print_roofline(dep, cost, out: dict, phase: str, batch: int, context: int, new: int, weight_mode: str) -> None:
    """The components' FLOPs and bytes, then the pass's time and bound."""
    from rich.table import Table  # only where a table is printed: off every other command's start-up
    t = Table(title=f"{phase}: batch {batch}, context {context:,}, +{new:,} tokens/seq — {dep.describe()} [{weight_mode}]; "
                    f"served by {dep.serving_engine.describe()}")
    t.add_column("component")
    t.add_column("FLOPs", justify="right")
    t.add_column("HBM read", justify="right")
    t.add_column("HBM written", justify="right")
    comps = list(dict.fromkeys([*cost.flops, *cost.bytes_read, *cost.bytes_written]))
    for k in comps:
        t.add_row(k, _fmt_flops(cost.flops[k][0]) if k in cost.flops else "", _fmt_bytes(cost.bytes_read[k][0]) if k in cost.bytes_read else "",
                  _fmt_bytes(cost.bytes_written[k][0]) if k in cost.bytes_written else "")
    t.add_row("[b]total[/b]", _fmt_flops(cost.total_flops[0]), _fmt_bytes(cost.total_bytes_read[0]), _fmt_bytes(cost.total_bytes_written[0]))
    console.print(t)
    _print_pass_time(dep, out)


def _print_pass_time(dep, out: dict) -> None:
    """The pass's time per replica: each part in ms (a table of figures only, so it fits 80 columns), then what each
    part is made of, as lines."""
    from specagent.reports.screens.tables import Col, fitted  # rich: only where a table is printed

    lt = coefficients(dep).terms
    eff = out["efficiencies"]
    ms = {k: f"{out[k] * 1e3:.3f} ms" for k in ("compute_s", "memory_s", "comm_s", "overhead_s", "time_s")}
    rows = [("compute time", ms["compute_s"]), ("memory time", ms["memory_s"]), ("communication", ms["comm_s"]),
            ("engine fixed costs", ms["overhead_s"]), ("pass time", ms["time_s"]),
            ("intensity / ridge", f"{out['intensity_flop_per_byte']:.1f} / {out['ridge_flop_per_byte']:.1f} FLOP/B"),
            ("bound", out["bound"])]
    if dep.model.is_moe:
        rows.append(("distinct experts / layer", f"{out['experts_touched']:.1f} of {dep.model.moe.num_experts}"))  # type: ignore[union-attr]
    console.print(fitted(console, (Col("time (per replica)", "left"), Col("")), rows))
    terms = ", ".join(f"{term.label} {out[f'fixed_{term.name}_s'] * 1e3:.3f}" for term in FIXED_TERMS)
    for line in (f"compute: GEMM MFU {eff['gemm']:.3g}, attention {eff['attention']:.3g}; MoE padding "
                 f"{out['compute_expert_padding_s'] * 1e3:.3f} ms",
                 f"memory: bandwidth efficiency {eff['bandwidth']:.3g}",
                 f"communication: {_fmt_bytes(out['comm_bytes'])} per GPU; latency {out['collective_latency_s'] * 1e3:.3f} "
                 f"ms for {lt.allreduces} all-reduces + {lt.all_to_alls} all-to-alls",
                 f"engine fixed costs (ms): {terms}"):
        console.print(line, highlight=False)


@roofline_app.command("balance")
@deployment_options(Scenario.strong)
def roofline_balance(
    deployment: DeploymentSpec,  # type: ignore[valid-type]  # the deployment flags, generated (default: the Scenario's Strong)
    context: int = typer.Option(0, help="Cached tokens per decoding sequence (0 isolates the weight traffic)."),
    weight_mode: str = typer.Option("union", help="'union' or 'active' expert reads."),
    hardware_dir: Optional[Path] = HardwareDirOpt,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The decode batch at which the replica turns compute-bound, next to the hardware ridge.

    For a dense model with negligible KV reads it equals the ridge scaled by bytes per
    weight / 2; KV and recurrent-state reads push it up, and for MoE so do the experts a
    larger batch touches.
    """
    _check_tokens(context=context)
    _check_weight_mode(weight_mode)
    dep = build_deployment(deployment, hardware_dir)
    bp = balance_point(dep, context=context, weight_mode=weight_mode)
    out = dict(deployment=dep.describe(), **bp.__dict__)
    if as_json:
        print(json_out(out, indent=2))
        return
    from rich.table import Table  # only where a table is printed: off every other command's start-up
    t = Table(title=f"Balance point — {dep.describe()}, context {context:,} [{weight_mode}]", show_header=False)
    t.add_column("k")
    t.add_column("v", justify="right")
    t.add_row(f"hardware ridge ({bp.compute_dtype})", f"{bp.hardware_ridge:.1f} FLOP/B")
    t.add_row("hardware ridge (bf16)", f"{bp.hardware_ridge_bf16:.1f} FLOP/B")
    never = f"never (≤ {bp.max_batch_searched:,})"
    t.add_row("decode batch turning compute-bound (peak rates)", never if bp.balance_batch_peak is None else f"{bp.balance_batch_peak:,}")
    t.add_row("… with the profile's efficiencies", never if bp.balance_batch_effective is None else f"{bp.balance_batch_effective:,}")
    console.print(t)
