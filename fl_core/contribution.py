"""A client's contribution: its trained weights and Fisher, plus what it cost to compute."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import torch

from .errors import InvalidContributionError
from .fisher import FisherRep
from .payload import digest, serialized_size


@dataclass
class Contribution:
    """``(W_i, F_i)`` of client ``client`` as uploaded (already at upload precision).

    ``compute_s`` is the measured wall-clock of the local training and Fisher computation that
    produced it; a cached contribution charges this same figure again when it is re-used by a
    method that would have recomputed it.
    """

    client: Hashable
    weights: torch.Tensor
    fisher: FisherRep | None
    num_samples: int
    compute_s: float = 0.0
    train_s: float = 0.0
    fisher_s: float = 0.0
    _digest: str | None = field(default=None, repr=False)

    def model_tensors(self) -> dict[str, torch.Tensor]:
        return {"weights": self.weights}

    @property
    def model_bytes(self) -> int:
        return serialized_size(self.model_tensors())

    @property
    def fisher_bytes(self) -> int:
        return 0 if self.fisher is None else serialized_size(self.fisher.tensors())

    @property
    def digest(self) -> str:
        """Fingerprint of the uploaded payload (model and Fisher)."""
        if self._digest is None:
            t = dict(self.model_tensors())
            if self.fisher is not None:
                t.update({f"fisher.{k}": v for k, v in self.fisher.tensors().items()})
            self._digest = digest(t)
        return self._digest

    def model_only(self) -> Contribution:
        """The same contribution without its Fisher (for methods that upload models only)."""
        if self.fisher is None:
            return self
        return Contribution(
            self.client, self.weights, None, self.num_samples, self.compute_s, self.train_s, self.fisher_s
        )

    def validate(self, dim: int) -> None:
        """Raise :class:`InvalidContributionError` naming the client if the upload is unusable."""
        if not self.weights.is_floating_point():
            raise InvalidContributionError(
                f"client {self.client!r}: model upload has dtype {self.weights.dtype}, expected floating point",
                client=self.client,
            )
        if self.weights.ndim != 1 or self.weights.numel() != dim:
            raise InvalidContributionError(
                f"client {self.client!r}: model upload has shape {tuple(self.weights.shape)}, expected ({dim},)",
                client=self.client,
            )
        if not torch.isfinite(self.weights).all():
            raise InvalidContributionError(
                f"client {self.client!r}: model upload has NaN/Inf values", client=self.client
            )
        if self.fisher is not None:
            if self.fisher.dim != dim:
                raise InvalidContributionError(
                    f"client {self.client!r}: Fisher acts on {self.fisher.dim} parameters, expected {dim}",
                    client=self.client,
                )
            self.fisher.check_finite(self.client)
        if self.num_samples < 1:
            raise InvalidContributionError(f"client {self.client!r}: has no training samples", client=self.client)
