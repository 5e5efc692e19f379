"""Expected joining clients |S' - S| of one batch of departures D and arrivals A .

For each case: the batch coupling as it was at commit 42b20d8 (Algorithm 4 as in that commit's
``fl_core/sampler.py``: canonical pairing, fixed-size insertion for unmatched arrivals, unmatched
departures leave, then a uniform top-up or drop to P'), the same requests sent one by one (the
"one by one" of the comparison: paired departures and arrivals, then each unmatched request alone; and
every request alone, departures first), the coupling of ``fl_core.sampler`` (exact, from its
count law), the optimal-transport minimum (``scipy.optimize.linprog`` over all pairs of subsets)
and the mean over ``--draws`` draws of the sampler itself. The first four columns are exact
(enumeration with fractions over every old subset and every random branch); "one by one" counts
the net change from the subset before the first request to the subset after the last.

    python bench/batch_joiners.py [--draws 20000]
"""

from __future__ import annotations

import argparse
import itertools
import math
from fractions import Fraction

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from fl_core.sampler import FixedRatio, FixedSize, SizeRule, SubsetSampler, expected_joiners

State = dict[tuple[frozenset, frozenset], Fraction]  # (initial subset, current subset) -> probability

#: (rule, M, |D|, |A|); the first three are the cases the comparison was made on.
CASES: list[tuple[SizeRule, int, int, int]] = [
    (FixedRatio(0.5), 4, 0, 2),
    (FixedRatio(0.5), 7, 1, 3),
    (FixedRatio(0.3), 7, 2, 5),
    (FixedRatio(0.5), 6, 1, 3),
    (FixedRatio(0.5), 8, 0, 4),
    (FixedRatio(0.5), 8, 3, 1),
    (FixedRatio(0.4), 9, 3, 0),
    (FixedSize(3), 6, 0, 3),
    (FixedSize(3), 8, 2, 0),
    (FixedSize(2), 6, 2, 1),
    (FixedSize(3), 7, 2, 2),
]


def _spread(state: State, step) -> State:
    """Apply ``step(current) -> [(next, probability)]`` to every branch."""
    out: State = {}
    for (start, cur), p in state.items():
        for nxt, q in step(cur):
            key = (start, frozenset(nxt))
            out[key] = out.get(key, Fraction(0)) + p * q
    return out


def _subsets(pool, k):
    options = list(itertools.combinations(sorted(pool), k))
    return [(set(o), Fraction(1, len(options))) for o in options]


def _start(m: int, size: int) -> State:
    w = Fraction(1, math.comb(m, size))
    return {(frozenset(s), frozenset(s)): w for s in itertools.combinations(range(m), size)}


def _mean_joiners(state: State) -> Fraction:
    return sum((p * len(cur - start) for (start, cur), p in state.items()), Fraction(0))


def old_batch(rule: SizeRule, m: int, d: int, a: int) -> Fraction:
    """Algorithm 4 as implemented at commit 42b20d8, enumerated exactly."""
    removed, added = list(range(d)), list(range(100, 100 + a))
    final = (set(range(m)) - set(removed)) | set(added)
    target = rule.target(len(final))
    n_pair = min(d, a)
    pair = dict(zip(removed[:n_pair], added[:n_pair], strict=True))
    state = _spread(_start(m, rule.target(m)), lambda cur: [({pair.get(c, c) for c in cur}, Fraction(1))])
    hat = len(set(range(m)))  # pairing keeps the population size
    for c in added[n_pair:]:

        def insert(cur, c=c, hat=hat):
            q = Fraction(len(cur), hat + 1)
            return [(cur, 1 - q)] + [((cur - {x}) | {c}, q / len(cur)) for x in cur]

        state = _spread(state, insert)
        hat += 1
    gone = set(removed[n_pair:])
    state = _spread(state, lambda cur: [(cur - gone, Fraction(1))])

    def resize(cur):
        if len(cur) < target:
            return [(cur | s, q) for s, q in _subsets(final - cur, target - len(cur))]
        if len(cur) > target:
            return [(cur - s, q) for s, q in _subsets(cur, len(cur) - target)]
        return [(cur, Fraction(1))]

    return _mean_joiners(_spread(state, resize))


def _single(state: State, clients: set, op: str, c, rule: SizeRule) -> tuple[State, set]:
    """One departure or arrival through the single-request coupling (F-SOSA-U / -I, growth,
    shrink; docs/architecture.md), which the batch coupling reduces to for one request."""
    if op == "-":
        new = clients - {c}
        size = rule.target(len(new))

        def step(cur):
            if size == len(cur):
                if c not in cur:
                    return [(cur, Fraction(1))]
                pool = new - cur
                return [((cur - {c}) | {x}, Fraction(1, len(pool))) for x in pool]
            if c in cur:
                return [(cur - {c}, Fraction(1))]
            return [(cur - {x}, Fraction(1, len(cur))) for x in cur]
    else:
        new = clients | {c}
        size, m = rule.target(len(new)), len(clients)

        def step(cur):
            if size == len(cur):
                q = Fraction(len(cur), m + 1)
                return [(cur, 1 - q)] + [((cur - {x}) | {c}, q / len(cur)) for x in cur]
            q = Fraction(len(cur) + 1, m + 1)
            pool = clients - cur
            return [(cur | {c}, q)] + [(cur | {x}, (1 - q) / len(pool)) for x in pool]

    return _spread(state, step), new


def one_by_one(rule: SizeRule, m: int, d: int, a: int, paired: bool) -> Fraction:
    """Net joiners when the requests go one at a time; with ``paired``, departures and arrivals
    are first paired (an arrival takes its departure's place) as the comparison's figure does."""
    removed, added = list(range(d)), list(range(100, 100 + a))
    state, clients = _start(m, rule.target(m)), set(range(m))
    if paired:
        n_pair = min(d, a)
        pair = dict(zip(removed[:n_pair], added[:n_pair], strict=True))
        state = _spread(state, lambda cur: [({pair.get(c, c) for c in cur}, Fraction(1))])
        clients = (clients - set(pair)) | set(pair.values())
        removed, added = removed[n_pair:], added[n_pair:]
    for op, c in [("-", c) for c in removed] + [("+", c) for c in added]:
        state, clients = _single(state, clients, op, c, rule)
    return _mean_joiners(state)


def lp_optimum(rule: SizeRule, m: int, d: int, a: int) -> float:
    """Optimal transport between the two uniform laws with cost |S' - S|, over all subsets."""
    old = [frozenset(s) for s in itertools.combinations(range(m), rule.target(m))]
    new_clients = list(range(d, m)) + list(range(100, 100 + a))
    new = [frozenset(s) for s in itertools.combinations(new_clients, rule.target(len(new_clients)))]
    cost = np.array([len(t - s) for s in old for t in new], dtype=float)
    var = np.arange(len(old) * len(new))
    rows = np.concatenate([var // len(new), len(old) + var % len(new)])
    a_eq = sparse.csr_matrix((np.ones(2 * var.size), (rows, np.concatenate([var, var]))))
    b_eq = np.concatenate([np.full(len(old), 1 / len(old)), np.full(len(new), 1 / len(new))])
    res = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return float(res.fun)


def sampled(rule: SizeRule, m: int, d: int, a: int, draws: int, seed: int) -> float:
    """Mean joiners of the sampler's own batch over ``draws`` independent draws."""
    rng = np.random.default_rng(seed)
    total = 0
    for _ in range(draws):
        s = SubsetSampler(rule, rng)
        s.initialize(range(m))
        total += len(s.batch(list(range(d)), list(range(100, 100 + a))).joined)
    return total / draws


def describe(rule: SizeRule) -> str:
    return f"rho {rule.rho}" if isinstance(rule, FixedRatio) else f"P {rule.size}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20_000, help="sampler draws per case (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(
        "| rule | M -> M' | D | A | P -> P' | old batch | paired, then one by one | all one by one "
        "| new coupling | LP optimum | sampled (new) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i, (rule, m, d, a) in enumerate(CASES):
        m_new = m - d + a
        p, p_new = rule.target(m), rule.target(m_new)
        new = expected_joiners(m, m - d, p, m_new, p_new)
        cells = [old_batch(rule, m, d, a), one_by_one(rule, m, d, a, True), one_by_one(rule, m, d, a, False), new]
        print(
            f"| {describe(rule)} | {m} -> {m_new} | {d} | {a} | {p} -> {p_new} | "
            + " | ".join(f"{float(x):.3f}" for x in cells)
            + f" | {lp_optimum(rule, m, d, a):.3f} | {sampled(rule, m, d, a, args.draws, args.seed + i):.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
