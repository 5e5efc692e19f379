"""The client side: which data each client holds, and the contributions clients keep.

Per seed 000, each active client keeps its own contribution and sends it again when an edit
needs it (a departing member uploads it with its request). :class:`ClientPool` plays all
clients in one process: it computes contributions on demand through a :class:`LocalTrainer`,
keeps them while the client is active, and can re-use a contribution computed earlier for
another method of the same run (they are deterministic), charging its measured compute time.
With a :class:`fl_core.cache.ContributionCache` it also re-uses contributions that another run
or sweep point trained the same way, or their trained weights when only the Fisher differs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from .contribution import Contribution
from .data import ArrayDataset, ClientData
from .errors import UnknownClientError
from .store import ContributionSource

if TYPE_CHECKING:
    from .cache import ContributionCache
from .training import LocalTrainer, Trained


class ClientPool:
    def __init__(
        self,
        trainer: LocalTrainer,
        data: ClientData,
        reuse: bool = True,
        store: ContributionSource | None = None,
        validator: Callable[[torch.Tensor], tuple[float, float]] | None = None,
        cache: ContributionCache | None = None,
    ) -> None:
        self.trainer = trainer
        self.validator = validator  # the server's held-out scorer, shared by the editors on this pool
        self._data = data
        self.reuse = reuse
        self.store = store
        self.cache = cache  # shared across runs and sweep points (content-addressed)
        self._kept: dict[Hashable, Contribution] = {}
        self.trainings = 0  # local trainings actually run (not re-used from this run, a store or the cache)

    def data_of(self, client: Hashable) -> ArrayDataset:
        """The training data of ``client`` (raises naming the client if it has none)."""
        try:
            return self._data(client) if callable(self._data) else self._data[client]
        except KeyError:
            raise UnknownClientError(f"client {client!r} has no data in this pool") from None

    def train(self, client: Hashable) -> Contribution:
        """The client's contribution, trained from W0 (or the identical one computed before)."""
        if self.reuse and client in self._kept:
            return self._kept[client]
        contribution = self.store.get(client) if (self.reuse and self.store is not None) else None
        if contribution is None:
            before = self.trainings
            data = self.data_of(client)
            if self.reuse and self.cache is not None:
                contribution = self.cache.contribution(self.trainer, client, data, lambda: self._train(client, data))
            else:
                self.trainings += 1
                contribution = self.trainer.contribute(client, data)
            if self.store is not None:
                self.store.put(contribution, trained=self.trainings > before)
        contribution = self._upload_form(contribution)
        self._kept[client] = contribution
        return contribution

    def _train(self, client: Hashable, data: ArrayDataset) -> Trained:
        self.trainings += 1
        return self.trainer.train(client, data)

    def _upload_form(self, contribution: Contribution) -> Contribution:
        return upload_form(contribution, self.trainer.config.fisher_rank)

    def recall(self, client: Hashable) -> Contribution:
        """What a member sends again so it can be subtracted (recomputed if it was not kept)."""
        return self._kept.get(client) or self.train(client)

    def forget(self, client: Hashable) -> None:
        """The client left: it takes its contribution with it."""
        self._kept.pop(client, None)


def upload_form(contribution: Contribution, fisher_rank: int | None) -> Contribution:
    """The contribution as uploaded: with ``fisher_rank`` (``train.fisher_rank``), its K-FAC
    factors in low-rank form. Stores and caches keep the whole factors, so runs that differ only
    in the rank share their trainings."""
    if fisher_rank is None or contribution.fisher is None:
        return contribution
    return replace(contribution, fisher=contribution.fisher.compress(fisher_rank), _digest=None)
