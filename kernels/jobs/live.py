"""The live run on torch models (`specagent live`): SpecAgent with real (scaled) models and a real SQLite airline
service, each phase's measured time next to the simulator's for the same protocol logs.

The run itself is kernels/live_compare.py (`live_comparison`: calibrate unless profiles are given, run the
trajectories live, price their protocol logs); this job resolves what the run takes from its request (K, seed and
acceptance: given, else the named scenario's), checks everything that needs no torch first, and writes the protocol
log, the verdict log and comparison.json into `out`. A run on served models takes the same request plus the
endpoints (specagent/endpoints/jobs/live.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.kernels.configs import LIVE_ACCEPT, LIVE_TOKEN_SCALE, LIVE_TRAJECTORIES
from specagent.kernels.jobs import setup_device, torch_backend
from specagent.kernels.jobs.calibrate import CLOCKS, check_device_flags, model_spec
from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.strategies.catalog import DEFAULT_K, DEFAULT_REVIEW
from specagent.traces.schema import MAX_STEPS

#: Guards against a typo, not limits of the method: a live run of 10,000 trajectories already takes days on a CPU.
MAX_LIVE_TRAJECTORIES = 10_000
#: The files a live run writes in `out` (torch and served runs alike); none may replace the trace or scenario it reads.
OUTPUTS = ("protocol_log.jsonl", "verdict_log.jsonl", "verdicts.jsonl", "comparison.json")


@dataclass(frozen=True, kw_only=True)
class TorchLiveRequest(Request):
    """What to run live and on what. K, seed and acceptance: the fields when given, else the scenario's (`scenario_file`
    when named, else `scenario`); the acceptance model is a named scenario's only (else the constant `accept`)."""

    trace: Path | None = field(default=None, metadata={
        "help": "Trajectories (.jsonl/.parquet; protocol logs replay their recorded verdicts). Default: --trajectories evenly "
                "spaced over the shipped τ²-Bench airline trajectories that make a read."})
    synthetic: bool = field(default=False, metadata={"help": "Run a seeded synthetic airline conversation instead of a trace "
                                                             "(seconds; for tests)."})
    strategy: str = field(default="specagent", metadata={"help": "Only 'specagent' runs live."})
    scenario_file: str | None = field(default=None, metadata={
        "flag": "scenario", "help": "Scenario TOML file or shipped name (default, edge): the run takes its K, seed and acceptance "
                                    "model (its review policy must be on_write, the one the live runner implements); --k, --seed and "
                                    "--accept override it."})
    k: int | None = field(default=None, metadata={"help": f"K: at most this many steps drafted per chunk (default: the scenario's, "
                                                          f"else {DEFAULT_K})."})
    trajectories: int = field(default=LIVE_TRAJECTORIES, metadata={"short": "--limit", "help": "How many trajectories to run (of "
                                                                                            "--trace: the first N)."})
    token_scale: float = field(default=LIVE_TOKEN_SCALE, metadata={
        "help": "Scale every token count of the trace, real tool results included (the scaled trace is what runs and what the "
                "simulator prices; the default keeps the default run to ~1 min of CPU)."})
    repeats: int = field(default=1, metadata={"help": "Run the workload this many times (same seed: the same passes) and time each "
                                                      "pass at its fastest."})
    scale: str = field(default="bench", metadata={"help": "Model scale: tiny or bench (kernels/configs.py)."})
    dtype: str = field(default="fp32", metadata={"help": "Model dtype."})
    device: str = field(default="cpu", metadata={"help": "Torch device: cpu, or cuda / cuda:N."})
    threads: int = field(default=1, metadata={"help": "torch threads (0: torch's default). One thread on a CPU makes the cpu clock exact."})
    clock: str = field(default="auto", metadata={"help": "auto, wall or cpu: what a pass's time is. auto: cpu (this thread's CPU time) "
                                                         "on a CPU with one thread, else wall (a GPU synchronises after each pass)."})
    seed: int | None = field(default=None, metadata={"help": "Seed of weights, filler tokens, tool arguments and acceptance draws "
                                                             "(default: the scenario's, else 0)."})
    accept: float | None = field(default=None, metadata={"help": f"Acceptance probability per drafted step, every kind alike, when "
                                                                 f"the trace carries no labels (default: the scenario's acceptance "
                                                                 f"model, else {LIVE_ACCEPT})."})
    out: Path = field(default=Path("out/live"), metadata={"short": "-o", "help": "Folder for the protocol log (protocol_log.jsonl), "
                                                                                 "the comparison (comparison.json) and the calibrated profiles."})
    compare: bool = field(default=True, metadata={"help": "Price the same protocol logs with the simulator and compare per phase."})
    weak_hardware: str | None = field(default=None, metadata={"help": "Hardware profile for the Weak model (default: calibrate both "
                                                                      "models on --device first)."})
    strong_hardware: str | None = field(default=None, metadata={"help": "Hardware profile for the Strong model (default: the Weak one)."})

    def resolved(self) -> tuple[Scenario, int, int, AcceptanceModel | None]:
        """The scenario, K, seed and (a named scenario's) acceptance model the run takes."""
        if self.strategy != "specagent":
            raise JobError(f"`strategy` {self.strategy}: only 'specagent' runs live (the simulator prices the others)")
        sc = self.scenario
        if self.scenario_file is not None:
            try:
                sc = Scenario.load(self.scenario_file)
            except ScenarioError as exc:
                raise JobError(str(exc), "scenario_file") from None
            if sc.review != DEFAULT_REVIEW:
                raise JobError(f"`scenario_file` {self.scenario_file}: review policy '{sc.review}'; the live runner implements "
                               f"'{DEFAULT_REVIEW}' only")
        acceptance = sc.acceptance if self.scenario_file is not None and self.accept is None else None
        if acceptance is not None and acceptance.weak_token_ratio != 1.0:
            # the live Weak model drafts at the trace's token lengths: the scenario's ratio is a simulator assumption for
            # reference trajectories; the run (and its recorded setup) uses 1
            acceptance = dataclasses.replace(acceptance, weak_token_ratio=1.0)
        return sc, sc.k if self.k is None else self.k, sc.seed if self.seed is None else self.seed, acceptance

    def check_trajectories(self) -> None:
        if not 1 <= self.trajectories <= MAX_LIVE_TRAJECTORIES:
            raise JobError(f"expected a count in [1, {MAX_LIVE_TRAJECTORIES:,}], got {self.trajectories}", "trajectories")

    def check(self) -> None:
        from specagent.hardware.profile import HardwareProfileError, load_hardware

        _, k, seed, _ = self.resolved()
        accept = LIVE_ACCEPT if self.accept is None else self.accept
        check_device_flags(self.device, self.dtype, self.threads, self.repeats, self.clock, ("auto", *CLOCKS))
        self.check_trajectories()
        if not 0 < self.token_scale <= 1:  # NaN fails too
            raise JobError(f"expected a scale in (0, 1] (1: the trace's own token counts), got {self.token_scale}", "token_scale")
        if not 1 <= k <= MAX_STEPS:
            raise JobError(f"expected steps per drafted chunk in [1, {MAX_STEPS:,}], got {k}", "k")
        if not 0 <= accept <= 1:
            raise JobError(f"expected a probability in [0, 1], got {accept}", "accept")
        if not 0 <= seed < 2**63:
            raise JobError(f"expected a whole number in [0, 2^63), got {seed}", "seed")
        if self.synthetic and self.trace is not None:
            raise JobError("give `trace` or `synthetic`, not both", "synthetic")
        model_spec("weak", self.scale)
        for name in ("weak_hardware", "strong_hardware"):
            if getattr(self, name) is not None:
                try:
                    load_hardware(getattr(self, name))
                except HardwareProfileError as exc:
                    raise JobError(str(exc), name) from None


@dataclass
class TorchLiveResult(Result):
    """The live run's report (kernels/live_compare.LiveReport: repeats, comparison, setup, notes)."""

    report: Any

    def to_dict(self) -> dict[str, Any]:
        return self.report.as_dict()

    def write(self, folder: str | Path) -> list[Path]:
        """The protocol log (what the simulator priced), the verdict log (`acceptance fit` reads it), comparison.json."""
        from specagent.common import atomic
        from specagent.traces.io import save_trajectories
        from specagent.traces.verdict_log import write_verdict_log

        folder = Path(folder)
        paths = [folder / "protocol_log.jsonl", folder / "verdict_log.jsonl", folder / "comparison.json"]
        save_trajectories([r.protocol_log for r in self.report.results], paths[0])
        write_verdict_log([v for r in self.report.results for v in r.verdict_records], paths[1])
        atomic.write_json(paths[2], self.report.as_dict())
        return paths


def run(request: TorchLiveRequest, progress: Progress | None = None) -> TorchLiveResult:
    """Load the trace, run it live (calibrating first unless profiles are given), write the logs and the comparison."""
    request.check()
    _, k, seed, acceptance = request.resolved()
    trajs = None
    if request.trace is not None:
        from specagent.traces.errors import TraceFormatError
        from specagent.traces.io import load_trajectories

        try:
            trajs = load_trajectories(request.trace)[:request.trajectories]
        except (TraceFormatError, FileNotFoundError) as exc:  # the loader's errors name file and field
            raise JobError(str(exc), "trace") from None
    torch_backend()
    from specagent.hardware.profile import HardwareProfileError
    from specagent.kernels.live import check_tools, synthetic_airline_trajectory
    from specagent.kernels.live_compare import live_comparison

    setup_device(request.device, request.threads)
    if request.synthetic:
        trajs = [synthetic_airline_trajectory(seed + i) for i in range(request.trajectories)]
    try:
        check_tools(trajs or [])
    except ValueError as exc:
        raise JobError(f"{request.trace}: {exc}") from None

    def tick(message: str, done: int | None = None, total: int | None = None) -> None:
        report(progress, message, done or 0, total)

    try:
        live = live_comparison(trajs, trajectories=request.trajectories, token_scale=request.token_scale, device=request.device,
                               dtype=request.dtype, scale=request.scale, k=k, seed=seed,
                               accept=LIVE_ACCEPT if request.accept is None else request.accept, repeats=request.repeats,
                               clock=None if request.clock == "auto" else request.clock, weak_profile=request.weak_hardware,
                               strong_profile=request.strong_hardware, out_dir=request.out, compare_with_simulator=request.compare,
                               progress=tick, acceptance=acceptance)
    except (ValueError, HardwareProfileError) as exc:
        raise JobError(str(exc)) from None
    result = TorchLiveResult(live)
    result.write(request.out)
    return result
