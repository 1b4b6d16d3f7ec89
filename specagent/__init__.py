"""specagent: predict, measure and plan the cost of weak-strong speculative tool-using agents.

The names below are the typed public API; the subpackages hold the rest
(specagent.costmodel, .hardware, .traces, .simulator, .kernels, .reports, .cli; .common
at the bottom). They are imported on first use, not here: importing any subpackage
runs this file first, and the lower layers must not pull in the ones above them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_API = {
    "BalancePoint": "specagent.costmodel.balance", "balance_point": "specagent.costmodel.balance",
    "Deployment": "specagent.costmodel.deployment", "DeploymentDoesNotFit": "specagent.costmodel.deployment",
    "ModelSpec": "specagent.costmodel.model_spec", "load_model_spec": "specagent.costmodel.model_spec",
    "Passes": "specagent.costmodel.passes",
    "decode": "specagent.costmodel.phases", "prefill": "specagent.costmodel.phases",
    "repair": "specagent.costmodel.phases", "verify": "specagent.costmodel.phases",
    "PassCost": "specagent.costmodel.roofline", "estimate": "specagent.costmodel.roofline",
    "HardwareProfile": "specagent.hardware.profile", "load_hardware": "specagent.hardware.profile",
    "AcceptanceModel": "specagent.simulator.acceptance.model",
    "Comparison": "specagent.simulator.run", "compare": "specagent.simulator.run", "simulate": "specagent.simulator.run",
    "predict": "specagent.simulator.run",
    "ApiModel": "specagent.simulator.protocol.setting", "Setting": "specagent.simulator.protocol.setting",
    "default_setting": "specagent.simulator.protocol.setting", "edge_setting": "specagent.simulator.protocol.setting",
    "DeploymentSpec": "specagent.simulator.scenario", "Scenario": "specagent.simulator.scenario",
    "Trajectory": "specagent.traces", "default_workload_path": "specagent.traces", "load_trajectories": "specagent.traces",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'specagent' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
