"""Local training and evaluation.

A client's contribution is a deterministic function of (run seed, client id, config): its
shuffling and Fisher-label streams are keyed by the client id, it starts from the shared W0,
and it runs on CPU with a fixed algorithm, so computing it again later gives the same tensors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .augment import Augment, augmenter
from .contribution import Contribution
from .data import ArrayDataset
from .devices import resolve_device
from .fisher import FisherKind, FisherLabels, compute_fisher
from .fisher.kfac import NARROW_RANGE
from .models import flat_params, load_flat
from .optim import MomentumSGD
from .rng import Streams

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

#: Bumped whenever a change here makes a contribution differ for the same inputs; part of every
#: contribution cache key (``fl_core.cache``), so a cache never serves another version's output.
TRAINER_VERSION = 3  # 3: K-FAC factors summed by one matrix product per batch (fisher.kfac_factors.gram)


@dataclass(frozen=True)
class TrainConfig:
    """Local training and upload settings. The defaults are seed 000's reference setting, which
    follows FedFisher's: K = 50 epochs of mini-batch SGD with lr 0.01, batch 64 and momentum 0.9
    (seed 000, Appendix B-A2; without momentum the two-layer CNN's local models are far from
    trained after K epochs and every one-shot merge suffers), and the Fisher as FedFisher's code
    computes it: the expectation over every class (``fisher_labels: expected``; one drawn label
    per input left the K-FAC merge 5.9 points under it at alpha 0.1, bench/RESULTS.md)."""

    epochs: int = 50
    lr: float = 0.01
    batch_size: int = 64
    momentum: float = 0.9
    augment: Augment = Augment.NONE  # crop_flip: FedFisher's CIFAR recipe (fl_core.augment)
    fisher: FisherKind = FisherKind.KFAC
    fisher_batch: int = 128
    fisher_labels: FisherLabels = (
        FisherLabels.EXPECTED
    )  # every class at its probability (FedFisher), or one drawn label
    upload_dtype: str = "float32"
    fisher_rank: int | None = None  # K-FAC upload: top-r eigenpairs per factor (None: whole factors)
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None = auto (see ``apply_threads``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fisher", FisherKind(self.fisher))
        try:
            object.__setattr__(self, "augment", Augment(self.augment))
        except ValueError:
            raise ValueError(
                f"train.augment must be one of {[a.value for a in Augment]}, got {self.augment!r}"
            ) from None
        object.__setattr__(self, "fisher_labels", FisherLabels(self.fisher_labels))
        for name in ("epochs", "batch_size", "fisher_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"train.momentum must lie in [0, 1), got {self.momentum}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"train.lr must be a finite number > 0, got {self.lr}")
        if self.upload_dtype not in DTYPES:
            raise ValueError(f"train.upload_dtype must be one of {sorted(DTYPES)}, got {self.upload_dtype!r}")
        if self.fisher_rank is not None:
            if self.fisher_rank < 1:
                raise ValueError(f"train.fisher_rank must be >= 1 (or null), got {self.fisher_rank}")
            if self.fisher is not FisherKind.KFAC:
                raise ValueError(f"train.fisher_rank compresses K-FAC uploads; train.fisher is {self.fisher.value!r}")


SMALL_MODEL_PARAMS = 200_000


def key_settings(config: TrainConfig, exclude: tuple[str, ...] = ()) -> dict:
    """``config``'s fields for a store's or cache's key, less ``exclude``. A field added after
    stores were written enters the key only where it differs from what the code did before it
    (``fisher_labels`` sampled, ``augment`` none), so contributions already on disk keep their keys;
    float16 K-FAC uploads, whose factors are now balanced before the cast, get a new key."""
    settings = {k: v for k, v in asdict(config).items() if k not in exclude}
    if settings.get("fisher_labels") is FisherLabels.SAMPLED:
        del settings["fisher_labels"]
    if settings.get("augment") is Augment.NONE:
        del settings["augment"]
    if config.fisher is FisherKind.KFAC and DTYPES[config.upload_dtype] in NARROW_RANGE:
        settings["kfac_float16"] = "balanced"  # factor pairs balanced before the cast (fisher.kfac_factors.balanced)
    return settings


#: The settings a client's trained weights depend on; the others shape only its Fisher or its
#: upload (or where and how fast it runs), so runs that differ in those alone share the training.
WEIGHT_FIELDS = ("epochs", "lr", "batch_size", "momentum", "augment")


def weight_settings(config: TrainConfig) -> dict:
    """``config``'s :data:`WEIGHT_FIELDS`, for the key of trained weights."""
    return {name: getattr(config, name) for name in WEIGHT_FIELDS}


def apply_threads(config: TrainConfig, model: nn.Module) -> int:
    """Set torch's intra-op threads for this process and return the number.

    ``config.threads`` wins when given. Otherwise a model under 200,000 parameters gets one
    thread: its operations are so small that thread synchronisation dominates (measured here:
    a K-FAC solve on the 2,368-parameter MLP took 0.56 s with 2 threads on a loaded 2-core
    machine and 0.02 s with 1). Larger models keep torch's default.
    """
    n = config.threads
    if n is None:
        n = 1 if sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS else torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    return torch.get_num_threads()


def sgd_optimizer(model: nn.Module, cfg: TrainConfig) -> MomentumSGD:
    """The local optimizer of ``cfg`` (SGD with ``cfg.momentum``) over ``model``'s parameters."""
    return MomentumSGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)


def sgd_epochs(
    model: nn.Module,
    data: ArrayDataset,
    cfg: TrainConfig,
    generator: torch.Generator,
    epochs: int | None = None,
    optimizer: MomentumSGD | None = None,
) -> nn.Module:
    """Mini-batch SGD on ``data`` for ``epochs`` (default ``cfg.epochs``), shuffled by ``generator``.

    Pass ``optimizer`` (from :func:`sgd_optimizer`) to continue a run across calls with its
    momentum buffers intact: two calls of K1 and K2 epochs then equal one call of K1 + K2.
    Image batches run in the channels-last layout (faster convolutions on CPU; the weights'
    values and flat order are unchanged). With ``cfg.augment`` every batch is augmented
    (``fl_core.augment``) with draws from ``generator``."""
    device = next(model.parameters()).device
    opt = sgd_optimizer(model, cfg) if optimizer is None else optimizer
    x, y = data.x.to(device), data.y.to(device)
    if x.dim() == 4:
        model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    augment = augmenter(cfg.augment, data, generator)
    n = len(data)
    model.train()
    for _ in range(cfg.epochs if epochs is None else epochs):
        order = torch.randperm(n, generator=generator).to(device)
        for start in range(0, n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            opt.zero_grad(set_to_none=True)
            batch = x[idx] if augment is None else augment(x[idx])
            F.cross_entropy(model(batch), y[idx]).backward()
            opt.step()
    return model


def evaluate(model: nn.Module, flat: torch.Tensor, data: ArrayDataset, batch_size: int = 250) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of the weights ``flat`` on ``data``.

    Inference mode, channels-last image batches and batches of 250 (measured about 2.5x faster
    than batches of 1,000 in the default layout on CPU; the same predictions)."""
    load_flat(model, flat)
    if model.training:
        model.eval()
    device = next(model.parameters()).device
    image = data.x.dim() == 4
    if image and not getattr(model, "_channels_last", False):  # once per model: 0.1 ms a call adds up
        model.to(memory_format=torch.channels_last)
        setattr(model, "_channels_last", True)  # noqa: B010  a plain flag (nn.Module's attribute types are tensors and modules)
    correct, loss = 0, 0.0
    with torch.inference_mode():
        for start in range(0, len(data), batch_size):
            xb = data.x[start : start + batch_size].to(device)
            if image:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yb = data.y[start : start + batch_size].to(device)
            logits = model(xb)
            loss += float(F.cross_entropy(logits, yb, reduction="sum"))
            correct += int((logits.argmax(1) == yb).sum())
    return correct / len(data), loss / len(data)


@dataclass(frozen=True)
class Trained:
    """A client's locally trained weights (flat, float32) and the host seconds training took."""

    weights: torch.Tensor
    train_s: float


@dataclass
class LocalTrainer:
    """Computes contributions: K epochs from W0, then the Fisher at the trained weights."""

    model_fn: Callable[[], nn.Module]
    w0: torch.Tensor
    config: TrainConfig
    streams: Streams
    _model: nn.Module | None = field(default=None, repr=False)

    def _fresh_model(self) -> nn.Module:
        return self._model_at(self.w0)

    def _model_at(self, weights: torch.Tensor) -> nn.Module:
        """The trainer's model (built once) holding ``weights``."""
        if self._model is None:
            self._model = self.model_fn().to(resolve_device(self.config.device))
        return load_flat(self._model, weights)

    def train(self, client: Hashable, data: ArrayDataset) -> Trained:
        """``client``'s weights after K epochs from W0 on ``data`` (flat, float32), timed. They
        depend on the training settings (:func:`weight_settings`) and the client's train stream
        only, not on the Fisher or the upload."""
        if len(data) == 0:
            from .errors import InvalidContributionError

            raise InvalidContributionError(f"client {client!r} has no training samples", client=client)
        model = self._fresh_model()
        t0 = time.perf_counter()
        sgd_epochs(model, data, self.config, self.streams.torch("train", client))
        return Trained(flat_params(model).cpu(), time.perf_counter() - t0)

    def contribute(self, client: Hashable, data: ArrayDataset, trained: Trained | None = None) -> Contribution:
        """Train ``client`` on ``data`` (or take its weights ``trained`` earlier by :meth:`train`)
        and compute its Fisher at them. Both ways give the same tensors: the Fisher runs on the
        model in the layout training leaves it in (channels-last for images)."""
        if trained is None:
            trained = self.train(client, data)
        model = self._model_at(trained.weights).train()
        if data.x.dim() == 4:
            model.to(memory_format=torch.channels_last)  # the layout sgd_epochs trains in
        t1 = time.perf_counter()
        fisher = compute_fisher(
            self.config.fisher,
            model,
            data.x.to(next(model.parameters()).device),
            self.streams.torch("fisher", client),
            self.config.fisher_batch,
            self.config.fisher_labels,
        )
        fisher_s = time.perf_counter() - t1
        dtype = DTYPES[self.config.upload_dtype]
        if fisher is not None:
            fisher = fisher.cast(dtype)
        return Contribution(
            client,
            trained.weights.to(dtype),
            fisher,
            len(data),
            compute_s=trained.train_s + fisher_s,
            train_s=trained.train_s,
            fisher_s=fisher_s,
        )
