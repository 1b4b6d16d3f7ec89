"""A plan's finished searches on disk, one JSON file each, so an interrupted plan resumes where it stopped.

Why: a capacity curve runs one search per strategy, GPU pairing and rate, minutes each; ^C
or a crash must not lose the finished ones, and a rerun must not run them again. Each
search is written atomically as it finishes, under the plan's fingerprint: a hash of
everything that decides a search's result besides its own key (the scenario, the SLO, the
prices, the search settings, the workload's bytes and the code version). A file under
another fingerprint (a changed flag or workload) is never reused; the rerun replaces it.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from specagent.common import atomic

SCHEMA = "specagent.plan_search/1"
FOLDER = "searches"


def _plain(o: Any) -> Any:
    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def fingerprint(req: Any, workload_digest: str, version: str) -> str:
    """The hash a stored search must carry to be reused: every PlanRequest field that changes a search's result.

    Not included: the rates, strategies and GPU types (each search's own key) and the workers,
    backend and address (the searches are deterministic wherever they run).
    """
    parts = {"slo": str(req.objective), "scenario": req.scenario.to_dict(), "prices": dict(sorted(req.prices.items())),
             "n_tasks": req.n_tasks, "router": req.router, "max_replicas": req.max_replicas, "max_refine": req.max_refine,
             "scheduler": repr(req.scheduler), "slice_tasks": req.slice_size, "slice_replicas": req.slice_replicas,
             "precision": req.precision, "requests": req.serving, "workload": workload_digest, "version": version,
             **({"size_on": req.size_on} if req.size_on != "point" else {})}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def code_version() -> str:
    """The installed specagent's version (a stored search is reused by the same code only)."""
    from importlib import metadata

    try:
        return metadata.version("specagent")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        return "source"


def _name(key: tuple) -> str:
    strategy, wg, sg, rate = key
    safe = lambda t: re.sub(r"[^A-Za-z0-9_.-]+", "_", str(t))[-40:]  # noqa: E731 - a GPU may be a profile path
    tag = hashlib.sha256(json.dumps([str(k) for k in key]).encode()).hexdigest()[:10]
    return f"{safe(strategy)}-{safe(Path(str(wg)).stem)}-{safe(Path(str(sg)).stem)}-{float(rate):g}-{tag}.json"


class PlanStore:
    """The folder `out/searches/`: `load()` the searches stored under this fingerprint, `save()` one as it finishes."""

    def __init__(self, out_dir: str | Path, fp: str) -> None:
        self.folder = Path(out_dir) / FOLDER
        self.fingerprint = fp

    def path(self, key: tuple) -> Path:
        return self.folder / _name(key)

    def load(self, keys: list[tuple]) -> dict[tuple, dict]:
        """The stored results for `keys` under this fingerprint; anything unreadable or stale is left to be rerun."""
        out: dict[tuple, dict] = {}
        for key in keys:
            p = self.path(key)
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if (isinstance(doc, dict) and doc.get("schema") == SCHEMA and doc.get("fingerprint") == self.fingerprint
                    and doc.get("key") == _key_json(key) and isinstance(doc.get("result"), dict)):
                out[key] = doc["result"]
        return out

    def save(self, key: tuple, result: Mapping[str, Any]) -> Path:
        doc = {"schema": SCHEMA, "fingerprint": self.fingerprint, "key": _key_json(key), "result": result}
        # through JSON and back, so a resumed plan sees exactly what a fresh one saw once stored
        return atomic.write_text(self.path(key), json.dumps(doc, indent=1, default=_plain))


def _key_json(key: tuple) -> list:
    strategy, wg, sg, rate = key
    return [str(strategy), str(wg), str(sg), float(rate)]


def roundtrip(result: Mapping[str, Any]) -> dict:
    """`result` as it reads back from a stored file (plain floats, ints, lists): a fresh and a resumed plan then agree."""
    return json.loads(json.dumps(result, default=_plain))
