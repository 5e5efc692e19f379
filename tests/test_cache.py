"""The shared contribution cache: a second run that trains the same clients the same way
trains nothing and gets bit-identical contributions; any change to what a contribution depends
on misses; a damaged entry is never used."""

from __future__ import annotations

import torch

from fl_core.cache import ContributionCache
from fl_core.experiment import OneShotSetup
from fl_core.training import TrainConfig


def _setup(**train) -> OneShotSetup:
    cfg = dict(epochs=1, lr=0.05, batch_size=32, fisher="kfac") | train
    return OneShotSetup(dataset="digits", num_clients=4, alpha=0.5, model="mlp", seed=3, train=TrainConfig(**cfg),
                        validation_samples=0)


def _pool(setup: OneShotSetup, cache: ContributionCache):
    pool = setup.pool()
    pool.cache = cache
    return pool


def _same(a, b) -> bool:
    return torch.equal(a.weights, b.weights) and all(
        torch.equal(t, b.fisher.tensors()[k]) for k, t in a.fisher.tensors().items())


def test_a_second_run_trains_nothing_and_gets_identical_contributions(tmp_path):
    first = _pool(_setup(), ContributionCache(tmp_path))
    trained = [first.train(c) for c in range(4)]
    assert first.trainings == 4 and first.cache.stats.misses == 4
    second = _pool(_setup(), ContributionCache(tmp_path))  # a new process would build the same setup
    again = [second.train(c) for c in range(4)]
    assert second.trainings == 0 and second.cache.stats.hits == 4 and second.cache.stats.hit_rate == 1.0
    assert all(_same(a, b) for a, b in zip(trained, again))
    assert [c.client for c in again] == [0, 1, 2, 3]
    assert again[0].num_samples == trained[0].num_samples


def test_what_a_contribution_depends_on_is_in_its_key(tmp_path):
    cache = ContributionCache(tmp_path)
    base = _setup()
    keys = {cache.key(base.pool().trainer, 0, base.client_data[0])}
    for other in (_setup(lr=0.01), _setup(momentum=0.0), _setup(fisher="diagonal"), _setup(epochs=2)):
        keys.add(cache.key(other.pool().trainer, 0, other.client_data[0]))
    keys.add(cache.key(base.pool().trainer, 1, base.client_data[0]))  # another client's seeds
    keys.add(cache.key(base.pool().trainer, 0, base.client_data[1]))  # another shard
    assert len(keys) == 7
    assert cache.key(_setup(threads=1).pool().trainer, 0, base.client_data[0]) in keys  # threads: speed only


def test_a_damaged_entry_is_retrained_not_used(tmp_path):
    first = _pool(_setup(), ContributionCache(tmp_path))
    original = first.train(0)
    (entry,) = [p for p in tmp_path.rglob("*.safetensors")]
    data = bytearray(entry.read_bytes())
    data[-8:] = b"\x00\x00\x80\x7f" * 2  # two float32 values become +inf
    entry.write_bytes(bytes(data))
    second = _pool(_setup(), ContributionCache(tmp_path))
    again = second.train(0)
    assert second.cache.stats.rejected == 1 and second.trainings == 1
    assert _same(original, again)
    third = _pool(_setup(), ContributionCache(tmp_path))  # the entry was rewritten
    assert _same(original, third.train(0)) and third.trainings == 0
