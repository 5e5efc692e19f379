"""One mobility configuration for a scenario, and the factory that turns it into an event source.

``MobilityConfig`` groups the other configs (network choice, city, LuST, SUMO run, RSUs,
coverage) so that a scenario's ``mobility:`` section maps onto it one to one;
:meth:`MobilityConfig.from_dict` refuses unknown keys with their path.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobility.city import CityConfig, build_city
from mobility.coverage import CoverageConfig
from mobility.lust import LustConfig, build_lust, lust_clone
from mobility.rsu import Rsu, RsuConfig, place_rsus
from mobility.source import SumoSource
from mobility.sumo import SumoConfig, merge_args

NETWORKS = ("city", "lust", "lust_clone", "files")


@dataclass
class MobilityConfig:
    """Where the traffic comes from and how coverage is tracked.

    ``network``: ``city`` (embedded grid, ``city``), ``lust`` (rebuilt LuST, ``lust``),
    ``lust_clone`` (a real LuST checkout at ``lust_clone``), or ``files`` (``sumo.net_file`` /
    ``sumo.route_files`` or ``sumo.config_file`` given directly). ``sumo`` holds the run options
    (backend, seed, step length, window); its input files are filled in from the network unless
    ``network`` is ``files``. ``density`` scales the demand of every network alike (SUMO's
    ``--scale`` on the route files; 0.5 halves it).
    """

    network: str = "city"
    city: CityConfig = field(default_factory=CityConfig)
    lust: LustConfig = field(default_factory=LustConfig)
    lust_clone: str | None = None
    sumo: SumoConfig = field(default_factory=SumoConfig)
    rsu: RsuConfig = field(default_factory=RsuConfig)
    coverage: CoverageConfig = field(default_factory=CoverageConfig)
    density: float = 1.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.network not in NETWORKS:
            raise ValueError(f"mobility.network must be one of {NETWORKS}, got {self.network!r}")
        if self.network == "lust_clone" and not self.lust_clone:
            raise ValueError(
                "mobility.lust_clone must name the LuST checkout folder when mobility.network is 'lust_clone'"
            )
        if self.network == "files" and self.sumo.net_file is None and self.sumo.config_file is None:
            raise ValueError(
                "mobility.sumo.net_file or mobility.sumo.config_file is needed when mobility.network is 'files'"
            )
        if isinstance(self.density, bool) or not isinstance(self.density, (int, float)) or not self.density > 0:
            raise ValueError(f"mobility.density must be a positive number, got {self.density!r}")
        for part in (self.city, self.lust, self.sumo, self.rsu, self.coverage):
            part.validate()

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: str = "mobility") -> MobilityConfig:
        """Build from plain data (e.g. parsed YAML); unknown keys raise ValueError with their path."""
        if not isinstance(data, dict):
            raise ValueError(f"{path} must be a mapping, got {type(data).__name__}")
        nested = {
            "city": CityConfig,
            "lust": LustConfig,
            "sumo": SumoConfig,
            "rsu": RsuConfig,
            "coverage": CoverageConfig,
        }
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ValueError(f"{path}.{key} is not a known field (known: {sorted(known)})")
            if key in nested:
                values[key] = _build(nested[key], value, f"{path}.{key}")
            else:
                values[key] = value
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _build(kind: type, value: Any, path: str) -> Any:
    if isinstance(value, kind):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{path} must be a mapping, got {type(value).__name__}")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"{path}.{unknown[0]} is not a known field (known: {sorted(known)})")
    try:
        return kind(**value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def resolve_network(cfg: MobilityConfig, *, backend_for_build: str = "libsumo") -> tuple[SumoConfig, dict[str, Any]]:
    """Build (or fetch) the chosen network and return the SUMO run config plus a description of it."""
    cfg.validate()
    s = dataclasses.replace(cfg.sumo, scale=cfg.sumo.scale * cfg.density)
    if cfg.network == "city":
        files = build_city(cfg.city)
        run = dataclasses.replace(s, net_file=str(files.net_file), route_files=[str(files.route_file)])
        return run, {"network": "city", "city": dataclasses.asdict(cfg.city), "build": files.metadata}
    if cfg.network == "lust":
        lust = build_lust(
            cfg.lust, backend=backend_for_build, extra_args=s.extra_args, time_to_teleport=s.time_to_teleport
        )
        run = dataclasses.replace(
            s,
            net_file=str(lust.net_file),
            route_files=[str(p) for p in lust.route_files],
            additional_files=[str(p) for p in lust.additional_files] + list(s.additional_files),
            begin=lust.begin if s.begin is None else s.begin,
            end=lust.end if s.end is None else s.end,
            extra_args=merge_args(lust.sumo_args, s.extra_args),
        )
        return run, {"network": "lust", "lust": dataclasses.asdict(cfg.lust), "build": lust.metadata}
    if cfg.network == "lust_clone":
        clone = lust_clone(os.path.expanduser(str(cfg.lust_clone)))
        run = dataclasses.replace(s, config_file=str(clone.config_file))
        return run, {"network": "lust_clone", "build": clone.metadata}
    return s, {"network": "files"}


def network_file(run: SumoConfig) -> str:
    """The network file of a run config (read from the .sumocfg when only that is given)."""
    if run.net_file is not None:
        return run.net_file
    import xml.etree.ElementTree as ET

    cfg_path = Path(str(run.config_file))
    for el in ET.parse(cfg_path).iter("net-file"):
        value = el.get("value")
        if value:
            return str((cfg_path.parent / value.split(",")[0]).resolve())
    raise ValueError(f"sumo.config_file {cfg_path} names no net-file")


def open_source(
    cfg: MobilityConfig,
    *,
    trace: str | os.PathLike[str] | None = None,
    overwrite_trace: bool = False,
    metadata: dict[str, Any] | None = None,
) -> tuple[SumoSource, list[Rsu]]:
    """Build the network if needed, place the RSUs and start a :class:`SumoSource` (recording to ``trace``)."""
    run, description = resolve_network(cfg, backend_for_build=cfg.sumo.backend)
    cache_dir = {"city": cfg.city.cache_dir, "lust": cfg.lust.cache_dir}.get(cfg.network)
    rsus = place_rsus(cfg.rsu, network_file(run), cache_dir=cache_dir)
    meta = {**description, "rsu_config": dataclasses.asdict(cfg.rsu), **(metadata or {})}
    return SumoSource(run, rsus, cfg.coverage, trace=trace, overwrite_trace=overwrite_trace, metadata=meta), rsus
