"""One vehicle's real SUMO pass by a road-side unit, as an ns-2 trace for ns-3's ``Ns2MobilityHelper``.

A 3x3 grid (200 m spacing, single-lane roads, traffic lights; ``netgenerate``) carries the vehicle
"ego" from t = 0 east along A1B1 -> B1C1, straight through the central junction B1, where the RSU
stands. B1's first phase (0-42 s) is green north-south, so ego queues at the red behind ``AHEAD``
vehicles placed ahead of it at t = 0 and moves off with the queue after 45 s: stop-and-go. Seeded Poisson
traffic (3 vehicles/min on each of six routes along, against and across ego's road, from t = 1 s)
fills the rest. ``sumo`` runs until the last vehicle has left and writes FCD for ego only
(``--device.fcd.explicit ego``; ``--precision 4``, so the trace's rounding stays below 0.1 mm per
step); ``traceExporter.py --fcd-input FCD --ns2mobility-output NS2 --ns2activity-output ACT``
converts it, and the activity file's ``# SUMO-ID: ego`` comment gives ego's ``$node_(i)``.

Coordinates: the ns-2 file copies the FCD x/y strings unchanged (no offset, no shift unless
``--shift`` is given), and FCD x/y are SUMO network coordinates (front bumper, after the network's
``netOffset``, which is 0 for a generated grid). So ns-2 = FCD = network coordinates, and the RSU
is junction B1's (x, y) from the network file.

Timing: traceExporter writes ``$ns_ at t_k "$node_(i) setdest x_k y_k v_k"`` with the position and
speed AT sample k, not the next one. SUMO integrates (Euler) x_k = x_{k-1} + v_k dt, so ns-3, which
at t_k heads from where the node is towards (x_k, y_k) at v_k and stops on arrival, reaches x_k
at t_k + dt: the ns-3 node follows the FCD polyline one step late (and sits at x_0 over
[t_0, t_0 + dt]). ``position_at`` and ``coverage_interval`` describe that ns-3 motion, the
polyline through (t_0, x_0), (t_0 + dt, x_0), (t_1 + dt, x_1), ..., (t_n + dt, x_n). ns-3 places the
node at x_0 from time 0 and leaves it at x_n after t_n + dt; ``position_at`` says None there.

    python bench/sumo_pass.py [--seed 1] [--step 0.1] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mobility.sumo_install import sumo_binary, sumo_tool, sumo_version, tool_env

EGO_ID = "ego"
RSU_JUNCTION = "B1"
EGO_ROUTE = "A1B1 B1C1"
BACKGROUND_ROUTES = {
    "along": "A1B1 B1C1",
    "against": "C1B1 B1A1",
    "north": "B0B1 B1B2",
    "south": "B2B1 B1B0",
    "merge": "B0B1 B1C1",
    "cross": "C1B1 B1B0",
}
BACKGROUND_PER_MIN = 3.0
BACKGROUND_UNTIL_S = 90.0
AHEAD = 2


def _run(cmd: list[str]) -> str:
    """Run a SUMO program with SUMO_HOME set (quiet, XML-validated); its stdout, or RuntimeError."""
    env = tool_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


@dataclass(frozen=True, eq=False)
class SumoPass:
    """Ego's FCD samples (ns-2 = SUMO coordinates) and the files ns-3 reads; ``lag_s``: see the module doc."""

    fcd_path: Path
    ns2_path: Path
    ns2_node_index: int
    times: np.ndarray
    xy: np.ndarray
    speed: np.ndarray
    rsu_xy: tuple[float, float]
    sumo_version: str
    lag_s: float


def _routes(path: Path, seed: int) -> None:
    """Ego at t = 0, ``AHEAD`` vehicles already ahead of it on A1B1 (a queue at the red light) and
    seeded Poisson background departures from t = 1 s, sorted by departure as SUMO expects."""
    rng = np.random.default_rng(seed)
    departs: list[tuple[float, str, str, str]] = [(0.0, EGO_ID, "ego", "")]
    for i in range(AHEAD):
        departs.append((0.0, f"ahead.{i}", "along", f' departPos="{40.0 + 60.0 * i + rng.uniform(0.0, 40.0):.1f}"'))
    for name in BACKGROUND_ROUTES:
        t = 1.0 + float(rng.exponential(60.0 / BACKGROUND_PER_MIN))
        for i in range(1000):
            if t > BACKGROUND_UNTIL_S:
                break
            departs.append((round(t, 1), f"{name}.{i}", name, ""))
            t += float(rng.exponential(60.0 / BACKGROUND_PER_MIN))
    lines = ["<routes>", f'    <route id="ego" edges="{EGO_ROUTE}"/>']
    lines += [f'    <route id="{name}" edges="{edges}"/>' for name, edges in BACKGROUND_ROUTES.items()]
    lines += [f'    <vehicle id="{v}" route="{r}" depart="{t:.1f}"{x}/>' for t, v, r, x in sorted(departs)]
    path.write_text("\n".join(lines + ["</routes>", ""]))


def _node_index(activity: Path) -> int:
    """Ego's ns-2 node index, from traceExporter's ``$ns_ at t "$g(i) start"; # SUMO-ID: id`` lines."""
    for line in activity.read_text().splitlines():
        m = re.search(r'\$g\((\d+)\) start"; # SUMO-ID: (\S+)', line)
        if m and m.group(2) == EGO_ID:
            return int(m.group(1))
    raise RuntimeError(f"{EGO_ID} not in {activity}")


def make_pass(workdir: Path, *, seed: int = 1, step_s: float = 0.1) -> SumoPass:
    """Generate the grid, simulate ego's pass through B1 and export it as ns-2 mobility into ``workdir``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    sumo = sumo_binary("sumo")
    net, rou, fcd = workdir / "grid.net.xml", workdir / "pass.rou.xml", workdir / "fcd.xml"
    ns2, act = workdir / "ego.ns2", workdir / "ego.activity"
    grid = ["--grid", "--grid.number", "3", "--grid.length", "200", "--default-junction-type", "traffic_light"]
    _run([str(sumo_binary("netgenerate")), *grid, "--seed", str(seed), "--no-warnings", "-o", str(net)])
    _routes(rou, seed)
    run = ["-n", str(net), "-r", str(rou), "--step-length", str(step_s), "--seed", str(seed)]
    fcd_opts = ["--fcd-output", str(fcd), "--device.fcd.explicit", EGO_ID, "--precision", "4"]
    _run([str(sumo), *run, *fcd_opts, "--no-step-log", "--no-warnings", "--duration-log.disable"])
    exporter = [sys.executable, str(sumo_tool("traceExporter.py")), "--fcd-input", str(fcd)]
    _run([*exporter, "--ns2mobility-output", str(ns2), "--ns2activity-output", str(act)])

    times, xy, speed = _ego_samples(fcd)
    if len(times) < 2 or not np.allclose(np.diff(times), step_s, atol=1e-6):
        raise RuntimeError(f"{EGO_ID} has {len(times)} FCD samples in {fcd}, not one every {step_s} s")
    node = _node_index(act)
    head = [line.split() for line in ns2.read_text().splitlines()[:2]]
    expected = [[f"$node_({node})", "set", k, v] for k, v in zip(("X_", "Y_"), xy[0], strict=True)]
    if [[*h[:3], float(h[3])] for h in head] != expected:
        raise RuntimeError(f"ns-2 start {head} is not the FCD start {xy[0]} of $node_({node})")
    junction = next(j for j in ET.parse(net).getroot().iter("junction") if j.get("id") == RSU_JUNCTION)
    rsu = (float(junction.get("x", "nan")), float(junction.get("y", "nan")))
    return SumoPass(fcd, ns2, node, times, xy, speed, rsu, sumo_version(), step_s)


def _ego_samples(fcd: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ego's (times, xy, speed) from the FCD file, read-only."""
    rows = [
        [float(step.get("time", "nan"))] + [float(v.get(k, "nan")) for k in ("x", "y", "speed")]
        for step in ET.parse(fcd).getroot().iter("timestep")
        for v in step.iter("vehicle")
        if v.get("id") == EGO_ID
    ]
    arr = np.array(rows, dtype=float).reshape(-1, 4)
    out = arr[:, 0].copy(), arr[:, 1:3].copy(), arr[:, 3].copy()
    for a in out:
        a.setflags(write=False)
    return out


def _knots(p: SumoPass) -> tuple[np.ndarray, np.ndarray]:
    """The ns-3 polyline's (times, positions): x_0 at t_0, then x_k at t_k + lag."""
    return np.concatenate(([p.times[0]], p.times + p.lag_s)), np.vstack((p.xy[:1], p.xy))


def position_at(p: SumoPass, t: float) -> tuple[float, float, float, float] | None:
    """(x, y, vx, vy) of the ns-3 node at time t, linear between knots; None outside [t_0, t_n + lag]."""
    kt, kxy = _knots(p)
    if not kt[0] <= t <= kt[-1]:
        return None
    i = min(int(np.searchsorted(kt, t, side="right")) - 1, len(kt) - 2)
    dt = kt[i + 1] - kt[i]
    v = (kxy[i + 1] - kxy[i]) / dt
    x, y = kxy[i] + v * (t - kt[i])
    return float(x), float(y), float(v[0]), float(v[1])


def coverage_interval(p: SumoPass, radius_m: float) -> tuple[float, float] | None:
    """First maximal (entry, exit) with ground distance to the RSU <= radius_m, exact on the polyline.

    The exit is the last knot's time if ego leaves the network still in coverage; None if never in it.
    """
    kt, kxy = _knots(p)
    rel = kxy - np.asarray(p.rsu_xy)
    entry: float | None = None
    if float(rel[0] @ rel[0]) <= radius_m**2:
        entry = float(kt[0])
    for i in range(len(kt) - 1):
        a0, d = rel[i], rel[i + 1] - rel[i]
        a, b, c = float(d @ d), 2.0 * float(a0 @ d), float(a0 @ a0) - radius_m**2
        if a == 0.0:
            lo, hi = (-math.inf, math.inf) if c <= 0.0 else (math.inf, -math.inf)
        else:
            disc = b * b - 4.0 * a * c
            if disc < 0.0:
                lo, hi = math.inf, -math.inf
            else:
                root = math.sqrt(disc)
                lo, hi = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
        seg = kt[i + 1] - kt[i]
        if entry is None and lo <= 1.0 and hi >= 0.0:
            entry = float(kt[i] + max(lo, 0.0) * seg)
        if entry is not None and hi < 1.0:
            return entry, float(kt[i] + max(hi, 0.0) * seg)
    return None if entry is None else (entry, float(kt[-1]))


def main() -> None:
    """Build one pass and print its figures for the 85 m radius."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    parser.add_argument("--radius", type=float, default=85.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        p = make_pass(args.workdir or Path(tmp), seed=args.seed, step_s=args.step)
        print(f"SUMO version: {p.sumo_version}")
        print(f"samples: {len(p.times)} (t = {p.times[0]:g} .. {p.times[-1]:g} s, step {p.lag_s:g} s)")
        print(f"ego ns-2 node index: $node_({p.ns2_node_index}); RSU at {p.rsu_xy}")
        cov = coverage_interval(p, args.radius)
        if cov is None:
            print(f"never within {args.radius:g} m")
        else:
            entry, exit_ = cov
            print(
                f"coverage {args.radius:g} m (ns-3 time): entry {entry:.3f} s, exit {exit_:.3f} s, dwell {exit_ - entry:.3f} s"
            )
            inside = (p.times + p.lag_s >= entry) & (p.times + p.lag_s <= exit_)
            v = p.speed[inside]
            print(
                f"speed within coverage: min {v.min():.3f} m/s, max {v.max():.3f} m/s; stopped: {bool(v.min() < 0.1)}"
            )
        print("ns-2 file, first 5 lines:")
        print("\n".join(p.ns2_path.read_text().splitlines()[:5]))


if __name__ == "__main__":
    main()
