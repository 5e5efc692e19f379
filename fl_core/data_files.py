"""The dataset files on disk: the shared ``.npy.xz`` layout, raw IDX files, SVHN's ``.mat`` and the
CIFAR python batches, each split as a list of places it may live; decoded arrays are cached under
``$VMC_CACHE/data`` (:func:`cache_dir`), written atomically.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import lzma
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_ENV_CACHE = "VMC_CACHE"
_DIGITS_TEST_EVERY = 5


@dataclass(frozen=True)
class Raw:
    """Decoded images (N,H,W, N,H,W,C, or N,C,H,W when ``channels_first``), labels, groups."""

    images: np.ndarray
    labels: np.ndarray
    groups: np.ndarray | None = None
    channels_first: bool = False


@dataclass(frozen=True)
class Location:
    """One place a dataset split may live: the files it needs and how to read them."""

    fmt: str
    files: tuple[tuple[Path, ...], ...]  # each entry: alternatives, the first existing one is used
    read: Callable[[list[Path]], Raw]

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
        raise ValueError(
            f"{path}: IDX size mismatch: header says {dims} ({expected} bytes), file has {len(data)} bytes"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def cache_dir() -> Path:
    """Directory for decoded-array caches: ``$VMC_CACHE/data`` or ``~/.cache/vmc-sim/data`` (the other
    caches sit beside it: ``contributions``, ``sumo``, ``traces``, ``calibration.json``)."""
    env = os.environ.get(_ENV_CACHE)
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "vmc-sim") / "data"


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


def _shared_reader(with_groups: bool) -> Callable[[list[Path]], Raw]:
    def read(paths: list[Path]) -> Raw:
        arrays = [_read_npy_xz(p) for p in paths]
        groups = arrays[2].astype(np.int64) if with_groups else None
        return Raw(images=arrays[0], labels=arrays[1], groups=groups)

    return read


def _femnist_read(paths: list[Path]) -> Raw:
    raw = _shared_reader(with_groups=True)(paths)
    # LEAF stores ink dark on white; flip to MNIST polarity (ink bright, background 0).
    return Raw(images=255 - raw.images, labels=raw.labels, groups=raw.groups)


def _idx_reader(transpose: bool, label_offset: int = 0) -> Callable[[list[Path]], Raw]:
    def read(paths: list[Path]) -> Raw:
        images, labels = _read_idx_cached(paths[0]), _read_idx_cached(paths[1])
        if images.ndim != 3:
            raise ValueError(f"{paths[0]}: expected images N x H x W, got shape {images.shape}")
        if transpose:
            # EMNIST raw files store every image transposed (column-major); flip back upright.
            images = np.ascontiguousarray(images.transpose(0, 2, 1))
        return Raw(images=images, labels=labels.astype(np.int64) - label_offset)

    return read


def _svhn_read(paths: list[Path]) -> Raw:
    from scipy.io import loadmat

    mat = loadmat(paths[0])
    if "X" not in mat or "y" not in mat:
        raise ValueError(
            f"{paths[0]}: SVHN .mat file must hold variables 'X' and 'y', found "
            f"{sorted(k for k in mat if not k.startswith('__'))}"
        )
    x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if x.ndim != 4 or x.shape[2] != 3:
        raise ValueError(f"{paths[0]}: SVHN 'X' must be H x W x 3 x N, got shape {x.shape}")
    y[y == 10] = 0  # SVHN labels the digit 0 as 10
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1)).astype(np.uint8, copy=False)
    return Raw(images=images, labels=y, channels_first=True)


def _cifar_reader(cls_name: str, split: str) -> Callable[[list[Path]], Raw]:
    def read(paths: list[Path]) -> Raw:
        import torchvision.datasets as tvd

        root = paths[0].parent.parent  # torchvision wants the directory holding the batches folder
        try:
            ds = getattr(tvd, cls_name)(root=str(root), train=split == "train", download=False)
        except RuntimeError as exc:
            raise RuntimeError(f"torchvision could not read {cls_name} from {paths[0]}: {exc}") from exc
        return Raw(images=np.asarray(ds.data, dtype=np.uint8), labels=np.asarray(ds.targets, dtype=np.int64))

    return read


def _shared_location(
    root: Path, folder: str, split: str, extra: Sequence[str] = (), read: Callable[[list[Path]], Raw] | None = None
) -> Location:
    keys = [f"x_{split}", f"y_{split}", *(f"{k}_{split}" for k in extra)]
    files = tuple((root / folder / f"{k}.npy.xz",) for k in keys)
    return Location("shared layout", files, read or _shared_reader(with_groups=bool(extra)))


def _idx_location(
    raw_dirs: Sequence[Path],
    images: str,
    labels: str,
    transpose: bool = False,
    label_offset: int = 0,
    fmt: str = "torchvision IDX",
) -> Location:
    def alternatives(name: str) -> tuple[Path, ...]:
        out: list[Path] = []
        for d in raw_dirs:
            out += [d / name, d / f"{name}.gz"]
        return tuple(out)

    return Location(fmt, (alternatives(images), alternatives(labels)), _idx_reader(transpose, label_offset))


def mnist_like_locations(folder: str, tv_folder: str) -> Callable[[Path, str], list[Location]]:
    def locations(root: Path, split: str) -> list[Location]:
        prefix = "train" if split == "train" else "t10k"
        return [
            _shared_location(root, folder, split),
            _idx_location(
                [root / tv_folder / "raw"],
                f"{prefix}-images-idx3-ubyte",
                f"{prefix}-labels-idx1-ubyte",
                fmt=f"torchvision {tv_folder}",
            ),
        ]

    return locations


def femnist_locations(root: Path, split: str) -> list[Location]:
    return [_shared_location(root, "femnist_leaf", split, extra=("writer",), read=_femnist_read)]


def emnist_locations(emnist_split: str) -> Callable[[Path, str], list[Location]]:
    def locations(root: Path, split: str) -> list[Location]:
        raw = root / "EMNIST" / "raw"
        prefix = f"emnist-{emnist_split}-{split}"
        return [
            _idx_location(
                [raw, raw / "gzip"],
                f"{prefix}-images-idx3-ubyte",
                f"{prefix}-labels-idx1-ubyte",
                transpose=True,
                label_offset=1 if emnist_split == "letters" else 0,
                fmt="torchvision EMNIST",
            )
        ]

    return locations


def svhn_locations(root: Path, split: str) -> list[Location]:
    name = f"{split}_32x32.mat"
    files = ((root / name, root / "svhn" / name, root / "SVHN" / name),)
    return [Location("SVHN .mat", files, _svhn_read)]


def cifar_locations(
    folder: str, tv_folder: str, cls_name: str, check: Mapping[str, str]
) -> Callable[[Path, str], list[Location]]:
    def locations(root: Path, split: str) -> list[Location]:
        return [
            _shared_location(root, folder, split),
            Location(f"torchvision {cls_name}", ((root / tv_folder / check[split],),), _cifar_reader(cls_name, split)),
        ]

    return locations


def digits_table() -> tuple[np.ndarray, np.ndarray]:
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


def digits_builtin(split: str) -> Raw:
    images, labels = digits_table()
    test = np.arange(len(labels)) % _DIGITS_TEST_EVERY == _DIGITS_TEST_EVERY - 1
    keep = test if split == "test" else ~test
    # Intensities are 0..16; scaled like the 8-bit sets below but with 16 as full scale.
    return Raw(images=images[keep].astype(np.float32), labels=labels[keep])
