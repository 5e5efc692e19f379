"""Communication accounting of seed 002 (section 4.5) beside the real serialized bytes.

Two ledgers are kept side by side, because the seed's headline numbers are modelled:

- **Modelled** (the seed's restricted boundary): a fresh update costs ``B_{i,t}``, the sum over
  tensors of the smallest of Eq. 10-12; a reused client costs a conventional 16 bytes; the
  round's uplink is ``M_t = sum_fresh B_{i,t} + 16 |R_t|`` (Eq. 13) against a dense reference
  ``m B0`` (Eq. 14), saving ``s = 1 - M / (m B0)`` (Eq. 15). The dense-downlink sensitivity adds
  one dense model per selected client to both sides: ``s_sym = 1 - (m B0 + M) / (2 m B0) = s / 2``
  (Eq. 16). Cumulative savings use sums over rounds (the seed's fixed-round table).
- **Real**: the safetensors bytes of what is actually sent, in both directions: the broadcast
  weights, the Top-K payload (values float32, coordinates int32, bitmap packed uint8, with the
  safetensors header naming every tensor, its dtype and shape), and the gate's control messages
  (a client's discrepancy score up, the server's decision down). The real dense reference is a
  dense float32 update per selected client, serialized the same way.

They differ where they should: a Top-K payload's data section equals its modelled bytes exactly
and the header comes on top; a reused client's real uplink is its score message, not 16 bytes;
the downlink is real bytes in every method but only enters the modelled sensitivity.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..payload import ByteKind, serialize, serialized_size
from .strategy import RoundReport
from .topk import VALUE_BYTES, SparseUpdate, choose_representation, field_bytes, keep_count

#: The seed's conventional charge for one reused-client event (not a wire format).
REUSE_EVENT_BYTES = 16


# -- the seed's modelled fields ------------------------------------------------------------------
def modelled_tensor_bytes(d: int, ratio: float, value_bytes: int = VALUE_BYTES) -> int:
    """Smallest of Eq. 10-12 for one tensor of ``d`` coordinates at ratio ``ratio``."""
    k = keep_count(d, ratio)
    return field_bytes(d, k, value_bytes)[choose_representation(d, k, value_bytes)]


def modelled_update_bytes(sizes: Sequence[int], ratio: float, value_bytes: int = VALUE_BYTES) -> int:
    """``B_{i,t}``: a fresh Top-K update's modelled bytes, summed over its tensors."""
    return sum(modelled_tensor_bytes(int(d), ratio, value_bytes) for d in sizes)


def dense_update_bytes(sizes: Sequence[int], value_bytes: int = VALUE_BYTES) -> int:
    """``B0``: the dense update's bytes."""
    return sum(int(d) for d in sizes) * value_bytes


def modelled_round_bytes(fresh: Iterable[int], reused: int, reuse_bytes: int = REUSE_EVENT_BYTES) -> int:
    """Eq. 13: ``M_t`` from the fresh clients' ``B_{i,t}`` and the number of reused clients."""
    if reused < 0:
        raise ValueError(f"reused count must be >= 0, got {reused}")
    return sum(int(b) for b in fresh) + reuse_bytes * int(reused)


def dense_round_bytes(selected: int, b0: int) -> int:
    """Eq. 14: ``M_t^dense = m B0``."""
    return int(selected) * int(b0)


def uplink_saving(modelled: float, dense: float) -> float:
    """Eq. 15: ``1 - M / M_dense``."""
    if dense <= 0:
        raise ValueError(f"dense reference must be > 0, got {dense}")
    return 1.0 - modelled / dense


def symmetric_saving(modelled: float, dense: float) -> float:
    """Eq. 16: one dense downlink per selected client on both sides, ``1 - (D + M) / (2 D)``."""
    if dense <= 0:
        raise ValueError(f"dense reference must be > 0, got {dense}")
    return 1.0 - (dense + modelled) / (2.0 * dense)


# -- real bytes ------------------------------------------------------------------------------
def real_bytes(update: SparseUpdate) -> int:
    """Safetensors bytes of the Top-K payload as sent."""
    return serialized_size(update.to_tensors())


def header_bytes(payload: bytes) -> int:
    """Bytes of a safetensors payload that are not tensor data (length prefix + JSON header)."""
    (n,) = struct.unpack("<Q", payload[:8])
    json.loads(payload[8 : 8 + n])
    return 8 + n


def real_dense_bytes(numel: int) -> int:
    """Safetensors bytes of a dense float32 update (the base strategy's uplink)."""
    return serialized_size({"delta": torch.zeros(int(numel), dtype=torch.float32)})


def score_message(score: float) -> dict[str, torch.Tensor]:
    """A client's discrepancy score as sent to the server (one float32)."""
    return {"score": torch.tensor([float(score)], dtype=torch.float32)}


def decision_message(active: bool) -> dict[str, torch.Tensor]:
    """The server's gate decision as sent to a client (one uint8)."""
    return {"active": torch.tensor([int(bool(active))], dtype=torch.uint8)}


def message_bytes(message: dict[str, torch.Tensor]) -> int:
    """Real bytes of a control message."""
    return len(serialize(message))


# -- per round and cumulative ------------------------------------------------------------------
@dataclass
class RoundAccount:
    """One round in both ledgers (bytes)."""

    round: int
    selected: int
    fresh: int
    reused: int
    modelled_uplink: int  # M_t
    modelled_dense_uplink: int  # m B0
    real_uplink: int  # model payloads + control up
    real_downlink: int  # broadcast + control down
    real_dense_uplink: int  # m dense safetensors updates
    real_dense_downlink: int  # m dense broadcasts

    @classmethod
    def from_report(cls, report: RoundReport, sizes: Sequence[int]) -> RoundAccount:
        """Read a round's accounts from its report.

        Strategies of this package leave ``extra['accounting']``; for any other strategy the
        uplink is taken as dense (its modelled fields are float32 values, 4 bytes each) and its
        control bytes as downlink.
        """
        m = len(report.selected)
        numel = sum(int(d) for d in sizes)
        b0 = dense_update_bytes(sizes)
        acct = report.extra.get("accounting")
        broadcast = report.bytes[ByteKind.BROADCAST.value]
        per_broadcast = next(
            (t["bytes"] for t in report.transfers if t["kind"] == ByteKind.BROADCAST.value), real_dense_bytes(numel)
        )
        up_payload = report.bytes[ByteKind.MODEL_UPLOAD.value] + report.bytes[ByteKind.FISHER_UPLOAD.value]
        if acct is None:
            fresh, reused = len(report.completed), 0
            modelled = int(round(report.fields["uplink"] * VALUE_BYTES))
            ctrl_up, ctrl_down = 0, report.bytes[ByteKind.CONTROL.value]
        else:
            fresh, reused = acct["fresh"], acct["reused"]
            modelled = acct["modelled_uplink"]
            ctrl_up, ctrl_down = acct["control_uplink"], acct["control_downlink"]
        return cls(
            round=report.round,
            selected=m,
            fresh=fresh,
            reused=reused,
            modelled_uplink=modelled,
            modelled_dense_uplink=dense_round_bytes(m, b0),
            real_uplink=up_payload + ctrl_up,
            real_downlink=broadcast + ctrl_down,
            real_dense_uplink=m * real_dense_bytes(numel),
            real_dense_downlink=m * per_broadcast,
        )


@dataclass
class Ledger:
    """Cumulative accounts over a run; savings as in the seed's fixed-round table."""

    sizes: Sequence[int]
    rounds: list[RoundAccount] = field(default_factory=list)

    def add(self, report: RoundReport) -> RoundAccount:
        acct = RoundAccount.from_report(report, self.sizes)
        self.rounds.append(acct)
        return acct

    def total(self, name: str) -> int:
        return sum(getattr(r, name) for r in self.rounds)

    def summary(self) -> dict[str, Any]:
        """Cumulative bytes and savings (fractions): modelled uplink (Eq. 15), modelled with a dense
        downlink (Eq. 16), real uplink, and real both directions."""
        if not self.rounds:
            raise ValueError("ledger is empty: add at least one round")
        t = {k: self.total(k) for k in asdict(self.rounds[0]) if k != "round"}
        real_both = (t["real_uplink"] + t["real_downlink"]) / (t["real_dense_uplink"] + t["real_dense_downlink"])
        return {
            **t,
            "rounds": len(self.rounds),
            "fresh_fraction": t["fresh"] / max(1, t["fresh"] + t["reused"]),
            "modelled_uplink_saving": uplink_saving(t["modelled_uplink"], t["modelled_dense_uplink"]),
            "modelled_symmetric_saving": symmetric_saving(t["modelled_uplink"], t["modelled_dense_uplink"]),
            "real_uplink_saving": uplink_saving(t["real_uplink"], t["real_dense_uplink"]),
            "real_bidirectional_saving": 1.0 - real_both,
        }
