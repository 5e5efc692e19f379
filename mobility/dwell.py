"""How long vehicles stay in coverage: the time a vehicle has to finish its contribution.

A *visit* runs from a vehicle's join to its next leave; a vehicle that comes back makes another
visit. A visit still open when the trace ends is *censored*: its true length is unknown (only a
lower bound), so it is counted apart and kept out of the distribution, which would otherwise be
biased short.

Coverage is the union of the RSU cells (a hand-over from one RSU to an adjacent one without a gap
keeps the vehicle in coverage). Per-cell visits need per-RSU membership: a trace recorded with
``coverage.membership: per_rsu`` (or with one RSU) has a join/leave pair per cell; under ``union``
membership a hand-over is silent, so only the union is known.

:func:`dwell_summary` and :func:`percentiles` take any list of durations (job times too), and
:func:`dwell_warning` says when most jobs cannot finish within a median visit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobility.events import MobilityEvent


@dataclass(frozen=True)
class Visit:
    """One stay of a vehicle in coverage (or in one RSU's cell): join time, leave time (None: censored)."""

    vehicle: str
    rsu: str
    join: float
    leave: float | None
    join_seq: int = field(default=0, compare=False)  # position of the opening join among the events
    leave_seq: int | None = field(default=None, compare=False)  # position of the closing leave (None: open)

    @property
    def censored(self) -> bool:
        """True if the vehicle was still in coverage when the events end."""
        return self.leave is None

    @property
    def duration(self) -> float | None:
        """Seconds from join to leave (None for a censored visit)."""
        return None if self.leave is None else self.leave - self.join


def coverage_visits(events: Iterable[MobilityEvent]) -> list[Visit]:
    """Visits of the union of all cells, in order of join, each with the positions of its opening
    join and closing leave among ``events`` (the order a run met them in).

    A vehicle is in coverage while it is a member of at least one RSU; a leave followed at the
    same time by a join of the same vehicle (a hand-over recorded per RSU) continues the visit.
    ``rsu`` is the cell the visit began in. Raises ValueError for a leave without a join.
    """
    inside: dict[str, int] = {}
    current: dict[str, int] = {}  # vehicle -> index of its open (or just closed) visit
    out: list[Visit] = []
    for seq, e in enumerate(events):
        n = inside.get(e.vehicle, 0)
        if e.kind == "join":
            i = current.get(e.vehicle)
            if n == 0 and i is not None and out[i].leave == e.time:
                v = out[i]
                out[i] = Visit(e.vehicle, v.rsu, v.join, None, v.join_seq)  # no gap: the same visit
            elif n == 0:
                current[e.vehicle] = len(out)
                out.append(Visit(e.vehicle, e.rsu, e.time, None, seq))
            inside[e.vehicle] = n + 1
        else:
            if n == 0:
                raise ValueError(f"leave of vehicle {e.vehicle!r} at {e.time:g} s without a join")
            inside[e.vehicle] = n - 1
            if n == 1:
                i = current[e.vehicle]
                out[i] = Visit(e.vehicle, out[i].rsu, out[i].join, e.time, out[i].join_seq, seq)
    return out


def cell_visits(events: Iterable[MobilityEvent]) -> list[Visit]:
    """Visits of each RSU cell separately (needs per-RSU membership events), in order of join.

    Raises ValueError when a leave names an RSU the vehicle did not join: the events were
    recorded with union membership and a silent hand-over, so cells cannot be told apart.
    """
    open_at: dict[tuple[str, str], int] = {}
    out: list[Visit] = []
    for e in events:
        key = (e.vehicle, e.rsu)
        if e.kind == "join":
            if key in open_at:
                raise ValueError(f"vehicle {e.vehicle!r} joins RSU {e.rsu!r} at {e.time:g} s while already in it")
            open_at[key] = len(out)
            out.append(Visit(e.vehicle, e.rsu, e.time, None))
        else:
            i = open_at.pop(key, None)
            if i is None:
                raise ValueError(
                    f"vehicle {e.vehicle!r} leaves RSU {e.rsu!r} at {e.time:g} s without joining it: "
                    "per-RSU membership is not recorded (union membership hands over silently)"
                )
            out[i] = Visit(e.vehicle, e.rsu, out[i].join, e.time)
    return out


def percentiles(values: Iterable[float], qs: Sequence[float] = (10.0, 50.0, 90.0)) -> list[float | None]:
    """The ``qs`` percentiles (0-100) of ``values``, linearly interpolated (numpy's default); None each if empty."""
    xs = sorted(float(v) for v in values)
    for q in qs:
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"a percentile must be in [0, 100], got {q!r}")
    if not xs:
        return [None for _ in qs]
    out: list[float | None] = []
    for q in qs:
        pos = (len(xs) - 1) * q / 100.0
        lo = math.floor(pos)
        hi = min(lo + 1, len(xs) - 1)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))
    return out


def dwell_summary(durations: Iterable[float]) -> dict[str, Any]:
    """``{count, median, p10, p90, mean}`` of any durations (s); the statistics are None for no input."""
    xs = [float(v) for v in durations]
    p10, median, p90 = percentiles(xs)
    return {
        "count": len(xs),
        "median": median,
        "p10": p10,
        "p90": p90,
        "mean": sum(xs) / len(xs) if xs else None,
    }


def visits_summary(visits: Sequence[Visit]) -> dict[str, Any]:
    """:func:`dwell_summary` of the completed visits, plus ``censored`` (open at the end) and ``vehicles``."""
    out = dwell_summary(v.duration for v in visits if v.duration is not None)
    out["censored"] = sum(1 for v in visits if v.censored)
    out["vehicles"] = len({v.vehicle for v in visits})
    return out


def positions_dwell(positions: Mapping[float, tuple[Sequence[str], Any]], cells: Sequence[Any]) -> dict[str, Any]:
    """Dwell in the union of ``cells`` (objects with ``x``, ``y``, ``radius``: RSUs) from every
    vehicle's position sampled at each time of ``positions`` (``{time: (ids, xy array)}``, as
    ``vmc lust report --fit-rsu`` records them). A vehicle is in coverage at a sample if it is within
    any cell; a visit already open at the first sample has no known start and one still open at
    the last has no end: both are counted as censored, not in the distribution."""
    import numpy as np

    times = sorted(positions)
    events: list[MobilityEvent] = []
    inside: set[str] = set()
    first: set[str] = set()
    for k, t in enumerate(times):
        ids, xy = positions[t]
        now: set[str] = set()
        if len(ids):
            xy = np.asarray(xy, dtype=float).reshape(-1, 2)
            near = np.zeros(len(ids), dtype=bool)
            for c in cells:
                near |= np.hypot(xy[:, 0] - c.x, xy[:, 1] - c.y) <= c.radius
            now = {str(ids[int(i)]) for i in np.flatnonzero(near)}
        if k == 0:
            first = set(now)
        events += [MobilityEvent(t, "leave", v, "region", 0.0, 0.0, 0.0) for v in sorted(inside - now)]
        events += [MobilityEvent(t, "join", v, "region", 0.0, 0.0, 0.0) for v in sorted(now - inside)]
        inside = now
    visits = coverage_visits(events)
    start = times[0] if times else None
    known = [v for v in visits if not (v.join == start and v.vehicle in first)]
    out = visits_summary(known)
    out["censored"] += len(visits) - len(known)
    out["window"] = [times[0], times[-1]] if times else None
    return out


def events_dwell(events: Sequence[MobilityEvent]) -> dict[str, Any]:
    """Dwell in the union of cells (:func:`visits_summary`) and, when recorded, per cell.

    ``cells`` maps each RSU to its :func:`visits_summary`, or is None when the events do not
    record per-RSU membership (several RSUs under union membership).
    """
    union = coverage_visits(events)
    try:
        cells = cell_visits(events)
    except ValueError:
        per_cell = None
    else:
        per_cell = {rsu: visits_summary([v for v in cells if v.rsu == rsu]) for rsu in sorted({v.rsu for v in cells})}
    return {"coverage": visits_summary(union), "cells": per_cell}


def trace_dwell(path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`events_dwell` of a recorded trace, with what the trace says of its RSUs and membership."""
    from mobility.trace import read_trace

    trace = read_trace(path)
    out = events_dwell(trace.events)
    coverage = trace.meta.get("coverage") or {}
    rsus = [r for r in trace.meta.get("rsus") or [] if isinstance(r, dict)]
    membership = coverage.get("membership", "union")
    cells = out["cells"]
    if cells is not None and membership == "union" and len(rsus) > 1:
        cells = None  # a union trace without a hand-over only looks per cell: hand-overs were possible
    out.update(
        trace=str(Path(path)),
        membership=membership,
        rsus=[{"id": r.get("id"), "radius": r.get("radius")} for r in rsus],
        complete=trace.complete,
        begin=trace.meta.get("clock", {}).get("begin") if isinstance(trace.meta.get("clock"), dict) else None,
        end=(trace.end or {}).get("time", trace.events[-1].time if trace.events else None),
        cells=cells,
    )
    return out


def trace_path(source: str | os.PathLike[str]) -> Path:
    """The trace a command line names: a trace file, a run directory (its ``trace.jsonl``) or a
    scenario YAML with ``mobility.trace`` (read relative to the scenario file, else the working
    directory). Raises FileNotFoundError or ValueError saying what is missing."""
    p = Path(source)
    if p.is_dir():
        p = p / "trace.jsonl"
        if not p.is_file():
            raise FileNotFoundError(f"{source} is a directory without a trace.jsonl")
        return p
    if p.suffix not in (".yaml", ".yml"):
        return p
    from mobility.yaml_text import load_yaml

    if not p.is_file():
        raise FileNotFoundError(f"scenario file {p} does not exist")
    data = load_yaml(p.read_text()) or {}
    m = data.get("mobility") if isinstance(data, dict) else None
    m = m if isinstance(m, dict) else {}
    trace = m.get("trace")
    if not isinstance(trace, str) or not trace:
        raise ValueError(
            f"scenario {p} has no trace (mobility.source is {m.get('source', 'city')!r}): run it (vmc run {p}) "
            "and give the run directory, or its trace.jsonl"
        )
    t = Path(trace).expanduser()
    if not t.is_absolute() and ((p.parent / t).exists() or not t.exists()):
        t = p.parent / t
    return t


def dwell_command(source: str | os.PathLike[str], *, as_json: bool = False) -> int:
    """Print the dwell in coverage of a trace, run directory or scenario (``vmc dwell``, ``vmc lust dwell``)."""
    d = trace_dwell(trace_path(source))
    if as_json:
        import json

        print(json.dumps(d, indent=2))
    else:
        print("\n".join(dwell_lines(d)))
    return 0


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} s"


def summary_line(s: Mapping[str, Any]) -> str:
    """One line of a visits summary, with units."""
    if not s["count"]:
        return f"no completed visit ({s.get('censored', 0)} censored: no known start or end)"
    return (
        f"{s['count']} visits of {s.get('vehicles', '?')} vehicles: median {_s(s['median'])}, "
        f"p10 {_s(s['p10'])}, p90 {_s(s['p90'])}, mean {_s(s['mean'])}; "
        f"{s.get('censored', 0)} censored (no known start or end: not counted)"
    )


def dwell_lines(d: Mapping[str, Any]) -> list[str]:
    """What ``vmc dwell`` prints for :func:`trace_dwell` (or :func:`events_dwell`)."""
    lines = []
    if "trace" in d:
        rsus = d.get("rsus") or []
        radii = sorted({r["radius"] for r in rsus if r.get("radius") is not None})
        end = d.get("end")
        lines.append(
            f"{d['trace']}: {len(rsus)} RSU(s)"
            + (f" of radius {', '.join(f'{r:g}' for r in radii)} m" if radii else "")
            + f", membership {d.get('membership')}"
            + ("" if end is None else f", ends at {end:g} s")
            + ("" if d.get("complete", True) else " (no end record: the recording was cut)")
        )
    lines.append("dwell in coverage (join to leave): " + summary_line(d["coverage"]))
    cells = d.get("cells")
    if cells is None:
        lines.append("per RSU cell: not recorded (union membership: a hand-over between RSUs is silent)")
    elif len(cells) == 1:
        lines.append(f"per RSU cell: one RSU ({next(iter(cells))}), its cell is the whole coverage")
    else:
        for rsu, s in cells.items():
            lines.append(f"  cell {rsu}: " + summary_line(s))
    return lines


def _median(dwell: Mapping[str, Any] | float | None) -> float | None:
    if dwell is None or isinstance(dwell, (int, float)):
        return None if dwell is None else float(dwell)
    m = dwell.get("median")
    return None if m is None else float(m)


def share_longer_than_dwell(job_durations: Iterable[float], dwell: Mapping[str, Any] | float | None) -> float | None:
    """Fraction of jobs longer than the median dwell (a summary dict or the median in s); None without either."""
    jobs = [float(v) for v in job_durations]
    median = _median(dwell)
    if not jobs or median is None:
        return None
    return sum(1 for j in jobs if j > median) / len(jobs)


def dwell_warning(job_durations: Iterable[float], dwell: Mapping[str, Any] | float | None) -> str | None:
    """A one-line warning when more than half the jobs take longer than the median dwell, else None."""
    jobs = [float(v) for v in job_durations]
    share = share_longer_than_dwell(jobs, dwell)
    if share is None or share <= 0.5:
        return None
    pct = f"{100 * share:.0f}" if round(100 * share) > 50 else f"{100 * share:.1f}"
    job_median = percentiles(jobs, (50.0,))[0]
    return (
        f"warning: {pct} % of jobs (median {job_median:.1f} s) take longer than the median dwell in coverage "
        f"({_median(dwell):.1f} s): most contributions cannot finish before their vehicle leaves; shorten jobs "
        "(compute.profile, federated.train.epochs) or enlarge coverage (mobility.rsus.radius, a region of "
        "several RSUs)"
    )
