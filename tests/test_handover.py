"""Transfers across a region of RSUs: an upload continues through the next RSU the vehicle is
attached to (the relayed part crosses the backhaul), resumes after a gap in coverage within
``resume_within_s`` (store and forward), and otherwise fails charging what it sent."""

from __future__ import annotations

import numpy as np
import simpy

from mobility.events import MobilityEvent
from vmc_sim.engine.vehicles import Vehicles
from vmc_sim.radio.channel import RsuChannel
from vmc_sim.radio.link_budget import ChannelConfig, rate_bps
from vmc_sim.radio.transfers import HandoverConfig, Links, new_timing

MB = 1_000_000


def region(env: simpy.Environment) -> dict[str, RsuChannel]:
    cfg = ChannelConfig(path_loss_model="tr37885_urban_los")  # the idealised link: handover's mechanics
    return {
        rid: RsuChannel(cfg, (x, 0.0), rsu_id=rid, env=env, rng=np.random.default_rng(0))
        for rid, x in (("rsu0", 0.0), ("rsu1", 300.0))
    }


def drive(env: simpy.Environment, vehicles: Vehicles, plan: list[tuple[float, str | None, float]]):
    """Move vehicle ``v`` along ``plan``: (time, attached RSU or None for out of coverage, x)."""
    for t, rsu, x in plan:
        yield env.timeout(t - env.now)
        vehicles.now = env.now
        if rsu is None:
            vehicles.apply([MobilityEvent(env.now, "leave", "v", "rsu1", x, 0.0, 10.0)], [])
        else:
            kind = "join" if "v" not in vehicles.covered else None
            events = [MobilityEvent(env.now, "join", "v", rsu, x, 0.0, 10.0)] if kind else []
            vehicles.apply(events, [])
            vehicles.state["v"] = (x, 0.0, 10.0, rsu)


def upload(plan, rule: HandoverConfig, nbytes: int = 40 * MB) -> tuple[bool, dict, float]:
    env = simpy.Environment()
    vehicles = Vehicles(grace=0.0)
    links = Links(env, region(env), vehicles, rule)
    timing = new_timing()
    env.process(drive(env, vehicles, plan))
    out: dict = {}

    def go():
        yield env.timeout(0.5)
        out["ok"] = yield from links.upload("v", nbytes, timing)
        out["t"] = env.now

    env.process(go())
    env.run(until=60)
    return out["ok"], timing, out["t"]


def test_an_upload_continues_through_the_next_rsu_and_crosses_the_backhaul():
    plan = [(0.0, "rsu0", 20.0), (2.0, "rsu1", 160.0), (30.0, "rsu1", 200.0)]
    ok, timing, t = upload(plan, HandoverConfig(backhaul_bps=1e8, backhaul_latency_s=0.01))
    assert ok and timing["handovers"] == 1
    assert timing["bytes_delivered"] == 40 * MB and timing["bytes_sent"] >= 40 * MB
    relayed = timing["backhaul_s"] - 0.01
    assert 0 < relayed * 1e8 / 8 < 40 * MB  # only the part received by rsu1 crosses the backhaul
    los = ChannelConfig(path_loss_model="tr37885_urban_los")
    top = rate_bps(1.0, los.bandwidth_hz, "uplink", los)
    assert t > 0.5 + 40 * MB * 8 / top  # at most the top rate on the air, plus the backhaul


def test_without_handover_the_transfer_stays_on_its_first_rsu():
    plan = [(0.0, "rsu0", 20.0), (2.0, "rsu1", 160.0), (30.0, "rsu1", 200.0)]
    ok, timing, _ = upload(plan, HandoverConfig(enabled=False))
    assert timing["handovers"] == 0 and timing["backhaul_s"] == 0.0
    assert ok  # still in the region: served from rsu0 at the rate of the longer distance


def test_a_vehicle_that_leaves_mid_upload_is_charged_what_it_sent():
    plan = [(0.0, "rsu0", 20.0), (2.0, None, 400.0)]
    ok, timing, _ = upload(plan, HandoverConfig())
    assert not ok and timing["failed"][0]["reason"] == "left_coverage"
    assert 0 < timing["bytes_sent"] < 40 * MB and timing["bytes_delivered"] == 0
    assert timing["failed_transfer_s"] == timing["transfer_s"] > 0


def test_store_and_forward_resumes_within_the_deadline_only():
    plan = [(0.0, "rsu0", 20.0), (2.0, None, 400.0), (8.0, "rsu1", 250.0)]
    ok, timing, t = upload(plan, HandoverConfig(resume_within_s=10.0))
    assert ok and t > 8.0
    assert timing["bytes_delivered"] < timing["bytes_sent"] + 1  # the rest only, not a second full copy
    late, timing, _ = upload(plan, HandoverConfig(resume_within_s=4.0))
    assert not late and timing["failed"][0]["reason"] == "left_coverage"
