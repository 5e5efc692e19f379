"""What recorded FCD must obey before it is replayed: physics, the network's bounds, its coordinates.

A replay interpolates each vehicle linearly between two samples (:mod:`mobility.fcd`), so a
vehicle that jumps kilometres between two samples would be drawn through every cell on the
straight line between them, joining and leaving RSUs it never came near. :class:`FcdRules` says
what a file must satisfy and :class:`RuleCheck` checks it while the file is streamed once:

* **Speed.** Between two consecutive samples ``dt`` apart a vehicle moves at most
  ``max_speed * dt + JUMP_M``. ``JUMP_M`` (5 m) is a lane change, which SUMO makes within one
  step (3.2 m with SUMO's default lane width), plus the FCD's rounding. The default
  ``max_speed`` (:func:`default_speed_limit`) is ``SPEED_MARGIN`` (1.5) times the fastest vehicle
  type the recording could have used: SUMO's built-in types, the fastest of which is its default
  car, ``DEFAULT_VEHTYPE``, at 55.56 m/s (200 km/h), and any ``<vType>`` in the route or
  additional files given (its ``maxSpeed``, else its ``vClass``'s default). A SUMO vehicle never
  drives faster than its type's ``maxSpeed``; the margin leaves room for a teleport, which moves a
  vehicle at the speed limit of the edges it skips rather than at its own. With no file, the limit
  is 83.3 m/s (300 km/h): a bound that no road vehicle reaches and that catches jumps, not fast
  driving. The FCD's own ``type`` attribute is not needed (``--fcd-output.attributes`` may leave
  it out): every vehicle of a SUMO run has one of the types its inputs define or a built-in one.
* **Bounds.** Given the network's bounds (its ``convBoundary``), a position more than
  ``BOUNDS_MARGIN_M`` (50 m) outside them is refused: the FCD was not recorded on that network,
  or it is in lon/lat.
* **Coordinates.** SUMO's ``--fcd-output.geo`` writes lon/lat in ``x`` and ``y``. With ``geo``
  (a :class:`GeoProjection`, the network's projection read from its ``<location>``) every
  position is converted to network x/y with sumolib (``Net.convertLonLat2XY``, which needs
  pyproj). Without it, a file whose positions all lie within -180..180 x -90..90 while its
  vehicles move less than a thousandth of what their ``speed`` says (``LONLAT_RATIO``, over at
  least ``LONLAT_EVIDENCE_M`` of expected travel) is refused as lon/lat: metres and degrees differ
  by a factor of about 100,000, so the test cannot mistake one for the other.

A vehicle that breaks the speed or bounds rule is refused (:class:`FcdRuleError`, naming the
file, the vehicle and the time) or, with ``drop``, left out of the replay entirely and listed with
the reason (all its samples: a track with a jump cannot be trusted on either side of it). A file
that looks like lon/lat is refused either way, and so is one whose every vehicle would be dropped.
"""

from __future__ import annotations

import gzip
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mobility.errors import FcdError

DEFAULT_VTYPE_MAX_SPEED = 55.56
"""m/s: SUMO's default car (``DEFAULT_VEHTYPE``, vClass passenger), the fastest of its built-in types."""

VCLASS_MAX_SPEED: dict[str, float] = {
    "bus": 27.78,
    "coach": 27.78,
    "truck": 36.11,
    "trailer": 36.11,
    "moped": 16.67,
    "bicycle": 13.89,
    "pedestrian": 10.44,
    "wheelchair": 8.33,
    "scooter": 6.94,
    "tram": 22.22,
    "rail_urban": 27.78,
    "subway": 27.78,
    "rail": 44.44,
    "rail_electric": 61.11,
    "rail_fast": 91.67,
    "ship": 4.12,
}
"""m/s: SUMO 1.28's default ``maxSpeed`` of each vehicle class that differs from 55.56 (read from
libsumo's ``vehicletype.getMaxSpeed`` for a ``<vType vClass=...>`` without ``maxSpeed``)."""

SPEED_MARGIN = 1.5
JUMP_M = 5.0
BOUNDS_MARGIN_M = 50.0
LONLAT_RATIO = 1e-3
LONLAT_EVIDENCE_M = 100.0
_EMPTY = np.zeros((0, 3))

_VTYPES: dict[tuple[str, int, int], float] = {}


def _vtype_speeds(path: Path) -> float:
    """The largest maxSpeed of the ``<vType>`` elements of one XML file (0 if it has none)."""
    st = path.stat()
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key in _VTYPES:
        return _VTYPES[key]
    fastest = 0.0
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            depth, root = 0, None
            for kind, elem in ET.iterparse(f, events=("start", "end")):
                if kind == "start":
                    root = elem if root is None else root
                    depth += 1
                    continue
                depth -= 1
                if elem.tag.rsplit("}", 1)[-1] == "vType":
                    text = elem.get("maxSpeed")
                    vclass = elem.get("vClass", "passenger")
                    speed = float(text) if text else VCLASS_MAX_SPEED.get(vclass, DEFAULT_VTYPE_MAX_SPEED)
                    if math.isfinite(speed):
                        fastest = max(fastest, speed)
                if depth == 1 and root is not None:
                    root.clear()  # a top-level element is done: a route file of millions of vehicles stays small
    except (ET.ParseError, OSError, EOFError, ValueError) as exc:
        raise FcdError(f"{path}: cannot read its vehicle types ({exc})") from None
    _VTYPES[key] = fastest
    return fastest


def vtype_max_speed(files: Iterable[str | os.PathLike[str]] = ()) -> float:
    """The largest ``maxSpeed`` (m/s) among SUMO's built-in vehicle types and the ``<vType>`` of
    ``files`` (route or additional files; a type without ``maxSpeed`` has its vClass's default)."""
    return max([DEFAULT_VTYPE_MAX_SPEED, *(_vtype_speeds(Path(f)) for f in files)])


def default_speed_limit(files: Iterable[str | os.PathLike[str]] = ()) -> float:
    """The default speed limit of :class:`FcdRules`: ``SPEED_MARGIN`` times :func:`vtype_max_speed`."""
    return round(SPEED_MARGIN * vtype_max_speed(files), 2)


@dataclass(frozen=True)
class GeoProjection:
    """A network's lon/lat projection (its ``<location>``), converting lon/lat to its x/y."""

    net_file: str
    proj: str
    offset: tuple[float, float]

    @classmethod
    def from_net(cls, net_file: str | os.PathLike[str]) -> GeoProjection | None:
        """The projection of a SUMO network, read from its ``<location>`` without loading it;
        None when it has none (``projParameter="!"``)."""
        path = Path(net_file)
        opener: Any = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rb") as f:
                for _, elem in ET.iterparse(f, events=("start",)):
                    if elem.tag.rsplit("}", 1)[-1] == "location":
                        proj = elem.get("projParameter", "!")
                        if proj == "!":
                            return None
                        dx, dy = (float(v) for v in elem.get("netOffset", "0,0").split(","))
                        return cls(str(net_file), proj, (dx, dy))
        except (ET.ParseError, OSError, EOFError, ValueError):
            return None
        return None

    def _net(self) -> Any:
        try:
            import pyproj  # noqa: F401  (sumolib converts with it)
        except ImportError:
            raise FcdError("converting lon/lat needs pyproj (pip install pyproj)") from None
        import sumolib

        net = sumolib.net.Net()
        net.setLocation(f"{self.offset[0]},{self.offset[1]}", "0,0,0,0", "0,0,0,0", self.proj)
        try:
            net.getGeoProj()
        except Exception as exc:  # pyproj refuses the projection string
            raise FcdError(f"{self.net_file}: its projection {self.proj!r} cannot be used ({exc})") from None
        return net

    def to_xy(self, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Network x/y (m) of lon/lat arrays (degrees), as ``sumolib`` converts them."""
        net = _NETS.get(self)
        if net is None:
            net = _NETS[self] = self._net()
        x, y = net.convertLonLat2XY(lon, lat)
        return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


_NETS: dict[GeoProjection, Any] = {}


@dataclass(frozen=True)
class FcdRules:
    """What an FCD must obey (module docstring). ``bounds``: ``(xmin, ymin, xmax, ymax)`` of the
    network ``net_file``; ``geo``: convert lon/lat with it; ``drop``: leave offending vehicles out
    instead of refusing the file."""

    max_speed: float = field(default_factory=default_speed_limit)
    bounds: tuple[float, float, float, float] | None = None
    net_file: str | None = None
    geo: GeoProjection | None = None
    drop: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.max_speed, (int, float)) and math.isfinite(self.max_speed) and self.max_speed > 0):
            raise ValueError(f"FCD rules: max_speed must be a positive number of m/s, got {self.max_speed!r}")

    def to_dict(self) -> dict[str, Any]:
        """What a trace header and a manifest record of the rules."""
        return {
            "max_speed": self.max_speed,
            "bounds": list(self.bounds) if self.bounds else None,
            "geo": self.geo is not None,
            "invalid": "drop" if self.drop else "refuse",
        }

    def positions(self, path: Path, t: float, ids: list[str], states: np.ndarray) -> np.ndarray:
        """``states`` with lon/lat converted to network x/y when ``geo`` is set (else as given)."""
        if self.geo is None or not len(ids):
            return states
        lon, lat = states[:, 0], states[:, 1]
        bad = np.flatnonzero((np.abs(lon) > 180) | (np.abs(lat) > 90))
        if len(bad):
            i = int(bad[0])
            raise FcdError(
                f"{path}: time step {t:g}: vehicle {ids[i]!r} is at ({lon[i]:g}, {lat[i]:g}), which is not lon/lat "
                "(longitude -180..180, latitude -90..90); lon/lat conversion is for an FCD written with "
                "--fcd-output.geo"
            )
        x, y = self.geo.to_xy(lon, lat)
        out = states.copy()
        out[:, 0], out[:, 1] = x, y
        if not np.isfinite(out[:, :2]).all():
            i = int(np.flatnonzero(~np.isfinite(out[:, :2]).all(axis=1))[0])
            raise FcdError(f"{path}: time step {t:g}: vehicle {ids[i]!r}'s lon/lat cannot be converted to x/y")
        return out


class FcdRuleError(FcdError):
    """A vehicle of an FCD breaks one of :class:`FcdRules`. ``rule``: ``speed``; ``bounds`` (off the
    network); ``lonlat`` (lon/lat read as metres); ``geo`` (off the network once converted from lon/lat)."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def _lonlat_like(x: float, y: float) -> bool:
    return abs(x) <= 180 and abs(y) <= 90


class RuleCheck:
    """Check the samples of one FCD file, in order, against ``rules`` (module docstring)."""

    def __init__(self, path: Path, rules: FcdRules) -> None:
        self.path, self.rules = path, rules
        self.dropped: dict[str, str] = {}
        self._rules_of: dict[str, str] = {}
        self._prev: tuple[float, dict[str, int], np.ndarray] | None = None
        self._expected = self._moved = 0.0
        self._lo = np.full(2, math.inf)
        self._hi = np.full(2, -math.inf)

    def _offend(self, vehicle: str, message: str, rule: str) -> None:
        if not self.rules.drop:
            raise FcdRuleError(f"{self.path}: {message}", rule)
        if vehicle not in self.dropped:
            self.dropped[vehicle] = message
            self._rules_of[vehicle] = rule

    def feed(self, t: float, ids: list[str], states: np.ndarray) -> None:
        """Check one time step (network x/y, after any lon/lat conversion)."""
        index = {v: i for i, v in enumerate(ids)}
        if len(ids):
            xy = states[:, :2]
            self._lo, self._hi = np.minimum(self._lo, xy.min(axis=0)), np.maximum(self._hi, xy.max(axis=0))
            if self.rules.bounds is not None:
                self._bounds(t, ids, xy)
            if self._prev is not None:
                self._speeds(t, ids, states)
        self._prev = (t, index, states)

    def _bounds(self, t: float, ids: list[str], xy: np.ndarray) -> None:
        assert self.rules.bounds is not None
        xmin, ymin, xmax, ymax = self.rules.bounds
        dx = np.maximum(np.maximum(xmin - xy[:, 0], xy[:, 0] - xmax), 0.0)
        dy = np.maximum(np.maximum(ymin - xy[:, 1], xy[:, 1] - ymax), 0.0)
        off = np.hypot(dx, dy)
        for i in np.flatnonzero(off > BOUNDS_MARGIN_M):
            x, y = float(xy[i, 0]), float(xy[i, 1])
            self._offend(
                ids[i],
                f"vehicle {ids[i]!r} at time step {t:g} is at ({x:g}, {y:g}), {off[i]:,.0f} m outside the bounds "
                f"of the network {self.rules.net_file} (x {xmin:g}..{xmax:g}, y {ymin:g}..{ymax:g} m)",
                "geo" if self.rules.geo is not None else "lonlat" if _lonlat_like(x, y) else "bounds",
            )

    def _speeds(self, t: float, ids: list[str], states: np.ndarray) -> None:
        assert self._prev is not None
        t0, before, prev = self._prev
        pairs = [(i, before[v]) for i, v in enumerate(ids) if v in before]
        if not pairs:
            return
        now = np.fromiter((i for i, _ in pairs), dtype=int, count=len(pairs))
        then = np.fromiter((j for _, j in pairs), dtype=int, count=len(pairs))
        a, b = prev[then], states[now]
        dt = t - t0
        moved = np.hypot(b[:, 0] - a[:, 0], b[:, 1] - a[:, 1])
        self._moved += float(moved.sum())
        self._expected += float(((a[:, 2] + b[:, 2]) / 2).sum() * dt)
        limit = self.rules.max_speed
        for k in np.flatnonzero(moved > limit * dt + JUMP_M):
            v = ids[now[k]]
            self._offend(
                v,
                f"vehicle {v!r} moves {moved[k]:,.0f} m between time steps {t0:g} and {t:g} "
                f"({moved[k] / dt:,.1f} m/s; its speed reads {a[k, 2]:g} then {b[k, 2]:g} m/s), faster than "
                f"the limit of {limit:g} m/s",
                "speed",
            )

    def finish(self, vehicles: int) -> dict[str, str]:
        """After the last sample: refuse lon/lat positions, or a file whose every vehicle was
        dropped; return the dropped vehicles and why."""
        if (
            self.rules.geo is None
            and math.isfinite(self._lo[0])
            and _lonlat_like(self._lo[0], self._lo[1])
            and _lonlat_like(self._hi[0], self._hi[1])
            and self._expected >= LONLAT_EVIDENCE_M
            and self._moved < LONLAT_RATIO * self._expected
        ):
            raise FcdRuleError(
                f"{self.path}: its positions look like lon/lat, not network metres: x {self._lo[0]:g}..{self._hi[0]:g}, "
                f"y {self._lo[1]:g}..{self._hi[1]:g}, and its vehicles move {self._moved:.3g} in all (in its units) where "
                f"their speeds say {self._expected:,.0f} m (SUMO writes lon/lat with --fcd-output.geo)",
                "lonlat",
            )
        if self.dropped and len(self.dropped) >= vehicles:
            first = next(iter(self.dropped))
            raise FcdRuleError(
                f"{self.path}: every one of its {vehicles} vehicle(s) breaks a rule and would be dropped; the first: "
                f"{self.dropped[first]}",
                self._rules_of[first],
            )
        return dict(self.dropped)
