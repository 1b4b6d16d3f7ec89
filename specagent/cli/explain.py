"""`specagent explain`: why SpecAgent's ratios to Strong-only are what they are, factor by factor.

It runs the scenario as `predict` does (Strong-only and SpecAgent only), takes each ratio apart
into per-phase shares and their factors (simulator/explain.py: the parts add back to the printed
ratio), and reruns the ratios under one change each (zero acceptance, thinking off, no
environment, a fresh verifier prompt) so a reader sees what moves them and what does not.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.cli.options import input_files, resolve, scenario_options
from specagent.cli.simulate import load_workload
from specagent.common import atomic
from specagent.common.errors import InputError
from specagent.common.paths import HTML, check_outputs
from specagent.hardware.profile import HardwareProfileError, load_hardware
from specagent.simulator.jobs import bottom_line as JB
from specagent.simulator import explain as X
from specagent.simulator.protocol.environment import Environment
from specagent.simulator.rates_prices import parse_prices
from specagent.simulator.run import predict as run_predict
from specagent.simulator.scenario import Scenario

console = SafeConsole()
err = SafeConsole(stderr=True)
O = typer.Option  # noqa: E741


def _cell(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{v:.3f}"


def decomposition_table(dec: X.Decomposition) -> Table:
    """One resource: per phase, Strong-only's share, SpecAgent's share (= the product of its factors), the change."""
    t = Table(title=f"{dec.resource}: SpecAgent {dec.ratio:.3f} of Strong-only ({dec.meaning})", show_edge=False,
              title_justify="left")
    t.add_column("phase", no_wrap=False, max_width=30)
    for head in ("S-only", "SpecA", "change", "ref", "tokens", "cost/tok"):
        t.add_column(head, justify="right")
    for term in dec.terms:
        if abs(term.specagent) < 1e-12 and abs(term.strongonly) < 1e-12:
            continue
        f = [_cell(v.value) if v.value >= 0.001 or v.value == 0 else f"{v.value:.2g}" for v in term.factors]
        if len(f) == 2:  # a wait: its share and its change, no tokens
            f = [f[0], "", f[1]]
        t.add_row(term.label, _cell(term.strongonly),
                  _cell(term.specagent), f"{term.delta:+.3f}", *(f or ["", "", ""]))
    t.add_row("total", "1.000", _cell(dec.total()), f"{dec.total() - 1:+.3f}", "", "", "")
    t.caption = ("shares of Strong-only's total; SpecA = ref × tokens × cost/tok, against a reference phase of Strong-only "
                 "(its Strong decode for decode and verification, its Strong prefill for prefills): ref = Strong-only's share "
                 "there, tokens = this phase's tokens per reference token, cost/tok = cost per token against the reference's")
    return t


def counterfactual_table(result: X.Explanation) -> Table:
    t = Table(title="SpecAgent's ratios to Strong-only with one thing changed (the same trajectories and seed)",
              show_edge=False, title_justify="left")
    t.add_column("scenario", no_wrap=True)
    keys = list(result.decompositions)
    for k in keys:
        t.add_column(k, justify="right")
    t.add_row("as given", *(_cell(result.decompositions[k].ratio) for k in keys))
    for name, r in result.counterfactuals.items():
        t.add_row(name, *(_cell(r.get(k, math.nan)) for k in keys))
    t.caption = "; ".join(f"{n} = {X.COUNTERFACTUALS[n]}" for n in result.counterfactuals)
    return t


def where_saving_comes_from(result: X.Explanation, review: str) -> list[str]:
    """Sentences computed from the run: the environment floor, and how much of the saving survives zero acceptance."""
    out = []
    env = result.facts.get("environment share of Strong-only wall", math.nan)
    wall = result.decompositions["wall"].ratio
    if math.isfinite(env):
        out.append(f"Tool and user waits are {env:.3f} of Strong-only's wall time: no strategy shortens them, so wall "
                   f"cannot fall below {env:.3f} however fast the models are.")
    zero = result.counterfactuals.get("zero acceptance")
    bare = result.counterfactuals.get("zero acceptance, no replacements", {})
    if zero:
        parts = []
        for k in ("wall", "memory"):
            if k not in result.decompositions:
                continue
            r, z = result.decompositions[k].ratio, zero.get(k, math.nan)
            if r < 1 and math.isfinite(z):
                kept = (1 - z) / (1 - r)
                parts.append(f"{k} {z:.3f} (vs {r:.3f}: {kept:.0%} of the saving kept)")
        if parts:
            out.append("With every kind's acceptance at 0: " + "; ".join(parts) + f". Under review '{review}' the steps "
                       "committed without review (reads, unreviewed replies) and the verdicts' replacement calls carry that "
                       "part of the saving; acceptance moves only the rest."
                       + (f" With no valid replacement either: wall {bare['wall']:.3f}, memory {bare['memory']:.3f}."
                          if bare else ""))
    for preset, other in (("none", "without the environment (model time only)"), ("recorded", "with the trace's recorded waits")):
        r = result.counterfactuals.get(f"environment {preset}")
        if r:
            out.append(f"Environment preset '{preset}': {other} wall would be {r['wall']:.3f}; as given it is {wall:.3f}.")
    return out


def published_ranges(comp) -> dict[str, tuple[str, float, float]]:
    """resource -> (figure id, low, high) of the publication's SpecAgent ranges, where this run is their setting
    (`ranges.comparable`: the evaluated setting, `--scenario wang2026-tau2`); {} elsewhere."""
    from specagent.simulator.jobs.predict import comparable
    from specagent.simulator.uncertainty import published_for

    if not comparable(comp):
        return {}
    pub = published_for(comp)
    out = {}
    for res, (_, column) in X.RESOURCES.items():
        r = pub.get((X.SPEC, column))
        if r is not None:
            out[res] = (r.figure_id, r.low, r.high)
    return out


def gap_lines(gaps: list[X.Gap]) -> list[str]:
    """What separates each ratio from its published range, in numbers (`explain.published_gaps`)."""
    if not gaps:
        return []
    out = ["Against the published τ² figures (Wang et al., arXiv:2610.21463), in their evaluated setting (this run's):"]
    for g in gaps:
        rng = f"{g.low:.2f}–{g.high:.2f}"
        if not g.gap:
            out.append(f"  {g.resource} {g.ratio:.3f}: inside the published {rng} ({g.figure_id}).")
            continue
        side = "above" if g.gap > 0 else "below"
        line = f"  {g.resource} {g.ratio:.3f}: {abs(g.gap):.3f} {side} the published {rng} ({g.figure_id}). Its largest parts:"
        for label, share, factors, needs in g.parts:
            prod = " × ".join(f"{f.value:.3f} {f.name}" for f in factors)
            alone = [f"{f.name} {n:.3f}" for f, n in zip(factors[1:], needs) if n is not None]
            line += (f" {label} {share:.3f} (= {prod}"
                     + (f"; to reach the range alone: {' or '.join(alone)}" if alone else "; no one of its factors alone reaches it")
                     + ");")
        if g.closes:
            line += " rerun with one thing changed, inside the range: " + ", ".join(f"{n} {v:.3f}" for n, v in g.closes) + "."
        else:
            line += " no single change rerun here brings it inside."
        out.append(line)
    out.append("  Nothing above is applied to the prediction: no hardware, latency or acceptance term is moved to meet a "
               "published figure (docs/protocol-calibration.md).")
    return out


def to_json(result: X.Explanation, gaps: list[X.Gap] | None = None) -> dict:
    return {
        "published": [{"resource": g.resource, "figure_id": g.figure_id, "ratio": g.ratio, "low": g.low, "high": g.high,
                       "gap": g.gap, "closes": dict(g.closes),
                       "parts": [{"phase": label, "share": share, "factors": [{"name": f.name, "value": f.value} for f in fs],
                                  "alone_needed": list(needs)} for label, share, fs, needs in g.parts]}
                      for g in gaps or []],
        "decompositions": {k: {"meaning": d.meaning, "ratio": d.ratio, "terms": [
            {"phase": t.phase, "label": t.label, "strongonly": t.strongonly, "specagent": t.specagent, "change": t.delta,
             "factors": [{"name": f.name, "value": f.value} for f in t.factors]} for t in d.terms]}
            for k, d in result.decompositions.items()},
        "facts": result.facts, "sources": result.sources, "counterfactuals": result.counterfactuals,
    }


@scenario_options(exclude=("strategies",))
def explain(
    scenario: Scenario,
    price: List[str] = O([], "--price", help="$/GPU-hour per GPU type, as predict's --price (default: each profile's sourced price)."),
    figure: Optional[Path] = O(None, "--figure", help="Also write the wall-time waterfall as a self-contained HTML file here."),
    no_counterfactuals: bool = O(False, "--no-counterfactuals", help="Skip the reruns with one thing changed (faster)."),
    as_json: bool = O(False, "--json", help="Print the decomposition as JSON."),
) -> None:
    """Why SpecAgent's ratios to Strong-only (wall, model time, memory, FLOPs, $) are what they are.

    Each ratio is taken apart per phase into SpecAgent's share of Strong-only's total, the product of named
    factors (Strong-only's share of the reference phase × tokens per reference token × cost per token against
    it), and reruns show the ratios with zero acceptance, thinking off, no environment and a fresh verifier prompt.
    """
    try:
        prices = parse_prices(price)
        for key in prices:
            load_hardware(key)
    except ValueError as exc:
        fail(f"--price: {exc}")
    except HardwareProfileError as exc:
        fail(f"--price: {exc}")
    try:  # before the run: --figure over the scenario, the acceptance table or the trace (HTML replaced the TOML)
        check_outputs({"--figure": figure}, input_files(scenario), InputError, kinds={"--figure": HTML})
    except InputError as exc:
        fail(str(exc))
    if figure is not None:
        atomic.check_writable(figure)
    scenario = scenario.replace(strategies=("strongonly", "specagent"))
    raw, _path, name = load_workload(scenario.replace(environment=Environment()), show=not as_json)
    trajs = scenario.environment.apply(raw)
    setting = resolve(scenario)
    try:
        comp = run_predict(scenario, trajs, name, setting=setting)
        pools = JB.pools(setting, prices)
        with err.status("explaining") as status:
            result = X.explain(comp, trajs, pools, () if no_counterfactuals else None,
                               progress=lambda n: status.update(f"rerunning: {n}"), recorded=raw)
    except (InputError, ValueError) as exc:
        fail(exc)
    if figure is not None:
        from specagent.reports.explain_figure import waterfall_figure

        atomic.write_text(figure, waterfall_figure(result.decompositions["wall"]).to_html(include_plotlyjs=True, full_html=True))
    gaps = X.published_gaps(result, published_ranges(comp))
    if as_json:
        print(json_out(to_json(result, gaps), indent=2))
        return
    for dec in result.decompositions.values():
        console.print(decomposition_table(dec))
    facts = "; ".join(f"{k} {_cell(v)}" for k, v in result.facts.items())
    console.print(f"Protocol facts: {facts}.", highlight=False)
    if result.counterfactuals:
        console.print(counterfactual_table(result))
    for line in where_saving_comes_from(result, scenario.review):
        console.print(line, highlight=False)
    for line in gap_lines(gaps):
        console.print(line, highlight=False)
    from specagent.simulator.jobs.predict import setting_note

    note = setting_note(comp)
    if note:
        console.print(note + ".", highlight=False)
    console.print("Sources: " + "; ".join(f"{k}: {v}" for k, v in result.sources.items()), highlight=False)
    if figure is not None:
        console.print(f"wrote {figure}", highlight=False)
