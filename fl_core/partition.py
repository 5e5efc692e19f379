"""Split a dataset's sample indices among federated clients.

Four schemes: IID (uniform random, near-equal sizes), two Dirichlet label skews (the usual non-IID
benchmark splits, see :class:`DirichletScheme`), and by group (FEMNIST writers, never split). Every function takes the numpy
Generator it draws from, so a partition is a deterministic function of the caller's seed, and
returns one sorted int64 index array per client, each sample in exactly one of them.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import Enum

import numpy as np

__all__ = [
    "DIRICHLET_MAX_ATTEMPTS",
    "DirichletScheme",
    "DirichletSplit",
    "PartitionWarning",
    "dirichlet_partition",
    "dirichlet_split",
    "group_partition",
    "iid_partition",
]


class PartitionWarning(UserWarning):
    """A Dirichlet split had to move samples by hand: its label skew is not exactly Dir(alpha)."""


class DirichletScheme(str, Enum):
    """Which Dirichlet is drawn for a label-skew split.

    - ``per_class``: for every class, one Dir(alpha) over the clients splits that class's samples
      (the common benchmark split). Client sizes vary a lot at small alpha (coefficient of variation
      about 0.8 at alpha 0.1, M = 20 on MNIST).
    - ``per_client``: for every client, one Dir(alpha) over the classes gives its class mix (the
      split of FedFisher's code, which seed 000 follows); each class's samples are then shared
      among the clients in proportion to their weights for it. Sizes vary less (CV about 0.3), and
      a random half of the clients holds more of every class.
    """

    PER_CLASS = "per_class"
    PER_CLIENT = "per_client"


# Dirichlet draws tried before the deterministic repair step (see dirichlet_partition).
DIRICHLET_MAX_ATTEMPTS = 100


def _check_rng(rng: object) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), got {type(rng).__name__}"
        )


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def iid_partition(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle ``range(n)`` and cut it into ``num_clients`` parts whose sizes differ by at most 1."""
    n = _check_int(n, "n", 0)
    num_clients = _check_int(num_clients, "num_clients", 1)
    _check_rng(rng)
    if n < num_clients:
        raise ValueError(f"n ({n}) must be at least num_clients ({num_clients}) so that no client is empty")
    perm = rng.permutation(n)
    return [np.sort(part).astype(np.int64) for part in np.array_split(perm, num_clients)]


def _split_counts(n_c: int, p: np.ndarray) -> np.ndarray:
    """``n_c`` samples shared by proportions ``p`` (flooring cumulative sums, so counts add up)."""
    cuts = np.clip(np.floor(np.cumsum(p)[:-1] * n_c), 0, n_c).astype(np.int64)
    return np.diff(np.concatenate(([0], cuts, [n_c])))


def _class_counts(
    class_sizes: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator, scheme: DirichletScheme
) -> np.ndarray:
    """One Dirichlet draw: how many samples of each class (rows) go to each client (columns)."""
    counts = np.empty((class_sizes.shape[0], num_clients), dtype=np.int64)
    if scheme is DirichletScheme.PER_CLIENT:
        mix = rng.dirichlet(np.full(class_sizes.shape[0], alpha), size=num_clients)  # clients x classes
        for c, n_c in enumerate(class_sizes):
            w = mix[:, c]
            total = w.sum()
            counts[c] = _split_counts(n_c, w / total if total > 0 else np.full(num_clients, 1.0 / num_clients))
        return counts
    for c, n_c in enumerate(class_sizes):
        counts[c] = _split_counts(n_c, rng.dirichlet(np.full(num_clients, alpha)))
    return counts


@dataclass(frozen=True)
class DirichletSplit:
    """A Dirichlet split and how it was reached: ``attempts`` draws were made; when none gave every
    client ``min_size`` samples, the repair moved ``moved`` samples from the largest clients to the
    short ones (0 when a draw was used as drawn)."""

    parts: list[np.ndarray]
    attempts: int
    moved: int

    def as_dict(self) -> dict[str, int]:
        return {"attempts": self.attempts, "samples_moved": self.moved}


def dirichlet_partition(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 1,
    scheme: DirichletScheme | str = DirichletScheme.PER_CLASS,
) -> list[np.ndarray]:
    """The parts of :func:`dirichlet_split` (which see); a :class:`PartitionWarning` says when the
    split needed its repair step."""
    return dirichlet_split(labels, num_clients, alpha, rng, min_size, scheme).parts


def dirichlet_split(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 1,
    scheme: DirichletScheme | str = DirichletScheme.PER_CLASS,
) -> DirichletSplit:
    """Label-skew split: for every class, client shares drawn from Dir(alpha, ..., alpha)
    (``scheme="per_class"``), or for every client a class mix drawn from Dir(alpha) with each
    class shared in proportion to the clients' weights for it (``scheme="per_client"``).

    Small ``alpha`` gives each client few classes; large ``alpha`` approaches an IID split.
    Method: the samples of each class are shuffled once; then up to ``DIRICHLET_MAX_ATTEMPTS``
    draws of the per-class proportions are made, and the first draw in which every client gets at
    least ``min_size`` samples is used. If none does, the draw with the smallest total shortfall
    is repaired deterministically: while some client is short, the (first) smallest client
    receives the most recently assigned sample of the (first) largest client, and a
    :class:`PartitionWarning` names how many samples it moved (also in the result's ``moved``).
    Each class's shares are turned into counts by flooring the cumulative proportions, so counts
    sum exactly. Raises ValueError when ``num_clients * min_size`` exceeds the number of samples.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be a 1-D array, got shape {labels.shape}")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers, got dtype {labels.dtype}")
    num_clients = _check_int(num_clients, "num_clients", 1)
    min_size = _check_int(min_size, "min_size", 0)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"alpha must be a number, got {type(alpha).__name__}")
    if not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha}")
    _check_rng(rng)
    scheme = DirichletScheme(scheme)
    n = labels.shape[0]
    if num_clients * min_size > n:
        raise ValueError(
            f"cannot give each of num_clients={num_clients} clients min_size={min_size} samples: only {n} labels"
        )

    classes = np.unique(labels)
    by_class = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    class_sizes = np.array([len(idx) for idx in by_class], dtype=np.int64)

    best: np.ndarray | None = None
    best_shortfall = -1
    for attempts in range(1, DIRICHLET_MAX_ATTEMPTS + 1):  # noqa: B007  the count is reported after the loop
        counts = _class_counts(class_sizes, num_clients, float(alpha), rng, scheme)
        shortfall = int(np.maximum(min_size - counts.sum(axis=0), 0).sum())
        if best is None or shortfall < best_shortfall:
            best, best_shortfall = counts, shortfall
        if shortfall == 0:
            break
    assert best is not None

    clients: list[list[int]] = [[] for _ in range(num_clients)]
    for c, idx in enumerate(by_class):
        bounds = np.concatenate(([0], np.cumsum(best[c])))
        for k in range(num_clients):
            clients[k].extend(idx[bounds[k] : bounds[k + 1]].tolist())

    sizes = np.array([len(c) for c in clients], dtype=np.int64)
    moved = 0
    while sizes.min() < min_size:
        short, donor = int(np.argmin(sizes)), int(np.argmax(sizes))
        clients[short].append(clients[donor].pop())
        sizes[short] += 1
        sizes[donor] -= 1
        moved += 1
    if moved:
        warnings.warn(
            f"Dirichlet split (alpha {alpha}, {num_clients} clients, {scheme.value}): none of "
            f"{attempts} draws gave every client at least {min_size} sample(s); {moved} sample(s) were "
            "moved from the largest clients to the short ones, so the label skew is not exactly "
            "Dir(alpha)",
            PartitionWarning,
            stacklevel=2,
        )
    return DirichletSplit([np.sort(np.asarray(c, dtype=np.int64)) for c in clients], attempts, moved)


def group_partition(groups: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Split by group (e.g. FEMNIST writer), never dividing a group between clients.

    The distinct groups are shuffled with ``rng`` and dealt into ``num_clients`` consecutive runs
    whose numbers of groups differ by at most one; a client gets every sample of its groups.
    Raises ValueError when there are fewer groups than clients.
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(f"groups must be a 1-D array, got shape {groups.shape}")
    num_clients = _check_int(num_clients, "num_clients", 1)
    _check_rng(rng)
    unique, inverse = np.unique(groups, return_inverse=True)
    if unique.shape[0] < num_clients:
        raise ValueError(
            f"groups has {unique.shape[0]} distinct groups, fewer than num_clients={num_clients}; "
            "a group is never split, so every client needs at least one"
        )
    order = rng.permutation(unique.shape[0])
    client_of_group = np.empty(unique.shape[0], dtype=np.int64)
    for k, part in enumerate(np.array_split(order, num_clients)):
        client_of_group[part] = k
    client_of_sample = client_of_group[inverse.reshape(-1)]
    by_client = np.argsort(client_of_sample, kind="stable").astype(np.int64)
    bounds = np.cumsum(np.bincount(client_of_sample, minlength=num_clients))[:-1]
    return np.split(by_client, bounds)
