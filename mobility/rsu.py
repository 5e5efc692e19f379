"""Road-side units: where they stand and how far they reach.

Two placements:

* ``explicit``: a list of positions in network coordinates (``{"x", "y"}``, or ``{"lon", "lat"}``
  for geo-referenced networks such as LuST, or ``{"junction": id}``: at that junction of the
  network), each with an optional own radius and id.
* ``auto``: ``count`` RSUs on junctions inside a region (a bbox, or a ``polygon`` such as the
  outline of a city centre; default: the central box covering ``central_fraction`` of the
  network's width and height, the "city centre"), picked greedily by
  decreasing betweenness centrality of the junction graph (directed, edge lengths as weights,
  computed with networkx; approximate with ``centrality_samples`` seeded pivots on big networks),
  skipping any junction closer than ``min_spacing`` to one already chosen. Ties are broken by
  distance to the region centre (a polygon's centroid), then by junction id, so the placement is
  deterministic. Several RSUs with touching cells make one region of coverage: under union
  membership a vehicle handed over between them stays in coverage (:mod:`mobility.dwell`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from mobility.cache import cached_build, file_sha256

PLACEMENTS = ("auto", "explicit")


@dataclass(frozen=True)
class Rsu:
    """One RSU: id, position (network coordinates, m), coverage radius (m), junction if auto-placed."""

    id: str
    x: float
    y: float
    radius: float
    junction: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (trace headers, manifests)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rsu:
        """Inverse of :meth:`to_dict`."""
        return cls(
            id=str(data["id"]),
            x=float(data["x"]),
            y=float(data["y"]),
            radius=float(data["radius"]),
            junction=data.get("junction"),
        )

    def distance(self, x: float, y: float) -> float:
        """Euclidean distance (m) from the RSU to a point."""
        return math.hypot(x - self.x, y - self.y)


@dataclass
class RsuConfig:
    """How RSUs are placed (filled from the scenario YAML)."""

    placement: str = field(default="auto", metadata={"doc": "auto (road-graph centrality) or explicit (positions)"})
    positions: list[Any] = field(
        default_factory=list, metadata={"doc": "explicit: [{id, x, y, radius}] in network metres, or {lon, lat}"}
    )
    count: int = field(default=1, metadata={"doc": "auto: how many RSUs"})
    region: list[float] | None = field(default=None, metadata={"doc": "auto: [xmin, ymin, xmax, ymax] to place in"})
    polygon: list[list[float]] | None = field(
        default=None,
        metadata={"doc": "auto: [[x, y], ...] of 3+ vertices (network metres) to place in, instead of region"},
    )
    central_fraction: float = field(
        default=0.5, metadata={"doc": "auto: share of the network's central region considered"}
    )
    min_spacing: float | None = field(
        default=None, metadata={"doc": "auto: metres between RSUs (null: twice the radius)"}
    )
    radius: float = field(default=150.0, metadata={"doc": "metres of coverage"})
    centrality_samples: int | None = field(default=500, metadata={"doc": "auto: sampled sources for centrality"})
    seed: int = field(default=42, metadata={"doc": "auto: sampling seed"})
    id_prefix: str = field(default="rsu", metadata={"doc": "RSU ids are <prefix><k>"})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.placement not in PLACEMENTS:
            raise ValueError(f"rsu.placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if not _pos(self.radius):
            raise ValueError(f"rsu.radius must be a positive number of metres, got {self.radius!r}")
        if self.placement == "explicit":
            if not isinstance(self.positions, (list, tuple)) or not self.positions:
                raise ValueError("rsu.positions must be a non-empty list when rsu.placement is 'explicit'")
            for i, p in enumerate(self.positions):
                _parse_position(p, i, self.radius, self.id_prefix)
        else:
            if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
                raise ValueError(f"rsu.count must be a positive integer, got {self.count!r}")
            if self.region is not None:
                if (
                    not isinstance(self.region, (list, tuple))
                    or len(self.region) != 4
                    or not all(_num(v) for v in self.region)
                ):
                    raise ValueError(f"rsu.region must be [xmin, ymin, xmax, ymax], got {self.region!r}")
                xmin, ymin, xmax, ymax = self.region
                if xmin >= xmax or ymin >= ymax:
                    raise ValueError(f"rsu.region must have xmin < xmax and ymin < ymax, got {self.region!r}")
            if self.polygon is not None:
                _check_polygon(self.polygon)
                if self.region is not None:
                    raise ValueError("give mobility.rsus.region or mobility.rsus.polygon, not both")
            if not _pos(self.central_fraction) or self.central_fraction > 1:
                raise ValueError(f"rsu.central_fraction must be in (0, 1], got {self.central_fraction!r}")
        if self.min_spacing is not None and (not _num(self.min_spacing) or self.min_spacing < 0):
            raise ValueError(
                f"rsu.min_spacing must be a non-negative number of metres or null, got {self.min_spacing!r}"
            )
        if self.centrality_samples is not None and (
            isinstance(self.centrality_samples, bool)
            or not isinstance(self.centrality_samples, int)
            or self.centrality_samples < 1
        ):
            raise ValueError(
                f"rsu.centrality_samples must be a positive integer or null, got {self.centrality_samples!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"rsu.seed must be an integer, got {self.seed!r}")
        if not isinstance(self.id_prefix, str) or not self.id_prefix:
            raise ValueError(f"rsu.id_prefix must be a non-empty string, got {self.id_prefix!r}")

    @property
    def spacing(self) -> float:
        """Effective minimum spacing: ``min_spacing`` or, by default, twice the radius."""
        return 2.0 * self.radius if self.min_spacing is None else float(self.min_spacing)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _pos(v: Any) -> bool:
    return _num(v) and v > 0


def _check_polygon(poly: Any) -> None:
    """Raise ValueError unless ``poly`` is [[x, y], ...] of 3+ vertices enclosing an area."""
    where = "mobility.rsus.polygon"
    if not isinstance(poly, (list, tuple)) or len(poly) < 3:
        n = len(poly) if isinstance(poly, (list, tuple)) else type(poly).__name__
        raise ValueError(f"{where} must be a list of at least 3 vertices [[x, y], ...] in network metres, got {n}")
    for i, v in enumerate(poly):
        if not isinstance(v, (list, tuple)) or len(v) != 2 or not all(_num(c) for c in v):
            raise ValueError(f"{where}[{i}] must be [x, y] (network metres), got {v!r}")
    if polygon_area(poly) == 0.0:
        raise ValueError(f"{where} encloses no area (its vertices lie on one line): {poly!r}")


def polygon_area(poly: Any) -> float:
    """Absolute area (m²) of a simple polygon [[x, y], ...] (shoelace formula)."""
    n = len(poly)
    twice = sum(poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n))
    return abs(twice) / 2.0


def polygon_centroid(poly: Any) -> tuple[float, float]:
    """Centroid of a polygon's area (the mean of its vertices if it encloses none)."""
    n = len(poly)
    a = cx = cy = 0.0
    for i in range(n):
        (x0, y0), (x1, y1) = poly[i], poly[(i + 1) % n]
        cross = x0 * y1 - x1 * y0
        a += cross
        cx += (x0 + x1) * cross
        cy += (y0 + y1) * cross
    if a == 0.0:
        return sum(p[0] for p in poly) / n, sum(p[1] for p in poly) / n
    return cx / (3.0 * a), cy / (3.0 * a)


def in_polygon(x: float, y: float, poly: Any) -> bool:
    """True if (x, y) lies inside the polygon or on its boundary (even-odd rule, so a
    self-crossing outline counts the areas it wraps an odd number of times)."""
    n = len(poly)
    inside = False
    for i in range(n):
        (x0, y0), (x1, y1) = poly[i], poly[(i + 1) % n]
        cross = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)
        if cross == 0 and min(x0, x1) <= x <= max(x0, x1) and min(y0, y1) <= y <= max(y0, y1):
            return True  # on this edge
        if (y0 > y) != (y1 > y) and x < x0 + (y - y0) * (x1 - x0) / (y1 - y0):
            inside = not inside
    return inside


def _parse_position(p: Any, i: int, radius: float, prefix: str) -> dict[str, Any]:
    where = f"rsu.positions[{i}]"
    if isinstance(p, (list, tuple)):
        if len(p) != 2 or not all(_num(v) for v in p):
            raise ValueError(f"{where} must be [x, y] or a mapping with x/y or lon/lat, got {p!r}")
        return {"id": f"{prefix}{i}", "x": float(p[0]), "y": float(p[1]), "radius": float(radius)}
    if not isinstance(p, dict):
        raise ValueError(f"{where} must be [x, y] or a mapping with x/y or lon/lat, got {p!r}")
    unknown = set(p) - {"id", "x", "y", "lon", "lat", "radius", "junction"}
    if unknown:
        raise ValueError(f"{where} has unknown key(s) {sorted(unknown)}")
    out: dict[str, Any] = {"id": str(p.get("id", f"{prefix}{i}")), "radius": p.get("radius", radius)}
    if not _pos(out["radius"]):
        raise ValueError(f"{where}.radius must be a positive number of metres, got {out['radius']!r}")
    if "x" in p or "y" in p:
        for k in ("x", "y"):
            if not _num(p.get(k)):
                raise ValueError(f"{where}.{k} must be a number, got {p.get(k)!r}")
        out.update(x=float(p["x"]), y=float(p["y"]))
    elif "junction" in p:
        if not isinstance(p["junction"], (str, int)) or isinstance(p["junction"], bool) or str(p["junction"]) == "":
            raise ValueError(f"{where}.junction must be a junction id, got {p['junction']!r}")
        out.update(junction=str(p["junction"]))
    elif "lon" in p or "lat" in p:
        for k in ("lon", "lat"):
            if not _num(p.get(k)):
                raise ValueError(f"{where}.{k} must be a number, got {p.get(k)!r}")
        out.update(lon=float(p["lon"]), lat=float(p["lat"]))
    else:
        raise ValueError(f"{where} needs x/y, lon/lat or junction")
    return out


def explicit_xy(config: RsuConfig) -> list[tuple[int, Rsu]]:
    """The explicit RSUs given in network metres (x/y), with their index in ``positions``; those
    given as a junction or lon/lat need the network read and are left out."""
    if config.placement != "explicit":
        return []
    out = []
    for i, p in enumerate(config.positions):
        d = _parse_position(p, i, config.radius, config.id_prefix)
        if "x" in d:
            out.append((i, Rsu(id=d["id"], x=d["x"], y=d["y"], radius=float(d["radius"]))))
    return out


def explicit_lonlat(config: RsuConfig) -> list[tuple[int, str, float, float, float]]:
    """The explicit RSUs given as lon/lat: ``(index in positions, id, lon, lat, radius)``."""
    if config.placement != "explicit":
        return []
    out = []
    for i, p in enumerate(config.positions):
        d = _parse_position(p, i, config.radius, config.id_prefix)
        if "lon" in d:
            out.append((i, d["id"], d["lon"], d["lat"], float(d["radius"])))
    return out


def geo_distance_m(lon: float, lat: float, box: tuple[float, float, float, float]) -> float:
    """Metres from (lon, lat) to the lon/lat box ``(lonmin, latmin, lonmax, latmax)`` (0 inside;
    equirectangular, ample for telling a misplaced RSU from one at the network's edge)."""
    lonmin, latmin, lonmax, latmax = box
    dlon = max(lonmin - lon, 0.0, lon - lonmax)
    dlat = max(latmin - lat, 0.0, lat - latmax)
    return math.hypot(dlon * 111_320.0 * math.cos(math.radians(lat)), dlat * 110_540.0)


def reaches(rsu: Rsu, bounds: tuple[float, float, float, float]) -> bool:
    """True if the RSU's coverage disc touches the box ``(xmin, ymin, xmax, ymax)`` (an RSU just off
    the network's edge still covers its border roads; one further out than its radius covers none)."""
    xmin, ymin, xmax, ymax = bounds
    dx = max(xmin - rsu.x, 0.0, rsu.x - xmax)
    dy = max(ymin - rsu.y, 0.0, rsu.y - ymax)
    return math.hypot(dx, dy) <= rsu.radius


@lru_cache(maxsize=4)
def _read_net(net_file: str) -> Any:
    import sumolib

    return sumolib.net.readNet(net_file, withInternal=False)


def network_bounds(net_file: str | Path) -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) of a SUMO network in its own coordinates."""
    b = _read_net(str(net_file)).getBoundary()
    return float(b[0]), float(b[1]), float(b[2]), float(b[3])


def central_region(net_file: str | Path, fraction: float = 0.5) -> tuple[float, float, float, float]:
    """The bbox centred on the network covering ``fraction`` of its width and of its height."""
    xmin, ymin, xmax, ymax = network_bounds(net_file)
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    hw, hh = (xmax - xmin) * fraction / 2, (ymax - ymin) * fraction / 2
    return cx - hw, cy - hh, cx + hw, cy + hh


def junction_centrality(
    net_file: str | Path,
    samples: int | None = 500,
    seed: int = 42,
    *,
    cache_dir: str | None = None,
    use_cache: bool = True,
) -> dict[str, float]:
    """Betweenness centrality of every junction on the directed, length-weighted road graph.

    With ``samples`` smaller than the number of junctions, networkx's pivot-sampling
    approximation is used with the given seed (exact otherwise). Results are cached as JSON in
    the user cache keyed by the network's hash (a big network takes seconds).
    """
    if not use_cache:
        return _compute_centrality(net_file, samples, seed)
    params = {
        "net_sha256": file_sha256(net_file),
        "samples": samples,
        "seed": seed,
        "version": 2,
    }  # 2: outputs verified

    def _build(out: Path) -> dict[str, Any]:
        (out / "centrality.json").write_text(json.dumps(_compute_centrality(net_file, samples, seed), sort_keys=True))
        return {}

    directory, _ = cached_build("centrality", params, _build, root=cache_dir)
    return json.loads((directory / "centrality.json").read_text())


def _compute_centrality(net_file: str | Path, samples: int | None, seed: int) -> dict[str, float]:
    import networkx as nx

    net = _read_net(str(net_file))
    g = nx.DiGraph()
    for node in net.getNodes():
        if node.getType() != "internal":
            g.add_node(node.getID())
    for edge in net.getEdges():
        u, v = edge.getFromNode().getID(), edge.getToNode().getID()
        if u == v or u not in g or v not in g:
            continue
        w = float(edge.getLength())
        if not g.has_edge(u, v) or g[u][v]["length"] > w:
            g.add_edge(u, v, length=w)
    k = samples if samples is not None and samples < g.number_of_nodes() else None
    return {str(n): float(c) for n, c in nx.betweenness_centrality(g, k=k, weight="length", seed=seed).items()}


def place_rsus(config: RsuConfig, net_file: str | Path | None = None, *, cache_dir: str | None = None) -> list[Rsu]:
    """Resolve an RsuConfig to concrete RSUs (``net_file`` is needed for auto and lon/lat).

    ``cache_dir`` overrides where the junction centrality is cached (see :func:`mobility.cache.cache_root`).
    """
    config.validate()
    if config.placement == "explicit":
        rsus = []
        for i, p in enumerate(config.positions):
            d = _parse_position(p, i, config.radius, config.id_prefix)
            if "junction" in d:
                if net_file is None:
                    raise ValueError(
                        f"rsu.positions[{i}] names junction {d['junction']!r}, which needs the network file"
                    )
                net = _read_net(str(net_file))
                if not net.hasNode(d["junction"]):
                    raise ValueError(f"rsu.positions[{i}].junction {d['junction']!r} is not a junction of {net_file}")
                x, y = net.getNode(d["junction"]).getCoord()[:2]
                d.update(x=float(x), y=float(y))
            elif "lon" in d:
                if net_file is None:
                    raise ValueError(f"rsu.positions[{i}] is given as lon/lat, which needs the network file")
                net = _read_net(str(net_file))
                if not net.hasGeoProj():
                    raise ValueError(f"rsu.positions[{i}] is given as lon/lat but {net_file} has no geo projection")
                x, y = net.convertLonLat2XY(d["lon"], d["lat"])
                d.update(x=float(x), y=float(y))
            rsus.append(Rsu(id=d["id"], x=d["x"], y=d["y"], radius=float(d["radius"]), junction=d.get("junction")))
        ids = [r.id for r in rsus]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"rsu.positions has duplicate id(s) {dup}")
        return rsus
    if net_file is None:
        raise ValueError("rsu.placement 'auto' needs the network file")
    if config.polygon is not None:
        poly = [(float(v[0]), float(v[1])) for v in config.polygon]
        cx, cy = polygon_centroid(poly)
        where = f"mobility.rsus.polygon ({len(poly)} vertices around {cx:.1f}, {cy:.1f})"
    else:
        region = (
            tuple(config.region) if config.region is not None else central_region(net_file, config.central_fraction)
        )
        xmin, ymin, xmax, ymax = region
        poly = [(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax)]
        cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
        where = f"rsu.region {[round(v, 1) for v in region]}"
    net = _read_net(str(net_file))
    candidates = []
    for node in net.getNodes():
        if node.getType() == "internal":
            continue
        x, y = node.getCoord()[:2]
        if in_polygon(x, y, poly):
            candidates.append((node.getID(), float(x), float(y)))
    if not candidates:
        raise ValueError(f"{where} contains no junction of {net_file}")
    score = junction_centrality(net_file, config.centrality_samples, config.seed, cache_dir=cache_dir)
    candidates.sort(key=lambda c: (-round(score.get(c[0], 0.0), 12), math.hypot(c[1] - cx, c[2] - cy), c[0]))
    chosen: list[tuple[str, float, float]] = []
    for jid, x, y in candidates:
        if all(math.hypot(x - ox, y - oy) >= config.spacing for _, ox, oy in chosen):
            chosen.append((jid, x, y))
            if len(chosen) == config.count:
                break
    if len(chosen) < config.count:
        raise ValueError(
            f"rsu.count={config.count} RSUs do not fit in {where} with "
            f"rsu.min_spacing={config.spacing:g} m (only {len(chosen)} of {len(candidates)} junctions could be used)"
        )
    return [
        Rsu(id=f"{config.id_prefix}{i}", x=x, y=y, radius=float(config.radius), junction=jid)
        for i, (jid, x, y) in enumerate(chosen)
    ]
