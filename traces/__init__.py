"""Agent traces: one schema, importers (τ²-Bench, OpenAI chat), fitted profiles and a synthetic generator.

Knows nothing of hardware: it says who did what, with how many tokens and how
long each wait took; the simulator prices it.
"""

from .columns import ACTOR_CODES, KIND_CODES, from_frame, step_arrays, to_frame
from .errors import NoTrajectoriesError, Repair, SkippedRecord, TraceFormatError
from .io import default_workload_path, load_trajectories, save_trajectories
from .schema import (
    SCHEMA_VERSION,
    Actor,
    DraftedBy,
    Outcome,
    SpecLabel,
    Step,
    StepKind,
    TokenSource,
    Trajectory,
    Verdict,
)
from .fit import fit_profile
from .openai_chat import import_openai
from .profile import WorkloadProfile, list_profiles, load_profile, save_profile
from .stats import trace_stats
from .synth import synthesize, synthesize_frame
from .tau2 import import_tau2

__all__ = [
    "SCHEMA_VERSION", "Actor", "DraftedBy", "Outcome", "SpecLabel", "Step", "StepKind", "TokenSource",
    "Trajectory", "Verdict", "ACTOR_CODES", "KIND_CODES", "to_frame", "from_frame", "step_arrays",
    "SkippedRecord", "TraceFormatError", "NoTrajectoriesError", "Repair", "load_trajectories", "save_trajectories", "default_workload_path",
    "import_tau2", "import_openai", "fit_profile", "WorkloadProfile", "list_profiles", "load_profile",
    "save_profile", "trace_stats", "synthesize", "synthesize_frame",
]
