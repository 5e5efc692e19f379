"""``source: fcd``: SUMO's floating car data (``mobility.fcd_file``), replayed as a live run
would see it: coverage and events computed from its positions, checked whole before the run for
traffic that breaks physics (:mod:`mobility.fcd_rules`: a speed limit, the network's bounds,
lon/lat converted with ``fcd_geo``, offending vehicles refused or dropped by ``fcd_invalid``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mobility.fcd_rules import FcdRules, GeoProjection, default_speed_limit
from mobility.fcd_source import FcdSource
from mobility.rsu import Rsu, place_rsus
from mobility.source import MobilitySource
from mobility.sumo_files import net_bounds

from .base import Bounds, OpenRequest, SourceInputError, SourceKind, check_file, check_placed_rsus, file_network

HINTS = {
    "lonlat": "lon/lat? give `mobility.fcd_geo: true`, with mobility.net_file the network it was recorded on",
    "bounds": "check that mobility.net_file is the network the FCD was recorded on",
    "geo": "mobility.fcd_geo: true reads x and y as lon/lat: check that the FCD was written with --fcd-output.geo, "
    "on mobility.net_file",
    "speed": "a replay would move it in a straight line across every RSU between its two samples; if it is real, "
    "raise mobility.fcd_max_speed",
}
"""What to do about an FCD vehicle that breaks a rule of :mod:`mobility.fcd_rules`, by rule."""


def fcd_rules(m: Any) -> FcdRules:
    """The rules the FCD of mobility section ``m`` must obey: its speed limit (``fcd_max_speed``,
    default 1.5 x the fastest vehicle type of SUMO and of ``route_files``), the bounds and
    projection of ``net_file`` (``fcd_geo``), and what happens to a vehicle that breaks them
    (``fcd_invalid``)."""
    net = m.net_file if m.net_file and Path(m.net_file).is_file() else None
    return FcdRules(
        max_speed=m.fcd_max_speed or default_speed_limit(m.route_files),
        bounds=net_bounds(net) if net else None,
        net_file=net,
        geo=GeoProjection.from_net(net) if net and m.fcd_geo else None,
        drop=m.fcd_invalid == "drop",
    )


class FcdKind(SourceKind):
    name = "fcd"
    # route_files: vehicle types whose maxSpeed sets the speed limit (mobility.fcd_rules)
    reads: ClassVar[tuple[str, ...]] = (
        "fcd_file",
        "fcd_step_length",
        "net_file",
        "route_files",
        "sumo.begin",
        "rsus",
        "coverage",
        "fcd_max_speed",
        "fcd_geo",
        "fcd_invalid",
    )

    def require(self, m: Any) -> None:
        if not m.fcd_file:
            raise ValueError("source 'fcd' needs mobility.fcd_file (SUMO's --fcd-output, XML or .csv)")
        if m.fcd_geo and not m.net_file:
            raise ValueError(
                "mobility.fcd_geo: true converts lon/lat to network x/y with the network's projection: give "
                "mobility.net_file (the network the FCD was recorded on)"
            )

    def input_files(self, m: Any) -> list[str]:
        return [f for f in (m.fcd_file, m.net_file, *m.route_files) if f]

    def network(self, m: Any) -> tuple[Bounds, str] | None:
        return file_network(m.net_file)

    def geo_network(self, m: Any) -> str | None:
        return m.net_file

    def network_file(self, m: Any) -> str | None:
        return m.net_file

    def check(self, m: Any) -> None:
        """The FCD file (read whole, under :func:`fcd_rules`), the network the RSUs are placed on and
        the route files whose vehicle types set the speed limit."""
        from mobility.errors import FcdError
        from mobility.fcd import inspect_fcd
        from mobility.fcd_rules import FcdRuleError

        if not Path(m.fcd_file).is_file():
            raise SourceInputError(f"mobility.fcd_file: file not found: {m.fcd_file}")
        if m.net_file:
            check_file("net_file", m.net_file)
            if m.fcd_geo and GeoProjection.from_net(m.net_file) is None:
                raise SourceInputError(
                    f"mobility.fcd_geo: the network {m.net_file} has no geo projection (its <location "
                    "projParameter> is '!'), so lon/lat cannot be converted to its x/y"
                )
        for i, r in enumerate(m.route_files):
            check_file(f"route_files[{i}]", r)
        try:
            inspect_fcd(m.fcd_file, fcd_rules(m))
        except FcdRuleError as e:
            drop = e.rule in ("speed", "bounds") and m.fcd_invalid == "refuse"
            more = "; mobility.fcd_invalid: drop leaves such vehicles out" if drop else ""
            raise SourceInputError(f"mobility.fcd_file: {e}; {HINTS[e.rule]}{more}") from None
        except FcdError as e:
            raise SourceInputError(f"mobility.fcd_file: {e}") from None
        if not m.net_file and m.rsu_config().placement == "auto":
            raise SourceInputError(
                "mobility.rsus.placement 'auto' places the RSUs on the network: give mobility.net_file "
                "(the network the FCD was recorded on), or placement 'explicit' with positions"
            )

    def open(self, m: Any, request: OpenRequest) -> tuple[MobilitySource, list[Rsu]]:
        rsus = place_rsus(m.rsu_config(), m.net_file)
        check_placed_rsus(rsus, m.net_file)
        fcd = FcdSource(
            m.fcd_file,
            rsus,
            m.coverage_config(),
            step_length=m.sumo.step_length,
            begin=m.sumo.begin,
            record_step=m.fcd_step_length,
            trace=request.trace,
            overwrite_trace=request.overwrite,
            metadata={"scenario": request.scenario, "net_file": m.net_file},
            rules=fcd_rules(m),
        )
        return fcd, rsus
