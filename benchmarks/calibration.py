"""Calibrate the roofline on this machine, validate it on held-out passes, and run the protocol live.

Prints: the fitted figures, the validation table (predicted vs measured per held-out
(batch, new tokens, context) point, MAPE) for the scaled Weak and Strong models, then the
published live comparison: 24 τ²-Bench airline trajectories (kernels.live_compare.live_workload)
run live 3 times with real reads on the SQLite airline service, each phase's measured time
(each pass at its fastest of the 3 repeats, and the spread of the repeats' totals) next to
the simulator's prediction for the same protocol logs, with the README targets (total within
10%, every phase with >= 1 s measured within 20%, token counts exact, >= 100 reads executed).

    .venv/bin/python benchmarks/calibration.py [--threads 1] [--statistic min] [--bf16] [--live-trajectories 24] [--device cuda]

Timing defaults (why): one torch thread and the min statistic — on this shared 2-vCPU
machine a second thread or a co-running job stalls OpenMP and inflated whole passes by
30% for tens of seconds; pass timings also drop rounds during which other processes used
the CPU (see microbench.ForeignLoad). With one thread on a CPU, calibration and the live run
both time each pass on this thread's CPU clock (microbench.CLOCKS), which leaves out the time
other jobs held the core.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console

from specagent.kernels.configs import LIVE_TOKEN_SCALE, LIVE_TRAJECTORIES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--statistic", default="min", choices=("median", "min"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--bf16", action="store_true", help="also calibrate and validate both models in bf16 (slow on CPUs without native bf16)")
    ap.add_argument("--live-trajectories", type=int, default=LIVE_TRAJECTORIES)
    ap.add_argument("--live-repeats", type=int, default=3)
    ap.add_argument("--token-scale", type=float, default=LIVE_TOKEN_SCALE, help="scale of the shipped τ²-airline trace's token counts for the live run")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--out-dir", default=None, help="where calibrated profiles go (default: a temporary directory)")
    ap.add_argument("--no-live", action="store_true", help="skip the live protocol run (calibration and validation only)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from specagent.kernels import calibrate as cal
    from specagent.kernels import microbench as mb
    from specagent.cli.console import SafeConsole
    from specagent.reports.screens.kernels import validation
    from specagent.kernels.configs import strong_spec, weak_spec
    from specagent.kernels.live_compare import print_report

    console = SafeConsole()

    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="specagent-calibration-"))
    # one thread on a CPU: time every pass on this thread's CPU clock (the live run does the same)
    clock = "cpu" if args.device == "cpu" and args.threads == 1 else "wall"
    cfg = mb.TimingConfig(repeats=args.repeats, statistic=args.statistic, clock=clock)
    console.print(f"torch {torch.__version__}, {cal.processor_name()}, {torch.get_num_threads()} threads, statistic={args.statistic}, {clock} clock", highlight=False)
    runs = [("weak", weak_spec("bench"), "fp32"), ("strong", strong_spec("bench"), "fp32")]
    if args.bf16:
        runs += [("weak", weak_spec("bench"), "bf16"), ("strong", strong_spec("bench"), "bf16")]
    for name, spec, dtype in runs:
        t0 = time.perf_counter()
        small = dtype == "bf16"
        tokens = (1, 4, 16, 64, 256) if small else cal.CURVE_TOKENS
        fit, hw, data = cal.calibrate(spec, dtype, args.device, cfg, tokens=tokens)
        path = cal.write_profile_toml(data, out_dir / f"{name}-{dtype}.toml")
        points = tuple(p for p in cal.VALIDATION_POINTS if not small or p[0] * p[1] <= 128)
        rows = cal.validate(spec, hw, dtype, points, args.device, cfg)
        console.print(f"\n[bold]{spec.name} {dtype}[/]: profile {path} (calibration + validation {time.perf_counter() - t0:.0f} s)", highlight=False)
        console.print(f"  peak {fit.peak_tflops[dtype] / 1e9:.1f} GFLOP/s, copy {fit.bandwidth_tb_s * 1e3:.1f} GB/s, bandwidth eff "
                      f"{fit.bandwidth_efficiency:.2f}, overhead {fit.pass_overhead_us:.0f} us, curve "
                      + ", ".join(f"{t:.0f}:{e:.3f}" for t, e in fit.curve) + "; decode curve (batch:eff) "
                      + ", ".join(f"{b:.0f}:{e:.3f}" for b, e in fit.decode_curve), highlight=False)
        for part in validation(rows, f"held-out passes of {spec.name} ({dtype}): roofline on the calibrated profile vs measured",
                               cal.mape(rows)):
            console.print(part)
        # the same measured passes priced without the decode curve (decode on the tokens/pass curve):
        # what the decode curve changes, free of run-to-run timing noise
        no_dec = dataclasses.replace(hw, decode_efficiency_curve=())
        pred = cal.predict_seconds(spec, no_dec, dtype, [(r.batch, r.new_tokens, r.context) for r in rows])
        base = [dataclasses.replace(r, predicted_s=float(p)) for r, p in zip(rows, pred)]
        console.print(f"  without the decode curve, same measurements: MAPE {cal.mape(base):.1%} ("
                      + ", ".join(f"{(r.batch, r.new_tokens, r.context)} {r.error:+.1%}" for r in base if r.new_tokens == 1) + ")",
                      highlight=False)
    if args.no_live:
        return

    # ---- the protocol, live, next to the simulator's prediction (the profiles just written)
    report = live(args.device, str(out_dir / "weak-fp32.toml"), str(out_dir / "strong-fp32.toml"), args.live_trajectories,
                  args.token_scale, args.k, args.live_repeats, out_dir)
    console.print(f"\nlive run: {report.setup['trajectories']} τ²-airline trajectories (token scale {args.token_scale}), K={args.k}, "
                  f"{args.live_repeats} repeats, {report.seconds['live_runs']:.0f} s", highlight=False)
    print_report(report, Console(width=max(console.width, 100)))


def live(device: str, weak_profile: str | None, strong_profile: str | None, trajectories: int = LIVE_TRAJECTORIES,
         token_scale: float = LIVE_TOKEN_SCALE, k: int = 4, repeats: int = 3, out_dir: Path | str = "out/live-bench",
         dtype: str = "fp32"):
    """The published live comparison (importable: the GPU script runs it with device="cuda"; without
    profiles it calibrates both models on the device first, in `dtype`)."""
    from specagent.kernels.live_compare import live_comparison

    return live_comparison(trajectories=trajectories, token_scale=token_scale, device=device, dtype=dtype, k=k, repeats=repeats,
                           weak_profile=weak_profile, strong_profile=strong_profile, out_dir=out_dir)


if __name__ == "__main__":
    main()
