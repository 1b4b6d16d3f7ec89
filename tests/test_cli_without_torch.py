"""The base install has no torch: every command but `calibrate` and `live` must work without it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
class NoTorch:  # any `import torch` raises ImportError and torch never enters sys.modules, as on a base install
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"No module named '{name}'")
        return None
sys.meta_path.insert(0, NoTorch())
from typer.testing import CliRunner
from specagent.cli import app
r = CliRunner().invoke(app, ["roofline", "--json"])
assert r.exit_code == 0, r.output
r = CliRunner().invoke(app, ["predict", "--strategies", "specagent", "--json", "-o", sys.argv[1]])
assert r.exit_code == 0, r.output
for cmd in (["calibrate", "-o", sys.argv[1] + "/p.toml"], ["live"]):
    r = CliRunner().invoke(app, cmd)
    assert r.exit_code == 2 and "specagent[torch]" in r.output, r.output
print("ok")
"""


def test_cli_without_torch(tmp_path):
    done = subprocess.run([sys.executable, "-c", CODE, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("ok")
