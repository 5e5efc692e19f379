"""SUMO's standard outputs from a live run: written into the run directory, readable by SUMO's own
tools, listed with their digests in the manifest, refused where no SUMO runs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("sumo")
pytest.importorskip("libsumo")
sumolib = pytest.importorskip("sumolib")

from mobility.cache import file_sha256  # noqa: E402
from mobility.city import CityConfig, build_city  # noqa: E402
from mobility.fcd_source import FcdSource  # noqa: E402
from mobility.rsu import Rsu  # noqa: E402
from mobility.trace import read_trace  # noqa: E402
from vmc_sim.cosim import replay_scenario, run_scenario  # noqa: E402
from vmc_sim.scenario.config import ConfigError, load_model  # noqa: E402
from vmc_sim.scenario.schema import Scenario  # noqa: E402

pytestmark = pytest.mark.sumo

TINY = dict(
    junctions_x=4, junctions_y=4, spacing=200.0, lanes=1, period=2.0, duration=300.0, min_distance=300.0, seed=5
)


@pytest.fixture(scope="module")
def city(tmp_path_factory):
    return build_city(CityConfig(**TINY, cache_dir=str(tmp_path_factory.mktemp("outputs-cache"))))


def _run(city, out: Path, **mobility):
    data = {
        "name": "outputs",
        "duration": 150.0,
        "mobility": {
            "source": "files",
            "net_file": str(city.net_file),
            "route_files": [str(city.route_file)],
            "rsus": {"count": 1, "radius": 150.0},
            **mobility,
        },
        "federated": {"num_clients": 12, "methods": ["fsosa"], "train": {"epochs": 1}},
        "coordinator": {"warmup": 20.0, "min_clients": 4, "max_requests": 10},
    }
    return run_scenario(load_model(Scenario, None, data), out=out, progress=False, say=lambda s: None)


def test_a_run_with_outputs_writes_sumos_files_listed_with_their_digests(city, tmp_path):
    run = _run(city, tmp_path, outputs=["fcd", "tripinfo", "summary"])
    listed = run.manifest()["sumo_outputs"]
    assert sorted(listed) == ["fcd", "summary", "tripinfo"]
    for name, entry in listed.items():
        path = run.path / entry["path"]
        assert entry["path"] == f"sumo/{name}.xml"
        assert entry["sha256"] == file_sha256(path) and entry["bytes"] == path.stat().st_size > 0
    trips = list(sumolib.output.parse(str(run.path / "sumo" / "tripinfo.xml"), "tripinfo"))
    steps = list(sumolib.output.parse(str(run.path / "sumo" / "summary.xml"), "step"))
    assert len(trips) > 20 and all(float(t.duration) > 0 for t in trips)
    assert (
        float(steps[-1].time) == 148.0
    )  # the step that began at 148 s: the run stops at 149 s and int(steps[-1].inserted) > len(trips)
    vehicles = [
        v for ts in sumolib.output.parse(str(run.path / "sumo" / "fcd.xml"), "timestep") for v in ts.vehicle or []
    ]
    assert len(vehicles) > 1000
    # the run's own FCD, replayed, gives the events its trace recorded
    trace = read_trace(run.path / "trace.jsonl")
    rsus = [Rsu.from_dict(r) for r in trace.meta["rsus"]]
    src = FcdSource(run.path / "sumo" / "fcd.xml", rsus, step_length=1.0)
    replayed = []
    while not src.finished and src.time < 150.0:
        replayed += src.advance(src.time + 10.0)
    src.close()
    got = [(e.time, e.kind, e.vehicle) for e in replayed if e.time <= trace.events[-1].time]
    assert got == [(e.time, e.kind, e.vehicle) for e in trace.events] and len(got) > 10
    replay = run_scenario(replay_scenario(run.path / "trace.jsonl"), out=tmp_path / "replay", progress=False)
    assert not (replay.path / "sumo").exists() and "sumo_outputs" not in replay.manifest()


def test_fcd_of_the_coverage_area_holds_the_covered_vehicles_and_the_same_events(city, tmp_path):
    run = _run(city, tmp_path, outputs=["fcd"], fcd_area="coverage")
    assert sorted(run.manifest()["sumo_outputs"]) == ["fcd"]
    trace = read_trace(run.path / "trace.jsonl")
    (rsu,) = [Rsu.from_dict(r) for r in trace.meta["rsus"]]
    far = 0.0
    for ts in ET.parse(run.path / "sumo" / "fcd.xml").getroot().iter("timestep"):
        for v in ts.iter("vehicle"):
            far = max(far, math.hypot(float(v.get("x", "nan")) - rsu.x, float(v.get("y", "nan")) - rsu.y))
    assert rsu.radius < far <= rsu.radius * 1.0013 + 7.5  # a vehicle touching the 64-gon: a car length out
    src = FcdSource(run.path / "sumo" / "fcd.xml", [rsu], step_length=1.0, begin=0.0)
    replayed = []
    while not src.finished and src.time < 150.0:
        replayed += src.advance(src.time + 10.0)
    src.close()
    got = [(e.time, e.kind, e.vehicle) for e in replayed if e.time <= trace.events[-1].time]
    assert got == [(e.time, e.kind, e.vehicle) for e in trace.events]


def test_a_run_without_outputs_writes_none_and_outputs_change_no_traffic(city, tmp_path):
    plain = _run(city, tmp_path / "plain")
    assert not (plain.path / "sumo").exists() and "sumo_outputs" not in plain.manifest()
    written = _run(city, tmp_path / "written", outputs=["fcd", "tripinfo", "summary"], fcd_area="coverage")
    assert (written.path / "sumo" / "coverage.poly.xml").is_file()
    assert read_trace(plain.path / "trace.jsonl").events == read_trace(written.path / "trace.jsonl").events
    fields = ("index", "kind", "removed", "added", "left", "joined")
    assert [{k: r.get(k) for k in fields} for r in plain.records()] == [
        {k: r.get(k) for k in fields} for r in written.records()
    ]


@pytest.mark.parametrize(
    "mobility",
    [{"source": "trace", "trace": "t.jsonl"}, {"source": "fcd", "fcd_file": "f.xml"}],
    ids=["trace", "fcd"],
)
def test_outputs_are_refused_where_no_sumo_runs(mobility):
    with pytest.raises(ConfigError, match=r"mobility.outputs \['tripinfo'\]: source '\w+' runs no SUMO"):
        load_model(Scenario, None, {"mobility": {**mobility, "outputs": ["tripinfo"]}})
    with pytest.raises(ConfigError, match=r"mobility.outputs names an output twice"):
        load_model(Scenario, None, {"mobility": {"outputs": ["fcd", "fcd"]}})
