"""The findings' "handled well" class `[environment]`, `study sensitivity` ranges and `acceptance calibrate`
(hostile-inputs round of 2026-12-03, 44 of 44), case by case: each refusal is one line naming the file and key (or
the flag) and writes nothing; the cases that run (zero-width ranges, an empty ranges file, fractional token ranges,
K past every segment) are checked by what they compute. The CLI runs in-process on 8 synthetic trajectories."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specagent.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "measurements" / "protocol_figures.csv"
#: the smallest study that runs: 8 synthetic τ²-Bench airline trajectories, no Monte Carlo draws
SENSITIVITY = ["study", "sensitivity", "--synthetic", "tau2_airline", "--trajectories", "8", "--draws", "0"]
runner = CliRunner()


def refused(args: list[str], out: Path) -> str:
    """Exit 2, one `error:` line and nothing else, no traceback, nothing under `out`; the line."""
    r = runner.invoke(app, [*args, "-o", str(out)])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, r.output)
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    assert not out.exists(), f"{out} written on a refusal"
    return lines[0]


def study(args: list[str], out: Path) -> dict:
    """`study sensitivity` that must run: exit 0, its sensitivity.json."""
    r = runner.invoke(app, [*SENSITIVITY, *args, "-o", str(out)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads((out / "sensitivity.json").read_text())


def rows_of(doc: dict, assumption: str) -> list[dict]:
    return [t for t in doc["tornado"] if t["assumption"] == assumption]


# ------------------------------------------------------------------------------------------------ [environment]
#: (id, the [environment] table's body, what the line says after "FILE: ")
ENV_FILES = [
    ("env-file-negative", "user_latency_scale = -1.0",
     "environment.user_latency_scale: environment.user_latency_scale must be a number in [0, 1000], got -1.0"),
    ("env-file-nan", "tool_latency_scale = nan",
     "environment.tool_latency_scale: environment.tool_latency_scale must be a number in [0, 1000], got nan"),
    ("env-file-inf", "user_latency_s = inf",
     "environment.user_latency_s: environment.user_latency_s must be a number of seconds in [0, 604,800], got inf"),
    ("env-file-1e30", "tool_latency_s = 1e30",
     "environment.tool_latency_s: environment.tool_latency_s must be a number of seconds in [0, 604,800], got 1e+30"),
    ("env-file-string", 'user_latency_scale = "fast"',
     "environment.user_latency_scale: environment.user_latency_scale must be a number in [0, 1000], got 'fast'"),
    ("env-file-unknown-key", "user_latency_scael = 1.0",
     "environment.user_latency_scael: unknown field(s) user_latency_scael; known: preset, tool_latency_s, "
     "tool_latency_scale, user_latency_s, user_latency_scale"),
    ("env-file-unknown-preset", 'preset = "moon"', "environment.preset: environment.preset must be one of recorded, none, got 'moon'"),
]


@pytest.mark.parametrize("body,said", [c[1:] for c in ENV_FILES], ids=[c[0] for c in ENV_FILES])
def test_a_bad_environment_in_a_scenario_file_is_one_line_naming_file_and_key(tmp_path, body, said):
    f = tmp_path / "env.toml"
    f.write_text(f"[environment]\n{body}\n")
    assert refused([*SENSITIVITY, "--scenario", str(f)], tmp_path / "o") == f"error: {f}: {said}"


def test_a_misspelt_environment_table_is_one_line_too(tmp_path):
    f = tmp_path / "env.toml"
    f.write_text("[environmnet]\nuser_latency_scale = 2.0\n")
    line = refused([*SENSITIVITY, "--scenario", str(f)], tmp_path / "o")
    assert line.startswith(f"error: {f}: environmnet: unknown scenario field(s) environmnet; known: "), line


def test_the_calibrate_scenarios_take_the_same_check(tmp_path):
    f = tmp_path / "env.toml"
    f.write_text("[environment]\ntool_latency_scale = -2\n")
    line = refused(["acceptance", "calibrate", "-n", "2", "--h20-scenario", str(f)], tmp_path / "o")
    assert line == (f"error: {f}: environment.tool_latency_scale: environment.tool_latency_scale must be a number in "
                    "[0, 1000], got -2"), line


ENV_FLAGS = [
    ("env-flag-negative", ["--user-latency-scale", "-1"],
     "--user-latency-scale: environment.user_latency_scale must be a number in [0, 1000], got -1.0"),
    ("env-flag-nan", ["--tool-latency-scale", "nan"], "--tool-latency-scale: environment.tool_latency_scale must be a number in "
     "[0, 1000], got nan"),
    ("env-flag-inf", ["--user-latency-s", "inf"], "--user-latency-s: environment.user_latency_s must be a number of seconds in "
     "[0, 604,800], got inf"),
    ("env-flag-1e30", ["--tool-latency-s", "1e30"], "--tool-latency-s: environment.tool_latency_s must be a number of seconds in "
     "[0, 604,800], got 1e+30"),
    ("env-flag-string", ["--tool-latency-scale", "fast"], "--tool-latency-scale: Input should be a valid number, unable to parse "
     "string as a number, got 'fast'"),
    ("env-flag-unknown", ["--tool-latency-factor", "2"], "No such option: --tool-latency-factor (Possible options: "
     "--tool-latency-s, --tool-latency-scale)"),
    ("env-flag-unknown-preset", ["--environment", "moon"], "--environment: environment.preset must be one of recorded, none, got 'moon'"),
]


@pytest.mark.parametrize("flags,said", [c[1:] for c in ENV_FLAGS], ids=[c[0] for c in ENV_FLAGS])
def test_a_bad_environment_flag_is_one_line_naming_the_flag(tmp_path, flags, said):
    line = refused([*SENSITIVITY, *flags], tmp_path / "o")
    assert line.startswith(f"error: {said}"), line


# ------------------------------------------------------------------------------------------------ ranges files
#: (id, the ranges file, what the line says after "FILE: "); the scenario's accept.read is 0.41, verdict_tokens 115
RANGES = [
    ("rg-reversed", '[ranges."accept.read"]\nlow = 0.9\nhigh = 0.3\n',
     "ranges.accept.read: expected 0 <= low <= high <= 1, got low 0.9, high 0.3"),
    ("rg-outside-domain", '[ranges."accept.read"]\nlow = 0.3\nhigh = 1.5\n',
     "ranges.accept.read: expected 0 <= low <= high <= 1, got low 0.3, high 1.5"),
    ("rg-outside-domain-tokens", "[ranges.verdict_tokens]\nlow = -10\nhigh = 200\n",
     "ranges.verdict_tokens: expected 0 <= low <= high <= 10,485,760, got low -10, high 200"),
    ("rg-nan", '[ranges."accept.read"]\nlow = nan\nhigh = 0.9\n',
     "ranges.accept.read: expected 0 <= low <= high <= 1, got low nan, high 0.9"),
    ("rg-string", '[ranges."accept.read"]\nlow = "0.3"\nhigh = 0.9\n',
     "ranges.accept.read: expected 0 <= low <= high <= 1, got low '0.3', high 0.9"),
    ("rg-unknown-kind", '[ranges."accept.zzz"]\nlow = 0.3\nhigh = 0.9\n',
     "ranges.accept.zzz: not a numeric field (or table entry) of the acceptance model"),
    ("rg-unknown-parameter", "[ranges.bogus]\nlow = 0.3\nhigh = 0.9\n",
     "ranges.bogus: not a numeric field (or table entry) of the acceptance model"),
    ("rg-bad-shape", '[ranges."accept.read"]\nlow = 0.3\nhigh = 0.9\nshape = "cauchy"\n',
     "ranges.accept.read: shape must be one of uniform, normal, got 'cauchy'"),
    ("rg-entry-not-a-table", '[ranges]\n"accept.read" = 0.5\n', "ranges.accept.read must be a table (low, high, shape, source)"),
    ("rg-no-high", '[ranges."accept.read"]\nlow = 0.3\n', "ranges.accept.read: needs low and high"),
    ("rg-unknown-entry-key", '[ranges."accept.read"]\nlow = 0.3\nhigh = 0.9\nmode = 0.5\n',
     "ranges.accept.read: unknown key(s) mode; expected low, high, shape, source"),
    ("rg-misses-the-value", '[ranges."accept.read"]\nlow = 0.6\nhigh = 0.9\n',
     "ranges.accept.read: the range [0.6, 0.9] must contain the scenario's value 0.41"),
    ("rg-unknown-top-key", "intervals = 3\n", "unknown key(s) intervals; expected source, ranges, points"),
    ("pts-empty", "points = []\n", "points must be a non-empty array of tables ([[points]])"),
    ("pts-mixed-with-ranges", '[[points]]\nposition_decay = 0.9\n[ranges."accept.read"]\nlow = 0.3\nhigh = 0.9\n',
     "give ranges or points, not both"),
    ("pts-mixed-types", "points = [{position_decay = 0.9}, 3]\n", "points[1] must be a table of acceptance fields"),
    ("pts-unknown-field", "[[points]]\nbogus = 0.9\n", "points[0]: unknown acceptance field 'bogus'"),
]


@pytest.mark.parametrize("body,said", [c[1:] for c in RANGES], ids=[c[0] for c in RANGES])
def test_a_bad_ranges_file_is_one_line_naming_file_and_key(tmp_path, body, said):
    f = tmp_path / "r.toml"
    f.write_text(body)
    assert refused([*SENSITIVITY, "--acceptance-ranges", str(f)], tmp_path / "o") == f"error: {f}: {said}"


def test_a_ranges_file_that_is_no_toml_or_no_file_is_one_line(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text("[ranges\n")
    assert refused([*SENSITIVITY, "--acceptance-ranges", str(f)], tmp_path / "o").startswith(f"error: {f}: ")
    gone = tmp_path / "missing.toml"
    line = refused([*SENSITIVITY, "--acceptance-ranges", str(gone)], tmp_path / "o")
    assert line.startswith(f"error: {gone}: no such ranges file"), line


def test_a_zero_width_range_runs_with_both_ends_at_the_value(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text('[ranges."accept.read"]\nlow = 0.41\nhigh = 0.41\n')
    doc = study(["--acceptance-ranges", str(f)], tmp_path / "o")
    rows = rows_of(doc, "accept.read")
    assert len(rows) == 5 and all(r["low_value"] == r["high_value"] == "0.41" for r in rows)
    assert all(r["at_low"] == r["at_high"] == r["base"] and r["swing"] == 0 for r in rows)  # the scenario itself, both ends


def test_an_empty_ranges_file_runs_with_no_acceptance_rows(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text("")
    doc = study(["--acceptance-ranges", str(f)], tmp_path / "o")
    groups = {t["group"] for t in doc["tornado"]}
    # no acceptance range: the tornado keeps the environment and serving rows and Strong reasoning on/off, nothing drawn
    assert "environment" in groups and "serving" in groups
    assert {t["assumption"] for t in doc["tornado"] if t["group"] == "acceptance"} == {"Strong reasoning (thinking)"}


def test_a_fractional_token_range_runs_on_whole_tokens_and_says_which(tmp_path):
    """A whole-token field's fractional end (a fitted interval, a hand-written file) is simulated rounded; the tornado
    labelled it with the fraction it never ran ('10.6' for a run at 11 tokens): it now prints what it ran."""
    frac, whole = tmp_path / "frac.toml", tmp_path / "whole.toml"
    frac.write_text("[ranges.verdict_tokens]\nlow = 10.6\nhigh = 199.7\n")
    whole.write_text("[ranges.verdict_tokens]\nlow = 11\nhigh = 200\n")
    a = rows_of(study(["--acceptance-ranges", str(frac)], tmp_path / "a"), "verdict_tokens")
    b = rows_of(study(["--acceptance-ranges", str(whole)], tmp_path / "b"), "verdict_tokens")
    assert len(a) == 5 and [(r["low_value"], r["high_value"]) for r in a] == [("11", "200")] * 5
    assert [(r["at_low"], r["at_high"]) for r in a] == [(r["at_low"], r["at_high"]) for r in b]
    assert all(r["at_low"] != r["at_high"] for r in a)  # the range moves the result: the check can fail


def test_k_past_every_segment_is_harmless(tmp_path):
    """sens-k-huge (a verdict set by hand): K far past any drafted segment drafts what K at the longest segment drafts."""
    empty = tmp_path / "r.toml"
    empty.write_text("")
    at = {k: study(["--acceptance-ranges", str(empty), "--k", k], tmp_path / f"k{k}")["tornado"] for k in ("2", "4", "1000", "100000")}
    assert at["4"] == at["1000"] == at["100000"]  # no segment of these trajectories drafts past 4 steps
    assert at["2"] != at["4"]  # K does matter below the segments' length: the check can fail


def test_k_past_the_guard_is_one_line(tmp_path):
    line = refused([*SENSITIVITY, "--k", "1000000"], tmp_path / "o")
    assert line == "error: --k: K must be a whole number of steps in [1, 100,000] (the most steps a trajectory has), got 1000000"


# ------------------------------------------------------------------------------------------------ acceptance calibrate
def _figures(**change: str) -> str:
    rows = list(csv.DictReader(io.StringIO(FIGURES.read_text(encoding="utf-8"))))
    rows[0].update(change)
    s = io.StringIO()
    w = csv.DictWriter(s, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return s.getvalue()


CALIBRATE_FLAGS = [
    ("cal-n-0", ["-n", "0"], "--samples: expected a whole number in [1, 100,000], got 0"),
    ("cal-n-negative", ["-n", "-5"], "--samples: expected a whole number in [1, 100,000], got -5"),
    ("cal-n-1e9", ["-n", "1000000000"], "--samples: expected a whole number in [1, 100,000], got 1000000000"),
    ("cal-seed-negative", ["-n", "2", "--seed", "-1"], "--seed: expected a whole number in [0, 2^32), got -1"),
    ("cal-seed-2^32", ["-n", "2", "--seed", str(2**32)], "--seed: expected a whole number in [0, 2^32), got 4294967296"),
    ("cal-api-verify-sends", ["-n", "2", "--api-verify-sends", "everything"],
     "--api-verify-sends: expected one of context, context_uncached, segment, got 'everything'"),
]


@pytest.mark.parametrize("flags,said", [c[1:] for c in CALIBRATE_FLAGS], ids=[c[0] for c in CALIBRATE_FLAGS])
def test_a_bad_calibrate_flag_is_one_line_naming_it(tmp_path, flags, said):
    assert refused(["acceptance", "calibrate", *flags], tmp_path / "o") == f"error: {said}"


#: (id, the figures file's text or None for no file, what the line says after "FILE: ")
CALIBRATE_FIGURES = [
    ("cal-figures-missing", None, "cannot read measurements: no such file"),
    ("cal-figures-empty", "", "line 1: missing columns"),
    ("cal-figures-header-only", FIGURES.read_text(encoding="utf-8").splitlines(keepends=True)[0],
     "no figures (expected one row per published figure)"),
    ("cal-figures-nan", _figures(low="nan"), "line 2: field 'low': expected a finite number, got 'nan'"),
    ("cal-figures-reversed", _figures(low="5"), "line 2: field 'high' (1) is below 'low' (5)"),
]


@pytest.mark.parametrize("text,said", [c[1:] for c in CALIBRATE_FIGURES], ids=[c[0] for c in CALIBRATE_FIGURES])
def test_bad_calibrate_figures_are_one_line_naming_the_file(tmp_path, text, said):
    f = tmp_path / "figures.csv"
    if text is not None:
        f.write_text(text, encoding="utf-8")
    line = refused(["acceptance", "calibrate", "-n", "2", "--figures", str(f)], tmp_path / "o")
    assert line.startswith(f"error: {f}: {said}"), line
