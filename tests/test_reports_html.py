"""The HTML report: self-contained, deterministic, atomic, complete; files recognised by content."""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs
from typer.testing import CliRunner

from specagent.reports import html as H
from specagent.reports import static
from specagent.cli.report import app
from specagent.reports.data import PHASE_KEYS, ReportInputError, deployments, load_results
from specagent.simulator.run import predict
from specagent.simulator.scenario import Scenario
from specagent.traces import load_trajectories

STRATS = ["strongonly", "weakonly", "specagent"]


@pytest.fixture(scope="module")
def comparison():
    trajs = load_trajectories("traces/data/tau2_airline.jsonl")[:5]
    return predict(Scenario(strategies=tuple(STRATS)), trajs, workload="tau2-airline (5)")


def _leaves(d, out):
    for v in d.values():
        if isinstance(v, dict):
            _leaves(v, out)
        else:
            out.append(v)
    return out


def test_report_is_self_contained_and_shows_every_assumption(comparison, tmp_path):
    res = H.write_report(comparison, tmp_path / "r.html")
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
    for leaf in _leaves(comparison.assumptions, []):
        assert _h.escape(str(leaf), quote=True) in text or _h.escape(json.dumps(leaf), quote=True) in text, leaf
    assert "Figures not shown" in text


def test_report_is_deterministic_and_written_atomically(comparison, tmp_path, monkeypatch):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    H.write_report(comparison, a)
    H.write_report(comparison, b)
    assert a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]  # no temp files left
    before = a.read_bytes()

    def boom(*_a, **_k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(H, "render_html", boom)
    with pytest.raises(RuntimeError):
        H.write_report(comparison, a)
    assert a.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]


def test_optional_tables_add_figures(comparison, tmp_path):
    extra = {
        "calibration": pd.DataFrame({"point": ["p1", "p2"], "predicted_s": [1.0, 2.0], "measured_s": [1.1, 1.9]}),
        "plan": pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [10.0, 6.0], "gpus": [8, 5]}),
        "balance": pd.DataFrame({"hardware": "H20", "strong_mean_decode_batch": [1, 8, 64], "time_saving": [0.5, 0.3, -0.1],
                                 "memory_saving": [0.6, 0.4, 0.1]}),
    }
    res = H.write_report(comparison, tmp_path / "r.html", extra=extra)
    assert res.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5", "fig6", "fig7"]
    assert "from the fleet study" in res.figures[[f.key for f in res.figures].index("fig4")].figure.layout.title.text
    with pytest.raises(ValueError, match="unknown extra"):
        H.write_report(comparison, tmp_path / "x.html", extra={"plans": extra["plan"]})
    with pytest.raises(ReportInputError, match="usd_per_hour"):
        H.write_report(comparison, tmp_path / "x.html", extra={"plan": extra["plan"].drop(columns="usd_per_hour")})


def test_images_without_a_browser_still_write_the_html(comparison, tmp_path, monkeypatch):
    monkeypatch.setattr(static, "find_browser", lambda: None)
    res = H.write_report(comparison, tmp_path / "r.html", images=True)
    assert (tmp_path / "r.html").exists()
    assert not res.images.ok and "no Chrome/Chromium found" in res.images.message
    assert "r_figures/ where a Chrome/Chromium is installed" in (tmp_path / "r.html").read_text(encoding="utf-8")


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


def test_a_figure_kaleido_fails_to_render_is_a_warning_and_leaves_no_temp_files(comparison, tmp_path, monkeypatch):
    import plotly.io as pio
    monkeypatch.setattr(static, "find_browser", lambda: "/bin/true")
    monkeypatch.setattr(pio, "write_images", _fake_kaleido(drop="fig1.png"))
    res = H.write_report(comparison, tmp_path / "r.html", images=True)
    assert (tmp_path / "r.html").stat().st_size > 100_000  # the report is whole
    assert res.images.failed == ["fig1.png"] and "not rendered by kaleido (fig1.png)" in res.images.message
    names = sorted(p.name for p in (tmp_path / "r_figures").iterdir())
    assert "fig1.png" not in names and "fig1.svg" in names and not [n for n in names if n.startswith(".")]


def test_concurrent_reports_each_whole_with_no_temp_files(comparison, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    import plotly.io as pio
    monkeypatch.setattr(static, "find_browser", lambda: "/bin/true")
    monkeypatch.setattr(pio, "write_images", _fake_kaleido(drop="fig2.svg"))
    with ThreadPoolExecutor(4) as ex:  # four reports into the same folder at once, twice each
        results = list(ex.map(lambda i: H.write_report(comparison, tmp_path / f"r{i % 4}.html", images=True), range(8)))
    assert all(r.images.failed == ["fig2.svg"] for r in results)
    for i in range(4):
        assert (tmp_path / f"r{i}.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert not [p for p in tmp_path.rglob(".*")], sorted(str(p) for p in tmp_path.rglob(".*"))


def _predict_files(c, d: Path) -> Path:
    """The files `specagent predict` writes (same layout as specagent/cli/simulate.py)."""
    d.mkdir(parents=True, exist_ok=True)
    c.per_trajectory.to_parquet(d / "per_trajectory.parquet")
    doc = {"summary": c.summary.reset_index().to_dict(orient="records"),
           "phase_time": c.phase_time.reset_index().to_dict(orient="records"),
           "phase_bytes": c.phase_bytes.reset_index().to_dict(orient="records"),
           "phase_flops": c.phase_flops.reset_index().to_dict(orient="records"),
           "assumptions": c.assumptions, "scenario": c.scenario.to_dict()}
    (d / "summary.json").write_text(json.dumps(doc, default=str))
    return d / "summary.json"


def test_predict_files_round_trip(comparison, tmp_path):
    p = _predict_files(comparison, tmp_path / "pred")
    data = load_results([p, tmp_path / "pred" / "per_trajectory.parquet"])
    assert len(data.runs) == 1  # the Parquet beside the summary is the same run, not a second one
    run = data.runs[0]
    assert run.per_trajectory is not None and len(run.per_trajectory) == 15
    pd.testing.assert_series_equal(run.summary["total_bytes_read_rel"], comparison.summary["total_bytes_read_rel"], check_names=False)
    res = H.write_report(data, tmp_path / "r.html")
    assert res.included == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5"]  # deployments from the scenario the summary carries


def test_per_trajectory_alone_rebuilds_the_summary(comparison, tmp_path):
    p = tmp_path / "rows.parquet"
    comparison.per_trajectory.to_parquet(p)
    run = load_results([p]).runs[0]
    assert run.summary.loc["specagent", "strong_bytes_read_rel"] == pytest.approx(comparison.summary.loc["specagent", "strong_bytes_read_rel"])
    assert "no assumptions file" in run.assumptions["note"]


def test_several_workloads_in_one_report(comparison, tmp_path):
    trajs = load_trajectories("traces/data/tau2_airline.jsonl")[5:8]
    other = predict(Scenario(strategies=tuple(STRATS)), trajs, workload="other (3)")
    res = H.write_report([comparison, other], tmp_path / "r.html")
    assert "fig3_1" in res.included and "fig3_2" in res.included
    assert res.figures[0].key == "fig_cost" and "further workloads are in the bottom-line table" in res.figures[0].caption
    x = next(f for f in res.figures if f.key == "fig1").figure.data[0].x
    assert list(x[0]) == ["tau2-airline (5)"] * 3 + ["other (3)"] * 3  # grouped by workload


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


def test_deployments_come_from_the_scenario_a_summary_carries(tmp_path):
    """A summary JSON's scenario gives the report its deployments; one without a scenario gives none (no parsing)."""
    sc = Scenario(strong=dataclasses.replace(Scenario().strong, hardware="h200", gpus=4), weight_mode="active")
    comp = predict(sc, load_trajectories("traces/data/tau2_airline.jsonl")[:3])
    doc = {"summary": comp.summary.reset_index().to_dict(orient="records"), "assumptions": comp.assumptions,
           "scenario": comp.scenario.to_dict()}
    for key in PHASE_KEYS:
        doc[key] = getattr(comp, key).reset_index().to_dict(orient="records")
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc, default=str))
    weak, strong, mode = deployments(load_results([p]))
    assert (strong.hardware.id, strong.gpus, strong.weight_dtype, mode) == ("h200_sxm", 4, "fp8", "active")
    assert strong == comp.setting.strong and weak == comp.setting.weak
    del doc["scenario"]
    p.write_text(json.dumps(doc, default=str))
    assert deployments(load_results([p])) == (None, None, "active")


def test_cli_writes_report_and_reports_errors(comparison, tmp_path):
    p = _predict_files(comparison, tmp_path / "pred")
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


def test_balance_study_columns_are_accepted(comparison, tmp_path):
    from specagent.reports.data import balance_table

    study = pd.DataFrame({"hardware": ["h20", "h20"], "rate": [0.1, 1.0], "strongonly_decode_batch": [1.5, 40.0],
                          "strong_time_saving": [0.6, -0.05], "strong_bytes_saving": [0.9, 0.5], "balance_batch": [37.0, 37.0]})
    t = balance_table(study)
    assert list(t["strong_mean_decode_batch"]) == [1.5, 40.0] and list(t["memory_saving"]) == [0.9, 0.5]
    p = tmp_path / "study.parquet"
    study.to_parquet(p)
    res = H.write_report([comparison, p], tmp_path / "r.html")
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
    entries, _ = H.build_figures(data)
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
    assert "specagent vs strongonly:" in body and "0.923× = 92.3% of Strong-only" in body


def test_plan_section_is_the_curve_table_with_the_rest_collapsed(comparison, tmp_path):
    src = "vLLM default on NVIDIA H20: a long scheduler source sentence"
    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"], "rate": [2.0, 2.0], "usd_per_hour": [33.38, 11.47],
                         "usd_per_task": [0.0049, 0.0017], "gpus": [32, 11], "strong_gpu": ["h20", "h20"], "weak_gpu": ["h20", "h20"],
                         "strong_replicas": [4, 1], "strong_gpus_per_replica": [8, 8], "weak_replicas": [0, 3],
                         "weak_gpus_per_replica": [1, 1], "strong_bound_replicas": [1, 1], "slo_value_s": [260.0, 241.0],
                         "slo_ci_low_s": [246.7, 221.7], "slo_ci_high_s": [273.4, 260.3], "strong_scheduler_source": [src, src]})
    text = H.write_report(comparison, tmp_path / "r.html", extra={"plan": plan}).path.read_text(encoding="utf-8")
    sec = text[text.index('<h2 id="plan">'):]
    visible = sec[:sec.index("<details>")]
    for cell in ("sized by", "3 W×1 + 1 S×8", "$11.47", "$0.0017", "241 [222-260]", "Strong: SLO (throughput alone: 1)", "Strong: throughput"):
        assert cell in visible, cell
    assert "strong_scheduler_source" not in sec and sec.count(src) == 1  # said once, in the details
