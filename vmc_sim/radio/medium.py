"""The air one or more RSUs share: the transmissions active on it share it equally in time
(processor sharing, a round-robin scheduler), whichever RSU each belongs to.

A medium serves one pool of flows per channel direction (``duplex: separate``: the downlink and
the uplink apart; ``shared``: one for both). Between two recomputations every flow's rate is
constant and its progress integrated exactly; the rates are recomputed whenever a flow starts or
ends and every ``update_interval`` seconds, each at its vehicle's position then (or, with a
velocity, at the piece's predicted midpoint), in the link's state then
(:meth:`vmc_sim.radio.channel.RsuChannel.update_link`). A flow whose every receiver is in outage
makes no progress and ends after ``outage_timeout_s``; a broadcast drops a receiver in outage at
once while another still hears it. An RSU alone on its channel has a medium of its own.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from .flows import Flow
from .link_budget import ChannelConfig


class Pool:
    """The flows sharing one direction's channel, and the process that advances them."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.flows: list[Flow] = []
        self.last = 0.0
        self.process: simpy.Process | None = None
        self.wake: simpy.Event | None = None


class Medium:
    """One contention domain: the pools of every RSU that shares this air."""

    def __init__(self, cfg: ChannelConfig, name: str = "") -> None:
        self.cfg, self.name = cfg, name
        self.pools: dict[str, Pool] = {}

    def pool_key(self, direction: str) -> str:
        return "shared" if self.cfg.duplex == "shared" else direction

    def active(self, direction: str) -> int:
        """Transmissions currently sharing the channel used by ``direction``."""
        pool = self.pools.get(self.pool_key(direction))
        return len(pool.flows) if pool else 0

    def add(self, env: simpy.Environment, flow: Flow) -> None:
        """Start serving ``flow``."""
        key = self.pool_key(flow.direction)
        pool = self.pools.setdefault(key, Pool(key))
        pool.flows.append(flow)
        if pool.process is None or not pool.process.is_alive:
            pool.last = env.now
            pool.process = env.process(self._serve(env, pool))
        else:
            self.wake(pool)

    def wake(self, pool: Pool | None) -> None:
        """Have ``pool`` recompute now (a flow joined, or a drop is pending)."""
        if pool is not None and pool.wake is not None and not pool.wake.triggered:
            pool.wake.succeed()

    def _serve(self, env: simpy.Environment, pool: Pool) -> Generator[simpy.Event, Any, None]:
        """Advance every flow of ``pool`` between events; exits when the channel is idle."""
        while True:
            self._step(env, pool)
            if not pool.flows:
                pool.wake = None
                return
            pool.wake = env.event()
            yield env.timeout(self._horizon(pool)) | pool.wake

    def _step(self, env: simpy.Environment, pool: Pool) -> None:
        now = env.now
        dt = now - pool.last
        if dt > 0:
            for f in pool.flows:
                f.bits_done = min(f.bits_total, f.bits_done + f.rate * dt)
                for rx in f.receivers.values():
                    if rx.state is not None:
                        f.channel.state_time[rx.state.value] = f.channel.state_time.get(rx.state.value, 0.0) + dt
        pool.last = now
        for f in list(pool.flows):
            left = f.bits_total - f.bits_done
            if left <= 1e-9 * f.bits_total + 1e-6 or (f.rate > 0 and now + left / f.rate <= now):
                f.bits_done = f.bits_total
                f.complete(now)
                pool.flows.remove(f)
        for f in list(pool.flows):
            for v in list(f.receivers):
                reason = f.pending.pop(v, None)
                if reason is None and not f.covered(f.receivers[v]):
                    reason = "left_coverage"
                if reason is not None:
                    f.drop(v, reason, now)
            f.pending.clear()
            if not f.receivers:
                f.complete(now)
                pool.flows.remove(f)
        while pool.flows:  # a flow that ends in outage frees its share: the others' rates change
            self._set_rates(pool)
            if not self._drop_outages(pool, now):
                break

    def _drop_outages(self, pool: Pool, now: float) -> bool:
        """Drop the receivers in outage that must go: a broadcast's at once while another receiver
        hears it, any flow's once its outage has lasted ``outage_timeout_s``. Returns whether a flow
        ended (the channel's shares then change)."""
        ended = False
        timeout = self.cfg.outage_timeout_s
        for f in list(pool.flows):
            heard = f.rate > 0
            for v, rx in list(f.receivers.items()):
                if rx.outage_since is not None and (heard or now - rx.outage_since >= timeout - 1e-9):
                    f.drop(v, "outage", now)
            if not f.receivers:
                f.complete(now)
                pool.flows.remove(f)
                ended = True
        return ended

    def _horizon(self, pool: Pool) -> float:
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

    def _set_rates(self, pool: Pool) -> None:
        """Rates of all flows for the coming piece (constant until the next recomputation).

        Each link is updated once (its state, shadowing and blockage at the current position);
        receivers whose position came with a velocity are evaluated where they will be halfway
        through the piece (midpoint rule); the piece length depends on the rates, so this is
        refined twice. Without a velocity the rate is the one at the current position.
        """
        share = self.cfg.bandwidth_hz / len(pool.flows)
        for f in pool.flows:
            for rx in f.receivers.values():
                f.channel.update_link(rx)

        def assign(ahead: float) -> None:
            for f in pool.flows:
                for rx in f.receivers.values():
                    rx.rate = f.channel.rx_rate(f, rx, share, ahead)
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
