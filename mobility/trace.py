"""Mobility traces: every join/leave event of a run, as JSON lines, replayable without SUMO.

Format (one JSON object per line, UTF-8, each line ends with a newline):

* line 1, ``{"type": "header", "format": "vmc-sim-mobility-trace", "version": 1, "meta": {...}}``;
  ``meta`` holds what produced the trace: network and demand description and hashes, RSUs,
  coverage settings, SUMO configuration and seed, and the clock (``begin``, ``step_length``).
* ``{"type": "event", "time", "kind", "vehicle", "rsu", "x", "y", "speed"}``, one per event.
* ``{"type": "states", "time": t, "members": [[vehicle, rsu, x, y, speed], ...]}``: optional
  samples of the members' positions (see ``CoverageConfig.state_interval``).
* last, ``{"type": "end", "time": t, "status": "finished" | "closed" | "error", "message": ...}``.

Records are in non-decreasing time order. The writer flushes after every batch, so a crash of
SUMO or of the whole process loses nothing already handed out; a trace without an ``end`` line
(the process itself died) is still readable (``Trace.complete`` is False). A last line without
its newline means the file was cut while being written, and is reported as such.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobility.coverage import MemberState
from mobility.errors import TraceError
from mobility.events import MobilityEvent

TRACE_FORMAT = "vmc-sim-mobility-trace"
TRACE_VERSION = 1
END_STATUSES = ("finished", "closed", "error")
_RECORD_TYPES = ("event", "states", "end")


class TraceWriter:
    """Appends records to a trace file; the header is written (and flushed) on construction."""

    def __init__(
        self, path: str | os.PathLike[str], meta: dict[str, Any], *, overwrite: bool = False, fsync: bool = False
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._f = open(self.path, "w" if overwrite else "x", encoding="utf-8", newline="\n")  # noqa: SIM115  the writer owns it: close() closes it
        except FileExistsError:
            raise FileExistsError(
                f"trace file {self.path} already exists (pass overwrite=True to replace it)"
            ) from None
        self._fsync = fsync
        self._last_time = -math.inf
        self._closed = False
        self._write({"type": "header", "format": TRACE_FORMAT, "version": TRACE_VERSION, "meta": meta})
        self.flush()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _write(self, record: dict[str, Any]) -> None:
        if self._closed:
            raise TraceError(f"trace {self.path} is already closed")
        self._f.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")

    def _check_time(self, time: float) -> None:
        if time < self._last_time:
            raise TraceError(f"trace {self.path}: record at time {time} after one at {self._last_time}")
        self._last_time = time

    def write_events(self, events: Sequence[MobilityEvent]) -> None:
        """Append events (not flushed: call :meth:`flush` once per batch)."""
        for e in events:
            self._check_time(e.time)
            self._write({"type": "event", **e.to_dict()})

    def write_states(self, time: float, members: Sequence[MemberState]) -> None:
        """Append one sample of the members' states."""
        self._check_time(float(time))
        self._write(
            {"type": "states", "time": float(time), "members": [[m.vehicle, m.rsu, m.x, m.y, m.speed] for m in members]}
        )

    def flush(self) -> None:
        """Push everything written so far to the OS (and to disk with ``fsync=True``)."""
        if self._closed:
            return
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())

    def close(
        self,
        status: str = "closed",
        time: float | None = None,
        message: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Write the end record and close the file (idempotent)."""
        if self._closed:
            return
        if status not in END_STATUSES:
            raise ValueError(f"trace end status must be one of {END_STATUSES}, got {status!r}")
        t = float(time) if time is not None else (self._last_time if math.isfinite(self._last_time) else 0.0)
        self._check_time(t)
        record: dict[str, Any] = {"type": "end", "time": t, "status": status, "message": message}
        if extra:
            record.update({k: v for k, v in extra.items() if k not in record})
        self._write(record)
        self.flush()
        self._f.close()
        self._closed = True

    def abandon(self) -> None:
        """Close the file without an end record (for a writer that must not claim an ending)."""
        if not self._closed:
            self.flush()
            self._f.close()
            self._closed = True


@dataclass
class Trace:
    """A trace read into memory (states samples are skipped unless asked for)."""

    path: Path
    meta: dict[str, Any]
    events: list[MobilityEvent]
    end: dict[str, Any] | None
    states: list[tuple[float, list[MemberState]]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True if the trace has its end record (the recording process closed it)."""
        return self.end is not None


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` after the header, validating as it goes.

    Raises TraceError naming the file and line for a truncated line, invalid JSON, an unknown
    record type, a malformed event or states record, a leave of a vehicle that has not joined,
    time going backwards, or records after the end record. The header is validated by :func:`read_header` first.
    """
    p = Path(path)
    read_header(p)
    last_time = -math.inf
    ended_at = 0
    joined: dict[str, int] = {}  # vehicle -> coverage areas it is in (a leave needs a join first)
    with open(p, encoding="utf-8", newline="") as f:
        f.readline()
        lineno = 1
        for line in f:
            lineno += 1
            where = f"{p}:{lineno}"
            if not line.endswith("\n"):
                raise TraceError(f"{where}: line is incomplete (no newline at its end): the trace was truncated")
            if not line.strip():
                raise TraceError(f"{where}: empty line")
            if ended_at:
                raise TraceError(f"{where}: record after the end record of line {ended_at}")
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict) or rec.get("type") not in _RECORD_TYPES:
                got = rec.get("type") if isinstance(rec, dict) else type(rec).__name__
                raise TraceError(f"{where}: unknown record type {got!r} (expected one of {_RECORD_TYPES})")
            t = rec.get("time")
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
                raise TraceError(f"{where}: {rec['type']} record has no valid 'time' (got {t!r})")
            if t < last_time:
                raise TraceError(f"{where}: time {t} goes backwards (previous record at {last_time})")
            last_time = t
            if rec["type"] == "event":
                try:
                    e = MobilityEvent.from_dict({k: v for k, v in rec.items() if k != "type"})
                except ValueError as exc:
                    raise TraceError(f"{where}: bad event: {exc}") from None
                inside = joined.get(e.vehicle, 0) + (1 if e.kind == "join" else -1)
                if inside < 0:
                    raise TraceError(f"{where}: leave of vehicle {e.vehicle!r}, which has not joined")
                joined[e.vehicle] = inside
            elif rec["type"] == "states":
                _parse_states(rec, where)
            else:
                if rec.get("status") not in END_STATUSES:
                    raise TraceError(
                        f"{where}: end record has status {rec.get('status')!r}, expected one of {END_STATUSES}"
                    )
                ended_at = lineno
            yield lineno, rec


def _parse_states(rec: dict[str, Any], where: str) -> list[MemberState]:
    members = rec.get("members")
    if not isinstance(members, list):
        raise TraceError(f"{where}: states record needs a 'members' list")
    out = []
    for i, m in enumerate(members):
        if (
            not isinstance(m, list)
            or len(m) != 5
            or not isinstance(m[0], str)
            or not isinstance(m[1], str)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m[2:])
        ):
            raise TraceError(f"{where}: states member [{i}] must be [vehicle, rsu, x, y, speed], got {m!r}")
        out.append(MemberState(m[0], m[1], float(m[2]), float(m[3]), float(m[4])))
    return out


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Validate the header line and return its ``meta``; TraceError names what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"trace file {p} does not exist")
    with open(p, encoding="utf-8", newline="") as f:
        line = f.readline()
    where = f"{p}:1"
    if not line:
        raise TraceError(f"{where}: the trace is empty (no header line)")
    if not line.endswith("\n"):
        raise TraceError(f"{where}: header line is incomplete (no newline at its end): the trace was truncated")
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: header is not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(rec, dict) or rec.get("type") != "header" or rec.get("format") != TRACE_FORMAT:
        raise TraceError(f"{where}: not a {TRACE_FORMAT} header")
    version = rec.get("version")
    if not isinstance(version, int) or version > TRACE_VERSION or version < 1:
        raise TraceError(f"{where}: unsupported trace version {version!r} (this reader knows 1..{TRACE_VERSION})")
    meta = rec.get("meta")
    if not isinstance(meta, dict):
        raise TraceError(f"{where}: header 'meta' must be an object")
    return meta


def read_trace(path: str | os.PathLike[str], *, with_states: bool = False) -> Trace:
    """Read and validate a whole trace (see :func:`iter_records` for the errors)."""
    p = Path(path)
    meta = read_header(p)
    events: list[MobilityEvent] = []
    states: list[tuple[float, list[MemberState]]] = []
    end = None
    for lineno, rec in iter_records(p):
        kind = rec["type"]
        if kind == "event":
            events.append(MobilityEvent.from_dict({k: v for k, v in rec.items() if k != "type"}))
        elif kind == "states":
            if with_states:
                states.append((float(rec["time"]), _parse_states(rec, f"{p}:{lineno}")))
        else:
            end = rec
    return Trace(path=p, meta=meta, events=events, end=end, states=states)


def write_trace(
    path: str | os.PathLike[str],
    events: Sequence[MobilityEvent],
    meta: dict[str, Any] | None = None,
    *,
    end_time: float | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a complete trace from a list of events (e.g. a published request sequence)."""
    for i in range(1, len(events)):
        if events[i].time < events[i - 1].time:
            raise TraceError(f"write_trace: event [{i}] at time {events[i].time} comes before event [{i - 1}]")
    w = TraceWriter(path, dict(meta or {}), overwrite=overwrite)
    w.write_events(events)
    last = events[-1].time if events else 0.0
    w.close("finished", time=last if end_time is None else end_time)
    return w.path
