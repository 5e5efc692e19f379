"""The city's radio: each link's state (LOS, NLOSv, NLOS) decided at every update, with the
standard's probabilities where a table decides and by geometry where buildings or vehicles do,
kept consistent while the vehicle moves; the blockage loss of NLOSv; shadowing per state; and
RSUs that share the air taking turns."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import simpy

from mobility.buildings import Buildings, Footprint
from vmc_sim.radio.air import carrier_sense_range_m, media
from vmc_sim.radio.channel import RsuChannel
from vmc_sim.radio.link_budget import ChannelConfig, path_loss_db, rate_bps
from vmc_sim.radio.link_state import LinkState
from vmc_sim.radio.link_states import (
    LINK_STATES,
    Link,
    StateMemory,
    blockage_loss_db,
    blocker_height,
    p_los_umi,
    p_los_v2v_highway,
    p_los_v2v_urban,
)

MB = 1_000_000


def link(d: float, moved: float | None = None, vehicle: str = "v") -> Link:
    return Link((0.0, 0.0), (d, 0.0), 5.0, 1.5, moved, vehicle)


class Around:
    """Surroundings for a test: fixed buildings and vehicles."""

    def __init__(self, buildings=None, vehicles=()) -> None:
        self.buildings, self._vehicles = buildings, list(vehicles)

    def vehicles_near(self, x, y, radius):
        return [v for v in self._vehicles if math.hypot(v[1] - x, v[2] - y) <= radius]


def test_the_tables_are_the_standard_s():
    assert p_los_v2v_urban(4) == 1.0 and p_los_v2v_urban(85) == pytest.approx(1.05 * math.exp(-0.0114 * 85))
    assert p_los_v2v_urban(85) == pytest.approx(0.398, abs=1e-3)  # most cell-edge V2V links are NLOSv
    assert p_los_v2v_highway(475) == pytest.approx(2.1013e-6 * 475**2 - 0.002 * 475 + 1.0193)
    assert p_los_v2v_highway(575) == pytest.approx(0.44) and p_los_v2v_highway(2000) == 0.0
    assert p_los_umi(18) == 1.0 and p_los_umi(100) == pytest.approx(0.18 + math.exp(-100 / 36) * 0.82)


@pytest.mark.parametrize(("name", "p"), [("tr37885_urban", p_los_v2v_urban), ("tr37885_highway", p_los_v2v_highway)])
def test_a_table_s_states_have_its_probability_at_every_distance(name, p):
    model, cfg = LINK_STATES[name], ChannelConfig(link_state_model=name)
    rng = np.random.default_rng(1)
    for d in (20.0, 85.0, 200.0, 400.0):
        n = 4000
        los = sum(model.decide(link(d), StateMemory(), None, cfg, rng)[0] is LinkState.LOS for _ in range(n))
        se = math.sqrt(p(d) * (1 - p(d)) / n) + 1e-9
        assert abs(los / n - p(d)) <= 4 * se, (d, los / n, p(d))  # 4 standard errors


def test_a_state_stays_while_the_vehicle_stands_and_decorrelates_as_it_moves():
    cfg = ChannelConfig(link_state_model="tr37885_urban")
    model, rng = LINK_STATES["tr37885_urban"], np.random.default_rng(2)
    flips_standing = flips_driving = 0
    for _ in range(300):
        mem = StateMemory()
        first = model.decide(link(120.0), mem, None, cfg, rng)[0]
        flips_standing += any(model.decide(link(120.0, 0.0), mem, None, cfg, rng)[0] is not first for _ in range(5))
        mem2 = StateMemory()
        first2 = model.decide(link(120.0), mem2, None, cfg, rng)[0]
        flips_driving += model.decide(link(120.0, 200.0), mem2, None, cfg, rng)[0] is not first2
    assert flips_standing == 0  # a vehicle that does not move keeps its link's state
    assert flips_driving > 60  # 200 m is 20 decorrelation distances: the state is drawn afresh


def test_buildings_make_a_link_nlos_by_geometry():
    block = Buildings([Footprint("b", ((40.0, -10.0), (60.0, -10.0), (60.0, 10.0), (40.0, 10.0)))])
    cfg = ChannelConfig()
    rng = np.random.default_rng(3)
    for name in ("city", "tr37885_urban", "tr38901_umi"):
        model = LINK_STATES[name]
        assert model.decide(link(100.0), StateMemory(), Around(block), cfg, rng)[0] is LinkState.NLOS
        beside = Link((0.0, 30.0), (100.0, 30.0), 5.0, 1.5, None, "v")
        assert model.decide(beside, StateMemory(), Around(block), cfg, rng)[0] is not LinkState.NLOS
    # NLOS costs the standard's NLOS loss: about 24 dB above LOS at the case study's 85 m cell edge
    urban = ChannelConfig(path_loss_model="tr37885_urban")
    gap = path_loss_db(85.0, urban, LinkState.NLOS) - path_loss_db(85.0, urban, LinkState.LOS)
    assert 23.0 < gap < 25.0


def test_a_vehicle_on_the_line_blocks_where_it_stands_above_it():
    car, truck = 1.6, 3.0
    near_client = Around(vehicles=[("c", 98.0, 0.3, car)])  # the line climbs 3.5 cm a metre: 1.57 m here
    near_rsu = Around(vehicles=[("c", 10.0, 0.3, car)])
    truck_mid = Around(vehicles=[("t", 60.0, -0.5, truck)])
    off_line = Around(vehicles=[("c", 98.0, 3.0, car)])
    ahead = Around(vehicles=[("c", 95.0, 0.0, car)])  # 5 m ahead the line is at 1.675 m, above a car
    assert blocker_height(link(100.0), near_client, 0.9) == car  # the line is still low near the vehicle
    assert blocker_height(link(100.0), near_rsu, 0.9) is None  # near the 5 m RSU it passes over a car
    assert blocker_height(link(100.0), truck_mid, 0.9) == truck  # a truck stands above it half way
    assert blocker_height(link(100.0), off_line, 0.9) is None
    assert blocker_height(link(100.0), ahead, 0.9) is None
    itself = Around(vehicles=[("v", 100.0, 0.0, car)])
    assert blocker_height(link(100.0), itself, 0.9) is None  # a vehicle never blocks its own link
    cfg = ChannelConfig()
    far_block = Buildings([Footprint("far", ((500.0, 500.0), (510.0, 500.0), (510.0, 510.0), (500.0, 510.0)))])
    city = Around(far_block, near_client._vehicles)  # a map with buildings: no building on this line
    state, height = LINK_STATES["city"].decide(link(100.0), StateMemory(), city, cfg, np.random.default_rng(0))
    assert state is LinkState.NLOSV and height == car


def test_the_blockage_loss_is_the_standard_s_log_normal():
    cfg = ChannelConfig()
    rng = np.random.default_rng(4)
    low = [blockage_loss_db(1.6, 50.0, cfg, rng) for _ in range(20000)]  # a car between the 1.5 m and 5 m antennas
    assert np.mean(low) == pytest.approx(5.0, rel=0.05) and np.std(low) == pytest.approx(4.0, rel=0.1)
    tall = [blockage_loss_db(6.0, 2000.0, cfg, rng) for _ in range(20000)]  # above both: mu = 9 + 15 log10(d) - 41
    assert np.mean(tall) == pytest.approx(9.0 + 15 * math.log10(2000.0) - 41.0, rel=0.05)
    assert np.mean([blockage_loss_db(6.0, 100.0, cfg, rng) for _ in range(20000)]) == pytest.approx(9.0, rel=0.05)
    assert blockage_loss_db(1.0, 50.0, cfg, rng) == 0.0  # below both antennas: no loss


def test_shadowing_is_on_by_default_per_state_and_redrawn_when_the_state_changes():
    cfg = ChannelConfig()
    assert cfg.link_state_model == "city" and cfg.shadowing_sigma_db is None
    ch = RsuChannel(cfg, (0.0, 0.0), rng=np.random.default_rng(5), state_rng=np.random.default_rng(6))
    rx = SimpleNamespace(vehicle="v", pos=(15.0, 0.0), extra_db=0.0, state=None)  # within 18 m: LOS
    draws = []
    for _ in range(400):
        ch.links.clear()
        ch.update_link(rx)
        draws.append(rx.extra_db)
    assert np.std(draws) == pytest.approx(3.0, rel=0.15)  # TR 37.885 urban: 3 dB in LOS
    ch.update_link(rx)
    again = rx.extra_db
    ch.update_link(rx)
    assert rx.extra_db == again  # the same place, the same shadowing


def test_rsus_within_carrier_sense_range_share_one_medium():
    cfg = ChannelConfig()
    reach = carrier_sense_range_m(cfg)
    assert 1500 < reach < 2500  # 23 dBm heard at -85 dBm over TR 37.885 urban LOS
    rsu = lambda i, x: SimpleNamespace(id=i, x=x, y=0.0, radius=85.0)  # noqa: E731
    near = media([rsu("a", 0.0), rsu("b", 200.0), rsu("far", 200.0 + 170.0 + reach + 10.0)], cfg)
    assert near["a"] is near["b"] and near["far"] is not near["a"]
    apart = media([rsu("a", 0.0), rsu("b", 200.0)], ChannelConfig(rsu_channels={"b": 1}))
    assert apart["a"] is not apart["b"]  # another channel never shares the air
    alone = media([rsu("a", 0.0), rsu("b", 200.0)], ChannelConfig(shared_air=False))
    assert alone["a"] is not alone["b"]


@pytest.mark.parametrize("shared", [True, False])
def test_uploads_at_two_rsus_take_turns_on_shared_air(shared):
    cfg = ChannelConfig(path_loss_model="tr37885_urban_los", shared_air=shared)
    rsus = [SimpleNamespace(id=i, x=x, y=0.0, radius=85.0) for i, x in (("a", 0.0), ("b", 200.0))]
    air = media(rsus, cfg)
    env = simpy.Environment()
    channels = {r.id: RsuChannel(cfg, (r.x, r.y), rsu_id=r.id, env=env, medium=air[r.id]) for r in rsus}
    where = {"va": (20.0, 0.0), "vb": (220.0, 0.0)}
    pa = channels["a"].transfer(env, "va", 4 * MB, "uplink", where.get, lambda v: True)
    pb = channels["b"].transfer(env, "vb", 4 * MB, "uplink", where.get, lambda v: True)
    env.run()
    alone = 4 * MB * 8 / rate_bps(20.0, cfg.bandwidth_hz, "uplink", cfg)
    ends = (pa.value.end, pb.value.end)
    if shared:
        assert all(e > 1.8 * alone for e in ends)  # half the air each (and two stations contending)
    else:
        assert ends == pytest.approx((alone, alone), rel=1e-9)


def test_the_run_summary_names_the_radio_and_its_stand_in(tmp_path):
    from vmc_sim import load_scenario, run_scenario
    from vmc_sim.rundir.summary import radio_lines

    sc = load_scenario({"duration": 150, "federated": {"train": {"epochs": 2}}, "coordinator": {"warmup": 30}})
    run = run_scenario(sc, out=tmp_path / "with", progress=False, say=lambda s: None)
    radio = run.manifest()["summary"]["radio"]
    assert radio["link_state_model"] == "city" and radio["buildings"] > 0 and radio["stand_in"] is None
    assert "NLOS by" in radio_lines(radio)[0]
    bare = load_scenario({**sc.model_dump(mode="json"), "mobility": {"city": {"building_setback": None}}})
    radio = run_scenario(bare, out=tmp_path / "without", progress=False, say=lambda s: None).manifest()["summary"][
        "radio"
    ]
    assert radio["buildings"] is None and "UMi" in radio["stand_in"]
    assert "stood in" in radio_lines(radio)[0]
    assert sum(next(iter(radio["state_share"].values())).values()) == pytest.approx(1.0)


def test_the_obstacle_model_prices_walls_and_depth_instead_of_the_nlos_formula():
    block = Buildings([Footprint("b", ((40.0, -10.0), (60.0, -10.0), (60.0, 10.0), (40.0, 10.0)))])
    rx = SimpleNamespace(vehicle="v", pos=(100.0, 0.0), extra_db=0.0, state=None, vel=None)
    out = {}
    for loss in ("nlos", "obstacle"):
        cfg = ChannelConfig(building_loss=loss, shadowing_sigma_db=0.0)
        ch = RsuChannel(cfg, (0.0, 0.0), state_rng=np.random.default_rng(0), around=Around(block))
        ch.update_link(rx)
        assert rx.state is LinkState.NLOS
        flow = SimpleNamespace(direction="uplink")
        out[loss] = (rx.extra_db, ch.rx_rate(flow, rx, cfg.bandwidth_hz, 0.0))
    assert out["nlos"][0] == 0.0 and out["obstacle"][0] == pytest.approx(2 * 9.0 + 20.0 * 0.4)  # two walls, 20 m
    los_rate = rate_bps(100.0, 10e6, "uplink", ChannelConfig(), 26.0, LinkState.LOS)
    assert out["obstacle"][1] == pytest.approx(los_rate)
