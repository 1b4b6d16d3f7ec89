"""The `specagent` command line: the root and the mounting of every command, each imported when first asked for
(lazy.py; the foundation commands are in foundation.py); thin wrappers over the Python API, tables for people, --json
for machines."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from specagent import __version__
from specagent.cli.console import OneLineErrors
from specagent.cli.lazy import LazyCommand, LazyCommands

HELP = """\
specagent predicts, measures and plans the cost of weak-strong speculative
tool-using agents.

A small Weak model drafts an agent's next steps (running read-only tools as it
goes and holding the first state-changing call); a large Strong model reviews
the drafted segment in one prefill, keeps the longest valid prefix and repairs
one step.

Terms used throughout:

\b
  phase          what a forward pass is doing: prefill (reading a prompt),
                 decode (one new token per sequence), verify (the Strong model
                 prefilling a drafted segment on top of its cached context)
                 and repair (the Strong model decoding its verdict or a
                 repair turn).

\b
  ridge          peak FLOP/s divided by memory bandwidth (FLOP per byte). A
                 pass whose arithmetic intensity is below it is bound by
                 memory bandwidth.

\b
  balance point  the decode batch at which a model replica turns
                 compute-bound. Below it, moving Strong tokens from decode
                 into a verification prefill saves time and memory traffic.

Start with `specagent predict` (the bottom line per task) and `specagent plan
--rate 2/s` (a fleet); shell completion: `specagent --install-completion`.
"""

class Root(OneLineErrors):
    """The root group: its own commands built now, the others (LAZY_COMMANDS) imported when first asked for."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.commands = LazyCommands(self.commands, LAZY_COMMANDS)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names, in typer's order (typer's own reads every command)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list from each entry's one-line help, whole (wrapped, never cut with '...' as click cuts it to
        one line): listing imports nothing."""
        commands = self.commands
        assert isinstance(commands, LazyCommands)
        rows = []
        limit = WHOLE
        for name in self.list_commands(ctx):
            lazy = commands.entry(name)
            if lazy is not None:
                rows.append((name, _shorten(lazy.short_help, limit)))
                continue
            cmd = commands[name]
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


#: No cut: a command's first sentence is listed whole, wrapped at the terminal's width.
WHOLE = 10**6


def _shorten(text: str, limit: int) -> str:
    """click's rule for a command's short help (first sentence, cut at a word with '...'), from the command class itself."""
    return TyperCommand(name="_", help=text).get_short_help_str(limit)


app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None, add_completion=True, cls=Root)



def _version(value: bool) -> None:
    if value:
        from specagent.cli.safe_console import SafeConsole
        from specagent.simulator.fleet import FLEET_BACKEND  # the engine's module only when asked for

        SafeConsole().print(f"specagent {__version__} (fleet engine: {FLEET_BACKEND.describe()})", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and which fleet engine runs (compiled or pure Python), then exit.")) -> None:
    # options for every command; the help text is HELP above
    return None


# ---------------------------------------------------------------- the other command groups
#: every other command, imported when first asked for (specagent/cli/lazy.py); one-line helps checked by tests/test_cli_lazy.py
LAZY_COMMANDS = (
    LazyCommand("hardware", "specagent.cli.foundation", "hardware_app", group=True,
                short_help="GPU profiles: peak FLOP/s, memory, bandwidth, efficiencies, each with its source."),
    LazyCommand("models", "specagent.cli.foundation", "models_app", group=True,
                short_help="Model specs read from Hugging Face config.json files."),
    LazyCommand("roofline", "specagent.cli.foundation", "roofline_app", group=True,
                short_help="Roofline estimate of one forward pass: FLOPs and HBM bytes by component, time, and the bound.\n\n"
                           "A pass is compute-bound when its arithmetic intensity (FLOP/byte) exceeds the hardware ridge."),
    LazyCommand("predict", "specagent.cli.simulate", "predict", panels=True,
                short_help="Predict what every strategy costs per task, and relative to Strong-only, on the built-in default scenario."),
    LazyCommand("explain", "specagent.cli.explain", "explain", panels=True,
                short_help="Why SpecAgent's ratios to Strong-only (wall, model time, memory, FLOPs, $) are what they are."),
    LazyCommand("simulate", "specagent.cli.simulate", "simulate_cmd", panels=True,
                short_help="Run one strategy on a trace with every parameter as a flag; print per-model totals."),
    LazyCommand("plan", "specagent.cli.fleet", "plan_command", panels=True,
                short_help="Cheapest fleet (replicas per pool, GPUs per replica) meeting a latency SLO at a sustained arrival rate, per strategy."),
    LazyCommand("replay", "specagent.cli.replay", "replay_command", panels=True,
                short_help="Serve a request trace at its own timestamps on the Strong deployment; vllm bench serve's figures, predicted."),
    LazyCommand("sweep", "specagent.cli.sweep", "sweep_command", panels=True,
                short_help="Run a grid of fleet simulations (strategy x K x acceptance x rate x fleet x hardware), resumably."),
    LazyCommand("report", "specagent.cli.report", "report", help_attr="HELP",
                short_help="Write one self-contained HTML report (plotly.js embedded, works offline) from results files."),
    LazyCommand("calibrate", "specagent.cli.kernels", "calibrate_cmd",
                short_help="Microbenchmark this device, fit the roofline's efficiencies, write a hardware profile."),
    LazyCommand("live", "specagent.cli.kernels", "live_cmd",
                short_help="Run SpecAgent with real torch models and a real SQLite airline service; compare with the simulator."),
    LazyCommand("traces", "specagent.cli.traces", "app", group=True,
                group_help="Agent trajectories: import τ²-Bench / OpenAI-chat logs, stats, fit and synthesise workloads.",
                short_help="Agent trajectories: import τ²-Bench / OpenAI-chat logs, stats, fit and synthesise workloads."),
    LazyCommand("scenario", "specagent.cli.scenario", "app", group=True,
                short_help="Scenarios: everything a run depends on (models, deployments, workload, strategies, acceptance, caching, "
                           "verifier prompt, weight reads, seed, engine) in one TOML file."),
    LazyCommand("predictor", "specagent.cli.predictor", "predictor_app", group=True,
                short_help="The verdict-token cost predictor: Strong verdict + repair tokens → Strong share of memory traffic."),
    LazyCommand("study", "specagent.cli.study", "study_app", group=True, short_help="Studies built on the fleet simulator."),
    LazyCommand("latency", "specagent.cli.latency", "app", group=True,
                short_help="Serving-engine latency terms against public measurements (measurements/serving_latency.csv)."),
    LazyCommand("bench", "specagent.cli.bench", "app", group=True,
                short_help="Load generators against your own servers (their figures feed `latency fit --data`); `compare` sets a replay "
                           "prediction beside a measurement."),
    LazyCommand("acceptance", "specagent.cli.acceptance", "app", group=True,
                short_help="The acceptance and verdict model from evidence: fit it to verdict logs, measure it on real endpoints, "
                           "calibrate it to the published protocol figures (docs/verdict-log.md)."),
)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
