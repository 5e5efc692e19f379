"""SUMO's own output files (FCD, trip info, summary) from a live run, and their digests.

A live source runs SUMO; :func:`with_outputs` adds the options that make it write its standard
outputs into a folder (``fcd.xml``, ``tripinfo.xml``, ``summary.xml``), complete once SUMO closes at
the run's end. ``fcd_area="coverage"`` has SUMO itself keep only the vehicles in the RSUs'
coverage: each RSU's circle is given to SUMO as a polygon (a regular 64-gon drawn around the
circle, in ``coverage.poly.xml`` beside the outputs) and ``--fcd-output.filter-shapes`` names
them. SUMO keeps a vehicle whose body touches a polygon, so the file holds every vehicle within
an RSU's radius plus some up to a vehicle length (and the 64-gon's 0.12 % of the radius) outside;
members reached only through V2V relaying further out are not in it. The polygons are shapes
only: they change nothing in the traffic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mobility.cache import file_sha256
from mobility.rsu import Rsu
from mobility.sumo_config import SumoConfig, merge_args

OUTPUTS: dict[str, tuple[str, str]] = {
    "fcd": ("--fcd-output", "fcd.xml"),
    "tripinfo": ("--tripinfo-output", "tripinfo.xml"),
    "summary": ("--summary-output", "summary.xml"),
}
"""Each output's name, the SUMO option that writes it and its file name."""
FCD_AREAS = ("all", "coverage")
POLYGON_FILE = "coverage.poly.xml"
_SIDES = 64


def coverage_polygons(rsus: Sequence[Rsu], path: Path, sides: int = _SIDES) -> list[str]:
    """Write each RSU's coverage as a SUMO polygon around its circle to ``path``; their ids."""
    outer = 1.0 / math.cos(math.pi / sides)  # the polygon's edges touch the circle from outside
    lines, ids = ["<additional>"], []
    for r in rsus:
        pid = f"vmc-coverage:{r.id}"
        points = " ".join(
            f"{r.x + r.radius * outer * math.cos(2 * math.pi * k / sides):.3f},"
            f"{r.y + r.radius * outer * math.sin(2 * math.pi * k / sides):.3f}"
            for k in range(sides)
        )
        lines.append(f'    <poly id="{pid}" type="vmc-coverage" color="0,0,255" fill="false" shape="{points}"/>')
        ids.append(pid)
    path.write_text("\n".join([*lines, "</additional>", ""]))
    return ids


def with_outputs(
    sumo: SumoConfig,
    outputs: Sequence[str],
    directory: str | Path,
    *,
    rsus: Sequence[Rsu] = (),
    fcd_area: str = "all",
) -> SumoConfig:
    """``sumo`` writing the named ``outputs`` into ``directory`` (created), FCD restricted to the
    RSUs' coverage with ``fcd_area="coverage"``."""
    unknown = sorted(set(outputs) - set(OUTPUTS))
    if unknown:
        raise ValueError(f"unknown SUMO output(s) {unknown}; known: {sorted(OUTPUTS)}")
    if fcd_area not in FCD_AREAS:
        raise ValueError(f"fcd_area must be one of {FCD_AREAS}, got {fcd_area!r}")
    if not outputs:
        return sumo
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    args: list[str] = []
    for name in outputs:
        option, file = OUTPUTS[name]
        args += [option, str(out / file)]
    additional = list(sumo.additional_files)
    if "fcd" in outputs and fcd_area == "coverage":
        if not rsus:
            raise ValueError("fcd_area 'coverage' needs the RSUs")
        polygons = out / POLYGON_FILE
        args += ["--fcd-output.filter-shapes", ",".join(coverage_polygons(rsus, polygons))]
        additional.append(str(polygons))
    return dataclasses.replace(sumo, additional_files=additional, extra_args=merge_args(sumo.extra_args, args))


def describe_outputs(directory: str | Path, outputs: Sequence[str], relative_to: str | Path) -> dict[str, Any]:
    """Each output file that exists: its path (relative to ``relative_to``), SHA-256 and size in bytes."""
    out, base = Path(directory), Path(relative_to)
    found: dict[str, Any] = {}
    for name in outputs:
        path = out / OUTPUTS[name][1]
        if path.is_file():
            found[name] = {
                "path": path.relative_to(base).as_posix(),
                "sha256": file_sha256(path),
                "bytes": path.stat().st_size,
            }
    return found
