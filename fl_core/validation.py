"""The server's validation scorer: accuracy and loss of a flat model on a fixed held-out set.

The merge selects its regularisation on this set (``fl_core.projection``), so it must be the
same for every method, request and run of a seed: ``OneShotSetup`` holds the samples out of the
training set before the split (no client has them) and hands every editor the same scorer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .data import ArrayDataset
from .training import evaluate


@dataclass
class Validator:
    """``validator(weights) -> (accuracy, loss)`` on ``data`` with a model from ``model_fn``."""

    model_fn: Callable[[], nn.Module]
    data: ArrayDataset
    _model: nn.Module | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if len(self.data) == 0:
            raise ValueError("the validation set is empty: hold out at least one sample or pass no validator")

    def __call__(self, weights: torch.Tensor) -> tuple[float, float]:
        if self._model is None:
            self._model = self.model_fn()
        return evaluate(self._model, weights.float(), self.data)

    def __len__(self) -> int:
        return len(self.data)
