"""Vehicles as clients: which data shard a vehicle holds, and the client pool that trains them."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Hashable, Iterable

from fl_core.cache import ContributionCache
from fl_core.clients import ClientPool
from fl_core.experiment import OneShotSetup
from fl_core.fisher import layer_specs
from fl_core.rng import derive_seed
from fl_core.store import ContributionStore
from fl_core.training import LocalTrainer, key_settings

from .runs import RunDir
from .scenario import Scenario


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


def store_fingerprint(scenario: Scenario) -> str:
    """The key of a run's contribution store: what a client's contribution depends on (the run seed
    and the federated configuration)."""
    fed = scenario.federated.model_dump(mode="json")
    fed.pop("methods", None)
    fed.pop("projection", None)
    fed["train"] = key_settings(scenario.federated.train.build())  # runs recorded before a setting keep their key
    return hashlib.sha256(json.dumps([scenario.seed, fed], sort_keys=True).encode()).hexdigest()


def run_store(scenario: Scenario, setup: OneShotSetup, run: RunDir) -> ContributionStore:
    """The run directory's contribution store, keyed by what a contribution depends on."""
    return ContributionStore(
        run.path / "contributions", store_fingerprint(scenario), setup.train.fisher, layer_specs(setup.model_fn())
    )


def vehicle_pool(
    scenario: Scenario, setup: OneShotSetup, store: ContributionStore, shard_of: Callable[[Hashable], int]
) -> ClientPool:
    """The run's clients: every vehicle trains on its shard (``shard_of``), contributions are kept in ``store``
    (and the shared contribution cache when ``compute.contribution_cache`` names one); the
    server's held-out validation set selects the merge's damping, as in the one-shot tables."""
    shards = setup.client_data
    trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
    cache_dir = scenario.compute.contribution_cache
    cache = ContributionCache(cache_dir) if cache_dir else None
    return ClientPool(
        trainer,
        lambda v: shards[shard_of(v)],
        store=store,
        cache=cache,
        validator=setup.validator(),
    )
