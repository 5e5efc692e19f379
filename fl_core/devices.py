"""Where tensors compute: the device names scenarios use (``cpu``, ``cuda`` or ``cuda:N``, ``auto``)."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """``auto`` picks the GPU when one is present; ``cpu``/``cuda`` are taken as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
