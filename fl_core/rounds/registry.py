"""The multi-round strategies by name: one file per strategy, one table here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..data import ClientData
from ..registry import Registry
from ..rng import Streams
from .config import RoundConfig
from .dgfedreuse import build_dgfedreuse
from .fedadam import build_fedadam
from .fedavg import build_fedavg
from .fedprox import build_fedprox
from .pdf import build_pdf
from .strategy import RoundStrategy, StrategyInputs
from .topk import build_topk

StrategyFactory = Callable[..., RoundStrategy]  # (StrategyInputs, **options) -> the strategy

STRATEGIES: Registry[StrategyFactory] = Registry(
    "multi-round strategy",
    plural="multi-round strategies",
    entries={
        "fedavg": build_fedavg,
        "fedprox": build_fedprox,
        "fedadam": build_fedadam,
        "topk": build_topk,
        "dgfedreuse": build_dgfedreuse,
        "pdf": build_pdf,
    },
)


def build_strategy(
    name: str,
    model_fn: Callable[[], nn.Module],
    w0: torch.Tensor,
    data: ClientData,
    config: RoundConfig,
    streams: Streams,
    **options: Any,
) -> RoundStrategy:
    """The multi-round strategy ``name`` (see :data:`STRATEGIES`) with its ``options``."""
    return STRATEGIES[name](StrategyInputs(model_fn, w0, data, config, streams), **options)
