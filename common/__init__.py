"""The bottom layer: small helpers every other layer may use (atomic writes, the input-error type).

Imports nothing from specagent, so any layer can import it without pulling in the others.
"""
