"""FedAvg (strategy ``fedavg``): the template round of :class:`.strategy.RoundStrategy` as it is,
local SGD and the sample-weighted mean of the updates."""

from __future__ import annotations

from typing import Any

from .strategy import RoundStrategy, StrategyInputs


class FedAvgStrategy(RoundStrategy):
    name = "fedavg"


def build_fedavg(inputs: StrategyInputs, **options: Any) -> FedAvgStrategy:
    """Strategy ``fedavg`` (no options)."""
    if options:
        raise ValueError(f"strategy 'fedavg' takes no options, got {sorted(options)}")
    return FedAvgStrategy(inputs)
