"""Fine-tuning (incremental learning baseline): the current model continues training on a new
client's data; removals are not supported.

``fit`` delegates to a base editor (``build_editor`` uses one-shot F-SOSA, so Fine-tuning
starts from the same model as Retrain and F-SOSA-I, as in seed 000's Fig. 3) and adopts its
model and report. On an addition the coordinator broadcasts the current model to the new
client, which trains on its data and uploads the result; that becomes the global model.
Several arrivals in one request are fine-tuned one after the other in canonical order.

Tuning of the epochs E (seed 000: "a tuned number of epochs selected from {5, 10, ..., 50}"),
done per request on the new client's device, since the coordinator holds no data:

1. the client holds out ``holdout`` (default 20%, at least one sample) of its data, drawn by
   stream ``finetune_split`` keyed by the client; it needs at least two samples;
2. it trains on the rest from the current model with the local-training settings of the base
   method (``TrainConfig``: lr, batch size, momentum), in one run of mini-batch SGD up to the
   largest E of the grid (shuffling from stream ``finetune``), and after each grid value
   evaluates the model on the held-out part (training E epochs is exactly the first E epochs
   of that run, so one run serves every candidate);
3. it keeps the E with the best held-out accuracy (ties: the smaller E) and uploads that model.

The client's compute covers the whole run and the evaluations; the bytes are one broadcast, one
upload and the request. The chosen E per client is kept in :attr:`FineTuneEditor.chosen_epochs`.
A held-out split measures the new client's own distribution, which is why Fine-tuning tends
to overfit new clients (the behaviour seed 000 reports).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidContributionError, UnknownClientError
from ..models import flat_params, load_flat
from ..optim import MomentumSGD
from ..payload import ByteKind, control_size, serialized_size
from ..rng import Streams
from ..sampler import ordered
from ..training import TrainConfig, resolve_device
from .base import Editor, EditReport
from .multiround import DataSource, UnsupportedRequestError


@dataclass(frozen=True)
class FineTuneConfig:
    """The grid of epochs E and the client's held-out fraction for choosing among them."""

    epochs_grid: tuple[int, ...] = field(default_factory=lambda: tuple(range(5, 51, 5)))
    holdout: float = 0.2

    def __post_init__(self) -> None:
        grid = tuple(sorted({int(e) for e in self.epochs_grid}))
        if not grid or grid[0] < 1:
            raise ValueError(f"finetune.epochs_grid must list epochs >= 1, got {self.epochs_grid}")
        object.__setattr__(self, "epochs_grid", grid)
        if not 0 < self.holdout < 1:
            raise ValueError(f"finetune.holdout must lie in (0, 1), got {self.holdout}")


@dataclass
class Tuned:
    """A fine-tuned model and how it was chosen."""

    weights: torch.Tensor
    epochs: int
    val_accuracy: dict[int, float]
    compute_s: float


class FineTuneEditor(Editor):
    name = "finetune"

    def __init__(
        self,
        base: Editor,
        model_fn: Callable[[], nn.Module],
        data: DataSource,
        train: TrainConfig,
        streams: Streams,
        options: FineTuneConfig | None = None,
    ) -> None:
        super().__init__()
        self.base = base
        self.model_fn = model_fn
        self.data = data
        self.train_config = train
        self.streams = streams
        self.options = options or FineTuneConfig()
        self.chosen_epochs: dict[Hashable, int] = {}
        self._model_obj: nn.Module | None = None

    @classmethod
    def from_pool(cls, pool, base: Editor, model_fn: Callable | None = None, options: FineTuneConfig | None = None):
        """Fine-tuning over a :class:`~fl_core.clients.ClientPool`, starting from ``base``'s fit."""
        t = pool.trainer
        return cls(base, model_fn or t.model_fn, pool.data_of, t.config, t.streams, options)

    def data_of(self, client: Hashable):
        """The training data of ``client`` (raises naming the client if it has none)."""
        try:
            return self.data(client) if callable(self.data) else self.data[client]
        except KeyError:
            raise UnknownClientError(f"{self.name}: client {client!r} has no data") from None

    # -- editor hooks ------------------------------------------------------------------------------
    def _fit(self, clients: list[Hashable], report: EditReport) -> None:
        inner = self.base.fit(clients)
        for t in inner.transfers:
            report.charge(ByteKind(t["kind"]), t["bytes"], t["client"])
        report.compute_s, report.max_client_compute_s = inner.compute_s, inner.max_client_compute_s
        report.solve_s, report.solve = inner.solve_s, inner.solve
        report.triggered, report.trained = inner.triggered, inner.trained
        report.left, report.joined, report.subset_size = inner.left, inner.joined, inner.subset_size
        assert self.base.model is not None  # the base editor's fit sets its model
        self.model = self.base.model.detach().clone().float()
        self.clients = set(clients)

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        if removed:
            raise UnsupportedRequestError(f"{self.name} cannot remove a client (asked to remove {removed!r})")
        report.charge(ByteKind.CONTROL, control_size({"removed": [], "added": list(added)}))
        weights, chosen = self.model, {}
        for c in ordered(added):
            assert weights is not None  # fit() came first (checked by batch())
            report.charge(ByteKind.BROADCAST, serialized_size({"weights": weights}), c)
            tuned = self.tune(c, weights)
            weights, chosen[c] = tuned.weights, tuned.epochs
            report.charge(ByteKind.MODEL_UPLOAD, serialized_size({"weights": weights}), c)
            report.compute_s += tuned.compute_s
            report.max_client_compute_s = max(report.max_client_compute_s, tuned.compute_s)
        report.trained = tuple(ordered(added))
        report.triggered = True
        self.model, self.clients = weights, self.clients | set(added)
        self.chosen_epochs.update(chosen)

    # -- the client's side -------------------------------------------------------------------------
    def tune(self, client: Hashable, weights: torch.Tensor) -> Tuned:
        """Fine-tune ``weights`` on ``client``'s data, choosing E on its held-out split."""
        data = self.data_of(client)
        n = len(data)
        if n < 2:
            raise InvalidContributionError(f"client {client!r} needs at least 2 samples to fine-tune, has {n}")
        t0 = time.perf_counter()
        n_val = min(n - 1, max(1, round(self.options.holdout * n)))
        perm = torch.from_numpy(self.streams.numpy("finetune_split", client).permutation(n))
        val, fit = data.subset(perm[:n_val].sort().values.numpy()), data.subset(perm[n_val:].sort().values.numpy())
        model = load_flat(self._model(), weights)
        cfg = self.train_config
        opt = MomentumSGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        gen = self.streams.torch("finetune", client)
        device = next(model.parameters()).device
        x, y = fit.x.to(device), fit.y.to(device)
        best, accuracy = None, {}
        for epoch in range(1, self.options.epochs_grid[-1] + 1):
            model.train()
            order = torch.randperm(len(fit), generator=gen).to(device)
            for start in range(0, len(fit), cfg.batch_size):
                idx = order[start : start + cfg.batch_size]
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x[idx]), y[idx]).backward()
                opt.step()
            if epoch in self.options.epochs_grid:
                current = flat_params(model).cpu()
                accuracy[epoch] = _accuracy(model, val, device)
                if best is None or accuracy[epoch] > accuracy[best[0]]:
                    best = (epoch, current)
        assert best is not None  # the grid's epochs are all run
        return Tuned(best[1], best[0], accuracy, time.perf_counter() - t0)

    def _model(self) -> nn.Module:
        if self._model_obj is None:
            self._model_obj = self.model_fn().to(resolve_device(self.train_config.device))
        return self._model_obj

    def state_bytes(self) -> int:
        """The coordinator keeps only the current model."""
        return serialized_size({"weights": self.model}) if self.model is not None else 0


@torch.no_grad()
def _accuracy(model: nn.Module, data, device: torch.device) -> float:
    """Accuracy of ``model`` as it stands on ``data`` (without reloading its weights)."""
    model.eval()
    return float((model(data.x.to(device)).argmax(1) == data.y.to(device)).float().mean())
