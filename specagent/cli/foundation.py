"""The foundation commands (hardware, models, roofline): thin wrappers over the cost model's building blocks.

Apart from the root (app.py) so that the root's start-up, and every other command's, imports neither the cost model nor
the scenario (issue #34: `replay` and `--help` start-up); mounted lazily like the rest (lazy.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.cli.requests import error_text, request_options
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, shipped_models
from specagent.costmodel.latency import FIXED_TERMS
from specagent.costmodel.roofline import coefficients
from specagent.hardware.profile import HardwareProfileError, list_profiles, load_hardware
from specagent.simulator.jobs.balance_point import BalancePointRequest
from specagent.simulator.jobs.balance_point import run as run_balance_point
from specagent.simulator.jobs.base import JobError
from specagent.simulator.jobs.roofline import HARDWARE_DIR_HELP, RooflineRequest, check_hardware_dir
from specagent.simulator.jobs.roofline import run as run_roofline

hardware_app = typer.Typer(help="GPU profiles: peak FLOP/s, memory, bandwidth, efficiencies, each with its source.", no_args_is_help=True)
models_app = typer.Typer(help="Model specs read from Hugging Face config.json files.", no_args_is_help=True)
roofline_app = typer.Typer(
    help="Roofline estimate of one forward pass: FLOPs and HBM bytes by component, time, and the bound.\n\n"
    "A pass is compute-bound when its arithmetic intensity (FLOP/byte) exceeds the hardware ridge.",
    invoke_without_command=True,
)

console = SafeConsole()


HardwareDirOpt = typer.Option(None, "--hardware-dir", help=HARDWARE_DIR_HELP)


def _hardware_dirs(hardware_dir: Optional[Path]) -> list[Path]:
    try:
        return check_hardware_dir(hardware_dir)
    except JobError as exc:
        fail(error_text(RooflineRequest, exc))


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
    # the name is what a user types: never cut; figures never cut either (reports/screens/tables.py)
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


@roofline_app.callback()
@request_options(RooflineRequest, scenario=False)
def roofline(ctx: typer.Context, request: RooflineRequest,
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Break one pass down into FLOPs and bytes by component, and say which bound applies."""
    if ctx.invoked_subcommand is not None:
        return
    result = run_roofline(request)
    if as_json:
        print(json_out(result.to_dict(), indent=2))
        return
    _print_roofline(result.deployment, result.cost, result.record, request)


def _print_roofline(dep, cost, out: dict, r: RooflineRequest) -> None:
    """The components' FLOPs and bytes, then the pass's time and bound."""
    from rich.table import Table  # only where a table is printed: off every other command's start-up
    t = Table(title=f"{r.phase}: batch {r.batch}, context {r.context:,}, +{r.new_tokens:,} tokens/seq — {dep.describe()} [{r.weight_mode}]; "
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
@request_options(BalancePointRequest, scenario=False)
def roofline_balance(request: BalancePointRequest, as_json: bool = typer.Option(False, "--json")) -> None:
    """The decode batch at which the replica turns compute-bound, next to the hardware ridge.

    For a dense model with negligible KV reads it equals the ridge scaled by bytes per
    weight / 2; KV and recurrent-state reads push it up, and for MoE so do the experts a
    larger batch touches.
    """
    result = run_balance_point(request)
    if as_json:
        print(json_out(result.to_dict(), indent=2))
        return
    bp, dep, context, weight_mode = result.point, result.deployment, request.context, request.weight_mode
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
