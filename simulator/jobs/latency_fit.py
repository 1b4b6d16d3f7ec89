"""The latency fit (`specagent latency fit`): the serving-engine coefficients fitted on every describable row of
public (or your own) serving measurements, written as TOML tables with their provenance.

What `latency fit` and `latency validate` share is here too (`LatencyDataRequest`: which measurements, which
kernel fit gives the MoE terms their priors, and, for one's own server, the engine id its rows are priced as).
The fit itself is costmodel/latency_fit.py; the held-out validation is `latency_validate.py`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.measurements import MeasurementError
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, report

#: What an engine id may be: a file name and a TOML key alike.
ENGINE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: The first line of each file this job writes (the output guard knows a file it wrote by it).
FIT_HEAD = "# Engine coefficients fitted by `specagent latency fit`; merge into hardware/engines/*.toml.\n"


@dataclass(frozen=True)
class LatencyDataRequest(Request):
    """The measurements a latency job reads, and how its rows are priced (the `scenario` is not read)."""

    data: Path | None = field(default=None, metadata={"help": "serving_latency.csv to use (default: the shipped one)."})
    kernels: Path | None = field(default=None, metadata={"help": "moe_kernels.csv whose fit gives the MoE terms their priors "
                                                                 "(default: the shipped one)."})
    engine_id: str | None = field(default=None, metadata={
        "help": "Your own engine's id: price (and fit) every row with --base-engine renamed to this, so a profile fitted to your "
                "server's CSV (from `bench serve`) is its own engine."})
    base_engine: str | None = field(default=None, metadata={
        "help": "The shipped profile --engine-id starts from (default: the engine the rows name)."})
    max_num_seqs: int | None = field(default=None, metadata={
        "min": 1, "max": 1_000_000, "help": "With --engine-id: the most sequences your server runs together (vLLM --max-num-seqs; "
                                            "plain `transformers serve`: 1); clients beyond it queue (default: --base-engine's "
                                            "scheduler rows)."})

    def check(self) -> None:
        if self.engine_id is None:
            for name in ("base_engine", "max_num_seqs"):
                if getattr(self, name) is not None:
                    raise JobError("only with `engine_id` (the id of the profile fitted to your data)", name)
        elif not ENGINE_ID.fullmatch(self.engine_id):
            raise JobError(f"expected a name of letters, digits, '-', '_' or '.', got {self.engine_id!r}", "engine_id")

    def own(self, rows: list, max_num_seqs: int | None = None) -> tuple[dict[str, Any], Any]:
        """{engine the rows name: the base profile renamed engine_id} and the base profile; ({}, None) without an id."""
        if self.engine_id is None:
            return {}, None
        from specagent.costmodel.latency_fit import own_engine
        from specagent.hardware.serving_engine import EngineProfileError, load_engine

        named = sorted({r.engine for r in rows})
        name = self.base_engine or (named[0] if len(named) == 1 else None)
        if name is None:
            raise JobError(f"the rows name several engines ({', '.join(named)}); say which shipped profile `engine_id` starts from",
                           "base_engine")
        try:
            base = load_engine(name)
        except EngineProfileError as exc:
            raise JobError(f"`base_engine` {name}: {exc}"
                           + ("" if self.base_engine else " (the rows' engine; pass `base_engine` vllm, sglang, ...)")) from None
        eng = own_engine(base, self.engine_id, max_num_seqs)
        return {e: eng for e in named}, base

    def load(self, by_concurrency: bool = False) -> tuple[Path, list, list, list]:
        """The measurements' path, rows, the figures the cost model can describe and the rows it cannot (with why).

        `by_concurrency`: each load level its own group (a held-out fit then leaves one concurrency out)."""
        from specagent.costmodel.latency_targets import targets_from_rows
        from specagent.measurements import default_path, load_serving

        path = self.data or default_path("serving_latency.csv")
        try:
            rows = load_serving(path)
        except MeasurementError as exc:
            raise JobError(str(exc)) from None
        engines, _ = self.own(rows, self.max_num_seqs)
        if by_concurrency:
            rows = [dataclasses.replace(r, source=f"concurrency {r.concurrency:g}" if r.concurrency is not None else
                                        f"batch {r.batch:g}" if r.batch is not None else f"rate {r.request_rate}") for r in rows]
        targets, skipped = targets_from_rows(rows, engines)
        if not targets:
            raise JobError(f"{path}: no row the cost model can describe ({len(skipped)} skipped)")
        return path, rows, targets, skipped

    def params(self, targets: list) -> tuple[list, Any]:
        """The fit's parameters (MoE priors from the per-operator kernel fit) and that kernel fit. For one's own engine:
        its terms alone, with priors from the base engine on the rows' hardware where every row is one engine on one
        hardware profile (`latency_fit.own_params`), else the published priors."""
        from specagent.costmodel.latency_fit import default_params, own_params, serving_params

        try:
            params, kfit = serving_params(self.kernels)
        except (MeasurementError, ValueError) as exc:
            raise JobError(str(exc)) from None
        if self.engine_id is None:
            return params, kfit
        params = default_params(engines=(self.engine_id.lower(),), moe=kfit)
        pairs = {(t.dep.serving_engine.id, t.dep.hardware.id) for t in targets}
        if len(pairs) != 1:
            return params, kfit
        return own_params(params, targets[0].dep.serving_engine, targets[0].dep.hardware), kfit


@dataclass(frozen=True)
class LatencyFitRequest(LatencyDataRequest):
    """The measurements to fit."""


def statistic_notes(skipped: list) -> list[str]:
    """Rows left out for their statistic (a p99 was fitted as a mean): never a silent exclusion."""
    out = []
    for s in skipped:
        if s.reason.startswith("statistic "):
            at = f"line {s.row.line}, " if s.row.line else ""
            out.append(f"note: {at}row {s.row.row_id}: not fitted: {s.reason}")
    return out


@dataclass
class LatencyFitResult(Result):
    """The fit, its provenance, and (for one's own engine) the base profile and which terms no row measured."""

    request: LatencyFitRequest
    path: Path  # the measurements read
    rows: list
    targets: list
    skipped: list
    fit: Any  # costmodel.latency_fit.FitResult
    kernel_fit: Any
    provenance: dict[str, Any]
    base: Any = None  # --engine-id: the profile it starts from
    gpus: list[str] = field(default_factory=list)  # --engine-id: the GPUs the rows ran on
    #: in-sample goodness of fit: mean |predicted / measured - 1| over the fitted figures at the priors and fitted
    #: (`latency validate` scores figures a fit did not see)
    mape_at_priors: float = float("nan")
    mape_fitted: float = float("nan")

    def fit_line(self) -> str:
        return (f"in-sample error on the {self.fit.rows} fitted figures (mean |predicted / measured - 1|): "
                f"{self.mape_at_priors:.1%} with the profile it starts from, {self.mape_fitted:.1%} fitted; `specagent latency validate` "
                "scores figures the fit did not see")

    @property
    def values(self) -> dict[str, float]:
        return {p.name: float(v) for p, v in zip(self.fit.params, self.fit.values)}

    def tables(self) -> dict[str, Any]:
        """The fitted tables, per engine, each value with its source (the dataset and kernel fit, hashed)."""
        from specagent.costmodel.latency_fit import figures_by_gpu, fitted_tables

        return {"provenance": self.provenance,
                "engines": fitted_tables(self.fit, self.provenance, coverage=figures_by_gpu(self.targets))}

    def profiles(self, tables: dict[str, Any], folder: Path) -> dict[Path, str]:
        """Each fitted engine's whole profile (shipped profile + fitted tables), validated, by its path in `folder`."""
        import tomllib

        import tomli_w

        from specagent.costmodel.latency_fit import merge_tables
        from specagent.hardware.serving_engine import load_engine, parse_engine, with_base

        fitted, out = tables["engines"], {}
        for eid in sorted({t.dep.serving_engine.id for t in self.targets}):
            base = load_engine(eid)
            data = tomllib.loads(Path(base.path).read_text(encoding="utf-8"))
            # a generation's profile (`extends`) holds only its own terms: the shared ones go to the engine it extends
            data = merge_tables(data if base.extends else merge_tables(data, fitted.get("*", {})), fitted.get(eid, {}))
            data["provenance"] = {**data.get("provenance", {}), "fit": tables["provenance"]}
            target = folder / Path(base.path).name
            parse_engine(with_base(data, Path(base.path)), str(target))  # validate before writing
            out[target] = (f"# Serving-engine profile {eid}: fitted fields written by `specagent latency fit --write-profiles`.\n"
                           + tomli_w.dumps(data))
        return out

    def not_fitted(self) -> dict[str, str]:
        """--engine-id: the per-GPU terms of GPUs no row ran on (their base profile's values are kept)."""
        from specagent.costmodel.latency_fit import unmeasured_params

        return {p.name: f"no row on {', '.join(p.gpus)}: {self.base.id}'s value kept" for p in unmeasured_params(self.fit, self.gpus)}

    def own_profile(self) -> dict[str, Any]:
        """--engine-id: the whole serving-engine profile's TOML table."""
        from specagent.costmodel.latency_fit import own_engine_profile

        prov = {**self.provenance, "dataset_path": str(self.path)}
        return own_engine_profile(self.base, self.request.engine_id, self.fit, prov, self.request.max_num_seqs, self.gpus)

    def to_dict(self) -> dict[str, Any]:
        error = {"mape_at_priors": self.mape_at_priors, "mape_fitted": self.mape_fitted}
        if self.base is not None:
            skip = self.not_fitted()
            return {"engine_id": self.request.engine_id.lower(), "base_engine": self.base.id,  # type: ignore[union-attr]
                    "provenance": self.own_profile()["provenance"]["fit"],
                    "values": {k: v for k, v in self.values.items() if k not in skip}, "not_fitted": skip,
                    "converged": self.fit.success, **error}
        return {"provenance": self.provenance, "values": self.values, "converged": self.fit.success,
                "moe_kernels": self.kernel_fit.values, **error}

    def write(self, folder: str | Path, profiles: Path | None = None) -> list[Path]:
        """The fitted tables at `folder` (a file), or with --engine-id the whole engine profile there; `profiles`: also
        each fitted engine's whole profile in that folder. All or none."""
        import tomli_w

        from specagent.common import atomic

        output = Path(folder)
        if self.base is not None:
            from specagent.hardware.serving_engine import parse_engine

            data = self.own_profile()
            parse_engine(data, str(output))  # validated before it is written
            head = (f"# Serving-engine profile {self.request.engine_id.lower()}: {self.base.id}'s profile with the terms "  # type: ignore[union-attr]
                    f"`specagent latency fit --engine-id` fitted to {self.path}.\n")
            atomic.atomic_write(output, atomic.text_writer(head + tomli_w.dumps(data)))
            return [output]
        tables = self.tables()
        files = {output: FIT_HEAD + tomli_w.dumps(tables), **(self.profiles(tables, profiles) if profiles else {})}
        atomic.write_together({p: atomic.text_writer(text) for p, text in files.items()})  # the fit and its profiles: all or none
        return list(files)


def run(request: LatencyFitRequest, progress: Progress | None = None) -> LatencyFitResult:
    """Load the rows, fit every describable one (TTFTs under load are scored, not fitted)."""
    import numpy as np

    from specagent.costmodel.latency_fit import fit, fitted_engine_for, fitted_on, provenance
    from specagent.costmodel.latency_targets import predict

    request.check()
    report(progress, "reading the measurements")
    path, rows, targets, skipped = request.load()
    params, kfit = request.params(targets)
    report(progress, "fitting")
    res = fit(targets, params)
    prov = provenance(path, len(rows), len(rows) - len(skipped), res.rows, res.sources)
    base = request.own(rows)[1] if request.engine_id is not None else None
    if base is None:  # the kernel fit the MoE priors came from, hashed beside the dataset
        from specagent.measurements import default_path, file_sha256

        kernels_path = Path(request.kernels or default_path("moe_kernels.csv"))
        prov["moe_kernels"], prov["moe_kernels_sha256"] = kernels_path.name, file_sha256(kernels_path)
    report(progress, "scoring the fit")
    fitted = [t for t in targets if fitted_on(t)]
    measured = np.array([t.measured for t in fitted])
    before, after = (float(np.mean(np.abs(predict(fitted, engine_for) / measured - 1)))
                     for engine_for in (None, fitted_engine_for(res)))
    return LatencyFitResult(request, Path(path), rows, targets, skipped, res, kfit, prov, base,
                            sorted({t.dep.hardware.id for t in targets}), before, after)
