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
arrays are cached as plain ``.npy`` files under ``$VMC_CACHE`` (default ``~/.cache/vmc-sim/data``),
keyed by the source's path, size and modification time. Cache files are written atomically
(temporary file, then rename), so parallel processes never see a half-written entry.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import lzma
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = [
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
# scikit-learn digits: mean and std of the 1,438 training images (see _DIGITS_TEST_EVERY) after
# dividing the 0..16 intensities by 16; measured 0.30581 and 0.37644.
DIGITS_STATS = ((0.3058,), (0.3764,))

# Digits split rule: sample i (in scikit-learn's bundled order) is a test sample iff
# i % 5 == 4, which gives 1,438 train and 359 test images (an 80/20 split, all classes in both).
_DIGITS_TEST_EVERY = 5

# EMNIST splits and their number of classes. "letters" labels are stored as 1..26 in the raw
# files; they are shifted to 0..25 here.
EMNIST_SPLITS = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10}
EMNIST_DEFAULT_SPLIT = "balanced"

_ENV_DATA = "VMC_DATA"
_ENV_CACHE = "VMC_CACHE"


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
            raise ValueError(f"ArrayDataset {self.name!r}: x must be a float32 tensor N x C x H x W, "
                             f"got {_describe(self.x)}")
        if not isinstance(self.y, torch.Tensor) or self.y.dim() != 1 or self.y.dtype != torch.int64:
            raise ValueError(f"ArrayDataset {self.name!r}: y must be an int64 tensor of shape (N,), "
                             f"got {_describe(self.y)}")
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"ArrayDataset {self.name!r}: x has {self.x.shape[0]} samples but y has "
                             f"{self.y.shape[0]}")
        if self.groups is not None and (self.groups.ndim != 1 or self.groups.shape[0] != self.y.shape[0]):
            raise ValueError(f"ArrayDataset {self.name!r}: groups must have shape ({self.y.shape[0]},), "
                             f"got {self.groups.shape}")
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
                raise ValueError(f"subset of {self.name!r}: boolean mask has shape {idx.shape}, "
                                 f"expected ({len(self)},)")
            idx = np.flatnonzero(idx)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"subset of {self.name!r}: indices must be a 1-D integer array, "
                             f"got dtype {idx.dtype} and shape {idx.shape}")
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"subset of {self.name!r}: index out of range for {len(self)} samples "
                             f"(min {idx.min()}, max {idx.max()})")
        t = torch.from_numpy(idx.astype(np.int64, copy=False))
        groups = None if self.groups is None else self.groups[idx]
        return ArrayDataset(x=self.x[t], y=self.y[t], num_classes=self.num_classes, name=self.name,
                            groups=groups)


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dtype} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


# ---------------------------------------------------------------------------------------------
# Raw arrays and readers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Raw:
    """Decoded images (N,H,W, N,H,W,C, or N,C,H,W when ``channels_first``), labels, groups."""

    images: np.ndarray
    labels: np.ndarray
    groups: np.ndarray | None = None
    channels_first: bool = False


@dataclass(frozen=True)
class _Location:
    """One place a dataset split may live: the files it needs and how to read them."""

    fmt: str
    files: tuple[tuple[Path, ...], ...]  # each entry: alternatives, the first existing one is used
    read: Callable[[list[Path]], _Raw]

    def resolve(self) -> list[Path] | None:
        """The chosen file for every entry, or None when one of them is missing."""
        chosen = []
        for alternatives in self.files:
            found = next((p for p in alternatives if p.is_file()), None)
            if found is None:
                return None
            chosen.append(found)
        return chosen

    def describe(self) -> str:
        """One line for error messages: the format and the files it needs."""
        return f"{self.fmt}: " + " and ".join(_alternatives_text(a) for a in self.files)


def _alternatives_text(alternatives: tuple[Path, ...]) -> str:
    """``a[.gz] or b`` for alternative paths, folding a plain file and its ``.gz`` twin."""
    parts, i = [], 0
    while i < len(alternatives):
        p = alternatives[i]
        if i + 1 < len(alternatives) and alternatives[i + 1] == p.with_name(p.name + ".gz"):
            parts.append(f"{p}[.gz]")
            i += 2
        else:
            parts.append(str(p))
            i += 1
    return " or ".join(parts)


_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (the MNIST family's format), plain or ``.gz``.

    The header is two zero bytes, a type code, the number of dimensions, then each dimension as a
    big-endian uint32; the data follow in big-endian order. Returns the array in native byte order.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic number {data[:4].hex()})")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX data type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: IDX header truncated")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = header + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: IDX size mismatch: header says {dims} ({expected} bytes), "
                         f"file has {len(data)} bytes")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def cache_dir() -> Path:
    """Directory for decoded-array caches: ``$VMC_CACHE`` or ``~/.cache/vmc-sim/data``."""
    env = os.environ.get(_ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vmc-sim" / "data"


def _cache_path(source: Path) -> Path:
    st = source.stat()
    key = f"{source.resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    stem = source.name.split(".")[0]
    return cache_dir() / f"{source.parent.name}-{stem}-{digest}.npy"


def _load_compressed(source: Path, decode: Callable[[Path], np.ndarray]) -> np.ndarray:
    """Decode ``source`` once and keep the result as a ``.npy`` in the cache directory.

    The cache key covers the source's path, size and mtime, so a changed file is decoded again.
    A cache that cannot be written (read-only home, full disk) only costs a warning.
    """
    target = _cache_path(source)
    if target.is_file():
        try:
            return np.load(target, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            pass
    arr = decode(source)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        warnings.warn(f"could not cache decoded {source} in {target.parent}: {exc}", stacklevel=3)
    return arr


def _decode_npy_xz(path: Path) -> np.ndarray:
    with lzma.open(path) as fh:
        return np.load(fh, allow_pickle=False)


def _read_npy_xz(path: Path) -> np.ndarray:
    return _load_compressed(path, _decode_npy_xz)


def _read_idx_cached(path: Path) -> np.ndarray:
    return _load_compressed(path, read_idx) if path.suffix == ".gz" else read_idx(path)


def _shared_reader(with_groups: bool) -> Callable[[list[Path]], _Raw]:
    def read(paths: list[Path]) -> _Raw:
        arrays = [_read_npy_xz(p) for p in paths]
        groups = arrays[2].astype(np.int64) if with_groups else None
        return _Raw(images=arrays[0], labels=arrays[1], groups=groups)
    return read


def _femnist_read(paths: list[Path]) -> _Raw:
    raw = _shared_reader(with_groups=True)(paths)
    # LEAF stores ink dark on white; flip to MNIST polarity (ink bright, background 0).
    return _Raw(images=255 - raw.images, labels=raw.labels, groups=raw.groups)


def _idx_reader(transpose: bool, label_offset: int = 0) -> Callable[[list[Path]], _Raw]:
    def read(paths: list[Path]) -> _Raw:
        images, labels = _read_idx_cached(paths[0]), _read_idx_cached(paths[1])
        if images.ndim != 3:
            raise ValueError(f"{paths[0]}: expected images N x H x W, got shape {images.shape}")
        if transpose:
            # EMNIST raw files store every image transposed (column-major); flip back upright.
            images = np.ascontiguousarray(images.transpose(0, 2, 1))
        return _Raw(images=images, labels=labels.astype(np.int64) - label_offset)
    return read


def _svhn_read(paths: list[Path]) -> _Raw:
    from scipy.io import loadmat

    mat = loadmat(paths[0])
    if "X" not in mat or "y" not in mat:
        raise ValueError(f"{paths[0]}: SVHN .mat file must hold variables 'X' and 'y', found "
                         f"{sorted(k for k in mat if not k.startswith('__'))}")
    x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if x.ndim != 4 or x.shape[2] != 3:
        raise ValueError(f"{paths[0]}: SVHN 'X' must be H x W x 3 x N, got shape {x.shape}")
    y[y == 10] = 0  # SVHN labels the digit 0 as 10
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1)).astype(np.uint8, copy=False)
    return _Raw(images=images, labels=y, channels_first=True)


def _cifar_reader(cls_name: str, split: str) -> Callable[[list[Path]], _Raw]:
    def read(paths: list[Path]) -> _Raw:
        import torchvision.datasets as tvd

        root = paths[0].parent.parent  # torchvision wants the directory holding the batches folder
        try:
            ds = getattr(tvd, cls_name)(root=str(root), train=split == "train", download=False)
        except RuntimeError as exc:
            raise RuntimeError(f"torchvision could not read {cls_name} from {paths[0]}: {exc}") from exc
        return _Raw(images=np.asarray(ds.data, dtype=np.uint8), labels=np.asarray(ds.targets, dtype=np.int64))
    return read


def _shared_location(root: Path, folder: str, split: str, extra: Sequence[str] = (),
                     read: Callable[[list[Path]], _Raw] | None = None) -> _Location:
    keys = [f"x_{split}", f"y_{split}", *(f"{k}_{split}" for k in extra)]
    files = tuple((root / folder / f"{k}.npy.xz",) for k in keys)
    return _Location("shared layout", files, read or _shared_reader(with_groups=bool(extra)))


def _idx_location(raw_dirs: Sequence[Path], images: str, labels: str, transpose: bool = False,
                  label_offset: int = 0, fmt: str = "torchvision IDX") -> _Location:
    def alternatives(name: str) -> tuple[Path, ...]:
        out: list[Path] = []
        for d in raw_dirs:
            out += [d / name, d / f"{name}.gz"]
        return tuple(out)

    return _Location(fmt, (alternatives(images), alternatives(labels)), _idx_reader(transpose, label_offset))


def _mnist_like_locations(folder: str, tv_folder: str) -> Callable[[Path, str], list[_Location]]:
    def locations(root: Path, split: str) -> list[_Location]:
        prefix = "train" if split == "train" else "t10k"
        return [
            _shared_location(root, folder, split),
            _idx_location([root / tv_folder / "raw"], f"{prefix}-images-idx3-ubyte",
                          f"{prefix}-labels-idx1-ubyte", fmt=f"torchvision {tv_folder}"),
        ]
    return locations


def _femnist_locations(root: Path, split: str) -> list[_Location]:
    return [_shared_location(root, "femnist_leaf", split, extra=("writer",), read=_femnist_read)]


def _emnist_locations(emnist_split: str) -> Callable[[Path, str], list[_Location]]:
    def locations(root: Path, split: str) -> list[_Location]:
        raw = root / "EMNIST" / "raw"
        prefix = f"emnist-{emnist_split}-{split}"
        return [_idx_location([raw, raw / "gzip"], f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte",
                              transpose=True, label_offset=1 if emnist_split == "letters" else 0,
                              fmt="torchvision EMNIST")]
    return locations


def _svhn_locations(root: Path, split: str) -> list[_Location]:
    name = f"{split}_32x32.mat"
    files = ((root / name, root / "svhn" / name, root / "SVHN" / name),)
    return [_Location("SVHN .mat", files, _svhn_read)]


def _cifar_locations(folder: str, tv_folder: str, cls_name: str, check: str
                     ) -> Callable[[Path, str], list[_Location]]:
    def locations(root: Path, split: str) -> list[_Location]:
        return [
            _shared_location(root, folder, split),
            _Location(f"torchvision {cls_name}", ((root / tv_folder / check[split],),),
                      _cifar_reader(cls_name, split)),
        ]
    return locations


def _digits_table() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits as (images N x 8 x 8 float64, labels), in its order.

    Read straight from the CSV that scikit-learn ships (``datasets/data/digits.csv.gz``: 64
    intensities and the label per row) without importing scikit-learn, whose import (with
    scipy.stats) costs 1-2 s of every run on the default dataset; ``load_digits`` is the fallback
    where that file is not where this version keeps it.
    """
    spec = importlib.util.find_spec("sklearn")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, "rt") as f:
                table = np.loadtxt(f, delimiter=",", ndmin=2)
            if table.shape[1] == 65:
                return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target.astype(np.int64)


def _digits_builtin(split: str) -> _Raw:
    images, labels = _digits_table()
    test = np.arange(len(labels)) % _DIGITS_TEST_EVERY == _DIGITS_TEST_EVERY - 1
    keep = test if split == "test" else ~test
    # Intensities are 0..16; scaled like the 8-bit sets below but with 16 as full scale.
    return _Raw(images=images[keep].astype(np.float32), labels=labels[keep])


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
    locations: Callable[[Path, str], list[_Location]] | None = None
    builtin: Callable[[str], _Raw] | None = None
    full_scale: float = 255.0


_CIFAR10_CHECK = {"train": "data_batch_1", "test": "test_batch"}
_CIFAR100_CHECK = {"train": "train", "test": "test"}


def _build_registry() -> dict[str, DatasetSpec]:
    reg: dict[str, DatasetSpec] = {
        "digits": DatasetSpec(
            "digits", 10, *DIGITS_STATS, builtin=_digits_builtin, full_scale=16.0,
            help="bundled with scikit-learn; needs no files"),
        "mnist": DatasetSpec(
            "mnist", 10, *MNIST_STATS, locations=_mnist_like_locations("mnist", "MNIST"),
            help="<root>/mnist/{x,y}_{train,test}.npy.xz (shared layout), or the raw IDX files "
                 "<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (torchvision layout)"),
        "fashion_mnist": DatasetSpec(
            "fashion_mnist", 10, *FASHION_MNIST_STATS,
            locations=_mnist_like_locations("fashion_mnist", "FashionMNIST"),
            help="<root>/fashion_mnist/{x,y}_{train,test}.npy.xz (shared layout), or the raw IDX files "
                 "<root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (torchvision layout)"),
        "femnist": DatasetSpec(
            "femnist", 62, *MNIST_STATS, locations=_femnist_locations,
            help="<root>/femnist_leaf/{x,y,writer}_{train,test}.npy.xz (LEAF per-writer split, shared layout)"),
        "cifar10": DatasetSpec(
            "cifar10", 10, *CIFAR10_STATS,
            locations=_cifar_locations("cifar10", "cifar-10-batches-py", "CIFAR10", _CIFAR10_CHECK),
            help="<root>/cifar10/{x,y}_{train,test}.npy.xz (shared layout), or the python batches "
                 "<root>/cifar-10-batches-py/ (torchvision layout)"),
        "cifar100": DatasetSpec(
            "cifar100", 100, *CIFAR100_STATS,
            locations=_cifar_locations("cifar100", "cifar-100-python", "CIFAR100", _CIFAR100_CHECK),
            help="<root>/cifar100/{x,y}_{train,test}.npy.xz (shared layout, fine labels), or the python "
                 "batches <root>/cifar-100-python/ (torchvision layout)"),
        "svhn": DatasetSpec(
            "svhn", 10, *SVHN_STATS, locations=_svhn_locations,
            help="the cropped-digits files train_32x32.mat and test_32x32.mat in <root>/ or <root>/svhn/"),
    }
    for split, classes in EMNIST_SPLITS.items():
        reg[f"emnist-{split}"] = DatasetSpec(
            f"emnist-{split}", classes, *MNIST_STATS, locations=_emnist_locations(split),
            help=f"<root>/EMNIST/raw/emnist-{split}-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte[.gz] "
                 "(torchvision layout, as extracted from the EMNIST gzip archive)")
    reg["emnist"] = reg[f"emnist-{EMNIST_DEFAULT_SPLIT}"]
    return reg


DATASETS: dict[str, DatasetSpec] = _build_registry()

_ALIASES = {"fashion-mnist": "fashion_mnist", "fmnist": "fashion_mnist", "cifar-10": "cifar10",
            "cifar-100": "cifar100"}


def dataset_names() -> list[str]:
    """Every name :func:`load_dataset` accepts (aliases aside)."""
    return sorted(DATASETS)


def _spec(name: str) -> DatasetSpec:
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key.startswith("emnist_"):
        key = "emnist-" + key[len("emnist_"):]
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}")
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


def _not_found(spec: DatasetSpec, split: str, tried: list[tuple[Path, list[_Location]]]) -> DatasetNotFoundError:
    lines = [f"dataset {spec.name!r} (split {split!r}) was not found. Looked in, in order:"]
    for root, locations in tried:
        note = "" if root.is_dir() else "  (directory does not exist)"
        lines.append(f"  {root}{note}")
        lines += [f"    - {loc.describe()}" for loc in locations]
    lines.append(f"To provide it, put {spec.help}; then pass root=<root> or set {_ENV_DATA}=<root>. "
                 f"Roots are searched in this order: the root argument, ${_ENV_DATA}, "
                 f"<project>/../shared/data, <cwd>/../shared/data.")
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


def _finish(spec: DatasetSpec, raw: _Raw, source: str) -> ArrayDataset:
    labels = np.asarray(raw.labels).reshape(-1).astype(np.int64)
    if labels.shape[0] != raw.images.shape[0]:
        raise ValueError(f"{source}: {raw.images.shape[0]} images but {labels.shape[0]} labels")
    if labels.size and (labels.min() < 0 or labels.max() >= spec.num_classes):
        raise ValueError(f"{source}: labels must lie in [0, {spec.num_classes}) for {spec.name}, "
                         f"found range [{labels.min()}, {labels.max()}]")
    x = _to_tensor(raw.images, raw.channels_first, spec, source)
    return ArrayDataset(x=x, y=torch.from_numpy(labels), num_classes=spec.num_classes, name=spec.name,
                        groups=raw.groups)


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
    tried: list[tuple[Path, list[_Location]]] = []
    for base in search_roots(root):
        locations = spec.locations(base, split)
        tried.append((base, locations))
        for loc in locations:
            paths = loc.resolve()
            if paths is not None:
                return _finish(spec, loc.read(paths), str(paths[0]))
    raise _not_found(spec, split, tried)


def load_train_test(name: str, root: str | Path | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Both splits of dataset ``name``: ``(train, test)``."""
    return load_dataset(name, "train", root), load_dataset(name, "test", root)
