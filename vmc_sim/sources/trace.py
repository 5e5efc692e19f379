"""``source: trace``: a trace a run recorded (``mobility.trace``), replayed without SUMO, with
the RSUs it recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mobility.rsu import Rsu
from mobility.source import MobilitySource, TraceSource

from .base import OpenRequest, SourceInputError, SourceKind


class TraceKind(SourceKind):
    name = "trace"
    reads: ClassVar[tuple[str, ...]] = ("trace",)
    replays_trace = True

    def require(self, m: Any) -> None:
        if not m.trace:
            raise ValueError("source 'trace' needs mobility.trace (a trace file)")

    def check(self, m: Any) -> None:
        if not Path(m.trace).is_file():
            raise SourceInputError(f"mobility.trace: file not found: {m.trace}")

    def input_files(self, m: Any) -> list[str]:
        return [m.trace]

    def open(self, m: Any, request: OpenRequest) -> tuple[MobilitySource, list[Rsu]]:
        src = TraceSource(m.trace)
        return src, [Rsu.from_dict(r) for r in src.metadata.get("rsus", [])]
