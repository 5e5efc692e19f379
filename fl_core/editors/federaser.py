"""FedEraser (Liu et al., IWQoS 2021): unlearning by calibrated replay of stored client updates.

Training is FedAvg (``rounds``). Every ``interval`` rounds (rounds 0, interval, 2 interval, ...)
the server keeps each participant's update ``U_i^t`` (what it received). To remove clients, the
server replays only those stored rounds, from W0, with the remaining participants of each:

1. it broadcasts the current calibrated model ``W~`` to them; each runs
   ``ceil(calibration_ratio * local_epochs)`` calibration epochs from ``W~`` and uploads its
   calibration update ``U^_i``;
2. each stored update's magnitude is kept and its direction taken from the calibration:
   ``U~_i = ||U_i|| * U^_i / ||U^_i||``;
3. ``W~ <- W~ + server_lr * mean(U~_i)`` (sample-weighted when ``rounds.weighted``).

Choices where the paper leaves room (written here so results can be read against them):

- Norms are taken per parameter tensor (layer by layer), as the authors' implementation does;
  the paper writes one norm per client update.
- Round 0 starts from W0 in the original run and in the replay alike, so its stored updates
  are used as they are, with no calibration (no client trains, nothing is sent).
- With client sampling (``clients_per_round`` below the population) a stored round replays the
  participants of that round that remain; a stored round with none left is skipped.
- Every removal replays from W0 with the stored updates of the original training (the current
  client set excludes all clients removed so far); a removed client's stored updates are then
  deleted. Additions are not supported (FedEraser is an unlearning method).
- Defaults: ``interval = 2``, ``calibration_ratio = 0.5``, the setting the FedEraser paper
  evaluates with. The replayed model takes one aggregated step per stored round, so with few
  rounds it is less trained than the original (on digits, 20 rounds: 0.73 against 0.89).

Random streams: ``federaser`` (keyed by client and stored round) shuffles calibration training.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from ..payload import ByteKind, serialized_size
from ..rounds import ClientUpdate, local_update
from ..sampler import ordered
from .base import EditReport
from .multiround import MultiRoundEditor, RoundHook, layer_sizes


@dataclass(frozen=True)
class FedEraserConfig:
    """How often updates are stored and how long clients calibrate."""

    interval: int = 2
    calibration_ratio: float = 0.5

    def __post_init__(self) -> None:
        if int(self.interval) < 1:
            raise ValueError(f"federaser.interval must be >= 1, got {self.interval}")
        if not 0 < self.calibration_ratio <= 1:
            raise ValueError(f"federaser.calibration_ratio must lie in (0, 1], got {self.calibration_ratio}")


@dataclass
class StoredUpdate:
    """One participant's update of one stored round, as the server received it."""

    delta: torch.Tensor
    num_samples: int


class FedEraserEditor(MultiRoundEditor):
    name = "federaser"
    needs_avg_server = True

    def __init__(self, *args, options: FedEraserConfig | None = None) -> None:
        super().__init__(*args)
        self.options = options or FedEraserConfig()
        self.stored: dict[int, dict[Hashable, StoredUpdate]] = {}
        self._pending: dict[int, dict[Hashable, StoredUpdate]] = {}
        self._sizes: list[int] | None = None

    @property
    def calibration_epochs(self) -> int:
        return max(1, math.ceil(self.options.calibration_ratio * self.config.local_epochs))

    def _fit_hook(self) -> RoundHook:
        self._pending = {}

        def keep(round_index: int, _before: torch.Tensor, updates: Sequence[ClientUpdate]) -> None:
            if round_index % self.options.interval == 0:
                self._pending[round_index] = {u.client: StoredUpdate(u.delta.clone(), u.num_samples) for u in updates}

        return keep

    def _commit_fit(self, weights: torch.Tensor, clients: set[Hashable]) -> None:
        super()._commit_fit(weights, clients)
        self.stored, self._pending = self._pending, {}

    # -- unlearning ----------------------------------------------------------------------------
    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        self.reject(removed, added, removals=True, additions=False)
        self.charge_request(report, removed, added)
        remaining = self.clients - set(removed)
        strategy = self.new_strategy()  # aggregation rule and the working model
        model = strategy.model()
        weights = self.w0.clone()
        for t in sorted(self.stored):
            members = [c for c in ordered(self.stored[t]) if c in remaining]
            if not members:
                continue
            if t == 0:
                calibrated = [self._as_update(c, t, self.stored[t][c].delta) for c in members]
            else:
                calibrated = []
                for c in members:
                    report.charge(ByteKind.BROADCAST, self.weights_bytes(), c)
                    gen = self.streams.torch("federaser", c, t)
                    fresh = local_update(
                        model, weights, strategy.data_of(c), self.config, gen, c, t, epochs=self.calibration_epochs
                    )
                    report.charge(ByteKind.MODEL_UPLOAD, serialized_size({"delta": fresh.delta}), c)
                    report.compute_s += fresh.compute_s
                    report.max_client_compute_s = max(report.max_client_compute_s, fresh.compute_s)
                    report.client_compute_s[c] = report.client_compute_s.get(c, 0.0) + fresh.compute_s
                    report.client_work[c] = report.client_work.get(c, 0) + fresh.num_samples * self.calibration_epochs
                    report.trained = tuple(ordered(set(report.trained) | {c}))
                    calibrated.append(self._as_update(c, t, self.calibrate(self.stored[t][c].delta, fresh.delta)))
            t0 = time.perf_counter()
            weights = weights + self.config.server_lr * strategy.aggregate(calibrated)
            report.solve_s += time.perf_counter() - t0
            report.subset_size = len(members)
        report.triggered = True
        self.model, self.clients = weights, remaining
        self.stored = {t: {c: u for c, u in ups.items() if c in remaining} for t, ups in self.stored.items()}

    def _as_update(self, client: Hashable, t: int, delta: torch.Tensor) -> ClientUpdate:
        return ClientUpdate(client, t, delta, self.stored[t][client].num_samples, 0.0, 0.0)

    def calibrate(self, stored: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """Per layer: the stored update's norm along the calibration update's direction."""
        if self._sizes is None:
            self._sizes = layer_sizes(self.model_fn())
        out = []
        for old, new in zip(torch.split(stored, self._sizes), torch.split(fresh, self._sizes), strict=True):
            norm = new.norm()
            out.append(new * (old.norm() / norm) if norm > 0 else torch.zeros_like(new))
        return torch.cat(out)

    def state_bytes(self) -> int:
        """The global model plus every stored update (safetensors), which grows with training."""
        tensors = {f"r{t}/{c!r}": u.delta for t, ups in self.stored.items() for c, u in ups.items()}
        return super().state_bytes() + (serialized_size(tensors) if tensors else 0)
