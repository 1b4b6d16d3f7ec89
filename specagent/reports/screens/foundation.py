"""What the foundation commands print: `hardware list` and `hardware show`, `models list` and `models show`, `roofline`
and `roofline balance`.

Each function reads what the command's `--json` prints (the profiles' rows, a profile's figures with their sources, the
models' rows) or the job's Result (`simulator/jobs/roofline.py`, `balance_point.py`) and returns renderables in print
order, fitted to a console's width; it prints nothing and prices nothing (the pass's fixed terms and collectives are
fields of the RooflineResult, so nothing of the cost model is imported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted

if TYPE_CHECKING:
    from specagent.simulator.jobs.balance_point import BalancePointResult
    from specagent.simulator.jobs.roofline import RooflineResult


def profiles_table(rows: Sequence[dict[str, Any]], console: Console) -> RenderableType:
    """`hardware list`: each profile's id, name, BF16 peak, memory, bandwidth, ridge and price (the `--json` rows)."""
    cols = (Col("id", "left"), Col("name", "left", optional=True), Col("BF16\nTFLOP/s"), Col("memory\nGB"),
            Col("HBM\nTB/s"), Col("ridge\nFLOP/B"), Col("$ per\nGPU-h"))
    cells = [(r["id"], r["name"], f"{r['bf16_tflops']:g}", f"{r['memory_gb']:g}", f"{r['bandwidth_tb_s']:g}",
              f"{r['ridge_bf16']:.0f}", "-" if r["usd_per_gpu_hour"] is None else f"{r['usd_per_gpu_hour']:.2f}") for r in rows]
    return fitted(console, cols, cells, title="Hardware profiles (dense peaks, per GPU)",
                  caption="id: what --hardware, --gpu and --price take (aliases work too); ridge: BF16 peak FLOP/s ÷ "
                          "HBM bandwidth; $ per GPU-h: the profile's sourced price (`hardware show ID` cites it)",
                  left_out="`hardware show ID` and --json have them")


def figures(title: str, path: object, items: Sequence[tuple[str, object, str]], console: Console) -> list[RenderableType]:
    """`hardware show`: each figure with its value and a numbered source, the sources (each once) below as prose, so the
    table fits 80 columns and no source is cut; a list (a calibrated curve) is written out below the table too."""
    sources: dict[str, int] = {}
    cells, lists = [], []
    for a, b, c in items:
        ref = f"[{sources.setdefault(c, len(sources) + 1)}]"
        if isinstance(b, (list, tuple)):
            lists.append(f"{a}: {b}")
            b = f"{len(b)} points, below"
        cells.append((a, str(b), ref))
    table = fitted(console, (Col("figure", "left"), Col("value"), Col("source", "left")), cells, title=title)
    return [table, *(Text(line) for line in (f"file: {path}", *lists, "Sources:", *(f"[{i}] {c}" for c, i in sources.items())))]


def models_table(rows: Sequence[dict[str, Any]], console: Console) -> RenderableType:
    """`models list`: the name a user types (never cut), the layer mix, the parameters, KV cache and recurrent state."""
    orgs = sorted({r["model"].split("/", 1)[0] for r in rows})
    cols = (Col("model", "left"), Col("type", "left", optional=True), Col("lin/\nfull"), Col("total\nB"), Col("act.\nB"),
            Col("KV\nKiB"), Col("state\nMB"))
    cells = [(r["model"].split("/", 1)[1], r["type"], f"{r['linear']}/{r['full']}", f"{r['total_b']:.2f}", f"{r['active_b']:.2f}",
              f"{r['kv_kib_per_token']:.0f}", f"{r['state_mb']:.1f}") for r in rows]
    return fitted(console, cols, cells, title="Shipped model specs (text model, MTP head excluded)",
                  caption=f"model: the name to pass as --model / --weak-model / --strong-model (the full id "
                          f"{' or '.join(o + '/<model>' for o in orgs)} works too); lin/full: linear/full-attention "
                          "layers; total/act.: parameters in billions (all / active per token); KV cache per token "
                          "(bf16); Gated DeltaNet state per sequence", left_out="`models show MODEL` and --json have them")


def model_table(info: dict[str, Any]) -> Table:
    """`models show`: parameters by component, KV bytes per token, recurrent state per sequence (the `--json` record)."""
    t = Table(title=f"{info['model']} ({info['model_type']}) — {info['source']}")
    t.add_column("component")
    t.add_column("parameters", justify="right")
    for k, v in info["params"].items():
        t.add_row(k, f"{v:,}")
    t.add_row("KV bytes / token (bf16)", f"{info['kv_bytes_per_token_bf16']:,.0f}")
    t.add_row("recurrent state bytes / sequence", f"{info['state_bytes_per_sequence']:,.0f}")
    return t


def fmt_bytes(x: float) -> str:
    """Bytes in the largest decimal unit they reach (TB to KB), two decimals."""
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} B"


def fmt_flops(x: float) -> str:
    """FLOPs in the largest decimal unit they reach (PFLOP to MFLOP), two decimals."""
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} FLOP"


def roofline(res: RooflineResult, console: Console) -> list[RenderableType]:
    """`roofline`: the components' FLOPs and bytes, then the pass's time per replica and what each part is made of."""
    dep, cost, r = res.deployment, res.cost, res.request
    t = Table(title=f"{r.phase}: batch {r.batch}, context {r.context:,}, +{r.new_tokens:,} tokens/seq — {dep.describe()} "
                    f"[{r.weight_mode}]; served by {dep.serving_engine.describe()}")
    t.add_column("component")
    for head in ("FLOPs", "HBM read", "HBM written"):
        t.add_column(head, justify="right")
    for k in dict.fromkeys([*cost.flops, *cost.bytes_read, *cost.bytes_written]):
        t.add_row(k, fmt_flops(cost.flops[k][0]) if k in cost.flops else "",
                  fmt_bytes(cost.bytes_read[k][0]) if k in cost.bytes_read else "",
                  fmt_bytes(cost.bytes_written[k][0]) if k in cost.bytes_written else "")
    t.add_row("[b]total[/b]", fmt_flops(cost.total_flops[0]), fmt_bytes(cost.total_bytes_read[0]),
              fmt_bytes(cost.total_bytes_written[0]))
    return [t, *pass_time(res, console)]


def pass_time(res: RooflineResult, console: Console) -> list[RenderableType]:
    """The pass's time per replica: each part in ms (a table of figures only, so it fits 80 columns), then what each
    part is made of, as lines."""
    out, dep = res.record, res.deployment
    eff = out["efficiencies"]
    ms = {k: f"{out[k] * 1e3:.3f} ms" for k in ("compute_s", "memory_s", "comm_s", "overhead_s", "time_s")}
    rows = [("compute time", ms["compute_s"]), ("memory time", ms["memory_s"]), ("communication", ms["comm_s"]),
            ("engine fixed costs", ms["overhead_s"]), ("pass time", ms["time_s"]),
            ("intensity / ridge", f"{out['intensity_flop_per_byte']:.1f} / {out['ridge_flop_per_byte']:.1f} FLOP/B"),
            ("bound", out["bound"])]
    if dep.model.is_moe:
        rows.append(("distinct experts / layer", f"{out['experts_touched']:.1f} of {dep.model.moe.num_experts}"))
    allreduces, all_to_alls = res.collectives
    terms = ", ".join(f"{label} {out[key] * 1e3:.3f}" for label, key in res.fixed_terms)
    lines = (f"compute: GEMM MFU {eff['gemm']:.3g}, attention {eff['attention']:.3g}; MoE padding "
             f"{out['compute_expert_padding_s'] * 1e3:.3f} ms",
             f"memory: bandwidth efficiency {eff['bandwidth']:.3g}"
             + (f", dense weight stream {eff['weight_stream']:.3g}"
                if eff["weight_stream"] != eff["bandwidth"] else ""),
             f"communication: {fmt_bytes(out['comm_bytes'])} per GPU; latency {out['collective_latency_s'] * 1e3:.3f} "
             f"ms for {allreduces} all-reduces + {all_to_alls} all-to-alls",
             f"engine fixed costs (ms): {terms}")
    return [fitted(console, (Col("time (per replica)", "left"), Col("")), rows), *(Text(line) for line in lines)]


def balance(res: BalancePointResult) -> Table:
    """`roofline balance`: the hardware ridges and the decode batch turning compute-bound, at peak rates and with the
    profile's efficiencies."""
    bp, dep, r = res.point, res.deployment, res.request
    t = Table(title=f"Balance point — {dep.describe()}, context {r.context:,} [{r.weight_mode}]", show_header=False)
    t.add_column("k")
    t.add_column("v", justify="right")
    t.add_row(f"hardware ridge ({bp.compute_dtype})", f"{bp.hardware_ridge:.1f} FLOP/B")
    t.add_row("hardware ridge (bf16)", f"{bp.hardware_ridge_bf16:.1f} FLOP/B")
    never = f"never (≤ {bp.max_batch_searched:,})"
    t.add_row("decode batch turning compute-bound (peak rates)", never if bp.balance_batch_peak is None else f"{bp.balance_batch_peak:,}")
    t.add_row("… with the profile's efficiencies", never if bp.balance_batch_effective is None else f"{bp.balance_batch_effective:,}")
    return t
