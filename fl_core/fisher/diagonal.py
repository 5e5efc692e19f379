"""Diagonal Fisher: one value per parameter, ``F_jj = E[g_j^2]`` over the client's samples."""

from __future__ import annotations

from collections.abc import Hashable

import torch
from torch import nn

from .base import FisherKind, FisherLabels, FisherRep, FisherSum
from .capture import iterate_layer_batches, layer_specs


class DiagonalFisher(FisherRep):
    kind = FisherKind.DIAGONAL

    def __init__(self, diag: torch.Tensor) -> None:
        self.diag = diag

    @property
    def dim(self) -> int:
        return self.diag.numel()

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        return self.diag.double() * v

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"diag": self.diag}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], like: FisherRep | None = None) -> DiagonalFisher:
        return cls(tensors["diag"])

    @classmethod
    def compute(
        cls,
        model: nn.Module,
        x: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        labels: FisherLabels | str = FisherLabels.EXPECTED,
    ) -> DiagonalFisher:
        """Exact per-sample squared gradients, without materialising them for linear layers."""
        specs = layer_specs(model)
        total = torch.zeros(sum(s.size for s in specs), dtype=torch.float64, device=x.device)
        for layers in iterate_layer_batches(model, x, batch_size, generator, labels):
            for lb in layers:
                a = lb.a  # per-batch contractions in the model's dtype, the running sum in float64
                if a.shape[-1] == 1:
                    block = (lb.g[..., 0] ** 2).sum(0).T @ (a[..., 0] ** 2)
                else:
                    block = torch.zeros(a.shape[1], lb.g.shape[2], dtype=a.dtype, device=a.device)
                    for g in lb.g:  # per-sample gradients (N, in, out) of one label, squared in place
                        block += torch.bmm(a, g.transpose(1, 2)).square_().sum(0)
                    block = block.T
                total[lb.spec.offset : lb.spec.offset + lb.spec.size] += block.reshape(-1).double()
        return cls((total / x.shape[0]).float().cpu())


class DiagonalSum(FisherSum[DiagonalFisher]):
    """Dense float64 sum of diagonals; removal subtracts the re-uploaded diagonal."""

    def __init__(self, dim: int) -> None:
        self.total = torch.zeros(dim, dtype=torch.float64)

    def add(self, member: Hashable, rep: DiagonalFisher, weight: float = 1.0) -> None:
        self.total += weight * rep.diag.double()

    def remove(self, member: Hashable, rep: DiagonalFisher | None, weight: float = 1.0) -> None:
        if rep is None:
            raise ValueError(f"removing {member!r} from a diagonal sum needs its uploaded Fisher")
        self.total -= weight * rep.diag.double()

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        return self.total * v

    def trace(self) -> float:
        return float(self.total.sum())

    def diagonal(self) -> torch.Tensor:
        return self.total

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"fisher_sum.diag": self.total}
