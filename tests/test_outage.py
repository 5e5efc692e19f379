"""A link that cannot carry a transfer ends it in bounded simulated time: a transfer in outage (below
the lowest MCS) fails after ``channel.outage_timeout_s``, charged its airtime; a broadcast drops a
receiver in outage and goes on for the others; store and forward retries a link in outage until
``coordinator.resume_within_s`` after the last byte moved; and a co-simulation under a radio whose
links break at the edge of coverage runs to its end, its records holding only what arrived."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy

from mobility.events import MobilityEvent
from vmc_sim.cosim import run_scenario
from vmc_sim.engine.vehicles import Vehicles
from vmc_sim.radio.channel import RsuChannel
from vmc_sim.radio.link_budget import ChannelConfig, rate_bps
from vmc_sim.radio.transfers import HandoverConfig, Links, new_timing
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario

MB = 1_000_000
POOR = {"path_loss_model": "log_distance", "path_loss_exponent": 3.5}
NEAR, FAR = 30.0, 150.0  # metres from the RSU: the poor link carries 3-6 Mb/s at NEAR, nothing at FAR


def poor(**kw) -> ChannelConfig:
    return ChannelConfig(**{**POOR, **kw})


def test_the_poor_link_is_in_outage_far_out_and_carries_near():
    cfg = poor()
    assert rate_bps(FAR, cfg.bandwidth_hz, "uplink", cfg) == 0.0
    assert rate_bps(NEAR, cfg.bandwidth_hz, "uplink", cfg) > 1e6


def moving(path: dict[str, list[tuple[float, float]]]):
    """position_fn of vehicles on piecewise-constant paths [(from time, x)], on the x axis."""
    clock: dict[str, simpy.Environment] = {}

    def position(v):
        xs = [x for t, x in path[v] if t <= clock["env"].now]
        return (xs[-1], 0.0)

    return clock, position


@pytest.mark.parametrize("timeout", [0.0, 3.0, 7.5])
def test_a_transfer_in_outage_fails_after_the_timeout_charged_its_airtime(timeout):
    env = simpy.Environment()
    ch = RsuChannel(poor(outage_timeout_s=timeout), (0.0, 0.0), env=env)
    p = ch.transfer(env, "v", 10 * MB, "uplink", {"v": (FAR, 0.0)}.get, lambda v: True)
    env.run()
    r = p.value
    assert not r.ok and r.reason == "outage" and r.bytes_sent == 0
    assert r.end - r.start == pytest.approx(timeout)


def test_a_transfer_whose_link_comes_back_within_the_timeout_completes():
    env = simpy.Environment()
    clock, position = moving({"v": [(0.0, FAR), (2.0, NEAR)]})
    clock["env"] = env
    ch = RsuChannel(poor(outage_timeout_s=3.0, update_interval=0.5), (0.0, 0.0), env=env)
    p = ch.transfer(env, "v", 1 * MB, "uplink", position, lambda v: True)
    env.run()
    assert p.value.ok and p.value.end > 2.0


def test_a_transfer_in_outage_frees_its_share_for_the_others():
    env = simpy.Environment()
    cfg = poor(outage_timeout_s=2.0)
    ch = RsuChannel(cfg, (0.0, 0.0), env=env)
    where = {"far": (FAR, 0.0), "near": (NEAR, 0.0)}
    stuck = ch.transfer(env, "far", 10 * MB, "uplink", where.get, lambda v: True)
    going = ch.transfer(env, "near", 4 * MB, "uplink", where.get, lambda v: True)
    env.run()
    assert stuck.value.reason == "outage" and stuck.value.end == pytest.approx(2.0)
    alone = rate_bps(NEAR, cfg.bandwidth_hz, "uplink", cfg)
    half = rate_bps(NEAR, cfg.bandwidth_hz / 2, "uplink", cfg)
    expected = 2.0 + (4 * MB * 8 - 2.0 * half) / alone
    assert going.value.ok and going.value.end == pytest.approx(expected, rel=1e-6)


def test_a_broadcast_drops_a_receiver_in_outage_and_goes_on_for_the_others():
    env = simpy.Environment()
    ch = RsuChannel(poor(), (0.0, 0.0), env=env)
    where = {"far": (FAR, 0.0), "near": (NEAR, 0.0)}
    p = ch.broadcast(env, ["far", "near"], 2 * MB, where.get, lambda v: True)
    env.run()
    r = p.value
    assert r.ok and r.receivers["near"].ok
    assert r.receivers["far"].reason == "outage" and r.receivers["far"].end == 0.0


def test_a_broadcast_with_every_receiver_in_outage_fails_after_the_timeout():
    env = simpy.Environment()
    ch = RsuChannel(poor(outage_timeout_s=4.0), (0.0, 0.0), env=env)
    p = ch.broadcast(env, ["a", "b"], 2 * MB, {"a": (FAR, 0.0), "b": (FAR + 10, 0.0)}.get, lambda v: True)
    env.run()
    assert not p.value.ok and p.value.end == pytest.approx(4.0)
    assert {r.reason for r in p.value.receivers.values()} == {"outage"}


def links(env: simpy.Environment, vehicles: Vehicles, rule: HandoverConfig, cfg: ChannelConfig) -> Links:
    return Links(env, {"rsu0": RsuChannel(cfg, (0.0, 0.0), rsu_id="rsu0", env=env)}, vehicles, rule)


def covered(x: float) -> Vehicles:
    vehicles = Vehicles(grace=0.0)
    vehicles.apply([MobilityEvent(0.0, "join", "v", "rsu0", x, 0.0, 0.0)], [])
    return vehicles


@pytest.mark.parametrize("resume", [0.0, 10.0, 25.0])
def test_store_and_forward_gives_up_on_a_link_in_outage_resume_within_s_after_the_last_byte(resume):
    env = simpy.Environment()
    cfg = poor(outage_timeout_s=3.0)
    net = links(env, covered(FAR), HandoverConfig(resume_within_s=resume), cfg)
    timing = new_timing()
    p = env.process(net.upload("v", 10 * MB, timing))
    env.run()
    assert p.value is False and timing["failed"] == [{"client": "v", "tag": "upload", "reason": "outage"}]
    assert resume <= env.now <= resume + 1.0 + 3.0  # the last try starts before the deadline
    assert timing["transfer_s"] == timing["failed_transfer_s"] > 0 and timing["bytes_delivered"] == 0


def test_store_and_forward_resumes_a_link_that_comes_back():
    env = simpy.Environment()
    vehicles = covered(FAR)
    net = links(env, vehicles, HandoverConfig(resume_within_s=30.0), poor(outage_timeout_s=2.0))

    def approach():
        yield env.timeout(9.5)
        vehicles.state["v"] = (NEAR, 0.0, 0.0, "rsu0")

    env.process(approach())
    timing = new_timing()
    p = env.process(net.upload("v", 1 * MB, timing))
    env.run()
    assert p.value is True and env.now > 9.5
    assert timing["failed_transfer_s"] == 0.0  # a try that failed belongs to a transfer that arrived
    assert timing["bytes_delivered"] == 1 * MB


def test_a_broadcast_receiver_in_outage_gets_the_rest_by_unicast_or_fails():
    env = simpy.Environment()
    vehicles = Vehicles(grace=0.0)
    vehicles.apply([MobilityEvent(0.0, "join", v, "rsu0", x, 0.0, 0.0) for v, x in (("a", NEAR), ("b", FAR))], [])
    net = links(env, vehicles, HandoverConfig(), poor(outage_timeout_s=2.0))
    timing = new_timing()
    p = env.process(net.broadcast(["a", "b"], 1 * MB, timing))
    env.run()
    assert p.value == {"a"}
    assert timing["failed"] == [{"client": "b", "tag": "broadcast", "reason": "outage"}]


def test_after_the_end_of_traffic_no_vehicle_is_reachable():
    vehicles = covered(NEAR)
    vehicles.departed_at["w"] = 0.0
    vehicles.state["w"] = (NEAR, 0.0, 0.0, "rsu0")
    vehicles.grace = 60.0
    assert vehicles.reachable("v") and vehicles.reachable_for_withdrawal("w")
    assert vehicles.end_traffic() == ["v"]
    assert not vehicles.reachable("v") and not vehicles.reachable_for_withdrawal("w")


# ---------------------------------------------------------------- whole runs


def city(
    channel: dict, duration: float = 300.0, radius: float = 200.0, strategies: tuple = (), **coordinator
) -> Scenario:
    """The default city, shortened and cheap to train, under ``channel``."""
    return load_model(
        Scenario,
        None,
        {
            "name": "poor",
            "duration": duration,
            "mobility": {"rsus": {"radius": radius}},
            "federated": {"train": {"epochs": 2}, "strategies": list(strategies)},
            "coordinator": {"warmup": 30, **coordinator},
            "channel": channel,
        },
    )


def records_of(run) -> list[dict]:
    """A run's records, after checking that every method answered every request dispatched."""
    rows = [r for r in run.records() if "method" in r]
    dispatched = run.manifest()["summary"]["requests"]
    for m in run.manifest()["config"]["federated"]["methods"]:
        answered = sorted(i for r in rows if r["method"] == m for i in r["requests"])
        assert answered == list(range(dispatched)), (m, dispatched, answered[-3:])
    return rows


def check_only_what_arrived(rows: list[dict], outage_timeout_s: float) -> None:
    """Every released model holds only contributions that arrived; what failed is charged: a failed
    upload its device time, a transfer that stalled in outage its airtime."""
    for r in rows:
        if r["kind"] in ("suspend", "suspended"):
            assert r["members"] == [], r
        # an editor's members are the contributions its model holds; a round's model aggregates what
        # arrived in it (its members are every participant of the model's earlier rounds too)
        held = r.get("arrived", []) if r["kind"] in ("round", "unlearn") else r["members"]
        for c in r.get("not_arrived") or []:
            assert c not in held, (r["method"], r["index"], c)
        assert r.get("bytes_sent", 0) >= r.get("bytes_delivered", 0)
        failed = r.get("failed") or []
        if any(f["tag"] == "upload" for f in failed):
            assert r["wasted_compute_s"] > 0, (r["method"], r["index"])
        if outage_timeout_s > 0 and any(f["reason"] == "outage" for f in failed):
            assert r["failed_transfer_s"] >= outage_timeout_s - 1e-9, (r["method"], r["index"])


@pytest.mark.slow
@pytest.mark.sumo
def test_the_default_city_under_a_poor_radio_runs_to_its_end(tmp_path):
    sc = city({**POOR, "shadowing_sigma_db": 4.0})
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    summary = run.manifest()["summary"]
    rows = records_of(run)
    assert run.manifest()["status"] == "complete"
    assert summary["sim_end"] - (sc.duration + 0) < sc.coordinator.drain_s + 1e-6
    reasons = {f["reason"] for r in rows for f in r.get("failed") or []}
    assert "outage" in reasons  # the case this radio makes: links that cannot hold at the edge
    check_only_what_arrived(rows, sc.channel.get("outage_timeout_s", 3.0))
    assert any(f["tag"] == "upload" for r in rows for f in r.get("failed") or [])
    causes = {r.get("cause") for r in rows if r["kind"] == "suspend"}
    assert causes <= {"coverage", "not_arrived", "population"}


@pytest.mark.slow
@pytest.mark.sumo
def test_work_still_in_flight_when_the_drain_ends_fails_and_the_run_ends(tmp_path):
    # a tiny drain: whatever the coordinators still do a second after the traffic is cut off
    sc = city({**POOR, "shadowing_sigma_db": 4.0}, duration=200.0, drain_s=0.5, resume_within_s=60.0)
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    summary = run.manifest()["summary"]
    cut = summary["drain"]["traffic_cut"]
    assert cut["after_s"] == pytest.approx(0.5) and cut["busy"]
    rows = records_of(run)
    check_only_what_arrived(rows, 3.0)
    late = [r for r in rows if r["done_time"] > 200.0 + 0.5]
    assert late and any(f["reason"] == "traffic_ended" for r in late for f in r["failed"])
    # nothing waits for a vehicle once the traffic is over: store and forward's 60 s are not waited out
    assert summary["drain"]["s"] < 0.5 + 60.0


@pytest.mark.slow
@pytest.mark.sumo
@pytest.mark.parametrize("draw", range(4))
def test_every_run_ends_under_random_poor_channels(draw, tmp_path):
    rng = np.random.default_rng([20261207, draw])
    channel = {
        "path_loss_model": "log_distance",
        "path_loss_exponent": float(rng.uniform(3.0, 4.5)),
        "shadowing_sigma_db": float(rng.uniform(0.0, 8.0)),
        "outage_timeout_s": float(rng.choice([0.0, 3.0, 10.0])),
    }
    coordinator = {"resume_within_s": float(rng.choice([0.0, 20.0])), "dwell_limited": bool(draw % 2)}
    strategies = ("fedavg", "pdf") if draw >= 2 else ()  # the round worlds' transfers too
    sc = city(channel, duration=150.0, radius=float(rng.uniform(80.0, 300.0)), strategies=strategies, **coordinator)
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    assert run.manifest()["status"] == "complete", json.dumps(channel)
    assert run.manifest()["summary"]["sim_end"] <= sc.duration + sc.coordinator.drain_s + 3600.0
    check_only_what_arrived(records_of(run), channel["outage_timeout_s"])
