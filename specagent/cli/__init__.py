"""The `specagent` command line, in one place: thin commands composing the layers below.

`app.py` holds the root and mounts every command, `foundation.py` the foundation commands (hardware, models, roofline);
the others, each imported when first asked for (`lazy.py`): `simulate.py` (predict, simulate, predictor), `fleet.py` (plan),
`sweep.py`, `study.py` (balance, sensitivity), `replay.py`, `traces.py`, `report.py`, `kernels.py` (calibrate, live), `scenario.py`. Scenario flags are
generated from the Scenario's fields (`options.py`); every failure is one line (`console.py`).
"""

from specagent.cli.app import app, main

__all__ = ["app", "main"]
