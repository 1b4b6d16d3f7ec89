"""The comparison's tables (what `predict --details` prints beside the bottom line): every strategy's ratios to
Strong-only, each phase's share, what the environment's waits take, and every assumption the figures depend on.

They read the predict job's comparison (`PredictResult.comparison`: its summary, phase tables and assumptions), the
same numbers summary.json stores; nothing is priced here. Each function returns a renderable or a line; a `Console`
argument is the width a table is fitted to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.table import Table

from specagent.reports import bottom_line as BL
from specagent.reports.screens.tables import Col, fitted, legend
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use, as by the command that imports this module
    pd = lazy_module("pandas")


#: (summary column, short header, legend): headers are words of at most 5 letters, so every column fits
#: 80 terminal columns next to the longest strategy name; the caption spells them out.
REL_COLUMNS = (
    ("total_bytes_read_rel", "bytes", "HBM bytes read by both models"),
    ("strong_bytes_read_rel", "S bytes", "bytes read by the Strong model"),
    ("wall_time_s_rel", "wall", "wall time per task, tool and user waits included"),
    ("model_wall_time_s_rel", "model", "wall time without tool and user waits (what a strategy can change)"),
    ("total_flops_rel", "FLOPs", "FLOPs of both models"),
    ("strong_decode_tokens_rel", "S dec", "tokens the Strong model decodes"),
    ("strong_calls_rel", "S calls", "Strong model calls"),
    ("api_usd_rel", "API $", "API charges"),
)
#: Phase-table headers, short for the same reason, with their legend.
PHASE_HEADERS = {
    "weak_drafting": ("W dec", "Weak drafting (decode)"), "weak_prefill": ("W pre", "Weak prefill"),
    "strong_verification": ("S ver", "Strong verification prefill"), "strong_repair_verdict": ("S rep", "Strong verdict and repair decode"),
    "strong_prefill": ("S pre", "Strong prefill"), "tool": ("tool", "tool calls"), "user": ("user", "user turns"),
}


def strategy_column(t: Table, names) -> None:
    t.add_column("strategy", no_wrap=True, min_width=max(len(str(s)) for s in names))


#: Relative-table columns that leave first where the table would not fit (the ranges tables under it repeat them).
REL_OPTIONAL = ("strong_decode_tokens_rel", "strong_calls_rel")


def rel_table(summary: pd.DataFrame, title: str, console: Console) -> RenderableType:
    """The ratios to Strong-only, fitted to `console` (tables.fitted)."""
    rel = [c for c in REL_COLUMNS if c[0] in summary]
    cols = [Col("strategy", "left")] + [Col(head, optional=c in REL_OPTIONAL) for c, head, _ in rel]
    if "measured_success" in summary:
        cols.append(Col("measured\nsuccess"))
    rows = []
    for strat, row in summary.iterrows():
        cells = [str(strat)] + [f"{row[c]:.3f}" for c, _, _ in rel]
        if "measured_success" in summary:
            cells.append("-" if pd.isna(row["measured_success"]) else f"{row['measured_success']:.2f}")
        rows.append(cells)
    caption = ["ratios to Strong-only: " + legend((head, meaning) for _, head, meaning in rel)]
    if "label" in summary:
        caption.append(legend(summary["label"].items()))
    return fitted(console, cols, rows, title=title, caption="\n".join(caption), left_out="--json has them")


def environment_line(summary: pd.DataFrame, preset: str = "recorded", waits_recorded: bool = True, short: bool = False,
                     changed: str | None = None) -> str | None:
    """What the strategies cannot change: Strong-only's tool and user waits per task, as a share of its time per task;
    then SpecAgent's wall and model-only ratios side by side (the environment preset decides how far apart they are).
    A workload whose log recorded no wait (`waits_recorded` False, with the 'recorded' preset) says so instead of
    reporting 0 s of waits. `changed` (the environment's description when it is not the log's) names the waits the
    short line reports."""
    if "strongonly" not in summary.index or "env_wall_time_s" not in summary:
        return None
    base = summary.loc["strongonly"]
    n = float(base.get("trajectories", 1) or 1)
    wall, env = float(base["wall_time_s"]) / n, float(base["env_wall_time_s"]) / n
    if wall <= 0:
        return None
    if preset == "recorded" and not waits_recorded:
        if short:
            return "Waits not recorded in the log: the times cover the models only (--user-latency-s, --tool-latency-s)."
        line = ("Agent time vs environment time: waits not recorded (the log has no timestamps or latencies): the wall "
                "covers model time only; give the waits with --tool-latency-s/--user-latency-s or another --environment.")
    elif short:
        return (f"Waits{f' ({changed})' if changed else ''}: {BL.fmt_seconds(env)} of Strong-only's {BL.fmt_seconds(wall)} per task ({env / wall:.0%}) are tool "
                "and user waits, which no strategy shortens (`specagent explain`).")
    else:
        line = (f"Agent time vs environment time (environment preset '{preset}'): tool and user waits are "
                f"{BL.fmt_seconds(env)} of Strong-only's {BL.fmt_seconds(wall)} per task ({env / wall:.1%}); "
                "no strategy changes them.")
    if "specagent" in summary.index and "model_wall_time_s_rel" in summary:
        spec = summary.loc["specagent"]
        line += (f" SpecAgent: wall {float(spec['wall_time_s_rel']):.3f}, model time alone {float(spec['model_wall_time_s_rel']):.3f}"
                 " of Strong-only (`specagent explain` takes them apart).")
    return line + " Column 'model' compares model time alone."


def human(v: float, unit: str) -> str:
    """4.03e15 bytes -> '4.03 PB'; FLOPs likewise; seconds as fmt_seconds."""
    if unit == "s":
        return BL.fmt_seconds(v)
    base = "B" if unit == "bytes" else "FLOP"
    for prefix, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g} {prefix}{base}"
    return f"{v:.3g} {base}"


def phase_table(phase: pd.DataFrame, baseline_total: float, title: str, unit: str, n_tasks: int = 1, kind: str = "") -> Table:
    """Each phase relative to Strong-only's total; or, when that total is 0 (a hosted Strong model), absolute per task in
    human units. A phase that is zero for every strategy is left out (and said so)."""
    t = Table(title=title, show_edge=False)
    strategy_column(t, phase.index)
    zero = [c for c in phase.columns if not (phase[c].abs() > 0).any()]
    phase = phase.drop(columns=zero)
    heads = [PHASE_HEADERS.get(c, (c.replace("_", " "), c.replace("_", " "))) for c in phase.columns]
    if baseline_total:
        cells = [[f"{v / baseline_total:.3f}" for v in row.values] for _, row in phase.iterrows()]
    else:
        cells = [[human(v / max(n_tasks, 1), kind) if v else "0" for v in row.values] for _, row in phase.iterrows()]
    for i, (head, _) in enumerate(heads):  # figures are never cut: each column at its widest cell
        t.add_column(head, justify="right", no_wrap=True, min_width=max([len(c[i]) for c in cells] + [5]))
    for strat, c in zip(phase.index, cells):
        t.add_row(str(strat), *c)
    what = (f"each phase's {unit} relative to Strong-only's total" if baseline_total
            else f"{unit} per task, absolute: Strong-only's is 0 here (a hosted Strong model's traffic is not visible)")
    t.caption = what + ": " + legend(heads) + (f" (always 0, left out: {', '.join(PHASE_HEADERS.get(c, (c,))[0] for c in zero)})" if zero else "")
    return t


def reasoning(acc: dict) -> str:
    """The verdict model's reasoning terms in words (the rule: simulator/acceptance/model.py)."""
    if not acc.get("thinking", False):
        return "off (verdicts and repairs decode their answer only)"
    tied = "the workload's recorded reasoning of the step decided"
    v, r = acc.get("verify_reasoning_tokens"), acc.get("repair_reasoning_tokens")
    return (f"on: {tied if v is None else f'{v} tokens'} per verification / "
            f"{'the repaired step' + chr(39) + 's recorded reasoning' if r is None else f'{r} tokens'} per repair")


def assumption_table(assumptions: dict, console: Console) -> RenderableType:
    """Every setting the figures depend on, as (what, value) rows fitted to the console: where a value is wider than the
    terminal, each setting prints its name, then its value indented."""
    rows: list[list[str]] = []

    def add(*cells: object) -> None:
        rows.append([str(c) for c in cells])

    for k, v in assumptions["setting"].items():
        add(k, v)
    acc = assumptions["acceptance_model"]
    add("acceptance (semantic) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["accept"].items()))
    add("acceptance (exact step) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["exact"].items()))
    add("position decay / correlation", f"{acc['position_decay']:g} / {acc['correlation']:g}")
    if acc.get("task_sd", 0.0) > 0:  # shown where it acts (0, the default, plans as before the field existed)
        add("per-task effect (sd, logit scale)", f"{acc['task_sd']:g}: acceptance above is the median task's")
    add("weak token ratio", f"{acc['weak_token_ratio']:g}")
    add("verdict tokens (reject / accept)", f"{acc['verdict_tokens']} (+ replacement call) / {acc['accept_verdict_tokens']}")
    add("Strong reasoning (verify / repair)", reasoning(acc))
    add("p(valid replacement)", f"{acc['p_valid_replacement']:g}")
    add("router p(Strong) by kind", ", ".join(f"{k} {v:g}" for k, v in acc["route_strong"].items()))
    add("escalation recall (collab)", f"{acc['escalation_recall']:g}")
    add("acceptance source", acc["source"])
    if "intervals" in assumptions:
        add("intervals", assumptions["intervals"])
    if "environment" in assumptions:
        add("environment (user, tool waits)", assumptions["environment"])
    # the stored key `engine` is the pricing engine (analytic | simpy), not the serving engine shown per pool above
    for name, label in (("workload", "workload"), ("trajectories", "trajectories"), ("seed", "seed"),
                        ("engine", "pricing engine"), ("quality", "quality")):
        add(label, str(assumptions[name]))
    sa = assumptions["strategies"].get("specagent")
    if sa:
        add("SpecAgent", f"K={sa['k']}, review={sa['review']}, verifier={sa['verifier']}")
    return fitted(console, (Col("what", "left"), Col("", "left")), rows,
                  title="Assumptions (every figure above depends on these)")


def phase_tables(comp) -> list[Table]:
    """Memory traffic, wall time and FLOPs by phase (`--phases`), each against Strong-only's total (`comp`: the predict
    job's comparison)."""
    base = comp.summary.loc["strongonly"]
    n = int(base["trajectories"])
    return [phase_table(comp.phase_bytes, float(base["total_bytes_read"]), "Memory traffic by phase", "memory reads", n, "bytes"),
            phase_table(comp.phase_time, float(base["wall_time_s"]), "Wall time by phase", "wall time", n, "s"),
            phase_table(comp.phase_flops, float(base["total_flops"]), "FLOPs by phase", "FLOPs", n, "flops")]
