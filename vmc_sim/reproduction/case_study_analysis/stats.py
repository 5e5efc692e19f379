"""The tests a claim is judged by (range, paired, equivalence, variance) and how their figures are printed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ...sweep.stats import interval
from .data import num

# -- tests and their verdicts ------------------------------------------------------------------


def finite(values: Iterable[Any]) -> list[float]:
    """The finite numbers among ``values``."""
    return [
        x
        for x in (num(v) if not isinstance(v, (int, float)) else float(v) for v in values)
        if x is not None and math.isfinite(x)
    ]


def mean_ci(values: Iterable[Any], digits: int = 2) -> str:
    """``mean ± 95 % half-width (n=k)``; ``mean (n=1)`` for one value; ``-`` for none."""
    iv = interval(finite(values))
    if iv.n == 0:
        return "-"
    spread = "" if math.isnan(iv.ci) else f" ± {iv.ci:.{digits}f}"
    return f"{iv.mean:.{digits}f}{spread} (n={iv.n})"


def each(values: Sequence[Any], digits: int = 2) -> str:
    """Every replicate's value in replicate order, ``-`` where it has none (counts as integers)."""

    def cell(v: Any) -> str:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        x = num(v) if not isinstance(v, float) else (v if math.isfinite(v) else None)
        return "-" if x is None else f"{x:.{digits}f}"

    return " / ".join(cell(v) for v in values) or "-"


def range_test(values: Iterable[Any], lo: float, hi: float) -> tuple[int, int, str]:
    """PLAN.md's rule for a claimed range: (replicates inside, replicates, verdict). ``agrees``:
    the mean inside and at least half the replicates inside; ``contradicted``: the mean's 95 %
    interval wholly outside; ``undecided`` otherwise; one replicate is no test."""
    xs = finite(values)
    n, k = len(xs), sum(1 for x in xs if lo <= x <= hi)
    if n == 0:
        return 0, 0, "no data"
    iv = interval(xs)
    if n == 1:
        return k, n, "one replicate: no test (" + ("inside" if k else "outside") + ")"
    if lo <= iv.mean <= hi and 2 * k >= n:
        return k, n, "agrees"
    if iv.mean + iv.ci < lo or iv.mean - iv.ci > hi:
        return k, n, "contradicted"
    return k, n, "undecided"


def paired_test(diffs: Iterable[Any]) -> tuple[int, int, str]:
    """PLAN.md's rule for "F-SOSA below Retrain" on paired differences (F-SOSA - Retrain):
    (replicates below zero, replicates, verdict): ``supported`` when the 95 % t interval lies below
    zero, ``contradicted`` above it, ``undecided`` when it spans zero."""
    xs = finite(diffs)
    n, k = len(xs), sum(1 for x in xs if x < 0)
    if n == 0:
        return 0, 0, "no data"
    if n == 1:
        return k, n, "one replicate: no test"
    iv = interval(xs)
    if iv.mean + iv.ci < 0:
        return k, n, "supported"
    if iv.mean - iv.ci > 0:
        return k, n, "contradicted"
    return k, n, "undecided (the interval spans 0)"


def equivalence_test(diffs: Iterable[Any], margin: float) -> tuple[int, int, str]:
    """PLAN.md's rule for "matches Retrain": (replicates within ``margin``, replicates, verdict):
    ``equivalent`` when the 95 % t interval of the mean difference lies within ±margin,
    ``differs`` when it lies wholly outside, ``undecided`` otherwise."""
    xs = finite(diffs)
    n, k = len(xs), sum(1 for x in xs if abs(x) <= margin)
    if n == 0:
        return 0, 0, "no data"
    if n == 1:
        return k, n, "one replicate: no test (" + ("within" if k else "outside") + f" ±{margin:g})"
    iv = interval(xs)
    if -margin <= iv.mean - iv.ci and iv.mean + iv.ci <= margin:
        return k, n, "equivalent"
    if iv.mean + iv.ci < -margin or iv.mean - iv.ci > margin:
        return k, n, "differs"
    return k, n, "undecided"


def variance_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The ratio of the sample variances of ``a`` and ``b`` and its two-sided F-test p-value
    (None with fewer than two values on a side or a zero variance)."""
    from scipy.stats import f as fdist

    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = interval(a).std ** 2, interval(b).std ** 2
    if vb == 0 or va == 0:
        return None
    ratio = va / vb
    lower = fdist.cdf(ratio, len(a) - 1, len(b) - 1)
    return ratio, float(min(1.0, 2 * min(lower, 1 - lower)))
