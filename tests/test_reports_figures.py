"""Figures are views of the numbers given: checked against hand calculations on small frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specagent.costmodel.balance import verify_saving_curve
from specagent.costmodel.deployment import Deployment
from specagent.costmodel.model_spec import load_model_spec
from specagent.hardware.profile import load_hardware
from specagent.reports import figures as F


def _summary():
    return pd.DataFrame({
        "strategy": ["strongonly", "specagent"], "label": ["Strong-only", "SpecAgent"],
        "strong_bytes_read_rel": [1.0, 0.25], "total_bytes_read_rel": [1.0, 0.5], "wall_time_s_rel": [1.0, 1.2],
    }).set_index("strategy")


def _bars(fig):
    return [tr for tr in fig.data if tr.type == "bar"]


def test_memory_reads_bars_are_the_summary_ratios():
    fig = F.memory_reads_figure(_summary())
    strong, total = _bars(fig)
    assert list(strong.x) == [1.0, 0.25]
    assert list(total.x) == [1.0, 0.5]
    values = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "text"]  # each value printed past its bar (and its error bar)
    assert [t.strip() for t in values[0].text] == ["1.00×", "0.25×"] and list(values[0].x) == [1.0, 0.25]
    assert list(fig.layout.yaxis.ticktext) == ["Strong-only", "SpecAgent"]


def test_memory_reads_needs_the_ratio_columns():
    with pytest.raises(F.FigureNotSupported, match="strong_bytes_read_rel"):
        F.memory_reads_figure(_summary().drop(columns=["strong_bytes_read_rel"]))


def test_operating_points_without_quality_do_not_invent_it():
    fig = F.operating_points_figure(_summary())
    assert "none are invented" in fig.layout.title.text
    pts = {tr.name: (tr.x[0], tr.y[0]) for tr in fig.data}
    assert pts == {"strongonly: Strong-only": (1.0, 1.0), "specagent: SpecAgent": (0.5, 1.2)}
    # each point named beside it (an annotation at the point, moved where it overlaps nothing)
    assert {(a.text, a.x, a.y) for a in fig.layout.annotations} == {("strongonly", 1.0, 1.0), ("specagent", 0.5, 1.2)}


def test_operating_points_with_measured_success():
    s = _summary().assign(measured_success=[0.6, np.nan])
    fig = F.operating_points_figure(s)
    # Only the strategy with a measured rate is placed, once per panel (memory, time).
    assert [(tr.name, tr.x[0], tr.y[0]) for tr in fig.data] == [("strongonly: Strong-only", 1.0, 0.6)] * 2
    assert "1 strategy without measured success not shown" in fig.layout.title.text


def test_phase_costs_stack_to_total_over_baseline_total():
    ph = pd.DataFrame({"weak_drafting": [0.0, 1.0], "strong_repair_verdict": [3.0, 0.5], "user": [1.0, 1.0]},
                      index=pd.Index(["strongonly", "specagent"], name="strategy"))
    fig = F.phase_cost_figure(ph, ph * 2, ph * 3, {"strongonly": "Strong-only", "specagent": "SpecAgent"})
    for panel in ("x", "x2", "x3"):
        bars = [tr for tr in fig.data if tr.xaxis == panel]
        totals = np.sum([np.asarray(tr.x) for tr in bars], axis=0)
        # Strong-only's bars sum to 1; SpecAgent's to (1 + 0.5 + 1) / (3 + 1) whatever the metric's scale.
        assert totals == pytest.approx([1.0, 2.5 / 4.0])
    assert {tr.name for tr in fig.data} == {"Weak drafting (decode)", "Strong repair + verdict (decode)", "User time"}


def test_phase_costs_need_a_baseline():
    ph = pd.DataFrame({"user": [1.0]}, index=pd.Index(["specagent"], name="strategy"))
    with pytest.raises(F.FigureNotSupported, match="strongonly"):
        F.phase_cost_figure(ph, ph, ph)


def test_zero_crossing_interpolates_in_log_batch():
    assert F._zero_crossing(np.array([1.0, 10.0, 100.0]), np.array([1.0, 0.5, -0.5])) == pytest.approx(10 ** 1.5)
    assert F._zero_crossing(np.array([1.0, 10.0]), np.array([1.0, 0.5])) is None


def _dense():
    return Deployment(load_model_spec("qwen3-4b"), load_hardware("h20"))


def test_roofline_balance_fallback_matches_hand_calculation_for_a_dense_model():
    # Dense model, empty context: decode at batch 1 reads all weights W per token; a 64-token
    # verification prefill reads W once for 64 tokens; so the memory saving is 1 - 1/64 at
    # batch 1 and vanishes at batch 64 (both then read W per 64 tokens). Activations add a little.
    df = verify_saving_curve(_dense(), 64, 0, batches=[1, 64])
    assert df["memory_saving"].iloc[0] == pytest.approx(1 - 1 / 64, abs=0.002)
    assert df["memory_saving"].iloc[1] == pytest.approx(0.0, abs=0.01)
    assert df["decode_bytes_per_token"].iloc[0] == pytest.approx(_dense().weight_bytes(), rel=0.01)
    assert (df["time_saving"] < 1).all() and df["fits"].all()


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4000), st.integers(1, 4000), st.integers(2, 4096), st.integers(0, 32768))
def test_roofline_saving_never_grows_with_the_decode_batch(b1, b2, seg, ctx):
    lo, hi = sorted((b1, b2))
    df = verify_saving_curve(_dense(), seg, ctx, batches=[lo, hi])
    assert df["memory_saving"].iloc[1] <= df["memory_saving"].iloc[0] + 1e-12
    cap = int(_dense().serving_engine.cuda_graph_max_batch.value)
    if lo <= cap < hi:
        return  # past the largest captured CUDA graph a decode pass launches its kernels one by one: decode gets dearer
    assert df["time_saving"].iloc[1] <= df["time_saving"].iloc[0] + 1e-12


def test_balance_figure_marks_where_the_saving_vanishes():
    bal = pd.DataFrame({"hardware": "H20", "strong_mean_decode_batch": [1, 10, 100],
                        "time_saving": [0.5, 0.25, -0.25], "memory_saving": [0.6, 0.4, 0.1]})
    fig = F.balance_figure(bal, balance_batches={"H20": 37})
    assert [list(tr.y) for tr in fig.data] == [[50.0, 25.0, -25.0], [60.0, 40.0, 10.0]]
    vlines = sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1)
    assert vlines == pytest.approx(sorted([10 ** 1.5, 37.0]))


def test_phase_operating_points_hand_calculation():
    s = pd.DataFrame({"strategy": ["specagent"], "label": ["SpecAgent"],
                      "flops_strong_verify": [8e15], "bytes_read_strong_verify": [3e13], "bytes_written_strong_verify": [1e13],
                      "time_s_strong_verify": [10.0], "flops_weak_decode": [0.0], "bytes_read_weak_decode": [1.0],
                      "bytes_written_weak_decode": [0.0], "time_s_weak_decode": [1.0]})
    pts = F.phase_operating_points(s, {"weak": 1, "strong": 8}, {"strong": "fp8"})
    assert len(pts) == 1  # the weak phase has no FLOPs and is left out
    r = pts.iloc[0]
    assert r["intensity"] == pytest.approx(8e15 / 4e13)
    assert r["flops_per_s_per_gpu"] == pytest.approx(8e15 / 10.0 / 8)
    assert r["compute_dtype"] == "fp8"
    # the serving engine's per-request overhead is inside a call's time but runs no pass: the GPU's rate leaves it out
    busy = F.phase_operating_points(s.assign(request_s_strong_verify=[2.0]), {"weak": 1, "strong": 8}).iloc[0]
    assert busy["flops_per_s_per_gpu"] == pytest.approx(8e15 / 8.0 / 8)


def test_simulated_phases_lie_under_the_derated_roofline():
    from specagent.simulator.run import compare
    from specagent.simulator.scenario import default_setting
    from specagent.traces import load_trajectories

    setting = default_setting()
    trajs = load_trajectories("traces/data/tau2_airline.jsonl")[:20]  # enough reviews that a rejection is repaired by a Strong decode
    c = compare(trajs, ["strongonly", "specagent"], setting)
    pts = F.phase_operating_points(c.summary, {"weak": setting.weak.gpus, "strong": setting.strong.gpus},
                                   {"weak": setting.weak.compute_dtype, "strong": setting.strong.compute_dtype})
    assert set(pts["phase"]) >= {"strong_verify", "strong_decode", "weak_decode"}
    hw = setting.strong.hardware
    from specagent.costmodel.latency import latency_terms

    lt = latency_terms(setting.strong)  # the serving engine's GEMM MFU and bandwidth on this GPU
    assert setting.weak.serving_engine.id == setting.strong.serving_engine.id and setting.weak.hardware.id == hw.id  # one derated roofline for both
    for _, r in pts.iterrows():
        ceiling = min(hw.peak_flops(r["compute_dtype"]) * lt.gemm_mfu, r["intensity"] * hw.bandwidth_bytes_s * lt.bandwidth_efficiency)
        assert r["flops_per_s_per_gpu"] <= ceiling * (1 + 1e-9), r["phase"]
    # Decode is bandwidth-bound, the verification prefill is not: intensity on either side of the ridge.
    by = pts[pts["strategy"] == "specagent"].set_index("phase")["intensity"]
    assert by["strong_decode"] < hw.ridge("fp8") < by["strong_verify"]
    fig = F.roofline_figure(hw, pts, derate=(lt.gemm_mfu, lt.bandwidth_efficiency))
    assert sum(1 for tr in fig.data if tr.mode == "markers") == len(pts)


def test_calibration_figure_states_the_mape():
    cal = pd.DataFrame({"point": ["a", "b"], "predicted_s": [1.1, 0.9], "measured_s": [1.0, 1.0]})
    fig = F.calibration_figure(cal)
    assert "MAPE 10.0% over 2 points" in fig.layout.title.text
    bars = [tr for tr in fig.data if tr.type == "bar"][0]
    assert list(bars.y) == pytest.approx([10.0, -10.0])


def test_capacity_plan_bars():
    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"], "usd_per_hour": [100.0, 60.0], "gpus": [40, 24], "rate": ["2/s", "2/s"]})
    fig = F.capacity_plan_figure(plan)
    assert [list(tr.y) for tr in fig.data] == [[100.0, 60.0], [40.0, 24.0]]
    assert "rate 2/s" in fig.layout.title.text


def test_log_ticks_are_major_and_labelled_in_full():
    vals, text = F.log_ticks(0.5, 100)
    assert text == ["0.5", "1", "2", "5", "10", "20", "50", "100"]
    assert F.log_ticks(20, 200, prefix="$")[1] == ["$20", "$50", "$100", "$200"]
    assert len(F.log_ticks(0.003, 0.0055)[0]) >= 3  # a narrow range still gets ticks to read
    assert F.log_ticks(1, 1e6)[1][-1] == "1,000,000" and len(F.log_ticks(1, 1e6)[0]) <= 9
    assert F.log_ticks(0, 5) == ([], [])


def test_capacity_curve_has_axis_titles_a_usd_per_task_panel_and_the_winning_gpu():
    plan = pd.DataFrame({"strategy": ["strongonly", "specagent"] * 3, "rate": [0.5, 0.5, 2.0, 2.0, 8.0, 8.0],
                         "usd_per_hour": [8.0, 9.0, 33.0, 11.0, 130.0, 34.0], "usd_per_task": [0.005, 0.0055, 0.0046, 0.0015, 0.0045, 0.0012],
                         "gpus": [8, 9, 32, 11, 24, 6], "strong_gpu": ["h20", "h20", "h20", "h20", "h200_sxm", "h200_sxm"],
                         "weak_gpu": ["h20"] * 4 + ["h200_sxm"] * 2, "strong_replicas": [1, 1, 4, 1, 3, 1],
                         "strong_gpus_per_replica": [8] * 6, "weak_replicas": [0, 1, 0, 3, 0, 2], "weak_gpus_per_replica": [1] * 6})
    fig = F.capacity_plan_figure(plan)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["$ per hour", "$ per task", "GPUs"]
    assert [fig.layout[f"yaxis{i}"].title.text for i in ("", "2", "3")] == ["$/hour", "$/task", "GPUs"]
    assert list(fig.layout.xaxis.ticktext) == ["0.5", "1", "2", "5", "10"]
    assert "$20" in list(fig.layout.yaxis.ticktext) and "$100" in list(fig.layout.yaxis.ticktext)
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0  # below the plots, off the subplot titles
    spec = [tr for tr in fig.data if tr.name.startswith("SpecAgent") or tr.name == "specagent"][0]
    # the winning GPU is each point's marker, named once in the legend (printed names fell on the other line's markers)
    assert list(spec.marker.symbol) == ["circle", "circle", "diamond"] and "1 Weak×1 h20 + 1 Strong×8 h20" in spec.customdata[0]
    assert {tr.name: tr.marker.symbol for tr in fig.data if tr.name.startswith("Strong GPU")} == \
        {"Strong GPU: h20": "circle", "Strong GPU: h200_sxm": "diamond"}


def test_roofline_caption_states_what_the_points_show():
    """Figure 5's caption is computed from its points: a decode point far below the roof is said to be, in numbers."""
    from specagent.hardware.profile import load_hardware

    hw = load_hardware("h20")
    bw = hw.bandwidth_bytes_s
    pts = pd.DataFrame({"label": ["a", "a"], "phase": ["strong_decode", "strong_verify"], "intensity": [2.0, 500.0],
                        "compute_dtype": ["bf16", "bf16"],
                        "flops_per_s_per_gpu": [0.1 * 2.0 * bw * 0.72, 0.9 * hw.peak_flops("bf16") * 0.6]})
    text = F.roofline_caption(hw, pts, derate=(0.6, 0.72))
    assert "Decode phases sit below the ridge" in text and "reach 10% of the derated roof" in text
    assert "take most of every decode pass" in text and "verification passes reach 90%" in text
    assert "sit on the bandwidth slope" not in text


def test_operating_points_are_labelled_on_the_point():
    summary = pd.DataFrame({"strategy": ["strongonly", "specagent", "router"], "label": ["Strong-only", "SpecAgent", "Router"],
                            "total_bytes_read_rel": [1.0, 0.53, 0.75], "wall_time_s_rel": [1.0, 0.92, 0.95]}).set_index("strategy")
    fig = F.operating_points_figure(summary)
    assert [(a.text, a.x, a.y) for a in fig.layout.annotations] == [("strongonly", 1.0, 1.0), ("specagent", 0.53, 0.92),
                                                                     ("router", 0.75, 0.95)]


# the default run's cluster (issue #51: specagent, specagent_exact, router and collab printed over each other)
CLUSTER = [("strongonly", 1, 1, None, None), ("weakonly", .25, .72, (.15, .3), (.52, .9)),
           ("specagent", .547, .877, (.43, .56), (.7, 1.01)), ("exactmatch", 1.249, 1.005, (1.15, 1.3), (1, 1.01)),
           ("router", .642, .872, (.6, .67), (.78, .96)), ("collab", .706, .947, (.42, .71), (.72, 1.04)),
           ("specagent_exact", .576, .892, (.43, .7), (.72, 1.09)), ("specagent_hold_replies", 1.3, 1.262, (1.04, 1.71), (1.08, 1.52)),
           ("specagent_every_chunk", 1.41, 1.329, (1.08, 1.85), (1.11, 1.61))]


def _label_boxes(pts, at, xr, yr, width, height):
    """Each label's box in pixels, computed here from the placements (independently of the placer's own bookkeeping)."""
    from specagent.reports.labels import label_size

    out = []
    for p, a in zip(pts, at):
        w, h = label_size(p.text)
        cx = (p.x - xr[0]) / (xr[1] - xr[0]) * width + a.dx
        cy = (yr[1] - p.y) / (yr[1] - yr[0]) * height + a.dy
        out.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return out


def _apart(a, b) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def test_the_crowded_cluster_is_labelled_without_overlaps_at_800_and_1280_px():
    from specagent.reports.labels import MARKER_R, Point, place_labels

    pts = [Point(x, y, t, xe, ye) for t, x, y, xe, ye in CLUSTER]
    xr, yr = (0.05, 1.95), (0.45, 1.7)
    at = place_labels(pts, xr, yr, F.PLOT_WIDTHS, 460)
    assert all(a.clear for a in at)
    for width in F.PLOT_WIDTHS:
        boxes = _label_boxes(pts, at, xr, yr, width, 460)
        assert all(_apart(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        for p in pts:  # and no label on any marker
            cx, cy = (p.x - xr[0]) / (xr[1] - xr[0]) * width, (yr[1] - p.y) / (yr[1] - yr[0]) * 460
            assert all(_apart(b, (cx - MARKER_R, cy - MARKER_R, cx + MARKER_R, cy + MARKER_R)) for b in boxes)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2), st.floats(0, 2), st.sampled_from(["a", "router", "specagent_exact"])),
                min_size=1, max_size=8))
def test_labels_placed_clear_never_overlap(raw):
    from specagent.reports.labels import Point, place_labels

    pts = [Point(x, y, t) for x, y, t in raw]
    at = place_labels(pts, (-0.1, 2.1), (-0.1, 2.1), (600.0, 1100.0), 400.0)
    for width in (600.0, 1100.0):
        boxes = _label_boxes(pts, at, (-0.1, 2.1), (-0.1, 2.1), width, 400.0)
        clear = [b for b, a in zip(boxes, at) if a.clear]
        assert all(_apart(a, b) for i, a in enumerate(clear) for b in clear[i + 1:])
        assert all(0 <= b[0] and b[2] <= width and 0 <= b[1] and b[3] <= 400.0 for b in clear)  # inside the plot


# ----------------------------------------------------------------------------- ranges on the figures (issue #33, item 5)
def _line():
    return pd.DataFrame({"wall_s_per_task": [60.0, 55.0], "model_s_per_task": [30.0, 25.0], "env_s_per_task": [30.0, 30.0],
                         "usd_per_task": [0.07, np.nan]}, index=pd.Index(["strongonly", "specagent"], name="strategy"))


def _ranges():
    return pd.DataFrame([("strongonly", "wall_s_per_task", 60.0, 50.0, 76.0), ("specagent", "wall_s_per_task", 55.0, 45.0, 63.0),
                         ("strongonly", "usd_per_task", 0.07, 0.05, 0.11)], columns=["strategy", "column", "point", "low", "high"])


def test_the_bottom_line_figure_draws_time_and_dollars_with_their_ranges():
    fig = F.bottom_line_figure(_line(), _ranges(), 0.9, "the acceptance parameters", {"strongonly": "Strong-only"})
    model, waits, usd = fig.data
    assert list(model.x) == [30.0, 25.0] and list(waits.x) == [30.0, 30.0]  # stacked: model + waits = wall
    # the wall range sits on the stack's end: 60 − 50 below, 76 − 60 above; 55 − 45, 63 − 55
    assert list(waits.error_x.arrayminus) == pytest.approx([10.0, 10.0]) and list(waits.error_x.array) == pytest.approx([16.0, 8.0])
    assert model.error_x.array is None
    # an unpriced strategy has no dollar bar at all, never a zero one
    assert list(usd.y) == ["Strong-only"] and list(usd.x) == [0.07]
    assert list(usd.error_x.arrayminus) == pytest.approx([0.02]) and list(usd.error_x.array) == pytest.approx([0.04])
    assert "90% intervals over the acceptance parameters" in fig.layout.title.text


def test_the_bottom_line_figure_without_ranges_says_points_only():
    fig = F.bottom_line_figure(_line())
    assert all(tr.error_x.array is None for tr in fig.data)
    assert "points only" in fig.layout.title.text


def test_memory_and_time_figures_carry_the_ratio_intervals():
    iv = {"level": 0.9, "includes": "the acceptance parameters",
          "intervals": [{"strategy": "specagent", "metric": "total_bytes_read_rel", "low": 0.4, "high": 0.7},
                        {"strategy": "specagent", "metric": "wall_time_s_rel", "low": 1.0, "high": 1.5}]}
    fig = F.memory_reads_figure(_summary(), iv)
    strong, total = _bars(fig)
    assert strong.error_x.array is None  # no interval for that metric: no bar drawn
    assert list(total.error_x.arrayminus) == pytest.approx([0.0, 0.1]) and list(total.error_x.array) == pytest.approx([0.0, 0.2])
    values = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "text"]
    assert list(values[1].x) == pytest.approx([1.0, 0.7])  # the value printed past the interval's end, not across it
    s = _summary().assign(wall_time_s=[100.0, 120.0], model_wall_time_s=[50.0, 70.0], env_wall_time_s=[50.0, 50.0])
    model, waits = F.agent_time_figure(s, iv).data
    assert list(waits.error_x.arrayminus) == pytest.approx([0.0, 0.2]) and list(waits.error_x.array) == pytest.approx([0.0, 0.3])
    assert "90% intervals" in F.agent_time_figure(s, iv).layout.title.text
    # the same waits under every strategy are said once, in the legend, not printed on every bar
    assert waits.text is None and waits.name == "tool and user waits: 0.500 of Strong-only's wall, under every strategy"
    assert list(model.text) == ["0.50×", "0.70×"]
    differ = F.agent_time_figure(s.assign(env_wall_time_s=[50.0, 40.0])).data[1]
    assert list(differ.text) == ["0.50×", "0.40×"] and differ.name == "tool and user waits"


def test_figure_4_says_what_its_saving_is_per():
    df = pd.DataFrame({"hardware": ["h20"] * 3, "strong_mean_decode_batch": [1.0, 8.0, 64.0],
                       "time_saving": [0.5, 0.2, -0.1], "memory_saving": [0.6, 0.3, 0.0]})
    assert F.balance_figure(df, saving_axis="saving per verified token vs decoding it (%)").layout.yaxis.title.text == \
        "saving per verified token vs decoding it (%)"


def test_titles_are_wrapped_to_an_800_px_page():
    t = F.title_text("x " * 50, "word " * 60)
    lines = t.split("<br>")
    assert all(len(line) <= F.TITLE_CHARS for line in lines if not line.startswith("<sup>"))
    subs = [line[5:-6] for line in lines if line.startswith("<sup>")]
    assert len(subs) == 3 and all(len(line) <= F.SUB_CHARS for line in subs) and " ".join(subs) == ("word " * 60).strip()
    assert F.title_text("short") == "short"
