"""Protocol, fleet and sweep simulators.

Runs before any submodule loads, to pick the fleet engine: compiled, or from source (native.py).
"""

from pathlib import Path

from specagent.simulator.native import select_engine

#: The fleet backend: the compiled fleet modules, or their sources (not the pricing engine, Scenario.pricing_engine,
#: nor a serving engine, hardware/serving_engine.py).
FLEET_BACKEND = select_engine(__name__, Path(__file__).resolve().parent)
ENGINE = FLEET_BACKEND  # the old name, kept for one release
