"""The serving benchmark (`specagent bench serve`): stream requests to your own chat-completions server, measure TTFT,
TPOT, ITL and E2E per request at each load level, and make serving_latency.csv rows `latency fit --data` reads.

Staged like a measurement: `ServeBenchmark(request)` checks everything that needs no server (the CSV row's facts
too: a typo found after a long run would cost the run) and draws the requests; `server()` asks the server what it
serves; `run()` runs the load levels one after another. ^C or SIGTERM stops the level running and keeps what
finished (`BenchServeResult.interrupted`: the exit status the signal asks for). One redaction covers everything the
job keeps: the endpoint's key, whatever its variable is called, and the environment's.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specagent.common import atomic
from specagent.common.errors import InputError, read_text
from specagent.common.redact import Redactor
from specagent.common.signals import exit_code, sigterm_as_interrupt
from specagent.endpoints.bench import (MAX_CONCURRENCY, BenchRun, Interrupted, ServerFacts, arrival_times, csv_rows, dataset_requests,
                                       random_requests, run_level, server_facts)
from specagent.endpoints.client import Endpoint, parse_extra_body, same_model
from specagent.endpoints.jobs.acceptance_measure import MAX_TIMEOUT_S
from specagent.endpoints.transport import Transport
from specagent.measurements import SERVING_COLUMNS, MeasurementError, load_serving
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, counted, report
from specagent.simulator.jobs.checks import check_bounds, check_finite
from specagent.traces.schema import MAX_CONTEXT_TOKENS

#: Engines whose name a server's /v1/models `owned_by` gives reliably.
KNOWN_OWNERS = ("vllm", "sglang", "tensorrt-llm")


@dataclass(frozen=True, kw_only=True)
class BenchServeRequest(Request):
    """The server, the load and what the CSV's rows say about the deployment (the `scenario` is not read)."""

    base_url: str = field(metadata={"help": "The server's OpenAI base URL, e.g. http://localhost:8000/v1."})
    model: str = field(metadata={"help": "The model name the server serves."})
    num_prompts: int = field(default=100, metadata={"min": 1, "max": 1_000_000, "help": "Requests per load level."})
    input_len: int = field(default=1024, metadata={"min": 1, "max": MAX_CONTEXT_TOKENS,
                                                   "help": "Prompt tokens of a random request (about one per word)."})
    output_len: int = field(default=128, metadata={"min": 1, "max": MAX_CONTEXT_TOKENS, "help": "max_tokens of a random request."})
    range_ratio: float = field(default=0.0, metadata={"min": 0.0, "max": 0.99, "help": "Random lengths uniform in len × [1-r, 1+r]."})
    dataset: Path | None = field(default=None, metadata={"help": "A request trace: CSV with input_tokens,output_tokens per line "
                                                                 "(instead of random lengths)."})
    ignore_eos: bool = field(default=False, metadata={"help": "Send ignore_eos=true (vLLM, SGLang) so every answer runs to max_tokens."})
    request_rate: str = field(default="inf", metadata={"help": "Requests per second, gamma-distributed gaps (inf: all at once)."})
    burstiness: float = field(default=1.0, metadata={"min": 0.01, "max": 100.0,
                                                     "help": "Gamma shape of the gaps: 1 = Poisson, < 1 burstier."})
    max_concurrency: str | None = field(default=None, metadata={"help": "Most requests in flight; a list 1,4,16 runs one level after another."})
    warmup: int = field(default=1, metadata={"min": 0, "max": 1000, "help": "Requests sent first, one by one, and not measured."})
    temperature: float = field(default=0.0, metadata={"min": 0.0, "max": 2.0, "help": "Sampling temperature."})
    timeout: float = field(default=600.0, metadata={"min": 0.001, "max": MAX_TIMEOUT_S, "help": "Seconds to wait for one streamed answer."})
    seed: int = field(default=0, metadata={"min": 0, "max": 2**63 - 1, "help": "Seeds the prompts and the arrival times."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "Env var holding the API key (unset: no key sent)."})
    extra_body: str | None = field(default=None, metadata={"help": "JSON object added to every request body."})
    model_spec: str | None = field(default=None, metadata={"help": "The architecture for the CSV's model column: HF id or config.json "
                                                                   "(default: --model)."})
    gpu: str = field(default="unknown", metadata={"help": "Hardware profile id or .toml of the server's GPU (the CSV's gpu column; "
                                                          "`latency fit` needs a profile)."})
    gpus: int = field(default=1, metadata={"min": 1, "max": 4096, "help": "GPUs serving one replica."})
    tp: int | None = field(default=None, metadata={"min": 1, "max": 4096, "help": "Tensor-parallel size (default: --gpus)."})
    engine: str | None = field(default=None, metadata={"help": "vllm, sglang, ... (default: what /v1/models says owns the model)."})
    engine_version: str | None = field(default=None, metadata={"help": "(default: what the server's /version says)."})
    weight_dtype: str = field(default="", metadata={"help": "bf16, fp8, ... (the CSV's weight_dtype; empty = bf16)."})

    def check(self) -> None:
        check_finite(self, "timeout", "temperature", "burstiness", "range_ratio")
        check_bounds(self)
        self.rate()
        self.levels()
        if self.tp is not None and self.tp > self.gpus:  # the row would describe a deployment no server runs
            raise JobError(f"`tp` {self.tp}: tensor parallelism splits one replica over its GPUs, and `gpus` is {self.gpus}: give "
                           f"`gpus` {self.tp} (the GPUs of one replica) or a `tp` of at most `gpus`")
        self._check_row_facts()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            raise JobError(f"expected an environment variable name, got {self.api_key_env!r}", "api_key_env")
        if not self.model.strip():
            raise JobError(f"expected the model name the server serves, got {self.model!r}", "model")
        self.endpoint()

    def rate(self) -> float:
        """Requests per second (inf: all at once)."""
        try:
            v = float(self.request_rate)
        except ValueError:
            raise JobError(f"expected requests per second or inf, got {self.request_rate!r}", "request_rate") from None
        if math.isnan(v) or v <= 0:
            raise JobError(f"expected > 0 (or inf: all at once), got {self.request_rate!r}", "request_rate")
        return v

    def levels(self) -> list[int | None]:
        """The load levels: the most requests in flight at each (None: no limit)."""
        if self.max_concurrency is None:
            return [None]
        out: list[int | None] = []
        for part in self.max_concurrency.split(","):
            try:
                v = int(part)
            except ValueError:
                raise JobError(f"expected N or a list N,M,... of whole numbers, got {self.max_concurrency!r}", "max_concurrency") from None
            if not 1 <= v <= MAX_CONCURRENCY:
                raise JobError(f"expected 1..{MAX_CONCURRENCY}, got {v}", "max_concurrency")
            out.append(v)
        return out

    def endpoint(self) -> Endpoint:
        try:
            extra = parse_extra_body(self.extra_body)
        except InputError as exc:
            raise JobError(str(exc), "extra_body") from None
        try:
            return Endpoint("base", self.base_url, self.model, self.api_key_env, extra)
        except InputError as exc:  # an Endpoint's error already names its option
            raise JobError(str(exc)) from None

    def _check_row_facts(self) -> None:
        """The CSV row's facts, checked before any request."""
        from specagent.costmodel.dtypes import canonical_dtype, dtype_bytes
        from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
        from specagent.hardware.profile import HardwareProfileError, load_hardware

        if self.model_spec is not None:
            try:
                load_model_spec(self.model_spec)
            except ModelSpecError as exc:
                raise JobError(f"`model_spec` {self.model_spec!r}: {exc}") from None
        if self.gpu != "unknown":
            try:
                load_hardware(self.gpu)
            except HardwareProfileError as exc:
                raise JobError(f"`gpu` {self.gpu!r}: {exc} (or 'unknown': the fit then skips the rows)") from None
        if self.weight_dtype:
            try:
                dtype_bytes(canonical_dtype(self.weight_dtype))
            except ValueError as exc:
                raise JobError(str(exc), "weight_dtype") from None
        for name in ("engine", "engine_version"):
            v = getattr(self, name)
            if v is not None and not v.strip():
                raise JobError("expected a name, got an empty one (leave it out to read it from the server)", name)


def check_csv_target(path: Path) -> None:
    """An existing CSV to append to must be a serving-latency CSV: checked before the run, so a wrong file (the
    dataset, a trace) is refused before any request, not after the measurements were made."""
    if path.exists() and not atomic.is_special(path):
        try:
            load_serving(path)
        except MeasurementError as exc:
            raise InputError(f"{path}: not a serving-latency CSV to append to ({exc}); nothing was sent") from None


@dataclass
class BenchServeResult(Result):
    """Every load level run (the last one cut short when interrupted), the CSV rows they make, what the server said."""

    runs: list[BenchRun]
    rows: list[dict[str, Any]]  # serving_latency.csv rows, redacted
    server: dict[str, str]  # what the server told about itself
    red: Redactor
    interrupted: int | None = None  # the exit status the signal that stopped the run asks for

    @property
    def completed(self) -> bool:
        """Some request of some level completed."""
        return any(run.ok for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return self.red.doc({"levels": [run.summary() for run in self.runs], "rows": self.rows, "server": self.server})

    def requests_jsonl(self) -> str:
        """Every request's timings, one JSON object per line, its level's `max_concurrency` first."""
        return "".join(json.dumps(self.red.doc({"max_concurrency": run.max_concurrency, **r.record()})) + "\n"
                       for run in self.runs for r in run.results)

    def write_requests(self, path: Path) -> Path:
        atomic.atomic_write(path, atomic.text_writer(self.requests_jsonl()))
        return path

    def write_csv(self, path: Path) -> int:
        """Append the rows to a serving_latency.csv (written if new; an existing file must be one); the rows now in it.

        A row id already in the file (a rerun within the same second) gets a suffix (-2, -3, ...): a repeated id would
        make the whole file unreadable to `latency fit`. The rows are checked as `latency fit` reads them before the
        file is replaced: a measured row no fit may read is kept out, and said (InputError naming `path`)."""
        old, taken = "", set()
        if path.exists():
            try:
                taken = {r.row_id for r in load_serving(path)}
            except MeasurementError as exc:
                raise InputError(f"{path}: not a serving-latency CSV to append to ({exc})") from None
            old = read_text(path, ValueError, "serving-latency CSV")
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=SERVING_COLUMNS, lineterminator="\n")
        if not old:
            w.writeheader()
        for r in self.rows:
            rid, k = r["row_id"], 2
            while rid in taken:
                rid, k = f"{r['row_id']}-{k}", k + 1
            taken.add(rid)
            w.writerow({**r, "row_id": rid})
        text = (old if old.endswith("\n") or not old else old + "\n") + buf.getvalue()
        temp: list[Path] = []

        def write(t: Path) -> None:
            temp.append(t)
            atomic.text_writer(text)(t)
            load_serving(t)

        try:
            atomic.atomic_write(path, write)
        except MeasurementError as exc:
            raise InputError(f"{path}: a measured row is not one `latency fit` can read "
                             f"({str(exc).replace(str(temp[-1]), str(path)) if temp else exc}); the file was left as it was") from None
        return len(load_serving(path))

    def write(self, folder: str | Path) -> list[Path]:
        """serving_latency.csv (appended to) and requests.jsonl in `folder`."""
        folder = Path(folder)
        out = [self.write_requests(folder / "requests.jsonl")]
        if self.rows:
            self.write_csv(folder / "serving_latency.csv")
            out.insert(0, folder / "serving_latency.csv")
        return out


class ServeBenchmark:
    """One benchmark, staged: checked and drawn on construction, the server asked by `server()`, the levels by `run()`."""

    def __init__(self, request: BenchServeRequest):
        request.check()
        self.request = request
        self.ep = request.endpoint()
        self.red = Redactor.of(*self.ep.secrets)
        self.rate = request.rate()
        self.levels = request.levels()
        self.requests = (dataset_requests(request.dataset, request.num_prompts, request.seed) if request.dataset is not None
                         else random_requests(request.num_prompts, request.input_len, request.output_len, request.seed,
                                              request.range_ratio))
        try:  # the send times, bounded before any request (1e-320 requests/s gave times of inf)
            arrival_times(len(self.requests), self.rate, request.burstiness, request.seed)
        except InputError as exc:
            raise JobError(str(exc)) from None
        self.told: dict[str, str] = {}
        self.facts: ServerFacts | None = None

    def server(self) -> list[str]:
        """Ask the server what it serves (its facts go into the CSV rows); a warning line per doubt."""
        r = self.request
        http = Transport(min(r.timeout, 10.0), 1)
        try:
            told = self.told = server_facts(http, self.ep, self.red)
        finally:
            http.close()
        eng = r.engine or (told["owned_by"] if told.get("owned_by") in KNOWN_OWNERS else "unknown")
        self.facts = ServerFacts(
            base_url=self.ep.shown_url, model=r.model_spec or r.model, served_model=r.model, gpu=r.gpu, gpus=r.gpus, tp=r.tp,
            engine=eng, engine_version=self.red.line(r.engine_version) if r.engine_version else told.get("version", ""),
            weight_dtype=r.weight_dtype,
            note="" if (r.engine and r.engine_version) else
            f"engine {'given' if r.engine else 'from /v1/models owned_by ' + repr(told.get('owned_by'))}, version "
            f"{'given' if r.engine_version else ('from the server' if 'version' in told else 'not reported')}")
        warnings = []
        if eng == "unknown":  # said, not silently written: the CSV's engine column feeds `latency fit`
            why = (f"/v1/models names owner {told['owned_by']!r}, not an engine this tool knows" if "owned_by" in told else
                   "/v1/models did not answer with an owner" if "models" in told else "/v1/models did not answer")
            warnings.append(self.red.line(f"warning: the rows record engine 'unknown' ({why}); pass --engine "
                                          f"({', '.join(sorted(KNOWN_OWNERS))} or your engine's id) to name it"))
        if told.get("models") and not any(same_model(r.model, name) for name in told["models"].split(",")):
            warnings.append(self.red.line(f"warning: --model {r.model!r} is not among the models the server lists "
                                          f"({told['models']})"))
        return warnings

    def run(self, progress: Progress | None = None, on_level: Callable[[BenchRun], None] | None = None) -> BenchServeResult:
        """Every load level in turn (`on_level` after each); ^C or SIGTERM ends the level running, keeping what finished."""
        if self.facts is None:
            self.server()
        r, runs, interrupted = self.request, [], None
        when = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
        for level in self.levels:
            what, total = f"c={level or '∞'}", len(self.requests)
            advance = counted(progress, what, total)
            report(progress, what, 0, total)
            try:
                with sigterm_as_interrupt():
                    runs.append(run_level(self.ep, self.requests, max_concurrency=level, request_rate=self.rate,
                                          burstiness=r.burstiness, seed=r.seed, timeout_s=r.timeout, ignore_eos=r.ignore_eos,
                                          temperature=r.temperature, warmup=r.warmup, progress=advance, red=self.red))
            except Interrupted as exc:  # ^C or SIGTERM: what finished is kept, written and printed
                runs.append(exc.run)
                interrupted = exit_code(exc.cause) if exc.cause is not None else 130
            if on_level is not None:
                on_level(runs[-1])
            if interrupted is not None:
                break
        assert self.facts is not None
        rows = self.red.doc([row for run in runs for row in csv_rows(run, self.facts, r.seed, r.ignore_eos, when)])
        return BenchServeResult(runs, rows, self.told, self.red, interrupted)

    def served_warning(self, run: BenchRun) -> str | None:
        """A warning when the server answered as another model than the one asked for."""
        served = run.summary()["served_models"]
        if served and not all(same_model(self.request.model, name) for name in served):
            return self.red.line(f"warning: asked for model {self.request.model!r}; the server answered as {', '.join(served)}")
        return None


def run(request: BenchServeRequest, progress: Progress | None = None) -> BenchServeResult:
    """The whole benchmark for a Python caller (warnings are in the levels' summaries and the server's facts)."""
    return ServeBenchmark(request).run(progress)
