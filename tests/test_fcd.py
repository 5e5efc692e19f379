"""SUMO floating car data as a mobility source: the same requests as a live SUMO run of the same
traffic, CSV and XML alike, a coarser recording within the stated bound, and bad files refused."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("sumo")
pytest.importorskip("libsumo")

from mobility.city import CityConfig, build_city  # noqa: E402
from mobility.coverage import CoverageConfig  # noqa: E402
from mobility.errors import FcdError  # noqa: E402
from mobility.fcd import FcdPositions, inspect_fcd, iter_samples  # noqa: E402
from mobility.fcd_source import FcdSource  # noqa: E402
from mobility.rsu import RsuConfig, place_rsus  # noqa: E402
from mobility.source import SumoSource  # noqa: E402
from mobility.sumo import run_command, sumo_binary  # noqa: E402
from mobility.trace import read_trace  # noqa: E402
from vmc_sim.cli import main  # noqa: E402
from vmc_sim.config import ConfigError, load_model  # noqa: E402
from vmc_sim.cosim import run_scenario  # noqa: E402
from vmc_sim.scenario import Scenario, load_scenario  # noqa: E402

pytestmark = pytest.mark.sumo

TINY = dict(
    junctions_x=4, junctions_y=4, spacing=200.0, lanes=1, period=2.0, duration=300.0, min_distance=300.0, seed=5
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fcd-cache")


@pytest.fixture(scope="module")
def city(cache):
    return build_city(CityConfig(**TINY, cache_dir=str(cache)))


@pytest.fixture(scope="module")
def rsus(city, cache):
    return place_rsus(RsuConfig(count=2, radius=150.0, central_fraction=1.0), city.net_file, cache_dir=str(cache))


def record(city, path: Path, *extra: str, **sumo) -> Path:
    """SUMO's own FCD of the city's routes (seed 42), as the live source would run them."""
    cfg = city.sumo_config(**sumo)
    end = [] if cfg.end is None else ["--end", str(cfg.end)]  # the live source stops SUMO at its end itself
    run_command([str(sumo_binary("sumo")), *cfg.arguments(), *end, "--fcd-output", str(path), *extra], what="sumo")
    return path


def drain(src, chunk: float = 7.5):
    events = []
    try:
        while not src.finished:
            events += src.advance(src.time + chunk)
    finally:
        src.close()
    return events


def key(e):
    return e.kind, e.vehicle, e.rsu


def _scenario(city, tmp_path: Path, mobility: dict) -> Scenario:
    data = {
        "name": mobility["source"],
        "duration": 300.0,
        "mobility": {
            **mobility,
            "net_file": str(city.net_file),
            "rsus": {"count": 2, "radius": 150.0, "central_fraction": 1.0},
        },
        "federated": {"num_clients": 12, "methods": ["fsosa"], "train": {"epochs": 1}},
        "coordinator": {"warmup": 20.0, "min_clients": 4},
    }
    return load_model(Scenario, None, data)


def test_fcd_recorded_by_sumo_gives_the_requests_of_the_live_run(city, tmp_path):
    fcd = record(city, tmp_path / "city.fcd.xml")
    runs = {}
    for mobility in (
        {"source": "files", "route_files": [str(city.route_file)]},
        {"source": "fcd", "fcd_file": str(fcd)},
    ):
        sc = _scenario(city, tmp_path, mobility)
        runs[mobility["source"]] = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)
    live, rec = (list(runs[s].records()) for s in ("files", "fcd"))
    assert len(live) > 20
    fields = ("index", "kind", "removed", "added", "left", "joined")
    assert [{k: r.get(k) for k in fields} for r in rec] == [{k: r.get(k) for k in fields} for r in live]
    period = inspect_fcd(fcd).period
    assert period == 1.0
    assert all(abs(a["request_time"] - b["request_time"]) <= period for a, b in zip(rec, live))
    live_events, fcd_events = (read_trace(runs[s].path / "trace.jsonl").events for s in ("files", "fcd"))
    assert [key(e) for e in fcd_events] == [key(e) for e in live_events]
    assert all(abs(a.time - b.time) <= period for a, b in zip(fcd_events, live_events))
    assert len(fcd_events) > 40
    assert not (runs["files"].path / "sumo").exists() and "sumo_outputs" not in runs["files"].manifest()
    manifest = runs["fcd"].manifest()
    assert manifest["mobility"]["source"] == "fcd" and manifest["mobility"]["fcd"]["sha256"] == inspect_fcd(fcd).sha256


@pytest.mark.parametrize("step", [1.0, 0.5])
def test_csv_and_xml_of_one_run_give_identical_events_and_those_of_sumo(city, rsus, tmp_path, step):
    cov = CoverageConfig(state_interval=5.0)
    xml = record(city, tmp_path / "f.xml", step_length=step, end=250.0)
    csv = record(city, tmp_path / "f.csv", step_length=step, end=250.0)
    assert csv.read_text().splitlines()[0].startswith("timestep_time;")
    from_xml = drain(FcdSource(xml, rsus, cov, step_length=step))
    from_csv = drain(FcdSource(csv, rsus, cov, step_length=step))
    assert from_xml == from_csv and len(from_xml) > 40
    live = drain(SumoSource(city.sumo_config(step_length=step, end=250.0), rsus, cov))
    assert [(e.time, *key(e)) for e in from_xml] == [(e.time, *key(e)) for e in live]
    assert max(abs(a.x - b.x) + abs(a.y - b.y) for a, b in zip(from_xml, live)) <= 0.011  # FCD keeps 2 decimals


def test_a_coarser_recording_stays_within_the_stated_bound(city, rsus, tmp_path):
    """A 0.1 s run sampled every 1 s: each vehicle's interpolated position is within v_max * dt / 2
    of its true one (one lane: no lane-change jumps), so a vehicle counted differently from the
    every-step recording is within that distance of an RSU's edge, or entered or left the network
    within one sampling period."""
    fine = record(city, tmp_path / "fine.xml", step_length=0.1, end=150.0)
    coarse = record(city, tmp_path / "coarse.csv", "--device.fcd.period", "1", step_length=0.1, end=150.0)
    f, c = inspect_fcd(fine), inspect_fcd(coarse)
    assert (f.period, c.period) == (pytest.approx(0.1), 1.0)
    bound = f.max_speed * c.period / 2 + 0.02  # + the FCD's rounding to 0.01 m
    seen: dict[str, list[float]] = {}
    for t, ids, _ in iter_samples(fine):
        for v in ids:
            seen.setdefault(v, [t, t])[1] = t
    a, b = FcdSource(fine, rsus, step_length=0.1), FcdSource(coarse, rsus, step_length=0.1)
    truth, interpolated = FcdPositions(iter_samples(fine), f.period), FcdPositions(iter_samples(coarse), c.period)
    worst, differ, steps = 0.0, 0, 0
    try:
        while not a.finished and a.time < 140.0:
            a.advance(a.time + 0.1)
            b.advance(a.time)
            steps += 1
            ids, states = truth.at(a.time - 0.1)
            true = {v: states[i] for i, v in enumerate(ids)}
            ids, states = interpolated.at(a.time - 0.1)
            near = {v: states[i] for i, v in enumerate(ids)}
            for v in set(near) & set(true):
                worst = max(worst, math.hypot(*(near[v][:2] - true[v][:2])))
            counted = {m.vehicle for m in a.tracker.members()} ^ {m.vehicle for m in b.tracker.members()}
            for v in counted:
                differ += 1
                if v in near:
                    edge = min(abs(math.hypot(true[v][0] - r.x, true[v][1] - r.y) - r.radius) for r in rsus)
                    assert edge <= bound, (a.time, v, edge)
                else:
                    first, last = seen[v]
                    assert min(abs(a.time - 0.1 - first), abs(a.time - 0.1 - last)) <= c.period + 1e-6, (a.time, v)
    finally:
        a.close()
        b.close()
    assert steps > 1000 and 0 < worst <= bound and differ > 0


def test_interpolation_is_linear_and_a_gap_holds_nobody(tmp_path):
    path = tmp_path / "synthetic.fcd.xml"
    path.write_text(
        '<fcd-export>\n<timestep time="0.00"><vehicle id="a" x="0" y="0" speed="10"/>'
        '<vehicle id="gone" x="5" y="5" speed="1"/></timestep>\n'
        '<timestep time="2.00"><vehicle id="a" x="20" y="0" speed="12"/><vehicle id="new" x="1" y="1" speed="1"/>'
        "</timestep>\n"
        '<timestep time="6.00"><vehicle id="a" x="60" y="0" speed="10"/></timestep>\n</fcd-export>\n'
    )
    summary = inspect_fcd(path)
    assert (summary.samples, summary.period, summary.vehicles, summary.max_speed) == (3, 2.0, 3, 12.0)
    pos = FcdPositions(iter_samples(path), summary.period)
    ids, states = pos.at(0.0)
    assert sorted(ids) == ["a", "gone"]
    ids, states = pos.at(0.5)
    assert ids == ["a"] and list(states[0]) == [5.0, 0.0, 10.5]
    ids, states = pos.at(2.0)
    assert sorted(ids) == ["a", "new"]
    assert pos.at(4.0)[0] == []  # 4 s between samples 2 s apart: the recording has a gap
    assert pos.at(6.0)[0] == ["a"]
    with pytest.raises(ValueError, match="forwards"):
        pos.at(1.0)


BAD_FILES = [
    ("no.xml", None, r"FCD file .*no.xml does not exist"),
    ("empty.xml", '<fcd-export>\n<timestep time="0.00"/>\n<timestep time="1.00"/>\n</fcd-export>\n', r"no vehicle"),
    ("none.xml", "<fcd-export/>\n", r"no time steps"),
    (
        "unsorted.xml",
        '<fcd-export><timestep time="2.00"><vehicle id="v" x="1" y="1" speed="1"/></timestep>'
        '<timestep time="1.00"/></fcd-export>',
        r"unsorted.xml: times are not sorted: time step 1.00 comes after 2",
    ),
    (
        "twice.xml",
        '<fcd-export><timestep time="1.00"><vehicle id="v" x="1" y="1" speed="1"/></timestep>'
        '<timestep time="1.00"/></fcd-export>',
        r"time 1.00 appears in two time steps",
    ),
    ("word.xml", '<fcd-export><timestep time="noon"/></fcd-export>', r"word.xml: a time step's time is not a finite"),
    (
        "comma.xml",
        '<fcd-export><timestep time="0"><vehicle id="v" x="1,5" y="1" speed="1"/></timestep></fcd-export>',
        r"comma.xml: time step 0: vehicle 'v''s x is not a finite number: '1,5'",
    ),
    (
        "dup.xml",
        '<fcd-export><timestep time="0"><vehicle id="v" x="1" y="1" speed="1"/>'
        '<vehicle id="v" x="2" y="1" speed="1"/></timestep></fcd-export>',
        r"vehicle 'v' appears twice in time step 0",
    ),
    ("net.xml", "<net/>\n", r"not SUMO FCD: its root element is <net>, not <fcd-export>"),
    ("text.xml", "hello\n", r"text.xml: not an XML file"),
    (
        "columns.csv",
        "timestep_time;vehicle_id;vehicle_x\n0.00;v;1.0\n",
        r"columns.csv: a CSV without the column\(s\) \['vehicle_y', 'vehicle_speed'\]",
    ),
    (
        "order.csv",
        "timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n1.00;v;1;1;1\n0.00;v;1;1;1\n",
        r"order.csv: times are not sorted: line 3 has time 0.00 after 1",
    ),
    (
        "nan.csv",
        "timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n0.00;v;1;nan;1\n",
        r"nan.csv: .*vehicle 'v''s y is not a finite number",
    ),
]


@pytest.mark.parametrize("name,text,pattern", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_fcd_file_is_refused_naming_the_file_and_what_is_wrong(tmp_path, name, text, pattern):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(FcdError, match=pattern):
        inspect_fcd(path)


def test_a_bad_fcd_is_refused_before_anything_runs_and_leaves_no_run_directory(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("time;id;x;y\n0;v;1;1\n")
    (tmp_path / "s.yaml").write_text(
        "mobility:\n  source: fcd\n  fcd_file: bad.csv\n  rsus: {placement: explicit, positions: [{x: 0, y: 0}]}\n"
    )
    out = tmp_path / "runs"
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "mobility.fcd_file" in err and "bad.csv: a CSV without the column(s)" in err
    assert not out.exists()
    (tmp_path / "good.csv").write_text("timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n0.00;v;1;1;1\n")
    (tmp_path / "auto.yaml").write_text("mobility:\n  source: fcd\n  fcd_file: good.csv\n")
    with pytest.raises(ConfigError, match=r"rsus.placement 'auto' places the RSUs on the network: give mobility.net"):
        run_scenario(load_scenario(tmp_path / "auto.yaml"), out=out, progress=False, say=lambda s: None)
    with pytest.raises(ConfigError, match=r"source 'fcd' needs mobility.fcd_file"):
        load_model(Scenario, None, {"mobility": {"source": "fcd"}})


def test_the_committed_example_runs_and_names_its_fcd(tmp_path):
    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "fcd" / "fcd_grid.yaml")
    assert Path(sc.mobility.fcd_file).stat().st_size < 200_000
    run = run_scenario(sc, out=tmp_path, progress=False, say=lambda s: None)
    kinds = Counter(r["kind"] for r in run.records())
    assert kinds["fit"] >= 1 and sum(kinds.values()) > 50
    fcd = run.manifest()["mobility"]["fcd"]
    assert (fcd["format"], fcd["period"], fcd["vehicles"]) == ("xml", 2.0, 60)
