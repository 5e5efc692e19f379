"""Fisher representations behind one interface, and a registry by :class:`FisherKind`."""

from __future__ import annotations

import torch
from torch import nn

from .base import FisherKind, FisherLabels, FisherRep, FisherSum
from .capture import LayerSpec, layer_specs
from .diagonal import DiagonalFisher, DiagonalSum
from .full import FullFisher, FullSum
from .kfac import KFACFisher, KFACSum

REPRESENTATIONS: dict[FisherKind, type[FisherRep]] = {
    FisherKind.DIAGONAL: DiagonalFisher,
    FisherKind.KFAC: KFACFisher,
    FisherKind.FULL: FullFisher,
}


def compute_fisher(
    kind: FisherKind | str, model: nn.Module, x: torch.Tensor, generator: torch.Generator, batch_size: int = 128,
    labels: FisherLabels | str = FisherLabels.EXPECTED,
) -> FisherRep | None:
    """The true Fisher of ``model`` on inputs ``x`` in representation ``kind`` (None for NONE),
    over drawn or expected labels (:class:`FisherLabels`)."""
    kind = FisherKind(kind)
    if kind is FisherKind.NONE:
        return None
    return REPRESENTATIONS[kind].compute(model, x, batch_size, generator, labels)


def new_sum(kind: FisherKind | str, model: nn.Module) -> FisherSum | None:
    """An empty coordinator-side sum for ``kind`` on ``model``'s layout."""
    kind = FisherKind(kind)
    specs = layer_specs(model)
    dim = sum(s.size for s in specs)
    if kind is FisherKind.NONE:
        return None
    if kind is FisherKind.DIAGONAL:
        return DiagonalSum(dim)
    if kind is FisherKind.FULL:
        return FullSum(dim)
    return KFACSum(specs)


__all__ = [
    "FisherKind", "FisherLabels", "FisherRep", "FisherSum", "LayerSpec", "layer_specs", "DiagonalFisher", "DiagonalSum",
    "FullFisher", "FullSum", "KFACFisher", "KFACSum", "compute_fisher", "new_sum", "REPRESENTATIONS",
]
