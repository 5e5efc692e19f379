"""Contributions and W0 as Flower records, and the bytes each message carries.

A contribution travels as ``RecordDict({"model": ArrayRecord, "fisher": ArrayRecord, "meta":
MetricRecord})``: the tensors of fl_core's upload form at their upload precision (float16 stays
float16), and the sample count and measured compute seconds. The bytes recorded for a message are
those vmc-sim charges (the safetensors form of the same tensors, :mod:`fl_core.payload`), beside
Flower's own count of the arrays it carries (``ArrayRecord.count_bytes``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from torch import nn

from fl_core.contribution import Contribution
from fl_core.fisher import FisherKind, FisherRep, layer_specs
from fl_core.fisher.diagonal import DiagonalFisher
from fl_core.fisher.full import FullFisher
from fl_core.fisher.kfac import KFACFisher
from fl_core.payload import serialized_size

TRAIN = "train"  # train once from the W0 sent, keep the contribution, upload it
RECALL = "query.recall"  # upload the contribution held (a member swapped out, or one rejoining)
IDENTIFY = "query.identify"  # which partition (schedule node) a Flower node plays


def _record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    arrays = {}
    for name, t in tensors.items():
        if t.dtype == torch.bfloat16:
            raise ValueError("bfloat16 uploads have no NumPy dtype for a Flower Array; use float16 or float32")
        arrays[name] = Array(np.ascontiguousarray(t.detach().cpu().numpy()))
    return ArrayRecord(arrays)


def _tensors(record: ArrayRecord) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(np.array(a.numpy(), copy=True)) for name, a in record.items()}


def w0_content(w0: torch.Tensor, vehicle: str) -> RecordDict:
    """A train request: W0 and the vehicle the node plays."""
    return RecordDict({"w0": _record({"weights": w0}), "task": ConfigRecord({"vehicle": vehicle})})


def recall_content(vehicle: str) -> RecordDict:
    """A recall request: only the vehicle."""
    return RecordDict({"task": ConfigRecord({"vehicle": vehicle})})


def read_w0(content: RecordDict) -> tuple[torch.Tensor, str]:
    """W0 and the vehicle of a train request."""
    return _tensors(content.array_records["w0"])["weights"], str(content.config_records["task"]["vehicle"])


def contribution_content(c: Contribution) -> RecordDict:
    """The reply that uploads contribution ``c``."""
    records: dict[str, Any] = {
        "model": _record(c.model_tensors()),
        "meta": MetricRecord(
            {
                "num_samples": int(c.num_samples),
                "compute_s": float(c.compute_s),
                "train_s": float(c.train_s),
                "fisher_s": float(c.fisher_s),
            }
        ),
    }
    if c.fisher is not None:
        records["fisher"] = _record(c.fisher.tensors())
    return RecordDict(records)


def fisher_from(kind: FisherKind, model: nn.Module, tensors: dict[str, torch.Tensor]) -> FisherRep:
    """The Fisher representation ``kind`` rebuilt from its uploaded tensors (whole K-FAC factors)."""
    if kind is FisherKind.DIAGONAL:
        return DiagonalFisher.from_tensors(tensors)
    if kind is FisherKind.FULL:
        return FullFisher.from_tensors(tensors)
    if kind is FisherKind.KFAC:
        return KFACFisher.from_tensors(tensors, KFACFisher(layer_specs(model), []))
    raise ValueError(f"no Fisher representation {kind!r} to rebuild")


def read_contribution(content: RecordDict, client: Hashable, kind: FisherKind, model: nn.Module) -> Contribution:
    """The contribution of ``client`` that a reply uploads."""
    arrays = content.array_records
    meta = content.metric_records["meta"]
    fisher = fisher_from(kind, model, _tensors(arrays["fisher"])) if "fisher" in arrays else None
    return Contribution(
        client,
        _tensors(arrays["model"])["weights"],
        fisher,
        int(_scalar(meta["num_samples"])),
        _scalar(meta["compute_s"]),
        _scalar(meta["train_s"]),
        _scalar(meta["fisher_s"]),
    )


def _scalar(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number in the reply's metrics, got {value!r}")
    return float(value)


def content_bytes(content: RecordDict) -> dict[str, int]:
    """Bytes of a message's content: per array record as vmc-sim charges them (safetensors), and
    Flower's count of everything it carries (arrays, metrics and configs)."""
    out: dict[str, int] = {}
    flower = 0
    for name, record in content.items():
        flower += int(record.count_bytes())
        if isinstance(record, ArrayRecord):
            out[name] = serialized_size(_tensors(record))
    out["flower"] = flower
    return out
