"""Capacity: fleets built from a Scenario, analytic pool bounds, steady-state measurement."""
