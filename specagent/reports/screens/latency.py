"""What `specagent latency validate` and `latency fit` print: the serving-latency model against public measurements.

Every figure is the jobs' (simulator/jobs/latency_validate.py, latency_fit.py: the MAPEs, slices, pairs and offsets of
the validation, the fitted coefficients); this module lays them out as renderables in print order, fitted to a console's
width, and prints nothing. The tolerances and target classes come through the Result, so nothing of the cost model is
imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rich.console import Console, RenderableType
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted

if TYPE_CHECKING:
    from specagent.simulator.jobs.latency_fit import LatencyFitResult
    from specagent.simulator.jobs.latency_validate import LatencyValidateResult


def validation(res: LatencyValidateResult, console: Console, out: Mapping[str, Any] | None = None) -> list[RenderableType]:
    """`latency validate`'s screen: the held-out MAPE against the targets, the slices, the model pairs, the evaluated
    pair, the MAPE by GPU, engine and model class, the sources' offsets, the worst rows and the rows left out. `out`: the
    result's `to_dict()`, where the caller has it already."""
    out = res.to_dict() if out is None else out
    kind, parts = res.kind, []
    say = parts.append
    rows = [[k, str(v["rows"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", f"{v['target']:.0%}",
             "-" if v["met"] is None else ("yes" if v["met"] else "NO")] for k, v in out["targets"].items()]
    rows += [[k, str(v["rows"]), f"{v['mape']:.1%}", "", ""] for k, v in res.validation.mape("load_class").items()
             if k not in out["targets"]]
    say(fitted(console, cols_of("class", "figures", "MAPE", "target", "met"), rows,
                         title=f"Held-out MAPE against the targets — {len(res.targets)} figures from "
                               f"{len(res.rows) - len(res.skipped)} of {len(res.rows)} rows ({kind})"))
    say(Text(f"MoE priors: {res.kernel_fit.describe()}"))
    say(slices_table(out["slices"], kind, console))
    parts += pairs(out["model_pairs"], kind, res.pair_tolerance, console)
    parts += default_pair(out["default_pair"], kind, console)
    for key, title in (("gpu", "GPU"), ("engine", "engine"), ("model_class", "model class")):
        say(fitted(console, cols_of(title, "figures", "MAPE"), [[k, str(v["rows"]), f"{v['mape']:.1%}"]
                                                                for k, v in out["mape"][key].items()],
                   title=f"MAPE by {title}"))
    say(offsets_table(out["source_offsets"], res.target_classes, console))
    say(worst_table(out["worst"], console))
    return parts + skipped_lines(res)


def slices_table(slices: dict, kind: str, console: Console) -> RenderableType:
    rows = []
    for name, v in slices.items():
        rows.append([name, "all figures", str(v["figures"]), "-" if v["mape"] is None else f"{v['mape']:.1%}", "", ""])
        rows += [["", k, str(cv["rows"]), f"{cv['mape']:.1%}", "" if cv["target"] is None else f"{cv['target']:.0%}",
                  "" if cv["met"] is None else ("yes" if cv["met"] else "NO")] for k, cv in v["classes"].items()]
        rows += [["", source_name(src), str(sv["figures"]), f"{sv['mape']:.1%}", "", f"{sv['bias']:.2f}x"]
                 for src, sv in v["sources"].items()]
    return fitted(console, cols_of("slice", "class or\nsource", "figures", "MAPE", "target", "met /\nbias"), rows,
                  title=f"Classes scored apart ({kind}): MAPE per target class inside each, and each source's bias "
                        "(median predicted / measured) inside it")


def offsets_table(offsets: dict, classes: Sequence[str], console: Console) -> RenderableType:
    """Each source's bias and its MAPE with that bias divided out, per target class (`classes`)."""
    rows = []
    for cls, v in offsets.items():
        if cls not in classes:
            continue
        rows += [[cls if k == 0 else "", source_name(src), str(sv["figures"]), f"{sv['bias']:.2f}x", f"{sv['mape']:.1%}",
                  f"{sv['mape_after_offset']:.1%}"] for k, (src, sv) in enumerate(v["sources"].items())]
        rows.append(["", "all sources", str(v["figures"]), "", f"{v['mape']:.1%}", f"{v['mape_after_offset']:.1%}"])
    return fitted(console, cols_of("class", "source", "figures", "bias", "MAPE", "after\nbias"), rows,
                  title="Error between sources vs within them: each source's bias (median predicted / measured) and "
                        "its MAPE once that one factor is divided out (a diagnosis fitted on the scored rows, not a "
                        "prediction)")


def worst_table(worst: list, console: Console) -> RenderableType:
    rows = [[r["row_id"], r["metric"], r["gpu"], r["engine"], f"{r['concurrency']:g}", f"{r['measured']:.4g} {r['unit']}",
             f"{r['predicted']:.4g} {r['unit']}", f"{r['error']:+.0%}"] for r in worst]  # both figures with their unit
    cols = [Col("row", "left"), Col("metric", "left"), Col("GPU", "left", optional=True), Col("engine", "left", optional=True),
            Col("C/B"), Col("measured"), Col("predicted"), Col("error")]
    return fitted(console, cols, rows, title=f"Worst {len(worst)} rows", left_out="--rows FILE has it")


def skipped_lines(res: LatencyValidateResult) -> list[RenderableType]:
    """The rows left out, by rule."""
    if not res.skipped:
        return []
    return [Text(f"excluded {len(res.skipped)} of {len(res.rows)} rows, by rule:"),
            *(Text(f"  {len(ids)} × {reason}: {', '.join(ids)}") for reason, ids in res.skipped_by_reason())]


#: The pair the default scenario prices (Weak / Strong): its rows are listed one by one under the summary.
DEFAULT_PAIR = ("Qwen3.5-4B", "Qwen3.5-397B-A17B")


def pairs(pairs: list[dict], kind: str, tol: float, console: Console) -> list[RenderableType]:
    """Same-source model pairs: within tolerance per (GPU, engine, concurrency), then the default pair's rows."""
    from collections import defaultdict

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for p in pairs:
        groups[(p["gpu"], p["engine"], p["concurrency"])].append(p)
    rows = []
    for (gpu, engine, conc), ps in groups.items():
        w = max(ps, key=lambda p: abs(p["error"]))
        rows.append([gpu, engine, f"{conc:g}", str(len(ps)), str(sum(p["within"] for p in ps)),
                     f"{short_name(w['faster'])} / {short_name(w['slower'])}", f"{w['error']:+.0%}"])
    cols = [Col("GPU", "left"), Col("engine", "left"), Col("C"), Col("pairs"), Col("within"), Col("worst pair", "left"),
            Col("worst\nerror")]
    out: list[RenderableType] = [fitted(console, cols, rows, title=f"Same-source model pairs ({kind}): faster / slower model's "
                                                              f"per-token time (TPOT), predicted vs measured; within {tol:.0%}: "
                                                              f"{sum(p['within'] for p in pairs)} of {len(pairs)} pairs")]
    mine = [p for p in pairs if DEFAULT_PAIR[0] in p["faster"].split(" ")[0] and p["slower"].split(" ")[0].endswith(DEFAULT_PAIR[1])]
    for p in mine:
        out.append(Text(f"  {DEFAULT_PAIR[0]} / {DEFAULT_PAIR[1]} on {p['gpu']} ({p['engine']}, C={p['concurrency']:g}, "
                      f"{short_name(p['faster'])} / {short_name(p['slower'])}): measured {p['measured_ratio']:.3f}, predicted "
                        f"{p['predicted_ratio']:.3f} ({p['error']:+.0%}, {'within' if p['within'] else 'OUTSIDE'} {tol:.0%})"))
    return out


def default_pair(sl: dict, kind: str, console: Console) -> list[RenderableType]:
    """The evaluated setting's pair scored apart (`Validation.pair_slice`): each same-source pairing, then the Weak alone."""
    a, b = short_name(sl["faster"]), short_name(sl["slower"])
    rows = [[p["gpu"], f"{p['engine']} {p['versions']}", f"{p['concurrency']:g}", p["slower"], f"{p['measured_ratio']:.3f}",
             f"{p['predicted_ratio']:.3f}", f"{p['error']:+.1%}", "yes" if p["within"] else "NO"] for p in sl["pairs"]]
    cols = [Col("GPU", "left"), Col("engine", "left"), Col("C"), Col(b, "left"), Col("measured"), Col("predicted"),
            Col("error"), Col("within")]
    out: list[RenderableType] = [fitted(console, cols, rows, title=f"The evaluated pair, {a} / {b}, same source ({kind}): "
                                                              f"per-token time ratio, predicted vs measured; within "
                                                              f"{sl['pair_tolerance']:.0%}: {sl['within']} of {len(sl['pairs'])} "
                                                              "(engine versions may differ: named)")]
    for r in sl["faster_alone"]:
        out.append(Text(f"  {a} alone (concurrency 1) on {r['gpu']} ({r['engine']}): TPOT measured {r['measured_ms']:.2f} ms, "
                      f"predicted {r['predicted_ms']:.2f} ms ({r['error']:+.1%}, {'within' if r['within'] else 'OUTSIDE'} "
                        f"{sl['small_model_tolerance']:.0%})"))
    return out


def cols_of(first: str, *rest: str) -> list[Col]:
    """The first column left-justified (names), the rest right-justified (figures)."""
    return [Col(first, "left")] + [Col(c) for c in rest]


def source_name(source: str) -> str:
    """A source's short name: the text before its first ':' (`bench serve`'s sources carry their URL after a space)."""
    return source.split(":")[0]


def short_name(label: str) -> str:
    """A model's name without its organisation ('Qwen/Qwen3-8B' -> 'Qwen3-8B')."""
    return label.split("/", 1)[-1] if label.startswith(("Qwen/", "meta-llama/")) else label


def fit(res: LatencyFitResult, output: Path, console: Console) -> list[RenderableType]:
    """`latency fit`'s screen: each coefficient fitted, with its prior; the fit's error; the MoE priors (`output`: the file
    written, named in the title)."""
    f = res.fit
    return [fitted(console, cols_of("coefficient", "value", "prior"),
                         [[p.name, f"{v:.4g}", f"{p.prior:g}"] for p, v in zip(f.params, f.values)],
                         title=f"Fitted on {f.rows} of {len(res.targets)} figures (TTFTs under load scored, not fitted) from "
                               f"{len(res.rows) - len(res.skipped)} rows ({len(f.sources)} sources) → {output}"),
            Text(res.fit_line()), Text(f"MoE priors: {res.kernel_fit.describe()}")]


def own_profile(res: LatencyFitResult, output: Path, console: Console) -> list[RenderableType]:
    """`latency fit --engine-id`: the whole serving-engine profile written, term by term."""
    f, prov, base = res.fit, res.provenance, res.base
    not_fitted = res.not_fitted()
    unmoved = {p.name for p, moved in zip(f.params, f.informed) if not moved}
    rows = [[p.name, f"{v:.4g}", f"{p.prior:g}", "prior: no figure depends on it (sourced so)" if p.name in unmoved else ""]
            for p, v in zip(f.params, f.values) if p.name not in not_fitted]
    by_reason: dict[str, list[str]] = {}  # the terms left out, one line per reason (a GPU no row ran on: many terms)
    for name, why in not_fitted.items():
        by_reason.setdefault(why, []).append(name)
    table = fitted(console, [*cols_of("coefficient", "value", "prior"), Col("note", "left", optional=True)], rows,
                   title=f"{res.request.engine_id.lower()}: {base.id}'s profile fitted on {f.rows} figures from "
                         f"{prov['rows_used']} of {prov['rows']} rows of {res.path} (GPUs: "
                         f"{', '.join(res.gpus) or 'none'}) → {output}")
    return [table, Text(res.fit_line()), *(Text(f"not written ({why}): {', '.join(names)}") for why, names in by_reason.items()),
            Text(f"use it with --serving-engine {output} (or --strong-serving-engine / --weak-serving-engine)")]


def engine(eng: Any, gpu: str | None, console: Console) -> list[RenderableType]:
    """`latency engine`: every term of one serving-engine profile (`hardware.serving_engine.EngineProfile`, resolved for
    `gpu` where one was named) with its source, then the GPUs with values of their own."""
    table = fitted(console, [*cols_of("term", "value"), Col("source", "left")],
                   [[a, f"{b:g}" if isinstance(b, float) else str(b), c] for a, b, c in eng.figures()],
                   title=f"{eng.describe()} — {eng.path}" + (f" (on {gpu})" if gpu else ""))
    if eng.overrides and not gpu:
        return [table, Text(f"GPU-specific values ([hardware.<id>] tables): {', '.join(sorted(eng.overrides))}; see --gpu")]
    return [table]
