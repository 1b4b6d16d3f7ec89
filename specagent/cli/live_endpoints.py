"""`specagent live --weak-url URL --strong-url URL`: the protocol on served models against the SQLite airline service.

Thin: flags → `specagent.endpoints.live` (docs/endpoints.md); the predicted column prices the run's protocol
log on the scenario's deployments (--scenario), so the hardware the models are served on is stated there.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from specagent.cli.acceptance_measure import extra_body, request_status, resume_hint, unreported
from specagent.cli.console import error_line, fail, json_out
from specagent.cli.options import resolve
from specagent.cli.progress import progress_bar
from specagent.common import atomic
from specagent.common.redact import Redactor
from specagent.endpoints.cache import ResponseCache
from specagent.endpoints.client import ChatClient, Endpoint, EndpointError, RetryPolicy, TransientFailure
from specagent.endpoints.live import LiveError, LiveRun, compare_phases
from specagent.endpoints.transport import Cancelled
from specagent.kernels.airline_env import AirlineEnv
from specagent.simulator.scenario import Scenario
from specagent.traces.io import dumps_jsonl


def live_on_endpoints(weak_url: str, weak_model: str | None, strong_url: str | None, strong_model: str | None,
                      weak_api_key_env: str, strong_api_key_env: str, scenario: Scenario, k: int, seed: int, tasks: int,
                      out: Path, concurrency_timeout: float, as_json: bool, console: Console,
                      weak_extra: str | None = None, strong_extra: str | None = None, max_tokens: int | None = None,
                      strong_max_tokens: int | None = None, retry: RetryPolicy = RetryPolicy()) -> None:
    if not (strong_url and weak_model and strong_model):
        fail("--weak-url: a live run on endpoints needs --weak-url, --weak-model, --strong-url and --strong-model")
    weak = Endpoint("weak", weak_url, weak_model, weak_api_key_env, extra_body("--weak-extra-body", weak_extra))
    strong = Endpoint("strong", strong_url, strong_model, strong_api_key_env, extra_body("--strong-extra-body", strong_extra))
    setting = resolve(scenario)
    atomic.check_writable(out / "comparison.json")
    results, skipped = [], []
    err = Console(stderr=True)

    def tell(line: str) -> None:  # retries and a wrong model name, while the run goes on
        err.print(line, highlight=False, markup=False, soft_wrap=True)

    with ChatClient(ResponseCache(out / "cache"), concurrency=1, timeout_s=concurrency_timeout, seed=seed, retry=retry,
                    on_event=tell) as client:
        run = LiveRun(client, weak, strong, k=k, seed=seed, max_tokens=max_tokens, strong_max_tokens=strong_max_tokens)
        try:
            with progress_bar(tasks, "live tasks", show=not as_json, status=lambda: request_status(client), plain=True) as advance:
                for i in range(tasks):
                    with AirlineEnv(seed=seed + i) as env:
                        try:
                            results.append(run.run_task(env, i))
                        except TransientFailure as exc:  # this task's log is incomplete: left out, counted, said why
                            skipped.append({"task": f"live-{i}", "reason": "transient", "detail": str(exc)})
                    advance(1)
        except (EndpointError, LiveError) as exc:
            fail(f"{exc}{resume_hint(out / 'cache')}")
        except (KeyboardInterrupt, Cancelled):
            client.cancel()
            error_line(f"interrupted: the answers so far are cached in {out / 'cache'}; rerun the same command to resume")
            raise typer.Exit(130) from None
        stats = client.stats.as_dict()
    if not results:
        fail(f"no live task finished: {skipped[0]['detail']}" if skipped else "no live task ran")
    comparison = compare_phases(results, setting, k)
    counts: dict[str, int] = {}
    for r in results:
        for key, v in r.counts.items():
            counts[key] = counts.get(key, 0) + v
    report = {"comparison": comparison, "counts": counts, "skipped": skipped, "client": stats, "k": k, "seed": seed, "tasks": tasks,
              "weak": {"url": weak.shown_url, "model": weak.model, "served_models": client.stats.served_models("weak"), "max_tokens": run.caps["weak"]},
              "strong": {"url": strong.shown_url, "model": strong.model, "served_models": client.stats.served_models("strong"),
                         "max_tokens": run.caps["strong"]},
              # what the servers did not report (cached prompt tokens, reasoning tokens), said rather than taken as 0
              "usage_reported": run.usage, "unreported": unreported({"usage": run.usage})}
    verdicts = "".join(json.dumps(v, separators=(", ", ": ")) + "\n" for r in results for v in r.verdicts)
    atomic.write_together({out / "protocol_log.jsonl": atomic.text_writer(dumps_jsonl([r.protocol_log for r in results])),
                           out / "verdicts.jsonl": atomic.text_writer(verdicts),
                           out / "comparison.json": atomic.text_writer(atomic.json_text(report))})
    if as_json:
        typer.echo(json_out(report, indent=2, sort_keys=True, red=Redactor.of(*weak.secrets, *strong.secrets)))
        return
    t = Table(title=f"live on endpoints: {tasks} airline tasks, K={k} (measured vs simulated on the scenario's deployments)")
    for col in ("phase", "measured s", "predicted s", "error"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for row in comparison["rows"]:
        t.add_row(row["phase"], f"{row['measured_s']:.3f}", f"{row['predicted_s']:.3f}",
                  "-" if row["error"] is None else f"{row['error']:+.1%}")
    t.add_row("total", f"{comparison['measured_s']:.3f}", f"{comparison['predicted_s']:.3f}",
              "-" if comparison["error"] is None else f"{comparison['error']:+.1%}")
    console.print(t)
    console.print(", ".join(f"{key} {v}" for key, v in sorted(counts.items())), highlight=False)
    for sk in skipped:
        console.print(f"skipped {sk['task']}: {sk['detail']}", highlight=False)
    if counts.get("reviews", 0) == 0:
        console.print("note: 0 reviews: the Weak model made no tool call to hold (every answer was a reply), so the Strong "
                      "model verified nothing and verdicts.jsonl is empty", highlight=False)
    if counts.get("truncated_weak_answers"):
        console.print(f"note: {counts['truncated_weak_answers']} Weak answers stopped at max_tokens (finish_reason length)",
                      highlight=False)
    for line in report["unreported"]:
        console.print(f"note: {line}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"wrote {out / 'protocol_log.jsonl'}, {out / 'verdicts.jsonl'} and {out / 'comparison.json'}", highlight=False)
