"""``vmc sweep``: grid expansion and validation, and tiny sweeps on a recorded trace (no SUMO)
run for real in the local process pool and on a local Ray instance."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.scenario.config import ConfigError, load_model
from vmc_sim.scenario.schema import Scenario
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
    ("grid", "pattern"),
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
    s = spec({"radius": [100, 200], "rho": [0.5]}, base=tiny_base(tiny_trace(tmp_path / "trace.jsonl")))
    (note,) = inert_axes(s, expand(s))
    assert "'radius'" in note and "trace" in note


@pytest.mark.parametrize(
    ("grid", "pattern"),
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
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not a trace\n")  # a file the input checks pass and the run cannot read
    (tmp_path / "base.yaml").write_text(json.dumps(tiny_base(trace)))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "name": "local",
                "base": "base.yaml",
                "grid": {"mobility.trace": [str(trace), str(broken)]},
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
        ("p001", str(broken), "fsosa", "failed"),
    ]
    good, bad = rows
    recorded = [json.loads(line) for line in (sweep_dir / good["point"] / "records.jsonl").read_text().splitlines()]
    edits = [r for r in recorded if r["kind"] != "fit"]
    assert int(good["requests"]) == len(edits) + 1 == 4  # the first fit answers request 0, as vmc run counts it
    assert int(good["triggered"]) == sum(r["triggered"] for r in recorded)
    assert int(good["withdrawn"]) == 0 and float(good["sim_compute_s"]) > 0
    assert float(good["total_MB"]) > 0 and float(good["sim_time_s"]) > 0
    assert float(good["final_accuracy"]) == pytest.approx(recorded[-1]["accuracy"])
    assert json.loads((sweep_dir / good["point"] / "manifest.json").read_text())["status"] == "complete"
    assert good["run_dir"] == str(sweep_dir / good["point"])
    assert bad["requests"] == "" and "broken.jsonl" in bad["error"]
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    assert manifest["status"] == "complete_with_failures" and manifest["axes"] == {"mobility.trace": "mobility.trace"}
    assert [p["status"] for p in manifest["points"]] == ["complete", "failed"]
    assert "broken.jsonl" in manifest["points"][1]["error"]
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
    assert all(int(r["requests"]) == 4 and float(r["total_MB"]) > 0 for r in rows)
    assert json.loads((result.path / "sweep.json").read_text())["engine"] == "ray"


def test_a_calibrated_sweep_pins_one_calibration_into_every_point(tmp_path):
    from vmc_sim.sweep import pin_calibrations

    base = {**tiny_base(tiny_trace(tmp_path / "trace.jsonl")), "compute": {"time_model": "calibrated"}}
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


T_975_2 = 4.302652729749464
"""The 0.975 quantile of Student's t with 2 degrees of freedom: (2p - 1) / sqrt(2p(1 - p)) at p = 0.975,
the closed form for 2 degrees of freedom (4.30265272974946385 to 18 digits)."""


def test_the_t_quantile_and_the_interval_match_the_textbook_and_numpy():
    import numpy as np

    from vmc_sim.sweep import interval, t_quantile

    assert t_quantile(0.975, 2) == pytest.approx(T_975_2, rel=1e-14)
    assert t_quantile(0.975, 2) == pytest.approx(4.302652729911275, rel=1e-10)  # the often-quoted table value
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736174696, rel=1e-14)  # tan(0.475 pi)
    values = [0.8, 0.85, 0.95, float("nan"), None]  # missing figures are left out
    iv = interval(values)
    xs = np.array([0.8, 0.85, 0.95])
    assert iv.n == 3 and iv.mean == pytest.approx(xs.mean()) and iv.std == pytest.approx(xs.std(ddof=1))
    assert iv.ci == pytest.approx(T_975_2 * xs.std(ddof=1) / np.sqrt(3))
    one = interval([2.0])
    assert (one.mean, one.n) == (2.0, 1) and np.isnan(one.std) and np.isnan(one.ci)


def test_replicates_run_every_point_once_per_seed_and_set_its_seeds():
    from vmc_sim.sweep import replicate_runs

    s = spec({"rho": [0.3, 0.5]}, replicates=3)
    runs = replicate_runs(s, expand(s))
    assert [(r.id[:4], r.replicate) for r in runs] == [(f"p00{i}", k) for i in range(2) for k in range(3)]
    assert len({r.run_id for r in runs}) == 6 and runs[4].run_id == f"{runs[4].id}-rep1"
    for r in runs:
        sc = r.scenario
        assert sc.seed == sc.mobility.sumo.seed == sc.mobility.city["seed"] == r.replicate
    only_run_seed = spec({"rho": [0.3]}, replicates=[7, 9], replicate_sets=["seed"])
    default = Scenario()
    for r, seed in zip(replicate_runs(only_run_seed, expand(only_run_seed)), (7, 9), strict=True):
        assert r.scenario.seed == seed and r.scenario.mobility.sumo.seed == default.mobility.sumo.seed
        assert r.scenario.mobility.city_config().seed == default.mobility.city_config().seed
    single = spec({"rho": [0.3, 0.5]}, replicates=[5])  # one seed: set, and the runs keep the points' ids
    points = expand(single)
    assert [(r.run_id, r.replicate, r.scenario.seed) for r in replicate_runs(single, points)] == [
        (p.id, None, 5) for p in points
    ]


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        (
            {"grid": {"seed": [0, 1]}, "replicates": 3},
            r"replicates: .*grid key 'seed' sets seed, which every replicate",
        ),
        (
            {"grid": {"mobility.sumo.seed": [1, 2]}, "replicates": 2, "replicate_sets": ["traffic"]},
            r"replicates: .*grid key 'mobility.sumo.seed' sets mobility\.sumo\.seed",
        ),
        (
            {"grid": {"mobility.city": [{}]}, "replicates": 2},
            r"replicates: .*'mobility.city' sets mobility\.city\.seed",
        ),
        ({"grid": {"rho": [0.3]}, "replicates": [1, 1]}, r"replicates: .*seed\(s\) \[1\] given more than once"),
        ({"grid": {"rho": [0.3]}, "replicates": 0}, r"replicates: .*between 1 and 2\^31"),
        ({"grid": {"rho": [0.3]}, "replicates": [-1]}, r"replicates: .*\[0, 2\^31\)"),
        ({"grid": {"rho": [0.3]}, "replicates": []}, r"replicates: .*at least one seed"),
        ({"grid": {"rho": [0.3]}, "replicates": [1, 2.5]}, r"replicates: .*list of integer seeds"),
        ({"grid": {"rho": [0.3]}, "replicates": True}, r"replicates: .*list of integer seeds"),
        ({"grid": {"rho": [0.3]}, "replicates": 2, "replicate_sets": ["sumo"]}, r"replicate_sets\.0: .*'traffic'"),
        (
            {"grid": {"rho": [0.3]}, "replicates": 2, "replicate_sets": ["traffic", "mobility.sumo.seed"]},
            r"replicate_sets: .*both set mobility\.sumo\.seed",
        ),
    ],
)
def test_bad_replicates_are_refused_naming_the_field(kw, pattern):
    grid = kw.pop("grid")
    with pytest.raises(ConfigError, match=pattern):
        spec(grid, **kw)


def test_the_shipped_replicate_sweep_runs_each_point_with_three_seeds():
    from vmc_sim.sweep import load_sweep, replicate_runs

    s, base_dir = load_sweep(Path(__file__).resolve().parents[1] / "scenarios" / "sweeps" / "replicates.yaml")
    runs = replicate_runs(s, expand(s, base_dir))
    assert [(r.scenario.federated.rho, r.replicate) for r in runs] == [(rho, k) for rho in (0.3, 0.5) for k in range(3)]
    assert all(r.scenario.mobility.city_config().seed == r.scenario.seed == r.replicate for r in runs)


def test_a_grid_seed_axis_with_traffic_only_replicates_is_allowed(tmp_path):
    trace = tiny_trace(tmp_path / "trace.jsonl")
    s = spec({"seed": [0, 1]}, base=tiny_base(trace), replicates=2, replicate_sets=["traffic"])
    (note,) = inert_axes(s, expand(s))  # a recorded trace keeps its traffic whatever SUMO's seed
    assert "replicate_sets 'traffic'" in note and "trace" in note


def test_without_several_replicates_results_keep_their_columns(tmp_path):
    from vmc_sim.sweep import gather_rows, replicate_runs, write_csv
    from vmc_sim.sweep.tables import METRICS, grid_columns_of

    today = ["point", "status", "rho", "method", *METRICS, "wall_s", "run_dir", "error"]
    trace = tiny_trace(tmp_path / "trace.jsonl")
    for replicates, header in ((None, today), ([5], today), (2, [*today[:3], "replicate", *today[3:]])):
        s = spec({"rho": [0.3, 0.5]}, base=tiny_base(trace), replicates=replicates)
        points, runs = expand(s), replicate_runs(s, expand(s))
        rows = gather_rows(s, runs, {}, {r.run_id: tmp_path / r.run_id for r in runs})
        write_csv(tmp_path / "results.csv", rows, grid_columns_of(s), replicated=replicates == 2)
        with open(tmp_path / "results.csv", newline="") as f:
            assert next(csv.reader(f)) == header
        per_point = len(runs) // len(points)
        assert [r["point"] for r in rows] == [p.id for p in points for _ in range(per_point)]
        assert ("replicate" in rows[0]) == (replicates == 2)


@pytest.mark.slow
def test_two_points_by_three_replicates_give_six_runs_and_their_summary(tmp_path, capsys):
    import numpy as np

    from vmc_sim.sweep.aggregate import FIGURES

    trace = tiny_trace(tmp_path / "trace.jsonl")
    s = spec({"rho": [0.3, 0.5]}, base=tiny_base(trace), replicates=3, workers=2)
    result = run_sweep(s, tmp_path / "runs", say=print)
    assert not result.failed
    printed = capsys.readouterr().out
    assert "2 points x 3 replicates = 6 runs" in printed and " ± " in printed
    runs = sorted(d.name for d in result.path.iterdir() if (d / "manifest.json").is_file())
    assert len(runs) == 6 and all(name.endswith(("-rep0", "-rep1", "-rep2")) for name in runs)
    rows = read_csv(result.path / "results.csv")
    assert [(r["point"][:4], r["replicate"], r["status"]) for r in rows] == [
        (f"p00{i}", str(k), "complete") for i in range(2) for k in range(3)
    ]
    for r in rows:
        seeds = json.loads((Path(r["run_dir"]) / "manifest.json").read_text())["seeds"]
        assert seeds["run_seed"] == seeds["sumo"] == int(r["replicate"])
    summary = read_csv(result.path / "summary.csv")
    assert [(r["point"], r["rho"], r["method"], r["runs"], r["complete"]) for r in summary] == [
        (rows[0]["point"], "0.3", "fsosa", "3", "3"),
        (rows[3]["point"], "0.5", "fsosa", "3", "3"),
    ]
    for agg, mine in zip(summary, (rows[:3], rows[3:]), strict=True):
        for figure in FIGURES:
            xs = np.array([float(r[figure]) for r in mine])
            assert int(agg[f"{figure}_n"]) == 3
            assert float(agg[f"{figure}_mean"]) == pytest.approx(xs.mean(), rel=1e-12, abs=1e-15)
            assert float(agg[f"{figure}_std"]) == pytest.approx(xs.std(ddof=1), rel=1e-9, abs=1e-15)
            assert float(agg[f"{figure}_ci95"]) == pytest.approx(
                T_975_2 * xs.std(ddof=1) / np.sqrt(3), rel=1e-9, abs=1e-15
            )
    assert len({r["final_accuracy"] for r in rows[:3]}) > 1  # the run seed varies the data and the training
    manifest = json.loads((result.path / "sweep.json").read_text())
    assert manifest["replicates"] == {
        "seeds": [0, 1, 2],
        "sets": ["seed", "traffic"],
        "fields": ["seed", "mobility.sumo.seed", "mobility.city.seed"],
    }
    assert manifest["summary"] == "summary.csv" and len(manifest["points"]) == 6
    assert [(p["point"], p["replicate"]) for p in manifest["points"][:3]] == [(rows[0]["point"], k) for k in range(3)]
    assert (result.path / "sweep.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.sumo
def test_traffic_replicates_change_the_requests(tmp_path):
    city = {
        "junctions_x": 4,
        "junctions_y": 4,
        "spacing": 200.0,
        "lanes": 1,
        "period": 1.0,
        "duration": 300.0,
        "min_distance": 300.0,
        "cache_dir": str(tmp_path / "sumo"),
    }
    base = {
        **tiny_base(None),
        "seed": 1,
        "duration": 40.0,
        "mobility": {"source": "city", "city": city, "rsus": {"radius": 250.0}},
        "coordinator": {"warmup": 20.0, "min_clients": 3},
    }
    s = spec({"rho": [0.5]}, base=base, replicates=[3, 4], replicate_sets=["traffic"], workers=2)
    result = run_sweep(s, tmp_path / "runs", say=quiet)
    assert not result.failed
    requests, seeds = [], []
    for entry in result.points:
        run = result.path / entry["id"]
        records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
        requests.append([(r["kind"], r["request_time"], r.get("added"), r.get("removed")) for r in records])
        seeds.append(json.loads((run / "manifest.json").read_text())["seeds"])
    assert requests[0] != requests[1]
    assert [(x["run_seed"], x["sumo"]) for x in seeds] == [(1, 3), (1, 4)]


def replicate_rows(accuracies: dict[float, list[float]]) -> list[dict]:
    """Rows of a replicated sweep over rho: one completed run per (rho, replicate) with the given accuracy."""
    from vmc_sim.sweep.tables import METRICS

    return [
        {
            "point": f"p{i:03d}",
            "status": "complete",
            "rho": rho,
            "replicate": k,
            "method": "fsosa",
            **{m: 1.0 for m in METRICS},
            "final_accuracy": acc,
            "wall_s": 1.0,
        }
        for i, (rho, accs) in enumerate(accuracies.items())
        for k, acc in enumerate(accs)
    ]


def test_intervals_over_fewer_than_three_replicates_are_flagged_in_the_table():
    from vmc_sim.sweep import summarize_replicates, summary_table

    columns = {"rho": "rho"}
    two = summary_table(summarize_replicates(replicate_rows({0.3: [0.30, 0.95], 0.5: [0.7]}), columns), columns)
    rows = [line for line in two.splitlines() if line.startswith("| p0")]
    assert "62.50 ± 412.95 (n=2)" in rows[0]  # 100 * t(0.975, 1) * std / sqrt(2) = 100 * 12.706 * 0.325
    assert all(cell.endswith("(n=2)") for cell in rows[0].split(" | ")[4:-1])
    assert "70.00 (n=1)" in rows[1] and " ± " not in rows[1]
    assert "(n=2): an interval over only 2 replicates has 1 degree of freedom (t = 12.7)" in two
    assert "(n=1): the figure of a single replicate, no interval" in two
    three = summary_table(summarize_replicates(replicate_rows({0.3: [0.3, 0.5, 0.4]}), columns), columns)
    assert "(n=" not in three and "40.00 ± 24.84 |" in three  # three or more: as before


def test_the_accuracy_band_is_clipped_to_0_100_and_the_title_says_so_and_n(tmp_path, monkeypatch):
    import matplotlib.figure

    from vmc_sim.sweep import plot_sweep

    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: figures.append(fig))
    rows = replicate_rows({0.3: [0.30, 0.95], 0.5: [0.6, 0.7]})
    plot_sweep(rows, "rho", tmp_path / "sweep.png", replicated=True)
    (fig,) = figures
    mb, _, accuracy = fig.axes
    (band,) = accuracy.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == 0.0 and ys.max() == 100.0  # mean 62.5 ± 413 at rho 0.3, clipped
    assert sorted(set(ys))[1] > 0.0 and sorted(set(ys))[-2] < 100.0  # rho 0.5's band, narrower, unclipped
    assert mb.collections[0].get_paths()[0].vertices[:, 1].min() == 1.0  # the same MB in every run: no width
    title = fig._suptitle.get_text()
    assert "clipped to the figure's range (accuracy 0-100 %" in title and "n=2 replicates" in title
    figures.clear()
    plot_sweep(replicate_rows({0.3: [0.3, 0.5, 0.4]}), "rho", tmp_path / "sweep.png", replicated=True)
    assert "n=" not in figures[0]._suptitle.get_text()
