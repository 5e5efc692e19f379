"""The SHA-256 of every input file a scenario names, so a resume can refuse inputs that changed.

A run resumed on an edited route file, trace or FCD file would continue on other traffic than
the records before it came from; the manifest keeps each named file's digest (``inputs``) and a
resume compares them before it writes anything.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from mobility.cache import file_sha256

from .inputs import sumocfg_inputs


def _sumocfg_additionals(config_file: str | Path) -> list[str]:
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


def input_files(scenario: Any) -> list[str]:
    """Every input file ``scenario`` names: trace, FCD file (and the route files whose vehicle
    types set its speed limit), network, route files, ``.sumocfg``
    and the files it names. Generated inputs (the embedded city, LuST) are not listed."""
    m = scenario.mobility
    files: list[str | None] = []
    if m.source == "trace":
        files.append(m.trace)
    elif m.source == "fcd":
        files += [m.fcd_file, m.net_file, *m.route_files]  # route files: the vehicle types that set the speed limit
    elif m.source == "files":
        files += [m.config_file, m.net_file, *m.route_files]
        if m.config_file:
            named = sumocfg_inputs(m.config_file)
            files += [named["net_file"], *named["route_files"], *_sumocfg_additionals(m.config_file)]
    seen: dict[str, None] = {}
    for f in files:
        if f:
            seen.setdefault(str(f), None)
    return list(seen)


def input_digests(scenario: Any) -> dict[str, str]:
    """``{path: sha256}`` of every existing input file of ``scenario`` (:func:`input_files`)."""
    return {f: file_sha256(f) for f in input_files(scenario) if Path(f).is_file()}


def changed_inputs(recorded: dict[str, str] | None, now: dict[str, str]) -> list[str]:
    """One line per recorded input whose digest differs now (or that is gone): file, digest then, now.
    A manifest written before digests were kept (``recorded`` None) has nothing to compare."""
    out = []
    for path, old in (recorded or {}).items():
        new = now.get(path)
        if new != old:
            out.append(f"{path} (sha256 {old[:12]} when the run began, {new[:12] if new else 'missing'} now)")
    return out
