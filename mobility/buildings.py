"""Buildings that block a radio link: footprints from SUMO's polygon files (:mod:`mobility.polygons`)
behind a uniform-grid index, and the straight ground line between two antennas tested against them.

A link is decided in two dimensions: the segment between the antennas' ground positions and the
footprints' outlines. Heights are not looked at (every building is taken as taller than both
antennas, as in 3GPP TR 37.885's urban grid and in Veins' obstacle model). The rules:

* A footprint is the closed polygon's *interior*. The segment is blocked when some part of it,
  of any length, lies in the interior of some footprint; an antenna inside a footprint blocks its
  link. A segment that only touches a building (passes through a corner, or runs along a wall)
  is not blocked: it never enters. ns-3's ``Box::IsIntersect`` takes the closed box instead, so
  the two differ on such touching lines only (points within 0.1 um of a wall count as on it).
* :meth:`Buildings.crossing` gives what Sommer et al.'s obstacle shadowing model needs: the walls
  crossed (each time the segment passes from outside a footprint to inside or back; an antenna
  inside a building crosses no wall where it stands; a corner passed through into the interior
  is one wall) and the length of the segment inside footprints (m). Overlapping footprints count
  their overlap once each, as Veins does.

:func:`obstacle_loss_db` turns a crossing into that model's loss, ``beta * walls + gamma *
metres``, with C. Sommer, D. Eckhoff, R. German, F. Dressler, "A Computationally Inexpensive
Empirical Model of IEEE 802.11p Radio Shadowing in Urban Environments", WONS 2011 (technical
report CS-2010-06, Univ. Erlangen, 2010): beta = 9 dB per wall and gamma = 0.4 dB per metre,
fitted to 5.89 GHz measurements among buildings. The values are those of Veins' example
configuration (``examples/veins/config.xml``: ``db-per-cut="9" db-per-meter="0.4"``), which Veins
applies per intersection of the line with a polygon edge plus per metre inside, as here; the paper
itself was cited from memory, not re-read.

The index: the footprints' bounding boxes are registered in the square cells they overlap
(``cell_m``, by default twice the median footprint extent); a query walks the cells the segment
passes through, column by column, and tests only the footprints registered there, exactly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from mobility.polygons import BUILDING_TYPES, Footprint, grid_blocks, read_poly_file, write_poly_file

__all__ = [
    "BUILDING_TYPES",
    "SOMMER_PER_METRE_DB",
    "SOMMER_PER_WALL_DB",
    "Buildings",
    "Crossing",
    "Footprint",
    "grid_blocks",
    "obstacle_loss_db",
    "read_poly_file",
    "write_poly_file",
]

SOMMER_PER_WALL_DB = 9.0
"""Sommer et al.'s beta: the loss of each wall crossed (dB)."""
SOMMER_PER_METRE_DB = 0.4
"""Sommer et al.'s gamma: the loss of each metre inside buildings (dB/m)."""

_T_SLACK = 1e-9  # crossings collected this far outside an edge or the segment: an extra cut only splits an interval
_T_MERGE = 1e-12  # cuts closer than this (in segment lengths) are one
_ON_WALL_M = 1e-7  # a point this close to a wall is on it (outside the interior)
_PAD_M = 1e-6  # the index visits cells this much beyond the segment, against rounding


class Crossing(NamedTuple):
    """What a segment meets: ``walls`` crossed, metres ``inside_m`` footprints, and the number of
    ``buildings`` it enters (0: not blocked)."""

    walls: int
    inside_m: float
    buildings: int

    @property
    def blocked(self) -> bool:
        """Whether the segment enters a building (the link is NLOS)."""
        return self.buildings > 0


def obstacle_loss_db(
    crossing: Crossing, per_wall_db: float = SOMMER_PER_WALL_DB, per_metre_db: float = SOMMER_PER_METRE_DB
) -> float:
    """Sommer et al.'s obstacle loss (dB): ``per_wall_db * walls + per_metre_db * inside_m``
    (defaults 9 dB and 0.4 dB/m; see the module's docstring for the source)."""
    return per_wall_db * crossing.walls + per_metre_db * crossing.inside_m


class _Shape:
    """A footprint prepared for the tests: corner coordinates and bounding box."""

    __slots__ = ("xs", "ys", "xmin", "ymin", "xmax", "ymax")

    def __init__(self, fp: Footprint) -> None:
        self.xs = tuple(p[0] for p in fp.points)
        self.ys = tuple(p[1] for p in fp.points)
        self.xmin, self.ymin, self.xmax, self.ymax = fp.bbox()


def _strictly_inside(px: float, py: float, s: _Shape) -> bool:
    """Whether the point is in the footprint's interior (on a wall, within 0.1 um: no)."""
    xs, ys = s.xs, s.ys
    inside = False
    j = len(xs) - 1
    for i in range(len(xs)):
        xi, yi, xj, yj = xs[i], ys[i], xs[j], ys[j]
        ex, ey = xj - xi, yj - yi
        wx, wy = px - xi, py - yi
        length2 = ex * ex + ey * ey
        t = min(1.0, max(0.0, (wx * ex + wy * ey) / length2)) if length2 > 0 else 0.0
        if (wx - t * ex) ** 2 + (wy - t * ey) ** 2 <= _ON_WALL_M * _ON_WALL_M:
            return False
        if (yi > py) != (yj > py) and px < xi + (py - yi) * ex / ey:
            inside = not inside
        j = i
    return inside


def _cuts(x1: float, y1: float, dx: float, dy: float, s: _Shape) -> list[float]:
    """Where along the segment (0 to 1) it meets the footprint's outline, with both ends, sorted."""
    ts = [0.0, 1.0]
    xs, ys = s.xs, s.ys
    n = len(xs)
    for k in range(n):
        ax, ay = xs[k], ys[k]
        ex, ey = xs[(k + 1) % n] - ax, ys[(k + 1) % n] - ay
        wx, wy = ax - x1, ay - y1
        denom = dx * ey - dy * ex
        if denom != 0.0:
            t = (wx * ey - wy * ex) / denom
            u = (wx * dy - wy * dx) / denom
            if -_T_SLACK <= t <= 1.0 + _T_SLACK and -_T_SLACK <= u <= 1.0 + _T_SLACK:
                ts.append(min(1.0, max(0.0, t)))
        elif wx * dy - wy * dx == 0.0 and (dd := dx * dx + dy * dy) > 0.0:  # along the wall's line
            for qx, qy in ((ax, ay), (ax + ex, ay + ey)):
                t = ((qx - x1) * dx + (qy - y1) * dy) / dd
                if 0.0 < t < 1.0:
                    ts.append(t)
    ts.sort()
    return ts


def _pieces(x1: float, y1: float, dx: float, dy: float, s: _Shape) -> Iterator[tuple[float, bool]]:
    """The segment cut at the outline: (length as a fraction of the segment, inside) per piece."""
    ts = _cuts(x1, y1, dx, dy, s)
    start = ts[0]
    for t in ts[1:]:
        if t - start > _T_MERGE or (t == 1.0 and start == 0.0):
            mid = 0.5 * (start + t)
            yield t - start, _strictly_inside(x1 + mid * dx, y1 + mid * dy, s)
            start = t


def _meets_box(x1: float, y1: float, x2: float, y2: float, s: _Shape) -> bool:
    """Whether the segment meets the footprint's closed bounding box (Liang-Barsky clipping)."""
    lo, hi = 0.0, 1.0
    for p, q0, qmin, qmax in ((x2 - x1, x1, s.xmin, s.xmax), (y2 - y1, y1, s.ymin, s.ymax)):
        if p == 0.0:
            if q0 < qmin or q0 > qmax:
                return False
            continue
        ta, tb = (qmin - q0) / p, (qmax - q0) / p
        if ta > tb:
            ta, tb = tb, ta
        lo, hi = max(lo, ta), min(hi, tb)
        if lo > hi + _T_SLACK:
            return False
    return True


class Buildings:
    """Building footprints with a uniform-grid index: does a link's ground line enter one
    (:meth:`blocks`), and how far (:meth:`crossing`)."""

    def __init__(self, footprints: Iterable[Footprint], cell_m: float | None = None) -> None:
        self.footprints: tuple[Footprint, ...] = tuple(footprints)
        self._shapes = [_Shape(fp) for fp in self.footprints]
        if cell_m is None:
            extents = [max(s.xmax - s.xmin, s.ymax - s.ymin) for s in self._shapes]
            cell_m = max(1.0, 2.0 * statistics.median(extents)) if extents else 1.0
        if not (math.isfinite(cell_m) and cell_m > 0):
            raise ValueError(f"cell_m must be a positive number of metres, got {cell_m!r}")
        self.cell_m = float(cell_m)
        shapes = self._shapes
        self._x0 = min((s.xmin for s in shapes), default=0.0)
        self._y0 = min((s.ymin for s in shapes), default=0.0)
        self._grid: dict[tuple[int, int], list[int]] = {}
        for k, s in enumerate(shapes):
            for i in range(self._col(s.xmin), self._col(s.xmax) + 1):
                for j in range(self._row(s.ymin), self._row(s.ymax) + 1):
                    self._grid.setdefault((i, j), []).append(k)
        self._ncols = max((i for i, _ in self._grid), default=-1) + 1
        self._nrows = max((j for _, j in self._grid), default=-1) + 1

    @classmethod
    def from_poly_files(
        cls, *paths: str | Path, types: Sequence[str] = BUILDING_TYPES, cell_m: float | None = None
    ) -> Buildings:
        """The buildings of one or more SUMO polygon files (``types``: which polygon types are
        buildings, see :func:`mobility.polygons.is_building`)."""
        return cls((fp for p in paths for fp in read_poly_file(p, types)), cell_m)

    @classmethod
    def from_polygons(cls, polygons: Iterable[Sequence[tuple[float, float]]], cell_m: float | None = None) -> Buildings:
        """Buildings from plain corner lists (network coordinates), with ids ``"0"``, ``"1"``, ..."""
        return cls((Footprint(str(k), tuple(p)) for k, p in enumerate(polygons)), cell_m)

    def __len__(self) -> int:
        return len(self.footprints)

    def __repr__(self) -> str:
        return f"Buildings({len(self)} footprints, cell {self.cell_m:g} m, {len(self._grid)} cells)"

    @property
    def bounds(self) -> tuple[float, float, float, float] | None:
        """(xmin, ymin, xmax, ymax) over every footprint; None without any."""
        if not self._shapes:
            return None
        s = self._shapes
        return (min(a.xmin for a in s), min(a.ymin for a in s), max(a.xmax for a in s), max(a.ymax for a in s))

    def _col(self, x: float) -> int:
        return math.floor((x - self._x0) / self.cell_m)

    def _row(self, y: float) -> int:
        return math.floor((y - self._y0) / self.cell_m)

    def _candidates(self, x1: float, y1: float, x2: float, y2: float) -> list[int]:
        """The footprints registered in the cells the segment passes through, each once."""
        if not self._grid:
            return []
        if x1 > x2:
            x1, y1, x2, y2 = x2, y2, x1, y1
        found: dict[int, None] = {}
        c = self.cell_m
        slope = (y2 - y1) / (x2 - x1) if x2 != x1 else 0.0
        for i in range(max(self._col(x1 - _PAD_M), 0), min(self._col(x2 + _PAD_M), self._ncols - 1) + 1):
            xa = max(x1, self._x0 + i * c)
            xb = min(x2, self._x0 + (i + 1) * c)
            ya, yb = (y1 + (xa - x1) * slope, y1 + (xb - x1) * slope) if x2 != x1 else (y1, y2)
            lo, hi = min(ya, yb) - _PAD_M, max(ya, yb) + _PAD_M
            for j in range(max(self._row(lo), 0), min(self._row(hi), self._nrows - 1) + 1):
                for k in self._grid.get((i, j), ()):
                    found[k] = None
        return list(found)

    def inside(self, x: float, y: float) -> bool:
        """Whether the point is inside a building (on a wall: no)."""
        cell = self._grid.get((self._col(x), self._row(y)), ())
        return any(_strictly_inside(x, y, self._shapes[k]) for k in cell)

    def blocks(self, x1: float, y1: float, x2: float, y2: float) -> bool:
        """Whether the ground segment between two antennas enters a building (NLOS): an antenna
        inside one blocks; a line that only touches a corner or a wall does not."""
        dx, dy = x2 - x1, y2 - y1
        for k in self._candidates(x1, y1, x2, y2):
            s = self._shapes[k]
            if _meets_box(x1, y1, x2, y2, s) and any(inside for _, inside in _pieces(x1, y1, dx, dy, s)):
                return True
        return False

    def crossing(self, x1: float, y1: float, x2: float, y2: float) -> Crossing:
        """The walls the segment crosses, its length inside buildings (m) and the buildings it
        enters, for an obstacle loss per wall and per metre (:func:`obstacle_loss_db`)."""
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy)
        walls, inside_m, entered = 0, 0.0, 0
        for k in self._candidates(x1, y1, x2, y2):
            s = self._shapes[k]
            if not _meets_box(x1, y1, x2, y2, s):
                continue
            previous: bool | None = None
            hit = False
            for fraction, inside in _pieces(x1, y1, dx, dy, s):
                if previous is not None and inside != previous:
                    walls += 1
                if inside:
                    hit = True
                    inside_m += fraction * length
                previous = inside
            entered += hit
        return Crossing(walls, inside_m, entered)
