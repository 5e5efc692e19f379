"""``vmc sweep``: grid expansion and validation, and tiny sweeps on a recorded trace (no SUMO)
run for real in the local process pool and on a local Ray instance."""

from __future__ import annotations

import argparse
import csv
import json

import pytest

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.config import ConfigError, load_model
from vmc_sim.scenario import Scenario
from vmc_sim.sweep import SweepSpec, add_sweep_parser, expand, inert_axes, run_sweep


def tiny_trace(path):
    """Five vehicles in coverage, then two arrivals and one departure."""
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(5)]
    events += [
        MobilityEvent(20.0, "join", "n0", "rsu0", 50.0, -30.0, 8.0),
        MobilityEvent(27.0, "leave", "v0", "rsu0", 280.0, 0.0, 10.0),
        MobilityEvent(32.0, "join", "n1", "rsu0", 50.0, -30.0, 8.0),
    ]
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(path, events, meta, end_time=40.0)


def tiny_base(trace) -> dict:
    return {
        "name": "tiny",
        "duration": 60.0,
        "mobility": {"source": "trace", "trace": str(trace)},
        "federated": {
            "dataset": "digits",
            "num_clients": 12,
            "model": "mlp",
            "methods": ["fsosa"],
            "train": {"epochs": 1, "fisher": "diagonal"},
        },
        "compute": {"time_model": "device"},
        "coordinator": {"warmup": 5, "min_clients": 4},
    }


def spec(grid: dict, base=None, **kw) -> SweepSpec:
    return load_model(SweepSpec, None, {"name": "t", "base": base, "grid": grid, **kw})


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def quiet(_: str) -> None:
    return None


def test_grid_is_the_cartesian_product_with_convenience_names():
    s = spec(
        {
            "density": [0.5, 1.0],
            "rho": [0.3, 0.5],
            "mobility.rsus.radius": [150, 250],
            "method": ["fsosa", ["fsosa", "retrain"]],
            "seed": [0, 1],
        }
    )
    points = expand(s)
    assert len(points) == 32 and len({p.id for p in points}) == 32
    first, last = points[0].scenario, points[-1].scenario
    assert (first.mobility.density, first.federated.rho, first.mobility.rsus["radius"]) == (0.5, 0.3, 150)
    assert first.federated.methods == ["fsosa"] and first.seed == 0
    assert (last.mobility.density, last.federated.rho, last.mobility.rsus["radius"]) == (1.0, 0.5, 250)
    assert last.federated.methods == ["fsosa", "retrain"] and last.seed == 1
    assert points[1].values == {"density": 0.5, "rho": 0.3, "mobility.rsus.radius": 150, "method": "fsosa", "seed": 1}
    # fields the grid does not touch keep the base's values (here the embedded default)
    default = Scenario()
    assert first.federated.num_clients == default.federated.num_clients
    assert first.mobility.rsus["count"] == default.mobility.rsus["count"]


def test_subset_size_axis_replaces_the_base_rho():
    points = expand(spec({"federated.subset_size": [3, 5]}))
    assert [p.scenario.federated.subset_size for p in points] == [3, 5]
    assert all(p.scenario.federated.rho is None for p in points)


@pytest.mark.parametrize(
    "grid, pattern",
    [
        ({"rho": [0.3, 1.5]}, r"grid key 'rho' = 1\.5: federated\.rho"),
        ({"seed": [0], "federated.rhoo": [0.2]}, r"grid key 'federated.rhoo' = 0\.2: federated\.rhoo"),
        ({"method": ["fsosa", "nope"]}, r"grid key 'method' = \"nope\": federated\.methods.*unknown method 'nope'"),
        ({"radius": [-5]}, r"grid key 'radius' = -5: mobility\.rsus"),
        ({"seed.x": [1]}, r"grid key 'seed.x'.*seed is not a mapping"),
    ],
)
def test_a_bad_point_is_refused_naming_the_key_and_value(grid, pattern):
    with pytest.raises(ConfigError, match=pattern):
        expand(spec(grid))


def test_axes_without_effect_on_the_mobility_source_are_noted(tmp_path):
    s = spec({"radius": [100, 200], "rho": [0.5]}, base=tiny_base(tmp_path / "trace.jsonl"))
    (note,) = inert_axes(s, expand(s))
    assert "'radius'" in note and "trace" in note


@pytest.mark.parametrize(
    "grid, pattern",
    [
        ({"rho": 0.3}, r"grid\.rho"),
        ({"rho": []}, "grid key 'rho' has no values"),
        ({"rho": [0.3], "federated.rho": [0.5]}, "both set federated.rho"),
        ({}, "grid"),
    ],
)
def test_a_bad_sweep_file_is_refused(grid, pattern):
    with pytest.raises(ConfigError, match=pattern):
        spec(grid)


@pytest.mark.slow
def test_local_sweep_gathers_the_table_and_a_failing_point_does_not_stop_the_other(tmp_path, capsys):
    trace = tiny_trace(tmp_path / "trace.jsonl")
    (tmp_path / "base.yaml").write_text(json.dumps(tiny_base(trace)))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "name": "local",
                "base": "base.yaml",
                "grid": {"mobility.trace": [str(trace), str(tmp_path / "missing.jsonl")]},
            }
        )
    )
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", str(sweep), "--out", str(tmp_path / "runs"), "--workers", "2"])
    assert args.func(args) == 1
    printed = capsys.readouterr()
    assert "1 of 2 points failed" in printed.err and "| p000-tracetmp_" in printed.out
    (sweep_dir,) = (tmp_path / "runs").iterdir()
    rows = read_csv(sweep_dir / "results.csv")
    assert [(r["point"][:4], r["mobility.trace"], r["method"], r["status"]) for r in rows] == [
        ("p000", str(trace), "fsosa", "complete"),
        ("p001", str(tmp_path / "missing.jsonl"), "fsosa", "failed"),
    ]
    good, bad = rows
    recorded = [json.loads(line) for line in (sweep_dir / good["point"] / "records.jsonl").read_text().splitlines()]
    edits = [r for r in recorded if r["kind"] != "fit"]
    assert int(good["requests"]) == len(edits) == 3
    assert int(good["triggered"]) == sum(r["triggered"] for r in edits)
    assert float(good["total_MB"]) > 0 and float(good["sim_time_s"]) > 0
    assert float(good["final_accuracy"]) == pytest.approx(recorded[-1]["accuracy"])
    assert json.loads((sweep_dir / good["point"] / "manifest.json").read_text())["status"] == "complete"
    assert good["run_dir"] == str(sweep_dir / good["point"])
    assert bad["requests"] == "" and "missing.jsonl" in bad["error"]
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    assert manifest["status"] == "complete_with_failures" and manifest["axes"] == {"mobility.trace": "mobility.trace"}
    assert [p["status"] for p in manifest["points"]] == ["complete", "failed"]
    assert "missing.jsonl" in manifest["points"][1]["error"]
    assert (sweep_dir / "sweep.png").stat().st_size > 0


def test_dry_run_lists_the_points_and_runs_nothing(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: d\ngrid:\n  density: [0.5, 1.0]\n  seed: [0, 1, 2]\n")
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", str(sweep), "--dry-run", "--out", str(tmp_path / "runs")])
    assert args.func(args) == 0
    assert "6 points, all valid" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_ray_sweep_on_a_local_instance(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (optional extra 'ray')")
    trace = tiny_trace(tmp_path / "trace.jsonl")
    result = run_sweep(
        spec({"seed": [0, 1]}, base=tiny_base(trace)), tmp_path / "runs", engine="ray", workers=2, say=quiet
    )
    assert not result.failed
    rows = read_csv(result.path / "results.csv")
    assert [(r["seed"], r["status"]) for r in rows] == [("0", "complete"), ("1", "complete")]
    assert all(int(r["requests"]) == 3 and float(r["total_MB"]) > 0 for r in rows)
    assert json.loads((result.path / "sweep.json").read_text())["engine"] == "ray"


def test_a_calibrated_sweep_pins_one_calibration_into_every_point(tmp_path):
    from vmc_sim.sweep import pin_calibrations

    base = {**tiny_base(tmp_path / "trace.jsonl"), "compute": {"time_model": "calibrated"}}
    points = expand(spec({"rho": [0.3, 0.5], "seed": [0, 1]}, base=base))
    pinned, calibrations = pin_calibrations(points, quiet)
    assert len(calibrations) == 1  # one training setup: one calibration for the whole grid
    costs = {p.scenario.compute.calibration for p in pinned}
    assert len(costs) == 1 and next(iter(costs)).train_s_per_sample_epoch > 0


@pytest.mark.slow
def test_a_sweep_over_the_fisher_trains_each_vehicle_once(tmp_path):
    """Points that differ only in the Fisher share the trained weights: the second point computes
    Fishers only (that such a contribution equals a fresh one: tests/test_cache.py), and the
    summary says so."""
    trace = tiny_trace(tmp_path / "trace.jsonl")
    said: list[str] = []
    shared = run_sweep(
        spec({"federated.train.fisher": ["diagonal", "kfac"]}, base=tiny_base(trace), workers=1),
        tmp_path / "shared",
        say=said.append,
    )
    first, second = (p["cache"] for p in shared.points)
    assert first["weights_reused"] == 0 and first["misses"] > 0
    assert second["hits"] == 0 and second["weights_reused"] == second["misses"] == first["misses"]
    totals = json.loads((shared.path / "sweep.json").read_text())["contribution_cache"]
    assert totals["trained"] == first["misses"] and totals["weights_reused"] == second["misses"]
    assert any(f"{second['misses']} computed at trained weights another point kept" in line for line in said)


def test_the_shipped_fisher_sweep_differs_only_in_the_fisher():
    from pathlib import Path

    from fl_core.training import WEIGHT_FIELDS
    from vmc_sim.sweep import load_sweep

    spec, base_dir = load_sweep(Path(__file__).resolve().parents[1] / "scenarios" / "sweeps" / "fisher.yaml")
    points = expand(spec, base_dir)
    assert [p.scenario.federated.train.fisher.value for p in points] == ["diagonal", "kfac"]
    assert spec.contribution_cache and spec.workers == 1  # the second point reuses the first's training
    first, second = (p.scenario.federated.train for p in points)
    assert all(getattr(first, f) == getattr(second, f) for f in WEIGHT_FIELDS)


@pytest.mark.slow
def test_points_share_the_contribution_cache_and_results_do_not_change(tmp_path):
    trace = tiny_trace(tmp_path / "trace.jsonl")
    grid = {"rho": [0.3, 0.5]}  # the same vehicles, shards and seeds at both points
    shared = run_sweep(spec(grid, base=tiny_base(trace), workers=1), tmp_path / "shared", say=quiet)
    alone = run_sweep(
        spec(grid, base=tiny_base(trace), workers=1, contribution_cache=False), tmp_path / "alone", say=quiet
    )
    totals = json.loads((shared.path / "sweep.json").read_text())["contribution_cache"]
    first, second = (p["cache"] for p in shared.points)
    assert first["hits"] == 0 and second["hits"] > 0 and totals["hits"] == second["hits"]
    assert totals["asked"] == first["misses"] + second["hits"] + second["misses"]
    assert json.loads((alone.path / "sweep.json").read_text())["contribution_cache"] is None
    keep = ("point", "method", "requests", "triggered", "total_MB", "sim_time_s", "final_accuracy")
    assert [{k: r[k] for k in keep} for r in shared.rows] == [{k: r[k] for k in keep} for r in alone.rows]


@pytest.mark.slow
def test_solves_stopped_at_their_cap_are_counted_per_point_and_said(tmp_path):
    trace = tiny_trace(tmp_path / "trace.jsonl")
    base = tiny_base(trace)
    base["federated"]["projection"] = {"method": "cg_f", "dampings": [0.1]}
    lines: list[str] = []
    result = run_sweep(
        spec({"federated.projection.max_iter": [1, 500]}, base=base, workers=1), out=tmp_path / "runs", say=lines.append
    )
    capped, full = (int(r["unconverged_solves"]) for r in read_csv(result.path / "results.csv"))
    assert capped > 0 and full == 0
    warning = next(line for line in lines if line.startswith("warning: solves stopped before their tolerance"))
    assert "in 1 point-method pair(s): p000" in warning and f"fsosa ({capped})" in warning
