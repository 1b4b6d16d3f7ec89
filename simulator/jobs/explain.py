"""The explain job: why SpecAgent's ratios to Strong-only are what they are, factor by factor.

It runs the scenario as `predict` does (Strong-only and SpecAgent only), takes each ratio apart into per-phase shares
and their factors (simulator/explain.py: the parts add back to the ratio), reruns the ratios under one change each
(zero acceptance, thinking off, no environment, a fresh verifier prompt), and — in the publication's evaluated
setting — says what separates each ratio from its published range, in numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator import explain as X
from specagent.simulator.jobs import bottom_line as JB
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report
from specagent.simulator.jobs.predict import comparable, decompositions_dict, setting_note
from specagent.simulator.protocol.environment import Environment
from specagent.simulator.rates_prices import parse_prices
from specagent.simulator.run import Comparison
from specagent.simulator.run import predict as run_predict
from specagent.simulator.uncertainty import published_for


@dataclass(frozen=True)
class ExplainRequest(Request):
    """A scenario to explain, the prices of its dollars, and whether to rerun it with one thing changed."""

    price: tuple[str, ...] = field(default=(), metadata={
        "help": "$/GPU-hour per GPU type, as predict's --price (default: each profile's sourced price)."})
    counterfactuals: bool = field(default=True, metadata={
        "help": "Rerun the ratios with one thing changed (zero acceptance, thinking off, …); --no-counterfactuals is faster."})

    def prices(self) -> dict[str, float]:
        try:
            prices = parse_prices(list(self.price))
            for key in prices:
                load_hardware(key)
        except (ValueError, HardwareProfileError) as exc:
            raise JobError(str(exc), "price") from None
        return prices

    def check(self) -> None:
        self.prices()


@dataclass
class ExplainResult(Result):
    """The decomposition, the protocol facts, the reruns, the gaps to the published ranges and the setting note."""

    request: ExplainRequest
    comparison: Comparison
    explanation: X.Explanation
    gaps: list[X.Gap] = field(default_factory=list)
    setting_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.explanation
        return {
            "published": [{"resource": g.resource, "figure_id": g.figure_id, "ratio": g.ratio, "low": g.low, "high": g.high,
                           "gap": g.gap, "closes": dict(g.closes),
                           "parts": [{"phase": label, "share": share, "factors": [{"name": f.name, "value": f.value} for f in fs],
                                      "alone_needed": list(needs)} for label, share, fs, needs in g.parts]}
                          for g in self.gaps],
            "decompositions": decompositions_dict(r.decompositions),
            "facts": r.facts, "sources": r.sources, "counterfactuals": r.counterfactuals,
        }

    def write(self, folder: str | Path) -> list[Path]:
        return [atomic.write_json(Path(folder) / "explain.json", self.to_dict())]


def published_ranges(comp: Comparison) -> dict[str, tuple[str, float, float]]:
    """resource -> (figure id, low, high) of the publication's SpecAgent ranges, where this run is their setting
    (`predict.comparable`: the evaluated setting, `--scenario wang2026-tau2`); {} elsewhere."""
    if not comparable(comp):
        return {}
    pub = published_for(comp)
    out = {}
    for res, (_, column) in X.RESOURCES.items():
        r = pub.get((X.SPEC, column))
        if r is not None:
            out[res] = (r.figure_id, r.low, r.high)
    return out


def run(request: ExplainRequest, progress: Progress | None = None, workload: Any = None) -> ExplainResult:
    """Explain the request's scenario (`workload`: (trajectories, path, name) as recorded, already loaded — the
    environment preset is applied here, so that the reruns without it start from the recorded waits)."""
    request.check()
    prices = request.prices()
    sc = request.scenario.replace(strategies=("strongonly", "specagent"))
    raw, _path, name = workload if workload is not None else sc.replace(environment=Environment()).load_workload()
    trajs = sc.environment.apply(raw)
    setting = sc.setting()
    report(progress, "simulating Strong-only and SpecAgent")
    try:
        comp = run_predict(sc, trajs, name, setting=setting)
        result = X.explain(comp, trajs, JB.pools(setting, prices), None if request.counterfactuals else (),
                           progress=lambda n: report(progress, f"rerunning: {n}"), recorded=raw)
    except (InputError, ValueError) as exc:
        raise JobError(str(exc)) from None
    return ExplainResult(request, comp, result, X.published_gaps(result, published_ranges(comp)), setting_note(comp))
