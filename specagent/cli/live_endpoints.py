"""`specagent live --weak-url URL --strong-url URL`: what a live run on served models prints.

Prints only: the run is the job specagent/endpoints/jobs/live.py (docs/endpoints.md); the predicted column prices the
run's protocol log on the scenario's deployments (--scenario), so the hardware the models are served on is stated there.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from specagent.cli.acceptance_measure import resume_hint, status_of
from specagent.cli.console import error_line, fail, json_out
from specagent.cli.progress import step_bar
from specagent.cli.requests import fail_job
from specagent.common.errors import InputError
from specagent.common.redact import Redactor
from specagent.endpoints.client import EndpointError
from specagent.endpoints.jobs.live import LiveInterrupted, LiveRequest, ServedLive, ServedLiveResult
from specagent.endpoints.live import LiveError
from specagent.simulator.scenario import ScenarioError


def live_on_endpoints(request: LiveRequest, as_json: bool, console: Console) -> None:
    err = Console(stderr=True)

    def tell(line: str) -> None:  # retries and a wrong model name, while the run goes on
        err.print(line, highlight=False, markup=False, soft_wrap=True)

    try:
        live = ServedLive(request, on_event=tell)
    except (InputError, ScenarioError) as exc:
        fail_job(LiveRequest, exc)
    cache = request.out / "cache"
    with live:
        try:
            with step_bar(request.trajectories, "live tasks", show=not as_json, status=lambda: status_of(live.client),
                          plain=True) as progress:
                res = live.run(progress)
        except (EndpointError, LiveError) as exc:
            fail(f"{exc}{resume_hint(cache)}")
        except LiveInterrupted as exc:
            error_line(str(exc))
            raise typer.Exit(130) from None
        except InputError as exc:  # no task finished
            fail_job(LiveRequest, exc)
    if as_json:
        typer.echo(json_out(res.to_dict(), indent=2, sort_keys=True, red=Redactor.of(*res.secrets)))
        return
    _print(res, console, request)


def _print(res: ServedLiveResult, console: Console, request: LiveRequest) -> None:
    report, out = res.report, request.out
    comparison, counts = report["comparison"], report["counts"]
    t = Table(title=f"live on endpoints: {report['tasks']} airline tasks, K={report['k']} (measured vs simulated on the "
                    "scenario's deployments)")
    for col in ("phase", "measured s", "predicted s", "error"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for row in comparison["rows"]:
        t.add_row(row["phase"], f"{row['measured_s']:.3f}", f"{row['predicted_s']:.3f}",
                  "-" if row["error"] is None else f"{row['error']:+.1%}")
    t.add_row("total", f"{comparison['measured_s']:.3f}", f"{comparison['predicted_s']:.3f}",
              "-" if comparison["error"] is None else f"{comparison['error']:+.1%}")
    console.print(t)
    console.print(", ".join(f"{key} {v}" for key, v in sorted(counts.items())), highlight=False)
    for sk in report["skipped"]:
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
