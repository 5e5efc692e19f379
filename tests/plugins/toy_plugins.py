"""A plug-in from outside the package: a mobility source, a rate model and an editor of its own,
each one definition plus its registration, named by a scenario under ``plugins``
(``tests/test_plugins.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fl_core.editors import EDITORS, EditorKind, RetrainEditor
from mobility.events import MobilityEvent
from mobility.rsu import Rsu
from vmc_sim.radio.rate_models import RATES, RateModel
from vmc_sim.sources.base import OpenRequest, SourceKind
from vmc_sim.sources.registry import SOURCES


class ShuttleSource:
    """Eight vehicles that enter one RSU's coverage a few seconds apart and leave again in turn."""

    def __init__(self) -> None:
        self.time, self.finished, self.metadata = (
            0.0,
            False,
            {"rsus": [{"id": "toy", "x": 0.0, "y": 0.0, "radius": 100.0}]},
        )
        schedule = [(2.0 * i, "join", f"s{i}") for i in range(8)] + [
            (60.0 + 7.0 * i, "leave", f"s{i}") for i in range(4)
        ]
        self._events = sorted(schedule)

    def advance(self, until: float) -> list[MobilityEvent]:
        due = [e for e in self._events if e[0] <= until]
        self._events = self._events[len(due) :]
        self.time = until
        return [MobilityEvent(t, kind, v, "toy", 10.0, 0.0, 5.0) for t, kind, v in due]

    def members(self) -> list:
        return []

    def close(self) -> None:
        self.finished = True


class ShuttleKind(SourceKind):
    name = "shuttle"
    reads: ClassVar[tuple[str, ...]] = ()

    def open(self, m: Any, request: OpenRequest) -> tuple[Any, list[Rsu]]:
        return ShuttleSource(), [Rsu(id="toy", x=0.0, y=0.0, radius=100.0)]


def _flat_rate(snr: float, share_hz: float, direction: str, cfg: Any) -> float:
    """A link that carries 2 Mb/s over the whole channel whatever its SNR."""
    return 2e6 * share_hz / cfg.bandwidth_hz


@dataclass(frozen=True)
class KeepAllOptions:
    """The toy editor's one option, checked by its own class."""

    note: str = "retrain"

    def __post_init__(self) -> None:
        if not self.note:
            raise ValueError("keepall.note must not be empty")


def _keepall(i: Any) -> RetrainEditor:
    return RetrainEditor(i.pool, i.rule, i.rng, i.fisher_sum, i.projection, validator=i.validator)


for registry, name, entry in (
    (SOURCES, "shuttle", ShuttleKind()),
    (RATES, "flat2m", RateModel(_flat_rate)),
    (EDITORS, "keepall", EditorKind(_keepall, KeepAllOptions)),
):
    if name not in registry:
        registry.add(name, entry)
