"""A one-shot experiment in a few lines: data, partition, shared init and a client pool.

Scripts, the command line and the co-simulation all build their federated setup through
:class:`OneShotSetup`, so that a given (dataset, partition, model, seed) means the same
clients and the same W0 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from .clients import ClientPool
from .data import ArrayDataset, load_train_test
from .models import build_model, flat_params
from .partition import DirichletScheme, dirichlet_split, group_partition
from .projection import ProjectionConfig
from .rng import Streams
from .training import LocalTrainer, TrainConfig, apply_threads, evaluate
from .validation import Validator

if TYPE_CHECKING:
    from .editors import Editor

VALIDATION_SAMPLES = 500  # FedFisher's server-side validation set size
VALIDATION_MAX_SHARE = 0.1  # never more than this share of the training set


@dataclass
class OneShotSetup:
    """Dataset split among ``num_clients`` clients (Dirichlet ``alpha`` with ``scheme``, or by
    writer for FEMNIST when ``alpha`` is None), a model, the shared init W0 and a pool of clients.

    ``validation_samples`` training samples (at most 10 % of the training set) are held out
    before the split as the server's validation set (``validation_set``): no client holds
    them, so a departed client's data never reaches the model through the validation-selected
    merge (``fl_core.projection``). They are drawn from the ``validation`` stream, so the set
    is the same for every method, request and run of a seed.
    """

    dataset: str = "digits"
    num_clients: int = 20
    alpha: float | None = 0.5
    model: str = "cnn"
    seed: int = 0
    train: TrainConfig = field(default_factory=TrainConfig)
    max_train_samples: int | None = None
    max_test_samples: int | None = None
    data_root: str | None = None
    scheme: DirichletScheme | str = DirichletScheme.PER_CLASS
    validation_samples: int = VALIDATION_SAMPLES

    def __post_init__(self) -> None:
        self.scheme = DirichletScheme(self.scheme)
        if self.validation_samples < 0:
            raise ValueError(f"validation_samples must be >= 0, got {self.validation_samples}")
        self.streams = Streams(self.seed)
        train, test = load_train_test(self.dataset, root=self.data_root)
        if self.max_train_samples and len(train) > self.max_train_samples:
            idx = self.streams.numpy("partition", "subsample").choice(len(train), self.max_train_samples, replace=False)
            train = train.subset(np.sort(idx))
        if self.max_test_samples and len(test) > self.max_test_samples:
            test = test.subset(np.arange(self.max_test_samples))
        n_val = min(self.validation_samples, int(VALIDATION_MAX_SHARE * len(train)))
        held = np.sort(self.streams.numpy("validation").choice(len(train), n_val, replace=False))
        self.validation_set = train.subset(held)
        train = train.subset(np.setdiff1d(np.arange(len(train)), held))
        self.train_set, self.test_set = train, test
        rng = self.streams.numpy("partition")
        self.partition_repair: dict[str, int] | None = None  # set when a Dirichlet split moved samples
        if self.alpha is None:
            if train.groups is None:
                raise ValueError(f"dataset {self.dataset!r} has no writer ids: give a Dirichlet alpha")
            parts = group_partition(train.groups, self.num_clients, rng)
        else:
            split = dirichlet_split(train.y.numpy(), self.num_clients, self.alpha, rng, scheme=self.scheme)
            parts = split.parts
            if split.moved:
                self.partition_repair = split.as_dict()
        self.client_data: dict[int, ArrayDataset] = {i: train.subset(p) for i, p in enumerate(parts)}
        torch.manual_seed(self.streams.seed("init"))
        model = self.model_fn()
        self.w0 = flat_params(model)
        self.threads = apply_threads(self.train, model)

    def model_fn(self) -> torch.nn.Module:
        kwargs = {"hidden": (32,)} if self.model == "mlp" else {}
        return build_model(self.model, self.train_set.input_shape, self.train_set.num_classes, **kwargs)

    def validator(self) -> Validator | None:
        """The server's scorer on the held-out validation set (None when none is held out)."""
        return Validator(self.model_fn, self.validation_set) if len(self.validation_set) else None

    def pool(self, reuse: bool = True) -> ClientPool:
        """The clients, with the server's validator attached for the editors built on them."""
        return ClientPool(
            LocalTrainer(self.model_fn, self.w0, self.train, self.streams),
            self.client_data,
            reuse=reuse,
            validator=self.validator(),
        )

    def editor(
        self,
        method: str = "fsosa",
        rho: float | None = 0.5,
        subset_size: int | None = None,
        projection: ProjectionConfig | None = None,
        pool: ClientPool | None = None,
    ) -> Editor:
        """An editor of ``method`` (a name of :data:`fl_core.editors.EDITORS`) over this setup's
        clients: a fixed ratio ``rho`` of the current clients (``P_t = floor(rho M(t))``), or a fixed
        ``subset_size`` P; its subset draws come from this seed's stream for ``method``, the same
        stream the co-simulation gives it. Give ``pool`` to share trained clients between editors."""
        from .editors import build_editor
        from .sampler import FixedRatio, FixedSize, SizeRule

        rule: SizeRule
        if subset_size is not None:
            rule = FixedSize(subset_size)
        elif rho is not None:
            rule = FixedRatio(rho)
        else:
            raise ValueError("give rho or subset_size")
        return build_editor(
            method, pool or self.pool(), self.streams.numpy("subset", method), rule, projection or ProjectionConfig()
        )

    def accuracy(self, weights: torch.Tensor) -> float:
        """Test accuracy of the flat ``weights`` (e.g. an editor's ``model``)."""
        return evaluate(self.model_fn(), weights, self.test_set)[0]
