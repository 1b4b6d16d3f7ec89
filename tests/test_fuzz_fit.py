"""Hostile inputs to `acceptance fit` and `calibrate` (findings 2026-12-03, F3-09, F3-10, F3-16 and record identity):
the rejection is credited to the rejected draft's kind in every log format, no input is overwritten, no
verification counts twice, and a fitted value past the model's guard names the logs."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import VERIFY_MARK, ChatServer  # noqa: E402

from specagent.cli.app import app  # noqa: E402
from specagent.simulator.acceptance.model import AcceptanceModel  # noqa: E402
from specagent.simulator.acceptance.verdict_records import simulate_verdict_log  # noqa: E402
from specagent.traces.io import load_trajectories  # noqa: E402
from specagent.traces.verdict_log import write_verdict_log  # noqa: E402


def fit(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["acceptance", "fit", *args])
    return r.exit_code, r.output


class RejectsTheLastStep(ChatServer):
    """The verifier keeps every step but the last (the held write a segment ends at) and offers no replacement, so a
    Strong repair turn runs, and it calls get_user_details: a read repairs a rejected write, the kinds known."""

    def _verdict(self, key: str, body: dict) -> tuple[str, str]:
        text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user" and VERIFY_MARK in (m.get("content") or ""))
        n = int(re.search(r"The drafted steps \((\d+) in all\)", text).group(1))
        return json.dumps({"accepted_prefix": n - 1, "reason": "the last step is premature", "replacement": None}), "checked"


@pytest.fixture(scope="module")
def live_run(tmp_path_factory) -> Path:
    """One `live` run on the scripted endpoints: the Weak model drafts writes the Strong model rejects and repairs by reads."""
    out = tmp_path_factory.mktemp("live") / "out"
    args = ["live", "--weak-url", "URL", "--weak-model", "weak-test", "--strong-url", "URL", "--strong-model", "strong-test",
            "-o", str(out), "--trajectories", "6", "--json", "--timeout", "20"]
    with RejectsTheLastStep() as s:
        r = CliRunner().invoke(app, [s.url if a == "URL" else a for a in args])
    assert r.exit_code == 0, r.output
    return out


def test_a_live_protocol_log_credits_each_rejection_to_the_rejected_drafts_kind(live_run):
    recs = [json.loads(line) for line in (live_run / "verdicts.jsonl").read_text().splitlines()]
    rejected = [r["drafted"][r["accepted_prefix"]]["kind"] for r in recs if r["accepted_prefix"] < len(r["drafted"])]
    # the known kinds: the label of every repair says which kind of draft it replaced, as the verdict log does
    labels = [s.label for t in load_trajectories(live_run / "protocol_log.jsonl") for s in t.steps
              if s.label is not None and s.label.verdict is not None and s.label.verdict.value == "repair" and s.label.repair_tokens + s.label.verdict_tokens > 0]
    assert sorted(lab.rejected_kind.value for lab in labels) == sorted(rejected) and rejected
    repaired_by = {s.kind.value for t in load_trajectories(live_run / "protocol_log.jsonl") for s in t.steps
                   if s.label is not None and s.label.verdict is not None and s.label.verdict.value == "repair"}
    assert repaired_by - set(rejected)  # some repair is of another kind than its draft: the case the fit got wrong
    by_log = {}
    for name in ("verdicts.jsonl", "protocol_log.jsonl"):
        code, out = fit(str(live_run / name), "--json")
        assert code == 0, out
        by_log[name] = {p["name"]: (p["estimate"], p["n"]) for p in json.loads(out)["estimates"] if p["name"].startswith("accept.")}
    assert by_log["verdicts.jsonl"] == by_log["protocol_log.jsonl"] and by_log["verdicts.jsonl"]


def test_a_protocol_log_without_rejected_kinds_still_reads_as_before(live_run, tmp_path):
    """Logs written before the label said the rejected kind: the repair stands in the draft's place (the old reading)."""
    old = tmp_path / "old.jsonl"
    lines = []
    for line in (live_run / "protocol_log.jsonl").read_text().splitlines():
        t = json.loads(line)
        for s in t["steps"]:
            if s.get("label"):
                s["label"].pop("rejected_kind", None)
        lines.append(json.dumps(t))
    old.write_text("\n".join(lines) + "\n")
    code, out = fit(str(old), "--json")
    assert code == 0, out


@pytest.fixture
def log(tmp_path) -> Path:
    return write_verdict_log(simulate_verdict_log(AcceptanceModel(), 20, seed=3), tmp_path / "v.jsonl")


@pytest.mark.parametrize("how", ["same", "symlink", "dotdot"])
def test_fit_never_writes_over_one_of_its_logs(log, tmp_path, how):
    before = log.read_bytes()
    target = {"same": log, "symlink": tmp_path / "link.jsonl", "dotdot": tmp_path / "sub" / ".." / "v.jsonl"}[how]
    if how == "symlink":
        os.symlink(log, target)
    (tmp_path / "sub").mkdir(exist_ok=True)
    code, out = fit("-o", str(target), str(log))
    assert code == 2 and "one of the inputs" in out and "Traceback" not in out, out
    assert log.read_bytes() == before


def test_calibrate_never_writes_over_its_figures(tmp_path):
    figures = tmp_path / "f.csv"
    shutil.copy(Path(__file__).resolve().parent.parent / "measurements" / "protocol_figures.csv", figures)
    before = figures.read_bytes()
    r = CliRunner().invoke(app, ["acceptance", "calibrate", "--figures", str(figures), "--acceptance-out", str(figures), "-n", "1"])
    assert r.exit_code == 2 and "--acceptance-out" in r.output and "one of the inputs" in r.output, r.output
    assert figures.read_bytes() == before


@pytest.mark.parametrize("how", ["twice", "copy", "overlap"])
def test_the_same_verification_given_twice_is_refused_naming_both(log, tmp_path, how):
    other = tmp_path / "copy.jsonl"
    lines = log.read_text().splitlines()
    other.write_text("\n".join(lines if how == "copy" else lines[-5:]) + "\n")
    args = [str(log), str(log)] if how == "twice" else [str(log), str(other)]
    code, out = fit(*args)
    assert code == 2 and "not already read" in out and f"{log}: record" in out, out


def test_a_fitted_value_past_the_models_guard_names_the_logs(tmp_path):
    recs = simulate_verdict_log(AcceptanceModel(), 10, seed=1)
    bad = tmp_path / "ratio.jsonl"
    lines = []
    for r in recs:
        d = json.loads(r.to_json())
        for s in d["drafted"]:
            if s.get("reference_tokens"):
                s["reference_tokens"] = 1
                s["tokens"] = 100_000
        lines.append(json.dumps(d))
    bad.write_text("\n".join(lines) + "\n")
    code, out = fit(str(bad))
    assert code == 2 and str(bad) in out and "the fitted weak_token_ratio" in out, out


def test_the_streamed_read_keeps_what_the_records_give(tmp_path):
    """F3-19 (fit-1e6): the fit reads a log one record at a time; what it keeps is what the whole list gave."""
    from specagent.simulator.acceptance.fit import FitData, add_verdict_records, read_logs

    recs = simulate_verdict_log(AcceptanceModel(), 30, seed=7)
    whole = FitData()
    add_verdict_records(whole, recs, str(tmp_path / "s.jsonl"))
    streamed = read_logs([write_verdict_log(recs, tmp_path / "s.jsonl")])
    assert streamed == whole and any(s.after_rejection for s in streamed.segments)


# -- round four: the log is read line by line (issue #35, item 4) ------------------------------------------------------

def test_the_line_reader_holds_one_line_not_the_file(tmp_path):
    import tracemalloc

    from specagent.traces.files import iter_lines

    p = tmp_path / "big.jsonl"
    p.write_bytes((b'{"x": "' + b"a" * 200 + b'"}\n') * 100_001)  # about 21 MB
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_lines(p, "a test log"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 100_001 and peak < 2 << 20, peak  # the whole text would be 21 MB (42 MB as str + bytes)


@pytest.mark.parametrize("data, said", [
    (b'\xef\xbb\xbf{"a": 1}\n\n', None),  # a BOM and a blank line read
    (b"\n \n\t\n", "an empty file"),
    (b'{"a": 1}\n{"a": 2}\n{"a": \xff}\n', "line 3 (byte 24)"),  # 9 + 9 bytes of lines 1-2, 6 before the bad one
    (b"PAR1\x00\x00", "a Parquet file"),
])
def test_the_line_reader_keeps_every_check_of_the_whole_text_reader(tmp_path, data, said):
    from specagent.traces.errors import TraceFormatError
    from specagent.traces.files import iter_lines, read_text

    p = tmp_path / "x.jsonl"
    p.write_bytes(data)
    if said is None:
        assert [t for _, t in iter_lines(p, "x") if t.strip()] == [ln for ln in read_text(p, "x").split("\n") if ln.strip()]
        return
    with pytest.raises(TraceFormatError, match=re.escape(said)):
        list(iter_lines(p, "x"))


def test_fit_of_a_directory_an_unreadable_file_and_nul_bytes_is_one_line(tmp_path):
    (tmp_path / "d").mkdir()
    nul = tmp_path / "nul.jsonl"
    nul.write_bytes(b"\x00" * 100 + b"\n")
    cases = [(tmp_path / "d", "a directory"), (nul, "nul.jsonl: line 1")]
    if os.geteuid() != 0:  # root reads a file whatever its mode
        locked = tmp_path / "locked.jsonl"
        locked.write_text("{}\n")
        locked.chmod(0)
        cases.append((locked, "unreadable"))
    for path, said in cases:
        code, out = fit(str(path))
        assert code != 0 and said in out and "Traceback" not in out and len(out.strip().splitlines()) == 1, out


# -- "Handled well", case by case (findings 2026-12-03): the verdict-log reader through `acceptance fit` -----------------

GOOD = json.loads((Path(__file__).resolve().parent.parent / "traces" / "data" / "verdict_log_simulated.jsonl").read_text()
                  .splitlines()[0])
TRAJECTORY = (Path(__file__).resolve().parent.parent / "traces" / "data" / "tau2_airline.jsonl").read_text().splitlines()[0]


def _rec(**kw: object) -> str:
    r = json.loads(json.dumps(GOOD))
    for path, value in kw.items():
        *parents, leaf = path.split("__")
        node = r
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is KeyError:
            del node[leaf]
        else:
            node[leaf] = value
    return json.dumps(r)


_TOKENS = {"NaN": "NaN", "Infinity": "Infinity", "negative": -3, "1e30": 10**30, "2^63": 2**63, "float": 1.5, "string": "5",
           "bool": True, "over-cap": 10_485_761}
BAD_LOGS: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "empty file"), "blank": (b"\n  \n\n", "empty file"), "non-JSON": (b"{not json\n", "line 1"),
    "truncated-last-line": ((_rec() + "\n" + _rec()[:40]).encode(), "line 2"), "a-JSON-array": (b"[1, 2]\n", "line 1"),
    "schema-missing": (_rec(schema=KeyError).encode(), "line 1"), "schema-wrong-version": (_rec(schema="specagent.verdict/2").encode(), "schema"),
    "schema-an-int": (_rec(schema=1).encode(), "line 1"),
    "schema-mixed": ((_rec() + "\n" + _rec(schema="specagent.verdict/0", task="other")).encode(), "line 2"),
    "trajectory-after-verdicts": ((_rec() + "\n" + TRAJECTORY).encode(), "line 2"),
    **{f"verdict_tokens-{k}": ((_rec(verdict_tokens=v) if not isinstance(v, str) or v == "5" else
                                _rec().replace('"verdict_tokens": 168', f'"verdict_tokens": {v}')).encode(), "verdict_tokens")
       for k, v in _TOKENS.items()},
    **{f"drafted-tokens-{k}": ((_rec(drafted__0__tokens=v) if not isinstance(v, str) or v == "5" else
                                _rec().replace('"tokens": 505', f'"tokens": {v}')).encode(), "tokens") for k, v in _TOKENS.items()},
    "prefix-over-K": (_rec(accepted_prefix=9).encode(), "accepted_prefix"), "prefix-negative": (_rec(accepted_prefix=-1).encode(), "accepted_prefix"),
    "prefix-float": (_rec(accepted_prefix=0.0).encode(), "accepted_prefix"), "drafted-empty": (_rec(drafted=[]).encode(), "drafted"),
    "unknown-kind": (_rec(drafted__0__kind="teleport").encode(), "kind"), "extra-field": (_rec(colour="red").encode(), "colour"),
    "overlapping-positions": ((_rec() + "\n" + _rec(verdict_tokens=999)).encode(), "position"),
    "UTF-16": (_rec().encode("utf-16"), "UTF-8"), "gzip": (__import__("gzip").compress(_rec().encode()), "v.jsonl"),
}


@pytest.mark.parametrize("name", BAD_LOGS)
def test_every_broken_verdict_log_is_one_line_naming_file_and_place(tmp_path, name):
    data, said = BAD_LOGS[name]
    log = tmp_path / "v.jsonl"
    log.write_bytes(data)
    code, out = fit(str(log), "-o", str(tmp_path / "a.toml"))
    assert code == 2 and "Traceback" not in out, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert str(log) in line and said in line, line
    assert not (tmp_path / "a.toml").exists()


@pytest.mark.parametrize("name", ["directory", "missing", "-o-a-directory", "-o-dash"])
def test_a_log_that_is_no_file_and_an_output_that_cannot_be_one_are_one_line(tmp_path, name):
    log = tmp_path / "v.jsonl"
    log.write_text(_rec() + "\n")
    (tmp_path / "d").mkdir()
    args = {"directory": [str(tmp_path / "d")], "missing": [str(tmp_path / "nope.jsonl")],
            "-o-a-directory": [str(log), "-o", str(tmp_path / "d")], "-o-dash": [str(log), "-o", "-"]}[name]
    code, out = fit(*args)
    assert code == 2 and "Traceback" not in out and len([ln for ln in out.splitlines() if ln.startswith("error:")]) == 1, out


@pytest.mark.parametrize("name", ["BOM", "CRLF", "unicode-names", "20MB-line"])
def test_a_bom_crlf_unicode_names_and_a_20_mb_line_are_read(tmp_path, name):
    text = {"BOM": "\ufeff" + _rec() + "\n", "CRLF": _rec() + "\r\n" + _rec(task="other") + "\r\n",
            "unicode-names": _rec(task="réservation-✈-1", drafted__0__name="obtenir_réservation") + "\n",
            "20MB-line": _rec(task="x" * (20 << 20)) + "\n"}[name]
    log = tmp_path / "v.jsonl"
    log.write_bytes(text.encode("utf-8"))
    code, out = fit(str(log), "-o", str(tmp_path / "a.toml"))
    assert code == 0 and (tmp_path / "a.toml").exists(), out


# -- degenerate fits: estimates inside their intervals, probabilities in [0, 1] ----------------------------------------

def _all(accepted: bool, n: int = 200) -> str:
    """`n` one-step reads of `n` tasks, every one accepted (or every one rejected and repaired)."""
    rej = {"accepted_prefix": 0, "replacement_offered": False, "replacement_tokens": None, "replacement_valid": None, "repair_tokens": 40,
           "repair_reasoning_tokens": 0}
    acc = {"accepted_prefix": 1, "replacement_offered": False, "replacement_tokens": None, "replacement_valid": None, "repair_tokens": None,
           "repair_reasoning_tokens": None}
    return "\n".join(json.dumps({**json.loads(_rec(task=f"t{i}", ended_by="end", drafted=[{"kind": "read", "name": "r", "tokens": 30}],
                                                   verify_reasoning_tokens=0, thinking=False)), **(acc if accepted else rej)})
                     for i in range(n)) + "\n"


DEGENERATE = {
    "one-record": _rec() + "\n", "one-rejection": _all(False, 1), "200-all-accepted": _all(True), "200-none-accepted": _all(False),
    "all-zero-tokens": "\n".join(json.dumps({**json.loads(line), "verdict_tokens": 0, "verify_reasoning_tokens": 0, "thinking": False,
                                             "repair_tokens": 0 if json.loads(line)["repair_tokens"] is not None else None,
                                             "repair_reasoning_tokens": 0 if json.loads(line)["repair_tokens"] is not None else None,
                                             "drafted": [{**d, "tokens": 0} for d in json.loads(line)["drafted"]]})
                                 for line in _all(False, 20).splitlines()) + "\n",
}


@pytest.mark.parametrize("name", DEGENERATE)
def test_a_degenerate_log_fits_with_every_estimate_inside_its_interval(tmp_path, name):
    log = tmp_path / "v.jsonl"
    log.write_text(DEGENERATE[name])
    code, out = fit(str(log), "--json")
    assert code == 0, out
    estimates = json.loads(out)["estimates"]
    assert estimates
    for e in estimates:
        assert e["low"] <= e["estimate"] <= e["high"], e
        if e["name"].startswith(("accept.", "p_")):
            assert 0.0 <= e["low"] and e["high"] <= 1.0, e
    accept = {e["name"]: e for e in estimates}.get("accept.read")
    if name == "200-all-accepted":
        assert accept["estimate"] == pytest.approx(1.0) and accept["low"] > 0.98, accept
    if name == "200-none-accepted":
        assert accept["estimate"] == pytest.approx(0.0, abs=1e-9) and accept["high"] < 0.02, accept
