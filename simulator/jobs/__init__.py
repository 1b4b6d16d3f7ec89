"""The jobs layer: one module per command, each a typed Request run into a typed Result.

Reading guide: start with ``base.py`` (what a Request, a Result and a job are), then the job you care
about — ``predict.py`` is the main one (every strategy per task, the bottom line, its intervals and
verdict). A job composes the layers below it (the Scenario, the simulator's planners and pricers, the
fleet builder) and is what both the CLI (``specagent/cli``, which generates its flags from the Request
and prints the Result) and Python callers (the notebooks) run, so they cannot disagree. Reports
(``specagent/reports``) read Results; they price nothing.

``JOBS`` names every job's module, loaded on first use (the CLI imports only the job it runs).
"""

from __future__ import annotations

#: job name -> its module under specagent.simulator.jobs
JOBS = {"predict": "predict", "replay": "replay", "sweep": "sweep", "study balance": "study", "study sensitivity": "sensitivity"}
