"""The subset couplings: exactness, part (a) of Definition 1 (after any edit sequence the subset
is uniform over the subsets of the target size of the final client set; chi-square over 20,000
independent draws per single edit, 10,000 per random edit sequence), and minimality (a batch edit's expected number of joining
clients equals the optimal-transport minimum between the old and the new uniform laws, solved
as a linear programme over all subsets, and the sampler's draws attain it)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import sparse, stats
from scipy.optimize import linprog

from fl_core.errors import DuplicateClientError, EmptyPopulationError, UnknownClientError
from fl_core.sampler import (
    FixedRatio,
    FixedSize,
    SubsetSampler,
    count_coupling,
    expected_joiners,
    ordered,
)

RUNS = 20_000
# Random sequences check that edits compose (the state carried between requests); each kind of
# edit is checked alone at RUNS above. Composition bugs are gross, and 10,000 runs still expect
# >= 79 draws in each of the <= 126 cells, enough to detect a +-8 % bias on half of them.
SEQUENCE_RUNS = 10_000
ALPHA = 1e-3  # seeds are fixed, so a pass is deterministic; the level guards a real bias


def apply(s: SubsetSampler, op):
    if op[0] == "-":
        return s.remove(op[1])
    if op[0] == "+":
        return s.add(op[1])
    return s.batch(op[1], op[2])


def run_many(rule, initial, ops, seed, runs=RUNS):
    """``runs`` independent sequences (one generator, consumed in turn): the final subsets'
    counts, the final client set, and the joiners ``|S_final - S_initial|`` of each run."""
    rng = np.random.default_rng(seed)
    counts: dict[tuple, int] = {}
    joiners = np.empty(runs)
    final = None
    for r in range(runs):
        s = SubsetSampler(rule, rng)
        s.initialize(initial)
        start = set(s.members)
        for op in ops:
            apply(s, op)
        final = s.clients
        key = tuple(ordered(s.members))
        counts[key] = counts.get(key, 0) + 1
        joiners[r] = len(s.members - start)
    return counts, final, joiners


def chi_square_uniform(counts, final):
    runs = sum(counts.values())
    size = len(next(iter(counts)))
    support = [tuple(ordered(c)) for c in itertools.combinations(ordered(final), size)]
    assert set(counts) <= set(support), "a subset outside the client set appeared"
    observed = np.array([counts.get(k, 0) for k in support], dtype=float)
    expected = np.full(len(support), runs / len(support))
    return stats.chisquare(observed, expected).pvalue, size, len(final)


def random_ops(rng, initial, n_ops, min_pop, max_pop, batch=False):
    """A request sequence drawn independently of the sampler (as the theory requires)."""
    present = list(initial)
    nxt = max(initial) + 1
    ops = []
    for _ in range(n_ops):
        if batch and rng.random() < 0.4:
            nd = int(rng.integers(0, 3))
            na = int(rng.integers(0, 3))
            nd = min(nd, len(present) - min_pop)
            na = min(na, max_pop - (len(present) - nd))
            if nd + na == 0:
                continue
            dels = [present[i] for i in rng.choice(len(present), nd, replace=False)]
            adds = list(range(nxt, nxt + na))
            nxt += na
            present = [c for c in present if c not in dels] + adds
            ops.append(("b", dels, adds))
        elif (rng.random() < 0.5 and len(present) > min_pop) or len(present) >= max_pop:
            c = present.pop(int(rng.integers(len(present))))
            ops.append(("-", c))
        else:
            present.append(nxt)
            ops.append(("+", nxt))
            nxt += 1
    return ops


@pytest.mark.parametrize(
    ("rule", "m0", "seq_seed", "batch"),
    [
        (FixedSize(3), 7, 1, False),
        (FixedSize(2), 6, 2, False),
        (FixedSize(4), 8, 3, True),
        (FixedSize(3), 9, 4, True),
        (FixedRatio(0.5), 7, 5, False),
        (FixedRatio(0.4), 8, 6, True),
    ],
)
def test_subset_law_after_random_sequences(rule, m0, seq_seed, batch):
    rng = np.random.default_rng(seq_seed)
    initial = list(range(m0))
    ops = random_ops(rng, initial, n_ops=8, min_pop=5, max_pop=9, batch=batch)
    counts, final, _ = run_many(rule, initial, ops, seed=1000 * seq_seed, runs=SEQUENCE_RUNS)
    p, size, m = chi_square_uniform(counts, final)
    assert p > ALPHA, f"subset law not uniform over C({m},{size}) after {ops}: p={p:.2e}"


def edit_ops(m: int, d: int, a: int):
    """One request on clients ``0..m-1``: departures ``0..d-1``, arrivals ``100..``; a single
    departure or arrival goes through ``remove`` / ``add``, anything else through ``batch``."""
    removed, added = list(range(d)), list(range(100, 100 + a))
    if (d, a) == (1, 0):
        return [("-", 0)]
    if (d, a) == (0, 1):
        return [("+", 100)]
    return [("b", removed, added)]


# (rule, M, |D|, |A|): growth, shrink and mixed batches, single requests, fixed P and fixed ratio;
# the first three are the cases measured for the old batch coupling (old batch 1.50 / 1.90 / 1.95 expected joiners).
EDITS = [
    (FixedRatio(0.5), 4, 0, 2),  # P 2 -> 3
    (FixedRatio(0.5), 7, 1, 3),  # P 3 -> 4
    (FixedRatio(0.3), 7, 2, 5),  # P 2 -> 3
    (FixedRatio(0.5), 6, 1, 3),  # P 3 -> 4
    (FixedRatio(0.5), 8, 3, 1),  # P 4 -> 3, mixed shrink
    (FixedRatio(0.4), 9, 3, 0),  # P 3 -> 2, departures only
    (FixedRatio(0.5), 6, 3, 1),  # P 3 -> 2, departing members outnumber the slots
    (FixedRatio(0.5), 7, 0, 1),  # single arrival, P 3 -> 4
    (FixedRatio(0.5), 8, 1, 0),  # single departure, P 4 -> 3
    (FixedSize(3), 6, 0, 3),  # fixed P, arrivals only
    (FixedSize(3), 8, 2, 0),  # fixed P, departures only
    (FixedSize(2), 6, 2, 1),  # fixed P, mixed
    (FixedSize(3), 7, 2, 2),  # fixed P, pure pairing
    (FixedSize(3), 6, 1, 0),  # F-SOSA-U
    (FixedSize(2), 5, 0, 1),  # F-SOSA-I
]
EDIT_IDS = [f"{type(r).__name__}-M{m}-D{d}-A{a}" for r, m, d, a in EDITS]


def lp_min_joiners(m: int, p: int, d: int, a: int, p_new: int) -> float:
    """The optimal transport between the uniform law on the size-``p`` subsets of
    ``0..m-1`` and that on the size-``p_new`` subsets of ``d..m-1`` plus ``a`` arrivals, with cost
    ``|S' - S|``, solved as a linear programme over all pairs of subsets."""
    old = [frozenset(s) for s in itertools.combinations(range(m), p)]
    new_clients = list(range(d, m)) + list(range(100, 100 + a))
    new = [frozenset(s) for s in itertools.combinations(new_clients, p_new)]
    cost = np.array([len(t - s) for s in old for t in new], dtype=float)
    n_old, n_new = len(old), len(new)
    var = np.arange(n_old * n_new)
    rows = np.concatenate([var // n_new, n_old + var % n_new])
    a_eq = sparse.csr_matrix((np.ones(2 * var.size), (rows, np.concatenate([var, var]))))
    b_eq = np.concatenate([np.full(n_old, 1 / n_old), np.full(n_new, 1 / n_new)])
    res = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return res.fun


@pytest.mark.parametrize(("rule", "m", "d", "a"), EDITS, ids=EDIT_IDS)
def test_edit_is_exact_and_at_the_transport_minimum(rule, m, d, a):
    p, p_new = rule.target(m), rule.target(m - d + a)
    counts, final, joiners = run_many(rule, range(m), edit_ops(m, d, a), seed=7 * m + 11 * d + 13 * a)
    pvalue, size, m_new = chi_square_uniform(counts, final)
    assert size == p_new
    assert pvalue > ALPHA, f"not uniform over C({m_new},{size}): p={pvalue:.2e}"

    law = count_coupling(m, m - d, p, m - d + a, p_new)
    mean = expected_joiners(m, m - d, p, m - d + a, p_new)
    optimum = lp_min_joiners(m, p, d, a, p_new)
    assert abs(float(mean) - optimum) < 1e-9, f"coupling {float(mean):.6f} vs LP optimum {optimum:.6f}"

    # The draws: joiners are P' - min(j, l), so their exact variance follows from the count law.
    # |sample mean - E| <= 4 sd / sqrt(RUNS) fails a correct sampler with probability < 1e-4
    # (normal approximation); the old batch's excess (>= 0.3 joiners in those cases) is
    # more than ten times that bound.
    second = sum(q * (p_new - min(j, l)) ** 2 for (j, l), q in law.items())
    sd = math.sqrt(float(second - mean**2))
    tol = 4 * sd / math.sqrt(RUNS)
    assert abs(joiners.mean() - float(mean)) <= tol, f"sampled {joiners.mean():.4f} vs {float(mean):.4f} +- {tol:.4f}"


def test_count_coupling_has_the_hypergeometric_marginals_and_is_monotone():
    m, r, p, m_new, p_new = 9, 6, 4, 11, 5
    law = count_coupling(m, r, p, m_new, p_new)
    assert sum(law.values()) == 1
    for j in range(p + 1):
        mass = sum(q for (jj, _), q in law.items() if jj == j)
        assert mass * math.comb(m, p) == math.comb(r, j) * math.comb(m - r, p - j)
    for l in range(p_new + 1):
        mass = sum(q for (_, ll), q in law.items() if ll == l)
        assert mass * math.comb(m_new, p_new) == math.comb(r, l) * math.comb(m_new - r, p_new - l)
    support = sorted(law)
    assert all(l1 <= l2 for (_, l1), (_, l2) in itertools.pairwise(support)), "not comonotone"


def test_large_population_batch_keeps_the_arrivals_law():
    """Populations whose binomials exceed 64 bits use the multi-word uniform draw: the number
    of arrivals in the new subset must follow its hypergeometric law (chi-square)."""
    rule, m, d, a, runs = FixedRatio(0.5), 60, 3, 4, 4000
    scale = math.comb(m, rule.target(m)) * math.comb(m - d + a, rule.target(m - d + a))
    assert scale.bit_length() > 64
    rng = np.random.default_rng(3)
    hits = np.zeros(a + 1)
    for _ in range(runs):
        s = SubsetSampler(rule, rng)
        s.initialize(range(m))
        s.batch(list(range(d)), list(range(1000, 1000 + a)))
        hits[len(s.members & set(range(1000, 1000 + a)))] += 1
        assert len(s.members) == rule.target(m - d + a)
    law = stats.hypergeom(m - d + a, a, rule.target(m - d + a)).pmf(np.arange(a + 1))
    assert stats.chisquare(hits, runs * law).pvalue > ALPHA


def trigger_rate(rule, m, op):
    rng = np.random.default_rng(17 * m)
    hits = 0
    for _ in range(RUNS):
        s = SubsetSampler(rule, rng)
        s.initialize(range(m))
        change = s.remove(0) if op == "-" else s.add(m)
        hits += change.triggered
    return hits


@pytest.mark.parametrize(("m", "p"), [(6, 2), (9, 4)])
def test_trigger_rates_match_theory(m, p):
    rule = FixedSize(p)
    for op, prob in (("-", p / m), ("+", p / (m + 1))):
        hits = trigger_rate(rule, m, op)
        test = stats.binomtest(hits, RUNS, prob)
        assert test.pvalue > ALPHA, f"{op} trigger rate {hits / RUNS:.4f} vs {prob:.4f}"


def test_triggered_edit_changes_one_member_and_keeps_size():
    s = SubsetSampler(FixedSize(3), np.random.default_rng(0))
    s.initialize(range(8))
    for c in range(8, 40):
        ch = s.add(c)
        assert len(ch.left) == len(ch.joined) <= 1
        assert len(s.members) == 3 and s.members <= s.clients
    for c in range(0, 30):
        ch = s.remove(c)
        assert len(ch.left) == len(ch.joined) <= 1
        assert c not in s.members


def test_batch_applies_only_net_change():
    s = SubsetSampler(FixedSize(3), np.random.default_rng(5))
    s.initialize(range(6))
    before = set(s.members)
    ch = s.batch([0, 1], [10, 11])
    assert set(ch.left) == before - s.members
    assert set(ch.joined) == s.members - before
    assert not (set(ch.left) & set(ch.joined))


def test_bad_requests_leave_state_and_generator_unchanged():
    s = SubsetSampler(FixedSize(3), np.random.default_rng(1))
    with pytest.raises(EmptyPopulationError):
        s.initialize([])
    s.initialize(range(4))

    def snap():
        return set(s.clients), set(s.members), s.rng.bit_generator.state

    before = snap()
    with pytest.raises(UnknownClientError, match="client 99"):
        s.remove(99)
    with pytest.raises(DuplicateClientError, match="client 2"):
        s.add(2)
    with pytest.raises(DuplicateClientError):
        s.batch([0], [0])
    with pytest.raises(UnknownClientError):
        s.batch([0, 42], [7])
    with pytest.raises(DuplicateClientError):
        s.batch([0], [7, 7])
    assert snap() == before
    s.remove(0)
    before = snap()
    with pytest.raises(EmptyPopulationError, match="P=3"):
        s.remove(1)
    with pytest.raises(EmptyPopulationError, match="P=3"):
        s.batch([1, 2], [9])
    assert snap() == before


def test_fixed_ratio_target():
    assert FixedRatio(0.5).target(20) == 10
    assert FixedRatio(0.5).target(1) == 1
    assert FixedRatio(0.3).target(10) == 3
    with pytest.raises(ValueError, match="rho"):
        FixedRatio(1.5)
