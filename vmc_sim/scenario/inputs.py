"""The files a scenario names, resolved and checked before anything runs.

Relative paths in a scenario file (``mobility.net_file``, ``route_files``, ``config_file``,
``trace``, ``fcd_file``) are read relative to the scenario file's directory; a path that exists only
relative to the working directory is taken from there (as before). :func:`check_inputs` then has the
scenario's mobility source check its input files (:meth:`vmc_sim.sources.base.SourceKind.check`: a
file missing or of the wrong kind, a name SUMO cannot take, an FCD that breaks physics), naming the
field, and refuses an explicit RSU whose coverage reaches no part of the network's bounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mobility.errors import BuildingsError
from mobility.polygons import read_poly_file
from mobility.sumo_files import geo_bounds

from ..sources.base import SourceInputError
from ..sources.registry import SOURCES
from .config import ConfigError
from .mobility_section import source_fields

FILE_FIELDS = ("net_file", "config_file", "trace", "fcd_file")
LIST_FIELDS = ("route_files", "buildings")


def _resolve(path: str, base: Path) -> str:
    p = Path(path).expanduser()
    if p.is_absolute():
        return str(p)
    here = base / p
    if here.exists() or not p.exists():
        return str(here.resolve())
    return str(p.resolve())  # relative to the working directory (the old reading)


def resolve_paths(data: dict[str, Any], base_dir: str | Path) -> dict[str, Any]:
    """``data`` (a scenario mapping) with its relative mobility file paths resolved against ``base_dir``."""
    m = data.get("mobility")
    if not isinstance(m, dict):
        return data
    base = Path(base_dir)
    for key in FILE_FIELDS:
        if isinstance(m.get(key), str):
            m[key] = _resolve(m[key], base)
    for key in LIST_FIELDS:
        if isinstance(m.get(key), list):
            m[key] = [_resolve(p, base) if isinstance(p, str) else p for p in m[key]]
    return data


def check_rsu_bounds(scenario, where: str = "scenario") -> None:
    """Refuse an explicit RSU whose coverage reaches no part of the network's bounds: no vehicle
    could ever meet it, and the run would complete with no request at all."""
    from mobility.rsu import explicit_lonlat, explicit_xy, geo_distance_m, reaches

    m = scenario.mobility
    if m.rsus.get("placement") != "explicit":
        return
    kind = SOURCES[m.source]
    geo_net = kind.geo_network(source_fields(m)) if explicit_lonlat(m.rsu_config()) else None
    box = geo_bounds(geo_net) if geo_net and Path(geo_net).is_file() else None
    if box is not None:
        name = f"the network {geo_net}"
        for i, rid, lon, lat, radius in explicit_lonlat(m.rsu_config()):
            off = geo_distance_m(lon, lat, box)
            if off > radius:
                raise ConfigError(
                    f"{where}: mobility.rsus.positions[{i}]: RSU {rid!r} at (lon {lon:g}, lat {lat:g}) lies "
                    f"{off:,.0f} m outside the bounds of {name} (lon {box[0]:g}..{box[2]:g}, lat "
                    f"{box[1]:g}..{box[3]:g}), more than its radius of {radius:g} m; no vehicle can reach it"
                )
    network = kind.network(source_fields(m))
    if network is None:
        return
    bounds, name = network
    for i, rsu in explicit_xy(m.rsu_config()):
        if not reaches(rsu, bounds):
            xmin, ymin, xmax, ymax = bounds
            raise ConfigError(
                f"{where}: mobility.rsus.positions[{i}]: RSU {rsu.id!r} at ({rsu.x:g}, {rsu.y:g}) lies outside "
                f"the bounds of {name} (x {xmin:g}..{xmax:g}, y {ymin:g}..{ymax:g} m) by more than "
                f"its radius of {rsu.radius:g} m; no vehicle can reach it"
            )


def check_inputs(scenario, where: str = "scenario") -> None:
    """Refuse, naming the field, any input file of ``scenario`` that is missing or of the wrong kind
    (its source's checks), and an explicit RSU outside the network (:func:`check_rsu_bounds`)."""
    m = scenario.mobility
    try:
        SOURCES[m.source].check(source_fields(m))
    except SourceInputError as e:
        raise ConfigError(f"{where}: {e}") from None
    for i, path in enumerate(m.buildings):
        try:
            if not read_poly_file(path):
                raise ConfigError(f"{where}: mobility.buildings[{i}]: {path} holds no building footprint")
        except (BuildingsError, OSError) as e:
            raise ConfigError(f"{where}: mobility.buildings[{i}]: {e}") from None
    check_rsu_bounds(scenario, where)


def building_files(scenario) -> list[str]:
    """Every building-footprint file the scenario's radio reads: what its source brings (the
    embedded city's blocks) and ``mobility.buildings``."""
    m = scenario.mobility
    return list(dict.fromkeys([*SOURCES[m.source].buildings(source_fields(m)), *m.buildings]))
