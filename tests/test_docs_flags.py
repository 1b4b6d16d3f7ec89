"""Every `--flag` the README and docs/ name exists on some specagent command (the README once told `predict` users
to pass `--serving-engine`, a flag only `roofline` has). Flags of other tools the docs show (pip, pytest, git, make) are listed here by name."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from specagent.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
#: Flags of other programs the pages show in commands to copy (pip, pytest, python, git, uv, ...), not specagent's.
OTHER_TOOLS = {"--upgrade", "--no-deps", "--no-build-isolation", "--no-index", "--find-links", "--only-binary", "--index-url",
               "--extra-index-url", "--user", "--editable", "--require-hashes", "--target", "--prefix", "--dest", "--platform",
               "--python-version", "--implementation", "--abi", "--no-binary", "--pre", "--quiet-pip", "--tb", "--maxfail",
               "--cov", "--durations", "--hypothesis-profile", "--hypothesis-show-statistics", "--lf", "--ff", "--collect-only",
               "--benchmark-only", "--version-pip", "--check", "--no-cache-dir", "--break-system-packages", "--system",
               "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--screenshot", "--window-size",
               "--force-reinstall", "--ignore-installed", "--help-pip", "--tensor-parallel-size", "--max-num-seqs",
               "--max-num-batched-tokens", "--enable-prefix-caching", "--chunked-prefill-size", "--dataset-name",
               "--num-prompts", "--request-rate", "--save-result", "--gpu-memory-utilization", "--enforce-eager",
               "--max-model-len", "--kv-cache-dtype", "--quantization", "--dtype-vllm", "--ep-size", "--tp", "--dp",
               "--trust-remote-code", "--disable-cuda-graph", "--mem-fraction-static", "--enable-torch-compile",
               # `vllm serve` / `sglang.launch_server` flags in docs/endpoints.md's serving recipes
               "--enable-auto-tool-choice", "--language-model-only", "--model-path", "--port", "--reasoning-parser",
               "--served-model-name", "--tool-call-parser",
               # an `sglang.launch_server` flag a measured row records (docs/serving-engine-terms.md, latency_targets)
               "--mamba-ssm-dtype",
               # `transformers serve` (and tools/real_server.py serve, which passes it on) in docs/calibration.md
               "--continuous-batching",
               # `vllm bench serve` flags in docs/capacity-planning.md's dataset files
               "--save-detailed", "--custom-output-len",
               # `ray start` flags in docs/capacity-planning.md's "On a Ray cluster"
               "--head", "--num-cpus",
               }


def _benchmark_flags() -> set[str]:
    """The flags the scripts under benchmarks/ and tools/ declare (their own argparse, not the CLI): read from the
    scripts, so a doc naming a flag no script has still fails."""
    import re

    return {f for py in (*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tools").glob("*.py"))
            for f in re.findall(r'add_argument\(\s*"(--[a-z0-9][a-z0-9-]*)"', py.read_text(encoding="utf-8"))}


def _cli_flags() -> set[str]:
    root = typer.main.get_command(app)
    out: set[str] = set()

    def walk(cmd) -> None:  # typer bundles its own click: duck-typed
        for p in cmd.params:
            out.update(o for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(root)
    return out | {"--help", "--version"}


def _doc_flags() -> dict[str, list[str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found: dict[str, list[str]] = {}
    for page in pages:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:-\*)?", line):
                found.setdefault(flag, []).append(f"{page.relative_to(ROOT)}:{n}")
    return found


def test_every_flag_the_docs_name_exists():
    cli, bench = _cli_flags(), _benchmark_flags()
    assert {"--bf16", "--quick", "--repeat"} <= bench  # the scripts' flags are read, not listed

    def known(f: str) -> bool:  # `--weak-*` names a family of flags: some must exist
        return f in cli or f in OTHER_TOOLS or f in bench or (f.endswith("-*") and any(c.startswith(f[:-1]) for c in cli))

    missing = {f: where for f, where in _doc_flags().items() if not known(f)}
    assert not missing, "flags named in the docs that no specagent command or benchmark script has: " + "; ".join(
        f"{f} ({', '.join(w[:3])})" for f, w in sorted(missing.items()))


def test_the_check_can_fail():
    cli = _cli_flags()
    assert "--weak-serving-engine" in cli and "--strong-serving-engine" in cli and "--no-such-flag" not in cli
    assert "--phases" in _doc_flags()  # the pages are read (a page the glob missed would pass vacuously)
    assert "--price" in _cli_flags() and "--format" in _cli_flags() and "--hardware" in _cli_flags()
    assert "--no-such-flag" not in _benchmark_flags() and "--repeat" not in _cli_flags()  # a script flag is not a CLI one


def test_readme_is_short_and_keeps_its_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "make run " in text and "make test " in text
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run:", make, re.M) and re.search(r"^test:", make, re.M)
    for link in re.findall(r"\]\((docs/[^)#]+)\)", text):
        assert (ROOT / link).is_file(), link


def test_shell_completion_completes_commands_and_flags():
    import os
    import subprocess
    import sys

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_SPECAGENT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        exe = Path(sys.executable).parent / "specagent"  # the installed entry point: completion keys on the program's name
        run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=120)
        return run.stdout.split()

    assert {"plan", "predict", "predictor"} <= set(complete("specagent p", 1))
    assert "--format" in complete("specagent predict --for", 2) and "--max-seqs" in complete("specagent replay x --max-s", 3)


def test_root_help_fits_80_columns():
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and all(len(line) <= 80 for line in r.output.splitlines()), r.output
    assert "--install-completion" in r.output
