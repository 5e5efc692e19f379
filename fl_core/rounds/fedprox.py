"""FedProx (strategy ``fedprox``): FedAvg whose local objective adds ``mu/2 |w - w_t|^2``."""

from __future__ import annotations

from typing import Any

from .config import ClientAlgo
from .strategy import RoundStrategy, StrategyInputs


class FedProxStrategy(RoundStrategy):
    name = "fedprox"


def build_fedprox(inputs: StrategyInputs, **options: Any) -> FedProxStrategy:
    """Strategy ``fedprox`` (option ``prox_mu``, default the round configuration's; it must be
    positive: ``prox_mu = 0`` is FedAvg)."""
    unknown = sorted(set(options) - {"prox_mu"})
    if unknown:
        raise ValueError(f"strategy 'fedprox': unknown options {unknown}; allowed ['prox_mu']")
    mu = options.get("prox_mu", inputs.config.prox_mu)
    if not mu > 0:
        raise ValueError(f"fedprox needs a proximal weight prox_mu > 0, got {mu} (prox_mu = 0 is fedavg)")
    return FedProxStrategy(inputs.with_config(client_algo=ClientAlgo.PROX, prox_mu=mu))
