"""Agent traces: one schema, importers (τ²-Bench, OpenAI chat), fitted profiles and a synthetic generator.

Knows nothing of hardware: it says who did what, with how many tokens and how
long each wait took; the simulator prices it.
"""

from __future__ import annotations

from specagent.common.lazy_import import lazy_exports

#: each public name -> its module, imported on first use (the CLI's root and --help import no pandas)
_HOME = {
    "ACTOR_CODES": "columns",
    "KIND_CODES": "columns",
    "from_frame": "columns",
    "step_arrays": "columns",
    "to_frame": "columns",
    "NoTrajectoriesError": "errors",
    "Repair": "errors",
    "SkippedRecord": "errors",
    "TraceFormatError": "errors",
    "default_workload_path": "io",
    "load_trajectories": "io",
    "save_trajectories": "io",
    "SCHEMA_VERSION": "schema",
    "Actor": "schema",
    "DraftedBy": "schema",
    "Outcome": "schema",
    "SpecLabel": "schema",
    "Step": "schema",
    "StepKind": "schema",
    "TokenSource": "schema",
    "Trajectory": "schema",
    "Verdict": "schema",
    "fit_profile": "fit",
    "import_openai": "openai_chat",
    "WorkloadProfile": "profile",
    "list_profiles": "profile",
    "load_profile": "profile",
    "save_profile": "profile",
    "trace_stats": "stats",
    "synthesize": "synth",
    "synthesize_frame": "synth",
    "import_tau2": "tau2",
}

__all__ = [
    "SCHEMA_VERSION", "Actor", "DraftedBy", "Outcome", "SpecLabel", "Step", "StepKind", "TokenSource",
    "Trajectory", "Verdict", "ACTOR_CODES", "KIND_CODES", "to_frame", "from_frame", "step_arrays",
    "SkippedRecord", "TraceFormatError", "NoTrajectoriesError", "Repair", "load_trajectories", "save_trajectories", "default_workload_path",
    "import_tau2", "import_openai", "fit_profile", "WorkloadProfile", "list_profiles", "load_profile",
    "save_profile", "trace_stats", "synthesize", "synthesize_frame",
]


__getattr__ = lazy_exports(__name__, _HOME, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
