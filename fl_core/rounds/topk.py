"""Top-K FedAvg (seed 002's baseline, strategy ``topk``): FedAvg whose uplink is the per-tensor
magnitude Top-K of each update in its adaptive wire representation (seed 002, section 4.4,
Eq. 9-12), with optional error feedback.

A flat update is cut into the model's parameter tensors. Each tensor of ``d`` coordinates keeps
its ``k = min(d, max(1, floor(r d)))`` largest-magnitude coordinates (Eq. 9) and is sent in the
smallest of three representations, counted in numerical-field bytes with value width ``b = 4``:

- ``dense``: all ``d`` values, the dropped ones as zeros (``d b``, Eq. 10);
- ``pairs``: ``k`` values and ``k`` int32 coordinates (``k (b + 4)``, Eq. 11);
- ``bitmap``: ``k`` values and a packed bit mask of ``d`` bits (``k b + ceil(d / 8)``, Eq. 12).

Choices the seed leaves open, made here: ties between representations go to dense, then bitmap,
then pairs (the simpler decoder first); kept values are sent in increasing coordinate order;
coordinates are int32 and the bitmap is packed little-endian within each byte (bit ``j`` of byte
``i`` is coordinate ``8 i + j``); ties in magnitude are broken by ``torch.topk``. A dense tensor is
the Top-K tensor written out densely, so all three forms decode to the same tensor.

The representation is also a set of real tensors (values float32, coordinates int32, bitmap
uint8) named ``"<tensor index>.<field>"``; :mod:`.accounting` measures their safetensors bytes and
the receiver decodes them back with :meth:`SparseUpdate.from_tensors` knowing only the shapes.

Error feedback (off in the seed): a client adds the residual it did not send last time to its
next update before Top-K and keeps ``compensated - sent`` as the new residual, so
``sent + new residual == update + old residual`` holds exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import load as load_tensors
from torch import nn

from ..payload import serialize
from ..sampler import ordered
from .local import ClientUpdate
from .strategy import Encoded, RoundReport, RoundStrategy, StrategyInputs

#: Bytes of one transmitted value (float32) and of one coordinate (int32).
VALUE_BYTES = 4
INDEX_BYTES = 4


class Representation(str, Enum):
    """How one Top-K tensor travels."""

    DENSE = "dense"
    PAIRS = "pairs"
    BITMAP = "bitmap"


#: Order in which equal-sized representations are preferred.
PREFERENCE = (Representation.DENSE, Representation.BITMAP, Representation.PAIRS)


def keep_count(d: int, ratio: float) -> int:
    """Eq. 9: coordinates kept of a ``d``-coordinate tensor at ratio ``ratio``."""
    if d < 1:
        raise ValueError(f"a tensor must have at least one coordinate, got d={d}")
    if not 0 < ratio <= 1:
        raise ValueError(f"topk ratio must lie in (0, 1], got {ratio}")
    return min(d, max(1, math.floor(ratio * d)))


def field_bytes(d: int, k: int, value_bytes: int = VALUE_BYTES) -> dict[Representation, int]:
    """Eq. 10-12: numerical-field bytes of each representation of ``k`` kept out of ``d``."""
    if not 1 <= k <= d:
        raise ValueError(f"kept count k={k} must lie in [1, d={d}]")
    return {
        Representation.DENSE: d * value_bytes,
        Representation.PAIRS: k * (value_bytes + INDEX_BYTES),
        Representation.BITMAP: k * value_bytes + math.ceil(d / 8),
    }


def choose_representation(d: int, k: int, value_bytes: int = VALUE_BYTES) -> Representation:
    """The smallest representation (ties: dense, bitmap, pairs)."""
    sizes = field_bytes(d, k, value_bytes)
    return min(PREFERENCE, key=lambda rep: (sizes[rep], PREFERENCE.index(rep)))


@dataclass(frozen=True)
class SparseTensor:
    """One parameter tensor's Top-K as sent: its representation and its real tensors."""

    numel: int
    kept: int
    representation: Representation
    values: torch.Tensor  # float32; the kept values in coordinate order, or all d for dense
    indices: torch.Tensor | None = None  # int32 coordinates (pairs)
    bitmap: torch.Tensor | None = None  # uint8 packed mask (bitmap)

    @property
    def field_bytes(self) -> int:
        """Numerical-field bytes of the chosen representation (Eq. 10-12)."""
        return field_bytes(self.numel, self.kept)[self.representation]

    def decode(self) -> torch.Tensor:
        """The dense float32 vector (``numel`` values, zeros where nothing was kept)."""
        if self.representation is Representation.DENSE:
            return self.values.float().clone()
        out = torch.zeros(self.numel, dtype=torch.float32)
        if self.representation is Representation.PAIRS:
            assert self.indices is not None  # a pairs payload carries its coordinates
            out[self.indices.long()] = self.values.float()
        else:
            assert self.bitmap is not None  # a bitmap payload carries its mask
            mask = np.unpackbits(self.bitmap.numpy(), count=self.numel, bitorder="little").astype(bool)
            out[torch.from_numpy(np.flatnonzero(mask))] = self.values.float()
        return out

    def tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        """The real tensors of the representation, named ``<prefix>.<field>``."""
        if self.representation is Representation.DENSE:
            return {f"{prefix}.dense": self.values}
        # the field of the chosen representation is set (encode_tensor / from_tensors)
        if self.representation is Representation.PAIRS:
            return {f"{prefix}.values": self.values, f"{prefix}.indices": cast(torch.Tensor, self.indices)}
        return {f"{prefix}.values": self.values, f"{prefix}.bitmap": cast(torch.Tensor, self.bitmap)}

    @classmethod
    def from_tensors(cls, prefix: str, tensors: Mapping[str, torch.Tensor], numel: int) -> SparseTensor:
        """Rebuild tensor ``prefix`` of ``numel`` coordinates from received tensors (validated)."""
        values: torch.Tensor | None
        if f"{prefix}.dense" in tensors:
            values = tensors[f"{prefix}.dense"]
            if values.numel() != numel:
                raise ValueError(f"tensor {prefix}: dense payload has {values.numel()} values, expected {numel}")
            return cls(numel, numel, Representation.DENSE, values)
        values = tensors.get(f"{prefix}.values")
        if values is None:
            raise ValueError(f"tensor {prefix}: payload has neither '{prefix}.dense' nor '{prefix}.values'")
        if f"{prefix}.indices" in tensors:
            idx = tensors[f"{prefix}.indices"]
            if idx.numel() != values.numel() or (idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= numel)):
                raise ValueError(
                    f"tensor {prefix}: {idx.numel()} coordinates for {values.numel()} values, "
                    f"or a coordinate outside [0, {numel})"
                )
            return cls(numel, values.numel(), Representation.PAIRS, values, indices=idx)
        bitmap = tensors.get(f"{prefix}.bitmap")
        if bitmap is None:
            raise ValueError(f"tensor {prefix}: values without '{prefix}.indices' or '{prefix}.bitmap'")
        if bitmap.numel() != math.ceil(numel / 8):
            raise ValueError(f"tensor {prefix}: bitmap has {bitmap.numel()} bytes, expected {math.ceil(numel / 8)}")
        ones = int(np.unpackbits(bitmap.numpy(), count=numel, bitorder="little").sum())
        if ones != values.numel():
            raise ValueError(f"tensor {prefix}: bitmap marks {ones} coordinates for {values.numel()} values")
        return cls(numel, ones, Representation.BITMAP, values, bitmap=bitmap)


def encode_tensor(x: torch.Tensor, k: int, representation: Representation | None = None) -> SparseTensor:
    """Top-``k`` of the flat tensor ``x`` in ``representation`` (default: the smallest)."""
    x = x.detach().reshape(-1).float().cpu()
    d = x.numel()
    if not 1 <= k <= d:
        raise ValueError(f"kept count k={k} must lie in [1, d={d}]")
    rep = choose_representation(d, k) if representation is None else Representation(representation)
    idx = torch.topk(x.abs(), k, sorted=False).indices.sort().values
    values = x[idx].contiguous()
    if rep is Representation.DENSE:
        dense = torch.zeros(d, dtype=torch.float32)
        dense[idx] = values
        return SparseTensor(d, k, rep, dense)
    if rep is Representation.PAIRS:
        return SparseTensor(d, k, rep, values, indices=idx.to(torch.int32))
    mask = np.zeros(d, dtype=np.uint8)
    mask[idx.numpy()] = 1
    bitmap = torch.from_numpy(np.packbits(mask, bitorder="little"))
    return SparseTensor(d, k, rep, values, bitmap=bitmap)


@dataclass(frozen=True)
class SparseUpdate:
    """A whole flat update after per-tensor Top-K."""

    parts: tuple[SparseTensor, ...]

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.parts)

    @property
    def field_bytes(self) -> int:
        """B_{i,t}: the modelled numerical-field bytes summed over tensors."""
        return sum(p.field_bytes for p in self.parts)

    def representations(self) -> dict[str, int]:
        """How many tensors went in each representation."""
        counts = Counter(p.representation.value for p in self.parts)
        return {rep.value: counts.get(rep.value, 0) for rep in Representation}

    def decode(self) -> torch.Tensor:
        """The dense flat float32 update the receiver reconstructs."""
        return torch.cat([p.decode() for p in self.parts])

    def to_tensors(self) -> dict[str, torch.Tensor]:
        """All real tensors of the payload (names ``"<i>.<field>"``)."""
        out: dict[str, torch.Tensor] = {}
        for i, p in enumerate(self.parts):
            out.update(p.tensors(str(i)))
        return out

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, torch.Tensor], sizes: Sequence[int]) -> SparseUpdate:
        """Rebuild a received payload given the receiver's tensor sizes."""
        known = {f"{i}.{f}" for i in range(len(sizes)) for f in ("dense", "values", "indices", "bitmap")}
        extra = sorted(set(tensors) - known)
        if extra:
            raise ValueError(f"payload has unexpected tensors {extra}")
        return cls(tuple(SparseTensor.from_tensors(str(i), tensors, int(d)) for i, d in enumerate(sizes)))


def param_sizes(model: nn.Module) -> list[int]:
    """Coordinates per parameter tensor, in ``model.parameters()`` order (the flat layout)."""
    return [p.numel() for p in model.parameters()]


class TopKCodec:
    """Per-tensor Top-K at ratio ``ratio`` over a flat vector laid out as ``sizes``."""

    def __init__(self, sizes: Sequence[int], ratio: float) -> None:
        self.sizes = [int(d) for d in sizes]
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"topk needs at least one non-empty tensor, got sizes {self.sizes}")
        self.ratio = float(ratio)
        self.kept = [keep_count(d, self.ratio) for d in self.sizes]

    @property
    def numel(self) -> int:
        return sum(self.sizes)

    @property
    def field_bytes(self) -> int:
        """B_{i,t} of any update under this codec (it depends on the shapes only)."""
        return sum(field_bytes(d, k)[choose_representation(d, k)] for d, k in zip(self.sizes, self.kept, strict=True))

    def compress(self, flat: torch.Tensor) -> SparseUpdate:
        """Top-K of every tensor of ``flat``, each in its smallest representation."""
        flat = flat.detach().reshape(-1).float().cpu()
        if flat.numel() != self.numel:
            raise ValueError(f"update has {flat.numel()} values, the codec's tensors have {self.numel}")
        parts, start = [], 0
        for d, k in zip(self.sizes, self.kept, strict=True):
            parts.append(encode_tensor(flat[start : start + d], k))
            start += d
        return SparseUpdate(tuple(parts))


class ErrorFeedback:
    """Per-client residual memory (kept on the client): what Top-K left out last time."""

    def __init__(self) -> None:
        self.residual: dict[Hashable, torch.Tensor] = {}

    def compensate(self, client: Hashable, delta: torch.Tensor) -> torch.Tensor:
        """``delta`` plus the client's stored residual (``delta`` itself when it has none)."""
        r = self.residual.get(client)
        return delta.clone() if r is None else delta + r

    def keep(self, client: Hashable, compensated: torch.Tensor, sent: torch.Tensor) -> torch.Tensor:
        """Store and return the new residual ``compensated - sent``."""
        self.residual[client] = compensated - sent
        return self.residual[client]

    def state(self) -> dict[str, torch.Tensor]:
        """Residuals as safetensors-ready tensors keyed by ``repr(client)``."""
        return {repr(c): r for c, r in self.residual.items()}


@dataclass(frozen=True)
class TopKConfig:
    """Top-K of fresh updates: retained ratio ``r`` per tensor and error feedback on/off."""

    ratio: float = 0.2
    error_feedback: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.ratio <= 1:
            raise ValueError(f"topk.ratio must lie in (0, 1], got {self.ratio}")


class TopKStrategy(RoundStrategy):
    """Top-K FedAvg: FedAvg whose uplink is the per-tensor Top-K of each update, sent in the
    smallest representation and decoded by the server from the serialized bytes."""

    name = "topk"

    def __init__(self, inputs: StrategyInputs, topk: TopKConfig | None = None, schedule: str | None = None) -> None:
        super().__init__(inputs)
        self.topk = topk or TopKConfig()
        self.schedule = schedule or self.name
        self.codec = TopKCodec(param_sizes(self.model()), self.topk.ratio)
        self.feedback = ErrorFeedback() if self.topk.error_feedback else None
        self._acct: dict[str, Any] = {}

    def select(self, available: Sequence[Hashable]) -> list[Hashable]:
        """A uniform draw of ``clients_per_round`` from stream ``select/<schedule>/<round>``."""
        pool = ordered(available)
        k = min(self.config.clients_per_round, len(pool))
        rng = self.streams.numpy("select", self.schedule, self.round)
        return [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]

    def begin(self, available: Iterable[Hashable]) -> RoundReport:
        report = super().begin(available)
        self._acct = {
            "fresh": 0,
            "reused": 0,
            "modelled_uplink": 0,
            "control_uplink": 0,
            "control_downlink": 0,
            "representations": {},
        }
        report.extra["accounting"] = self._acct
        return report

    def encode(self, update: ClientUpdate) -> Encoded:
        """Top-K (after error feedback, if on), serialized; the server uses what it decodes."""
        compensated = self.feedback.compensate(update.client, update.delta) if self.feedback else update.delta
        sparse = self.codec.compress(compensated)
        payload = serialize(sparse.to_tensors())
        received = SparseUpdate.from_tensors(load_tensors(payload), self.codec.sizes).decode()
        if self.feedback is not None:
            self.feedback.keep(update.client, compensated, received)
        reps = sparse.representations()
        update.extra["representations"] = reps
        self._acct["fresh"] += 1
        self._acct["modelled_uplink"] += sparse.field_bytes
        for rep, n in reps.items():
            self._acct["representations"][rep] = self._acct["representations"].get(rep, 0) + n
        return Encoded(received, len(payload), sparse.field_bytes / VALUE_BYTES, "topk")


def strategy_options(name: str, options: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    """``options`` checked against ``allowed``; ``ratio`` / ``error_feedback`` folded into ``topk``."""
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"strategy {name!r}: unknown options {unknown}; allowed {sorted(allowed)}")
    opts = dict(options)
    ratio, ef = opts.pop("ratio", None), opts.pop("error_feedback", None)
    if ratio is not None or ef is not None:
        base = opts.get("topk") or TopKConfig()
        opts["topk"] = TopKConfig(base.ratio if ratio is None else ratio, base.error_feedback if ef is None else ef)
    return opts


def build_topk(inputs: StrategyInputs, **options: Any) -> TopKStrategy:
    """Strategy ``topk`` (options: ``topk``, ``ratio``, ``error_feedback``, ``schedule``)."""
    opts = strategy_options("topk", options, {"topk", "ratio", "error_feedback", "schedule"})
    return TopKStrategy(inputs, **opts)
