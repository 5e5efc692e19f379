"""LuST helpers: the target curve, clone handling, and a tiny smoke build of the rebuilt network."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mobility.lust import (LustConfig, build_lust, default_lust_dir, demand_report, insertion_rate, lust_clone,
                           target_running)


def test_target_curve_is_scaled_to_the_peak_and_periodic_enough():
    assert target_running(8 * 3600) == pytest.approx(4000.0)
    assert target_running(8 * 3600, peak_running=3000) == pytest.approx(3000.0)
    day = target_running(np.arange(0, 86400, 60.0))
    assert day.max() < 4200 and day.min() >= 0
    assert target_running(3 * 3600) < 400 < target_running(18.5 * 3600) / 8


def test_insertion_rate_inverts_the_running_curve():
    """Integrating dN/dt = lambda - N/tau from the curve's value reproduces the curve."""
    tau, dt = 500.0, 5.0
    t = np.arange(6 * 3600, 10 * 3600, dt)
    lam = insertion_rate(t, tau, 4000.0)
    n = target_running(t[0])
    for k in range(1, len(t)):
        n += (lam[k - 1] - n / tau) * dt
    assert n == pytest.approx(target_running(t[-1]), rel=0.03)
    assert (lam >= 0).all()


@pytest.mark.parametrize("kwargs, field", [
    ({"begin": 100, "end": 50}, "lust.end"), ({"delay_factor": 0}, "lust.delay_factor"),
    ({"osm_file": "/nonexistent/lust.osm.gz"}, "lust.osm_file"), ({"seed": 1.5}, "lust.seed"),
])
def test_lust_config_errors_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        cfg = LustConfig(**kwargs)
        cfg.resolve_osm()


def test_clone_is_used_as_is(tmp_path):
    with pytest.raises(ValueError, match="lust.net.xml"):
        lust_clone(tmp_path)
    (tmp_path / "lust.net.xml").write_text("<net/>")
    (tmp_path / "dua.static.sumocfg").write_text("<configuration/>")
    cfg = lust_clone(tmp_path).sumo_config(backend="traci", end=100)
    assert cfg.config_file == str(tmp_path / "dua.static.sumocfg") and cfg.net_file is None
    assert cfg.route_files == [] and cfg.backend == "traci"


@pytest.mark.sumo
@pytest.mark.slow
def test_lust_smoke_build_and_short_run(tmp_path):
    pytest.importorskip("libsumo")
    if default_lust_dir() is None:
        pytest.skip("no LuST OSM next to the project (../shared/scenarios/lust)")
    cfg = LustConfig(begin=8 * 3600, end=8 * 3600 + 120, warmup=0, peak_running=60.0, cache_dir=str(tmp_path))
    files = build_lust(cfg)
    net = files.metadata["network"]
    assert 2200 <= net["nodes"] <= 2450 and 5700 <= net["edges"] <= 6100 and 850 <= net["length_km"] <= 960
    demand = files.metadata["demand"]
    assert demand["trips"] > 0 and demand["routed"] == demand["trips"]
    assert math.isclose(files.begin, 8 * 3600)
    report = demand_report(files, sample_every=30, peak_running=60.0)
    assert report.departed > 0 and report.times[-1] == pytest.approx(8 * 3600 + 120)
    assert build_lust(cfg).directory == files.directory  # cached


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
