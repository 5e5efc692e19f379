"""The solver benchmarks' shared problem (bench/projection.py, bench/kfac_solve.py): MNIST-style
clients of the two-layer CNN, trained with the current code, each with its K-FAC Fisher."""

from __future__ import annotations

import argparse
import time

from fl_core.contribution import Contribution
from fl_core.experiment import OneShotSetup
from fl_core.training import TrainConfig


def kfac_clients(args: argparse.Namespace) -> tuple[OneShotSetup, list[Contribution], float]:
    """The setup, every client's contribution and the seconds their training + K-FAC took, for
    ``args.dataset``, ``args.clients`` x ``args.samples_per_client`` samples, ``args.epochs``."""
    setup = OneShotSetup(dataset=args.dataset, num_clients=args.clients, alpha=0.5, model="cnn", seed=args.seed,
                         train=TrainConfig(epochs=args.epochs, fisher="kfac"),
                         max_train_samples=args.samples_per_client * args.clients)
    pool = setup.pool()
    t0 = time.perf_counter()
    contributions = [pool.train(c) for c in range(args.clients)]
    return setup, contributions, time.perf_counter() - t0
