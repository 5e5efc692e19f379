"""Settings of a multi-round run: local training, client sampling and the server optimizer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ClientAlgo(str, Enum):
    """What a client runs locally: plain SGD (FedAvg) or SGD with a proximal term (FedProx)."""

    SGD = "sgd"
    PROX = "prox"


class ServerOpt(str, Enum):
    """How the server applies the aggregated update: a scaled step (FedAvg) or Adam (FedAdam)."""

    AVG = "avg"
    ADAM = "adam"


@dataclass(frozen=True)
class RoundConfig:
    """One multi-round federated run.

    ``clients_per_round`` clients are drawn uniformly (without replacement) from the available
    ones each round; fewer are taken when fewer are available. FedProx adds
    ``prox_mu / 2 * ||w - w_global||^2`` to the local loss. FedAdam follows Reddi et al. (2021):
    ``m = b1 m + (1 - b1) d``, ``v = b2 v + (1 - b2) d^2``, ``w += server_lr * m / (sqrt(v) + tau)``.
    """

    rounds: int = 20
    clients_per_round: int = 10
    local_epochs: int = 1
    lr: float = 0.01
    batch_size: int = 32
    momentum: float = 0.0
    client_algo: ClientAlgo = ClientAlgo.SGD
    prox_mu: float = 0.0
    server: ServerOpt = ServerOpt.AVG
    server_lr: float = 1.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.99
    adam_tau: float = 1e-3
    weighted: bool = True  # sample-weighted aggregation (else a plain mean)
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "client_algo", ClientAlgo(self.client_algo))
        object.__setattr__(self, "server", ServerOpt(self.server))
        for name in ("rounds", "clients_per_round", "local_epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"rounds.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "server_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"rounds.{name} must be > 0, got {getattr(self, name)}")
        if self.prox_mu < 0:
            raise ValueError(f"rounds.prox_mu must be >= 0, got {self.prox_mu}")
        if self.client_algo is ClientAlgo.PROX and self.prox_mu == 0:
            raise ValueError("rounds.client_algo 'prox' needs rounds.prox_mu > 0")
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1 and self.adam_tau > 0):
            raise ValueError("rounds.adam_beta1/adam_beta2 must lie in [0, 1) and adam_tau must be > 0")
