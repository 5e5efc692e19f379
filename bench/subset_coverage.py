"""How much of each class F-SOSA's subset holds in tools/table2.py's MNIST setup (seed 0 or SEED, M = 20,
rho = 0.5, FedFisher's per-client split), per alpha; no training.

    python bench/subset_coverage.py [SEED]
"""

import sys
from typing import cast

import numpy as np

from fl_core.editors import FixedRatio, FSOSAEditor, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.fisher import FisherKind
from fl_core.projection import ProjectionConfig
from fl_core.training import TrainConfig

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
for alpha in (0.1, 0.5, 0.8):
    setup = OneShotSetup(
        dataset="mnist",
        num_clients=20,
        alpha=alpha,
        model="cnn",
        seed=seed,
        train=TrainConfig(epochs=50, lr=0.01, batch_size=64, momentum=0.9, fisher=FisherKind.KFAC, threads=1),
        scheme="per_client",
        validation_samples=500,
    )
    pool = setup.pool()
    ed = cast(
        FSOSAEditor,
        build_editor("fsosa", pool, setup.streams.numpy("subset", "fsosa"), FixedRatio(0.5), ProjectionConfig()),
    )
    ed.sampler.initialize(list(range(20)))  # the same draw as tools/table2.py's F-SOSA fit
    members = sorted(cast(set[int], ed.sampler.members))
    ys = {c: setup.client_data[c].y.numpy() for c in range(20)}
    tot = np.bincount(np.concatenate(list(ys.values())), minlength=10)
    sub = np.bincount(np.concatenate([ys[c] for c in members]), minlength=10)
    share = sub / tot
    print(
        f"alpha {alpha}: members {members}; subset holds {100 * sub.sum() / tot.sum():.1f} % of the images; per class % {np.round(100 * share, 1).tolist()}; rarest {100 * share.min():.1f} %"
    )
