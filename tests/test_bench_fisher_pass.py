"""bench/fisher_pass.py on the current version only (the other needs a git worktree, which a
test should not create in the repository it runs from): it times the pass and prints its row."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_current_version_prints_a_positive_time_per_sample():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "fisher_pass.py"),
            "--quick",
            "--versions",
            "after",
            "--kinds",
            "diagonal",
            "--labels",
            "expected",
            "--samples",
            "64",
        ],
        cwd=ROOT,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = re.search(r"^\| diagonal \| expected \| ([0-9.]+) \|$", proc.stdout, re.M)
    assert row and float(row.group(1)) > 0, proc.stdout
