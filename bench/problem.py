"""The solver benchmarks' shared problem (bench/projection.py, bench/kfac_solve.py,
bench/kfac_low_rank.py): MNIST-style clients of the two-layer CNN, trained with the current code,
each with its K-FAC Fisher. The toolkit is imported only to build it, so a benchmark's worker
running an older checkout can still take its options from here."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fl_core.contribution import Contribution
    from fl_core.experiment import OneShotSetup


def add_problem_arguments(p: argparse.ArgumentParser) -> None:
    """The options :func:`kfac_clients` reads: dataset, clients, samples per client, epochs, seed."""
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--samples-per-client", type=int, default=600)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)


def kfac_clients(args: argparse.Namespace) -> tuple[OneShotSetup, list[Contribution], float]:
    """The setup, every client's contribution and the seconds their training + K-FAC took, for
    ``args.dataset``, ``args.clients`` x ``args.samples_per_client`` samples, ``args.epochs``."""
    from fl_core.experiment import OneShotSetup
    from fl_core.fisher import FisherKind
    from fl_core.training import TrainConfig

    setup = OneShotSetup(
        dataset=args.dataset,
        num_clients=args.clients,
        alpha=0.5,
        model="cnn",
        seed=args.seed,
        train=TrainConfig(epochs=args.epochs, fisher=FisherKind.KFAC),
        max_train_samples=args.samples_per_client * args.clients,
    )
    pool = setup.pool()
    t0 = time.perf_counter()
    contributions = [pool.train(c) for c in range(args.clients)]
    return setup, contributions, time.perf_counter() - t0
