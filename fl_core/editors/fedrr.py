"""FedRR (Liu et al., INFOCOM 2022, "rapid retraining"): unlearning by retraining from scratch
with a quasi-Newton local optimizer, in fewer rounds than plain FedAvg would need.

Training is FedAvg (``rounds``), as the seed paper runs it. To remove clients the server
restarts from W0 and runs ``FedRRConfig.rounds`` rounds over the remaining clients (same
client sampling and aggregation as FedAvg). Each participant replaces SGD by a Newton-type step
whose Hessian is the diagonal empirical Fisher of the mini-batch, ``f = mean_j g_j * g_j`` over
per-sample gradients ``g_j`` (computed with ``torch.func``), with momentum on both the gradient
and the Fisher to damp the approximation's error:

``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) f``, ``w <- w - lr * m^ / (v^ + damping)``,

where ``m^``, ``v^`` are the bias-corrected averages (``/ (1 - b^k)`` after ``k`` steps); the
averages restart every round. Only the model update is uploaded: the Fisher stays on the client.

Choices where the paper leaves room:

- ``rounds``: ``None`` means ``ceil(rounds.rounds / 2)``, half the rounds of the original
  training (the method's point is to converge in fewer rounds).
- ``lr`` and ``damping`` set the step; they are not the SGD learning rate (a Newton step is
  scale-free). Defaults ``lr = 0.01``, ``damping = 0.01``: the middle of the grid
  {0.003, 0.01, 0.03}^2 tried on digits/mlp (20 clients, 10 of 20 rounds), where all but one
  setting reached the accuracy of 20 FedAvg rounds; ``b1 = 0.9``, ``b2 = 0.999`` are the paper's.
- Additions are not supported (FedRR is an unlearning method).

Random streams: ``select`` keyed by ``fedrr`` and the round (who participates in a retraining
round) and ``train`` (client, round) for shuffling, as in FedAvg.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from ..errors import InvalidContributionError
from ..models import flat_params, load_flat
from ..rounds import ClientUpdate, RoundStrategy, StrategyInputs
from .base import EditReport
from .multiround import MultiRoundEditor


@dataclass(frozen=True)
class FedRRConfig:
    """The rapid-retraining optimizer and how many rounds it runs."""

    rounds: int | None = None
    lr: float = 0.01
    damping: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999

    def __post_init__(self) -> None:
        if self.rounds is not None and int(self.rounds) < 1:
            raise ValueError(f"fedrr.rounds must be >= 1, got {self.rounds}")
        if not (self.lr > 0 and self.damping > 0):
            raise ValueError(f"fedrr.lr and fedrr.damping must be > 0, got {self.lr}, {self.damping}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError(f"fedrr.beta1/beta2 must lie in [0, 1), got {self.beta1}, {self.beta2}")


class FedRRStrategy(RoundStrategy):
    """FedAvg rounds whose clients take diagonal-empirical-Fisher Newton steps."""

    name = "fedrr"

    def __init__(self, inputs: StrategyInputs, *, options: FedRRConfig) -> None:
        super().__init__(inputs)
        self.options = options

    def train(self, client: Hashable) -> ClientUpdate:
        data = self.data_of(client)
        if len(data) == 0:
            raise InvalidContributionError(f"client {client!r} has no training samples")
        t0 = time.perf_counter()
        model, cfg, opt = self.model(), self.config, self.options
        load_flat(model, self.weights)
        device = next(model.parameters()).device
        params = {k: p.detach().clone() for k, p in model.named_parameters()}

        def sample_loss(p, x, y):
            loss = F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))
            return loss, loss.detach()

        per_sample = vmap(grad(sample_loss, has_aux=True), in_dims=(None, 0, 0))
        m = {k: torch.zeros_like(v) for k, v in params.items()}
        v = {k: torch.zeros_like(p) for k, p in params.items()}
        x, y = data.x.to(device), data.y.to(device)
        gen = self.streams.torch("train", client, self.round)
        steps, last = 0, 0.0
        for _ in range(cfg.local_epochs):
            order = torch.randperm(len(data), generator=gen).to(device)
            total = 0.0
            for start in range(0, len(data), cfg.batch_size):
                idx = order[start : start + cfg.batch_size]
                grads, losses = per_sample(params, x[idx], y[idx])
                total += float(losses.sum())
                steps += 1
                c1, c2 = 1 - opt.beta1**steps, 1 - opt.beta2**steps
                for k, gk in grads.items():
                    m[k].mul_(opt.beta1).add_(gk.mean(0), alpha=1 - opt.beta1)
                    v[k].mul_(opt.beta2).add_((gk * gk).mean(0), alpha=1 - opt.beta2)
                    params[k] = params[k] - opt.lr * (m[k] / c1) / (v[k] / c2 + opt.damping)
            last = total / len(data)
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(params[k])
        delta = flat_params(model).cpu() - self.weights.cpu()
        return ClientUpdate(client, self.round, delta, len(data), last, time.perf_counter() - t0)


class FedRREditor(MultiRoundEditor):
    name = "fedrr"
    needs_avg_server = True

    def __init__(self, *args, options: FedRRConfig | None = None) -> None:
        super().__init__(*args)
        self.options = options or FedRRConfig()

    @property
    def retrain_rounds(self) -> int:
        r = self.options.rounds
        return int(r) if r is not None else math.ceil(self.config.rounds / 2)

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        self.reject(removed, added, removals=True, additions=False)
        self.charge_request(report, removed, added)
        remaining = self.clients - set(removed)
        strategy = FedRRStrategy(self.strategy_inputs(), options=self.options)
        weights = self.run_rounds(strategy, list(remaining), self.retrain_rounds, report)
        self.model, self.clients = weights.clone(), remaining
