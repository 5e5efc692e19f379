"""Fisher representations behind one interface, and a registry by :class:`FisherKind`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from ..registry import Registry
from .base import FisherKind, FisherLabels, FisherRep, FisherSum
from .capture import LayerSpec, layer_specs
from .diagonal import DiagonalFisher, DiagonalSum
from .full import FullFisher, FullSum
from .kfac import KFACFisher, KFACSum


class FisherFactory(Protocol):
    """What a :class:`FisherRep` class offers to compute one client's Fisher (its ``compute``)."""

    def compute(
        self,
        model: nn.Module,
        x: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        labels: FisherLabels | str = ...,
    ) -> FisherRep: ...


@dataclass(frozen=True)
class Representation:
    """One Fisher representation: what a client computes and the coordinator's sum of them."""

    fisher: FisherFactory  # a FisherRep class
    new_sum: Callable[[Sequence[LayerSpec]], FisherSum]


REPRESENTATIONS: Registry[Representation] = Registry(
    "Fisher representation",
    {
        FisherKind.DIAGONAL.value: Representation(
            DiagonalFisher, lambda specs: DiagonalSum(sum(s.size for s in specs))
        ),
        FisherKind.KFAC.value: Representation(KFACFisher, lambda specs: KFACSum(list(specs))),
        FisherKind.FULL.value: Representation(FullFisher, lambda specs: FullSum(sum(s.size for s in specs))),
    },
)


def compute_fisher(
    kind: FisherKind | str,
    model: nn.Module,
    x: torch.Tensor,
    generator: torch.Generator,
    batch_size: int = 128,
    labels: FisherLabels | str = FisherLabels.EXPECTED,
) -> FisherRep | None:
    """The true Fisher of ``model`` on inputs ``x`` in representation ``kind`` (None for NONE),
    over drawn or expected labels (:class:`FisherLabels`)."""
    kind = FisherKind(kind)
    if kind is FisherKind.NONE:
        return None
    return REPRESENTATIONS[kind.value].fisher.compute(model, x, batch_size, generator, labels)


def new_sum(kind: FisherKind | str, model: nn.Module) -> FisherSum | None:
    """An empty coordinator-side sum for ``kind`` on ``model``'s layout."""
    kind = FisherKind(kind)
    if kind is FisherKind.NONE:
        return None
    return REPRESENTATIONS[kind.value].new_sum(layer_specs(model))


__all__ = [
    "FisherKind",
    "FisherLabels",
    "FisherRep",
    "FisherSum",
    "LayerSpec",
    "layer_specs",
    "DiagonalFisher",
    "DiagonalSum",
    "FullFisher",
    "FullSum",
    "KFACFisher",
    "KFACSum",
    "compute_fisher",
    "new_sum",
    "REPRESENTATIONS",
    "Representation",
]
