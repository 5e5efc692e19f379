"""The coordinator's sufficient statistics for F-SOSA: the weighted sum of members' models
``sum_i w_i W_i`` and of their Fishers ``sum_i w_i F_i``, ``b = sum_i w_i F_i W_i`` and the total
weight, all client-additive, plus a fingerprint per member.

A member's weight ``w_i`` is its sample count ``n_i`` (``Weighting.SAMPLES``, the default, as
FedFisher weights each client's Fisher by its data share) or 1 (``Weighting.UNIFORM``, seed 000's
literal ``Wbar = mean W_i``). Weighting by sample count keeps every statistic client-additive, so
edits stay exact; it matters under label skew, where client sizes differ several-fold.

Edits apply a whole change atomically: every contribution is validated first, and nothing
is modified if one is rejected. Sums are kept in float64 so that add-then-remove returns to a
fresh fit's statistics to float tolerance.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from enum import Enum

import torch

from .contribution import Contribution
from .errors import InvalidContributionError, UnknownClientError
from .fisher import FisherSum
from .payload import serialized_size


class Weighting(str, Enum):
    """Aggregation weight of a member: its sample count, or one."""

    SAMPLES = "samples"
    UNIFORM = "uniform"


class SufficientStatistics:
    def __init__(self, dim: int, fisher_sum: FisherSum | None, weighting: Weighting | str = Weighting.SAMPLES) -> None:
        self.dim = dim
        self.fisher_sum = fisher_sum
        self.weighting = Weighting(weighting)
        self.weight_sum = torch.zeros(dim, dtype=torch.float64)
        self.total_weight = 0.0
        self.b = torch.zeros(dim, dtype=torch.float64) if fisher_sum is not None else None
        self.fingerprints: dict[Hashable, str] = {}

    def weight_of(self, c: Contribution) -> float:
        """The aggregation weight of contribution ``c``."""
        return float(c.num_samples) if self.weighting is Weighting.SAMPLES else 1.0

    @property
    def members(self) -> list[Hashable]:
        return list(self.fingerprints)

    @property
    def count(self) -> int:
        return len(self.fingerprints)

    def mean(self) -> torch.Tensor:
        """``Wbar``: the weighted mean of the members' models."""
        if not self.count:
            raise ValueError("no member in the subset: the mean model is undefined")
        return self.weight_sum / self.total_weight

    def _check(self, left: Sequence[Contribution], joined: Sequence[Contribution]) -> None:
        for c in left:
            if c.client not in self.fingerprints:
                raise UnknownClientError(f"client {c.client!r} is not a member of the subset")
            if self.fingerprints[c.client] != c.digest:
                raise InvalidContributionError(
                    f"client {c.client!r}: re-uploaded contribution differs from the one aggregated"
                )
        leaving = {c.client for c in left}
        for c in joined:
            c.validate(self.dim)
            if (self.fisher_sum is None) != (c.fisher is None):
                raise InvalidContributionError(
                    f"client {c.client!r}: Fisher upload does not match the method", client=c.client
                )
            if c.client in self.fingerprints and c.client not in leaving:
                raise InvalidContributionError(f"client {c.client!r} is already a member of the subset")

    def apply(self, left: Sequence[Contribution] = (), joined: Sequence[Contribution] = ()) -> None:
        """Subtract the ``left`` contributions and add the ``joined`` ones, all or nothing."""
        self._check(left, joined)
        for c in left:
            w = self.weight_of(c)
            self.weight_sum -= w * c.weights.double()
            self.total_weight -= w
            if self.fisher_sum is not None:
                assert self.b is not None and c.fisher is not None  # b is kept with the sum; members upload one
                self.b -= w * c.fisher.matvec(c.weights.double())
                self.fisher_sum.remove(c.client, c.fisher, w)
            del self.fingerprints[c.client]
        for c in joined:
            w = self.weight_of(c)
            self.weight_sum += w * c.weights.double()
            self.total_weight += w
            if self.fisher_sum is not None:
                assert self.b is not None and c.fisher is not None  # b is kept with the sum; checked in _check
                self.b += w * c.fisher.matvec(c.weights.double())
                self.fisher_sum.add(c.client, c.fisher, w)
            self.fingerprints[c.client] = c.digest

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Everything the coordinator must keep between edits (for checkpoints)."""
        t = {"weight_sum": self.weight_sum, "total_weight": torch.tensor([self.total_weight], dtype=torch.float64)}
        if self.b is not None:
            t["b"] = self.b
            assert self.fisher_sum is not None  # b is kept exactly when there is a Fisher sum
            t.update(self.fisher_sum.state_tensors())
        return t

    def state_bytes(self) -> int:
        """Bytes of the persistent state: tensors plus the member fingerprints as JSON."""
        import json

        return serialized_size(self.state_tensors()) + len(
            json.dumps({repr(k): v for k, v in self.fingerprints.items()}).encode()
        )
