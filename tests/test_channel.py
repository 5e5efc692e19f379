"""Channel model: link budget, processor sharing, moving vehicles, coverage loss, broadcast."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from vmc_sim.radio.channel import BroadcastResult, RsuChannel, TransferResult
from vmc_sim.radio.link_budget import ChannelConfig, noise_dbm, path_loss_db, rate_bps, snr_db
from vmc_sim.radio.path_loss import PATH_LOSS

B = 20e6
UNCAPPED = dict(
    rate_model="shannon",
    bandwidth_hz=B,
    rate_cap_bps=None,
    spectral_efficiency_cap=None,
    transport="none",
    path_loss_model="tr37885_urban_los",
)


def shannon(**kw) -> ChannelConfig:
    """Plain Shannon over 20 MHz (no caps, whole MSDUs) on the idealised LOS link: the
    processor-sharing mechanics in closed form."""
    return ChannelConfig(**{**UNCAPPED, **kw})


def static(positions: dict[str, tuple[float, float]]):
    """position_fn and coverage_fn for vehicles that never move and stay covered."""
    return positions.get, lambda v: v in positions


def full_rate(d: float, cfg: ChannelConfig, direction: str = "downlink") -> float:
    return rate_bps(d, cfg.bandwidth_hz, direction, cfg)


def run(env: simpy.Environment, *procs: simpy.Process) -> list:
    env.run()
    return [p.value for p in procs]


# ---------------------------------------------------------------- link budget


@pytest.mark.parametrize("model", PATH_LOSS.names())
def test_path_loss_grows_and_rate_falls_with_distance(model):
    cfg = shannon(path_loss_model=model)
    d = np.geomspace(1.0, 3000.0, 400)
    pl = np.array([path_loss_db(x, cfg) for x in d])
    rate = np.array([full_rate(x, cfg) for x in d])
    assert np.all(np.diff(pl) > 0)
    assert np.all(np.diff(rate) <= 0)
    capped = shannon(path_loss_model=model, rate_cap_bps=50e6)
    rc = np.array([full_rate(x, capped) for x in d])
    assert rc.max() == pytest.approx(50e6) and np.all(np.diff(rc) <= 0)
    assert np.all(rc <= 50e6)


def test_formulas_match_the_3gpp_tables():
    dh = 5.0 - 1.5
    d2d = math.sqrt(100.0**2 - dh**2)
    urban = shannon()
    assert path_loss_db(d2d, urban) == pytest.approx(38.77 + 16.7 * 2 + 18.2 * math.log10(5.9))
    highway = ChannelConfig(path_loss_model="tr37885_highway_los")
    assert path_loss_db(d2d, highway) == pytest.approx(32.4 + 20 * 2 + 20 * math.log10(5.9))
    fs = ChannelConfig(path_loss_model="free_space")
    assert path_loss_db(d2d, fs) == pytest.approx(20 * math.log10(4 * math.pi * 100 * 5.9e9 / 299_792_458.0))
    umi = ChannelConfig(path_loss_model="tr38901_umi_los")
    d_bp = 4 * 4.0 * 0.5 * 5.9e9 / 3e8
    below, above = d_bp - 1e-6, d_bp + 1e-6
    assert path_loss_db(below, umi) == pytest.approx(path_loss_db(above, umi), abs=1e-4)
    assert path_loss_db(d2d, umi) == pytest.approx(32.4 + 21 * 2 + 20 * math.log10(5.9))
    ld = ChannelConfig(path_loss_model="log_distance", path_loss_exponent=3.0, log_distance_ref_m=10.0)
    assert path_loss_db(d2d, ld) - path_loss_db(math.sqrt(10.0**2 - dh**2), ld) == pytest.approx(30.0)
    assert noise_dbm(urban) == pytest.approx(-174 + 10 * math.log10(20e6) + 9)
    weak_uplink = shannon(tx_power_dbm_uplink=20)
    assert snr_db(50, "downlink", urban) - snr_db(50, "uplink", weak_uplink) == pytest.approx(3)
    assert path_loss_db(0.0, urban) == path_loss_db(1.0, urban)


def test_rate_halves_when_two_share_the_band():
    cfg = shannon()
    for d in (20.0, 150.0, 600.0):
        assert rate_bps(d, B / 2, "uplink", cfg) == pytest.approx(rate_bps(d, B, "uplink", cfg) / 2, rel=1e-12)
    capped = shannon(rate_cap_bps=120e6)
    alone, half = rate_bps(10, B, "downlink", capped), rate_bps(10, B / 2, "downlink", capped)
    assert alone == 120e6 and 0.5 * alone <= half <= alone
    se = shannon(spectral_efficiency_cap=4.0)
    assert rate_bps(10, B, "downlink", se) == pytest.approx(4.0 * B)


# ---------------------------------------------------------------- transfers, static vehicles


def test_static_transfer_takes_bits_over_rate():
    cfg = shannon(update_interval=0.3)
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0.0, 0.0), rsu_id="r0")
    pos, cov = static({"a": (120.0, 50.0)})
    env.run(until=2.5)
    p = ch.transfer(env, "a", 7_654_321, "uplink", pos, cov, tag="model")
    (res,) = run(env, p)
    r = rate_bps(math.hypot(120, 50), B, "uplink", cfg)
    assert isinstance(res, TransferResult) and res.ok and res.reason == "done"
    assert res.start == 2.5 and res.duration == pytest.approx(7_654_321 * 8 / r, rel=1e-12)
    assert res.bytes_sent == 7_654_321 and res.mean_rate_bps == pytest.approx(r, rel=1e-12)
    assert res.tag == "model" and res.rsu == "r0" and ch.records == [res]
    assert res.to_dict()["duration"] == res.duration


def test_two_equal_transfers_take_twice_as_long():
    cfg = shannon()
    pos, cov = static({"a": (80.0, 0.0), "b": (0.0, 80.0)})

    def together(dir_a: str, dir_b: str, duplex: str = "separate") -> tuple[TransferResult, TransferResult]:
        env = simpy.Environment()
        ch = RsuChannel(shannon(duplex=duplex), (0, 0))
        return run(env, ch.transfer(env, "a", 10**7, dir_a, pos, cov), ch.transfer(env, "b", 10**7, dir_b, pos, cov))

    env1 = simpy.Environment()
    (alone,) = run(env1, RsuChannel(cfg, (0, 0)).transfer(env1, "a", 10**7, "downlink", pos, cov))
    a, b = together("downlink", "downlink")
    assert a.duration == pytest.approx(2 * alone.duration, rel=1e-12)
    assert b.duration == pytest.approx(2 * alone.duration, rel=1e-12)
    up, _ = together("uplink", "downlink")
    assert up.duration == pytest.approx(alone.duration, rel=1e-12)
    up, _ = together("uplink", "downlink", duplex="shared")
    assert up.duration == pytest.approx(2 * alone.duration, rel=1e-12)


@pytest.mark.parametrize("update_interval", [0.05, 100.0])
def test_late_transfer_speeds_up_when_the_other_finishes(update_interval):
    cfg = shannon(update_interval=update_interval)
    pos, cov = static({"a": (60.0, 0.0), "b": (0.0, 250.0)})
    ra, rb = full_rate(60.0, cfg), full_rate(250.0, cfg)
    bits_a, bits_b, t1 = 8 * 3_000_000, 8 * 6_000_000, 0.05
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0, 0))
    pa = ch.transfer(env, "a", bits_a // 8, "downlink", pos, cov)

    def late():
        yield env.timeout(t1)
        return (yield ch.transfer(env, "b", bits_b // 8, "downlink", pos, cov))

    pb = env.process(late())
    a, b = run(env, pa, pb)
    t_a = t1 + (bits_a - ra * t1) / (ra / 2)
    t_b = t_a + (bits_b - rb / 2 * (t_a - t1)) / rb
    assert a.end == pytest.approx(t_a, rel=1e-12)
    assert b.start == t1 and b.end == pytest.approx(t_b, rel=1e-12)
    assert a.ok and b.ok


# ---------------------------------------------------------------- moving vehicles


def fine_transfer_time(nbytes: float, rate_at) -> float:
    """Reference: integrate rate_at(t) with a 0.1 ms midpoint rule until nbytes have gone."""
    bits, t, dt = 8.0 * nbytes, 0.0, 1e-4
    while True:
        r = rate_at(t + dt / 2)
        if r * dt >= bits:
            return t + bits / r
        bits -= r * dt
        t += dt


@pytest.mark.parametrize(("with_velocity", "update_interval"), [(False, 0.01), (True, 0.1), (True, 0.5)])
def test_moving_vehicle_slows_down_and_matches_fine_integration(with_velocity, update_interval):
    cfg = shannon(path_loss_model="log_distance", path_loss_exponent=3.2, update_interval=update_interval)
    env = simpy.Environment()
    speed, x0, nbytes = 15.0, 40.0, 40_000_000

    def pos(v):
        x = x0 + speed * env.now
        return (x, 0.0, speed, 0.0) if with_velocity else (x, 0.0)

    res = run(env, RsuChannel(cfg, (0, 0)).transfer(env, "car", nbytes, "downlink", pos, lambda v: True))[0]
    reference = fine_transfer_time(nbytes, lambda t: full_rate(x0 + speed * t, cfg))
    assert res.ok and res.duration == pytest.approx(reference, rel=0.01)
    assert res.mean_rate_bps < full_rate(x0, cfg)
    assert res.mean_rate_bps > full_rate(x0 + speed * res.duration, cfg)
    assert res.duration > 2 * 8 * nbytes / full_rate(x0, cfg)


def test_two_moving_vehicles_share_and_match_fine_integration():
    cfg = shannon(path_loss_model="tr38901_umi_los", update_interval=0.25)
    env = simpy.Environment()

    def pos(v):
        if v == "a":
            return (-30.0 - 12.0 * env.now, 5.0, -12.0, 0.0)
        return (60.0 + 20.0 * env.now, 0.0, 20.0, 0.0)

    ch = RsuChannel(cfg, (0, 0))
    a, b = run(
        env,
        ch.transfer(env, "a", 30_000_000, "uplink", pos, lambda v: True),
        ch.transfer(env, "b", 60_000_000, "uplink", pos, lambda v: True),
    )
    ra = lambda t: full_rate(math.hypot(30.0 + 12.0 * t, 5.0), cfg, "uplink")  # noqa: E731
    rb = lambda t: full_rate(60.0 + 20.0 * t, cfg, "uplink")  # noqa: E731
    ta = fine_transfer_time(30_000_000, lambda t: ra(t) / 2)
    assert a.end == pytest.approx(ta, rel=0.01)
    left_b = 8.0 * 60_000_000 - sum(rb(t) / 2 * 1e-3 for t in np.arange(0.0, ta, 1e-3) + 5e-4)
    tb = ta + fine_transfer_time(left_b / 8, lambda t: rb(ta + t))
    assert b.end == pytest.approx(tb, rel=0.01)


# ---------------------------------------------------------------- leaving coverage


def test_leaving_coverage_fails_with_partial_bytes_and_frees_the_band():
    cfg = shannon(update_interval=0.25)
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0, 0))
    pos, _ = static({"a": (100.0, 0.0), "b": (0.0, 100.0)})
    cov = lambda v: v != "a" or env.now < 5.0  # noqa: E731
    r = full_rate(100.0, cfg)
    big = int(r * 20 / 8)
    a, b = run(env, ch.transfer(env, "a", big, "uplink", pos, cov), ch.transfer(env, "b", big, "uplink", pos, cov))
    assert not a.ok and a.reason == "left_coverage"
    assert a.end == pytest.approx(5.0) and a.bytes_sent == int(r / 2 * 5.0 // 8)
    assert 0 < a.bytes_sent < big and a.mean_rate_bps == pytest.approx(r / 2, rel=1e-6)
    assert b.ok and b.end == pytest.approx(5.0 + (8 * big - r / 2 * 5.0) / r, rel=1e-12)


def test_moving_out_of_coverage_and_explicit_leave_and_abort():
    cfg = shannon(update_interval=0.1)
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0, 0))
    pos = lambda v: (100.0 + 10.0 * env.now, 0.0) if v == "a" else (50.0, 0.0)  # noqa: E731
    cov = lambda v: math.hypot(*pos(v)) < 150.0  # noqa: E731
    pa = ch.transfer(env, "a", 10**9, "downlink", pos, cov)
    pb = ch.transfer(env, "b", 10**9, "downlink", pos, cov)
    pc = ch.transfer(env, "c", 10**9, "uplink", pos, cov)

    def engine():
        yield env.timeout(1.234)
        ch.leave("b")
        yield env.timeout(1.0)
        pc.interrupt("cancelled")

    env.process(engine())
    a, b, c = run(env, pa, pb, pc)
    assert a.reason == "left_coverage" and 5.0 <= a.end <= 5.0 + 0.1 + 1e-9
    assert 0 < a.bytes_sent < 10**9
    assert b.reason == "left_coverage" and b.end == pytest.approx(1.234) and b.bytes_sent > 0
    assert c.reason == "aborted" and c.end == pytest.approx(2.234) and not c.ok
    assert ch.active("downlink") == 0 and ch.active("uplink") == 0


def test_not_covered_at_start_and_empty_transfer():
    cfg = ChannelConfig()
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0, 0))
    out, empty = run(
        env,
        ch.transfer(env, "x", 100, "uplink", lambda v: None, lambda v: False),
        ch.transfer(env, "y", 0, "uplink", lambda v: (1.0, 1.0), lambda v: True),
    )
    assert out.reason == "left_coverage" and out.bytes_sent == 0 and out.duration == 0
    assert empty.ok and empty.duration == 0 and empty.mean_rate_bps == 0.0


# ---------------------------------------------------------------- broadcast


def test_broadcast_goes_at_the_worst_receivers_rate():
    cfg = shannon()
    pos, cov = static({"a": (50.0, 0.0), "b": (0.0, 100.0), "c": (-200.0, 0.0)})
    env = simpy.Environment()
    ch = RsuChannel(cfg, (0, 0))
    (res,) = run(env, ch.broadcast(env, ["a", "b", "c"], 5_000_000, pos, cov))
    assert isinstance(res, BroadcastResult) and res.ok and sorted(res.delivered) == ["a", "b", "c"]
    assert res.duration == pytest.approx(8 * 5_000_000 / full_rate(200.0, cfg), rel=1e-12)
    assert all(r.end == res.end and r.bytes_sent == 5_000_000 for r in res.receivers.values())

    env2 = simpy.Environment()
    ch2 = RsuChannel(cfg, (0, 0))
    bc, uni = run(
        env2,
        ch2.broadcast(env2, ["a", "b"], 5_000_000, pos, cov),
        ch2.transfer(env2, "c", 5_000_000, "downlink", pos, cov),
    )
    assert bc.duration == pytest.approx(2 * 8 * 5_000_000 / full_rate(100.0, cfg), rel=1e-12)


def test_broadcast_drops_a_receiver_that_leaves_and_finishes_for_the_rest():
    cfg = shannon(update_interval=0.5)
    env = simpy.Environment()
    pos, _ = static({"a": (50.0, 0.0), "b": (0.0, 100.0), "c": (-400.0, 0.0)})
    cov = lambda v: v != "c" or env.now < 2.0  # noqa: E731
    r_c, r_b = full_rate(400.0, cfg), full_rate(100.0, cfg)
    nbytes = int(r_c * 6 / 8)
    (res,) = run(env, RsuChannel(cfg, (0, 0)).broadcast(env, ["a", "b", "c", "gone"], nbytes, pos, cov))
    assert res.ok and sorted(res.delivered) == ["a", "b"] and sorted(res.dropped) == ["c", "gone"]
    c = res.receivers["c"]
    assert c.reason == "left_coverage" and c.end == pytest.approx(2.0) and c.bytes_sent == int(r_c * 2.0 // 8)
    assert res.receivers["gone"].end == 0.0 and res.receivers["gone"].bytes_sent == 0
    assert res.end == pytest.approx(2.0 + (8 * nbytes - 2.0 * r_c) / r_b, rel=1e-12)
    assert res.bytes_sent == nbytes

    env2 = simpy.Environment()
    (none,) = run(env2, RsuChannel(cfg, (0, 0)).broadcast(env2, ["gone"], 10, pos, lambda v: False))
    assert not none.ok and none.reason == "left_coverage" and none.dropped == ["gone"]


# ---------------------------------------------------------------- shadowing and configuration


def test_shadowing_is_seeded_off_on_a_los_only_model_and_on_by_default():
    cfg = shannon(shadowing_sigma_db=4.0, update_interval=0.2)
    env0 = simpy.Environment()
    RsuChannel(cfg, (0, 0)).transfer(env0, "v", 1000, "downlink", lambda v: (30.0, 0.0), lambda v: True)
    with pytest.raises(ValueError, match="no numpy Generator"):
        env0.run()  # the first draw names what needed one

    def once(seed: int | None, c: ChannelConfig) -> float:
        env = simpy.Environment()
        pos = lambda v: (30.0 + 20.0 * env.now, 0.0)  # noqa: E731
        rng = None if seed is None else np.random.default_rng(seed)
        state = None if seed is None else np.random.default_rng(seed + 100)
        channel = RsuChannel(c, (0, 0), rng=rng, state_rng=state)
        return run(env, channel.transfer(env, "v", 20_000_000, "downlink", pos, lambda v: True))[0].end

    assert once(3, cfg) == once(3, cfg) != once(4, cfg)
    plain = shannon(update_interval=0.2)  # a LOS-only path-loss model states no shadowing: none
    assert plain.shadowing_sigma_db is None and once(None, plain) == once(5, plain)
    city = shannon(path_loss_model="tr37885_urban", update_interval=0.2)  # the default radio: 3 dB in LOS
    assert city.link_state_model == "city" and once(3, city) == once(3, city) != once(4, city)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("path_loss_model", "okumura"),
        ("carrier_ghz", 0),
        ("bandwidth_hz", -1.0),
        ("duplex", "tdd"),
        ("rate_cap_bps", 0),
        ("spectral_efficiency_cap", float("nan")),
        ("shadowing_sigma_db", -1.0),
        ("update_interval", 0.0),
        ("min_distance_m", 0),
        ("noise_figure_db", float("inf")),
        ("tx_power_dbm_downlink", "23"),
        ("path_loss_exponent", True),
        ("shadowing_decorrelation_m", -5),
    ],
)
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"channel.{field}"):
        ChannelConfig(**{field: value})


def test_bad_arguments():
    with pytest.raises(ValueError, match="rsu_height_m"):
        ChannelConfig(path_loss_model="tr38901_umi_los", rsu_height_m=0.8)
    with pytest.raises(ValueError, match="direction"):
        snr_db(10, "sideways", ChannelConfig())
    env = simpy.Environment()
    ch = RsuChannel(ChannelConfig(), (0, 0))
    with pytest.raises(ValueError, match="nbytes"):
        ch.transfer(env, "a", -1, "uplink", lambda v: (0, 0), lambda v: True)
    with pytest.raises(ValueError, match="environment"):
        ch.transfer(simpy.Environment(), "a", 1, "uplink", lambda v: (0, 0), lambda v: True)
    assert ChannelConfig().to_dict()["carrier_ghz"] == 5.9
