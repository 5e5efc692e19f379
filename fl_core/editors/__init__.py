"""Editors: every method behind one interface (:class:`Editor`), built by name.

| name      | method                                                        |
|-----------|---------------------------------------------------------------|
| fsosa     | F-SOSA with exact edits F-SOSA-U/-I/-Batch (subset rule given) |
| retrain   | rerun F-SOSA on the new client set for every request          |
| fedfisher | F-SOSA with rho = 1: all clients, Fisher-weighted fusion      |
| fedavg    | one-shot FedAvg: all clients, plain mean of their weights     |
| fedlpa    | FedLPA: layer-wise Laplace posteriors, product of Gaussians; reruns on edits |
| dense     | DENSE: data-free distillation of the client ensemble; reruns on edits |
| retrain_fedavg | multi-round Retrain: FedAvg from W0 on the new client set (``rounds``) |
| federaser | FedEraser: FedAvg, removal by calibrated replay of stored updates |
| fedrr     | FedRR: FedAvg, removal by rapid quasi-Newton retraining from W0 |
| fats      | FATS-CU: sampled FedAvg, removal recomputes from the client's first round |
| finetune  | Fine-tuning: F-SOSA fit, an arrival fine-tunes the model (E tuned); no removal |

The multi-round editors (``retrain_fedavg``, ``federaser``, ``fedrr``, ``fats``) take their
rounds from ``build_editor(..., rounds=RoundConfig(...))`` (default ``RoundConfig()``) and
their method settings from ``options`` (``FedEraserConfig``, ``FedRRConfig``, ``FATSConfig``,
``FineTuneConfig``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..clients import ClientPool
from ..fisher import FisherKind, new_sum
from ..projection import ProjectionConfig
from ..rounds import RoundConfig
from ..sampler import FixedRatio, FixedSize, SizeRule
from .base import Editor, EditReport
from .dense import DenseConfig, DenseEditor
from .fats import FATSConfig, FATSEditor
from .federaser import FedEraserConfig, FedEraserEditor
from .fedlpa import FedLPAConfig, FedLPAEditor
from .fedrr import FedRRConfig, FedRREditor
from .finetune import FineTuneConfig, FineTuneEditor
from .fsosa import FSOSAEditor
from .multiround import FedAvgRetrainEditor, MultiRoundEditor, UnsupportedRequestError
from .retrain import RetrainEditor


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
    ``options`` configure the multi-round and fine-tuning editors (see the table above).
    ``validator`` scores a model on the server's held-out set and lets the Fisher merges select
    their damping (``fl_core.projection``); by default the pool's (``OneShotSetup.pool`` attaches
    one), None for a pool without."""
    model_fn = model_fn or pool.trainer.model_fn
    if validator is None:
        validator = getattr(pool, "validator", None)
    kind = pool.trainer.config.fisher
    fisher_factory = lambda: new_sum(kind, model_fn())  # noqa: E731
    if name == "fsosa":
        return FSOSAEditor(pool, rule, rng, fisher_factory, projection, validator=validator)
    if name == "retrain":
        return RetrainEditor(pool, rule, rng, fisher_factory, projection, validator=validator)
    if name == "fedfisher":
        if kind is FisherKind.NONE:
            raise ValueError("fedfisher needs a Fisher representation (train.fisher)")
        return FSOSAEditor(pool, FixedRatio(1.0), rng, fisher_factory, projection, name="fedfisher", validator=validator)
    if name == "fedavg":
        return FSOSAEditor(pool, FixedRatio(1.0), rng, lambda: None, projection, name="fedavg")
    if name == "fedlpa":
        return FedLPAEditor(pool)
    if name == "dense":
        return DenseEditor(pool)
    if name in MULTIROUND_EDITORS:
        extra = {} if options is None else {"options": options}
        return MULTIROUND_EDITORS[name].from_pool(pool, rounds, model_fn, **extra)
    if name == "finetune":
        base = FSOSAEditor(pool, rule, rng, fisher_factory, projection, validator=validator)
        return FineTuneEditor.from_pool(pool, base, model_fn, options)
    raise ValueError(f"unknown editor {name!r}; choose one of {sorted(EDITORS)}")


MULTIROUND_EDITORS: dict[str, type[MultiRoundEditor]] = {
    "retrain_fedavg": FedAvgRetrainEditor, "federaser": FedEraserEditor, "fedrr": FedRREditor, "fats": FATSEditor,
}

EDITORS = ("fsosa", "retrain", "fedfisher", "fedavg", "fedlpa", "dense", *MULTIROUND_EDITORS, "finetune")

__all__ = ["Editor", "EditReport", "FSOSAEditor", "RetrainEditor", "FedLPAEditor", "FedLPAConfig", "DenseEditor",
           "DenseConfig", "build_editor", "EDITORS", "FixedRatio", "FixedSize", "MultiRoundEditor",
           "FedAvgRetrainEditor", "FedEraserEditor", "FedEraserConfig", "FedRREditor", "FedRRConfig", "FATSEditor",
           "FATSConfig", "FineTuneEditor", "FineTuneConfig", "UnsupportedRequestError"]
