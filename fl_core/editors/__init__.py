"""Editors: every method behind one interface (:class:`Editor`), built by name.

| name      | method                                                        |
|-----------|---------------------------------------------------------------|
| fsosa     | F-SOSA with exact edits F-SOSA-U/-I/-Batch (subset rule given) |
| retrain   | rerun F-SOSA on the new client set for every request          |
| fedfisher | F-SOSA with rho = 1: all clients, Fisher-weighted fusion      |
| fedavg    | one-shot FedAvg: all clients, plain mean of their weights     |
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..clients import ClientPool
from ..fisher import FisherKind, new_sum
from ..projection import ProjectionConfig
from ..sampler import FixedRatio, FixedSize, SizeRule
from .base import EditReport, Editor
from .fsosa import FSOSAEditor
from .retrain import RetrainEditor


def build_editor(
    name: str,
    pool: ClientPool,
    rng: np.random.Generator,
    rule: SizeRule = FixedRatio(0.5),
    projection: ProjectionConfig = ProjectionConfig(),
    model_fn: Callable | None = None,
) -> Editor:
    """The editor ``name`` over ``pool``; ``rng`` is its subset-sampling stream."""
    model_fn = model_fn or pool.trainer.model_fn
    kind = pool.trainer.config.fisher
    fisher_factory = lambda: new_sum(kind, model_fn())  # noqa: E731
    if name == "fsosa":
        return FSOSAEditor(pool, rule, rng, fisher_factory, projection)
    if name == "retrain":
        return RetrainEditor(pool, rule, rng, fisher_factory, projection)
    if name == "fedfisher":
        if kind is FisherKind.NONE:
            raise ValueError("fedfisher needs a Fisher representation (train.fisher)")
        return FSOSAEditor(pool, FixedRatio(1.0), rng, fisher_factory, projection, name="fedfisher")
    if name == "fedavg":
        return FSOSAEditor(pool, FixedRatio(1.0), rng, lambda: None, projection, name="fedavg")
    raise ValueError(f"unknown editor {name!r}; choose one of {sorted(EDITORS)}")


EDITORS = ("fsosa", "retrain", "fedfisher", "fedavg")

__all__ = ["Editor", "EditReport", "FSOSAEditor", "RetrainEditor", "build_editor", "EDITORS", "FixedRatio", "FixedSize"]
