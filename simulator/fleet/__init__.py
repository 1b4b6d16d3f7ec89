"""The fleet engine: pools of replicas, routers, iteration-level batching (sim.py), its configuration and results.

Runs before any of its modules loads, to pick the fleet backend: the mypyc-compiled modules or
their sources (native.py).
"""

from pathlib import Path

from specagent.simulator.fleet.native import select_engine

#: The fleet backend: the compiled fleet modules, or their sources (not the pricing engine, Scenario.pricing_engine,
#: nor a serving engine, hardware/serving_engine.py).
FLEET_BACKEND = select_engine(__name__, Path(__file__).resolve().parent)
