"""Mean, sample standard deviation and Student-t confidence interval of a set of replicate figures."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
"""Two-sided level of the interval ``summary.csv`` and the plot's band give."""

FEW = 3
"""Below this many values an interval is flagged where it is shown: over 2 values it has one degree
of freedom (t = 12.7 at 95 %), so it is about five times as wide as over 3 and says little."""


@dataclass(frozen=True)
class Interval:
    """``mean`` of ``n`` finite values, their sample standard deviation (``std``, n - 1 in the
    denominator) and the half-width ``ci`` of the Student-t interval at :data:`CONFIDENCE`; the
    spread is NaN below two values, everything NaN with none."""

    mean: float
    std: float
    ci: float
    n: int


def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (scipy)."""
    from scipy.stats import t

    return float(t.ppf(p, dof))


def numeric(value: Any) -> float | None:
    """``value`` as a finite float, or None for a missing, non-numeric or non-finite figure."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def interval(values: Iterable[Any], confidence: float = CONFIDENCE) -> Interval:
    """The :class:`Interval` of the finite numbers among ``values`` (others are left out)."""
    xs = np.array([x for x in map(numeric, values) if x is not None], dtype=float)
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    if n == 1:
        return Interval(float(xs[0]), math.nan, math.nan, 1)
    std = float(np.std(xs, ddof=1))
    half = t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return Interval(float(np.mean(xs)), std, half, n)
