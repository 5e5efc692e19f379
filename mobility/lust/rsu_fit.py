"""An RSU sized for the LuST peak: where to put it and how far it reaches so that about as many
vehicles are in coverage at the first fit as in the paper (12 at 08:00).

From positions of every vehicle recorded at each step around ``at`` (a replay of the built
scenario with its run settings, :func:`mobility.lust.report.run_report` with ``positions_at``),
every candidate junction (the most central ones of the city centre, by betweenness as
:func:`mobility.rsu.place_rsus` ranks them) and radius with ``low``-``high`` vehicles within the
radius at ``at`` and on average over ``at +- spread`` is kept, with the join/leave requests its
coverage sees in the ``horizon`` after ``at``. Of these, the one whose request rate is closest to
the paper's (one a minute) wins: in flowing traffic a wide radius on a fast road holds 12 vehicles
for a few seconds each (tens of requests a minute), a short one where vehicles queue holds them
longer. Because the scenario's SUMO run is deterministic (same files, settings and seed),
the co-simulation sees these same vehicles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _members(ids: Sequence[str], xy: Any, x: float, y: float, radius: float) -> set[str]:
    import numpy as np

    if len(ids) == 0:
        return set()
    d = np.hypot(xy[:, 0] - x, xy[:, 1] - y)
    return {ids[int(i)] for i in np.flatnonzero(d <= radius)}


def save_positions(path: str | Path, positions: dict[float, tuple[list[str], Any]]) -> Path:
    """Write recorded positions (``Recorder.positions``) to a compressed ``.npz``."""
    import numpy as np

    times = sorted(positions)
    counts = [len(positions[t][0]) for t in times]
    ids = np.array([v for t in times for v in positions[t][0]], dtype=str)
    xy = np.array([p for t in times for p in positions[t][1]], dtype=np.float32).reshape(-1, 2)
    np.savez_compressed(path, times=np.array(times), counts=np.array(counts), ids=ids, xy=xy)
    return Path(path)


def load_positions(path: str | Path) -> dict[float, tuple[list[str], Any]]:
    """Positions written by :func:`save_positions`."""
    import numpy as np

    with np.load(path) as z:
        times, counts, ids, xy = z["times"], z["counts"], z["ids"], z["xy"]
    out, k = {}, 0
    for t, n in zip(times, counts, strict=True):
        out[float(t)] = (ids[k : k + n].tolist(), xy[k : k + n])
        k += int(n)
    return out


def fit_rsu(
    net_file: str,
    positions: dict[float, tuple[list[str], Any]],
    *,
    at: float = 8 * 3600.0,
    target: int = 12,
    low: int = 10,
    high: int = 15,
    radii: Sequence[float] = tuple(range(20, 205, 5)),
    central_fraction: float = 0.3,
    candidates: int = 40,
    spread: float = 60.0,
    horizon: float = 600.0,
    target_rate: float = 1.0,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Choose the RSU (see the module docstring); returns it with its counts and request rate.

    Among the candidates with ``low``-``high`` vehicles at ``at`` and on average around it, the one
    whose join/leave rate over ``horizon`` is closest to ``target_rate`` per minute (the paper's one
    request a minute) wins; then the count closest to ``target``, the more central junction and the
    smaller radius. ``table`` in the result lists every candidate in range."""
    import numpy as np

    from mobility.rsu import _read_net, central_region, junction_centrality

    snaps = {t: (list(ids), np.asarray(xy, dtype=float).reshape(-1, 2)) for t, (ids, xy) in positions.items()}
    times = sorted(snaps)
    if not times:
        raise ValueError("no recorded positions to size the RSU from")
    t_at = min(times, key=lambda t: abs(t - at))
    around = [t for t in times if abs(t - at) <= spread]
    later = [t for t in times if t_at <= t <= t_at + horizon]
    xmin, ymin, xmax, ymax = central_region(net_file, central_fraction)
    net = _read_net(str(net_file))
    score = junction_centrality(net_file, 500, 42, cache_dir=cache_dir)
    nodes = [
        (n.getID(), *map(float, n.getCoord()[:2]))
        for n in net.getNodes()
        if n.getType() != "internal" and xmin <= n.getCoord()[0] <= xmax and ymin <= n.getCoord()[1] <= ymax
    ]
    nodes.sort(key=lambda c: (-round(score.get(c[0], 0.0), 12), c[0]))
    rmax = max(radii)
    table = []
    for rank, (jid, x, y) in enumerate(nodes[:candidates]):
        near: dict[float, tuple[list[str], Any]] = {}
        for t in sorted(set(around) | set(later)):
            ids, xy = snaps[t]
            d = np.hypot(xy[:, 0] - x, xy[:, 1] - y) if len(ids) else np.empty(0)
            keep = np.flatnonzero(d <= rmax)
            near[t] = ([ids[i] for i in keep], d[keep])
        for r in radii:
            n_at = int(np.sum(near[t_at][1] <= r))
            n_mean = float(np.mean([np.sum(near[t][1] <= r) for t in around])) if around else float(n_at)
            if not (low <= n_at <= high and low <= n_mean <= high):
                continue
            joins = leaves = 0
            prev = {v for v, dd in zip(*near[t_at], strict=True) if dd <= r}
            for t in later[1:]:
                cur = {v for v, dd in zip(*near[t], strict=True) if dd <= r}
                joins += len(cur - prev)
                leaves += len(prev - cur)
                prev = cur
            span_min = (later[-1] - t_at) / 60.0 if len(later) > 1 else math.nan
            rate = (joins + leaves) / span_min if span_min and span_min > 0 else math.nan
            table.append(
                {
                    "junction": jid,
                    "x": round(x, 2),
                    "y": round(y, 2),
                    "centrality_rank": rank,
                    "radius": float(r),
                    "count_at": n_at,
                    "count_mean": round(n_mean, 2),
                    "requests_per_minute": round(rate, 2),
                    "joins": joins,
                    "leaves": leaves,
                    "miss": round(abs(n_at - target) + abs(n_mean - target), 4),
                }
            )
    if not table:
        raise ValueError(
            f"no candidate junction and radius in {min(radii)}-{rmax} m has {low}-{high} vehicles at {at:.0f} s"
        )
    best = min(
        table, key=lambda c: (abs(c["requests_per_minute"] - target_rate), c["miss"], c["centrality_rank"], c["radius"])
    )
    rate = best["requests_per_minute"]
    return {
        **best,
        "at": t_at,
        "target": target,
        "horizon_s": later[-1] - t_at if later else 0.0,
        "minutes_to_31_requests": round(31 / rate, 1) if rate and rate > 0 else None,
        "candidates": len(nodes[:candidates]) * len(radii),
        "in_range": len(table),
        "table": sorted(table, key=lambda c: (c["requests_per_minute"], c["miss"])),
    }
