"""LuST (Luxembourg SUMO Traffic): the rebuilt topology and a calibrated time-of-day demand.

Two ways in:

* :func:`lust_clone`: a real LuST clone (``lust.net.xml`` + ``dua.static.sumocfg``) is used as it
  is, through its own ``.sumocfg``.
* :func:`build_lust`: the topology is rebuilt from the LuST OSM export with ``netconvert`` (its
  defaults reproduce the published network size; traffic lights get actuated programs, which
  change no junction or edge and roughly halve the queues of netconvert's fixed-time default)
  and a demand is generated whose number of running vehicles follows the published curve
  (``TrafficDemands.png``: about 4,000 at 08:00). Both are cached like the embedded city.

Demand model. Trips are drawn between random edges of the largest strongly connected part of the
passenger road graph (weights: length x lanes, ``fringe_factor`` for edges on the network
boundary, between ``min_distance`` and ``max_distance`` apart) from one seeded numpy stream and routed once by
``duarouter`` (static shortest paths, ``--seed``). Departure times come from one of two
calibrations (``LustConfig.calibration``):

* ``closed_loop`` (default): one calibration run of SUMO over ``[begin - warmup, end]`` inserts
  the routed trips, in their fixed order, whenever the number of vehicles running or waiting to
  enter falls below the target curve (at most ``insertion_cap`` times the free-flow rate per
  step), and records when each vehicle was inserted. The written route file replays that
  schedule, so a plain SUMO run (same seed) follows the published curve closely whatever the
  rebuilt network's congestion does to trip times. Costs one simulation of the window at build
  time (cached).
* ``open_loop``: a non-homogeneous Poisson process (seeded) with rate
  ``lambda(t) = N(t) / tau + dN/dt``, the inverse of the running count N(t) of an infinite-server
  queue with exponential trip times of mean ``tau`` = free-flow trip time x ``delay_factor``.
  Instant to build, but on the rebuilt network congestion makes trips far longer than any
  fixed ``tau`` at 4,000 vehicles, so the running count overshoots; use it for light demand or
  a ``delay_factor`` measured with :func:`demand_report` (``observed_trip_time``).

The bus lines, bus stops and static traffic-light programs shipped with LuST refer to the ids
of the original, hand-edited ``lust.net.xml``; most of them do not exist in the rebuilt network,
so they are not used here (a LuST clone keeps them).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
import time as _time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from mobility.cache import cached_build, file_sha256, strip_generated_header
from mobility.sumo import SumoConfig, SumoSession, run_command, sumo_binary, sumo_version

LUST_OSM_NAME = "lust.legacy.scenario.osm.gz"
LUST_VTYPES_NAME = "vtypes.add.xml"
LUST_BUILDER_VERSION = 4
PUBLISHED_NETWORK = {"nodes": 2365, "edges": 5959, "length_km": 929.5}
PUBLISHED_VEHICLES_PER_DAY = 287_000
CALIBRATIONS = ("closed_loop", "open_loop")

# Running vehicles over the day read off TrafficDemands.png ("DUE - Static" curve), as
# (hour, vehicles); linearly interpolated and rescaled so that 08:00 equals ``peak_running``.
REFERENCE_CURVE: tuple[tuple[float, float], ...] = (
    (0.0, 0), (0.25, 100), (1.0, 130), (1.5, 180), (2.0, 180), (2.5, 230), (3.0, 260), (3.5, 300),
    (4.0, 320), (4.5, 480), (5.0, 650), (5.5, 1000), (6.0, 1450), (6.5, 2400), (7.0, 3200), (7.5, 3800),
    (8.0, 4150), (8.25, 4250), (8.5, 4200), (9.0, 3700), (9.5, 2900), (10.0, 2000), (10.5, 1500),
    (11.0, 950), (11.25, 1400), (12.0, 1350), (12.1, 2400), (12.5, 2500), (13.0, 2800), (13.5, 2950),
    (14.0, 2700), (14.5, 2300), (15.0, 1700), (15.5, 1200), (16.0, 1450), (16.5, 2000), (17.0, 2500),
    (17.5, 3000), (18.0, 3500), (18.5, 3850), (19.0, 3600), (19.5, 3200), (20.0, 2700), (20.5, 2000),
    (21.0, 1500), (21.5, 1200), (22.0, 1050), (22.5, 950), (23.0, 850), (23.5, 700), (24.0, 550),
)
_REFERENCE_AT_8 = 4150.0


def target_running(t: Any, peak_running: float = 4000.0) -> Any:
    """Published running-vehicle count at time(s) of day ``t`` (s), scaled so 08:00 = ``peak_running``."""
    import numpy as np

    hours = np.array([h for h, _ in REFERENCE_CURVE]) * 3600.0
    values = np.array([v for _, v in REFERENCE_CURVE], dtype=float) * (peak_running / _REFERENCE_AT_8)
    out = np.interp(np.asarray(t, dtype=float), hours, values)
    return float(out) if np.ndim(out) == 0 else out


def default_lust_dir() -> Path | None:
    """``$VMC_LUST_DIR``, else ``../shared/scenarios/lust`` next to the project, if it exists."""
    env = os.environ.get("VMC_LUST_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "scenarios" / "lust")
    for c in candidates:
        if (c / LUST_OSM_NAME).is_file():
            return c
    return None


@dataclass
class LustConfig:
    """What to build (filled from the scenario YAML); times are seconds of the day.

    ``begin``/``end`` is the window to simulate; demand starts ``warmup`` s earlier so the
    network is loaded at ``begin``. ``osm_file`` defaults to the LuST OSM in ``source_dir`` (or
    :func:`default_lust_dir`). ``peak_running`` scales the published curve (its value at
    08:00). ``calibration`` picks the departure model (see the module docstring);
    ``insertion_cap`` bounds the closed loop's insertions per step, ``delay_factor`` and
    ``bin_seconds`` shape the open loop's rate.
    """

    osm_file: str | None = None
    source_dir: str | None = None
    begin: float = 27000.0
    end: float = 30600.0
    warmup: float = 1800.0
    peak_running: float = 4000.0
    delay_factor: float = 1.6
    bin_seconds: float = 60.0
    min_distance: float = 500.0
    max_distance: float | None = 4000.0
    fringe_factor: float = 2.0
    vehicle_types: bool = True
    calibration: str = "closed_loop"
    insertion_cap: float = 1.5
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
            raise ValueError(f"lust.max_distance must be above lust.min_distance ({self.min_distance}) or null, "
                             f"got {self.max_distance!r}")
        if self.end <= self.begin:
            raise ValueError(f"lust.end ({self.end}) must be after lust.begin ({self.begin})")
        if self.end > 86400 * 2:
            raise ValueError(f"lust.end must be at most two days (172800 s), got {self.end!r}")
        for name in ("peak_running", "delay_factor", "bin_seconds"):
            v = getattr(self, name)
            if not _num(v) or v <= 0:
                raise ValueError(f"lust.{name} must be a positive number, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise ValueError(f"lust.seed must be an integer in [0, 2^31), got {self.seed!r}")
        if not isinstance(self.vehicle_types, bool):
            raise ValueError(f"lust.vehicle_types must be true or false, got {self.vehicle_types!r}")

    @property
    def demand_begin(self) -> float:
        """Time the demand (and the simulation) starts: ``begin - warmup``, not before midnight."""
        return max(0.0, self.begin - self.warmup)

    def resolve_osm(self) -> Path:
        """The OSM file to convert; ValueError naming the field if it cannot be found."""
        if self.osm_file is not None:
            p = Path(self.osm_file).expanduser()
            if not p.is_file():
                raise ValueError(f"lust.osm_file does not exist: {p}")
            return p
        if self.source_dir is not None:
            p = Path(self.source_dir).expanduser() / LUST_OSM_NAME
            if not p.is_file():
                raise ValueError(f"lust.source_dir has no {LUST_OSM_NAME}: {p.parent}")
            return p
        d = default_lust_dir()
        if d is None:
            raise ValueError(f"no LuST OSM found: set lust.osm_file or lust.source_dir (or $VMC_LUST_DIR) "
                             f"to a folder holding {LUST_OSM_NAME}")
        return d / LUST_OSM_NAME


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class LustFiles:
    """A runnable LuST scenario (rebuilt or a clone)."""

    directory: Path
    net_file: Path
    route_files: tuple[Path, ...]
    additional_files: tuple[Path, ...]
    config_file: Path | None
    begin: float
    end: float | None
    observe_from: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def sumo_config(self, **overrides: Any) -> SumoConfig:
        """A SumoConfig for this scenario; a clone runs through its own .sumocfg."""
        if self.config_file is not None:
            values: dict[str, Any] = {"config_file": str(self.config_file)}
        else:
            values = {"net_file": str(self.net_file), "route_files": [str(p) for p in self.route_files],
                      "additional_files": [str(p) for p in self.additional_files], "begin": self.begin,
                      "end": self.end}
        values.update(overrides)
        return SumoConfig(**values)


def network_stats(net_file: str | Path) -> dict[str, Any]:
    """Junctions (non-internal nodes), edges (non-internal) and total edge length (km) of a network."""
    import sumolib

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    nodes = [n for n in net.getNodes() if n.getType() != "internal"]
    edges = net.getEdges()
    return {"nodes": len(nodes), "edges": len(edges),
            "length_km": round(sum(e.getLength() for e in edges) / 1000.0, 1)}


def build_lust_network(config: LustConfig | None = None, *, force: bool = False) -> tuple[Path, dict[str, Any]]:
    """Convert the LuST OSM with netconvert (cached); returns the net file and its manifest."""
    cfg = config or LustConfig()
    osm = cfg.resolve_osm()
    params = {"osm_sha256": file_sha256(osm), "builder": LUST_BUILDER_VERSION, "sumo": sumo_version()}

    def _build(out: Path) -> dict[str, Any]:
        net = out / "lust.net.xml"
        run_command([str(sumo_binary("netconvert")), "--osm-files", str(osm), "-o", str(net),
                     "--tls.default-type", "actuated", "--no-warnings", "true"], what="netconvert (LuST OSM)", cwd=out)
        strip_generated_header(net)
        vtypes = osm.parent / LUST_VTYPES_NAME
        if vtypes.is_file():
            shutil.copyfile(vtypes, out / LUST_VTYPES_NAME)
        return {"osm": str(osm), "network": {"file": net.name, "sha256": file_sha256(net), **network_stats(net),
                                             "published": PUBLISHED_NETWORK}}

    directory, manifest = cached_build("lust-net", params, _build, root=cfg.cache_dir, force=force)
    return directory / "lust.net.xml", manifest


def _passenger_edges(net: Any) -> tuple[list[Any], set[str]]:
    """Edges usable by passenger cars that lie in the largest strongly connected part of the road graph."""
    import networkx as nx

    g = nx.DiGraph()
    for e in net.getEdges():
        if e.allows("passenger") and not e.isSpecial():
            g.add_node(e.getID())
            for o in e.getAllowedOutgoing("passenger"):
                if o.allows("passenger"):
                    g.add_edge(e.getID(), o.getID())
    giant = max(nx.strongly_connected_components(g), key=len)
    return [net.getEdge(i) for i in sorted(giant)], giant


def _sample_od(edges: Sequence[Any], n: int, cfg: LustConfig, rng: Any) -> list[tuple[str, str]]:
    import numpy as np

    w = np.array([e.getLength() * e.getLaneNumber() * (cfg.fringe_factor if e.is_fringe() else 1.0) for e in edges])
    p = w / w.sum()
    centres = np.array([_edge_centre(e) for e in edges])
    out_o = np.empty(0, dtype=int)
    out_d = np.empty(0, dtype=int)
    while len(out_o) < n:
        k = max(2 * (n - len(out_o)), 64)
        o = rng.choice(len(edges), size=k, p=p)
        d = rng.choice(len(edges), size=k, p=p)
        dist = np.hypot(*(centres[o] - centres[d]).T)
        ok = (o != d) & (dist >= cfg.min_distance)
        if cfg.max_distance is not None:
            ok &= dist <= cfg.max_distance
        out_o = np.concatenate([out_o, o[ok]])
        out_d = np.concatenate([out_d, d[ok]])
    return [(edges[a].getID(), edges[b].getID()) for a, b in zip(out_o[:n], out_d[:n])]


def _edge_centre(e: Any) -> tuple[float, float]:
    shape = e.getShape()
    (x0, y0), (x1, y1) = shape[0][:2], shape[-1][:2]
    return (x0 + x1) / 2.0, (y0 + y1) / 2.0


def _write_trips(path: Path, od: Sequence[tuple[str, str]], departs: Sequence[float], vtype: str | None,
                 prefix: str) -> None:
    type_attr = f' type="{vtype}"' if vtype else ""
    with open(path, "w", encoding="utf-8") as f:
        f.write("<routes>\n")
        for i, ((o, d), t) in enumerate(zip(od, departs)):
            f.write(f'    <trip id="{prefix}{i}"{type_attr} depart="{t:.2f}" from="{o}" to="{d}" '
                    'departLane="best" departSpeed="max"/>\n')
        f.write("</routes>\n")


def _route(net: Path, trips: Path, out: Path, additional: Path | None, seed: int, workdir: Path) -> None:
    args = [str(sumo_binary("duarouter")), "-n", str(net), "--route-files", str(trips), "-o", str(out),
            "--ignore-errors", "true", "--no-warnings", "true", "--no-step-log", "true", "--seed", str(seed),
            "--routing-threads", "2", "--routing-algorithm", "CH", "--alternatives-output", "NUL",
            "--vtype-output", str(workdir / "vtypes.used.xml")]
    if additional is not None:
        args += ["--additional-files", str(additional)]
    run_command(args, what="duarouter (LuST demand)", cwd=workdir)
    (workdir / "vtypes.used.xml").unlink(missing_ok=True)
    strip_generated_header(out)


def _free_flow_times(routes: Path, net: Any) -> list[float]:
    speed_len = {e.getID(): (e.getLength(), e.getSpeed()) for e in net.getEdges()}
    times = []
    for _, el in ET.iterparse(routes, events=("end",)):
        if el.tag == "route" and el.get("edges"):
            times.append(sum(speed_len[e][0] / max(speed_len[e][1], 0.1) for e in el.get("edges", "").split()
                             if e in speed_len))
        elif el.tag == "vehicle":
            el.clear()
    return times


def insertion_rate(t: Any, tau: float, peak_running: float) -> Any:
    """Insertion rate (vehicles/s) that keeps ``target_running`` running with mean trip time ``tau`` (s)."""
    import numpy as np

    t = np.asarray(t, dtype=float)
    h = 30.0
    slope = (target_running(t + h, peak_running) - target_running(t - h, peak_running)) / (2 * h)
    return np.maximum(target_running(t, peak_running) / tau + slope, 0.0)


def _departures(cfg: LustConfig, tau: float, rng: Any) -> list[float]:
    import numpy as np

    start, stop = cfg.demand_begin, cfg.end
    grid = np.arange(start, stop + cfg.bin_seconds, cfg.bin_seconds)
    grid[-1] = stop
    mids = (grid[:-1] + grid[1:]) / 2.0
    cum = np.concatenate([[0.0], np.cumsum(insertion_rate(mids, tau, cfg.peak_running) * np.diff(grid))])
    total = cum[-1]
    arrivals = []
    acc = 0.0
    while True:
        acc += float(rng.exponential())
        if acc > total:
            break
        arrivals.append(acc)
    return [float(x) for x in np.interp(np.array(arrivals), cum, grid)] if arrivals else []


def expected_insertions(cfg: LustConfig, trip_time: float) -> float:
    """Vehicles the open-loop rate inserts over ``[demand_begin, end]`` for a mean trip time (s)."""
    import numpy as np

    grid = np.arange(cfg.demand_begin, cfg.end, 60.0)
    return float(np.sum(insertion_rate(grid + 30.0, trip_time, cfg.peak_running)) * 60.0)


def _read_routes(path: Path) -> list[tuple[str, str | None, str]]:
    out = []
    for _, el in ET.iterparse(path, events=("end",)):
        if el.tag == "vehicle":
            route = el.find("route")
            if route is not None and route.get("edges"):
                out.append((el.get("id", ""), el.get("type"), route.get("edges", "")))
            el.clear()
    return out


def _closed_loop(cfg: LustConfig, net_file: Path, pool: list[tuple[str, str | None, str]], additional: Path | None,
                 out: Path, free_flow: float, backend: str) -> dict[str, Any]:
    """Insert pool vehicles so that the running count tracks the target; write what was inserted."""
    import numpy as np

    scfg = SumoConfig(backend=backend, net_file=str(net_file),
                      additional_files=[str(additional)] if additional is not None else [],
                      begin=cfg.demand_begin, end=cfg.end, seed=cfg.seed)
    inserted: list[tuple[str, str | None, str, float]] = []
    samples: list[list[float]] = []
    nxt = 0
    with SumoSession(scfg) as s:
        api, dt = s.raw, scfg.step_length
        next_sample = s.time + 60.0
        while s.time + dt <= cfg.end + 1e-9:
            t = s.time
            goal = target_running(t + dt, cfg.peak_running)
            have = int(s.call("simulation.getMinExpectedNumber", lambda: api.simulation.getMinExpectedNumber()))
            cap = math.ceil(cfg.insertion_cap * float(insertion_rate(t, free_flow, cfg.peak_running)) * dt)
            n = max(0, min(int(goal) - have, max(cap, 1), len(pool) - nxt))

            def _add(batch: list[tuple[str, str | None, str]] = pool[nxt:nxt + n]) -> None:
                for vid, vtype, edges in batch:
                    api.route.add("r:" + vid, edges.split())
                    api.vehicle.add(vid, "r:" + vid, typeID=vtype or "DEFAULT_VEHTYPE", depart="now",
                                    departLane="best", departSpeed="max")

            if n:
                s.call("vehicle.add", _add)
                inserted.extend((vid, vtype, edges, t) for vid, vtype, edges in pool[nxt:nxt + n])
                nxt += n
            t = s.step()
            if t + 1e-9 >= next_sample:
                samples.append([t, s.running_count(), round(target_running(t, cfg.peak_running), 1)])
                next_sample += 60.0
        teleports = s.teleports
    with open(out, "w", encoding="utf-8") as f:
        f.write("<routes>\n")
        for vid, vtype, edges, t in inserted:
            type_attr = f' type="{vtype}"' if vtype else ""
            f.write(f'    <vehicle id="{vid}"{type_attr} depart="{t:.2f}" departLane="best" departSpeed="max">\n'
                    f'        <route edges="{edges}"/>\n    </vehicle>\n')
        f.write("</routes>\n")
    window = [row for row in samples if row[0] >= cfg.begin]
    err = float(np.mean([abs(r[1] - r[2]) / r[2] for r in window])) if window else math.nan
    return {"inserted": len(inserted), "pool": len(pool), "pool_exhausted": nxt >= len(pool), "teleports": teleports,
            "mean_relative_error": round(err, 4), "curve": samples}


def build_lust(config: LustConfig | None = None, *, force: bool = False, backend: str = "libsumo") -> LustFiles:
    """Rebuilt LuST network plus calibrated demand for ``config`` (both cached).

    ``backend`` is used for the closed-loop calibration run (use ``traci`` if a libsumo
    simulation is already open in this process).
    """
    import numpy as np
    import sumolib

    cfg = config or LustConfig()
    cfg.validate()
    net_file, net_manifest = build_lust_network(cfg, force=force)
    vtypes_src = net_file.parent / LUST_VTYPES_NAME
    use_vtypes = cfg.vehicle_types and vtypes_src.is_file()
    params = {k: v for k, v in asdict(cfg).items() if k not in ("cache_dir", "osm_file", "source_dir")}
    params.update(net_sha256=net_manifest["network"]["sha256"], vtypes=use_vtypes, builder=LUST_BUILDER_VERSION,
                  sumo=sumo_version())

    def _build(out: Path) -> dict[str, Any]:
        t0 = _time.perf_counter()
        net = sumolib.net.readNet(str(net_file), withInternal=False)
        edges, _ = _passenger_edges(net)
        od_rng = np.random.default_rng([cfg.seed, 1])
        depart_rng = np.random.default_rng([cfg.seed, 2])
        additional = None
        if use_vtypes:
            additional = out / LUST_VTYPES_NAME
            shutil.copyfile(vtypes_src, additional)
        vtype = "private" if use_vtypes else None
        pilot_trips, pilot_routes = out / "pilot.trips.xml", out / "pilot.rou.xml"
        _write_trips(pilot_trips, _sample_od(edges, 2000, cfg, od_rng), [0.0] * 2000, vtype, "pilot")
        _route(net_file, pilot_trips, pilot_routes, additional, cfg.seed, out)
        free_flow = float(np.mean(_free_flow_times(pilot_routes, net)))
        pilot_trips.unlink()
        pilot_routes.unlink()
        tau = free_flow * cfg.delay_factor
        trips, routes = out / "lust.trips.xml", out / "lust.rou.xml"
        demand: dict[str, Any] = {"calibration": cfg.calibration}
        if cfg.calibration == "open_loop":
            departs = _departures(cfg, tau, depart_rng)
            _write_trips(trips, _sample_od(edges, len(departs), cfg, od_rng), departs, vtype, "lust")
            _route(net_file, trips, routes, additional, cfg.seed, out)
            demand["trips"] = len(departs)
        else:
            n_pool = int(math.ceil(1.1 * expected_insertions(cfg, free_flow))) + 200
            pool_routes = out / "pool.rou.xml"
            _write_trips(trips, _sample_od(edges, n_pool, cfg, od_rng), [cfg.demand_begin] * n_pool, vtype, "lust")
            _route(net_file, trips, pool_routes, additional, cfg.seed, out)
            demand["closed_loop"] = _closed_loop(cfg, net_file, _read_routes(pool_routes), additional, routes,
                                                 free_flow, backend)
            pool_routes.unlink()
            demand["trips"] = demand["closed_loop"]["inserted"]
        trips.unlink()
        strip_generated_header(routes)
        routed = sum(1 for _, el in ET.iterparse(routes, events=("end",)) if el.tag == "vehicle")
        span_h = (cfg.end - cfg.demand_begin) / 3600.0
        demand.update({
            "file": routes.name, "sha256": file_sha256(routes), "routed": routed,
            "window": [cfg.demand_begin, cfg.end], "free_flow_trip_time_s": round(free_flow, 1),
            "insertions_per_hour": round(routed / span_h), "open_loop_trip_time_s": round(tau, 1),
            "open_loop_vehicles_per_day": round(_per_day(tau, cfg.peak_running)),
            "published_vehicles_per_day": PUBLISHED_VEHICLES_PER_DAY, "seed": cfg.seed,
            "build_s": round(_time.perf_counter() - t0, 1),
        })
        return {"network": net_manifest["network"], "demand": demand}

    directory, manifest = cached_build("lust-demand", params, _build, root=cfg.cache_dir, force=force)
    add = (directory / LUST_VTYPES_NAME,) if use_vtypes else ()
    return LustFiles(directory=directory, net_file=net_file, route_files=(directory / "lust.rou.xml",),
                     additional_files=add, config_file=None, begin=cfg.demand_begin, end=cfg.end,
                     observe_from=cfg.begin, metadata=manifest)


def _per_day(tau: float, peak_running: float) -> float:
    import numpy as np

    day = np.arange(0.0, 86400.0, 60.0)
    return float(np.sum(insertion_rate(day + 30.0, tau, peak_running)) * 60.0)


def lust_clone(clone_dir: str | Path, config_name: str = "dua.static.sumocfg") -> LustFiles:
    """A real LuST clone, run as it is through its own configuration file."""
    d = Path(clone_dir).expanduser()
    net = d / "lust.net.xml"
    cfg = d / config_name
    missing = [str(p) for p in (net, cfg) if not p.is_file()]
    if missing:
        raise ValueError(f"lust clone_dir {d} lacks {missing} (expected a LuST checkout with lust.net.xml and {config_name})")
    return LustFiles(directory=d, net_file=net, route_files=(), additional_files=(), config_file=cfg, begin=0.0,
                     end=None, metadata={"source": "lust-clone", "dir": str(d), "config": config_name})


def lust_files(spec: "LustConfig | dict[str, Any] | None" = None, *, backend: str = "libsumo") -> LustFiles:
    """LuST scenario from a config or from plain data (a scenario's ``mobility.lust`` mapping).

    A mapping with ``clone_dir`` (and optionally ``config_name``) selects a real LuST clone; any
    other keys are :class:`LustConfig` fields. Unknown keys raise ValueError naming them.
    """
    if spec is None or isinstance(spec, LustConfig):
        return build_lust(spec, backend=backend)
    if not isinstance(spec, dict):
        raise ValueError(f"mobility.lust must be a mapping, got {type(spec).__name__}")
    data = dict(spec)
    if "clone_dir" in data:
        clone = data.pop("clone_dir")
        name = data.pop("config_name", "dua.static.sumocfg")
        if data:
            raise ValueError(f"mobility.lust: {sorted(data)} cannot be combined with clone_dir (a clone runs as it is)")
        return lust_clone(clone, name)
    known = {f.name for f in dataclasses.fields(LustConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"mobility.lust.{unknown[0]} is not a known field (known: {sorted(known | {'clone_dir'})})")
    return build_lust(LustConfig(**data), backend=backend)


def sumo_inputs(spec: "LustConfig | dict[str, Any] | None" = None, *, backend: str = "libsumo") -> dict[str, Any]:
    """SumoConfig input fields (files only) for the LuST scenario ``spec`` (see :func:`lust_files`).

    The rebuilt scenario's traffic starts at ``LustFiles.begin`` (``begin - warmup``), so a run
    should set ``SumoConfig.begin`` to it: :func:`lust_begin` gives that time.
    """
    files = lust_files(spec, backend=backend)
    if files.config_file is not None:
        return {"config_file": str(files.config_file)}
    return {"net_file": str(files.net_file), "route_files": [str(p) for p in files.route_files],
            "additional_files": [str(p) for p in files.additional_files]}


def lust_begin(spec: "LustConfig | dict[str, Any] | None" = None) -> float | None:
    """Simulated time at which the rebuilt scenario's traffic starts (None for a clone: its own config decides)."""
    if isinstance(spec, dict):
        if "clone_dir" in spec:
            return None
        known = {f.name for f in dataclasses.fields(LustConfig)}
        spec = LustConfig(**{k: v for k, v in spec.items() if k in known})
    return (spec or LustConfig()).demand_begin


@dataclass
class DemandReport:
    """Running vehicles achieved vs the published curve over a simulated window."""

    times: list[float]
    achieved: list[int]
    target: list[float]
    teleports: int
    departed: int
    arrived: int
    arrived_compared: int
    wall_s: float
    simulated_s: float
    compare_from: float

    @property
    def real_time_factor(self) -> float:
        """Simulated seconds per wall-clock second."""
        return self.simulated_s / self.wall_s if self.wall_s > 0 else math.inf

    def _window(self) -> list[int]:
        return [i for i, t in enumerate(self.times) if t >= self.compare_from]

    @property
    def mean_relative_error(self) -> float:
        """Mean of |achieved - target| / target over the compared window."""
        idx = self._window()
        return sum(abs(self.achieved[i] - self.target[i]) / self.target[i] for i in idx) / max(len(idx), 1)

    @property
    def observed_trip_time(self) -> float:
        """Mean trip time (s) by Little's law over the compared window: mean running / arrival rate."""
        idx = self._window()
        if len(idx) < 2 or self.arrived_compared == 0:
            return math.nan
        mean_running = sum(self.achieved[i] for i in idx) / len(idx)
        span = self.times[idx[-1]] - self.compare_from
        return mean_running * span / self.arrived_compared if span > 0 else math.nan

    def at(self, t: float) -> tuple[float, int, float]:
        """The sample nearest to time ``t``: (time, achieved, target)."""
        i = min(range(len(self.times)), key=lambda k: abs(self.times[k] - t))
        return self.times[i], self.achieved[i], self.target[i]

    def summary(self) -> str:
        """A few lines for humans."""
        lines = [f"simulated {self.simulated_s:.0f} s in {self.wall_s:.1f} s (real-time factor {self.real_time_factor:.1f}); "
                 f"departed {self.departed}, arrived {self.arrived}, teleports {self.teleports}",
                 f"running vs target from {_hhmm(self.compare_from)}: mean relative error "
                 f"{100 * self.mean_relative_error:.1f} %; observed mean trip time {self.observed_trip_time:.0f} s"]
        for t, a, g in zip(self.times, self.achieved, self.target):
            if t >= self.compare_from and int(t) % 900 == 0:
                lines.append(f"  {_hhmm(t)}  running {a:5d}  target {g:6.0f}  ({100 * (a - g) / g:+.1f} %)")
        return "\n".join(lines)

    def to_csv(self, path: str | Path) -> Path:
        """Write time, achieved, target as CSV."""
        p = Path(path)
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s", "running", "target"])
            for row in zip(self.times, self.achieved, self.target):
                w.writerow([row[0], row[1], round(row[2], 1)])
        return p

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict including the derived figures."""
        d = asdict(self)
        d.update(real_time_factor=self.real_time_factor, mean_relative_error=self.mean_relative_error,
                 observed_trip_time=self.observed_trip_time)
        return d


def _hhmm(t: float) -> str:
    t = int(t) % 86400
    return f"{t // 3600:02d}:{(t % 3600) // 60:02d}"


def demand_report(files: LustFiles, *, end: float | None = None, compare_from: float | None = None,
                  sample_every: float = 60.0, backend: str = "libsumo", peak_running: float = 4000.0,
                  seed: int = 42, progress: Callable[[float, int, float], None] | None = None) -> DemandReport:
    """Run the scenario without coverage tracking and compare running vehicles with the published curve.

    ``progress(time, running, target)`` is called at every sample if given.
    """
    cfg = files.sumo_config(backend=backend, seed=seed, **({"end": end} if end is not None else {}))
    times, achieved, departed, arrived, arrived_compared = [], [], 0, 0, 0
    frm = compare_from if compare_from is not None else (files.observe_from if files.observe_from is not None
                                                          else files.begin)
    t0 = _time.perf_counter()
    with SumoSession(cfg) as s:
        start = s.time
        next_sample = start + sample_every
        while not s.finished:
            t = s.step()
            departed += len(s.departed_ids())
            n_arr = len(s.arrived_ids())
            arrived += n_arr
            if t > frm:
                arrived_compared += n_arr
            if t + 1e-9 >= next_sample:
                times.append(t)
                achieved.append(s.running_count())
                next_sample += sample_every
                if progress is not None:
                    progress(t, achieved[-1], target_running(t, peak_running))
        teleports = s.teleports
        simulated = s.time - start
    wall = _time.perf_counter() - t0
    return DemandReport(times=times, achieved=achieved, target=[target_running(t, peak_running) for t in times],
                        teleports=teleports, departed=departed, arrived=arrived, arrived_compared=arrived_compared,
                        wall_s=wall, simulated_s=simulated, compare_from=frm)


def report_json(report: DemandReport) -> str:
    """The report as indented JSON."""
    return json.dumps(report.to_dict(), indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mobility lust``: build (or reuse) the LuST scenario and optionally report its curve."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m mobility lust", description=main.__doc__)
    p.add_argument("--osm", help="LuST OSM file (default: ../shared/scenarios/lust or $VMC_LUST_DIR)")
    p.add_argument("--clone", help="a real LuST clone folder (lust.net.xml + dua.static.sumocfg), used as is")
    p.add_argument("--begin", type=float, default=LustConfig.begin, help="window start, s of day")
    p.add_argument("--end", type=float, default=LustConfig.end, help="window end, s of day")
    p.add_argument("--warmup", type=float, default=LustConfig.warmup)
    p.add_argument("--peak", type=float, default=LustConfig.peak_running, help="running vehicles at 08:00")
    p.add_argument("--delay-factor", type=float, default=LustConfig.delay_factor)
    p.add_argument("--calibration", default=LustConfig.calibration, choices=list(CALIBRATIONS))
    p.add_argument("--seed", type=int, default=LustConfig.seed)
    p.add_argument("--report", action="store_true", help="simulate the window and compare with the published curve")
    p.add_argument("--csv", help="write the achieved curve to this CSV file (with --report)")
    p.add_argument("--backend", default="libsumo", choices=["libsumo", "traci"])
    a = p.parse_args(argv)
    if a.clone:
        files = lust_clone(a.clone)
    else:
        files = build_lust(LustConfig(osm_file=a.osm, begin=a.begin, end=a.end, warmup=a.warmup, peak_running=a.peak,
                                      delay_factor=a.delay_factor, calibration=a.calibration, seed=a.seed),
                           backend=a.backend)
        demand = dict(files.metadata.get("demand", {}))
        if "closed_loop" in demand:
            demand["closed_loop"] = {k: v for k, v in demand["closed_loop"].items() if k != "curve"}
        print(json.dumps({"network": files.metadata.get("network"), "demand": demand}, indent=2))
    print(f"scenario in {files.directory}")
    if a.report:
        end = None if files.config_file is None else a.end
        report = demand_report(files, end=end, backend=a.backend, peak_running=a.peak, seed=a.seed,
                               compare_from=a.begin if files.config_file is not None else None,
                               progress=lambda t, n, g: print(f"  {_hhmm(t)} running {n} target {g:.0f}", flush=True))
        print(report.summary())
        if a.csv:
            print(f"curve written to {report.to_csv(a.csv)}")
    return 0
