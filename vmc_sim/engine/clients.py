"""Vehicles as clients: the run's contribution store and the client pool that trains them (which
data shard a vehicle holds is :mod:`vmc_sim.scenario.shards`')."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from fl_core.cache import ContributionCache
from fl_core.clients import ClientPool
from fl_core.experiment import OneShotSetup
from fl_core.fisher import layer_specs
from fl_core.store import ContributionStore
from fl_core.training import LocalTrainer

from ..rundir.directory import RunDir
from ..scenario.schema import Scenario
from ..scenario.store_key import store_fingerprint


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
