"""Where every vehicle is, as the mobility process last saw it, and whether it may still talk to its RSU."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from mobility.events import MobilityEvent


class Vehicles:
    """Positions, RSUs and coverage of the vehicles; a departed vehicle may still upload its
    withdrawal for ``grace`` simulated seconds after it left coverage. With ``dwell_limited``
    false (the paper's idealisation) a vehicle that was ever seen stays reachable after it leaves,
    its link held at the position where it left. Once the traffic has ended (:meth:`end_traffic`),
    no vehicle is reachable."""

    def __init__(self, grace: float, dwell_limited: bool = True) -> None:
        self.grace, self.dwell_limited = grace, dwell_limited
        # keyed by vehicle id; looked up by client id (any hashable, a vehicle id in the co-simulation)
        self.state: dict[Hashable, tuple[float, float, float, str]] = {}  # x, y, speed, rsu
        self.covered: set[str] = set()
        self.departed_at: dict[Hashable, float] = {}
        self.joined_at: dict[Hashable, float] = {}
        self.dwells: list[float] = []  # every completed visit's time in coverage, in order of departure
        self.now = 0.0
        self.ended = False

    def apply(self, events: list[MobilityEvent], members: Iterable) -> None:
        """Take one step's join/leave events and the covered vehicles' current positions."""
        for e in events:
            if e.kind == "join":
                self.covered.add(e.vehicle)
                self.departed_at.pop(e.vehicle, None)
                self.joined_at[e.vehicle] = e.time
            else:
                self.covered.discard(e.vehicle)
                self.departed_at[e.vehicle] = e.time
                joined = self.joined_at.pop(e.vehicle, None)
                if joined is not None:
                    self.dwells.append(e.time - joined)
            self.state[e.vehicle] = (e.x, e.y, e.speed, e.rsu)
        for m in members:
            self.state[m.vehicle] = (m.x, m.y, m.speed, m.rsu)

    def rsu_of(self, v: Hashable) -> str | None:
        s = self.state.get(v)
        return s[3] if s else None

    def position(self, v: Hashable) -> tuple[float, float] | None:
        s = self.state.get(v)
        return None if s is None else (s[0], s[1])

    def reachable(self, v: Hashable) -> bool:
        return not self.ended and (v in self.covered or (not self.dwell_limited and v in self.state))

    def reachable_for_withdrawal(self, v: Hashable) -> bool:
        if self.ended:
            return False
        if self.reachable(v):
            return True
        t = self.departed_at.get(v)
        return t is not None and self.now - t <= self.grace

    @property
    def unreachable_reason(self) -> str:
        """Why a vehicle out of reach is: it left coverage, or the traffic is over."""
        return "traffic_ended" if self.ended else "left_coverage"

    def end_traffic(self) -> list[Hashable]:
        """The traffic is over: every vehicle is out of reach from now on (its visit stays open: a
        dwell cut by the end is censored). Returns the vehicles that were still covered."""
        self.ended = True
        return sorted(self.covered, key=str)


class Surroundings:
    """What a radio link sees around it (:class:`vmc_sim.radio.link_states.Surroundings`): the map's
    buildings (None: the scenario has none) and the covered vehicles near a point, each
    ``height_m`` tall (the traffic sources do not say a vehicle's type)."""

    def __init__(self, vehicles: Vehicles, buildings: Any = None, height_m: float = 1.6) -> None:
        self.vehicles, self.buildings, self.height_m = vehicles, buildings, height_m

    def vehicles_near(self, x: float, y: float, radius: float) -> list[tuple[Hashable, float, float, float]]:
        out: list[tuple[Hashable, float, float, float]] = []
        state = self.vehicles.state
        for v in self.vehicles.covered:
            s = state.get(v)
            if s is not None and (s[0] - x) ** 2 + (s[1] - y) ** 2 <= radius * radius:
                out.append((v, s[0], s[1], self.height_m))
        return out
