"""`specagent calibrate` and `specagent live`: measure this machine, and run the protocol for real.

Mounted by app.py as top-level commands (functions `calibrate_cmd` and `live_cmd`);
`app` bundles both for tests and stand-alone use.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.paths import JSON_DOC, check_outputs
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.kernels.configs import LIVE_ACCEPT, LIVE_TOKEN_SCALE, LIVE_TRAJECTORIES, SCALES, strong_spec, weak_spec
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.strategies.catalog import DEFAULT_K, DEFAULT_REVIEW
from specagent.traces.schema import MAX_CONTEXT_TOKENS, MAX_STEPS

app = typer.Typer(help="Torch backend: calibrate the roofline on this machine; run the SpecAgent protocol live.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)
console = SafeConsole()


#: The choices kernels/microbench.py accepts, repeated here so that a bad flag is refused before torch is imported
#: (tests/test_fuzz_commands.py checks they agree).
DTYPE_NAMES = ("fp32", "bf16", "fp16")
STATISTICS = ("median", "min")
CLOCKS = ("wall", "cpu")
#: Guards against a typo, not limits of the method: a live run of 10,000 trajectories already takes days on a CPU.
MAX_LIVE_TRAJECTORIES = 10_000
MAX_REPEATS = 1000
MAX_THREADS = 1024


def _check_flags(device: str, dtype: str, threads: int, repeats: int, clock: str, clocks: tuple[str, ...]) -> None:
    """The flags of calibrate and live that need no torch, checked before torch is imported or a model built."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        fail(f"--device: expected cpu, cuda or cuda:N, got '{device}'")
    if dtype not in DTYPE_NAMES:
        fail(f"--dtype: expected one of {', '.join(DTYPE_NAMES)}, got '{dtype}'")
    if not 0 <= threads <= MAX_THREADS:
        fail(f"--threads: expected a thread count in [0, {MAX_THREADS}] (0: torch's default), got {threads}")
    if not 1 <= repeats <= MAX_REPEATS:
        fail(f"--repeats: expected a count in [1, {MAX_REPEATS}], got {repeats}")
    if clock not in clocks:
        fail(f"--clock: expected one of {', '.join(clocks)}, got '{clock}'")
    if clock == "cpu" and not device.startswith("cpu"):
        fail(f"--clock cpu times this thread's CPU work; models on {device} need --clock wall")


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
    clock: str = typer.Option("wall", help="wall, or cpu (this thread's CPU time, leaving out other jobs' time on the core: "
                              "for --threads 1 on a CPU; `specagent live` times its passes the same way)."),
    validate: bool = typer.Option(True, help="Also predict and measure held-out full passes and report MAPE."),
    engine_terms: Optional[bool] = typer.Option(None, "--engine-terms/--no-engine-terms", help="Also measure the serving-engine terms "
                                                "(per-layer fixed time, launch cost, kernels, collectives where >= 2 GPUs) and write an "
                                                "engine profile. Default: on for --device cuda, off on a CPU."),
    engine_output: Optional[Path] = typer.Option(None, help="Engine profile TOML to write (default: beside --output, NAME.engine.toml; "
                                                 "giving it turns --engine-terms on)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Microbenchmark this device, fit the roofline's efficiencies, write a hardware profile.

    Terms: MFU (model FLOP utilisation) is achieved FLOP/s over the peak; the compute
    curve gives it per tokens per pass (GEMMs get more efficient with more tokens);
    bandwidth efficiency is achieved bytes/s of memory-bound kernels over a large copy's;
    per-pass overhead is the fixed cost of one forward pass (framework dispatch). The
    validation table compares the roofline's prediction with measured full forward passes
    at held-out (batch, new tokens, context) points; MAPE is their mean absolute % error.
    With --engine-terms (the default on a GPU) it also measures the serving-engine terms of
    the torch modules on this device (kernels/engine_terms.py) and writes them as an engine
    profile `calibrated-<device>-<dtype>`; the held-out passes are then priced with it too.
    """
    _check_flags(device, dtype, threads, repeats, clock, CLOCKS)
    if statistic not in STATISTICS:
        fail(f"--statistic: expected one of {', '.join(STATISTICS)}, got '{statistic}'")
    spec = _spec(model, scale)
    atomic.check_writable(output)  # before a minute of benchmarks, not after

    _, cal, mb = _torch_backend()
    _setup(device, threads, dtype)
    try:
        cfg = mb.TimingConfig(repeats=repeats, statistic=statistic, clock=clock)
        cfg.timer(device)
    except ValueError as exc:
        fail(f"--statistic/--clock: {exc}")
    if engine_terms is False and engine_output is not None:
        fail("--engine-output names the engine profile that --no-engine-terms skips; drop one of them")
    if engine_terms is None:
        engine_terms = device.startswith("cuda") or engine_output is not None
    engine_path = engine_output or output.with_name(f"{output.stem}.engine.toml")
    if engine_terms and engine_path.resolve() == output.resolve():
        fail(f"--engine-output {engine_path} is the hardware profile's --output; give another path")
    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task("calibrating", total=None)
        tick = lambda m: prog.update(task, description=m)  # noqa: E731
        fit, hw, data = cal.calibrate(spec, dtype, device, cfg, progress=tick)
        prog.update(task, description="writing profile")
        cal.write_profile_toml(data, output)
        terms = eng = None
        if engine_terms:
            from specagent.hardware.serving_engine import parse_engine
            from specagent.kernels import engine_terms as et

            terms = et.measure_engine_terms({"weak": weak_spec(scale), "strong": strong_spec(scale)}, {model: hw}, dtype, device, cfg,
                                            scale=scale, progress=tick)
            eng_data = et.engine_profile_dict(terms)
            et.write_engine_toml(eng_data, engine_path)
            eng = parse_engine(eng_data, str(engine_path))
        rows = eng_rows = []
        if validate:
            prog.update(task, description="validation passes")
            rows = cal.validate(spec, hw, dtype, device=device, cfg=cfg)
            if eng is not None:
                eng_rows = et.price_rows(spec, hw, eng, dtype, rows)
    if as_json:
        out = {"profile": str(output), "peak_tflops": fit.peak_tflops, "bandwidth_tb_s": fit.bandwidth_tb_s,
               "bandwidth_efficiency": fit.bandwidth_efficiency, "compute_curve": fit.curve, "pass_overhead_us": fit.pass_overhead_us,
               "validation": [dict(batch=r.batch, new_tokens=r.new_tokens, context=r.context, predicted_s=r.predicted_s,
                                   measured_s=r.measured_s, error=r.error) for r in rows],
               "mape": cal.mape(rows) if rows else None}
        if terms is not None:
            out["engine"] = {"profile": str(engine_path), "id": eng.id, "terms": terms.as_dict(),
                             "validation_mape": cal.mape(eng_rows) if eng_rows else None}
        typer.echo(json_out(out, indent=2, default=float))
        return
    console.print(f"wrote [bold]{output}[/] ({hw.name})", highlight=False)
    t = Table(title="fitted roofline figures (source: measured on this machine)")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for d, v in fit.peak_tflops.items():
        t.add_row(f"peak {d} (best GEMM)", f"{v / 1e9:,.2f} GFLOP/s")
    t.add_row("copy bandwidth", f"{fit.bandwidth_tb_s * 1e3:,.2f} GB/s")
    t.add_row("bandwidth efficiency", f"{fit.bandwidth_efficiency:.3f}")
    for tok, e in fit.curve:
        t.add_row(f"compute efficiency @ {tok:.0f} tokens/pass", f"{e:.3f}")
    t.add_row("per-pass overhead", f"{fit.pass_overhead_us:,.0f} us")
    console.print(t)
    if terms is not None:
        print_engine_terms(terms, eng, engine_path)
    if rows:
        print_validation(rows, f"held-out passes of {spec.name} ({dtype})")
    if eng_rows:
        print_validation(eng_rows, f"the same passes priced with the measured engine terms ({eng.id})")


def print_engine_terms(terms, eng, path) -> None:
    """The measured engine terms: per layer kind, then per pass and the collectives (or why not measured)."""
    from specagent.kernels.engine_terms import layer_fixed_s

    console.print(f"wrote [bold]{path}[/] (serving engine '{eng.id}')", highlight=False)
    t = Table(title=f"engine terms measured on {terms.device_name} ({terms.dtype}): one layer part, batch 1, 1 token")
    for c in ("layer kind", "eager us", "graph us", "roofline us", "kernels", "fixed us"):
        t.add_column(c, justify="right")
    for kind, p in terms.parts.items():
        t.add_row(kind, f"{p.eager_s * 1e6:.1f}", "-" if p.graph_s is None else f"{p.graph_s * 1e6:.1f}", f"{p.roofline_s * 1e6:.2f}",
                  str(p.kernels), f"{layer_fixed_s(p, terms.launch_s) * 1e6:.1f}")
    console.print(t)
    console.print(f"launch per kernel {terms.launch_s * 1e6:.2f} us ({terms.launch_note}); kernels per pass outside the layers "
                  f"{terms.pass_kernels}; per-iteration host work {terms.iteration_s * 1e6:.1f} us; collectives: {terms.collectives_note}",
                  highlight=False)
    for op in ("all_reduce", "all_to_all"):
        if terms.collectives and op in terms.collectives:
            c = terms.collectives[op]
            console.print(f"  {op}: alpha {c['alpha_us']:.2f} us, beta {c['beta_gb_s']:.1f} GB/s", highlight=False)


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
    trace: Optional[Path] = typer.Option(None, help="Trajectories (.jsonl/.parquet; protocol logs replay their recorded verdicts). Default: "
                                         "--trajectories evenly spaced over the shipped τ²-Bench airline trajectories that make a read."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Run a seeded synthetic airline conversation instead of a trace (seconds; for tests)."),
    strategy: str = typer.Option("specagent", help="Only 'specagent' runs live."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="Scenario TOML file or shipped name (default, edge): the run takes its K, "
                                           "seed and acceptance model (its review policy must be on_write, the one the live runner "
                                           "implements); --k, --seed and --accept override it."),
    k: Optional[int] = typer.Option(None, help=f"K: at most this many steps drafted per chunk (default: the scenario's, else {DEFAULT_K})."),
    trajectories: int = typer.Option(LIVE_TRAJECTORIES, "--trajectories", "--limit", help="How many trajectories to run (of --trace: the first N)."),
    token_scale: float = typer.Option(LIVE_TOKEN_SCALE, help="Scale every token count of the trace, real tool results included (the scaled "
                                      "trace is what runs and what the simulator prices; the default keeps the default run to ~1 min of CPU)."),
    repeats: int = typer.Option(1, help="Run the workload this many times (same seed: the same passes) and time each pass at its fastest."),
    scale: str = typer.Option("bench", help="Model scale: tiny or bench (kernels/configs.py)."),
    dtype: str = typer.Option("fp32", help="Model dtype."),
    device: str = typer.Option("cpu", help="Torch device: cpu, or cuda / cuda:N."),
    threads: int = typer.Option(1, help="torch threads (0: torch's default). One thread on a CPU makes the cpu clock exact."),
    clock: str = typer.Option("auto", help="auto, wall or cpu: what a pass's time is. auto: cpu (this thread's CPU time) on a CPU with one "
                              "thread, else wall (a GPU synchronises after each pass)."),
    seed: Optional[int] = typer.Option(None, help="Seed of weights, filler tokens, tool arguments and acceptance draws (default: the "
                                       "scenario's, else 0)."),
    accept: Optional[float] = typer.Option(None, help=f"Acceptance probability per drafted step, every kind alike, when the trace "
                                           f"carries no labels (default: the scenario's acceptance model, else {LIVE_ACCEPT})."),
    out: Path = typer.Option(Path("out/live"), "-o", "--out", help="Folder for the protocol log (protocol_log.jsonl), the comparison "
                             "(comparison.json) and the calibrated profiles."),
    compare: bool = typer.Option(True, "--compare/--no-compare", help="Price the same protocol logs with the simulator and compare per phase."),
    weak_hardware: Optional[str] = typer.Option(None, help="Hardware profile for the Weak model (default: calibrate both models on --device first)."),
    strong_hardware: Optional[str] = typer.Option(None, help="Hardware profile for the Strong model (default: the Weak one)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    weak_url: Optional[str] = typer.Option(None, "--weak-url", help="Run on served models instead of torch ones: the Weak "
                                           "server's base URL (http://host:port/v1; docs/endpoints.md)."),
    weak_model: Optional[str] = typer.Option(None, "--weak-model", help="With --weak-url: the model name the Weak server serves."),
    strong_url: Optional[str] = typer.Option(None, "--strong-url", help="With --weak-url: the Strong server's base URL."),
    strong_model: Optional[str] = typer.Option(None, "--strong-model", help="With --weak-url: the model name the Strong server serves."),
    weak_api_key_env: Optional[str] = typer.Option(None, "--weak-api-key-env", help="With --weak-url: env var of the Weak key "
                                                   "[default: OPENAI_API_KEY]."),
    strong_api_key_env: Optional[str] = typer.Option(None, "--strong-api-key-env", help="With --weak-url: env var of the Strong key "
                                                     "[default: OPENAI_API_KEY]."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.001, max=86_400.0, help="With --weak-url: seconds to wait for "
                                            "one answer before retrying [default: 300]."),
    weak_extra_body: Optional[str] = typer.Option(None, "--weak-extra-body", help="With --weak-url: JSON object added to every Weak request."),
    strong_extra_body: Optional[str] = typer.Option(None, "--strong-extra-body", help="With --weak-url: JSON object added to every Strong request."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, max=MAX_CONTEXT_TOKENS, help="With --weak-url: max_tokens of every call (default: the server's; llama.cpp's decodes until its context is full)."),
    strong_max_tokens: Optional[int] = typer.Option(None, "--strong-max-tokens", min=1, max=MAX_CONTEXT_TOKENS, help="With --weak-url: max_tokens of the Strong verdicts and repairs (default: --max-tokens)."),
    retries: Optional[int] = typer.Option(None, "--retries", min=1, max=20, help="With --weak-url: attempts per request on 429/5xx/timeouts/broken answers [default: 6], as acceptance measure."),
    backoff: Optional[float] = typer.Option(None, "--backoff", min=0.0, max=60.0, help="With --weak-url: base of the exponential backoff between attempts, seconds [default: 0.5]."),
) -> None:
    """Run SpecAgent with real torch models and a real SQLite airline service; compare with the simulator.

    With --weak-url/--strong-url the two models are served ones (vLLM, SGLang, an API): they act
    for real, their verdicts are real, and the predicted column prices the run on --scenario's
    deployments (docs/endpoints.md).

    The Weak model drafts up to K steps (decoding the trace's output lengths); every drafted
    read runs on the database at once and its result, at its real size in tokens, joins the
    context; the first WRITE is held; the Strong model prefills the drafted segment on its
    cached context (verification) and decodes verdict and repair tokens. Accept/reject comes
    from the trace's labels or a seeded acceptance model (random weights cannot judge).
    Safety is checked on the database at every segment, and the reads the service executed
    are checked against the protocol log. Without --weak-hardware, both models are first
    calibrated on this device (about a minute on a CPU). Writes the protocol log and prints
    the per-phase table of measured vs simulated time.
    """
    if strategy != "specagent":
        fail(f"--strategy {strategy}: only 'specagent' runs live (the simulator prices the others)")
    acceptance = None
    if scenario is not None:
        try:
            sc = Scenario.load(scenario)
        except ScenarioError as exc:
            fail(f"--scenario: {exc}")
        if sc.review != DEFAULT_REVIEW:
            fail(f"--scenario {scenario}: review policy '{sc.review}'; the live runner implements '{DEFAULT_REVIEW}' only")
        k = sc.k if k is None else k
        seed = sc.seed if seed is None else seed
        acceptance = sc.acceptance if accept is None else None
        if acceptance is not None and acceptance.weak_token_ratio != 1.0:
            # the live Weak model drafts at the trace's token lengths: the scenario's ratio is a simulator assumption
            # for reference trajectories; the run (and its recorded setup) uses 1
            acceptance = dataclasses.replace(acceptance, weak_token_ratio=1.0)
    k = DEFAULT_K if k is None else k
    seed = 0 if seed is None else seed
    # the files the run writes in -o (torch and served runs alike) never replace its --trace or --scenario: replaying
    # out/live/protocol_log.jsonl into out/live would overwrite the log it reads
    try:
        check_outputs([("-o", out / name, kind) for name, kind in (("protocol_log.jsonl", None), ("verdict_log.jsonl", None),
                                                                    ("verdicts.jsonl", None), ("comparison.json", JSON_DOC))],
                      {"--trace": trace, "--scenario": scenario}, InputError)
    except InputError as exc:
        fail(str(exc))
    served_only = {"--strong-url": strong_url, "--weak-model": weak_model, "--strong-model": strong_model,
                   "--weak-api-key-env": weak_api_key_env, "--strong-api-key-env": strong_api_key_env, "--timeout": timeout,
                   "--weak-extra-body": weak_extra_body, "--strong-extra-body": strong_extra_body, "--max-tokens": max_tokens,
                   "--strong-max-tokens": strong_max_tokens, "--retries": retries, "--backoff": backoff}
    if weak_url is None:
        given = [flag for flag, v in served_only.items() if v is not None]
        if given:
            fail(f"{given[0]}: only for a live run on served models, with --weak-url (docs/endpoints.md)")
    else:
        from specagent.cli.live_endpoints import live_on_endpoints
        from specagent.endpoints.client import RetryPolicy

        for flag, value in (("--timeout", timeout), ("--backoff", backoff)):
            if value is not None and not math.isfinite(value):
                fail(f"{flag}: expected a finite number of seconds, got {value}")
        if not 1 <= trajectories <= MAX_LIVE_TRAJECTORIES:
            fail(f"--trajectories: expected a count in [1, {MAX_LIVE_TRAJECTORIES:,}], got {trajectories}")
        return live_on_endpoints(weak_url, weak_model, strong_url, strong_model, "OPENAI_API_KEY" if weak_api_key_env is None else weak_api_key_env,
                                 "OPENAI_API_KEY" if strong_api_key_env is None else strong_api_key_env, sc if scenario is not None else Scenario(), k, seed,
                                 trajectories, out, 300.0 if timeout is None else timeout, as_json, console,
                                 weak_extra_body, strong_extra_body, max_tokens, strong_max_tokens,
                                 retry=RetryPolicy(**{k: v for k, v in (("attempts", retries), ("base_s", backoff)) if v is not None}))
    accept = LIVE_ACCEPT if accept is None else accept
    _check_flags(device, dtype, threads, repeats, clock, ("auto", *CLOCKS))
    if not 1 <= trajectories <= MAX_LIVE_TRAJECTORIES:
        fail(f"--trajectories: expected a count in [1, {MAX_LIVE_TRAJECTORIES:,}], got {trajectories}")
    if not 0 < token_scale <= 1:  # NaN fails too
        fail(f"--token-scale: expected a scale in (0, 1] (1: the trace's own token counts), got {token_scale}")
    if not 1 <= k <= MAX_STEPS:
        fail(f"--k: expected steps per drafted chunk in [1, {MAX_STEPS:,}], got {k}")
    if not 0 <= accept <= 1:
        fail(f"--accept: expected a probability in [0, 1], got {accept}")
    if not 0 <= seed < 2**63:
        fail(f"--seed: expected a whole number in [0, 2^63), got {seed}")
    if synthetic and trace is not None:
        fail("--synthetic: give --trace or --synthetic, not both")
    _spec("weak", scale)
    for flag, name in (("--weak-hardware", weak_hardware), ("--strong-hardware", strong_hardware)):
        if name is not None:
            try:
                load_hardware(name)
            except HardwareProfileError as exc:
                fail(f"{flag}: {exc}")
    trajs = None
    if trace is not None:
        from specagent.traces.errors import TraceFormatError
        from specagent.traces.io import load_trajectories

        try:
            trajs = load_trajectories(trace)[:trajectories]
        except (TraceFormatError, FileNotFoundError) as exc:  # the loader's errors name file and field
            fail(f"--trace: {exc}")
    atomic.check_writable(out / "comparison.json")  # before the run, not after it
    torch, _, mb = _torch_backend()
    from specagent.kernels.live import check_tools, synthetic_airline_trajectory
    from specagent.kernels.live_compare import live_comparison, print_report
    from specagent.traces.io import save_trajectories
    from specagent.traces.verdict_log import write_verdict_log

    _setup(device, threads, dtype)
    if synthetic:
        trajs = [synthetic_airline_trajectory(seed + i) for i in range(trajectories)]
    try:
        check_tools(trajs or [])
    except ValueError as exc:
        fail(f"{trace}: {exc}")
    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task("live run", total=None)

        def progress(message: str, done: int | None = None, total: int | None = None) -> None:
            prog.update(task, description=message, **({"completed": done, "total": total} if total else {}))

        try:
            report = live_comparison(trajs, trajectories=trajectories, token_scale=token_scale, device=device, dtype=dtype, scale=scale,
                                     k=k, seed=seed, accept=accept, repeats=repeats, clock=None if clock == "auto" else clock,
                                     weak_profile=weak_hardware, strong_profile=strong_hardware, out_dir=out,
                                     compare_with_simulator=compare, progress=progress, acceptance=acceptance)
        except (ValueError, HardwareProfileError) as exc:
            fail(str(exc))
    save_trajectories([r.protocol_log for r in report.results], out / "protocol_log.jsonl")
    write_verdict_log([v for r in report.results for v in r.verdict_records], out / "verdict_log.jsonl")
    atomic.write_json(out / "comparison.json", report.as_dict())
    if as_json:
        typer.echo(json_out(report.as_dict(), indent=2, default=float))
        return
    print_report(report, console)
    console.print(f"wrote {out / 'protocol_log.jsonl'}, {out / 'verdict_log.jsonl'} and {out / 'comparison.json'}",
                  highlight=False)
