"""The tutorial notebooks are stored with the outputs of their current code (`make notebooks`) and run end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install nbformat)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install nbclient ipykernel)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install ipykernel)")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["01_predict_savings.ipynb", "02_calibrate.ipynb", "03_capacity_plan.ipynb"]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_with_the_outputs_of_its_current_code(name):
    """Committed with outputs (they show when browsed), computed from the code cells as they are now: editing a cell
    without `make notebooks` fails here, so stored outputs never go stale silently."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_notebooks", NOTEBOOKS.parent / "tools" / "run_notebooks.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)  # type: ignore[union-attr]
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), "run `make notebooks`"
    assert nb.metadata.get("specagent", {}).get("code_sha256") == tool.code_hash(nb), f"{name}: code changed; run `make notebooks`"
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # what GitHub's viewer shows
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")  # reads as a tutorial
    text = " ".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "e+1" not in text and "93640623447329" not in text  # no FLOP/s printed as GFLOP/s (notebook 2's old unit bug)


def printed_text(nb) -> list[str]:
    """What a reader sees as text: streams and plain-text results, cell by cell; a cell's consecutive chunks of one
    stream joined (where the kernel splits a flush depends on timing, not on what was printed)."""
    texts: list[str] = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        last = None
        for o in c.outputs:
            if o.output_type == "stream" and last == o.name:
                texts[-1] += o.text
            elif o.output_type == "stream" or "text/plain" in o.get("data", {}):
                texts.append(o.text if o.output_type == "stream" else o["data"]["text/plain"])
            last = o.name if o.output_type == "stream" else None
    return texts


# notebook 2 times forward passes on this CPU: its printed numbers are measurements and differ run to run
DETERMINISTIC = {"01_predict_savings.ipynb", "03_capacity_plan.ipynb"}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_end_to_end(name, tmp_path):
    if name == "02_calibrate.ipynb":
        pytest.importorskip("torch", reason="torch is needed to time the model's forward passes")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    if name in DETERMINISTIC:  # the stored numbers are today's: a change to the defaults needs `make notebooks`
        assert printed_text(nb) == printed_text(nbformat.read(NOTEBOOKS / name, as_version=4)), \
            f"{name}: its stored outputs are not what its code prints now; run `make notebooks`"
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type == "display_data" and "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(shown) >= {"01_predict_savings.ipynb": 3, "02_calibrate.ipynb": 1, "03_capacity_plan.ipynb": 2}[name]
    written = {"01_predict_savings.ipynb": ["report_01.html"], "02_calibrate.ipynb": ["calibration_02.csv"],
               "03_capacity_plan.ipynb": ["balance_03.csv", "plan_03.csv"]}[name]
    for f in written:
        assert (tmp_path / f).stat().st_size > 0
