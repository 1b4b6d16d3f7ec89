"""The foundation commands (hardware, models, roofline): thin wrappers over the cost model's building blocks.

Apart from the root (app.py) so that the root's start-up, and every other command's, imports neither the cost model nor
the scenario (issue #34: `replay` and `--help` start-up); mounted lazily like the rest (lazy.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specagent.cli.console import SafeConsole, fail, json_out
from specagent.cli.requests import error_text, request_options
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec, shipped_models
from specagent.hardware.profile import HardwareProfileError, list_profiles, load_hardware
from specagent.simulator.jobs.balance_point import BalancePointRequest
from specagent.simulator.jobs.balance_point import run as run_balance_point
from specagent.simulator.jobs.base import JobError
from specagent.simulator.jobs.roofline import HARDWARE_DIR_HELP, RooflineRequest, check_hardware_dir
from specagent.simulator.jobs.roofline import run as run_roofline

hardware_app = typer.Typer(help="GPU profiles: peak FLOP/s, memory, bandwidth, efficiencies, each with its source.", no_args_is_help=True)
models_app = typer.Typer(help="Model specs read from Hugging Face config.json files.", no_args_is_help=True)
roofline_app = typer.Typer(
    help="Roofline estimate of one forward pass: FLOPs and HBM bytes by component, time, and the bound.\n\n"
    "A pass is compute-bound when its arithmetic intensity (FLOP/byte) exceeds the hardware ridge.",
    invoke_without_command=True,
)

console = SafeConsole()


HardwareDirOpt = typer.Option(None, "--hardware-dir", help=HARDWARE_DIR_HELP)


def _hardware_dirs(hardware_dir: Optional[Path]) -> list[Path]:
    try:
        return check_hardware_dir(hardware_dir)
    except JobError as exc:
        fail(error_text(RooflineRequest, exc))


# ---------------------------------------------------------------- hardware
@hardware_app.command("list")
def hardware_list(hardware_dir: Optional[Path] = HardwareDirOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """List known GPU profiles with their BF16 ridge point (peak FLOP/s ÷ bandwidth)."""
    try:
        profs = list_profiles(_hardware_dirs(hardware_dir))
    except HardwareProfileError as exc:
        fail(str(exc))
    rows = [p.summary() for p in profs]
    if as_json:
        print(json_out(rows, indent=2))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    console.print(screen.profiles_table(rows, console))


@hardware_app.command("show")
def hardware_show(name: str = typer.Argument(..., help="Profile id, alias or path to a .toml file."),
                  hardware_dir: Optional[Path] = HardwareDirOpt, as_json: bool = typer.Option(False, "--json")) -> None:
    """Every figure of one profile with its source, and its ridge points."""
    try:
        p = load_hardware(name, _hardware_dirs(hardware_dir))
    except HardwareProfileError as exc:
        fail(str(exc))
    items = p.figures()
    if as_json:
        print(json_out({"id": p.id, "name": p.name, "path": p.path, "figures": [dict(name=a, value=b, source=c) for a, b, c in items]}, indent=2, default=str))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    for part in screen.figures(f"{p.name} ({p.id})", p.path, items, console):
        console.print(part)


# ---------------------------------------------------------------- models
@models_app.command("list")
def models_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Shipped model configs with parameter counts (total / active per token) re-derived from their fields."""
    rows = [load_model_spec(hf_id).summary(hf_id) for hf_id in shipped_models()]
    if as_json:
        print(json_out(rows, indent=2))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    console.print(screen.models_table(rows, console))


@models_app.command("show")
def models_show(model: str = typer.Argument(..., help="HF id, short name, or path to a config.json."), as_json: bool = typer.Option(False, "--json")) -> None:
    """Parameter counts by component, KV bytes per token and recurrent state per sequence."""
    try:
        s = load_model_spec(model)
    except ModelSpecError as exc:
        fail(str(exc))
    info = s.record()
    if as_json:
        print(json_out(info, indent=2))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    console.print(screen.model_table(info))


# ---------------------------------------------------------------- roofline
@roofline_app.callback()
@request_options(RooflineRequest, scenario=False)
def roofline(ctx: typer.Context, request: RooflineRequest,
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Break one pass down into FLOPs and bytes by component, and say which bound applies."""
    if ctx.invoked_subcommand is not None:
        return
    result = run_roofline(request)
    if as_json:
        print(json_out(result.to_dict(), indent=2))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    for part in screen.roofline(result, console):
        console.print(part)


@roofline_app.command("balance")
@request_options(BalancePointRequest, scenario=False)
def roofline_balance(request: BalancePointRequest, as_json: bool = typer.Option(False, "--json")) -> None:
    """The decode batch at which the replica turns compute-bound, next to the hardware ridge.

    For a dense model with negligible KV reads it equals the ridge scaled by bytes per
    weight / 2; KV and recurrent-state reads push it up, and for MoE so do the experts a
    larger batch touches.
    """
    result = run_balance_point(request)
    if as_json:
        print(json_out(result.to_dict(), indent=2))
        return
    from specagent.reports.screens import foundation as screen  # rich: only where a table is printed

    console.print(screen.balance(result))
