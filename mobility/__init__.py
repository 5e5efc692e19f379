"""Mobility for vmc-sim: SUMO traffic turned into micro-cloud join/leave events.

SUMO runs through libsumo (in-process) or TraCI (subprocess on 127.0.0.1); RSU coverage is
tracked with context subscriptions; events can be recorded to a trace and replayed without SUMO,
or computed from SUMO's recorded FCD (:mod:`mobility.fcd_source`).
This package imports neither ``fl_core`` nor ``vmc_sim`` (nor torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time each is imported when first used
    from mobility.city import CityConfig, CityFiles, build_city
    from mobility.config import MobilityConfig, open_source, resolve_network
    from mobility.coverage import CoverageConfig, CoverageTracker, MemberState
    from mobility.errors import FcdError, MobilityError, SumoError, TraceError
    from mobility.events import MobilityEvent, events_from_json, events_to_json
    from mobility.lust import LustConfig, LustFiles, build_lust, demand_report, lust_clone
    from mobility.rsu import Rsu, RsuConfig, place_rsus
    from mobility.source import MobilitySource, SumoSource, TraceSource
    from mobility.sumo import (
        Backend,
        SumoConfig,
        SumoSession,
        sumo_binary,
        sumo_home,
        sumo_tool,
    )
    from mobility.trace import Trace, TraceWriter, read_trace, write_trace

_EXPORTS: dict[str, str] = {
    "CityConfig": "mobility.city",
    "CityFiles": "mobility.city",
    "build_city": "mobility.city",
    "MobilityConfig": "mobility.config",
    "open_source": "mobility.config",
    "resolve_network": "mobility.config",
    "CoverageConfig": "mobility.coverage",
    "CoverageTracker": "mobility.coverage",
    "MemberState": "mobility.coverage",
    "FcdError": "mobility.errors",
    "MobilityError": "mobility.errors",
    "SumoError": "mobility.errors",
    "TraceError": "mobility.errors",
    "MobilityEvent": "mobility.events",
    "events_from_json": "mobility.events",
    "events_to_json": "mobility.events",
    "LustConfig": "mobility.lust",
    "LustFiles": "mobility.lust",
    "build_lust": "mobility.lust",
    "demand_report": "mobility.lust",
    "lust_clone": "mobility.lust",
    "Rsu": "mobility.rsu",
    "RsuConfig": "mobility.rsu",
    "place_rsus": "mobility.rsu",
    "MobilitySource": "mobility.source",
    "SumoSource": "mobility.source",
    "TraceSource": "mobility.source",
    "Backend": "mobility.sumo",
    "SumoConfig": "mobility.sumo",
    "SumoSession": "mobility.sumo",
    "sumo_binary": "mobility.sumo",
    "sumo_home": "mobility.sumo",
    "sumo_tool": "mobility.sumo",
    "Trace": "mobility.trace",
    "TraceWriter": "mobility.trace",
    "read_trace": "mobility.trace",
    "write_trace": "mobility.trace",
}
"""Each public name and the module it lives in: imported on first use, so that importing the
package (a command that trains nothing) imports nothing heavy."""

__all__ = [
    "Backend",
    "CityConfig",
    "CityFiles",
    "CoverageConfig",
    "CoverageTracker",
    "FcdError",
    "LustConfig",
    "LustFiles",
    "MemberState",
    "MobilityConfig",
    "MobilityError",
    "MobilityEvent",
    "MobilitySource",
    "Rsu",
    "RsuConfig",
    "SumoConfig",
    "SumoError",
    "SumoSession",
    "SumoSource",
    "Trace",
    "TraceError",
    "TraceSource",
    "TraceWriter",
    "build_city",
    "build_lust",
    "demand_report",
    "events_from_json",
    "events_to_json",
    "lust_clone",
    "open_source",
    "place_rsus",
    "read_trace",
    "resolve_network",
    "sumo_binary",
    "sumo_home",
    "sumo_tool",
    "write_trace",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
