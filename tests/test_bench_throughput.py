"""bench/throughput.py and bench/cluster_costs.py on the embedded city, shortened: each prints the
table its RESULTS.md rows are read from, with figures that add up (the timings themselves are not
asserted: performance is measured, not tested)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_throughput_puts_the_pass_beside_bare_sumo_on_the_same_vehicles(capsys):
    pytest.importorskip("sumo")
    throughput = load_script("bench/throughput.py")
    assert (
        throughput.main(["--scenario", str(ROOT / "scenarios" / "city.yaml"), "--pass-only", "--duration", "60"]) == 0
    )
    out = capsys.readouterr().out
    runs = [r[0] for r in json.loads(out.strip().splitlines()[-1])["runs"]]
    assert runs == ["bare SUMO", "mobility pass", "mobility pass, again in the process"]
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["bare"]["vehicle_s"] > 0 and all(wall > 0 for _, wall, _ in figures["runs"])
    assert re.search(r"^\| mobility pass \| [0-9.]+ \| [0-9]+ \| [0-9.]+ \| - \| - \|$", out, re.M)


def test_throughput_profile_names_where_the_pass_goes(capsys):
    pytest.importorskip("sumo")
    throughput = load_script("bench/throughput.py")
    args = ["--scenario", str(ROOT / "scenarios" / "city.yaml"), "--pass-only", "--duration", "30", "--once"]
    assert throughput.main([*args, "--profile", "5"]) == 0
    out = capsys.readouterr().out
    assert "mobility pass under cProfile:" in out and "simulation_step" in out


def test_cluster_costs_projects_the_sweep_with_the_build_shipped_and_built_everywhere(capsys, tmp_path):
    pytest.importorskip("sumo")
    costs = load_script("bench/cluster_costs.py")
    scenario = ROOT / "scenarios" / "city.yaml"
    assert costs.main(["--scenario", str(scenario), "--dataset", "digits", "--points", "8"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"^\| [0-9]+ \|", line)]
    assert [int(r[0]) for r in rows] == [1, 4, 16, 64]
    one = rows[0]
    assert float(one[2]) == float(one[6])  # one machine ships nothing and builds nothing more
    for r in rows[1:]:
        assert float(r[2]) <= float(r[6])  # shipping the built city never costs more than building it
    # later waves with their contributions stored: only the first wave pays for training
    args = ["--scenario", str(scenario), "--dataset", "digits", "--points", "8", "--sumo-s", "100", "--run-s", "900"]
    assert costs.main([*args, "--warm-s", "50"]) == 0
    warm = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 |")][0]
    assert float(warm[2]) == pytest.approx((1000 + 3 * 150) / 3600, abs=0.05)  # 4 waves on 2 cores
    index = tmp_path / "runs.json"  # an index whose run directory is gone is refused by name
    entry = {"run": str(tmp_path / "gone"), "trace_s": 900.0, "finished_after_s": 1000.0, "replicate": 0}
    index.write_text(json.dumps([entry]))
    with pytest.raises(SystemExit) as e:
        costs.main(["--index", str(index), "--scenario", str(scenario), "--dataset", "digits"])
    assert e.value.code == 2
    assert "is gone" in capsys.readouterr().err


def test_warm_point_loads_every_contribution_and_changes_no_record(tmp_path, capsys):
    pytest.importorskip("libsumo")
    import yaml

    from vmc_sim.reproduction.case_study_runs import record_trace
    from vmc_sim.scenario.schema import load_scenario

    data = yaml.safe_load((ROOT / "scenarios" / "city.yaml").read_text())
    data["duration"] = 180.0
    data["coordinator"]["max_requests"] = 6
    data["federated"]["train"]["epochs"] = 1
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(data))
    trace = tmp_path / "trace.jsonl"
    record_trace(load_scenario(scenario), trace)
    warm_point = load_script("bench/warm_point.py")
    assert warm_point.main(["--trace", str(trace), "--scenario", str(scenario)]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["identical"] is True and set(figures["wall_s"]) == {"cold", "warm"}
    cold, warm = figures["cache"]["cold"], figures["cache"]["warm"]
    assert cold["hits"] == 0 and cold["misses"] > 0  # the first run trains every vehicle
    assert warm["misses"] == 0 and warm["hits"] == cold["misses"]  # the second loads them all
