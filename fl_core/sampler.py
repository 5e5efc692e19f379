"""Subset sampling and the edit couplings of the F-SOSA family (no torch here).

The sampler decides *which* clients form the aggregated subset; the trainer decides *what* a
member contributes. Keeping them apart lets the couplings be tested with many draws.

Two size rules: :class:`FixedSize` (``P`` fixed, the theory of seed 000) and
:class:`FixedRatio` (``P_t = max(1, floor(rho * M(t)))``, the paper's experiments).

Every edit (one departure, one arrival, or a batch of departures ``D`` and arrivals ``A``) is
one coupling, :meth:`SubsetSampler.batch`. It maps a subset ``S`` that is uniform over the
size-``P`` subsets of the client set ``C`` (``|C| = M``) to a subset ``S'`` that is uniform over
the size-``P'`` subsets of ``C' = R | A`` with ``R = C - D`` (``|R| = r``, ``|C'| = M'``,
``P'`` the rule's target for ``M'``): exact (Definition 1 of seed 000, part (a)), and among all
exact couplings it has the least expected number of joining clients ``|S' - S|``, the clients
that must train.

The coupling. Let ``j = |S & R|`` (hypergeometric: ``M`` clients, ``r`` marked, ``P`` drawn) and
let ``l`` be the value of ``|S' & R|`` (hypergeometric: ``M'``, ``r``, ``P'``) that the quantile
(comonotone) coupling of the two laws pairs with ``j``: ``l = G^-1(U)`` with ``U`` uniform on
``[F(j-1), F(j))``, ``F`` and ``G`` the two distribution functions. Then ``S' & R`` is a uniform
``l``-subset of ``S & R`` if ``l <= j``, else ``S & R`` plus a uniform ``(l-j)``-subset of
``R - S``; and ``S' & A`` is a uniform ``(P'-l)``-subset of ``A``.

Exactness. Given ``j``, ``S & R`` is a uniform ``j``-subset of ``R``; a uniform sub- or
super-set of it of size ``l`` drawn as above is a uniform ``l``-subset of ``R``, whatever ``j``
was. ``l`` has its hypergeometric law, so
``Pr(S' = X) = Pr(l = |X & R|) / (C(r, l) C(|A|, P'-l)) = 1 / C(M', P')`` for every size-``P'``
subset ``X`` of ``C'``.

Minimality. ``S' & S`` lies in ``R``, so under any coupling ``|S' & S| <= min(j, l)`` and
``E|S' - S| >= P' - E min(j, l)``. For any coupling of the two count laws,
``E min(j, l) = sum_k Pr(j >= k, l >= k) <= sum_k min(Pr(j >= k), Pr(l >= k))``, with equality
when the events ``{j >= k}``, ``{l >= k}`` are nested, as under the quantile coupling. The
construction above attains ``|S' & S| = min(j, l)`` on every draw, so
``E|S' - S| = P' - sum_{k>=1} min(Pr(j >= k), Pr(l >= k))``, the optimal-transport minimum
between the two uniform laws with cost ``|S' - S|`` (:func:`expected_joiners`).

Special cases. One departure with ``P`` kept: a departing member is replaced by a uniform
non-member (F-SOSA-U). One arrival with ``P`` kept: with probability ``P/(M+1)`` the arrival
replaces a uniform member (F-SOSA-I). One arrival with ``P`` growing: the arrival joins with
probability ``(P+1)/(M+1)``, else a uniform non-member joins. One departure with ``P``
shrinking: a departing member simply leaves, else a uniform member leaves. Equal numbers of
departures and arrivals with ``P`` kept: the departing members are replaced by as many uniform
arrivals (the pairing of Algorithm 4, in law).

Arithmetic is exact: the hypergeometric laws are integer counts (``math.comb``), the point ``U``
is a uniform integer on their common scale, and every draw (that integer, each step of a
partial Fisher-Yates shuffle) is an exactly uniform bounded integer made from the raw words of
the sampler's numpy generator. A request is validated completely before the first draw, so a
rejected request changes neither the sets nor the generator's state.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import numpy as np

from .errors import DuplicateClientError, EmptyPopulationError, UnknownClientError

ClientId = Hashable


def _key(c: ClientId) -> tuple[str, object]:
    return (type(c).__name__, c)


def ordered(clients: Iterable[ClientId]) -> list[ClientId]:
    """Clients in a canonical order (so that draws do not depend on set iteration order):
    by type name, then by value."""
    clients = list(clients)
    if len({type(c) for c in clients}) <= 1:
        # one type: the same order as the key below, without its cost (values of one type compare)
        return sorted(cast(list[Any], clients))
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


def _hypergeometric_counts(population: int, marked: int, draws: int) -> list[int]:
    """``C(marked, k) C(population - marked, draws - k)`` for ``k = 0..draws``: the
    hypergeometric law of the marked count in a uniform ``draws``-subset, times
    ``C(population, draws)``."""
    return [math.comb(marked, k) * math.comb(population - marked, draws - k) for k in range(draws + 1)]


def _cumulative(counts: Sequence[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        total += c
        out.append(total)
    return out


def _check_sizes(population: int, staying: int, size: int, new_population: int, new_size: int) -> None:
    if not (0 <= staying <= population and staying <= new_population):
        raise ValueError(f"staying clients r={staying} must fit in M={population} and M'={new_population}")
    if not (0 <= size <= population and 0 <= new_size <= new_population):
        raise ValueError(f"subset sizes P={size}, P'={new_size} must fit in M={population}, M'={new_population}")


@functools.lru_cache(maxsize=1024)
def _quantile_table(
    population: int, staying: int, size: int, new_population: int, new_size: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The two distribution functions on the common integer scale ``C(M, P) C(M', P')``:
    ``F(j)`` for ``j = -1..P`` and ``G(l)`` for ``l = 0..P'`` (``F(-1) = 0``)."""
    _check_sizes(population, staying, size, new_population, new_size)
    f = _cumulative(_hypergeometric_counts(population, staying, size))
    g = _cumulative(_hypergeometric_counts(new_population, staying, new_size))
    x, y = f[-1], g[-1]
    return (0, *(v * y for v in f)), tuple(v * x for v in g)


def count_coupling(
    population: int, staying: int, size: int, new_population: int, new_size: int
) -> dict[tuple[int, int], Fraction]:
    """The quantile coupling of ``j = |S & R|`` and ``l = |S' & R|`` (module docstring).

    ``population`` = M, ``staying`` = r = |R|, ``size`` = P, ``new_population`` = M',
    ``new_size`` = P'. Returns the exact joint law ``{(j, l): probability}`` (nonzero entries).
    """
    f, g = _quantile_table(population, staying, size, new_population, new_size)
    scale = g[-1]
    law: dict[tuple[int, int], Fraction] = {}
    for j in range(size + 1):
        for l in range(new_size + 1):
            overlap = min(f[j + 1], g[l]) - max(f[j], g[l - 1] if l else 0)
            if overlap > 0:
                law[(j, l)] = Fraction(overlap, scale)
    return law


def expected_joiners(population: int, staying: int, size: int, new_population: int, new_size: int) -> Fraction:
    """Exact ``E|S' - S|`` of the batch coupling, from its count-level law: the minimum over all
    exact couplings (module docstring). Arguments as for :func:`count_coupling`."""
    law = count_coupling(population, staying, size, new_population, new_size)
    return sum((p * (new_size - min(j, l)) for (j, l), p in law.items()), Fraction(0))


class SubsetSampler:
    """The current client set and the aggregated subset, edited by the coupling of the module
    docstring (exact, and at the minimum expected number of joining clients).

    Every public edit validates first and draws only after validation, so a rejected request
    leaves both sets and the generator as they were.
    """

    def __init__(self, rule: SizeRule, rng: np.random.Generator) -> None:
        self.rule = rule
        self.rng = rng
        self.clients: set[ClientId] = set()
        self.members: set[ClientId] = set()

    # -- helpers ---------------------------------------------------------------------------
    def _choice(self, pool: Iterable[ClientId], k: int) -> list[ClientId]:
        """A uniform ``k``-subset of ``pool`` in canonical order (partial Fisher-Yates on the
        canonical order; no draw when the answer is forced)."""
        pool = ordered(pool)
        n = len(pool)
        if k > n:
            raise EmptyPopulationError(f"cannot draw {k} clients from {n}")
        if k == n:
            return pool
        idx = list(range(n))
        for i in range(k):
            t = i + self._below(n - i)
            idx[i], idx[t] = idx[t], idx[i]
        return [pool[i] for i in sorted(idx[:k])]

    def _below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``, exactly, for any positive Python int ``n``: the
        generator's raw 64-bit words, cut to the bit length of ``n - 1``, rejected when
        ``>= n`` (accepted with probability above 1/2)."""
        bits = (n - 1).bit_length()
        if bits == 0:
            return 0
        words = (bits + 63) // 64
        raw = self.rng.bit_generator.random_raw
        while True:
            value = 0
            for _ in range(words):
                value = (value << 64) | int(raw())
            value >>= words * 64 - bits
            if value < n:
                return value

    def _coupled_count(
        self, population: int, staying: int, size: int, new_population: int, new_size: int, j: int
    ) -> int:
        """Draw ``l`` given ``j`` from the quantile coupling (no draw when ``l`` is forced)."""
        f, g = _quantile_table(population, staying, size, new_population, new_size)
        lo, hi = f[j], f[j + 1]  # [F(j-1), F(j)) on the common scale
        first, last = bisect.bisect_right(g, lo), bisect.bisect_right(g, hi - 1)
        if first == last:
            return first
        return bisect.bisect_right(g, lo + self._below(hi - lo))

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
        """Algorithm 1, step 1: a uniform subset of the target size of ``clients`` (all of its
        members join: there is no earlier subset to keep)."""
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
        """Departure of ``client``: the batch coupling with ``D = {client}`` (F-SOSA-U when
        ``P`` is kept; when ``P_t`` shrinks a departing member leaves, else a uniform one)."""
        return self.batch([client], [])

    def add(self, client: ClientId) -> SubsetChange:
        """Arrival of ``client``: the batch coupling with ``A = {client}`` (F-SOSA-I when ``P``
        is kept; when ``P_t`` grows, the arrival or a uniform non-member joins)."""
        return self.batch([], [client])

    def batch(self, removed: Sequence[ClientId], added: Sequence[ClientId]) -> SubsetChange:
        """Simultaneous departures and arrivals (Algorithm 4): the exact coupling with the least
        expected number of joining clients (module docstring), for either size rule.

        Returns the net change ``S - S'`` (left) and ``S' - S`` (joined).
        """
        removed, added = list(removed), list(added)
        self._check_known(self.clients, removed)
        self._check_new(self.clients, added)  # so no client is both removed and added
        staying = self.clients - set(removed)
        final_clients = staying | set(added)
        target = self.rule.target(len(final_clients))
        kept = self.members & staying
        j = len(kept)
        l = self._coupled_count(len(self.clients), len(staying), len(self.members), len(final_clients), target, j)
        if l < j:
            kept = set(self._choice(kept, l))
        elif l > j:
            kept |= set(self._choice(staying - self.members, l - j))
        members = kept | set(self._choice(added, target - l))
        return self._commit(final_clients, members)

    def fresh(self, clients: Iterable[ClientId]) -> set[ClientId]:
        """A fresh uniform draw of the target size (what Retrain does), without editing state."""
        clients = set(clients)
        return set(self._choice(clients, self.rule.target(len(clients))))
