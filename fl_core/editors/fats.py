"""FATS-CU (Tao et al., VLDB 2024), client unlearning with stabilised FedAvg.

Training is FedAvg in which each round samples ``clients_per_round`` clients and each sampled
client trains on a uniform ``sample_rate`` fraction of its data. Sampling makes the training
stable (a client changes the output's law only through the rounds it is sampled in), so a
removal is exact and often free:

- if the removed client was never sampled, nothing changes (only the request is sent);
- otherwise the server restores the checkpoint of the first round ``t0`` the client was sampled
  in and recomputes rounds ``t0 .. R-1`` on the remaining clients.

The server stores the global weights at the start of every round and the sampling record.

Choices where the paper leaves room:

- Client sampling is by priority: every (round, client) pair gets a uniform key from stream
  ``fats_select`` and a round takes the ``clients_per_round`` available clients with the
  smallest keys. That is the uniform law over size-k subsets, and removing a client that was
  not chosen leaves the choice unchanged, while removing a chosen one brings in the next key,
  a uniform replacement among the rest (the maximal coupling FATS relies on). Hence a removal
  followed by recomputation gives *exactly* the model retraining on the remaining clients
  gives with the same run seed, which is what the tests check.
- Sample subsampling draws ``ceil(sample_rate * n)`` of a client's ``n`` samples without
  replacement per round (stream ``fats_samples``, keyed by client and round); the default
  ``sample_rate = 0.5``.
- Additions are not supported: seed 000 notes that FATS does not support client addition.

Random streams: ``fats_select`` (round, client), ``fats_samples`` (client, round) and ``train``
(client, round) for shuffling.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..payload import serialized_size
from ..rounds import ClientUpdate, RoundStrategy, StrategyInputs, local_update
from ..sampler import ordered
from .base import EditReport
from .multiround import MultiRoundEditor, RoundHook


@dataclass(frozen=True)
class FATSConfig:
    """The fraction of its data a sampled client trains on in a round."""

    sample_rate: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.sample_rate <= 1:
            raise ValueError(f"fats.sample_rate must lie in (0, 1], got {self.sample_rate}")


class FATSStrategy(RoundStrategy):
    """FedAvg with priority client sampling and per-round sample subsampling."""

    name = "fats"

    def __init__(self, inputs: StrategyInputs, *, options: FATSConfig) -> None:
        super().__init__(inputs)
        self.options = options

    def select(self, available: Sequence[Hashable]) -> list[Hashable]:
        pool = ordered(available)
        k = min(self.config.clients_per_round, len(pool))
        keys = [self.streams.numpy("fats_select", self.round, c).random() for c in pool]
        chosen = sorted(range(len(pool)), key=keys.__getitem__)[:k]
        return [pool[i] for i in sorted(chosen)]

    def train(self, client: Hashable) -> ClientUpdate:
        data = self.data_of(client)
        n = len(data)
        if self.options.sample_rate < 1 and n > 0:
            size = max(1, math.ceil(self.options.sample_rate * n))
            idx = self.streams.numpy("fats_samples", client, self.round).choice(n, size=size, replace=False)
            data = data.subset(np.sort(idx))
        gen = self.streams.torch("train", client, self.round)
        return local_update(self.model(), self.weights, data, self.config, gen, client, self.round)


class FATSEditor(MultiRoundEditor):
    name = "fats"
    strategy_name = "fats"
    needs_avg_server = True

    def __init__(self, *args, options: FATSConfig | None = None) -> None:
        super().__init__(*args)
        self.options = options or FATSConfig()
        self.checkpoints: list[torch.Tensor] = []  # global weights at the start of each round
        self.selected: list[tuple] = []  # who was sampled in each round
        self._pending: tuple[list, list] = ([], [])

    def new_strategy(self, weights: torch.Tensor | None = None, start_round: int = 0) -> RoundStrategy:
        strategy = FATSStrategy(self.strategy_inputs(), options=self.options)
        return self._position(strategy, weights, start_round)

    def _recorder(self, checkpoints: list, selected: list) -> RoundHook:
        def keep(_round: int, before: torch.Tensor, updates: Sequence[ClientUpdate]) -> None:
            checkpoints.append(before.clone())
            selected.append(tuple(u.client for u in updates))

        return keep

    def _fit_hook(self) -> RoundHook:
        self._pending = ([], [])
        return self._recorder(*self._pending)

    def _commit_fit(self, weights: torch.Tensor, clients: set[Hashable]) -> None:
        super()._commit_fit(weights, clients)
        (self.checkpoints, self.selected), self._pending = self._pending, ([], [])

    def first_sampled(self, clients: Sequence[Hashable]) -> int | None:
        """The first round in which any of ``clients`` was sampled (None: never)."""
        gone = set(clients)
        return next((t for t, chosen in enumerate(self.selected) if gone.intersection(chosen)), None)

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        self.reject(removed, added, removals=True, additions=False)
        self.charge_request(report, removed, added)
        remaining = self.clients - set(removed)
        t0 = self.first_sampled(removed)
        if t0 is None:
            self.clients = remaining
            return
        checkpoints, selected = self.checkpoints[:t0], self.selected[:t0]
        strategy = self.new_strategy(self.checkpoints[t0], t0)
        weights = self.run_rounds(
            strategy, ordered(remaining), self.config.rounds - t0, report, self._recorder(checkpoints, selected)
        )
        self.model, self.clients = weights.clone(), remaining
        self.checkpoints, self.selected = checkpoints, selected

    def state_bytes(self) -> int:
        """The model, every round's checkpoint (safetensors) and the sampling record (JSON)."""
        ckpt = serialized_size({f"round{t}": w for t, w in enumerate(self.checkpoints)}) if self.checkpoints else 0
        record = len(json.dumps([[repr(c) for c in chosen] for chosen in self.selected]).encode())
        return super().state_bytes() + ckpt + record
