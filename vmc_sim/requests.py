"""A request the coordinator dispatches to every world: the first fit, or an edit (arrivals and
departures); and why a world may answer one by withdrawing its model."""

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


class WithdrawalCause(str, Enum):
    """Why a model was withdrawn: a ``suspend`` record's ``cause``."""

    COVERAGE = "coverage"  # fewer than coordinator.min_clients vehicles would remain
    NOT_ARRIVED = "not_arrived"  # contributions that never arrived could not be taken out
    POPULATION = "population"  # too few clients for the method (e.g. a fixed subset size)

    @property
    def words(self) -> str:
        """The cause as ``vmc run``'s summary says it."""
        return {
            "coverage": "coverage fell below coordinator.min_clients",
            "not_arrived": "contributions that never arrived could not be taken out",
            "population": "too few clients remained for the method",
        }[self.value]
