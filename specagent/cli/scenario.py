"""`specagent scenario show`: a scenario as a file to copy and edit (or as JSON), validated on the way.

Validated means resolved, as `predict` would: every model, GPU and serving-engine name is loaded
(an unknown one is a located one-line error, `s.toml: strong.hardware: ...`), each deployment
must hold one sequence, and a named trace or synthetic profile must exist. A scenario that
`show` prints is one that `predict --scenario` runs; the names it used are shown resolved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import fail, json_out
from specagent.cli.options import located_error
from specagent.common.errors import InputError
from specagent.common.paths import check_input_file
from specagent.costmodel.deployment import Deployment
from specagent.simulator.scenario import DEFAULT_TITLE, SHIPPED, DoesNotFit, Scenario, ScenarioError
from specagent.simulator.protocol.setting import Setting

app = typer.Typer(help="Scenarios: everything a run depends on (models, deployments, workload, strategies, acceptance, "
                       "caching, verifier prompt, weight reads, seed, engine) in one TOML file.", no_args_is_help=True)


@app.command("show")
def show(name: Optional[str] = typer.Argument(None, help=f"A scenario TOML file or a shipped one ({', '.join(SHIPPED)}); "
                                                          "default: the built-in default."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON (what results store) instead of TOML.")) -> None:
    """Print a scenario with every field filled in: save it, edit it, pass it with --scenario.

    Its models, GPUs and engines are resolved the way `predict` resolves them (an unknown name is
    an error naming the file and key); what each name resolved to follows on stderr, as TOML comments."""
    where = name or "the built-in default"
    try:
        sc = Scenario.load(name) if name else Scenario()
    except ScenarioError as exc:
        fail(exc)
    setting = _resolve(sc, where)
    if as_json:
        typer.echo(json_out(sc.to_dict(), indent=2))
    else:
        # the file on stdout (`scenario show > my.toml` saves exactly the scenario, as `make scenarios` does); what each
        # name resolved to, with this machine's paths, on stderr
        typer.echo(sc.to_toml(f"scenario: {name}" if name else DEFAULT_TITLE), nl=False)
        typer.echo(resolved_comment(sc, setting), nl=False, err=True)


def _resolve(sc: Scenario, where: str) -> Setting:
    """The scenario's deployments and workload, loaded as `predict` loads them; a failure names the file and its key."""
    try:
        setting = sc.setting()
    except DoesNotFit as exc:
        fail(f"{where}: {exc.where}: {exc}; set {exc.where}.gpus or {exc.where}.weight_dtype")
    except ScenarioError as exc:
        fail(located_error(exc, [], (where, frozenset())))
    w = sc.workload
    try:
        if w.trace is not None:
            check_input_file(Path(w.trace), InputError, "trace file", missing=f"{w.trace}: no such trace file")
        elif w.synthetic is not None:
            sc.synthetic_profile()
    except (InputError, ValueError) as exc:
        fail(f"{where}: workload.{'trace' if w.trace is not None else 'synthetic'}: {exc}")
    return setting


def _names(role: str, spec, dep: Deployment) -> list[str]:
    """`name -> what it loaded`, then its file on a line of its own (a path is never cut, and the name's line fits 80
    columns), for each name in one deployment entry."""
    def path(p) -> list[str]:
        return [f"#     {Path(p).as_posix()}"] if p else []
    return [f"#   {role}.model = {spec.model!r} -> {dep.model.name}", *path(dep.model.source),
            f"#   {role}.hardware = {spec.hardware!r} -> {dep.hardware.id}: {dep.hardware.name}", *path(dep.hardware.path),
            f"#   {role}.serving_engine = {spec.serving_engine!r} -> {dep.serving_engine.id}: {dep.serving_engine.name}",
            *path(dep.serving_engine.path)]


def resolved_comment(sc: Scenario, setting: Setting) -> str:
    """A TOML comment block: what every model, GPU and engine name resolved to (aliases shown as their profile)."""
    lines = ["", "# Resolved, as `specagent predict --scenario` loads it:", *_names("weak", sc.weak, setting.weak)]
    if isinstance(setting.strong, Deployment):
        lines += _names("strong", sc.strong, setting.strong)
    else:
        lines.append(f"#   strong_api = {sc.strong_api!r} -> {setting.strong.name} (hosted; [strong] is not used)")
    return "\n".join(lines) + "\n"
