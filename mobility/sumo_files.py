"""SUMO's own files read without SUMO: what a ``.sumocfg`` names, a network's bounds and
projection, an XML file's root element, and whether a file is of the kind a field takes.

Each reader streams the file (gzip allowed) and stops at the element it needs; none loads a
network. Used before a run, to check a scenario's inputs and to place or check its RSUs.
"""

from __future__ import annotations

import gzip
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from mobility.sumo_config import sumo_name_problem

EXPECTED = {
    "net_file": ("net",),
    "route_files": ("routes", "additional"),
    "config_file": ("configuration", "sumoConfiguration"),
}
"""The root elements a file of each kind may have."""
KIND = {
    "net": "a SUMO network (<net>)",
    "routes": "a route file (<routes>)",
    "additional": "an additional file",
    "configuration": "a SUMO configuration (.sumocfg)",
    "sumoConfiguration": "a SUMO configuration (.sumocfg)",
}


class SumoFileError(ValueError):
    """A file is missing, not of the kind its field takes, or named so that SUMO cannot take it."""


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


def sumocfg_additionals(config_file: str | Path) -> list[str]:
    """The additional files a ``.sumocfg`` names (resolved against its directory)."""
    base = Path(config_file).resolve().parent
    try:
        root = ET.parse(config_file).getroot()
    except (ET.ParseError, OSError):
        return []
    out: list[str] = []
    for el in root.iter():
        value = el.get("value")
        if el.tag.rsplit("}", 1)[-1] == "additional-files" and value:
            out += [str(base / v.strip()) for v in value.split(",") if v.strip()]
    return out


def check_sumo_file(kind: str, path: str | Path, sumo: bool = False) -> str:
    """The root tag of ``path``, a file of ``kind`` (``net_file``, ``route_files``, ``config_file``);
    :class:`SumoFileError` for a missing file, one of another kind (swapped net and route files are
    named as such) and, with ``sumo`` (SUMO is handed it), a name SUMO cannot take."""
    problem = sumo_name_problem(path) if sumo else None
    if problem:
        raise SumoFileError(f"SUMO cannot take the file {str(path)!r}: {problem}")
    p = Path(path)
    if not p.is_file():
        raise SumoFileError(f"file not found: {path}")
    tag = root_tag(p)
    if tag in EXPECTED[kind]:
        return tag
    what = KIND.get(tag, f"an XML file with root <{tag}>") if tag else "not an XML file"
    hint = ""
    if kind == "net_file" and tag == "routes" or kind == "route_files" and tag == "net":
        hint = "; did you swap net_file and route_files?"
    raise SumoFileError(f"{path} is {what}, not {KIND[EXPECTED[kind][0]]}{hint}")
