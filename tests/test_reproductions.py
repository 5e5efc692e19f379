"""Every reproduction script under ``tools/`` runs at its ``--quick`` size (the CI smoke test).

A script takes part when its source declares a ``--quick`` option; each run writes into a
temporary ``--out`` directory and must leave at least one CSV and one markdown report there.
A script may name extra smoke arguments in a module-level line ``SMOKE_ARGS = "..."`` (for
example a smaller dataset), so that CI stays fast while ``--quick`` keeps its documented size.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
SCRIPTS = sorted(p for p in TOOLS.glob("*.py") if '"--quick"' in p.read_text())


def test_there_are_reproductions():
    assert {"table2.py", "paper_sequence.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_quick_size_runs(script: Path, tmp_path: Path):
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    out = tmp_path / "out"
    match = re.search(r'^SMOKE_ARGS = "([^"]*)"', script.read_text(), re.M)
    extra = shlex.split(match.group(1)) if match else []
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(out), *extra],
        cwd=TOOLS.parent, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    files = [p.suffix for p in out.rglob("*") if p.is_file()]
    assert ".csv" in files and ".md" in files, files
