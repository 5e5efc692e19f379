"""LuST: the target curve, the run settings and where they go, the cache keys, the network built
from a small OSM clip (``tests/data/lust_clip``, no 20-minute build), the bus-line mapping, the
report and the RSU sizing. The full-size figures are a benchmark (bench/RESULTS.md), not a test."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from mobility.cache import params_key
from mobility.lust import (
    LUST_RUN_SETTINGS,
    LustConfig,
    day_trip_time,
    insertion_rate,
    lust_clone,
    run_settings,
    target_running,
)
from mobility.lust.report import LustReport, make_report, parse_teleports
from mobility.sumo import SumoConfig, merge_args, options_dict

CLIP = Path(__file__).parent / "data" / "lust_clip"
LUST_OPTIONS = {
    "ignore-junction-blocker": "20",
    "time-to-teleport": "600",
    "max-depart-delay": "600",
    "routing-algorithm": "dijkstra",
    "device.rerouting.probability": "0.7",
    "device.rerouting.period": "300",
    "device.rerouting.pre-period": "300",
}
# a short window on the clip: builds and calibrates in seconds
SMALL = dict(source_dir=str(CLIP), begin=28800.0, end=28980.0, warmup=120.0, peak_running=40.0, min_distance=300.0)


def test_target_curve_is_scaled_to_the_peak_and_periodic_enough():
    assert target_running(8 * 3600) == pytest.approx(4150.0)  # LuST's published value
    assert target_running(8 * 3600, peak_running=3000) == pytest.approx(3000.0)
    day = target_running(np.arange(0, 86400, 60.0))
    assert day.max() < 4300 and day.min() >= 0
    assert target_running(3 * 3600) < 400 < target_running(18.5 * 3600) / 8


def test_day_trip_time_is_littles_law_for_287000_vehicles():
    t = day_trip_time()
    assert t == pytest.approx(551, abs=2)  # LuST's curve (4,150 at 08:00) over its 287,000 vehicles
    assert day_trip_time(4000.0) == pytest.approx(531, abs=2)
    assert LustConfig().target_trip_time == pytest.approx(t)
    assert LustConfig(peak_running=40).target_trip_time == pytest.approx(t)  # independent of the peak
    assert LustConfig(trip_time=470).target_trip_time == 470


def test_insertion_rate_inverts_the_running_curve():
    """Integrating dN/dt = lambda - N/tau from the curve's value reproduces the curve."""
    tau, dt = 500.0, 5.0
    t = np.arange(6 * 3600, 10 * 3600, dt)
    lam = insertion_rate(t, tau, 4000.0)
    n = target_running(t[0], 4000.0)
    for k in range(1, len(t)):
        n += (lam[k - 1] - n / tau) * dt
    assert n == pytest.approx(target_running(t[-1], 4000.0), rel=0.03)
    assert (lam >= 0).all()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"begin": 100, "end": 50}, "lust.end"),
        ({"delay_factor": 0}, "lust.delay_factor"),
        ({"osm_file": "/nonexistent/lust.osm.gz"}, "lust.osm_file"),
        ({"seed": 1.5}, "lust.seed"),
        ({"trip_time": -1}, "lust.trip_time"),
        ({"sumo_options": {"x": [1]}}, "lust.sumo_options.x"),
        ({"buses": "yes"}, "lust.buses"),
        ({"netconvert_args": "--x"}, "lust.netconvert_args"),
    ],
)
def test_lust_config_errors_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LustConfig(**kwargs).resolve_osm()


def test_default_window_is_the_morning_rush():
    cfg = LustConfig()
    assert (cfg.begin, cfg.end, cfg.demand_begin) == (7 * 3600, 9 * 3600, 6.5 * 3600)


# --- run settings -----------------------------------------------------------------------------


def test_lust_run_settings_are_lusts_and_overridable():
    assert LUST_RUN_SETTINGS == LUST_OPTIONS
    assert options_dict(run_settings()) == LUST_OPTIONS
    over = options_dict(
        run_settings(
            {"time-to-teleport": 300, "device.rerouting.probability": None, "--collision.check-junctions": True}
        )
    )
    assert over["time-to-teleport"] == "300" and "device.rerouting.probability" not in over
    assert "collision.check-junctions" in over and over["collision.check-junctions"] is None
    # a scenario's extra args and time_to_teleport come last and win
    args = run_settings({"time-to-teleport": 300}, ["--time-to-teleport", "100", "--lateral-resolution", "0.8"], 50)
    assert options_dict(args)["time-to-teleport"] == "50" and options_dict(args)["lateral-resolution"] == "0.8"
    assert args.count("--time-to-teleport") == 1


def test_merge_args_replaces_instead_of_repeating():
    assert merge_args(["--a", "1", "-n", "x.net.xml", "--flag"], ["--a", "2", "--net-file", "y.net.xml"]) == [
        "--a",
        "2",
        "--net-file",
        "y.net.xml",
        "--flag",
    ]
    with pytest.raises(ValueError, match="not an option"):
        merge_args(["600"])
    cfg = SumoConfig(
        net_file="n.xml", time_to_teleport=300, extra_args=["--time-to-teleport", "600", "--no-warnings", "false"]
    )
    args = cfg.arguments()
    assert args.count("--time-to-teleport") == 1 and options_dict(args)["time-to-teleport"] == "600"
    assert options_dict(args)["no-warnings"] == "false"  # SUMO refuses an option given twice


def test_cache_keys_format_numbers_stably():
    assert params_key({"begin": 27000.0, "p": 0.7}) == params_key({"begin": 27000, "p": 0.70000000000001})
    assert params_key({"args": ["--t", "600.0"]}) == params_key({"args": ["--t", "600"]})
    assert params_key({"begin": 27000}) != params_key({"begin": 27001})
    assert params_key({"flag": True}) != params_key({"flag": 1})


def test_clone_is_used_as_is(tmp_path):
    with pytest.raises(ValueError, match="lust.net.xml"):
        lust_clone(tmp_path)
    (tmp_path / "lust.net.xml").write_text("<net/>")
    (tmp_path / "dua.static.sumocfg").write_text("<configuration/>")
    cfg = lust_clone(tmp_path).sumo_config(backend="traci", end=100)
    assert cfg.config_file == str(tmp_path / "dua.static.sumocfg") and cfg.net_file is None
    assert cfg.route_files == [] and cfg.backend == "traci"


def test_lust_spec_from_plain_data(tmp_path):
    from mobility.lust import lust_begin, lust_files, sumo_inputs

    (tmp_path / "lust.net.xml").write_text("<net/>")
    (tmp_path / "dua.static.sumocfg").write_text("<configuration/>")
    assert sumo_inputs({"clone_dir": str(tmp_path)}) == {"config_file": str(tmp_path / "dua.static.sumocfg")}
    assert lust_begin({"clone_dir": str(tmp_path)}) is None
    assert lust_begin({"begin": 28800, "end": 30000, "warmup": 600}) == 28200
    with pytest.raises(ValueError, match=r"mobility\.lust\.peak is not a known field"):
        lust_files({"peak": 3})
    with pytest.raises(ValueError, match="cannot be combined with clone_dir"):
        lust_files({"clone_dir": str(tmp_path), "seed": 3})


# --- report pieces (no SUMO) ------------------------------------------------------------------


def test_teleports_are_counted_by_cause_within_the_window(tmp_path):
    log = tmp_path / "w.log"
    log.write_text(
        "Warning: Teleporting vehicle 'a'; waited too long (jam), lane='e1_0', time=25300.00.\n"
        "Warning: Teleporting vehicle 'b'; waited too long (yield), lane='e1_0', time=25400.00.\n"
        "Warning: Vehicle 'c' performs emergency braking.\n"
        "Warning: Teleporting vehicle 'd'; waited too long (wrong lane), lane='e2_1', time=26000.00.\n"
        "Warning: Teleporting vehicle 'e'; collision with vehicle 'f', lane='e3_0', gap=-1.00, time=26100.00, stage=move.\n"
        "Warning: Teleporting vehicle 'g'; waited too long (jam), lane='e1_0', time=20000.00.\n"
    )
    t = parse_teleports(log, 25200, 32400)
    assert t["total"] == 4 and t["by_cause"] == {"collision": 1, "jam": 1, "wrong lane": 1, "yield": 1}
    assert t["top_lanes"]["e1_0"] == 2
    assert parse_teleports(tmp_path / "missing.log")["total"] == 0


def test_report_targets_and_errors():
    class Rec:
        peak_running = 4150.0
        inserted = {420: 25000, 480: 26000}  # per minute of the day
        trips = [(7.5 * 3600, 500.0), (8.5 * 3600, 560.0)]
        samples = [
            {
                "time": t,
                "running": int(target_running(t) * 1.02),
                "target": float(target_running(t)),
                "mean_speed": 11.0,
                "halted_share": 0.15,
            }
            for t in np.arange(7 * 3600, 9 * 3600 + 1, 60.0)
        ]

    rep = make_report(Rec(), 7 * 3600, 9 * 3600, {"total": 12, "by_cause": {"jam": 12}, "top_lanes": {}})
    assert rep.mean_relative_error == pytest.approx(0.02, abs=0.002)
    assert rep.inserted == 51000 and rep.inserted_per_hour == {"07:00": 25000, "08:00": 26000}
    assert rep.mean_trip_time == pytest.approx(530.0)
    met = {t["name"]: t["met"] for t in rep.targets()}
    assert met == {
        "running at 08:00": True,
        "mean speed at 08:00 (m/s)": True,
        "teleports 07:00-09:00": True,
        "mean trip time (s)": True,
    }
    assert "NOT met" not in rep.summary()
    back = LustReport(
        **{k: v for k, v in json.loads(json.dumps(rep.to_dict())).items() if k in LustReport.__dataclass_fields__}
    )
    assert back.summary() == rep.summary()


def test_report_counts_insertions_inside_any_window_and_scales_the_running_target():
    class Rec:
        peak_running = 150.0
        inserted = {m: 10 for m in range(460, 500)}  # 07:40-08:19, ten a minute
        trips = [(8 * 3600, 300.0)]
        samples = [
            {
                "time": t,
                "running": int(target_running(t, 150.0)),
                "target": float(target_running(t, 150.0)),
                "mean_speed": 12.0,
                "halted_share": 0.1,
            }
            for t in np.arange(7.5 * 3600, 8.5 * 3600 + 1, 60.0)
        ]

    rep = make_report(Rec(), 7 * 3600 + 50 * 60, 8 * 3600 + 10 * 60, {"total": 0, "by_cause": {}, "top_lanes": {}})
    assert rep.inserted_per_hour == {"07:50": 100, "08:00": 100} and rep.inserted == 200
    running = next(t for t in rep.targets() if t["name"] == "running at 08:00")
    assert running["met"] and running["target"].startswith("145-173 (LuST's 4,000-4,800 at a peak of 150)")


def test_rsu_fit_prefers_where_vehicles_stay(monkeypatch, tmp_path):
    """Twelve vehicles queue by junction a; elsewhere traffic passes (new vehicles every minute).
    Both a short radius at a and a wide one at b hold 12; a's requests are far fewer."""
    from mobility.lust import rsu_fit

    class Node:
        def __init__(self, i, x, y):
            self.i, self.xy = i, (x, y)

        def getID(self):
            return self.i

        def getType(self):
            return "priority"

        def getCoord(self):
            return self.xy

    class Net:
        def getNodes(self):
            return [Node("a", 300.0, 300.0), Node("b", 700.0, 700.0)]

    monkeypatch.setattr("mobility.rsu._read_net", lambda f: Net())
    monkeypatch.setattr("mobility.rsu.central_region", lambda f, c: (0, 0, 1000, 1000))
    monkeypatch.setattr("mobility.rsu.junction_centrality", lambda *a, **k: {"a": 0.1, "b": 0.9})
    rng = np.random.default_rng(0)
    queue = [(300.0 + 20 * math.cos(k), 300.0 + 20 * math.sin(k)) for k in range(12)]
    flows = {m: rng.uniform(0, 1000, size=(300, 2)) for m in range(20)}
    positions = {}
    for t in np.arange(28700.0, 29420.0, 1.0):
        m = int(t // 60) % 20
        ids = [f"q{k}" for k in range(12)] + [f"f{m}_{i}" for i in range(300)]
        positions[float(t)] = (ids, np.vstack([np.array(queue), flows[m]]))
    path = rsu_fit.save_positions(tmp_path / "p.npz", positions)
    loaded = rsu_fit.load_positions(path)
    assert loaded.keys() == positions.keys() and loaded[28800.0][0] == positions[28800.0][0]
    best = rsu_fit.fit_rsu("net.xml", loaded, radii=range(20, 200, 5))
    assert best["junction"] == "a" and 10 <= best["count_at"] <= 15 and best["radius"] <= 40
    assert best["requests_per_minute"] < 5 and best["horizon_s"] == pytest.approx(600.0)
    wide = [c for c in best["table"] if c["junction"] == "b"]
    assert wide and min(c["requests_per_minute"] for c in wide) > 10


# --- bus lines ----------------------------------------------------------------------------------


def test_edge_bases_and_lines():
    from mobility.lust.buses import edge_base, edge_piece, line_of

    assert edge_base("--31648#5") == "--31648" and edge_piece("--31648#5") == 5
    assert edge_base("-31616#10-AddedOnRampEdge") == "-31616" and edge_piece("-32278") is None
    assert line_of("AVL---_CN_1_0") == "AVL---_CN_1"


@pytest.fixture(scope="module")
def clip_net(tmp_path_factory):
    pytest.importorskip("sumolib")
    from mobility.lust.network import build_lust_network

    cache = tmp_path_factory.mktemp("lust-clip-cache")
    net_file, manifest = build_lust_network(LustConfig(source_dir=str(CLIP), cache_dir=str(cache)))
    return net_file, manifest, cache


def _lust_style(route: list, net) -> list[str]:
    """The clip route's edges written as LuST writes them: each way split into more pieces."""
    from mobility.lust.buses import edge_base

    out = []
    for e in route:
        base = edge_base(e)
        for k in (3, 4):  # two pieces per rebuilt edge, suffixes that do not exist in the rebuild
            out.append(f"{base}#{k}")
    return out


@pytest.mark.sumo
def test_bus_lines_are_placed_by_way_id(clip_net, tmp_path):
    import sumolib

    from mobility.lust.buses import BusNetwork, edge_base, place_bus_lines

    net_file, _, _ = clip_net
    net = sumolib.net.readNet(str(net_file))
    bn = BusNetwork(net)
    # a route over five different ways, each a single rebuilt edge of its way
    single = {b for b, es in bn.by_base.items() if len(es) == 1}
    route = None
    for start in sorted(e.getID() for e in net.getEdges() if edge_base(e.getID()) in single):
        path = [net.getEdge(start)]
        while len(path) < 5:
            nxt = [
                o
                for o in bn.successors(path[-1])
                if edge_base(o.getID()) in single and edge_base(o.getID()) not in {edge_base(p.getID()) for p in path}
            ]
            if not nxt:
                break
            path.append(sorted(nxt, key=lambda e: e.getID())[0])
        if len(path) == 5:
            route = [e.getID() for e in path]
            break
    assert route is not None
    lust_edges = _lust_style(route, net)
    stop_edge = lust_edges[4]  # piece 3 of the third way: on the route, id unknown to the rebuild
    (tmp_path / "bl.rou.xml").write_text(
        "<routes>\n"
        f'  <vehicle id="L1_0" type="bus" depart="28800.00"><route edges="{" ".join(lust_edges)}"/>'
        '<stop busStop="s1" duration="20"/><stop busStop="gone" duration="20"/></vehicle>\n'
        f'  <vehicle id="L1_1" type="bus" depart="40000.00"><route edges="{" ".join(lust_edges)}"/></vehicle>\n'
        f'  <vehicle id="L2_0" type="bus" depart="28900.00"><route edges="-1#0 -2#0"/></vehicle>\n'
        "</routes>\n"
    )
    (tmp_path / "bs.add.xml").write_text(
        f'<additional><busStop id="s1" lane="{stop_edge}_0" startPos="5" endPos="15"/>'
        '<busStop id="gone" lane="-999999#0_0" startPos="5" endPos="15"/></additional>\n'
    )
    counts = place_bus_lines(
        net,
        tmp_path / "bl.rou.xml",
        tmp_path / "bs.add.xml",
        tmp_path / "b.rou.xml",
        tmp_path / "s.add.xml",
        28000,
        30000,
    )
    assert counts["lines"] == 2 and counts["lines_placed"] == 1 and counts["vehicles_in_window"] == 2
    assert counts["vehicles_placed"] == 1 and counts["stops_placed"] == 1 and counts["stops_served"] == 1
    assert counts["vehicle_stops_kept"] == 1 and counts["vehicle_stops_dropped"] == 1
    assert counts["way_pairs_meeting"] == counts["way_pairs_checked"] == 4 and "refused" not in counts
    v = ET.parse(tmp_path / "b.rou.xml").getroot().find("vehicle")
    assert v.find("route").get("edges").split() == route
    stop = ET.parse(tmp_path / "s.add.xml").getroot().find("busStop")
    assert stop.get("lane").rsplit("_", 1)[0] == route[2]

    # ids that do not belong to this network: nothing is placed, and the counts say why
    shuffled = [f"{edge_base(e)}#0" for e in sorted(route, key=lambda e: e[::-1])]
    far = [e.getID() for e in net.getEdges() if edge_base(e.getID()) in single][::37][:6]
    (tmp_path / "bad.rou.xml").write_text(
        f'<routes><vehicle id="X_0" type="bus" depart="28800"><route edges="{" ".join(far)}"/></vehicle>'
        f'<vehicle id="Y_0" type="bus" depart="28800"><route edges="{" ".join(shuffled)}"/></vehicle></routes>\n'
    )
    bad = place_bus_lines(
        net,
        tmp_path / "bad.rou.xml",
        tmp_path / "bs.add.xml",
        tmp_path / "b2.rou.xml",
        tmp_path / "s2.add.xml",
        28000,
        30000,
    )
    assert bad["vehicles_placed"] == 0 and "do not match" in bad["refused"]


# --- the network and the calibration on the clip (SUMO) -----------------------------------------


@pytest.mark.sumo
def test_network_built_with_lusts_options_and_its_statistics(clip_net):
    import sumolib

    from mobility.lust.network import NETCONVERT_OPTIONS

    net_file, manifest, _ = clip_net
    assert manifest["netconvert"][: len(NETCONVERT_OPTIONS)] == list(NETCONVERT_OPTIONS)
    assert {"--ramps.guess", "--tls.join"} <= set(manifest["netconvert"])
    stats = manifest["network"]
    net = sumolib.net.readNet(str(net_file), withInternal=False)
    edges = net.getEdges()
    assert stats["edges"] == len(edges) and stats["nodes"] == sum(
        1 for n in net.getNodes() if n.getType() != "internal"
    )
    assert stats["length_km"] == pytest.approx(sum(e.getLength() for e in edges) / 1000, abs=0.06)
    assert stats["four_lane_edges"] == sum(1 for e in edges if e.getLaneNumber() >= 4) > 0
    assert sum(stats["edges_by_lanes"].values()) == stats["edges"]
    assert stats["traffic_lights"] == len(net.getTrafficLights()) and stats["dead_ends"] >= 0
    assert 400 <= stats["nodes"] <= 500 and 1000 <= stats["edges"] <= 1150  # the clip: 452 / 1,066 with SUMO 1.28
    ids = [e.getID() for e in edges]
    assert any("AddedOnRampEdge" in i or "AddedOffRampEdge" in i for i in ids)  # --ramps.guess
    assert any(t.getID().startswith("joinedS_") for t in net.getTrafficLights())  # --tls.join


@pytest.mark.sumo
def test_demand_cache_key_holds_the_run_settings(clip_net, monkeypatch):
    from mobility.lust import demand

    _, _, cache = clip_net
    keys = []

    def fake(kind, params, build, root=None, force=False):
        keys.append(params_key(params))
        return Path("/nonexistent"), {"run_settings": params["run_settings"]}

    monkeypatch.setattr(demand, "cached_build", fake)
    base = dict(SMALL, cache_dir=str(cache))
    demand.build_lust(LustConfig(**base))
    demand.build_lust(LustConfig(**{**base, "begin": 28800, "end": 28980}))  # ints: same key
    demand.build_lust(LustConfig(**base), extra_args=["--time-to-teleport", "600.0"])  # = the default: same key
    demand.build_lust(LustConfig(**base), extra_args=["--time-to-teleport", "300"])
    demand.build_lust(LustConfig(**base), time_to_teleport=300.0)
    demand.build_lust(LustConfig(**{**base, "sumo_options": {"device.rerouting.probability": 0.5}}))
    assert keys[0] == keys[1] == keys[2]
    assert keys[3] == keys[4] and len({keys[0], keys[3], keys[5]}) == 3


def test_minor_penalty_reaches_duarouter_and_the_rerouting_device(monkeypatch, tmp_path):
    from mobility.lust import demand

    assert "--weights.minor-penalty" not in LustConfig().run_settings()
    assert LustConfig(minor_penalty=60).run_settings()[-2:] == ["--weights.minor-penalty", "60"]
    calls = []
    monkeypatch.setattr(demand, "run_command", lambda args, what, cwd: calls.append(args))
    monkeypatch.setattr(demand, "strip_generated_header", lambda out: None)
    for penalty in (None, 60.0):
        demand.route_trips(tmp_path / "n.net.xml", tmp_path / "t.xml", tmp_path / "r.xml", None, 1, tmp_path, penalty)
    assert "--weights.minor-penalty" not in calls[0]
    assert calls[1][calls[1].index("--weights.minor-penalty") + 1] == "60"
    with pytest.raises(ValueError, match="lust.minor_penalty"):
        LustConfig(minor_penalty=-1)


@pytest.mark.sumo
def test_the_minor_penalty_is_in_the_demand_cache_key_and_the_default_key_is_unchanged(clip_net, monkeypatch):
    from mobility.lust import demand

    _, _, cache = clip_net
    keys = []

    def fake(kind, params, build, root=None, force=False):
        keys.append((params_key(params), params))
        return Path("/nonexistent"), {"run_settings": params["run_settings"]}

    monkeypatch.setattr(demand, "cached_build", fake)
    base = dict(SMALL, cache_dir=str(cache))
    demand.build_lust(LustConfig(**base))
    demand.build_lust(LustConfig(**base, minor_penalty=60))
    demand.build_lust(LustConfig(**base, minor_penalty=60, sumo_options={"weights.minor-penalty": None}))
    assert "minor_penalty" not in keys[0][1]  # a config without it keeps the key it had before the field
    assert len({k for k, _ in keys}) == 3


@pytest.mark.sumo
@pytest.mark.filterwarnings("error:.*building it again:UserWarning")  # a sound cached build is used as it is
def test_calibration_and_runs_use_the_run_settings(clip_net, monkeypatch, tmp_path):
    pytest.importorskip("libsumo")
    from mobility.lust import calibration, demand
    from mobility.lust.report import run_report

    seen = []
    real = calibration.SumoSession

    class Spy(real):
        def __init__(self, config):
            seen.append(options_dict(config.arguments()))
            super().__init__(config)

    monkeypatch.setattr(calibration, "SumoSession", Spy)
    _, _, cache = clip_net
    files = demand.build_lust(
        LustConfig(**SMALL, cache_dir=str(cache)),
        extra_args=["--time-to-teleport", "450", "--lateral-resolution", "0.8"],
    )
    assert len(seen) == 1
    want = {**LUST_OPTIONS, "time-to-teleport": "450", "lateral-resolution": "0.8"}
    assert {k: seen[0].get(k) for k in want} == want
    assert options_dict(files.metadata["run_settings"]) == want
    assert {k: options_dict(files.sumo_config().arguments()).get(k) for k in want} == want
    d = files.metadata["demand"]
    cl = d["closed_loop"]
    assert d["trips"] > 0 and d["routed"] == d["trips"] == cl["inserted"] and not cl["pool_exhausted"]
    assert cl["target_trip_time_s"] == pytest.approx(day_trip_time(), abs=0.1) and cl["aims"]
    report, rec = run_report(files, sample_every=30, density=0.5, log_dir=tmp_path)
    assert report.begin == 28800 and report.end == 28980 and report.samples and report.inserted > 0
    assert options_dict(report.extra["run_settings"])["time-to-teleport"] == "450"
    assert (tmp_path / "sumo-warnings.log").exists()
    # cached: the same settings find the same build
    assert (
        demand.build_lust(
            LustConfig(**SMALL, cache_dir=str(cache)),
            extra_args=["--time-to-teleport", "450", "--lateral-resolution", "0.8"],
        ).directory
        == files.directory
    )


@pytest.mark.sumo
def test_vmc_lust_build_and_report_commands(clip_net, tmp_path, capsys):
    pytest.importorskip("libsumo")
    from vmc_sim.cli import main

    _, _, cache = clip_net
    common = [
        "--source-dir",
        str(CLIP),
        "--begin",
        "08:00",
        "--end",
        "08:03",
        "--warmup",
        "120",
        "--peak",
        "40",
        "--cache-dir",
        str(cache),
        "--out",
        str(tmp_path),
    ]
    assert main(["lust", "build", *common]) == 0
    out = capsys.readouterr().out
    assert "network:" in out and "run settings: --ignore-junction-blocker 20" in out and "calibration run" in out
    assert (tmp_path / "build.json").is_file() and (tmp_path / "build_manifest.json").is_file()
    assert main(["lust", "report", *common]) == 0
    out = capsys.readouterr().out
    assert "running vs published curve" in out and "teleports" in out and "mean trip time" in out
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["begin"] == 28800 and rep["targets"] and (tmp_path / "report_curve.csv").is_file()
    assert not math.isnan(rep["mean_speed"])


@pytest.mark.sumo
def test_an_rsu_can_stand_at_a_named_junction(clip_net):
    import sumolib

    from mobility.rsu import RsuConfig, place_rsus

    net_file, _, _ = clip_net
    node = sorted(n.getID() for n in sumolib.net.readNet(str(net_file)).getNodes() if n.getType() != "internal")[0]
    (rsu,) = place_rsus(RsuConfig(placement="explicit", radius=60, positions=[{"id": "c", "junction": node}]), net_file)
    x, y = sumolib.net.readNet(str(net_file)).getNode(node).getCoord()[:2]
    assert (rsu.id, rsu.junction, rsu.radius) == ("c", node, 60.0) and (rsu.x, rsu.y) == pytest.approx((x, y))
    with pytest.raises(ValueError, match="not a junction"):
        place_rsus(RsuConfig(placement="explicit", positions=[{"junction": "nope"}]), net_file)
