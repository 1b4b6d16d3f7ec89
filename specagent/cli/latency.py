"""`specagent latency validate` and `specagent latency fit`: the engine terms against public measurements.

Print only: the jobs are simulator/jobs/latency_validate.py and latency_fit.py, their flags generated from their
Requests; `latency engine` shows one engine profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.reports.screens.tables import Col, fitted
from specagent.cli.options import guard_outputs
from specagent.cli.requests import fail_job, request_options
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.paths import HTML, starts_with
from specagent.simulator.jobs.latency_fit import LatencyFitRequest, LatencyFitResult
from specagent.simulator.jobs.latency_validate import LatencyValidateRequest, LatencyValidateResult

app = typer.Typer(help="Serving-engine latency terms against public measurements (measurements/serving_latency.csv).",
                  no_args_is_help=True)
console = SafeConsole()
err = SafeConsole(stderr=True)

#: What `latency fit -o` writes (the fitted tables, or with --engine-id a whole engine profile): a rerun may replace it.
FIT_TOML = starts_with(b"# Engine coefficients fitted by `specagent latency fit`", b"# Serving-engine profile ",
                       what="a TOML file `specagent latency fit` wrote")


def _guard(outputs: dict, request: LatencyFitRequest | LatencyValidateRequest, kinds: dict) -> None:
    """No output over --data or --kernels (the measurements became the fitted TOML), over another output, or over a
    file the option did not write: refused before the fit."""
    guard_outputs(outputs, inputs={"--data": request.data, "--kernels": request.kernels}, kinds=kinds)


@app.command("validate")
@request_options(LatencyValidateRequest, scenario=False)
def validate_cmd(
    request: LatencyValidateRequest,
    rows_out: Optional[Path] = typer.Option(None, "--rows", help="Also write every row's prediction as CSV here."),
    figure: Optional[Path] = typer.Option(None, "--figure", help="Also write the predicted-vs-measured figure (HTML, log-log, one colour per GPU)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Predicted vs measured for every describable row; MAPE per GPU, engine, model class and target class.

    With --holdout (default) each row is predicted by a fit that never saw its source
    (leave-one-source-out), so the MAPE is a held-out error. Targets (issue 12): TPOT at
    concurrency <= 16 within 20%, above that and TTFT within 30%.
    """
    from specagent.simulator.jobs.latency_validate import run

    _guard({"--rows": rows_out, "--figure": figure}, request, {"--figure": HTML})
    for target in (rows_out, figure):
        if target is not None:
            atomic.check_writable(target)
    tick = (lambda step: err.print(f"[dim]{step.what}[/]", highlight=False)) if not as_json else None
    try:
        res = run(request, tick)
    except InputError as exc:
        fail_job(LatencyValidateRequest, exc)
    out = res.to_dict()
    if rows_out:
        res.write(rows_out)
    if figure:
        from specagent.reports.latency import write_latency_figure

        write_latency_figure(res.table, figure, f"Predicted vs measured — {res.kind}")
    if as_json:
        print(json_out(out, indent=2))
        return
    _print_validation(res, out)


def _print_validation(res: LatencyValidateResult, out: dict) -> None:
    from specagent.costmodel.latency_validation import PAIR_TOLERANCE

    kind = res.kind
    rows = [[k, str(v["rows"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", f"{v['target']:.0%}",
             "-" if v["met"] is None else ("yes" if v["met"] else "NO")] for k, v in out["targets"].items()]
    rows += [[k, str(v["rows"]), f"{v['mape']:.1%}", "", ""] for k, v in res.validation.mape("load_class").items()
             if k not in out["targets"]]
    console.print(fitted(console, _cols("class", "figures", "MAPE", "target", "met"), rows,
                         title=f"Held-out MAPE against the targets — {len(res.targets)} figures from "
                               f"{len(res.rows) - len(res.skipped)} of {len(res.rows)} rows ({kind})"))
    console.print(f"MoE priors: {res.kernel_fit.describe()}", highlight=False, markup=False)
    _print_slices(out["slices"], kind)
    _print_pairs(out["model_pairs"], kind, PAIR_TOLERANCE)
    _print_default_pair(out["default_pair"], kind)
    for key, title in (("gpu", "GPU"), ("engine", "engine"), ("model_class", "model class")):
        console.print(fitted(console, _cols(title, "figures", "MAPE"), [[k, str(v["rows"]), f"{v['mape']:.1%}"]
                                                                         for k, v in out["mape"][key].items()],
                             title=f"MAPE by {title}"))
    _print_offsets(out["source_offsets"])
    _print_worst(out["worst"])
    _print_skipped(res)


def _print_slices(slices: dict, kind: str) -> None:
    rows = []
    for name, v in slices.items():
        rows.append([name, "all figures", str(v["figures"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", "", ""])
        rows += [["", k, str(cv["rows"]), f"{cv['mape']:.1%}", "" if cv["target"] is None else f"{cv['target']:.0%}",
                  "" if cv["met"] is None else ("yes" if cv["met"] else "NO")] for k, cv in v["classes"].items()]
        rows += [["", source_name(src), str(sv["figures"]), f"{sv['mape']:.1%}", "", f"{sv['bias']:.2f}x"]
                 for src, sv in v["sources"].items()]
    console.print(fitted(console, _cols("slice", "class or\nsource", "figures", "MAPE", "target", "met /\nbias"), rows,
                         title=f"Classes scored apart ({kind}): MAPE per target class inside each, and each source's bias "
                               "(median predicted / measured) inside it"))


def _print_offsets(offsets: dict) -> None:
    from specagent.costmodel.latency_validation import TARGETS

    rows = []
    for cls, v in offsets.items():
        if cls not in TARGETS:
            continue
        rows += [[cls if k == 0 else "", source_name(src), str(sv["figures"]), f"{sv['bias']:.2f}x", f"{sv['mape']:.1%}",
                  f"{sv['mape_after_offset']:.1%}"] for k, (src, sv) in enumerate(v["sources"].items())]
        rows.append(["", "all sources", str(v["figures"]), "", f"{v['mape']:.1%}", f"{v['mape_after_offset']:.1%}"])
    console.print(fitted(console, _cols("class", "source", "figures", "bias", "MAPE", "after\nbias"), rows,
                         title="Error between sources vs within them: each source's bias (median predicted / measured) and "
                               "its MAPE once that one factor is divided out (a diagnosis fitted on the scored rows, not a "
                               "prediction)"))


def _print_worst(worst: list) -> None:
    rows = [[r["row_id"], r["metric"], r["gpu"], r["engine"], f"{r['concurrency']:g}", f"{r['measured']:.4g} {r['unit']}",
             f"{r['predicted']:.4g} {r['unit']}", f"{r['error']:+.0%}"] for r in worst]  # both figures with their unit
    cols = [Col("row", "left"), Col("metric", "left"), Col("GPU", "left", optional=True), Col("engine", "left", optional=True),
            Col("C/B"), Col("measured"), Col("predicted"), Col("error")]
    console.print(fitted(console, cols, rows, title=f"Worst {len(worst)} rows", left_out="--rows FILE has it"))


def _print_skipped(res: LatencyValidateResult) -> None:
    from specagent.costmodel.latency_targets import skipped_by_reason

    if res.skipped:
        console.print(f"excluded {len(res.skipped)} of {len(res.rows)} rows, by rule:", highlight=False)
        for reason, ids in skipped_by_reason(res.skipped):
            console.print(f"  {len(ids)} × {reason}: {', '.join(ids)}", highlight=False, markup=False)


#: The pair the default scenario prices (Weak / Strong): its rows are listed one by one under the summary.
DEFAULT_PAIR = ("Qwen3.5-4B", "Qwen3.5-397B-A17B")


def _print_pairs(pairs: list[dict], kind: str, tol: float) -> None:
    """Same-source model pairs: within tolerance per (GPU, engine, concurrency), then the default pair's rows."""
    from collections import defaultdict

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for p in pairs:
        groups[(p["gpu"], p["engine"], p["concurrency"])].append(p)
    rows = []
    for (gpu, engine, conc), ps in groups.items():
        w = max(ps, key=lambda p: abs(p["error"]))
        rows.append([gpu, engine, f"{conc:g}", str(len(ps)), str(sum(p["within"] for p in ps)),
                     f"{_short(w['faster'])} / {_short(w['slower'])}", f"{w['error']:+.0%}"])
    cols = [Col("GPU", "left"), Col("engine", "left"), Col("C"), Col("pairs"), Col("within"), Col("worst pair", "left"),
            Col("worst\nerror")]
    console.print(fitted(console, cols, rows, title=f"Same-source model pairs ({kind}): faster / slower model's per-token "
                                                    f"time (TPOT), predicted vs measured; within {tol:.0%}: "
                                                    f"{sum(p['within'] for p in pairs)} of {len(pairs)} pairs"))
    mine = [p for p in pairs if DEFAULT_PAIR[0] in p["faster"].split(" ")[0] and p["slower"].split(" ")[0].endswith(DEFAULT_PAIR[1])]
    for p in mine:
        console.print(f"  {DEFAULT_PAIR[0]} / {DEFAULT_PAIR[1]} on {p['gpu']} ({p['engine']}, C={p['concurrency']:g}, "
                      f"{_short(p['faster'])} / {_short(p['slower'])}): measured {p['measured_ratio']:.3f}, predicted "
                      f"{p['predicted_ratio']:.3f} ({p['error']:+.0%}, {'within' if p['within'] else 'OUTSIDE'} {tol:.0%})",
                      highlight=False)


def _print_default_pair(sl: dict, kind: str) -> None:
    """The evaluated setting's pair scored apart (`Validation.pair_slice`): each same-source pairing, then the Weak alone."""
    a, b = _short(sl["faster"]), _short(sl["slower"])
    rows = [[p["gpu"], f"{p['engine']} {p['versions']}", f"{p['concurrency']:g}", p["slower"], f"{p['measured_ratio']:.3f}",
             f"{p['predicted_ratio']:.3f}", f"{p['error']:+.1%}", "yes" if p["within"] else "NO"] for p in sl["pairs"]]
    cols = [Col("GPU", "left"), Col("engine", "left"), Col("C"), Col(b, "left"), Col("measured"), Col("predicted"),
            Col("error"), Col("within")]
    console.print(fitted(console, cols, rows, title=f"The evaluated pair, {a} / {b}, same source ({kind}): per-token time "
                                                    f"ratio, predicted vs measured; within {sl['pair_tolerance']:.0%}: "
                                                    f"{sl['within']} of {len(sl['pairs'])} (engine versions may differ: named)"))
    for r in sl["faster_alone"]:
        console.print(f"  {a} alone (concurrency 1) on {r['gpu']} ({r['engine']}): TPOT measured {r['measured_ms']:.2f} ms, "
                      f"predicted {r['predicted_ms']:.2f} ms ({r['error']:+.1%}, {'within' if r['within'] else 'OUTSIDE'} "
                      f"{sl['small_model_tolerance']:.0%})", highlight=False)


def _cols(first: str, *rest: str) -> list[Col]:
    """The first column left-justified (names), the rest right-justified (figures)."""
    return [Col(first, "left")] + [Col(c) for c in rest]


def source_name(source: str) -> str:
    """A source's short name: the text before its first ':' (`bench serve`'s sources carry their URL after a space)."""
    return source.split(":")[0]


def _short(label: str) -> str:
    return label.split("/", 1)[-1] if label.startswith(("Qwen/", "meta-llama/")) else label


@app.command("fit")
@request_options(LatencyFitRequest, scenario=False)
def fit_cmd(
    request: LatencyFitRequest,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="TOML file of fitted coefficients (written atomically; default "
                                          "latency_fit.toml), or with --engine-id the whole engine profile (default ENGINE_ID.toml)."),
    profiles: Optional[Path] = typer.Option(None, "--write-profiles", help="Also write each fitted engine's whole profile (shipped "
                                            "profile + fitted tables) into this folder, ready to replace hardware/engines/<engine>.toml."),
    as_json: bool = typer.Option(False, "--json", help="Print the fitted coefficients as JSON."),
) -> None:
    """Fit the engine coefficients on every describable row; write them as TOML tables with provenance.

    The file holds, per engine, the tables of its profile that the fit sets (engine-wide
    fields and [hardware.<gpu>] ones), each value with its source (dataset hash, rows,
    date), to merge into hardware/engines/<engine>.toml.
    """
    from specagent.simulator.jobs.latency_fit import run, statistic_notes

    output = output or Path(f"{request.engine_id}.toml" if request.engine_id else "latency_fit.toml")
    _guard({"-o": output, **({"--write-profiles": profiles / "vllm.toml"} if profiles is not None else {})}, request,
           {"-o": FIT_TOML})
    atomic.check_writable(output)
    if profiles is not None:
        if request.engine_id is not None:
            fail("--write-profiles: not with --engine-id (which writes one whole profile to -o)")
        atomic.check_writable(profiles / "vllm.toml")
    try:
        res = run(request)
    except InputError as exc:
        fail_job(LatencyFitRequest, exc)
    for line in statistic_notes(res.skipped):  # rows left out for their statistic: named on stderr, never silently
        err.print(line, highlight=False, markup=False)
    res.write(output, profiles)
    if as_json:
        print(json_out({"output": str(output), **res.to_dict()}, indent=2))
        return
    if res.base is None:
        _print_fit(res, output)
    else:
        _print_own(res, output)
    if not res.fit.success:
        err.print(f"[yellow]warning:[/] the optimiser stopped without converging: {res.fit.message}", highlight=False)


def _print_fit(res: LatencyFitResult, output: Path) -> None:
    f = res.fit
    console.print(fitted(console, _cols("coefficient", "value", "prior"),
                         [[p.name, f"{v:.4g}", f"{p.prior:g}"] for p, v in zip(f.params, f.values)],
                         title=f"Fitted on {f.rows} of {len(res.targets)} figures (TTFTs under load scored, not fitted) from "
                               f"{len(res.rows) - len(res.skipped)} rows ({len(f.sources)} sources) → {output}"))
    console.print(res.fit_line(), highlight=False, markup=False)
    console.print(f"MoE priors: {res.kernel_fit.describe()}", highlight=False, markup=False)


def _print_own(res: LatencyFitResult, output: Path) -> None:
    """`latency fit --engine-id`: the whole serving-engine profile written, term by term."""
    f, prov, base = res.fit, res.provenance, res.base
    not_fitted = res.not_fitted()
    unmoved = {p.name for p, moved in zip(f.params, f.informed) if not moved}
    rows = [[p.name, f"{v:.4g}", f"{p.prior:g}", "prior: no figure depends on it (sourced so)" if p.name in unmoved else ""]
            for p, v in zip(f.params, f.values) if p.name not in not_fitted]
    by_reason: dict[str, list[str]] = {}  # the terms left out, one line per reason (a GPU no row ran on: many terms)
    for name, why in not_fitted.items():
        by_reason.setdefault(why, []).append(name)
    console.print(fitted(console, [*_cols("coefficient", "value", "prior"), Col("note", "left", optional=True)], rows,
                         title=f"{res.request.engine_id.lower()}: {base.id}'s profile fitted on {f.rows} figures from "
                               f"{prov['rows_used']} of {prov['rows']} rows of {res.path} (GPUs: "
                               f"{', '.join(res.gpus) or 'none'}) → {output}"))
    console.print(res.fit_line(), highlight=False, markup=False)
    for why, names in by_reason.items():
        console.print(f"not written ({why}): {', '.join(names)}", highlight=False, markup=False)
    console.print(f"use it with --serving-engine {output} (or --strong-serving-engine / --weak-serving-engine)", highlight=False)


@app.command("engine")
def engine_cmd(name: str = typer.Argument("vllm", help="Engine profile id, alias or .toml path (NAME:eager = CUDA graphs off)."),
               gpu: Optional[str] = typer.Option(None, "--gpu", help="Show the values this engine uses on this GPU profile id."),
               as_json: bool = typer.Option(False, "--json")) -> None:
    """Every term of one serving-engine profile with its source (engine-wide, or resolved for one GPU)."""
    from specagent.hardware.serving_engine import EngineProfileError, list_engines, load_engine

    from specagent.hardware.profile import HardwareProfileError, load_hardware

    try:
        eng = load_engine(name)
        if gpu is not None:
            eng = eng.for_hardware(load_hardware(gpu))
    except EngineProfileError as exc:
        fail(str(exc))
    except HardwareProfileError as exc:
        fail(f"--gpu: {exc}")
    figs = eng.figures()
    if as_json:
        print(json_out({"id": eng.id, "name": eng.name, "path": eng.path, "resolved_for": eng.resolved_for or None,
                          "pair_tables": sorted(eng.overrides), "known": sorted(e.id for e in list_engines()),
                          "figures": [dict(name=a, value=b, source=c) for a, b, c in figs]}, indent=2))
        return
    console.print(fitted(console, [*_cols("term", "value"), Col("source", "left")],
                         [[a, f"{b:g}" if isinstance(b, float) else str(b), c] for a, b, c in figs],
                         title=f"{eng.describe()} — {eng.path}" + (f" (on {gpu})" if gpu else "")))
    if eng.overrides and not gpu:
        console.print(f"GPU-specific values ([hardware.<id>] tables): {', '.join(sorted(eng.overrides))}; see --gpu", highlight=False)
