"""Round windows on a schedule's simulated clock, and a Flower Grid that follows them.

Round ``r`` (Flower's round ``r + 1``) covers ``[begin + r*S, begin + (r+1)*S)``. A node is
reachable in a round when it is in coverage at the round's start. Its reply arrives its link time
after the round's start: the co-simulation's per-node link time when the schedule carries the
run's radio (``link_s``: the median seconds from a request to its record's completion over the
node's uploads that arrived in ``vmc run``, the run's median for a node that uploaded nothing
there), else the round's end. A node whose upload outlasts its coverage
(it leaves before its reply arrives), or arrives after the round's end, drops out: its reply is
discarded as if it never arrived. :class:`ScheduledGrid` wraps
the real Grid so that any Flower strategy samples from the reachable nodes only and aggregates
the replies that arrive; it records each round (reachable, sampled, dropouts, aggregated, bytes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from .messages import content_bytes
from .replay import Schedule


def coverage(schedule: Schedule) -> dict[str, list[tuple[float, float]]]:
    """Per vehicle its coverage intervals ``[start, end]`` from the schedule's joins and leaves
    (an interval still open at the end of the schedule ends at infinity)."""
    out: dict[str, list[tuple[float, float]]] = {v: [] for v in schedule.vehicles.values()}
    opened: dict[str, float] = {}
    for t, kind, vehicle in schedule.requests:
        if kind == "join":
            opened.setdefault(vehicle, t)
        elif vehicle in opened:
            out[vehicle].append((opened.pop(vehicle), t))
    for vehicle, start in opened.items():
        out[vehicle].append((start, math.inf))
    return out


@dataclass(frozen=True)
class RoundClock:
    """The rounds' windows and who is reachable or drops out in each."""

    begin: float
    round_s: float
    intervals: dict[str, list[tuple[float, float]]]
    link_s: dict[str, float] | None = None  # per node: seconds from the round's start to its reply
    default_link_s: float | None = None  # a node without its own link time (None: the round's end)

    def link(self, vehicle: str) -> float:
        """Seconds from a round's start until ``vehicle``'s reply arrives."""
        if self.link_s is not None and vehicle in self.link_s:
            return self.link_s[vehicle]
        return self.round_s if self.default_link_s is None else self.default_link_s

    def window(self, flower_round: int) -> tuple[float, float]:
        """``[start, end)`` of Flower's round ``flower_round`` (from 1) in simulated seconds."""
        start = self.begin + (flower_round - 1) * self.round_s
        return start, start + self.round_s

    def reachable(self, flower_round: int) -> list[str]:
        """Vehicles in coverage at the round's start."""
        t0, _ = self.window(flower_round)
        return [v for v, spans in self.intervals.items() if any(s <= t0 < e for s, e in spans)]

    def drops_out(self, vehicle: str, flower_round: int) -> bool:
        """Whether ``vehicle``, reachable at the round's start, leaves coverage before its reply
        arrives, or its reply arrives after the round's end."""
        t0, t1 = self.window(flower_round)
        arrives = t0 + self.link(vehicle)
        return arrives > t1 or any(s <= t0 < e < arrives for s, e in self.intervals.get(vehicle, []))


def _charged(sizes: dict[str, int] | None) -> int:
    """Bytes vmc-sim charges for a message's arrays (safetensors), without Flower's own count."""
    return sum(v for k, v in (sizes or {}).items() if k != "flower")


class ScheduledGrid(Grid):
    """The real ``grid`` seen through the schedule: ``get_node_ids`` lists the nodes reachable in
    the current round, replies of dropouts are discarded, replies come back in the order their
    messages were sent (so aggregation sums in a fixed order), and every round is recorded.

    ``nodes`` maps each vehicle to its Flower node id; :meth:`advance` moves to the next round."""

    def __init__(self, grid: Grid, clock: RoundClock, nodes: dict[str, int], schedule_ids: dict[str, int]) -> None:
        self.grid, self.clock, self.nodes, self.schedule_ids = grid, clock, nodes, schedule_ids
        self.vehicles = {n: v for v, n in nodes.items()}
        self.round = 1
        self.rounds: dict[int, dict[str, Any]] = {}
        self._pushed: dict[str, int] = {}

    def record(self) -> dict[str, Any]:
        """The current round's record, created on first use."""
        if self.round not in self.rounds:
            t0, t1 = self.clock.window(self.round)
            reachable = sorted(self.clock.reachable(self.round), key=self.schedule_ids.__getitem__)
            self.rounds[self.round] = {
                "round": self.round,
                "begin": t0,
                "end": t1,
                "reachable": reachable,
                "sampled": [],
                "dropouts": [],
                "aggregated": [],
                "bytes_sent": 0,
                "bytes_received": 0,
                "flower_bytes_sent": 0,
                "flower_bytes_received": 0,
                "messages": [],
            }
        return self.rounds[self.round]

    def advance(self) -> None:
        """Start the next round (its record is made when first used)."""
        self.record()
        self.round += 1

    def set_run(self, run: Run) -> None:
        """Set the run on the real grid."""
        self.grid.set_run(run)

    @property
    def run(self) -> Run:
        """The real grid's run."""
        return self.grid.run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        """A message made by the real grid."""
        return self.grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> list[int]:
        """Flower node ids of the vehicles reachable in the current round, in schedule order."""
        return [self.nodes[v] for v in self.record()["reachable"]]

    def _sent(self, messages: list[Message]) -> None:
        rec = self.record()
        for m in messages:
            vehicle = self.vehicles.get(m.metadata.dst_node_id)
            if vehicle is None or vehicle not in rec["reachable"]:
                raise ValueError(f"node {m.metadata.dst_node_id} is not reachable in round {self.round}")
            sizes = content_bytes(m.content)
            rec["sampled"].append(vehicle)
            rec["bytes_sent"] += _charged(sizes)
            rec["flower_bytes_sent"] += sizes["flower"]
            arrives = self.clock.window(self.round)[0] + self.clock.link(vehicle)
            rec["messages"].append(
                {"vehicle": vehicle, "node_id": self.schedule_ids[vehicle], "type": m.metadata.message_type}
                | {"sent": sizes, "reply": None, "dropped": False, "arrives": arrives}
            )

    def _received(self, replies: Iterable[Message]) -> list[Message]:
        """The replies that arrive: those of dropouts are discarded and recorded."""
        rec = self.record()
        kept = []
        for reply in replies:
            vehicle = self.vehicles[int(reply.metadata.src_node_id)]
            entry = next(m for m in reversed(rec["messages"]) if m["vehicle"] == vehicle)
            if self.clock.drops_out(vehicle, self.round):
                entry["dropped"] = True
                rec["dropouts"].append(vehicle)
                continue
            sizes = content_bytes(reply.content) if reply.has_content() else {"flower": 0}
            entry["reply"] = sizes
            rec["bytes_received"] += _charged(sizes)
            rec["flower_bytes_received"] += sizes["flower"]
            if not reply.has_error():
                rec["aggregated"].append(vehicle)
            kept.append(reply)
        return kept

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Push through the real grid, recording what is sent to whom."""
        batch = list(messages)
        self._sent(batch)
        ids = list(self.grid.push_messages(batch))
        self._pushed.update({i: int(m.metadata.dst_node_id) for i, m in zip(ids, batch, strict=True)})
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Pull through the real grid; replies of dropouts never arrive."""
        return self._received(self.grid.pull_messages(message_ids))

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        """Send through the real grid; the replies that arrive, in the order their messages were sent."""
        batch = list(messages)
        if not batch:
            return []
        self._sent(batch)
        order = {int(m.metadata.dst_node_id): i for i, m in enumerate(batch)}
        replies = sorted(
            self.grid.send_and_receive(batch, timeout=timeout), key=lambda r: order[r.metadata.src_node_id]
        )
        return self._received(replies)
