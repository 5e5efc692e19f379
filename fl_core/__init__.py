"""Federated learning core of vmc-sim: data, models, local training, Fisher
representations, sufficient statistics and projection, the F-SOSA editing family and
its baselines. Imports neither ``mobility`` nor ``vmc_sim``.

What a researcher uses::

    from fl_core import OneShotSetup, TrainConfig

    setup = OneShotSetup("digits", num_clients=20, model="mlp", train=TrainConfig(epochs=5))
    fsosa = setup.editor("fsosa", rho=0.5)       # F-SOSA, P_t = floor(0.5 M(t))
    fsosa.fit(range(16))                          # clients 0-15 contribute
    fsosa.remove(3)                               # exact unlearning of client 3
    fsosa.add(16)                                 # client 16 joins
    setup.accuracy(fsosa.model)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers; at run time each is imported when first used
    from .data import DATASETS, ArrayDataset, load_dataset, load_train_test
    from .editors import EDITORS, Editor, EditReport, build_editor
    from .experiment import OneShotSetup
    from .fisher import FisherKind, FisherLabels
    from .models import MODELS, build_model
    from .projection import ProjectionConfig, ProjectionMethod
    from .registry import Registry
    from .rounds import STRATEGIES, RoundConfig, RoundStrategy, build_strategy
    from .sampler import FixedRatio, FixedSize
    from .training import TrainConfig, evaluate

_EXPORTS: dict[str, str] = {
    "DATASETS": ".data",
    "ArrayDataset": ".data",
    "load_dataset": ".data",
    "load_train_test": ".data",
    "EDITORS": ".editors",
    "Editor": ".editors",
    "EditReport": ".editors",
    "build_editor": ".editors",
    "OneShotSetup": ".experiment",
    "FisherKind": ".fisher",
    "FisherLabels": ".fisher",
    "MODELS": ".models",
    "build_model": ".models",
    "ProjectionConfig": ".projection",
    "ProjectionMethod": ".projection",
    "Registry": ".registry",
    "STRATEGIES": ".rounds",
    "RoundConfig": ".rounds",
    "RoundStrategy": ".rounds",
    "build_strategy": ".rounds",
    "FixedRatio": ".sampler",
    "FixedSize": ".sampler",
    "TrainConfig": ".training",
    "evaluate": ".training",
}
"""Each public name and the module it lives in: imported on first use, so that importing the
package (a command that trains nothing) imports nothing heavy."""

__version__ = "0.1.0"

__all__ = [
    "ArrayDataset",
    "DATASETS",
    "EDITORS",
    "EditReport",
    "Editor",
    "FisherKind",
    "FisherLabels",
    "FixedRatio",
    "FixedSize",
    "MODELS",
    "OneShotSetup",
    "ProjectionConfig",
    "ProjectionMethod",
    "Registry",
    "RoundConfig",
    "RoundStrategy",
    "STRATEGIES",
    "TrainConfig",
    "build_editor",
    "build_model",
    "build_strategy",
    "evaluate",
    "load_dataset",
    "load_train_test",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
