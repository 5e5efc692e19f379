"""FedAdam (strategy ``fedadam``): FedAvg's aggregated update applied by a server-side Adam."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .config import ServerOpt
from .strategy import RoundStrategy


class FedAdamStrategy(RoundStrategy):
    name = "fedadam"


def build_fedadam(model_fn, w0, data, config, streams, **options: Any) -> FedAdamStrategy:
    """Strategy ``fedadam`` (no options; the server's learning rate is ``config.server_lr``)."""
    if options:
        raise ValueError(f"strategy 'fedadam' takes no options, got {sorted(options)}")
    return FedAdamStrategy(model_fn, w0, data, replace(config, server=ServerOpt.ADAM), streams)
