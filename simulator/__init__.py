"""Protocol, fleet and sweep simulators.

Runs before any submodule loads, to pick the fleet engine: compiled, or from source (native.py).
"""

from pathlib import Path

from specagent.simulator.native import select_engine

ENGINE = select_engine(__name__, Path(__file__).resolve().parent)
