"""Multi-round editors: the FedAvg family (``fl_core.rounds``) behind the :class:`Editor` interface.

:class:`MultiRoundEditor` adapts a :class:`~fl_core.rounds.RoundStrategy` to the editor
template: ``fit`` runs ``rounds.rounds`` rounds over the client set, and every round a request
runs (retraining, calibration, replay) is folded into that request's single
:class:`EditReport`:

- bytes: each round's real transfers (safetensors sizes) by :class:`ByteKind`, client by client,
  plus one control message per edit request;
- ``compute_s``: local training summed over every client update of every round;
  ``max_client_compute_s``: the slowest single client update (clients of a round train in
  parallel);
- ``solve_s``: the server's own work, measured: aggregation and the optimizer step of each round
  (``RoundStrategy.finish``) plus any method-specific server computation;
- ``triggered``: whether the request changed the model; ``trained``: every client that trained.

``left``/``joined``/``subset_size`` describe F-SOSA's subset and stay empty/zero here except
``subset_size``, the participants of the request's last round.

:class:`FedAvgRetrainEditor` (``retrain_fedavg``) is the multi-round reference: FedAvg from W0
on the new client set for every request, beside the one-shot ``retrain``. Random streams: the
strategies' own ``select`` (keyed by strategy name and round) and ``train`` (client, round).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch import nn

from ..data import ArrayDataset, ClientData
from ..errors import EditError, InvalidContributionError, UnknownClientError
from ..payload import ByteKind, control_size, serialized_size
from ..rng import Streams
from ..rounds import ClientUpdate, RoundConfig, RoundReport, RoundStrategy, ServerOpt, StrategyInputs
from ..sampler import ordered
from .base import Editor, EditReport

DataSource = ClientData
RoundHook = Callable[[int, torch.Tensor, Sequence[ClientUpdate]], None]


class UnsupportedRequestError(EditError):
    """The method cannot serve this kind of request by design (e.g. a removal for fine-tuning)."""


def absorb(report: EditReport, rr: RoundReport) -> None:
    """Fold one round's transfers, compute and participants into an edit report."""
    for t in rr.transfers:
        report.charge(ByteKind(t["kind"]), t["bytes"], t["client"])
    report.compute_s += rr.compute_s
    report.max_client_compute_s = max(report.max_client_compute_s, rr.max_client_compute_s)
    for c, s in rr.client_compute_s.items():
        report.client_compute_s[c] = report.client_compute_s.get(c, 0.0) + s
    for c, w in rr.client_work.items():
        report.client_work[c] = report.client_work.get(c, 0) + w
    report.trained = tuple(ordered(set(report.trained) | set(rr.completed)))
    report.subset_size = len(rr.selected)


def layer_sizes(model: nn.Module) -> list[int]:
    """Number of values of each parameter tensor, in flat-vector order."""
    return [p.numel() for p in model.parameters()]


class MultiRoundEditor(Editor):
    """Base of the multi-round editors: FedAvg training and round bookkeeping.

    Subclasses implement ``_edit``; they compute the new state aside and commit it only when
    the request has fully succeeded, so a request that raises leaves the editor unchanged.
    """

    name = "multiround"
    strategy_name = "fedavg"  # the training strategy's name (keys its ``select`` stream)
    needs_avg_server = False

    def __init__(
        self,
        model_fn: Callable[[], nn.Module],
        w0: torch.Tensor,
        data: DataSource,
        rounds: RoundConfig,
        streams: Streams,
    ) -> None:
        super().__init__()
        if self.needs_avg_server and rounds.server is not ServerOpt.AVG:
            raise ValueError(f"{self.name}: rounds.server must be 'avg' (plain FedAvg), got {rounds.server.value!r}")
        self.model_fn = model_fn
        self.w0 = w0.detach().clone().float()
        self.data = data
        self.config = rounds
        self.streams = streams
        self._weights_bytes: int | None = None

    @classmethod
    def from_pool(cls, pool, rounds: RoundConfig | None = None, model_fn: Callable | None = None, **kwargs: Any):
        """The editor over a :class:`~fl_core.clients.ClientPool`'s data, W0 and streams."""
        t = pool.trainer
        return cls(model_fn or t.model_fn, t.w0, pool.data_of, rounds or RoundConfig(), t.streams, **kwargs)

    def data_of(self, client: Hashable) -> ArrayDataset:
        """The training data of ``client`` (raises naming the client if it has none)."""
        try:
            return self.data(client) if callable(self.data) else self.data[client]
        except KeyError:
            raise UnknownClientError(f"{self.name}: client {client!r} has no data") from None

    def check_data(self, clients: Sequence[Hashable]) -> None:
        """Fail before any training if a client has no data (whether or not it gets sampled)."""
        for c in clients:
            if len(self.data_of(c)) == 0:
                raise InvalidContributionError(f"{self.name}: client {c!r} has no training samples")

    # -- rounds --------------------------------------------------------------------------------
    def strategy_inputs(self) -> StrategyInputs:
        """What this editor's round strategies are built from: its model, W0, data, rounds and streams."""
        return StrategyInputs(self.model_fn, self.w0, self.data, self.config, self.streams)

    def new_strategy(self, weights: torch.Tensor | None = None, start_round: int = 0) -> RoundStrategy:
        """A fresh FedAvg strategy at ``weights`` (default W0) and round ``start_round``."""
        strategy = RoundStrategy(self.strategy_inputs())
        strategy.name = self.strategy_name
        return self._position(strategy, weights, start_round)

    @staticmethod
    def _position(strategy: RoundStrategy, weights: torch.Tensor | None, start_round: int) -> RoundStrategy:
        if weights is not None:
            strategy.weights = weights.detach().clone().float()
        strategy.round = start_round
        return strategy

    def run_rounds(
        self,
        strategy: RoundStrategy,
        clients: Sequence[Hashable],
        count: int,
        report: EditReport,
        on_round: RoundHook | None = None,
    ) -> torch.Tensor:
        """Run ``count`` rounds over ``clients`` and account them in ``report``.

        ``on_round(round, weights_before, updates)`` sees every round's starting weights and
        the client updates as the server received them.
        """
        clients = ordered(clients)
        for _ in range(count):
            before = strategy.weights
            rr = strategy.begin(clients)
            updates = [strategy.update(c) for c in rr.selected]
            t0 = time.perf_counter()
            strategy.finish()
            report.solve_s += time.perf_counter() - t0
            absorb(report, rr)
            if on_round is not None:
                on_round(rr.round, before, updates)
        report.triggered = True
        return strategy.weights

    def weights_bytes(self) -> int:
        """Bytes of one model payload (fixed for the run, measured once)."""
        if self._weights_bytes is None:
            self._weights_bytes = serialized_size({"weights": self.w0})
        return self._weights_bytes

    def charge_request(self, report: EditReport, removed: Sequence[Hashable], added: Sequence[Hashable]) -> None:
        """The request message itself (a small JSON control payload)."""
        report.charge(ByteKind.CONTROL, control_size({"removed": list(removed), "added": list(added)}))

    def reject(self, removed: Sequence[Hashable], added: Sequence[Hashable], removals: bool, additions: bool) -> None:
        """Raise :class:`UnsupportedRequestError` for a kind of request the method lacks."""
        if removed and not removals:
            raise UnsupportedRequestError(f"{self.name} cannot remove a client (asked to remove {list(removed)!r})")
        if added and not additions:
            raise UnsupportedRequestError(f"{self.name} cannot add a client (asked to add {list(added)!r})")

    # -- editor hooks -----------------------------------------------------------------------------
    def _fit(self, clients: list[Hashable], report: EditReport) -> None:
        self.check_data(clients)
        strategy = self.new_strategy()
        weights = self.run_rounds(strategy, clients, self.config.rounds, report, self._fit_hook())
        self._commit_fit(weights, set(clients))

    def _fit_hook(self) -> RoundHook | None:
        """What a method records while it trains (stored updates, checkpoints)."""
        return None

    def _commit_fit(self, weights: torch.Tensor, clients: set[Hashable]) -> None:
        self.model = weights.clone()
        self.clients = clients

    def state_bytes(self) -> int:
        """The coordinator keeps the global model between requests."""
        return self.weights_bytes()


class FedAvgRetrainEditor(MultiRoundEditor):
    """Multi-round Retrain: FedAvg from W0 for ``rounds.rounds`` rounds on the new client set."""

    name = "retrain_fedavg"

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        self.check_data(added)
        self.charge_request(report, removed, added)
        clients = (self.clients - set(removed)) | set(added)
        weights = self.run_rounds(self.new_strategy(), ordered(clients), self.config.rounds, report)
        self.model, self.clients = weights.clone(), clients
