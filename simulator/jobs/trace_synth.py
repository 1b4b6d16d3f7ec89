"""The synthesis job: seeded synthetic trajectories drawn from a workload profile (traces/synth.py), streamed to a
trace file a block at a time; the same seed gives the same bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.simulator.jobs.base import JobError, Progress, Request, Result, counted, report
from specagent.simulator.jobs.checks import check_bounds
from specagent.traces.vocabulary import MAX_TRAJECTORIES


@dataclass(frozen=True)
class SynthRequest(Request):
    """The profile to draw from, the trace file to write, how many trajectories and the seed."""

    profile: str = field(default="", metadata={"required": True,
                                               "help": "Shipped profile name (see `profiles`) or a .toml path."})
    out: Path | None = field(default=None, metadata={"short": "-o", "required": True,
                                                     "help": "Output file (.jsonl or .parquet)."})
    trajectories: int = field(default=1000, metadata={"short": "-n", "min": 1, "max": MAX_TRAJECTORIES,
                                                      "help": "Number of trajectories."})
    seed: int = field(default=0, metadata={"min": 0, "max": 2**63 - 1,
                                           "help": "Random seed; same seed, byte-identical output."})

    def check(self) -> None:
        if not self.profile:
            raise JobError("a workload profile (a shipped name or a .toml file) is required", "profile")
        if self.out is None:
            raise JobError("an output trace file (.jsonl or .parquet) is required", "out")
        check_bounds(self)


@dataclass
class SynthResult(Result):
    """What was written: the profile's name, the trajectories and steps, the file."""

    request: SynthRequest
    profile_name: str
    steps: int

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {"out": str(r.out), "profile": self.profile_name, "trajectories": r.trajectories, "steps": self.steps,
                "seed": r.seed}

    def write(self, folder: str | Path) -> list[Path]:
        return [Path(self.request.out)]  # type: ignore[arg-type]  # streamed by `run`


def run(request: SynthRequest, progress: Progress | None = None) -> SynthResult:
    """Draw the trajectories into `out` (atomically), each block told to `progress`."""
    from specagent.traces.io import save_synthetic
    from specagent.traces.profile import load_profile

    request.check()
    prof = load_profile(request.profile)
    n = request.trajectories
    what = f"generating {n:,} trajectories"
    report(progress, what, 0, n)
    steps = save_synthetic(prof, n, request.seed, request.out, progress=counted(progress, what, n))  # type: ignore[arg-type]
    return SynthResult(request, prof.name, steps)
