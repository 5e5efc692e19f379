"""``source: city``: the embedded grid city (``mobility.city``: a netgenerate grid, its randomTrips
demand and the building blocks between its streets, built once and cached by content), run in SUMO."""

from __future__ import annotations

from typing import Any, ClassVar

from mobility.city import build_city

from .base import Bounds, SumoKind


class CityKind(SumoKind):
    name = "city"
    reads: ClassVar[tuple[str, ...]] = ("city", *SumoKind.reads)
    cache_section = "city"

    def sumo_inputs(self, m: Any) -> dict[str, Any]:
        files = build_city(m.city_config())
        return {"net_file": str(files.net_file), "route_files": [str(files.route_file)]}

    def network_file(self, m: Any) -> str | None:
        return str(build_city(m.city_config()).net_file)

    def buildings(self, m: Any) -> list[str]:
        """The blocks between its streets (``city.building_setback``; none when it is null)."""
        files = build_city(m.city_config())
        return [] if files.buildings_file is None else [str(files.buildings_file)]

    def network(self, m: Any) -> tuple[Bounds, str] | None:
        c = m.city_config()
        return (
            0.0,
            0.0,
            (c.junctions_x - 1) * c.spacing,
            (c.junctions_y - 1) * c.spacing,
        ), "the embedded city's network"
