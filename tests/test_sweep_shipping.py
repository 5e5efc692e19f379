"""A point shipped to a machine with no shared disk (``vmc_sim.sweep.shipping``), run here in
process: a ``.sumocfg`` that names its network and routes relative to itself still finds them in
the node's copy, the scenario names no driver path, the records equal a run in place, and a file
damaged on the way fails the point naming it."""

from __future__ import annotations

import json
from pathlib import Path

from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario
from vmc_sim.sweep.shipping import PLACEHOLDER, Bundle, land, run_shipped, ship_scenario

ROOT = Path(__file__).resolve().parents[1]


def own_network(duration: float = 200.0) -> Scenario:
    config = ROOT / "scenarios" / "own_network" / "town.sumocfg"
    return load_model(
        Scenario,
        None,
        {
            "name": "shipped",
            "duration": duration,
            "mobility": {"source": "files", "config_file": str(config), "rsus": {"count": 1, "radius": 200}},
            "federated": {"dataset": "digits", "model": "mlp", "num_clients": 12, "train": {"epochs": 1}},
            "coordinator": {"warmup": 60, "min_clients": 4, "max_requests": 6},
            "compute": {"time_model": "device"},
        },
    )


def sim(run: RunDir) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in run.records()]


def test_a_shipped_point_finds_its_sumocfg_layout_and_gives_the_records_of_a_run_in_place(tmp_path):
    scenario = own_network()
    shipped, inputs, dataset, built = ship_scenario(scenario)
    assert dataset is None and built == []  # your own files: nothing built  # digits is built in: nothing to send
    assert shipped["mobility"]["config_file"] == f"{PLACEHOLDER}/files/town.sumocfg"
    assert {"files/town.sumocfg", "files/town.net.xml", "files/town.rou.xml"} <= set(inputs.files)
    assert str(ROOT) not in json.dumps(shipped)  # nothing on the node names a driver path
    result = run_shipped({"id": "p0", "scenario": shipped, "sweep_id": "s"}, inputs, None)
    assert result["status"] == "complete", result["error"]
    land(result, tmp_path / "p0")
    here = run_scenario(scenario, out=tmp_path / "here", progress=False, say=lambda s: None)
    assert sim(RunDir(tmp_path / "p0")) == sim(here)


def test_an_input_damaged_on_the_way_fails_the_point_naming_it():
    shipped, inputs, _, _ = ship_scenario(own_network())
    files = dict(inputs.files)
    files["files/town.rou.xml"] = files["files/town.rou.xml"].replace(b"depart", b"dePart", 1)
    result = run_shipped({"id": "p0", "scenario": shipped, "sweep_id": "s"}, Bundle(files, inputs.digests), None)
    assert result["status"] == "failed" and "files/town.rou.xml arrived damaged" in result["error"]


def test_a_datasets_files_travel_and_are_found_on_the_node(tmp_path):
    import pytest

    from fl_core.data import DatasetNotFoundError, dataset_files
    from vmc_sim.sweep.shipping import unpack

    data = own_network().model_dump(mode="json")
    data["federated"]["dataset"] = "mnist"
    try:
        _, _, dataset, _ = ship_scenario(load_model(Scenario, None, data))
    except DatasetNotFoundError:
        pytest.skip("MNIST's files are not on this machine")
    assert dataset is not None and dataset[0] == "mnist" and len(dataset[1].files) == 4
    unpack(dataset[1], tmp_path / "data", "mnist")
    root, files = dataset_files("mnist", tmp_path / "data")
    assert root == (tmp_path / "data").resolve() and len(files) == 4


def city(cache: Path, region: dict | None = None) -> Scenario:
    data = own_network(duration=120.0).model_dump(mode="json")
    data["mobility"] = {
        "source": "city",
        "city": {
            "junctions_x": 3,
            "junctions_y": 3,
            "spacing": 200.0,
            "duration": 120.0,
            "min_distance": 300.0,
            "period": 5.0,
            "cache_dir": str(cache),
        },
        "rsus": {"placement": "explicit", "radius": 80, "positions": [{"id": "rsu0", "x": 200, "y": 200}]},
        "region": region,
    }
    return load_model(Scenario, None, data)


def test_what_the_driver_built_travels_once_and_the_node_builds_nothing(tmp_path, monkeypatch):
    import mobility.city

    scenario = city(tmp_path / "driver", region={"buffer": 50, "timing": "free_flow"})
    shipped, inputs, _, built = ship_scenario(scenario)
    names = sorted(name for name, _ in built)
    assert [n.split("-")[0] for n in names] == ["city", "region"]  # the city and the cut around its RSU
    assert shipped["mobility"]["city"]["cache_dir"] is None  # the node looks in its own cache
    assert str(tmp_path) not in json.dumps(shipped)

    def no_build(*args, **kwargs):
        raise AssertionError("the node built what the driver shipped")

    monkeypatch.setenv("VMC_CACHE", str(tmp_path / "node"))
    monkeypatch.setattr(mobility.city, "run_command", no_build)
    monkeypatch.setattr("mobility.region_cut.run_tool", no_build)
    result = run_shipped({"id": "p0", "scenario": shipped, "sweep_id": "s"}, inputs, None, None, *built)
    assert result["status"] == "complete", result["error"]
    assert sorted(p.name for p in (tmp_path / "node" / "sumo").iterdir() if not p.name.startswith(".")) == names
    land(result, tmp_path / "p0")
    here = run_scenario(scenario, out=tmp_path / "here", progress=False, say=lambda s: None)
    assert sim(RunDir(tmp_path / "p0")) == sim(here)


def test_a_build_damaged_on_the_way_fails_the_point_naming_it(tmp_path):
    shipped, inputs, _, built = ship_scenario(city(tmp_path / "driver"))
    ((name, bundle),) = built
    files = dict(bundle.files)
    net = next(k for k in files if k.endswith(".net.xml"))
    files[net] = files[net].replace(b"<edge", b"<Edge", 1)
    result = run_shipped(
        {"id": "p0", "scenario": shipped, "sweep_id": "s"}, inputs, None, None, (name, Bundle(files, bundle.digests))
    )
    assert result["status"] == "failed" and f"build {name}/{net} arrived damaged" in result["error"]
