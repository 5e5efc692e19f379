"""V2I channel model: what a transfer between a vehicle and its RSU costs in simulated time.

The rate of a transfer at a given distance and share of the channel is :mod:`vmc_sim.radio.link_budget`'s.

Sharing: each RSU has one channel of ``bandwidth_hz`` per direction (``duplex="separate"``, as
with FDD or two dedicated sub-channels) or one channel for both directions (``duplex="shared"``).
The transfers active on a channel share it equally in time (processor sharing, a round-robin
scheduler): ``share = bandwidth_hz / n`` and the SNR is that of the full channel, so below the
caps two transfers each get exactly half the rate of one alone. A broadcast occupies one slot.

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

Shadowing (off by default) is a log-normal process per link, correlated over the distance the
vehicle moves (``exp(-moved / shadowing_decorrelation_m)``, as in the 3GPP V2X evaluation
methodology, TR 36.885 A.1.4, which uses 3 dB and 25 m on highways), drawn from the numpy
Generator given to :class:`RsuChannel`; it is drawn independently for every transfer.

This module knows nothing about SUMO or the federated core: positions and coverage come in as
callables.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable, Iterable
from typing import Any

import numpy as np
import simpy

from .link_budget import (
    ChannelConfig,
    CoverageFn,
    Position,
    PositionFn,
    check_direction,
    is_number,
    rate_bps,
)
from .link_results import BroadcastResult, TransferResult


class _Receiver:
    __slots__ = ("vehicle", "pos", "vel", "shadow_db", "shadow_pos", "rate", "outage_since")

    def __init__(self, vehicle: Hashable) -> None:
        self.vehicle = vehicle
        self.pos: Position | None = None
        self.vel: Position | None = None
        self.shadow_db: float | None = None
        self.shadow_pos: Position | None = None
        self.rate = 0.0
        self.outage_since: float | None = None  # since when its link carries no rate


class _Flow:
    """One transmission on a channel: a unicast transfer (one receiver) or a broadcast."""

    def __init__(
        self,
        env: simpy.Environment,
        direction: str,
        nbytes: int,
        start: float,
        receivers: list[Hashable],
        position_fn: PositionFn,
        coverage_fn: CoverageFn,
        broadcast: bool,
        tag: str | None,
    ) -> None:
        self.direction = direction
        self.nbytes = nbytes
        self.bits_total = 8.0 * nbytes
        self.bits_done = 0.0
        self.rate = 0.0
        self.start = start
        self.receivers = {v: _Receiver(v) for v in receivers}
        self.finished: dict[Hashable, TransferResult] = {}
        self.pending: dict[Hashable, str] = {}
        self.position_fn = position_fn
        self.coverage_fn = coverage_fn
        self.broadcast = broadcast
        self.tag = tag
        self.done = env.event()


class _Pool:
    """The flows sharing one channel, and the process that advances them."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.flows: list[_Flow] = []
        self.last = 0.0
        self.process: simpy.Process | None = None
        self.wake: simpy.Event | None = None


class RsuChannel:
    """The radio channel(s) of one RSU, running transfers as simpy processes with processor sharing.

    ``position`` is the RSU's (x, y) in network coordinates (m). ``rng`` is needed only when
    ``cfg.shadowing_sigma_db > 0``. Every finished transfer or broadcast is appended to
    :attr:`records`.
    """

    def __init__(
        self,
        cfg: ChannelConfig,
        position: Position,
        *,
        rng: np.random.Generator | None = None,
        rsu_id: str = "rsu",
        env: simpy.Environment | None = None,
    ) -> None:
        if cfg.shadowing_sigma_db > 0 and rng is None:
            raise ValueError("channel.shadowing_sigma_db > 0 needs a numpy Generator (rng) for the channel stream")
        if len(position) != 2 or not all(is_number(c) for c in position):
            raise ValueError(f"RSU position must be finite (x, y), got {position!r}")
        self.cfg = cfg
        self.position = (float(position[0]), float(position[1]))
        self.rng = rng
        self.rsu_id = rsu_id
        self.env = env
        self.records: list[TransferResult | BroadcastResult] = []
        self._pools: dict[str, _Pool] = {}

    def distance(self, pos: Position) -> float:
        """Ground distance (m) from the RSU to ``pos``."""
        return math.hypot(pos[0] - self.position[0], pos[1] - self.position[1])

    def active(self, direction: str) -> int:
        """Number of transmissions currently sharing the channel used by ``direction``."""
        check_direction(direction)
        pool = self._pools.get(self._pool_key(direction))
        return len(pool.flows) if pool else 0

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
        for pool in self._pools.values():
            for flow in pool.flows:
                for v in flow.receivers:
                    flow.pending.setdefault(v, "traffic_ended")
            if pool.flows:
                self._wake(pool)

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

    def _pool_key(self, direction: str) -> str:
        return "shared" if self.cfg.duplex == "shared" else direction

    def _request_drop(self, vehicle: Hashable, reason: str) -> None:
        for pool in self._pools.values():
            hit = False
            for flow in pool.flows:
                if vehicle in flow.receivers:
                    flow.pending.setdefault(vehicle, reason)
                    hit = True
            if hit:
                self._wake(pool)

    def _wake(self, pool: _Pool) -> None:
        if pool.wake is not None and not pool.wake.triggered:
            pool.wake.succeed()

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
        flow = _Flow(env, direction, nbytes, env.now, receivers, position_fn, coverage_fn, broadcast, tag)
        for v in list(flow.receivers):
            if not self._covered(flow, flow.receivers[v]):
                self._drop(flow, v, "left_coverage", env.now)
        if not flow.receivers or nbytes == 0:
            self._complete(flow, env.now)
        else:
            pool = self._pools.setdefault(self._pool_key(direction), _Pool(self._pool_key(direction)))
            if pool.process is None or not pool.process.is_alive:
                pool.last = env.now
                pool.flows.append(flow)
                pool.process = env.process(self._serve(env, pool))
            else:
                pool.flows.append(flow)
                self._wake(pool)
        while True:
            try:
                result = yield flow.done
                return result
            except simpy.Interrupt:
                for v in flow.receivers:
                    flow.pending.setdefault(v, "aborted")
                serving = self._pools.get(self._pool_key(direction))
                if serving is not None:
                    self._wake(serving)

    def _covered(self, flow: _Flow, rx: _Receiver) -> bool:
        pos = flow.position_fn(rx.vehicle)
        if pos is None or not flow.coverage_fn(rx.vehicle):
            return False
        rx.pos = (float(pos[0]), float(pos[1]))
        rx.vel = (float(pos[2]), float(pos[3])) if len(pos) >= 4 else None
        return True

    def _serve(self, env: simpy.Environment, pool: _Pool) -> Generator[simpy.Event, Any, None]:
        """Advance every flow of ``pool`` between events; exits when the channel is idle."""
        while True:
            self._step(env, pool)
            if not pool.flows:
                pool.wake = None
                return
            pool.wake = env.event()
            yield env.timeout(self._horizon(pool)) | pool.wake

    def _step(self, env: simpy.Environment, pool: _Pool) -> None:
        now = env.now
        dt = now - pool.last
        if dt > 0:
            for f in pool.flows:
                f.bits_done = min(f.bits_total, f.bits_done + f.rate * dt)
        pool.last = now
        for f in list(pool.flows):
            left = f.bits_total - f.bits_done
            if left <= 1e-9 * f.bits_total + 1e-6 or (f.rate > 0 and now + left / f.rate <= now):
                f.bits_done = f.bits_total
                self._complete(f, now)
                pool.flows.remove(f)
        for f in list(pool.flows):
            for v in list(f.receivers):
                reason = f.pending.pop(v, None)
                if reason is None and not self._covered(f, f.receivers[v]):
                    reason = "left_coverage"
                if reason is not None:
                    self._drop(f, v, reason, now)
            f.pending.clear()
            if not f.receivers:
                self._complete(f, now)
                pool.flows.remove(f)
        while pool.flows:  # a flow that ends in outage frees its share: the others' rates change
            self._set_rates(pool)
            if not self._drop_outages(pool, now):
                break

    def _drop_outages(self, pool: _Pool, now: float) -> bool:
        """Drop the receivers in outage that must go: a broadcast's at once while another receiver
        hears it, any flow's once its outage has lasted ``outage_timeout_s``. Returns whether a flow
        ended (the channel's shares then change)."""
        ended = False
        timeout = self.cfg.outage_timeout_s
        for f in list(pool.flows):
            heard = f.rate > 0
            for v, rx in list(f.receivers.items()):
                if rx.outage_since is not None and (heard or now - rx.outage_since >= timeout - 1e-9):
                    self._drop(f, v, "outage", now)
            if not f.receivers:
                self._complete(f, now)
                pool.flows.remove(f)
                ended = True
        return ended

    def _horizon(self, pool: _Pool) -> float:
        """Time to the next recomputation: the update interval, or the first finish or outage
        timeout if sooner."""
        delay = self.cfg.update_interval
        for f in pool.flows:
            if f.rate > 0:
                delay = min(delay, (f.bits_total - f.bits_done) / f.rate)
            else:
                since = min(pool.last if rx.outage_since is None else rx.outage_since for rx in f.receivers.values())
                delay = min(delay, since + self.cfg.outage_timeout_s - pool.last)
        return max(delay, 0.0)

    def _set_rates(self, pool: _Pool) -> None:
        """Rates of all flows for the coming piece (constant until the next recomputation).

        Receivers whose position came with a velocity are evaluated where they will be halfway
        through the piece (midpoint rule); the piece length depends on the rates, so this is
        refined twice. Without a velocity the rate is the one at the current position.
        """
        share = self.cfg.bandwidth_hz / len(pool.flows)
        shadows = {id(rx): self._shadow(rx) for f in pool.flows for rx in f.receivers.values()}

        def assign(ahead: float) -> None:
            for f in pool.flows:
                for rx in f.receivers.values():
                    rx.rate = self._rx_rate(f, rx, share, shadows[id(rx)], ahead)
                f.rate = min((rx.rate for rx in f.receivers.values() if rx.rate > 0), default=0.0)

        assign(0.0)
        if any(rx.vel is not None for f in pool.flows for rx in f.receivers.values()):
            for _ in range(2):
                assign(self._horizon(pool) / 2.0)
        now = pool.last
        for f in pool.flows:
            for rx in f.receivers.values():
                if rx.rate > 0:
                    rx.outage_since = None
                elif rx.outage_since is None:
                    rx.outage_since = now

    def _shadow(self, rx: _Receiver) -> float:
        """Advance the receiver's correlated shadowing to its current position (0 when disabled)."""
        sigma = self.cfg.shadowing_sigma_db
        if sigma <= 0:
            return 0.0
        rng = self.rng  # __init__ requires one when sigma > 0
        if rx.shadow_db is None:
            assert rng is not None
            rx.shadow_db = float(rng.normal(0.0, sigma))
        else:
            assert rx.pos is not None and rx.shadow_pos is not None  # set by _covered / with shadow_db
            moved = math.hypot(rx.pos[0] - rx.shadow_pos[0], rx.pos[1] - rx.shadow_pos[1])
            if moved > 0:
                assert rng is not None
                r = math.exp(-moved / self.cfg.shadowing_decorrelation_m)
                rx.shadow_db = r * rx.shadow_db + math.sqrt(1.0 - r * r) * float(rng.normal(0.0, sigma))
        rx.shadow_pos = rx.pos
        return rx.shadow_db

    def _rx_rate(self, flow: _Flow, rx: _Receiver, share: float, shadow: float, ahead: float) -> float:
        assert rx.pos is not None  # set by _covered before any rate is computed
        x, y = rx.pos
        if rx.vel is not None and ahead > 0:
            x, y = x + rx.vel[0] * ahead, y + rx.vel[1] * ahead
        return rate_bps(self.distance((x, y)), share, flow.direction, self.cfg, shadow)

    def _drop(self, flow: _Flow, vehicle: Hashable, reason: str, now: float) -> None:
        flow.receivers.pop(vehicle)
        flow.finished[vehicle] = self._result(flow, vehicle, False, reason, now)

    def _result(self, flow: _Flow, vehicle: Hashable, ok: bool, reason: str, now: float) -> TransferResult:
        sent = flow.nbytes if ok else min(flow.nbytes, int(flow.bits_done // 8))
        return TransferResult(
            ok=ok,
            bytes_sent=sent,
            start=flow.start,
            end=now,
            reason=reason,
            vehicle=vehicle,
            direction=flow.direction,
            nbytes=flow.nbytes,
            rsu=self.rsu_id,
            tag=flow.tag,
        )

    def _complete(self, flow: _Flow, now: float) -> None:
        """Close ``flow`` at ``now``: receivers still attached got everything (if it all went out)."""
        full = flow.bits_done >= flow.bits_total
        for v in list(flow.receivers):
            flow.finished[v] = self._result(flow, v, full, "done" if full else "aborted", now)
        flow.receivers.clear()
        if flow.broadcast:
            results = flow.finished
            ok = any(r.ok for r in results.values())
            if ok or not results:
                reason = "done"
            elif any(r.reason == "left_coverage" for r in results.values()):
                reason = "left_coverage"
            else:
                reason = "aborted"
            sent = flow.nbytes if full else min(flow.nbytes, int(flow.bits_done // 8))
            out: TransferResult | BroadcastResult = BroadcastResult(
                ok=ok or not results,
                bytes_sent=sent,
                start=flow.start,
                end=now,
                reason=reason,
                receivers=dict(results),
                nbytes=flow.nbytes,
                rsu=self.rsu_id,
                tag=flow.tag,
            )
        else:
            out = next(iter(flow.finished.values()))
        self.records.append(out)
        flow.done.succeed(out)
