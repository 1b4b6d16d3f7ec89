"""`specagent traces ...`: import, summarise, fit and synthesise agent traces."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from specagent.cli.console import SafeConsole, check_format, fail, json_out
from specagent.cli.options import guard_outputs
from specagent.cli.progress import job_progress, progress_bar
from specagent.cli.requests import request_options
from specagent.reports.screens import traces as screen
from specagent.simulator.jobs.import_traces import ImportRequest
from specagent.simulator.jobs.trace_fit import FitProfileRequest
from specagent.simulator.jobs.trace_stats import StatsRequest
from specagent.simulator.jobs.trace_synth import SynthRequest
from specagent.traces.errors import Repair, SkippedRecord, TraceFormatError

app = typer.Typer(help="Agent traces: a *trajectory* is one task's run as ordered *steps* (agent tool calls "
                       "READ/WRITE/GENERIC, replies, user messages, tool results) with token counts and latencies.",
                  no_args_is_help=True)


def _report_skips(skipped: list[SkippedRecord], repairs: list[Repair] | None = None) -> None:
    """The first skipped records and repairs, one line each, then how many more and the counts (stderr)."""
    err = SafeConsole(stderr=True, highlight=False)
    for line in screen.skips(skipped, repairs or []):
        err.print(line)


OUT_HELP = ("Output file: .jsonl (one trajectory per line) or .parquet (one row per step). Without it: the first input's "
            "name with .jsonl, beside it.")


def trace_kind(out: Path):
    """What a trace output holds, by its suffix (common.paths.check_outputs: an existing file of another kind is not
    replaced): JSONL trajectories (each line starts with the schema version) or a Parquet step table."""
    from specagent.common.paths import PARQUET, starts_with

    return PARQUET if out.suffix.lower() in (".parquet", ".pq") else starts_with(b'{"schema_version"', what="a specagent trace (JSONL)")


def _default_out(out: Optional[Path], files: tuple[str, ...]) -> Path:
    """-o, or the first input's name with `.jsonl` (never the input itself)."""
    if out is not None:
        return out
    first = Path(files[0])
    p = first.with_suffix(".jsonl")
    return p if p != first else first.with_name(first.stem + ".trace.jsonl")


@app.command("import")
@request_options(ImportRequest, scenario=False)
def import_cmd(request: ImportRequest, out: Optional[Path] = typer.Option(None, "-o", "--out", help=OUT_HELP),
               as_json: bool = typer.Option(False, "--json", help="Print the data-quality summary as JSON.")) -> None:
    """Import agent logs into the trace schema; say what was measured and what estimated.

    Missing token counts are estimated from the text (never 0) and marked `estimated`; timestamps and recorded
    latencies become model, tool and user waits; a tool no source tags is held as a WRITE and named. The
    data-quality summary printed at the end (also by `traces stats`, and on `predict`'s first screen) says how
    much of the workload was measured.
    """
    from specagent.simulator.jobs.import_traces import run as import_job

    files = request.split()[1]
    out = _default_out(out, files)
    guard_outputs({"-o": out}, inputs={"FILE": files, "--tags": request.tags}, kinds={"-o": trace_kind(out)})
    try:
        with progress_bar(len(files), f"importing {len(files)} file(s)") as advance:
            result = import_job(request, lambda step: advance(1) if step.done else None, out=out)
    except (TraceFormatError, FileNotFoundError) as e:
        fail(e)
    _report_skips(result.skipped, result.repairs)
    if as_json:
        typer.echo(json_out({k: v for k, v in result.to_dict().items() if k not in ("skipped", "repairs")}, indent=1))
        return
    c = SafeConsole()
    for line in screen.imported(result, out):
        c.print(line)


@app.command()
def formats(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The agent-log formats `traces import` reads: what each gives (tokens, latency, tags, reasoning, success)."""
    from dataclasses import asdict

    from specagent.traces.importers import IMPORTERS

    rows = [{"name": i.name, "title": i.title, "spec": i.spec, **asdict(i.facts)} for i in IMPORTERS]
    if as_json:
        typer.echo(json_out(rows, indent=1))
        return
    c = SafeConsole()
    for line in screen.formats(rows):
        c.print(line)


@app.command()
@request_options(StatsRequest, scenario=False)
def stats(request: StatsRequest, as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
          fmt: str = typer.Option("table", "--format", help="table, json (every statistic) or csv (one row per quantity: "
                                                              "mean, median, p10, p90).")) -> None:
    """Steps per task, read/write/reply mix, tokens per kind, latencies and success of a trace file."""
    from specagent.simulator.jobs.trace_stats import run as stats_job

    fmt = check_format(fmt, as_json)
    result = _run(stats_job, request, show=fmt == "table")
    _report_skips(result.skipped)
    if fmt == "json":
        typer.echo(json_out(result.to_dict(), indent=1))
    elif fmt == "csv":
        sys.stdout.write(screen.stats_frame(result.stats).to_csv(index=False))
    else:
        c = SafeConsole()
        for part in screen.stats(result.stats, Path(request.file).name, result.quality):  # type: ignore[arg-type]
            c.print(part)


def _run(job, request, show: bool = True):
    """A traces job under its progress bars; a malformed or missing trace is its one error line."""
    try:
        with job_progress(show=show) as progress:
            return job(request, progress)
    except (TraceFormatError, FileNotFoundError, ValueError) as e:
        fail(e)


@app.command()
@request_options(FitProfileRequest, scenario=False)
def fit(request: FitProfileRequest) -> None:
    """Fit a workload profile (turns, kind transitions, tokens, latencies, success) to real traces."""
    from specagent.common.paths import starts_with
    from specagent.simulator.jobs.trace_fit import run as fit_job

    guard_outputs({"-o": request.out}, inputs={"FILES": request.files},
                  kinds={"-o": starts_with(b"name = ", what="a workload profile (TOML)")})
    result = _run(fit_job, request)
    SafeConsole().print(f"wrote profile {request.name!r} fitted to {result.trajectories} trajectories to {request.out}")


@app.command()
@request_options(SynthRequest, scenario=False)
def synth(request: SynthRequest) -> None:
    """Generate synthetic trajectories from a workload profile."""
    from specagent.simulator.jobs.trace_synth import run as synth_job

    profile, out = request.profile, Path(request.out)  # type: ignore[arg-type]
    guard_outputs({"-o": out}, inputs={"--profile": profile if Path(profile).suffix.lower() == ".toml" else None},
                  kinds={"-o": trace_kind(out)})
    result = _run(synth_job, request)
    SafeConsole().print(f"wrote {request.trajectories} synthetic trajectories ({result.steps} steps) from profile "
                        f"{result.profile_name!r}, seed {request.seed}, to {out}")


@app.command()
def profiles(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the shipped workload profiles and where their numbers come from."""
    from specagent.traces.profile import list_profiles, load_profile

    rows = []
    for name in list_profiles():
        p = load_profile(name)
        rows.append({"name": name, "domain": p.domain, "turns_mean": p.turns.mean(), "description": p.description,
                     "source": p.source})
    if as_json:
        typer.echo(json_out(rows, indent=1))
        return
    con = SafeConsole()
    con.print(screen.profiles_table(rows, con))
