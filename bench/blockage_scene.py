"""The NLOSv share our ``city`` link states give in SUMO traffic, beside TR 37.885's table.

Our ``city`` model puts a link in NLOSv where another vehicle stands on it
(``vmc_sim.radio.link_states.blocker_height``: a disc of ``blocker_radius_m`` around the vehicle's
position, ``blocker_height_m`` tall, that reaches above the line between the antennas), from the
vehicles' own positions; the ``tr37885_*`` models draw it from the table's P(LOS) instead. This
script measures what the geometric rule gives in a SUMO scene:

* Scene: ``netgenerate --grid`` (``GRID_NUMBER`` x ``GRID_NUMBER`` junctions ``GRID_LENGTH_M``
  apart, one lane each way, traffic lights at every junction), ``randomTrips.py`` trips departing
  every ``PERIOD_S`` s (seeded, at least ``MIN_TRIP_M`` long), ``sumo`` at 1 s steps; every
  vehicle's FCD from ``WARMUP_S`` to ``END_S``. The RSU stands on the central junction.
* At every step, every vehicle within ``RANGE_M`` (ground distance) of the RSU is one link; its
  state is NLOSv where ``blocker_height`` finds another vehicle of that step on it, LOS otherwise
  (no buildings). Positions are SUMO's (the front bumper), as the co-simulation's vehicles are.
  Twice: the RSU antenna at 5.0 m (our default) and at 1.5 m, the geometry of the table's V2V links
  (both antennas at vehicle height, so that any vehicle on the line blocks).
* Per 20 m bin of distance: the links, the NLOSv share of each, and the table's 1 - P(LOS)
  (``p_los_v2v_urban``) averaged over the bin's links.

    python bench/blockage_scene.py [--period 1.0] [--out /tmp/scene.csv]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mobility.sumo_install import run_command, sumo_binary, sumo_tool
from vmc_sim.radio.link_budget import ChannelConfig
from vmc_sim.radio.link_states import Link, blocker_height, p_los_v2v_urban

GRID_NUMBER = 7
GRID_LENGTH_M = 100.0
RSU_JUNCTION = "D3"  # the central junction of the 7 x 7 grid
PERIOD_S = 1.0
MIN_TRIP_M = 300.0
WARMUP_S = 200
END_S = 600
RANGE_M = 200.0
BIN_M = 20.0
SEED = 1
RSU_HEIGHTS_M = (5.0, 1.5)
VEHICLE_HEIGHT_M = 1.5
FIELDS = ("bin_lo", "bin_hi", "links", "table_nlosv", "nlosv_rsu_5m", "nlosv_rsu_1_5m")

Vehicle = tuple[str, float, float]


@dataclass
class StepVehicles:
    """The vehicles of one step as the link states see them (no buildings), each ``height`` tall."""

    ids: list[str]
    xy: np.ndarray
    height: float
    buildings: Any = None

    def vehicles_near(self, x: float, y: float, radius: float) -> Sequence[tuple[Any, float, float, float]]:
        near = np.flatnonzero(np.hypot(self.xy[:, 0] - x, self.xy[:, 1] - y) <= radius)
        return [(self.ids[i], float(self.xy[i, 0]), float(self.xy[i, 1]), self.height) for i in near]


def make_fcd(workdir: Path, seed: int = SEED, period_s: float = PERIOD_S) -> tuple[Path, tuple[float, float]]:
    """Generate the grid and the trips, run SUMO; the FCD file and the RSU's junction (x, y)."""
    net, trips, fcd = workdir / "grid.net.xml", workdir / "trips.xml", workdir / "fcd.xml"
    grid = ["--grid", "--grid.number", str(GRID_NUMBER), "--grid.length", str(GRID_LENGTH_M)]
    grid += ["--default-junction-type", "traffic_light", "--no-warnings", "-o", str(net)]
    run_command([str(sumo_binary("netgenerate")), *grid], what="netgenerate")
    random_trips = [sys.executable, str(sumo_tool("randomTrips.py")), "-n", str(net), "-o", str(trips)]
    random_trips += ["--period", str(period_s), "--seed", str(seed), "--begin", "0", "--end", str(END_S)]
    random_trips += ["--min-distance", str(MIN_TRIP_M), "--validate", "--route-file", str(workdir / "routes.xml")]
    run_command(random_trips, what="randomTrips.py", cwd=workdir)
    sumo = [str(sumo_binary("sumo")), "-n", str(net), "-r", str(trips), "--step-length", "1", "--begin", "0"]
    sumo += ["--end", str(END_S), "--seed", str(seed), "--fcd-output", str(fcd), "--device.fcd.begin", str(WARMUP_S)]
    sumo += ["--no-step-log", "--no-warnings", "--duration-log.disable"]
    run_command(sumo, what="sumo")
    junction = next(j for j in ET.parse(net).getroot().iter("junction") if j.get("id") == RSU_JUNCTION)
    return fcd, (float(junction.get("x", "nan")), float(junction.get("y", "nan")))


def steps(fcd: Path) -> Iterator[list[Vehicle]]:
    """Every FCD step's vehicles as (id, x, y)."""
    for _event, el in ET.iterparse(fcd):
        if el.tag == "timestep":
            yield [(v.get("id", ""), float(v.get("x", "nan")), float(v.get("y", "nan"))) for v in el.iter("vehicle")]
            el.clear()


def link_states(fcd: Path, rsu: tuple[float, float], cfg: ChannelConfig) -> list[tuple[float, bool, bool]]:
    """(distance, NLOSv with the RSU at 5 m, NLOSv with it at 1.5 m) of every link of every step."""
    out = []
    for vehicles in steps(fcd):
        if not vehicles:
            continue
        around = StepVehicles([v[0] for v in vehicles], np.array([v[1:] for v in vehicles]), cfg.blocker_height_m)
        for vid, x, y in vehicles:
            d = math.hypot(x - rsu[0], y - rsu[1])
            if d > RANGE_M:
                continue
            blocked = [
                blocker_height(Link(rsu, (x, y), h, VEHICLE_HEIGHT_M, None, vid), around, cfg.blocker_radius_m)
                is not None
                for h in RSU_HEIGHTS_M
            ]
            out.append((d, blocked[0], blocked[1]))
    return out


def binned(links: list[tuple[float, bool, bool]]) -> list[dict]:
    """Per distance bin: the links, the table's mean 1 - P(LOS) and each height's NLOSv share."""
    rows = []
    for k in range(int(RANGE_M / BIN_M)):
        lo, hi = k * BIN_M, (k + 1) * BIN_M
        inside = [x for x in links if lo <= x[0] < hi or (hi == RANGE_M and x[0] == hi)]
        n = len(inside)
        rows.append(
            {
                "bin_lo": lo,
                "bin_hi": hi,
                "links": n,
                "table_nlosv": sum(1.0 - p_los_v2v_urban(x[0]) for x in inside) / n if n else math.nan,
                "nlosv_rsu_5m": sum(x[1] for x in inside) / n if n else math.nan,
                "nlosv_rsu_1_5m": sum(x[2] for x in inside) / n if n else math.nan,
            }
        )
    return rows


def scene(workdir: Path, seed: int = SEED, period_s: float = PERIOD_S) -> tuple[list[dict], dict]:
    """The binned rows and the scene's figures (vehicles per step, within range, mean speed)."""
    fcd, rsu = make_fcd(workdir, seed, period_s)
    cfg = ChannelConfig()
    links = link_states(fcd, rsu, cfg)
    counts = [len(s) for s in steps(fcd)]
    lane_km = 2 * 2 * GRID_NUMBER * (GRID_NUMBER - 1) * GRID_LENGTH_M / 1000.0
    facts = {
        "steps": len(counts),
        "vehicles_per_step": sum(counts) / len(counts),
        "links_per_step": len(links) / len(counts),
        "vehicles_per_lane_km": sum(counts) / len(counts) / lane_km,
        "blocker_radius_m": cfg.blocker_radius_m,
        "blocker_height_m": cfg.blocker_height_m,
        "rsu": rsu,
    }
    return binned(links), facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--period", type=float, default=PERIOD_S, help="seconds between departures")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", type=Path, default=None, help="write the binned rows here (CSV)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows, facts = scene(Path(tmp), args.seed, args.period)
    print(facts)
    for r in rows:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()})
    if args.out:
        from ns3_common import fmt, write_csv

        write_csv(args.out, FIELDS, ([fmt(r[k]) for k in FIELDS] for r in rows))
        print(f"wrote {args.out}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
