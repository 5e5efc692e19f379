"""Whether a region cut (:mod:`mobility.region_cut`) reproduces the whole network at its RSUs.

The figures a co-simulation takes from traffic are the coverage events, so a cut is judged on
them, trace against trace, over a study window: joins and leaves per minute, the dwell of the
visits that begin in the window (median, 90th percentile, and the two-sample Kolmogorov-Smirnov
distance between the pooled dwell samples), and the mean number of vehicles in coverage, over the
window and per bin of it. Coverage is the union of the cells (:func:`mobility.dwell.coverage_visits`).

:func:`compare` puts the replicates (traffic seeds) of the whole network beside those of the cut:
each figure's mean over the seeds on either side and their relative difference, the seeds' paired
differences, and whether the difference is within the tolerance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mobility.dwell import coverage_visits, percentiles
from mobility.events import MobilityEvent


@dataclass(frozen=True)
class CoverageFigures:
    """One trace's coverage over a window ``[begin, end)`` (seconds)."""

    begin: float
    end: float
    joins_per_min: float
    leaves_per_min: float
    dwell: tuple[float, ...]
    """Durations of the visits that begin in the window and end before the trace does."""
    censored: int
    """Visits that begin in the window and are still open when the trace ends."""
    occupancy: tuple[float, ...]
    """Mean vehicles in coverage in each bin of the window."""

    @property
    def occupancy_mean(self) -> float:
        return statistics.fmean(self.occupancy) if self.occupancy else 0.0

    @property
    def dwell_median(self) -> float | None:
        return percentiles(self.dwell, (50.0,))[0]

    @property
    def dwell_p90(self) -> float | None:
        return percentiles(self.dwell, (90.0,))[0]


def coverage_figures(
    events: Iterable[MobilityEvent], begin: float, end: float, bin_s: float = 600.0
) -> CoverageFigures:
    """The figures of ``events`` over ``[begin, end)``, occupancy in bins of ``bin_s`` seconds (the
    last bin may be shorter)."""
    if not end > begin or not bin_s > 0:
        raise ValueError(f"a window needs end > begin and bins > 0 s, got [{begin:g}, {end:g}) and {bin_s:g} s")
    events = list(events)
    joins = sum(1 for e in events if e.kind == "join" and begin <= e.time < end)
    leaves = sum(1 for e in events if e.kind == "leave" and begin <= e.time < end)
    minutes = (end - begin) / 60.0
    visits = coverage_visits(events)
    began = [v for v in visits if begin <= v.join < end]
    dwell = tuple(float(v.duration) for v in began if v.duration is not None)
    edges = [begin]
    while edges[-1] < end:
        edges.append(min(edges[-1] + bin_s, end))
    occupied = [0.0] * (len(edges) - 1)
    for v in visits:
        stop = end if v.leave is None else v.leave
        for i in range(len(occupied)):
            lo, hi = max(v.join, edges[i]), min(stop, edges[i + 1])
            if hi > lo:
                occupied[i] += hi - lo
    occupancy = tuple(occupied[i] / (edges[i + 1] - edges[i]) for i in range(len(occupied)))
    return CoverageFigures(
        begin, end, joins / minutes, leaves / minutes, dwell, sum(1 for v in began if v.censored), occupancy
    )


def ks_distance(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The two-sample Kolmogorov-Smirnov distance between samples ``a`` and ``b`` and its p-value."""
    from scipy.stats import ks_2samp

    if not a or not b:
        return math.nan, math.nan
    r = ks_2samp(a, b)
    return float(r.statistic), float(r.pvalue)


@dataclass(frozen=True)
class Check:
    """One figure, the whole network's replicates against the cut's."""

    figure: str
    whole: float
    cut: float
    paired: tuple[float, ...]
    """Per seed, the cut's value minus the whole network's (empty for pooled figures)."""
    tolerance: float | None
    """The largest relative difference that passes (None: stated, not judged)."""

    @property
    def relative(self) -> float:
        return (self.cut - self.whole) / self.whole if self.whole else math.nan

    @property
    def passed(self) -> bool | None:
        if self.tolerance is None:
            return None
        return bool(abs(self.relative) <= self.tolerance)


def _mean(values: Iterable[float | None]) -> float:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(kept) if kept else math.nan


def compare(whole: Sequence[CoverageFigures], cut: Sequence[CoverageFigures], tolerance: float = 0.05) -> list[Check]:
    """The checks of a cut's replicates against the whole network's, seed by seed in the same order:
    joins and leaves per minute, dwell median and p90 (of the pooled visits), mean vehicles in
    coverage (over the window and in its worst bin), and the KS distance of the pooled dwell
    samples (stated; its p-value beside it)."""
    if len(whole) != len(cut) or not whole:
        raise ValueError(f"compare needs the same seeds on both sides, got {len(whole)} and {len(cut)}")

    def per_seed(name: str, get) -> Check:  # noqa: ANN001  a figure of CoverageFigures
        w, c = [get(f) for f in whole], [get(f) for f in cut]
        return Check(name, _mean(w), _mean(c), tuple(b - a for a, b in zip(w, c, strict=True)), tolerance)

    pooled_w = [d for f in whole for d in f.dwell]
    pooled_c = [d for f in cut for d in f.dwell]
    checks = [
        per_seed("joins per minute", lambda f: f.joins_per_min),
        per_seed("leaves per minute", lambda f: f.leaves_per_min),
        Check("dwell median (s)", _p(pooled_w, 50.0), _p(pooled_c, 50.0), (), tolerance),
        Check("dwell p90 (s)", _p(pooled_w, 90.0), _p(pooled_c, 90.0), (), tolerance),
        per_seed("vehicles in coverage (mean)", lambda f: f.occupancy_mean),
    ]
    bins = len(whole[0].occupancy)
    worst = max(
        range(bins),
        key=lambda i: (
            abs(_mean(f.occupancy[i] for f in cut) / _mean(f.occupancy[i] for f in whole) - 1)
            if _mean(f.occupancy[i] for f in whole)
            else 0.0
        ),
    )
    checks.append(
        Check(
            f"vehicles in coverage (worst bin, {worst + 1} of {bins})",
            _mean(f.occupancy[worst] for f in whole),
            _mean(f.occupancy[worst] for f in cut),
            tuple(c.occupancy[worst] - w.occupancy[worst] for w, c in zip(whole, cut, strict=True)),
            tolerance,
        )
    )
    ks, p = ks_distance(pooled_w, pooled_c)
    checks.append(Check("dwell KS distance", 0.0, ks, (), None))
    checks.append(Check("dwell KS p-value", 1.0, p, (), None))
    return checks


def _p(values: Sequence[float], q: float) -> float:
    v = percentiles(values, (q,))[0]
    return math.nan if v is None else float(v)
