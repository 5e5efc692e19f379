"""One client's local update: E epochs of mini-batch SGD (optionally FedProx) from the global
weights, returned as the difference ``delta = w_local - w_global``."""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..data import ArrayDataset
from ..errors import InvalidContributionError
from ..models import flat_params, load_flat
from ..optim import MomentumSGD
from .config import ClientAlgo, RoundConfig


@dataclass
class ClientUpdate:
    """What a client computed in one round (before any uplink encoding)."""

    client: Hashable
    round: int
    delta: torch.Tensor  # flat, float32, w_local - w_global
    num_samples: int
    loss: float  # mean training loss over the last local epoch
    compute_s: float
    extra: dict[str, Any] = field(default_factory=dict)  # method-specific side results


def local_update(
    model: nn.Module,
    global_flat: torch.Tensor,
    data: ArrayDataset,
    cfg: RoundConfig,
    generator: torch.Generator,
    client: Hashable = None,
    round_index: int = 0,
    epochs: int | None = None,
    prox_mu: float | None = None,
) -> ClientUpdate:
    """Train ``model`` (loaded with ``global_flat``) on ``data``; shuffling comes from ``generator``."""
    if len(data) == 0:
        raise InvalidContributionError(f"client {client!r} has no training samples")
    t0 = time.perf_counter()
    load_flat(model, global_flat)
    device = next(model.parameters()).device
    mu = (cfg.prox_mu if cfg.client_algo is ClientAlgo.PROX else 0.0) if prox_mu is None else prox_mu
    anchor = [p.detach().clone() for p in model.parameters()] if mu > 0 else None
    opt = MomentumSGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    x, y = data.x.to(device), data.y.to(device)
    n = len(data)
    model.train()
    last = 0.0
    for _ in range(cfg.local_epochs if epochs is None else epochs):
        order = torch.randperm(n, generator=generator).to(device)
        total = 0.0
        for start in range(0, n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            total += float(loss.detach()) * len(idx)
            if anchor is not None:
                loss = loss + 0.5 * mu * sum(
                    ((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True)
                )
            loss.backward()
            opt.step()
        last = total / n
    delta = flat_params(model).cpu() - global_flat.cpu()
    return ClientUpdate(client, round_index, delta, n, last, time.perf_counter() - t0)
