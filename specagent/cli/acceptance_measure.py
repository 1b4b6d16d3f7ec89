"""`specagent acceptance measure`: teacher-forced shadow verification against two OpenAI-compatible endpoints.

Thin: flags → `specagent.endpoints` (docs/endpoints.md). K's default is the Scenario's, so it lives once.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Optional

import typer

from rich.table import Table

from specagent.cli.console import SafeConsole, error_line, fail
from specagent.cli.console import json_out as json_doc  # `json_out` is this command's --json flag
from specagent.cli.progress import progress_bar
from specagent.common.atomic import check_writable
from specagent.common.errors import InputError
from specagent.common.paths import check_outputs
from specagent.common.redact import Redactor
from specagent.endpoints.cache import ResponseCache
from specagent.endpoints.client import ChatClient, Endpoint, EndpointError, RetryPolicy
from specagent.endpoints.transport import Cancelled
from specagent.endpoints.measure import estimate, run_measure, select_positions
from specagent.endpoints.recorded import load_tools, read_recorded, unique_stems
from specagent.endpoints.shadow import RESPONSE_FORMATS, MeasureConfig, ShadowRun
from specagent.simulator.scenario import Scenario
from specagent.traces.errors import TraceFormatError
from specagent.traces.schema import MAX_CONTEXT_TOKENS
from specagent.traces.tool_tags import default_tag_map

_K = next(f for f in fields(Scenario) if f.name == "k")
#: Guards against a typo, not limits of the method: the shared τ²-Bench files hold about 1,000 agent positions in all.
MAX_POSITIONS = 10_000_000
#: One day: no single chat completion waits longer.
MAX_TIMEOUT_S = 86_400.0


def _price(flag: str, value: Optional[str]) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        a, b = (float(x) for x in value.split(","))
    except ValueError:
        raise InputError(f"{flag}: expected IN,OUT in USD per million tokens (e.g. 0.243,1.736), got {value!r}") from None
    if not (a >= 0 and b >= 0 and a < float("inf") and b < float("inf")):
        raise InputError(f"{flag}: prices must be finite and >= 0, got {value!r}")
    return a, b


def extra_body(flag: str, value: Optional[str]) -> dict:
    if value is None:
        return {}
    def no_constant(name: str) -> None:
        raise InputError(f"{flag}: {name} is not JSON (JSON has no NaN or infinity)")

    try:
        obj = json.loads(value, parse_constant=no_constant)
    except RecursionError:
        raise InputError(f"{flag}: nested too deep to be a request's fields") from None
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"{flag}: expected a JSON object, got {value!r} ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{flag}: expected a JSON object, got a JSON {type(obj).__name__}")
    return obj


def measure(
    traces: list[Path] = typer.Argument(..., help="Recorded runs to teacher-force: τ²-Bench results files (the raw JSON, with messages) or OpenAI chat logs."),
    weak_url: str = typer.Option(..., "--weak-url", help="Base URL of the Weak model's server, e.g. http://localhost:8000/v1."),
    weak_model: str = typer.Option(..., "--weak-model", help="Model name the Weak server serves (e.g. Qwen/Qwen3.5-4B)."),
    strong_url: str = typer.Option(..., "--strong-url", help="Base URL of the Strong model's server."),
    strong_model: str = typer.Option(..., "--strong-model", help="Model name the Strong server serves."),
    out: Path = typer.Option(..., "-o", "--out", help="Folder for the verdict logs, summary.json, skips.jsonl and the cache."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, max=MAX_POSITIONS, help="Verify a seeded sample of this many positions (default: all)."),
    k: int = typer.Option(_K.default, "--k", min=1, max=64, help=_K.metadata["help"]),
    weak_api_key_env: str = typer.Option("OPENAI_API_KEY", "--weak-api-key-env", help="Env var holding the Weak API key (unset: no key sent)."),
    strong_api_key_env: str = typer.Option("OPENAI_API_KEY", "--strong-api-key-env", help="Env var holding the Strong API key."),
    tools: Optional[Path] = typer.Option(None, "--tools", help="OpenAI tools JSON for the trace's tools (default: inferred from the recorded calls)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=256, help="Most requests in flight at once."),
    timeout: float = typer.Option(300.0, "--timeout", min=0.001, max=MAX_TIMEOUT_S, help="Seconds one whole answer may take (connect to last byte) before it is retried."),
    retries: int = typer.Option(6, "--retries", min=1, max=20, help="Attempts per request on 429/5xx/timeouts/broken answers."),
    backoff: float = typer.Option(0.5, "--backoff", min=0.0, max=60.0, help="Base of the exponential backoff between attempts (s)."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, max=2.0, help="Sampling temperature of every call."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, max=MAX_CONTEXT_TOKENS, help="max_tokens of every call (default: the server's), unless one of the two below is given."),
    weak_max_tokens: Optional[int] = typer.Option(None, "--weak-max-tokens", min=1, max=MAX_CONTEXT_TOKENS, help="max_tokens of the Weak drafts (stops a rambling model; a draft cut there is skipped as draft:truncated)."),
    strong_max_tokens: Optional[int] = typer.Option(None, "--strong-max-tokens", min=1, max=MAX_CONTEXT_TOKENS, help="max_tokens of the Strong verdicts and repairs (a verdict cut there is skipped as verify:truncated, not retried)."),
    response_format: str = typer.Option("auto", "--response-format",
                                        help="How the verdict's JSON is asked for: auto (json_schema, falling back to the "
                                             "prompt's words if the server refuses it), json_schema, prompt."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**63 - 1, help="Seeds the position sample, the servers' sampling and the retry jitter."),
    weak_usd_per_mtok: Optional[str] = typer.Option(None, "--weak-usd-per-mtok", help="Weak prices IN,OUT (USD per million tokens) for the estimate."),
    strong_usd_per_mtok: Optional[str] = typer.Option(None, "--strong-usd-per-mtok", help="Strong prices IN,OUT for the estimate."),
    weak_extra_body: Optional[str] = typer.Option(None, "--weak-extra-body", help="JSON object added to every Weak request, e.g. "
                                                  "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'."),
    strong_extra_body: Optional[str] = typer.Option(None, "--strong-extra-body", help="JSON object added to every Strong request."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Start without asking (needed when stdin is not a terminal)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Measure acceptance on your models: the Weak endpoint drafts at recorded positions, the Strong one verifies.

    Writes OUT/<trace>.verdicts.jsonl (docs/verdict-log.md; `acceptance fit` reads them),
    summary.json, skips.jsonl, run.json, and OUT/cache/ (every answer, keyed by the request:
    interrupt at any point and rerun the same command to resume; nothing answered is asked again).
    """
    for flag, value in (("--timeout", timeout), ("--backoff", backoff), ("--temperature", temperature)):
        if not math.isfinite(value):
            fail(f"{flag}: expected a finite number, got {value}")
    if response_format not in RESPONSE_FORMATS:
        fail(f"--response-format: expected one of {', '.join(RESPONSE_FORMATS)}, got {response_format!r}")
    weak = Endpoint("weak", weak_url, weak_model, weak_api_key_env, extra_body("--weak-extra-body", weak_extra_body))
    strong = Endpoint("strong", strong_url, strong_model, strong_api_key_env, extra_body("--strong-extra-body", strong_extra_body))
    prices = _price("--weak-usd-per-mtok", weak_usd_per_mtok), _price("--strong-usd-per-mtok", strong_usd_per_mtok)
    tags = default_tag_map()
    tasks_by_file, inferred, given = {}, {}, load_tools(tools) if tools else None
    for t in traces:
        try:
            tasks, tl = read_recorded(t, tags)
        except (TraceFormatError, FileNotFoundError) as exc:  # both name the file and what was expected
            fail(str(exc))
        tasks_by_file[str(t)] = tasks
        for task in tasks:
            inferred.setdefault(task.domain, tl)
    tool_map = {d: given or tl for d, tl in inferred.items()}
    stems = dict(zip(tasks_by_file, unique_stems([Path(f) for f in tasks_by_file])))
    try:  # no file this run writes in -o over a trace it reads or the --tools file
        check_outputs([("-o", out / name) for name in (*(f"{s}.verdicts.jsonl" for s in stems.values()), "summary.json",
                                                       "skips.jsonl", "calls.jsonl", "run.json")],
                      {"TRACE": traces, "--tools": tools}, InputError)
    except InputError as exc:
        fail(str(exc))
    check_writable(out / "summary.json")
    cfg = MeasureConfig(k=k, seed=seed, temperature=temperature, max_tokens=max_tokens, response_format=response_format,
                        concurrency=concurrency, weak_max_tokens=weak_max_tokens, strong_max_tokens=strong_max_tokens)
    positions = select_positions([t for ts in tasks_by_file.values() for t in ts], limit, seed)
    if not positions:
        fail(f"{', '.join(map(str, traces))}: no agent turn to verify (no assistant message after a user or tool message)")
    err = SafeConsole(stderr=True)
    for line in policy_warnings(tasks_by_file):
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)

    def tell(line: str) -> None:  # retries and a wrong model name, while the run goes on (not only in the final table)
        err.print(line, highlight=False, markup=False, soft_wrap=True)

    with ChatClient(ResponseCache(out / "cache"), concurrency=concurrency, timeout_s=timeout, seed=seed,
                    retry=RetryPolicy(attempts=retries, base_s=backoff), on_event=tell) as client:
        est = estimate(positions, k, ShadowRun(client, weak, strong, tool_map, tags, cfg), *prices)
        for line in est.lines():
            err.print(line, highlight=False)
        err.print(f"each call gives up after at most {client.worst_case_s():,.0f} s ({retries} attempts of at most "
                  f"--timeout {timeout:g} s each, connect to last byte, and the waits between them)", highlight=False)
        if not yes:
            if not sys.stdin.isatty():
                fail("not starting: stdin is not a terminal to confirm on; pass --yes to start without asking")
            if not typer.confirm("start?", default=False, err=True):
                fail("not started (answered no)")
        try:
            with progress_bar(len(positions), "verifying", show=not json_out, status=lambda: request_status(client), plain=True) as advance:
                summary, paths = run_measure(client, weak, strong, tasks_by_file, tool_map, tags, cfg, positions, out, stems, advance)
        except EndpointError as exc:
            fail(f"{exc}{resume_hint(out / 'cache')}")
        except (KeyboardInterrupt, Cancelled):
            client.cancel()
            error_line(f"interrupted: every call in flight stopped; the {len(client.cache)} answers so far are cached in "
                       f"{out / 'cache'}; rerun the same command to resume")
            raise typer.Exit(130) from None
        stats = client.stats.as_dict()
    if json_out:
        typer.echo(json_doc({"summary": summary, "client": stats, "outputs": [str(p) for p in paths]}, indent=2, sort_keys=True,
                            red=Redactor.of(*weak.secrets, *strong.secrets)))
    else:
        _table(summary, stats, paths)
    if summary["records"] == 0:  # nothing to fit: a run that measured nothing must not look like one that did
        err.print(f"error: 0 verdicts from {summary['positions']} positions"
                  + (f" ({', '.join(f'{k} {v}' for k, v in summary['skipped_by_reason'].items())}; why: {out / 'skips.jsonl'})"
                     if summary["skipped"] else ""), highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(code=3)


#: What the τ²-Bench fixture shipped for the tests holds instead of the airline policy (traces/data/tau2_airline_sample.json).
POLICY_PLACEHOLDERS = ("(trimmed for the fixture)",)


def policy_warnings(tasks_by_file: dict) -> list[str]:
    """A line per file whose system prompt carries no policy: real models then judge 'policy-compliant' steps with none."""
    out = []
    for f, tasks in tasks_by_file.items():
        bad = [t for t in tasks if t.system.startswith("<instructions>") and (
            any(p in t.system for p in POLICY_PLACEHOLDERS) or "<policy>\n\n</policy>" in t.system)]
        if bad:
            out.append(f"{f}: {len(bad)} of {len(tasks)} tasks have no domain policy in the file (empty or a placeholder): "
                       "the models will see the agent instruction without it; measure a full τ²-Bench results file")
    return out


def request_status(client: ChatClient) -> str:
    """Requests answered and retried so far: what moves while a position waits on a slow server."""
    s = client.stats
    retried = sum(s.retries.values())
    return f"{s.answered} answered, {s.cached} from cache" + (f", {retried} retried" if retried else "")


def resume_hint(cache: Path, what: str = "rerun to resume") -> str:
    """The hint after an error, only where there is a cache to resume from."""
    return f" (answers so far are cached in {cache}; {what})" if cache.is_dir() and any(cache.iterdir()) else ""


def _table(s: dict, stats: dict, paths: list[Path]) -> None:
    c = SafeConsole()
    t = Table(title=f"acceptance measure: {s['records']} verdicts from {s['positions']} positions")
    t.add_column("measure")
    t.add_column("value", justify="right")
    acc = s["step_acceptance"]
    rows = [("drafted steps accepted", f"{s['accepted_steps']} / {s['drafted_steps']}" + (f" ({acc:.1%})" if acc is not None else "")),
            ("segments fully accepted", f"{s['segments_fully_accepted']} / {s['records']}"),
            ("ended by", ", ".join(f"{k} {v}" for k, v in s["ended_by"].items()) or "-"),
            ("replacements offered / valid", f"{s['replacements_offered']} / {s['replacements_valid']}"),
            ("repair turns", str(s["repair_turns"])),
            ("skipped", f"{s['skipped']}" + (f" ({', '.join(f'{k} {v}' for k, v in s['skipped_by_reason'].items())})" if s["skipped"] else "")),
            ("verdict JSON asked via", s["response_format"])]
    for kind, v in s["acceptance_by_kind"].items():
        rows.append((f"  {kind} steps accepted", f"{v['accepted']} / {v['drafted']} ({v['rate']:.1%})"))
    for role, u in s["usage"].items():
        rows.append((f"{role} calls · prompt / completion / reasoning tok", f"{u['calls']} · {u['prompt_tokens']:,} / "
                     f"{u['completion_tokens']:,} / {u['reasoning_tokens']:,}"))
    truncated = {role: u["truncated_calls"] for role, u in s["usage"].items() if u.get("truncated_calls")}
    if truncated:
        rows.append(("answers cut at max_tokens", ", ".join(f"{role} {n}" for role, n in truncated.items())))
    rows.append(("requests sent / answers from cache", f"{stats['requests_sent']} / {stats['answers_from_cache']}"))
    if stats["retries"]:
        rows.append(("retries", ", ".join(f"{k} {v}" for k, v in stats["retries"].items())))
    for r in rows:
        t.add_row(*r)
    c.print(t)
    for line in unreported(s):
        c.print(f"note: {line}", highlight=False, markup=False, soft_wrap=True)
    for p in paths:
        c.print(f"wrote {p}", highlight=False)


def unreported(s: dict) -> list[str]:
    """What the server did not report, said rather than silently taken as zero (issue 36, item 5)."""
    out = []
    for role, u in s["usage"].items():
        if u["calls"] and u.get("cached_tokens_reported_calls", 0) < u["calls"]:
            out.append(f"{role}: {u['calls'] - u['cached_tokens_reported_calls']} of {u['calls']} answers reported no cached "
                       "prompt tokens (usage.prompt_tokens_details.cached_tokens): prefix-cache reuse is unknown there, not 0")
        if u["calls"] and u["reasoning_estimated_calls"]:
            out.append(f"{role}: reasoning tokens of {u['reasoning_estimated_calls']} of {u['calls']} answers are estimated from "
                       "their reasoning text (the server reported no completion_tokens_details.reasoning_tokens)")
    return out
