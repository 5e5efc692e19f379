"""Full Fisher (d x d): exact, for tiny models only (tests and the MLP)."""

from __future__ import annotations

from collections.abc import Hashable

import torch
from torch import nn

from .base import FisherKind, FisherLabels, FisherRep, FisherSum
from .capture import iterate_layer_batches, layer_specs

MAX_FULL_DIM = 20_000


class FullFisher(FisherRep):
    kind = FisherKind.FULL

    def __init__(self, matrix: torch.Tensor) -> None:
        self.matrix = matrix

    @property
    def dim(self) -> int:
        return self.matrix.shape[0]

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        return self.matrix.double() @ v

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"full": self.matrix}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], like: FisherRep | None = None) -> FullFisher:
        return cls(tensors["full"])

    @classmethod
    def compute(
        cls,
        model: nn.Module,
        x: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        labels: FisherLabels | str = FisherLabels.EXPECTED,
    ) -> FullFisher:
        """``E[g g^T]`` from per-sample (and per-label) flat gradients."""
        specs = layer_specs(model)
        d = sum(s.size for s in specs)
        if d > MAX_FULL_DIM:
            raise ValueError(f"full Fisher of a {d}-parameter model is too large (limit {MAX_FULL_DIM})")
        total = torch.zeros(d, d, dtype=torch.float64, device=x.device)
        for layers in iterate_layer_batches(model, x, batch_size, generator, labels):
            per_sample = torch.cat(
                [torch.einsum("snol,nil->snoi", lb.g.double(), lb.a.double()).flatten(2) for lb in layers], dim=2
            ).flatten(0, 1)
            total += per_sample.T @ per_sample
        return cls((total / x.shape[0]).float().cpu())


class FullSum(FisherSum[FullFisher]):
    def __init__(self, dim: int) -> None:
        self.total = torch.zeros(dim, dim, dtype=torch.float64)

    def add(self, member: Hashable, rep: FullFisher, weight: float = 1.0) -> None:
        self.total += weight * rep.matrix.double()

    def remove(self, member: Hashable, rep: FullFisher | None, weight: float = 1.0) -> None:
        if rep is None:
            raise ValueError(f"removing {member!r} from a full Fisher sum needs its uploaded Fisher")
        self.total -= weight * rep.matrix.double()

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        return self.total @ v

    def trace(self) -> float:
        return float(torch.diagonal(self.total).sum())

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"fisher_sum.full": self.total}
