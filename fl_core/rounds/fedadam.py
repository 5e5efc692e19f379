"""FedAdam (strategy ``fedadam``): FedAvg's aggregated update applied by a server-side Adam."""

from __future__ import annotations

from typing import Any

from .config import ServerOpt
from .strategy import RoundStrategy, StrategyInputs


class FedAdamStrategy(RoundStrategy):
    name = "fedadam"


def build_fedadam(inputs: StrategyInputs, **options: Any) -> FedAdamStrategy:
    """Strategy ``fedadam`` (no options; the server's learning rate is ``config.server_lr``)."""
    if options:
        raise ValueError(f"strategy 'fedadam' takes no options, got {sorted(options)}")
    return FedAdamStrategy(inputs.with_config(server=ServerOpt.ADAM))
