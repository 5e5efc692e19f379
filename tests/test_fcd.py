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
from mobility.fcd_rules import (  # noqa: E402
    FcdRuleError,
    FcdRules,
    GeoProjection,
    default_speed_limit,
    vtype_max_speed,
)
from mobility.fcd_source import FcdSource  # noqa: E402
from mobility.rsu import Rsu, RsuConfig, place_rsus  # noqa: E402
from mobility.source import SumoSource  # noqa: E402
from mobility.sumo import run_command, sumo_binary  # noqa: E402
from mobility.sumo_files import net_bounds  # noqa: E402
from mobility.trace import read_trace  # noqa: E402
from vmc_sim.cli import main  # noqa: E402
from vmc_sim.cosim import run_scenario  # noqa: E402
from vmc_sim.rundir.directory import RunDir  # noqa: E402
from vmc_sim.scenario.config import ConfigError, load_model  # noqa: E402
from vmc_sim.scenario.inputs import check_inputs  # noqa: E402
from vmc_sim.scenario.schema import Scenario, load_scenario  # noqa: E402
from vmc_sim.sources.fcd import fcd_rules  # noqa: E402

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
    assert all(abs(a["request_time"] - b["request_time"]) <= period for a, b in zip(rec, live, strict=True))
    live_events, fcd_events = (read_trace(runs[s].path / "trace.jsonl").events for s in ("files", "fcd"))
    assert [key(e) for e in fcd_events] == [key(e) for e in live_events]
    assert all(abs(a.time - b.time) <= period for a, b in zip(fcd_events, live_events, strict=True))
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
    assert (
        max(abs(a.x - b.x) + abs(a.y - b.y) for a, b in zip(from_xml, live, strict=True)) <= 0.011
    )  # FCD keeps 2 decimals


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
    ("notime.xml", "<fcd-export><timestep/></fcd-export>", r"notime.xml: a time step without a `time` attribute"),
    (
        "nospeed.xml",
        '<fcd-export><timestep time="12.0"><vehicle id="v3" x="1" y="1"/></timestep></fcd-export>',
        r"nospeed.xml: time step 12.0: vehicle 'v3' has no `speed` attribute \(SUMO leaves it out when "
        r"--fcd-output.attributes does not list it\); a replay needs x, y and speed",
    ),
    (
        "noy.xml",
        '<fcd-export><timestep time="0"><vehicle id="v" x="1" speed="1"/></timestep></fcd-export>',
        r"noy.xml: time step 0: vehicle 'v' has no `y` attribute",
    ),
    (
        "emptyspeed.csv",
        "timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n12.00;v3;1;1;\n",
        r"emptyspeed.csv: line 2: time step 12.00: vehicle 'v3' has no vehicle_speed \(an empty cell\)",
    ),
    (
        "short.csv",
        "timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n0.00;v;1\n",
        r"short.csv: line 2: time step 0.00: vehicle 'v' has no vehicle_y",
    ),
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


@pytest.mark.parametrize(("name", "text", "pattern"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
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


def write_fcd(path: Path, steps: dict[float, list[tuple]]) -> Path:
    """A synthetic FCD: ``{time: [(id, x, y, speed), ...]}``."""
    body = "".join(
        f'<timestep time="{t:.2f}">'
        + "".join(f'<vehicle id="{v}" x="{x}" y="{y}" speed="{sp}"/>' for v, x, y, sp in vs)
        + "</timestep>\n"
        for t, vs in steps.items()
    )
    path.write_text(f"<fcd-export>\n{body}</fcd-export>\n")
    return path


JUMP = {
    10.0: [("v3", -2300, 200, 13), ("w", 0, 0, 10)],
    12.0: [("v3", 2700, 200, 13), ("w", 20, 0, 10)],
    14.0: [("v3", 2726, 200, 13), ("w", 40, 0, 10)],
}


def test_a_vehicle_that_jumps_is_refused_naming_it_the_time_and_the_file(tmp_path):
    path = write_fcd(tmp_path / "jump.xml", JUMP)
    with pytest.raises(FcdRuleError, match=r"jump.xml: vehicle 'v3' moves 5,000 m between time steps 10 and 12 ") as e:
        inspect_fcd(path)
    assert e.value.rule == "speed" and "(2,500.0 m/s; its speed reads 13 then 13 m/s)" in str(e.value)
    assert "faster than the limit of 83.34 m/s" in str(e.value)
    assert inspect_fcd(path, FcdRules(max_speed=3000.0)).dropped == {}
    drop = FcdRules(drop=True)
    summary = inspect_fcd(path, drop)
    assert list(summary.dropped) == ["v3"] and "moves 5,000 m" in summary.dropped["v3"]
    assert summary.vehicles == 2 and summary.rules["invalid"] == "drop"
    assert [ids for _, ids, _ in iter_samples(path, drop, summary.dropped)] == [["w"], ["w"], ["w"]]
    with pytest.raises(FcdRuleError, match=r"every one of its 1 vehicle\(s\) breaks a rule and would be dropped"):
        inspect_fcd(write_fcd(tmp_path / "alone.xml", {t: vs[:1] for t, vs in JUMP.items()}), drop)


def test_the_speed_limit_leaves_room_for_a_lane_change_and_comes_from_the_vehicle_types(tmp_path):
    # every 0.1 s: a lane change moves a vehicle 3.2 m sideways within one step, 32 m/s however slow it drives
    lane = write_fcd(tmp_path / "lane.xml", {0.0: [("b", 0, 0, 5)], 0.1: [("b", 0.5, 3.2, 5)], 0.2: [("b", 1, 3.2, 5)]})
    assert inspect_fcd(lane, FcdRules(max_speed=10.0)).dropped == {}
    types = tmp_path / "types.add.xml"
    types.write_text('<additional><vType id="car" maxSpeed="30"/><vType id="ice" vClass="rail_fast"/></additional>\n')
    assert (vtype_max_speed(), default_speed_limit()) == (55.56, 83.34)  # SUMO's default car, 200 km/h
    assert (vtype_max_speed([types]), default_speed_limit([types])) == (91.67, 137.5)  # its high-speed train
    train = write_fcd(tmp_path / "train.xml", {0.0: [("ice", 0, 0, 90)], 1.0: [("ice", 90, 0, 90)]})
    with pytest.raises(FcdRuleError, match=r"vehicle 'ice' moves 90 m .* \(90.0 m/s"):
        inspect_fcd(train)
    assert inspect_fcd(train, FcdRules(max_speed=default_speed_limit([types]))).dropped == {}


def test_a_position_off_the_network_is_refused_and_lon_lat_is_named(tmp_path):
    bounds = (0.0, 0.0, 400.0, 400.0)
    rules = FcdRules(bounds=bounds, net_file="grid.net.xml")
    near = write_fcd(tmp_path / "near.xml", {0.0: [("a", -40, 0, 0)], 1.0: [("a", 440, 0, 0)]})
    assert inspect_fcd(near, FcdRules(max_speed=1000.0, bounds=bounds)).dropped == {}  # 40 m: within the 50 m margin
    off = write_fcd(tmp_path / "off.xml", {0.0: [("a", -40, 0, 0)], 1.0: [("a", 460, 0, 0)]})
    with pytest.raises(FcdRuleError, match=r"off.xml: vehicle 'a' at time step 1 is at \(460, 0\), 60 m outside"):
        inspect_fcd(off, FcdRules(max_speed=1000.0, bounds=bounds, net_file="g"))
    far = write_fcd(tmp_path / "utm.xml", {0.0: [("a", 291905.4, 5498112.4, 0)]})
    with pytest.raises(
        FcdRuleError, match=r"outside the bounds of the network grid.net.xml \(x 0..400, y 0..400 m\)"
    ) as e:
        inspect_fcd(far, rules)
    assert e.value.rule == "bounds"
    lonlat = write_fcd(tmp_path / "lonlat.xml", {0.0: [("a", 6.12, 49.6, 0)]})
    with pytest.raises(FcdRuleError) as e:
        inspect_fcd(lonlat, FcdRules(bounds=(1000.0, 1000.0, 2000.0, 2000.0), net_file="g"))
    assert e.value.rule == "lonlat"


GEO_NODES = [("a", 6.12, 49.6), ("b", 6.1255, 49.6), ("c", 6.131, 49.6), ("d", 6.12, 49.6036), ("e", 6.1255, 49.6036)]
GEO_EDGES = [("ab", "a", "b"), ("bc", "b", "c"), ("be", "b", "e"), ("ed", "e", "d"), ("da", "d", "a")]


@pytest.fixture(scope="module")
def geo(tmp_path_factory) -> Path:
    """A geo-referenced network (netconvert from lon/lat nodes, projected to UTM) and SUMO's FCD of
    two flows on it: ``xy.xml`` in network x/y, ``geo.xml`` in lon/lat (``--fcd-output.geo``)."""
    d = tmp_path_factory.mktemp("geo")
    (d / "n.nod.xml").write_text(
        "<nodes>" + "".join(f'<node id="{n}" x="{x}" y="{y}"/>' for n, x, y in GEO_NODES) + "</nodes>\n"
    )
    (d / "n.edg.xml").write_text(
        "<edges>" + "".join(f'<edge id="{e}" from="{a}" to="{b}" speed="13.89"/>' for e, a, b in GEO_EDGES) + "</edges>"
    )
    (d / "r.rou.xml").write_text(
        '<routes><flow id="f" begin="0" end="120" period="10" from="ab" to="bc"/>'
        '<flow id="g" begin="5" end="120" period="15" from="ab" to="da" via="be ed"/></routes>\n'
    )
    net = d / "geo.net.xml"
    nodes, edges, routes = (str(d / f) for f in ("n.nod.xml", "n.edg.xml", "r.rou.xml"))
    run_command(
        [str(sumo_binary("netconvert")), "-n", nodes, "-e", edges, "--proj.utm", "-o", str(net)], what="netconvert"
    )
    for name, extra in (("xy.xml", []), ("geo.xml", ["--fcd-output.geo"])):
        sumo = [str(sumo_binary("sumo")), "-n", str(net), "-r", routes, "--end", "300", "--no-step-log"]
        run_command([*sumo, "--fcd-output", str(d / name), *extra], what="sumo")
    return d


def test_sumo_lon_lat_fcd_is_converted_with_the_network_projection_or_refused_with_a_hint(geo, tmp_path, capsys):
    pytest.importorskip("pyproj")
    net = geo / "geo.net.xml"
    projection = GeoProjection.from_net(net)
    assert projection is not None and projection.proj.startswith("+proj=utm +zone=32")
    rsus = [Rsu(id="r", x=400.0, y=200.0, radius=150.0)]
    xy = drain(FcdSource(geo / "xy.xml", rsus, step_length=1.0))
    lonlat = drain(FcdSource(geo / "geo.xml", rsus, step_length=1.0, rules=FcdRules(geo=projection)))
    assert len(xy) > 10 and [(e.time, *key(e)) for e in lonlat] == [(e.time, *key(e)) for e in xy]
    assert (
        max(abs(a.x - b.x) + abs(a.y - b.y) for a, b in zip(lonlat, xy, strict=True)) < 0.2
    )  # SUMO writes 6 decimals of a degree
    with pytest.raises(FcdRuleError, match=r"geo.xml: its positions look like lon/lat, not network metres: x 6.1"):
        inspect_fcd(geo / "geo.xml")  # the network's bounds (0..810 m) hold lon 6.1, lat 49.6: told by the speeds
    to_net = FcdRules(geo=projection, bounds=net_bounds(net), net_file=str(net))
    with pytest.raises(FcdRuleError, match=r"xy.xml: vehicle 'f.0' at time step 0 is at .* m outside the bounds") as e:
        inspect_fcd(geo / "xy.xml", to_net)  # network metres read as lon/lat
    assert e.value.rule == "geo"
    with pytest.raises(FcdError, match=r"vehicle 'f.0' is at \(\d+.*\), which is not lon/lat"):
        inspect_fcd(geo / "xy.xml", FcdRules(geo=projection, max_speed=1e9))
    base = "mobility:\n  source: fcd\n  rsus: {placement: explicit, positions: [[400, 200]], radius: 150}\n"
    for extra in ("", f"  net_file: {net}\n"):
        (tmp_path / "s.yaml").write_text(base + f"  fcd_file: {geo / 'geo.xml'}\n" + extra)
        assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "mobility.fcd_file:" in err and "lon/lat? give `mobility.fcd_geo: true`" in err, err
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError, match=r"mobility.fcd_geo: true converts lon/lat .*give mobility.net_file"):
        load_model(Scenario, None, {"mobility": {"source": "fcd", "fcd_file": "f.xml", "fcd_geo": True}})
    (tmp_path / "ok.yaml").write_text(base + f"  fcd_file: {geo / 'geo.xml'}\n  net_file: {net}\n  fcd_geo: true\n")
    scenario = load_scenario(tmp_path / "ok.yaml")
    check_inputs(scenario)
    assert fcd_rules(scenario.mobility).geo == projection
    grid = Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "fcd" / "grid.net.xml"
    (tmp_path / "g.yaml").write_text(base + f"  fcd_file: {geo / 'geo.xml'}\n  net_file: {grid}\n  fcd_geo: true\n")
    with pytest.raises(ConfigError, match=r"mobility.fcd_geo: the network .*grid.net.xml has no geo projection"):
        run_scenario(load_scenario(tmp_path / "g.yaml"), out=tmp_path / "runs", progress=False, say=lambda s: None)


EXAMPLE = Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "fcd"


def _with_jumper(tmp_path: Path) -> Path:
    """The committed example's FCD with one more vehicle, which jumps 5 km across the RSU in one 2 s step."""
    text = (EXAMPLE / "fcd.xml").read_text()
    for t, x in (("10.00", -2300), ("12.00", 2700)):
        step = f'<timestep time="{t}">'
        text = text.replace(step, f'{step}\n        <vehicle id="jumper" x="{x}.00" y="200.00" speed="13.00"/>', 1)
    path = tmp_path / "jump.xml"
    path.write_text(text)
    return path


def _jumper_scenario(tmp_path: Path, fcd: Path, name: str, invalid: str = "refuse") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nseed: 0\nduration: 200\nmobility:\n  source: fcd\n  fcd_file: {fcd}\n  fcd_invalid: {invalid}\n"
        "  rsus: {placement: explicit, positions: [[200, 200]], radius: 200}\n"
        "federated: {dataset: digits, methods: [fsosa], train: {epochs: 1}}\ncoordinator: {warmup: 30, min_clients: 4}\n"
    )
    return path


def test_a_jumping_vehicle_is_refused_before_the_run_or_dropped_with_a_note(tmp_path, capsys):
    """The vehicle would be drawn through the RSU between its two samples, joining and leaving; it
    is refused naming it, the time and the file, or dropped (``fcd_invalid: drop``): then the run
    is the run of the file without it, and ``vmc run`` and the manifest say so."""
    jump = _with_jumper(tmp_path)
    rsus = [Rsu(id="r", x=200.0, y=200.0, radius=200.0)]
    allowed = drain(FcdSource(jump, rsus, rules=FcdRules(max_speed=1e4)))
    assert [e.kind for e in allowed if e.vehicle == "jumper"] == ["join", "leave"]  # what the report saw
    clean = drain(FcdSource(EXAMPLE / "fcd.xml", rsus))
    assert drain(FcdSource(jump, rsus, rules=FcdRules(drop=True))) == clean

    out = tmp_path / "runs"
    assert main(["run", str(_jumper_scenario(tmp_path, jump, "refused")), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"mobility.fcd_file: {jump}: vehicle 'jumper' moves 5,000 m between time steps 10 and 12" in err, err
    assert "raise mobility.fcd_max_speed; mobility.fcd_invalid: drop leaves such vehicles out" in err
    assert not out.exists()

    assert main(["run", str(_jumper_scenario(tmp_path, jump, "dropped", "drop")), "--out", str(out), "--quiet"]) == 0
    said = capsys.readouterr().out
    assert f"note: 1 vehicle(s) of {jump} left out (mobility.fcd_invalid: drop)" in said, said
    assert (
        main(["run", str(_jumper_scenario(tmp_path, EXAMPLE / "fcd.xml", "clean")), "--out", str(out), "--quiet"]) == 0
    )
    runs = {p.name.split("-")[0]: RunDir(p, create=False) for p in out.iterdir()}
    fcd = runs["dropped"].manifest()["mobility"]["fcd"]
    assert list(fcd["dropped"]) == ["jumper"] and "moves 5,000 m" in fcd["dropped"]["jumper"]
    assert fcd["rules"] == {"max_speed": 83.34, "bounds": None, "geo": False, "invalid": "drop"}
    fields = ("index", "kind", "request_time", "removed", "added", "left", "joined")
    dropped, plain = (list(runs[k].records()) for k in ("dropped", "clean"))
    assert len(plain) > 20 and [{k: r.get(k) for k in fields} for r in dropped] == [
        {k: r.get(k) for k in fields} for r in plain
    ]
