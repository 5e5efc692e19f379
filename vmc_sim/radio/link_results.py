"""What a finished transmission on an RSU's channel reports: one transfer (or one receiver of a
broadcast), or a broadcast with each receiver's own result. The engine records them as they are."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass, field
from typing import Any


class _Span:
    """Duration and mean rate of a finished transmission (shared by both result kinds)."""

    start: float
    end: float
    bytes_sent: int

    @property
    def duration(self) -> float:
        """Simulated seconds from start to end (success or failure)."""
        return self.end - self.start

    @property
    def mean_rate_bps(self) -> float:
        """Bits delivered per simulated second (0 for an instantaneous transmission)."""
        return self.bytes_sent * 8.0 / self.duration if self.duration > 0 else 0.0


@dataclass(frozen=True)
class TransferResult(_Span):
    """Outcome of one transfer (or of one receiver of a broadcast): what the engine records."""

    ok: bool
    bytes_sent: int
    start: float
    end: float
    reason: str
    vehicle: Hashable = None
    direction: str = "downlink"
    nbytes: int = 0
    rsu: str = ""
    tag: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the derived duration and mean rate (records)."""
        d = asdict(self)
        d["duration"] = self.duration
        d["mean_rate_bps"] = self.mean_rate_bps
        return d


@dataclass(frozen=True)
class BroadcastResult(_Span):
    """Outcome of one downlink broadcast; ``receivers`` holds each receiver's own result."""

    ok: bool
    bytes_sent: int
    start: float
    end: float
    reason: str
    receivers: dict[Hashable, TransferResult] = field(default_factory=dict)
    nbytes: int = 0
    rsu: str = ""
    tag: str | None = None
    direction: str = "downlink"

    @property
    def delivered(self) -> list[Hashable]:
        """Receivers that got the whole payload."""
        return [v for v, r in self.receivers.items() if r.ok]

    @property
    def dropped(self) -> list[Hashable]:
        """Receivers that left (or were aborted) before the end."""
        return [v for v, r in self.receivers.items() if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with per-receiver results (records)."""
        return {
            "ok": self.ok,
            "bytes_sent": self.bytes_sent,
            "start": self.start,
            "end": self.end,
            "reason": self.reason,
            "nbytes": self.nbytes,
            "rsu": self.rsu,
            "tag": self.tag,
            "direction": self.direction,
            "duration": self.duration,
            "mean_rate_bps": self.mean_rate_bps,
            "receivers": {str(v): r.to_dict() for v, r in self.receivers.items()},
        }
