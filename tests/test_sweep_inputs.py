"""Sweeps build every point as ``vmc run`` builds a scenario: paths relative to the file that
names them, the run's input checks, and ``--dry-run`` refusing a point whose file is missing."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from vmc_sim.scenario.config import ConfigError
from vmc_sim.sweep import add_sweep_parser, expand

EXAMPLES = Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "fcd"


def sumo_inputs(directory: Path) -> Path:
    """A network, its routes and a ``.sumocfg`` naming both by relative path, in ``directory``."""
    directory.mkdir(parents=True)
    for name in ("grid.net.xml", "grid.rou.xml"):
        (directory / name).write_bytes((EXAMPLES / name).read_bytes())
    cfg = directory / "grid.sumocfg"
    cfg.write_text(
        '<configuration><input><net-file value="grid.net.xml"/><route-files value="grid.rou.xml"/></input>'
        "</configuration>\n"
    )
    return cfg


def sweep_file(directory: Path, body: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sweep.yaml"
    path.write_text(json.dumps({"name": "paths", **body}))
    return path


def dry_run(sweep: Path) -> int:
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", str(sweep), "--dry-run"])
    return args.func(args)


def test_a_base_scenario_elsewhere_reads_its_inputs_relative_to_itself(tmp_path, monkeypatch, capsys):
    from vmc_sim.sweep import load_sweep

    cfg = sumo_inputs(tmp_path / "scenarios" / "inputs")
    base = tmp_path / "scenarios" / "base" / "base.yaml"
    base.parent.mkdir()
    base.write_text(json.dumps({"mobility": {"source": "files", "config_file": "../inputs/grid.sumocfg"}}))
    sweep = sweep_file(tmp_path / "sweeps", {"base": "../scenarios/base/base.yaml", "grid": {"rho": [0.3, 0.5]}})
    monkeypatch.chdir(tmp_path / "sweeps")  # neither the working directory nor the sweep's holds the inputs
    points = expand(*load_sweep(sweep))
    assert [p.scenario.mobility.config_file for p in points] == [str(cfg.resolve())] * 2
    assert dry_run(sweep) == 0
    assert "2 points, all valid" in capsys.readouterr().out


def test_a_grid_value_path_is_read_relative_to_the_sweep_file_and_a_missing_one_refused(tmp_path, monkeypatch):
    from vmc_sim.sweep import load_sweep

    sumo_inputs(tmp_path / "inputs")
    routes = [["../inputs/grid.rou.xml"], ["nowhere.rou.xml"]]
    base = {"mobility": {"source": "files", "net_file": "../inputs/grid.net.xml", "route_files": routes[0]}}
    monkeypatch.chdir(tmp_path / "inputs")
    good = sweep_file(tmp_path / "sweeps", {"base": base, "grid": {"mobility.route_files": routes[:1]}})
    (point,) = expand(*load_sweep(good))  # the inline base's paths, too, are relative to the sweep file
    assert point.scenario.mobility.net_file == str((tmp_path / "inputs" / "grid.net.xml").resolve())
    assert point.scenario.mobility.route_files == [str((tmp_path / "inputs" / "grid.rou.xml").resolve())]
    bad = sweep_file(tmp_path / "sweeps", {"name": "bad", "base": base, "grid": {"mobility.route_files": routes}})
    with pytest.raises(ConfigError) as refused:
        dry_run(bad)
    missing = (tmp_path / "sweeps" / "nowhere.rou.xml").resolve()
    assert str(refused.value) == (
        f'{bad}: grid point p001-route_filesnowhere.rou.xml (mobility.route_files=["nowhere.rou.xml"]): '
        f"mobility.route_files[0]: file not found: {missing}"
    )


def test_a_missing_file_the_base_scenario_names_is_refused_at_dry_run(tmp_path):
    base = tmp_path / "scenarios" / "base.yaml"
    base.parent.mkdir()
    base.write_text(json.dumps({"mobility": {"source": "files", "config_file": "../rand.sumocfg"}}))
    sweep = sweep_file(tmp_path / "sweeps", {"base": "../scenarios/base.yaml", "grid": {"rho": [0.3, 0.5, 0.7]}})
    missing = re.escape(str((tmp_path / "rand.sumocfg").resolve()))
    with pytest.raises(
        ConfigError, match=rf"grid point p000-rho0\.3 .*mobility\.config_file: file not found: {missing}"
    ):
        dry_run(sweep)
