"""Payload sizes as measured: the bytes of a payload are the bytes of its safetensors form."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from enum import Enum
from typing import Any

import torch
from safetensors.torch import save


class ByteKind(str, Enum):
    """What a transfer carries; every report splits its bytes by these kinds."""

    BROADCAST = "broadcast"  # downlink: initial or global model
    MODEL_UPLOAD = "model_upload"
    FISHER_UPLOAD = "fisher_upload"
    CONTROL = "control"  # requests and decisions (small JSON messages)


def zero_bytes() -> dict[str, int]:
    """No bytes yet of any :class:`ByteKind`: where a report's ``bytes`` starts."""
    return {k.value: 0 for k in ByteKind}


class ByteAccount:
    """A report's byte accounting: ``bytes`` by :class:`ByteKind` (starting at :func:`zero_bytes`)
    and the ``transfers`` behind them, one entry per transfer. The editors' and the rounds'
    reports (``EditReport``, ``RoundReport``) hold the two fields and charge through here."""

    bytes: dict[str, int]
    transfers: list[dict[str, Any]]

    def charge(self, kind: ByteKind, nbytes: int, client: Hashable | None = None) -> None:
        """Account one transfer of ``nbytes`` of ``kind`` to or from ``client`` (None: all)."""
        self.bytes[kind.value] += int(nbytes)
        self.transfers.append({"kind": kind.value, "bytes": int(nbytes), "client": client})

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())


def serialize(tensors: dict[str, torch.Tensor]) -> bytes:
    """The exact bytes sent for ``tensors`` (safetensors, contiguous CPU copies)."""
    return save({k: v.detach().contiguous().cpu() for k, v in tensors.items()})


def serialized_size(tensors: dict[str, torch.Tensor]) -> int:
    """Number of bytes of the safetensors form of ``tensors``."""
    return len(serialize(tensors))


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the serialized payload: identifies a contribution without keeping it."""
    return hashlib.sha256(serialize(tensors)).hexdigest()


def control_size(message: dict) -> int:
    """Bytes of a control message sent as compact JSON."""
    import json

    return len(json.dumps(message, separators=(",", ":"), sort_keys=True, default=str).encode())
