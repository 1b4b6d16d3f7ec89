"""The report in a real browser: every figure drawn and readable at 1280 and 800 px (no label over another or cut),
no JavaScript errors, nothing fetched; screenshots (kept under $SPECAGENT_ARTIFACTS when set).

Needs Debian's `chromium` (tools/install-browser.sh, run by `make test`) and the
`playwright` package (driving the system browser; playwright's own browser download is
not used). Skipped, with the reason, only where either cannot be had.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from specagent.reports.static import export_images, find_browser

pytestmark = pytest.mark.browser

BROWSER = find_browser()
try:
    import playwright.sync_api  # noqa: F401

    HAVE_PLAYWRIGHT = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_PLAYWRIGHT = False

needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chrome/Chromium installed (tools/install-browser.sh installs Debian's chromium as root)")
needs_playwright = pytest.mark.skipif(not HAVE_PLAYWRIGHT, reason="the playwright package is not installed (pip install playwright)")

# Illustrative tables in the documented shapes, standing in for fleet/calibration/planner output.
BALANCE = pd.DataFrame({"hardware": ["H20"] * 4 + ["H200"] * 4, "strong_mean_decode_batch": [1, 8, 32, 64] * 2,
                        "time_saving": [0.5, 0.35, 0.05, -0.1, 0.5, 0.45, 0.3, 0.2],
                        "memory_saving": [0.6, 0.5, 0.3, 0.1, 0.6, 0.55, 0.45, 0.35]})
CALIBRATION = pd.DataFrame({"point": ["b1 n1 c512", "b1 n256 c0", "b4 n1 c2048"], "predicted_s": [0.010, 0.20, 0.020],
                            "measured_s": [0.011, 0.19, 0.024]})
PLAN = pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [120.0, 70.0], "gpus": [48, 28]})


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import json

    from specagent.reports import write_report
    from specagent.simulator.jobs.predict import PredictRequest, run
    from specagent.simulator.scenario import Scenario
    from specagent.traces import load_trajectories

    d = tmp_path_factory.mktemp("report")
    (d / "success.json").write_text(json.dumps({"strongonly": 0.6, "specagent": 0.58}), encoding="utf-8")
    result = run(PredictRequest(Scenario(strategies=("strongonly", "weakonly", "specagent", "router")), success=d / "success.json"),
                 workload=(load_trajectories("traces/data/tau2_airline.jsonl")[:6], "traces/data/tau2_airline.jsonl", "tau2-airline (6)"))
    res = write_report(result, d / "report.html", extra={"balance": BALANCE, "calibration": CALIBRATION, "plan": PLAN})
    assert len(res.included) == 10
    return d / "report.html"


def _keep(paths, sub: str) -> None:
    """CI keeps the screenshots for people to look at ($SPECAGENT_ARTIFACTS)."""
    keep = os.environ.get("SPECAGENT_ARTIFACTS")
    if keep:
        (Path(keep) / sub).mkdir(parents=True, exist_ok=True)
        for p in paths:
            shutil.copy(p, Path(keep) / sub / Path(p).name)


@needs_browser
@needs_playwright
def test_every_figure_renders_in_chromium(report, tmp_path):
    from specagent.reports.browser import check_report

    shot = tmp_path / "report.png"
    res = check_report(report, screenshot=shot)
    assert res.problems == []
    assert [f["key"] for f in res.figures] == ["fig_cost", "fig1", "fig2", "fig_time", "fig_explain", "fig3", "fig4", "fig5", "fig6", "fig7"]
    assert all(f["traces"] > 0 and f["svg"] > 0 and f["drawn"] > 0 for f in res.figures)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    _keep([shot], "")


@needs_browser
@needs_playwright
@pytest.mark.parametrize("width", [1280, 800])
def test_every_label_reads_at_1280_and_800_px(report, tmp_path, width):
    """Issue #51: no label over another, over an error bar or a marker; none cut by its figure's edge or under plotly's
    toolbar; no table cut at the page's width. Measured on the boxes the browser laid out (reports.browser._LAYOUT)."""
    from specagent.reports.browser import check_report

    res = check_report(report, screenshot=tmp_path / f"report_{width}.png", figure_dir=tmp_path / "figs", width=width)
    assert res.problems == []
    assert res.unreadable == [], "\n".join(res.unreadable)
    assert len(res.figure_shots) == 10 and all(p.stat().st_size > 10_000 for p in res.figure_shots.values())
    _keep([tmp_path / f"report_{width}.png", *res.figure_shots.values()], f"report_{width}")


@needs_browser
@needs_playwright
def test_the_layout_check_catches_overlapping_cut_and_hidden_labels(tmp_path):
    """The check can fail: the faults the first-use walkthrough found, drawn on purpose, are each reported."""
    import plotly.graph_objects as go

    from specagent.reports.browser import check_report

    fig = go.Figure(go.Scatter(x=[1.0, 1.01], y=[1.0, 1.0], mode="markers+text", text=["specagent", "specagent_exact"],
                               textposition="top center", error_y=dict(type="data", array=[0.3, 0.3])))
    fig.update_layout(height=400, title="a title long enough to run under the toolbar " * 3, yaxis_title="an axis title "
                      "far too long for the height of this small plot area, so it is cut " * 2, margin=dict(t=20),
                      xaxis_range=[0, 2])  # the two points 3 px apart
    div = fig.to_html(full_html=False, include_plotlyjs=True, div_id="plot-x")
    wide = "<table><tr>" + "<td>0.123456 [0.12–0.13]</td>" * 40 + "</tr></table>"
    page = tmp_path / "bad.html"
    page.write_text(f'<html><body><p>a table</p><div class="scroll" style="overflow-x:auto">{wide}</div>'
                    f'<figure data-figure="bad">{div}</figure></body></html>', encoding="utf-8")
    res = check_report(page, width=800)
    text = "\n".join(res.unreadable)
    assert "value 'specagent' over value 'specagent_exact'" in text
    assert "over a error bar" in text and "cut by the figure's edge" in text and "under the toolbar" in text
    assert "table cut: a table:" in text


@needs_browser
@needs_playwright
def test_the_check_catches_a_broken_report(report, tmp_path):
    from plotly.offline import get_plotlyjs

    from specagent.reports.browser import check_report

    broken = tmp_path / "broken.html"
    broken.write_text(report.read_text(encoding="utf-8").replace(get_plotlyjs(), "/* plotly.js removed */"), encoding="utf-8")
    res = check_report(broken)
    assert any("plotly.js is not loaded" in p for p in res.problems)
    assert any("did not render" in p for p in res.problems)
    assert any("Plotly is not defined" in e for e in res.js_errors)


@needs_browser
def test_static_images_through_kaleido(tmp_path):
    from specagent.reports.figures import calibration_figure

    out = export_images({"fig6": calibration_figure(CALIBRATION)}, tmp_path / "figs")
    assert out.ok, out.message
    assert (tmp_path / "figs" / "fig6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "figs" / "fig6.svg").read_text(encoding="utf-8")[:2000]
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["fig6.png", "fig6.svg"]


@needs_browser
@needs_playwright
def test_figures_have_axis_titles_and_the_headline_is_on_the_first_screen(tmp_path):
    """At 1400x900: the bottom line is visible before any scrolling, and every drawn axis has a title."""
    from typer.testing import CliRunner

    from specagent.cli import app
    from specagent.reports.browser import check_report

    out = tmp_path / "p"
    r = CliRunner().invoke(app, ["predict", "-o", str(out), "--quiet", "--report", str(out / "report.html")])
    assert r.exit_code == 0, r.output
    res = check_report(out / "report.html", width=1400, height=900)
    assert res.problems == []
    assert res.headline is not None and res.headline["text"].startswith("specagent vs strongonly:")
    assert 0 <= res.headline["top"] and res.headline["bottom"] <= 900, res.headline
    assert len(res.figures) >= 6
    for f in res.figures:  # a title on the x and on the y axis of every figure (panels sharing an axis share its title)
        kinds = {t.split(":", 1)[0] for t in f["axis_titles"]}
        assert kinds == {"x", "y"}, f
    # the default run's nine strategies, the crowded case of issue #51, read at every width
    for width in (1400, 1280, 800):
        res = check_report(out / "report.html", width=width, figure_dir=tmp_path / f"figs_{width}")
        assert res.unreadable == [], (width, res.unreadable)
        _keep(res.figure_shots.values(), f"default_{width}")


@needs_browser
@needs_playwright
def test_capacity_curve_html_renders_with_titles(tmp_path):
    from specagent.reports.browser import check_report
    from specagent.reports.figures import capacity_plan_figure

    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"] * 3, "rate": [0.5, 0.5, 2.0, 2.0, 8.0, 8.0],
                         "usd_per_hour": [8.0, 9.0, 33.0, 11.0, 130.0, 34.0], "usd_per_task": [0.005, 0.0055, 0.0046, 0.0015, 0.0045, 0.0012],
                         "gpus": [8, 9, 32, 11, 24, 6], "strong_gpu": ["h20"] * 4 + ["h200_sxm"] * 2})
    html = tmp_path / "capacity_curve.html"
    capacity_plan_figure(plan).write_html(html, include_plotlyjs=True, full_html=True)
    # the standalone page has no <figure data-figure>: wrap it the way the probe expects
    text = html.read_text(encoding="utf-8").replace('<div id="', '<figure data-figure="fig7"><div id="', 1)
    html.write_text(text.replace("</script>        </div>", "</script>        </div></figure>", 1), encoding="utf-8")
    res = check_report(html, width=1400, height=900)
    assert [f["key"] for f in res.figures] == ["fig7"] and res.problems == [], res.problems
    assert res.unreadable == [], res.unreadable
    titles = res.figures[0]["axis_titles"]
    assert {"y: $/hour", "y: $/task", "y: GPUs"} <= set(titles) and titles.count("x: arrival rate (tasks/s)") == 3, titles
