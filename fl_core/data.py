"""Image-classification datasets as in-memory tensors, read from local files only.

Every loader returns an :class:`ArrayDataset`: float32 images ``N x C x H x W`` scaled to [0, 1]
and then normalised per channel with the dataset's usual mean/std constants, int64 labels, and
(for FEMNIST) the writer of every sample. Nothing is downloaded: the toolkit runs on machines
without internet, so a missing dataset raises :class:`DatasetNotFoundError` saying where to put it.

Where a dataset is looked for, in this order (see :func:`search_roots`):

1. the ``root`` argument;
2. the environment variable ``VMC_DATA`` (several roots may be joined with ``os.pathsep``);
3. ``../shared/data`` relative to the project root (the directory holding ``fl_core``), then
   ``../shared/data`` relative to the current working directory.

Inside each root two source formats are recognised, the first match wins:

* the shared layout ``<root>/<folder>/<key>.npy.xz`` (one uint8 numpy array per file, xz
  compressed; folders ``mnist``, ``fashion_mnist``, ``femnist_leaf``, ``cifar10``, ``cifar100``);
* the standard torchvision folder formats: MNIST / FashionMNIST / EMNIST raw IDX files
  (optionally ``.gz``), SVHN ``train_32x32.mat`` / ``test_32x32.mat`` and the CIFAR python batches
  (read through ``torchvision.datasets`` itself).

Decoding compressed files is slow (about 6 s for the CIFAR-10 training set), so decoded uint8
arrays are cached as plain ``.npy`` files under ``$VMC_CACHE/data`` (default ``~/.cache/vmc-sim/data``),
keyed by the source's path, size and modification time. Cache files are written atomically
(temporary file, then rename), so parallel processes never see a half-written entry.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .data_files import (
    Location,
    Raw,
    cache_dir,
    cifar_locations,
    digits_builtin,
    emnist_locations,
    femnist_locations,
    mnist_like_locations,
    read_idx,
    svhn_locations,
)
from .registry import Registry, UnknownNameError

__all__ = [
    "ClientData",
    "ArrayDataset",
    "DatasetNotFoundError",
    "DatasetSpec",
    "DATASETS",
    "cache_dir",
    "dataset_names",
    "load_dataset",
    "load_train_test",
    "read_idx",
    "search_roots",
]

SPLITS = ("train", "test")

# Per-channel normalisation constants (mean, std) of the pixel values scaled to [0, 1].
MNIST_STATS = ((0.1307,), (0.3081,))
FASHION_MNIST_STATS = ((0.2860,), (0.3530,))
CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100_STATS = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
SVHN_STATS = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))
# scikit-learn digits: mean and std of the 1,438 training images (every fifth image is a test image, see fl_core.data_files) after
# dividing the 0..16 intensities by 16; measured 0.30581 and 0.37644.
DIGITS_STATS = ((0.3058,), (0.3764,))

# Digits split rule: sample i (in scikit-learn's bundled order) is a test sample iff
# i % 5 == 4, which gives 1,438 train and 359 test images (an 80/20 split, all classes in both).

# EMNIST splits and their number of classes. "letters" labels are stored as 1..26 in the raw
# files; they are shifted to 0..25 here.
EMNIST_SPLITS = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10}
EMNIST_DEFAULT_SPLIT = "balanced"

_ENV_DATA = "VMC_DATA"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset split is in none of the searched places; the message lists them all."""


@dataclass(frozen=True, eq=False)
class ArrayDataset:
    """A labelled image set held in memory.

    ``x`` is float32 ``N x C x H x W`` (scaled to [0, 1], then normalised per channel), ``y`` is
    int64 ``N``, ``groups`` is the writer index of every sample (FEMNIST) or ``None``.
    """

    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    name: str
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.x, torch.Tensor) or self.x.dim() != 4 or self.x.dtype != torch.float32:
            raise ValueError(
                f"ArrayDataset {self.name!r}: x must be a float32 tensor N x C x H x W, got {_describe(self.x)}"
            )
        if not isinstance(self.y, torch.Tensor) or self.y.dim() != 1 or self.y.dtype != torch.int64:
            raise ValueError(
                f"ArrayDataset {self.name!r}: y must be an int64 tensor of shape (N,), got {_describe(self.y)}"
            )
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"ArrayDataset {self.name!r}: x has {self.x.shape[0]} samples but y has {self.y.shape[0]}")
        if self.groups is not None and (self.groups.ndim != 1 or self.groups.shape[0] != self.y.shape[0]):
            raise ValueError(
                f"ArrayDataset {self.name!r}: groups must have shape ({self.y.shape[0]},), got {self.groups.shape}"
            )
        if int(self.num_classes) < 1:
            raise ValueError(f"ArrayDataset {self.name!r}: num_classes must be >= 1, got {self.num_classes}")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One (image, label) pair, so the set can feed a ``torch.utils.data.DataLoader``."""
        return self.x[index], self.y[index]

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """The shape (C, H, W) of one image."""
        c, h, w = self.x.shape[1:]
        return int(c), int(h), int(w)

    def subset(self, indices: np.ndarray | Sequence[int] | torch.Tensor) -> ArrayDataset:
        """The samples at ``indices`` (integer positions or a boolean mask), in that order."""
        idx = indices.cpu().numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(
                    f"subset of {self.name!r}: boolean mask has shape {idx.shape}, expected ({len(self)},)"
                )
            idx = np.flatnonzero(idx)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(
                f"subset of {self.name!r}: indices must be a 1-D integer array, "
                f"got dtype {idx.dtype} and shape {idx.shape}"
            )
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(
                f"subset of {self.name!r}: index out of range for {len(self)} samples "
                f"(min {idx.min()}, max {idx.max()})"
            )
        t = torch.from_numpy(idx.astype(np.int64, copy=False))
        groups = None if self.groups is None else self.groups[idx]
        return ArrayDataset(x=self.x[t], y=self.y[t], num_classes=self.num_classes, name=self.name, groups=groups)


ClientData = Mapping[Any, ArrayDataset] | Callable[[Any], ArrayDataset]
"""Every client's data: a mapping from client id to its samples, or a function of the client id."""


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dtype} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSpec:
    """How to find, read and normalise one dataset."""

    name: str
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    help: str
    locations: Callable[[Path, str], list[Location]] | None = None
    builtin: Callable[[str], Raw] | None = None
    full_scale: float = 255.0


_CIFAR10_CHECK = {"train": "data_batch_1", "test": "test_batch"}
_CIFAR100_CHECK = {"train": "train", "test": "test"}


def _build_registry() -> Registry[DatasetSpec]:
    reg: Registry[DatasetSpec] = Registry(
        "dataset",
        {
            "digits": DatasetSpec(
                "digits",
                10,
                *DIGITS_STATS,
                builtin=digits_builtin,
                full_scale=16.0,
                help="bundled with scikit-learn; needs no files",
            ),
            "mnist": DatasetSpec(
                "mnist",
                10,
                *MNIST_STATS,
                locations=mnist_like_locations("mnist", "MNIST"),
                help="<root>/mnist/{x,y}_{train,test}.npy.xz (shared layout), or the raw IDX files "
                "<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (torchvision layout)",
            ),
            "fashion_mnist": DatasetSpec(
                "fashion_mnist",
                10,
                *FASHION_MNIST_STATS,
                locations=mnist_like_locations("fashion_mnist", "FashionMNIST"),
                help="<root>/fashion_mnist/{x,y}_{train,test}.npy.xz (shared layout), or the raw IDX files "
                "<root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (torchvision layout)",
            ),
            "femnist": DatasetSpec(
                "femnist",
                62,
                *MNIST_STATS,
                locations=femnist_locations,
                help="<root>/femnist_leaf/{x,y,writer}_{train,test}.npy.xz (LEAF per-writer split, shared layout)",
            ),
            "cifar10": DatasetSpec(
                "cifar10",
                10,
                *CIFAR10_STATS,
                locations=cifar_locations("cifar10", "cifar-10-batches-py", "CIFAR10", _CIFAR10_CHECK),
                help="<root>/cifar10/{x,y}_{train,test}.npy.xz (shared layout), or the python batches "
                "<root>/cifar-10-batches-py/ (torchvision layout)",
            ),
            "cifar100": DatasetSpec(
                "cifar100",
                100,
                *CIFAR100_STATS,
                locations=cifar_locations("cifar100", "cifar-100-python", "CIFAR100", _CIFAR100_CHECK),
                help="<root>/cifar100/{x,y}_{train,test}.npy.xz (shared layout, fine labels), or the python "
                "batches <root>/cifar-100-python/ (torchvision layout)",
            ),
            "svhn": DatasetSpec(
                "svhn",
                10,
                *SVHN_STATS,
                locations=svhn_locations,
                help="the cropped-digits files train_32x32.mat and test_32x32.mat in <root>/ or <root>/svhn/",
            ),
        },
        aliases={
            "fashion-mnist": "fashion_mnist",
            "fmnist": "fashion_mnist",
            "cifar-10": "cifar10",
            "cifar-100": "cifar100",
        },
    )
    for split, classes in EMNIST_SPLITS.items():
        reg.add(
            f"emnist-{split}",
            DatasetSpec(
                f"emnist-{split}",
                classes,
                *MNIST_STATS,
                locations=emnist_locations(split),
                help=f"<root>/EMNIST/raw/emnist-{split}-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte[.gz] "
                "(torchvision layout, as extracted from the EMNIST gzip archive)",
            ),
        )
    reg.add("emnist", reg[f"emnist-{EMNIST_DEFAULT_SPLIT}"])
    return reg


DATASETS: Registry[DatasetSpec] = _build_registry()


def dataset_names() -> list[str]:
    """Every name :func:`load_dataset` accepts (aliases aside)."""
    return DATASETS.names()


def _spec(name: str) -> DatasetSpec:
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key.startswith("emnist_"):
        key = "emnist-" + key[len("emnist_") :]
    if key not in DATASETS:
        raise UnknownNameError(f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}")
    return DATASETS[key]


def search_roots(root: str | Path | None = None) -> list[Path]:
    """The directories searched for dataset files, in order, without duplicates.

    ``root`` first, then each entry of ``$VMC_DATA``, then ``../shared/data`` beside the project
    (the directory that holds the ``fl_core`` package), then ``../shared/data`` beside the
    current working directory.
    """
    candidates: list[Path] = []
    if root is not None:
        candidates.append(Path(root).expanduser())
    env = os.environ.get(_ENV_DATA)
    if env:
        candidates += [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    project_root = Path(__file__).resolve().parent.parent
    candidates.append(project_root.parent / "shared" / "data")
    candidates.append(Path.cwd().parent / "shared" / "data")
    out: list[Path] = []
    seen: set[Path] = set()
    for c in candidates:
        key = c.resolve()
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _not_found(spec: DatasetSpec, split: str, tried: list[tuple[Path, list[Location]]]) -> DatasetNotFoundError:
    lines = [f"dataset {spec.name!r} (split {split!r}) was not found. Looked in, in order:"]
    for root, locations in tried:
        note = "" if root.is_dir() else "  (directory does not exist)"
        lines.append(f"  {root}{note}")
        lines += [f"    - {loc.describe()}" for loc in locations]
    lines.append(
        f"To provide it, put {spec.help}; then pass root=<root> or set {_ENV_DATA}=<root>. "
        f"Roots are searched in this order: the root argument, ${_ENV_DATA}, "
        f"<project>/../shared/data, <cwd>/../shared/data."
    )
    return DatasetNotFoundError("\n".join(lines))


def _to_tensor(images: np.ndarray, channels_first: bool, spec: DatasetSpec, source: str) -> torch.Tensor:
    """uint8 (or 0..full_scale float) images to normalised float32 N x C x H x W."""
    src = torch.from_numpy(np.asarray(images))
    if src.dim() == 3:
        src = src.unsqueeze(1)
    elif src.dim() == 4 and not channels_first:
        src = src.permute(0, 3, 1, 2)
    elif src.dim() != 4:
        raise ValueError(f"{source}: images must have 3 or 4 dimensions, got shape {tuple(images.shape)}")
    channels = src.shape[1]
    if channels != len(spec.mean):
        raise ValueError(f"{source}: images have {channels} channels, {spec.name} expects {len(spec.mean)}")
    x = torch.empty(src.shape, dtype=torch.float32)
    x.copy_(src)
    x.div_(spec.full_scale)
    mean = torch.tensor(spec.mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32).view(1, -1, 1, 1)
    return x.sub_(mean).div_(std)


def _finish(spec: DatasetSpec, raw: Raw, source: str) -> ArrayDataset:
    labels = np.asarray(raw.labels).reshape(-1).astype(np.int64)
    if labels.shape[0] != raw.images.shape[0]:
        raise ValueError(f"{source}: {raw.images.shape[0]} images but {labels.shape[0]} labels")
    if labels.size and (labels.min() < 0 or labels.max() >= spec.num_classes):
        raise ValueError(
            f"{source}: labels must lie in [0, {spec.num_classes}) for {spec.name}, "
            f"found range [{labels.min()}, {labels.max()}]"
        )
    x = _to_tensor(raw.images, raw.channels_first, spec, source)
    return ArrayDataset(
        x=x, y=torch.from_numpy(labels), num_classes=spec.num_classes, name=spec.name, groups=raw.groups
    )


def load_dataset(name: str, split: str = "train", root: str | Path | None = None) -> ArrayDataset:
    """Load one split (``"train"`` or ``"test"``) of dataset ``name`` from local files.

    Names: ``digits``, ``mnist``, ``fashion_mnist``, ``femnist``, ``cifar10``, ``cifar100`` (fine
    labels), ``svhn``, ``emnist`` (the balanced split) and ``emnist-<split>`` for ``byclass``,
    ``bymerge``, ``balanced``, ``letters`` (labels 0..25), ``digits``, ``mnist``.

    FEMNIST is LEAF's per-writer split in MNIST polarity (ink bright); ``groups`` holds each
    sample's writer index (the same index in both splits; the train split holds the writers that
    have train data, the test split every stored test sample, including test-only writers).
    Raises :class:`DatasetNotFoundError` listing every searched place when no copy is found.
    """
    spec = _spec(name)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if spec.builtin is not None:
        return _finish(spec, spec.builtin(split), f"{spec.name} (built in)")
    assert spec.locations is not None
    tried: list[tuple[Path, list[Location]]] = []
    for base in search_roots(root):
        locations = spec.locations(base, split)
        tried.append((base, locations))
        for loc in locations:
            paths = loc.resolve()
            if paths is not None:
                return _finish(spec, loc.read(paths), str(paths[0]))
    raise _not_found(spec, split, tried)


def dataset_files(name: str, root: str | Path | None = None) -> tuple[Path | None, list[Path]]:
    """The root that holds dataset ``name`` and the files a load of both splits reads from it
    (what a machine without the shared data needs to be given); ``(None, [])`` for a built-in one.
    Raises :class:`DatasetNotFoundError` as :func:`load_dataset` does when no root holds it."""
    spec = _spec(name)
    if spec.builtin is not None:
        return None, []
    assert spec.locations is not None
    for base in search_roots(root):
        files: list[Path] = []
        for split in SPLITS:
            found = next((p for loc in spec.locations(base, split) if (p := loc.resolve()) is not None), None)
            if found is None:
                break
            files += found
        else:
            return base, sorted(set(files))
    load_dataset(name, "train", root)  # raises naming every place searched
    raise DatasetNotFoundError(f"dataset {name!r}: a split is missing")


def load_train_test(name: str, root: str | Path | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Both splits of dataset ``name``: ``(train, test)``."""
    return load_dataset(name, "train", root), load_dataset(name, "test", root)
