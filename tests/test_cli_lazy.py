"""The root lists every command without importing its module; each listed help is the command's own."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main

from specagent.cli.app import LAZY_COMMANDS, WHOLE, _shorten, app


@pytest.mark.parametrize("entry", LAZY_COMMANDS, ids=lambda e: e.name)
def test_listed_help_is_the_commands_own(entry):
    cmd = entry.load()
    assert cmd.name == entry.name
    assert _shorten(entry.short_help, 10**6) == cmd.get_short_help_str(10**6)


def test_the_root_listing_is_what_loading_every_command_would_print():
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="specagent")
    listed = ctx.make_formatter()
    root.format_commands(ctx, listed)  # from the entries: nothing imported
    order = list(root.commands)
    for name in order:
        root.commands[name]  # load each one
    loaded = ctx.make_formatter()
    with loaded.section("Commands"):  # click's own listing of the loaded commands, each help whole (not cut at a width)
        loaded.write_dl([(n, root.commands[n].get_short_help_str(WHOLE)) for n in order if not root.commands[n].hidden])
    assert listed.getvalue() == loaded.getvalue()
    assert "..." not in listed.getvalue()
    assert "predict" in listed.getvalue() and list(root.commands) == order  # loading moves nothing


def test_help_and_a_usage_error_import_no_command_module_nor_heavy_library():
    modules = sorted({e.module for e in LAZY_COMMANDS})
    # numpy, rich's tables and the scenario too: the foundation commands are lazy (foundation.py; issue #34); not
    # pydantic: typer's own usage-error path (typer._adapters) imports it
    heavy = ["pandas", "scipy", "plotly", "pyarrow", "torch", "ray", "httpx", "numpy", "rich.table",
             "specagent.simulator.scenario", "specagent.costmodel.roofline"]
    code = (
        "import sys\n"
        "from specagent.cli import app\n"
        "import typer.main\n"
        "root = typer.main.get_command(app)\n"
        "for argv in (['--help'], ['no-such-command']):\n"
        "    try:\n"
        "        root.main(argv, prog_name='specagent', standalone_mode=True)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(sorted(m for m in {modules + heavy!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_a_lazy_module_is_the_module_once_touched():
    code = ("import sys\n"
            "from specagent.common.lazy_import import lazy_module\n"
            "pq = lazy_module('pyarrow.parquet')\n"
            "before = 'pyarrow.parquet' in sys.modules\n"
            "import pyarrow.parquet as real\n"
            "print(before, pq.read_table is real.read_table, pq.__version__ == real.__version__ if hasattr(real, '__version__') else True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True"]


def test_a_request_trace_replay_builds_no_trajectory_record_types(tmp_path):
    """A `replay` of a plain request trace loads no agent workload, so the trace schema's pydantic records (and the
    workload and planning modules behind them) stay unimported: start-up is most of a 10^4-request replay (issue #34);
    with --format json nothing is drawn, so rich is not imported either (#50)."""
    trace = tmp_path / "requests.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.5},{100 + i},{20 + i}\n" for i in range(20)))
    agent_side = ["specagent.traces.schema", "specagent.traces.profile", "specagent.simulator.protocol.workload",
                  "specagent.simulator.run", "pandas", "rich", "rich.console"]
    code = (
        "import sys\n"
        "from specagent.cli import main\n"
        f"sys.argv = ['specagent', 'replay', {str(trace)!r}, '--strong-model', 'qwen3-8b', '--strong-hardware', 'h100',"
        " '--replicas', '1', '--format', 'json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"print(sorted(m for m in {agent_side!r} if m in sys.modules), file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert '"completed": 20' in run.stdout
    assert run.stderr.strip().splitlines()[-1] == "[]"
