"""V2I channel model: what a transfer between a vehicle and its RSU costs in simulated time.

The rate of a transfer at a given distance and share of the channel is :mod:`vmc_sim.radio.link_budget`'s.

Sharing: each RSU has one channel of ``bandwidth_hz`` per direction (``duplex="separate"``, as
with FDD or two dedicated sub-channels) or one channel for both directions (``duplex="shared"``).
The transfers active on a channel share it equally in time (processor sharing, a round-robin
scheduler, :mod:`vmc_sim.radio.medium`): ``share = bandwidth_hz / n`` and the SNR is that of the
full channel, so below the caps two transfers each get exactly half the rate of one alone. A
broadcast occupies one slot. RSUs that share the air (one :class:`vmc_sim.radio.medium.Medium`,
see :mod:`vmc_sim.radio.air`) share it among all their transfers.

Rates follow the vehicles: whenever a transfer starts or ends on a channel, and every
``update_interval`` seconds in between, each active transfer's rate is recomputed from the
vehicle's position at that instant (``position_fn(vehicle)`` returns ``(x, y)``, or ``None``
once the vehicle is gone). Between two recomputations the rate is constant and progress is
integrated exactly (a transfer that ends in between ends at its exact time), so with ``(x, y)``
alone the error of a moving vehicle's transfer time is first order in ``update_interval``. A
``position_fn`` that also returns the velocity, ``(x, y, vx, vy)`` in m/s (SUMO knows it), gets
the rate evaluated at the predicted midpoint of each piece instead, which is second order: much
more accurate at the same ``update_interval``. Coverage is polled at the same instants; an engine
that knows the exact moment a vehicle leaves should call :meth:`RsuChannel.leave` then.

Outage: a receiver whose link is below the lowest MCS (rate 0) makes no progress. A unicast
transfer that stays in outage for ``outage_timeout_s`` fails with reason "outage" (so a link that
cannot carry a transfer ends it in bounded simulated time, whatever the vehicle then does); a
broadcast goes on at the rate of the worst receiver that can still hear it, and a receiver in
outage is dropped from it at once ("outage": it misses the frames sent meanwhile), unless every
receiver is in outage, when the broadcast stalls and fails the same way as a unicast. The stalled
time is airtime: the sender holds its share of the channel while it retries.

Every link (an RSU and a vehicle) has a state at every update, LOS, NLOSv or NLOS
(``link_state_model``, :mod:`vmc_sim.radio.link_states`), and a log-normal shadowing correlated
over the distance the vehicle moves (``exp(-moved / D)``), with the path-loss model's standard
deviation and decorrelation distance ``D`` of that state unless ``shadowing_sigma_db`` and
``shadowing_decorrelation_m`` are given; a change of state draws the shadowing anew, as ns-3 does.
An NLOSv link adds its blocker's loss (drawn once while the same blockage lasts). A link keeps its
state and shadowing across the transfers it carries (they are properties of where the vehicle is),
drawn from the Generators given to :class:`RsuChannel`: ``rng`` (shadowing) and ``state_rng``
(states and blockage).

This module knows nothing about SUMO or the federated core: positions and coverage come in as
callables.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from .flows import Flow, Receiver
from .link_budget import ChannelConfig, CoverageFn, Position, PositionFn, check_direction, is_number, rate_bps
from .link_results import BroadcastResult, TransferResult
from .link_state import LinkState
from .link_states import LINK_STATES, Link, StateMemory, Surroundings, blockage_loss_db
from .medium import Medium
from .path_loss import PATH_LOSS

OBSTACLE_PER_WALL_DB = 9.0  # Sommer et al.'s obstacle model as Veins configures it (mobility.buildings)
OBSTACLE_PER_METRE_DB = 0.4

__all__ = ["BroadcastResult", "LinkMemory", "RsuChannel", "TransferResult"]


@dataclass
class LinkMemory:
    """What one link keeps between updates: where the vehicle was, its state, shadowing and blockage."""

    pos: Position | None = None
    state: LinkState | None = None
    shadow_db: float = 0.0
    blockage_db: float = 0.0
    states: StateMemory = field(default_factory=StateMemory)


class RsuChannel:
    """The radio channel(s) of one RSU, running transfers as simpy processes with processor sharing.

    ``position`` is the RSU's (x, y) in network coordinates (m). ``rng`` draws the links'
    shadowing, ``state_rng`` their states and blockage (both needed only where the channel draws:
    shadowing on, or a link-state model that draws). ``medium`` is the air this RSU shares (a new
    one of its own by default); ``around`` is what the link states see (buildings, other
    vehicles; None: nothing). Every finished transfer or broadcast is appended to :attr:`records`,
    and :attr:`state_time` adds up, per link state, the receiver-seconds links spent in it while
    carrying a transfer.
    """

    def __init__(
        self,
        cfg: ChannelConfig,
        position: Position,
        *,
        rng: np.random.Generator | None = None,
        rsu_id: str = "rsu",
        env: simpy.Environment | None = None,
        medium: Medium | None = None,
        state_rng: np.random.Generator | None = None,
        around: Surroundings | None = None,
    ) -> None:
        if len(position) != 2 or not all(is_number(c) for c in position):
            raise ValueError(f"RSU position must be finite (x, y), got {position!r}")
        self.cfg = cfg
        self.position = (float(position[0]), float(position[1]))
        self.rng = rng
        self.state_rng = state_rng
        self.rsu_id = rsu_id
        self.env = env
        self.medium = medium or Medium(cfg, rsu_id)
        self.around = around
        self.records: list[TransferResult | BroadcastResult] = []
        self.links: dict[Hashable, LinkMemory] = {}
        self.state_time: dict[str, float] = {}
        self._states = LINK_STATES[cfg.link_state_model or "los"]
        self._path_loss = PATH_LOSS[cfg.path_loss_model]

    def distance(self, pos: Position) -> float:
        """Ground distance (m) from the RSU to ``pos``."""
        return math.hypot(pos[0] - self.position[0], pos[1] - self.position[1])

    def active(self, direction: str) -> int:
        """Number of transmissions currently sharing the channel used by ``direction``."""
        check_direction(direction)
        return self.medium.active(direction)

    def transfer(
        self,
        env: simpy.Environment,
        vehicle: Hashable,
        nbytes: int,
        direction: str,
        position_fn: PositionFn,
        coverage_fn: CoverageFn,
        *,
        tag: str | None = None,
    ) -> simpy.Process:
        """Start sending ``nbytes`` to (downlink) or from (uplink) ``vehicle``.

        The returned process's value is a TransferResult; interrupting the process aborts it.
        """
        check_direction(direction)
        self._bind(env)
        n = self._check_nbytes(nbytes)
        return env.process(self._run(env, direction, n, [vehicle], position_fn, coverage_fn, False, tag))

    def broadcast(
        self,
        env: simpy.Environment,
        vehicles: Iterable[Hashable],
        nbytes: int,
        position_fn: PositionFn,
        coverage_fn: CoverageFn,
        *,
        tag: str | None = None,
    ) -> simpy.Process:
        """Send ``nbytes`` once on the downlink to all ``vehicles`` at the worst receiver's rate.

        Receivers that leave are dropped (and reported); the transmission goes on for the rest.
        The process value is a BroadcastResult.
        """
        self._bind(env)
        n = self._check_nbytes(nbytes)
        receivers = list(dict.fromkeys(vehicles))
        return env.process(self._run(env, "downlink", n, receivers, position_fn, coverage_fn, True, tag))

    def leave(self, vehicle: Hashable) -> None:
        """Fail ``vehicle``'s transfers now with "left_coverage" and drop it from broadcasts."""
        self._request_drop(vehicle, "left_coverage")

    def abort(self, vehicle: Hashable) -> None:
        """Cancel ``vehicle``'s transfers now with "aborted" and drop it from broadcasts."""
        self._request_drop(vehicle, "aborted")

    def end_traffic(self) -> None:
        """Fail every transfer now with "traffic_ended": the traffic is over, no vehicle is left."""
        for pool in self.medium.pools.values():
            mine = [f for f in pool.flows if f.channel is self]
            for flow in mine:
                for v in flow.receivers:
                    flow.pending.setdefault(v, "traffic_ended")
            if mine:
                self.medium.wake(pool)

    def update_link(self, rx: Receiver) -> None:
        """Bring ``rx``'s link to the present: its state, shadowing and any blockage loss."""
        assert rx.pos is not None  # set by the flow before any rate is computed
        cfg = self.cfg
        mem = self.links.setdefault(rx.vehicle, LinkMemory())
        moved = None if mem.pos is None else math.hypot(rx.pos[0] - mem.pos[0], rx.pos[1] - mem.pos[1])
        link = Link(self.position, rx.pos, cfg.rsu_height_m, cfg.vehicle_height_m, moved, rx.vehicle)
        draws = self._draws(self.state_rng, "state")
        state, blocker = self._states.decide(link, mem.states, self.around, cfg, draws)
        if state is LinkState.NLOSV:
            if mem.state is not LinkState.NLOSV:  # a new blockage: its loss is drawn once, kept while it lasts
                assert blocker is not None  # an NLOSv state names its blocker's height
                d3d = math.hypot(link.d2d, cfg.rsu_height_m - cfg.vehicle_height_m)
                mem.blockage_db = blockage_loss_db(blocker, d3d, cfg, draws)
        else:
            mem.blockage_db = 0.0
        sigma = cfg.shadowing_sigma_db
        if sigma is None:
            sigma = self._path_loss.shadowing_db.get(state, 0.0)
        if sigma <= 0:
            mem.shadow_db = 0.0
        elif mem.pos is None or state is not mem.state:
            mem.shadow_db = float(self._draws(self.rng, "shadowing").normal(0.0, sigma))
        elif moved:
            d = cfg.shadowing_decorrelation_m or self._path_loss.decorrelation_m.get(state, 10.0)
            r = math.exp(-moved / d)
            rng = self._draws(self.rng, "shadowing")
            mem.shadow_db = r * mem.shadow_db + math.sqrt(1.0 - r * r) * float(rng.normal(0.0, sigma))
        obstacle = 0.0
        if state is LinkState.NLOS and cfg.building_loss == "obstacle" and self.around and self.around.buildings:
            crossing = self.around.buildings.crossing(self.position[0], self.position[1], rx.pos[0], rx.pos[1])
            obstacle = OBSTACLE_PER_WALL_DB * crossing.walls + OBSTACLE_PER_METRE_DB * crossing.inside_m
        mem.pos, mem.state = rx.pos, state
        rx.extra_db, rx.state = mem.shadow_db + mem.blockage_db + obstacle, state

    def rx_rate(self, flow: Flow, rx: Receiver, share: float, ahead: float) -> float:
        """The rate of ``rx`` holding ``share`` Hz, ``ahead`` seconds into the coming piece."""
        assert rx.pos is not None  # set by the flow before any rate is computed
        x, y = rx.pos
        if rx.vel is not None and ahead > 0:
            x, y = x + rx.vel[0] * ahead, y + rx.vel[1] * ahead
        state = rx.state or LinkState.LOS
        if state is LinkState.NLOS and self.cfg.building_loss == "obstacle":
            state = LinkState.LOS  # the obstacle model prices a building as LOS loss plus its walls and depth
        return rate_bps(self.distance((x, y)), share, flow.direction, self.cfg, rx.extra_db, state)

    def _draws(self, rng: np.random.Generator | None, what: str) -> Any:
        """``rng``, or, when none was given, a stand-in that refuses the first draw naming what needed it."""
        return rng if rng is not None else _NoDraws(self.rsu_id, what, self.cfg)

    def _bind(self, env: simpy.Environment) -> None:
        if self.env is None:
            self.env = env
        elif self.env is not env:
            raise ValueError(f"RSU channel {self.rsu_id!r} is already bound to another simpy environment")

    @staticmethod
    def _check_nbytes(nbytes: int) -> int:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative integer, got {nbytes!r}")
        return int(nbytes)

    def _request_drop(self, vehicle: Hashable, reason: str) -> None:
        for pool in self.medium.pools.values():
            hit = False
            for flow in pool.flows:
                if flow.channel is self and vehicle in flow.receivers:
                    flow.pending.setdefault(vehicle, reason)
                    hit = True
            if hit:
                self.medium.wake(pool)

    def _run(
        self,
        env: simpy.Environment,
        direction: str,
        nbytes: int,
        receivers: list[Hashable],
        position_fn: PositionFn,
        coverage_fn: CoverageFn,
        broadcast: bool,
        tag: str | None,
    ) -> Generator[simpy.Event, Any, TransferResult | BroadcastResult]:
        flow = Flow(self, env, direction, nbytes, receivers, position_fn, coverage_fn, broadcast, tag)
        for v in list(flow.receivers):
            if not flow.covered(flow.receivers[v]):
                flow.drop(v, "left_coverage", env.now)
        if not flow.receivers or nbytes == 0:
            flow.complete(env.now)
        else:
            self.medium.add(env, flow)
        while True:
            try:
                result = yield flow.done
                return result
            except simpy.Interrupt:
                for v in flow.receivers:
                    flow.pending.setdefault(v, "aborted")
                self.medium.wake(self.medium.pools.get(self.medium.pool_key(direction)))


class _NoDraws:
    """The Generator of a channel that was given none: any draw is refused, naming what needed it."""

    def __init__(self, rsu_id: str, what: str, cfg: ChannelConfig) -> None:
        setting = f"link_state_model {cfg.link_state_model!r}" if what == "state" else "shadowing"
        self.message = f"RSU channel {rsu_id!r} draws its links' {what} ({setting}) but was given no numpy Generator"

    def __getattr__(self, name: str) -> Any:
        raise ValueError(self.message)
