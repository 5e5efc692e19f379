"""The reproduction tables' 'solve' cell: a row is only called converged when every candidate
the merge scored reached its tolerance; the ones that did not are named with their residual."""

from __future__ import annotations

import pytest

from fl_core.projection import SolveInfo


@pytest.fixture
def repro():
    from vmc_sim.reproduction import common

    return common


def candidate(damping: float, reason: str, residual: float) -> dict:
    return {
        "damping": damping,
        "iterations": 1000 if reason == "max_iter" else 200,
        "residual": residual,
        "stop_reason": reason,
        "val_accuracy": 0.3,
        "val_loss": 2.0,
    }


def test_a_candidate_that_stopped_short_is_named_in_the_solve_cell(repro):
    solve = SolveInfo(
        method="cg_f",
        damping=0.01,
        stop_reason="converged",
        converged=False,
        candidates=[candidate(0.01, "converged", 9.9e-7), candidate(0.001, "max_iter", 1.18e-6)],
    )
    row = {"stop_reason": solve.stop_reason, "stopped_short": repro.stopped_short_label(solve)}
    assert row["stopped_short"] == "0.001 max_iter 1.18e-06"
    assert repro.solve_label(row) == "converged; candidate 0.001 max_iter 1.18e-06"


def test_every_candidate_converged_reads_converged(repro):
    solve = SolveInfo(method="cg_f", damping=1.0, candidates=[candidate(1.0, "converged", 5e-7)])
    row = {"stop_reason": solve.stop_reason, "stopped_short": repro.stopped_short_label(solve)}
    assert repro.solve_label(row) == "converged"
    assert repro.solve_label({"stop_reason": "-"}) == "-"  # rows written before the field existed, FedAvg
