"""Hand-edited `[acceptance]` tables and `predict`'s price and output flags, case by case (findings 2026-12-03, "Handled
well" and the verdicts set by hand): every refusal is one line naming the file and key (or the flag), with nothing
written; every run that works has its output checked (CSV that parses, stdout that stays CSV, files under --quiet)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli.app import app

runner = CliRunner()
#: The smallest run that still prices both pools: one strategy besides the baseline, no Monte Carlo draws.
FAST = ["--strategies", "specagent", "--draws", "0"]


def run(args: list[str]):
    r = runner.invoke(app, ["predict", *args])
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), (args, r.output)
    return r


def one_line_error(args: list[str]) -> str:
    """The run is refused with exit 2 in one `error:` line (nothing else printed but blank lines); that line."""
    r = run(args)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (args, r.output)
    return lines[0]


# -- hand-edited [acceptance] tables (21 of 22 handled well; acc-source-int was F3-18) ---------------------------------

ONE_TABLE = "an acceptance file holds one [acceptance] table (as `specagent acceptance fit` writes)"
#: id -> (the file's text, what the one error line must say after the file's name)
BAD_TABLES: dict[str, tuple[str, str]] = {
    "acc-accept-over-1": ("[acceptance]\naccept = { read = 1.5 }\n", "acceptance.accept.read: "),
    "acc-accept-negative": ("[acceptance]\naccept = { write = -0.1 }\n", "acceptance.accept.write: "),
    "acc-accept-nan": ("[acceptance]\naccept = { read = nan }\n", "acceptance.accept.read: "),
    "acc-decay-nan": ("[acceptance]\nposition_decay = nan\n", "acceptance.position_decay: "),
    "acc-correlation-over-1": ("[acceptance]\ncorrelation = 1.5\n", "acceptance.correlation: "),
    "acc-p-valid-replacement-negative": ("[acceptance]\np_valid_replacement = -0.5\n", "acceptance.p_valid_replacement: "),
    "acc-tokens-negative": ("[acceptance]\nverdict_tokens = -5\n", "acceptance.verdict_tokens: "),
    "acc-tokens-fractional": ("[acceptance]\naccept_verdict_tokens = 2.5\n", "acceptance.accept_verdict_tokens: "),
    "acc-ratio-zero": ("[acceptance]\nweak_token_ratio = 0\n", "acceptance.weak_token_ratio: "),
    "acc-unknown-key": ("[acceptance]\ncolour = 'red'\n", "acceptance.colour: unknown field(s) colour"),
    "acc-fit-unknown-key": ("[acceptance]\n[acceptance.fit]\ncolour = 1\n", "acceptance.fit.colour: "),
    "acc-interval-reversed": ("[acceptance]\n[acceptance.fit.intervals]\n'accept.read' = [0.9, 0.1]\n",
                              "acceptance.fit.intervals.accept.read: "),
    "acc-interval-nan": ("[acceptance]\n[acceptance.fit.intervals]\n'accept.read' = [nan, 0.9]\n",
                         "acceptance.fit.intervals.accept.read: "),
    # unquoted, `accept.read` is a dotted key: a table {accept: {read: [...]}}, not the interval of accept.read
    "acc-interval-unquoted": ("[acceptance]\n[acceptance.fit.intervals]\naccept.read = [0.1, 0.9]\n",
                              "acceptance.fit.intervals.accept: acceptance.fit.intervals['accept'] must be [low, high] with "
                              "finite low <= high, got {'read': [0.1, 0.9]} (a dotted name is quoted in TOML: 'accept.read' = "
                              "[low, high])"),
    # refused when the file is read (it was refused only by `--acceptance-ranges`, without the file's name, and
    # passed silently with --draws 0)
    "acc-interval-unknown-param": ("[acceptance]\n[acceptance.fit.intervals]\n'colour' = [0.1, 0.9]\n",
                                   "acceptance.fit.intervals.colour: "),
    "acc-interval-unknown-kind": ("[acceptance]\n[acceptance.fit.intervals]\n'accept.teleport' = [0.1, 0.9]\n",
                                  "acceptance.fit.intervals.accept.teleport: "),
    "acc-two-tables": ("[acceptance]\ncorrelation = 0.1\n[acceptance]\ncorrelation = 0.2\n", "not valid TOML: Cannot declare"),
    "acc-empty-file": ("", f"{ONE_TABLE}; found no [acceptance] table"),
    "acc-keys-no-header": ("correlation = 0.1\n", f"{ONE_TABLE}; found field(s) correlation"),
    "acc-thinking-string": ("[acceptance]\nthinking = 'yes'\n", "acceptance.thinking: "),
    # by hand: the harness's edit made invalid TOML; the error names the file, the line and the column
    "acc-intervals-not-table": ("[acceptance]\n[acceptance.fit]\nintervals = 'accept.read' = [0.1, 0.9]\n",
                                "not valid TOML: Expected newline or end of document after a statement (at line 3, column 27)"),
    "acc-source-int": ("[acceptance]\nsource = 42\n", "acceptance.source: "),  # F3-18
}
#: The cases about a table's content (not the file's shape): a scenario file's [acceptance] table is refused alike.
TABLE_CONTENT = [k for k, (text, _) in BAD_TABLES.items() if text.startswith("[acceptance]") and "TOML" not in BAD_TABLES[k][1]]


#: (flag, case): every case through `--acceptance FILE`; the content cases also as a scenario file's [acceptance]
WAYS_IN = [("--acceptance", n) for n in BAD_TABLES] + [("--scenario", n) for n in TABLE_CONTENT]


@pytest.mark.parametrize(("flag", "name"), WAYS_IN, ids=[f"{flag[2:]}-{n}" for flag, n in WAYS_IN])
def test_a_hand_edited_acceptance_table_is_one_line_naming_file_and_key(tmp_path, flag, name):
    """Through --acceptance, or as a scenario file's [acceptance] table: one line naming the file and the key; nothing
    written."""
    text, said = BAD_TABLES[name]
    f = tmp_path / "a.toml"
    f.write_text(text)
    line = one_line_error([flag, str(f), "-o", str(tmp_path / "o"), *FAST])
    assert line.startswith(f"error: {'--acceptance: ' if flag == '--acceptance' else ''}{f}: {said}"), line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name, interval, drawn", [
    ("acc-interval-wide", [-0.5, 1.5], "0–1 (normal, 95%)"),  # clipped to the probability's domain
    ("acc-interval-misses", [0.1, 0.2], "0.1–0.9 (normal, 95%)"),  # widened to hold the estimate 0.9
], ids=["acc-interval-wide", "acc-interval-misses"])
def test_an_interval_outside_the_domain_is_clipped_and_one_missing_the_estimate_widened(tmp_path, name, interval, drawn):
    """As `AcceptanceDistribution.fitted` documents: the run goes on, and the range it draws from says what was drawn."""
    f = tmp_path / "a.toml"
    f.write_text(f"[acceptance]\naccept = {{ read = 0.9 }}\n[acceptance.fit.intervals]\n'accept.read' = {interval}\n")
    r = run(["--acceptance", str(f), "-o", str(tmp_path / "o"), "--strategies", "specagent", "--draws", "4", "--json"])
    assert r.exit_code == 0, r.output
    ranges = {x["parameter"]: x for x in json.loads(r.stdout)["intervals"]["ranges"]}
    assert ranges["accept.read"]["range"] == drawn and "fitted by `specagent acceptance fit`" in ranges["accept.read"]["source"]
    assert (tmp_path / "o" / "summary.json").exists()


# -- predict's price and output flags (25 of 31 handled well; pr-brief-phases and pr-quiet-json were F3-18) -----------

#: id -> (flags, what the one error line must say)
REFUSED: dict[str, tuple[list[str], str]] = {
    "pr-price-negative": (["--price", "h20=-1"], "error: --price: price 'h20=-1' must be a finite number >= 0"),
    "pr-price-nan": (["--price", "h20=nan"], "error: --price: price 'h20=nan' must be a finite number >= 0"),
    "pr-price-inf": (["--price", "h20=inf"], "error: --price: price 'h20=inf' must be a finite number >= 0"),
    "pr-price-hex": (["--price", "h20=0x10"], "error: --price: price 'h20=0x10': '0x10' is not a number"),
    "pr-price-empty": (["--price", ""], "error: --price: price '': expected GPU=USD_PER_GPU_HOUR"),
    "pr-price-empty-value": (["--price", "h20="], "error: --price: price 'h20=': '' is not a number"),
    "pr-price-unknown-gpu": (["--price", "h999=3"], "error: --price: price 'h999=3': 'h999' is not a GPU type"),
    "pr-price-no-gpu": (["--price", "=3"], "error: --price: price '=3': no GPU type before '='"),
    "pr-price-bare-number": (["--price", "3.5"], "error: --price: price '3.5': expected GPU=USD_PER_GPU_HOUR"),
    # by hand: `float` read Arabic-Indic digits (and full-width ones, and underscores) as 12; now refused, not guessed
    "pr-price-unicode-digits": (["--price", "h20=١٢"], "error: --price: price 'h20=١٢': write '١٢' in ASCII digits"),
    "pr-price-fullwidth-digits": (["--price", "h20=１２"], "error: --price: price 'h20=１２': write '１２' in ASCII digits"),
    "pr-price-underscore": (["--price", "h20=1_2"], "error: --price: price 'h20=1_2': write '1_2' in ASCII digits"),
    "pr-json-format-csv": (["--json", "--format", "csv"], "error: give --json or --format csv, not both"),
    "pr-format-upper": (["--format", "CSV"], "error: --format: expected one of table, json, csv, got 'CSV'"),  # by hand
    "pr-format-unknown": (["--format", "xml"], "error: --format: expected one of table, json, csv, got 'xml'"),
    "pr-brief-phases": (["--brief", "--phases"], "error: --brief and --phases: not both"),  # F3-18: the answer has no phase tables
    "pr-brief-details": (["--brief", "--details"], "error: --brief and --details: not both"),
    "pr-quiet-json": (["--quiet", "--json"], "error: --quiet and --format json: not both"),  # F3-18
    "pr-quiet-csv": (["--quiet", "--format", "csv"], "error: --quiet and --format csv: not both"),
    # as F3-18's two: the phase tables asked for were dropped without a word
    "pr-quiet-phases": (["--quiet", "--phases"], "error: --quiet and --phases: not both"),
    "pr-csv-phases": (["--format", "csv", "--phases"], "error: --format csv and --phases: not both"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_bad_predict_flag_is_one_line_naming_it_and_nothing_is_written(tmp_path, name):
    flags, said = REFUSED[name]
    line = one_line_error(["-o", str(tmp_path / "o"), *FAST, *flags])
    assert line.startswith(said), line
    assert not (tmp_path / "o").exists()


def test_a_price_of_1e308_is_refused_at_the_flag_and_writes_nothing(tmp_path):
    """pr-price-1e308: finite, but GPU-seconds times it overflow. It reached the output guard's defect report; since
    issue #52 every --price is held to the profiles' own guard ($10,000/GPU-hour), so it is refused at the flag, as
    replay and plan refuse it (they printed Infinity and '$inf/task')."""
    line = one_line_error(["-o", str(tmp_path / "o"), *FAST, "--price", "h20=1e308"])
    assert line.startswith("error: --price: ") and "past the 10,000 a GPU profile may state" in line, line
    assert not (tmp_path / "o").exists()


def _csv(text: str) -> pd.DataFrame:
    frame = pd.read_csv(io.StringIO(text), index_col="strategy")
    assert list(frame.index) == ["strongonly", "specagent"], frame
    assert frame.loc["strongonly", "wall_time_s_rel"] == 1.0 and 0 < frame.loc["specagent", "usd_per_task"] < 1
    return frame


def _bottom_line(out: Path) -> pd.DataFrame:
    return pd.DataFrame(json.loads((out / "summary.json").read_text())["bottom_line"]).set_index("strategy")


def test_format_csv_prints_csv_only_and_the_figures_of_summary_json(tmp_path):
    """pr-format-csv: stdout parses as CSV, one row per strategy, the very figures written to summary.json."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--format", "csv"])
    assert r.exit_code == 0, r.output
    frame = _csv(r.stdout)
    stored = _bottom_line(tmp_path / "o")
    pd.testing.assert_series_equal(frame["usd_per_task"], stored["usd_per_task"], check_exact=False, rtol=1e-12)
    assert (tmp_path / "o" / "per_trajectory.parquet").exists()


def test_format_csv_on_an_ascii_terminal_is_ascii_csv(tmp_path):
    """pr-format-csv-ascii-terminal: the installed CLI with an ASCII stdout: every byte ASCII, still the same CSV."""
    code = "import sys; from specagent.cli import main; sys.argv = ['specagent', *sys.argv[1:]]; main()"
    r = subprocess.run([sys.executable, "-c", code, "predict", "-o", str(tmp_path / "o"), *FAST, "--format", "csv"],
                       capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "80"})
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode("ascii", "replace")[-2000:]
    frame = _csv(r.stdout.decode("ascii"))
    pd.testing.assert_series_equal(frame["usd_per_task"], _bottom_line(tmp_path / "o")["usd_per_task"], check_exact=False,
                                   rtol=1e-12)


def test_format_csv_with_report_keeps_stdout_csv_and_says_the_report_on_stderr(tmp_path):
    """pr-format-csv-report: the report's lines go to stderr, so a pipe of stdout still reads as CSV."""
    report = tmp_path / "r.html"
    r = run(["-o", str(tmp_path / "o"), *FAST, "--format", "csv", "--report", str(report)])
    assert r.exit_code == 0, r.output
    _csv(r.stdout)
    assert r.stdout.splitlines()[0].startswith("strategy,") and "wrote report" not in r.stdout
    assert f"wrote report {report} (" in " ".join(r.stderr.split()) and report.stat().st_size > 10_000


def test_phases_prints_the_three_phase_tables(tmp_path):
    """pr-phases: memory traffic, wall time and FLOPs by phase; without the flag, a line saying how to get them."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--details", "--phases"])
    assert r.exit_code == 0, r.output
    for title in ("Memory traffic by phase", "Wall time by phase", "FLOPs by phase"):
        assert title in r.stdout, title
    plain = run(["-o", str(tmp_path / "o2"), *FAST, "--details"])
    assert "Memory traffic by phase" not in plain.stdout and "add --phases" in plain.stdout


def test_quiet_prints_nothing_and_still_writes_the_files(tmp_path):
    """pr-quiet."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--quiet"])
    assert r.exit_code == 0 and r.output == "", r.output
    assert (tmp_path / "o" / "per_trajectory.parquet").stat().st_size > 0
    assert list(_bottom_line(tmp_path / "o").index) == ["strongonly", "specagent"]


def test_format_json_with_brief_prints_the_whole_summary(tmp_path):
    """pr-format-json-brief (by hand, exit 0 as allowed): --brief shapes the tables only; the JSON is the whole summary."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--format", "json", "--brief"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    for key in ("bottom_line", "summary", "phase_time", "phase_bytes", "phase_flops", "assumptions", "scenario"):
        assert data[key], key
    assert data["bottom_line"] == json.loads((tmp_path / "o" / "summary.json").read_text())["bottom_line"]


def test_a_price_is_applied_to_its_pools(tmp_path):
    """pr-price-applied: both pools run on h20, so $/task is GPU-hours times the price (any spelling of the GPU)."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--format", "csv", "--price", "H20=2"])
    assert r.exit_code == 0, r.output
    frame = _csv(r.stdout)
    assert (frame["gpu_usd_per_task"] - 2.0 * frame["gpu_h_per_task"]).abs().max() < 1e-12
    prices = json.loads((tmp_path / "o" / "summary.json").read_text())["assumptions"]["prices"]
    assert prices == {"h20": {"usd_per_gpu_hour": 2.0, "source": "user-supplied (h20=2.0)"}}


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_a_price_for_a_gpu_no_pool_runs_on_is_said_to_be_unused(tmp_path, fmt):
    """pr-price-unused-gpu (by hand, exit 0 as allowed): it was ignored without a word; now a note in the table output
    and `assumptions.unused_prices` (under --format csv only there: stdout and stderr stay what a script reads, as the
    applicability warning), and the pools keep their profile's price."""
    r = run(["-o", str(tmp_path / "o"), *FAST, "--format", fmt, "--price", "h200=3.5"])
    assert r.exit_code == 0, r.output
    note = "note: --price h200=3.5: no pool of this run runs on that GPU (pools: Weak h20, Strong h20), so it is unused"
    if fmt == "table":
        assert note in " ".join(r.stdout.split()), r.stdout
    else:
        _csv(r.stdout)
        assert r.stderr == "", r.stderr
    assumptions = json.loads((tmp_path / "o" / "summary.json").read_text())["assumptions"]
    assert assumptions["unused_prices"] == note.removeprefix("note: ")
    assert assumptions["prices"]["h20"]["source"].startswith("profile:")
    used = run(["-o", str(tmp_path / "o2"), *FAST, "--price", "h20=2"])
    assert "unused" not in used.output
    assert "unused_prices" not in json.loads((tmp_path / "o2" / "summary.json").read_text())["assumptions"]


# -- cases of the same classes beyond the findings file ------------------------------------------------------------------

#: id -> (the file's text, what the one error line must say after the file's name)
BEYOND_TABLES: dict[str, tuple[str, str]] = {
    # a string was shown as the number it spells ("got 0.5"): now quoted
    "accept-a-string": ("[acceptance]\naccept = { read = '0.5' }\n", "acceptance.accept.read: acceptance.accept['read'] must be a "
                        "probability in [0, 1], got '0.5'"),
    "ratio-a-string": ("[acceptance]\nweak_token_ratio = '0.5'\n", "acceptance.weak_token_ratio: acceptance.weak_token_ratio (Weak "
                       "tokens per Strong token) must be a number in (0, 100], got '0.5'"),
    # `fit.logs = 5` beside an interval was a TypeError traceback once intervals were drawn: the fit's entries are checked
    "fit-logs-a-number": ("[acceptance]\n[acceptance.fit]\nlogs = 5\n[acceptance.fit.intervals]\n'accept.read' = [0.1, 0.9]\n",
                          "acceptance.fit.logs: acceptance.fit.logs must be a list of the logs fitted, got 5"),
    "fit-records-a-string": ("[acceptance]\n[acceptance.fit]\nrecords = 'many'\n", "acceptance.fit.records: "),
    "fit-tests-a-number": ("[acceptance]\n[acceptance.fit]\ntests = 5\n", "acceptance.fit.tests: "),
    "interval-of-an-unset-field": ("[acceptance]\n[acceptance.fit.intervals]\n'verify_reasoning_tokens' = [0, 100]\n",
                                   "acceptance.fit.intervals.verify_reasoning_tokens: "),
    "exact-nan": ("[acceptance]\nexact = { read = nan }\n", "acceptance.exact.read: "),
    "tokens-bool": ("[acceptance]\nverdict_tokens = true\n", "acceptance.verdict_tokens: "),
    "calibrated-on-a-number": ("[acceptance]\ncalibrated_on = { weak_model = 3 }\n", "acceptance.calibrated_on: "),
}


@pytest.mark.parametrize("name", BEYOND_TABLES)
def test_more_hand_edited_tables_are_one_line_naming_file_and_key(tmp_path, name):
    text, said = BEYOND_TABLES[name]
    f = tmp_path / "a.toml"
    f.write_text(text)
    line = one_line_error(["--acceptance", str(f), "-o", str(tmp_path / "o"), "--strategies", "specagent", "--draws", "3"])
    assert line.startswith(f"error: --acceptance: {f}: {said}"), line
    assert not (tmp_path / "o").exists()


def test_an_acceptance_file_with_a_bom_is_read_as_a_scenario_file_is(tmp_path):
    """A BOM (Windows editors) was "not valid TOML: Invalid statement (at line 1, column 1)" here, read in a scenario."""
    f = tmp_path / "a.toml"
    f.write_bytes("\ufeff[acceptance]\ncorrelation = 0.1\n".encode("utf-8"))
    r = run(["--acceptance", str(f), "-o", str(tmp_path / "o"), *FAST, "--quiet"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["scenario"]["acceptance"]["correlation"] == 0.1


@pytest.mark.parametrize("target", ["o/summary.json", "o/../o/per_trajectory.parquet", "t.jsonl", "a.toml", "s.toml"],
                         ids=["report-over-summary", "report-over-per-trajectory", "report-over-the-trace",
                              "report-over-the-acceptance-file", "report-over-the-scenario-file"])
def test_a_report_onto_an_output_or_an_input_is_refused_before_the_run(tmp_path, target):
    """`--report OUT/summary.json` replaced the summary just written with the HTML, exit 0 (`report` reads it back);
    `--report` onto an input replaced the input."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes((Path(__file__).resolve().parent.parent / "traces" / "data" / "tau2_airline.jsonl").read_bytes())
    (tmp_path / "a.toml").write_text("[acceptance]\ncorrelation = 0.1\n")
    (tmp_path / "s.toml").write_text("k = 4\n")
    before = {p: p.read_bytes() for p in (trace, tmp_path / "a.toml", tmp_path / "s.toml")}
    line = one_line_error(["-o", str(tmp_path / "o"), *FAST, "--trace", str(trace), "--acceptance", str(tmp_path / "a.toml"),
                           "--scenario", str(tmp_path / "s.toml"), "--report", str(tmp_path / target)])
    what = "one of the inputs" if "/" not in target else "the summary" if "summary" in target else "the per-trajectory file"
    assert line.startswith(f"error: --report {tmp_path / target}: it is {what}") and "Name another file" in line, line
    assert not (tmp_path / "o").exists() and all(p.read_bytes() == b for p, b in before.items())
