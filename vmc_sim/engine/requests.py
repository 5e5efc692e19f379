"""A request the coordinator dispatches to every world: the first fit, or an edit (arrivals and departures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class RequestKind(str, Enum):
    FIT = "fit"
    EDIT = "edit"


@dataclass
class Request:
    index: int
    time: float
    kind: RequestKind
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
