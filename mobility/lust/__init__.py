"""LuST (Luxembourg SUMO Traffic): the rebuilt network, a calibrated demand, and how it flows.

Two ways in:

* :func:`lust_clone`: a real LuST clone (``lust.net.xml`` + ``dua.static.sumocfg``) runs as it is,
  through its own ``.sumocfg``.
* :func:`build_lust`: the network is rebuilt from the LuST OSM with ``netconvert``
  (:mod:`mobility.lust.network`) and a demand is generated whose number of running vehicles
  follows the published curve (``TrafficDemands.png``: 4,150 at 08:00) at a trip rate
  consistent with LuST's 287,000 vehicles a day (:mod:`mobility.lust.demand`,
  :mod:`mobility.lust.calibration`), with LuST's bus lines where they can be placed
  (:mod:`mobility.lust.buses`). Both are cached like the embedded city.

Every run of the rebuilt scenario, the calibration run included, uses LuST's own run settings
(:data:`LUST_RUN_SETTINGS`: ``--ignore-junction-blocker 20 --time-to-teleport 600
--max-depart-delay 600 --routing-algorithm dijkstra`` and the rerouting device, probability 0.7,
period and pre-period 300 s), overridable with ``mobility.lust.sumo_options`` or the scenario's
``mobility.sumo.extra_args``. :mod:`mobility.lust.report` measures a run against the published
day (``vmc lust build`` / ``vmc lust report``, :mod:`mobility.lust.cli`), and
:mod:`mobility.lust.rsu_fit` sizes an RSU for the 08:00 peak.
"""

from mobility.lust.buses import place_bus_lines
from mobility.lust.calibration import (
    expected_insertions,
    insertion_rate,
    open_loop_departures,
)
from mobility.lust.cli import main
from mobility.lust.config import (
    CALIBRATIONS,
    LUST_OSM_NAME,
    LUST_RUN_SETTINGS,
    LUST_VTYPES_NAME,
    PUBLISHED_NETWORK,
    PUBLISHED_VEHICLES_PER_DAY,
    REFERENCE_CURVE,
    LustConfig,
    LustFiles,
    day_trip_time,
    default_lust_dir,
    run_settings,
    target_running,
)
from mobility.lust.demand import (
    build_lust,
    lust_begin,
    lust_clone,
    lust_files,
    sumo_inputs,
)
from mobility.lust.network import NETCONVERT_OPTIONS, build_lust_network, network_stats
from mobility.lust.report import LustReport, Recorder, demand_report, run_report

__all__ = [
    "CALIBRATIONS",
    "LUST_OSM_NAME",
    "LUST_RUN_SETTINGS",
    "LUST_VTYPES_NAME",
    "NETCONVERT_OPTIONS",
    "PUBLISHED_NETWORK",
    "PUBLISHED_VEHICLES_PER_DAY",
    "REFERENCE_CURVE",
    "LustConfig",
    "LustFiles",
    "LustReport",
    "Recorder",
    "build_lust",
    "build_lust_network",
    "day_trip_time",
    "default_lust_dir",
    "demand_report",
    "expected_insertions",
    "insertion_rate",
    "lust_begin",
    "lust_clone",
    "lust_files",
    "main",
    "network_stats",
    "open_loop_departures",
    "place_bus_lines",
    "run_report",
    "run_settings",
    "sumo_inputs",
    "target_running",
]
