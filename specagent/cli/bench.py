"""`specagent bench serve`: measure your own OpenAI-compatible server; its figures go into `latency fit --data`.

Thin: flags → `specagent.endpoints.bench` (docs/calibration.md, "Calibrating on your own server").
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
from pathlib import Path
from typing import Optional

import typer

from specagent.cli.acceptance_measure import MAX_TIMEOUT_S, extra_body
from specagent.cli.console import SafeConsole, fail, json_out
from specagent.cli.progress import progress_bar
from specagent.common import atomic
from specagent.common.errors import InputError, read_text
from specagent.common.paths import check_outputs, starts_with
from specagent.common.redact import Redactor
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.endpoints.bench import (MAX_CONCURRENCY, BenchRun, Interrupted, ServerFacts, arrival_times, csv_rows, dataset_requests,
                                       format_summary, notes, random_requests, run_level, server_facts)
from specagent.endpoints.client import Endpoint, EndpointError, same_model
from specagent.endpoints.transport import Transport
from specagent.measurements import SERVING_COLUMNS, MeasurementError, load_serving
from specagent.traces.schema import MAX_CONTEXT_TOKENS

#: What --requests-out writes (one JSON object per request, `max_concurrency` first): a rerun may replace such a file.
REQUESTS_JSONL = starts_with(b'{"max_concurrency"', what="a bench serve --requests-out file (JSONL of requests)")

app = typer.Typer(help="Load generators against your own servers (their figures feed `latency fit --data`).", no_args_is_help=True)
err = SafeConsole(stderr=True)


def _levels(text: Optional[str]) -> list[Optional[int]]:
    if text is None:
        return [None]
    out: list[Optional[int]] = []
    for part in text.split(","):
        try:
            v = int(part)
        except ValueError:
            fail(f"--max-concurrency: expected N or a list N,M,... of whole numbers, got {text!r}")
        if not 1 <= v <= MAX_CONCURRENCY:
            fail(f"--max-concurrency: expected 1..{MAX_CONCURRENCY}, got {v}")
        out.append(v)
    return out


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        fail(f"--request-rate: expected requests per second or inf, got {text!r}")
    if math.isnan(v) or v <= 0:
        fail(f"--request-rate: expected > 0 (or inf: all at once), got {text!r}")
    return v


def _check_csv_target(path: Path) -> None:
    """An existing --csv file must be a serving-latency CSV to append to: checked before the run, so a wrong file
    (the --dataset, a trace) is refused before any request, not after the measurements were made."""
    if path.exists() and not atomic.is_special(path):
        try:
            load_serving(path)
        except MeasurementError as exc:
            fail(f"--csv {path}: not a serving-latency CSV to append to ({exc}); nothing was sent")


def _write_csv(path: Path, rows: list[dict], append: bool) -> int:
    """Write (or append to) a serving_latency.csv; returns the rows now in it. An existing file must be one.

    A row id already in the file (a rerun within the same second) gets a suffix (-2, -3, ...): a repeated id would make
    the whole file unreadable to `latency fit`."""
    old = ""
    taken: set[str] = set()
    if append and path.exists():
        try:
            taken = {r.row_id for r in load_serving(path)}
        except MeasurementError as exc:
            fail(f"--csv {path}: not a serving-latency CSV to append to ({exc})")
        old = read_text(path, ValueError, "serving-latency CSV")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SERVING_COLUMNS, lineterminator="\n")
    if not old:
        w.writeheader()
    for r in rows:
        rid, k = r["row_id"], 2
        while rid in taken:
            rid, k = f"{r['row_id']}-{k}", k + 1
        taken.add(rid)
        w.writerow({**r, "row_id": rid})
    text = (old if old.endswith("\n") or not old else old + "\n") + buf.getvalue()

    temp: list[Path] = []

    def write(t: Path) -> None:  # the rows checked as `latency fit` will read them before the file is replaced
        temp.append(t)
        atomic.text_writer(text)(t)
        load_serving(t)

    try:
        atomic.atomic_write(path, write)
    except MeasurementError as exc:  # a measured row no fit may read (a figure past its guard): kept out, said
        fail(f"--csv {path}: a measured row is not one `latency fit` can read "
             f"({str(exc).replace(str(temp[-1]), str(path)) if temp else exc}); the file was left as it was")
    return len(load_serving(path))


def _check_row_facts(model_spec: Optional[str], gpu: str, weight_dtype: str, engine: Optional[str],
                     engine_version: Optional[str]) -> None:
    """The CSV row's facts are checked before any request: a typo found after a long run would cost the run."""
    from specagent.costmodel.dtypes import canonical_dtype, dtype_bytes
    from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
    from specagent.hardware.profile import HardwareProfileError, load_hardware

    if model_spec is not None:
        try:
            load_model_spec(model_spec)
        except ModelSpecError as exc:
            fail(f"--model-spec {model_spec!r}: {exc}")
    if gpu != "unknown":
        try:
            load_hardware(gpu)
        except HardwareProfileError as exc:
            fail(f"--gpu {gpu!r}: {exc} (or 'unknown': the fit then skips the rows)")
    if weight_dtype:
        try:
            dtype_bytes(canonical_dtype(weight_dtype))
        except ValueError as exc:
            fail(f"--weight-dtype: {exc}")
    for flag, v in (("--engine", engine), ("--engine-version", engine_version)):
        if v is not None and not v.strip():
            fail(f"{flag}: expected a name, got an empty one (leave it out to read it from the server)")


@app.command("serve")
def serve(
    base_url: str = typer.Option(..., "--base-url", help="The server's OpenAI base URL, e.g. http://localhost:8000/v1."),
    model: str = typer.Option(..., "--model", help="The model name the server serves."),
    num_prompts: int = typer.Option(100, "--num-prompts", min=1, max=1_000_000, help="Requests per load level."),
    input_len: int = typer.Option(1024, "--input-len", min=1, max=MAX_CONTEXT_TOKENS, help="Prompt tokens of a random request (about one per word)."),
    output_len: int = typer.Option(128, "--output-len", min=1, max=MAX_CONTEXT_TOKENS, help="max_tokens of a random request."),
    range_ratio: float = typer.Option(0.0, "--range-ratio", min=0.0, max=0.99, help="Random lengths uniform in len × [1-r, 1+r]."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="A request trace: CSV with input_tokens,output_tokens per line (instead of random lengths)."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Send ignore_eos=true (vLLM, SGLang) so every answer runs to max_tokens."),
    request_rate: str = typer.Option("inf", "--request-rate", help="Requests per second, gamma-distributed gaps (inf: all at once)."),
    burstiness: float = typer.Option(1.0, "--burstiness", min=0.01, max=100.0, help="Gamma shape of the gaps: 1 = Poisson, < 1 burstier."),
    max_concurrency: Optional[str] = typer.Option(None, "--max-concurrency", help="Most requests in flight; a list 1,4,16 runs one level after another."),
    warmup: int = typer.Option(1, "--warmup", min=0, max=1000, help="Requests sent first, one by one, and not measured."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, max=2.0, help="Sampling temperature."),
    timeout: float = typer.Option(600.0, "--timeout", min=0.001, max=MAX_TIMEOUT_S, help="Seconds to wait for one streamed answer."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**63 - 1, help="Seeds the prompts and the arrival times."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Env var holding the API key (unset: no key sent)."),
    extra: Optional[str] = typer.Option(None, "--extra-body", help="JSON object added to every request body."),
    model_spec: Optional[str] = typer.Option(None, "--model-spec", help="The architecture for the CSV's model column: HF id or config.json (default: --model)."),
    gpu: str = typer.Option("unknown", "--gpu", help="Hardware profile id or .toml of the server's GPU (the CSV's gpu column; `latency fit` needs a profile)."),
    gpus: int = typer.Option(1, "--gpus", min=1, max=4096, help="GPUs serving one replica."),
    tp: Optional[int] = typer.Option(None, "--tp", min=1, max=4096, help="Tensor-parallel size (default: --gpus)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="vllm, sglang, ... (default: what /v1/models says owns the model)."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="(default: what the server's /version says)."),
    weight_dtype: str = typer.Option("", "--weight-dtype", help="bf16, fp8, ... (the CSV's weight_dtype; empty = bf16)."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write the load levels as serving_latency.csv rows here (appended if it exists)."),
    requests_out: Optional[Path] = typer.Option(None, "--requests-out", help="Also write every request's timings as JSONL here."),
    as_json: bool = typer.Option(False, "--json", help="Print the summaries as JSON."),
) -> None:
    """Stream requests to a chat-completions server and measure TTFT, TPOT, ITL and E2E per request.

    Prints each load level in `vllm bench serve`'s layout; --csv writes one serving_latency.csv row
    per level (mean figures, measured lengths), the file `latency fit --data` and `latency validate
    --data` read. ^C stops the run and keeps what finished.
    """
    for flag, value in (("--timeout", timeout), ("--temperature", temperature), ("--burstiness", burstiness),
                        ("--range-ratio", range_ratio)):
        if not math.isfinite(value):
            fail(f"{flag}: expected a finite number, got {value}")
    rate = _rate(request_rate)
    levels = _levels(max_concurrency)
    if tp is not None and tp > gpus:  # the CSV row would describe a deployment no server runs, and `latency fit` reads it
        fail(f"--tp {tp}: tensor parallelism splits one replica over its GPUs, and --gpus is {gpus}: give --gpus {tp} "
             "(the GPUs of one replica) or a --tp of at most --gpus")
    _check_row_facts(model_spec, gpu, weight_dtype, engine, engine_version)
    import re

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        fail(f"--api-key-env: expected an environment variable name, got {api_key_env!r}")
    if not model.strip():
        fail(f"--model: expected the model name the server serves, got {model!r}")
    ep = Endpoint("base", base_url, model, api_key_env, extra_body("--extra-body", extra))
    # one redaction for everything this command prints or writes: the endpoint's key (whatever its variable is called)
    # and the environment's, applied to every text the server or the user supplied before it is cut or kept
    red = Redactor.of(*ep.secrets)
    try:  # before any request: an output over the dataset, two outputs in one file, a file --requests-out did not write
        check_outputs({"--csv": csv_out, "--requests-out": requests_out}, {"--dataset": dataset}, InputError,
                      kinds={"--requests-out": REQUESTS_JSONL})
    except InputError as exc:
        fail(str(exc))
    for target in (csv_out, requests_out):
        if target is not None:
            atomic.check_writable(target)
    if csv_out is not None:
        _check_csv_target(csv_out)
    reqs = (dataset_requests(dataset, num_prompts, seed) if dataset is not None
            else random_requests(num_prompts, input_len, output_len, seed, range_ratio))
    try:  # the send times, bounded before any request (1e-320 requests/s gave times of inf)
        arrival_times(len(reqs), rate, burstiness, seed)
    except InputError as exc:
        fail(str(exc))
    http = Transport(min(timeout, 10.0), 1)
    try:
        told = server_facts(http, ep, red)
    finally:
        http.close()
    eng = engine or (told["owned_by"] if told.get("owned_by") in ("vllm", "sglang", "tensorrt-llm") else "unknown")
    facts = ServerFacts(base_url=ep.shown_url, model=model_spec or model, served_model=model, gpu=gpu, gpus=gpus, tp=tp, engine=eng,
                        engine_version=red.line(engine_version) if engine_version else told.get("version", ""),
                        weight_dtype=weight_dtype,
                        note="" if (engine and engine_version) else
                        f"engine {'given' if engine else 'from /v1/models owned_by ' + repr(told.get('owned_by'))}, version "
                        f"{'given' if engine_version else ('from the server' if 'version' in told else 'not reported')}")
    if told.get("models") and not any(same_model(model, name) for name in told["models"].split(",")):
        err.print(red.line(f"warning: --model {model!r} is not among the models the server lists ({told['models']})"),
                  highlight=False, markup=False)
    runs: list[BenchRun] = []
    interrupted: int | None = None  # the exit status a signal asks for
    when = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    for level in levels:
        try:
            with sigterm_as_interrupt(), progress_bar(len(reqs), f"c={level or '∞'}", show=not as_json, plain=True) as advance:
                runs.append(run_level(ep, reqs, max_concurrency=level, request_rate=rate, burstiness=burstiness, seed=seed,
                                      timeout_s=timeout, ignore_eos=ignore_eos, temperature=temperature, warmup=warmup,
                                      progress=advance, red=red))
        except Interrupted as exc:  # ^C or SIGTERM: what finished is kept, written and printed
            runs.append(exc.run)
            interrupted = exit_code(exc.cause) if exc.cause is not None else 130
        except EndpointError as exc:
            fail(str(exc))
        if not as_json:
            print(format_summary(runs[-1]))
            for n in notes(runs[-1]):
                err.print(red.line(f"note: {n}"), highlight=False, markup=False)
        served = runs[-1].summary()["served_models"]
        if served and not all(same_model(model, name) for name in served):
            err.print(red.line(f"warning: asked for model {model!r}; the server answered as {', '.join(served)}"),
                      highlight=False, markup=False)
        if interrupted is not None:
            break
    rows = red.doc([r for run in runs for r in csv_rows(run, facts, seed, ignore_eos, when)])
    written = []
    if csv_out is not None and rows:
        total = _write_csv(csv_out, rows, append=True)
        written.append(f"{csv_out} ({len(rows)} rows added, {total} in all)")
    if requests_out is not None:
        lines = "".join(json.dumps(red.doc({"max_concurrency": run.max_concurrency, **r.record()})) + "\n"
                        for run in runs for r in run.results)
        atomic.atomic_write(requests_out, atomic.text_writer(lines))
        written.append(str(requests_out))
    if as_json:
        print(json_out(red.doc({"levels": [run.summary() for run in runs], "rows": rows, "server": told}), indent=2))
    for w in written:
        err.print(f"wrote {w}", highlight=False, markup=False)
    if not any(run.ok for run in runs):
        err.print("error: no request completed", highlight=False, markup=False)
        raise typer.Exit(code=3)
    if interrupted is not None:
        raise typer.Exit(code=interrupted)
