"""Floating-point operations of a model's jobs, counted once per model (no timing).

A simulated device charges a job its FLOPs over the device's throughput, so the count must be a
property of the model and the settings alone: it is taken with
:class:`torch.utils.flop_counter.FlopCounterMode` on a batch of one sample of the data set's
input shape, which counts matrix products and convolutions (2 FLOPs a multiply-accumulate) and
nothing elementwise. Per sample:

- ``forward``: one forward pass;
- ``train``: one sample-epoch of local SGD, the forward and backward pass of the loss as counted
  (weight gradients and the gradients of every layer's input but the first's: about 3x forward
  for the CNN, about 2x for the MLP whose first layer dominates); the optimiser's step is
  elementwise and per mini-batch, not counted;
- ``fisher``: one sample's Fisher pass, counted by running the representation's own ``compute``
  (:func:`fl_core.fisher.compute_fisher`) with the run's labels: a forward pass, the backward to
  the layer outputs for every label (one drawn label, or every class for ``expected``) and the
  statistic. Counted factors over forward: diagonal about 3x with a drawn label and 18-19x
  with expected labels on the CNN (each class's per-sample squared gradients through the
  convolutions; about 2x on the MLP, whose linear layers sum the labels first); K-FAC 11-22x on
  the CNN (the input gram ``a a^T`` over every convolution patch dominates) and more on the MLP
  (26x on MNIST: its first layer's input gram is 784 wide); full Fisher adds the outer product
  of each per-sample gradient, ``2 d^2`` per label. No factor is assumed per kind.

A coordinator's Fisher-vector product with the sum of ``members`` uploads (:meth:`ModelFlops.product`)
is not counted but written out, for a whole-vector product: diagonal ``2 d`` (multiply and
add), full ``2 d^2``, K-FAC ``members x sum over layers 2 out in (out + in)`` (``G V A`` per
member; low-rank uploads are charged as their rebuilt factors, an upper bound).

Counts are kept in memory per (model key, input shape, Fisher kind, labels), and on disk in
``$VMC_CACHE/flops.json`` (default ``~/.cache/vmc-sim/flops.json``) keyed by the same and torch's
version: the counter's first use in a process costs about a second (it loads torch's compiler
stack), as much as a whole default run. An entry read back is used only if its fields are
non-negative integers and its parameter count and layer shapes are those of the model built now;
anything else is counted again and rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .fisher import FisherKind, FisherLabels, compute_fisher, layer_specs
from .json_store import read_entries, write_entry


@dataclass(frozen=True)
class ModelFlops:
    """FLOPs per sample of one model's jobs (module docstring), and what products cost."""

    forward: int
    train: int
    fisher: int
    params: int
    fisher_kind: str
    fisher_labels: str
    layers: tuple[tuple[int, int], ...]  # (out, in) of every Linear/Conv2d weight, in flat order

    def product(self, members: int = 1) -> int:
        """One Fisher-vector product with the coordinator's sum of ``members`` uploads."""
        d = self.params
        if self.fisher_kind == FisherKind.FULL.value:
            return 2 * d * d
        if self.fisher_kind == FisherKind.KFAC.value:
            return max(1, members) * sum(2 * o * i * (o + i) for o, i in self.layers)
        return 2 * d  # diagonal; none: the mean's scale-and-add

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["layers"] = [list(x) for x in self.layers]
        return d


_CACHE: dict[Hashable, ModelFlops] = {}


def _total(run: Callable[[], object]) -> int:
    # imported here: the counter pulls in triton (80 ms), and a process whose counts are stored
    # never counts
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        run()
    return int(counter.get_total_flops())


def count_flops(
    model_fn: Callable[[], nn.Module],
    input_shape: tuple[int, ...],
    fisher: FisherKind | str = FisherKind.DIAGONAL,
    labels: FisherLabels | str = FisherLabels.EXPECTED,
) -> ModelFlops:
    """Count the FLOPs of ``model_fn()``'s jobs on one sample of ``input_shape`` (uncached).

    The models are built and fed under a forked random state, so counting changes no draw of
    the caller's."""
    kind, labels = FisherKind(fisher), FisherLabels(labels)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_fn().cpu().float()
        x = torch.randn(1, *input_shape)
        y = torch.zeros(1, dtype=torch.long)
        with torch.no_grad():
            forward = _total(lambda: model(x))
        train = _total(lambda: F.cross_entropy(model(x), y).backward())
        model.zero_grad(set_to_none=True)
        fisher_flops = 0
        if kind is not FisherKind.NONE:
            gen = torch.Generator().manual_seed(0)
            fisher_flops = _total(lambda: compute_fisher(kind, model, x, gen, batch_size=1, labels=labels))
    specs = layer_specs(model)
    return ModelFlops(
        forward=forward,
        train=train,
        fisher=fisher_flops,
        params=sum(p.numel() for p in model.parameters()),
        fisher_kind=kind.value,
        fisher_labels=labels.value,
        layers=tuple((s.out_features, s.in_features) for s in specs),
    )


def model_flops(
    key: Hashable,
    model_fn: Callable[[], nn.Module],
    input_shape: tuple[int, ...],
    num_classes: int,
    fisher: FisherKind | str = FisherKind.DIAGONAL,
    labels: FisherLabels | str = FisherLabels.EXPECTED,
) -> ModelFlops:
    """:func:`count_flops`, counted once per process for ``key`` (the model's name or any key
    that fixes its architecture with ``input_shape`` and ``num_classes``), Fisher kind and labels."""
    full = (key, tuple(input_shape), int(num_classes), FisherKind(fisher).value, FisherLabels(labels).value)
    if full not in _CACHE:
        name = json.dumps([str(key), list(full[1]), *full[2:], torch.__version__])
        found = _read_stored(name, model_fn)
        if found is None:
            found = count_flops(model_fn, input_shape, fisher, labels)
            _write_stored(name, found)
        _CACHE[full] = found
    return _CACHE[full]


def store_path() -> Path:
    """``$VMC_CACHE/flops.json``, else ``~/.cache/vmc-sim/flops.json``."""
    env = os.environ.get("VMC_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "vmc-sim") / "flops.json"


def _read_stored(name: str, model_fn: Callable[[], nn.Module]) -> ModelFlops | None:
    """The stored count of ``name`` if it verifies against the model ``model_fn`` builds now."""
    entry = read_entries(store_path()).get(name)
    if not isinstance(entry, dict):
        return None
    try:
        found = ModelFlops(
            forward=entry["forward"],
            train=entry["train"],
            fisher=entry["fisher"],
            params=entry["params"],
            fisher_kind=str(entry["fisher_kind"]),
            fisher_labels=str(entry["fisher_labels"]),
            layers=tuple((int(o), int(i)) for o, i in entry["layers"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    counts = (found.forward, found.train, found.fisher, found.params)
    if not all(type(v) is int and v >= 0 for v in counts):
        return None
    with torch.random.fork_rng(devices=[]):
        model = model_fn()
    shapes = tuple((s.out_features, s.in_features) for s in layer_specs(model))
    if found.params != sum(p.numel() for p in model.parameters()) or found.layers != shapes:
        return None
    return found


def _write_stored(name: str, found: ModelFlops) -> None:
    write_entry(store_path(), name, found.as_dict())
