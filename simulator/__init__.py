"""Protocol, fleet and sweep simulators.

Subpackages follow the layers (tests/test_import_layers.py): protocol and acceptance, then the
pricing engines and the fleet, the strategies, capacity; the entry points (scenario, run,
planner, study, sweeps, calibration, replay) sit here at the top.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """FLEET_BACKEND (and its old name ENGINE, kept for one release) moved to specagent.simulator.fleet.sim."""
    if name in ("FLEET_BACKEND", "ENGINE"):
        from specagent.simulator.fleet import FLEET_BACKEND

        return FLEET_BACKEND
    raise AttributeError(f"module 'specagent.simulator' has no attribute '{name}'")
