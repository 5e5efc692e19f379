"""Subset sampling and the edit couplings of the F-SOSA family (no torch here).

The sampler decides *which* clients form the aggregated subset; the trainer decides *what* a
member contributes. Keeping them apart lets the couplings be tested with millions of draws.

Two size rules: :class:`FixedSize` (``P`` fixed, the theory of seed 000) and
:class:`FixedRatio` (``P_t = max(1, floor(rho * M(t)))``, the paper's experiments). Every
coupling leaves the subset uniformly distributed over the size-``P_t`` subsets of the current
client set, given that it was uniform before (Definition 1 of seed 000, part (a)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

import numpy as np

from .errors import DuplicateClientError, EmptyPopulationError, UnknownClientError

ClientId = Hashable


def _key(c: ClientId) -> tuple[str, object]:
    return (type(c).__name__, c)


def ordered(clients: Iterable[ClientId]) -> list[ClientId]:
    """Clients in a canonical order (so that draws do not depend on set iteration order)."""
    return sorted(clients, key=_key)


@dataclass(frozen=True)
class FixedSize:
    """Subset size fixed at ``P`` whatever the population (Algorithms 1-4 as analysed)."""

    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"subset size P must be >= 1, got {self.size}")

    def target(self, population: int) -> int:
        if population < self.size:
            raise EmptyPopulationError(
                f"fixed subset size P={self.size} needs at least {self.size} clients, "
                f"the request would leave {population}"
            )
        return self.size


@dataclass(frozen=True)
class FixedRatio:
    """Subset size ``max(1, floor(rho * M))`` for a population of ``M`` (seed 000, VI-A)."""

    rho: float

    def __post_init__(self) -> None:
        if not 0.0 < self.rho <= 1.0:
            raise ValueError(f"sampling ratio rho must be in (0, 1], got {self.rho}")

    def target(self, population: int) -> int:
        if population < 1:
            raise EmptyPopulationError("the request would leave no client")
        return max(1, math.floor(self.rho * population + 1e-12))


SizeRule = FixedSize | FixedRatio


@dataclass(frozen=True)
class SubsetChange:
    """The net change of the subset made by one request: ``left`` = S-, ``joined`` = S+."""

    left: tuple[ClientId, ...] = ()
    joined: tuple[ClientId, ...] = ()

    @property
    def triggered(self) -> bool:
        return bool(self.left or self.joined)


class SubsetSampler:
    """The current client set and the aggregated subset, edited by exact couplings.

    Every public edit validates first and mutates only after all draws succeeded, so a
    rejected request leaves both sets as they were.
    """

    def __init__(self, rule: SizeRule, rng: np.random.Generator) -> None:
        self.rule = rule
        self.rng = rng
        self.clients: set[ClientId] = set()
        self.members: set[ClientId] = set()

    # -- helpers ---------------------------------------------------------------------------
    def _choice(self, pool: Iterable[ClientId], k: int) -> list[ClientId]:
        pool = ordered(pool)
        if k > len(pool):
            raise EmptyPopulationError(f"cannot draw {k} clients from {len(pool)}")
        idx = self.rng.choice(len(pool), size=k, replace=False) if k else []
        return [pool[i] for i in sorted(int(i) for i in idx)]

    def _bernoulli(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def _commit(self, clients: set[ClientId], members: set[ClientId]) -> SubsetChange:
        change = SubsetChange(
            left=tuple(ordered(self.members - members)),
            joined=tuple(ordered(members - self.members)),
        )
        self.clients, self.members = clients, members
        return change

    @staticmethod
    def _check_new(clients: set[ClientId], added: Sequence[ClientId]) -> None:
        if len(set(added)) != len(added):
            raise DuplicateClientError(f"addition lists a client twice: {list(added)!r}")
        for c in added:
            if c in clients:
                raise DuplicateClientError(f"client {c!r} is already in the client set")

    @staticmethod
    def _check_known(clients: set[ClientId], removed: Sequence[ClientId]) -> None:
        if len(set(removed)) != len(removed):
            raise UnknownClientError(f"removal lists a client twice: {list(removed)!r}")
        for c in removed:
            if c not in clients:
                raise UnknownClientError(f"client {c!r} is not in the current client set")

    # -- edits -------------------------------------------------------------------------------
    def initialize(self, clients: Iterable[ClientId]) -> SubsetChange:
        """Algorithm 1, step 1: a uniform subset of the target size of ``clients``."""
        clients = list(clients)
        if not clients:
            raise EmptyPopulationError("cannot fit on an empty client set")
        if len(set(clients)) != len(clients):
            raise DuplicateClientError("the initial client set lists a client twice")
        population = set(clients)
        size = self.rule.target(len(population))
        members = set(self._choice(population, size))
        self.members = set()
        return self._commit(population, members)

    def remove(self, client: ClientId) -> SubsetChange:
        """Departure of ``client`` (Algorithm 2; shrink coupling when ``P_t`` falls)."""
        self._check_known(self.clients, [client])
        clients = self.clients - {client}
        size = self.rule.target(len(clients))
        members = set(self.members)
        old = len(members)
        if size == old:
            if client in members:
                members.discard(client)
                members |= set(self._choice(clients - members, 1))
        elif size == old - 1:
            if client in members:
                members.discard(client)
            else:
                members -= set(self._choice(members, 1))
        else:  # only reachable from a state not produced by this sampler
            raise EmptyPopulationError(f"subset size jumps from {old} to {size} on one departure")
        return self._commit(clients, members)

    def add(self, client: ClientId) -> SubsetChange:
        """Arrival of ``client`` (Algorithm 3; growth coupling when ``P_t`` rises)."""
        self._check_new(self.clients, [client])
        m = len(self.clients)
        clients = self.clients | {client}
        size = self.rule.target(len(clients))
        members = set(self.members)
        old = len(members)
        if size == old:
            if self._bernoulli(old / (m + 1)):
                members -= set(self._choice(members, 1))
                members.add(client)
        elif size == old + 1:
            if self._bernoulli((old + 1) / (m + 1)):
                members.add(client)
            else:
                members |= set(self._choice(self.clients - members, 1))
        else:
            raise EmptyPopulationError(f"subset size jumps from {old} to {size} on one arrival")
        return self._commit(clients, members)

    def batch(self, removed: Sequence[ClientId], added: Sequence[ClientId]) -> SubsetChange:
        """Simultaneous departures and arrivals (Algorithm 4), then resize to ``P_t``.

        Pairing of departures with arrivals is in canonical order, independent of the subset.
        Unmatched arrivals go through the insertion coupling one by one; unmatched departures
        leave together. The subset is then brought to the target size of the new population
        by adding uniform non-members or dropping uniform members; each step maps a uniform
        law to a uniform law, so the result is exact for both size rules.
        """
        removed, added = list(removed), list(added)
        self._check_known(self.clients, removed)
        self._check_new(self.clients, added)
        if set(removed) & set(added):
            raise DuplicateClientError("a client cannot be removed and added in one batch")
        final_clients = (self.clients - set(removed)) | set(added)
        target = self.rule.target(len(final_clients))
        d_sorted, a_sorted = ordered(removed), ordered(added)
        n_pair = min(len(d_sorted), len(a_sorted))
        pair = dict(zip(d_sorted[:n_pair], a_sorted[:n_pair]))
        members = {pair.get(c, c) for c in self.members}
        hat = (self.clients - set(pair)) | set(pair.values())
        size = len(members)
        for c in a_sorted[n_pair:]:
            if self._bernoulli(size / (len(hat) + 1)):
                members -= set(self._choice(members, 1))
                members.add(c)
            hat.add(c)
        members -= set(d_sorted[n_pair:])
        if len(members) < target:
            members |= set(self._choice(final_clients - members, target - len(members)))
        elif len(members) > target:
            members -= set(self._choice(members, len(members) - target))
        return self._commit(final_clients, members)

    def fresh(self, clients: Iterable[ClientId]) -> set[ClientId]:
        """A fresh uniform draw of the target size (what Retrain does), without editing state."""
        clients = set(clients)
        return set(self._choice(clients, self.rule.target(len(clients))))
