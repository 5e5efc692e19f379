"""The request-driven editors by name: one file per method, one table here (:data:`EDITORS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..clients import ClientPool
from ..fisher import FisherKind, FisherSum, new_sum
from ..projection_config import ProjectionConfig
from ..registry import Registry
from ..rounds import RoundConfig
from ..sampler import FixedRatio, SizeRule
from .base import Editor
from .dense import DenseEditor
from .fats import FATSEditor
from .federaser import FedEraserEditor
from .fedlpa import FedLPAEditor
from .fedrr import FedRREditor
from .finetune import FineTuneEditor
from .fsosa import FSOSAEditor
from .multiround import FedAvgRetrainEditor, MultiRoundEditor
from .retrain import RetrainEditor


@dataclass(frozen=True)
class EditorInputs:
    """What an editor is built from (see :func:`build_editor`)."""

    pool: ClientPool
    rng: np.random.Generator
    rule: SizeRule
    projection: ProjectionConfig
    model_fn: Callable
    rounds: RoundConfig | None
    options: Any
    validator: Any

    @property
    def fisher_kind(self) -> FisherKind:
        return self.pool.trainer.config.fisher

    def fisher_sum(self) -> FisherSum | None:
        """An empty coordinator-side Fisher sum of the pool's representation."""
        return new_sum(self.fisher_kind, self.model_fn())


def _fsosa(i: EditorInputs) -> Editor:
    return FSOSAEditor(i.pool, i.rule, i.rng, i.fisher_sum, i.projection, validator=i.validator)


def _retrain(i: EditorInputs) -> Editor:
    return RetrainEditor(i.pool, i.rule, i.rng, i.fisher_sum, i.projection, validator=i.validator)


def _fedfisher(i: EditorInputs) -> Editor:
    if i.fisher_kind is FisherKind.NONE:
        raise ValueError("fedfisher needs a Fisher representation (train.fisher)")
    return FSOSAEditor(
        i.pool, FixedRatio(1.0), i.rng, i.fisher_sum, i.projection, name="fedfisher", validator=i.validator
    )


def _fedavg(i: EditorInputs) -> Editor:
    return FSOSAEditor(i.pool, FixedRatio(1.0), i.rng, lambda: None, i.projection, name="fedavg")


def _multiround(cls: type[MultiRoundEditor]) -> Callable[[EditorInputs], Editor]:
    def build(i: EditorInputs) -> Editor:
        extra = {} if i.options is None else {"options": i.options}
        return cls.from_pool(i.pool, i.rounds, i.model_fn, **extra)

    return build


def _finetune(i: EditorInputs) -> Editor:
    return FineTuneEditor.from_pool(i.pool, _fsosa(i), i.model_fn, i.options)


EDITORS: Registry[Callable[[EditorInputs], Editor]] = Registry(
    "editor",
    {
        "fsosa": _fsosa,
        "retrain": _retrain,
        "fedfisher": _fedfisher,
        "fedavg": _fedavg,
        "fedlpa": lambda i: FedLPAEditor(i.pool),
        "dense": lambda i: DenseEditor(i.pool),
        "retrain_fedavg": _multiround(FedAvgRetrainEditor),
        "federaser": _multiround(FedEraserEditor),
        "fedrr": _multiround(FedRREditor),
        "fats": _multiround(FATSEditor),
        "finetune": _finetune,
    },
)


def build_editor(
    name: str,
    pool: ClientPool,
    rng: np.random.Generator,
    rule: SizeRule = FixedRatio(0.5),
    projection: ProjectionConfig = ProjectionConfig(),
    model_fn: Callable | None = None,
    rounds: RoundConfig | None = None,
    options: Any = None,
    validator: Any = None,
) -> Editor:
    """The editor ``name`` over ``pool``; ``rng`` is its subset-sampling stream; ``rounds`` and
    ``options`` configure the multi-round and fine-tuning editors (see the table in
    :mod:`fl_core.editors`). ``validator`` scores a model on the server's held-out set and lets the
    Fisher merges select their damping (``fl_core.projection``); by default the pool's
    (``OneShotSetup.pool`` attaches one), None for a pool without."""
    factory = EDITORS[name]
    if validator is None:
        validator = getattr(pool, "validator", None)
    return factory(
        EditorInputs(pool, rng, rule, projection, model_fn or pool.trainer.model_fn, rounds, options, validator)
    )
