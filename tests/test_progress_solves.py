"""Long work shows: a progress line per request when output is piped, and a warning in the
summary and the manifest when a solve stopped before its tolerance."""

from __future__ import annotations

import json

from test_cosim import trace_file

from vmc_sim.cli import main
from vmc_sim.oneshot import run_oneshot
from vmc_sim.rundir.directory import RunDir
from vmc_sim.rundir.solves import unconverged_solves, warning_lines
from vmc_sim.scenario.config import OneShotConfig, load_model


def test_unconverged_solves_are_counted_with_the_residual_reached():
    records = [
        {"method": "fsosa", "index": 0, "solve": {"converged": True, "stop_reason": "converged", "residual": 1e-8}},
        {
            "method": "fsosa",
            "index": 1,
            "solve": {
                "converged": False,
                "stop_reason": "converged",
                "residual": 1e-8,
                "candidates": [{"stop_reason": "max_iter", "residual": 3e-3}],
            },
        },
        {"method": "retrain", "index": 1, "solve": {"converged": False, "stop_reason": "stalled", "residual": 2e-4}},
        {"method": "fedavg", "index": 1, "solve": None},
    ]
    found = unconverged_solves(records)
    assert set(found) == {"fsosa", "retrain"}
    assert found["fsosa"] == {
        "solves": 2,
        "unconverged": 1,
        "worst_residual": 3e-3,
        "stop_reasons": {"max_iter": 1},
        "requests": [1],
    }
    lines = warning_lines(found, 1e-6)
    assert lines[0].startswith("warning: fsosa: 1 of 2 solves stopped before their tolerance 1e-06")
    assert "worst relative residual reached 3.00e-03" in lines[0]


def tiny_oneshot(**projection):
    return load_model(
        OneShotConfig,
        None,
        {
            "name": "tiny",
            "seed": 0,
            "initial_clients": 4,
            "requests": ["+4", "-1"],
            "federated": {
                "dataset": "digits",
                "num_clients": 6,
                "model": "mlp",
                "methods": ["fsosa"],
                "train": {"epochs": 1, "fisher": "kfac"},
                "projection": projection,
            },
        },
    )


def test_oneshot_prints_progress_and_warns_when_a_solve_stops_early(tmp_path):
    said, progress = [], []
    run = run_oneshot(
        tiny_oneshot(max_iter=1, dampings=[0.001]), out=tmp_path, say=said.append, progress=progress.append
    )
    assert progress[0] == "[1/3] fit: fsosa: fitting on 4 clients ..." and len(progress) == 3
    warnings = [s for s in said if s.startswith("warning: fsosa:")]
    assert warnings and "stopped before their tolerance 1e-06" in warnings[0]
    manifest = RunDir(run.path).manifest()
    assert manifest["unconverged_solves"]["fsosa"]["unconverged"] >= 1
    assert manifest["unconverged_solves"]["fsosa"]["worst_residual"] > 1e-6


def test_a_piped_cosim_prints_a_line_per_record_and_the_summary_warns(tmp_path, capsys):
    trace = trace_file(tmp_path)
    scenario = {
        "name": "piped",
        "seed": 3,
        "duration": 120.0,
        "mobility": {"source": "trace", "trace": str(trace)},
        "federated": {
            "dataset": "digits",
            "num_clients": 12,
            "model": "mlp",
            "rho": 0.5,
            "methods": ["fsosa"],
            "train": {"epochs": 1, "fisher": "kfac"},
            "projection": {"max_iter": 1},
        },
        "coordinator": {"warmup": 5.0, "min_clients": 4},
        "compute": {"time_model": "device"},
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario))
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("[t=")]
    run = RunDir(next((tmp_path / "runs").iterdir()))
    assert len(lines) == len(list(run.records())) == 8
    assert lines[0].startswith("[t=") and "fsosa #0 fit" in lines[0]
    assert "warning: fsosa:" in out and "stopped before their tolerance" in out
    assert run.manifest()["unconverged_solves"]["fsosa"]["unconverged"] >= 1
