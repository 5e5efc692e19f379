"""One transmission on a channel while it runs: a unicast transfer (one receiver) or a broadcast,
its receivers' positions and rates, and the results it reports when it ends."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import simpy

from .link_budget import CoverageFn, Position, PositionFn
from .link_results import BroadcastResult, TransferResult
from .link_state import LinkState


class Receiver:
    """One receiver of a flow: where it is (and how it moves), its rate and since when it is in outage."""

    __slots__ = ("vehicle", "pos", "vel", "rate", "outage_since", "extra_db", "state")

    def __init__(self, vehicle: Hashable) -> None:
        self.vehicle = vehicle
        self.pos: Position | None = None
        self.vel: Position | None = None
        self.rate = 0.0
        self.outage_since: float | None = None  # since when its link carries no rate
        self.extra_db = 0.0  # the link's shadowing and blockage loss at its last update
        self.state: LinkState | None = None  # the link's state at its last update


class Owner(Protocol):
    """The RSU channel a flow belongs to (:class:`vmc_sim.radio.channel.RsuChannel`), as the flow and
    its medium use it."""

    rsu_id: str
    records: list[Any]
    state_time: dict[str, float]

    def update_link(self, rx: Receiver) -> None: ...

    def rx_rate(self, flow: Flow, rx: Receiver, share: float, ahead: float) -> float: ...


class Flow:
    """One transmission of ``channel``: its bytes, progress, receivers and the event it ends with."""

    def __init__(
        self,
        channel: Owner,
        env: simpy.Environment,
        direction: str,
        nbytes: int,
        receivers: list[Hashable],
        position_fn: PositionFn,
        coverage_fn: CoverageFn,
        broadcast: bool,
        tag: str | None,
    ) -> None:
        self.channel = channel
        self.direction = direction
        self.nbytes = nbytes
        self.bits_total = 8.0 * nbytes
        self.bits_done = 0.0
        self.rate = 0.0
        self.start = env.now
        self.receivers = {v: Receiver(v) for v in receivers}
        self.finished: dict[Hashable, TransferResult] = {}
        self.pending: dict[Hashable, str] = {}
        self.position_fn = position_fn
        self.coverage_fn = coverage_fn
        self.broadcast = broadcast
        self.tag = tag
        self.done = env.event()

    def covered(self, rx: Receiver) -> bool:
        """Refresh ``rx``'s position; False once its vehicle is gone or out of coverage."""
        pos = self.position_fn(rx.vehicle)
        if pos is None or not self.coverage_fn(rx.vehicle):
            return False
        rx.pos = (float(pos[0]), float(pos[1]))
        rx.vel = (float(pos[2]), float(pos[3])) if len(pos) >= 4 else None
        return True

    def drop(self, vehicle: Hashable, reason: str, now: float) -> None:
        """``vehicle`` leaves the flow at ``now`` with ``reason``."""
        self.receivers.pop(vehicle)
        self.finished[vehicle] = self._result(vehicle, False, reason, now)

    def _result(self, vehicle: Hashable, ok: bool, reason: str, now: float) -> TransferResult:
        sent = self.nbytes if ok else min(self.nbytes, int(self.bits_done // 8))
        return TransferResult(
            ok=ok,
            bytes_sent=sent,
            start=self.start,
            end=now,
            reason=reason,
            vehicle=vehicle,
            direction=self.direction,
            nbytes=self.nbytes,
            rsu=self.channel.rsu_id,
            tag=self.tag,
        )

    def complete(self, now: float) -> None:
        """Close the flow at ``now``: receivers still attached got everything (if it all went out)."""
        full = self.bits_done >= self.bits_total
        for v in list(self.receivers):
            self.finished[v] = self._result(v, full, "done" if full else "aborted", now)
        self.receivers.clear()
        if self.broadcast:
            results = self.finished
            ok = any(r.ok for r in results.values())
            if ok or not results:
                reason = "done"
            elif any(r.reason == "left_coverage" for r in results.values()):
                reason = "left_coverage"
            else:
                reason = "aborted"
            sent = self.nbytes if full else min(self.nbytes, int(self.bits_done // 8))
            out: TransferResult | BroadcastResult = BroadcastResult(
                ok=ok or not results,
                bytes_sent=sent,
                start=self.start,
                end=now,
                reason=reason,
                receivers=dict(results),
                nbytes=self.nbytes,
                rsu=self.channel.rsu_id,
                tag=self.tag,
            )
        else:
            out = next(iter(self.finished.values()))
        self.channel.records.append(out)
        self.done.succeed(out)
