"""LuST left-turn bays: which edges of which ways get one, the netconvert patch written for them, its
settings in the network's cache key and manifest, and the bays in the network built from the small
OSM clip (``tests/data/lust_clip``, which holds part of way -32710)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mobility.lust.config import TURN_BAY_WAYS, LustConfig
from mobility.lust.turn_bays import BAY_SUFFIX, TurnBay, way_matches, write_turn_bays

CLIP = Path(__file__).parent / "data" / "lust_clip"


def test_edges_match_their_way_in_both_directions():
    assert way_matches("-30314#6", ["-30314"]) and way_matches("--30314#6", ["-30314"])
    assert way_matches("-32710#8-AddedOffRampEdge", ["-32710"])
    assert not way_matches("--303140#1", ["-30314"]) and not way_matches("-3031#4", ["-30314"])
    assert way_matches("anything", None)


def test_patch_splits_each_edge_before_its_end_and_adds_one_lane(tmp_path):
    path = write_turn_bays(
        [TurnBay("--30314#6", 3, 290.0, 40.0), TurnBay("-32710#7", 4, 37.5, 27.5)], tmp_path / "bays.edg.xml"
    )
    edges = ET.parse(path).getroot().findall("edge")
    assert [e.get("id") for e in edges] == ["--30314#6", "-32710#7"]
    splits = [e.find("split").attrib for e in edges]
    assert splits[0] == {"pos": "-40", "lanes": "0 1 2 3", "idBefore": "--30314#6", "idAfter": "--30314#6" + BAY_SUFFIX}
    assert splits[1]["pos"] == "-27.5" and splits[1]["lanes"] == "0 1 2 3 4"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"turn_bays": "yes"}, "lust.turn_bays"),
        ({"turn_bay_ways": []}, "lust.turn_bay_ways"),
        ({"turn_bay_ways": [-30314]}, "lust.turn_bay_ways"),
        ({"turn_bay_length": 5}, "lust.turn_bay_length"),
        ({"turn_bay_min_lanes": 1}, "lust.turn_bay_min_lanes"),
        ({"turn_bay_junctions": ["roundabout"]}, "lust.turn_bay_junctions"),
        ({"turn_bay_junctions": []}, "lust.turn_bay_junctions"),
    ],
)
def test_turn_bay_settings_are_checked(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LustConfig(**kwargs)


def test_turn_bays_are_off_by_default_and_aim_at_the_teleport_corridor():
    cfg = LustConfig()
    assert cfg.turn_bays is False and cfg.time_to_impatience is None and cfg.left_green_time is None
    assert cfg.turn_bay_ways == list(TURN_BAY_WAYS) == ["-30314", "-32710"]
    assert LustConfig(turn_bay_ways=None).turn_bay_ways is None


@pytest.mark.sumo
def test_clip_network_gets_bays_on_the_corridor_only(tmp_path):
    pytest.importorskip("sumolib")
    import sumolib

    from mobility.lust.network import TURN_BAY_FILE, build_lust_network

    plain_file, plain = build_lust_network(
        LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_lefts=False, turn_bays=False)
    )
    net_file, manifest = build_lust_network(
        LustConfig(source_dir=str(CLIP), cache_dir=str(tmp_path), dual_lefts=False, turn_bays=True)
    )
    assert net_file.parent != plain_file.parent and "turn_bays" not in plain["params"]
    assert manifest["params"]["turn_bays"] == {
        "ways": ["-30314", "-32710"],
        "length": 40.0,
        "min_lanes": 3,
        "junctions": LustConfig().turn_bay_junctions,
    }
    bays = manifest["network"]["turn_bays"]
    patch = net_file.parent / TURN_BAY_FILE
    assert bays["file"] == TURN_BAY_FILE and patch.is_file() and bays["edges"] > 0
    assert manifest["netconvert"][-2:] == ["--edge-files", TURN_BAY_FILE]
    patched = [e.get("id") for e in ET.parse(patch).getroot().findall("edge")]
    assert len(patched) == bays["edges"] and all(way_matches(e, ["-32710"]) for e in patched)

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    old = sumolib.net.readNet(str(plain_file), withInternal=False)
    for eid in patched:
        bay = net.getEdge(eid + BAY_SUFFIX)
        assert bay.getLaneNumber() == old.getEdge(eid).getLaneNumber() + 1
        left = {c.getDirection() for c in bay.getLanes()[-1].getOutgoing()}
        assert left & {"l", "L"} and "s" not in left  # the bay turns, the lanes beside it go straight
        assert all("s" in {c.getDirection() for c in lane.getOutgoing()} for lane in bay.getLanes()[1:-1])
    others = [e for e in net.getEdges() if e.getID().endswith(BAY_SUFFIX) and not way_matches(e.getID(), ["-32710"])]
    assert others == []
    assert len(net.getEdges()) == len(old.getEdges()) + bays["edges"]


@pytest.mark.sumo
def test_bays_can_be_kept_to_junctions_of_some_types(tmp_path):
    pytest.importorskip("sumolib")
    import sumolib

    from mobility.lust.network import build_lust_network

    kinds = {}
    for junctions in (None, ["priority"]):
        net_file, manifest = build_lust_network(
            LustConfig(
                source_dir=str(CLIP),
                cache_dir=str(tmp_path),
                dual_lefts=False,
                turn_bays=True,
                turn_bay_ways=None,
                turn_bay_junctions=junctions,
            )
        )
        assert manifest["params"]["turn_bays"]["junctions"] == junctions
        net = sumolib.net.readNet(str(net_file), withInternal=False)
        kinds[str(junctions)] = [e.getToNode().getType() for e in net.getEdges() if e.getID().endswith(BAY_SUFFIX)]
    assert {"priority", "traffic_light"} <= set(kinds["None"])
    assert set(kinds["['priority']"]) == {"priority"} and len(kinds["['priority']"]) < len(kinds["None"])


def test_time_to_impatience_reaches_the_run_settings():
    base = LustConfig(time_to_impatience=None).run_settings()
    assert "--time-to-impatience" not in base
    args = LustConfig(time_to_impatience=30).run_settings()
    assert args[: len(base)] == base and args[len(base) :] == ["--time-to-impatience", "30"]
    assert LustConfig(time_to_impatience=30, sumo_options={"time-to-impatience": 60}).run_settings()[-2:] == [
        "--time-to-impatience",
        "60",
    ]
    assert (
        "--time-to-impatience"
        not in LustConfig(time_to_impatience=30, sumo_options={"time-to-impatience": None}).run_settings()
    )
    assert LustConfig(time_to_impatience=30).run_settings(["--time-to-impatience", "90"])[-2:] == [
        "--time-to-impatience",
        "90",
    ]
    with pytest.raises(ValueError, match="lust.time_to_impatience"):
        LustConfig(time_to_impatience=0)


def test_left_green_time_reaches_netconvert():
    from mobility.lust.network import NETCONVERT_OPTIONS, netconvert_options

    assert "--tls.left-green.time" not in netconvert_options(LustConfig(left_green_time=None))
    opts = netconvert_options(LustConfig(left_green_time=0))
    assert opts[: len(NETCONVERT_OPTIONS)] == list(NETCONVERT_OPTIONS) and opts[-2:] == ["--tls.left-green.time", "0"]
    assert netconvert_options(LustConfig(left_green_time=0, netconvert_args=["--tls.left-green.time", "4"]))[-1] == "4"
    with pytest.raises(ValueError, match="lust.left_green_time"):
        LustConfig(left_green_time=-1)


@pytest.mark.sumo
def test_bays_without_left_phases_turn_in_the_main_green(tmp_path):
    pytest.importorskip("sumolib")
    import sumolib

    from mobility.lust.network import build_lust_network

    greens = {}
    for left_green in (None, 0):
        net_file, manifest = build_lust_network(
            LustConfig(
                source_dir=str(CLIP),
                cache_dir=str(tmp_path),
                dual_lefts=False,
                turn_bays=True,
                turn_bay_junctions=None,
                left_green_time=left_green,
            )
        )
        net = sumolib.net.readNet(str(net_file), withPrograms=True)
        greens[left_green] = sorted(
            {
                int(p.duration)
                for t in net.getTrafficLights()
                for prog in t.getPrograms().values()
                for p in prog.getPhases()
                if "y" not in p.state
            }
        )
    assert 6 in greens[None] and 6 not in greens[0]  # netconvert's 6-s protected left phases are gone
