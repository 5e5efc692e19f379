"""Region sub-scenarios: SUMO steps a cut of the network around the RSUs (mobility/region_cut.py),
judged against the whole network by the coverage figures (mobility/region_check.py) in a report
generated from its tables (vmc_sim/reproduction/region_cut_report.py)."""

from __future__ import annotations

import csv
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from mobility.events import MobilityEvent
from mobility.region_check import compare, coverage_figures
from mobility.region_cut import CutTiming, RegionCut, build_cut, region_bounds
from mobility.rsu import Rsu
from mobility.sumo_config import SumoConfig, options_dict
from vmc_sim.reproduction import region_cut_report as rr

ROOT = Path(__file__).resolve().parents[1]
TOWN = ROOT / "scenarios" / "own_network"


def town(seed: int = 42, end: float = 601.0, scale: float = 1.0) -> SumoConfig:
    return SumoConfig(
        net_file=str(TOWN / "town.net.xml"),
        route_files=[str(TOWN / "town.rou.xml")],
        begin=0,
        end=end,
        seed=seed,
        scale=scale,
    )


def junctions(net: Path) -> dict[str, tuple[float, float]]:
    return {
        j.get("id"): (float(j.get("x")), float(j.get("y")))
        for j in ET.parse(net).getroot().iter("junction")
        if j.get("type") != "internal"
    }


def test_the_region_is_the_box_of_the_cells_grown_by_the_buffer():
    rsus = [Rsu("a", 100, 200, 50), Rsu("b", 400, 150, 80)]
    assert region_bounds(rsus, 25) == (25, 45, 505, 275)
    with pytest.raises(ValueError, match="at least one RSU"):
        region_bounds([], 10)
    with pytest.raises(ValueError, match="region.buffer"):
        RegionCut(buffer=-1)
    with pytest.raises(ValueError, match="speed_factor"):
        RegionCut(buffer=0, speed_factor=0)


@pytest.mark.sumo
@pytest.mark.parametrize("timing", ["exit_times", "free_flow"])
def test_a_cut_keeps_the_coordinates_and_only_the_roads_near_the_rsus(timing, tmp_path):
    rsus = [Rsu("rsu0", 200, 200, 80)]
    built = build_cut(town(), rsus, RegionCut(buffer=50, timing=CutTiming(timing)), root=tmp_path)
    net = Path(built.sumo.net_file)
    whole, cut = junctions(TOWN / "town.net.xml"), junctions(net)
    assert cut and set(cut) < set(whole)
    assert all(cut[j] == whole[j] for j in cut)  # the same coordinates: RSUs and buildings stay put
    assert any(x >= 600 and y >= 600 for x, y in whole.values())
    assert not any(x >= 500 or y >= 500 for x, y in cut.values())  # the far corner of the town is gone
    args = options_dict(built.sumo.arguments())
    assert args["device.rerouting.probability"] == "0"  # the routes are the ones driven
    assert built.manifest["vehicles"] > 0 and built.manifest["bounds"] == [70, 70, 330, 330]
    again = build_cut(town(), rsus, RegionCut(buffer=50, timing=CutTiming(timing)), root=tmp_path)
    assert again.directory == built.directory and again.manifest == built.manifest  # cached by content


@pytest.mark.sumo
def test_the_density_is_in_the_reference_for_exit_times_and_in_the_run_for_free_flow(tmp_path):
    rsus = [Rsu("rsu0", 200, 200, 80)]
    half = town(scale=0.5)
    exit_cut = build_cut(half, rsus, RegionCut(buffer=50), root=tmp_path)
    free_cut = build_cut(half, rsus, RegionCut(buffer=50, timing=CutTiming.FREE_FLOW), root=tmp_path)
    full = build_cut(town(), rsus, RegionCut(buffer=50), root=tmp_path)
    assert exit_cut.sumo.scale == 1.0 and free_cut.sumo.scale == 0.5
    assert exit_cut.manifest["vehicles"] < full.manifest["vehicles"]  # the reference ran at half the demand
    other_seed = build_cut(town(seed=7), rsus, RegionCut(buffer=50, timing=CutTiming.FREE_FLOW), root=tmp_path)
    assert other_seed.directory == free_cut.directory  # free flow needs no run: the seed is the cut run's


def scenario(tmp_path: Path, region: dict | None, density: float = 1.0) -> dict:
    data = yaml.safe_load((ROOT / "scenarios" / "own_network.yaml").read_text())
    data["mobility"].update(
        net_file=str(TOWN / "town.net.xml"),
        route_files=[str(TOWN / "town.rou.xml")],
        rsus={"placement": "explicit", "radius": 80, "positions": [{"id": "rsu0", "junction": "B1"}]},
        region=region,
        density=density,
    )
    return data


def recorded(data: dict, path: Path) -> list[MobilityEvent]:
    from mobility.trace import read_trace
    from vmc_sim.reproduction.case_study_runs import record_trace
    from vmc_sim.scenario.schema import load_scenario

    record_trace(load_scenario(data), path)
    return read_trace(path).events


@pytest.mark.sumo
def test_a_scenario_asks_for_a_cut_with_one_key_and_its_trace_says_so(tmp_path):
    whole = recorded(scenario(tmp_path, None), tmp_path / "whole.jsonl")
    cut = recorded(scenario(tmp_path, {"buffer": 200}), tmp_path / "cut.jsonl")
    header = json.loads((tmp_path / "cut.jsonl").read_text().splitlines()[0])["meta"]
    assert header["region"]["timing"] == "exit_times" and header["region"]["buffer"] == 200
    assert header["sumo"]["net_file"].endswith("region.net.xml")
    assert "region" not in json.loads((tmp_path / "whole.jsonl").read_text().splitlines()[0])["meta"]
    a, b = coverage_figures(whole, 0, 600, 120), coverage_figures(cut, 0, 600, 120)
    # the same traffic at the RSU, entered when it reached the region in the whole network's run;
    # with a buffer of one block (200 m) the queues at the next lights are inside the cut
    assert b.joins_per_min == pytest.approx(a.joins_per_min, rel=0.01)
    assert b.occupancy_mean == pytest.approx(a.occupancy_mean, rel=0.02)
    assert b.dwell_median == a.dwell_median


@pytest.mark.sumo
def test_at_low_density_the_tightest_cut_meets_the_whole_network_and_coverage_empties(tmp_path):
    data = scenario(tmp_path, {"buffer": 0}, density=0.1)
    cut = coverage_figures(recorded(data, tmp_path / "cut.jsonl"), 0, 600, 60)
    data["mobility"]["region"] = None
    whole = coverage_figures(recorded(data, tmp_path / "whole.jsonl"), 0, 600, 60)
    assert 0.0 in whole.occupancy and 0.0 in cut.occupancy  # a minute with nobody in coverage
    assert cut.joins_per_min == whole.joins_per_min and cut.dwell_median == whole.dwell_median


def test_a_cut_refuses_a_sumo_configuration_naming_the_key(tmp_path):
    from vmc_sim.scenario.schema import load_scenario

    data = scenario(tmp_path, {"buffer": 10})
    data["mobility"].pop("net_file")
    data["mobility"].pop("route_files")
    data["mobility"]["config_file"] = str(TOWN / "town.sumocfg")
    from vmc_sim.cosim import open_source
    from vmc_sim.scenario.config import ConfigError

    with pytest.raises(ConfigError, match=r"mobility.region: .*network and the routes as files"):
        open_source(load_scenario(data), tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match="buffer"):
        load_scenario(scenario(tmp_path, {"buffer": -5}))
    with pytest.raises(ConfigError, match="timing"):
        load_scenario(scenario(tmp_path, {"buffer": 5, "timing": "guess"}))


def ev(t: float, kind: str, vehicle: str) -> MobilityEvent:
    return MobilityEvent(t, kind, vehicle, "rsu0", 0.0, 0.0, 0.0)


def test_coverage_figures_count_the_window_and_keep_censored_visits_apart():
    events = [ev(0, "join", "a"), ev(30, "leave", "a"), ev(60, "join", "b"), ev(90, "join", "c"), ev(150, "leave", "b")]
    f = coverage_figures(events, 0, 120, 60)
    assert f.joins_per_min == 1.5 and f.leaves_per_min == 0.5  # b leaves after the window
    assert f.dwell == (30.0, 90.0) and f.censored == 1  # c is still in coverage at the end
    assert f.occupancy == (0.5, pytest.approx(1.5))  # a for 30 of the first 60 s; b all, c half of the second
    with pytest.raises(ValueError, match="end > begin"):
        coverage_figures(events, 10, 10)


def test_compare_judges_each_figure_within_the_tolerance_and_pairs_the_seeds():
    whole = [coverage_figures([ev(0, "join", "a"), ev(100, "leave", "a")], 0, 200, 100)] * 2
    same = compare(whole, whole)
    assert all(c.passed for c in same if c.passed is not None)
    late = [coverage_figures([ev(0, "join", "a"), ev(120, "leave", "a")], 0, 200, 100)] * 2
    checks = {c.figure: c for c in compare(whole, late)}
    assert checks["joins per minute"].passed and checks["dwell median (s)"].relative == pytest.approx(0.2)
    assert not checks["dwell median (s)"].passed and checks["vehicles in coverage (mean)"].paired == pytest.approx(
        (0.1, 0.1)
    )
    with pytest.raises(ValueError, match="same seeds"):
        compare(whole, late[:1])


def write_tables(d: Path, rows: list[dict]) -> None:
    with open(d / "coverage.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    made = {
        "made": "2026-12-07, commit abc",
        "command": "python tools/lust_region_cut.py",
        "machine": "m",
        "window": [0, 200],
    }
    (d / "made.json").write_text(json.dumps(made))


def row(variant: str, seed: int, dwell: str, occupancy: str, joins: float = 1.0) -> dict:
    return {
        "region": "single",
        "variant": variant,
        "seed": seed,
        "joins_per_min": joins,
        "leaves_per_min": joins,
        "visits": len(dwell.split()),
        "censored": 0,
        "dwell": dwell,
        "occupancy": occupancy,
        "parts": 0,
        "wall_s": 100.0 if variant == "whole" else 10.0,
        "build_s": 0.0 if variant == "whole" else 5.0,
    }


def test_the_report_names_the_smallest_buffer_that_passes_and_is_a_function_of_its_tables(tmp_path):
    rows = []
    for seed in (1, 2, 3):
        rows += [
            row("whole", seed, "10 20 30", "1.0 2.0"),
            row("exit_times-b0", seed, "10 20 40", "1.0 2.5", joins=1.2),  # fails
            row("exit_times-b150", seed, "10 20 30", "1.0 2.0"),
            row("exit_times-b400", seed, "10 20 30", "1.0 2.0"),
            row("free_flow-b400-f1", seed, "5 10 15", "0.5 1.0", joins=0.7),
        ]
    write_tables(tmp_path, rows)
    results = rr.variant_results(rr._rows(tmp_path / "coverage.csv"), (0.0, 200.0))
    assert rr.chosen(results, "single") == {"exit_times": "exit_times-b150", "free_flow": None}
    text = rr.render(tmp_path)
    assert "the smallest buffer that passes every figure is 150 m (exit_times-b150)" in text
    assert "free_flow: no buffer tried passes every figure." in text
    assert "steps in 10 s what the whole city steps in 100 s (10.0x)" in text
    assert text == rr.render(tmp_path)


def test_when_no_cut_passes_the_report_keeps_the_whole_city_and_shows_the_seeds_it_misses(tmp_path):
    rows = []
    for seed, jam in ((1, "4.0 4.0"), (2, "1.0 2.0")):  # seed 1 jams in the whole city, seed 2 does not
        rows += [row("whole", seed, "10 20 30", jam), row("exit_times-b400", seed, "10 20 30", "1.0 2.0")]
    write_tables(tmp_path, rows)
    text = rr.render(tmp_path)
    assert "exit_times: no buffer tried passes every figure." in text
    assert "So no cut is used for this region" in text and "the whole city the default" in text
    assert "| whole city | 4.00 | 1.50 |" in text and "| exit_times-b400 | 1.50 | 1.50 |" in text


COMMITTED = ROOT / "reports" / "lust_region_cut"


@pytest.mark.skipif(not (COMMITTED / "made.json").is_file(), reason="the region cut report is not committed")
def test_the_committed_report_is_generated_from_its_tables(tmp_path):
    for name in ("coverage.csv", "figures.csv", "made.json"):
        if (COMMITTED / name).is_file():
            shutil.copy(COMMITTED / name, tmp_path / name)
    assert rr.render(tmp_path) == (COMMITTED / "report.md").read_text()


@pytest.mark.sumo
def test_cut_demand_counts_the_vehicles_each_cut_lets_in_per_window(tmp_path, capsys):
    """bench/cut_demand.py: per cut variant, the departures of its routes inside each window."""
    from conftest import load_script

    rsus = [Rsu("rsu0", 200, 200, 80)]
    built = {
        t: build_cut(town(), rsus, RegionCut(buffer=50, timing=CutTiming(t)), root=tmp_path / "cache")
        for t in ("exit_times", "free_flow")
    }
    bench = load_script("bench/cut_demand.py")
    assert bench.main(["--work", str(tmp_path), "--windows", "00:00-00:05", "00:05-00:10"]) == 0
    out = capsys.readouterr().out
    for timing, cut in built.items():
        departs = [float(v.get("depart")) for v in ET.parse(cut.directory / "region.rou.xml").getroot().iter("vehicle")]
        first, second = sum(t < 300 for t in departs), sum(300 <= t < 600 for t in departs)
        assert first + second > 0
        name = "exit_times-b50" if timing == "exit_times" else "free_flow-b50-f1"
        assert f"| {name} | 1 | {first:,}-{first:,} | {second:,}-{second:,} |" in out
    with pytest.raises(SystemExit):
        bench.main(["--work", str(tmp_path / "nothing")])
