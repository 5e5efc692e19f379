"""Which data shard a vehicle holds, by the scenario's ``federated.shard_assignment``: a hash of
(run seed, vehicle id), or the order in which vehicles became clients; and the mapping read back
from a recorded run's manifest."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from fl_core.rng import derive_seed


def vehicle_shard(seed: int, vehicle: Hashable, num_shards: int) -> int:
    """The data shard vehicle ``vehicle`` holds: a hash of (run seed, vehicle id), never of arrival order."""
    return derive_seed(seed, "shard", vehicle) % num_shards


class ShardAssignment:
    """Which data shard each vehicle holds, by the scenario's ``federated.shard_assignment``.

    - ``hash``: a hash of (run seed, vehicle id) modulo the shard count (two vehicles may share a
      shard; with more vehicles than shards they must).
    - ``arrival``: the k-th vehicle to become a client (the first fit's clients in id order, then
      each arrival in request order) holds shard k, for as long as the run lasts, so no two clients
      share data; a run with more clients than ``federated.num_clients`` stops with an error naming
      it. The co-simulation assigns at dispatch, before any method sees the request, so the mapping
      is the same for every method and depends only on the request sequence.
    """

    def __init__(self, mode: str, seed: int, num_shards: int, known: dict[Hashable, int] | None = None) -> None:
        self.mode, self.seed, self.num_shards = mode, seed, num_shards
        self.assigned: dict[Hashable, int] = dict(known or {})

    def assign(self, vehicles: Iterable[Hashable]) -> None:
        """Give each new client in ``vehicles`` (in that order) the next free shard (arrival only)."""
        if self.mode != "arrival":
            return
        for v in vehicles:
            if v in self.assigned:
                continue
            if len(self.assigned) >= self.num_shards:
                raise RuntimeError(
                    f"vehicle {v!r} is client number {len(self.assigned) + 1} but federated.num_clients is "
                    f"{self.num_shards} (federated.shard_assignment: arrival gives every client its own shard): "
                    "raise federated.num_clients, lower coordinator.max_requests, or use shard_assignment: hash"
                )
            self.assigned[v] = len(self.assigned)

    def __call__(self, vehicle: Hashable) -> int:
        if self.mode != "arrival":
            return vehicle_shard(self.seed, vehicle, self.num_shards)
        if vehicle not in self.assigned:  # a client no request named (a multi-round strategy's pick)
            self.assign([vehicle])
        return self.assigned[vehicle]

    def manifest(self) -> dict[str, Any] | None:
        """The mapping for the run's manifest (arrival only: hash needs none to be rebuilt)."""
        if self.mode != "arrival":
            return None
        return {"assignment": self.mode, "shards": {str(v): k for v, k in self.assigned.items()}}


def recorded_shards(manifest: dict[str, Any], seed: int, num_shards: int) -> Callable[[Hashable], int]:
    """The shard of each client of a recorded run, as its co-simulation assigned them."""
    recorded = manifest.get("client_shards")
    mode = ((manifest.get("config") or {}).get("federated") or {}).get("shard_assignment", "hash")
    if mode != "arrival":
        return lambda v: vehicle_shard(seed, v, num_shards)
    if not recorded:
        raise ValueError("the manifest's config says shard_assignment: arrival but it records no client_shards")
    shards = recorded["shards"]
    return lambda v: shards[str(v)]
