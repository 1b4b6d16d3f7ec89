"""The balance-point job: the decode batch at which one deployment turns compute-bound (`roofline balance`), next to the
hardware ridge. No scenario: one deployment (default: the Scenario's Strong one), its context and expert reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.simulator.jobs.base import Progress, Request, Result, report
from specagent.simulator.jobs.roofline import HARDWARE_DIR_HELP, build, check_tokens, check_weight_mode
from specagent.simulator.scenario import DeploymentSpec, Scenario

@dataclass(frozen=True)
class BalancePointRequest(Request):
    """The deployment, the cached tokens per decoding sequence, and the expert reads."""

    context: int = field(default=0, metadata={"help": "Cached tokens per decoding sequence (0 isolates the weight traffic)."})
    weight_mode: str = field(default="union", metadata={"help": "'union' or 'active' expert reads."})
    hardware_dir: Path | None = field(default=None, metadata={"help": HARDWARE_DIR_HELP})
    deployment: DeploymentSpec = field(default=Scenario.strong)  # type: ignore[valid-type]

    def check(self) -> None:
        check_tokens(context=self.context)
        check_weight_mode(self.weight_mode)


@dataclass
class BalancePointResult(Result):
    """The balance point (costmodel.balance.BalancePoint) of the built deployment."""

    request: BalancePointRequest
    deployment: Any
    point: Any

    def to_dict(self) -> dict[str, Any]:
        return dict(deployment=self.deployment.describe(), **self.point.__dict__)

    def write(self, folder: str | Path) -> list[Path]:
        return []  # prints only


def run(request: BalancePointRequest, progress: Progress | None = None) -> BalancePointResult:
    """The decode batch at which the request's deployment turns compute-bound."""
    from specagent.costmodel.balance import balance_point

    request.check()
    report(progress, "loading the deployment")
    dep = build(request.deployment, request.hardware_dir)
    return BalancePointResult(request, dep, balance_point(dep, context=request.context, weight_mode=request.weight_mode))
