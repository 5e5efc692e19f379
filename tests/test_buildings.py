"""Buildings that block a link (mobility.buildings, mobility.polygons): hand-made squares with
exact answers, SUMO polygon files as polyconvert writes them, blocks on a netgenerate grid, and
the index against a brute-force check and against rectangles clipped independently."""

from __future__ import annotations

import gzip
import math
import random

import pytest

from mobility.buildings import (
    SOMMER_PER_METRE_DB,
    SOMMER_PER_WALL_DB,
    Buildings,
    Crossing,
    Footprint,
    grid_blocks,
    obstacle_loss_db,
    read_poly_file,
    write_poly_file,
)
from mobility.errors import BuildingsError

SQUARE = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]


def square(x: float, y: float, side: float = 10.0) -> list[tuple[float, float]]:
    return [(x, y), (x + side, y), (x + side, y + side), (x, y + side)]


@pytest.fixture(scope="module")
def one():
    return Buildings.from_polygons([SQUARE])


@pytest.mark.parametrize(
    ("segment", "walls", "inside_m"),
    [
        ((-5, 5, 15, 5), 2, 10.0),  # straight through
        ((5, -5, 5, 15), 2, 10.0),  # vertical, straight through
        ((-5, -5, 15, 15), 2, 10 * math.sqrt(2)),  # diagonal through two corners
        ((-5, 5, 5, 5), 1, 5.0),  # ends inside: one wall
        ((2, 2, 8, 3), 0, math.hypot(6, 1)),  # both ends inside: no wall
        ((5, 5, 5, 5), 0, 0.0),  # a point inside
        ((-5, 2, 12, 9), 2, math.hypot(10, 10 * 7 / 17)),  # slanted, in at x = 0, out at x = 10
    ],
)
def test_a_segment_that_enters_is_blocked_with_exact_walls_and_length(one, segment, walls, inside_m):
    got = one.crossing(*segment)
    assert one.blocks(*segment) and got.blocked and got.buildings == 1
    assert got.walls == walls and got.inside_m == pytest.approx(inside_m, abs=1e-9)
    back = one.crossing(*segment[2:], *segment[:2])  # the same either way
    assert back.walls == walls and back.inside_m == pytest.approx(inside_m, abs=1e-9)


@pytest.mark.parametrize(
    "segment",
    [
        (-5, -1, 15, -1),  # beside, parallel
        (-5, 5, -1, 5),  # short of it
        (-5, 5, 5, -5),  # touches the corner (0, 0) only
        (-10, 10, 10, -10),  # passes through the corner (0, 0) and on
        (0, -5, 0, 15),  # along the wall x = 0
        (-5, 0, 15, 0),  # along the wall y = 0, beyond both corners
        (10, 10, 20, 20),  # from a corner outwards
        (0, 5, -10, 5),  # from a wall outwards
        (20, 20, 20, 20),  # a point outside
    ],
)
def test_a_segment_that_only_touches_or_misses_is_not_blocked(one, segment):
    assert not one.blocks(*segment)
    assert one.crossing(*segment) == Crossing(0, 0.0, 0)


def test_two_buildings_add_their_walls_and_lengths():
    b = Buildings.from_polygons([square(0, 0), square(20, 0, 5)])
    c = b.crossing(-5, 2, 30, 2)
    assert c == Crossing(4, pytest.approx(15.0), 2)
    assert obstacle_loss_db(c) == pytest.approx(4 * SOMMER_PER_WALL_DB + 15.0 * SOMMER_PER_METRE_DB)
    assert (SOMMER_PER_WALL_DB, SOMMER_PER_METRE_DB) == (9.0, 0.4)
    assert b.crossing(-5, 12, 30, 12) == Crossing(0, 0.0, 0)
    assert b.crossing(15, -5, 15, 20) == Crossing(0, 0.0, 0)  # in the gap between them
    assert b.crossing(12, 2, 22, 2) == Crossing(1, pytest.approx(2.0), 1)  # ends in the second


def test_a_concave_footprint_is_left_and_entered_again():
    u_shape = [(0, 0), (30, 0), (30, 20), (20, 20), (20, 5), (10, 5), (10, 20), (0, 20)]
    b = Buildings.from_polygons([u_shape])
    assert b.crossing(-5, 10, 35, 10) == Crossing(4, pytest.approx(20.0), 1)  # both arms, not the gap
    assert not b.blocks(15, 6, 15, 30)  # up the gap
    assert b.crossing(-5, 2, 35, 2) == Crossing(2, pytest.approx(30.0), 1)  # through the base
    assert b.inside(5, 10) and not b.inside(15, 10) and not b.inside(10, 10)  # (10, 10) is on a wall


def test_footprints_refuse_shapes_without_area():
    with pytest.raises(ValueError, match="three distinct corners"):
        Footprint("a", ((0, 0), (1, 1), (0, 0)))
    with pytest.raises(ValueError, match="no area"):
        Footprint("a", ((0, 0), (1, 1), (2, 2)))
    with pytest.raises(ValueError, match="finite"):
        Footprint("a", ((0, 0), (1, math.nan), (2, 0)))
    assert Footprint("a", ((0, 0), (4, 0), (4, 3), (0, 0))).points == ((0, 0), (4, 0), (4, 3))  # closing point dropped


# ---------------------------------------------------------------- SUMO polygon files

POLYCONVERT = """<?xml version="1.0" encoding="UTF-8"?>

<!-- generated on 2026-12-06 by Eclipse SUMO polyconvert Version 1.28.0
<polyconvertConfiguration>
    <input><osm-files value="city.osm"/><net-file value="city.net.xml"/></input>
</polyconvertConfiguration>
-->

<additional xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="http://sumo.dlr.de/xsd/additional_file.xsd">
    <location netOffset="-290460.00,-5498195.00" convBoundary="0.00,0.00,80.00,170.00" origBoundary="6.10,49.60,6.11,49.61" projParameter="+proj=utm +zone=32 +ellps=WGS84 +datum=WGS84 +units=m +no_defs"/>
    <poly id="10" type="building" color="255,230,230" fill="1" layer="-1.00" shape="0.00,0.00 70.00,0.00 70.00,50.00 0.00,50.00 0.00,0.00"/>
    <poly id="11" type="building.residential" color="255,230,230" fill="1" layer="-1.00" shape="0.00,100.00 70.00,100.00 70.00,150.00 0.00,100.00"/>
    <poly id="12" type="landuse.grass" color="194,194,130" fill="1" layer="-3.00" shape="0.00,50.00 70.00,50.00 70.00,100.00 0.00,100.00 0.00,50.00"/>
    <poly id="13" type="building:part" color="255,230,230" fill="1" layer="-1.00" shape="10.00,10.00 20.00,10.00 20.00,20.00 10.00,10.00"/>
    <poly id="14" type="amenity.school" color="237,199,199" fill="1" layer="-2.00" shape="80.00,0.00 90.00,0.00 90.00,10.00 80.00,10.00"/>
    <poi id="15" type="amenity.cafe" color="1,0,0" layer="1.00" x="75.00" y="75.00"/>
</additional>
"""


def test_a_polyconvert_file_gives_its_buildings_only(tmp_path):
    path = tmp_path / "city.poly.xml"
    path.write_text(POLYCONVERT)
    fps = read_poly_file(path)
    assert [(f.id, f.type) for f in fps] == [("10", "building"), ("11", "building.residential")]
    assert fps[0].points == ((0, 0), (70, 0), (70, 50), (0, 50)) and fps[0].area() == 3500
    zipped = tmp_path / "city.poly"  # gzip is recognised by its bytes, whatever the name
    zipped.write_bytes(gzip.compress(POLYCONVERT.encode()))
    b = Buildings.from_poly_files(path, zipped)
    assert len(b) == 4 and b.blocks(-10, 25, 100, 25) and not b.blocks(-10, 75, 100, 75)
    more = read_poly_file(path, types=("building", "amenity"))
    assert [f.id for f in more] == ["10", "11", "14"]


@pytest.mark.sumo
def test_polyconvert_output_reads_back(tmp_path):
    pytest.importorskip("sumo")
    from mobility.sumo_install import run_command, sumo_binary

    deg = 1e-4  # about 7-11 m
    nodes = [(1, 0, 0), (2, 0, 8), (3, 5, 8), (4, 5, 0), (5, 10, 0), (6, 10, 6), (7, 15, 6)]
    osm = ['<?xml version="1.0" encoding="UTF-8"?>', '<osm version="0.6">']
    osm += [f'<node id="{i}" lat="{49.6 + a * deg:.6f}" lon="{6.1 + b * deg:.6f}"/>' for i, a, b in nodes]
    for way, refs, tag in ((10, (1, 2, 3, 4, 1), "building=yes"), (11, (5, 6, 7, 5), "building=house"),
                           (12, (4, 3, 6, 5, 4), "landuse=grass")):  # fmt: skip
        k, v = tag.split("=")
        osm.append(f'<way id="{way}">' + "".join(f'<nd ref="{r}"/>' for r in refs) + f'<tag k="{k}" v="{v}"/></way>')
    (tmp_path / "t.osm").write_text("\n".join([*osm, "</osm>"]))
    typemap = sumo_binary("polyconvert").parent.parent / "data" / "typemap" / "osmPolyconvert.typ.xml"
    for extra, types in (([], {"building"}), (["--osm.keep-full-type"], {"building.yes", "building.house"})):
        out = tmp_path / "t.poly.xml"
        args = [str(sumo_binary("polyconvert")), "--osm-files", "t.osm", "--proj.utm", "--type-file", str(typemap)]
        run_command([*args, *extra, "-o", str(out)], what="polyconvert", cwd=tmp_path)
        fps = read_poly_file(out)
        assert {f.id for f in fps} == {"10", "11"} and {f.type for f in fps} == types
        x0, y0, x1, y1 = next(f for f in fps if f.id == "10").bbox()
        assert 40 < x1 - x0 < 70 and 40 < y1 - y0 < 70  # metres, not degrees
        b = Buildings(fps)
        assert b.blocks((x0 + x1) / 2, y0 - 20, (x0 + x1) / 2, y1 + 20)
        assert not b.blocks(x0 - 1, y0 - 20, x0 - 1, y1 + 20)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('<net version="1.20"><location netOffset="0,0"/></net>', r"not a SUMO polygon file \(root element <net>"),
        ("this is not XML", "not a SUMO polygon file"),
        ('<additional><poly id="b7" type="building" shape="0,0 10,0 10,x"/></additional>', "polygon 'b7': malformed shape point '10,x'"),
        ('<additional><poly id="b8" type="building" shape="0,0 10,0"/></additional>', "polygon 'b8': a footprint needs three"),
        ('<additional><poly id="b9" type="building" shape="0,0 1,1 2,2 0,0"/></additional>', "polygon 'b9': the footprint has no area"),
        ('<additional><poly id="b1" type="building"/></additional>', "polygon 'b1' has no shape"),
        ('<additional><poly type="building" shape="0,0 1,0 1,1"/></additional>', "polygon number 1 has no id"),
        ('<polygons><poly id="g" type="building" geo="1" shape="6.1,49.6 6.2,49.6 6.2,49.7"/></polygons>', "'g' is in longitude and latitude"),
    ],
)  # fmt: skip
def test_a_bad_polygon_file_is_refused_naming_file_and_polygon(tmp_path, text, message):
    path = tmp_path / "bad.poly.xml"
    path.write_text(text)
    with pytest.raises(BuildingsError, match=message) as info:
        Buildings.from_poly_files(path)
    assert str(path) in str(info.value)


def test_a_missing_file_and_other_types_with_bad_shapes(tmp_path):
    with pytest.raises(BuildingsError, match="not found"):
        read_poly_file(tmp_path / "none.poly.xml")
    path = tmp_path / "ok.poly.xml"  # a malformed polygon that is not a building is not read
    path.write_text('<additional><poly id="w" type="waterway" shape="0,0 oops"/></additional>')
    assert read_poly_file(path) == []
    assert len(Buildings([])) == 0 and not Buildings([]).blocks(0, 0, 1, 1) and Buildings([]).bounds is None


def test_written_blocks_read_back(tmp_path):
    fps = [Footprint("a&b", tuple(square(0, 0))), Footprint("c", ((0.125, 1), (3, 1), (2, 2.5)), "building.yes")]
    for name in ("b.poly.xml", "b.poly.xml.gz"):
        assert read_poly_file(write_poly_file(tmp_path / name, fps)) == fps


# ---------------------------------------------------------------- a netgenerate grid


@pytest.fixture(scope="module")
def grid_net(tmp_path_factory):
    pytest.importorskip("sumo")
    from mobility.sumo_install import run_command, sumo_binary

    out = tmp_path_factory.mktemp("grid") / "grid.net.xml"
    args = [str(sumo_binary("netgenerate")), "--grid", "--grid.number", "4", "--grid.length", "100", "-o", str(out)]
    run_command(args, what="netgenerate")
    return out


@pytest.mark.sumo
def test_grid_blocks_stand_between_the_streets(grid_net, tmp_path):
    import xml.etree.ElementTree as ET

    blocks = grid_blocks(grid_net, 10.0)
    assert len(blocks) == 9 and all(b.area() == 80 * 80 for b in blocks)
    assert blocks[0] == Footprint("block_0_0", ((10, 10), (90, 10), (90, 90), (10, 90)))
    b = Buildings.from_poly_files(write_poly_file(tmp_path / "blocks.poly.xml", blocks))
    assert b.footprints == tuple(blocks)
    lanes = [el.get("shape", "") for el in ET.parse(grid_net).getroot().iter("lane")]
    points = [tuple(map(float, p.split(","))) for shape in lanes for p in shape.split()]
    assert len(points) > 100 and not any(b.inside(x, y) for x, y in points)  # no lane runs through a block
    assert not b.blocks(100, 100, 100, 300) and not b.blocks(0, 101.6, 300, 101.6)  # along the streets
    assert b.crossing(100, 100, 300, 300) == Crossing(4, pytest.approx(2 * 80 * math.sqrt(2)), 2)  # diagonal
    assert b.crossing(100, 150, 200, 150) == Crossing(2, pytest.approx(80.0), 1)  # across one block
    with pytest.raises(ValueError, match="leaves no block"):
        grid_blocks(grid_net, 50.0)
    with pytest.raises(BuildingsError, match="not a SUMO network"):
        grid_blocks(tmp_path / "blocks.poly.xml", 10.0)


# ---------------------------------------------------------------- the index against brute force


def _random_buildings(rng: random.Random, n: int, size: float) -> list[Footprint]:
    out = []
    for k in range(n):
        cx, cy, r = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(3, 25)
        corners = rng.choice((3, 4, 4, 5, 6))
        start = rng.uniform(0, 2 * math.pi)
        angles = sorted(start + rng.uniform(0, 2 * math.pi) for _ in range(corners))
        pts = tuple((cx + r * math.cos(a), cy + r * math.sin(a)) for a in angles)
        try:
            out.append(Footprint(str(k), pts))
        except ValueError:
            continue
    return out


def _random_segments(rng: random.Random, n: int, size: float, corners: list[tuple[float, float]]):
    segs = []
    for k in range(n):
        x1, y1 = rng.uniform(-50, size + 50), rng.uniform(-50, size + 50)
        length, angle = rng.expovariate(1 / 150), rng.uniform(0, 2 * math.pi)
        x2, y2 = x1 + length * math.cos(angle), y1 + length * math.sin(angle)
        if k % 10 == 1:
            x2 = x1  # vertical
        elif k % 10 == 2:
            y2 = y1  # horizontal
        elif k % 10 == 3 and corners:
            x1, y1 = rng.choice(corners)  # from a building's corner
        segs.append((x1, y1, x2, y2))
    return segs


def test_the_index_agrees_with_brute_force_on_random_segments():
    rng = random.Random(11)
    size = 1500.0
    fps = _random_buildings(rng, 2000, size)
    indexed = Buildings(fps)
    brute = Buildings(fps, cell_m=1e7)  # one cell: every footprint is tested
    assert len(brute._grid) == 1 and len(indexed._grid) > 1000
    segs = _random_segments(rng, 2000, size, [p for fp in fps[:50] for p in fp.points])
    blocked = 0
    for seg in segs:
        fast, slow = indexed.crossing(*seg), brute.crossing(*seg)
        assert fast.walls == slow.walls and fast.buildings == slow.buildings, seg
        assert fast.inside_m == pytest.approx(slow.inside_m, abs=1e-9), seg
        assert indexed.blocks(*seg) == fast.blocked, seg
        blocked += fast.blocked
    assert 300 < blocked < 1900  # both kinds are well represented


def _clip(seg, box) -> tuple[float, float] | None:
    """The part (t0, t1) of the segment inside the open box, by Liang-Barsky; None if none."""
    x1, y1, x2, y2 = seg
    xmin, ymin, xmax, ymax = box
    lo, hi = 0.0, 1.0
    for p, q0, a, b in ((x2 - x1, x1, xmin, xmax), (y2 - y1, y1, ymin, ymax)):
        if p == 0:
            if not a < q0 < b:
                return None
            continue
        ta, tb = sorted(((a - q0) / p, (b - q0) / p))
        lo, hi = max(lo, ta), min(hi, tb)
    return (lo, hi) if hi > lo else None


def test_rectangles_agree_with_independent_clipping():
    rng = random.Random(5)
    boxes = []
    for _ in range(300):
        x, y = rng.uniform(0, 900), rng.uniform(0, 900)
        boxes.append((x, y, x + rng.uniform(5, 60), y + rng.uniform(5, 60)))
    b = Buildings.from_polygons([(a, c), (d, c), (d, e), (a, e)] for a, c, d, e in boxes)
    for seg in _random_segments(rng, 2000, 900.0, []):
        walls, inside = 0, 0.0
        length = math.hypot(seg[2] - seg[0], seg[3] - seg[1])
        for box in boxes:
            part = _clip(seg, box)
            if part:
                walls += (part[0] > 0) + (part[1] < 1)
                inside += (part[1] - part[0]) * length
        got = b.crossing(*seg)
        assert got.walls == walls and got.inside_m == pytest.approx(inside, abs=1e-9), seg
