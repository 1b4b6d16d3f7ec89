"""What the `acceptance` commands print: `fit`'s estimates with their 95% intervals, its likelihood-ratio tests and its
goodness of fit; `calibrate`'s accepted set (counts, per-parameter ranges, each published figure at the set's point,
which figures conflict); `measure`'s table of what was measured.

Each function reads the job's result (`simulator/acceptance/fit.py`'s FitResult, `simulator/jobs/acceptance_search.py`,
`endpoints/jobs/acceptance_measure.py`) and returns renderables in print order; the commands print them. A plain string
is a line printed as rich prints a string; a `Text` one printed as it is.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from specagent.reports.screens.tables import Col, fitted, legend
from specagent.simulator.jobs.acceptance_candidates import PARAMETERS
from specagent.simulator.protocol.setting import API_VERIFY_SENDS

if TYPE_CHECKING:
    from specagent.endpoints.jobs.acceptance_measure import MeasureResult
    from specagent.simulator.acceptance.fit import FitResult
    from specagent.simulator.jobs.acceptance_candidates import CandidateSet
    from specagent.simulator.jobs.acceptance_search import AcceptanceSearchResult

# --- acceptance fit ---------------------------------------------------------------------------------------------------

#: The interval methods' short names (the table's last column; the caption's legend spells them out).
SHORT = {"profile likelihood": "profile", "Fisher information (NB2, log scale)": "Fisher NB2",
         "exact Poisson (Garwood)": "Garwood", "quasi-Poisson Fisher information": "quasi-Poisson",
         "cluster-robust by task (log scale)": "cluster-robust",
         "profile likelihood (the median task: u = 0)": "profile, median task",
         "profile likelihood; 0 tested against ½χ²₀ + ½χ²₁": "profile, boundary",
         "profile likelihood; 0 tested against ½χ²₀ + ½χ²₁ (open at 0)": "profile, boundary, open at 0"}

#: The fitted parameters and the likelihood-ratio tests, fitted to the terminal (tables.py): the interval's method
#: leaves first (the caption's legend names the methods).
PARAM_COLUMNS = (Col("parameter", "left"), Col("estimate"), Col("95% interval", "left"), Col("n"),
                 Col("interval", "left", optional=True))
TEST_COLUMNS = (Col("parameter", "left"), Col("null", "left"), Col("statistic"), Col("p"),
                Col("the data\nsupport it", "left"))


def num(x: float) -> str:
    """An estimate: four significant figures, a whole number from 1,000."""
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def fit(r: FitResult, console: Console) -> list[RenderableType]:
    """The estimates with their intervals, what sits at a range's end, what was not fitted, the tests and the
    goodness of fit."""
    rows = [[p.name, num(p.estimate), f"[{num(p.low)}, {num(p.high)}]", f"{p.n:,}", SHORT.get(p.how, p.how)]
            for p in r.params]
    out: list[RenderableType] = [fitted(
        console, PARAM_COLUMNS, rows, title=f"Acceptance model fitted to {r.data.records:,} verifications (maximum likelihood)",
        caption=legend([(s, how) for how, s in SHORT.items() if any(p.how == how for p in r.params)]))]
    out += [Text(f"note: {why}") for why in r.diagnostics.get("at_edge", {}).values()]  # an end of a range is no estimate
    if r.not_fitted:
        out.append(Text.from_markup("not fitted (the defaults stay): " + "; ".join(f"{k} ({why})" for k, why in r.not_fitted.items())))
    if r.tests:
        rows = [[name, v["null"], f"{v['statistic']:.3f}", f"{v['p_value']:.3g}", "yes" if v["supported"] else "no (p ≥ 0.05)"]
                for name, v in r.tests.items()]
        out.append(fitted(console, TEST_COLUMNS, rows, title="Likelihood-ratio tests (boundary null: ½χ²₀ + ½χ²₁)"))
        if "dependence" in r.diagnostics:
            out.append(Text.from_markup(f"dependence between verdicts found: {r.diagnostics['dependence']}"))
    if r.goodness:
        out.append(goodness_table(r.goodness))
    return out


def goodness_table(goodness: dict) -> Table:
    """Accepted-prefix lengths, observed / expected, by the kind of a segment's last step, with the χ² test."""
    g = Table(title="Goodness of fit: accepted-prefix length, observed / expected, by kind of the segment's last step",
              caption="columns 0, 1, ...: segments whose verifier kept that many drafted steps")
    width = max(len(v["observed"]) for v in goodness.values())
    g.add_column("kind")
    g.add_column("segments", justify="right")
    for m in range(width):
        g.add_column(f"{m}", justify="right")
    g.add_column("χ² (df)")
    g.add_column("p")
    for kind, v in goodness.items():
        cells = [f"{o}/{e:.0f}" for o, e in zip(v["observed"], v["expected"])] + [""] * (width - len(v["observed"]))
        g.add_row(kind, str(v["segments"]), *cells, f"{v['chi2']:.2f} ({v['df']})", f"{v['p_value']:.3g}")
    return g


# --- acceptance calibrate ---------------------------------------------------------------------------------------------


def value(v: float) -> str:
    """A simulated figure: three decimals below 100, a whole number above; "—" where there is none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def short(v: float) -> str:
    """A parameter value for the ranges table: two decimals below 10, a whole number above."""
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.0f}"


def figures_table(cal: CandidateSet, row: int, mode: str, console: Console) -> RenderableType:
    """Each published figure, its value at candidate `row`, whether it is met, and how many candidates meet it."""
    rows = []
    meets = cal.meets(mode)
    for _, r in cal.miss_table(row, mode).iterrows():
        n = f"{int(meets[r.figure].sum())} / {len(meets)}" if r.figure in meets else r.status
        scored = r.status in ("scored", "hardware")
        signed = -r.miss if scored and r.value < r.low else r.miss  # below the range: negative
        met = "—" if not scored else ("yes" if r.met else f"no ({signed:+.0%})" if math.isfinite(r.miss) else "no")
        rows.append([r.figure, r.published, value(r.value), met, n])
    cols = [Col("figure", "left"), *(Col(c) for c in ("published", "simulated", "met", "meeting it"))]
    return fitted(console, cols, rows, title=f"Published figures (Wang et al., arXiv:2610.21463) and candidate {row}")


def parameters_table(res: AcceptanceSearchResult, console: Console) -> RenderableType:
    """Each parameter's searched range, the ranges each accepted set spans, and its value at the point."""
    rows = []
    for p in PARAMETERS:
        cells = []
        for k in ("reachable", "h20", "edge"):
            r = res.ranges[k].loc[p.name]
            cells.append(f"{short(r.accepted_low)}–{short(r.accepted_high)}" if res.counts.get(k) else
                         "none" if k in res.counts else "no figures")
        r = res.ranges["reachable"].loc[p.name]
        rows.append([p.name, f"{short(r.searched_low)}–{short(r.searched_high)}", *cells,
                     short(float(res.candidates.candidates.at[res.point, p.name]))])
    cols = [Col("parameter", "left"), *(Col(c) for c in ("searched", "both", "τ² (h20)", "MCP (edge)", f"#{res.point}"))]
    return fitted(console, cols, rows, title="Parameters: searched, accepted (figures met by none set aside), the point")


def counts(res: AcceptanceSearchResult) -> list[str]:
    """How many candidates meet what; when none meets every figure, which figures conflict."""
    cal, mode, n, conflicts = res.candidates, res.mode, res.counts, res.conflicts
    out = [f"{n['all']} of {len(cal.candidates)} candidates meet every scored figure (API cost judged with verifications "
           f"sending '{mode}'; by send mode: " + ", ".join(f"{m} {int(cal.accepted(m).sum())}" for m in API_VERIFY_SENDS) + ")."]
    if n["all"] == 0:
        out.append((f"Met by no candidate: {', '.join(res.aside)}. " if res.aside else "")
                   + (f"Never met together: {'; '.join(f'{a} + {b}' for a, b in conflicts['conflicting_pairs'])}. "
                      if conflicts["conflicting_pairs"] else "")
                   + f"The best candidate ({conflicts['best_candidate']}) meets {len(conflicts['best_meets'])} of "
                   + f"{len(cal.scored)}; it misses " + ", ".join(conflicts["best_misses"]) + ".")
        if res.aside and "reachable" in n:
            out.append(f"Setting aside the figures no candidate meets: {n['reachable']} meet all the others"
                       + "".join(f"; {n[k]} meet every {label} figure" for k, label in
                                 (("h20", "τ²-Bench (h20)"), ("edge", "MCP-Atlas (edge)")) if k in n) + ".")
    if res.dropped is not None:
        at = res.points["h20_but_one"]
        out.append(f"Setting aside {res.dropped} as well (the τ²-Bench figure whose removal admits the most candidates): "
                   f"{n['h20_but_one']} meet every other τ²-Bench figure; their central point is candidate {at}, which "
                   f"gives {res.dropped} {cal.values.at[at, res.dropped]:.3f} "
                   f"(published {next(f for f in cal.scored if f.figure_id == res.dropped).range_text()}).")
    if n["all"] == 0:
        for mine, met in res.cross.items():
            ok = cal.accepted(mode, res.sets[mine])
            if ok.any():
                out.append(f"Of the {int(ok.sum())} candidates meeting every {'τ²-Bench' if mine == 'h20' else 'MCP-Atlas'} "
                           "figure, " + ", ".join(f"{k} meet {f}" for f, k in met.items()) + ".")
    return out


def search(res: AcceptanceSearchResult, console: Console) -> list[RenderableType]:
    """The accepted set: the counts, the parameters' ranges, the published figures at the point, its API cost."""
    out: list[RenderableType] = [*counts(res), parameters_table(res, console)]
    if any(p.p_off for p in PARAMETERS):
        out.append("reasoning tokens -1 = tied to the workload (the recorded reasoning of the step decided or repaired)")
    cal, row = res.candidates, res.point
    out.append(figures_table(cal, row, res.mode, console))
    if res.points.get("edge", -1) >= 0 and res.points["edge"] != row:
        out.append(f"MCP-Atlas (edge) point: candidate {res.points['edge']}")
    api_keys = [k for k in cal.values.columns if "@" in k]
    if api_keys:
        out.append(f"API cost of candidate {row} by what a verification sends: "
                   + ", ".join(f"{k.split('@')[1]} {cal.values.at[row, k]:.3f}" for k in api_keys))
    return out


# --- acceptance measure -----------------------------------------------------------------------------------------------


def measure(result: MeasureResult, console: Console) -> list[RenderableType]:
    """What was measured, what the servers did not report, and the files written."""
    s = result.summary
    return [fitted(console, (Col("measure", "left"), Col("value")), measure_rows(s, result.client),
                   title=f"acceptance measure: {s['records']} verdicts from {s['positions']} positions"),
            *(Text(f"note: {line}") for line in result.unreported),
            *(Text.from_markup(f"wrote {p}") for p in result.paths)]


def measure_rows(s: dict, stats: dict) -> list[tuple[str, str]]:
    """The measurement's rows: acceptance (overall and by kind), how segments ended, tokens, requests."""
    acc = s["step_acceptance"]
    rows = [("drafted steps accepted", f"{s['accepted_steps']} / {s['drafted_steps']}" + (f" ({acc:.1%})" if acc is not None else "")),
            ("segments fully accepted", f"{s['segments_fully_accepted']} / {s['records']}"),
            ("ended by", ", ".join(f"{k} {v}" for k, v in s["ended_by"].items()) or "-"),
            ("replacements offered / valid", f"{s['replacements_offered']} / {s['replacements_valid']}"),
            ("repair turns", str(s["repair_turns"])),
            ("skipped", f"{s['skipped']}" + (f" ({', '.join(f'{k} {v}' for k, v in s['skipped_by_reason'].items())})" if s["skipped"] else "")),
            ("verdict JSON asked via", s["response_format"])]
    for kind, v in s["acceptance_by_kind"].items():
        rows.append((f"  {kind} steps accepted", f"{v['accepted']} / {v['drafted']} ({v['rate']:.1%})"))
    for role, u in s["usage"].items():
        rows.append((f"{role} calls · tokens in / out / reasoning", f"{u['calls']} · {u['prompt_tokens']:,} / "
                     f"{u['completion_tokens']:,} / {u['reasoning_tokens']:,}"))
    truncated = {role: u["truncated_calls"] for role, u in s["usage"].items() if u.get("truncated_calls")}
    if truncated:
        rows.append(("answers cut at max_tokens", ", ".join(f"{role} {n}" for role, n in truncated.items())))
    rows.append(("requests sent / answers from cache", f"{stats['requests_sent']} / {stats['answers_from_cache']}"))
    if stats["retries"]:
        rows.append(("retries", ", ".join(f"{k} {v}" for k, v in stats["retries"].items())))
    return rows
