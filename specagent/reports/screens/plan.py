"""What `specagent plan` prints: the answer, on one 80x24 screen for one rate; every search's block with --details.

Why (issue #51): the plan printed one long block per strategy and rate (79 of 267 lines were live progress lines), and
the fleets, the key result, scrolled away; the blocks hid what sized each pool. The answer here is the table of fleets
(fitted to the terminal: tables.fitted), per strategy what tasks take alone on its deployment against the SLO and
which pools the SLO rather than the rate set, the change against Strong-only in GPUs and dollars, and the prices.
Every figure is the plan job's (simulator/jobs/plan.py, plan_search.py): this module words them, from a `PlanResult`,
as renderables in print order (`answer`, `details`) that the command prints and a notebook can show; the progress
lines are the command's (cli/plan_view.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console, RenderableType
from rich.text import Text

from specagent.reports.plan_table import as_number, fleet_shape, money, pool_bounds, short_gpu, sized_by
from specagent.reports.screens.tables import Col, fitted
from specagent.simulator.jobs.plan import PlanResult
from specagent.simulator.jobs.plan_search import SLO, pairing


def rate_text(rate: float) -> str:
    return f"{rate:,.4g}/s"


def signed_money(v: float) -> str:
    return "unpriced" if math.isnan(v) else f"{'-' if v < 0 else '+'}${abs(v):,.2f}"


def seconds(v: Any) -> str:
    """A latency in the table: whole seconds from 100 s, else three significant figures (1.34, 12.5)."""
    x = as_number(v)
    return "—" if math.isnan(x) else f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


# ------------------------------------------------------------------------------------------------ the answer
def answer(res: PlanResult, console: Console, written: str = "") -> list[RenderableType]:
    """The answer, the last lines a terminal keeps: the setting, notes, the fleets, what sized them, the change against
    Strong-only, the prices and where the rest is (`written`: the files line, left out when empty)."""
    req, slo = res.request, res.request.objective
    rates = ", ".join(rate_text(r) for r in req.rates)
    best = res.best.to_dict("records") if len(res.best) else []
    table, legend = fleet_table(res, best, console)
    sizing = [sizing_line(strat, [r for r in best if r["strategy"] == strat], res.uncontended, slo) for strat in req.strategy_names]
    lines = [*sizing, *change_lines(best, len(req.rates) > 1), *point_only_lines(best, slo), others_line(res)]
    return [Text(f"Capacity plan for {slo} at {rates}: {models_text(res)}"), *(Text(f"note: {n}") for n in res.notes), table,
            Text(legend), *(Text(line) for line in lines if line), Text(prices_line(res)), *((Text(written),) if written else ())]


def models_text(res: PlanResult) -> str:
    sc = res.request.scenario
    return f"Strong {sc.strong.model}" if res.request.serving else f"Weak {sc.weak.model}, Strong {sc.strong.model}"


def fleet_table(res: PlanResult, best: list[dict], console: Console) -> tuple[RenderableType, str]:
    """One row per rate and strategy: the fleet (a pool the SLO set marked *), GPUs, $/hour, $/task, the SLO percentile
    with its interval; a strategy with no fleet at a rate says so. The GPU types are in the fleet cell when the rows
    differ in them, else in the legend (printed under the table at the terminal's width, not the table's)."""
    req, slo = res.request, res.request.objective
    several = len(req.rates) > 1
    types = {name: {short_gpu(str(r[f"{name}_gpu"])) for r in best if as_number(r.get(f"{name}_replicas")) > 0}
             for name in ("weak", "strong")}
    named = any(len(t) > 1 for t in types.values())  # the rows differ in a pool's GPU type: each fleet names its own
    rows = []
    for rate in req.rates:
        for strat in req.strategy_names:
            r = next((b for b in best if b["strategy"] == strat and b["rate"] == rate), None)
            head = (rate_text(rate),) if several else ()
            if r is None:
                rows.append((*head, strat, "none meets the SLO", "—", "—", "—", "—"))
                continue
            ci = f"{seconds(r['slo_value_s'])} [{seconds(r['slo_ci_low_s'])}-{seconds(r['slo_ci_high_s'])}]"
            rows.append((*head, strat, fleet_cell(r, named), f"{int(r['gpus']):,}", money(r["usd_per_hour"]),
                         money(r["usd_per_task"], 4), ci))
    cols = ((Col("tasks/s"),) if several else ()) + (
        Col("strategy", "left"), Col("fleet", "left"), Col("GPUs"), Col("$/hour"), Col("$/task", optional=True),
        Col(f"{slo.target} p{slo.percentile:g} s\n[95% CI]"))
    every = types["strong"] | types["weak"]
    on = ("" if named or not every else f"; all on {min(every)}" if len(every) == 1
          else "; " + ", ".join(f"{n.capitalize()} on {min(t)}" for n, t in types.items() if t))
    marked = any("*" in r[2 if several else 1] for r in rows)  # the fleet cell
    legend = (f"fleet: replicas × GPUs per replica (W Weak, S Strong){on}"
              + ("; * the SLO, not the rate, set that pool: queueing must stay short, so a looser --slo needs fewer "
                 "replicas" if marked else ""))
    return fitted(console, cols, rows, left_out="--details and --format csv have them"), legend


def fleet_cell(r: dict, named: bool) -> str:
    """'25 W×1* + 2 S×4' (with the GPU types when `named`: '25 W×1 l40s* + 2 S×4 h100'); * marks a pool the SLO set."""
    bounds = pool_bounds(r)
    parts = []
    for name, short in (("weak", "W"), ("strong", "S")):
        n = as_number(r.get(f"{name}_replicas"))
        if n and not math.isnan(n):
            gpu = f" {short_gpu(str(r[f'{name}_gpu']))}" if named else ""
            mark = "*" if bounds.get(name) == "SLO" else ""
            parts.append(f"{int(n):,} {short}×{int(as_number(r.get(f'{name}_gpus_per_replica')))}{gpu}{mark}")
    return " + ".join(parts) or fleet_shape(r)


def sizing_line(strat: str, rows: list[dict], alone: pd.DataFrame, slo: SLO) -> str:
    """One strategy's sizing in words: what its tasks take alone on its deployment (the floor no fleet beats) against
    the SLO, and each pool the SLO rather than the rate set, with its load."""
    if not rows:
        return ""
    metric = f"{slo.target} p{slo.percentile:g}"
    pairs = dict.fromkeys((r["weak_gpu"], r["strong_gpu"]) for r in rows)
    mine = alone[alone["strategy"] == strat] if len(alone) else alone
    floors = []
    for wg, sg in pairs:
        hit = mine[(mine["weak_gpu"] == wg) & (mine["strong_gpu"] == sg)] if len(mine) else mine
        if len(hit):
            v = float(hit["uncontended_slo_value_s"].iloc[0])
            floors.append(f"{v:,.1f} s" + (f" on {pairing(wg, sg, strat)}" if len(pairs) > 1 else "")
                          + (f" (the SLO {slo.seconds / v:.2f}x it)" if v > 0 else ""))
    head = f"{strat}: {metric} alone (no contention) {'; '.join(floors)}" if floors else f"{strat}:"
    set_by_slo = [(r, name) for r in rows for name, how in pool_bounds(r).items() if how == "SLO"]
    if not set_by_slo:
        return f"{head}; the rate set every pool."
    if len(rows) == 1:
        each = "; ".join(_replicas(int(r[f"{name}_replicas"]), name) + _load(r, name) for r, name in set_by_slo)
    else:  # a curve: per pool, the rates the SLO set it at, its counts against the rate's, and its load
        each = "; ".join(_pool_at_rates(name, [r for r, n in set_by_slo if n == name])
                         for name in dict.fromkeys(n for _, n in set_by_slo))
    return f"{head}; the SLO set {each}."


def _replicas(n: int, name: str) -> str:
    return f"{n:,} {name.capitalize()} replica{'s' if n != 1 else ''}"


def _load(r: dict, name: str) -> str:
    share, bound = as_number(r.get(f"{name}_load_share")), as_number(r.get(f"{name}_bound_replicas"))
    parts = ([f"{share:.0%} of their throughput bound"] if not math.isnan(share) else []) + (
        [f"the rate alone needs {int(bound):,}"] if not math.isnan(bound) else [])
    return f" ({'; '.join(parts)})" if parts else ""


def _pool_at_rates(name: str, rows: list[dict]) -> str:
    """'the Weak pool at 1.6/s, 5/s and 16/s (13, 45 and 143 replicas where the rate alone needs 8, 23 and 73; 50-56% of
    their throughput bound)'."""
    def listed(items: list[str]) -> str:
        return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"

    shares = [as_number(r.get(f"{name}_load_share")) for r in rows]
    shares = [x for x in shares if not math.isnan(x)]
    load = (f"; {min(shares):.0%}" + (f"-{max(shares):.0%}" if f"{max(shares):.0%}" != f"{min(shares):.0%}" else "")
            + " of their throughput bound") if shares else ""
    counts = [f"{int(r[f'{name}_replicas']):,}" for r in rows]
    needs = [f"{int(as_number(r.get(f'{name}_bound_replicas'))):,}" for r in rows]
    return (f"the {name.capitalize()} pool at {listed([rate_text(r['rate']) for r in rows])} ({listed(counts)} replicas "
            f"where the rate alone needs {listed(needs)}{load})")


def change_lines(best: list[dict], several: bool) -> list[str]:
    """Each strategy's fleet against Strong-only's at the same rate: $/hour and GPUs, signed (+3 GPUs: three more)."""
    out = []
    for strat in dict.fromkeys(r["strategy"] for r in best if r["strategy"] != "strongonly"):
        parts = []
        for r in (r for r in best if r["strategy"] == strat):
            d_usd, d_gpus, sav = (as_number(r.get(k)) for k in ("usd_per_hour_change_vs_strongonly", "gpus_change_vs_strongonly",
                                                            "usd_saving_vs_strongonly"))
            if math.isnan(d_gpus):
                continue
            pct = "" if math.isnan(sav) else f" ({-sav:+.0%})"
            base = int(r["gpus"] - d_gpus)
            parts.append((f"at {rate_text(r['rate'])} " if several else "")
                         + f"{signed_money(d_usd)}/hour{pct}, {int(d_gpus):+,} GPU{'' if abs(d_gpus) == 1 else 's'} "
                           f"({int(r['gpus']):,} vs {base:,})")
        if parts:
            out.append(f"{strat} vs strongonly{'' if several else ' at ' + rate_text(best[0]['rate'])}: " + "; ".join(parts))
    return out


def point_only_lines(best: list[dict], slo: SLO) -> list[str]:
    """One warning naming every fleet that meets the SLO at its percentile's point estimate only (its CI's upper end
    over the SLO)."""
    only = [r for r in best if r.get("slo_met_at") == "point estimate only"]
    if not only:
        return []
    several = len({r["rate"] for r in best}) > 1
    which = "; ".join(f"{s}" + (f" at {', '.join(rate_text(r['rate']) for r in only if r['strategy'] == s)}" if several else "")
                      for s in dict.fromkeys(r["strategy"] for r in only))
    top = max(as_number(r["slo_ci_high_s"]) for r in only)
    return [f"warning: met at the point estimate only (the 95% CI reaches up to {top:,.1f} s, over {slo.seconds:g} s): "
            f"{which}; --size-on ci-high sizes on the CI's upper end"]


def prices_line(res: PlanResult) -> str:
    """The $/GPU-hour of each GPU type a fleet runs on, and whose price it is (the sources in full: --details)."""
    parts = [f"{g} ${res.usd_per_gpu_hour[g]:,.3g} ({'--price' if res.price_sources.get(g, '').startswith('user') else 'its profile'})"
             for g in res.used_gpus]
    return f"$/GPU-hour: {', '.join(parts)}; sources: --details" if parts else "$/GPU-hour: none priced"


def others_line(res: PlanResult) -> str:
    """The GPU pairings searched that no cheapest fleet of the strategy runs on ('' when each strategy searched one), so
    the answer says they lost (their figures: --details)."""
    lost = res.other_pairings
    return ("also searched, dearer or missing the SLO: " + "; ".join(f"{s} on {', '.join(v)}" for s, v in lost.items())
            + " (--details)") if lost else ""


def setting_lines(res: PlanResult) -> list[str]:
    """What the plan was sized for, for a figure read on its own: the SLO, the models and the prices."""
    prices = ", ".join(f"{g} ${res.usd_per_gpu_hour[g]:,.3g}" for g in res.used_gpus)
    return [f"{res.request.objective} · {models_text(res)}", f"$/GPU-hour: {prices}" if prices else "unpriced"]


# ------------------------------------------------------------------------------------------------ --details
def details(res: PlanResult) -> list[RenderableType]:
    """Every search's block, one per rate and strategy, then the prices' sources (what --details adds before the
    answer)."""
    return [Text(line) for line in details_lines(res)]


def details_lines(res: PlanResult) -> list[str]:
    """The lines of `details`."""
    req, slo = res.request, res.request.objective
    out = []
    best = res.best.to_dict("records") if len(res.best) else []
    table = res.table.to_dict("records")
    for rate in req.rates:
        out.append(f"At {rate_text(rate)}")
        for strat in req.strategy_names:
            rows = [r for r in best if r["strategy"] == strat and r["rate"] == rate]
            tried = [c for c in table if c["strategy"] == strat and c["rate"] == rate]
            out += fleet_lines(rows[0], strat, slo, tried) if rows else no_fleet_lines(strat, slo, tried)
        out.append("")
    return [*out, "Prices:", *(f"  {g}: {src}" for g, src in res.price_sources.items()), ""]


def no_fleet_lines(strat: str, slo: SLO, tried: list[dict]) -> list[str]:
    out = [f"  {strat}: no fleet found (see the notes)"]
    for c in tried:
        out.append(f"    {pairing(c['weak_gpu'], c['strong_gpu'], strat)}: best achievable {slo.target} p{slo.percentile:g} "
                   f"{c['best_slo_value_s']:,.1f} s against {slo.seconds:g} s"
                   + (" (added replicas stopped lowering it; the search stopped there)" if c.get("stopped_early") else ""))
    return out


def _pool_text(r: dict, name: str) -> str:
    n, g = int(r[f"{name}_replicas"]), int(r[f"{name}_gpus_per_replica"])
    return f"{n:,} {name.capitalize()} x {g} {r[f'{name}_gpu']}" if n else ""


def fleet_lines(r: dict, strat: str, slo: SLO, tried: list[dict]) -> list[str]:
    """The cheapest fleet of one strategy at one rate: its pools, what it measured, why each pool has its size."""
    pools = " + ".join(p for p in (_pool_text(r, "weak"), _pool_text(r, "strong")) if p)
    out = [f"  {strat} ({r['label']}; {pairing(r['weak_gpu'], r['strong_gpu'], strat)})"]
    add = out.append
    add(f"    fleet: {pools} = {int(r['gpus']):,} GPUs, {money(r['usd_per_hour'])}/hour, {money(r['usd_per_task'], 4)}/task")
    add(f"    {slo.target} p{slo.percentile:g}: {r['slo_value_s']:,.1f} s (95% CI {r['slo_ci_low_s']:,.1f}-"
        f"{r['slo_ci_high_s']:,.1f} s); task p50 {r['latency_p50_s']:,.1f} s; sized by {sized_by(r)}")
    floor = as_number(r.get("uncontended_slo_value_s"))
    if not math.isnan(floor):
        task = "" if (slo.target, slo.percentile) == ("task", 95) else f"; task p95 {as_number(r.get('reference_latency_s')):,.1f} s"
        add(f"    alone on this deployment (no contention): {slo.target} p{slo.percentile:g} {floor:,.1f} s, the best any "
            f"fleet can do{task}")
    for name in ("strong", "weak"):
        if r[f"{name}_replicas"]:
            out += pool_lines(r, name)
    for key, what in (("slo_note", "why the SLO"), ("size_note", "why so large")):
        if isinstance(r.get(key), str) and r[key]:
            add(f"    {what}: {r[key]}")
    add(f"    simulated: {r['slice']}, {int(r['tasks_simulated']):,} tasks over {r['horizon_s']:,.0f} s (warm-up "
        f"{r['warmup_s']:,.0f} s detected, {int(r['tasks_measured']):,} tasks measured, {int(r['tasks_censored']):,} "
        f"still running at the end); {int(r['evaluations'])} candidates tried")
    for line in change_lines([r], False) if strat != "strongonly" else ():
        add(f"    {line}")
    for c in (c for c in tried if (c["weak_gpu"], c["strong_gpu"]) != (r["weak_gpu"], r["strong_gpu"])):
        what = (f"{int(c['gpus']):,} GPUs, {money(c['usd_per_hour'])}/hour" if c["feasible"] else
                f"no fleet found (best achievable {slo.target} p{slo.percentile:g} {c['best_slo_value_s']:,.1f} s)")
        add(f"    also tried {pairing(c['weak_gpu'], c['strong_gpu'], strat)}: {what}")
    return out


def pool_lines(r: dict, name: str) -> list[str]:
    nb = int(r[f"{name}_bound_replicas"])
    out = [f"    {name.capitalize()}: analytic bound {nb:,} replica{'s' if nb != 1 else ''} ({r[f'{name}_bound']}); runs <= "
           f"{int(r[f'{name}_max_num_seqs']):,} sequences and {int(r[f'{name}_max_batched_tokens']):,} tokens per iteration; "
           f"mean decode batch {r[f'{name}_mean_decode_batch']:,.1f}; {utilisation_text(r, name)}"]
    if isinstance(r.get(f"{name}_why"), str) and r[f"{name}_why"]:
        out.append(f"    why this size: {r[f'{name}_why']}")
    return out


def utilisation_text(r: dict, name: str) -> str:
    """Both meanings of 'utilisation', each defined: the share of time a replica runs anything (at batch 1 too), and
    the rate's share of the pool's throughput bound."""
    share = r.get(f"{name}_load_share")
    bound = (f", load {share:.0%} of its throughput bound (rate / (replicas x bound per replica))"
             if isinstance(share, float) and not math.isnan(share) else "")
    return f"busy {r[f'{name}_utilisation']:.0%} of the time (a replica running any sequence is busy){bound}"


def files_line(out: Path | None, images: str, details: bool) -> str:
    """Where the rest is: the files written (`images`: what became of the PNG/SVG copies, reports/plan_figure.py), and
    the blocks --details prints."""
    more = "" if details else "every search: --details"
    if out is None:
        return f"plan.json and the curve: --out FOLDER; {more}" if more else "plan.json and the curve: --out FOLDER"
    wrote = f"wrote {out}/ (plan.json, capacity_curve.html{images})"
    return f"{wrote}; {more}" if more else wrote
