"""bench/kfac_solve.py --quick on the current version only: the old version needs a git worktree
of commit 637fb6d, which a test should not create in the repository it runs from.

The solution the script captured must satisfy the residual the library reported, and the
script's own float64 check must agree with a recomputation through the library's K-FAC sum."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import load_script
from safetensors.torch import load_file

from fl_core.contribution import Contribution
from fl_core.fisher.capture import LayerSpec
from fl_core.fisher.kfac import KFACFisher, KFACSum
from fl_core.stats import SufficientStatistics

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "kfac_solve.py"


def _script():
    return load_script("bench/kfac_solve.py")


def _library_residuals(directory: Path, x: torch.Tensor, damping: float) -> tuple[float, float]:
    """``(whole, worst block)`` residuals of the damped system through fl_core's own KFACSum."""
    meta, tensors = _script().load_problem(directory)
    specs = [LayerSpec(**s) for s in meta["specs"]]
    stats = SufficientStatistics(meta["dim"], KFACSum(specs))
    stats.apply(
        joined=[
            Contribution(
                c,
                tensors[f"{c}.weights"],
                KFACFisher(specs, [(tensors[f"{c}.{s.name}.A"], tensors[f"{c}.{s.name}.G"]) for s in specs]),
                n,
            )
            for c, n in zip(meta["clients"], meta["num_samples"], strict=True)
        ]
    )
    fsum = stats.fisher_sum
    lam = damping * fsum.trace() / stats.dim
    r = fsum.matvec(stats.mean()) - stats.b
    e = fsum.matvec(x) + lam * x - r
    worst = max(float(e[sl].norm() / r[sl].norm()) for sl in fsum.blocks(stats.dim))
    return float(e.norm() / r.norm()), worst


@pytest.mark.slow
def test_quick_current_version(tmp_path: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    summary_path = tmp_path / "summary.json"
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--versions",
            "after",
            "--repeats",
            "1",
            "--max-iter",
            "20",
            "--workdir",
            str(tmp_path),
            "--json",
            str(summary_path),
        ],
        check=True,
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
    )
    summary = json.loads(summary_path.read_text())
    (run,) = summary["runs"]
    assert run["version"] == "after" and Path(run["fl_core"]).resolve() == (ROOT / "fl_core").resolve()
    assert run["iterations"] <= 20 and run["seconds"] > 0 and not run["psd_changed"]
    # the per-layer solver reports its worst block's true residual: the captured solution has it
    assert run["true_worst_block"] == pytest.approx(run["residual"], rel=1e-6)
    x = load_file(str(tmp_path / "x_after-1.safetensors"))["x"]
    whole, worst = _library_residuals(tmp_path, x, summary["config"]["damping"])
    assert run["true_residual"] == pytest.approx(whole, rel=1e-6)
    assert run["true_worst_block"] == pytest.approx(worst, rel=1e-6)
    assert whole <= worst
    # every block's CG calls are listed: the float32 phase of each (one size per layer, in order)
    # comes first, a float64 finish follows only where that phase ended above the tolerance
    sizes = [c["size"] for c in run["cg_calls"]]
    assert list(dict.fromkeys(sizes)) == [s["out_features"] * s["in_features"] for s in summary["problem"]["specs"]]
    assert all(sizes.count(n) <= 2 for n in sizes)
    assert 0 < sum(c["seconds"] for c in run["cg_calls"]) <= run["seconds"]
