"""A one-shot experiment in a few lines: data, partition, shared init and a client pool.

Scripts, the command line and the co-simulation all build their federated setup through
:class:`OneShotSetup`, so that a given (dataset, partition, model, seed) means the same
clients and the same W0 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .clients import ClientPool
from .data import ArrayDataset, load_train_test
from .models import build_model, flat_params
from .partition import dirichlet_partition, group_partition
from .rng import Streams
from .training import LocalTrainer, TrainConfig, apply_threads


@dataclass
class OneShotSetup:
    """Dataset split among ``num_clients`` clients (Dirichlet ``alpha``, or by writer for
    FEMNIST when ``alpha`` is None), a model, the shared init W0 and a pool of clients."""

    dataset: str = "digits"
    num_clients: int = 20
    alpha: float | None = 0.5
    model: str = "cnn"
    seed: int = 0
    train: TrainConfig = field(default_factory=TrainConfig)
    max_train_samples: int | None = None
    max_test_samples: int | None = None
    data_root: str | None = None

    def __post_init__(self) -> None:
        self.streams = Streams(self.seed)
        train, test = load_train_test(self.dataset, root=self.data_root)
        if self.max_train_samples and len(train) > self.max_train_samples:
            idx = self.streams.numpy("partition", "subsample").choice(len(train), self.max_train_samples, replace=False)
            train = train.subset(np.sort(idx))
        if self.max_test_samples and len(test) > self.max_test_samples:
            test = test.subset(np.arange(self.max_test_samples))
        self.train_set, self.test_set = train, test
        rng = self.streams.numpy("partition")
        if self.alpha is None:
            if train.groups is None:
                raise ValueError(f"dataset {self.dataset!r} has no writer ids: give a Dirichlet alpha")
            parts = group_partition(train.groups, self.num_clients, rng)
        else:
            parts = dirichlet_partition(train.y.numpy(), self.num_clients, self.alpha, rng)
        self.client_data: dict[int, ArrayDataset] = {i: train.subset(p) for i, p in enumerate(parts)}
        torch.manual_seed(self.streams.seed("init"))
        model = self.model_fn()
        self.w0 = flat_params(model)
        self.threads = apply_threads(self.train, model)

    def model_fn(self) -> torch.nn.Module:
        kwargs = {"hidden": (32,)} if self.model == "mlp" else {}
        return build_model(self.model, self.train_set.input_shape, self.train_set.num_classes, **kwargs)

    def pool(self, reuse: bool = True) -> ClientPool:
        return ClientPool(LocalTrainer(self.model_fn, self.w0, self.train, self.streams), self.client_data, reuse=reuse)
