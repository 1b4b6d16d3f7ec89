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
