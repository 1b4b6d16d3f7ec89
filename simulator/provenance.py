"""What a stored run was priced with: its model configs, GPU and serving-engine profiles, copied and hashed.

A run's scenario names its inputs (`qwen3.5-4b`, `h20`, `vllm`); the files behind those
names change (a refit engine profile, a corrected datasheet figure). So `predict` stores,
per deployment, a copy of each file and its SHA-256 (`record_inputs`, the summary's
`inputs`), and a report prices the run from those copies (`setting_from_inputs`), never
from whatever the files say today; `changed_inputs` says which files differ now, for the
report command to print. Runs stored before this carry no copies: the report loads their
names from disk and says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Mapping

from specagent.common.errors import InputError
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import ModelSpecError, parse_config
from specagent.hardware.profile import HardwareProfileError, parse_profile
from specagent.hardware.serving_engine import EngineCatalog, EngineProfileError, parse_engine
from specagent.simulator.scenario import SPEC_NAMES, Scenario
from specagent.simulator.protocol.setting import ApiModel, Setting, load_api_models

SCHEMA = "specagent.inputs/1"
ROLES = ("weak", "strong")
#: input kind -> (Deployment field, the object's attribute holding its file path)
KINDS = {"model": ("model", "source"), "hardware": ("hardware", "path"), "engine": ("engine", "path")}


class InputsError(InputError):
    """A run's stored inputs that cannot be read back (a damaged or hand-edited summary)."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _file_record(path: str) -> dict[str, str] | None:
    p = Path(path) if path and not path.startswith("<") else None
    if p is None or not p.is_file():
        return None  # built in memory: nothing on disk to copy
    text = p.read_text(encoding="utf-8")
    return {"path": str(p), "sha256": sha256_text(text), "text": text}


def record_inputs(setting: Setting) -> dict[str, Any]:
    """Per deployment, a copy and the SHA-256 of its model config, GPU profile and serving-engine profile."""
    out: dict[str, Any] = {"schema": SCHEMA}
    for role in ROLES:
        dep = getattr(setting, role)
        if isinstance(dep, ApiModel):
            out[role] = None
            continue
        out[role] = {kind: _file_record(str(getattr(getattr(dep, fld), attr))) for kind, (fld, attr) in KINDS.items()}
        if out[role]["model"] is not None:
            out[role]["model"]["name"] = dep.model.name  # the id the config was loaded under (a short name resolves to it)
    return out


def _parsed(kind: str, rec: Mapping[str, Any], where: str) -> Any:
    text, path = rec.get("text"), str(rec.get("path", ""))
    if not isinstance(text, str) or sha256_text(text) != rec.get("sha256"):
        raise InputsError(f"{where}: the stored copy does not match its sha256 (edited or damaged)")
    try:
        if kind == "model":
            return parse_config(json.loads(text), name=str(rec.get("name", "")), path=path)
        data = tomllib.loads(text)
        return parse_profile(data, path) if kind == "hardware" else parse_engine(data, path)
    except (ValueError, ModelSpecError, HardwareProfileError, EngineProfileError) as exc:
        raise InputsError(f"{where}: {exc}") from exc


def _deployment(spec: Any, recs: Mapping[str, Any], where: str) -> Deployment:
    names = {v: k for k, v in SPEC_NAMES.items()}
    values = {names.get(f.name, f.name): getattr(spec, f.name) for f in dataclasses.fields(spec)}
    built: list[Deployment] = []  # loaded from disk only for an input stored without a copy (one built in memory)
    for kind, (fld, _) in KINDS.items():
        rec = recs.get(kind)
        if rec is None:
            built = built or [spec.build()]
            values[fld] = getattr(built[0], fld)
            continue
        obj = _parsed(kind, rec, f"{where}.{kind}")
        if kind == "engine":
            obj = EngineCatalog.with_mode(obj, str(spec.serving_engine))
        values[fld] = obj
    return Deployment(**values)


def setting_from_inputs(scenario: Scenario, inputs: Mapping[str, Any], where: str = "inputs") -> Setting:
    """The run's Setting rebuilt from its stored copies (not from the files on disk today)."""
    if not isinstance(inputs, Mapping) or inputs.get("schema") != SCHEMA:
        raise InputsError(f"{where}: expected an object with schema '{SCHEMA}'")
    deps: dict[str, Deployment | ApiModel] = {}
    for role in ROLES:
        recs = inputs.get(role)
        if recs is None:
            if role == "strong" and scenario.strong_api is not None:
                deps[role] = load_api_models()[scenario.strong_api]
                continue
            raise InputsError(f"{where}.{role}: missing")
        deps[role] = _deployment(getattr(scenario, role), recs, f"{where}.{role}")
    return Setting(weak=deps["weak"], strong=deps["strong"], prefix_caching=scenario.prefix_caching,  # type: ignore[arg-type]
                   weight_mode=scenario.weight_mode, verifier_prompt=scenario.verifier_prompt,
                   verifier_system_tokens=scenario.verifier_system_tokens)


def changed_inputs(inputs: Mapping[str, Any]) -> list[str]:
    """One line per stored input whose file differs today (or is gone): the report uses the copy, and says so."""
    out = []
    for role in ROLES:
        for kind, rec in ((inputs.get(role) or {}).items()):
            if not rec:
                continue
            p = Path(str(rec.get("path", "")))
            if not p.is_file():
                out.append(f"{role} {kind} {p} is gone; the run's copy (sha256 {str(rec.get('sha256'))[:12]}) prices it")
                continue
            now = sha256_text(p.read_text(encoding="utf-8"))
            if now != rec.get("sha256"):
                out.append(f"{role} {kind} {p} changed since the run (sha256 {str(rec.get('sha256'))[:12]} -> {now[:12]}); "
                           "the report prices the run with its copy")
    return out
