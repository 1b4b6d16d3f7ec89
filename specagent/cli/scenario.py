"""`specagent scenario show`: a scenario as a file to copy and edit (or as JSON), validated on the way."""

from __future__ import annotations

from typing import Optional

import typer

from specagent.cli.console import fail, json_out
from specagent.simulator.scenario import DEFAULT_TITLE, SHIPPED, Scenario, ScenarioError

app = typer.Typer(help="Scenarios: everything a run depends on (models, deployments, workload, strategies, acceptance, "
                       "caching, verifier prompt, weight reads, seed, engine) in one TOML file.", no_args_is_help=True)


@app.command("show")
def show(name: Optional[str] = typer.Argument(None, help=f"A scenario TOML file or a shipped one ({', '.join(SHIPPED)}); "
                                                          "default: the built-in default."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON (what results store) instead of TOML.")) -> None:
    """Print a scenario with every field filled in: save it, edit it, pass it with --scenario."""
    try:
        sc = Scenario.load(name) if name else Scenario()
    except ScenarioError as exc:
        fail(exc)
    if as_json:
        typer.echo(json_out(sc.to_dict(), indent=2))
    else:
        typer.echo(sc.to_toml(f"scenario: {name}" if name else DEFAULT_TITLE), nl=False)
