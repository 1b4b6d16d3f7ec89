"""The HTML report: self-contained, deterministic, atomic, complete; files recognised by content; it reads the predict
job's result and prices nothing (issue #50), in the terminal's words (issue #51)."""

from __future__ import annotations

import ast
import html
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from plotly.offline import get_plotlyjs
from typer.testing import CliRunner

from specagent.reports import html as H
from specagent.reports import static
from specagent.cli.report import app
from specagent.reports.data import ReportInputError, load_results, roofline_profile
from specagent.reports.published import fmt_interval, verdict
from specagent.simulator.jobs.predict import PredictRequest, run
from specagent.simulator.scenario import Scenario
from specagent.traces import load_trajectories

STRATS = ("strongonly", "weakonly", "specagent")


def _predict(trajs, name: str, **fields):
    return run(PredictRequest(Scenario(strategies=STRATS), **fields), workload=(trajs, "traces/data/tau2_airline.jsonl", name))


@pytest.fixture(scope="module")
def result():
    return _predict(load_trajectories("traces/data/tau2_airline.jsonl")[:5], "tau2-airline (5)")


def _leaves(d, out):
    for v in d.values():
        if isinstance(v, dict):
            _leaves(v, out)
        else:
            out.append(v)
    return out


def test_report_is_self_contained_and_shows_every_assumption(result, tmp_path):
    res = H.write_report(result, tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    js = get_plotlyjs()
    assert text.count(js) == 1  # plotly.js embedded exactly once
    rest = text.replace(js, "")  # (the library itself mentions its CDN for maps; the browser test checks no request leaves)
    assert "<script src" not in rest and "cdn.plot.ly" not in rest and "https://" not in rest
    assert res.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5"]
    assert set(res.omitted) == {"fig6", "fig7", "fig8"} and "calibration" in res.omitted["fig6"]
    for key in res.included:
        assert f'data-figure="{key}"' in text
    import html as _h
    for leaf in _leaves(json.loads(json.dumps(result.comparison.assumptions, default=str)), []):
        assert _h.escape(str(leaf), quote=True) in text or _h.escape(json.dumps(leaf), quote=True) in text, leaf
    assert "Figures not shown" in text


def test_report_is_deterministic_and_written_atomically(result, tmp_path, monkeypatch):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    H.write_report(result, a)
    H.write_report(result, b)
    assert a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]  # no temp files left
    before = a.read_bytes()

    def boom(*_a, **_k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(H, "render_html", boom)
    with pytest.raises(RuntimeError):
        H.write_report(result, a)
    assert a.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]


def test_optional_tables_add_figures(result, tmp_path):
    extra = {
        "calibration": pd.DataFrame({"point": ["p1", "p2"], "predicted_s": [1.0, 2.0], "measured_s": [1.1, 1.9]}),
        "plan": pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [10.0, 6.0], "gpus": [8, 5]}),
        "balance": pd.DataFrame({"hardware": "H20", "strong_mean_decode_batch": [1, 8, 64], "time_saving": [0.5, 0.3, -0.1],
                                 "memory_saving": [0.6, 0.4, 0.1]}),
    }
    res = H.write_report(result, tmp_path / "r.html", extra=extra)
    assert res.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5", "fig6", "fig7"]
    assert "from the fleet study" in res.figures[[f.key for f in res.figures].index("fig4")].figure.layout.title.text
    with pytest.raises(ValueError, match="unknown extra"):
        H.write_report(result, tmp_path / "x.html", extra={"plans": extra["plan"]})
    with pytest.raises(ReportInputError, match="usd_per_hour"):
        H.write_report(result, tmp_path / "x.html", extra={"plan": extra["plan"].drop(columns="usd_per_hour")})


def test_images_without_a_browser_still_write_the_html(result, tmp_path, monkeypatch):
    monkeypatch.setattr(static, "find_browser", lambda: None)
    res = H.write_report(result, tmp_path / "r.html", images=True)
    assert (tmp_path / "r.html").exists()
    assert not res.images.ok and "no Chrome/Chromium found" in res.images.message
    # the page names both things the copies need (a machine with Chromium and no kaleido was told "no Chrome")
    assert html.escape("r_figures/, named by each figure's anchor (fig1, fig_cost, …), where the kaleido package and a "
                       "Chrome/Chromium are both installed", quote=True) in (tmp_path / "r.html").read_text(encoding="utf-8")


def _fake_kaleido(drop: str | None = None):
    """pio.write_images as kaleido v1 behaves: it claims every file, and deletes one whose render failed, returning
    the error rather than raising it (the intermittent `.fig1.png.<hash>.png: No such file or directory`)."""
    def write_images(figs, paths, **kw):
        for p in paths:
            Path(p).write_bytes(b"\x89PNG fake")
        for p in paths:
            if drop and Path(p).name.startswith(f".{drop}."):
                Path(p).unlink()
    return write_images


def test_a_figure_kaleido_fails_to_render_is_a_warning_and_leaves_no_temp_files(result, tmp_path, monkeypatch):
    import plotly.io as pio
    monkeypatch.setattr(static, "find_browser", lambda: "/bin/true")
    monkeypatch.setattr(pio, "write_images", _fake_kaleido(drop="fig1.png"))
    res = H.write_report(result, tmp_path / "r.html", images=True)
    assert (tmp_path / "r.html").stat().st_size > 100_000  # the report is whole
    assert res.images.failed == ["fig1.png"] and "not rendered by kaleido (fig1.png)" in res.images.message
    names = sorted(p.name for p in (tmp_path / "r_figures").iterdir())
    assert "fig1.png" not in names and "fig1.svg" in names and not [n for n in names if n.startswith(".")]


def test_concurrent_reports_each_whole_with_no_temp_files(result, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    import plotly.io as pio
    monkeypatch.setattr(static, "find_browser", lambda: "/bin/true")
    monkeypatch.setattr(pio, "write_images", _fake_kaleido(drop="fig2.svg"))
    before = os.environ.get("BROWSER_PATH")
    with ThreadPoolExecutor(4) as ex:  # four reports into the same folder at once, twice each
        results = list(ex.map(lambda i: H.write_report(result, tmp_path / f"r{i % 4}.html", images=True), range(8)))
    assert os.environ.get("BROWSER_PATH") == before  # each export's browser path restored, not another thread's left
    assert all(r.images.failed == ["fig2.svg"] for r in results)
    for i in range(4):
        assert (tmp_path / f"r{i}.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert not [p for p in tmp_path.rglob(".*")], sorted(str(p) for p in tmp_path.rglob(".*"))


def _predict_files(r, d: Path, drop: tuple[str, ...] = ()) -> Path:
    """The files `specagent predict` writes (the job's own `write`), less the fields in `drop` (a summary written
    before they were stored)."""
    r.write(d)
    if drop:
        doc = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        (d / "summary.json").write_text(json.dumps({k: v for k, v in doc.items() if k not in drop}), encoding="utf-8")
    return d / "summary.json"


def _body(text: str) -> str:
    return text[text.index("<body>"):]


def test_a_result_in_memory_and_its_summary_json_give_the_same_report(result, tmp_path):
    p = _predict_files(result, tmp_path / "pred")
    data = load_results([p, tmp_path / "pred" / "per_trajectory.parquet"])
    assert len(data.runs) == 1  # the Parquet beside the summary is the same run, not a second one
    run_ = data.runs[0]
    assert run_.per_trajectory is not None and len(run_.per_trajectory) == 15
    pd.testing.assert_series_equal(run_.summary["total_bytes_read_rel"], result.comparison.summary["total_bytes_read_rel"],
                                   check_names=False)
    from_file = H.write_report(data, tmp_path / "f.html")
    in_memory = H.write_report(result, tmp_path / "m.html")
    assert from_file.included == in_memory.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5"]
    a, b = (x.path.read_text(encoding="utf-8") for x in (from_file, in_memory))
    assert a.replace(str(p), "&lt;memory&gt;") == b  # one path to the page: only "results from" names where it came from
    assert H.write_report(result.to_dict() | {"inputs": json.loads(p.read_text())["inputs"]}, tmp_path / "d.html").path.read_text(
        encoding="utf-8") == b  # the stored dict too


def test_a_summary_written_before_the_views_says_rerun_and_recomputes_nothing(result, tmp_path):
    """Figures drawn from what the job stores (the explain decomposition, figure 4's curve, figure 5's derates, the
    bottom line) are listed as not shown, with the command that stores them: the report never prices them itself."""
    old = _predict_files(result, tmp_path / "old", drop=("views",))
    res = H.write_report([old], tmp_path / "r.html")
    assert res.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig3"]
    for key in ("fig_explain", "fig4", "fig5"):
        assert res.omitted[key].endswith(f"rerun `specagent predict` ({old} predates it; the report never recomputes it)")
    text = res.path.read_text(encoding="utf-8")
    assert 'id="explain"' not in text and "rerun `specagent predict`" in text
    bare = {k: v for k, v in result.to_dict().items() if k != "views"}  # a dict given in memory says what it lacks
    assert "the result given carries none" in H.write_report(bare, tmp_path / "b.html").omitted["fig_explain"]
    older = _predict_files(result, tmp_path / "older", drop=("views", "bottom_line"))
    res = H.write_report([older], tmp_path / "r2.html")
    assert "fig_cost" in res.omitted and "the bottom line per task: rerun `specagent predict`" in res.omitted["fig_cost"]
    body = _body(res.path.read_text(encoding="utf-8"))
    sec = body[body.index('id="bottom-line"'):body.index('id="setting"')]
    assert "Not shown: the bottom line per task: rerun" in sec and "<table" not in sec


def test_per_trajectory_alone_rebuilds_the_summary_and_shows_no_priced_figure(result, tmp_path):
    p = tmp_path / "rows.parquet"
    result.comparison.per_trajectory.to_parquet(p)
    run_ = load_results([p]).runs[0]
    assert run_.summary.loc["specagent", "strong_bytes_read_rel"] == pytest.approx(
        result.comparison.summary.loc["specagent", "strong_bytes_read_rel"])
    assert "no assumptions file" in run_.assumptions["note"]
    res = H.write_report([p], tmp_path / "r.html")
    assert set(res.omitted) >= {"fig_cost", "fig_explain", "fig4", "fig5"}
    assert "per-trajectory rows alone carry none" in res.omitted["fig5"]


def test_several_workloads_in_one_report(result, tmp_path):
    other = _predict(load_trajectories("traces/data/tau2_airline.jsonl")[5:8], "other (3)")
    res = H.write_report([result, other], tmp_path / "r.html")
    assert "fig3_1" in res.included and "fig3_2" in res.included
    assert res.figures[0].key == "fig_cost" and "further workloads are in the bottom-line table" in res.figures[0].caption
    ticks = list(next(f for f in res.figures if f.key == "fig1").figure.layout.yaxis.ticktext)
    assert [t.split("<i>")[1][:-4] for t in ticks] == ["tau2-airline (5)"] * 3 + ["other (3)"] * 3  # each row names its workload


def test_unknown_and_bad_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ReportInputError, match=r"bad\.csv.*not a known kind.*usd_per_hour"):
        load_results([bad])
    broken = tmp_path / "broken.json"
    broken.write_text('{"summary": [\n')
    with pytest.raises(ReportInputError, match=r"broken\.json: not valid JSON \(line 2"):
        load_results([broken])
    with pytest.raises(ReportInputError, match="no such results file"):
        load_results([tmp_path / "missing.json"])


def test_the_roofline_is_drawn_on_the_gpu_profile_the_run_stored(result, tmp_path):
    """Figure 5's axes (the GPU's peak FLOP/s and bandwidth) come from the copy of the profile stored with the run; a
    damaged copy is an error naming it; a run without copies reads the profile on disk and says so."""
    p = _predict_files(result, tmp_path / "pred")
    data = load_results([p])
    hw = roofline_profile(data)
    assert hw.id == data.runs[0].views["roofline"]["hardware"] == "h20" and not data.notes
    doc = json.loads(p.read_text(encoding="utf-8"))
    doc["inputs"]["strong"]["hardware"]["text"] += "\n# edited"
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ReportInputError, match=r"inputs.strong.hardware': the stored copy does not match its sha256"):
        roofline_profile(load_results([p]))
    del doc["inputs"]
    p.write_text(json.dumps(doc), encoding="utf-8")
    data = load_results([p])
    assert roofline_profile(data).id == "h20" and "stores no copy of its GPU profile" in data.notes[0]


def test_cli_writes_report_and_reports_errors(result, tmp_path):
    p = _predict_files(result, tmp_path / "pred")
    plan = tmp_path / "plan.csv"
    pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [10.0, 6.0], "gpus": [8, 5]}).to_csv(plan, index=False)
    out = tmp_path / "out" / "report.html"
    r = CliRunner().invoke(app, [str(p), str(plan), "-o", str(out), "--no-images", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["figures"] == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5", "fig7"] and "fig6" in doc["omitted"]
    assert out.exists() and doc["images_message"] == "not requested"
    r = CliRunner().invoke(app, [str(tmp_path / "nope.json"), "-o", str(out)])
    assert r.exit_code == 2 and "no such results file" in " ".join(r.output.split())  # the console wraps long paths' lines


def test_balance_study_columns_are_accepted(result, tmp_path):
    from specagent.reports.data import balance_table

    study = pd.DataFrame({"hardware": ["h20", "h20"], "rate": [0.1, 1.0], "strongonly_decode_batch": [1.5, 40.0],
                          "strong_time_saving": [0.6, -0.05], "strong_bytes_saving": [0.9, 0.5], "balance_batch": [37.0, 37.0]})
    t = balance_table(study)
    assert list(t["strong_mean_decode_batch"]) == [1.5, 40.0] and list(t["memory_saving"]) == [0.9, 0.5]
    p = tmp_path / "study.parquet"
    study.to_parquet(p)
    res = H.write_report([result, p], tmp_path / "r.html")
    fig4 = res.figures[[f.key for f in res.figures].index("fig4")].figure
    assert "fleet study" in fig4.layout.title.text
    assert 37.0 in [s.x0 for s in fig4.layout.shapes]


def test_report_draws_latency_validation_rows_as_figure_8(tmp_path):
    """`latency validate --rows` output is recognised by its columns: figure 8 (one trace per GPU) and the MAPE per metric."""
    rows = pd.DataFrame({"row_id": ["a", "b", "c"], "metric": ["tpot", "tpot", "ttft"], "gpu": ["h100_sxm", "h20", "h20"],
                         "engine": ["vllm"] * 3, "concurrency": [1.0, 8.0, 8.0],
                         "measured": [10.0, 20.0, 100.0], "predicted": [12.0, 15.0, 150.0]})
    path = tmp_path / "rows.csv"
    rows.to_csv(path, index=False)
    data = load_results([path])
    assert data.latency is not None and len(data.latency) == 3
    entries = H.build_figures(data)
    fig8 = next(e for e in entries if e.key == "fig8")
    assert fig8.figure is not None
    by_gpu = {t.name: list(t.x) for t in fig8.figure.data if t.name in ("h100_sxm", "h20")}
    assert by_gpu == {"h100_sxm": [10.0], "h20": [20.0, 100.0]}
    html = H.render_html(data, entries, "")
    # MAPE per metric: tpot (20% + 25%) / 2 = 22.5%, ttft 50%
    table = html[html.index('id="latency"'):]
    assert "0.225" in table and "0.5" in table
    bad = rows.assign(measured=[10.0, -1.0, 100.0])
    bad.to_csv(path, index=False)
    with pytest.raises(ReportInputError, match=r"rows.csv: latency validation row 2, 'measured'"):
        load_results([path])


def test_report_opens_on_the_bottom_line_with_the_prices_the_prediction_used(tmp_path):
    """The report's first section: per task, for every strategy, recomputed by hand from summary.json and the scenario."""
    from typer.testing import CliRunner

    from specagent.cli import app

    out = tmp_path / "p"
    r = CliRunner().invoke(app, ["predict", "--strategies", "specagent", "-o", str(out), "--price", "h20=3", "--quiet"])
    assert r.exit_code == 0, r.output
    d = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    res = H.write_report([out / "summary.json"], tmp_path / "r.html")
    text = res.path.read_text(encoding="utf-8")
    body = text[text.index("<body>"):]
    assert body.index('id="bottom-line"') < body.index('id="setting"') < body.index('id="summary"')
    so = {row["strategy"]: row for row in d["summary"]}["strongonly"]
    usd = (so["strong_model_time_s"] * 8 + so["weak_model_time_s"]) / so["trajectories"] * 3.0 / 3600
    assert f"${usd:.3g}" in body and "user-supplied (h20=3.0)" in body
    assert "specagent vs strongonly:" in body
    # how to read a ratio, on the run's own figure (it once printed a fixed example, 0.923, above a table of 0.877)
    wall = {row["strategy"]: row for row in d["summary"]}["specagent"]["wall_time_s_rel"]
    assert f"specagent wall {wall:.3f} = {100 * wall:.1f}% of Strong-only" in body
    assert "0.923" not in body and "since issue" not in body
    # the waits' share of the wall is this run's (it once quoted another trace's 0.489)
    assert f"({so['env_wall_time_s'] / so['wall_time_s']:.1%}); no strategy changes them" in body
    # one sign convention: a change against Strong-only (negative: less), its range the stored saving's, negated
    sav = {(x["strategy"], x["column"]): x for x in d["intervals"]["bottom_line"]}[("specagent", "time saving %")]
    assert f"{-sav['point']:+.1f}% [{-sav['high']:+.1f}% to {-sav['low']:+.1f}%]" in body
    shown = re.sub(r"<[^>]+>", "", body)  # as read: the table keeps a range on one line with a <span>
    assert shown.count(f"{-sav['point']:+.1f}% [{-sav['high']:+.1f}% to {-sav['low']:+.1f}%]") == 2  # headline and table


def test_plan_section_is_the_curve_table_with_the_rest_collapsed(result, tmp_path):
    src = "vLLM default on NVIDIA H20: a long scheduler source sentence"
    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"], "rate": [2.0, 2.0], "usd_per_hour": [33.38, 11.47],
                         "usd_per_task": [0.0049, 0.0017], "gpus": [32, 11], "strong_gpu": ["h20", "h20"], "weak_gpu": ["h20", "h20"],
                         "strong_replicas": [4, 1], "strong_gpus_per_replica": [8, 8], "weak_replicas": [0, 3],
                         "weak_gpus_per_replica": [1, 1], "strong_bound_replicas": [1, 1], "slo_value_s": [260.0, 241.0],
                         "slo_ci_low_s": [246.7, 221.7], "slo_ci_high_s": [273.4, 260.3], "strong_scheduler_source": [src, src]})
    text = H.write_report(result, tmp_path / "r.html", extra={"plan": plan}).path.read_text(encoding="utf-8")
    sec = text[text.index('<h2 id="plan">'):]
    visible = re.sub(r"<[^>]+>", "", sec[:sec.index("<details>")])
    for cell in ("sized by", "3 W×1 + 1 S×8", "$11.47", "$0.0017", "241 [222–260]", "Strong: SLO (throughput alone: 1)", "Strong: throughput"):
        assert cell in visible, cell
    assert "strong_scheduler_source" not in sec and sec.count(src) == 1  # said once, in the details


def test_the_nav_links_every_section_the_page_has(result, tmp_path):
    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [10.0, 6.0], "gpus": [8, 5]})
    text = H.write_report(result, tmp_path / "r.html", extra={"plan": plan}).path.read_text(encoding="utf-8")
    nav = re.search(r"<nav>(.*?)</nav>", text).group(1)
    assert re.findall(r'href="#([^"]+)"', nav) == re.findall(r'<h2 id="([^"]+)"', text)
    assert "#plan" in nav and "#explain" in nav


def _reports_imports() -> dict[str, set[str]]:
    root = Path(__file__).resolve().parent.parent / "specagent" / "reports"
    out = {}
    for f in sorted(root.rglob("*.py")):  # screens/ too
        names = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        out[str(f.relative_to(root))] = names
    return out


def test_reports_price_nothing():
    """Issue #50: reports read results. No module of specagent/reports imports the cost model, the simulator's drivers,
    its explain or its pricing of the bottom line (constants of a job's module, like its column names, are data)."""
    drivers = ("specagent.simulator.run", "specagent.simulator.explain", "specagent.simulator.uncertainty",
               "specagent.simulator.planner", "specagent.simulator.fleet", "specagent.simulator.capacity",
               "specagent.simulator.strategies", "specagent.simulator.pricing.analytic", "specagent.simulator.pricing.des")
    priced = {f"specagent.simulator.jobs.bottom_line.{n}" for n in ("bottom_line", "pools", "pools_of", "bottom_line_draws",
                                                                     "bottom_line_intervals", "verdict")}
    bad = {f: sorted(n for n in names if n.startswith("specagent.costmodel") or n.startswith(drivers) or n in priced)
           for f, names in _reports_imports().items()}
    assert {f: b for f, b in bad.items() if b} == {}


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """The first table's header and rows as a reader sees them (tags dropped, entities read)."""
    t = text[text.index("<table"):text.index("</table>")]
    cell = lambda c: html.unescape(re.sub(r"<[^>]+>", "", c)).strip()  # noqa: E731
    head = [cell(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", t)]
    rows = [[cell(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", t)]
    return head, [r for r in rows if r]


def test_the_published_figures_table_is_the_terminals():
    """Issue #51: figure, strategy, published, predicted [interval] and the verdict, from the stored intervals, with the
    terminal's own functions (a fitted figure outside its range reads 'outside', never 'yes: a calibration target')."""
    from specagent.reports.screens import ranges

    assert ranges.published_rows is H.published_rows and ranges.fmt_interval is fmt_interval  # one vocabulary, one implementation
    iv = {"level": 0.9, "draws": 10, "includes": "x", "source": "s", "widened": [{"strategy": "specagent_hold_replies", "metric": "strong_calls_rel"}],
          "intervals": [{"strategy": "specagent", "metric": "wall_time_s_rel", "point": 0.877, "low": 0.70, "high": 1.01},
                        {"strategy": "specagent", "metric": "total_bytes_read_rel", "point": 0.547, "low": 0.43, "high": 0.56},
                        {"strategy": "specagent_hold_replies", "metric": "strong_calls_rel", "point": 5.197, "low": 5.197, "high": 5.81},
                        {"strategy": "specagent_every_chunk", "metric": "wall_time_s_rel", "point": 1.329, "low": 1.11, "high": 1.61},
                        {"strategy": "specagent_hold_replies", "metric": "wall_time_s_rel", "point": 1.262, "low": 1.08, "high": 1.52}],
          "published": [{"figure_id": "tau2_wall_ratio", "strategy": "specagent", "metric": "wall_time_s_rel", "published": "0.41–0.54",
                         "low": 0.41, "high": 0.54, "fitted": True, "source": "Wang et al., arXiv:2610.21463",
                         "figure": "tau2-bench: scored by the calibration since issue 32"},
                        {"figure_id": "tau2_memory_ratio", "strategy": "specagent", "metric": "total_bytes_read_rel",
                         "published": "0.43–0.57", "low": 0.43, "high": 0.57, "fitted": True, "source": "Wang et al."},
                        {"figure_id": "tau2_calls_hold", "strategy": "specagent_hold_replies", "metric": "strong_calls_rel",
                         "published": "≥3.00", "low": 3.0, "high": None, "fitted": False, "source": "Wang et al."},
                        {"figure_id": "tau2_wall_rises_chunk", "strategy": "specagent_every_chunk", "metric": "wall_time_s_rel",
                         "published": "≥1.00", "low": 1.0, "high": None, "fitted": False, "source": "Wang et al."},
                        {"figure_id": "tau2_wall_rises_hold", "strategy": "specagent_hold_replies", "metric": "wall_time_s_rel",
                         "published": "≥1.00", "low": 1.0, "high": None, "fitted": False, "source": "Wang et al."},
                        {"figure_id": "tau2_not_run", "strategy": "router", "metric": "wall_time_s_rel", "published": "≤1.00",
                         "low": None, "high": 1.0, "fitted": False, "source": "Wang et al."}]}
    text = H.published_html(iv)
    head, rows = _table(text)
    assert head == ["figure", "strategy", "ratio", "published", "predicted [interval]", "verdict"]
    got = {r[0]: (r[1], r[4], r[5]) for r in rows}
    assert got == {"tau2_wall_ratio": ("specagent", "0.877 [0.70–1.01]", "outside (interval too)"),
                   "tau2_memory_ratio": ("specagent", "0.547 [0.43–0.56]", "inside (fitted: a calibration target)"),
                   "tau2_calls_hold": ("specagent_hold_replies", "5.197 [5.197–5.81]*", "inside"),
                   "tau2_wall_rises_chunk": ("specagent_every_chunk", "1.329 [1.11–1.61]", "inside"),
                   "tau2_wall_rises_hold": ("specagent_hold_replies", "1.262 [1.08–1.52]", "inside"),
                   "tau2_not_run": ("router", "not run", "-")}
    assert "since issue" not in text and "yes: a calibration target" not in text
    assert "stretched to reach the point estimate" in text and "'outside (interval too)': the whole interval misses it" in html.unescape(text)
    assert verdict(1.30, 1.87, 0.928, 0.87, 0.93, fitted=True) == "outside (interval too)"
    assert verdict(0.41, 0.54, 0.60, 0.50, 0.70) == "outside; interval overlaps"
    assert verdict(None, 0.5, 0.4, 0.3, 0.6) == "inside"


@given(st.floats(0, 100), st.floats(0, 5), st.floats(0, 5))
def test_a_printed_point_lies_inside_its_printed_interval(point, below, above):
    """'5.197 [5.20–5.81]' read as a point outside its own interval: a bound that rounds past the point keeps more digits."""
    low, high = point - below, point + above
    text = fmt_interval(point, low, high)
    p, lo, hi = re.fullmatch(r"(\S+) \[(\S+)–(\S+)\]", text).groups()
    assert float(lo) <= float(p) <= float(hi), text
    assert abs(float(lo) - low) <= 0.005 + 1e-9 and abs(float(hi) - high) <= 0.005 + 1e-9
