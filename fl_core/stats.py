"""The coordinator's sufficient statistics for F-SOSA: sum of members' weights, sum of their
Fishers and ``b = sum F_i W_i``, all client-additive, plus a fingerprint per member.

Edits apply a whole change atomically: every contribution is validated first, and nothing
is modified if one is rejected. Sums are kept in float64 so that add-then-remove returns to a
fresh fit's statistics to float tolerance.
"""

from __future__ import annotations

from typing import Hashable, Sequence

import torch

from .contribution import Contribution
from .errors import InvalidContributionError, UnknownClientError
from .fisher import FisherSum
from .payload import serialized_size


class SufficientStatistics:
    def __init__(self, dim: int, fisher_sum: FisherSum | None) -> None:
        self.dim = dim
        self.fisher_sum = fisher_sum
        self.weight_sum = torch.zeros(dim, dtype=torch.float64)
        self.b = torch.zeros(dim, dtype=torch.float64) if fisher_sum is not None else None
        self.fingerprints: dict[Hashable, str] = {}

    @property
    def members(self) -> list[Hashable]:
        return list(self.fingerprints)

    @property
    def count(self) -> int:
        return len(self.fingerprints)

    def mean(self) -> torch.Tensor:
        """``Wbar``: the mean of the members' weights."""
        if not self.count:
            raise ValueError("no member in the subset: the mean model is undefined")
        return self.weight_sum / self.count

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
                raise InvalidContributionError(f"client {c.client!r}: Fisher upload does not match the method")
            if c.client in self.fingerprints and c.client not in leaving:
                raise InvalidContributionError(f"client {c.client!r} is already a member of the subset")

    def apply(self, left: Sequence[Contribution] = (), joined: Sequence[Contribution] = ()) -> None:
        """Subtract the ``left`` contributions and add the ``joined`` ones, all or nothing."""
        self._check(left, joined)
        for c in left:
            self.weight_sum -= c.weights.double()
            if self.fisher_sum is not None:
                self.b -= c.fisher.matvec(c.weights.double())
                self.fisher_sum.remove(c.client, c.fisher)
            del self.fingerprints[c.client]
        for c in joined:
            self.weight_sum += c.weights.double()
            if self.fisher_sum is not None:
                self.b += c.fisher.matvec(c.weights.double())
                self.fisher_sum.add(c.client, c.fisher)
            self.fingerprints[c.client] = c.digest

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Everything the coordinator must keep between edits (for checkpoints)."""
        t = {"weight_sum": self.weight_sum}
        if self.b is not None:
            t["b"] = self.b
            t.update(self.fisher_sum.state_tensors())
        return t

    def state_bytes(self) -> int:
        """Bytes of the persistent state: tensors plus the member fingerprints as JSON."""
        import json

        return serialized_size(self.state_tensors()) + len(
            json.dumps({repr(k): v for k, v in self.fingerprints.items()}).encode()
        )
