"""Where the co-simulation gets its join/leave events: live SUMO or a recorded trace.

(Recorded SUMO FCD is a third source, :class:`mobility.fcd_source.FcdSource`, built on
:class:`SteppedSource` here.) All sources follow the same clock rule, so a replay reproduces a live run exactly: after
``advance(until)`` the source's ``time`` is the last step boundary ``begin + n * step_length`` not
after ``until`` (or the time the run ended, if earlier), and the returned events are all those
with ``time <= until`` not returned before, in order. ``members()`` gives the current members with
their positions as of the last state sample (``CoverageConfig.state_interval``), or as of their
join when sampling is off; every source computes it identically.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mobility.coverage import CoverageConfig, CoverageTracker, MemberState
from mobility.errors import SumoError, TraceError
from mobility.events import MobilityEvent
from mobility.rsu import Rsu
from mobility.sumo import SumoConfig, SumoSession, sumo_version
from mobility.trace import TraceWriter, _parse_states, iter_records, read_header

_EPS = 1e-9


@runtime_checkable
class MobilitySource(Protocol):
    """A stream of join/leave events in simulated time."""

    @property
    def time(self) -> float:
        """Simulated time (s) up to which events have been produced."""
        ...

    @property
    def finished(self) -> bool:
        """True when no further events will come."""
        ...

    @property
    def metadata(self) -> dict[str, Any]:
        """Description of what produces the events (the trace header's ``meta``)."""
        ...

    def advance(self, until: float) -> list[MobilityEvent]:
        """Move to ``until`` and return the new events with ``time <= until``, in time order."""
        ...

    def members(self) -> list[MemberState]:
        """Current members and their last sampled states."""
        ...

    def close(self) -> None:
        """Release resources (SUMO, files)."""
        ...


class _MemberView:
    """Membership as seen by the consumer: events applied in order, replaced by each state sample."""

    def __init__(self, per_rsu: bool) -> None:
        self._per_rsu = per_rsu
        self._m: dict[tuple[str, str], MemberState] = {}

    def _key(self, vehicle: str, rsu: str) -> tuple[str, str]:
        return (vehicle, rsu if self._per_rsu else "")

    def apply(self, events: Sequence[MobilityEvent]) -> None:
        for e in events:
            key = self._key(e.vehicle, e.rsu)
            if e.kind == "join":
                self._m[key] = MemberState(e.vehicle, e.rsu, e.x, e.y, e.speed)
            else:
                self._m.pop(key, None)

    def set_states(self, members: Sequence[MemberState]) -> None:
        self._m = {self._key(m.vehicle, m.rsu): m for m in members}

    def members(self) -> list[MemberState]:
        return sorted(self._m.values(), key=lambda m: (m.vehicle, m.rsu))


def _check_until(until: float) -> float:
    if isinstance(until, bool) or not isinstance(until, (int, float)) or math.isnan(until):
        raise ValueError(f"advance(until) needs a number of seconds, got {until!r}")
    return float(until)


class SteppedSource:
    """What the sources that step a clock themselves share (live SUMO, recorded FCD).

    Each step's observations go through one :class:`CoverageTracker`, so both turn positions into
    join/leave events by the same code; the members view, the state samples and the trace they
    record are kept here. A subclass sets ``_begin`` and ``_step`` and calls :meth:`_track` and
    :meth:`_record` from its constructor, then :meth:`_observed` once per step.
    """

    _begin: float
    _step: float
    _meta: dict[str, Any]

    def _track(self, rsus: Sequence[Rsu], coverage: CoverageConfig | None) -> None:
        self.coverage = coverage or CoverageConfig()
        self.coverage.validate()
        self.tracker = CoverageTracker(rsus, self.coverage)
        self._view = _MemberView(self.coverage.membership == "per_rsu")
        self._writer: TraceWriter | None = None
        self._ended = False

    def _record(self, meta: dict[str, Any], trace: str | os.PathLike[str] | None, overwrite: bool) -> None:
        self._meta = meta
        self._next_sample = self._begin
        if trace is not None:
            self._writer = TraceWriter(trace, meta, overwrite=overwrite)

    @property
    def finished(self) -> bool:
        """True once the source reached its end, ran out of traffic, or was closed / failed."""
        return self._ended

    @property
    def metadata(self) -> dict[str, Any]:
        """The trace header's meta for this run."""
        return self._meta

    @property
    def trace_path(self) -> Path | None:
        """The trace file being written, if any."""
        return self._writer.path if self._writer is not None else None

    def members(self) -> list[MemberState]:
        """Current members (see module docstring for when positions are refreshed)."""
        return self._view.members()

    def _observed(self, t: float, events: list[MobilityEvent], batch: list[MobilityEvent]) -> None:
        """Apply one step's events to the members view, the batch and the trace, then sample states."""
        self._view.apply(events)
        batch.extend(events)
        if self._writer is not None:
            self._writer.write_events(events)
        self._sample(t)

    def _sample(self, t: float) -> None:
        interval = self.coverage.state_interval
        if interval is None or t + _EPS < self._next_sample:
            return
        members = self.tracker.members()
        self._view.set_states(members)
        if self._writer is not None and members:
            self._writer.write_states(t, members)
        k = math.floor((t - self._begin) / interval + _EPS) + 1
        self._next_sample = self._begin + k * interval

    def _end_trace(self, status: str, time: float, extra: dict[str, Any] | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        if self._writer is not None:
            self._writer.close(status, time=time, extra=extra)

    def _abandon_trace(self) -> None:
        if self._writer is not None and not self._writer.closed:
            self._writer.abandon()


class SumoSource(SteppedSource):
    """Live events: a :class:`SumoSession` stepped on demand, with a :class:`CoverageTracker`.

    With ``trace`` set, every event (and state sample) is written to that file and flushed after
    each ``advance``; if SUMO dies, the events of the failing call are written first, the trace is
    closed with an ``error`` end record, and the :class:`SumoError` carries them in ``.events``.
    """

    def __init__(
        self,
        sumo: SumoConfig,
        rsus: Sequence[Rsu],
        coverage: CoverageConfig | None = None,
        *,
        trace: str | os.PathLike[str] | None = None,
        overwrite_trace: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._track(rsus, coverage)
        self.session = SumoSession(sumo)
        self._error: SumoError | None = None
        self.session.start()
        try:
            self.tracker.attach(self.session)
            self._begin = self.session.time
            self._step = float(sumo.step_length)
            meta = {
                "source": "sumo",
                "clock": {"begin": self._begin, "step_length": self._step, "end": self.session.end},
                "sumo": sumo.to_dict(),
                "sumo_version": sumo_version(),
                "seed": sumo.seed,
                "rsus": [r.to_dict() for r in rsus],
                "coverage": self.coverage.to_dict(),
                **(metadata or {}),
            }
            self._record(meta, trace, overwrite_trace)
        except BaseException:
            self.session.close()
            raise

    @property
    def time(self) -> float:
        """Current simulated time (s)."""
        return self.session.time

    @property
    def teleports(self) -> int:
        """Teleports so far."""
        return self.session.teleports

    def advance(self, until: float) -> list[MobilityEvent]:
        """Step SUMO up to ``until`` and return the join/leave events, recording them if tracing."""
        until = _check_until(until)
        if self._error is not None:
            raise SumoError(f"this source already failed: {self._error}")
        batch: list[MobilityEvent] = []
        try:
            if not self._ended and self.session.finished:
                self._finish("finished")
            while not self._ended and self.session.time + self._step <= until + _EPS:
                t = self.session.step()
                self._observed(t, self.tracker.update(t, self.session), batch)
                if self.session.finished:
                    self._finish("finished")
        except SumoError as exc:
            self._error = exc
            self._ended = True
            exc.events = batch
            if self._writer is not None:
                self._writer.close(
                    "error",
                    time=self.session.time,
                    message=str(exc).splitlines()[0],
                    extra={"teleports": self.session.teleports},
                )
            raise
        if self._writer is not None:
            self._writer.flush()
        return batch

    def _finish(self, status: str) -> None:
        self._end_trace(status, self.session.time, {"teleports": self.session.teleports})

    def close(self) -> None:
        """Close SUMO and end the trace (status ``closed`` unless it already finished or failed)."""
        try:
            self._finish("closed")
        finally:
            self._abandon_trace()
            self.session.close()

    def __enter__(self) -> SumoSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceSource:
    """Replays a recorded trace with the same clock, events and member states as the live run.

    The whole file is validated when the source is opened (a bad trace is refused before
    anything runs), then streamed while replaying, so long traces need little memory.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._meta = read_header(self.path)
        self._end_record: dict[str, Any] | None = None
        last_time = None
        for _, rec in iter_records(self.path):
            last_time = rec["time"]
            if rec["type"] == "end":
                self._end_record = rec
        clock = self._meta.get("clock") or {}
        self._begin = float(clock.get("begin", 0.0))
        step = clock.get("step_length")
        self._step = float(step) if isinstance(step, (int, float)) and step > 0 else None
        if self._end_record is not None:
            self._end_time: float | None = float(self._end_record["time"])
        else:
            self._end_time = float(last_time) if last_time is not None else self._begin
        cov = self._meta.get("coverage") or {}
        self._view = _MemberView(cov.get("membership") == "per_rsu")
        self._time = self._begin
        self._records: Iterator[tuple[int, dict[str, Any]]] | None = iter_records(self.path)
        self._pending: tuple[int, dict[str, Any]] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """The trace header's meta."""
        return self._meta

    @property
    def end_record(self) -> dict[str, Any] | None:
        """The trace's end record (status, time, message), or None if the recorder died."""
        return self._end_record

    @property
    def complete(self) -> bool:
        """True if the trace ended with an end record."""
        return self._end_record is not None

    @property
    def time(self) -> float:
        """Replay clock (s), following the recorded run's step grid."""
        return self._time

    @property
    def finished(self) -> bool:
        """True once the replay reached the recorded run's end."""
        return self._end_time is not None and self._time >= self._end_time - _EPS

    def members(self) -> list[MemberState]:
        """Current members as recorded."""
        return self._view.members()

    def _clock(self, until: float) -> float:
        if self._step is not None:
            n = math.floor((until - self._begin) / self._step + _EPS)
            t = self._begin + n * self._step
        else:
            t = until
        if self._end_time is not None:
            t = min(t, self._end_time)
        return max(self._time, t)

    def advance(self, until: float) -> list[MobilityEvent]:
        """Return the recorded events with ``time <= until`` not returned yet."""
        until = _check_until(until)
        if self._records is None:
            raise TraceError(f"trace source {self.path} is closed")
        out: list[MobilityEvent] = []
        while True:
            if self._pending is None:
                self._pending = next(self._records, None)
                if self._pending is None:
                    break
            lineno, rec = self._pending
            if rec["time"] > until + _EPS:
                break
            self._pending = None
            if rec["type"] == "event":
                e = MobilityEvent.from_dict({k: v for k, v in rec.items() if k != "type"})
                self._view.apply([e])
                out.append(e)
            elif rec["type"] == "states":
                self._view.set_states(_parse_states(rec, f"{self.path}:{lineno}"))
        self._time = self._clock(until)
        return out

    def close(self) -> None:
        """Stop replaying."""
        if self._records is not None:
            close = getattr(self._records, "close", None)
            if close is not None:
                close()
            self._records = None

    def __enter__(self) -> TraceSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
