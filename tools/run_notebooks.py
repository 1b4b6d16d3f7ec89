"""Execute the tutorial notebooks and store them with their outputs (`make notebooks`), so they show something when
browsed and never go stale silently: each records the hash of its code cells, which the tests check.

    .venv/bin/python tools/run_notebooks.py [NOTEBOOK ...]

Each notebook runs in a temporary folder (the files it writes stay out of the repository), with plotly's
`plotly_mimetype+png` renderer: the figure as data for Jupyter and as a PNG that GitHub's viewer shows (the PNG needs
Chrome/Chromium, as the report's images do). Writes are atomic; a notebook that fails is left as it was.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT))


def code_hash(nb) -> str:
    """sha256 of the code cells' sources, in order: what the stored outputs were computed from."""
    h = hashlib.sha256()
    for c in nb.cells:
        if c.cell_type == "code":
            h.update(c.source.encode("utf-8") + b"\0")
    return h.hexdigest()


def run(path: Path) -> None:
    from specagent.common import atomic

    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    os.environ["PLOTLY_RENDERER"] = "plotly_mimetype+png"
    with tempfile.TemporaryDirectory() as d:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": d}}).execute()
    nb.metadata["specagent"] = {"code_sha256": code_hash(nb), "regenerate": "make notebooks"}
    atomic.write_text(path, nbformat.writes(nb) + "\n")
    print(f"ran {path.relative_to(ROOT)}")


if __name__ == "__main__":
    for p in [Path(a) for a in sys.argv[1:]] or NOTEBOOKS:
        run(p.resolve())
