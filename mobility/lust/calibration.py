"""When the LuST trips depart: two calibrations of the demand to the published running-vehicle curve.

* ``closed_loop`` (default): one calibration run of SUMO over ``[begin - warmup, end]``, with the
  run settings the scenario will use (LuST's, :data:`mobility.lust.config.LUST_RUN_SETTINGS`), inserts
  trips from a routed pool whenever the vehicles running or waiting to enter fall below the target
  curve (at most ``insertion_cap`` times the free-flow rate per step), and records when each was
  inserted. Which trip comes next is steered so that the **mean trip time** follows
  ``LustConfig.target_trip_time``: the pool is cut into bins of free-flow trip time and a bin is
  drawn with probabilities tilted (exponentially, by the one parameter that gives the wanted
  mean) towards a free-flow mean of ``target / r``, where ``r`` is the measured ratio of actual to
  free-flow trip time of the trips that arrived so far (a running estimate). A network that flows
  empties out, so the loop then inserts more, shorter trips; one that jams, fewer and longer: by
  Little's law the running count fixes rate x trip time, and the trip time fixes the rate. The
  written route file replays that schedule, so a plain run (same seed, same settings) follows the
  curve whatever the rebuilt network does to trip times.
* ``open_loop``: a non-homogeneous Poisson process (seeded) with rate
  ``lambda(t) = N(t) / tau + dN/dt``, the inverse of the running count N(t) of an infinite-server
  queue with exponential trip times of mean ``tau`` = free-flow trip time x ``delay_factor``.
  Instant to build; the curve is met only as far as ``tau`` is right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mobility.lust.config import LustConfig, target_running
from mobility.lust.report import Recorder, make_report, parse_teleports, quiet_stderr
from mobility.sumo import SumoConfig, SumoSession


def insertion_rate(t: Any, tau: float, peak_running: float) -> Any:
    """Insertion rate (vehicles/s) that keeps ``target_running`` running with mean trip time ``tau`` (s)."""
    import numpy as np

    t = np.asarray(t, dtype=float)
    h = 30.0
    slope = (target_running(t + h, peak_running) - target_running(t - h, peak_running)) / (2 * h)
    return np.maximum(target_running(t, peak_running) / tau + slope, 0.0)


def expected_insertions(cfg: LustConfig, trip_time: float) -> float:
    """Vehicles the open-loop rate inserts over ``[demand_begin, end]`` for a mean trip time (s)."""
    import numpy as np

    grid = np.arange(cfg.demand_begin, cfg.end, 60.0)
    return float(np.sum(insertion_rate(grid + 30.0, trip_time, cfg.peak_running)) * 60.0)


def per_day(tau: float, peak_running: float) -> float:
    """Vehicles a day at mean trip time ``tau`` on the published curve."""
    import numpy as np

    day = np.arange(0.0, 86400.0, 60.0)
    return float(np.sum(insertion_rate(day + 30.0, tau, peak_running)) * 60.0)


def open_loop_departures(cfg: LustConfig, tau: float, rng: Any) -> list[float]:
    """Departure times of the open-loop model (see the module docstring)."""
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


@dataclass(frozen=True)
class PoolTrip:
    """A routed trip the closed loop may insert."""

    id: str
    vtype: str | None
    edges: str
    free_flow: float


class TripSelector:
    """Draws pool trips so that their free-flow mean follows a moving target (see the module docstring)."""

    def __init__(self, pool: Sequence[PoolTrip], rng: Any, bins: int = 12) -> None:
        import numpy as np

        self.pool = pool
        self.rng = rng
        ff = np.array([p.free_flow for p in pool])
        order = np.argsort(ff, kind="stable")
        k = max(1, min(bins, len(pool)))
        groups = np.array_split(order, k)
        self.queues = [sorted(int(i) for i in g) for g in groups if len(g)]
        self.means = np.array([float(ff[q].mean()) for q in self.queues])
        self.heads = [0] * len(self.queues)
        self._scale = float(ff.std()) or 1.0
        self.theta = 0.0

    def remaining(self) -> int:
        return sum(len(q) - h for q, h in zip(self.queues, self.heads, strict=True))

    def _weights(self, theta: float) -> Any:
        import numpy as np

        n = np.array([len(q) - h for q, h in zip(self.queues, self.heads, strict=True)], dtype=float)
        z = (self.means - self.means.mean()) / self._scale
        w = n * np.exp(np.clip(theta * z, -50, 50))
        return w / w.sum() if w.sum() > 0 else w

    def aim(self, free_flow_target: float) -> float:
        """Tilt so the expected free-flow time of the next draws is ``free_flow_target``; returns what is reachable."""
        lo, hi = -30.0, 30.0
        mean = lambda th: float(self._weights(th) @ self.means)  # noqa: E731
        if free_flow_target <= mean(lo):
            self.theta = lo
        elif free_flow_target >= mean(hi):
            self.theta = hi
        else:
            for _ in range(50):
                mid = (lo + hi) / 2
                if mean(mid) < free_flow_target:
                    lo = mid
                else:
                    hi = mid
            self.theta = (lo + hi) / 2
        return mean(self.theta)

    def draw(self, n: int) -> list[PoolTrip]:
        out = []
        for _ in range(n):
            w = self._weights(self.theta)
            if w.sum() <= 0:
                break
            b = int(self.rng.choice(len(self.queues), p=w))
            out.append(self.pool[self.queues[b][self.heads[b]]])
            self.heads[b] += 1
        return out


def closed_loop(
    cfg: LustConfig,
    sumo: SumoConfig,
    pool: Sequence[PoolTrip],
    out: Path,
    free_flow: float,
    rng: Any,
    log: Path,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the closed loop (see the module docstring) on ``sumo`` (the scenario's network, buses,
    additional files and run settings); write the inserted trips to ``out`` and return the
    calibration's figures, including the report of the calibration run itself. ``progress``
    gets a line every simulated quarter of an hour."""
    import time as _time

    import numpy as np

    target_tt = cfg.target_trip_time
    selector = TripSelector(pool, rng)
    ff_of = {p.id: p.free_flow for p in pool}
    ratio_num, ratio_den, forget = cfg.delay_factor * 200.0, 200.0, 1.0 - 1.0 / 2000.0
    inserted: list[tuple[PoolTrip, float]] = []
    aims: list[list[float]] = []
    rec = Recorder(cfg.demand_begin, cfg.peak_running)
    leaving = 0
    t0 = _time.perf_counter()
    with quiet_stderr(), SumoSession(sumo) as s:
        api, dt = s.raw, sumo.step_length
        next_aim = s.time
        while s.time + dt <= cfg.end + 1e-9:
            t = s.time
            if t + 1e-9 >= next_aim:
                r = ratio_num / ratio_den
                reached = selector.aim(target_tt / r)
                aims.append([t, round(r, 3), round(target_tt / r, 1), round(reached, 1)])
                next_aim += 60.0
            goal = target_running(t + dt, cfg.peak_running)
            have = int(s.call("vehicle.getIDCount", lambda: api.vehicle.getIDCount())) + len(
                s.call("simulation.getPendingVehicles", lambda: api.simulation.getPendingVehicles())
            )
            cap = math.ceil(cfg.insertion_cap * float(insertion_rate(t, free_flow, cfg.peak_running)) * dt)
            # the vehicles that arrive during this step leave too: anticipate them (last step's count)
            n = max(0, min(round(goal) - have + leaving, max(cap, 1)))
            if n:
                batch = selector.draw(n)

                def _add(batch: list[PoolTrip] = batch) -> None:
                    for p in batch:
                        api.route.add("r:" + p.id, p.edges.split())
                        api.vehicle.add(
                            p.id,
                            "r:" + p.id,
                            typeID=p.vtype or "DEFAULT_VEHTYPE",
                            depart="now",
                            departLane="best",
                            departSpeed="max",
                        )

                s.call("vehicle.add", _add)
                inserted.extend((p, t) for p in batch)
            t = s.step()
            n_samples = len(rec.samples)
            rec.step(s, t)
            leaving = len(s.arrived_ids())
            if progress is not None and len(rec.samples) > n_samples and int(round(t)) % 900 == 0:
                sample = rec.samples[-1]
                progress(
                    f"  calibration {int(t) // 3600:02d}:{int(t) % 3600 // 60:02d} running {sample['running']} "
                    f"(target {sample['target']:.0f}), speed {sample['mean_speed']:.1f} m/s, halted "
                    f"{100 * sample['halted_share']:.1f} %, inserted {len(inserted)}, teleports "
                    f"{len(rec.teleport_times)}, trip-time ratio {ratio_num / ratio_den:.2f} "
                    f"({_time.perf_counter() - t0:.0f} s)"
                )
            for vid, trip in rec.arrived_now:
                ff = ff_of.get(vid)
                if ff:
                    ratio_num = ratio_num * forget + trip
                    ratio_den = ratio_den * forget + ff
        simulated = s.time - cfg.demand_begin
    wall = _time.perf_counter() - t0
    with open(out, "w", encoding="utf-8") as f:
        f.write("<routes>\n")
        for p, t in inserted:
            type_attr = f' type="{p.vtype}"' if p.vtype else ""
            f.write(
                f'    <vehicle id="{p.id}"{type_attr} depart="{t:.2f}" departLane="best" departSpeed="max">\n'
                f'        <route edges="{p.edges}"/>\n    </vehicle>\n'
            )
        f.write("</routes>\n")
    report = make_report(
        rec, cfg.begin, cfg.end, parse_teleports(log, cfg.begin, cfg.end), wall_s=wall, simulated_s=simulated
    )
    ff_inserted = [p.free_flow for p, _ in inserted]
    return {
        "inserted": len(inserted),
        "pool": len(pool),
        "pool_left": selector.remaining(),
        "pool_exhausted": selector.remaining() == 0,
        "teleports_with_warmup": len(rec.teleport_times),
        "target_trip_time_s": round(target_tt, 1),
        "trip_time_ratio_final": round(ratio_num / ratio_den, 3),
        "mean_free_flow_inserted_s": round(float(np.mean(ff_inserted)), 1) if ff_inserted else None,
        "mean_relative_error": round(report.mean_relative_error, 4),
        "aims": aims,
        "report": report.to_dict(),
    }
