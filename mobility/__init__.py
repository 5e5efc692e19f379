"""Mobility for vmc-sim: SUMO traffic turned into micro-cloud join/leave events.

SUMO runs through libsumo (in-process) or TraCI (subprocess on 127.0.0.1); RSU coverage is
tracked with context subscriptions; events can be recorded to a trace and replayed without SUMO,
or computed from SUMO's recorded FCD (:mod:`mobility.fcd_source`).
This package imports neither ``fl_core`` nor ``vmc_sim`` (nor torch).
"""

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
