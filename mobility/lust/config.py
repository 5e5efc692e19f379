"""What a LuST build is made of: its configuration, the published figures it is measured against,
LuST's own SUMO run settings, and the runnable result (:class:`LustFiles`).

Times are seconds of the day throughout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobility.sumo import SumoConfig, merge_args, options_dict
from mobility.sumo_config import traffic_args

LUST_OSM_NAME = "lust.legacy.scenario.osm.gz"
LUST_VTYPES_NAME = "vtypes.add.xml"
LUST_BUSLINES_NAME = "buslines.rou.xml"
LUST_BUSSTOPS_NAME = "busstops.add.xml"
LUST_TLL_NAME = "tll.static.xml"
LUST_BUILDER_VERSION = 6
CALIBRATIONS = ("closed_loop", "open_loop")

TURN_BAY_WAYS: tuple[str, ...] = ("-30314", "-32710")
"""OSM ways of the corridor where the 07:00-09:00 teleports gathered: 6-lane primaries
whose leftmost lanes mix left turns with straight traffic (see :mod:`mobility.lust.turn_bays`)."""

JUNCTION_TYPES: tuple[str, ...] = (
    "priority",
    "traffic_light",
    "right_before_left",
    "allway_stop",
    "priority_stop",
    "zipper",
    "unregulated",
    "left_before_right",
)
"""SUMO junction (node) types a turn bay may be restricted to (``lust.turn_bay_junctions``)."""

PUBLISHED_NETWORK = {"nodes": 2365, "edges": 5959, "length_km": 929.5, "four_lane_edges": 87}
"""The real LuST network (``lust.net.xml``): junctions, edges, total edge length, edges of 4+ lanes."""
PUBLISHED_VEHICLES_PER_DAY = 287_000
"""Vehicles LuST inserts over its 24 hours."""

LUST_RUN_SETTINGS: dict[str, str] = {
    "ignore-junction-blocker": "20",
    "time-to-teleport": "600",
    "max-depart-delay": "600",
    "routing-algorithm": "dijkstra",
    "device.rerouting.probability": "0.7",
    "device.rerouting.period": "300",
    "device.rerouting.pre-period": "300",
}
"""SUMO options every LuST ``.sumocfg`` sets (processing) plus the rerouting device of its DUA/DUE
configurations. They are the default run settings of the ``lust`` source: used by the demand
calibration, by every run of the built scenario, and part of the demand's cache key."""

# Running vehicles over the day read off TrafficDemands.png ("DUE - Static" curve), as
# (hour, vehicles); linearly interpolated and rescaled so that 08:00 equals ``peak_running``
# (LuST's own value, 4,150, by default).
REFERENCE_CURVE: tuple[tuple[float, float], ...] = (
    (0.0, 0),
    (0.25, 100),
    (1.0, 130),
    (1.5, 180),
    (2.0, 180),
    (2.5, 230),
    (3.0, 260),
    (3.5, 300),
    (4.0, 320),
    (4.5, 480),
    (5.0, 650),
    (5.5, 1000),
    (6.0, 1450),
    (6.5, 2400),
    (7.0, 3200),
    (7.5, 3800),
    (8.0, 4150),
    (8.25, 4250),
    (8.5, 4200),
    (9.0, 3700),
    (9.5, 2900),
    (10.0, 2000),
    (10.5, 1500),
    (11.0, 950),
    (11.25, 1400),
    (12.0, 1350),
    (12.1, 2400),
    (12.5, 2500),
    (13.0, 2800),
    (13.5, 2950),
    (14.0, 2700),
    (14.5, 2300),
    (15.0, 1700),
    (15.5, 1200),
    (16.0, 1450),
    (16.5, 2000),
    (17.0, 2500),
    (17.5, 3000),
    (18.0, 3500),
    (18.5, 3850),
    (19.0, 3600),
    (19.5, 3200),
    (20.0, 2700),
    (20.5, 2000),
    (21.0, 1500),
    (21.5, 1200),
    (22.0, 1050),
    (22.5, 950),
    (23.0, 850),
    (23.5, 700),
    (24.0, 550),
)
_REFERENCE_AT_8 = 4150.0
LUST_PEAK_RUNNING = _REFERENCE_AT_8
"""Vehicles running at 08:00 on LuST's published curve."""


def target_running(t: Any, peak_running: float = LUST_PEAK_RUNNING) -> Any:
    """Published running-vehicle count at time(s) of day ``t`` (s), scaled so 08:00 = ``peak_running``."""
    import numpy as np

    hours = np.array([h for h, _ in REFERENCE_CURVE]) * 3600.0
    values = np.array([v for _, v in REFERENCE_CURVE], dtype=float) * (peak_running / _REFERENCE_AT_8)
    out = np.interp(np.asarray(t, dtype=float), hours, values)
    return float(out) if np.ndim(out) == 0 else out


def day_trip_time(
    peak_running: float = LUST_PEAK_RUNNING, vehicles_per_day: float = PUBLISHED_VEHICLES_PER_DAY
) -> float:
    """Mean trip time (s) that Little's law gives for a day: area under the running curve
    scaled to ``peak_running`` (vehicle-seconds) over ``vehicles_per_day``. LuST's curve (4,150 at
    08:00) and its 287,000 vehicles give 551 s."""
    import numpy as np

    t = np.arange(0.0, 86400.0, 10.0) + 5.0
    return float(np.sum(target_running(t, peak_running)) * 10.0 / vehicles_per_day)


def default_lust_dir() -> Path | None:
    """``$VMC_LUST_DIR``, else ``../shared/scenarios/lust`` next to the project, if it exists."""
    env = os.environ.get("VMC_LUST_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "scenarios" / "lust")
    for c in candidates:
        if (c / LUST_OSM_NAME).is_file():
            return c
    return None


def run_settings(
    sumo_options: Mapping[str, Any] | None = None, extra_args: Sequence[str] = (), time_to_teleport: float | None = None
) -> list[str]:
    """The SUMO options a LuST run uses, as command-line tokens.

    :data:`LUST_RUN_SETTINGS`, then ``sumo_options`` (``{option: value}``; ``None`` drops a
    default, ``True`` is a bare flag), then a scenario's ``extra_args`` and ``time_to_teleport``:
    a later one replaces an earlier one of the same name.
    """
    base: dict[str, Any] = dict(LUST_RUN_SETTINGS)
    for k, v in (sumo_options or {}).items():
        base[str(k).lstrip("-")] = v
    args: list[str] = []
    for k, v in base.items():
        if v is None or v is False:
            continue
        args += [f"--{k}"] if v is True else [f"--{k}", _value_text(v)]
    late = list(extra_args)
    if time_to_teleport is not None:
        late += ["--time-to-teleport", _value_text(time_to_teleport)]
    return merge_args(args, late)


def settings_key(args: Sequence[str]) -> dict[str, str | None]:
    """Run settings as a sorted ``{option: value}`` mapping (for cache keys and manifests), SUMO's
    outputs left out: they do not change the traffic."""
    return dict(sorted(options_dict(traffic_args(args)).items()))


def _value_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).lower() if isinstance(v, bool) else str(v)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class LustConfig:
    """What to build (filled from the scenario's ``mobility.lust`` mapping).

    ``begin``/``end`` is the window to simulate (default 07:00-09:00); demand starts ``warmup`` s
    earlier so the network is loaded at ``begin``. ``osm_file`` defaults to the LuST OSM in
    ``source_dir`` (or :func:`default_lust_dir`), whose bus lines, stops and vehicle types are used
    too. ``peak_running`` scales the published curve (its value at 08:00, LuST's 4,150 by
    default). ``trip_time`` is the mean trip time the closed loop steers towards (null:
    :func:`day_trip_time`, 551 s, which makes a day insert LuST's 287,000 vehicles). ``calibration`` picks the departure model (see
    :mod:`mobility.lust.calibration`); ``insertion_cap`` bounds the closed loop's insertions per
    step, ``delay_factor`` and ``bin_seconds`` shape the open loop's rate. ``sumo_options``
    override :data:`LUST_RUN_SETTINGS` (``null`` removes one); ``netconvert_args`` are added to
    the network build's options (:data:`mobility.lust.network.NETCONVERT_OPTIONS`).
    ``turn_bays`` adds a left-turn bay of ``turn_bay_length`` m at the end of every edge of
    ``turn_bay_ways`` (OSM way ids; ``null``: every way) with ``turn_bay_min_lanes`` or more lanes
    whose leftmost lane mixes left turns with straight traffic, before junctions of the SUMO node
    types in ``turn_bay_junctions`` (``null``: any type) (:mod:`mobility.lust.turn_bays`).
    ``dual_lefts`` lets the lane beside the leftmost turn left too at every traffic light ending an
    edge of ``dual_left_ways`` (``null``: every way) with ``dual_left_min_lanes`` or more lanes whose
    single left-turning lane enters a road of two or more lanes (:mod:`mobility.lust.dual_lefts`).
    ``time_to_impatience`` (s) is SUMO's ``--time-to-impatience`` (its default 180 s when null), a
    deviation from LuST's run settings placed before ``sumo_options``. ``left_green_time`` (s) is
    netconvert's ``--tls.left-green.time`` for every light (its default, 6 s, when null; 0: no
    protected left-turn phases, left turns go in the main green when there is a gap).
    ``minor_penalty`` (s) is the routing cost added to every minor link (a turn that must yield,
    such as a permissive left turn across opposing lanes), in duarouter and in SUMO's rerouting
    device alike (``--weights.minor-penalty``; SUMO's default, 1.5 s, when null): routes then
    avoid unprotected turns that the shortest-time router loads beyond their capacity.
    """

    osm_file: str | None = None
    source_dir: str | None = None
    begin: float = 25200.0
    end: float = 32400.0
    warmup: float = 1800.0
    peak_running: float = LUST_PEAK_RUNNING
    trip_time: float | None = None
    delay_factor: float = 1.6
    bin_seconds: float = 60.0
    min_distance: float = 500.0
    max_distance: float | None = 12000.0
    fringe_factor: float = 2.0
    vehicle_types: bool = True
    buses: bool = True
    calibration: str = "closed_loop"
    insertion_cap: float = 1.5
    sumo_options: dict[str, Any] = field(default_factory=dict)
    netconvert_args: list[str] = field(default_factory=list)
    turn_bays: bool = False
    turn_bay_ways: list[str] | None = field(default_factory=lambda: list(TURN_BAY_WAYS))
    turn_bay_length: float = 40.0
    turn_bay_min_lanes: int = 3
    turn_bay_junctions: list[str] | None = None
    dual_lefts: bool = True
    dual_left_ways: list[str] | None = None
    dual_left_min_lanes: int = 3
    time_to_impatience: float | None = None
    left_green_time: float | None = None
    minor_penalty: float | None = None
    seed: int = 42
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"lust.calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if not _num(self.insertion_cap) or self.insertion_cap < 1:
            raise ValueError(f"lust.insertion_cap must be a number >= 1, got {self.insertion_cap!r}")
        for name in ("begin", "end", "warmup", "min_distance", "fringe_factor"):
            v = getattr(self, name)
            if not _num(v) or v < 0:
                raise ValueError(f"lust.{name} must be a non-negative number, got {v!r}")
        if self.max_distance is not None and (not _num(self.max_distance) or self.max_distance <= self.min_distance):
            raise ValueError(
                f"lust.max_distance must be above lust.min_distance ({self.min_distance}) or null, "
                f"got {self.max_distance!r}"
            )
        if self.end <= self.begin:
            raise ValueError(f"lust.end ({self.end}) must be after lust.begin ({self.begin})")
        if self.end > 86400 * 2:
            raise ValueError(f"lust.end must be at most two days (172800 s), got {self.end!r}")
        for name in ("peak_running", "delay_factor", "bin_seconds"):
            v = getattr(self, name)
            if not _num(v) or v <= 0:
                raise ValueError(f"lust.{name} must be a positive number, got {v!r}")
        if self.trip_time is not None and (not _num(self.trip_time) or self.trip_time <= 0):
            raise ValueError(f"lust.trip_time must be a positive number of seconds or null, got {self.trip_time!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise ValueError(f"lust.seed must be an integer in [0, 2^31), got {self.seed!r}")
        for name in ("vehicle_types", "buses"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"lust.{name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.sumo_options, dict) or not all(isinstance(k, str) for k in self.sumo_options):
            raise ValueError(f"lust.sumo_options must map SUMO option names to values, got {self.sumo_options!r}")
        for k, v in self.sumo_options.items():
            if v is not None and not isinstance(v, (str, int, float, bool)):
                raise ValueError(f"lust.sumo_options.{k} must be a string, number, true/false or null, got {v!r}")
        if self.minor_penalty is not None and (not _num(self.minor_penalty) or self.minor_penalty < 0):
            raise ValueError(f"lust.minor_penalty must be a number of seconds >= 0 or null, got {self.minor_penalty!r}")
        if self.time_to_impatience is not None and (not _num(self.time_to_impatience) or self.time_to_impatience <= 0):
            raise ValueError(
                f"lust.time_to_impatience must be a positive number of seconds or null, got {self.time_to_impatience!r}"
            )
        if self.left_green_time is not None and (not _num(self.left_green_time) or self.left_green_time < 0):
            raise ValueError(
                f"lust.left_green_time must be a non-negative number of seconds or null, got {self.left_green_time!r}"
            )
        for prefix in ("turn_bay", "dual_left"):
            self._check_lane_patch(prefix)
        if not _num(self.turn_bay_length) or self.turn_bay_length < 15:
            raise ValueError(f"lust.turn_bay_length must be a number of metres >= 15, got {self.turn_bay_length!r}")
        if self.turn_bay_junctions is not None and (
            not isinstance(self.turn_bay_junctions, list)
            or not self.turn_bay_junctions
            or not all(t in JUNCTION_TYPES for t in self.turn_bay_junctions)
        ):
            raise ValueError(
                f"lust.turn_bay_junctions must be a non-empty list of {JUNCTION_TYPES} or null, "
                f"got {self.turn_bay_junctions!r}"
            )
        if not isinstance(self.netconvert_args, list) or not all(isinstance(a, str) for a in self.netconvert_args):
            raise ValueError(f"lust.netconvert_args must be a list of strings, got {self.netconvert_args!r}")

    def _check_lane_patch(self, prefix: str) -> None:
        """The on/off switch, ways and minimum lane count of one lane patch (``turn_bay``, ``dual_left``)."""
        switch, ways, lanes = (f"{prefix}s", f"{prefix}_ways", f"{prefix}_min_lanes")
        if not isinstance(getattr(self, switch), bool):
            raise ValueError(f"lust.{switch} must be true or false, got {getattr(self, switch)!r}")
        w = getattr(self, ways)
        if w is not None and (not isinstance(w, list) or not w or not all(isinstance(x, str) and x for x in w)):
            raise ValueError(f"lust.{ways} must be a non-empty list of OSM way ids (strings) or null, got {w!r}")
        n = getattr(self, lanes)
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"lust.{lanes} must be an integer >= 2, got {n!r}")

    @property
    def demand_begin(self) -> float:
        """Time the demand (and the simulation) starts: ``begin - warmup``, not before midnight."""
        return max(0.0, self.begin - self.warmup)

    @property
    def target_trip_time(self) -> float:
        """``trip_time``, or the day's mean by Little's law on LuST's curve (:func:`day_trip_time`,
        551 s: a day at LuST's peak then inserts its 287,000 vehicles; the same trip time at any
        other peak scales the day's vehicles with the peak)."""
        return float(self.trip_time) if self.trip_time is not None else day_trip_time()

    def run_settings(self, extra_args: Sequence[str] = (), time_to_teleport: float | None = None) -> list[str]:
        """This config's SUMO run settings, a scenario's ``extra_args`` on top (see :func:`run_settings`)."""
        options: dict[str, Any] = {}
        if self.time_to_impatience is not None:
            options["time-to-impatience"] = self.time_to_impatience
        if self.minor_penalty is not None:
            options["weights.minor-penalty"] = self.minor_penalty
        options.update(self.sumo_options)
        return run_settings(options, extra_args, time_to_teleport)

    def resolve_osm(self) -> Path:
        """The OSM file to convert; ValueError naming the field if it cannot be found."""
        if self.osm_file is not None:
            p = Path(self.osm_file).expanduser().resolve()
            if not p.is_file():
                raise ValueError(f"lust.osm_file does not exist: {p}")
            return p
        if self.source_dir is not None:
            p = Path(self.source_dir).expanduser().resolve() / LUST_OSM_NAME
            if not p.is_file():
                raise ValueError(f"lust.source_dir has no {LUST_OSM_NAME}: {p.parent}")
            return p
        d = default_lust_dir()
        if d is None:
            raise ValueError(
                f"no LuST OSM found: set lust.osm_file or lust.source_dir (or $VMC_LUST_DIR) "
                f"to a folder holding {LUST_OSM_NAME}"
            )
        return d / LUST_OSM_NAME

    def source_file(self, name: str) -> Path | None:
        """A LuST input (vehicle types, bus lines, stops) beside the OSM, if it is there."""
        p = self.resolve_osm().parent / name
        return p if p.is_file() else None


@dataclass(frozen=True)
class LustFiles:
    """A runnable LuST scenario (rebuilt or a clone); ``sumo_args`` are its run settings."""

    directory: Path
    net_file: Path
    route_files: tuple[Path, ...]
    additional_files: tuple[Path, ...]
    config_file: Path | None
    begin: float
    end: float | None
    observe_from: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    sumo_args: tuple[str, ...] = ()
    peak_running: float = LUST_PEAK_RUNNING

    def sumo_config(self, **overrides: Any) -> SumoConfig:
        """A SumoConfig for this scenario with its run settings; a clone runs through its own .sumocfg.

        An ``extra_args`` override is merged over the run settings (a later option wins)."""
        if self.config_file is not None:
            values: dict[str, Any] = {"config_file": str(self.config_file)}
        else:
            values = {
                "net_file": str(self.net_file),
                "route_files": [str(p) for p in self.route_files],
                "additional_files": [str(p) for p in self.additional_files],
                "begin": self.begin,
                "end": self.end,
            }
        extra = merge_args(self.sumo_args, overrides.pop("extra_args", []) or [])
        values.update(overrides)
        return SumoConfig(extra_args=extra, **values)
