"""The template round shared by every multi-round method (FedAvg, FedProx, FedAdam and the
methods built on them).

A round is four verbs: :meth:`RoundStrategy.begin` draws the participants from the available
clients and broadcasts the global weights; :meth:`RoundStrategy.update` trains one participant
and encodes its uplink; :meth:`RoundStrategy.finish` aggregates the updates that arrived (a
participant that left mid-round is a dropout and simply does not arrive) and steps the server
optimizer. An update with NaN/Inf values or the wrong shape is never aggregated: its client is
quarantined (it sent its uplink, which is charged, but it leaves the client set for the rest of the
run, recorded in the round's report with the reason) and the round goes on without it.
Subclasses override the hooks ``select``, ``encode`` and ``aggregate`` (and may add
state in ``finish``). :meth:`RoundStrategy.run_round` chains the verbs for scripts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn

from ..data import ArrayDataset, ClientData
from ..errors import EditError, EmptyPopulationError, UnknownClientError
from ..payload import ByteAccount, ByteKind, serialized_size, zero_bytes
from ..rng import Streams
from ..sampler import ordered
from ..training import evaluate, resolve_device
from .config import RoundConfig
from .local import ClientUpdate, local_update
from .server import build_server


@dataclass
class RoundReport(ByteAccount):
    """What one round did and what it cost, in real serialized bytes and in modelled fields."""

    method: str
    round: int
    available: int = 0
    selected: tuple = ()
    completed: tuple = ()
    dropped: tuple = ()
    quarantined: dict = field(default_factory=dict)  # client -> why its update was refused
    bytes: dict[str, int] = field(default_factory=zero_bytes)
    fields: dict[str, float] = field(default_factory=lambda: {"uplink": 0.0, "downlink": 0.0})
    transfers: list[dict[str, Any]] = field(default_factory=list)
    compute_s: float = 0.0
    max_client_compute_s: float = 0.0
    client_compute_s: dict = field(default_factory=dict)  # client -> its measured local compute
    client_work: dict = field(default_factory=dict)  # client -> its local training in sample-epochs (deterministic)
    wall_s: float = 0.0
    train_loss: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("selected", "completed", "dropped"):
            d[key] = list(d[key])
        d["total_bytes"] = self.total_bytes
        return d


@dataclass
class Encoded:
    """A client's uplink as sent: the tensor the server will use, its bytes and its fields."""

    delta: torch.Tensor
    nbytes: int
    fields: float
    kind: str = "dense"


@dataclass(frozen=True)
class StrategyInputs:
    """What every multi-round strategy is built from (see :func:`~fl_core.rounds.build_strategy`);
    a strategy's own settings come beside it."""

    model_fn: Callable[[], nn.Module]
    w0: torch.Tensor
    data: ClientData
    config: RoundConfig
    streams: Streams

    def with_config(self, **changes: Any) -> StrategyInputs:
        """The same inputs, the round configuration with ``changes``."""
        return replace(self, config=replace(self.config, **changes))


class RoundStrategy:
    """FedAvg-family training over a changing set of available clients."""

    name = "fedavg"

    def __init__(self, inputs: StrategyInputs) -> None:
        self.model_fn = inputs.model_fn
        self.config = inputs.config
        self.streams = inputs.streams
        self.weights = inputs.w0.detach().clone().float()
        self.w0 = self.weights.clone()
        self.server = build_server(inputs.config)
        self.round = 0
        self._data = inputs.data
        self._model: nn.Module | None = None
        self._open: RoundReport | None = None
        self._updates: list[ClientUpdate] = []
        self.quarantined: dict[Hashable, str] = {}  # client -> why it was taken out

    # -- data and model ------------------------------------------------------------------------
    def data_of(self, client: Hashable) -> ArrayDataset:
        """The training data of ``client`` (raises naming the client if it has none)."""
        try:
            return self._data(client) if callable(self._data) else self._data[client]
        except KeyError:
            raise UnknownClientError(f"client {client!r} has no data") from None

    def model(self) -> nn.Module:
        """The working model (one instance, reloaded for every client)."""
        if self._model is None:
            self._model = self.model_fn().to(resolve_device(self.config.device))
        return self._model

    def evaluate(self, test: ArrayDataset, weights: torch.Tensor | None = None) -> tuple[float, float]:
        """(accuracy, loss) of the global weights (or ``weights``) on ``test``."""
        return evaluate(self.model(), self.weights if weights is None else weights, test)

    # -- hooks -----------------------------------------------------------------------------------
    def select(self, available: Sequence[Hashable]) -> list[Hashable]:
        """Participants of this round: a uniform draw of ``clients_per_round`` (stream ``select``)."""
        pool = ordered(available)
        k = min(self.config.clients_per_round, len(pool))
        rng = self.streams.numpy("select", self.name, self.round)
        return [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]

    def train(self, client: Hashable) -> ClientUpdate:
        """The client's local update from the current global weights."""
        gen = self.streams.torch("train", client, self.round)
        return local_update(self.model(), self.weights, self.data_of(client), self.config, gen, client, self.round)

    def encode(self, update: ClientUpdate) -> Encoded:
        """The uplink payload of ``update``; dense float32 here."""
        nbytes = serialized_size({"delta": update.delta})
        return Encoded(update.delta, nbytes, float(update.delta.numel()))

    def aggregate(self, updates: Sequence[ClientUpdate]) -> torch.Tensor:
        """Sample-weighted (or plain) mean of the arrived updates."""
        weights = torch.tensor(
            [float(u.num_samples) if self.config.weighted else 1.0 for u in updates], dtype=torch.float64
        )
        weights = weights / weights.sum()
        out = torch.zeros_like(updates[0].delta, dtype=torch.float64)
        for w, u in zip(weights, updates, strict=True):
            out += w * u.delta.double()
        return out.float()

    # -- the round ---------------------------------------------------------------------------------
    def begin(self, available: Iterable[Hashable]) -> RoundReport:
        """Open a round: draw participants among ``available`` and broadcast the weights to them."""
        if self._open is not None:
            raise EditError(f"{self.name}: round {self.round} is still open; finish it first")
        available = [c for c in available if c not in self.quarantined]
        if not available:
            raise EmptyPopulationError(f"{self.name}: no client is available for round {self.round}")
        report = RoundReport(self.name, self.round, available=len(available))
        report.selected = tuple(self.select(available))
        size = serialized_size({"weights": self.weights})
        for c in report.selected:
            report.charge(ByteKind.BROADCAST, size, c)
            report.fields["downlink"] += float(self.weights.numel())
        self._open, self._updates = report, []
        report.extra["_t0"] = time.perf_counter()
        return report

    def update(self, client: Hashable) -> ClientUpdate:
        """Train participant ``client`` and charge its uplink; the update counts once finished."""
        report = self._require_open()
        if client not in report.selected:
            raise UnknownClientError(f"{self.name}: client {client!r} is not a participant of round {self.round}")
        if any(u.client == client for u in self._updates) or client in report.quarantined:
            raise EditError(f"{self.name}: client {client!r} already sent its update in round {self.round}")
        update = self.train(client)
        encoded = self.encode(update)
        update.extra["encoding"] = encoded.kind
        update.delta = encoded.delta
        report.charge(ByteKind.MODEL_UPLOAD, encoded.nbytes, client)
        report.fields["uplink"] += encoded.fields
        report.compute_s += update.compute_s
        report.max_client_compute_s = max(report.max_client_compute_s, update.compute_s)
        report.client_compute_s[client] = report.client_compute_s.get(client, 0.0) + update.compute_s
        report.client_work[client] = report.client_work.get(client, 0) + update.num_samples * self.config.local_epochs
        why = self._invalid(update)
        if why is not None:
            report.quarantined[client] = f"client {client!r}: {why}"
            self.quarantined[client] = report.quarantined[client]
        else:
            self._updates.append(update)
        return update

    def _invalid(self, update: ClientUpdate) -> str | None:
        """Why ``update`` cannot be aggregated (None if it can)."""
        delta = update.delta
        if not delta.is_floating_point():
            return f"update has dtype {delta.dtype}, expected floating point"
        if delta.shape != self.weights.shape:
            return f"update has shape {tuple(delta.shape)}, expected {tuple(self.weights.shape)}"
        if not torch.isfinite(delta).all():
            return "update has NaN/Inf values"
        return None

    def finish(self, dropped: Iterable[Hashable] = ()) -> RoundReport:
        """Close the round: drop ``dropped`` participants' updates, aggregate the rest, step."""
        report = self._require_open()
        dropped = set(dropped)
        arrived = [u for u in self._updates if u.client not in dropped]
        report.dropped = tuple(ordered(set(report.selected) - {u.client for u in arrived} - set(report.quarantined)))
        report.completed = tuple(u.client for u in arrived)
        if arrived:
            self.weights = self.server.step(self.weights, self.aggregate(arrived))
            n = sum(u.num_samples for u in arrived)
            report.train_loss = sum(u.loss * u.num_samples for u in arrived) / n
        self.after_round(report, arrived)
        report.wall_s = time.perf_counter() - report.extra.pop("_t0")
        self._open, self._updates = None, []
        self.round += 1
        return report

    def after_round(self, report: RoundReport, arrived: Sequence[ClientUpdate]) -> None:
        """Hook for methods that keep history (caches, stored updates, per-client scores)."""

    def run_round(self, available: Iterable[Hashable], dropped: Iterable[Hashable] = ()) -> RoundReport:
        """One whole round; ``dropped`` participants train but their uplink never arrives."""
        report = self.begin(available)
        dropped = set(dropped)
        for c in report.selected:
            if c not in dropped:
                self.update(c)
        return self.finish(dropped)

    def fit(self, clients: Iterable[Hashable], rounds: int | None = None) -> list[RoundReport]:
        """``rounds`` (default ``config.rounds``) rounds over a fixed client set."""
        clients = list(clients)
        return [self.run_round(clients) for _ in range(self.config.rounds if rounds is None else rounds)]

    def _require_open(self) -> RoundReport:
        if self._open is None:
            raise EditError(f"{self.name}: no round is open; call begin() first")
        return self._open
