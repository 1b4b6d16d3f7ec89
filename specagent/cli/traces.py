"""`specagent traces ...`: import, summarise, fit and synthesise agent traces."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from specagent.cli.console import SafeConsole, check_format, fail, json_out
from specagent.reports.screens.tables import Col, fitted
from specagent.cli.options import guard_outputs
from specagent.cli.progress import progress_bar
from specagent.cli.requests import fail_job, request_options
from specagent.reports.bottom_line import fmt_seconds
from specagent.simulator.jobs.import_traces import ImportRequest
from specagent.traces.errors import Repair, SkippedRecord, TraceFormatError
from specagent.traces.fit import fit_profile
from specagent.traces.io import load_trajectories, save_synthetic
from specagent.traces.profile import list_profiles, load_profile, save_profile
from specagent.traces.quality import data_quality
from specagent.traces.stats import trace_stats
from specagent.traces.synth import MAX_TRAJECTORIES

app = typer.Typer(help="Agent traces: a *trajectory* is one task's run as ordered *steps* (agent tool calls "
                       "READ/WRITE/GENERIC, replies, user messages, tool results) with token counts and latencies.",
                  no_args_is_help=True)


#: Skipped records and repairs printed one per line, each kind; the rest are counted (a 100 MB log can hold 10^4).
SHOWN = 10


def _report_skips(skipped: list[SkippedRecord], repairs: list[Repair] | None = None) -> None:
    """The first SHOWN skipped records and repairs, one line each, then how many more and the counts (stderr)."""
    err = SafeConsole(stderr=True, highlight=False)
    for what, items in (("skipped record", skipped), ("repair", repairs or [])):
        for s in items[:SHOWN]:
            err.print(f"[yellow]{escape(str(s))}[/yellow]")
        if len(items) > SHOWN:
            err.print(f"[yellow]... and {len(items) - SHOWN} more {what}s like these[/yellow]")
    if skipped:
        err.print(f"[yellow]{len(skipped)} record(s) skipped[/yellow]")
    if repairs:
        err.print(f"[yellow]{len(repairs)} repair(s): counts that could not be trusted keep their estimates "
                  "(token_source=estimated)[/yellow]")


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


SkipOpt = Annotated[bool, typer.Option("--skip-bad", help="Leave out malformed records and report each one, instead of stopping at the first.")]


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
    from specagent.common.errors import InputError
    from specagent.simulator.jobs.import_traces import run as import_job

    files = request.split()[1]
    out = _default_out(out, files)
    guard_outputs({"-o": out}, inputs={"FILE": files, "--tags": request.tags}, kinds={"-o": trace_kind(out)})
    try:
        with progress_bar(len(files), f"importing {len(files)} file(s)") as advance:
            result = import_job(request, lambda step: advance(1) if step.done else None, out=out)
    except (TraceFormatError, FileNotFoundError) as e:
        fail(e)
    except InputError as e:  # a JobError names its field's flag
        fail_job(ImportRequest, e)
    _report_skips(result.skipped, result.repairs)
    if as_json:
        typer.echo(json_out({k: v for k, v in result.to_dict().items() if k not in ("skipped", "repairs")}, indent=1))
        return
    c = SafeConsole()
    for path, name in result.formats:
        c.print(f"{escape(path)}: read as {name}")
    c.print(f"wrote {result.trajectories} trajectories ({result.steps} steps) to {escape(str(out))}")
    print_quality(c, result.quality)


def print_quality(c: SafeConsole, q) -> None:
    """The data-quality summary: one line of shares, then each warning."""
    c.print(f"measured: tokens on {q.measured_tokens:.0%} of agent steps, model latency on {q.model_latency:.0%}, "
            f"waits on {q.waits_recorded:.0%} of tool results and user messages; system prompt on "
            f"{q.system_prompt_measured:.0%} of trajectories; hidden reasoning known on {q.reasoning_known:.0%}")
    for w in q.warnings():
        c.print(f"[yellow]warning: {escape(w)}[/yellow]")


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
    for r in rows:
        c.print(f"[bold]{r['name']}[/bold]: {escape(r['title'])}")
        for k in ("tokens", "latency", "tags", "reasoning", "success"):
            c.print(f"  {k}: {escape(r[k])}")
    c.print("Where each format's runs come from, and how to export them: docs/traces.md")


def _load(file: Path, skip_bad: bool = False, skipped: list[SkippedRecord] | None = None, show: bool = True):
    """load_trajectories with a progress bar (stderr, terminals only)."""
    size = file.stat().st_size if file.is_file() else 0
    with progress_bar(size, f"reading {file.name}", show=show) as advance:
        return load_trajectories(file, skip_bad=skip_bad, skipped=skipped, progress=advance)


def _fmt(d: dict, key: str = "mean") -> str:
    return "—" if not d or d.get("n", 0) == 0 else f"{d[key]:,.4g}"


@app.command()
def stats(file: Annotated[Path, typer.Argument(help="Trace file (.jsonl or .parquet).")],
          as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
          fmt: Annotated[str, typer.Option("--format", help="table, json (every statistic) or csv (one row per quantity: "
                                                            "mean, median, p10, p90).")] = "table",
          skip_bad: SkipOpt = False) -> None:
    """Steps per task, read/write/reply mix, tokens per kind, latencies and success of a trace file."""
    fmt = check_format(fmt, as_json)
    skipped: list[SkippedRecord] = []
    try:
        trajs = _load(file, skip_bad, skipped, show=fmt == "table")
        s = trace_stats(trajs)
        q = data_quality(trajs)
    except (TraceFormatError, FileNotFoundError, ValueError) as e:
        fail(e)
    _report_skips(skipped)
    s["data_quality"] = q.to_dict()
    if fmt == "json":
        typer.echo(json_out(s, indent=1))
        return
    rows = [(label, d) for label, d in (("steps per task", s["steps_per_task"]), ("turns per task (agent+user messages)", s["turns_per_task"]),
                                        ("system prompt tokens", s["system_prompt_tokens"]))]
    rows += [(f"{lk} latency (s)", d) for lk, d in s["latency_s"].items()]
    rows += [(f"{kind} {what} tokens", s["tokens"][kind].get(f"{what}_tokens", {})) for kind in s["kind_mix"]
             for what in ("new_context", "output", "reasoning")]
    if fmt == "csv":
        frame = pd.DataFrame([{"quantity": label, **{k: (d.get(k) if d and d.get("n", 0) else None) for k in ("mean", "median", "p10", "p90")}}
                              for label, d in rows])
        sys.stdout.write(frame.to_csv(index=False))
        return
    c = SafeConsole()
    t = Table(title=f"{file.name}: {s['trajectories']} trajectories, {s['steps']} steps")
    for col in ("quantity", "mean", "median", "p10", "p90"):
        t.add_column(col, justify="right" if col != "quantity" else "left")
    for label, d in rows[:3]:
        t.add_row(label, _fmt(d), _fmt(d, "median"), _fmt(d, "p10"), _fmt(d, "p90"))
    for lk, d in s["latency_s"].items():  # human units: 0.18 ms, 12.3 s, 4.2 min
        t.add_row(f"{lk} latency", *(("—" if not d or d.get("n", 0) == 0 else fmt_seconds(d[k])) for k in ("mean", "median", "p10", "p90")))
    c.print(t)
    k = Table(title="step kinds (new_context = tokens added to the agent's context; output = tokens the agent decodes)")
    for col in ("kind", "share of steps", "new_context mean", "output mean", "reasoning mean"):
        k.add_column(col, justify="right" if col != "kind" else "left")
    for kind, share in s["kind_mix"].items():
        tk = s["tokens"][kind]
        k.add_row(kind, f"{share:.3f}", _fmt(tk["new_context_tokens"]), _fmt(tk.get("output_tokens", {})),
                  _fmt(tk.get("reasoning_tokens", {})))
    c.print(k)
    succ = "—" if s["success_rate"] is None else f"{s['success_rate']:.3f} (n={s['success_known']})"
    c.print(f"success rate: {succ}; measured token counts: {s['measured_token_share']:.1%} of steps; "
            f"parallel calls: {s['parallel_call_share']:.1%} of tool calls; protocol logs: {s['protocol_logs']}")
    print_quality(c, q)


@app.command()
def fit(files: Annotated[list[Path], typer.Argument(help="Trace files (.jsonl/.parquet) to fit.")],
        out: Annotated[Path, typer.Option("-o", "--out", help="Output profile (.toml).")],
        name: Annotated[str, typer.Option(help="Profile name.")] = "fitted") -> None:
    """Fit a workload profile (turns, kind transitions, tokens, latencies, success) to real traces."""
    if out.suffix.lower() != ".toml":
        fail(f"-o {out}: a workload profile is a TOML file: expected a name ending in .toml")
    from specagent.common.paths import starts_with

    guard_outputs({"-o": out}, inputs={"FILES": files}, kinds={"-o": starts_with(b"name = ", what="a workload profile (TOML)")})
    try:
        trajs = [t for f in files for t in _load(f)]
        prof = fit_profile(trajs, name=name, source=f"fit to {', '.join(f.name for f in files)} ({len(trajs)} trajectories)")
        save_profile(prof, out)
    except (TraceFormatError, FileNotFoundError, ValueError) as e:
        fail(e)
    SafeConsole().print(f"wrote profile {name!r} fitted to {len(trajs)} trajectories to {out}")


@app.command()
def synth(profile: Annotated[str, typer.Option("--profile", help="Shipped profile name (see `profiles`) or a .toml path.")],
          out: Annotated[Path, typer.Option("-o", "--out", help="Output file (.jsonl or .parquet).")],
          n: Annotated[int, typer.Option("-n", help="Number of trajectories.", min=1, max=MAX_TRAJECTORIES)] = 1000,
          seed: Annotated[int, typer.Option(help="Random seed; same seed, byte-identical output.", min=0, max=2**63 - 1)] = 0) -> None:
    """Generate synthetic trajectories from a workload profile."""
    guard_outputs({"-o": out}, inputs={"--profile": profile if Path(profile).suffix.lower() == ".toml" else None},
                  kinds={"-o": trace_kind(out)})
    try:
        prof = load_profile(profile)
        with progress_bar(n, f"generating {n:,} trajectories") as advance:
            steps = save_synthetic(prof, n, seed, out, progress=advance)
    except (TraceFormatError, FileNotFoundError, ValueError) as e:
        fail(e)
    SafeConsole().print(f"wrote {n} synthetic trajectories ({steps} steps) from profile {prof.name!r}, seed {seed}, to {out}")


@app.command()
def profiles(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the shipped workload profiles and where their numbers come from."""
    rows = []
    for name in list_profiles():
        p = load_profile(name)
        rows.append({"name": name, "domain": p.domain, "turns_mean": p.turns.mean(), "description": p.description,
                     "source": p.source})
    if as_json:
        typer.echo(json_out(rows, indent=1))
        return
    # the name is what a user types (--profile): never cut; a description too wide for a column prints under its name
    con = SafeConsole()
    cols = (Col("name", "left"), Col("domain", "left"), Col("mean\nturns"), Col("description", "left"))
    con.print(fitted(con, cols, [[r["name"], r["domain"], f"{r['turns_mean']:.1f}", r["description"]] for r in rows],
                     title="shipped workload profiles (--profile NAME)",
                     caption="sources: `specagent traces profiles --json`, or the TOML files in traces/data/profiles/"))
