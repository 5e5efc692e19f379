"""An upload that never arrives (the pool raises ``UploadLostError``, as a Flower node's lost reply
does): F-SOSA keeps the drawn client a member without a contribution, aggregates only what
arrived, and once it is taken out the subset and the model are those of an editor that received
the upload and removed it."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import torch

from fl_core.clients import ClientPool
from fl_core.contribution import Contribution
from fl_core.editors import FixedSize, build_editor
from fl_core.errors import UploadLostError
from fl_core.fisher import new_sum
from fl_core.projection import project
from fl_core.stats import SufficientStatistics
from fl_core.training import LocalTrainer, TrainConfig


class LosingPool(ClientPool):
    """A pool whose ``lost`` clients' uploads never arrive; it counts what is asked of each client."""

    def __init__(self, tiny, lost: set[Hashable]) -> None:
        cfg = TrainConfig(epochs=1, lr=0.05, batch_size=32, fisher="diagonal")
        super().__init__(LocalTrainer(tiny.model_fn, tiny.w0, cfg, tiny.streams), tiny.data)
        self.lost, self.asked = lost, []

    def train(self, client: Hashable) -> Contribution:
        self.asked.append(("train", client))
        if client in self.lost:
            raise UploadLostError(client, "upload:left_coverage")
        return super().train(client)

    def recall(self, client: Hashable) -> Contribution:
        self.asked.append(("recall", client))
        return super().recall(client)


def merge_of(tiny, pool: ClientPool, members) -> torch.Tensor:
    stats = SufficientStatistics(tiny.w0.numel(), new_sum(pool.trainer.config.fisher, tiny.model_fn()))
    stats.apply(joined=[pool.train(c) for c in sorted(members)])
    return project(stats)[0]


def editors(tiny, size: int, lose: int):
    """The same F-SOSA editor (same draws) over a pool where every upload arrives and one where the
    uploads of ``lose`` of the first fit's members are lost."""
    arrived = build_editor("fsosa", LosingPool(tiny, set()), np.random.default_rng(3), FixedSize(size))
    arrived.fit(range(8))
    lost = set(sorted(arrived.members)[:lose])
    losing = build_editor("fsosa", LosingPool(tiny, lost), np.random.default_rng(3), FixedSize(size))
    losing.fit(range(8))
    return arrived, losing, lost


def test_a_lost_upload_is_not_aggregated_and_its_take_out_matches_removing_it(tiny):
    arrived, losing, lost = editors(tiny, 3, 1)
    (x,) = lost
    assert losing.members == arrived.members and losing.unarrived == {x}
    assert set(losing.stats.members) == arrived.members - {x}  # only what arrived is aggregated
    torch.testing.assert_close(losing.model, merge_of(tiny, arrived.pool, arrived.members - {x}))
    arrived.remove(x)
    losing.pool.asked.clear()
    report = losing.remove(x)  # the take-out
    assert losing.members == arrived.members and not losing.unarrived and report.triggered
    assert ("recall", x) not in losing.pool.asked  # nothing of it to subtract: nothing asked of it
    torch.testing.assert_close(losing.model, arrived.model, rtol=0, atol=1e-6)


def test_a_fit_whose_every_upload_was_lost_holds_no_model_until_one_arrives(tiny):
    arrived, losing, lost = editors(tiny, 1, 1)
    (x,) = lost
    assert losing.model is None and losing.members == {x} and losing.stats.count == 0
    arrived.remove(x)
    losing.remove(x)
    assert losing.members == arrived.members and torch.equal(losing.model, arrived.model)
