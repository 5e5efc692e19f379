"""Join/leave events from recorded SUMO FCD, exactly as a live SUMO run of the same traffic gives them.

:class:`FcdSource` steps the live source's clock (``begin + n * step_length``) and, at each step,
hands the vehicles within each RSU's context radius to the same :class:`CoverageTracker` the live
source uses, so membership, hand-over, V2V chains, event order and state samples follow one code.

Timing. SUMO writes the FCD of a step before its clock moves on: the sample stamped ``s`` holds the
state after the step that began at ``s``, which a live run (libsumo or TraCI) sees at
``s + record_step``, ``record_step`` being the step length SUMO ran with. So the state at clock time
``t`` is the FCD's at ``t - record_step`` (interpolated when that falls between samples, see
:mod:`mobility.fcd`), and an FCD recorded from a live run's network, routes and seed replays that
run's events at the same times. The clock begins at ``begin`` (default: the first sample's time,
where SUMO's FCD begins) and ends at the last sample's time plus ``record_step``: in an FCD that
SUMO wrote until its network emptied, the last step is empty and everyone has left, as in the live
run; a recording cut earlier ends with its vehicles still members, as a live run reaching its end.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mobility.coverage import CoverageConfig
from mobility.events import MobilityEvent
from mobility.fcd import FcdPositions, inspect_fcd, iter_samples
from mobility.fcd_rules import FcdRules
from mobility.rsu import Rsu
from mobility.source import SteppedSource, _check_until
from mobility.sumo import VehicleState

_EPS = 1e-9


class FcdSource(SteppedSource):
    """A :class:`mobility.source.MobilitySource` over an FCD file (XML or CSV, see :mod:`mobility.fcd`).

    The whole file is checked when the source is opened against ``rules`` (default
    :class:`mobility.fcd_rules.FcdRules`: a bad file, or a vehicle that breaks physics, is refused
    before anything runs; with ``rules.drop`` such a vehicle is left out and listed under
    ``metadata["fcd"]["dropped"]``), then streamed while the clock moves, lon/lat converted when the
    rules say so. With ``trace`` set, events and state samples are recorded as a live source
    records them, so ``vmc replay`` works on the result.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        rsus: Sequence[Rsu],
        coverage: CoverageConfig | None = None,
        *,
        step_length: float = 1.0,
        begin: float | None = None,
        record_step: float | None = None,
        trace: str | os.PathLike[str] | None = None,
        overwrite_trace: bool = False,
        metadata: dict[str, Any] | None = None,
        rules: FcdRules | None = None,
    ) -> None:
        if not step_length > 0 or (record_step is not None and not record_step > 0):
            raise ValueError(f"FCD source: step lengths must be positive, got {step_length!r} and {record_step!r}")
        self.path = Path(path)
        rules = rules or FcdRules()
        summary = inspect_fcd(self.path, rules)
        self._track(rsus, coverage)
        self._step = float(step_length)
        self._lag = float(record_step if record_step is not None else step_length)
        self._begin = float(summary.first if begin is None else begin)
        self._end = summary.last + self._lag
        self._time = self._begin
        self._n = 0
        self._rsus = list(rsus)
        self._positions = FcdPositions(iter_samples(self.path, rules, summary.dropped), summary.period)
        meta = {
            "source": "fcd",
            "clock": {"begin": self._begin, "step_length": self._step, "end": self._end},
            "fcd": {**summary.to_dict(), "record_step": self._lag},
            "rsus": [r.to_dict() for r in rsus],
            "coverage": self.coverage.to_dict(),
            **(metadata or {}),
        }
        try:
            self._record(meta, trace, overwrite_trace)
        except BaseException:
            self._positions.close()
            raise
        if self._begin >= self._end - _EPS:
            self._end_trace("finished", self._begin)

    @property
    def time(self) -> float:
        """Current simulated time (s)."""
        return self._time

    def advance(self, until: float) -> list[MobilityEvent]:
        """Move the clock up to ``until`` and return the join/leave events, recording them if tracing."""
        until = _check_until(until)
        batch: list[MobilityEvent] = []
        while not self._ended:
            t = round(self._begin + (self._n + 1) * self._step, 6)
            if t > until + _EPS:
                break
            self._n += 1
            self._time = t
            ids, states = self._positions.at(t - self._lag)
            self._observed(t, self.tracker.observe(t, self._near(ids, states)), batch)
            if t >= self._end - _EPS:
                self._end_trace("finished", t)
        if self._writer is not None:
            self._writer.flush()
        return batch

    def _near(self, ids: list[str], states: np.ndarray) -> dict[str, dict[str, VehicleState]]:
        """Per RSU, the vehicles within its context radius (what SUMO's context subscription reports)."""
        out: dict[str, dict[str, VehicleState]] = {}
        x, y, speed = states[:, 0], states[:, 1], states[:, 2]
        for r in self._rsus:
            reach = self.coverage.context_radius(r)
            inside = np.flatnonzero((x - r.x) ** 2 + (y - r.y) ** 2 <= reach * reach)
            out[r.id] = {ids[i]: (float(x[i]), float(y[i]), float(speed[i])) for i in inside}
        return out

    def close(self) -> None:
        """Stop reading and end the trace (status ``closed`` unless it already finished)."""
        try:
            self._end_trace("closed", self._time)
        finally:
            self._abandon_trace()
            self._positions.close()

    def __enter__(self) -> FcdSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
