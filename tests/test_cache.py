"""The shared contribution cache: a second run that trains the same clients the same way
trains nothing and gets bit-identical contributions; a run that differs only in the Fisher or the
upload trains nothing either (the Fisher is computed at the cached trained weights) and gets the
contributions training afresh gives; any change to what the weights depend on trains again; a
damaged entry is never used."""

from __future__ import annotations

import torch

from fl_core.cache import ContributionCache
from fl_core.experiment import OneShotSetup
from fl_core.training import TrainConfig


def _setup(**train) -> OneShotSetup:
    cfg = dict(epochs=1, lr=0.05, batch_size=32, fisher="kfac") | train
    return OneShotSetup(
        dataset="digits", num_clients=4, alpha=0.5, model="mlp", seed=3, train=TrainConfig(**cfg), validation_samples=0
    )


def _pool(setup: OneShotSetup, cache: ContributionCache):
    pool = setup.pool()
    pool.cache = cache
    return pool


def _same(a, b) -> bool:
    return torch.equal(a.weights, b.weights) and all(
        torch.equal(t, b.fisher.tensors()[k]) for k, t in a.fisher.tensors().items()
    )


def test_a_second_run_trains_nothing_and_gets_identical_contributions(tmp_path):
    first = _pool(_setup(), ContributionCache(tmp_path))
    trained = [first.train(c) for c in range(4)]
    assert first.trainings == 4 and first.cache.stats.misses == 4
    second = _pool(_setup(), ContributionCache(tmp_path))  # a new process would build the same setup
    again = [second.train(c) for c in range(4)]
    assert second.trainings == 0 and second.cache.stats.hits == 4 and second.cache.stats.hit_rate == 1.0
    assert all(_same(a, b) for a, b in zip(trained, again, strict=True))
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
    # the setting enters as the thread count it runs with (the tests' one thread), not as written
    assert cache.key(_setup(threads=1).pool().trainer, 0, base.client_data[0]) in keys


def test_a_contribution_computed_with_other_threads_is_not_served(tmp_path):
    # float sums split over two threads differ in their last bits from one thread's (measured: a
    # CNN client's trained weights 4e-9 apart), so a cache filled by a two-thread run must not
    # serve a one-thread run: what a run records would depend on which run filled the cache
    cache = ContributionCache(tmp_path)
    base = _setup()
    trainer, data = base.pool().trainer, base.client_data[0]
    one = (cache.key(trainer, 0, data), cache.weights_key(trainer, 0, data))
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        more = (cache.key(trainer, 0, data), cache.weights_key(trainer, 0, data))
    finally:
        torch.set_num_threads(threads)
    assert one[0] != more[0] and one[1] != more[1]
    assert (cache.key(trainer, 0, data), cache.weights_key(trainer, 0, data)) == one


def _damage(entry) -> None:
    data = bytearray(entry.read_bytes())
    data[-8:] = b"\x00\x00\x80\x7f" * 2  # two float32 values become +inf
    entry.write_bytes(bytes(data))


def test_a_damaged_entry_is_recomputed_not_used(tmp_path):
    first = _pool(_setup(), ContributionCache(tmp_path))
    original = first.train(0)
    (entry,) = [p for p in tmp_path.rglob("*.safetensors") if "weights" not in p.parts]
    _damage(entry)
    second = _pool(_setup(), ContributionCache(tmp_path))
    again = second.train(0)  # its trained weights still verify: only the Fisher is computed
    assert second.cache.stats.rejected == 1 and second.cache.stats.weights_reused == 1 and second.trainings == 0
    assert _same(original, again)
    third = _pool(_setup(), ContributionCache(tmp_path))  # the entry was rewritten
    assert _same(original, third.train(0)) and third.trainings == 0 and third.cache.stats.hits == 1


def test_damaged_weights_are_trained_again_not_used(tmp_path):
    first = _pool(_setup(), ContributionCache(tmp_path))
    original = first.train(0)
    (weights,) = (tmp_path / "weights").rglob("*.safetensors")
    _damage(weights)
    second = _pool(_setup(fisher="diagonal"), ContributionCache(tmp_path))  # needs the weights, not the entry
    second.train(0)
    assert second.cache.stats.rejected == 1 and second.trainings == 1 and second.cache.stats.weights_reused == 0
    from vmc_sim.rundir.summary import contribution_cache_text

    said = contribution_cache_text({"path": str(tmp_path), **second.cache.stats.as_dict()})
    assert "0 computed at cached trained weights (Fisher only), 1 trained, 1 cached entries did not verify" in said
    third = _pool(_setup(fisher="diagonal", upload_dtype="float16"), ContributionCache(tmp_path))  # rewritten
    third.train(0)
    assert third.trainings == 0 and third.cache.stats.weights_reused == 1
    assert torch.equal(original.weights, _pool(_setup(), ContributionCache(tmp_path)).train(0).weights)


def test_runs_that_differ_only_in_the_fisher_share_the_training(tmp_path):
    """The case study with K-FAC after the diagonal one, a sweep over train.fisher: no client is
    trained twice, and every contribution equals what training afresh gives."""
    cache = ContributionCache(tmp_path)
    [_pool(_setup(fisher="diagonal"), cache).train(c) for c in range(4)]
    for variant in (
        dict(fisher="kfac"),
        dict(fisher="kfac", upload_dtype="float16"),
        dict(fisher="diagonal", fisher_labels="sampled", fisher_batch=7),
    ):
        pool = _pool(_setup(**variant), ContributionCache(tmp_path))
        shared = [pool.train(c) for c in range(4)]
        assert pool.trainings == 0 and pool.cache.stats.weights_reused == 4, variant
        fresh = [_setup(**variant).pool().train(c) for c in range(4)]
        assert all(_same(a, b) for a, b in zip(shared, fresh, strict=True)), variant
    other = _pool(_setup(lr=0.01), ContributionCache(tmp_path))  # training itself differs: trained
    [other.train(c) for c in range(4)]
    assert other.trainings == 4 and other.cache.stats.weights_reused == 0


def test_what_trained_weights_depend_on_is_in_their_key(tmp_path):
    cache = ContributionCache(tmp_path)
    base = _setup()

    def key(setup, client=0, shard=0):
        return cache.weights_key(setup.pool().trainer, client, setup.client_data[shard])

    same = {
        key(base),
        key(_setup(fisher="diagonal")),
        key(_setup(upload_dtype="float16")),
        key(_setup(fisher_batch=5)),
        key(_setup(fisher_labels="sampled")),
        key(_setup(fisher_rank=3)),
    }
    assert same == {key(base)}
    others = {
        key(_setup(lr=0.01)),
        key(_setup(momentum=0.0)),
        key(_setup(epochs=2)),
        key(_setup(batch_size=16)),
        key(_setup(augment="crop_flip")),
        key(base, client=1),
        key(base, shard=1),
    }
    assert len(others) == 7 and key(base) not in others


def test_a_cnn_contribution_from_stored_weights_equals_a_fresh_one():
    """Training leaves an image model channels-last; the Fisher at weights loaded into a fresh
    model must run in that layout too, or its float sums (and the contribution) differ."""
    from fl_core.data import ArrayDataset
    from fl_core.models import TwoLayerCNN
    from fl_core.rng import Streams
    from fl_core.training import LocalTrainer

    g = torch.Generator().manual_seed(0)
    data = ArrayDataset(torch.rand(48, 1, 16, 16, generator=g), torch.randint(0, 3, (48,), generator=g), 3, "tiny")

    def trainer(fisher):
        model_fn = lambda: TwoLayerCNN((1, 16, 16), 3)  # noqa: E731
        torch.manual_seed(1)
        w0 = torch.cat([p.detach().reshape(-1) for p in model_fn().parameters()])
        return LocalTrainer(model_fn, w0, TrainConfig(epochs=2, batch_size=16, fisher=fisher), Streams(5))

    for fisher in ("kfac", "diagonal"):
        fresh = trainer(fisher).contribute("v", data)
        stored = trainer(fisher).contribute("v", data, trainer("diagonal").train("v", data))
        assert torch.equal(fresh.weights, stored.weights)
        assert all(torch.equal(t, stored.fisher.tensors()[k]) for k, t in fresh.fisher.tensors().items()), fisher


def test_an_entry_whose_index_disagrees_with_its_file_is_a_miss_not_an_error(tmp_path):
    """What two processes that write one entry at once used to leave behind (the file of one, the
    index of the other): the run that meets it retrains instead of failing."""
    import json

    first = _pool(_setup(), ContributionCache(tmp_path))
    original = first.train(0)
    (index,) = tmp_path.rglob("index.json")
    entries = json.loads(index.read_text())
    for e in entries.values():
        e["sha256"] = "0" * 64
    index.write_text(json.dumps(entries))
    second = _pool(_setup(), ContributionCache(tmp_path))
    again = second.train(0)
    assert second.cache.stats.rejected == 1 and second.cache.stats.weights_reused == 1 and _same(original, again)
    third = _pool(_setup(), ContributionCache(tmp_path))
    assert _same(original, third.train(0)) and third.trainings == 0


def _train_all(root: str, rounds: int) -> dict:
    cache = ContributionCache(root)
    for _ in range(rounds):
        pool = _pool(_setup(), cache)
        pool.cache = cache
        for c in range(4):
            pool.train(c)
    return cache.stats.as_dict()


def test_processes_that_fill_one_cache_at_once_never_fail_and_leave_verified_entries(tmp_path):
    """Sweep points side by side train the same clients into one cache: each entry is staged in a
    private directory and renamed into place, so no process reads another's half-written files."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(2) as workers:
        stats = workers.starmap(_train_all, [(str(tmp_path), 3)] * 2)
    assert all(s["rejected"] == 0 for s in stats)
    assert sum(s["hits"] + s["misses"] for s in stats) == 24
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".") or ".tmp" in p.name]
    after = _pool(_setup(), ContributionCache(tmp_path))
    [after.train(c) for c in range(4)]
    assert after.trainings == 0 and after.cache.stats.hits == 4


def test_a_client_trained_on_one_machine_is_loaded_on_another_through_a_peer(tmp_path):
    """Two machines with no common disk, each its own cache, one peer (the sweep's keeper): the
    second trains nothing and gets bit-identical contributions; a copy damaged on the peer is a
    miss, trained again, never trusted."""
    from fl_core.cache_peer import CacheKeeper

    keeper = CacheKeeper(tmp_path / "driver")
    first = _pool(_setup(), ContributionCache(tmp_path / "node_a", peer=keeper))
    trained = [first.train(c) for c in range(4)]
    assert first.trainings == 4 and any((tmp_path / "driver").rglob("*.sha256"))
    second = _pool(_setup(), ContributionCache(tmp_path / "node_b", peer=keeper))
    again = [second.train(c) for c in range(4)]
    assert second.trainings == 0 and second.cache.stats.hits == 4
    assert all(_same(a, b) for a, b in zip(trained, again, strict=True))
    for f in (tmp_path / "driver").rglob("*.safetensors"):  # every copy on the peer damaged
        f.write_bytes(f.read_bytes()[:-8] + b"\0" * 8)
    third = _pool(_setup(), ContributionCache(tmp_path / "node_c", peer=keeper))
    fresh = [third.train(c) for c in range(4)]
    assert third.trainings == 4 and third.cache.stats.hits == 0
    assert all(_same(a, b) for a, b in zip(trained, fresh, strict=True))
