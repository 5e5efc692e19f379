"""Join/leave events: what the mobility layer hands to the co-simulation.

A *join* is a vehicle entering the coverage of a micro-cloud (a new client that may
contribute); a *leave* is the same vehicle leaving it (a request to withdraw its contribution).
Events are plain frozen dataclasses with a lossless JSON form, so a trace replays bit for bit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

EventKind = Literal["join", "leave"]
EVENT_KINDS: tuple[str, ...] = ("join", "leave")
EVENT_FIELDS: tuple[str, ...] = ("time", "kind", "vehicle", "rsu", "x", "y", "speed")
"""The fields of :class:`MobilityEvent` in order (its JSON form's keys)."""


@dataclass(frozen=True)
class MobilityEvent:
    """One membership change of one vehicle at one RSU.

    ``time`` is simulated time in seconds (the SUMO step at which the change was observed);
    ``x``/``y`` (m, network coordinates) and ``speed`` (m/s) are the vehicle's state at that
    step for a join, and its last state while still a member for a leave (a vehicle that left
    the network has no position any more).
    """

    time: float
    kind: EventKind
    vehicle: str
    rsu: str
    x: float
    y: float
    speed: float

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"MobilityEvent.kind must be one of {EVENT_KINDS}, got {self.kind!r}")
        for name in ("vehicle", "rsu"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"MobilityEvent.{name} must be a non-empty string, got {value!r}")
        for name in ("time", "x", "y", "speed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"MobilityEvent.{name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the fields in a fixed order (the JSON form). Written out rather than
        ``dataclasses.asdict``, which deep-copies every value: a trace writes one per event."""
        return {
            "time": self.time,
            "kind": self.kind,
            "vehicle": self.vehicle,
            "rsu": self.rsu,
            "x": self.x,
            "y": self.y,
            "speed": self.speed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MobilityEvent:
        """Inverse of :meth:`to_dict`; raises ValueError naming a missing or unknown field."""
        if not isinstance(data, dict):
            raise ValueError(f"a MobilityEvent must be a JSON object, got {type(data).__name__}")
        missing = [f for f in EVENT_FIELDS if f not in data]
        if missing:
            raise ValueError(f"MobilityEvent is missing field(s) {missing}")
        unknown = sorted(set(data) - set(EVENT_FIELDS))
        if unknown:
            raise ValueError(f"MobilityEvent has unknown field(s) {unknown}")
        return cls(**{f: data[f] for f in EVENT_FIELDS})

    def to_json(self) -> str:
        """Compact one-line JSON (floats round-trip exactly)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> MobilityEvent:
        """Parse the output of :meth:`to_json`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"MobilityEvent JSON is invalid: {exc}") from exc
        return cls.from_dict(data)


def events_to_json(events: Iterable[MobilityEvent]) -> str:
    """Serialise a list of events as a JSON array."""
    return json.dumps([e.to_dict() for e in events], separators=(",", ":"), allow_nan=False)


def events_from_json(text: str) -> list[MobilityEvent]:
    """Parse a JSON array written by :func:`events_to_json`; errors name the bad index."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"event list JSON is invalid: {exc}") from exc
    if not isinstance(data, list):
        raise ValueError(f"an event list must be a JSON array, got {type(data).__name__}")
    out = []
    for i, item in enumerate(data):
        try:
            out.append(MobilityEvent.from_dict(item))
        except ValueError as exc:
            raise ValueError(f"event [{i}]: {exc}") from exc
    return out
