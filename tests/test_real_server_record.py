"""The shipped real-server record (measurements/real_server/2026-12-04-cpu-plain/, written by tools/real_server_check.py)
against docs/calibration.md: the held-out table, the leave-one-concurrency-out MAPE, the single loads and the load average
the docs quote are the record's, and the record's fitted engine profile loads and replays the trace to the same prediction;
the three quiet repeats (…-repeat-1..3) against the docs' spread table. No server: only the shipped files."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shlex
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from specagent.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "measurements" / "real_server" / "2026-12-04-cpu-plain"
DOCS = ROOT / "docs" / "calibration.md"
HEADING = "### Checked on the real server: replay vs bench serve of the same trace (2026-12-04)"
runner = CliRunner()


def section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    assert HEADING in text
    body = text.split(HEADING, 1)[1]
    return body.split("\n### ", 1)[0].split("\n## ", 1)[0]


def record() -> dict:
    return json.loads((RECORD / "record.json").read_text())


def signed(x: float, digits: int = 1) -> str:
    """A percentage as the docs write it: +9.4%, −3.8% (a real minus)."""
    return f"{x:+.{digits}f}%".replace("-", "\u2212")


def test_the_docs_table_is_the_records():
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(r"^\| (TTFT|TPOT|ITL|E2E) \| ([\d,.]+) ms \| ([\d,.]+) ms \| (\S+) \|$",
                                                           section(), re.M)}
    table = record()["trace"]["comparison"]
    assert {r["figure"] for r in table} == set(rows) == {"TTFT", "TPOT", "ITL", "E2E"}
    for r in table:
        measured, predicted, error = rows[r["figure"]]
        assert (measured, predicted, error) == (f"{r['measured_ms']:,.1f}", f"{r['predicted_ms']:,.1f}", signed(r["error_pct"])), r


def test_the_figures_are_the_bench_and_replay_outputs():
    """record.json's table is what `bench serve` measured and `replay` predicted, not typed in."""
    rec = record()
    bench = json.loads((RECORD / "trace.0.log").read_text().split("\n", 2)[2].split("\n\n", 1)[0])["levels"][0]
    rep = json.loads((RECORD / "replay.log").read_text().split("\n", 2)[2].split("\n\n", 1)[0])
    got = {r["figure"]: r for r in rec["trace"]["comparison"]}
    for name, m, p in (("TTFT", bench["ttft"]["mean"], rep["mean_ttft_ms"]), ("TPOT", bench["tpot"]["mean"], rep["mean_tpot_ms"]),
                       ("ITL", bench["itl"]["mean"], rep["mean_itl_ms"]), ("E2E", bench["e2el"]["mean"], 1000 * rep["mean_e2e_s"])):
        assert got[name]["measured_ms"] == round(m, 1) and got[name]["predicted_ms"] == round(p, 1), name
        assert got[name]["error_pct"] == round(100 * (p - m) / m, 1), name
    assert rec["trace"]["requests"] == rep["requests"] == bench["completed"] == 12


def test_the_docs_mape_single_loads_and_load_average_are_the_records():
    text = " ".join(section().split())  # the prose wraps anywhere
    mape = record()["validate"]["mape"]
    quoted = "MAPE **" + ", ".join(f"{k.upper()} {100 * mape[k]['mape']:.1f}%" for k in ("tpot", "ttft", "e2e")) + "**"
    assert quoted in text, quoted
    with (RECORD / "validate_rows.csv").open() as f:
        rows = list(csv.DictReader(f))
    one = next(r for r in rows if r["metric"] == "ttft" and float(r["concurrency"]) == 1 and float(r["input_tokens"]) == 287)
    said = (f"{signed(100 * float(one['error']), 0)} ({float(one['measured']):,.0f} ms measured, "
            f"{float(one['predicted']):,.0f} ms predicted)")
    assert said in text, said
    rec = record()
    loads = [x["load_before"][0] for x in rec["measurements"]] + [x["load_after"][0] for x in rec["measurements"]]
    loads += [rec["calibrate"]["load_before"][0], rec["calibrate"]["load_after"][0]]
    assert f"load average {min(loads):.1f}–{max(loads):.1f} during the measurements" in text
    fit = rec["fit"]["values"]
    assert f"bandwidth term (1.25 → {fit['bandwidth']:.2f}) and the per-kernel layer time (15.9 → {fit['kernel_us']:.1f} µs)" in text
    assert f"GEMM efficiency stays at its calibrated {fit['gemm_mfu']:.3f}" in text
    # what the fit could not move is not in the profile as fitted (latency_fit.unmeasured_params)
    assert set(rec["fit"]["not_fitted"]) == {"bandwidth@mi300x", "bandwidth@h20", "gemm_mfu@mi300x", "kernel_us@mi300x"}
    assert "[hardware.h20" not in (RECORD / "smollm2-cpu.toml").read_text()
    with (RECORD / "trace_replay.csv").open() as f:
        trace = list(csv.DictReader(f))
    p, o = ([int(r[k]) for r in trace] for k in ("prompt_tokens", "output_tokens"))
    assert f"{len(trace)} requests of seeded lengths (prompts {min(p)}–{max(p)} tokens, outputs {min(o)}–{max(o)})" in text
    for k in ("python", "torch", "transformers", "fastapi", "uvicorn", "gguf"):
        assert rec["versions"][k].split("+")[0] in text, k


def test_the_record_names_no_path_of_a_machine_and_is_small():
    files = [f for f in RECORD.rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 1_000_000
    for f in files:
        text = f.read_text(errors="replace")
        assert not re.search(r"(?<![\w.<])/(work|home|root|tmp|Users)/", text), f.name


def test_the_fitted_profile_loads_and_replays_the_trace_to_the_recorded_prediction(monkeypatch):
    monkeypatch.chdir(RECORD)  # the record's commands name its own files
    r = runner.invoke(app, ["latency", "engine", "smollm2-cpu.toml", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output[r.output.index("{"):])["id"] == "smollm2-cpu"
    cmd = shlex.split((RECORD / "replay.log").read_text().split("\n", 1)[0].removeprefix("$ specagent "))
    assert cmd[0] == "replay" and "--strong-serving-engine" in cmd and cmd[cmd.index("--strong-serving-engine") + 1] == "smollm2-cpu.toml"
    r = runner.invoke(app, cmd)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    got = {x["figure"]: x["predicted_ms"] for x in record()["trace"]["comparison"]}
    assert round(out["mean_ttft_ms"], 1) == got["TTFT"] and round(out["mean_tpot_ms"], 1) == got["TPOT"]
    assert round(out["mean_e2el_ms"], 1) == got["E2E"]  # the replay's JSON speaks vLLM's keys since issue 51 (ms)


def test_the_fitted_profile_names_the_shipped_fit_data_by_its_hash():
    digest = hashlib.sha256((RECORD / "fit.csv").read_bytes()).hexdigest()
    assert f'dataset_sha256 = "{digest}"' in (RECORD / "smollm2-cpu.toml").read_text()


REPEATS = [ROOT / "measurements" / "real_server" / f"2026-12-04-cpu-plain-repeat-{i}" for i in (1, 2, 3)]


def repeat_records() -> list[dict]:
    return [json.loads((d / "record.json").read_text()) for d in REPEATS]


def test_the_quiet_repeats_table_spans_and_coefficients_are_the_records():
    """The repeats' table row by row, the spans and the coefficients the docs quote, from the three records."""
    text = section()
    flat = " ".join(text.split())
    errors: dict[str, list[float]] = {f: [] for f in ("TTFT", "TPOT", "ITL", "E2E")}
    tpots = []
    for i, rec in enumerate(repeat_records(), start=1):
        c = {x["figure"]: x for x in rec["trace"]["comparison"]}
        m = rec["validate"]["mape"]
        loads = [x["load_before"][0] for x in rec["measurements"]] + [x["load_after"][0] for x in rec["measurements"]]
        loads += [rec["calibrate"]["load_before"][0], rec["calibrate"]["load_after"][0]]
        assert max(loads) < 1.5, loads  # quiet: the server's one thread and nothing else
        row = (f"| [repeat-{i}](../measurements/real_server/2026-12-04-cpu-plain-repeat-{i}/README.md) | "
               f"{min(loads):.1f}–{max(loads):.1f} | {c['TPOT']['measured_ms']:,.1f} ms | "
               + " | ".join(signed(c[f]["error_pct"]) for f in errors)
               + f" | {100 * m['tpot']['mape']:.1f}% / {100 * m['ttft']['mape']:.1f}% / {100 * m['e2e']['mape']:.1f}% |")
        assert row in text, row
        for f in errors:
            errors[f].append(c[f]["error_pct"])
        tpots.append(c["TPOT"]["measured_ms"])
        assert c["TTFT"]["measured_ms"] > 0 and rec["trace"]["requests"] == 12
    for f, name in (("TTFT", "TTFT"), ("TPOT", "TPOT"), ("E2E", "E2E")):
        said = f"{name} {signed(min(errors[f]))} to {signed(max(errors[f]))}"
        assert said in flat, said
    assert all(abs(e) <= 20 for es in errors.values() for e in es)
    loaded = next(x["measured_ms"] for x in record()["trace"]["comparison"] if x["figure"] == "TPOT")
    assert f"{loaded / max(tpots):.1f}–{loaded / min(tpots):.1f}× faster per token" in flat
    ttft_mape = [100 * r["validate"]["mape"]["ttft"]["mape"] for r in repeat_records()]
    assert f"TTFT's held-out MAPE is {min(ttft_mape):.1f}–{max(ttft_mape):.1f}%" in flat
    calibrated = [tomllib.loads((d / "cpu.toml").read_text())["efficiency"]["bandwidth"]["value"] for d in REPEATS]
    fitted = [r["fit"]["values"] for r in repeat_records()]
    assert "bandwidth efficiency came out " + ", ".join(f"{v:.2f}" for v in calibrated[:2]) + f" and {calibrated[2]:.2f}" in flat
    assert "(" + ", ".join(f"{v['bandwidth']:.2f}" for v in fitted) + ")" in flat
    assert "per-kernel layer time came out " + ", ".join(f"{v['kernel_us']:.1f}" for v in fitted[:2]) + f" and {fitted[2]['kernel_us']:.1f} µs" in flat


def test_the_repeats_name_no_path_of_a_machine_and_are_small():
    for d in REPEATS:
        files = [f for f in d.rglob("*") if f.is_file()]
        assert files and sum(f.stat().st_size for f in files) < 1_000_000
        for f in files:
            assert not re.search(r"(?<![\w.<])/(work|home|root|tmp|Users)/", f.read_text(errors="replace")), f


def test_the_docs_bench_compare_block_is_the_commands_output(monkeypatch, tmp_path):
    """docs/calibration.md's `bench compare` block (issue #51): its commands are the record's replay and the bench serve
    output its trace.0.log holds, and the block is what `bench compare` prints on them at 80 columns."""
    body = section()
    sh = body.split("```sh\n", 1)[1].split("```", 1)[0]
    quoted = body.split("specagent bench compare predicted.json measured.json\n```\n\n```text\n", 1)[1].split("```", 1)[0]
    replay_cmd = shlex.split(" ".join(sh.replace("\\\n", " ").splitlines()[0:1]).removeprefix("specagent "))
    assert replay_cmd[-2:] == [">", "predicted.json"]
    assert replay_cmd[:-2] == shlex.split((RECORD / "replay.log").read_text().split("\n", 1)[0].removeprefix("$ specagent "))
    assert "sed -n '3,/^$/p' trace.0.log > measured.json" in sh
    monkeypatch.chdir(RECORD)  # the replay names the record's own files
    r = runner.invoke(app, replay_cmd[:-2])
    assert r.exit_code == 0, r.output
    (tmp_path / "predicted.json").write_text(r.output[r.output.index("{"):])
    log = (RECORD / "trace.0.log").read_text().splitlines(keepends=True)
    (tmp_path / "measured.json").write_text("".join(log[2:log.index("\n", 2) + 1]))  # sed -n '3,/^$/p'
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["bench", "compare", "predicted.json", "measured.json"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert r.output == quoted
    assert "Mean TTFT (ms)                          7352.03      7645.06    -3.8%" in quoted  # the table above, to 0.1%
