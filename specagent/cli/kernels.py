"""`specagent calibrate` and `specagent live`: measure this machine, and run the protocol for real.

Mounted by app.py as top-level commands (functions `calibrate_cmd` and `live_cmd`);
`app` bundles both for tests and stand-alone use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from specagent.cli.console import fail
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.kernels.configs import SCALES, strong_spec, weak_spec

app = typer.Typer(help="Torch backend: calibrate the roofline on this machine; run the SpecAgent protocol live.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)
console = Console()


def _spec(which: str, scale: str):
    if which not in ("weak", "strong"):
        fail(f"--model must be 'weak' or 'strong', got '{which}'")
    if scale not in SCALES:
        fail(f"--scale must be one of {', '.join(SCALES)}, got '{scale}'")
    return weak_spec(scale) if which == "weak" else strong_spec(scale)


def _torch_backend():
    """torch and the modules that need it, imported only by the commands that run models.

    torch is an optional extra: every other command works on a base install.
    """
    try:
        import torch

        from specagent.kernels import calibrate as cal
        from specagent.kernels import microbench as mb
    except ImportError as exc:
        fail(f"this command runs torch models and needs torch ({exc}); install it with: pip install 'specagent[torch]'")
    return torch, cal, mb


def _setup(device: str, threads: int, dtype: str) -> None:
    torch, _, mb = _torch_backend()
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {device}: CUDA is not available on this machine (use --device cpu)")
    if dtype not in mb.DTYPES:
        fail(f"--dtype must be one of {', '.join(mb.DTYPES)}, got '{dtype}'")
    if threads > 0:
        torch.set_num_threads(threads)


@app.command("calibrate")
def calibrate_cmd(
    output: Path = typer.Option(..., "-o", "--output", help="Hardware profile TOML to write (atomically)."),
    device: str = typer.Option("cpu", help="Torch device: cpu, or cuda / cuda:N."),
    dtype: str = typer.Option("fp32", help="Dtype the models run in (fp32, bf16, fp16). bf16 is emulated and slow on CPUs without AVX512-BF16/AMX."),
    model: str = typer.Option("weak", help="Which scaled model the profile is calibrated for: weak or strong (kernels/configs.py)."),
    scale: str = typer.Option("bench", help="Model scale: tiny (tests) or bench."),
    threads: int = typer.Option(0, help="torch threads (0: torch's default)."),
    repeats: int = typer.Option(7, help="Timed repeats per benchmark (after warm-up)."),
    statistic: str = typer.Option("median", help="median, or min (the uncontended time on a shared machine)."),
    validate: bool = typer.Option(True, help="Also predict and measure held-out full passes and report MAPE."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Microbenchmark this device, fit the roofline's efficiencies, write a hardware profile.

    Terms: MFU (model FLOP utilisation) is achieved FLOP/s over the peak; the compute
    curve gives it per tokens per pass (GEMMs get more efficient with more tokens);
    bandwidth efficiency is achieved bytes/s of memory-bound kernels over a large copy's;
    per-pass overhead is the fixed cost of one forward pass (framework dispatch). The
    validation table compares the roofline's prediction with measured full forward passes
    at held-out (batch, new tokens, context) points; MAPE is their mean absolute % error.
    """
    _, cal, mb = _torch_backend()
    _setup(device, threads, dtype)
    spec = _spec(model, scale)
    try:
        cfg = mb.TimingConfig(repeats=repeats, statistic=statistic)
    except ValueError as exc:
        fail(str(exc))
    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task("calibrating", total=None)
        fit, hw, data = cal.calibrate(spec, dtype, device, cfg, progress=lambda m: prog.update(task, description=m))
        prog.update(task, description="writing profile")
        cal.write_profile_toml(data, output)
        rows = []
        if validate:
            prog.update(task, description="validation passes")
            rows = cal.validate(spec, hw, dtype, device=device, cfg=cfg)
    if as_json:
        out = {"profile": str(output), "peak_tflops": fit.peak_tflops, "bandwidth_tb_s": fit.bandwidth_tb_s,
               "bandwidth_efficiency": fit.bandwidth_efficiency, "compute_curve": fit.curve, "pass_overhead_us": fit.pass_overhead_us,
               "validation": [dict(batch=r.batch, new_tokens=r.new_tokens, context=r.context, predicted_s=r.predicted_s,
                                   measured_s=r.measured_s, error=r.error) for r in rows],
               "mape": cal.mape(rows) if rows else None}
        typer.echo(json.dumps(out, indent=2, default=float))
        return
    console.print(f"wrote [bold]{output}[/] ({hw.name})", highlight=False)
    t = Table(title="fitted roofline figures (source: measured on this machine)")
    t.add_column("figure"); t.add_column("value", justify="right")
    for d, v in fit.peak_tflops.items():
        t.add_row(f"peak {d} (best GEMM)", f"{v / 1e9:,.2f} GFLOP/s")
    t.add_row("copy bandwidth", f"{fit.bandwidth_tb_s * 1e3:,.2f} GB/s")
    t.add_row("bandwidth efficiency", f"{fit.bandwidth_efficiency:.3f}")
    for tok, e in fit.curve:
        t.add_row(f"compute efficiency @ {tok:.0f} tokens/pass", f"{e:.3f}")
    t.add_row("per-pass overhead", f"{fit.pass_overhead_us:,.0f} us")
    console.print(t)
    if rows:
        print_validation(rows, f"held-out passes of {spec.name} ({dtype})")


def print_validation(rows, title: str) -> None:
    from specagent.kernels.calibrate import mape

    t = Table(title=title)
    for c in ("batch", "new tokens", "context", "bound", "predicted ms", "measured ms", "error"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r.batch), str(r.new_tokens), str(r.context), r.bound, f"{r.predicted_s * 1e3:.2f}", f"{r.measured_s * 1e3:.2f}", f"{r.error:+.1%}")
    console.print(t)
    console.print(f"MAPE: {mape(rows):.1%} over {len(rows)} held-out points (target on this CPU: <= 10% for bf16)", highlight=False)


@app.command("live")
def live_cmd(
    trace: Optional[Path] = typer.Option(None, help="Trajectories (.jsonl/.parquet); default: a seeded synthetic airline conversation."),
    strategy: str = typer.Option("specagent", help="Only 'specagent' runs live."),
    k: int = typer.Option(4, help="K: at most this many steps drafted per chunk."),
    limit: int = typer.Option(1, help="Run the first N trajectories of the trace."),
    token_scale: float = typer.Option(1.0, help="Scale every token count of the trace (the scaled trace is what runs and what the simulator prices)."),
    scale: str = typer.Option("tiny", help="Model scale: tiny or bench (kernels/configs.py)."),
    dtype: str = typer.Option("fp32", help="Model dtype."),
    device: str = typer.Option("cpu", help="Torch device."),
    threads: int = typer.Option(0, help="torch threads (0: torch's default)."),
    seed: int = typer.Option(0, help="Seed of weights, filler tokens, tool arguments and acceptance draws."),
    accept: float = typer.Option(0.7, help="Acceptance probability per drafted step (when the trace carries no labels)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the protocol log here (.jsonl)."),
    compare: bool = typer.Option(False, "--compare", help="Also price the same protocol log with the simulator and compare."),
    weak_hardware: Optional[str] = typer.Option(None, help="Calibrated profile for the Weak model (required with --compare)."),
    strong_hardware: Optional[str] = typer.Option(None, help="Calibrated profile for the Strong model (default: the Weak one)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Run SpecAgent with real torch models and a real SQLite airline environment.

    The Weak model drafts up to K steps (decoding the trace's output lengths); reads hit
    the database at once; the first WRITE is held; the Strong model prefills the drafted
    segment on its cached context (verification) and decodes verdict and repair tokens.
    Accept/reject comes from the trace's labels or a seeded acceptance model (random
    weights cannot judge). Safety is checked on the database at every segment.
    """
    _, _, mb = _torch_backend()
    from specagent.kernels.live import LiveConfig, compare as do_compare, run_trajectory, scale_trajectory, synthetic_airline_trajectory
    from specagent.kernels.modules import Model
    from specagent.simulator.acceptance import AcceptanceModel
    from specagent.traces.io import load_trajectories, save_trajectories

    if strategy != "specagent":
        fail(f"--strategy {strategy}: only 'specagent' runs live (the simulator prices the others)")
    if compare and not weak_hardware:
        fail("--compare needs --weak-hardware PROFILE.toml (write one with `specagent calibrate`)")
    _setup(device, threads, dtype)
    try:
        trajs = load_trajectories(trace)[:limit] if trace else [synthetic_airline_trajectory(seed)]
    except Exception as exc:  # the loader's errors name file and field
        fail(str(exc))
    trajs = [scale_trajectory(t, token_scale) for t in trajs]
    ws, ss = weak_spec(scale), strong_spec(scale)
    weak = Model(ws, seed=seed, dtype=mb.torch_dtype(dtype), device=device)
    strong = Model(ss, seed=seed + 1, dtype=mb.torch_dtype(dtype), device=device)
    cfg = LiveConfig(k=k, seed=seed, acceptance=AcceptanceModel.constant(accept))
    results = []
    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task("live run", total=len(trajs))
        for i, t in enumerate(trajs):
            results.append(run_trajectory(t, weak, strong, cfg, index=i))
            prog.advance(task)
    if out:
        save_trajectories([r.protocol_log for r in results], out)
    comp = None
    if compare:
        try:
            whw = load_hardware(weak_hardware)
            shw = load_hardware(strong_hardware) if strong_hardware else whw
        except HardwareProfileError as exc:
            fail(str(exc))
        comp = do_compare(results, ws, ss, whw, shw, dtype, k)
    if as_json:
        payload = {"trajectories": len(results), "wall_s": sum(r.wall_s for r in results),
                   "seconds": [r.seconds for r in results], "tokens": [r.tokens for r in results],
                   "safety": [r.safety for r in results]}
        if comp:
            payload["compare"] = {"rows": comp.rows, "measured_wall_s": comp.measured_wall_s,
                                  "predicted_wall_s": comp.predicted_wall_s, "tokens_exact": comp.tokens_exact, "notes": comp.notes}
        typer.echo(json.dumps(payload, indent=2, default=float))
        return
    print_live(results, comp)


def print_live(results, comp) -> None:
    from specagent.kernels.live import PHASES

    t = Table(title=f"live SpecAgent run: {len(results)} trajectories")
    t.add_column("phase"); t.add_column("tokens", justify="right"); t.add_column("measured s", justify="right")
    if comp:
        t.add_column("simulator s", justify="right"); t.add_column("sim tokens", justify="right"); t.add_column("error", justify="right")
    for ph in PHASES:
        tok = sum(r.tokens.get(ph, 0) for r in results)
        sec = sum(r.seconds.get(ph, 0.0) for r in results)
        row = [ph, str(tok), f"{sec:.3f}"]
        if comp:
            c = next(x for x in comp.rows if x["phase"] == ph)
            err = f"{(c['predicted_s'] - sec) / sec:+.1%}" if sec > 0 else "-"
            row += [f"{c['predicted_s']:.3f}", "-" if c["predicted_tokens"] is None else str(c["predicted_tokens"]), err]
        t.add_row(*row)
    wall = sum(r.wall_s for r in results)
    if comp:
        t.add_row("total wall", "", f"{wall:.3f}", f"{comp.predicted_wall_s:.3f}", "", f"{comp.wall_error:+.1%}")
    else:
        t.add_row("total wall", "", f"{wall:.3f}")
    console.print(t)
    safety: dict[str, int] = {}
    for r in results:
        for k2, v in r.safety.items():
            safety[k2] = safety.get(k2, 0) + v
    console.print("safety: " + ", ".join(f"{k2}={v}" for k2, v in safety.items()), highlight=False)
    if comp:
        console.print(f"token counts exact: {comp.tokens_exact}", highlight=False)
        for n in comp.notes:
            console.print(f"note: {n}", highlight=False)
