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

#: job name -> its module under specagent.simulator.jobs (a dotted path from ``specagent.``: a job that drives torch or
#: the network lives beside what it drives, above the simulator: kernels/jobs/, endpoints/jobs/)
JOBS = {
    "predict": "predict",
    "acceptance_search": "acceptance_search",
    "acceptance_fit": "acceptance_fit",
    "acceptance_measure": "specagent.endpoints.jobs.acceptance_measure",
    "bench_serve": "specagent.endpoints.jobs.bench_serve",
    "latency_fit": "latency_fit",
    "latency_validate": "latency_validate",
    "predictor_validate": "predictor_validate",
    "calibrate": "specagent.kernels.jobs.calibrate",
    "live": "specagent.endpoints.jobs.live",
    "live_torch": "specagent.kernels.jobs.live",
    "explain": "explain",
    "simulate": "simulate",
    "plan": "plan",
    "import_traces": "import_traces",
    "trace_stats": "trace_stats",
    "trace_fit": "trace_fit",
    "trace_synth": "trace_synth",
    "replay": "replay",
    "sweep": "sweep",
    "study_balance": "study",
    "study_sensitivity": "sensitivity",
    "roofline": "roofline",
    "balance_point": "balance_point",
}
