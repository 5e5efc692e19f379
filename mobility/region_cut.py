"""Region sub-scenarios: SUMO steps only the part of a network that can reach the RSUs.

A study of a few cells does not need the whole city stepped: the network is cut around the RSUs'
coverage with a buffer (``netconvert --keep-edges.in-boundary``), and every vehicle's route is cut
to the part inside it (SUMO's ``cutRoutes.py``), entering the cut network when it would have
reached it. How that moment is found decides how faithful the cut is (:class:`CutTiming`):

* ``exit_times``: a reference run of the whole scenario, bare SUMO without TraCI, records when each
  vehicle left each edge of the route it drove (``--vehroute-output.exit-times``, with its speed
  factor); a vehicle enters the cut at the moment it entered the region in that run, on the route
  it drove there. The reference runs once per traffic (network, demand, seed, density, window) and
  is kept in the cache with the cut, so every later run of the same traffic, of any method, dataset
  or setting, steps only the region.
* ``free_flow``: no reference run; entry times are extrapolated along the demand's routes at the
  edges' speed limits times ``speed_factor`` (``cutRoutes.py``'s own rule). Congestion outside the
  region and rerouting are lost.

Which one, and which buffer, reproduce the whole city for a region is a measured question:
``tools/lust_region_cut.py`` checks a cut against the whole city (reports/lust_region_cut/), and a
scenario asks for a cut with ``mobility.region``; the whole network stays the default.

In the cut the vehicles drive the routes they were given (the rerouting device is off: the
reference already rerouted them), the density is already in the routes (``--scale`` 1), and the
network keeps the whole network's coordinates (``--offset.disable-normalization``), so positions,
RSUs and buildings are where they were. Each cut is built once and cached by content
(:func:`mobility.cache.cached_build`): the network's, routes' and additionals' bytes, the SUMO run
settings, the window, the RSUs and the region.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from mobility.cache import cached_build, file_sha256, lookup
from mobility.errors import SumoError
from mobility.rsu import Rsu
from mobility.sumo_config import SumoConfig, merge_args, traffic_args
from mobility.sumo_install import run_command, run_tool, sumo_binary, sumo_version

REGION_BUILDER_VERSION = 2
"""Raised whenever what a cut is made of changes (its cache entries are then built again)."""

Bounds = tuple[float, float, float, float]

EXIT_TIME_OPTIONS: tuple[str, ...] = (
    "--vehroute-output.exit-times",
    "true",
    "--vehroute-output.last-route",
    "true",
    "--vehroute-output.write-unfinished",
    "true",
    "--vehroute-output.speedfactor",
    "true",
)
"""What the reference run writes besides ``--vehroute-output``: each edge's exit time on the route
a vehicle drove last (after any rerouting), vehicles still running at the end, and the speed factor
each vehicle drew, so that it drives the cut at the same speed."""

CUT_RUN_OPTIONS: tuple[str, ...] = ("--device.rerouting.probability", "0", "--max-depart-delay", "-1")
"""Options the cut's run adds: routes are the ones driven in the reference, not rerouted again;
a vehicle waits as long as it must to enter (its depart time is when it reached the region, after
any delay of its own departure; a vehicle that cannot enter the cut because a queue fills its first
edge waited behind that queue in the whole network, and must not be dropped)."""


class CutTiming(str, Enum):
    """When a vehicle enters the cut network (the module docstring)."""

    EXIT_TIMES = "exit_times"
    FREE_FLOW = "free_flow"


@dataclasses.dataclass(frozen=True)
class RegionCut:
    """A cut around the RSUs: the box of their coverage circles grown by ``buffer`` metres on every
    side, and how vehicles are timed into it."""

    buffer: float
    timing: CutTiming = CutTiming.EXIT_TIMES
    speed_factor: float = 1.0
    """Free flow only: the edges' speed limits are multiplied by it to time a vehicle's way to the
    region (below 1: slower than the limits)."""

    def __post_init__(self) -> None:
        if not (isinstance(self.buffer, (int, float)) and math.isfinite(self.buffer) and self.buffer >= 0):
            raise ValueError(f"region.buffer must be a finite number of metres >= 0, got {self.buffer!r}")
        object.__setattr__(self, "timing", CutTiming(self.timing))
        if not (math.isfinite(self.speed_factor) and self.speed_factor > 0):
            raise ValueError(f"region.speed_factor must be a positive number, got {self.speed_factor!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"buffer": float(self.buffer), "timing": self.timing.value, "speed_factor": float(self.speed_factor)}


@dataclasses.dataclass(frozen=True)
class CutFiles:
    """A built cut: its SUMO run (:attr:`sumo`), where it lives and what its manifest says."""

    sumo: SumoConfig
    directory: Path
    manifest: dict[str, Any]


def region_bounds(rsus: Sequence[Rsu], buffer: float) -> Bounds:
    """The box around every RSU's coverage circle, grown by ``buffer`` metres on each side."""
    if not rsus:
        raise ValueError("a region cut needs at least one RSU to cut around")
    return (
        min(r.x - r.radius for r in rsus) - buffer,
        min(r.y - r.radius for r in rsus) - buffer,
        max(r.x + r.radius for r in rsus) + buffer,
        max(r.y + r.radius for r in rsus) + buffer,
    )


def cut_key(sumo: SumoConfig, rsus: Sequence[Rsu], cut: RegionCut) -> dict[str, Any]:
    """What a cut is made of, for its cache key: input bytes, run settings, window, RSUs, region."""
    if sumo.config_file is not None:
        raise ValueError(
            "a region cut needs the network and the routes as files (mobility.net_file and route_files); "
            f"it cannot cut the SUMO configuration {sumo.config_file}"
        )
    if sumo.net_file is None or not sumo.route_files:
        raise ValueError("a region cut needs a network and route files")
    return {
        "builder": REGION_BUILDER_VERSION,
        "sumo_version": sumo_version(),
        "net": file_sha256(sumo.net_file),
        "routes": [file_sha256(p) for p in sumo.route_files],
        "additional": [file_sha256(p) for p in sumo.additional_files],
        "run": {
            "step_length": sumo.step_length,
            "seed": sumo.seed if cut.timing is CutTiming.EXIT_TIMES else None,
            "begin": sumo.begin,
            "end": sumo.end if cut.timing is CutTiming.EXIT_TIMES else None,
            "time_to_teleport": sumo.time_to_teleport,
            "scale": sumo.scale if cut.timing is CutTiming.EXIT_TIMES else None,
            "options": traffic_args(sumo.extra_args),
        },
        "bounds": [round(v, 3) for v in region_bounds(rsus, cut.buffer)],
        "cut": cut.to_dict(),
    }


def reference_run(sumo: SumoConfig, vehroutes: Path) -> dict[str, Any]:
    """Run the whole scenario in bare SUMO from its begin to its end, writing each vehicle's driven
    route with exit times to ``vehroutes``; what it took."""
    if sumo.end is None:
        raise ValueError("the reference run of a region cut needs an end time")
    options = merge_args(sumo.arguments(), ["--end", f"{sumo.end:g}", "--vehroute-output", str(vehroutes)])
    args = [str(sumo_binary("sumo")), *merge_args(options, list(EXIT_TIME_OPTIONS))]
    t0 = time.perf_counter()
    run_command(args, what="the region cut's reference run of the whole network (sumo)")
    return {"wall_s": round(time.perf_counter() - t0, 3), "vehicles": _count(vehroutes, "vehicle")}


def cut_network(net_file: str, bounds: Bounds, out: Path) -> None:
    """``net_file`` reduced to the edges inside ``bounds``, in the same coordinates."""
    run_command(
        [
            str(sumo_binary("netconvert")),
            "-s",
            net_file,
            "--keep-edges.in-boundary",
            ",".join(f"{v:.3f}" for v in bounds),
            "--offset.disable-normalization",
            "true",
            "--no-warnings",
            "true",
            "-o",
            str(out),
        ],
        what="netconvert cutting the network to the region",
    )


def cut_routes(
    cut_net: Path, routes: Sequence[str], orig_net: str, out: Path, *, exit_times: bool, speed_factor: float
) -> str:
    """The routes cut to ``cut_net`` (SUMO's ``cutRoutes.py``); its statistics as printed."""
    args: list[object] = [cut_net, *routes, "--orig-net", orig_net, "-o", out, "--disconnected-action", "keep"]
    if not exit_times:
        args += ["--discard-exit-times", "--speed-factor", speed_factor]
    return run_tool("route/cutRoutes.py", args, what="cutRoutes.py cutting the routes to the region").stdout


def build_cut(
    sumo: SumoConfig,
    rsus: Sequence[Rsu],
    cut: RegionCut,
    *,
    root: str | Path | None = None,
    reference: Path | None = None,
) -> CutFiles:
    """The cut of ``sumo``'s scenario around ``rsus`` (built, or found in the cache under ``root``)
    and the SUMO run that steps it instead of the whole network.

    ``reference`` (exit times only) is a route file a run of exactly ``sumo`` wrote with
    ``--vehroute-output`` and :data:`EXIT_TIME_OPTIONS`, used instead of a reference run of its own
    (``tools/lust_region_cut.py`` records it beside the whole network's trace, from the same SUMO
    run); the caller vouches for it, and its digest is in the manifest."""
    key = cut_key(sumo, rsus, cut)
    bounds = region_bounds(rsus, cut.buffer)
    if reference is not None and cut.timing is not CutTiming.EXIT_TIMES:
        raise ValueError("a reference run is given to a cut timed by exit times only")

    def build(tmp: Path) -> dict[str, Any]:
        made: dict[str, Any] = {}
        if reference is not None:
            made["reference"] = {"given": str(reference), "sha256": file_sha256(reference)}
            route_inputs = [str(reference)]
        elif cut.timing is CutTiming.EXIT_TIMES:
            made["reference"] = reference_run(sumo, tmp / "reference.rou.xml")
            route_inputs = [str(tmp / "reference.rou.xml")]
        else:
            route_inputs = list(sumo.route_files)
        t0 = time.perf_counter()
        cut_network(str(sumo.net_file), bounds, tmp / "region.net.xml")
        stats = cut_routes(
            tmp / "region.net.xml",
            route_inputs,
            str(sumo.net_file),
            tmp / "region.rou.xml",
            exit_times=cut.timing is CutTiming.EXIT_TIMES,
            speed_factor=cut.speed_factor,
        )
        free_departures(tmp / "region.rou.xml")
        if (tmp / "reference.rou.xml").exists():
            (tmp / "reference.rou.xml").unlink()  # large, and the cut holds what a run needs of it
        made.update(
            {
                "cut_s": round(time.perf_counter() - t0, 3),
                "bounds": list(bounds),
                "edges": _count(tmp / "region.net.xml", "edge", lambda e: e.get("function") != "internal"),
                "vehicles": _count(tmp / "region.rou.xml", "vehicle"),
                "cut_routes": stats.strip().splitlines()[-6:],
            }
        )
        return made

    directory, manifest = cached_build("region", key, build, root=root)
    run = dataclasses.replace(
        sumo,
        net_file=str(directory / "region.net.xml"),
        route_files=[str(directory / "region.rou.xml")],
        # the reference ran at the density: its vehicles are the scaled ones; the demand's are not
        scale=1.0 if cut.timing is CutTiming.EXIT_TIMES else sumo.scale,
        extra_args=merge_args(list(sumo.extra_args), list(CUT_RUN_OPTIONS)),
    )
    return CutFiles(run, directory, manifest)


_DEPARTS = (
    (re.compile(r'(<vehicle\b[^>]*?\bdepartLane=")[^"]*(")'), "best"),
    (re.compile(r'(<vehicle\b[^>]*?\bdepartSpeed=")[^"]*(")'), "max"),
)


def free_departures(routes: Path) -> None:
    """Every vehicle of the cut departs on the best lane at the largest safe speed (``best``,
    ``max``: what ``cutRoutes.py`` gives a route it cut). A reference run writes the lane and speed
    a vehicle did depart with, which the cut's traffic need not allow: SUMO refuses such an
    insertion and drops the vehicle."""
    text = routes.read_text()
    for pattern, value in _DEPARTS:
        text = pattern.sub(rf"\g<1>{value}\g<2>", text)
    routes.write_text(text)


def cached_cut(sumo: SumoConfig, rsus: Sequence[Rsu], cut: RegionCut, *, root: str | Path | None = None) -> Path | None:
    """The cut's cache entry if it was built before (nothing is built)."""
    return lookup("region", cut_key(sumo, rsus, cut), root)


def _count(path: Path, tag: str, keep: Any = None) -> int:
    """How many ``tag`` elements ``path`` holds (streamed; ``keep`` filters them)."""
    n = 0
    try:
        for _, el in ET.iterparse(path, events=("end",)):
            if el.tag == tag and (keep is None or keep(el)):
                n += 1
            if el.tag in (tag, "route", "lane"):
                el.clear()
    except (OSError, ET.ParseError) as e:
        raise SumoError(f"cannot read {path} written for the region cut: {e}") from None
    return n
