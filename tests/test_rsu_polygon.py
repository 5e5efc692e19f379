"""RSUs placed in a region given as a polygon (``mobility.rsus.polygon``)."""

from __future__ import annotations

import pytest

from mobility.rsu import RsuConfig, in_polygon, place_rsus, polygon_area, polygon_centroid
from vmc_sim.scenario.config import ConfigError
from vmc_sim.scenario.schema import load_scenario

# an L along the bottom and the right of the 4 x 4 city (junctions every 200 m, 0-600 m): concave,
# so its bbox holds the central junctions the polygon leaves out
TINY = dict(
    junctions_x=4, junctions_y=4, spacing=200.0, lanes=1, period=2.0, duration=300.0, min_distance=300.0, seed=5
)
L_SHAPE = [[-10, -10], [610, -10], [610, 610], [500, 610], [500, 100], [-10, 100]]


def test_point_in_polygon_counts_the_boundary_and_respects_concavity():
    assert in_polygon(600, 600, L_SHAPE) and in_polygon(0, 0, L_SHAPE) and in_polygon(550, 300, L_SHAPE)
    assert not in_polygon(200, 200, L_SHAPE) and not in_polygon(400, 400, L_SHAPE)
    assert in_polygon(500, 300, L_SHAPE) and in_polygon(-10, 50, L_SHAPE)  # on an edge
    assert not in_polygon(700, 50, L_SHAPE)
    square = [[0, 0], [2, 0], [2, 2], [0, 2]]
    assert polygon_area(square) == 4.0 and polygon_centroid(square) == (1.0, 1.0)


@pytest.mark.parametrize(
    "polygon",
    [[[0, 0], [1, 1]], [[0, 0], [1, 1], [2, 2]], [[0, 0], [1, "a"], [2, 0]], "centre"],
    ids=["two-vertices", "on-one-line", "bad-vertex", "not-a-list"],
)
def test_a_degenerate_polygon_is_refused_naming_the_key(polygon):
    with pytest.raises(ValueError, match=r"mobility\.rsus\.polygon"):
        RsuConfig(polygon=polygon)
    with pytest.raises(ConfigError, match=r"mobility\.rsus\.polygon"):
        load_scenario({"mobility": {"rsus": {"placement": "auto", "polygon": polygon}}})


def test_polygon_and_region_together_are_refused():
    with pytest.raises(ValueError, match="region or mobility.rsus.polygon, not both"):
        RsuConfig(region=[0, 0, 10, 10], polygon=[[0, 0], [10, 0], [0, 10]])


def test_a_scenario_takes_a_polygon():
    sc = load_scenario({"mobility": {"rsus": {"count": 2, "polygon": L_SHAPE}}})
    assert sc.mobility.rsu_config().polygon == L_SHAPE


@pytest.mark.sumo
def test_every_rsu_is_placed_inside_the_polygon(tmp_path):
    pytest.importorskip("sumolib")
    from mobility.city import CityConfig, build_city

    city = build_city(CityConfig(**TINY, cache_dir=str(tmp_path)))
    rsus = place_rsus(RsuConfig(count=4, radius=50.0, polygon=L_SHAPE), city.net_file, cache_dir=str(tmp_path))
    assert len(rsus) == 4 and all(in_polygon(r.x, r.y, L_SHAPE) for r in rsus)
    assert not {r.junction for r in rsus} & {"B1", "B2", "C1", "C2"}  # the central junctions are outside it
    bbox = place_rsus(RsuConfig(count=1, radius=50.0, central_fraction=1.0), city.net_file, cache_dir=str(tmp_path))
    assert bbox[0].junction in {"B1", "B2", "C1", "C2"}  # what the box alone would have picked
    with pytest.raises(ValueError, match=r"rsu.count=9 RSUs do not fit in mobility\.rsus\.polygon"):
        place_rsus(RsuConfig(count=9, radius=50.0, polygon=L_SHAPE), city.net_file, cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"mobility\.rsus\.polygon .* contains no junction"):
        place_rsus(RsuConfig(polygon=[[250, 250], [350, 250], [300, 350]]), city.net_file, cache_dir=str(tmp_path))
