"""Building footprints in SUMO's polygon format: read, written, and drawn between the streets of a
grid network.

SUMO keeps shapes in an additional file (root ``<additional>``, or ``<polygons>`` in older files):
``<poly id="..." type="..." shape="x1,y1 x2,y2 ..."/>``, in network coordinates (metres). That is
what ``polyconvert`` writes from an OSM extract given ``--net-file`` (or a projection), so the
footprints line up with the network the vehicles drive on. A shape given in longitude and
latitude (``geo="1"``, from ``--proj.plain-geo``) is refused: the geometry here is in metres.

Which polygons are buildings: the ``type`` names one of ``types`` (default
:data:`BUILDING_TYPES`, ``("building",)``), alone or followed by ``.`` and a value. With SUMO's
OSM typemap (``data/typemap/osmPolyconvert.typ.xml``) polyconvert writes every OSM ``building=*``
as ``type="building"``; with ``--osm.keep-full-type`` (or without a typemap entry) it writes
``building.yes``, ``building.residential`` and so on. ``building:part`` (a part of a building
already drawn) and area types such as ``amenity.school`` or ``landuse.*`` are not buildings by
default. ``<poi>`` elements and polygons of other types are skipped.

Files may be gzip-compressed (recognised by their first bytes, whatever their name). Errors name
the file and the polygon (:class:`mobility.errors.BuildingsError`).
"""

from __future__ import annotations

import gzip
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast
from xml.sax.saxutils import quoteattr

from mobility.errors import BuildingsError

BUILDING_TYPES: tuple[str, ...] = ("building",)
"""Polygon types read as buildings by default (each also with a ``.value`` suffix)."""

POLY_ROOTS = ("additional", "polygons")
_GRID_TOLERANCE_M = 0.01


@dataclass(frozen=True)
class Footprint:
    """One building's outline: its polygon id, its type and its corners (network coordinates, m;
    the closing point of a closed ring dropped). Refuses a shape with fewer than three distinct
    corners, a coordinate that is not finite, or no area."""

    id: str
    points: tuple[tuple[float, float], ...]
    type: str = "building"

    def __post_init__(self) -> None:
        pts = tuple((float(x), float(y)) for x, y in self.points)
        if len(pts) > 1 and pts[0] == pts[-1]:
            pts = pts[:-1]
        if not all(math.isfinite(v) for p in pts for v in p):
            raise ValueError(f"a corner is not a finite number: {pts}")
        if len(set(pts)) < 3:
            raise ValueError(f"a footprint needs three distinct corners, got {len(set(pts))}")
        object.__setattr__(self, "points", pts)
        if self.area() == 0.0:
            raise ValueError("the footprint has no area (its corners are on one line)")

    def area(self) -> float:
        """The enclosed area (m², shoelace formula; positive whatever the winding)."""
        pts = self.points
        twice = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True))
        return abs(twice) / 2.0

    def bbox(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax)."""
        xs = [p[0] for p in self.points]
        ys = [p[1] for p in self.points]
        return min(xs), min(ys), max(xs), max(ys)


def is_building(poly_type: str, types: Sequence[str] = BUILDING_TYPES) -> bool:
    """Whether a polygon of type ``poly_type`` is a building: one of ``types``, alone or with a
    ``.value`` suffix (``building``, ``building.yes``; not ``building:part``)."""
    return any(poly_type == t or poly_type.startswith(t + ".") for t in types)


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, gunzipped when it starts with gzip's magic number."""
    with path.open("rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rb") if gz else path.open("rb") as f:
        yield cast(IO[bytes], f)


def _parse_shape(path: Path, poly_id: str, shape: str | None) -> list[tuple[float, float]]:
    if not shape or not shape.strip():
        raise BuildingsError(f"{path}: polygon {poly_id!r} has no shape")
    points = []
    for token in shape.split():
        parts = token.split(",")
        try:
            if len(parts) not in (2, 3):  # SUMO allows x,y,z; the height is not used
                raise ValueError
            points.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise BuildingsError(
                f"{path}: polygon {poly_id!r}: malformed shape point {token!r} (expected x,y)"
            ) from None
    return points


def read_poly_file(path: str | Path, types: Sequence[str] = BUILDING_TYPES) -> list[Footprint]:
    """The building footprints of one SUMO polygon file (``types``: see :func:`is_building`)."""
    path = Path(path)
    if not path.is_file():
        raise BuildingsError(f"{path}: polygon file not found")
    out: list[Footprint] = []
    try:
        with _open(path) as f:
            root_seen = False
            count = 0
            for event, el in ET.iterparse(f, events=("start", "end")):
                if not root_seen:
                    root_seen = True
                    if el.tag not in POLY_ROOTS:
                        raise BuildingsError(
                            f"{path}: not a SUMO polygon file (root element <{el.tag}>, expected <additional> or <polygons>)"
                        )
                    continue
                if event != "end" or el.tag != "poly":
                    continue
                count += 1
                poly_id = el.get("id")
                if poly_id is None:
                    raise BuildingsError(f"{path}: polygon number {count} has no id")
                poly_type = el.get("type", "")
                if is_building(poly_type, types):
                    if el.get("geo", "").lower() in ("1", "true"):
                        raise BuildingsError(
                            f'{path}: polygon {poly_id!r} is in longitude and latitude (geo="1"); '
                            "write it in network coordinates (polyconvert --net-file)"
                        )
                    points = _parse_shape(path, poly_id, el.get("shape"))
                    try:
                        out.append(Footprint(poly_id, tuple(points), poly_type))
                    except ValueError as exc:
                        raise BuildingsError(f"{path}: polygon {poly_id!r}: {exc}") from None
                el.clear()
    except ET.ParseError as exc:
        raise BuildingsError(f"{path}: not a SUMO polygon file (XML: {exc})") from None
    except (OSError, EOFError) as exc:
        raise BuildingsError(f"{path}: cannot be read: {exc}") from None
    return out


def _fmt(v: float) -> str:
    return f"{v:.2f}" if v == round(v, 2) else repr(v)


def write_poly_file(path: str | Path, footprints: Iterable[Footprint], color: str = "255,230,230") -> Path:
    """Write ``footprints`` as a SUMO polygon file (``<additional>``, gzip when ``path`` ends in
    ``.gz``), as polyconvert would with SUMO's typemap: each its type, filled, layer -1."""
    path = Path(path)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<additional>"]
    for fp in footprints:
        ring = (*fp.points, fp.points[0])
        shape = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in ring)
        lines.append(
            f"    <poly id={quoteattr(fp.id)} type={quoteattr(fp.type)} color={quoteattr(color)} "
            f'fill="1" layer="-1.00" shape="{shape}"/>'
        )
    lines.append("</additional>\n")
    data = "\n".join(lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def _levels(values: Iterable[float]) -> list[float]:
    """The distinct values, those within a centimetre of each other taken as one."""
    out: list[float] = []
    for v in sorted(values):
        if not out or v - out[-1] > _GRID_TOLERANCE_M:
            out.append(v)
    return out


def grid_blocks(net_file: str | Path, setback_m: float) -> list[Footprint]:
    """One rectangular building block in every cell between the streets of a ``netgenerate
    --grid`` network, ``setback_m`` back from the street centre lines on every side (ids
    ``block_<column>_<row>``). ``setback_m`` must exceed half the road's width for the vehicles to
    stay outside (3.2 m with netgenerate's defaults: one 3.2 m lane each way) and leave a block."""
    net_file = Path(net_file)
    if not setback_m > 0:
        raise ValueError(f"setback_m must be positive, got {setback_m!r}")
    try:
        with _open(net_file) as f:
            root = ET.parse(f).getroot()
    except (ET.ParseError, OSError) as exc:
        raise BuildingsError(f"{net_file}: not a SUMO network ({exc})") from None
    if root.tag != "net":
        raise BuildingsError(f"{net_file}: not a SUMO network (root element <{root.tag}>)")
    try:
        junctions = [
            (float(j.attrib["x"]), float(j.attrib["y"])) for j in root.iter("junction") if j.get("type") != "internal"
        ]
    except (KeyError, ValueError) as exc:
        raise BuildingsError(f"{net_file}: a junction without a position ({exc})") from None
    xs, ys = _levels(x for x, _ in junctions), _levels(y for _, y in junctions)
    if len(xs) < 2 or len(ys) < 2 or len(junctions) != len(xs) * len(ys):
        raise BuildingsError(
            f"{net_file}: not a netgenerate grid ({len(junctions)} junctions on {len(xs)} x {len(ys)} lines)"
        )
    spacing = min(b - a for levels in (xs, ys) for a, b in zip(levels, levels[1:], strict=False))
    if 2 * setback_m >= spacing:
        raise ValueError(f"setback_m {setback_m} leaves no block between streets {spacing:g} m apart")
    blocks = []
    for i, (x0, x1) in enumerate(zip(xs, xs[1:], strict=False)):
        for j, (y0, y1) in enumerate(zip(ys, ys[1:], strict=False)):
            a, b, c, d = x0 + setback_m, y0 + setback_m, x1 - setback_m, y1 - setback_m
            blocks.append(Footprint(f"block_{i}_{j}", ((a, b), (c, b), (c, d), (a, d))))
    return blocks
