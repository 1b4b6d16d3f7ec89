"""Malformed, hostile and edge-case flags and files through every command (issue #14, the command side).

`tests/test_fuzz_inputs.py` covers the trace importers and loaders; this suite drives every
command `specagent --help` lists, in four parts (each counted in the README's reliability
section):

1. generated flag cases: every number and choice option (and argument) of every command with
   values of the wrong type, out of range, not finite or unknown, read from the command tree,
   so a flag added tomorrow is covered the day it is added;
2. a table of hand-made bad files and values: results files for `report`, sweep configs,
   scenarios, hardware and engine profiles, measurements, success rates, rates and SLOs, ...;
3. outputs: every command that writes, into a folder under a file, a read-only folder (as an
   unprivileged user, since root ignores file modes) and onto a full disk (ENOSPC raised by the
   atomic writer, in-process: a tiny tmpfs cannot be mounted unprivileged);
4. hypothesis: random values for numeric flags of cheap commands, random bytes as every kind
   of input file, and random corruptions of a `predict` summary read by `report`.

Every bad case must end in exit code 2 with exactly one `error:` line that names the flag, file
or field and what was expected, no traceback, and no output file left behind; a command that
exits 0 must print only possible numbers in its JSON (no NaN or infinity anywhere, no negative
time, cost, count or size). `calibrate` and `live` only get inputs refused before torch is
imported or a model is built.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import sys
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402

from specagent.cli import app  # noqa: E402
from specagent.cli import kernels as kernels_cli
from specagent.common import atomic
from specagent.measurements import default_path
from specagent.traces import load_trajectories, save_trajectories
from specagent.traces.io import default_workload_path

runner = CliRunner()
ROOT = typer.main.get_command(app)
DATA = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the command tree
def _walk(cmd: Any, path: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    subs = getattr(cmd, "commands", None) or {}
    if path and (not subs or getattr(cmd, "invoke_without_command", False)):
        out[" ".join(path)] = cmd
    for name, sub in subs.items():
        out.update(_walk(sub, path + (name,)))
    return out


COMMANDS = _walk(ROOT)


def _kind(param: Any) -> Any:
    """The Python type a parameter converts to (int, float, str, Path), optional and list wrappers removed."""
    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    while typing.get_origin(ann) in (typing.Union, list, typing.List) or type(ann).__name__ == "UnionType":
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        ann = args[0]
    return ann


# ---------------------------------------------------------------- material
@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Small valid inputs every base case runs on (world-readable, for the unprivileged cases)."""
    d = tmp_path_factory.mktemp("fuzzcmd")
    small = d / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:2], small)
    lat = d / "latency.csv"
    lat.write_text("".join(default_path("serving_latency.csv").read_text(encoding="utf-8").splitlines(True)[:6]))
    sweep = d / "sweep.toml"
    sweep.write_text(SWEEP)
    requests = d / "requests.csv"
    requests.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,20\n0.5,200,10\n1.25,50,30\n", encoding="utf-8")
    r = runner.invoke(app, ["predict", "--trace", str(small), "--strategies", "strongonly,specagent", "-o", str(d / "pred")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["replay", str(requests), "--json"])  # the predicted side of `bench compare`
    assert r.exit_code == 0, r.output
    (d / "predicted.json").write_text(r.output, encoding="utf-8")
    with ChatServer(lifetime_s=3600, max_requests=200_000) as chat:  # `acceptance measure` talks to a loopback server
        yield {"small": small, "latency": lat, "sweep": sweep, "summary": d / "pred" / "summary.json", "requests": requests,
               "dir": d, "chat": chat.url, "predicted": d / "predicted.json",
               "vllm": Path(__file__).parent / "fixtures" / "vllm" / "save_result.json"}


SWEEP = """[sweep]
tasks = 8
seed = 3
[grid]
strategy = ["strongonly"]
rate = [0.5]
fleet = ["small"]
hardware = ["h20"]
[fleet.small]
weak_replicas = 1
strong_replicas = 1
"""

#: A cheap valid run of every command ({out}: a fresh empty folder per case). `calibrate` and `live` are never run.
BASE: dict[str, list[str]] = {
    "hardware list": ["hardware", "list", "--json"],
    "hardware show": ["hardware", "show", "h20", "--json"],
    "models list": ["models", "list", "--json"],
    "models show": ["models", "show", "qwen3.5-4b", "--json"],
    "roofline": ["roofline", "--json"],
    "roofline balance": ["roofline", "balance", "--json"],
    "traces import": ["traces", "import", str(DATA / "traces/data/tau2_airline_sample.json"), "-o", "{out}/t.jsonl"],
    "traces formats": ["traces", "formats", "--json"],
    "traces stats": ["traces", "stats", "{small}", "--json"],
    "traces fit": ["traces", "fit", "{small}", "-o", "{out}/p.toml"],
    "traces synth": ["traces", "synth", "--profile", "tau2_airline", "-n", "3", "-o", "{out}/s.jsonl"],
    "traces profiles": ["traces", "profiles", "--json"],
    "scenario show": ["scenario", "show", "--json"],
    "predict": ["predict", "--trace", "{small}", "--strategies", "strongonly,specagent", "-o", "{out}/pred", "--json"],
    "explain": ["explain", "--trace", "{small}", "--no-counterfactuals", "--json"],
    "simulate": ["simulate", "specagent", "--trace", "{small}", "-o", "{out}/r.parquet", "--json"],
    "predictor validate": ["predictor", "validate", "--trace", "{small}", "--synthetic", "0", "--strategies", "specagent", "--json"],
    "plan": ["plan", "--rate", "0.5/s", "--tasks", "6", "--trace", "{small}", "--strategy", "strongonly", "--gpu", "h20", "--json"],
    "sweep": ["sweep", "{sweep}", "--out", "{out}/sw", "--json"],
    "replay": ["replay", "{requests}", "-o", "{out}/replay.parquet", "--json"],
    "bench compare": ["bench", "compare", "{predicted}", "{vllm}", "--json"],
    "study balance": ["study", "balance", "--tasks", "6", "--rates", "0.5", "--gpu", "h20", "--trace", "{small}", "--json"],
    "study sensitivity": ["study", "sensitivity", "--trace", "{small}", "-o", "{out}/sens", "--json"],
    "report": ["report", "{summary}", "-o", "{out}/r.html", "--no-images", "--json"],
    "calibrate": ["calibrate", "-o", "{out}/p.toml", "--scale", "tiny", "--repeats", "1", "--no-validate"],
    "live": ["live", "--synthetic", "--scale", "tiny", "--trajectories", "1", "-o", "{out}/live", "--no-compare"],
    "latency validate": ["latency", "validate", "--data", "{latency}", "--no-holdout", "--json"],
    "latency fit": ["latency", "fit", "--data", "{latency}", "-o", "{out}/fit.toml", "--json"],
    "latency engine": ["latency", "engine", "--json"],
    "acceptance measure": ["acceptance", "measure", str(DATA / "traces/data/tau2_airline_sample.json"), "--weak-url", "{chat}",
                           "--weak-model", "weak-test", "--strong-url", "{chat}", "--strong-model", "strong-test", "--limit", "2",
                           "--backoff", "0", "-o", "{out}/m", "--yes", "--json"],
    "bench serve": ["bench", "serve", "--base-url", "{chat}", "--model", "weak-test", "--num-prompts", "2", "--input-len", "8",
                    "--output-len", "4", "--warmup", "0", "--csv", "{out}/b.csv", "--json"],
    "acceptance fit": ["acceptance", "fit", str(DATA / "traces/data/verdict_log_simulated.jsonl"), "-o", "{out}/a.toml", "--json"],
    "acceptance calibrate": ["acceptance", "calibrate", "-n", "1", "-o", "{out}/cal"],
}
NOT_RUN = ("calibrate", "live")  # torch models: only inputs refused before any model runs


def _args(args: list[str], env: dict[str, Path], out: Path) -> list[str]:
    subs = {"{out}": str(out), **{f"{{{k}}}": str(v) for k, v in env.items()}}
    return [re.sub(r"\{\w+\}", lambda m: subs.get(m.group(0), m.group(0)), a) for a in args]


# ---------------------------------------------------------------- the oracles
def assert_one_line(r, names: tuple[str, ...] = (), expect: tuple[str, ...] = (), out: Path | None = None) -> str:
    """Exit 2, one `error:` line naming one of `names` and every phrase of `expect`, no traceback, nothing written."""
    assert r.exit_code == 2, f"exit {r.exit_code}: {r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.output
    line = errors[0]
    assert len(line) > len("error: ") + 10, line
    if names:
        assert any(n in line for n in names), (names, line)
    for phrase in expect:
        assert phrase.lower() in line.lower(), (phrase, line)
    if out is not None:
        left = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
        assert not left, f"left behind: {left}"
    return line


#: Keys whose numbers are times, costs, counts or sizes: never negative.
NON_NEGATIVE = re.compile(r"(^|_)(s|ms|us|time|latency|usd|cost|price|tokens|bytes|flops|calls|count|tasks|gpus|replicas|batch|"
                          r"iterations|steps|trajectories|reviews|rejections|repairs|replacements|memory|bandwidth|tflops|gb|"
                          r"rate|rows|figures|layers)(_|$)")


def impossible_numbers(obj: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every NaN or infinity in a JSON document, and every negative number under a key that names a non-negative quantity."""
    bad: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad += impossible_numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad += impossible_numbers(v, f"{path}[{i}]")
    elif isinstance(obj, float) and not math.isfinite(obj):
        bad.append((path, obj))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj < 0:
        key = re.sub(r"\[\d+\]", "", path.rsplit(".", 1)[-1]).lower()
        if NON_NEGATIVE.search(key) and not re.search(r"saving|error|delta|diff|change|log", key):
            bad.append((path, obj))
    return bad


def assert_possible_json(r) -> Any:
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert impossible_numbers(doc) == []
    return doc


# ---------------------------------------------------------------- 0. the base cases run, and every command is covered
def test_every_command_has_a_base_case():
    assert sorted(COMMANDS) == sorted(BASE), "a command was added or removed: give it a base case (and its bad inputs) here"


@pytest.mark.parametrize("command", [c for c in BASE if c not in NOT_RUN])
def test_base_cases_succeed_with_possible_numbers(command, env, tmp_path):
    r = runner.invoke(app, _args(BASE[command], env, tmp_path))
    if "--json" in BASE[command]:
        assert_possible_json(r)
    else:
        assert r.exit_code == 0, r.output


def test_the_json_oracle_can_fail():
    assert impossible_numbers({"a": [{"wall_time_s": -1.0}, {"x": math.nan}], "usd_per_hour": math.inf, "saving": -0.5,
                               "gpus": 3}) == [(".a[0].wall_time_s", -1.0), (".a[1].x", math.nan), (".usd_per_hour", math.inf)]


def test_the_torch_free_choices_match_the_kernels():
    pytest.importorskip("torch")
    from specagent.kernels import microbench as mb

    assert (set(kernels_cli.DTYPE_NAMES), kernels_cli.STATISTICS, kernels_cli.CLOCKS) == (set(mb.DTYPES), mb.STATISTICS, mb.CLOCKS)


# ---------------------------------------------------------------- 1. generated flag cases
INT_BAD = ("x", "1.5", "1e20", "-1", "99999999999999999999")
FLOAT_BAD = ("x", "nan", "inf", "-inf", "-1", "1e999")
CHOICE_BAD = ("nope", "")
#: Options that take free text (any value is a valid name or title) or a path handled in part 3.
FREE_TEXT = {"--title", "--name", "--domain", "--address"}
#: Values a flag accepts, with the reason.
ACCEPTED = {("latency validate", "--worst", "99999999999999999999"): "lists every row",
            ("acceptance measure", "--weak-api-key-env", "nope"): "any variable name: unset, no key is sent (local servers need none)",
            ("acceptance measure", "--strong-api-key-env", "nope"): "any variable name: unset, no key is sent (local servers need none)",
            ("bench serve", "--api-key-env", "nope"): "any variable name: unset, no key is sent (local servers need none)",
            ("bench serve", "--engine", "nope"): "the engine's name as the user gives it (the CSV's engine column)",
            ("bench serve", "--engine-version", "nope"): "the engine's version as the user gives it",
            ("latency validate", "--engine-id", "nope"): "any name: the id given to your own engine's profile",
            ("latency fit", "--engine-id", "nope"): "any name: the id given to your own engine's profile",
            ("bench serve", "--weight-dtype", ""): "the default: the engine's (bf16), as an empty weight_dtype cell says"}


@dataclass(frozen=True)
class FlagCase:
    command: str
    flag: str  # the option's first name, or the argument's metavar
    names: tuple[str, ...]  # what the error line may call it
    value: str
    is_argument: bool

    @property
    def id(self) -> str:
        return f"{self.command}:{self.flag}={self.value[:12]}"


def _flag_cases() -> list[FlagCase]:
    cases = []
    for command, cmd in COMMANDS.items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or (p.opts and p.opts[0] in FREE_TEXT):
                continue
            kind = _kind(p)
            arg = not p.opts or not p.opts[0].startswith("-")
            if kind is int:
                values = INT_BAD
            elif kind is float:
                values = FLOAT_BAD
            elif kind is str and not _path_like(command, p):
                values = CHOICE_BAD
            else:
                continue
            flag = p.opts[0] if not arg else p.name
            names = tuple(p.opts) if not arg else (p.name, p.name.upper())
            for v in values:
                if (command, flag, v) not in ACCEPTED:
                    cases.append(FlagCase(command, flag, names, v, arg))
    return cases


#: str parameters that name a file (or a shipped item by name): part 3 and the table give them files.
PATH_LIKE = {"logs", "--trace", "--synthetic", "--scenario", "--profile", "model", "name", "--model", "--hardware", "--weak-model",
             "--strong-model", "--weak-hardware", "--strong-hardware", "--serving-engine", "--weak-serving-engine",
             "--strong-serving-engine"}


def _path_like(command: str, p: Any) -> bool:
    return (p.opts[0] if p.opts else p.name) in PATH_LIKE and not (command == "live" and p.opts and p.opts[0] == "--synthetic")


FLAG_CASES = _flag_cases()


def _argv(case: FlagCase, env: dict[str, Path], out: Path) -> list[str]:
    base = _args(BASE[case.command], env, out)
    if not case.is_argument:
        return base + [case.flag, case.value]
    words = case.command.split()  # the argument is the first word after the command path
    return words + [case.value] + base[len(words) + 1:]


@pytest.mark.parametrize("case", FLAG_CASES, ids=lambda c: c.id)
def test_bad_flag_values_are_one_line_naming_the_flag(case, env, tmp_path):
    r = runner.invoke(app, _argv(case, env, tmp_path))
    names = case.names + ((repr(case.value), f"'{case.value}'") if case.is_argument and case.value else ())
    assert_one_line(r, names=names, out=tmp_path)


def test_every_command_with_a_number_flag_is_in_the_generated_cases():
    commands = {c.command for c in FLAG_CASES}
    with_numbers = {name for name, cmd in COMMANDS.items() if any(_kind(p) in (int, float) for p in cmd.params)}
    assert with_numbers <= commands and len(FLAG_CASES) > 500


# ---------------------------------------------------------------- 2. hand-made bad files and values
DIR = object()


@dataclass(frozen=True)
class Bad:
    """One bad input: the command line ({file}: the bad file, written from `content`; {out}, {small}, ...: as in BASE),
    and the phrases its one error line must hold (it must also name the bad file, when there is one)."""

    id: str
    argv: tuple[str, ...]
    content: Any = None  # text, bytes, DIR, or a function of env returning text
    name: str = "bad.txt"
    expect: tuple[str, ...] = ()


def _summary(edit: Callable[[dict], None]) -> Callable[[dict], str]:
    def make(env: dict) -> str:
        doc = json.loads(env["summary"].read_text(encoding="utf-8"))
        doc.pop("per_trajectory", None)  # the records alone: the Parquet beside the real summary is not this file's
        edit(doc)
        return json.dumps(doc)
    return make


def _set(key: str, i: int, field: str, value: Any) -> Callable[[dict], None]:
    return lambda d: d[key][i].update({field: value})


def _sweep(old: str, new: str) -> Callable[[dict], str]:
    return lambda env: SWEEP.replace(old, new)


DEEP_TOML = "a = " + "[" * 5000 + "]" * 5000
GARBAGE = b"\xff\xfe\x00PAR1 not a file of any kind \x00"
REPORT = ("report", "{file}", "-o", "{out}/r.html", "--no-images")
SCENARIO_SHOW = ("scenario", "show", "{file}")
SWEEP_CMD = ("sweep", "{file}", "--out", "{out}/sw")

BAD = [
    # report: results files (issue: a corrupted summary.json value rendered in the table)
    Bad("report-summary-value-text", REPORT, _summary(_set("summary", 0, "wall_time_s", "fast")), "s.json",
        ("field 'summary'", "strategy 'strongonly'", "'wall_time_s'", "expected a number", "'fast'")),
    Bad("report-summary-negative", REPORT, _summary(_set("summary", 1, "api_usd", -0.5)), "s.json", ("'api_usd'", ">= 0", "-0.5")),
    Bad("report-summary-infinite", REPORT, _summary(_set("summary", 1, "total_bytes_read_rel", math.inf)), "s.json",
        ("'total_bytes_read_rel'", "finite")),
    Bad("report-summary-nan", REPORT, _summary(_set("summary", 0, "strong_calls", math.nan)), "s.json", ("'strong_calls'", "finite")),
    Bad("report-summary-bool", REPORT, _summary(_set("summary", 0, "strong_calls", True)), "s.json", ("'strong_calls'", "number")),
    Bad("report-summary-success-2", REPORT, _summary(_set("summary", 0, "measured_success", 2.0)), "s.json",
        ("'measured_success'", "in [0, 1]")),
    Bad("report-phase-null", REPORT, _summary(_set("phase_time", 1, "user", None)), "s.json", ("field 'phase_time'", "'user'")),
    Bad("report-summary-empty", REPORT, _summary(lambda d: d.update(summary=[])), "s.json", ("field 'summary'", "no rows")),
    Bad("report-summary-not-records", REPORT, _summary(lambda d: d.update(summary=[1, 2])), "s.json", ("record 1", "object")),
    Bad("report-summary-no-strategy", REPORT, _summary(lambda d: d["summary"][0].pop("strategy")), "s.json", ("'strategy'",)),
    Bad("report-summary-twice", REPORT, _summary(lambda d: d["summary"].append(d["summary"][0])), "s.json", ("twice",)),
    Bad("report-summary-scalar", REPORT, _summary(lambda d: d.update(summary=5)), "s.json", ("'summary'", "list of records")),
    Bad("report-label-number", REPORT, _summary(_set("summary", 0, "label", 5)), "s.json", ("'label'", "expected text")),
    Bad("report-assumptions-text", REPORT, _summary(lambda d: d.update(assumptions="x")), "s.json", ("'assumptions'", "object")),
    Bad("report-scenario-bad", REPORT, _summary(lambda d: d["scenario"].update(k=0)), "s.json", ("scenario", "K must be")),
    Bad("report-per-trajectory-missing", REPORT, _summary(lambda d: d.update(per_trajectory="nope.parquet")), "s.json",
        ("'per_trajectory'", "does not exist")),
    Bad("report-empty-csv", REPORT, "", "empty.csv", ("empty file",)),
    Bad("report-header-only", REPORT, "strategy,usd_per_hour,gpus\n", "plan.csv", ("capacity plan", "no rows")),
    Bad("report-plan-nan", REPORT, "strategy,usd_per_hour,gpus\na,nan,3\n", "plan.csv", ("row 1", "'usd_per_hour'", "finite")),
    Bad("report-plan-text", REPORT, "strategy,usd_per_hour,gpus\na,cheap,3\n", "plan.csv", ("'usd_per_hour'", "number", "'cheap'")),
    Bad("report-plan-fraction", REPORT, "strategy,usd_per_hour,gpus\na,3,2.5\n", "plan.csv", ("'gpus'", "whole number")),
    Bad("report-plan-json-best", REPORT, json.dumps({"candidates": [], "best": [{"strategy": "a", "usd_per_hour": -1, "gpus": 8}]}),
        "plan.json", ("'usd_per_hour'", ">= 0")),
    Bad("report-balance-saving", REPORT, "hardware,strong_mean_decode_batch,time_saving,memory_saving\nh20,4,1.5,0.2\n", "b.csv",
        ("'time_saving'", "<= 1")),
    Bad("report-balance-inf-extra", REPORT, "hardware,strong_mean_decode_batch,time_saving,memory_saving,rate\nh20,4,0.5,0.2,inf\n",
        "b.csv", ("'rate'",)),
    Bad("report-calibration-zero", REPORT, "point,predicted_s,measured_s\np1,0.1,0\n", "c.csv", ("'measured_s'", "> 0")),
    Bad("report-unknown-columns", REPORT, "a,b\n1,2\n", "x.csv", ("not a known kind of result",)),
    Bad("report-json-number", REPORT, "42", "x.json", ("JSON int",)),
    Bad("report-json-list-of-numbers", REPORT, "[1, 2]", "x.json", ("record 1", "object")),
    Bad("report-json-invalid", REPORT, '{"summary": [', "x.json", ("not valid JSON", "line 1")),
    Bad("report-json-deep", REPORT, "[" * 100_000, "x.json", ()),
    Bad("report-non-utf8", REPORT, GARBAGE, "x.csv", ("UTF-8",)),
    Bad("report-garbage-parquet", REPORT, GARBAGE, "x.parquet", ("Parquet",)),
    Bad("report-directory", REPORT, DIR, "x.csv", ("directory",)),
    Bad("report-suffix", REPORT, "a,b\n", "x.txt", ("unknown results format",)),
    Bad("report-missing", ("report", "{out}/nope.json", "-o", "{out}/r.html"), None, "", ("no such results file",)),
    # sweep configs
    Bad("sweep-empty", SWEEP_CMD, "", "s.toml", ("missing [grid] table",)),
    Bad("sweep-non-utf8", SWEEP_CMD, GARBAGE, "s.toml", ("UTF-8",)),
    Bad("sweep-deep", SWEEP_CMD, DEEP_TOML, "s.toml", ("nested",)),
    Bad("sweep-directory", SWEEP_CMD, DIR, "s.toml", ("directory",)),
    Bad("sweep-tasks-text", SWEEP_CMD, _sweep("tasks = 8", 'tasks = "x"'), "s.toml", ("[sweep].tasks", "whole number")),
    Bad("sweep-tasks-negative", SWEEP_CMD, _sweep("tasks = 8", "tasks = -5"), "s.toml", ("[sweep].tasks",)),
    Bad("sweep-tasks-zero", SWEEP_CMD, _sweep("tasks = 8", "tasks = 0"), "s.toml", ("[sweep].tasks",)),
    Bad("sweep-tasks-huge", SWEEP_CMD, _sweep("tasks = 8", "tasks = 99999999999"), "s.toml", ("[sweep].tasks", "1,000,000")),
    Bad("sweep-warmup", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nwarmup = 2.0"), "s.toml", ("[sweep].warmup", "[0, 1)")),
    Bad("sweep-warmup-nan", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nwarmup = nan"), "s.toml", ("[sweep].warmup",)),
    Bad("sweep-price-negative", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nprices = { h20 = -1.0 }"), "s.toml",
        ("[sweep].prices.h20", ">= 0")),
    Bad("sweep-price-nan", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nprices = { h20 = nan }"), "s.toml", ("[sweep].prices.h20",)),
    Bad("sweep-price-text", SWEEP_CMD, _sweep("tasks = 8", 'tasks = 8\nprices = { h20 = "x" }'), "s.toml", ("[sweep].prices.h20",)),
    Bad("sweep-prices-list", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nprices = [1]"), "s.toml", ("[sweep].prices", "table")),
    Bad("sweep-rate-inf", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [inf]"), "s.toml", ("[grid].rate",)),
    Bad("sweep-rate-huge", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [1e300]"), "s.toml", ("[grid].rate",)),
    Bad("sweep-rate-bool", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [true]"), "s.toml", ("[grid].rate", "True")),
    Bad("sweep-rate-zero", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0]"), "s.toml", ("[grid].rate",)),
    Bad("sweep-acceptance-bool", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0.5]\nacceptance = [true]"), "s.toml",
        ("[grid].acceptance",)),
    Bad("sweep-k-bool", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0.5]\nk = [true]"), "s.toml", ("[grid].k",)),
    Bad("sweep-k-huge", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0.5]\nk = [99999999999]"), "s.toml", ("[grid].k", "100,000")),
    Bad("sweep-k-zero", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0.5]\nk = [0]"), "s.toml", ("[grid].k",)),
    Bad("sweep-grid-unknown-key", SWEEP_CMD, _sweep("rate = [0.5]", "rate = [0.5]\nbatch = [1]"), "s.toml", ("unknown key",)),
    Bad("sweep-grid-empty-list", SWEEP_CMD, _sweep("rate = [0.5]", "rate = []"), "s.toml", ("[grid].rate", "non-empty")),
    Bad("sweep-hardware-unknown", SWEEP_CMD, _sweep('hardware = ["h20"]', 'hardware = ["nope"]'), "s.toml",
        ("[grid].hardware", "unknown hardware 'nope'")),
    Bad("sweep-hardware-number", SWEEP_CMD, _sweep('hardware = ["h20"]', "hardware = [5]"), "s.toml", ("[grid].hardware",)),
    Bad("sweep-strategy-unknown", SWEEP_CMD, _sweep('strategy = ["strongonly"]', 'strategy = ["nope"]'), "s.toml",
        ("[grid].strategy", "nope")),
    Bad("sweep-fleet-missing", SWEEP_CMD, _sweep('fleet = ["small"]', 'fleet = ["huge"]'), "s.toml", ("no [fleet.huge] table",)),
    Bad("sweep-replicas-text", SWEEP_CMD, _sweep("weak_replicas = 1", 'weak_replicas = "1"'), "s.toml",
        ("[fleet.small].weak_replicas",)),
    Bad("sweep-replicas-huge", SWEEP_CMD, _sweep("weak_replicas = 1", "weak_replicas = 99999999"), "s.toml",
        ("[fleet.small].weak_replicas", "100,000")),
    Bad("sweep-replicas-zero", SWEEP_CMD, _sweep("strong_replicas = 1", "strong_replicas = 0"), "s.toml",
        ("[fleet.small].strong_replicas",)),
    Bad("sweep-router", SWEEP_CMD, _sweep("strong_replicas = 1", 'strong_replicas = 1\nrouter = "x"'), "s.toml",
        ("[fleet.small].router",)),
    Bad("sweep-fleet-field", SWEEP_CMD, _sweep("strong_replicas = 1", "strong_replicas = 1\ngpus = 2"), "s.toml", ("[fleet.small]",)),
    Bad("sweep-sweep-not-table", SWEEP_CMD, lambda env: "sweep = 5\n" + SWEEP.split("\n", 3)[3], "s.toml", ("[sweep]", "table")),
    Bad("sweep-grid-missing", SWEEP_CMD, "[sweep]\ntasks = 8\n", "s.toml", ("[grid]",)),
    Bad("sweep-unknown-key", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nsteps = 3"), "s.toml", ("unknown key",)),
    Bad("sweep-workload-missing", SWEEP_CMD, _sweep("tasks = 8", 'tasks = 8\nworkload = "/nope.jsonl"'), "s.toml",
        ("[sweep].workload", "/nope.jsonl")),
    Bad("sweep-workload-number", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nworkload = 5"), "s.toml", ("[sweep].workload",)),
    Bad("sweep-scenario-missing", SWEEP_CMD, _sweep("tasks = 8", 'tasks = 8\nscenario = "nope.toml"'), "s.toml",
        ("no such scenario file",)),
    Bad("sweep-scenario-number", SWEEP_CMD, _sweep("tasks = 8", "tasks = 8\nscenario = 5"), "s.toml", ("[sweep].scenario",)),
    Bad("sweep-seed-text", SWEEP_CMD, _sweep("seed = 3", 'seed = "x"'), "s.toml", ("[sweep].seed",)),
    Bad("sweep-scenario-inline-bad", SWEEP_CMD, _sweep("[grid]", "[scenario]\nk = 0\n[grid]"), "s.toml", ("[scenario]", "K must")),
    Bad("sweep-model-too-big", SWEEP_CMD, lambda env: SWEEP.replace('hardware = ["h20"]', 'hardware = ["rtx5090"]').replace(
        "seed = 3", 'seed = 3\nstrong_dtype = "bf16"'), "s.toml", ("cell 1", "does not fit")),
    Bad("sweep-and-scenario-flag", ("sweep", "{file}", "--out", "{out}/sw", "--scenario", "edge"),
        _sweep("tasks = 8", 'tasks = 8\nscenario = "default"'), "s.toml", ("not both",)),
    # scenario files, through `scenario show` and a scenario command
    Bad("scenario-non-utf8", SCENARIO_SHOW, GARBAGE, "s.toml", ("cannot read scenario file",)),
    Bad("scenario-directory", SCENARIO_SHOW, DIR, "s.toml", ("cannot read scenario file",)),
    Bad("scenario-invalid", SCENARIO_SHOW, "k = [", "s.toml", ("not valid TOML",)),
    Bad("scenario-deep", SCENARIO_SHOW, DEEP_TOML, "s.toml", ("nested too deeply",)),
    Bad("scenario-unknown-field", SCENARIO_SHOW, "kk = 1", "s.toml", ("unknown scenario field", "kk")),
    Bad("scenario-k-text", SCENARIO_SHOW, 'k = "x"', "s.toml", ("k:", "K must")),
    Bad("scenario-weak-not-table", SCENARIO_SHOW, "weak = 5", "s.toml", ("weak", "table")),
    Bad("scenario-gpus-huge", SCENARIO_SHOW, "[strong]\ngpus = 100000", "s.toml", ("strong.gpus", "1,024")),
    Bad("scenario-memory", SCENARIO_SHOW, "[weak]\nmemory_utilization = 0.0", "s.toml", ("weak.memory_utilization",)),
    Bad("scenario-dtype", SCENARIO_SHOW, '[weak]\nkv_dtype = "fp7"', "s.toml", ("weak.kv_dtype", "fp7")),
    Bad("scenario-parallelism", SCENARIO_SHOW, '[strong]\nparallelism = "pp"', "s.toml", ("strong.parallelism", "pp")),
    Bad("scenario-accept-text", SCENARIO_SHOW, '[acceptance.accept]\nread = "x"', "s.toml", ("acceptance.accept.read",)),
    Bad("scenario-ratio", SCENARIO_SHOW, "[acceptance]\nweak_token_ratio = 1e9", "s.toml", ("weak_token_ratio", "100")),
    Bad("scenario-trajectories", SCENARIO_SHOW, "[workload]\ntrajectories = 1000000000000", "s.toml",
        ("trajectories", "100,000,000")),
    Bad("scenario-missing", ("scenario", "show", "{out}/nope.toml"), None, "", ("no such scenario file",)),
    Bad("predict-scenario-bad", ("predict", "--scenario", "{file}", "-o", "{out}/p"), "[strong]\ngpus = 0", "s.toml",
        ("strong.gpus",)),
    Bad("explain-scenario-bad", ("explain", "--scenario", "{file}"), "[strong]\ngpus = 0", "s.toml", ("strong.gpus",)),
    Bad("explain-environment-bad", ("explain", "--scenario", "{file}"), '[environment]\npreset = "api"', "s.toml",
        ("environment.preset",)),
    # acceptance fit: verdict logs and protocol logs; --acceptance FILE and `acceptance = "FILE"` in a scenario
    Bad("fit-non-utf8", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), GARBAGE, "v.jsonl", ("UTF-8",)),
    Bad("fit-directory", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), DIR, "v.jsonl", ("a directory",)),
    Bad("fit-empty", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), "", "v.jsonl", ("empty file",)),
    Bad("fit-missing", ("acceptance", "fit", "{out}/nope.jsonl", "-o", "{out}/a.toml"), None, "", ("no such file",)),
    Bad("fit-not-json", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), "{not json", "v.jsonl", ("line 1", "<json>")),
    Bad("fit-prefix-too-long", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), lambda env: (
        (DATA / "traces/data/verdict_log_simulated.jsonl").read_text(encoding="utf-8").splitlines()[0]
        .replace('"accepted_prefix": 0', '"accepted_prefix": 7').replace('"accepted_prefix": 1', '"accepted_prefix": 7')),
        "v.jsonl", ("line 1", "accepted_prefix")),
    Bad("fit-unknown-kind", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"), lambda env: (
        (DATA / "traces/data/verdict_log_simulated.jsonl").read_text(encoding="utf-8").splitlines()[0]
        .replace('"kind": "generic"', '"kind": "teleport"').replace('"kind": "read"', '"kind": "teleport"')),
        "v.jsonl", ("line 1", "drafted[0].kind")),
    Bad("fit-plain-trace", ("acceptance", "fit", "{file}", "-o", "{out}/a.toml"),
        lambda env: env["small"].read_text(encoding="utf-8"), "t.jsonl", ("labelled segments",)),
    Bad("predict-acceptance-bad", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        "[acceptance]\nverdict_tokens = -1", "a.toml", ("--acceptance", "acceptance.verdict_tokens")),
    Bad("predict-acceptance-kind", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        "[acceptance.accept]\nteleport = 0.5", "a.toml", ("--acceptance", "unknown step kind 'teleport'")),
    Bad("predict-acceptance-other", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        "k = 3", "a.toml", ("one [acceptance] table",)),
    Bad("predict-acceptance-toml", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        "[acceptance", "a.toml", ("not valid TOML",)),
    Bad("predict-acceptance-garbage", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        GARBAGE, "a.toml", ("cannot read acceptance file",)),
    Bad("predict-acceptance-fit-interval", ("predict", "--trace", "{small}", "--acceptance", "{file}", "-o", "{out}/p"),
        '[acceptance.fit.intervals]\n"accept.read" = [0.9, 0.1]', "a.toml", ("fit.intervals",)),
    Bad("scenario-acceptance-missing", SCENARIO_SHOW, 'acceptance = "nope.toml"', "s.toml", ("no such acceptance file",)),
    # acceptance measure: recorded runs that cannot be read (before any request)
    *[Bad(f"measure-{name}", ("acceptance", "measure", "{file}" if content is not None else "{out}/nope.json", "--weak-url", "{chat}",
                               "--weak-model", "weak-test", "--strong-url", "{chat}", "--strong-model", "strong-test", "-o", "{out}/m",
                               "--yes"), content, "t.json", expect)
      for name, content, expect in [("non-utf8", GARBAGE, ("UTF-8",)), ("missing", None, ("no such file",)),
                                    ("not-tau2", '{"a": 1}', ("simulations",)), ("directory", DIR, ("a directory",))]],
    Bad("simulate-trace-and-synthetic", ("simulate", "--trace", "{small}", "--synthetic", "tau2_airline"), None, "", ("not both",)),
    # predict --success (measured success rates carried into the outputs: never an impossible one)
    *[Bad(f"predict-success-{i}", ("predict", "--trace", "{small}", "--strategies", "specagent", "--success", "{file}", "-o", "{out}/p"),
          content, "s.json", expect) for i, (content, expect) in enumerate([
              ('{"specagent": 5}', ("'specagent'", "[0, 1]")), ('{"specagent": NaN}', ("[0, 1]",)), ('{"specagent": true}', ("[0, 1]",)),
              ('{"specagent": "high"}', ("[0, 1]",)), ('{"nope": 0.5}', ("'nope'", "not a strategy of this run")),
              ("[0.5]", ("JSON object",)), ('{"specagent": ', ("not valid JSON",)), (GARBAGE, ("cannot read",)),
              (DIR, ("cannot read",))])],
    # hardware and engine profiles, model configs, measurements
    Bad("hardware-non-utf8", ("hardware", "show", "{file}"), GARBAGE, "h.toml", ("UTF-8",)),
    Bad("hardware-empty", ("hardware", "show", "{file}"), "", "h.toml", ("missing field 'id'",)),
    Bad("hardware-invalid", ("hardware", "show", "{file}"), "id = [", "h.toml", ("not valid TOML",)),
    Bad("hardware-deep", ("hardware", "show", "{file}"), DEEP_TOML, "h.toml", ("nested",)),
    Bad("hardware-directory", ("hardware", "show", "{file}"), DIR, "h.toml", ("Is a directory",)),
    Bad("hardware-unknown", ("hardware", "show", "nope"), None, "", ("unknown hardware 'nope'",)),
    Bad("hardware-dir-bad-profile", ("hardware", "list", "--hardware-dir", "{out}"), None, "", ()),
    Bad("roofline-hardware-file", ("roofline", "--hardware", "{file}"), "x = 1", "h.toml", ("missing field 'id'",)),
    Bad("engine-non-utf8", ("latency", "engine", "{file}"), GARBAGE, "e.toml", ("UTF-8",)),
    Bad("engine-invalid", ("latency", "engine", "{file}"), "x = [", "e.toml", ("not valid TOML",)),
    Bad("engine-deep", ("latency", "engine", "{file}"), DEEP_TOML, "e.toml", ("nested",)),
    Bad("engine-unknown", ("latency", "engine", "nope"), None, "", ("unknown serving engine 'nope'",)),
    Bad("engine-mode", ("latency", "engine", "vllm:fast"), None, "", ("vllm:fast",)),
    Bad("engine-gpu", ("latency", "engine", "--gpu", "nope"), None, "", ("--gpu", "unknown hardware")),
    Bad("models-unknown", ("models", "show", "nope"), None, "", ("unknown model 'nope'",)),
    Bad("models-directory", ("models", "show", "{file}"), DIR, "m", ("config.json",)),
    *[Bad(f"latency-data-{i}", ("latency", cmd, "--data", "{file}", *extra), content, "m.csv", expect)
      for i, (cmd, extra, content, expect) in enumerate([
          ("validate", ("--no-holdout",), "", ("missing columns",)), ("validate", ("--no-holdout",), GARBAGE, ("UTF-8",)),
          ("validate", ("--no-holdout",), "row_id,source\n", ("missing columns",)), ("validate", ("--no-holdout",), DIR, ("directory",)),
          ("fit", ("-o", "{out}/f.toml"), "", ("missing columns",)), ("fit", ("-o", "{out}/f.toml"), GARBAGE, ("UTF-8",))])],
    # workload profiles and traces, flags that name files
    Bad("synth-profile-missing", ("traces", "synth", "--profile", "nope", "-o", "{out}/s.jsonl"), None, "", ("no shipped profile",)),
    Bad("synth-profile-deep", ("traces", "synth", "--profile", "{file}", "-o", "{out}/s.jsonl"), DEEP_TOML, "p.toml", ("nested",)),
    Bad("synth-suffix", ("traces", "synth", "--profile", "tau2_airline", "-o", "{out}/s.txt"), None, "", ("suffix", ".txt")),
    Bad("fit-suffix", ("traces", "fit", "{small}", "-o", "{out}/p.json"), None, "", (".toml",)),
    Bad("live-trace-garbage", ("live", "--trace", "{file}", "--scale", "tiny", "-o", "{out}/l"), GARBAGE, "t.jsonl", ("--trace",)),
    Bad("live-trace-missing", ("live", "--trace", "{out}/nope.jsonl", "--scale", "tiny", "-o", "{out}/l"), None, "",
        ("--trace", "no such file")),
    Bad("live-trace-and-synthetic", ("live", "--trace", "{small}", "--synthetic", "-o", "{out}/l"), None, "", ("not both",)),
    Bad("live-hardware", ("live", "--synthetic", "--weak-hardware", "nope", "-o", "{out}/l"), None, "", ("--weak-hardware",)),
    Bad("live-cuda-cpu-clock", ("live", "--device", "cuda:0", "--clock", "cpu", "-o", "{out}/l"), None, "", ("--clock cpu",)),
    Bad("calibrate-model", ("calibrate", "-o", "{out}/p.toml", "--model", "medium"), None, "", ("--model",)),
    Bad("calibrate-scale", ("calibrate", "-o", "{out}/p.toml", "--scale", "huge"), None, "", ("--scale",)),
    Bad("predictor-api", ("predictor", "validate", "--edge"), None, "", ("--strong-api", "self-hosted")),
    Bad("predictor-trace-garbage", ("predictor", "validate", "--trace", "{file}", "--synthetic", "0"), GARBAGE, "t.jsonl", ()),
    Bad("study-rates", ("study", "balance", "--rates", "0.5,,2"), None, "", ("--rates",)),
    Bad("study-rates-nan", ("study", "balance", "--rates", "nan"), None, "", ("--rates",)),
    Bad("study-api", ("study", "balance", "--edge"), None, "", ("API",)),
    Bad("sensitivity-ranges-missing", ("study", "sensitivity", "--trace", "{small}", "--acceptance-ranges", "{out}/none.toml",
                                       "-o", "{out}/s"), None, "", ("none.toml", "no such ranges file")),
    Bad("sensitivity-ranges-bad", ("study", "sensitivity", "--trace", "{small}", "--acceptance-ranges", "{file}", "-o", "{out}/s"),
        '[ranges.position_decay]\nlow = 0.1\nhigh = 0.2\n', "r.toml", ("position_decay", "must contain the scenario's value")),
    Bad("predict-ranges-bad", ("predict", "--trace", "{small}", "--acceptance-ranges", "{file}", "-o", "{out}/p"),
        '[[points]]\nposition_decay = 2\n', "r.toml", ("--acceptance-ranges", "points[0]")),
    Bad("sweep-address-local", ("sweep", "{sweep}", "--out", "{out}/sw", "--backend", "local", "--ray-address", "auto"), None, "",
        ("--ray-address", "--backend ray")),
    Bad("sweep-address-form", ("sweep", "{sweep}", "--out", "{out}/sw", "--ray-address", "head"), None, "", ("--ray-address", "HOST:PORT")),
    Bad("roofline-balance-mode", ("roofline", "balance", "--weight-mode", "all"), None, "", ("--weight-mode",)),
    Bad("roofline-does-not-fit", ("roofline", "--gpus", "1"), None, "",
        ("does not fit", "--gpus")),
    # the weights fit, the batch's KV cache does not: the flag to change is --batch (found by the hypothesis part)
    Bad("roofline-batch-does-not-fit", ("roofline", "--batch", "1000"), None, "", ("--batch 1000", "one sequence fits")),
    Bad("roofline-context-does-not-fit", ("roofline", "--model", "qwen3-8b", "--gpus", "1", "--weight-dtype", "bf16",
                                          "--context", "2000000"), None, "", ("--context 2000000", "lower --context")),
]


# ---------------------------------------------------------------- 2b. the hostile-input findings (2026-12-01-hostile-inputs.md)
H20_TOML = (DATA / "hardware/profiles/h20.toml").read_text(encoding="utf-8")
IDEAL_TOML = (DATA / "hardware/engines/ideal.toml").read_text(encoding="utf-8")


def _hw(old: str, new: str) -> str:
    """A copy of the shipped H20 profile under its own id, with one figure changed."""
    text = H20_TOML.replace('id = "h20"', 'id = "hostile"').replace('aliases = ["h20", "h20-96gb", "nvidia-h20"]', "aliases = []")
    assert old in text, old
    return text.replace(old, new, 1)


def _eng(old: str, new: str) -> str:
    text = IDEAL_TOML.replace('id = "ideal"', 'id = "hostile"')
    text = re.sub(r"^aliases = .*$", "aliases = []", text, flags=re.M)
    assert old in text, old
    return text.replace(old, new, 1)


HW_SHOW, ENG_SHOW = ("hardware", "show", "{file}"), ("latency", "engine", "{file}")
ROOF_4B = ("roofline", "--model", "qwen3.5-4b", "--weight-dtype", "bf16")
PREDICT_SMALL = ("predict", "--trace", "{small}", "--strategies", "strongonly,specagent", "-o", "{out}/p")
PLAN_REQ = ("plan", "--requests", "{file}", "--rate", "1/s", "--strong-model", "qwen3.5-4b", "--strong-dtype", "bf16", "--gpu", "h20")
CSV_HEAD = "arrival_s,prompt_tokens,output_tokens\n"

HOSTILE = [
    # F1: nan / inf in a hardware or engine profile (TOML literals), through show, roofline and predict
    Bad("F1-hw-bandwidth-nan", HW_SHOW, _hw("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = nan"), "h.toml",
        ("memory.bandwidth_tb_s", "finite")),
    Bad("F1-hw-bandwidth-inf", HW_SHOW, _hw("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = inf"), "h.toml",
        ("memory.bandwidth_tb_s", "finite")),
    Bad("F1-hw-fp8-nan", HW_SHOW, _hw("fp8 = { value = 296.0", "fp8 = { value = nan"), "h.toml", ("peak_tflops.fp8", "finite")),
    Bad("F1-roofline-hw-nan", ("roofline", "--hardware", "{file}", "--gpus", "1", "--model", "qwen3.5-4b", "--weight-dtype", "fp8"),
        _hw("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = nan"), "h.toml", ("memory.bandwidth_tb_s",)),
    Bad("F1-predict-weak-hw-nan", (*PREDICT_SMALL, "--weak-hardware", "{file}"),
        _hw("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = nan"), "h.toml", ("memory.bandwidth_tb_s", "finite")),
    Bad("F1-engine-half-mb-nan", ENG_SHOW, _eng("bandwidth_half_mb = { value = 0.0", "bandwidth_half_mb = { value = nan"), "e.toml",
        ("kernels.bandwidth_half_mb", "finite")),
    Bad("F1-engine-allreduce-nan", (*PREDICT_SMALL, "--strong-serving-engine", "{file}"),
        _eng("allreduce_alpha_us = { value = 0.0", "allreduce_alpha_us = { value = nan"), "e.toml",
        ("collectives.allreduce_alpha_us", "finite")),
    Bad("F1-engine-request-inf", ENG_SHOW, _eng("request_us = { value = 0.0", "request_us = { value = inf"), "e.toml",
        ("per_request.request_us", "finite")),
    Bad("F1-engine-request-huge", ENG_SHOW, _eng("request_us = { value = 0.0", "request_us = { value = 1e300"), "e.toml",
        ("per_request.request_us", "at most")),
    Bad("F1-engine-unknown-section", ENG_SHOW, _eng('version = "', 'colectives = { x = 1 }\nversion = "'), "e.toml",
        ("unknown key", "colectives")),
    # F20: profile errors name the TOML key as written; out-of-range figures refused with the range
    Bad("F20-hw-bandwidth-zero", HW_SHOW, _hw("bandwidth_tb_s = { value = 4.0", "bandwidth_tb_s = { value = 0.0"), "h.toml",
        ("memory.bandwidth_tb_s",)),
    Bad("F20-hw-bandwidth-text", HW_SHOW, _hw("bandwidth_tb_s = { value = 4.0", 'bandwidth_tb_s = { value = "4.0"'), "h.toml",
        ("memory.bandwidth_tb_s",)),
    Bad("F20-hw-nvlink-zero", HW_SHOW, _hw("bandwidth_gb_s = { value = 900.0", "bandwidth_gb_s = { value = 0.0"), "h.toml",
        ("interconnect.bandwidth_gb_s",)),
    Bad("F20-hw-capacity-tiny", HW_SHOW, _hw("capacity_gb = { value = 96.0", "capacity_gb = { value = 1e-9"), "h.toml",
        ("memory.capacity_gb", "100,000")),
    Bad("F20-hw-unknown-key", HW_SHOW, _hw("[memory]", "[memory]\nbandwith_tb_s = { value = 1.0, source = \"typo\" }"), "h.toml",
        ("unknown key", "bandwith_tb_s")),
    Bad("F20-hw-unknown-top", HW_SHOW, _hw('vendor = "NVIDIA"', 'vendor = "NVIDIA"\nprize = 3'), "h.toml", ("unknown key", "prize")),
    Bad("F20-hw-unknown-dtype", HW_SHOW, _hw("[peak_tflops]", "[peak_tflops]\nbf17 = { value = 1.0, source = \"x\" }"), "h.toml",
        ("peak_tflops", "bf17")),
    # F3: tensor-parallel degrees that do not divide the heads
    Bad("F3-roofline-tp7", (*ROOF_4B, "--gpus", "7"), None, "", ("--gpus", "does not divide", "16 num_attention_heads")),
    Bad("F3-roofline-tp1000", (*ROOF_4B, "--gpus", "1000"), None, "", ("--gpus", "does not divide")),
    Bad("F3-scenario-tp7", ("predict", "--scenario", "{file}", "-o", "{out}/p"), "[strong]\ngpus = 7\n", "s.toml",
        ("strong.gpus", "does not divide")),
    Bad("F3-advice-valid-tp", ("roofline", "--weight-dtype", "bf16"), None, "", ("fit on 16 GPU",)),
    # F12: contexts beyond the model's window
    Bad("F12-roofline-context", ("roofline", "--model", "llama-3.1-8b", "--gpus", "1", "--weight-dtype", "fp8", "--context", "200000"),
        None, "", ("--context 200000", "131,072", "max_position_embeddings")),
    Bad("F12-plan-request-window", PLAN_REQ, CSV_HEAD + "0,300000,10\n1,100,10\n", "r.csv", ("line 2", "262,144")),
    # F8, F11, F16, F17: request CSVs
    Bad("F8-mixed-arrivals", PLAN_REQ, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.500,10,2\n12.5,20,3\n",
        "r.csv", ("line 3", "arrival_s", "same kind of time")),
    Bad("F11-tokens-1e30", PLAN_REQ, CSV_HEAD + "0,1e30,10\n", "r.csv", ("line 2", "prompt_tokens", "10,485,760")),
    Bad("F11-tokens-2e19", PLAN_REQ, CSV_HEAD + "0,20000000000000000000,10\n", "r.csv", ("line 2", "prompt_tokens")),
    Bad("F11-output-1e30", PLAN_REQ, CSV_HEAD + "0,10,1e30\n", "r.csv", ("line 2", "output_tokens")),
    Bad("F16-aware-naive", PLAN_REQ, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.500+00:00,10,2\n"
        "2023-11-16 18:15:48.000,20,3\n", "r.csv", ("line 3", "UTC offset")),
    Bad("F17-request-too-long", PLAN_REQ, CSV_HEAD + "0,1000000000,9\n", "r.csv", ("line 2", "prompt_tokens")),
    Bad("F17-request-does-not-fit", tuple(a if a != "qwen3.5-4b" else "llama-3.1-8b" for a in PLAN_REQ),
        CSV_HEAD + "0,100,9\n1,250000,9\n", "r.csv", ("line 3", "cannot be served", "131,072")),
    # F15: values from a scenario file named as its keys, not as flags never given
    Bad("F15-scenario-api", ("predict", "--scenario", "{file}", "-o", "{out}/p"), 'strong_api = "nope-model"\n', "s.toml",
        ("strong_api", "nope-model")),
    Bad("F15-scenario-engine", ("predict", "--scenario", "{file}", "-o", "{out}/p"), '[strong]\nserving_engine = "nope.toml"\n',
        "s.toml", ("strong.serving_engine", "no such file")),
    Bad("F15-scenario-trace", ("predict", "--scenario", "{file}", "-o", "{out}/p"), '[workload]\ntrace = "nope.jsonl"\n',
        "s.toml", ("s.toml: workload.trace", "no such trace file")),
    # notes: `scenario show` resolves models, GPUs, engines and the workload as predict does (a bad name failed only there)
    Bad("show-unknown-hardware", SCENARIO_SHOW, '[strong]\nhardware = "h2000"\n', "s.toml", ("strong.hardware", "unknown hardware", "h2000")),
    Bad("show-unknown-model", SCENARIO_SHOW, '[weak]\nmodel = "qwen9"\n', "s.toml", ("weak.model", "unknown model", "qwen9")),
    Bad("show-unknown-engine", SCENARIO_SHOW, '[weak]\nserving_engine = "nope"\n', "s.toml", ("weak.serving_engine", "nope")),
    Bad("show-unknown-api", SCENARIO_SHOW, 'strong_api = "nope-model"\n', "s.toml", ("strong_api", "unknown API model")),
    Bad("show-does-not-fit", SCENARIO_SHOW, '[strong]\ngpus = 1\n', "s.toml", ("strong", "does not fit", "strong.gpus")),
    Bad("show-bad-tp", SCENARIO_SHOW, '[strong]\ngpus = 7\n', "s.toml", ("strong.gpus",)),
    Bad("show-missing-trace", SCENARIO_SHOW, '[workload]\ntrace = "nope.jsonl"\n', "s.toml", ("workload.trace", "no such trace file")),
    Bad("show-unknown-synthetic", SCENARIO_SHOW, '[workload]\nsynthetic = "nope"\n', "s.toml", ("workload.synthetic", "nope")),
    # F24: storage formats no engine runs
    Bad("F24-activation-int4", ("predict", "--scenario", "{file}", "-o", "{out}/p"), '[weak]\nactivation_dtype = "int4"\n', "s.toml",
        ("weak.activation_dtype", "weight formats")),
    Bad("F24-state-int4", ("predict", "--scenario", "{file}", "-o", "{out}/p"), '[weak]\nkv_dtype = "int4"\nstate_dtype = "int4"\n',
        "s.toml", ("weak.state_dtype", "float format")),
    Bad("F24-kv-nvfp4-h20", ("roofline", "--kv-dtype", "nvfp4"), None, "", ("--kv-dtype", "FP4 tensor cores")),
    # F21: model configs through `models show`
    Bad("F21-config-hidden-huge", ("models", "show", "{file}"), lambda env: json.dumps(
        {**json.loads((DATA / "costmodel/configs/meta-llama/Llama-3.1-8B/config.json").read_text()),
         "hidden_size": 10**15, "intermediate_size": 10**15}), "config.json", ("hidden_size", "at most")),
    Bad("F12-config-window-0", ("models", "show", "{file}"), lambda env: json.dumps(
        {**json.loads((DATA / "costmodel/configs/meta-llama/Llama-3.1-8B/config.json").read_text()),
         "max_position_embeddings": 0}), "config.json", ("max_position_embeddings", "at least 1")),
    # bench compare: a result file of another kind, or a figure that is not a number (issue #51)
    Bad("bc-no-duration", ("bench", "compare", "{file}", "{vllm}"), '{"completed": 3, "request_throughput": 1.5}', "p.json",
        ("no key 'duration'",)),
    Bad("bc-text-figure", ("bench", "compare", "{predicted}", "{file}"), lambda env: json.dumps(
        {**json.loads(env["vllm"].read_text()), "p99_ttft_ms": "slow"}), "m.json", ("'p99_ttft_ms'", "expected a number")),
]
BAD += HOSTILE


def _materialise(bad: Bad, env: dict, d: Path) -> Path | None:
    if bad.content is None:
        if bad.id == "hardware-dir-bad-profile":
            (d / "broken.toml").write_text("id = [")
        return None
    p = d / bad.name
    content = bad.content(env) if callable(bad.content) else bad.content
    if content is DIR:
        p.mkdir()
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.id)
def test_bad_files_and_values_are_one_line_naming_what_and_where(bad, env, tmp_path):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    f = _materialise(bad, env, out if bad.id == "hardware-dir-bad-profile" else inputs)
    argv = [a.replace("{file}", str(f)) for a in _args(list(bad.argv), env, out)] if f else _args(list(bad.argv), env, out)
    r = runner.invoke(app, argv)
    names = (str(f), f.name) if f is not None else ()
    assert_one_line(r, names=names, expect=bad.expect, out=None if bad.id == "hardware-dir-bad-profile" else out)


def test_the_table_covers_every_command_that_reads_a_file():
    covered = {" ".join(a for a in b.argv[:2] if not a.startswith(("-", "{"))) for b in BAD}
    for command in ("report", "sweep", "scenario show", "hardware show", "latency engine", "models show", "latency validate",
                    "latency fit", "traces synth", "traces fit", "live", "calibrate", "predict", "simulate", "predictor validate",
                    "study balance", "roofline balance", "hardware list", "acceptance fit", "study sensitivity"):
        assert command in covered or command.split()[0] in covered, command


# ---------------------------------------------------------------- 3. outputs that cannot be written
@dataclass(frozen=True)
class Writer:
    """A command that writes {target} (a file, or a folder when `folder`); `full_disk`: also run it onto a full disk
    (only where the write comes before any torch model or a long run)."""

    id: str
    argv: tuple[str, ...]
    folder: bool = False
    full_disk: bool = True


PREDICT = ("predict", "--trace", "{small}", "--strategies", "strongonly,specagent")
WRITERS = [
    Writer("predict", (*PREDICT, "-o", "{target}"), folder=True),
    Writer("predict-report", (*PREDICT, "-o", "{out}/p", "--report", "{target}"), full_disk=False),
    Writer("explain-figure", ("explain", "--trace", "{small}", "--no-counterfactuals", "--figure", "{target}")),
    Writer("simulate", ("simulate", "specagent", "--trace", "{small}", "-o", "{target}")),
    Writer("simulate-synthetic", ("simulate", "specagent", "--synthetic", "tau2_airline", "--trajectories", "20", "-o", "{target}")),
    Writer("import-tau2", ("traces", "import", "tau2", str(DATA / "traces/data/tau2_airline_sample.json"), "-o", "{target}.jsonl")),
    Writer("import-openai", ("traces", "import", "openai", str(DATA / "traces/data/openai_chat_sample.jsonl"), "-o", "{target}.jsonl")),
    Writer("synth-jsonl", ("traces", "synth", "--profile", "tau2_airline", "-n", "3", "-o", "{target}.jsonl")),
    Writer("synth-parquet", ("traces", "synth", "--profile", "tau2_airline", "-n", "3", "-o", "{target}.parquet")),
    Writer("fit", ("traces", "fit", "{small}", "-o", "{target}.toml")),
    Writer("sweep", ("sweep", "{sweep}", "--out", "{target}"), folder=True),
    Writer("study", ("study", "balance", "--tasks", "6", "--rates", "0.5", "--gpu", "h20", "--trace", "{small}", "--out", "{target}")),
    Writer("report", ("report", "{summary}", "-o", "{target}", "--no-images")),
    Writer("predictor", ("predictor", "validate", "--trace", "{small}", "--synthetic", "0", "--strategies", "specagent", "-o", "{target}")),
    Writer("latency-rows", ("latency", "validate", "--data", "{latency}", "--no-holdout", "--rows", "{target}")),
    Writer("latency-figure", ("latency", "validate", "--data", "{latency}", "--no-holdout", "--figure", "{target}")),
    Writer("latency-fit", ("latency", "fit", "--data", "{latency}", "-o", "{target}")),
    Writer("latency-profiles", ("latency", "fit", "--data", "{latency}", "-o", "{out}/f.toml", "--write-profiles", "{target}"),
           folder=True, full_disk=False),
    Writer("calibrate", ("calibrate", "-o", "{target}", "--scale", "tiny"), full_disk=False),
    Writer("live", ("live", "--synthetic", "--scale", "tiny", "-o", "{target}"), folder=True, full_disk=False),
    # F10: plan --out writes each finished search, then plan.json with its curve's HTML together (a full disk leaves none)
    Writer("plan", ("plan", "--rate", "0.5/s", "--tasks", "6", "--trace", "{small}", "--strategy", "strongonly", "--gpu", "h20",
                    "--out", "{target}"), folder=True),
    Writer("acceptance-fit", ("acceptance", "fit", str(DATA / "traces/data/verdict_log_simulated.jsonl"), "-o", "{target}")),
    Writer("study-sensitivity", ("study", "sensitivity", "--trace", "{small}", "-o", "{target}"), folder=True),
]


def _world_readable_env(env: dict[str, Path], scratch: Path) -> dict[str, Path]:
    """The inputs copied where an unprivileged user can read them (pytest's own folders are the owner's only)."""
    shutil.copytree(env["summary"].parent, scratch / "pred")
    out = {"summary": scratch / "pred" / "summary.json", "dir": scratch}
    for k in ("small", "latency", "sweep"):
        out[k] = Path(shutil.copy(env[k], scratch / env[k].name))
    for p in scratch.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return out


def _run(w: Writer, env: dict, out: Path, target: Path):
    argv = [a.replace("{target}", str(target)) for a in _args(list(w.argv), env, out)]
    return runner.invoke(app, argv)


@pytest.mark.parametrize("w", WRITERS, ids=lambda w: w.id)
def test_an_output_under_a_file_is_one_line_and_writes_nothing(w, env, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    r = _run(w, env, out, blocker / "sub" / "result")
    assert_one_line(r, names=(str(blocker),), expect=("is a file, not a folder",), out=out)
    assert blocker.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "out"]


@pytest.mark.parametrize("w", WRITERS, ids=lambda w: w.id)
def test_an_output_in_a_read_only_folder_is_one_line_and_writes_nothing(w, env, unwritable):
    scratch, ro, as_unprivileged = unwritable
    readable = _world_readable_env(env, scratch)
    out = scratch / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    if w.id not in NOT_RUN:  # the same command once with a writable target: every module it imports is loaded before
        _run(w, readable, out, scratch / "warm" / "result")  # the unprivileged run (nobody cannot read root's Python)
        shutil.rmtree(out)
        out.mkdir()
        out.chmod(0o777)
    target = ro / "result"
    with as_unprivileged():
        r = _run(w, readable, out, target)
    assert_one_line(r, names=(str(ro),), expect=("Permission denied",), out=out)
    assert list(ro.iterdir()) == []


@pytest.mark.parametrize("w", [w for w in WRITERS if w.full_disk], ids=lambda w: w.id)
def test_an_output_onto_a_full_disk_is_one_line_and_leaves_nothing(w, env, tmp_path, monkeypatch):
    """ENOSPC while the bytes are written (after some have landed), through the one atomic writer every output uses."""
    real = atomic._fill

    def full(tmp, write):
        real(tmp, write)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic, "_fill", full)
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "target" / "result"
    r = _run(w, env, out, target)
    assert_one_line(r, names=(str(tmp_path / "target"),), expect=("No space left on device",), out=out)
    assert not (tmp_path / "target").exists(), list((tmp_path / "target").rglob("*"))


@pytest.mark.parametrize("w", [w for w in WRITERS if "{target}" in w.argv], ids=lambda w: w.id)
def test_an_output_named_dash_is_refused_not_written_as_a_file_named_dash(w, env, tmp_path, monkeypatch):
    """`-o -` reads as standard output; no writer streams its files, so each refuses it in one line (predict used to
    create a folder named '-'), before any run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    argv = [a.replace("{target}", "-") if a == "{target}" else a for a in _args(list(w.argv), env, tmp_path / "out")]
    r = runner.invoke(app, argv)
    assert_one_line(r, names=("cannot write -",), expect=("not standard output",), out=tmp_path / "out")
    assert not (tmp_path / "-").exists()


def test_plan_onto_a_disk_that_fills_at_its_curve_keeps_the_searches_and_writes_no_half_set(env, tmp_path, monkeypatch):
    """F10: the disk fills at the self-contained HTML (MBs), after plan.json (KBs) would have fit. One line; neither
    plan.json nor the HTML (they are written together); no temp file; the finished search stays, whole, for a rerun."""
    real = atomic._fill

    def full_at_html(tmp, write):
        real(tmp, write)
        if tmp.name.startswith(".capacity_curve.html."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    target = tmp_path / "plan"
    w = next(w for w in WRITERS if w.id == "plan")
    with monkeypatch.context() as m:
        m.setattr(atomic, "_fill", full_at_html)
        r = _run(w, env, tmp_path / "out", target)
    assert_one_line(r, names=(str(target),), expect=("No space left on device",))
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert len(files) == 1 and files[0].startswith("searches/") and files[0].endswith(".json"), files
    json.loads((target / files[0]).read_text())  # whole, not cut short
    again = _run(w, env, tmp_path / "out", target)  # space freed: the rerun reuses the search and writes the set
    assert again.exit_code == 0, again.output
    assert "1 search(es) reused" in again.output, again.output
    assert (target / "plan.json").is_file() and (target / "capacity_curve.html").is_file()
    assert not [p for p in target.rglob(".*") if p.is_file()]


def test_every_writing_command_is_in_the_output_cases():
    writers = {" ".join(a for a in w.argv[:3] if not a.startswith(("-", "{", "/"))) for w in WRITERS}
    for command in ("predict", "simulate", "traces import tau2", "traces import openai", "traces synth", "traces fit", "sweep",
                    "study balance", "report", "predictor validate", "latency validate", "latency fit", "calibrate", "live", "plan"):
        assert any(w.startswith(command) for w in writers), command


# ---------------------------------------------------------------- 4. hypothesis
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Numeric flags of commands that run in milliseconds on the small trace (a valid value runs the command for real).
NUMERIC = [("roofline", "--batch"), ("roofline", "--context"), ("roofline", "--tokens"), ("roofline", "--gpus"),
           ("roofline", "--memory-utilization"), ("roofline balance", "--context"), ("roofline balance", "--gpus"),
           ("simulate", "--k"), ("simulate", "--accept"), ("simulate", "--weak-ratio"), ("simulate", "--verdict-tokens"),
           ("simulate", "--accept-verdict-tokens"), ("simulate", "--position-decay"), ("simulate", "--correlation"),
           ("simulate", "--p-valid-replacement"), ("simulate", "--seed"), ("simulate", "--strong-gpus"),
           ("simulate", "--weak-memory-utilization"), ("simulate", "--verifier-system-tokens")]
VALUES = st.one_of(
    st.integers(-(10**25), 10**25).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=8),
    st.sampled_from(["0", "-0", "1e-320", "0x10", "1_000", " 5", "5 ", "+3", "\u0663", "1" * 40, "0.5", "1", "2", "4096"]),
)


@settings(FUZZ, max_examples=150)
@given(target=st.sampled_from(NUMERIC), value=VALUES)
def test_fuzz_numeric_flags(env, tmp_path, target, value):
    """Any value: a run whose JSON holds only possible numbers, or one line naming the flag."""
    command, flag = target
    r = runner.invoke(app, _args(BASE[command], env, Path(tempfile.mkdtemp(dir=tmp_path))) + [flag, value])
    if r.exit_code == 0:
        assert_possible_json(r)
    else:
        assert_one_line(r, names=(flag,))


#: Every kind of file a command reads (beside the traces, which tests/test_fuzz_inputs.py covers): the command line with
#: {file} for it, and the file's name (its suffix picks the reader).
FILE_KINDS = {
    "report-json": (("report", "{file}", "-o", "{out}/r.html", "--no-images", "--json"), "r.json"),
    "report-csv": (("report", "{file}", "-o", "{out}/r.html", "--no-images", "--json"), "r.csv"),
    "report-parquet": (("report", "{file}", "-o", "{out}/r.html", "--no-images", "--json"), "r.parquet"),
    "sweep-config": (("sweep", "{file}", "--out", "{out}/sw", "--json"), "s.toml"),
    "scenario": (("scenario", "show", "{file}", "--json"), "s.toml"),
    "hardware-profile": (("hardware", "show", "{file}", "--json"), "h.toml"),
    "engine-profile": (("latency", "engine", "{file}", "--json"), "e.toml"),
    "measurements": (("latency", "validate", "--data", "{file}", "--no-holdout", "--json"), "m.csv"),
    "success-rates": (("predict", "--trace", "{small}", "--strategies", "specagent", "--success", "{file}", "-o", "{out}/p", "--json"),
                      "s.json"),
    "workload-profile": (("traces", "synth", "--profile", "{file}", "-n", "2", "-o", "{out}/s.jsonl"), "p.toml"),
    "tag-map": (("traces", "import", "tau2", str(DATA / "traces/data/tau2_airline_sample.json"), "--tags", "{file}",
                 "-o", "{out}/t.jsonl"), "t.json"),
}
BYTES = st.one_of(st.binary(max_size=96), st.text(max_size=96).map(lambda t: t.encode("utf-8")),
                  st.sampled_from([b"", b"{}", b"[]", b"[[]]", b"a = 1", b"\xef\xbb\xbf", b"PAR1", b"null", b"{\"summary\": []}",
                                   b"strategy,usd_per_hour,gpus\n", b"[grid]\nrate = [1]"]))


@settings(FUZZ, max_examples=200)
@given(kind=st.sampled_from(sorted(FILE_KINDS)), data=BYTES)
def test_fuzz_input_files(env, tmp_path, kind, data):
    """Arbitrary bytes as every kind of input file: a run with possible numbers (an empty scenario is the default one),
    or one line naming the file."""
    argv, name = FILE_KINDS[kind]
    d = Path(tempfile.mkdtemp(dir=tmp_path))  # hypothesis reuses tmp_path across examples
    f = d / name
    f.write_bytes(data)
    out = d / "o"
    r = runner.invoke(app, [a.replace("{file}", str(f)) for a in _args(list(argv), env, out)])
    if r.exit_code == 0:
        if "--json" in argv:
            assert_possible_json(r)
    else:
        assert_one_line(r, names=(str(f), f.name), out=out)


HOSTILE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**20), 10**20), st.text(max_size=6),
                    st.booleans(), st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                                   max_size=2))
RECORD_KEYS = ("summary", "phase_time", "phase_bytes", "phase_flops")


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_fuzz_a_corrupted_summary(env, tmp_path, data):
    """One field of a `predict` summary changed to anything: `report` renders it only if it is a possible value there."""
    doc = json.loads(env["summary"].read_text(encoding="utf-8"))
    key = data.draw(st.sampled_from(RECORD_KEYS))
    i = data.draw(st.integers(0, len(doc[key]) - 1))
    field = data.draw(st.sampled_from(sorted(doc[key][i])))
    value = data.draw(HOSTILE)
    doc[key][i][field] = value
    doc.pop("per_trajectory")
    f = Path(tempfile.mkdtemp(dir=tmp_path)) / "summary.json"
    f.write_text(json.dumps(doc))
    r = runner.invoke(app, ["report", str(f), "-o", str(f.with_name("r.html")), "--no-images", "--json"])
    text = field in ("strategy", "label", "workload")
    possible = isinstance(value, str) if text else (isinstance(value, (int, float)) and not isinstance(value, bool)
                                                    and math.isfinite(value) and value >= 0
                                                    and (field != "measured_success" or value <= 1))
    if field == "strategy" and isinstance(value, str):
        possible = bool(value) and value not in [rec["strategy"] for j, rec in enumerate(doc[key]) if j != i]
    if r.exit_code == 0:
        assert possible, (key, field, value)
    else:
        assert not possible or field == "strategy", (key, field, value, r.output)
        assert_one_line(r, names=(str(f),))
