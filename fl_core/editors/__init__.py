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

Each entry of :data:`EDITORS` says what the method claims of the model it releases
(:class:`Exactness`): F-SOSA and Retrain are exact in distribution (the model is the merge of the
recorded subset), FedFisher and one-shot FedAvg exact, FedLPA, DENSE, multi-round Retrain and FATS
exact by rerun, FedEraser, FedRR and Fine-tuning not exact (with the editor whose fresh fit is their
exact refit); :meth:`Editor.refit` gives that fresh fit, for ``vmc certify``.

The multi-round editors (``retrain_fedavg``, ``federaser``, ``fedrr``, ``fats``) take their
rounds from ``build_editor(..., rounds=RoundConfig(...))`` (default ``RoundConfig()``) and
their method settings from ``options`` (``FedEraserConfig``, ``FedRRConfig``, ``FATSConfig``,
``FineTuneConfig``).
"""

from __future__ import annotations

from ..sampler import FixedRatio, FixedSize
from .base import Editor, EditReport
from .dense import DenseConfig, DenseEditor
from .fats import FATSConfig, FATSEditor
from .federaser import FedEraserConfig, FedEraserEditor
from .fedlpa import FedLPAConfig, FedLPAEditor
from .fedrr import FedRRConfig, FedRREditor
from .finetune import FineTuneConfig, FineTuneEditor
from .fsosa import FSOSAEditor
from .multiround import FedAvgRetrainEditor, MultiRoundEditor, UnsupportedRequestError
from .registry import EDITORS, EditorInputs, EditorKind, Exactness, build_editor, editor_options
from .retrain import RetrainEditor

__all__ = [
    "Editor",
    "EditReport",
    "EditorInputs",
    "EditorKind",
    "Exactness",
    "editor_options",
    "FSOSAEditor",
    "RetrainEditor",
    "FedLPAEditor",
    "FedLPAConfig",
    "DenseEditor",
    "DenseConfig",
    "build_editor",
    "EDITORS",
    "FixedRatio",
    "FixedSize",
    "MultiRoundEditor",
    "FedAvgRetrainEditor",
    "FedEraserEditor",
    "FedEraserConfig",
    "FedRREditor",
    "FedRRConfig",
    "FATSEditor",
    "FATSConfig",
    "FineTuneEditor",
    "FineTuneConfig",
    "UnsupportedRequestError",
]
