"""The LuST demand: a seeded pool of routed trips, LuST's buses, and their calibrated schedule (cached).

Trips are drawn between random edges of the largest strongly connected part of the passenger
road graph (weights: length x lanes, ``fringe_factor`` for edges on the network boundary, between
``min_distance`` and ``max_distance`` apart) from one seeded numpy stream and routed once by
``duarouter`` (static shortest paths, ``--seed``, turnarounds at the ends removed). Their departure times come from
:mod:`mobility.lust.calibration`. LuST's bus lines go in where the rebuild allows
(:mod:`mobility.lust.buses`). The build is cached under a key that holds every parameter, the
network's hash, the bus inputs' hashes and the **run settings** (LuST's, the scenario's overrides
and extra SUMO arguments): the calibration run uses exactly the settings the scenario runs with,
so changing one rebuilds the demand.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mobility.cache import cached_build, file_sha256, strip_generated_header
from mobility.lust.calibration import (
    PoolTrip,
    closed_loop,
    expected_insertions,
    open_loop_departures,
    per_day,
)
from mobility.lust.config import (
    LUST_BUILDER_VERSION,
    LUST_BUSLINES_NAME,
    LUST_BUSSTOPS_NAME,
    LUST_VTYPES_NAME,
    PUBLISHED_VEHICLES_PER_DAY,
    LustConfig,
    LustFiles,
    settings_key,
)
from mobility.lust.network import build_lust_network
from mobility.sumo import SumoConfig, merge_args, run_command, sumo_binary, sumo_version
from mobility.sumo_config import traffic_args


def passenger_edges(net: Any) -> list[Any]:
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
    return [net.getEdge(i) for i in sorted(giant)]


def sample_od(edges: Sequence[Any], n: int, cfg: LustConfig, rng: Any) -> list[tuple[str, str]]:
    """``n`` origin-destination edge pairs (see the module docstring)."""
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
    return [(edges[a].getID(), edges[b].getID()) for a, b in zip(out_o[:n], out_d[:n], strict=True)]


def _edge_centre(e: Any) -> tuple[float, float]:
    shape = e.getShape()
    (x0, y0), (x1, y1) = shape[0][:2], shape[-1][:2]
    return (x0 + x1) / 2.0, (y0 + y1) / 2.0


def write_trips(
    path: Path, od: Sequence[tuple[str, str]], departs: Sequence[float], vtype: str | None, prefix: str
) -> None:
    type_attr = f' type="{vtype}"' if vtype else ""
    with open(path, "w", encoding="utf-8") as f:
        f.write("<routes>\n")
        for i, ((o, d), t) in enumerate(zip(od, departs, strict=True)):
            f.write(
                f'    <trip id="{prefix}{i}"{type_attr} depart="{t:.2f}" from="{o}" to="{d}" '
                'departLane="best" departSpeed="max"/>\n'
            )
        f.write("</routes>\n")


def route_trips(
    net: Path,
    trips: Path,
    out: Path,
    additional: Path | None,
    seed: int,
    workdir: Path,
    minor_penalty: float | None = None,
) -> None:
    """Route trips once with duarouter (static shortest paths). ``--remove-loops`` drops the
    turnaround a shortest path takes when its random origin edge points away from the destination
    (or its destination is reached from the other side): without it half the routes began or
    ended with a U-turn across the opposing lanes, and those U-turns blocked the leftmost lanes of
    the arterials (most of the yield and jam teleports). ``minor_penalty``: ``LustConfig.minor_penalty``."""
    args = [
        str(sumo_binary("duarouter")),
        "-n",
        str(net),
        "--route-files",
        str(trips),
        "-o",
        str(out),
        "--ignore-errors",
        "true",
        "--no-warnings",
        "true",
        "--no-step-log",
        "true",
        "--seed",
        str(seed),
        "--routing-threads",
        "2",
        "--routing-algorithm",
        "CH",
        "--alternatives-output",
        "NUL",
        "--remove-loops",
        "true",
        "--vtype-output",
        str(workdir / "vtypes.used.xml"),
    ]
    if additional is not None:
        args += ["--additional-files", str(additional)]
    if minor_penalty is not None:
        args += ["--weights.minor-penalty", f"{minor_penalty:g}"]
    run_command(args, what="duarouter (LuST demand)", cwd=workdir)
    (workdir / "vtypes.used.xml").unlink(missing_ok=True)
    strip_generated_header(out)


def read_pool(path: Path, net: Any) -> list[PoolTrip]:
    """Routed trips with their free-flow trip time (sum of edge length / speed limit)."""
    speed_len = {e.getID(): (e.getLength(), e.getSpeed()) for e in net.getEdges()}
    out = []
    for _, el in ET.iterparse(path, events=("end",)):
        if el.tag == "vehicle":
            route = el.find("route")
            if route is not None and route.get("edges"):
                edges = route.get("edges", "")
                ff = sum(speed_len[e][0] / max(speed_len[e][1], 0.1) for e in edges.split() if e in speed_len)
                out.append(PoolTrip(el.get("id", ""), el.get("type"), edges, ff))
            el.clear()
    return out


def lust_run_inputs(cfg: LustConfig) -> dict[str, Path | None]:
    """The LuST inputs beside the OSM this build uses (vehicle types, bus lines and stops)."""
    return {
        "vtypes": cfg.source_file(LUST_VTYPES_NAME) if cfg.vehicle_types else None,
        "buslines": cfg.source_file(LUST_BUSLINES_NAME) if cfg.buses else None,
        "busstops": cfg.source_file(LUST_BUSSTOPS_NAME) if cfg.buses else None,
    }


KEYED_ELSEWHERE = (
    "turn_bays",
    "turn_bay_ways",
    "turn_bay_length",
    "turn_bay_min_lanes",
    "turn_bay_junctions",
    "dual_lefts",
    "dual_left_ways",
    "dual_left_min_lanes",
    "left_green_time",
    "time_to_impatience",
)
"""LustConfig fields left out of the demand's cache key by name: the network's hash and the run
settings already hold what they change (so adding them kept the existing keys)."""

KEYED_WHEN_SET = ("minor_penalty",)
"""LustConfig fields in the demand's cache key only when set (not None): a config without them
keeps the key it had before they existed. ``minor_penalty`` also shapes duarouter's routes,
which the run settings do not hold."""


def build_lust(
    config: LustConfig | None = None,
    *,
    force: bool = False,
    backend: str = "libsumo",
    extra_args: Sequence[str] = (),
    time_to_teleport: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> LustFiles:
    """Rebuilt LuST network plus calibrated demand for ``config`` (both cached).

    ``extra_args`` and ``time_to_teleport`` are a scenario's own SUMO settings: they go on top of
    the LuST run settings, into the calibration run and into the cache key. ``backend`` is used
    for the calibration run (``traci`` if a libsumo simulation is already open in this process);
    ``progress`` gets a line per step of the build and per simulated quarter hour.
    """
    import numpy as np
    import sumolib

    cfg = config or LustConfig()
    cfg.validate()
    net_file, net_manifest = build_lust_network(cfg, force=force)
    inputs = lust_run_inputs(cfg)
    use_buses = inputs["buslines"] is not None and inputs["busstops"] is not None and inputs["vtypes"] is not None
    settings = cfg.run_settings(extra_args, time_to_teleport)
    params = {
        k: v
        for k, v in asdict(cfg).items()
        if k not in ("cache_dir", "osm_file", "source_dir", *KEYED_ELSEWHERE)
        and not (k in KEYED_WHEN_SET and v is None)
    }
    params.update(
        net_sha256=net_manifest["network"]["sha256"],
        builder=LUST_BUILDER_VERSION,
        sumo=sumo_version(),
        run_settings=settings_key(settings),
        inputs={
            k: (file_sha256(p) if p is not None and (k == "vtypes" or use_buses) else None) for k, p in inputs.items()
        },
    )

    def say(text: str) -> None:
        if progress is not None:
            progress(text)

    def _build(out: Path) -> dict[str, Any]:
        import time as _time

        t0 = _time.perf_counter()
        net = sumolib.net.readNet(str(net_file), withInternal=False)
        edges = passenger_edges(net)
        od_rng = np.random.default_rng([cfg.seed, 1])
        depart_rng = np.random.default_rng([cfg.seed, 2])
        select_rng = np.random.default_rng([cfg.seed, 3])
        additional: list[Path] = []
        if inputs["vtypes"] is not None:
            additional.append(out / LUST_VTYPES_NAME)
            shutil.copyfile(inputs["vtypes"], additional[0])
        vtype = "private" if additional else None
        demand: dict[str, Any] = {"calibration": cfg.calibration}
        bus_routes: list[Path] = []
        if use_buses:
            from mobility.lust.buses import place_bus_lines

            bus_net = sumolib.net.readNet(str(net_file))
            buslines, busstops = inputs["buslines"], inputs["busstops"]
            assert buslines is not None and busstops is not None  # use_buses
            demand["buses"] = place_bus_lines(
                bus_net,
                buslines,
                busstops,
                out / "buses.rou.xml",
                out / "busstops.add.xml",
                cfg.demand_begin,
                cfg.end,
            )
            if demand["buses"]["vehicles_placed"]:
                bus_routes.append(out / "buses.rou.xml")
                additional.append(out / "busstops.add.xml")
            else:
                for name in ("buses.rou.xml", "busstops.add.xml"):
                    (out / name).unlink(missing_ok=True)
        first_add = additional[0] if additional else None
        pilot_trips, pilot_routes = out / "pilot.trips.xml", out / "pilot.rou.xml"
        write_trips(pilot_trips, sample_od(edges, 2000, cfg, od_rng), [0.0] * 2000, vtype, "pilot")
        route_trips(net_file, pilot_trips, pilot_routes, first_add, cfg.seed, out, cfg.minor_penalty)
        pilot_ff = [p.free_flow for p in read_pool(pilot_routes, net)]
        free_flow = float(np.mean(pilot_ff))
        pilot_trips.unlink()
        pilot_routes.unlink()
        tau = free_flow * cfg.delay_factor
        trips, routes = out / "lust.trips.xml", out / "lust.rou.xml"
        if cfg.calibration == "open_loop":
            departs = open_loop_departures(cfg, tau, depart_rng)
            write_trips(trips, sample_od(edges, len(departs), cfg, od_rng), departs, vtype, "lust")
            route_trips(net_file, trips, routes, first_add, cfg.seed, out, cfg.minor_penalty)
            demand["trips"] = len(departs)
        else:
            n_pool = int(math.ceil(1.6 * expected_insertions(cfg, min(cfg.target_trip_time, tau)))) + 500
            pool_routes = out / "pool.rou.xml"
            write_trips(trips, sample_od(edges, n_pool, cfg, od_rng), [cfg.demand_begin] * n_pool, vtype, "lust")
            route_trips(net_file, trips, pool_routes, first_add, cfg.seed, out, cfg.minor_penalty)
            pool = read_pool(pool_routes, net)
            pool_routes.unlink()
            log = out / "calibration-warnings.log"
            scfg = SumoConfig(
                backend=backend,
                net_file=str(net_file),
                route_files=[str(p) for p in bus_routes],
                additional_files=[str(p) for p in additional],
                begin=cfg.demand_begin,
                end=cfg.end,
                seed=cfg.seed,
                extra_args=merge_args(traffic_args(settings), ["--no-warnings", "false", "--error-log", str(log)]),
            )
            say(
                f"calibrating {len(pool):,} routed trips over {cfg.demand_begin:.0f}-{cfg.end:.0f} s "
                f"(free flow {free_flow:.0f} s, target trip time {cfg.target_trip_time:.0f} s)"
            )
            demand["closed_loop"] = closed_loop(cfg, scfg, pool, routes, free_flow, select_rng, log, progress)
            log.unlink(missing_ok=True)
            demand["trips"] = demand["closed_loop"]["inserted"]
        trips.unlink()
        strip_generated_header(routes)
        routed = sum(1 for _, el in ET.iterparse(routes, events=("end",)) if el.tag == "vehicle")
        span_h = (cfg.end - cfg.demand_begin) / 3600.0
        demand.update(
            {
                "file": routes.name,
                "sha256": file_sha256(routes),
                "routed": routed,
                "window": [cfg.demand_begin, cfg.end],
                "free_flow_trip_time_s": round(free_flow, 1),
                "free_flow_trip_time_quantiles_s": [round(float(q), 1) for q in np.quantile(pilot_ff, [0.1, 0.5, 0.9])],
                "insertions_per_hour": round(routed / span_h),
                "open_loop_trip_time_s": round(tau, 1),
                "open_loop_vehicles_per_day": round(per_day(tau, cfg.peak_running)),
                "target_trip_time_s": round(cfg.target_trip_time, 1),
                "published_vehicles_per_day": PUBLISHED_VEHICLES_PER_DAY,
                "seed": cfg.seed,
                "build_s": round(_time.perf_counter() - t0, 1),
            }
        )
        files = {"routes": [routes.name, *[p.name for p in bus_routes]], "additional": [p.name for p in additional]}
        return {
            "network": net_manifest["network"],
            "netconvert": net_manifest.get("netconvert"),
            "demand": demand,
            "run_settings": settings,
            "files": files,
        }

    directory, manifest = cached_build("lust-demand", params, _build, root=cfg.cache_dir, force=force)
    files = manifest.get("files") or {"routes": ["lust.rou.xml"], "additional": []}
    return LustFiles(
        directory=directory,
        net_file=net_file,
        route_files=tuple(directory / n for n in files["routes"]),
        additional_files=tuple(directory / n for n in files["additional"]),
        config_file=None,
        begin=cfg.demand_begin,
        end=cfg.end,
        observe_from=cfg.begin,
        metadata=manifest,
        sumo_args=tuple(manifest.get("run_settings") or settings),
        peak_running=cfg.peak_running,
    )


def lust_clone(clone_dir: str | Path, config_name: str = "dua.static.sumocfg") -> LustFiles:
    """A real LuST clone, run as it is through its own configuration file (its own run settings)."""
    d = Path(clone_dir).expanduser()
    net = d / "lust.net.xml"
    cfg = d / config_name
    missing = [str(p) for p in (net, cfg) if not p.is_file()]
    if missing:
        raise ValueError(
            f"lust clone_dir {d} lacks {missing} (expected a LuST checkout with lust.net.xml and {config_name})"
        )
    return LustFiles(
        directory=d,
        net_file=net,
        route_files=(),
        additional_files=(),
        config_file=cfg,
        begin=0.0,
        end=None,
        metadata={"source": "lust-clone", "dir": str(d), "config": config_name},
    )


def _config_from(spec: dict[str, Any]) -> LustConfig:
    known = {f.name for f in dataclasses.fields(LustConfig)}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(f"mobility.lust.{unknown[0]} is not a known field (known: {sorted(known | {'clone_dir'})})")
    return LustConfig(**spec)


def lust_files(
    spec: LustConfig | dict[str, Any] | None = None,
    *,
    backend: str = "libsumo",
    extra_args: Sequence[str] = (),
    time_to_teleport: float | None = None,
) -> LustFiles:
    """LuST scenario from a config or from plain data (a scenario's ``mobility.lust`` mapping).

    A mapping with ``clone_dir`` (and optionally ``config_name``) selects a real LuST clone; any
    other keys are :class:`LustConfig` fields. Unknown keys raise ValueError naming them.
    """
    if spec is None or isinstance(spec, LustConfig):
        return build_lust(spec, backend=backend, extra_args=extra_args, time_to_teleport=time_to_teleport)
    if not isinstance(spec, dict):
        raise ValueError(f"mobility.lust must be a mapping, got {type(spec).__name__}")
    data = dict(spec)
    if "clone_dir" in data:
        clone = data.pop("clone_dir")
        name = data.pop("config_name", "dua.static.sumocfg")
        if data:
            raise ValueError(f"mobility.lust: {sorted(data)} cannot be combined with clone_dir (a clone runs as it is)")
        return lust_clone(clone, name)
    return build_lust(_config_from(data), backend=backend, extra_args=extra_args, time_to_teleport=time_to_teleport)


def sumo_inputs(
    spec: LustConfig | dict[str, Any] | None = None,
    *,
    backend: str = "libsumo",
    extra_args: Sequence[str] = (),
    time_to_teleport: float | None = None,
) -> dict[str, Any]:
    """SumoConfig inputs for the LuST scenario ``spec`` (see :func:`lust_files`): its files and,
    for a rebuilt LuST, ``extra_args``: its run settings with the scenario's ``extra_args`` on top.

    The rebuilt scenario's traffic starts at ``LustFiles.begin`` (``begin - warmup``), so a run
    should set ``SumoConfig.begin`` to it: :func:`lust_begin` gives that time.
    """
    files = lust_files(spec, backend=backend, extra_args=extra_args, time_to_teleport=time_to_teleport)
    if files.config_file is not None:
        return {"config_file": str(files.config_file)}
    return {
        "net_file": str(files.net_file),
        "route_files": [str(p) for p in files.route_files],
        "additional_files": [str(p) for p in files.additional_files],
        "extra_args": merge_args(files.sumo_args, extra_args),
    }


def lust_begin(spec: LustConfig | dict[str, Any] | None = None) -> float | None:
    """Simulated time at which the rebuilt scenario's traffic starts (None for a clone: its own config decides)."""
    if isinstance(spec, dict):
        if "clone_dir" in spec:
            return None
        known = {f.name for f in dataclasses.fields(LustConfig)}
        spec = LustConfig(**{k: v for k, v in spec.items() if k in known})
    return (spec or LustConfig()).demand_begin
