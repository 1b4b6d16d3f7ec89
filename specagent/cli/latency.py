"""`specagent latency validate` and `specagent latency fit`: the engine terms against public measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import typer
from rich.table import Table

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.paths import HTML, check_outputs, starts_with

app = typer.Typer(help="Serving-engine latency terms against public measurements (measurements/serving_latency.csv).",
                  no_args_is_help=True)
console = SafeConsole()
err = SafeConsole(stderr=True)

#: What `latency fit -o` writes (the fitted tables, or with --engine-id a whole engine profile): a rerun may replace it.
FIT_TOML = starts_with(b"# Engine coefficients fitted by `specagent latency fit`", b"# Serving-engine profile ",
                       what="a TOML file `specagent latency fit` wrote")


def _guard(outputs: dict, data: Optional[Path], kernels: Optional[Path], kinds: dict) -> None:
    """No output over --data or --kernels (the measurements became the fitted TOML), over another output, or over a
    file the option did not write: refused before the fit."""
    try:
        check_outputs(outputs, {"--data": data, "--kernels": kernels}, InputError, kinds=kinds)
    except InputError as exc:
        fail(str(exc))


def _not_fitted_note(skipped) -> None:
    """Rows left out for their statistic (a p99 was fitted as a mean) are named on stderr: never a silent exclusion."""
    for s in skipped:
        if s.reason.startswith("statistic "):
            at = f"line {s.row.line}, " if s.row.line else ""
            err.print(f"note: {at}row {s.row.row_id}: not fitted: {s.reason}",
                      highlight=False, markup=False)


DATA = typer.Option(None, "--data", help="serving_latency.csv to use (default: the shipped one).")
KERNELS = typer.Option(None, "--kernels", help="moe_kernels.csv whose fit gives the MoE terms their priors (default: the shipped one).")


def _params(kernels: Optional[Path]):
    """The fit's parameters with MoE priors from the per-operator kernel fit (and that fit, to report)."""
    from specagent.costmodel.latency_fit import serving_params
    from specagent.measurements import MeasurementError

    try:
        return serving_params(kernels)
    except (MeasurementError, ValueError) as exc:
        fail(str(exc))


ENGINE_ID = typer.Option(None, "--engine-id", help="Your own engine's id: price (and fit) every row with --base-engine renamed "
                         "to this, so a profile fitted to your server's CSV (from `bench serve`) is its own engine.")
BASE_ENGINE = typer.Option(None, "--base-engine", help="The shipped profile --engine-id starts from (default: the engine the rows name).")
MAX_NUM_SEQS = typer.Option(None, "--max-num-seqs", min=1, max=1_000_000, help="With --engine-id: the most sequences your server "
                            "runs together (vLLM --max-num-seqs; plain `transformers serve`: 1); clients beyond it queue "
                            "(default: --base-engine's scheduler rows).")


def _own(rows, engine_id: Optional[str], base_engine: Optional[str], max_num_seqs: Optional[int] = None):
    """{engine named in the rows: the base profile renamed engine_id}, or {} without --engine-id."""
    if engine_id is None:
        if base_engine is not None or max_num_seqs is not None:
            fail(f"{'--base-engine' if base_engine is not None else '--max-num-seqs'}: only with --engine-id (the id of the "
                 "profile fitted to your data)")
        return {}, None
    import re

    from specagent.costmodel.latency_fit import own_engine
    from specagent.hardware.serving_engine import EngineProfileError, load_engine

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", engine_id):
        fail(f"--engine-id: expected a name of letters, digits, '-', '_' or '.', got {engine_id!r}")
    named = sorted({r.engine for r in rows})
    name = base_engine or (named[0] if len(named) == 1 else None)
    if name is None:
        fail(f"--base-engine: the rows name several engines ({', '.join(named)}); say which shipped profile --engine-id starts from")
    try:
        base = load_engine(name)
    except EngineProfileError as exc:
        fail(f"--base-engine {name}: {exc}" + ("" if base_engine else " (the rows' engine; pass --base-engine vllm, sglang, ...)"))
    eng = own_engine(base, engine_id, max_num_seqs)
    return {e: eng for e in named}, base


def _own_params(engine_id: str, kfit, targets):
    """The fit's parameters for one's own engine: its terms alone, with priors from --base-engine on the rows' hardware
    (`latency_fit.own_params`) where every row is one engine on one hardware profile, else the published priors."""
    from specagent.costmodel.latency_fit import default_params, own_params

    params = default_params(engines=(engine_id.lower(),), moe=kfit)
    pairs = {(t.dep.serving_engine.id, t.dep.hardware.id) for t in targets}
    if len(pairs) != 1:
        return params
    return own_params(params, targets[0].dep.serving_engine, targets[0].dep.hardware)


def _load(data: Optional[Path], engine_id: Optional[str] = None, base_engine: Optional[str] = None, by_concurrency: bool = False,
          max_num_seqs: Optional[int] = None):
    import dataclasses

    from specagent.costmodel.latency_targets import targets_from_rows
    from specagent.measurements import MeasurementError, default_path, load_serving

    path = data or default_path("serving_latency.csv")
    try:
        rows = load_serving(path)
    except MeasurementError as exc:
        fail(str(exc))
    engines, _ = _own(rows, engine_id, base_engine, max_num_seqs)
    if by_concurrency:  # each load level its own group: leave-one-source-out becomes leave-one-concurrency-out
        rows = [dataclasses.replace(r, source=f"concurrency {r.concurrency:g}" if r.concurrency is not None else
                                    f"batch {r.batch:g}" if r.batch is not None else f"rate {r.request_rate}") for r in rows]
    targets, skipped = targets_from_rows(rows, engines)
    if not targets:
        fail(f"{path}: no row the cost model can describe ({len(skipped)} skipped)")
    return path, rows, targets, skipped


@app.command("validate")
def validate_cmd(
    data: Optional[Path] = DATA,
    kernels: Optional[Path] = KERNELS,
    holdout: bool = typer.Option(True, "--holdout/--no-holdout", help="Leave-one-source-out refits (default), or the shipped engine profiles as they are."),
    worst: int = typer.Option(10, "--worst", min=0, help="How many of the worst rows to list."),
    rows_out: Optional[Path] = typer.Option(None, "--rows", help="Also write every row's prediction as CSV here."),
    figure: Optional[Path] = typer.Option(None, "--figure", help="Also write the predicted-vs-measured figure (HTML, log-log, one colour per GPU)."),
    hold_out: str = typer.Option("source", "--hold-out", help="What each held-out fit leaves out: 'source' (one publication) "
                                 "or 'concurrency' (one load level: for one server's own CSV from `bench serve`)."),
    engine_id: Optional[str] = ENGINE_ID,
    base_engine: Optional[str] = BASE_ENGINE,
    max_num_seqs: Optional[int] = MAX_NUM_SEQS,
    workers: int = typer.Option(0, "--workers", help="Processes running the held-out fits (0: one per CPU); the answers do "
                                "not depend on it."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Predicted vs measured for every describable row; MAPE per GPU, engine, model class and target class.

    With --holdout (default) each row is predicted by a fit that never saw its source
    (leave-one-source-out), so the MAPE is a held-out error. Targets (issue 12): TPOT at
    concurrency <= 16 within 20%, above that and TTFT within 30%.
    """
    from specagent.costmodel.latency_targets import skipped_by_reason
    from specagent.costmodel.latency_validation import PAIR_TOLERANCE, TARGETS, validate

    _guard({"--rows": rows_out, "--figure": figure}, data, kernels, {"--figure": HTML})
    for target in (rows_out, figure):
        if target is not None:
            atomic.check_writable(target)
    if hold_out not in ("source", "concurrency"):
        fail(f"--hold-out: expected source or concurrency, got {hold_out!r}")
    from specagent.simulator.parallel import MAX_WORKERS, default_workers, job_runner

    if not 0 <= workers <= MAX_WORKERS:
        fail(f"--workers: expected a whole number in [0, {MAX_WORKERS:,}], got {workers}")
    path, rows, targets, skipped = _load(data, engine_id, base_engine, by_concurrency=hold_out == "concurrency",
                                         max_num_seqs=max_num_seqs)
    params, kfit = _params(kernels)
    if engine_id is not None:
        params = _own_params(engine_id, kfit, targets)
    tick = (lambda m: err.print(f"[dim]{m}[/]", highlight=False)) if not as_json else None
    procs = workers or default_workers()
    val = validate(targets, skipped, held_out=holdout, params=params, progress=tick, shares=procs, run=job_runner(procs))
    table = val.rows()
    kind = f"held out (leave one {hold_out} out)" if holdout else "in sample (shipped engine profiles)"
    out = {
        "dataset": str(path), "rows": len(rows), "figures": len(targets), "skipped": [dict(row_id=s.row.row_id, reason=s.reason) for s in skipped],
        "predictions": kind, "targets": val.targets_met(),
        "mape": {k: val.mape(k) for k in ("load_class", "metric", "gpu", "engine", "model_class", "source")},
        "worst": sorted(table, key=lambda r: -abs(r["error"]))[:worst],
        "source_offsets": val.source_offsets(),
        "slices": val.slices(),
        "model_pairs": val.model_pairs(),
        "default_pair": val.pair_slice(),
        "fit": ({p.name: float(v) for p, v in zip(val.full_fit.params, val.full_fit.values)} if val.full_fit else None),
        "moe_kernels": kfit.summary(),
    }
    if rows_out:
        import pandas as pd

        atomic.atomic_write(rows_out, lambda t: pd.DataFrame(table).to_csv(t, index=False))
    if figure:
        from specagent.reports.latency import write_latency_figure

        write_latency_figure(table, figure, f"Predicted vs measured — {kind}")
    if as_json:
        print(json_out(out, indent=2))
        return
    t = Table(title=f"Held-out MAPE against the targets — {len(targets)} figures from {len(rows) - len(skipped)} of {len(rows)} rows ({kind})")
    for c in ("class", "figures", "MAPE", "target", "met"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for k, v in out["targets"].items():
        t.add_row(k, str(v["rows"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", f"{v['target']:.0%}",
                  "-" if v["met"] is None else ("yes" if v["met"] else "NO"))
    for k, v in val.mape("load_class").items():
        if k not in out["targets"]:
            t.add_row(k, str(v["rows"]), f"{v['mape']:.1%}", "", "")
    console.print(t)
    console.print(f"MoE priors: {kfit.describe()}", highlight=False, markup=False, soft_wrap=True)
    sl = Table(title=f"Classes scored apart ({kind}): MAPE per target class inside each, and each source's bias "
                     "(median predicted / measured) inside it")
    for c in ("slice", "class or source", "figures", "MAPE", "target", "met / bias"):
        sl.add_column(c, justify="left" if c in ("slice", "class or source") else "right", overflow="fold")
    for name, v in out["slices"].items():
        sl.add_row(name, "all figures", str(v["figures"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", "", "")
        for k, cv in v["classes"].items():
            sl.add_row("", k, str(cv["rows"]), f"{cv['mape']:.1%}", "" if cv["target"] is None else f"{cv['target']:.0%}",
                       "" if cv["met"] is None else ("yes" if cv["met"] else "NO"))
        for k, (src, sv) in enumerate(v["sources"].items()):
            sl.add_row("", src.split(":")[0], str(sv["figures"]), f"{sv['mape']:.1%}", "", f"{sv['bias']:.2f}x",
                       end_section=k == len(v["sources"]) - 1)
    console.print(sl)
    _print_pairs(out["model_pairs"], kind, PAIR_TOLERANCE)
    _print_default_pair(out["default_pair"], kind)
    for key, title in (("gpu", "GPU"), ("engine", "engine"), ("model_class", "model class")):
        s = Table(title=f"MAPE by {title}")
        s.add_column(title)
        s.add_column("figures", justify="right")
        s.add_column("MAPE", justify="right")
        for k, v in out["mape"][key].items():
            s.add_row(k, str(v["rows"]), f"{v['mape']:.1%}")
        console.print(s)
    o = Table(title="Error between sources vs within them: each source's bias (median predicted / measured) and its MAPE "
                    "once that one factor is divided out (a diagnosis fitted on the scored rows, not a prediction)")
    for c in ("class", "source", "figures", "bias", "MAPE", "after bias"):
        o.add_column(c, justify="left" if c in ("class", "source") else "right", overflow="fold")
    for cls, v in out["source_offsets"].items():
        if cls not in TARGETS:
            continue
        for k, (src, sv) in enumerate(v["sources"].items()):
            o.add_row(cls if k == 0 else "", src.split(":")[0], str(sv["figures"]), f"{sv['bias']:.2f}x", f"{sv['mape']:.1%}",
                      f"{sv['mape_after_offset']:.1%}")
        o.add_row("", "all sources", str(v["figures"]), "", f"{v['mape']:.1%}", f"{v['mape_after_offset']:.1%}", end_section=True)
    console.print(o)
    w = Table(title=f"Worst {len(out['worst'])} rows")
    for c in ("row", "metric", "GPU", "engine", "C/B", "measured", "predicted", "error"):
        w.add_column(c, justify="left" if c in ("row", "metric", "GPU", "engine") else "right")
    for r in out["worst"]:
        w.add_row(r["row_id"], r["metric"], r["gpu"], r["engine"], f"{r['concurrency']:g}", f"{r['measured']:.4g} {r['unit']}",
                  f"{r['predicted']:.4g}", f"{r['error']:+.0%}")
    console.print(w)
    if skipped:
        console.print(f"excluded {len(skipped)} of {len(rows)} rows, by rule:", highlight=False)
        for reason, ids in skipped_by_reason(skipped):
            console.print(f"  {len(ids)} × {reason}: {', '.join(ids)}", highlight=False, markup=False, soft_wrap=True)


#: The pair the default scenario prices (Weak / Strong): its rows are listed one by one under the summary.
DEFAULT_PAIR = ("Qwen3.5-4B", "Qwen3.5-397B-A17B")


def _print_pairs(pairs: list[dict], kind: str, tol: float) -> None:
    """Same-source model pairs: within tolerance per (GPU, engine, concurrency), then the default pair's rows."""
    from collections import defaultdict

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for p in pairs:
        groups[(p["gpu"], p["engine"], p["concurrency"])].append(p)
    t = Table(title=f"Same-source model pairs ({kind}): faster / slower model's per-token time (TPOT), predicted vs "
                    f"measured; within {tol:.0%}: {sum(p['within'] for p in pairs)} of {len(pairs)} pairs")
    for c in ("GPU", "engine", "C", "pairs", "within", "worst pair", "worst error"):
        t.add_column(c, justify="left" if c in ("GPU", "engine", "worst pair") else "right", overflow="fold")
    for (gpu, engine, conc), ps in groups.items():
        w = max(ps, key=lambda p: abs(p["error"]))
        t.add_row(gpu, engine, f"{conc:g}", str(len(ps)), str(sum(p["within"] for p in ps)),
                  f"{_short(w['faster'])} / {_short(w['slower'])}", f"{w['error']:+.0%}")
    console.print(t)
    mine = [p for p in pairs if DEFAULT_PAIR[0] in p["faster"].split(" ")[0] and p["slower"].split(" ")[0].endswith(DEFAULT_PAIR[1])]
    for p in mine:
        console.print(f"  {DEFAULT_PAIR[0]} / {DEFAULT_PAIR[1]} on {p['gpu']} ({p['engine']}, C={p['concurrency']:g}, "
                      f"{_short(p['faster'])} / {_short(p['slower'])}): measured {p['measured_ratio']:.3f}, predicted "
                      f"{p['predicted_ratio']:.3f} ({p['error']:+.0%}, {'within' if p['within'] else 'OUTSIDE'} {tol:.0%})",
                      highlight=False, soft_wrap=True)


def _print_default_pair(sl: dict, kind: str) -> None:
    """The evaluated setting's pair scored apart (`Validation.pair_slice`): each same-source pairing, then the Weak alone."""
    a, b = _short(sl["faster"]), _short(sl["slower"])
    t = Table(title=f"The evaluated pair, {a} / {b}, same source ({kind}): per-token time ratio, predicted vs measured; within "
                    f"{sl['pair_tolerance']:.0%}: {sl['within']} of {len(sl['pairs'])} (engine versions may differ: named)")
    for c in ("GPU", "engine", "C", b, "measured", "predicted", "error", "within"):
        t.add_column(c, justify="left" if c in ("GPU", "engine", b) else "right", overflow="fold")
    for p in sl["pairs"]:
        t.add_row(p["gpu"], f"{p['engine']} {p['versions']}", f"{p['concurrency']:g}", p["slower"], f"{p['measured_ratio']:.3f}",
                  f"{p['predicted_ratio']:.3f}", f"{p['error']:+.1%}", "yes" if p["within"] else "NO")
    console.print(t)
    for r in sl["faster_alone"]:
        console.print(f"  {a} alone (concurrency 1) on {r['gpu']} ({r['engine']}): TPOT measured {r['measured_ms']:.2f} ms, "
                      f"predicted {r['predicted_ms']:.2f} ms ({r['error']:+.1%}, {'within' if r['within'] else 'OUTSIDE'} "
                      f"{sl['small_model_tolerance']:.0%})", highlight=False, soft_wrap=True)


def _short(label: str) -> str:
    return label.split("/", 1)[-1] if label.startswith(("Qwen/", "meta-llama/")) else label


@app.command("fit")
def fit_cmd(
    data: Optional[Path] = DATA,
    kernels: Optional[Path] = KERNELS,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="TOML file of fitted coefficients (written atomically; default "
                                          "latency_fit.toml), or with --engine-id the whole engine profile (default ENGINE_ID.toml)."),
    engine_id: Optional[str] = ENGINE_ID,
    base_engine: Optional[str] = BASE_ENGINE,
    max_num_seqs: Optional[int] = MAX_NUM_SEQS,
    profiles: Optional[Path] = typer.Option(None, "--write-profiles", help="Also write each fitted engine's whole profile (shipped "
                                            "profile + fitted tables) into this folder, ready to replace hardware/engines/<engine>.toml."),
    as_json: bool = typer.Option(False, "--json", help="Print the fitted coefficients as JSON."),
) -> None:
    """Fit the engine coefficients on every describable row; write them as TOML tables with provenance.

    The file holds, per engine, the tables of its profile that the fit sets (engine-wide
    fields and [hardware.<gpu>] ones), each value with its source (dataset hash, rows,
    date), to merge into hardware/engines/<engine>.toml.
    """
    import tomli_w

    from specagent.costmodel.latency_fit import figures_by_gpu, fit, fitted_tables, provenance

    output = output or Path(f"{engine_id}.toml" if engine_id else "latency_fit.toml")
    _guard({"-o": output, **({"--write-profiles": profiles / "vllm.toml"} if profiles is not None else {})}, data, kernels,
           {"-o": FIT_TOML})
    atomic.check_writable(output)
    if profiles is not None:
        if engine_id is not None:
            fail("--write-profiles: not with --engine-id (which writes one whole profile to -o)")
        atomic.check_writable(profiles / "vllm.toml")
    path, rows, targets, skipped = _load(data, engine_id, base_engine, max_num_seqs=max_num_seqs)
    _not_fitted_note(skipped)
    params, kfit = _params(kernels)
    if engine_id is not None:
        params = _own_params(engine_id, kfit, targets)
    res = fit(targets, params)
    prov = provenance(path, len(rows), len(rows) - len(skipped), res.rows, res.sources)
    if engine_id is not None:
        _write_own(path, rows, engine_id, base_engine, res, prov, output, as_json, max_num_seqs,
                   sorted({t.dep.hardware.id for t in targets}))
        return
    from specagent.measurements import default_path, file_sha256

    kernels_path = Path(kernels or default_path("moe_kernels.csv"))
    prov["moe_kernels"], prov["moe_kernels_sha256"] = kernels_path.name, file_sha256(kernels_path)
    tables = {"provenance": prov, "engines": fitted_tables(res, prov, coverage=figures_by_gpu(targets))}
    files = {output: atomic.text_writer("# Engine coefficients fitted by `specagent latency fit`; merge into hardware/engines/*.toml.\n"
                                        + tomli_w.dumps(tables))}
    if profiles:
        import tomllib

        from specagent.costmodel.latency_fit import merge_tables
        from specagent.hardware.serving_engine import load_engine, parse_engine, with_base

        fitted = tables["engines"]
        for eid in sorted({t.dep.serving_engine.id for t in targets}):
            base = load_engine(eid)
            data = tomllib.loads(Path(base.path).read_text(encoding="utf-8"))
            # a generation's profile (`extends`) holds only its own terms: the shared ones go to the engine it extends
            data = merge_tables(data if base.extends else merge_tables(data, fitted.get("*", {})), fitted.get(eid, {}))
            data["provenance"] = {**data.get("provenance", {}), "fit": prov}
            target = profiles / Path(base.path).name
            parse_engine(with_base(data, Path(base.path)), str(target))  # validate before writing
            files[target] = atomic.text_writer(f"# Serving-engine profile {eid}: fitted fields written by "
                                               "`specagent latency fit --write-profiles`.\n" + tomli_w.dumps(data))
    atomic.write_together(files)  # the fit and the profiles made from it: all or none
    values = {p.name: float(v) for p, v in zip(res.params, res.values)}
    if as_json:
        print(json_out({"output": str(output), "provenance": prov, "values": values, "converged": res.success,
                          "moe_kernels": kfit.values}, indent=2))
        return
    t = Table(title=f"Fitted on {res.rows} of {len(targets)} figures (TTFTs under load scored, not fitted) from {len(rows) - len(skipped)} rows ({len(res.sources)} sources) → {output}")
    t.add_column("coefficient")
    t.add_column("value", justify="right")
    t.add_column("prior", justify="right")
    for p, v in zip(res.params, res.values):
        t.add_row(p.name, f"{v:.4g}", f"{p.prior:g}")
    console.print(t)
    console.print(f"MoE priors: {kfit.describe()}", highlight=False, markup=False, soft_wrap=True)
    if not res.success:
        err.print(f"[yellow]warning:[/] the optimiser stopped without converging: {res.message}", highlight=False)


def _write_own(path: Path, rows, engine_id: str, base_engine: Optional[str], res, prov: dict, output: Path, as_json: bool,
               max_num_seqs: Optional[int] = None, gpus: Sequence[str] = ()) -> None:
    """`latency fit --engine-id`: one whole serving-engine profile, validated before it is written."""
    import tomli_w

    from specagent.costmodel.latency_fit import own_engine_profile, unmeasured_params
    from specagent.hardware.serving_engine import parse_engine

    _, base = _own(rows, engine_id, base_engine)
    prov = {**prov, "dataset_path": str(path)}
    data = own_engine_profile(base, engine_id, res, prov, max_num_seqs, gpus)
    not_fitted = {p.name: f"no row on {', '.join(p.gpus)}: {base.id}'s value kept" for p in unmeasured_params(res, gpus)}
    parse_engine(data, str(output))
    atomic.atomic_write(output, atomic.text_writer(f"# Serving-engine profile {engine_id.lower()}: {base.id}'s profile with the terms "
                                                   f"`specagent latency fit --engine-id` fitted to {path}.\n" + tomli_w.dumps(data)))
    values = {p.name: float(v) for p, v in zip(res.params, res.values)}
    if as_json:
        print(json_out({"output": str(output), "engine_id": engine_id.lower(), "base_engine": base.id,
                        "provenance": data["provenance"]["fit"], "values": {k: v for k, v in values.items() if k not in not_fitted},
                        "not_fitted": not_fitted, "converged": res.success}, indent=2))
        return
    t = Table(title=f"{engine_id.lower()}: {base.id}'s profile fitted on {res.rows} figures from {prov['rows_used']} of "
                    f"{prov['rows']} rows of {path} (GPUs: {', '.join(gpus) or 'none'}) → {output}")
    t.add_column("coefficient")
    t.add_column("value", justify="right")
    t.add_column("prior", justify="right")
    t.add_column("note")
    unmoved = {p.name for p, moved in zip(res.params, res.informed) if not moved}
    for p, v in zip(res.params, res.values):
        note = (f"not written: {not_fitted[p.name]}" if p.name in not_fitted else
                "prior: no figure depends on it (sourced so)" if p.name in unmoved else "")
        t.add_row(p.name, "-" if p.name in not_fitted else f"{v:.4g}", f"{p.prior:g}", note)
    console.print(t)
    console.print(f"use it with --serving-engine {output} (or --strong-serving-engine / --weak-serving-engine)", highlight=False)
    if not res.success:
        err.print(f"[yellow]warning:[/] the optimiser stopped without converging: {res.message}", highlight=False)


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
    t = Table(title=f"{eng.describe()} — {eng.path}" + (f" (on {gpu})" if gpu else ""))
    t.add_column("term")
    t.add_column("value", justify="right")
    t.add_column("source", overflow="fold")
    for a, b, c in figs:
        t.add_row(a, f"{b:g}" if isinstance(b, float) else str(b), c)
    console.print(t)
    if eng.overrides and not gpu:
        console.print(f"GPU-specific values ([hardware.<id>] tables): {', '.join(sorted(eng.overrides))}; see --gpu", highlight=False)
