"""Exactness of the subset couplings, part (a) of Definition 1: after any edit sequence the
subset is uniform over the subsets of the target size of the final client set. Each case runs
20,000 independent sequences and applies a chi-square goodness-of-fit test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from fl_core.errors import DuplicateClientError, EmptyPopulationError, UnknownClientError
from fl_core.sampler import FixedRatio, FixedSize, SubsetSampler, ordered

RUNS = 20_000
ALPHA = 1e-3  # seeds are fixed, so a pass is deterministic; the level guards a real bias


def run_sequence(rule, initial, ops, seed):
    s = SubsetSampler(rule, np.random.default_rng(seed))
    s.initialize(initial)
    for op in ops:
        if op[0] == "-":
            s.remove(op[1])
        elif op[0] == "+":
            s.add(op[1])
        else:
            s.batch(op[1], op[2])
    return s


def chi_square_uniform(rule, initial, ops, seed0=0):
    final = None
    counts: dict[tuple, int] = {}
    for r in range(RUNS):
        s = run_sequence(rule, initial, ops, seed0 + r)
        final = s.clients
        key = tuple(ordered(s.members))
        counts[key] = counts.get(key, 0) + 1
    size = len(next(iter(counts)))
    support = [tuple(ordered(c)) for c in itertools.combinations(ordered(final), size)]
    assert set(counts) <= set(support), "a subset outside the client set appeared"
    observed = np.array([counts.get(k, 0) for k in support], dtype=float)
    expected = np.full(len(support), RUNS / len(support))
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
    "rule,m0,seq_seed,batch",
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
    p, size, m = chi_square_uniform(rule, initial, ops, seed0=1000 * seq_seed)
    assert p > ALPHA, f"subset law not uniform over C({m},{size}) after {ops}: p={p:.2e}"


@pytest.mark.parametrize(
    "rule,initial,ops",
    [
        (FixedRatio(0.5), range(7), [("+", 7)]),  # P grows 3 -> 4
        (FixedRatio(0.5), range(8), [("-", 0)]),  # P shrinks 4 -> 3, departing member
        (FixedRatio(0.5), range(8), [("-", 7)]),
        (FixedRatio(0.5), range(6), [("b", [0, 1, 2], [10])]),  # shrink in a batch
        (FixedRatio(0.5), range(6), [("b", [0], [10, 11, 12])]),  # growth in a batch
        (FixedSize(3), range(7), [("b", [0, 1], [10, 11])]),  # pure pairing
    ],
)
def test_subset_law_size_changes(rule, initial, ops):
    p, size, m = chi_square_uniform(rule, list(initial), ops)
    assert p > ALPHA, f"not uniform over C({m},{size}): p={p:.2e}"


def trigger_rate(rule, m, op):
    hits = 0
    for r in range(RUNS):
        s = SubsetSampler(rule, np.random.default_rng(r))
        s.initialize(range(m))
        change = s.remove(0) if op == "-" else s.add(m)
        hits += change.triggered
    return hits


@pytest.mark.parametrize("m,p", [(6, 2), (9, 4)])
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


def test_bad_requests_leave_state_unchanged():
    s = SubsetSampler(FixedSize(3), np.random.default_rng(1))
    with pytest.raises(EmptyPopulationError):
        s.initialize([])
    s.initialize(range(4))
    snap = (set(s.clients), set(s.members))
    with pytest.raises(UnknownClientError, match="client 99"):
        s.remove(99)
    with pytest.raises(DuplicateClientError, match="client 2"):
        s.add(2)
    with pytest.raises(DuplicateClientError):
        s.batch([0], [0])
    with pytest.raises(UnknownClientError):
        s.batch([0, 42], [7])
    s.remove(0)
    snap = (set(s.clients), set(s.members))
    with pytest.raises(EmptyPopulationError, match="P=3"):
        s.remove(1)
    assert (s.clients, s.members) == snap


def test_fixed_ratio_target():
    assert FixedRatio(0.5).target(20) == 10
    assert FixedRatio(0.5).target(1) == 1
    assert FixedRatio(0.3).target(10) == 3
    with pytest.raises(ValueError, match="rho"):
        FixedRatio(1.5)
