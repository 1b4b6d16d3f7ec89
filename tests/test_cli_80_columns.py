"""Every command's default output at 80 columns: no line over 80 and no table cell wrapped or broken (issue #51).

A table that does not fit wrapped mid-number at 80 columns (`hardware list` was 112 wide, the plan's capacity curve 93).
Each command in COMMANDS runs through typer's runner with COLUMNS=80; every rich table it prints is recorded as rich lays
it out, and the test fails on a line of output over 80 columns or on a table cell wider than its column (a body cell
that wraps, or a header cut inside a word). To cover another command, add a row to COMMANDS (placeholders: {tmp} a
folder of the test's own, {small} a trace of two shipped trajectories, {workload} the shipped τ² workload, {chat} an
OpenAI-chat log fixture, {requests} a request trace, {predicted} its `replay --json`, {vllm} a vLLM result file).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.measure import Measurement
from rich.table import Table
from typer.testing import CliRunner

from specagent.cli import app
from specagent.traces import default_workload_path, load_trajectories, save_trajectories

WIDTH = 80
CHAT = Path(__file__).parent / "fixtures" / "trajectories" / "openai_chat" / "support_bot.jsonl"
VLLM = Path(__file__).parent / "fixtures" / "vllm" / "save_result.json"
SMALL_PLAN = ("--tasks", "6", "--trace", "{small}", "--workers", "1")

#: name -> the command line (default output: no --json, no --details unless the name says so).
COMMANDS: dict[str, tuple[str, ...]] = {
    "hardware list": ("hardware", "list"),
    "hardware show": ("hardware", "show", "h20"),
    "models list": ("models", "list"),
    "models show": ("models", "show", "qwen3.5-397b-a17b"),
    "roofline": ("roofline",),
    "roofline balance": ("roofline", "balance"),
    "scenario show": ("scenario", "show"),
    "traces import": ("traces", "import", "openai", "{chat}", "-o", "{tmp}/chat.jsonl"),
    "traces stats": ("traces", "stats", "{workload}"),
    "predict": ("predict", "-o", "{tmp}/predict"),
    "explain": ("explain",),
    "explain, a slower Weak GPU": ("explain", "--weak-model", "qwen3-4b", "--weak-hardware", "l40s", "--strong-model",
                                   "qwen3-32b", "--strong-hardware", "h100", "--strong-gpus", "4", "--strong-dtype", "bf16",
                                   "--no-counterfactuals"),
    "plan": ("plan", "--rate", "1/s", "--gpu", "h20", *SMALL_PLAN),
    "plan --details": ("plan", "--rate", "1/s", "--gpu", "h20", "--details", *SMALL_PLAN),
    "plan, a curve on two GPU types": ("plan", "--rate", "0.5/s..8/s", "--points", "2", "--gpu", "h20,h200", *SMALL_PLAN),
    "replay": ("replay", "{requests}"),
    "replay, every percentile option": ("replay", "{requests}", "--percentile-metrics", "ttft,tpot,itl,e2el",
                                        "--metric-percentiles", "50,90,99.9", "--max-concurrency", "4"),
    "bench compare": ("bench", "compare", "{predicted}", "{vllm}"),
}
#: Commands left out for now, each being reworked elsewhere (issue #51's other parts): add them to COMMANDS when they fit.
PENDING = ("bench serve", "latency validate", "predictor validate")

runner = CliRunner()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """Two shipped trajectories: a plan over them takes a second or two."""
    p = tmp_path_factory.mktemp("cols") / "small.jsonl"
    save_trajectories(load_trajectories(default_workload_path())[:2], p)
    return p


@pytest.fixture(scope="module")
def serving(tmp_path_factory) -> dict[str, Path]:
    """A small request trace and its `replay --json` (the predicted side of `bench compare`)."""
    from specagent.traces.requests import save_requests, synthetic_requests

    folder = tmp_path_factory.mktemp("serving")
    save_requests(folder / "r.csv", synthetic_requests(200, 3.0, seed=7))
    r = runner.invoke(app, ["replay", str(folder / "r.csv"), "--json"])
    assert r.exit_code == 0, r.output
    (folder / "predicted.json").write_text(r.output)
    return {"requests": folder / "r.csv", "predicted": folder / "predicted.json", "vllm": VLLM}


class TableRecorder:
    """Every rich table rendered, with the column widths rich gave it and the console it drew on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[Table, list[int], object]] = []
        original = Table._render

        def render(table, console, options, widths):
            self.seen.append((table, list(widths), console))
            return original(table, console, options, widths)

        monkeypatch.setattr(Table, "_render", render)

    def broken_cells(self) -> list[str]:
        """Each cell wider than its column: a body cell at its full width, a header at its longest word (a header may
        wrap between words, never inside one)."""
        out = []
        for table, widths, console in self.seen:
            wide = console.options.update_width(100_000)  # type: ignore[attr-defined]
            for i, column in enumerate(table.columns):
                for j, cell in enumerate(table._get_cells(console, i, column)):
                    m = Measurement.get(console, wide, cell.renderable)  # type: ignore[arg-type]
                    header = table.show_header and j == 0
                    need = m.minimum if header else m.maximum
                    if need > widths[i]:
                        what = column.header if header else column._cells[j - table.show_header]
                        out.append(f"{table.title or 'untitled table'}: column {column.header!r}: {what!r} needs {need} "
                                   f"columns, got {widths[i]}")
        return out


def run_at_80(args: tuple[str, ...], tmp_path: Path, small: Path, serving: dict[str, Path] | None = None):
    argv = [a.format(tmp=tmp_path, small=small, workload=default_workload_path(), chat=CHAT, **(serving or {})) for a in args]
    return runner.invoke(app, argv, env={"COLUMNS": str(WIDTH)})


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_default_output_fits_80_columns_with_every_cell_whole(name, tmp_path, small, serving, monkeypatch):
    tables = TableRecorder(monkeypatch)
    r = run_at_80(COMMANDS[name], tmp_path, small, serving)
    assert r.exit_code == 0, r.output
    long = [line for line in r.output.splitlines() if cell_len(line) > WIDTH]
    assert not long, f"{len(long)} line(s) over {WIDTH} columns, the first: {long[0]!r}"
    assert not tables.broken_cells(), "\n".join(tables.broken_cells())
    assert r.output.strip(), name


def test_the_recorder_catches_a_table_too_wide_and_a_wrapped_cell(monkeypatch):
    """The checks above can fail: a table wider than 80 columns gives long lines, a narrow column a wrapped cell."""
    from specagent.cli.console import SafeConsole

    tables = TableRecorder(monkeypatch)
    console = SafeConsole(width=WIDTH, record=True, file=open("/dev/null", "w", encoding="utf-8"))  # noqa: SIM115
    wide = Table("a", "b")
    wide.add_row("x" * 60, "0.918" * 10)
    console.print(wide)
    narrow = Table("phase", "share")
    narrow.columns[0].max_width = 8
    narrow.add_row("Strong verification", "0.004")
    console.print(narrow)
    lines = console.export_text().splitlines()
    assert any(cell_len(line) > WIDTH for line in lines)  # the SafeConsole prints the wide table whole: lines over 80
    assert any("Strong verification" in b for b in tables.broken_cells())


def test_plan_ends_with_its_fleets_on_one_screen(tmp_path, small):
    """One rate: the answer, from its first line to the files line, is within the last 24 lines (the screen a terminal
    keeps), the progress lines on stderr before it."""
    r = run_at_80((*COMMANDS["plan"], "--out", "{tmp}/plan"), tmp_path, small)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("Capacity plan for"))
    assert len(lines) - start <= 24, "\n".join(lines[start:])
    answer = "\n".join(lines[start:])
    for part in ("strongonly", "specagent", "alone (no contention)", "specagent vs strongonly at 1/s:", "$/GPU-hour: h20",
                 "wrote "):
        assert part in answer, (part, answer)
    assert "search 2/2 done" not in r.stdout  # the progress is on stderr
