"""``mobility.density``: one demand factor for the city, files and LuST sources, reaching SUMO as
``--scale`` (the route files' own knob), and a ``vmc sweep`` over it on LuST."""

from __future__ import annotations

from pathlib import Path

import pytest

from mobility.sumo import options_dict
from vmc_sim.cosim import sumo_config
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario
from vmc_sim.sweep import SweepSpec, expand, inert_axes

ROOT = Path(__file__).resolve().parents[1]
CLIP = Path(__file__).parent / "data" / "lust_clip"
TINY_CITY = {
    "junctions_x": 4,
    "junctions_y": 4,
    "spacing": 200.0,
    "lanes": 1,
    "period": 1.0,
    "duration": 300.0,
    "min_distance": 300.0,
    "seed": 5,
}


def scenario(mobility: dict) -> Scenario:
    return load_model(Scenario, None, {"name": "d", "duration": 200.0, "mobility": mobility})


def test_density_is_a_positive_number():
    with pytest.raises(Exception, match="density"):
        scenario({"source": "city", "density": 0})
    assert scenario({"source": "city"}).mobility.density == 1.0


@pytest.mark.parametrize("source", ["city", "files", "lust"])
def test_density_reaches_the_sumo_arguments_of_every_source(source, monkeypatch, tmp_path):
    import mobility.lust

    monkeypatch.setattr(
        "vmc_sim.sources.city.build_city",
        lambda cfg: type("F", (), {"net_file": tmp_path / "c.net.xml", "route_file": tmp_path / "c.rou.xml"})(),
    )
    monkeypatch.setattr(
        mobility.lust,
        "sumo_inputs",
        lambda spec, **kw: {
            "net_file": str(tmp_path / "l.net.xml"),
            "route_files": [str(tmp_path / "l.rou.xml")],
            "additional_files": [],
            "extra_args": mobility.lust.run_settings(None, kw["extra_args"]),
        },
    )
    m = {"source": source, "density": 0.5}
    if source == "files":
        m.update(net_file=str(tmp_path / "n.net.xml"), route_files=[str(tmp_path / "r.rou.xml")])
    cfg, _ = sumo_config(scenario(m))
    assert cfg.scale == 0.5 and options_dict(cfg.arguments())["scale"] == "0.5"
    cfg1, _ = sumo_config(scenario({**m, "density": 1.0}))
    assert "scale" not in options_dict(cfg1.arguments())  # 1 = the route files as they are
    if source == "lust":  # LuST's run settings travel with it
        assert options_dict(cfg.arguments())["device.rerouting.probability"] == "0.7"


def test_the_mobility_layer_density_scales_too(tmp_path):
    pytest.importorskip("sumo")
    from mobility.config import MobilityConfig, resolve_network

    cfg = MobilityConfig.from_dict(
        {"network": "city", "density": 1.5, "city": {**TINY_CITY, "cache_dir": str(tmp_path)}}
    )
    run, _ = resolve_network(cfg)
    assert run.scale == 1.5 and options_dict(run.arguments())["scale"] == "1.5"


def _departed(cfg, until: float) -> tuple[int, float]:
    from mobility.sumo import SumoSession

    n = 0
    with SumoSession(cfg) as s:
        scale = float(s.call("simulation.getScale", lambda: s.raw.simulation.getScale()))
        while s.time < until and not s.finished:
            s.step()
            n += len(s.departed_ids())
    return n, scale


@pytest.mark.sumo
def test_density_reaches_sumo_for_city_and_files(tmp_path):
    pytest.importorskip("libsumo")
    from mobility.city import CityConfig, build_city

    city = {**TINY_CITY, "cache_dir": str(tmp_path)}
    full, s1 = _departed(sumo_config(scenario({"source": "city", "city": city}))[0], 200)
    half, s05 = _departed(sumo_config(scenario({"source": "city", "city": city, "density": 0.5}))[0], 200)
    assert (s1, s05) == (1.0, 0.5) and full > 100 and half == pytest.approx(full / 2, rel=0.15)
    files = build_city(CityConfig(**city))
    m = {"source": "files", "net_file": str(files.net_file), "route_files": [str(files.route_file)], "density": 1.5}
    more, s15 = _departed(sumo_config(scenario(m))[0], 200)
    assert s15 == 1.5 and more == pytest.approx(full * 1.5, rel=0.15)


@pytest.mark.sumo
def test_density_reaches_sumo_for_lust(tmp_path):
    pytest.importorskip("libsumo")
    lust = {
        "source_dir": str(CLIP),
        "begin": 28800,
        "end": 28920,
        "warmup": 120,
        "peak_running": 40,
        "min_distance": 300,
        "cache_dir": str(tmp_path),
    }
    cfg, _ = sumo_config(scenario({"source": "lust", "lust": lust, "density": 0.25}), duration=60)
    n, scale = _departed(cfg, 28800)
    assert scale == 0.25 and n > 0
    assert options_dict(cfg.arguments())["ignore-junction-blocker"] == "20"


def test_a_density_sweep_over_lust_expands_to_scale_factors():
    spec = load_model(
        SweepSpec,
        None,
        {
            "name": "lust-density",
            "base": str(ROOT / "scenarios" / "lust_case_study.yaml"),
            "grid": {"density": [0.25, 0.5, 1, 1.5]},
        },
    )
    points = expand(spec)
    assert [p.scenario.mobility.density for p in points] == [0.25, 0.5, 1, 1.5]
    assert not inert_axes(spec, points)


def test_the_shipped_lust_density_sweep_validates():
    from vmc_sim.sweep import load_sweep

    spec, base_dir = load_sweep(ROOT / "scenarios" / "sweeps" / "lust_density.yaml")
    points = expand(spec, base_dir)
    assert sorted({p.scenario.mobility.density for p in points}) == [0.25, 0.5, 1, 1.5]
    assert all(p.scenario.mobility.source == "lust" for p in points)
