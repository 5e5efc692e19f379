"""From SUMO steps to join/leave events.

Efficiency: each RSU gets an invisible POI with a *context subscription* for vehicle position and
speed within its radius, so SUMO itself (with its spatial index of lanes) returns the vehicles
near each RSU after every step; nothing queries every vehicle. The returned positions are
checked again against the exact radius (SUMO's context search is lane based), which makes the
result independent of how SUMO collects candidates.

Membership (``CoverageConfig.membership``):

* ``"union"`` (default): all RSUs form one micro-cloud. A vehicle is a member while it is covered
  by at least one RSU; a vehicle covered by two RSUs counts once. Its *join* carries the RSU it
  first entered (the nearest one if it entered several in the same step); moving from one RSU's
  coverage into another's without a gap is a silent hand-over; its *leave* carries the RSU it
  was last attached to.
* ``"per_rsu"``: every RSU is its own micro-cloud; a vehicle may be a member of several and gets
  a join/leave pair per RSU.

V2V extension (``v2v_range``): a vehicle also belongs to an RSU while a chain of at most
``v2v_max_hops`` vehicle-to-vehicle links, each no longer than ``v2v_range`` m, connects it to a
vehicle directly covered by that RSU. Any such vehicle lies within ``radius + v2v_max_hops *
v2v_range`` of the RSU, so the context subscription is enlarged to that distance and the chains
are found by a breadth-first search over neighbour pairs from a KD-tree (scipy ``cKDTree``) of the
vehicles in that enlarged context: O(n log n) per RSU and step in the vehicles near the RSU.

A vehicle that arrives at its destination or starts a teleport simply disappears from every
context, so a covered vehicle that leaves the network produces a *leave* at that step. Leaves
carry the last position and speed seen while the vehicle was a member. Within one step, events
are ordered leaves first, then joins, each by vehicle id and RSU id, so the order never depends
on the backend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from mobility.events import MobilityEvent
from mobility.rsu import Rsu
from mobility.sumo import VehicleState

MEMBERSHIPS = ("union", "per_rsu")
_POI_PREFIX = "vmc-rsu:"


@dataclass
class CoverageConfig:
    """Coverage semantics (filled from the scenario YAML).

    ``precision`` is the number of decimals kept for positions (m) and speeds (m/s) in events and
    state samples. ``state_interval`` is how often (simulated seconds) the members' positions are
    sampled for :meth:`mobility.source.MobilitySource.members` and recorded in traces; ``None``
    keeps only the positions carried by the events.
    """

    membership: str = field(default="union", metadata={"doc": "union: a vehicle in any RSU's range is covered"})
    v2v_range: float | None = field(default=None, metadata={"doc": "metres of V2V relaying (null: none)"})
    v2v_max_hops: int = field(default=3, metadata={"doc": "V2V hops"})
    precision: int = field(default=3, metadata={"doc": "decimals kept for positions and speeds"})
    state_interval: float | None = field(
        default=1.0, metadata={"doc": "simulated seconds between recorded member positions"}
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.membership not in MEMBERSHIPS:
            raise ValueError(f"coverage.membership must be one of {MEMBERSHIPS}, got {self.membership!r}")
        if self.v2v_range is not None and (
            isinstance(self.v2v_range, bool)
            or not isinstance(self.v2v_range, (int, float))
            or not math.isfinite(self.v2v_range)
            or self.v2v_range <= 0
        ):
            raise ValueError(f"coverage.v2v_range must be a positive number of metres or null, got {self.v2v_range!r}")
        if isinstance(self.v2v_max_hops, bool) or not isinstance(self.v2v_max_hops, int) or self.v2v_max_hops < 1:
            raise ValueError(f"coverage.v2v_max_hops must be a positive integer, got {self.v2v_max_hops!r}")
        if self.state_interval is not None and (
            isinstance(self.state_interval, bool)
            or not isinstance(self.state_interval, (int, float))
            or not math.isfinite(self.state_interval)
            or self.state_interval <= 0
        ):
            raise ValueError(
                f"coverage.state_interval must be a positive number of seconds or null, got {self.state_interval!r}"
            )
        if isinstance(self.precision, bool) or not isinstance(self.precision, int) or not 0 <= self.precision <= 9:
            raise ValueError(f"coverage.precision must be an integer in [0, 9], got {self.precision!r}")

    def context_radius(self, rsu: Rsu) -> float:
        """Distance SUMO must report around an RSU: its radius, enlarged for V2V chains."""
        extra = self.v2v_range * self.v2v_max_hops if self.v2v_range else 0.0
        return rsu.radius + extra

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (trace headers, manifests)."""
        return asdict(self)


@dataclass(frozen=True)
class MemberState:
    """A current member: the RSU it is attached to and its last sampled state."""

    vehicle: str
    rsu: str
    x: float
    y: float
    speed: float


class ContextProvider(Protocol):
    """What the tracker needs from a SUMO session (satisfied by :class:`mobility.sumo.SumoSession`)."""

    def add_poi(self, poi_id: str, x: float, y: float) -> None: ...

    def subscribe_context(self, poi_id: str, radius: float) -> None: ...

    def context_states(self, poi_id: str) -> dict[str, VehicleState]: ...


class CoverageTracker:
    """Keeps micro-cloud membership and turns each step's observations into events."""

    def __init__(self, rsus: Sequence[Rsu], config: CoverageConfig | None = None) -> None:
        if not rsus:
            raise ValueError("coverage needs at least one RSU")
        ids = [r.id for r in rsus]
        if len(set(ids)) != len(ids):
            raise ValueError(f"RSU ids must be unique, got {ids}")
        self.rsus = list(rsus)
        self.config = config or CoverageConfig()
        self.config.validate()
        self._by_id = {r.id: r for r in self.rsus}
        self._members: dict[tuple[str, str], tuple[str, VehicleState]] = {}
        self._attached = False

    # -- SUMO side -----------------------------------------------------------------------

    def attach(self, session: ContextProvider) -> None:
        """Create one POI per RSU in SUMO and subscribe its (possibly enlarged) context."""
        for r in self.rsus:
            poi = _POI_PREFIX + r.id
            session.add_poi(poi, r.x, r.y)
            session.subscribe_context(poi, self.config.context_radius(r))
        self._attached = True

    def update(self, time: float, session: ContextProvider) -> list[MobilityEvent]:
        """Read this step's context results from SUMO and return the membership changes."""
        if not self._attached:
            raise RuntimeError("CoverageTracker.attach(session) must be called before update()")
        seen = {r.id: session.context_states(_POI_PREFIX + r.id) for r in self.rsus}
        return self.observe(time, seen)

    # -- pure logic (testable without SUMO) ----------------------------------------------

    def covered(self, seen: Mapping[str, Mapping[str, VehicleState]]) -> dict[str, dict[str, VehicleState]]:
        """Per RSU, the vehicles that belong to it given the vehicles observed near it."""
        out: dict[str, dict[str, VehicleState]] = {}
        for r in self.rsus:
            near = seen.get(r.id, {})
            r2 = r.radius * r.radius
            direct = {v: s for v, s in near.items() if (s[0] - r.x) ** 2 + (s[1] - r.y) ** 2 <= r2}
            if self.config.v2v_range and direct and len(near) > len(direct):
                direct = self._extend_v2v(near, direct)
            out[r.id] = direct
        return out

    def _extend_v2v(self, near: Mapping[str, VehicleState], direct: dict[str, VehicleState]) -> dict[str, VehicleState]:
        import numpy as np
        from scipy.spatial import cKDTree

        ids = sorted(near)
        index = {v: i for i, v in enumerate(ids)}
        pts = np.array([[near[v][0], near[v][1]] for v in ids], dtype=float)
        tree = cKDTree(pts)
        v2v_range = self.config.v2v_range
        assert v2v_range is not None  # only called with a V2V range set
        neighbours = tree.query_ball_point(pts, r=float(v2v_range))
        reached = {index[v] for v in direct}
        frontier = sorted(reached)
        for _ in range(self.config.v2v_max_hops):
            nxt = []
            for i in frontier:
                for j in neighbours[i]:
                    if j not in reached:
                        reached.add(j)
                        nxt.append(j)
            if not nxt:
                break
            frontier = nxt
        return {ids[i]: near[ids[i]] for i in sorted(reached)}

    def observe(self, time: float, seen: Mapping[str, Mapping[str, VehicleState]]) -> list[MobilityEvent]:
        """Update membership from ``seen[rsu_id][vehicle] = (x, y, speed)`` and return the events."""
        covered = self.covered(seen)
        prev = self._members
        new: dict[tuple[str, str], tuple[str, VehicleState]] = {}
        if self.config.membership == "per_rsu":
            for rid, vehicles in covered.items():
                for v, st in vehicles.items():
                    new[(v, rid)] = (rid, st)
        else:
            for r in self.rsus:
                for v, st in covered[r.id].items():
                    key = (v, "")
                    cur = new.get(key)
                    if cur is None:
                        new[key] = (r.id, st)
                        continue
                    old = prev.get(key)
                    if old is not None and old[0] == cur[0]:
                        continue  # still covered by the RSU it is attached to: stays there
                    if old is not None and old[0] == r.id:
                        new[key] = (r.id, st)
                        continue
                    here, there = r.distance(st[0], st[1]), self._by_id[cur[0]].distance(st[0], st[1])
                    if here < there or (here == there and r.id < cur[0]):
                        new[key] = (r.id, st)
        t = round(float(time), 6)
        events = [self._event(t, "leave", key[0], *prev[key]) for key in sorted(prev.keys() - new.keys())]
        events += [self._event(t, "join", key[0], *new[key]) for key in sorted(new.keys() - prev.keys())]
        self._members = new
        return events

    def _event(self, t: float, kind: str, vehicle: str, rsu: str, st: VehicleState) -> MobilityEvent:
        p = self.config.precision
        return MobilityEvent(t, kind, vehicle, rsu, round(st[0], p), round(st[1], p), round(st[2], p))  # type: ignore[arg-type]

    def members(self) -> list[MemberState]:
        """Current members with their states of the last step, sorted by vehicle then RSU."""
        p = self.config.precision
        return [
            MemberState(key[0], rid, round(st[0], p), round(st[1], p), round(st[2], p))
            for key, (rid, st) in sorted(self._members.items())
        ]
