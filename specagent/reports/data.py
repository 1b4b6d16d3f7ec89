"""What a report is made from: simulator results plus optional fleet and calibration tables.

Reports read results and price nothing: the predict job's result (`simulator.jobs.predict`, in memory or
as the summary.json it writes), whose bottom line, intervals, verdict and `views` (the explain
decomposition, figure 4's verification saving, figure 5's derates) were computed by the job,
plus plain tables from the fleet study, the capacity planner and calibration. A result held in
memory is read through the same JSON as its stored file, so the two give the same report. The
one input read beyond the result is the GPU profile the roofline is drawn on (its axes: data,
not a price), from the copy the run stored. Files are recognised by their contents, not their
names, so `specagent report a.json b.parquet plan.csv` just works; anything unrecognised is an
error naming the file and the columns that were expected.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from specagent.common.errors import InputError
from specagent.common.paths import check_input_file

from specagent.hardware.profile import HardwareProfile, HardwareProfileError, load_hardware, parse_profile
from specagent.simulator.provenance import changed_inputs, sha256_text
from specagent.simulator.pricing.results import phase_split, summarize
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


#: Columns each optional table must have (extra columns are kept and shown).
BALANCE_COLUMNS = ("hardware", "strong_mean_decode_batch", "time_saving", "memory_saving")
CALIBRATION_COLUMNS = ("point", "predicted_s", "measured_s")
PLAN_COLUMNS = ("strategy", "usd_per_hour", "gpus")
#: `specagent latency validate --rows`: one published figure, predicted (held out or in sample) against measured.
LATENCY_COLUMNS = ("row_id", "metric", "gpu", "measured", "predicted")
PER_TRAJECTORY_COLUMNS = ("strategy", "traj", "task_id", "wall_time_s", "total_bytes_read")
PHASE_KEYS = ("phase_time", "phase_bytes", "phase_flops")


class ReportInputError(InputError):
    """A results file that cannot be read, is not any kind of result the report knows, or holds an impossible value."""


#: Text fields of the simulator's results; every other field is a count, a time, bytes, FLOPs, dollars or a ratio to
#: Strong-only: a finite number >= 0.
RESULT_TEXT = ("strategy", "label", "task_id", "engine", "weight_mode", "verifier_prompt", "workload")
#: Result fields that may be missing (NaN, JSON null), and the range they must lie in when present.
RESULT_OPTIONAL = {"measured_success": (0.0, 1.0), "usd_per_task": (0.0, math.inf), "gpu_usd_per_task": (0.0, math.inf)}
#: The optional tables' number columns: (lowest, highest) allowed; savings may be negative, never above 100 %.
TABLE_BOUNDS = {"strong_mean_decode_batch": (0.0, math.inf), "time_saving": (-math.inf, 1.0), "memory_saving": (-math.inf, 1.0),
                "predicted_s": (0.0, math.inf), "measured_s": (0.0, math.inf), "usd_per_hour": (0.0, math.inf),
                "gpus": (0.0, math.inf), "rate": (0.0, math.inf), "measured": (0.0, math.inf), "predicted": (0.0, math.inf)}


def _shown(v: Any) -> str:
    """A value as the user wrote it (numpy scalars as plain numbers)."""
    return repr(v.item() if isinstance(v, np.generic) else v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def check_numbers(df: pd.DataFrame, source: str, what: str, columns: Iterable[str], row_name: Callable[[int], str],
                  bounds: Mapping[str, tuple[float, float]] | None = None, optional: Mapping[str, tuple[float, float]] | None = None,
                  positive: Iterable[str] = ()) -> None:
    """Every value of `columns` a finite number within its bounds (default >= 0), or a ReportInputError naming file,
    row and column; `optional` columns may also be missing (NaN/null); `positive` ones must be > 0."""
    bounds, optional, positive = dict(bounds or {}), dict(optional or {}), set(positive)
    for c in columns:
        col = df[c]
        values = col.to_numpy(dtype=object) if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col) else None
        if values is not None:  # an object column: find the first entry that is not a number
            for i, v in enumerate(values):
                if not _is_number(v) and not (c in optional and (v is None or (isinstance(v, float) and math.isnan(v)))):
                    raise ReportInputError(f"{source}: {what} {row_name(i)}, '{c}': expected a number, got {_shown(v)}")
        x = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
        lo, hi = optional.get(c) or bounds.get(c) or (0.0, math.inf)
        ok = np.isfinite(x) & (x >= lo) & (x <= hi) & ((x > 0) if c in positive else True)
        if c in optional:
            ok |= np.isnan(x)
        if not ok.all():
            i = int(np.argmin(ok))
            rng = "> 0" if c in positive else f">= {lo:g}" if hi == math.inf else f"<= {hi:g}" if lo == -math.inf else f"in [{lo:g}, {hi:g}]"
            raise ReportInputError(f"{source}: {what} {row_name(i)}, '{c}': expected a finite number {rng}, got {_shown(col.iloc[i])}")


def check_results(df: pd.DataFrame, source: str, what: str, row_name: Callable[[int], str]) -> pd.DataFrame:
    """A simulator results frame (summary, phase split, per-trajectory rows): text where text belongs, everything else
    a possible count, time, amount or ratio."""
    if len(df) == 0:
        raise ReportInputError(f"{source}: {what.rstrip(',')} has no rows")
    for c in (c for c in RESULT_TEXT if c in df.columns):
        bad = [i for i, v in enumerate(df[c].to_numpy(dtype=object)) if not isinstance(v, str)]
        if bad:
            raise ReportInputError(f"{source}: {what} {row_name(bad[0])}, '{c}': expected text, got {_shown(df[c].iloc[bad[0]])}")
    check_numbers(df, source, what, [c for c in df.columns if c not in RESULT_TEXT], row_name, optional=RESULT_OPTIONAL)
    return df


@dataclass
class Run:
    """One prediction (one workload): the tables its summary.json holds, as the predict job computed them."""

    summary: pd.DataFrame  # indexed by strategy
    phase_time: pd.DataFrame
    phase_bytes: pd.DataFrame
    phase_flops: pd.DataFrame
    assumptions: dict[str, Any]
    per_trajectory: pd.DataFrame | None = None
    workload: str = ""
    source: str = "<memory>"
    #: The scenario the run came from (None for files without one).
    scenario: Scenario | None = None
    #: Copies of the model configs and profiles the run was priced with (simulator.provenance), when it stored them.
    inputs: dict[str, Any] | None = None
    #: Every ratio's interval and the publication's ranges (summary.json's `intervals`), when the run has them.
    intervals: dict | None = None
    #: The bottom line per task, indexed by strategy (summary.json's `bottom_line`): None for results without one.
    bottom_line: pd.DataFrame | None = None
    #: What the job computed for the report's other figures (summary.json's `views`): None for a summary written
    #: before they were stored, or for per-trajectory rows alone.
    views: dict[str, Any] | None = None

    def missing(self, what: str) -> str:
        """Why a figure or table that needs `what` from the job is not shown: never recomputed here."""
        if self.source.endswith((".parquet", ".csv")):
            return (f"{what}: per-trajectory rows alone carry none; `specagent predict` stores it in the summary.json it "
                    "writes beside them")
        if self.source == "<memory>":
            return f"{what}: the result given carries none (the predict job's `run` computes it; the report never does)"
        return f"{what}: rerun `specagent predict` ({self.source} predates it; the report never recomputes it)"


@dataclass
class ReportData:
    """Everything one report shows; optional tables are None when not supplied."""

    runs: list[Run] = field(default_factory=list)
    balance: pd.DataFrame | None = None
    calibration: pd.DataFrame | None = None
    plan: pd.DataFrame | None = None
    latency: pd.DataFrame | None = None
    #: A sensitivity study (`specagent study sensitivity`'s sensitivity.json), as stored.
    sensitivity: dict | None = None
    title: str = "specagent report"
    notes: list[str] = field(default_factory=list)
    #: Stored inputs whose files changed since the run (the report uses the run's copies): said by the command, not
    #: written into the report, so a report of an old run stays byte-identical.
    input_changes: list[str] = field(default_factory=list)

    def combined_summary(self) -> pd.DataFrame:
        """All runs' summaries stacked, with `strategy` and `workload` as columns."""
        frames = []
        for r in self.runs:
            s = r.summary.copy()
            s.index.name = "strategy"
            s = s.reset_index()
            s["workload"] = r.workload
            frames.append(s)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _require(df: pd.DataFrame, cols: Iterable[str], what: str, source: str) -> pd.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ReportInputError(f"{source}: {what} table lacks column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})")
    return df


#: `specagent.simulator.jobs.study.balance_study` columns → the report's balance columns.
STUDY_RENAME = {"strongonly_decode_batch": "strong_mean_decode_batch", "strong_time_saving": "time_saving",
                "strong_bytes_saving": "memory_saving"}


def balance_table(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Validate a balance-study table: SpecAgent's saving against the Strong replica's mean decode batch.

    Accepts the report's columns or `balance_study`'s own (strongonly_decode_batch,
    strong_time_saving, strong_bytes_saving; its balance_batch column marks the roofline's
    balance point), which are renamed.
    """
    df = pd.DataFrame(df)
    if not set(BALANCE_COLUMNS) <= set(df.columns) and set(STUDY_RENAME) | {"hardware"} <= set(df.columns):
        df = df.rename(columns=STUDY_RENAME)
    df = _require(df, BALANCE_COLUMNS, "balance study", source)
    return _check_table(df, BALANCE_COLUMNS[1:], "balance study", source)


def calibration_table(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Validate a calibration table: predicted and measured seconds per held-out point."""
    df = _require(pd.DataFrame(df), CALIBRATION_COLUMNS, "calibration", source)
    return _check_table(df, CALIBRATION_COLUMNS[1:], "calibration", source, positive=CALIBRATION_COLUMNS[1:])


def plan_table(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Validate a capacity-plan table: $/hour and GPUs of the cheapest fleet per strategy (the planner's `best`)."""
    df = pd.DataFrame(df)
    if "strategy" not in df.columns and df.index.name == "strategy":
        df = df.reset_index()
    df = _require(df, PLAN_COLUMNS, "capacity plan", source)
    df = _check_table(df, PLAN_COLUMNS[1:], "capacity plan", source)
    frac = df["gpus"].to_numpy(dtype=float) % 1 != 0
    if frac.any():
        i = int(np.argmax(frac))
        raise ReportInputError(f"{source}: capacity plan row {i + 1}, 'gpus': expected a whole number, got {_shown(df['gpus'].iloc[i])}")
    return df


def latency_table(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Validate latency-validation rows: measured and predicted figures, both > 0, each naming its row, metric and GPU."""
    df = _require(pd.DataFrame(df), LATENCY_COLUMNS, "latency validation", source)
    return _check_table(df, LATENCY_COLUMNS[3:], "latency validation", source, positive=LATENCY_COLUMNS[3:])


def _check_table(df: pd.DataFrame, required: Iterable[str], what: str, source: str, positive: Iterable[str] = ()) -> pd.DataFrame:
    """An optional table: rows, its required columns numbers within TABLE_BOUNDS, and no infinite number anywhere
    (the report shows every column; a missing value, NaN, shows as a dash)."""
    if len(df) == 0:
        raise ReportInputError(f"{source}: {what} table has no rows")
    row = lambda i: f"row {i + 1}"  # noqa: E731
    required = list(required)
    check_numbers(df, source, what, required, row, TABLE_BOUNDS, positive=positive)
    extra = [c for c in df.columns if c not in required]
    check_numbers(df, source, what, [c for c in extra if c in TABLE_BOUNDS and pd.api.types.is_numeric_dtype(df[c])], row,
                  TABLE_BOUNDS, optional={c: TABLE_BOUNDS[c] for c in extra if c in TABLE_BOUNDS})
    for c in extra:
        if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]):
            x = df[c].to_numpy(dtype=float)
            if np.isinf(x).any():
                i = int(np.argmax(np.isinf(x)))
                raise ReportInputError(f"{source}: {what} row {i + 1}, '{c}': expected a finite number, got {_shown(df[c].iloc[i])}")
    return df


def _frame_from_records(obj: Any, key: str, source: str) -> pd.DataFrame:
    """Records (list of dicts with 'strategy') or an index-oriented dict → frame indexed by strategy."""
    if isinstance(obj, dict):
        obj = [{**rec, "strategy": name} if isinstance(rec, dict) else rec for name, rec in obj.items()]
    if not isinstance(obj, list):
        raise ReportInputError(f"{source}: '{key}' must be a list of records or an object keyed by strategy, got {type(obj).__name__}")
    for i, rec in enumerate(obj):
        if not isinstance(rec, dict):
            raise ReportInputError(f"{source}: field '{key}' record {i + 1}: expected an object, got {type(rec).__name__}")
        if not isinstance(rec.get("strategy"), str) or not rec["strategy"]:
            raise ReportInputError(f"{source}: field '{key}' record {i + 1}: expected a 'strategy' name, got {rec.get('strategy')!r}")
    df = pd.DataFrame.from_records(obj)
    names = df["strategy"].tolist() if len(df) else []
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ReportInputError(f"{source}: field '{key}' has strategy '{dup}' twice")
    check_results(df, source, f"field '{key}',", lambda i: f"strategy '{names[i]}'")
    return df.set_index("strategy")


def stored_result(result: Any) -> dict[str, Any]:
    """A predict result held in memory as its summary.json holds it (`PredictResult.stored`), through the same JSON
    text `PredictResult.write` writes, so a report from memory and one from the file are the same."""
    from specagent.common import atomic

    return json.loads(atomic.json_text(result.stored(), "the predict result"))


def _missing_as_null(obj: Any) -> Any:
    """NaN in a stored dict built by hand (`to_dict` writes null) as JSON's null: missing, never a number (the
    report's checks then refuse a null wherever a value is required)."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _missing_as_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_missing_as_null(v) for v in obj]
    return obj


def run_from_per_trajectory(frame: pd.DataFrame, source: str, assumptions: dict | None = None) -> Run:
    """Rebuild totals and phase splits from per-trajectory rows (the simulator's own functions)."""
    _require(frame, PER_TRAJECTORY_COLUMNS, "per-trajectory", source)
    check_results(frame, source, "per-trajectory", _trajectory_row(frame))
    wl = ""
    if "workload" in frame and frame["workload"].nunique() == 1:
        wl = str(frame["workload"].iloc[0])
    return Run(
        summary=summarize(frame), phase_time=phase_split(frame, "time_s"), phase_bytes=phase_split(frame, "bytes_read"),
        phase_flops=phase_split(frame, "flops"),
        assumptions=assumptions or {"note": f"only per-trajectory rows were supplied ({source}); no assumptions file"},
        per_trajectory=frame, workload=wl, source=source,
    )


def run_from_summary_json(doc: Mapping[str, Any], source: str, base: Path | None = None) -> Run:
    """A `specagent predict` summary JSON: summary, assumptions and phase splits as records."""
    summary = _frame_from_records(doc["summary"], "summary", source)
    phases = {}
    for key in PHASE_KEYS:
        if key in doc:
            phases[key] = _frame_from_records(doc[key], key, source)
    per = None
    ref = doc.get("per_trajectory")
    if isinstance(ref, str) and base is not None:
        p = (base / ref) if not Path(ref).is_absolute() else Path(ref)
        if not p.exists():
            raise ReportInputError(f"{source}: field 'per_trajectory' names {p}, which does not exist")
        per = _per_trajectory_file(p)
    elif base is not None:
        for guess in (base / (Path(source).stem + ".parquet"), base / "per_trajectory.parquet"):
            if guess.exists():
                per = _per_trajectory_file(guess)
                break
    missing = [k for k in PHASE_KEYS if k not in phases]
    if missing:
        if per is None:
            raise ReportInputError(f"{source}: no {', '.join(missing)} records and no per-trajectory Parquet to derive them from")
        metric = {"phase_time": "time_s", "phase_bytes": "bytes_read", "phase_flops": "flops"}
        for k in missing:
            phases[k] = phase_split(per, metric[k])
    if not isinstance(doc.get("assumptions") or {}, dict):
        raise ReportInputError(f"{source}: field 'assumptions': expected an object, got {type(doc['assumptions']).__name__}")
    assumptions = dict(doc.get("assumptions") or {})
    wl = str(assumptions.get("workload") or doc.get("workload") or "")
    scenario = None
    if doc.get("scenario") is not None:
        try:
            scenario = Scenario.from_dict(doc["scenario"], f"{source}: field 'scenario'")
        except ScenarioError as exc:
            raise ReportInputError(str(exc)) from exc
    inputs = doc.get("inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise ReportInputError(f"{source}: field 'inputs': expected an object, got {type(inputs).__name__}")
    intervals = doc.get("intervals")
    if intervals is not None and not (isinstance(intervals, dict) and isinstance(intervals.get("intervals"), list)):
        raise ReportInputError(f"{source}: field 'intervals': expected an object with an 'intervals' list, got {type(intervals).__name__}")
    line = _frame_from_records(doc["bottom_line"], "bottom_line", source) if doc.get("bottom_line") is not None else None
    views = doc.get("views")
    if views is not None and not isinstance(views, dict):
        raise ReportInputError(f"{source}: field 'views': expected an object, got {type(views).__name__}")
    return Run(summary=summary, per_trajectory=per, assumptions=assumptions, workload=wl, source=source, scenario=scenario,
               inputs=inputs, intervals=intervals, bottom_line=line, views=views, **phases)


def _trajectory_row(df: pd.DataFrame) -> Callable[[int], str]:
    return lambda i: f"row {i + 1} (strategy {_shown(df['strategy'].iloc[i])}, traj {_shown(df['traj'].iloc[i])})"


def _per_trajectory_file(p: Path) -> pd.DataFrame:
    """The per-trajectory Parquet a summary names, checked like one given on its own."""
    df = _read_parquet(p)
    _require(df, PER_TRAJECTORY_COLUMNS, "per-trajectory", str(p))
    check_results(df, str(p), "per-trajectory", _trajectory_row(df))
    return df


def _read_parquet(p: Path) -> pd.DataFrame:
    check_input_file(p, ReportInputError, "Parquet results")
    try:
        return pd.read_parquet(p)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise ReportInputError(f"{p}: cannot read Parquet: {exc}") from exc


def _read_table(p: Path) -> pd.DataFrame | dict:
    suffix = p.suffix.lower()
    try:
        if suffix == ".parquet":
            return _read_parquet(p)
        if suffix == ".csv":
            return pd.read_csv(p)
        if suffix == ".json":
            return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    except pd.errors.EmptyDataError:
        raise ReportInputError(f"{p}: empty file: expected a CSV table with a header row") from None
    except RecursionError:
        raise ReportInputError(f"{p}: not valid JSON: nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{p}: not UTF-8 text (byte {exc.start}): expected a {suffix[1:].upper()} results file") from None
    except IsADirectoryError:
        raise ReportInputError(f"{p}: is a directory: expected a results file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:  # ValueError: pandas' and the JSON decoder's other refusals
        raise ReportInputError(f"{p}: cannot read: {exc}") from exc
    raise ReportInputError(f"{p}: unknown results format '{suffix}' (expected .json, .parquet or .csv)")


def _records_frame(rows: list, p: Path) -> pd.DataFrame:
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ReportInputError(f"{p}: record {i + 1}: expected an object (a table row), got a JSON {type(r).__name__}")
    if not rows:
        raise ReportInputError(f"{p}: no records: expected at least one table row")
    return pd.DataFrame.from_records(rows)


def classify(df: pd.DataFrame) -> str | None:
    """Which kind of table this is, by its columns."""
    cols = set(df.columns)
    if set(PER_TRAJECTORY_COLUMNS) <= cols:
        return "per_trajectory"
    if set(BALANCE_COLUMNS) <= cols or set(STUDY_RENAME) | {"hardware"} <= cols:
        return "balance"
    if set(CALIBRATION_COLUMNS) <= cols:
        return "calibration"
    if set(PLAN_COLUMNS) <= cols:
        return "plan"
    if set(LATENCY_COLUMNS) <= cols:
        return "latency"
    return None


def _concat(a: pd.DataFrame | None, b: pd.DataFrame) -> pd.DataFrame:
    return b if a is None else pd.concat([a, b], ignore_index=True)


def load_results(paths: Iterable[str | Path]) -> ReportData:
    """Read every results file given; each is recognised by its contents."""
    data = ReportData()
    parquet_claimed: set[Path] = set()
    pending_tables: list[tuple[Path, pd.DataFrame]] = []
    for raw in paths:
        p = check_input_file(raw, ReportInputError, "results file", missing=f"{raw}: no such results file")
        obj = _read_table(p)
        if isinstance(obj, dict):
            if obj.get("kind") == "specagent.sensitivity/1":
                data.sensitivity = obj
                continue
            if "summary" in obj:
                run = run_from_summary_json(obj, str(p), p.parent)
                if run.per_trajectory is not None:
                    ref = obj.get("per_trajectory")
                    for cand in ([ref] if isinstance(ref, str) else [p.stem + ".parquet", "per_trajectory.parquet"]):
                        parquet_claimed.add((p.parent / cand).resolve())
                data.runs.append(run)
                continue
            # A JSON table: {"records": [...]} / {"rows": [...]} / a list
            rows = obj.get("records") or obj.get("rows") or obj.get("data") or obj.get("best")  # best: `plan --json`
            if not isinstance(rows, list):
                raise ReportInputError(
                    f"{p}: JSON has neither a 'summary' field (a `specagent predict` summary) nor a 'records' list of table rows "
                    "(or the 'best' list of `specagent plan --json`)"
                )
            pending_tables.append((p, _records_frame(rows, p)))
        elif isinstance(obj, list):
            pending_tables.append((p, _records_frame(obj, p)))
        elif isinstance(obj, pd.DataFrame):
            pending_tables.append((p, obj))
        else:
            raise ReportInputError(f"{p}: expected a JSON object (a summary, or {{'records': [...]}}) or a list of records, "
                                   f"got a JSON {type(obj).__name__}")
    for p, df in pending_tables:
        kind = classify(df)
        if kind == "per_trajectory":
            if p.resolve() not in parquet_claimed:
                data.runs.append(run_from_per_trajectory(df, str(p)))
        elif kind == "balance":
            data.balance = _concat(data.balance, balance_table(df, str(p)))
        elif kind == "calibration":
            data.calibration = _concat(data.calibration, calibration_table(df, str(p)))
        elif kind == "plan":
            data.plan = _concat(data.plan, plan_table(df, str(p)))
        elif kind == "latency":
            data.latency = _concat(data.latency, latency_table(df, str(p)))
        else:
            raise ReportInputError(
                f"{p}: not a known kind of result; expected columns of one of: per-trajectory ({', '.join(PER_TRAJECTORY_COLUMNS)}), "
                f"balance study ({', '.join(BALANCE_COLUMNS)}), calibration ({', '.join(CALIBRATION_COLUMNS)}), "
                f"capacity plan ({', '.join(PLAN_COLUMNS)}), latency validation ({', '.join(LATENCY_COLUMNS)}); "
                f"got: {', '.join(map(str, df.columns))}"
            )
    for i, r in enumerate(data.runs):
        if not r.workload:
            r.workload = Path(r.source).stem if r.source != "<memory>" else f"run {i + 1}"
        for line in changed_inputs(r.inputs) if r.inputs else ():  # said by the command; the report reads the copies
            if line not in data.input_changes:
                data.input_changes.append(line)
    return data


def _is_result(obj: Any) -> bool:
    """The predict job's result (`simulator.jobs.predict.PredictResult`), recognised without importing the job."""
    return hasattr(obj, "to_dict") and hasattr(obj, "comparison") and hasattr(obj, "bottom_line")


def _runs_of(item: Any, data: ReportData, i: int) -> None:
    """Add one item given to `as_report_data` (a result, its stored dict or a results path) to `data`."""
    if _is_result(item):
        data.runs.append(run_from_summary_json(stored_result(item), "<memory>"))
    elif isinstance(item, Mapping) and "summary" in item:
        from specagent.common import atomic

        data.runs.append(run_from_summary_json(json.loads(atomic.json_text(_missing_as_null(dict(item)), "the predict result")),
                                               "<memory>"))
    else:
        raise ReportInputError(f"cannot make a report from a {type(item).__name__}"
                               f"{f' (item {i + 1})' if i >= 0 else ''}: pass the predict job's result "
                               "(`simulator.jobs.predict.run`), the summary.json it writes (a path or its dict), or results paths")


def as_report_data(results: Any, balance: pd.DataFrame | None = None, calibration: pd.DataFrame | None = None,
                   plan: pd.DataFrame | None = None, title: str | None = None,
                   latency: pd.DataFrame | None = None, sensitivity: dict | None = None) -> ReportData:
    """Accept a predict result, its stored dict, results paths, a list of these, or a ReportData, plus optional tables."""
    if isinstance(results, ReportData):
        data = results
    elif isinstance(results, (str, Path)):
        data = load_results([results])
    elif isinstance(results, (list, tuple)):
        paths = [r for r in results if isinstance(r, (str, Path))]
        data = load_results(paths) if paths else ReportData()
        for i, r in enumerate(results):
            if not isinstance(r, (str, Path)):
                _runs_of(r, data, i)
    else:
        data = ReportData()
        _runs_of(results, data, -1)
    for i, r in enumerate(data.runs):
        if not r.workload:
            r.workload = f"run {i + 1}" if len(data.runs) > 1 else "workload"
    if balance is not None:
        data.balance = balance_table(balance)
    if calibration is not None:
        data.calibration = calibration_table(calibration)
    if plan is not None:
        data.plan = plan_table(plan)
    if latency is not None:
        data.latency = latency_table(latency)
    if sensitivity is not None:
        data.sensitivity = sensitivity
    if title:
        data.title = title
    return data


# ------------------------------------------------------------------ the roofline's GPU
def roofline_profile(data: ReportData) -> HardwareProfile:
    """The GPU profile figure 5 is drawn on (`views.roofline.hardware` of the first run): its peak FLOP/s and bandwidth
    are the roofline's axes. From the copy the run stored (a profile edited since is said in `data.input_changes`, never
    read), else, for a run stored without copies, from disk today (and a note saying so)."""
    run = data.runs[0]
    hw_id = str((run.views or {}).get("roofline", {}).get("hardware", ""))
    for role in ("strong", "weak"):
        rec = ((run.inputs or {}).get(role) or {}).get("hardware")
        if not isinstance(rec, Mapping):
            continue
        text, path = rec.get("text"), str(rec.get("path", ""))
        if not isinstance(text, str) or sha256_text(text) != rec.get("sha256"):
            raise ReportInputError(f"{run.source}: field 'inputs.{role}.hardware': the stored copy does not match its sha256 "
                                   "(edited or damaged)")
        try:
            profile = parse_profile(tomllib.loads(text), path)
        except (ValueError, HardwareProfileError) as exc:
            raise ReportInputError(f"{run.source}: field 'inputs.{role}.hardware': {exc}") from exc
        if profile.id == hw_id:
            return profile
    names = [str(getattr(getattr(run.scenario, role, None), "hardware", "")) for role in ("strong", "weak")] + [hw_id]
    profile = None
    for name in dict.fromkeys(n for n in names if n):  # the scenario's own names first (a path, an alias), then the id
        try:
            candidate = load_hardware(name)
        except HardwareProfileError:
            continue
        if candidate.id == hw_id:
            profile = candidate
            break
    if profile is None:
        raise ReportInputError(f"{run.source}: the roofline's GPU '{hw_id}' has no stored copy and no profile here")
    note = (f"{run.source} stores no copy of its GPU profile (made before they were stored): the roofline is drawn on "
            f"{profile.path} as it is today")
    if note not in data.notes:
        data.notes.append(note)
    return profile
