"""Whether the scenario's acceptance model applies here: the setting it was calibrated or fitted on against this run's.

Why: an acceptance model is a property of a model pair on a workload (and, for a calibration to
published ratios, of the GPUs those ratios were measured on). Carrying it to another pair, other
GPUs or another workload is a guess, and the published figures of the calibration setting say
nothing about the new one. `AcceptanceModel.calibrated_on` records the setting (models, GPUs,
workload); `differences` names every field that differs, and `warning` says it in one line with
the way out (`specagent acceptance measure` on the user's own endpoints).
"""

from __future__ import annotations

from typing import Any

from specagent.simulator.scenario import Scenario
from specagent.traces import default_workload_path

#: The fields of `calibrated_on` compared, and how they read in a warning.
FIELDS = (("weak_model", "Weak model"), ("strong_model", "Strong model"), ("weak_hardware", "Weak GPU"),
          ("strong_hardware", "Strong GPU"), ("workload", "workload"))


def _norm(v: Any) -> str:
    return str(v).strip().lower()


def setting_of(scenario: Scenario) -> dict[str, str]:
    """The scenario's setting in `calibrated_on`'s terms (a hosted Strong model: its API name, no GPU)."""
    w = scenario.workload
    trace = str(w.trace) if w.trace else str(default_workload_path())
    workload = f"synthetic:{w.synthetic}" if w.synthetic else trace.replace("\\", "/").rsplit("/", 1)[-1]
    api = scenario.strong_api is not None
    return {"weak_model": _norm(scenario.weak.model), "strong_model": _norm(scenario.strong_api if api else scenario.strong.model),
            "weak_hardware": _norm(scenario.weak.hardware), "strong_hardware": "api" if api else _norm(scenario.strong.hardware),
            "workload": _norm(workload)}


def differences(scenario: Scenario) -> list[tuple[str, str, str]]:
    """(what, calibrated on, this run) for every recorded field that differs; [] when it applies or nothing is recorded."""
    rec = getattr(scenario.acceptance, "calibrated_on", None) or {}
    here = setting_of(scenario)
    out = []
    for key, label in FIELDS:
        if key in rec and _norm(rec[key]) != here[key]:
            out.append((label, str(rec[key]), here[key]))
    return out


def applies(scenario: Scenario) -> bool:
    """True when the acceptance's recorded setting matches this run (or none is recorded)."""
    return not differences(scenario)


def warning(scenario: Scenario) -> str | None:
    """One line naming what differs and the way out, or None."""
    diff = differences(scenario)
    if not diff:
        return None
    what = "; ".join(f"{label} {here}, not {was}" for label, was, here in diff)
    return (f"warning: acceptance calibrated for another setting ({what}): its verdict rates are carried over unmeasured "
            "and no published figure is compared; measure yours with `specagent acceptance measure`")


def _evaluated() -> Scenario:
    from specagent.simulator.scenario import EVALUATED_TAU2

    return Scenario.load(EVALUATED_TAU2)


def evaluated_setting(scenario: Scenario) -> dict[str, str]:
    """The fields that make a run the publication's evaluated τ²-Bench setting, as this run has them.

    The pair, GPUs, GPU counts and weight dtypes, the environment (agent-side time: preset 'none'), the verifier
    prompt ('fresh'), prefix caching and the workload: what `simulator/scenarios/wang2026-tau2.toml` fixes, each
    for the reason written there. A hosted Strong model is the edge setting, which has its own scenario.
    """
    s = setting_of(scenario)
    env = scenario.environment
    return {
        "Weak model": s["weak_model"], "Strong model": s["strong_model"], "Weak GPU": s["weak_hardware"],
        "Strong GPU": s["strong_hardware"], "Weak GPUs": str(scenario.weak.gpus), "Strong GPUs": str(scenario.strong.gpus),
        "Weak weights": _norm(scenario.weak.weight_dtype), "Strong weights": _norm(scenario.strong.weight_dtype),
        "environment": "none" if env.preset == "none" else "recorded" if env.recorded else env.describe(),
        "verifier prompt": _norm(scenario.verifier_prompt), "prefix caching": str(bool(scenario.prefix_caching)).lower(),
        "workload": s["workload"],
    }


def evaluated_differences(scenario: Scenario) -> list[tuple[str, str, str]]:
    """(what, the evaluated setting's, this run's) for every field of `evaluated_setting` that differs; [] when the run
    is the evaluated τ²-Bench setting. A hosted Strong model (the edge setting) is compared with the edge scenario's
    figures instead, so it has none here."""
    if scenario.strong_api is not None:
        return []
    want, here = evaluated_setting(_evaluated()), evaluated_setting(scenario)
    return [(k, want[k], here[k]) for k in want if want[k] != here[k]]


def evaluated_note(scenario: Scenario) -> str | None:
    """One line saying which setting the published τ² comparison uses when this run is not it, or None."""
    diff = evaluated_differences(scenario)
    if not diff:
        return None
    from specagent.simulator.scenario import EVALUATED_TAU2

    what = "; ".join(f"{k} {here}, not {want}" for k, want, here in diff)
    return (f"The published τ² figures (Wang et al., arXiv:2610.21463) are compared in the evaluated setting only "
            f"(`--scenario {EVALUATED_TAU2}`: agent-side time, a verifier re-reading its context); this run differs: {what}")
