"""The profile-fit job: a workload profile (turns, kind transitions, tokens, latencies, success) fitted to real traces
(traces/fit.py) and written as TOML, which `traces synth` and a scenario's `--synthetic` read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specagent.simulator.jobs.base import JobError, Progress, Request, Result, read_trace

if TYPE_CHECKING:
    from specagent.traces.profile import WorkloadProfile


@dataclass(frozen=True)
class FitProfileRequest(Request):
    """Trace files to fit, the profile file to write and the profile's name."""

    files: tuple[Path, ...] = field(default=(), metadata={"argument": True, "required": True,
                                                           "help": "Trace files (.jsonl/.parquet) to fit."})
    out: Path | None = field(default=None, metadata={"short": "-o", "required": True, "help": "Output profile (.toml)."})
    name: str = field(default="fitted", metadata={"help": "Profile name."})

    def check(self) -> None:
        if not self.files:
            raise JobError("give at least one trace file to fit", "files")
        if self.out is None or Path(self.out).suffix.lower() != ".toml":
            raise JobError(f"{self.out}: a workload profile is a TOML file: expected a name ending in .toml", "out")


@dataclass
class FitProfileResult(Result):
    """The fitted profile, how many trajectories it was fitted to, and the file it was written to."""

    request: FitProfileRequest
    profile: WorkloadProfile
    trajectories: int

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.request.out), "name": self.profile.name, "trajectories": self.trajectories,
                "source": self.profile.source}

    def write(self, folder: str | Path) -> list[Path]:
        return [Path(self.request.out)]  # type: ignore[arg-type]  # written by `run`


def run(request: FitProfileRequest, progress: Progress | None = None) -> FitProfileResult:
    """Read every trace, fit the profile and write it to `out` (atomically)."""
    from specagent.traces.fit import fit_profile
    from specagent.traces.profile import save_profile

    request.check()
    trajs = [t for f in request.files for t in read_trace(Path(f), progress)]
    names = ", ".join(Path(f).name for f in request.files)
    prof = fit_profile(trajs, name=request.name, source=f"fit to {names} ({len(trajs)} trajectories)")
    save_profile(prof, request.out)  # type: ignore[arg-type]
    return FitProfileResult(request, prof, len(trajs))
