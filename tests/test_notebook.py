"""The quick-start notebook (``docs/quickstart.ipynb``) runs from top to bottom against this
checkout, so it cannot drift from the code; it is kept without outputs. Skipped where nbclient,
nbformat or ipykernel (the ``[test]`` extra), pandas (``[pandas]``) or SUMO (``[sumo]``) is missing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "quickstart.ipynb"


def test_the_notebook_is_kept_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) >= 5 and all(c.outputs == [] and c.execution_count is None for c in code)


@pytest.mark.slow
@pytest.mark.sumo
def test_the_quickstart_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for module in ("ipykernel", "pandas", "libsumo"):
        pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    start = time.perf_counter()
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    seconds = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    assert [p.name for p in (tmp_path / "runs").glob("quickstart-*/map.png")], "the map was not drawn"
    assert list((tmp_path / "runs").glob("quickstart-rho-*/results.csv"))
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "vehicles joined coverage" in printed
    print(f"the notebook ran in {seconds:.0f} s")
