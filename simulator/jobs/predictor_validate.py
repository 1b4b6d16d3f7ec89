"""The predictor's validation (`specagent predictor validate`): the Strong share of memory traffic predicted from
verdict + repair tokens alone (the verdict-token predictor of Wang et al., arXiv:2610.21463), against the share the
simulator accounts, on recorded, live and synthetic workloads, under both weight-read modes.

Live protocol logs (`specagent live -o DIR` writes DIR/protocol_log.jsonl) are checked next to the simulated
workloads, on the decisions the live run recorded (simulator/predictor.py: `protocol_log_k`, `validate_predictor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.simulator.strategies.catalog import STRATEGY_NAMES

#: The strategies checked by default: SpecAgent's variants and the two others that send Strong verdicts.
DEFAULT_STRATEGIES = "specagent,specagent_every_chunk,specagent_hold_replies,collab,router"
#: The scenario's fields this job does not read (the workloads and strategies are its own; both weight modes are shown).
NOT_READ = ("workload", "strategies", "weight_mode", "pricing_engine")


@dataclass(frozen=True)
class PredictorValidateRequest(Request):
    """The workloads and strategies to check, on the scenario's deployments, acceptance, seed, K and review policy."""

    trace: tuple[Path, ...] = field(default=(), metadata={
        "help": "One or more traces (each a workload), protocol logs of `specagent live` included (checked under SpecAgent with "
                "their recorded verdicts and K). Default: the shipped τ²-Bench airline workload."})
    synthetic: int = field(default=60, metadata={
        "help": "Also validate on this many synthetic trajectories from every shipped workload profile (0: none)."})
    strategies: str = field(default=DEFAULT_STRATEGIES, metadata={"help": "Comma-separated strategies to check."})

    def check(self) -> None:
        from specagent.traces.synth import MAX_TRAJECTORIES

        if self.scenario.strong_api is not None:
            raise JobError(f"{self.scenario.strong_api}: the predictor needs a self-hosted Strong deployment (an API hides its "
                           "memory traffic)", "scenario.strong_api")
        if not 0 <= self.synthetic <= MAX_TRAJECTORIES:
            raise JobError(f"expected trajectories per profile in [0, {MAX_TRAJECTORIES:,}], got {self.synthetic}", "synthetic")
        self.names()

    def names(self) -> list[str]:
        names = [s.strip() for s in self.strategies.split(",") if s.strip()]
        unknown = [s for s in names if s not in STRATEGY_NAMES]
        if unknown or not names:
            raise JobError(f"expected a comma-separated list of {', '.join(STRATEGY_NAMES)}; got {self.strategies!r}", "strategies")
        return names


@dataclass
class PredictorValidateResult(Result):
    """One row per (workload, strategy, weight mode): the predicted and accounted shares and the error."""

    table: Any  # pandas.DataFrame

    def records(self) -> list[dict[str, Any]]:
        return self.table.to_dict(orient="records")

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.records()}

    def worst(self) -> dict[str, float]:
        """The largest absolute error of the share, per weight mode."""
        return {m: float(v) for m, v in self.table.groupby("weight_mode")["abs_error"].max().items()}

    def write(self, folder: str | Path) -> list[Path]:
        """The table's rows as JSON at `folder` (a file)."""
        from specagent.common import atomic

        path = Path(folder)
        atomic.write_json(path, self.records())
        return [path]


def run(request: PredictorValidateRequest, progress: Progress | None = None) -> PredictorValidateResult:
    """Load every workload (protocol logs checked as such), synthesise the profiles', validate the predictor on each."""
    from specagent.simulator.predictor import protocol_log_k, validate_predictor
    from specagent.traces import default_workload_path, list_profiles, load_profile, load_trajectories, synthesize

    request.check()
    scenario = request.scenario
    workloads = {}
    for p in request.trace or (default_workload_path(),):
        report(progress, f"reading {p}")
        try:
            workloads[p.name] = load_trajectories(p)
        except (OSError, ValueError) as exc:
            raise JobError(f"{p}: {exc}") from None
        try:
            protocol_log_k(str(p), workloads[p.name])
        except ValueError as exc:
            raise JobError(str(exc)) from None
    if request.synthetic > 0:
        for name in list_profiles():
            workloads[f"synthetic:{name}"] = synthesize(load_profile(name), request.synthetic, scenario.seed)
    report(progress, f"validating on {len(workloads)} workloads")
    table = validate_predictor(workloads, scenario, strategies=request.names(), setting=scenario.setting())
    return PredictorValidateResult(table)
