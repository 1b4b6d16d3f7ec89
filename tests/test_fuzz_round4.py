"""The fourth round of hostile inputs and faults (2026-12-07): every case of its findings outside `traces import`, by
its id, plus the mechanisms they asked for (issue #52).

* keys: a planted key in a variable whose name says nothing (`$MYLLM` with --api-key-env MYLLM) and an `sk-` key in
  `$OPENAI_API_KEY`, searched for in every output and file raw, JSON-, URL-, base64- and hex-encoded and as any
  10-character window (`leaks`), over bench serve (hostile servers on 127.0.0.1 ephemeral ports), acceptance measure,
  live and replay;
* outputs: no command writes over one of its inputs, two outputs in one file, or a file the option did not write
  (`GUARDED`: command x option);
* measurements: usage against max_tokens and the streamed chunks, error events and cut streams, TP <= GPUs, each a
  failed request or a refusal, never a CSV row; `latency fit` refusing impossible rows;
* arithmetic: rates, timestamps and prices bounded where they enter; strict JSON;
* bounded work: dataset lengths capped; SIGTERM kept like ^C; fits at the edge of their range say so.

The case ids are the findings file's; docs/reliability.md maps each to its test here.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402
from hostile_server import StreamServer  # noqa: E402

from specagent.cli.app import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "tests" / "fixtures" / "datasets"
SPECAGENT = str(Path(sys.executable).with_name("specagent"))
#: an sk-shaped key (in $OPENAI_API_KEY) and one of no recognisable shape (in $MYLLM, a name the redactor's
#: KEY/TOKEN/SECRET patterns do not match), as the findings planted them
SECRET = "sk-planted-5f1c9e0b7a2d4c8e9f3a6b1d0e7c2a4b"
SECRET2 = "Zq7vK2pLm9XwR4tB8nYc3HdF6s"
ENV = {"OPENAI_API_KEY": SECRET, "MYLLM": SECRET2}
runner = CliRunner()


def encodings(secret: str) -> set[str]:
    raw = secret.encode()
    return {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
            base64.b64encode(raw).decode().rstrip("="), base64.urlsafe_b64encode(raw).decode().rstrip("="), raw.hex(),
            raw.hex().upper()}


def pieces(secret: str, width: int = 10) -> set[str]:
    """Every encoding of the key and every `width`-character window of each: no part of a key either."""
    return {e[i:i + width] for e in encodings(secret) for i in range(len(e) - width + 1)}


def leaks(*texts: str, folder: Path | None = None, secrets: tuple[str, ...] = (SECRET, SECRET2)) -> list[str]:
    """Where any piece of a planted key occurs: in the texts, or in any file under `folder` (bytes, and the text)."""
    found = []
    for secret in secrets:
        ps = pieces(secret)
        found += [f"output {i}: {p!r}" for i, t in enumerate(texts) for p in ps if p in (t or "")]
        for f in (folder.rglob("*") if folder is not None else ()):
            if f.is_file():
                data = f.read_bytes()
                found += [f"{f}: {p!r}" for p in ps if p.encode() in data]
    return sorted(set(found))


def invoke(argv: list[str], env: dict[str, str] | None = None, bound_s: float = 120) -> tuple[int, str]:
    """Exit code and output (stdout and stderr together) of one in-process run, failing rather than hanging."""
    box: list = []
    t = threading.Thread(target=lambda: box.append(runner.invoke(app, argv, env={**ENV, **(env or {})})), daemon=True)
    t.start()
    t.join(bound_s)
    assert not t.is_alive(), f"still running after {bound_s} s: {argv}"
    r = box[0]
    return r.exit_code, r.output + (repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else "")


def error_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out, out
    return lines[0]


# ================================================================================================ bench serve
def bench(url: str, d: Path, *extra: str) -> list[str]:
    """The findings' command line: two 8-word prompts asking for 4 tokens, --csv m.csv --requests-out r.jsonl."""
    return ["bench", "serve", "--base-url", url, "--model", "m", "--num-prompts", "2", "--input-len", "8", "--output-len",
            "4", "--warmup", "0", "--timeout", "3", "--csv", str(d / "m.csv"), "--requests-out", str(d / "r.jsonl"), *extra]


def requests_of(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "r.jsonl").read_text().splitlines()]


def test_an_honest_stream_is_measured_and_nothing_leaks(tmp_path):
    """The base case the hostile ones differ from: exit 0, one CSV row, two requests, no key anywhere."""
    with StreamServer() as s:
        code, out = invoke(bench(s.url, tmp_path, "--api-key-env", "MYLLM", "--json"))
        assert s.auth_seen == [f"Bearer {SECRET2}"] * 2
    assert code == 0, out
    assert [r["ok"] for r in requests_of(tmp_path)] == [True, True]
    assert len((tmp_path / "m.csv").read_text().splitlines()) == 2
    assert not leaks(out, folder=tmp_path)


# -- K1, K2: the server's texts ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case, mode, key_env, shown", [
    ("bs-model-echo-openai", "model_echo", None, "the server answered as m-Bearer "),
    ("bs-model-echo-myllm", "model_echo", "MYLLM", "the server answered as m-Bearer "),
    ("bs-models-echo-openai", "models_echo", None, "is not among the models the server lists (served-for-Bearer "),
    ("bs-version-echo-openai", "version_echo", None, None),
    ("bs-version-echo-myllm", "version_echo", "MYLLM", None),
    ("bs-malformed-echo-myllm", "malformed_echo", "MYLLM", None),
])
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_bench_serve_masks_every_text_the_server_sends(tmp_path, case, mode, key_env, shown, as_json):
    """K1/K2: the stream's model field, a /v1/models id, the /version string and a quoted bad event echo the
    Authorization header; none of the key (either variable) reaches the warning, --json, --requests-out or the CSV's
    engine_version, and a quote is masked before it is cut (19 of 26 characters survived before)."""
    with StreamServer(mode) as s:
        argv = bench(s.url, tmp_path, *(["--api-key-env", key_env] if key_env else []), *(["--json"] if as_json else []))
        code, out = invoke(argv)
        key = SECRET2 if key_env else SECRET
        assert s.auth_seen and all(a == f"Bearer {key}" for a in s.auth_seen)  # the key did reach the server
    assert not leaks(out, folder=tmp_path), leaks(out, folder=tmp_path)
    assert "Traceback" not in out
    if mode == "malformed_echo":
        assert code == 3 and all("a streamed event is not JSON: " + "p" * 60 in r["error"] for r in requests_of(tmp_path))
        return
    assert code == 0, out
    if shown:
        assert shown in " ".join(out.split()), out
    if mode == "version_echo":
        row = (tmp_path / "m.csv").read_text().splitlines()[1]
        assert "0.9.9 (Bearer " in row, row


# -- S1, S2: answers that contradict their request, error events, cut streams -----------------------------------------
@pytest.mark.parametrize("case, mode, why", [
    ("bs-usage-high", "usage_high", "usage.completion_tokens 10,000,000 is more than the max_tokens 4 asked"),
    ("bs-usage-zero", "usage_zero", "usage.completion_tokens 0 is fewer than the 4 content chunks streamed"),
    ("bs-usage-one", "usage_one", "usage.completion_tokens 1 is fewer than the 4 content chunks streamed"),
    ("bs-usage-prompt-zero", "prompt_zero", "usage.prompt_tokens 0 for a prompt of 9 words"),
    ("bs-usage-prompt-huge", "prompt_huge", "usage.prompt_tokens 10,000,000 for a prompt of"),
    ("bs-million-chunks-over-max", "million_chunks", "more than 4 content chunks streamed for max_tokens 4"),
    ("bs-error-event-mid", "error_mid", "the server reported an error mid-stream (CUDA out of memory"),
    ("bs-error-event-typed", "error_typed", "the server reported an error mid-stream (CUDA out of memory"),
    ("bs-truncated-clean-close", "cut_clean", "the stream was cut (the connection closed with neither a finish_reason nor [DONE]"),
])
def test_an_answer_that_cannot_be_right_is_a_failed_request_never_a_csv_row(tmp_path, case, mode, why):
    """S1/S2: each request fails with its reason (in --requests-out and the notes); no serving_latency.csv row is
    built on it, so `latency fit` never reads a 2.4e9 tok/s row; exit 3 (nothing completed)."""
    with StreamServer(mode) as s:
        code, out = invoke(bench(s.url, tmp_path, "--timeout", "60"))
    assert code == 3 and "no request completed" in out and "Traceback" not in out, out
    errors = [r["error"] for r in requests_of(tmp_path)]
    assert len(errors) == 2 and all(why in e for e in errors), errors
    assert not (tmp_path / "m.csv").exists()
    assert "note: 2 request(s) failed: " in out and "stopped at max_tokens" not in out, out


def test_one_contradicting_answer_among_honest_ones_is_kept_out_of_the_row(tmp_path):
    """A failing request is reported and left out of the row's figures; the others make the row."""
    from specagent.endpoints import bench as b

    res = b.RequestResult(0, 8, 4, chunks=4, output_tokens=10_000_000, usage_reported=True, prompt_tokens=9)
    with pytest.raises(b.Contradiction, match="more than the max_tokens 4"):
        b.check_answer(res, "Continue this text for as long as you can: the of", 4)
    ok = b.RequestResult(1, 8, 4, chunks=4, output_tokens=4, usage_reported=True, prompt_tokens=9)
    b.check_answer(ok, "Continue this text for as long as you can: the of", 4)  # nothing raised


# -- S3, H1: facts and requests outside bench serve's own bounds -------------------------------------------------------
def test_bs_tp_gt_gpus_is_refused_before_any_request(tmp_path):
    with StreamServer() as s:
        code, out = invoke(bench(s.url, tmp_path, "--gpus", "1", "--tp", "8"))
        sent = len(s.auth_seen)
    assert code == 2 and "--tp 8" in error_line(out) and "--gpus is 1" in out and sent == 0, out
    assert not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize("case, line, field", [("bs-dataset-input-1e12", "1000000000000,4", "input_tokens"),
                                               ("bs-dataset-output-1e30", "8,1e30", "output_tokens")])
def test_a_dataset_line_past_the_flags_bound_is_refused_at_its_line(tmp_path, case, line, field):
    """H1 and S3: the bound --input-len and --output-len have (10,485,760) holds for a dataset's lines too: refused at
    once, naming the line and the field (a 10^12-token prompt was built word by word: 2.2 GB at 60 s)."""
    ds = tmp_path / "ds.csv"
    ds.write_text(f"input_tokens,output_tokens\n{line}\n")
    with StreamServer() as s:
        t0 = time.monotonic()
        code, out = invoke(bench(s.url, tmp_path, "--dataset", str(ds), "--num-prompts", "5"), bound_s=30)
        took, sent = time.monotonic() - t0, len(s.auth_seen)
    msg = error_line(out)
    assert code == 2 and "line 2" in msg and field in msg and "10,485,760" in msg and sent == 0, out
    assert took < 30


# -- L1: outputs over inputs or over each other ------------------------------------------------------------------------
def test_bs_out_requests_equals_csv_is_refused_and_the_earlier_rows_kept(tmp_path):
    with StreamServer() as s:
        assert invoke(bench(s.url, tmp_path))[0] == 0  # m.csv now holds an earlier serving-latency row
        before = (tmp_path / "m.csv").read_bytes()
        sent = len(s.auth_seen)
        argv = bench(s.url, tmp_path)
        argv[argv.index("--requests-out") + 1] = str(tmp_path / "m.csv")
        code, out = invoke(argv)
        assert len(s.auth_seen) == sent  # refused before any request
    assert code == 2 and "two outputs cannot share one file" in error_line(out), out
    assert (tmp_path / "m.csv").read_bytes() == before


@pytest.mark.parametrize("case, flag", [("bs-out-requests-equals-dataset", "--requests-out"), ("note-dataset-is-csv", "--csv")])
def test_an_output_over_the_dataset_is_refused_before_the_run(tmp_path, case, flag):
    """`--requests-out ds.csv` replaced the dataset; `--csv ds.csv` was refused only after the whole run (and its
    measurements dropped): both are refused before the first request now, the dataset kept."""
    ds = tmp_path / "ds.csv"
    ds.write_text("input_tokens,output_tokens\n8,4\n8,4\n")
    before = ds.read_bytes()
    with StreamServer() as s:
        argv = bench(s.url, tmp_path, "--dataset", str(ds))
        argv[argv.index(flag) + 1] = str(ds)
        code, out = invoke(argv)
        sent = len(s.auth_seen)
    assert code == 2 and "it is one of the inputs (--dataset" in error_line(out) and sent == 0, out
    assert ds.read_bytes() == before


def test_requests_out_over_a_file_it_did_not_write_is_refused_and_a_rerun_replaces_its_own(tmp_path):
    (tmp_path / "notes.txt").write_text("my notes\n")
    with StreamServer() as s:
        argv = bench(s.url, tmp_path)
        argv[argv.index("--requests-out") + 1] = str(tmp_path / "notes.txt")
        code, out = invoke(argv)
        assert code == 2 and "is not a bench serve --requests-out file" in error_line(out), out
        assert (tmp_path / "notes.txt").read_text() == "my notes\n"
        assert invoke(bench(s.url, tmp_path))[0] == 0
        assert invoke(bench(s.url, tmp_path))[0] == 0  # its own earlier output: replaced; the CSV: appended
    assert len(requests_of(tmp_path)) == 2 and len((tmp_path / "m.csv").read_text().splitlines()) == 3


# -- notes: SIGTERM ----------------------------------------------------------------------------------------------------
def test_sigterm_keeps_what_finished_as_ctrl_c_does(tmp_path):
    """SIGTERM (what `timeout`, CI runners and schedulers send) part-way through: the finished request is written to
    the CSV and --requests-out, the notes say SIGTERM, and the exit status is 143 (^C: 130)."""
    with ChatServer() as s:
        s.hold_after = 1  # the first request is answered, every later one held
        argv = [SPECAGENT, "bench", "serve", "--base-url", s.url, "--model", "weak-test", "--num-prompts", "3",
                "--input-len", "8", "--output-len", "4", "--warmup", "0", "--max-concurrency", "1", "--timeout", "60",
                "--csv", str(tmp_path / "m.csv"), "--requests-out", str(tmp_path / "r.jsonl")]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV})
        deadline = time.monotonic() + 60
        while sum(s.answered.values()) < 1 or s.received < 2:  # one answered, the next one held at the server
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, errs = p.communicate(timeout=60)
    assert p.returncode == 143, (out, errs)
    assert "interrupted: the figures are those of the requests that finished before SIGTERM" in " ".join(errs.split()), errs
    assert [r["ok"] for r in requests_of(tmp_path)] == [True]
    assert "interrupted by SIGTERM" in (tmp_path / "m.csv").read_text()


# ================================================================================================ replay and datasets
REPLAY = ["--strong-model", "meta-llama/Llama-3.1-8B", "--strong-hardware", "h20"]


def replay(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["replay", *args, *REPLAY], env=ENV)
    return r.exit_code, r.output + (repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else "")


def strict_json(text: str) -> dict:
    """stdout's JSON document, parsed strictly: NaN and Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text[text.index("{"):text.rindex("}") + 1], parse_constant=refuse)


@pytest.fixture
def trace_csv(tmp_path) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,20\n0.5,200,40\n1.0,50,8\n")
    return p


# -- L1 ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case, name", [("rp-out-is-trace", "t.csv"), ("rp-out-is-dataset", "c.jsonl")])
def test_replay_refuses_an_output_that_is_its_trace(tmp_path, case, name):
    src = DATASETS / "custom.jsonl" if name == "c.jsonl" else None
    p = tmp_path / name
    p.write_bytes(src.read_bytes() if src else b"arrival_s,prompt_tokens,output_tokens\n0,100,20\n0.5,200,40\n")
    before = p.read_bytes()
    extra = ["--request-rate", "2"] if src else []
    code, out = replay(str(p), *extra, "-o", str(p))
    assert code == 2 and "it is one of the inputs (TRACE" in error_line(out), out
    assert p.read_bytes() == before


def test_replay_refuses_an_output_that_is_not_parquet_and_replaces_its_own(tmp_path, trace_csv):
    other = tmp_path / "other.csv"
    other.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n")
    code, out = replay(str(trace_csv), "-o", str(other), "--format", "json")
    assert code == 2 and "is not Apache Parquet" in error_line(out), out
    assert other.read_text() == "arrival_s,prompt_tokens,output_tokens\n0,1,1\n"
    o = tmp_path / "o.parquet"
    assert replay(str(trace_csv), "-o", str(o), "--format", "json")[0] == 0
    assert replay(str(trace_csv), "-o", str(o), "--format", "json")[0] == 0  # a rerun replaces its own output


# -- S4, S5: arrivals and prices bounded where they enter; strict JSON -------------------------------------------------
@pytest.mark.parametrize("case, rate", [("rp-rate-1e-320", "1e-320"), ("rp-rate-5e-324", "5e-324"), ("rp-rate-1e-300", "1e-300")])
def test_a_rate_with_no_finite_schedule_is_refused(tmp_path, case, rate):
    """1e-320 gave gaps of inf, arrivals NaN and a mean E2E of -6e33 s; 1e-300 put requests 1e300 s apart, where a float
    cannot hold a service time (E2E 0.0). Refused in one line naming the rate, nothing written."""
    o = tmp_path / "o.parquet"
    code, out = replay(str(DATASETS / "custom.jsonl"), "--format", "json", f"--request-rate={rate}", "-o", str(o))
    msg = error_line(out)
    assert code == 2 and "--request-rate" in msg and "1e+09 s" in msg and "RuntimeWarning" not in out, out
    assert not o.exists()


def test_a_rate_whose_draw_spans_past_the_clock_is_refused(tmp_path):
    """A rate just above the bound, but too many requests for it: the draw spans past 1e9 s, refused too."""
    code, out = replay(str(DATASETS / "custom.jsonl"), "--format", "json", "--request-rate=1.5e-9")
    assert code == 2 and "would arrive over" in error_line(out), out


@pytest.mark.parametrize("case, starts, where", [
    ("ds-result-start-extreme", [-1e308, 1e308, 2, 3, 4], "request 3"),  # sorted by send time: 3 is 1e308 after -1e308
    ("ds-result-start-1e300", [0, 1, 2, 3, 1e300], "request 4"),
])
def test_a_saved_result_with_start_times_no_clock_holds_is_refused_naming_the_request(tmp_path, case, starts, where):
    doc = json.loads((DATASETS / "vllm_result.json").read_text())
    doc["start_times"] = starts  # request 2 failed (dropped, as vLLM's own reader drops it)
    p = tmp_path / "res.json"
    p.write_text(json.dumps(doc))
    o = tmp_path / "o.parquet"
    code, out = replay(str(p), "--format", "json", "-o", str(o))
    msg = error_line(out)
    assert code == 2 and where in msg and "arrival_s" in msg and "RuntimeWarning" not in out, out
    assert not o.exists()


def test_rp_json_unpriced_is_strict_json_with_nulls_and_a_note(tmp_path, trace_csv):
    from specagent.hardware.profile import load_hardware

    text = Path(load_hardware("h20").path).read_text(encoding="utf-8")
    free = tmp_path / "fzfree.toml"
    free.write_text(text[:text.index("[price]")].replace('id = "h20"', 'id = "fzfree"')
                    .replace('aliases = ["h20", "h20-96gb", "nvidia-h20"]', 'aliases = []'), encoding="utf-8")
    r = runner.invoke(app, ["replay", str(trace_csv), "--format", "json", "--strong-model", "meta-llama/Llama-3.1-8B",
                            "--strong-hardware", str(free)])
    assert r.exit_code == 0, r.output
    doc = strict_json(r.output)
    assert doc["usd_per_hour"] is None and doc["usd_per_1k_requests"] is None and doc["gpus"] >= 1
    assert any("no price" in n for n in doc["notes"]), doc["notes"]
    table = runner.invoke(app, ["replay", str(trace_csv), "--strong-model", "meta-llama/Llama-3.1-8B", "--strong-hardware",
                                str(free)])
    assert table.exit_code == 0 and "nan" not in table.output.lower(), table.output


def test_rp_json_output_1_is_strict_json_with_nulls_and_a_note(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,1\n0.5,200,1\n")
    code, out = replay(str(p), "--format", "json")
    assert code == 0, out
    doc = strict_json(out)
    assert doc["mean_tpot_ms"] is None and doc["p99_itl_ms"] is None and doc["mean_ttft_ms"] > 0
    assert any("one output token" in n for n in doc["notes"]), doc["notes"]
    code, out = replay(str(p))
    assert code == 0 and "nan" not in out.lower() and "Mean TPOT (ms):                          -\n" in out, out  # '-': bench serve's absent figure


@pytest.mark.parametrize("command", ["replay", "plan", "predict"])
def test_rp_json_price_1e308_and_pl_price_1e308_are_refused_at_the_flag(trace_csv, command):
    """A price past the profiles' own guard ($10,000/GPU-hour) is refused in one line by every command with --price:
    it made replay's JSON hold Infinity and plan's table '$inf/task'."""
    argv = {"replay": ["replay", str(trace_csv), "--format", "json", *REPLAY],
            "plan": ["plan", "--rate", "1/s", "--tasks", "50", "--strategy", "strongonly", "--draws", "0", "--format", "json",
                     "--gpu", "h20"],
            "predict": ["predict", "--draws", "0", "--format", "json"]}[command]
    r = runner.invoke(app, [*argv, "--price", "h20=1e308"])
    msg = error_line(r.output)
    assert r.exit_code == 2 and "--price" in msg and "10,000" in msg, r.output


def test_pl_price_other_gpu_says_the_price_is_unused():
    r = runner.invoke(app, ["plan", "--rate", "1/s", "--tasks", "50", "--strategy", "strongonly", "--draws", "0", "--format",
                            "json", "--gpu", "h20", "--price", "h200=3", "--workers", "1"])
    assert r.exit_code == 0, r.output
    doc = strict_json(r.output)
    assert any("--price h200=3: no pool of this plan runs on that GPU" in n for n in doc["notes"]), doc["notes"]


# -- S6: two spellings of one field ------------------------------------------------------------------------------------
@pytest.mark.parametrize("case, head, row", [
    ("ds-csv-two-prompt-columns", "arrival_s,prompt_tokens,input_tokens,output_tokens", ["0,10,5000,5", "1,10,5000,5"]),
    ("ds-csv-two-arrival-columns", "time,timestamp,prompt_tokens,output_tokens", ["0,0,10,5", "1,3600,10,5"]),
])
def test_a_csv_with_two_columns_for_one_field_is_refused_naming_both(tmp_path, case, head, row):
    p = tmp_path / "t.csv"
    p.write_text("\n".join([head, *row]) + "\n")
    code, out = replay(str(p), "--format", "json")
    msg = error_line(out)
    cols = head.split(",")[:3] if "prompt_tokens,input" in head else ["time", "timestamp"]
    assert code == 2 and "header" in msg and all(c in msg for c in cols if c != "arrival_s"), out


def test_replay_masks_a_planted_key_that_a_dataset_quotes(tmp_path):
    """replay prints text from its input (the notes name the dataset file): a file named after a key never gets the key
    printed, in the table or the JSON."""
    d = tmp_path / "k"
    d.mkdir()
    p = d / f"c-{SECRET}.jsonl"
    p.write_bytes((DATASETS / "custom.jsonl").read_bytes())
    for fmt in ("table", "json"):
        code, out = replay(str(p), "--format", fmt, "--request-rate", "2", "-o", str(d / "o.parquet"))
        assert code == 0 and "custom dataset" in out and "c-sk-" in out, out
        assert not leaks(out, secrets=(SECRET,)), leaks(out, secrets=(SECRET,))


# ================================================================================================ latency fit, explain
SERVING = ROOT / "measurements" / "serving_latency.csv"


def serving_copy(tmp_path: Path, **first_row: str) -> Path:
    """The shipped serving_latency.csv with fields of its first data row (line 2) replaced."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(SERVING.read_text(encoding="utf-8"))))
    rows[0].update(first_row)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "s.csv"
    p.write_text(buf.getvalue(), encoding="utf-8")
    return p


@pytest.mark.parametrize("case, extra", [("lf-out-is-data", []), ("lf-engine-id-out-is-data", ["--engine-id", "mine",
                                                                                              "--base-engine", "vllm"])])
def test_latency_fit_refuses_an_output_that_is_its_data(tmp_path, case, extra):
    s = serving_copy(tmp_path)
    before = s.read_bytes()
    r = runner.invoke(app, ["latency", "fit", "--data", str(s), *extra, "-o", str(s)])
    assert r.exit_code == 2 and "it is one of the inputs (--data" in error_line(r.output), r.output
    assert s.read_bytes() == before


def test_latency_outputs_over_files_they_did_not_write_are_refused(tmp_path):
    s = serving_copy(tmp_path)
    mine = tmp_path / "engine.toml"
    mine.write_text('id = "mine"\n')  # a hand-written profile: not what -o writes
    r = runner.invoke(app, ["latency", "fit", "--data", str(s), "-o", str(mine)])
    assert r.exit_code == 2 and "is not a TOML file `specagent latency fit` wrote" in error_line(r.output), r.output
    assert mine.read_text() == 'id = "mine"\n'
    r = runner.invoke(app, ["latency", "validate", "--data", str(s), "--no-holdout", "--figure", str(s)])
    assert r.exit_code == 2 and "it is one of the inputs (--data" in error_line(r.output), r.output
    r = runner.invoke(app, ["latency", "validate", "--data", str(s), "--no-holdout", "--rows", str(tmp_path / "x.csv"),
                            "--figure", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "two outputs cannot share one file" in error_line(r.output), r.output


@pytest.mark.parametrize("case, field, value, says", [
    ("lf-tpot-1e300", "tpot_ms", "1e300", "field 'tpot_ms' is 1e+300, past 604,800,000 ms"),
    ("lf-tp-gt-gpus", "tp", "8", "field 'tp' is 8, more than the 1 GPU(s) of one replica"),
    ("lf-bench-tp8-gpus1", "tp", "8", "field 'tp' is 8, more than the 1 GPU(s) of one replica"),
    ("lf-throughput-2.4e9", "output_throughput_tok_s", "2.4e9", "past 100,000,000 tokens/s"),
    ("lf-ttft-after-e2e", "e2e_latency_ms", "10", "is more than 'e2e_latency_ms'"),
    ("lf-tpot-zero", "tpot_ms", "0", "field 'tpot_ms' is 0"),
])
def test_latency_fit_refuses_a_row_no_server_produced_naming_its_line(tmp_path, case, field, value, says):
    """S9: the row is refused in one line naming line 2 (it moved the coefficients: rows_used 224). lf-bench-tp8-gpus1 is
    the row `bench serve --gpus 1 --tp 8` wrote; bench serve now refuses that flag pair itself (bs-tp-gt-gpus)."""
    s = serving_copy(tmp_path, **{field: value})
    r = runner.invoke(app, ["latency", "fit", "--data", str(s), "-o", str(tmp_path / "fit.toml")])
    msg = error_line(r.output)
    assert r.exit_code == 2 and "line 2" in msg and says in msg, r.output
    assert not (tmp_path / "fit.toml").exists()


def test_lf_statistic_p99_is_not_fitted_as_a_mean_and_says_so(tmp_path):
    s = serving_copy(tmp_path, statistic="p99")
    r = runner.invoke(app, ["latency", "fit", "--data", str(s), "-o", str(tmp_path / "fit.toml"), "--json"])
    assert r.exit_code == 0, r.output
    first = SERVING.read_text().splitlines()[1].split(",")[0]
    assert f"note: line 2, row {first}: not fitted: statistic 'p99'" in r.output, r.output
    doc = strict_json(r.output[r.output.index("{"):])
    shipped = runner.invoke(app, ["latency", "fit", "--data", str(serving_copy(tmp_path)), "-o", str(tmp_path / "f2.toml"),
                                  "--json"])
    assert doc["provenance"]["rows_used"] == strict_json(shipped.output)["provenance"]["rows_used"] - 1


@pytest.mark.parametrize("case, flag", [("ex-figure-is-scenario", "--scenario"), ("ex-figure-is-acceptance", "--acceptance")])
def test_explain_refuses_a_figure_over_its_inputs(tmp_path, case, flag):
    p = tmp_path / ("s.toml" if flag == "--scenario" else "acc.toml")
    if flag == "--scenario":
        p.write_text("seed = 0\n")
    else:
        r = runner.invoke(app, ["acceptance", "fit", str(ROOT / "traces" / "data" / "verdict_log_simulated.jsonl"), "-o", str(p)])
        assert r.exit_code == 0, r.output
    before = p.read_bytes()
    r = runner.invoke(app, ["explain", flag, str(p), "--figure", str(p), "--no-counterfactuals"])
    assert r.exit_code == 2 and f"it is one of the inputs ({flag} {p})" in error_line(r.output), r.output
    assert p.read_bytes() == before


# ================================================================================================ acceptance fit edges
def _verdicts(tasks: int = 10, each: int = 10) -> str:
    """Tasks that always accept (even) or never accept (odd): one-step reads at positions 0, 1, ... of each task."""
    lines = []
    for t in range(tasks):
        ok = t % 2 == 0
        for j in range(each):
            lines.append(json.dumps({
                "schema": "specagent.verdict/1", "task": f"t{t}", "position": j,
                "drafted": [{"kind": "read", "name": "r", "tokens": 30, "reference_tokens": 40}], "ended_by": "end",
                "accepted_prefix": 1 if ok else 0, "verdict_tokens": 20 if ok else 60, "verify_reasoning_tokens": 0,
                "thinking": False, "replacement_offered": False, "replacement_valid": None,
                "repair_tokens": None if ok else 40, "repair_reasoning_tokens": None if ok else 0, "source": "hand-made"}))
    return "\n".join(lines) + "\n"


def test_a_fit_that_ends_at_the_edge_of_a_range_says_so(tmp_path):
    """Notes: tasks that always or never accept gave task_sd = 6.0 [4.51, 6] and correlation = 1.0, the ends of their
    ranges, reported as estimates. Each is now said to be at the edge, in the table, the JSON and the TOML's fit record."""
    log = tmp_path / "v.jsonl"
    log.write_text(_verdicts())
    r = runner.invoke(app, ["acceptance", "fit", str(log), "-o", str(tmp_path / "a.toml")])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "note: task_sd = 6 is the upper end of its search range" in flat, r.output
    assert "note: correlation = 1 is the edge of its range [0, 1]" in flat, r.output
    doc = strict_json(runner.invoke(app, ["acceptance", "fit", str(log), "--json"]).output)
    assert set(doc["at_edge"]) >= {"task_sd", "correlation"}, doc.get("at_edge")
    assert "at_edge" in (tmp_path / "a.toml").read_text()


def test_a_fit_inside_its_ranges_says_nothing_of_edges(tmp_path):
    r = runner.invoke(app, ["acceptance", "fit", str(ROOT / "traces" / "data" / "verdict_log_simulated.jsonl"), "--json"])
    assert r.exit_code == 0 and "at_edge" not in strict_json(r.output), r.output


# ================================================================================================ the output guard, by command
def _small_trace(p: Path) -> Path:
    from specagent.traces.io import default_workload_path, load_trajectories, save_trajectories

    save_trajectories(load_trajectories(default_workload_path())[:2], p)
    return p


def _summary(p: Path) -> Path:
    d = p.parent / "pred-src"
    r = runner.invoke(app, ["predict", "--trace", str(_small_trace(p.parent / "src.jsonl")), "--strategies",
                            "strongonly,specagent", "--draws", "0", "-o", str(d)])
    assert r.exit_code == 0, r.output
    p.write_bytes((d / "summary.json").read_bytes())
    return p


def _toml(p: Path) -> Path:
    p.write_text("seed = 0\n")
    return p


def _log(p: Path) -> Path:
    p.write_bytes((ROOT / "traces" / "data" / "verdict_log_simulated.jsonl").read_bytes())
    return p


def _tau2(p: Path) -> Path:
    p.write_bytes((ROOT / "traces" / "data" / "tau2_airline_sample.json").read_bytes())
    return p


#: (id, the input's name, how it is made, argv with {in} (the input) and {dir} (its folder), what the error names)
GUARDED = [
    ("predict -o (a file it writes is the --trace)", "per_trajectory.parquet", _small_trace,
     ["predict", "--trace", "{in}", "--draws", "0", "-o", "{dir}"], "one of the inputs (--trace"),
    ("predict --report over --trace", "t.jsonl", _small_trace,
     ["predict", "--trace", "{in}", "--draws", "0", "-o", "{dir}/p", "--report", "{in}"], "one of the inputs"),
    ("predict --report over --scenario", "s.toml", _toml,
     ["predict", "--scenario", "{in}", "--draws", "0", "-o", "{dir}/p", "--report", "{in}"], "one of the inputs"),
    ("simulate -o over --trace", "t.parquet", _small_trace, ["simulate", "specagent", "--trace", "{in}", "-o", "{in}"],
     "one of the inputs (--trace"),
    ("predictor validate -o over --trace", "t.jsonl", _small_trace,
     ["predictor", "validate", "--trace", "{in}", "--synthetic", "0", "--strategies", "specagent", "-o", "{in}"],
     "one of the inputs (--trace"),
    ("explain --figure over --trace", "t.jsonl", _small_trace,
     ["explain", "--trace", "{in}", "--no-counterfactuals", "--figure", "{in}"], "one of the inputs (--trace"),
    ("report -o over RESULTS", "summary.json", _summary, ["report", "{in}", "-o", "{in}", "--no-images"],
     "one of the inputs (RESULTS"),
    ("acceptance fit -o over LOGS", "v.jsonl", _log, ["acceptance", "fit", "{in}", "-o", "{in}"], "one of the inputs (LOGS"),
    ("study sensitivity -o (a file it writes is the --scenario)", "sensitivity.json", _toml,
     ["study", "sensitivity", "--scenario", "{in}", "-o", "{dir}"], "one of the inputs (--scenario"),
    ("plan --out (a file it writes is the --scenario)", "plan.json", _toml,
     ["plan", "--rate", "1/s", "--tasks", "20", "--strategy", "strongonly", "--gpu", "h20", "--scenario", "{in}", "--out",
      "{dir}"], "one of the inputs (--scenario"),
    ("live -o (a file it writes is the --trace)", "protocol_log.jsonl", _small_trace,
     ["live", "--trace", "{in}", "-o", "{dir}", "--weak-url", "http://127.0.0.1:9/v1", "--weak-model", "w", "--strong-url",
      "http://127.0.0.1:9/v1", "--strong-model", "s"], "one of the inputs (--trace"),
    ("acceptance measure -o (a file it writes is TRACE)", "summary.json", _tau2,
     ["acceptance", "measure", "{in}", "-o", "{dir}", "--weak-url", "http://127.0.0.1:9/v1", "--weak-model", "w",
      "--strong-url", "http://127.0.0.1:9/v1", "--strong-model", "s", "--yes"], "one of the inputs (TRACE"),
    ("calibrate --acceptance-out and --edge-acceptance-out in one file", "a.toml", _toml,
     ["acceptance", "calibrate", "-o", "{dir}/c", "--acceptance-out", "{in}", "--edge-acceptance-out", "{in}"],
     "two outputs cannot share one file"),
    ("sweep --out (config.json is CONFIG)", "config.json", _toml, ["sweep", "{in}", "--out", "{dir}"],
     "one of the inputs (CONFIG"),
]


@pytest.mark.parametrize("case, name, make, argv, says", GUARDED, ids=[g[0] for g in GUARDED])
def test_no_command_writes_over_one_of_its_inputs_or_another_output(tmp_path, case, name, make, argv, says):
    """Issue #52 item 2, by command and option: the output guard refuses in one line, before any work, and the input is
    as it was. (bench serve, replay, latency fit/validate and explain --scenario/--acceptance have their own cases above;
    `traces import/synth/fit` are the traces rewrite's, issue #48.)"""
    d = tmp_path / "w"
    d.mkdir()
    p = make(d / name)
    before = p.read_bytes()
    args = [a.replace("{in}", str(p)).replace("{dir}", str(d)) for a in argv]
    r = runner.invoke(app, args, env=ENV)
    assert r.exit_code == 2 and says in error_line(r.output), (args, r.output)
    assert p.read_bytes() == before


@pytest.mark.parametrize("case, argv, name, kind", [
    ("simulate -o", ["simulate", "specagent", "--trace", "{trace}", "-o", "{target}"], "r.parquet", "Apache Parquet"),
    ("predict -o", ["predict", "--trace", "{trace}", "--draws", "0", "-o", "{dir}"], "summary.json", "a JSON document"),
    ("predict --report", ["predict", "--trace", "{trace}", "--draws", "0", "-o", "{dir}/p", "--report", "{target}"],
     "r.html", "an HTML page"),
    ("report -o", ["report", "{summary}", "-o", "{target}", "--no-images"], "r.html", "an HTML page"),
])
def test_an_output_over_a_file_the_option_did_not_write_is_refused(tmp_path, case, argv, name, kind):
    """A file that exists and is not what the option writes (here: someone's notes) was not written by this command:
    refused before any work, and kept."""
    d = tmp_path / "w"
    d.mkdir()
    target = d / name
    target.write_text("my notes, not a result\n")
    trace = _small_trace(tmp_path / "t.jsonl")
    summary = _summary(tmp_path / "s.json") if "{summary}" in argv else None
    args = [a.replace("{trace}", str(trace)).replace("{target}", str(target)).replace("{dir}", str(d))
            .replace("{summary}", str(summary)) for a in argv]
    r = runner.invoke(app, args, env=ENV)
    assert r.exit_code == 2 and f"is not {kind}" in error_line(r.output), (args, r.output)
    assert target.read_text() == "my notes, not a result\n"


# ================================================================================================ keys over the endpoint commands
@pytest.mark.parametrize("mode", ["echo_auth_200", "echo_auth_401", "echo_auth_500", "echo_auth_500_encoded"])
@pytest.mark.parametrize("command", ["measure", "live"])
def test_a_key_in_a_variable_whose_name_says_nothing_is_never_printed_or_written(tmp_path, mode, command):
    """Issue #52's done-when: the planted keys ($MYLLM named by --*-api-key-env, and an sk- key in $OPENAI_API_KEY) over
    `acceptance measure` and `live` (on served models: no torch model), against servers that echo the key raw,
    URL-encoded, base64 and JSON-escaped: no piece of either key in any output or file."""
    from hostile_server import HostileServer, on

    with HostileServer(on("weak", mode)) as s:
        if command == "measure":
            args = ["acceptance", "measure", str(ROOT / "traces" / "data" / "tau2_airline_sample.json"), "--weak-url", s.url,
                    "--weak-model", "weak-test", "--strong-url", s.url, "--strong-model", "strong-test", "-o",
                    str(tmp_path / "o"), "--yes", "--limit", "2", "--retries", "2", "--backoff", "0.01", "--timeout", "5",
                    "--weak-api-key-env", "MYLLM"]
        else:
            args = ["live", "--weak-url", s.url, "--weak-model", "weak-test", "--strong-url", s.url, "--strong-model",
                    "strong-test", "-o", str(tmp_path / "o"), "--trajectories", "1", "--timeout", "5", "--retries", "2",
                    "--backoff", "0.01", "--weak-api-key-env", "MYLLM"]
        code, out = invoke(args)
        assert f"Bearer {SECRET2}" in s.auth_seen  # the Weak key (in $MYLLM) did reach the server
    assert "Traceback" not in out, out
    assert not leaks(out, folder=tmp_path), leaks(out, folder=tmp_path)


@pytest.mark.parametrize("rate", ["1e-320", "5e-324", "1e-10"])
def test_bench_serve_refuses_a_rate_with_no_finite_schedule_before_any_request(tmp_path, rate):
    """As replay's: 1e-320 requests/s drew send times of inf, which no thread can wait for."""
    with StreamServer() as s:
        code, out = invoke(bench(s.url, tmp_path, "--request-rate", rate))
        sent = len(s.auth_seen)
    assert code == 2 and "--request-rate" in error_line(out) and sent == 0, out


def test_bench_serve_refuses_prompts_it_could_not_build_in_bounded_memory(tmp_path):
    """Bounded work for bounded input: each flag is within its bound, their product (10^6 prompts of 10^7 words) is
    not; refused at once, before any prompt is built or any request sent."""
    with StreamServer() as s:
        t0 = time.monotonic()
        code, out = invoke(bench(s.url, tmp_path, "--num-prompts", "1000000", "--input-len", "10485760"), bound_s=30)
        took, sent = time.monotonic() - t0, len(s.auth_seen)
    assert code == 2 and "prompt words" in error_line(out) and sent == 0 and took < 30, out
