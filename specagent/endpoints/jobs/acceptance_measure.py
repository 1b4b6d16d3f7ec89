"""The acceptance measurement (`specagent acceptance measure`): teacher-forced shadow verification on two
OpenAI-compatible endpoints, the Weak one drafting at recorded positions and the Strong one verifying.

Staged, because a person confirms the cost before the run: `ShadowMeasurement(request)` reads the traces and picks
the positions; inside `with` it holds the client (its cache in OUT/cache), gives the `estimate()` and `run()`s.
`run(request)` does all of it for a Python caller. Every answer is cached by its request, so an interrupted run
(`MeasureInterrupted`, every call in flight stopped) resumes where it stopped when run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from specagent.common.errors import InputError
from specagent.endpoints.cache import ResponseCache, resume_hint
from specagent.endpoints.client import ChatClient, Endpoint, EndpointError, RetryPolicy, parse_extra_body, token_prices
from specagent.endpoints.measure import Estimate, estimate, select_positions, summarize, unreported, write_outputs
from specagent.endpoints.recorded import RecordedTask, load_tools, read_recorded, unique_stems
from specagent.endpoints.shadow import RESPONSE_FORMATS, MeasureConfig, ShadowRun
from specagent.endpoints.transport import Cancelled
from specagent.simulator.jobs.base import JobError, Progress, Request, Result, counted, report
from specagent.simulator.jobs.checks import check_bounds, check_finite
from specagent.simulator.scenario import Scenario
from specagent.traces.schema import MAX_CONTEXT_TOKENS
from specagent.traces.tool_tags import default_tag_map

_K = next(f for f in fields(Scenario) if f.name == "k")
#: Guards against a typo, not limits of the method: the shared τ²-Bench files hold about 1,000 agent positions in all.
MAX_POSITIONS = 10_000_000
#: One day: no single chat completion waits longer.
MAX_TIMEOUT_S = 86_400.0
#: What the τ²-Bench fixture shipped for the tests holds instead of the airline policy (traces/data/tau2_airline_sample.json).
POLICY_PLACEHOLDERS = ("(trimmed for the fixture)",)
#: The files a run writes in OUT besides one verdict log per trace.
OUTPUTS = ("summary.json", "skips.jsonl", "calls.jsonl", "run.json")
#: The token cap of one call.
TOKENS = {"min": 1, "max": MAX_CONTEXT_TOKENS}


@dataclass(frozen=True, kw_only=True)
class MeasureRequest(Request):
    """Where to measure (two endpoints), on what (recorded traces) and how; `out` holds the cache a rerun resumes from.
    K's default is the Scenario's, so it lives once; the `scenario` itself is not read."""

    traces: tuple[Path, ...] = field(metadata={"argument": True, "help": "Recorded runs to teacher-force: τ²-Bench results files "
                                               "(the raw JSON, with messages) or OpenAI chat logs."})
    weak_url: str = field(metadata={"help": "Base URL of the Weak model's server, e.g. http://localhost:8000/v1."})
    weak_model: str = field(metadata={"help": "Model name the Weak server serves (e.g. Qwen/Qwen3.5-4B)."})
    strong_url: str = field(metadata={"help": "Base URL of the Strong model's server."})
    strong_model: str = field(metadata={"help": "Model name the Strong server serves."})
    out: Path = field(metadata={"short": "-o", "help": "Folder for the verdict logs, summary.json, skips.jsonl and the cache."})
    limit: int | None = field(default=None, metadata={"min": 1, "max": MAX_POSITIONS,
                                                      "help": "Verify a seeded sample of this many positions (default: all)."})
    k: int = field(default=_K.default, metadata={"min": 1, "max": 64, "help": _K.metadata["help"]})
    weak_api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "Env var holding the Weak API key (unset: no key sent)."})
    strong_api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "Env var holding the Strong API key."})
    tools: Path | None = field(default=None, metadata={"help": "OpenAI tools JSON for the trace's tools (default: inferred from "
                                                               "the recorded calls)."})
    concurrency: int = field(default=4, metadata={"min": 1, "max": 256, "help": "Most requests in flight at once."})
    timeout: float = field(default=300.0, metadata={"min": 0.001, "max": MAX_TIMEOUT_S, "help": "Seconds one whole answer may "
                                                    "take (connect to last byte) before it is retried."})
    retries: int = field(default=6, metadata={"min": 1, "max": 20, "help": "Attempts per request on 429/5xx/timeouts/broken answers."})
    backoff: float = field(default=0.5, metadata={"min": 0.0, "max": 60.0, "help": "Base of the exponential backoff between "
                                                                                  "attempts (s)."})
    temperature: float = field(default=0.0, metadata={"min": 0.0, "max": 2.0, "help": "Sampling temperature of every call."})
    max_tokens: int | None = field(default=None, metadata={**TOKENS, "help": "max_tokens of every call (default: the server's), "
                                                                             "unless one of the two below is given."})
    weak_max_tokens: int | None = field(default=None, metadata={**TOKENS, "help": "max_tokens of the Weak drafts (stops a rambling "
                                                                                  "model; a draft cut there is skipped as draft:truncated)."})
    strong_max_tokens: int | None = field(default=None, metadata={**TOKENS, "help": "max_tokens of the Strong verdicts and repairs (a "
                                                                                    "verdict cut there is skipped as verify:truncated, not retried)."})
    response_format: str = field(default="auto", metadata={"help": "How the verdict's JSON is asked for: auto (json_schema, falling "
                                                                   "back to the prompt's words if the server refuses it), json_schema, prompt."})
    seed: int = field(default=0, metadata={"min": 0, "max": 2**63 - 1, "help": "Seeds the position sample, the servers' sampling "
                                                                               "and the retry jitter."})
    weak_usd_per_mtok: str | None = field(default=None, metadata={"help": "Weak prices IN,OUT (USD per million tokens) for the estimate."})
    strong_usd_per_mtok: str | None = field(default=None, metadata={"help": "Strong prices IN,OUT for the estimate."})
    weak_extra_body: str | None = field(default=None, metadata={"help": "JSON object added to every Weak request, e.g. "
                                                                        "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'."})
    strong_extra_body: str | None = field(default=None, metadata={"help": "JSON object added to every Strong request."})

    def check(self) -> None:
        check_finite(self, "timeout", "backoff", "temperature")
        check_bounds(self)
        if self.response_format not in RESPONSE_FORMATS:
            raise JobError(f"expected one of {', '.join(RESPONSE_FORMATS)}, got {self.response_format!r}", "response_format")
        self.endpoints()
        self.prices()

    def endpoints(self) -> tuple[Endpoint, Endpoint]:
        """The Weak and Strong endpoints (an Endpoint's own error already names its option)."""
        weak_extra, strong_extra = _extra(self, "weak_extra_body"), _extra(self, "strong_extra_body")
        try:
            return (Endpoint("weak", self.weak_url, self.weak_model, self.weak_api_key_env, weak_extra),
                    Endpoint("strong", self.strong_url, self.strong_model, self.strong_api_key_env, strong_extra))
        except InputError as exc:
            raise JobError(str(exc)) from None

    def prices(self) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
        """The Weak and Strong prices (IN, OUT per million tokens) for the estimate, None where not given."""
        out = []
        for name in ("weak_usd_per_mtok", "strong_usd_per_mtok"):
            try:
                out.append(token_prices(getattr(self, name)))
            except InputError as exc:
                raise JobError(str(exc), name) from None
        return out[0], out[1]

    def config(self) -> MeasureConfig:
        return MeasureConfig(k=self.k, seed=self.seed, temperature=self.temperature, max_tokens=self.max_tokens,
                             response_format=self.response_format, concurrency=self.concurrency,
                             weak_max_tokens=self.weak_max_tokens, strong_max_tokens=self.strong_max_tokens)


def _extra(request: Any, name: str) -> dict[str, Any]:
    try:
        return parse_extra_body(getattr(request, name))
    except InputError as exc:
        raise JobError(str(exc), name) from None


class MeasureInterrupted(Exception):
    """The run was interrupted (^C, or a cancelled call): every call in flight stopped, the answers so far cached."""

    def __init__(self, cached: int, cache: Path):
        super().__init__(f"interrupted: every call in flight stopped; the {cached} answers so far are cached in {cache}; "
                         "rerun the same command to resume")
        self.cached, self.cache = cached, cache


@dataclass
class MeasureResult(Result):
    """What was measured (`summary`, deterministic), what the client did (`client`), and the files written."""

    summary: dict[str, Any]
    client: dict[str, Any]
    stems: dict[str, str]  # trace file -> the name of its verdict log
    positions: list[tuple[RecordedTask, int]]
    results: list[Any]  # per position: its record or why it was skipped, and the calls it made
    run_info: dict[str, Any]  # run.json: what this run sent, retried and found in the cache
    paths: list[Path] = field(default_factory=list)

    @property
    def unreported(self) -> list[str]:
        """What the servers did not report, said rather than taken as zero."""
        return unreported(self.summary)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "client": self.client, "outputs": [str(p) for p in self.paths]}

    def write(self, folder: str | Path) -> list[Path]:
        """The verdict logs (one per trace, even when empty), skips, calls, summary and run info, together; `run`
        writes them in `request.out`, beside the cache."""
        self.paths = write_outputs(Path(folder), self.stems, self.positions, self.results, self.summary, self.run_info)
        return self.paths


class ShadowMeasurement:
    """One measurement, staged: the traces read and the positions picked on construction; the client opened by `with`."""

    def __init__(self, request: MeasureRequest, on_event: Callable[[str], None] | None = None):
        request.check()
        self.request = request
        self.weak, self.strong = request.endpoints()
        self.tags = default_tag_map()
        given = load_tools(request.tools) if request.tools else None
        self.tasks_by_file: dict[str, list[RecordedTask]] = {}
        inferred: dict[str, list[dict]] = {}
        for t in request.traces:
            tasks, tl = read_recorded(t, self.tags)  # a TraceFormatError or FileNotFoundError names the file
            self.tasks_by_file[str(t)] = tasks
            for task in tasks:
                inferred.setdefault(task.domain, tl)
        self.tool_map = {d: given or tl for d, tl in inferred.items()}
        self.stems = dict(zip(self.tasks_by_file, unique_stems([Path(f) for f in self.tasks_by_file])))
        self.positions = select_positions([t for ts in self.tasks_by_file.values() for t in ts], request.limit, request.seed)
        if not self.positions:
            raise JobError(f"{', '.join(map(str, request.traces))}: no agent turn to verify (no assistant message after a user "
                           "or tool message)")
        self.on_event = on_event
        self.client: ChatClient | None = None

    def outputs(self) -> list[Path]:
        """Every file the run writes in OUT (none may replace a trace it reads or the --tools file)."""
        out = self.request.out
        return [out / name for name in (*(f"{s}.verdicts.jsonl" for s in self.stems.values()), *OUTPUTS)]

    def warnings(self) -> list[str]:
        """A line per file whose system prompt carries no policy: real models then judge 'policy-compliant' steps with none."""
        out = []
        for f, tasks in self.tasks_by_file.items():
            bad = [t for t in tasks if t.system.startswith("<instructions>") and (
                any(p in t.system for p in POLICY_PLACEHOLDERS) or "<policy>\n\n</policy>" in t.system)]
            if bad:
                out.append(f"{f}: {len(bad)} of {len(tasks)} tasks have no domain policy in the file (empty or a placeholder): "
                           "the models will see the agent instruction without it; measure a full τ²-Bench results file")
        return out

    def __enter__(self) -> "ShadowMeasurement":
        r = self.request
        self.client = ChatClient(ResponseCache(r.out / "cache"), concurrency=r.concurrency, timeout_s=r.timeout, seed=r.seed,
                                 retry=RetryPolicy(attempts=r.retries, base_s=r.backoff), on_event=self.on_event)
        self.client.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.client is not None
        self.client.__exit__(*exc)

    def shadow(self) -> ShadowRun:
        assert self.client is not None, "open the measurement with `with` first"
        return ShadowRun(self.client, self.weak, self.strong, self.tool_map, self.tags, self.request.config())

    def status(self) -> str:
        """The client's requests answered and retried so far (none before it opens): what a progress line shows moving
        while a position waits on a slow server."""
        return self.client.stats.status_line() if self.client is not None else ""

    def estimate(self) -> Estimate:
        """What the run will send and cost (the cache's answers counted as free)."""
        return estimate(self.positions, self.request.k, self.shadow(), *self.request.prices())

    def run(self, progress: Progress | None = None) -> MeasureResult:
        """Verify every position, write the outputs in OUT; an interruption stops every call in flight."""
        client, total = self.client, len(self.positions)
        assert client is not None, "open the measurement with `with` first"
        run = self.shadow()
        advance = counted(progress, "verifying", total)
        report(progress, "verifying", 0, total)  # the stage and its size, before the first answer
        try:
            results = run.run(self.positions, advance)
        except (KeyboardInterrupt, Cancelled):
            client.cancel()
            raise MeasureInterrupted(len(client.cache), self.request.out / "cache") from None
        except EndpointError as exc:  # a failure retrying cannot fix: what was answered is cached, a rerun resumes
            raise type(exc)(f"{exc}{resume_hint(self.request.out / 'cache')}") from exc
        summary = summarize(self.positions, results, run.format.used())
        info = {"client": client.stats.as_dict(),
                "endpoints": {ep.role: {"url": ep.shown_url, "model": ep.model, "served_models": client.stats.served_models(ep.role),
                                        "max_tokens": run.cfg.cap(ep.role)} for ep in (self.weak, self.strong)}}
        result = MeasureResult(summary, client.stats.as_dict(), self.stems, self.positions, results, info)
        result.write(self.request.out)
        return result


def run(request: MeasureRequest, progress: Progress | None = None) -> MeasureResult:
    """The whole measurement, unconfirmed (a Python caller has decided)."""
    with ShadowMeasurement(request) as m:
        return m.run(progress)
