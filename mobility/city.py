"""The embedded default city: a grid network and seeded random demand, built on first use.

Nothing has to be shipped: ``netgenerate`` draws a Manhattan grid and ``randomTrips.py`` (with
``duarouter``) generates and routes seeded trips. The result is cached under the user cache
directory (``$VMC_CACHE/sumo`` or ``~/.cache/vmc-sim/sumo``) keyed by a hash of every
parameter, so the second build is a directory lookup. Generated files have SUMO's timestamped
header comments removed, so the same parameters give byte-identical files.

Traffic density is ``demand_scale / period`` vehicles inserted per second; the defaults give
roughly 100-200 vehicles running at once, and 30 minutes of traffic simulate in a few seconds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mobility.cache import cached_build, file_sha256, strip_generated_header
from mobility.sumo import SumoConfig, run_command, run_tool, sumo_binary, sumo_version

CITY_BUILDER_VERSION = 2  # 2: building blocks between the streets (city.poly.xml)


@dataclass
class CityConfig:
    """Parameters of the embedded grid city and its demand (all part of the cache key but ``cache_dir``)."""

    junctions_x: int = field(default=8, metadata={"doc": "grid junctions along x"})
    junctions_y: int = field(default=8, metadata={"doc": "grid junctions along y"})
    spacing: float = field(default=250.0, metadata={"doc": "metres between junctions"})
    lanes: int = field(default=2, metadata={"doc": "lanes per direction"})
    max_speed: float = field(default=13.89, metadata={"doc": "m/s"})
    traffic_lights: bool = field(default=True, metadata={"doc": "signalised junctions"})
    period: float = field(default=1.0, metadata={"doc": "seconds between departures (randomTrips period)"})
    demand_scale: float = field(default=1.0, metadata={"doc": "departures x this factor ('density' in sweeps)"})
    duration: float = field(default=1800.0, metadata={"doc": "seconds of generated demand"})
    min_distance: float = field(default=600.0, metadata={"doc": "metres, shortest trip"})
    fringe_factor: float = field(default=5.0, metadata={"doc": "preference for trips starting at the fringe"})
    seed: int = field(default=42, metadata={"doc": "seed of the generated demand"})
    building_setback: float | None = field(
        default=10.0,
        metadata={
            "doc": "metres from a street's centre line to the building blocks that fill every cell of the grid "
            "(city.poly.xml: what blocks the radio's line of sight); null: no buildings"
        },
    )
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        for name in ("junctions_x", "junctions_y"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 100:
                raise ValueError(f"city.{name} must be an integer in [2, 100], got {v!r}")
        if isinstance(self.lanes, bool) or not isinstance(self.lanes, int) or not 1 <= self.lanes <= 6:
            raise ValueError(f"city.lanes must be an integer in [1, 6], got {self.lanes!r}")
        for name in ("spacing", "max_speed", "period", "demand_scale", "duration"):
            v = getattr(self, name)
            if not _positive(v):
                raise ValueError(f"city.{name} must be a positive number, got {v!r}")
        for name in ("min_distance", "fringe_factor"):
            v = getattr(self, name)
            if not _positive(v) and v != 0:
                raise ValueError(f"city.{name} must be a non-negative number, got {v!r}")
        if not isinstance(self.traffic_lights, bool):
            raise ValueError(f"city.traffic_lights must be true or false, got {self.traffic_lights!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise ValueError(f"city.seed must be an integer in [0, 2^31), got {self.seed!r}")
        setback = self.building_setback
        road = 3.2 * self.lanes  # netgenerate's 3.2 m lanes, each way
        if setback is not None and (not _positive(setback) or not road < setback < self.spacing / 2):
            raise ValueError(
                f"city.building_setback must lie between half the road ({road:g} m) and half the spacing "
                f"({self.spacing / 2:g} m), or be null, got {setback!r}"
            )
        diag = math.hypot((self.junctions_x - 1) * self.spacing, (self.junctions_y - 1) * self.spacing)
        if self.min_distance >= diag:
            raise ValueError(
                f"city.min_distance ({self.min_distance} m) must be below the grid diagonal ({diag:.0f} m)"
            )

    @property
    def insertion_period(self) -> float:
        """Seconds between two insertions after applying ``demand_scale``."""
        return self.period / self.demand_scale

    def params(self) -> dict[str, Any]:
        """Everything that determines the build (the cache key input)."""
        p = asdict(self)
        p.pop("cache_dir")
        return p


@dataclass(frozen=True)
class CityFiles:
    """Paths of a built city; ``metadata`` is its ``build.json`` manifest."""

    directory: Path
    net_file: Path
    route_file: Path
    config_file: Path
    metadata: dict[str, Any]
    buildings_file: Path | None = None

    def sumo_config(self, **overrides: Any) -> SumoConfig:
        """A SumoConfig running this city's net and routes (fields overridable, e.g. backend, seed, end)."""
        values: dict[str, Any] = {"net_file": str(self.net_file), "route_files": [str(self.route_file)]}
        values.update(overrides)
        return SumoConfig(**values)


def build_city(config: CityConfig | None = None, *, force: bool = False) -> CityFiles:
    """Build (or fetch from the cache) the grid city for ``config``."""
    cfg = config or CityConfig()
    cfg.validate()
    params = {**cfg.params(), "builder": CITY_BUILDER_VERSION, "sumo": sumo_version()}

    def _build(tmp: Path) -> dict[str, Any]:
        return _build_city_into(cfg, tmp)

    directory, manifest = cached_build("city", params, _build, root=cfg.cache_dir, force=force)
    return CityFiles(
        directory=directory,
        net_file=directory / "city.net.xml",
        route_file=directory / "city.rou.xml",
        config_file=directory / "city.sumocfg",
        metadata=manifest,
        buildings_file=directory / "city.poly.xml" if cfg.building_setback is not None else None,
    )


def _build_city_into(cfg: CityConfig, out: Path) -> dict[str, Any]:
    net = out / "city.net.xml"
    args = [
        str(sumo_binary("netgenerate")),
        "--grid",
        "--grid.x-number",
        str(cfg.junctions_x),
        "--grid.y-number",
        str(cfg.junctions_y),
        "--grid.x-length",
        repr(float(cfg.spacing)),
        "--grid.y-length",
        repr(float(cfg.spacing)),
        "--default.lanenumber",
        str(cfg.lanes),
        "--default.speed",
        repr(float(cfg.max_speed)),
        "--seed",
        str(cfg.seed),
        "--no-turnarounds",
        "true",
        "-o",
        str(net),
    ]
    if cfg.traffic_lights:
        args += ["--tls.guess", "true"]
    run_command(args, what="netgenerate (embedded city)", cwd=out)
    if cfg.building_setback is not None:
        from mobility.polygons import grid_blocks, write_poly_file

        write_poly_file(out / "city.poly.xml", grid_blocks(net, cfg.building_setback))
    routes = out / "city.rou.xml"
    trips = out / "trips.xml"
    run_tool(
        "randomTrips.py",
        [
            "-n",
            net,
            "-o",
            trips,
            "-r",
            routes,
            "--seed",
            cfg.seed,
            "-b",
            0,
            "-e",
            repr(float(cfg.duration)),
            "-p",
            repr(cfg.insertion_period),
            "--fringe-factor",
            repr(float(cfg.fringe_factor)),
            "--min-distance",
            repr(float(cfg.min_distance)),
            "--prefix",
            "veh",
            "--validate",
            "--trip-attributes",
            'departLane="best" departSpeed="max"',
        ],
        what="randomTrips.py (embedded city demand)",
        cwd=out,
    )
    trips.unlink(missing_ok=True)
    for p in out.glob("*.alt.xml"):
        p.unlink()
    for p in (net, routes):
        strip_generated_header(p)
    (out / "city.sumocfg").write_text(
        "<configuration>\n"
        "    <input>\n"
        '        <net-file value="city.net.xml"/>\n'
        '        <route-files value="city.rou.xml"/>\n'
        "    </input>\n"
        "</configuration>\n"
    )
    vehicles = routes.read_text().count("<vehicle ")
    return {
        "network": {
            "kind": "grid",
            "file": "city.net.xml",
            "sha256": file_sha256(net),
            "size_m": [(cfg.junctions_x - 1) * cfg.spacing, (cfg.junctions_y - 1) * cfg.spacing],
        },
        "demand": {
            "file": "city.rou.xml",
            "sha256": file_sha256(routes),
            "vehicles": vehicles,
            "insertion_period_s": cfg.insertion_period,
            "seed": cfg.seed,
        },
    }


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
