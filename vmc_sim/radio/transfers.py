"""The radio's simulated-time verbs both kinds of world share: broadcast to clients grouped by RSU,
and one transfer (with handover across RSUs and store-and-forward); a job on the shared device is
:func:`vmc_sim.compute.device.device_job`.

Each is a simpy generator that appends what failed to ``timing["failed"]`` and adds what it cost
to ``timing``: ``transfer_s`` (airtime, a failed transfer's up to its failure), ``failed_transfer_s``
(the part of it spent on transfers that failed), ``bytes_sent`` (bytes put on the air, a failed
transfer's partial bytes included; a retry is charged again) and ``bytes_delivered`` (bytes of
transfers that completed), ``queue_s`` and ``compute_sim_s`` (device time).

Handover (``coordinator.handover``): a transfer is served by the RSU the vehicle is attached to;
when the vehicle moves to another RSU of the region, the rest of the transfer continues there, and
what that RSU received is forwarded to the coordinator over the backhaul
(``coordinator.backhaul_bps``, ``coordinator.backhaul_latency_s``). Store-and-forward
(``coordinator.resume_within_s`` > 0): a vehicle that leaves every RSU mid-upload keeps what it has
not sent and resumes when it is back in coverage within that many seconds; a transfer whose link
went into outage (:mod:`vmc_sim.radio.channel`) is tried again, poll after poll, until that many seconds
after it last moved a byte. Without it, both fail the transfer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

import simpy

from .channel import RsuChannel


class VehicleView(Protocol):
    """What the links see of the vehicles (the engine's :class:`vmc_sim.engine.vehicles.Vehicles`):
    where each is, which RSU it is attached to, whether it can still be reached."""

    covered: set
    ended: bool

    def rsu_of(self, v: Hashable) -> str | None: ...

    def position(self, v: Hashable) -> tuple[float, float] | None: ...

    def reachable(self, v: Hashable) -> bool: ...

    @property
    def unreachable_reason(self) -> str: ...


COST_KEYS = ("transfer_s", "failed_transfer_s", "bytes_sent", "bytes_delivered", "handovers", "backhaul_s")


def new_timing() -> dict:
    """An empty cost account of one record."""
    costs = {k: 0 if k.startswith(("bytes", "handovers")) else 0.0 for k in COST_KEYS}
    return {"queue_s": 0.0, "compute_sim_s": 0.0, "wasted_compute_s": 0.0, "solve_sim_s": 0.0, "failed": [], **costs}


@dataclass(frozen=True)
class HandoverConfig:
    """How a transfer survives a change of RSU or a gap in coverage."""

    enabled: bool = True
    backhaul_bps: float = 1e9
    backhaul_latency_s: float = 0.002
    resume_within_s: float = 0.0
    poll_s: float = 1.0


class Links:
    """One world's radio links: its RSU channels, the vehicles, and the handover rule."""

    def __init__(
        self,
        env: simpy.Environment,
        channels: dict[str, RsuChannel],
        vehicles: VehicleView,
        handover: HandoverConfig | None = None,
    ) -> None:
        self.env, self.channels, self.vehicles = env, channels, vehicles
        self.handover = handover or HandoverConfig()

    def broadcast(self, clients: Iterable[Hashable], nbytes: int, timing: dict):
        """Send ``nbytes`` once per RSU to its ``clients`` still in coverage (worst receiver's rate);
        a receiver handed over to another RSU mid-broadcast, or dropped from it in outage, gets the
        rest by unicast.
        Returns the set of clients that received everything."""
        env, vehicles = self.env, self.vehicles
        by_rsu: dict[str, list[Hashable]] = {}
        for c in clients:
            by_rsu.setdefault(vehicles.rsu_of(c) or "", []).append(c)
        got: set[Hashable] = set()
        moved: list[tuple[Hashable, int]] = []
        for rsu, group in sorted(by_rsu.items()):
            reach = [c for c in group if vehicles.reachable(c)]
            for c in sorted(set(group) - set(reach), key=str):  # a set's order varies with the process's hash seed
                timing["failed"].append({"client": c, "tag": "broadcast", "reason": vehicles.unreachable_reason})
            if not reach or rsu not in self.channels:
                continue
            res = yield self.channels[rsu].broadcast(
                env, reach, nbytes, vehicles.position, self._attached(rsu, vehicles.reachable), tag="broadcast"
            )
            timing["transfer_s"] += res.end - res.start
            timing["bytes_sent"] += res.bytes_sent
            if res.ok:
                timing["bytes_delivered"] += nbytes
            else:
                timing["failed_transfer_s"] += res.end - res.start
            for c, r in res.receivers.items():
                if r.ok:
                    got.add(c)
                elif self._handed_over(c, rsu, r.reason, vehicles.reachable):
                    timing["handovers"] += 1
                    moved.append((c, nbytes - r.bytes_sent))
                elif r.reason == "outage" and vehicles.reachable(c):  # missed frames: the rest by unicast
                    moved.append((c, nbytes - r.bytes_sent))
                else:
                    timing["failed"].append({"client": c, "tag": "broadcast", "reason": r.reason})
        for c, rest in moved:
            if (yield from self.transfer(c, rest, timing, "downlink", "broadcast", vehicles.reachable)):
                got.add(c)
        return got

    def upload(
        self,
        client: Hashable,
        nbytes: int,
        timing: dict,
        tag: str = "upload",
        reachable: Callable[[Hashable], bool] | None = None,
    ):
        """Send ``nbytes`` from ``client`` to the coordinator while ``reachable`` holds; returns success."""
        return (yield from self.transfer(client, nbytes, timing, "uplink", tag, reachable or self.vehicles.reachable))

    def transfer(
        self,
        client: Hashable,
        nbytes: int,
        timing: dict,
        direction: str,
        tag: str,
        reachable: Callable[[Hashable], bool],
    ):
        """One transfer through whichever RSUs ``client`` is attached to; returns success. Its
        airtime counts as failed, and its bytes as undelivered, unless the whole of it arrives."""
        env, vehicles, rule = self.env, self.vehicles, self.handover
        rest, home, relayed, stalled, air = nbytes, vehicles.rsu_of(client), 0, 0, 0.0
        reason = vehicles.unreachable_reason
        progress_at = env.now  # store and forward gives up resume_within_s after the last byte moved
        while True:
            rsu = vehicles.rsu_of(client)
            if rsu not in self.channels or not reachable(client):
                if not (yield from self._wait_for_coverage(client, reachable, progress_at)):
                    break
                continue
            res = yield self.channels[rsu].transfer(
                env, client, rest, direction, vehicles.position, self._attached(rsu, reachable), tag=tag
            )
            air += res.end - res.start
            timing["transfer_s"] += res.end - res.start
            timing["bytes_sent"] += res.bytes_sent
            if rsu != home:
                relayed += res.bytes_sent
            if res.ok:
                timing["bytes_delivered"] += nbytes
                if relayed:
                    hop = rule.backhaul_latency_s + 8.0 * relayed / rule.backhaul_bps
                    timing["backhaul_s"] += hop
                    yield env.timeout(hop)
                return True
            rest -= res.bytes_sent
            reason = res.reason
            if res.bytes_sent > 0:
                progress_at = res.end
            stalled = stalled + 1 if res.bytes_sent == 0 and res.end == res.start else 0
            if stalled > 1:  # refused again at once where it stands: no progress is possible
                break
            if self._handed_over(client, rsu, res.reason, reachable):
                timing["handovers"] += 1
                continue
            if not (res.reason in ("left_coverage", "outage") and rule.resume_within_s > 0):
                break  # else store and forward: wait for coverage (or the link) at the top of the loop
            if res.reason == "outage" and not (
                yield from self._wait_for_coverage(client, reachable, progress_at, True)
            ):
                break
        timing["failed"].append({"client": client, "tag": tag, "reason": reason})
        timing["failed_transfer_s"] += air
        return False

    def end_traffic(self) -> None:
        """The traffic is over: every transfer on these links fails now ("traffic_ended")."""
        for channel in self.channels.values():
            channel.end_traffic()

    def _attached(self, rsu: str, reachable: Callable[[Hashable], bool]) -> Callable[[Hashable], bool]:
        """Coverage of one RSU's transfer: the vehicle is reachable and, with handover, still attached to
        ``rsu`` (without handover the transfer stays on ``rsu`` while the vehicle is in the region)."""
        if not self.handover.enabled:
            return reachable
        vehicles = self.vehicles
        return lambda v: reachable(v) and (v not in vehicles.covered or vehicles.rsu_of(v) == rsu)

    def _handed_over(self, client: Hashable, rsu: str, reason: str, reachable: Callable[[Hashable], bool]) -> bool:
        return (
            self.handover.enabled
            and reason == "left_coverage"
            and reachable(client)
            and self.vehicles.rsu_of(client) not in (None, rsu)
            and self.vehicles.rsu_of(client) in self.channels
        )

    def _wait_for_coverage(
        self, client: Hashable, reachable: Callable[[Hashable], bool], progress_at: float, retry: bool = False
    ):
        """Store and forward: poll until ``client`` is reachable again, at most ``resume_within_s`` after
        it left; ``retry`` (a link in outage): until the next poll, at most ``resume_within_s`` after
        the transfer last moved a byte (``progress_at``). Returns whether to try again."""
        rule, env = self.handover, self.env
        deadline = (progress_at if retry else env.now) + rule.resume_within_s
        while rule.resume_within_s > 0 and env.now + rule.poll_s <= deadline + 1e-9 and not self.vehicles.ended:
            yield env.timeout(rule.poll_s)
            if reachable(client) and self.vehicles.rsu_of(client) in self.channels:
                return True
        return False
