"""The GPU (or CPU) calibration (`specagent calibrate`): microbenchmark this device, fit the roofline's efficiencies,
write a hardware profile; optionally measure the serving-engine terms and write an engine profile.

Not the acceptance search (`specagent acceptance calibrate`, simulator/jobs/acceptance_search.py), which moves no
hardware term. The measurements are kernels/calibrate.py and kernels/engine_terms.py (torch, imported inside `run`);
the profiles are the job's product, so their paths are fields of the Request and each is written as soon as it is
measured (an interrupted run keeps the hardware profile it finished).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.kernels.configs import SCALES, strong_spec, weak_spec
from specagent.kernels.jobs import setup_device, torch_backend
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report

#: The choices kernels/microbench.py accepts, repeated here so that a bad value is refused before torch is imported
#: (tests/test_fuzz_commands.py checks they agree).
DTYPE_NAMES = ("fp32", "bf16", "fp16")
STATISTICS = ("median", "min")
CLOCKS = ("wall", "cpu")
MAX_REPEATS = 1000
MAX_THREADS = 1024


def check_device_flags(device: str, dtype: str, threads: int, repeats: int, clock: str, clocks: tuple[str, ...]) -> None:
    """The settings of calibrate and live that need no torch, checked before torch is imported or a model built."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise JobError(f"expected cpu, cuda or cuda:N, got '{device}'", "device")
    if dtype not in DTYPE_NAMES:
        raise JobError(f"expected one of {', '.join(DTYPE_NAMES)}, got '{dtype}'", "dtype")
    if not 0 <= threads <= MAX_THREADS:
        raise JobError(f"expected a thread count in [0, {MAX_THREADS}] (0: torch's default), got {threads}", "threads")
    if not 1 <= repeats <= MAX_REPEATS:
        raise JobError(f"expected a count in [1, {MAX_REPEATS}], got {repeats}", "repeats")
    if clock not in clocks:
        raise JobError(f"expected one of {', '.join(clocks)}, got '{clock}'", "clock")
    if clock == "cpu" and not device.startswith("cpu"):
        raise JobError(f"`clock` cpu times this thread's CPU work; models on {device} need `clock` wall")


def model_spec(which: str, scale: str) -> Any:
    """The scaled Weak or Strong model (kernels/configs.py)."""
    if which not in ("weak", "strong"):
        raise JobError(f"`model` must be 'weak' or 'strong', got '{which}'")
    if scale not in SCALES:
        raise JobError(f"`scale` must be one of {', '.join(SCALES)}, got '{scale}'")
    return weak_spec(scale) if which == "weak" else strong_spec(scale)


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest(Request):
    """Which device, model and timing; the profiles to write (the `scenario` is not read)."""

    output: Path = field(metadata={"short": "-o", "help": "Hardware profile TOML to write (atomically)."})
    device: str = field(default="cpu", metadata={"help": "Torch device: cpu, or cuda / cuda:N."})
    dtype: str = field(default="fp32", metadata={"help": "Dtype the models run in (fp32, bf16, fp16). bf16 is emulated and slow on "
                                                         "CPUs without AVX512-BF16/AMX."})
    model: str = field(default="weak", metadata={"help": "Which scaled model the profile is calibrated for: weak or strong "
                                                         "(kernels/configs.py)."})
    scale: str = field(default="bench", metadata={"help": "Model scale: tiny (tests) or bench."})
    threads: int = field(default=0, metadata={"help": "torch threads (0: torch's default)."})
    repeats: int = field(default=7, metadata={"help": "Timed repeats per benchmark (after warm-up)."})
    statistic: str = field(default="median", metadata={"help": "median, or min (the uncontended time on a shared machine)."})
    clock: str = field(default="wall", metadata={"help": "wall, or cpu (this thread's CPU time, leaving out other jobs' time on the "
                                                         "core: for --threads 1 on a CPU; `specagent live` times its passes the same way)."})
    validate: bool = field(default=True, metadata={"help": "Also predict and measure held-out full passes and report MAPE."})
    engine_terms: bool | None = field(default=None, metadata={
        "help": "Also measure the serving-engine terms (per-layer fixed time, launch cost, kernels, collectives where >= 2 GPUs) and "
                "write an engine profile. Default: on for --device cuda, off on a CPU."})
    engine_output: Path | None = field(default=None, metadata={
        "help": "Engine profile TOML to write (default: beside --output, NAME.engine.toml; giving it turns --engine-terms on)."})

    def check(self) -> None:
        check_device_flags(self.device, self.dtype, self.threads, self.repeats, self.clock, CLOCKS)
        if self.statistic not in STATISTICS:
            raise JobError(f"expected one of {', '.join(STATISTICS)}, got '{self.statistic}'", "statistic")
        model_spec(self.model, self.scale)

    def check_engine_output(self) -> None:
        """The engine profile's settings: not skipped and named at once, not the hardware profile's file."""
        if self.engine_terms is False and self.engine_output is not None:
            raise JobError("names the engine profile that --no-engine-terms skips; drop one of them", "engine_output")
        if self.measures_engine and self.engine_path.resolve() == self.output.resolve():
            raise JobError(f"{self.engine_path} is the hardware profile's `output`; give another path", "engine_output")

    @property
    def measures_engine(self) -> bool:
        """Whether the engine terms are measured: as asked, else on a GPU or when their profile is named."""
        if self.engine_terms is not None:
            return self.engine_terms
        return self.device.startswith("cuda") or self.engine_output is not None

    @property
    def engine_path(self) -> Path:
        return self.engine_output or self.output.with_name(f"{self.output.stem}.engine.toml")


@dataclass
class CalibrateResult(Result):
    """The fitted figures, the profiles written, the engine terms (if measured) and the held-out validation rows."""

    request: CalibrateRequest
    fit: Any  # kernels.calibrate.Calibration
    hardware: Any  # the fitted HardwareProfile
    spec_name: str
    terms: Any = None  # kernels.engine_terms.EngineTerms
    engine: Any = None  # the measured EngineProfile
    rows: list = field(default_factory=list)  # held-out passes: predicted vs measured
    engine_rows: list = field(default_factory=list)  # the same passes priced with the measured engine terms

    def to_dict(self) -> dict[str, Any]:
        from specagent.kernels.calibrate import mape

        fit = self.fit
        out = {"profile": str(self.request.output), "peak_tflops": fit.peak_tflops, "bandwidth_tb_s": fit.bandwidth_tb_s,
               "bandwidth_efficiency": fit.bandwidth_efficiency, "compute_curve": fit.curve, "pass_overhead_us": fit.pass_overhead_us,
               "validation": [dict(batch=r.batch, new_tokens=r.new_tokens, context=r.context, predicted_s=r.predicted_s,
                                   measured_s=r.measured_s, error=r.error) for r in self.rows],
               "mape": mape(self.rows) if self.rows else None}
        if self.terms is not None:
            out["engine"] = {"profile": str(self.request.engine_path), "id": self.engine.id, "terms": self.terms.as_dict(),
                             "validation_mape": mape(self.engine_rows) if self.engine_rows else None}
        return out

    def write(self, folder: str | Path) -> list[Path]:
        """The profiles are written by `run` as each is measured: their paths."""
        return [self.request.output, *([self.request.engine_path] if self.terms is not None else [])]


def run(request: CalibrateRequest, progress: Progress | None = None) -> CalibrateResult:
    """Calibrate, write the hardware profile; then (if asked) the engine terms and their profile; then validate."""
    request.check()
    _, cal, mb = torch_backend()
    setup_device(request.device, request.threads)
    try:
        cfg = mb.TimingConfig(repeats=request.repeats, statistic=request.statistic, clock=request.clock)
        cfg.timer(request.device)
    except ValueError as exc:
        raise JobError(f"`statistic`/`clock`: {exc}") from None
    request.check_engine_output()
    spec = model_spec(request.model, request.scale)

    def tick(message: str) -> None:
        report(progress, message)

    report(progress, "calibrating")
    fit, hw, data = cal.calibrate(spec, request.dtype, request.device, cfg, progress=tick)
    report(progress, "writing profile")
    cal.write_profile_toml(data, request.output)
    result = CalibrateResult(request, fit, hw, spec.name)
    if request.measures_engine:
        from specagent.hardware.serving_engine import parse_engine
        from specagent.kernels import engine_terms as et

        scale = request.scale
        result.terms = et.measure_engine_terms({"weak": weak_spec(scale), "strong": strong_spec(scale)}, {request.model: hw},
                                               request.dtype, request.device, cfg, scale=scale, progress=tick)
        eng_data = et.engine_profile_dict(result.terms)
        et.write_engine_toml(eng_data, request.engine_path)
        result.engine = parse_engine(eng_data, str(request.engine_path))
    if request.validate:
        report(progress, "validation passes")
        result.rows = cal.validate(spec, hw, request.dtype, device=request.device, cfg=cfg)
        if result.engine is not None:
            from specagent.kernels import engine_terms as et

            result.engine_rows = et.price_rows(spec, hw, result.engine, request.dtype, result.rows)
    return result
