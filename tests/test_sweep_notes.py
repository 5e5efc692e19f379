"""A sweep's "has no effect" notes say true things: for every field of the mobility section, a note
that calls it inert for a source is checked by running that source with two values of it (the
records must be identical), and a field the source does read gets no note. The notes come from what
each source declares it reads (``SourceKind.reads`` of :mod:`vmc_sim.sources`), and the code that opens a
source refuses to read anything else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cosim import sim_records
from test_sweep import spec, tiny_trace

from vmc_sim.cosim import run_scenario
from vmc_sim.scenario.config import ConfigError, Strict
from vmc_sim.scenario.mobility_section import (
    MobilitySection,
    SumoSection,
    UndeclaredReadError,
    source_fields,
)
from vmc_sim.sources.registry import SOURCES
from vmc_sim.sweep import expand, inert_axes

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "scenarios" / "examples" / "fcd"

RUN = ("trace", "fcd", pytest.param("files", marks=pytest.mark.sumo), pytest.param("city", marks=pytest.mark.sumo))
"""The sources run here (files and city run SUMO); ``lust`` is left out (its rebuild takes minutes): its declaration is held to
the code by :func:`vmc_sim.scenario.mobility_section.source_fields` like the others'."""


def trace_at(path: Path) -> Path:
    """The tiny recorded trace of tests/test_sweep.py at ``path`` (written once)."""
    return path if path.is_file() else tiny_trace(path)


def values(tmp: Path) -> dict[str, tuple[Any, Any]]:
    """Two valid values for every field of the mobility section but ``source`` (dotted, without ``mobility.``)."""
    cfg = tmp / "grid.sumocfg"
    cfg.write_text(
        f'<configuration><input><net-file value="{EXAMPLE / "grid.net.xml"}"/>'
        f'<route-files value="{EXAMPLE / "grid.rou.xml"}"/></input></configuration>'
    )
    footprints = tmp / "buildings.poly.xml"
    footprints.write_text(
        '<additional><poly id="b0" type="building" shape="40,40 160,40 160,160 40,160 40,40"/></additional>\n'
    )
    return {
        "city.seed": (1, 2),
        "net_file": (None, str(EXAMPLE / "grid.net.xml")),
        "route_files": ([], [str(EXAMPLE / "grid.rou.xml")]),
        "config_file": (None, str(cfg)),
        "lust": ({}, {"peak_running": 3000}),
        "trace": (None, str(trace_at(tmp / "other.jsonl"))),
        "fcd_file": (None, str(EXAMPLE / "fcd.xml")),
        "fcd_step_length": (None, 2.0),
        "density": (0.5, 1.0),
        "sumo.backend": ("libsumo", "traci"),
        "sumo.step_length": (1.0, 2.0),
        "sumo.seed": (1, 2),
        "sumo.begin": (None, 10.0),
        "sumo.time_to_teleport": (None, 30.0),
        "sumo.extra_args": ([], ["--no-warnings"]),
        "rsus.radius": (100.0, 200.0),
        "coverage.state_interval": (5.0, 1.0),
        "trace_cache": (None, str(tmp / "trace_cache")),
        "outputs": ([], ["tripinfo"]),
        "fcd_area": ("all", "coverage"),
        "fcd_max_speed": (None, 60.0),
        "fcd_geo": (False, True),
        "fcd_invalid": ("refuse", "drop"),
        "buildings": ([], [str(footprints)]),
        "region": (None, {"buffer": 50.0, "timing": "free_flow"}),
    }


def base(source: str, tmp: Path) -> dict[str, Any]:
    """A tiny scenario of ``source`` (a few seconds of traffic, a dozen clients of digits)."""
    mobility: dict[str, Any] = {
        "trace": {"source": "trace", "trace": str(trace_at(tmp / "trace.jsonl"))},
        "fcd": {
            "source": "fcd",
            "fcd_file": str(EXAMPLE / "fcd.xml"),
            "fcd_step_length": 1.0,
            "net_file": str(EXAMPLE / "grid.net.xml"),
        },
        "files": {
            "source": "files",
            "net_file": str(EXAMPLE / "grid.net.xml"),
            "route_files": [str(EXAMPLE / "grid.rou.xml")],
        },
        "city": {
            "source": "city",
            "city": {
                "junctions_x": 3,
                "junctions_y": 3,
                "spacing": 200.0,
                "lanes": 1,
                "period": 5.0,
                "duration": 120.0,
                "min_distance": 300.0,
                "cache_dir": str(tmp / "city"),
            },
        },
    }[source]
    return {
        "name": source,
        "seed": 0,
        "duration": 120.0,
        "mobility": mobility,
        "federated": {
            "dataset": "digits",
            "num_clients": 12,
            "model": "mlp",
            "methods": ["fsosa"],
            "train": {"epochs": 1, "fisher": "diagonal"},
        },
        "compute": {"time_model": "device"},
        "coordinator": {"warmup": 5.0 if source == "trace" else 30.0, "min_clients": 4},  # the trace lasts 40 s
    }


def records_over(source: str, field: str, pair: tuple[Any, Any], tmp: Path) -> list[list[dict[str, Any]]]:
    """The records of a run of ``source`` at each value of ``field``, the points built as a sweep builds them."""
    points = expand(spec({f"mobility.{field}": list(pair)}, base=base(source, tmp)))
    return [sim_records(run_scenario(p.scenario, out=tmp / "runs", progress=False, say=lambda s: None)) for p in points]


def noted(source: str, field: str, pair: tuple[Any, Any], tmp: Path) -> bool:
    """Whether a sweep over ``field`` on ``source`` notes it as without effect."""
    points = expand(spec({"seed": [0]}, base=base(source, tmp)))  # the notes look at the points' sources
    notes = inert_axes(spec({f"mobility.{field}": list(pair)}), points)
    assert len(notes) <= 1
    return bool(notes) and f"['{source}']" in notes[0] and f"(mobility.{field})" in notes[0]


def test_every_field_of_the_mobility_section_has_two_values_here(tmp_path):
    fields = set(values(tmp_path))
    top = set(MobilitySection.model_fields) - {"source", "sumo"}
    assert {f.split(".")[0] for f in fields} >= top, "give a new mobility field two values in values()"
    assert {f"sumo.{f}" for f in SumoSection.model_fields} <= fields
    assert set(SOURCES.names()) >= {"city", "files", "lust", "trace", "fcd"}


@pytest.mark.parametrize("source", RUN)
def test_a_field_noted_without_effect_changes_no_record(source, tmp_path):
    pairs = values(tmp_path)
    inert, refused = [], []
    for field, pair in pairs.items():
        if not noted(source, field, pair, tmp_path):
            continue
        try:
            first, second = records_over(source, field, pair, tmp_path)
        except ConfigError:  # the sweep refuses the grid before it runs: no note is printed
            refused.append(field)
            continue
        assert first, f"{source}: {field} recorded nothing"
        assert first == second, f"{source}: the note says {field} has no effect, but the records differ"
        inert.append(field)
    assert refused == (["outputs"] if source in ("trace", "fcd") else [])
    read = {
        "trace": {"trace", "sumo.step_length"},
        "fcd": {"fcd_file", "fcd_step_length", "net_file", "sumo.step_length", "sumo.begin", "rsus.radius"},
        "files": {"net_file", "route_files", "config_file", "density", "rsus.radius"},
        "city": {"city.seed", "density", "rsus.radius"},
    }[source]
    assert not read & set(inert), f"{source} reads these, yet they are noted without effect"
    assert len(inert) >= 5


@pytest.mark.parametrize(
    ("source", "field", "pair"),
    [
        ("fcd", "rsus.radius", (100.0, 200.0)),
        ("fcd", "sumo.step_length", (1.0, 2.0)),
        ("trace", "sumo.step_length", (1.0, 2.0)),
    ],
)
def test_a_field_the_source_reads_gets_no_note_and_changes_the_records(source, field, pair, tmp_path):
    assert not noted(source, field, pair, tmp_path)
    first, second = records_over(source, field, pair, tmp_path)
    assert first != second
    if field == "rsus.radius":  # a larger cell meets more vehicles: more requests
        assert len(first) < len(second)


def test_a_sweep_prints_a_note_only_for_what_its_source_ignores(tmp_path, capsys):
    import argparse

    from vmc_sim.sweep import add_sweep_parser

    sweep = tmp_path / "sweep.yaml"
    grid = {"radius": [100, 200], "mobility.sumo.step_length": [1.0, 2.0], "density": [0.5, 1.0]}
    sweep.write_text(json.dumps({"name": "fcd", "base": base("fcd", tmp_path), "grid": grid}))
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", str(sweep), "--dry-run"])
    assert args.func(args) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: grid key 'density' (mobility.density) has no effect with mobility source ['fcd']: it does not read it"
    ]


def test_code_that_opens_a_source_cannot_read_a_field_it_does_not_declare(tmp_path):
    sc = expand(spec({"seed": [0]}, base=base("fcd", tmp_path)))[0].scenario
    m = source_fields(sc.mobility)
    assert m.sumo.step_length == 1.0 and m.sumo.begin is None and m.rsu_config().radius == 200.0
    for read in (lambda: m.sumo.seed, lambda: m.density, lambda: m.city_config(), lambda: m.trace_cache):
        with pytest.raises(UndeclaredReadError, match="mobility source 'fcd' read mobility"):
            read()
    assert isinstance(source_fields(base_city(tmp_path)).sumo, Strict)  # a source that reads all of it


def base_city(tmp: Path) -> MobilitySection:
    return expand(spec({"seed": [0]}, base=base("city", tmp)))[0].scenario.mobility
