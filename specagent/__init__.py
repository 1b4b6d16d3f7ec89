"""specagent: predict, measure and plan the cost of weak-strong speculative tool-using agents.

The names below are the typed public API; the subpackages hold the rest
(specagent.costmodel, .hardware, .traces, .simulator, .kernels, .reports).
"""

__version__ = "0.1.0"

from specagent.costmodel.balance import BalancePoint, balance_point
from specagent.costmodel.deployment import Deployment, DeploymentDoesNotFit
from specagent.costmodel.model_spec import ModelSpec, load_model_spec
from specagent.costmodel.passes import Passes
from specagent.costmodel.phases import decode, prefill, repair, verify
from specagent.costmodel.roofline import PassCost, estimate
from specagent.hardware.profile import HardwareProfile, load_hardware
from specagent.simulator.acceptance import AcceptanceModel
from specagent.simulator.run import Comparison, compare, simulate
from specagent.simulator.setting import ApiModel, Setting, default_setting, edge_setting
from specagent.traces import Trajectory, default_workload_path, load_trajectories

__all__ = [
    "__version__", "AcceptanceModel", "ApiModel", "BalancePoint", "Comparison", "Deployment", "DeploymentDoesNotFit",
    "HardwareProfile", "ModelSpec", "PassCost", "Passes", "Setting", "Trajectory", "balance_point", "compare", "decode",
    "default_setting", "default_workload_path", "edge_setting", "estimate", "load_hardware", "load_model_spec",
    "load_trajectories", "prefill", "repair", "simulate", "verify",
]
