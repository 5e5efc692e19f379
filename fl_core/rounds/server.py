"""Server optimizers: how the aggregated client update moves the global weights."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import cast

import torch

from .config import RoundConfig, ServerOpt


class ServerOptimizer(ABC):
    """Applies an aggregated update (a pseudo-gradient pointing downhill) to the weights."""

    @abstractmethod
    def step(self, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """New weights from ``weights`` and the aggregated ``update``."""

    def state(self) -> dict[str, torch.Tensor]:
        """Tensors to checkpoint (safetensors)."""
        return {}


class AvgServer(ServerOptimizer):
    """FedAvg: ``w + server_lr * update`` (server_lr = 1 is plain averaging)."""

    def __init__(self, server_lr: float = 1.0) -> None:
        self.server_lr = server_lr

    def step(self, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        return weights + self.server_lr * update


class AdamServer(ServerOptimizer):
    """FedAdam (Reddi et al., 2021), with no bias correction, as in that paper."""

    def __init__(self, server_lr: float, beta1: float, beta2: float, tau: float) -> None:
        self.server_lr, self.beta1, self.beta2, self.tau = server_lr, beta1, beta2, tau
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def step(self, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        if self.m is None:
            self.m = torch.zeros_like(update)
            self.v = torch.full_like(update, self.tau**2)
        assert self.v is not None  # set together with self.m
        self.m = self.beta1 * self.m + (1 - self.beta1) * update
        self.v = self.beta2 * self.v + (1 - self.beta2) * update * update
        return weights + self.server_lr * self.m / (self.v.sqrt() + self.tau)

    def state(self) -> dict[str, torch.Tensor]:
        if self.m is None:
            return {}
        return {"m": self.m, "v": cast(torch.Tensor, self.v)}  # v is set together with m


def build_server(cfg: RoundConfig) -> ServerOptimizer:
    """The server optimizer ``cfg.server`` names."""
    if cfg.server is ServerOpt.ADAM:
        return AdamServer(cfg.server_lr, cfg.adam_beta1, cfg.adam_beta2, cfg.adam_tau)
    return AvgServer(cfg.server_lr)
