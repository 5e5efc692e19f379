"""The files a scenario names, resolved and checked before anything runs.

Relative paths in a scenario file (``mobility.net_file``, ``route_files``, ``config_file``,
``trace``, ``fcd_file``) are read relative to the scenario file's directory; a path that exists only relative
to the working directory is taken from there (as before). :func:`check_inputs` then opens every
named file and refuses, naming the field, a file that is missing, that is not the kind of SUMO
file the field takes (``<net>`` for ``net_file``, ``<routes>`` for ``route_files``,
``<configuration>`` for ``config_file``; swapped net and route files are recognised), or a
``.sumocfg`` whose network cannot be found, or a file SUMO is handed whose name it cannot take
(:func:`mobility.sumo_config.sumo_name_problem`: a comma, white space at either end). An FCD file
is read whole and refused with what is wrong in it, a vehicle breaking physics included
(:func:`mobility.fcd.inspect_fcd` under :func:`fcd_rules`), with a hint naming the scenario key
that helps. An explicit RSU whose coverage reaches no part of the network's bounds (the net
file's ``convBoundary``; the embedded city's grid) is refused.
"""

from __future__ import annotations

import gzip
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from mobility.fcd_rules import FcdRules, GeoProjection, default_speed_limit
from mobility.sumo_config import sumo_name_problem

from .config import ConfigError

FILE_FIELDS = ("net_file", "config_file", "trace", "fcd_file")
EXPECTED = {
    "net_file": ("net",),
    "route_files": ("routes", "additional"),
    "config_file": ("configuration", "sumoConfiguration"),
}
KIND = {
    "net": "a SUMO network (<net>)",
    "routes": "a route file (<routes>)",
    "additional": "an additional file",
    "configuration": "a SUMO configuration (.sumocfg)",
    "sumoConfiguration": "a SUMO configuration (.sumocfg)",
}


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
    if isinstance(m.get("route_files"), list):
        m["route_files"] = [_resolve(p, base) if isinstance(p, str) else p for p in m["route_files"]]
    return data


def root_tag(path: str | Path) -> str | None:
    """The first element's tag of an XML file (gzip allowed), or None if it is not XML."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for _, elem in ET.iterparse(f, events=("start",)):
                return elem.tag.rsplit("}", 1)[-1]
    except (ET.ParseError, OSError, EOFError):
        return None
    return None


def _check_file(field: str, path: str, where: str, sumo: bool = False) -> str | None:
    """Refuse a missing file, one of the wrong kind, and (``sumo``: SUMO is handed it) a name SUMO cannot take."""
    problem = sumo_name_problem(path) if sumo else None
    if problem:
        raise ConfigError(f"{where}: mobility.{field}: SUMO cannot take the file {path!r}: {problem}")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{where}: mobility.{field}: file not found: {path}")
    tag = root_tag(p)
    key = field.split("[")[0]
    if tag in EXPECTED[key]:
        return tag
    what = KIND.get(tag, f"an XML file with root <{tag}>") if tag else "not an XML file"
    hint = ""
    if key == "net_file" and tag == "routes" or key == "route_files" and tag == "net":
        hint = "; did you swap net_file and route_files?"
    raise ConfigError(f"{where}: mobility.{field}: {path} is {what}, not {KIND[EXPECTED[key][0]]}{hint}")


def sumocfg_inputs(config_file: str | Path) -> dict[str, Any]:
    """The net and route files a ``.sumocfg`` names (resolved against its directory)."""
    base = Path(config_file).resolve().parent
    out: dict[str, Any] = {"net_file": None, "route_files": []}
    try:
        tree = ET.parse(config_file)
    except (ET.ParseError, OSError):
        return out
    for el in tree.getroot().iter():
        tag = el.tag.rsplit("}", 1)[-1]
        value = el.get("value")
        if value is None:
            continue
        if tag == "net-file":
            out["net_file"] = str(base / value.strip())
        elif tag == "route-files":
            out["route_files"] = [str(base / v.strip()) for v in value.split(",") if v.strip()]
    return out


def net_bounds(net_file: str | Path) -> tuple[float, float, float, float] | None:
    """``(xmin, ymin, xmax, ymax)`` of a SUMO network from its ``<location convBoundary=...>``
    (read without loading the network; gzip allowed), or None if it has none."""
    path = Path(net_file)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for _, elem in ET.iterparse(f, events=("start",)):
                if elem.tag.rsplit("}", 1)[-1] == "location":
                    xmin, ymin, xmax, ymax = (float(v) for v in elem.get("convBoundary", "").split(","))
                    return xmin, ymin, xmax, ymax
    except (ET.ParseError, OSError, EOFError, ValueError):
        return None
    return None


def geo_bounds(path: str | Path) -> tuple[float, float, float, float] | None:
    """``(lonmin, latmin, lonmax, latmax)`` of a geo-referenced SUMO network (its ``<location
    origBoundary>`` when ``projParameter`` is not ``!``) or of an OSM file (its ``<bounds>``), read
    without loading the file (gzip allowed); None when it has none."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for _, elem in ET.iterparse(f, events=("start",)):
                tag = elem.tag.rsplit("}", 1)[-1]
                if tag == "location":
                    if elem.get("projParameter", "!") == "!":
                        return None
                    lonmin, latmin, lonmax, latmax = (float(v) for v in elem.get("origBoundary", "").split(","))
                    return lonmin, latmin, lonmax, latmax
                if tag == "bounds":
                    keys = ("minlon", "minlat", "maxlon", "maxlat")
                    lonmin, latmin, lonmax, latmax = (float(elem.get(k, "")) for k in keys)
                    return lonmin, latmin, lonmax, latmax
    except (ET.ParseError, OSError, EOFError, ValueError):
        return None
    return None


def _geo_network_of(m) -> tuple[tuple[float, float, float, float], str] | None:
    """The lon/lat bounds of the network lon/lat RSUs stand on, where known before the run."""
    net = m.net_file
    if m.source == "files" and not net and m.config_file:
        net = sumocfg_inputs(m.config_file)["net_file"]
    if m.source not in ("files", "fcd") or not net or not Path(net).is_file():
        return None
    box = geo_bounds(net)
    return (box, f"the network {net}") if box else None


def _network_of(m) -> tuple[tuple[float, float, float, float], str] | None:
    """The bounds of the network the RSUs stand on and what it is, where known before the run."""
    if m.source == "city":
        c = m.city_config()
        return (
            0.0,
            0.0,
            (c.junctions_x - 1) * c.spacing,
            (c.junctions_y - 1) * c.spacing,
        ), "the embedded city's network"
    net = m.net_file
    if m.source == "files" and not net and m.config_file:
        net = sumocfg_inputs(m.config_file)["net_file"]
    if m.source not in ("files", "fcd") or not net or not Path(net).is_file():
        return None
    bounds = net_bounds(net)
    return (bounds, f"the network {net}") if bounds else None


def check_rsu_bounds(scenario, where: str = "scenario") -> None:
    """Refuse an explicit RSU whose coverage reaches no part of the network's bounds: no vehicle
    could ever meet it, and the run would complete with no request at all."""
    from mobility.rsu import explicit_lonlat, explicit_xy, geo_distance_m, reaches

    m = scenario.mobility
    if m.rsus.get("placement") != "explicit":
        return
    geo = _geo_network_of(m) if explicit_lonlat(m.rsu_config()) else None
    if geo is not None:
        box, name = geo
        for i, rid, lon, lat, radius in explicit_lonlat(m.rsu_config()):
            off = geo_distance_m(lon, lat, box)
            if off > radius:
                raise ConfigError(
                    f"{where}: mobility.rsus.positions[{i}]: RSU {rid!r} at (lon {lon:g}, lat {lat:g}) lies "
                    f"{off:,.0f} m outside the bounds of {name} (lon {box[0]:g}..{box[2]:g}, lat "
                    f"{box[1]:g}..{box[3]:g}), more than its radius of {radius:g} m; no vehicle can reach it"
                )
    network = _network_of(m)
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


def check_placed_rsus(rsus, net_file: str | Path | None) -> None:
    """Refuse an RSU, however it was placed (x/y, lon/lat, junction; LuST's built network
    included), whose coverage reaches no part of the network it was placed on: checked once the
    network is known, before SUMO runs."""
    from mobility.rsu import reaches

    bounds = net_bounds(net_file) if net_file and Path(net_file).is_file() else None
    if bounds is None:
        return
    for rsu in rsus:
        if not reaches(rsu, bounds):
            xmin, ymin, xmax, ymax = bounds
            raise ConfigError(
                f"mobility.rsus: RSU {rsu.id!r} at ({rsu.x:g}, {rsu.y:g}) lies outside the bounds of the network "
                f"{net_file} (x {xmin:g}..{xmax:g}, y {ymin:g}..{ymax:g} m) by more than its radius of "
                f"{rsu.radius:g} m; no vehicle can reach it"
            )


def check_inputs(scenario, where: str = "scenario") -> None:
    """Refuse, naming the field, any file of ``scenario`` that is missing or of the wrong kind, and
    an explicit RSU outside the network (:func:`check_rsu_bounds`)."""
    _check_files(scenario, where)
    check_rsu_bounds(scenario, where)


def _check_files(scenario, where: str) -> None:
    """The files :func:`check_inputs` checks."""
    m = scenario.mobility
    if m.source == "trace":
        if not Path(m.trace).is_file():
            raise ConfigError(f"{where}: mobility.trace: file not found: {m.trace}")
        return
    if m.source == "fcd":
        _check_fcd(m, where)
        return
    if m.source != "files":
        return
    if m.config_file:
        _check_file("config_file", m.config_file, where, sumo=True)
        named = sumocfg_inputs(m.config_file)
        if not m.net_file:
            if not named["net_file"]:
                if m.rsu_config().placement == "auto":
                    raise ConfigError(
                        f"{where}: mobility.config_file: {m.config_file} names no net-file, and "
                        "mobility.rsus.placement 'auto' needs the network: give mobility.net_file"
                    )
            elif not Path(named["net_file"]).is_file():
                raise ConfigError(
                    f"{where}: mobility.config_file: the net-file it names does not exist: {named['net_file']}"
                )
        for r in named["route_files"]:
            if not Path(r).is_file():
                raise ConfigError(f"{where}: mobility.config_file: a route file it names does not exist: {r}")
    if m.net_file:
        _check_file("net_file", m.net_file, where, sumo=True)
    for i, r in enumerate(m.route_files):
        _check_file(f"route_files[{i}]", r, where, sumo=True)


FCD_HINTS = {
    "lonlat": "lon/lat? give `mobility.fcd_geo: true`, with mobility.net_file the network it was recorded on",
    "bounds": "check that mobility.net_file is the network the FCD was recorded on",
    "geo": "mobility.fcd_geo: true reads x and y as lon/lat: check that the FCD was written with --fcd-output.geo, "
    "on mobility.net_file",
    "speed": "a replay would move it in a straight line across every RSU between its two samples; if it is real, "
    "raise mobility.fcd_max_speed",
}
"""What to do about an FCD vehicle that breaks a rule of :mod:`mobility.fcd_rules`, by rule."""


def fcd_rules(m) -> FcdRules:
    """The rules the FCD of mobility section ``m`` must obey: its speed limit (``fcd_max_speed``,
    default 1.5 x the fastest vehicle type of SUMO and of ``route_files``), the bounds and
    projection of ``net_file`` (``fcd_geo``), and what happens to a vehicle that breaks them
    (``fcd_invalid``)."""
    net = m.net_file if m.net_file and Path(m.net_file).is_file() else None
    return FcdRules(
        max_speed=m.fcd_max_speed or default_speed_limit(m.route_files),
        bounds=net_bounds(net) if net else None,
        net_file=net,
        geo=GeoProjection.from_net(net) if net and m.fcd_geo else None,
        drop=m.fcd_invalid == "drop",
    )


def _check_fcd(m, where: str) -> None:
    """The FCD file (read whole, under :func:`fcd_rules`), the network the RSUs are placed on and
    the route files whose vehicle types set the speed limit."""
    from mobility.errors import FcdError
    from mobility.fcd import inspect_fcd
    from mobility.fcd_rules import FcdRuleError

    if not Path(m.fcd_file).is_file():
        raise ConfigError(f"{where}: mobility.fcd_file: file not found: {m.fcd_file}")
    if m.net_file:
        _check_file("net_file", m.net_file, where)
        if m.fcd_geo and GeoProjection.from_net(m.net_file) is None:
            raise ConfigError(
                f"{where}: mobility.fcd_geo: the network {m.net_file} has no geo projection (its <location "
                "projParameter> is '!'), so lon/lat cannot be converted to its x/y"
            )
    for i, r in enumerate(m.route_files):
        _check_file(f"route_files[{i}]", r, where)
    try:
        inspect_fcd(m.fcd_file, fcd_rules(m))
    except FcdRuleError as e:
        drop = e.rule in ("speed", "bounds") and m.fcd_invalid == "refuse"
        more = "; mobility.fcd_invalid: drop leaves such vehicles out" if drop else ""
        raise ConfigError(f"{where}: mobility.fcd_file: {e}; {FCD_HINTS[e.rule]}{more}") from None
    except FcdError as e:
        raise ConfigError(f"{where}: mobility.fcd_file: {e}") from None
    if not m.net_file and m.rsu_config().placement == "auto":
        raise ConfigError(
            f"{where}: mobility.rsus.placement 'auto' places the RSUs on the network: give mobility.net_file "
            "(the network the FCD was recorded on), or placement 'explicit' with positions"
        )
