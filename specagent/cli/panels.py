"""Grouped `--help` panels (Weak, Strong, Acceptance, Workload, ..., Output) in plain help text.

Why not typer's `rich_help_panel` as typer draws it: that needs rich markup mode, whose
markup parser eats square brackets (the generated "[default: ...]" text) and whose error
boxes broke the one-line errors. Here the app stays in plain mode (`rich_markup_mode=None`)
and `PanelCommand` groups the options itself into click help sections, read from each
option's `rich_help_panel` attribute (typer keeps it in plain mode too). A scenario flag's
panel comes from the Scenario field it sets (`panel_of_path`: the one table below); a
command's own options go to Output when they say where results go, else to the command's
own panel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typer.core import TyperCommand

if TYPE_CHECKING:  # annotations only: typer >= 0.29 bundles its own click and no longer installs the package
    import click

#: Scenario field (the first part of a flag's path) -> its --help panel; any other field: SCENARIO.
SCENARIO = "Scenario"
FIELD_PANELS = {
    "weak": "Weak model", "strong": "Strong model", "strong_api": "Strong model",
    "acceptance": "Acceptance", "workload": "Workload", "environment": "Workload",
    "uncertainty": "Uncertainty", "strategies": "Strategy", "k": "Strategy", "review": "Strategy",
    "prefix_caching": "Serving", "weight_mode": "Serving", "verifier_prompt": "Serving", "verifier_system_tokens": "Serving",
    "api_verify_sends": "Serving", "pricing_engine": "Serving",
}
OUTPUT = "Output"
#: A command's own parameters that say where and how results go.
OUTPUT_PARAMS = frozenset({"out", "output", "report", "fmt", "as_json", "quiet", "help", "phases", "brief"})
#: The order panels are printed in; a panel not listed comes after the command's own, before Output.
ORDER = (SCENARIO, "Strategy", "Weak model", "Strong model", "Acceptance", "Workload", "Serving", "Uncertainty")


def panel_of_path(path: str) -> str:
    """The panel of the scenario flag that sets field `path` ('weak.gpus' -> 'Weak model')."""
    return FIELD_PANELS.get(path.split(".", 1)[0], SCENARIO)


def panel_of(param: click.Parameter, command: str) -> str:
    """An option's panel: the one it was given, else Output for output options, else the command's own."""
    given = getattr(param, "rich_help_panel", None)
    if given:
        return given
    return OUTPUT if param.name in OUTPUT_PARAMS else f"{command.capitalize()} options"


class PanelCommand(TyperCommand):
    """A command whose --help lists its options in panels (plain text: brackets and one-line errors unchanged)."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        args: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            rv = param.get_help_record(ctx)
            if rv is None:
                continue
            if param.param_type_name == "argument":
                args.append(rv)
            else:
                panels.setdefault(panel_of(param, self.name or ""), []).append(rv)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for name in panel_order(panels):
            with formatter.section(name):
                formatter.write_dl(panels[name])


def panel_order(panels: dict[str, Any]) -> list[str]:
    """The command's own panel first, then ORDER, then any other, Output last."""
    own = [p for p in panels if p.endswith(" options")]
    listed = [p for p in ORDER if p in panels]
    rest = [p for p in panels if p not in own and p not in listed and p != OUTPUT]
    return [*own, *listed, *rest, *([OUTPUT] if OUTPUT in panels else [])]
