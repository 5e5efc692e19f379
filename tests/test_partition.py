"""Tests for fl_core.partition: coverage, sizes, determinism, skew and argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from fl_core.partition import (
    DIRICHLET_MAX_ATTEMPTS,
    PartitionWarning,
    dirichlet_partition,
    dirichlet_split,
    group_partition,
    iid_partition,
)


def _labels(n: int = 4000, classes: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, classes, size=n)


def _assert_exact_cover(parts: list[np.ndarray], n: int) -> None:
    for p in parts:
        assert p.dtype == np.int64
        assert np.all(np.diff(p) > 0), "client indices must be sorted and distinct"
    allidx = np.concatenate(parts)
    assert allidx.shape[0] == n
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))


def _mean_label_entropy(parts: list[np.ndarray], labels: np.ndarray, classes: int) -> float:
    ent = []
    for p in parts:
        q = np.bincount(labels[p], minlength=classes) / len(p)
        q = q[q > 0]
        ent.append(float(-(q * np.log(q)).sum()))
    return float(np.mean(ent))


# ----------------------------------------------------------------------------------- iid


def test_iid_covers_every_index_once_with_balanced_sizes() -> None:
    parts = iid_partition(1003, 10, np.random.default_rng(1))
    _assert_exact_cover(parts, 1003)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_iid_is_deterministic_for_a_seed() -> None:
    a = iid_partition(500, 7, np.random.default_rng(3))
    b = iid_partition(500, 7, np.random.default_rng(3))
    c = iid_partition(500, 7, np.random.default_rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_iid_errors_name_the_argument() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="num_clients"):
        iid_partition(10, 0, rng)
    with pytest.raises(ValueError, match=r"n \(3\) must be at least num_clients \(5\)"):
        iid_partition(3, 5, rng)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        iid_partition(10, 2, 42)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- dirichlet


@pytest.mark.parametrize("alpha", [0.05, 0.5, 100.0])
def test_dirichlet_covers_every_index_once_and_no_client_is_empty(alpha: float) -> None:
    labels = _labels()
    parts = dirichlet_partition(labels, 20, alpha, np.random.default_rng(7))
    assert len(parts) == 20
    _assert_exact_cover(parts, labels.shape[0])
    assert min(len(p) for p in parts) >= 1


def test_dirichlet_is_deterministic_for_a_seed() -> None:
    labels = _labels()
    a = dirichlet_partition(labels, 15, 0.3, np.random.default_rng(11))
    b = dirichlet_partition(labels, 15, 0.3, np.random.default_rng(11))
    c = dirichlet_partition(labels, 15, 0.3, np.random.default_rng(12))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_dirichlet_skew_grows_as_alpha_falls() -> None:
    labels = _labels()
    ent = {
        alpha: _mean_label_entropy(dirichlet_partition(labels, 20, alpha, np.random.default_rng(5)), labels, 10)
        for alpha in (0.1, 1.0, 100.0)
    }
    assert ent[0.1] < ent[1.0] < ent[100.0]
    assert ent[100.0] > 0.95 * np.log(10)  # near-IID at large alpha
    assert ent[0.1] < 0.6 * np.log(10)


@pytest.mark.parametrize("alpha", [0.1, 0.5])
def test_per_client_scheme_covers_once_with_even_sizes_and_richer_subsets(alpha: float) -> None:
    # FedFisher's split (a class mix per client) against the per-class split on the same labels:
    # both cover every index once and skew labels alike, but per-client sizes vary far less and a
    # random half of the clients holds more of the rarest class (the F-SOSA subset's situation).
    labels = _labels(n=20000)
    per_client = dirichlet_partition(labels, 20, alpha, np.random.default_rng(3), scheme="per_client")
    per_class = dirichlet_partition(labels, 20, alpha, np.random.default_rng(3), scheme="per_class")
    _assert_exact_cover(per_client, labels.shape[0])
    cv = {
        k: np.std([len(p) for p in ps]) / np.mean([len(p) for p in ps])
        for k, ps in (("client", per_client), ("class", per_class))
    }
    assert cv["client"] < 0.6 * cv["class"]

    def rarest_share(parts):
        counts = np.array([np.bincount(labels[p], minlength=10) for p in parts])
        rng = np.random.default_rng(0)
        return np.median([(counts[rng.choice(20, 10, replace=False)].sum(0) / counts.sum(0)).min() for _ in range(300)])

    assert rarest_share(per_client) > rarest_share(per_class)
    ent = _mean_label_entropy(per_client, labels, 10)
    assert ent < (0.6 if alpha == 0.1 else 0.9) * np.log(10)  # still label-skewed


def test_dirichlet_min_size_is_met_even_when_draws_fail_and_the_repair_is_reported() -> None:
    # 40 samples, 10 clients, min 4 each: only the exact 4-per-client sizes are allowed, which a
    # Dirichlet draw at alpha 0.01 essentially never gives, so the repair step must do it, and say so.
    labels = _labels(n=40, classes=4, seed=2)
    with pytest.warns(PartitionWarning, match=rf"none of {DIRICHLET_MAX_ATTEMPTS} draws .* sample\(s\) were moved"):
        split = dirichlet_split(labels, 10, 0.01, np.random.default_rng(0), min_size=4)
    _assert_exact_cover(split.parts, 40)
    assert [len(p) for p in split.parts] == [4] * 10
    assert split.attempts == DIRICHLET_MAX_ATTEMPTS and 0 < split.moved <= 40
    assert split.as_dict() == {"attempts": DIRICHLET_MAX_ATTEMPTS, "samples_moved": split.moved}
    with pytest.warns(PartitionWarning):
        parts = dirichlet_partition(_labels(), 50, 0.05, np.random.default_rng(0), min_size=30)
    _assert_exact_cover(parts, 4000)
    assert min(len(p) for p in parts) >= 30


def test_a_split_used_as_drawn_reports_no_repair(recwarn) -> None:
    split = dirichlet_split(_labels(), 20, 0.5, np.random.default_rng(7))
    assert split.moved == 0 and 1 <= split.attempts <= DIRICHLET_MAX_ATTEMPTS
    assert not [w for w in recwarn if issubclass(w.category, PartitionWarning)]
    same = dirichlet_partition(_labels(), 20, 0.5, np.random.default_rng(7))
    assert all(np.array_equal(a, b) for a, b in zip(split.parts, same, strict=True))


def test_dirichlet_handles_sparse_label_values() -> None:
    labels = np.array([3, 3, 61, 61, 61, 7] * 20)
    parts = dirichlet_partition(labels, 4, 1.0, np.random.default_rng(0))
    _assert_exact_cover(parts, labels.shape[0])


def test_dirichlet_errors_name_the_argument() -> None:
    labels, rng = _labels(n=100), np.random.default_rng(0)
    with pytest.raises(ValueError, match="alpha must be a finite number > 0, got 0"):
        dirichlet_partition(labels, 5, 0.0, rng)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(labels, 5, -1.0, rng)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(labels, 5, float("nan"), rng)
    with pytest.raises(ValueError, match="num_clients must be >= 1"):
        dirichlet_partition(labels, 0, 1.0, rng)
    with pytest.raises(ValueError, match="min_size"):
        dirichlet_partition(labels, 5, 1.0, rng, min_size=-1)
    with pytest.raises(ValueError, match=r"num_clients=30 .* min_size=4 .* only 100 labels"):
        dirichlet_partition(labels, 30, 1.0, rng, min_size=4)
    with pytest.raises(ValueError, match="labels must be a 1-D array"):
        dirichlet_partition(labels.reshape(10, 10), 5, 1.0, rng)
    with pytest.raises(ValueError, match="labels must be integers"):
        dirichlet_partition(labels.astype(float), 5, 1.0, rng)
    with pytest.raises(TypeError, match="num_clients must be an integer"):
        dirichlet_partition(labels, 2.5, 1.0, rng)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rng"):
        dirichlet_partition(labels, 5, 1.0, None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- group


def _groups(num_groups: int = 37, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, size=num_groups)
    g = np.repeat(np.arange(num_groups) * 3 + 100, sizes)  # non-contiguous group ids
    return g[rng.permutation(g.shape[0])]


def test_group_partition_never_splits_a_group() -> None:
    groups = _groups()
    parts = group_partition(groups, 8, np.random.default_rng(2))
    _assert_exact_cover(parts, groups.shape[0])
    owner: dict[int, int] = {}
    for k, p in enumerate(parts):
        for g in np.unique(groups[p]):
            assert owner.setdefault(int(g), k) == k, f"group {g} split between clients"
    per_client = [np.unique(groups[p]).shape[0] for p in parts]
    assert sum(per_client) == 37
    assert max(per_client) - min(per_client) <= 1


def test_group_partition_is_deterministic_and_seed_dependent() -> None:
    groups = _groups()
    a = group_partition(groups, 5, np.random.default_rng(9))
    b = group_partition(groups, 5, np.random.default_rng(9))
    c = group_partition(groups, 5, np.random.default_rng(10))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_group_partition_one_group_per_client() -> None:
    groups = _groups(num_groups=6)
    parts = group_partition(groups, 6, np.random.default_rng(0))
    assert sorted(int(np.unique(groups[p])[0]) for p in parts) == sorted(np.unique(groups).tolist())


def test_group_partition_errors() -> None:
    with pytest.raises(ValueError, match=r"6 distinct groups, fewer than num_clients=7"):
        group_partition(_groups(num_groups=6), 7, np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_clients"):
        group_partition(_groups(), 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="groups must be a 1-D array"):
        group_partition(np.zeros((3, 3)), 1, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        group_partition(_groups(), 2, np.random.RandomState(0))  # type: ignore[arg-type]
