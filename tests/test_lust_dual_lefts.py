"""LuST second left-turn lanes: the connection patch, its settings (checked, in the network's cache key
and manifest), and the lanes it adds in the network built from the small OSM clip
(``tests/data/lust_clip``, which holds light approaches of way -32710)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mobility.lust.config import TURN_BAY_WAYS, LustConfig
from mobility.lust.dual_lefts import DualLeft, write_dual_lefts
from mobility.lust.turn_bays import LEFT

CLIP = Path(__file__).parent / "data" / "lust_clip"


def test_patch_repeats_the_approach_connections_and_adds_one_left_turn(tmp_path):
    a = DualLeft(
        "--30314#5",
        ((0, "--30314#4", 0), (1, "--30314#4", 1), (2, "--30314#4", 2), (2, "--32710#6", 2)),
        (1, "--32710#6", 1),
    )
    root = ET.parse(write_dual_lefts([a], tmp_path / "p.con.xml")).getroot()
    got = [
        (c.get("from"), int(c.get("fromLane")), c.get("to"), int(c.get("toLane"))) for c in root.findall("connection")
    ]
    assert got == [("--30314#5", *c) for c in (*a.connections, a.added)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dual_lefts": 1}, "lust.dual_lefts"),
        ({"dual_left_ways": []}, "lust.dual_left_ways"),
        ({"dual_left_ways": [-30314]}, "lust.dual_left_ways"),
        ({"dual_left_min_lanes": 1}, "lust.dual_left_min_lanes"),
        ({"dual_left_min_lanes": 2.5}, "lust.dual_left_min_lanes"),
    ],
)
def test_dual_left_settings_are_checked(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LustConfig(**kwargs)


def test_second_left_lanes_are_on_by_default_at_every_way():
    cfg = LustConfig()
    assert cfg.dual_lefts is True and cfg.dual_left_ways is None and cfg.dual_left_min_lanes == 3


def _connections(net, edge_id: str) -> set[tuple[int, str, int]]:
    return {
        (lane.getIndex(), c.getTo().getID(), c.getToLane().getIndex())
        for lane in net.getEdge(edge_id).getLanes()
        for c in lane.getOutgoing()
    }


@pytest.mark.sumo
def test_clip_network_gets_a_second_left_lane_where_the_rule_says(tmp_path):
    pytest.importorskip("sumolib")
    import sumolib

    from mobility.lust.network import DUAL_LEFT_FILE, build_lust_network

    plain_file, plain = build_lust_network(LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_lefts=False))
    net_file, manifest = build_lust_network(LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path)))
    assert net_file.parent != plain_file.parent and "dual_lefts" not in plain["params"]
    assert manifest["params"]["dual_lefts"] == {"ways": None, "min_lanes": 3}
    info = manifest["network"]["dual_lefts"]
    assert info["file"] == DUAL_LEFT_FILE and info["approaches"] > 0
    assert manifest["netconvert"][-2:] == ["--connection-files", DUAL_LEFT_FILE]
    patched = sorted(
        {c.get("from") for c in ET.parse(net_file.parent / DUAL_LEFT_FILE).getroot().findall("connection")}
    )
    assert len(patched) == info["approaches"]

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    old = sumolib.net.readNet(str(plain_file), withInternal=False)
    assert len(net.getEdges()) == len(old.getEdges())
    for eid in patched:
        edge, n = net.getEdge(eid), net.getEdge(eid).getLaneNumber()
        assert edge.getToNode().getType() == "traffic_light" and n >= 3
        turning = [
            lane.getIndex() for lane in edge.getLanes() if any(c.getDirection() in LEFT for c in lane.getOutgoing())
        ]
        assert turning == [n - 2, n - 1]
        added = _connections(net, eid) - _connections(old, eid)
        assert len(added) == 1 and next(iter(added))[0] == n - 2
        assert _connections(old, eid) <= _connections(net, eid)
    untouched = [e.getID() for e in old.getEdges() if e.getID() not in patched]
    assert all(_connections(net, e) == _connections(old, e) for e in untouched)


@pytest.mark.sumo
def test_every_way_widens_more_approaches_than_the_corridor(tmp_path):
    pytest.importorskip("sumolib")
    from mobility.lust.network import build_lust_network

    counts = {}
    for ways in (list(TURN_BAY_WAYS), None):
        _, manifest = build_lust_network(
            LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_lefts=True, dual_left_ways=ways)
        )
        counts[str(ways)] = manifest["network"]["dual_lefts"]["approaches"]
    assert 0 < counts[str(list(TURN_BAY_WAYS))] < counts["None"]


@pytest.mark.sumo
def test_no_approach_to_widen_leaves_the_network_as_built(tmp_path):
    pytest.importorskip("sumolib")
    from mobility.lust.network import build_lust_network

    plain_file, plain = build_lust_network(LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_lefts=False))
    net_file, manifest = build_lust_network(
        LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_left_ways=["999999"])
    )
    assert manifest["network"]["dual_lefts"]["approaches"] == 0
    assert "--connection-files" not in manifest["netconvert"]
    assert manifest["network"]["sha256"] == plain["network"]["sha256"]
