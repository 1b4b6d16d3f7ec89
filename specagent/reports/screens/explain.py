"""What `specagent explain` prints: each ratio to Strong-only taken apart per phase into named factors, the reruns with
one thing changed, the sentences computed from them, and the gaps to the published ranges.

Every number is the explain job's (`ExplainResult`, simulator/jobs/explain.py; the decomposition itself:
simulator/explain.py, whose parts add back to the printed ratio); this module words them and returns renderables in
print order (`screen`), which the command prints and a notebook can show. The objects are read by their fields, so
this module imports nothing of the simulator's explain.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from rich.console import Console, RenderableType
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted
from specagent.simulator.jobs.explain import short_label

if TYPE_CHECKING:
    from specagent.simulator.jobs.explain import ExplainResult


def cell(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{v:.3f}"


#: What the decomposition tables' columns and shortened phase names mean: printed once, under the last of them.
LEGEND = ("shares of Strong-only's total; SpecA = ref × tokens × cost/tok, against a reference phase of Strong-only (its "
          "Strong decode for decode and verification, its Strong prefill for prefills): ref = Strong-only's share there, "
          "tokens = this phase's tokens per reference token, cost/tok = cost per token against the reference's")
DECOMPOSITION_COLUMNS = (Col("phase", "left"), Col("S-only"), Col("SpecA"), Col("change"), Col("ref"), Col("tokens"),
                         Col("cost/tok"))


def decomposition_rows(dec: Any) -> list[tuple[str, ...]]:
    """One resource: per phase (its short name), Strong-only's share, SpecAgent's share (= the product of its factors),
    the change and the factors; the total last."""
    rows = []
    for term in dec.terms:
        if abs(term.specagent) < 1e-12 and abs(term.strongonly) < 1e-12:
            continue
        f = [cell(v.value) if v.value >= 0.001 or v.value == 0 else f"{v.value:.2g}" for v in term.factors]
        if len(f) == 2:  # a wait: its share and its change, no tokens
            f = [f[0], "", f[1]]
        rows.append((short_label(term), cell(term.strongonly), cell(term.specagent), f"{term.delta:+.3f}",
                     *(f or ["", "", ""])))
    rows.append(("total", "1.000", cell(dec.total()), f"{dec.total() - 1:+.3f}", "", "", ""))
    return rows


def decomposition_table(dec: Any, console: Console) -> RenderableType:
    """One resource's table (`dec`: a `simulator.explain.Decomposition`), fitted to `console`."""
    return fitted(console, DECOMPOSITION_COLUMNS, decomposition_rows(dec),
                  title=f"{dec.resource}: SpecAgent {dec.ratio:.3f} of Strong-only ({dec.meaning})")


def phase_names(x: Any) -> str:
    """The phases the tables name short, in full ('phases in full: Weak drafting (decode); ...')."""
    full = dict.fromkeys(t.label for d in x.decompositions.values() for t in d.terms if short_label(t) != t.label)
    return f"phases in full: {'; '.join(full)}" if full else ""


def counterfactual_table(result: Any, meanings: Mapping[str, str], console: Console) -> RenderableType:
    """SpecAgent's ratios as given and under each rerun (`result`: the `Explanation`; `meanings`: what each changed)."""
    keys = list(result.decompositions)
    rows = [("as given", *(cell(result.decompositions[k].ratio) for k in keys))]
    rows += [(name, *(cell(r.get(k, math.nan)) for k in keys)) for name, r in result.counterfactuals.items()]
    return fitted(console, (Col("scenario", "left"), *(Col(k) for k in keys)), rows,
                  title="SpecAgent's ratios to Strong-only with one thing changed (the same trajectories and seed)",
                  caption="; ".join(f"{n} = {meanings[n]}" for n in result.counterfactuals))


def where_saving_comes_from(result: Any, review: str) -> list[str]:
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


def gap_lines(gaps: list) -> list[str]:
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


def screen(result: ExplainResult, console: Console) -> list[RenderableType]:
    """The takeaway and any warning about the inputs first, then every table and sentence, the takeaway again last (the
    screen a terminal keeps)."""
    x = result.explanation
    out: list[RenderableType] = [Text(line) for line in (result.takeaway, result.acceptance_warning) if line]
    out += [decomposition_table(dec, console) for dec in x.decompositions.values()]
    out.append(Text("; ".join(p for p in (LEGEND, phase_names(x)) if p)))
    out.append(Text("Protocol facts: " + "; ".join(f"{k} {cell(v)}" for k, v in x.facts.items()) + "."))
    if x.counterfactuals:
        out.append(counterfactual_table(x, result.counterfactual_meanings, console))
    out += [Text(line) for line in (*where_saving_comes_from(x, result.request.scenario.review), *gap_lines(result.gaps),
                                    *((result.setting_note + ".",) if result.setting_note else ()))]
    out.append(Text("Sources: " + "; ".join(f"{k}: {v}" for k, v in x.sources.items())))
    if result.takeaway:
        out.append(Text(f"In short: {result.takeaway}"))
    return out
