"""Each recipe of docs/extending.md, performed in a staged copy of the package (tools/offline_env.stage).

A recipe is true when following it, and touching nothing else, makes the extension show
up everywhere it should with the suite's own checks green: a GPU profile (schema, sources,
loader, `hardware show`, `roofline`), a strategy (`make scenarios`, the registry checks,
`predict`), a fixed-cost latency term (`roofline --json`, `predict`, the fleet's
`IterationCost`, all agreeing) and a trace format (an importer whose trajectories
`predict` reads). Each runs in a subprocess whose `specagent` is the staged copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import offline_env  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture()
def stage(tmp_path):
    return offline_env.stage(tmp_path / "stage")


def _py(stage: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    """Run `code` with the staged package first on the path (and checked to be the one imported)."""
    head = ("import sys; sys.path.insert(0, sys.argv[1]); import specagent; "
            "assert specagent.__file__.startswith(sys.argv[1]), specagent.__file__\n")
    res = subprocess.run([sys.executable, "-c", head + textwrap.dedent(code), str(stage), *args], capture_output=True, text=True,
                         cwd=stage.parent, env={"PATH": "/usr/bin:/bin", "SPECAGENT_PURE_PYTHON": "1", "HOME": str(stage.parent)})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def _cli(stage: Path, *argv: str) -> str:
    return _py(stage, "from specagent.cli import main; sys.argv = ['specagent', *sys.argv[2:]]; main()", *argv).stdout


def _pytest(stage: Path, *tests: str) -> str:
    return _py(stage, "import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[2:]]))",
               *(str(ROOT / "tests" / t) if t.endswith(".py") else t for t in tests)).stdout


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: the recipe's anchor {old!r} is not there once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_recipe_a_gpu_profile(stage):
    """One file: the hardware tests pick it up (schema, sources, loader), and so do `hardware show` and `roofline`."""
    src = stage / "specagent" / "hardware" / "profiles"
    text = (src / "h100_sxm.toml").read_text(encoding="utf-8")
    text = text.replace('id = "h100_sxm"', 'id = "h800_sxm"').replace('name = "NVIDIA H100 SXM5 80GB"', 'name = "NVIDIA H800 SXM5 80GB"')
    text = text.replace('aliases = ["h100", "h100-sxm", "h100_sxm", "h100-sxm5", "h100-80gb"]', 'aliases = ["h800", "h800-sxm"]')
    lines = []
    for line in text.splitlines():
        if line.startswith("bandwidth_gb_s = ") and "900.0" in line:
            line = 'bandwidth_gb_s = { value = 400.0, source = "NVIDIA H800 (export variant of H100 SXM): NVLink 400 GB/s" }'
        elif line.startswith("unidirectional_gb_s = "):
            line = 'unidirectional_gb_s = { value = 200.0, source = "400 GB/s total bidirectional / 2 directions" }'
        lines.append(line)
    (src / "h800_sxm.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = _pytest(stage, "test_hardware_data.py", "test_hardware_loader.py", "-k", "h800 or shipped or present or alias")
    assert "failed" not in out and "passed" in out
    collected = _pytest(stage, "test_hardware_data.py", "--collect-only")
    assert "h800_sxm" in collected  # schema and source checks run on the new file by themselves
    shown = json.loads(_cli(stage, "hardware", "show", "h800", "--json"))
    assert "H800" in json.dumps(shown)
    h800 = json.loads(_cli(stage, "roofline", "--json", "--hardware", "h800", "--gpus", "8", "--batch", "32"))
    h100 = json.loads(_cli(stage, "roofline", "--json", "--hardware", "h100", "--gpus", "8", "--batch", "32"))
    assert h800["comm_s"] > h100["comm_s"] and h800["compute_s"] == h100["compute_s"]  # the slower link, the same chip


def test_recipe_b_a_strategy(stage):
    """One registry entry, then `make scenarios` (scenario show > default.toml): the registry checks and predict follow."""
    strategies = stage / "specagent" / "simulator" / "strategies" / "catalog.py"
    _edit(strategies, '''    StrategyEntry("specagent_every_chunk",''', '''    StrategyEntry("specagent_k1_always", "K = 1, every step reviewed",
                  lambda k, r: SpecAgent(k=1, review="every_chunk", name="specagent_k1_always")),
    StrategyEntry("specagent_every_chunk",''')
    default = stage / "specagent" / "simulator" / "scenarios" / "default.toml"
    default.write_text(_cli(stage, "scenario", "show"), encoding="utf-8")  # what `make scenarios` runs
    out = _pytest(stage, "test_scenario.py", "test_simulator_lockstep.py", "-k", "shipped_default or registry or subclass")
    assert "failed" not in out and "passed" in out
    code = """
        from specagent.simulator.strategies.catalog import strategy_entry
        e = strategy_entry("specagent_k1_always")
        print(e.takes_k, e.lockstep)
    """
    assert _py(stage, code).stdout.split() == ["False", "True"]  # K is ignored, and it is planned in lockstep
    small = stage.parent / "small.jsonl"
    _py(stage, "from specagent.traces import *; save_trajectories(load_trajectories(default_workload_path())[:4], sys.argv[2])",
        str(small))
    doc = json.loads(_cli(stage, "predict", "--trace", str(small), "--strategies", "specagent,specagent_k1_always", "--json",
                          "-o", str(stage.parent / "out")))
    assert {r["strategy"] for r in doc["summary"]} == {"strongonly", "specagent", "specagent_k1_always"}


def test_recipe_c_a_fixed_cost_latency_term(stage):
    """A constant per-pass CPU term: the engine-profile field, the LatencyTerms field and one FIXED_TERMS entry.

    It then reaches `roofline --json` (its own column and the pass time), predict, and the
    fleet's IterationCost, and tests/test_fixed_terms.py still finds every consumer agreeing.
    """
    pkg = stage / "specagent"
    _edit(pkg / "hardware" / "serving_engine.py", '''    "launch_us": ("per_pass", "launch_us", "us", True),''',
          '''    "launch_us": ("per_pass", "launch_us", "us", True),
    "constant_us": ("per_pass", "constant_us", "us", False),''')
    _edit(pkg / "hardware" / "serving_engine.py", '''    scheduler: tuple[SchedulerDefault, ...] = ()''',
          '''    constant_us: Sourced | None = None  # a constant per pass (None: none)
    scheduler: tuple[SchedulerDefault, ...] = ()''')
    lat = pkg / "costmodel" / "latency.py"
    _edit(lat, '''    cuda_graphs_mixed: bool
''', '''    cuda_graphs_mixed: bool
    constant_s: float = 0.0
''')
    _edit(lat, '''        weight_stream_s=weight_stream_s(dep, bw_eff, stream),
    )''', '''        weight_stream_s=weight_stream_s(dep, bw_eff, stream),
        constant_s=float(eng.constant_us.value) * us if eng.constant_us is not None else 0.0,
    )''')
    _edit(lat, '''    FixedTerm("layers",''', '''    FixedTerm("constant", "constant_us ([per_pass])", "constant_s", "pass", "cpu", "constant"),
    FixedTerm("layers",''')
    engines = pkg / "hardware" / "engines"
    _edit(engines / "vllm.toml", "[per_pass.kernels]", '''[per_pass.constant_us]
value = 10.0
source = "a test of the latency-term recipe (tests/test_extending.py)"

[per_pass.kernels]''')
    args = ["roofline", "--json", "--model", "qwen3.5-4b", "--hardware", "h20", "--gpus", "1"]
    with_term = json.loads(_cli(stage, *args))
    without = json.loads(_cli(stage, *args, "--serving-engine", str(ROOT / "hardware" / "engines" / "vllm.toml")))
    assert with_term["fixed_constant_s"] == pytest.approx(10e-6, rel=1e-12) and without["fixed_constant_s"] == 0.0
    assert with_term["time_s"] - without["time_s"] == pytest.approx(10e-6, rel=1e-6)
    code = """
        import numpy as np
        from specagent.costmodel.deployment import Deployment
        from specagent.costmodel.model_spec import load_model_spec
        from specagent.costmodel.passes import Passes
        from specagent.costmodel.roofline import estimate
        from specagent.hardware.profile import load_hardware
        from specagent.simulator.fleet.itercost import IterationCost
        dep = Deployment(load_model_spec("qwen3.5-4b"), load_hardware("h20"))
        cost = estimate(dep, Passes.from_batches([[(1, 100), (1, 200)]]))
        one = IterationCost(dep).one(2.0, 2.0, 2.0, 101.0 + 201.0, 302.0, 2.0, 2.0)[0]
        print(float(cost.fixed["constant"][0]), float(cost.time_s[0]), one)
    """
    constant, est, fleet = map(float, _py(stage, code).stdout.split())
    assert constant == pytest.approx(10e-6, rel=1e-12) and fleet == pytest.approx(est, rel=1e-12)
    out = _pytest(stage, "test_fixed_terms.py")
    assert "failed" not in out and "passed" in out


def test_recipe_d_a_trace_format(stage):
    """The recipe's four touch points (a module, one IMPORTERS entry, fixtures/tests, a docs row) in a staged copy: the
    format is detected by content, listed by `traces formats`, imported by `traces import`, and predict reads it."""
    (stage / "specagent" / "traces" / "importers" / "tsv.py").write_text(textwrap.dedent('''
        """A toy format for the recipe test: a task id, a tab, then OpenAI-chat messages as JSON, one task per line."""
        from __future__ import annotations

        import json

        from ..errors import SkippedRecord, TraceFormatError, close_skips
        from ..files import iter_lines
        from ..openai_chat import conversation_to_trajectory
        from .base import FormatFacts, Importer, Match


        class TSV(Importer):
            name = "tsv"
            title = "task id TAB chat messages (JSON), one task per line"
            spec = "this recipe"
            facts = FormatFacts("estimated", "none", "--tags", "unknown", "none")

            def sniff(self, probe):
                line = probe.head.split("\\n", 1)[0]
                return Match(1.0, "a tab, then a JSON list") if "\\t[" in line else None

            def read(self, path, options):
                here: list[SkippedRecord] = []
                n = 0
                for i, line in iter_lines(path, "TSV chat"):
                    ident, _, body = line.partition("\\t")
                    try:
                        msgs = json.loads(body)
                    except ValueError:
                        options.skip(TraceFormatError(str(path), f"line {i}", "messages", "JSON chat messages"), here)
                        continue
                    n += 1
                    yield conversation_to_trajectory({"messages": msgs, "task_id": ident}, file=str(path), where=f"line {i}",
                                                     tagger=options.tagger, importer=self.name)
                close_skips(n, str(path), here, options.skipped, "at least one task")
    '''), encoding="utf-8")
    reg = stage / "specagent" / "traces" / "importers" / "__init__.py"
    text = reg.read_text(encoding="utf-8")
    reg.write_text(text.replace("IMPORTERS: tuple[Importer, ...] = (", "from .tsv import TSV  # noqa: E402\n"
                                "IMPORTERS: tuple[Importer, ...] = (TSV(), ", 1), encoding="utf-8")
    log = stage.parent / "t.tsv"
    msgs = [{"role": "user", "content": "where is my order?"}, {"role": "assistant", "content": "It shipped yesterday."}]
    log.write_text("".join(f"task{k}\t{json.dumps(msgs)}\n" for k in range(3)), encoding="utf-8")
    assert "tsv" in _cli(stage, "traces", "formats")
    out = stage.parent / "via_tsv.jsonl"
    # words, not lines: at 80 columns a long temporary path wraps "…t.tsv: read as tsv" (pytest-of-root/pytest-NN/popen-gwN)
    assert "read as tsv" in " ".join(_cli(stage, "traces", "import", str(log), "-o", str(out)).split())
    doc = json.loads(_cli(stage, "predict", "--trace", str(out), "--strategies", "specagent", "--json", "-o", str(stage.parent / "o")))
    assert doc["assumptions"]["trajectories"] == 3
