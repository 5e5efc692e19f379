"""Tests for fl_core.data: bundled digits, the shared copies, torchvision layouts, errors, cache."""

from __future__ import annotations

import gzip
import lzma
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fl_core.data as data
from fl_core.data import (
    ArrayDataset,
    DatasetNotFoundError,
    load_dataset,
    load_train_test,
    read_idx,
    search_roots,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _need_shared(folder: str) -> None:
    if not (SHARED / folder).is_dir():
        pytest.skip(f"shared data folder {SHARED / folder} is absent (CI has ../shared beside the repo)")


@pytest.fixture(scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vmc-cache")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, _session_cache: Path) -> None:
    """No user VMC_DATA leaks in; caches go to a per-session temporary directory."""
    monkeypatch.delenv("VMC_DATA", raising=False)
    monkeypatch.setenv("VMC_CACHE", str(_session_cache))


def _unnormalise(ds: ArrayDataset) -> np.ndarray:
    """Back to 0..255 pixel values (N x C x H x W) using the dataset's constants."""
    spec = data.DATASETS[ds.name]
    mean = torch.tensor(spec.mean).view(1, -1, 1, 1)
    std = torch.tensor(spec.std).view(1, -1, 1, 1)
    return ((ds.x * std + mean) * spec.full_scale).numpy()


def _write_idx(path: Path, arr: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzip-compressed when the name ends in .gz)."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    payload = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as fh:
        fh.write(payload)


def _write_npy_xz(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)


def _fake_images(n: int, h: int = 28, w: int = 28, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, h, w), dtype=np.uint8)


# ------------------------------------------------------------------------------- digits


def test_digits_loads_with_no_files(tmp_path: Path) -> None:
    train, test = load_train_test("digits", root=tmp_path)
    assert (len(train), len(test)) == (1438, 359)
    assert train.input_shape == (1, 8, 8) and train.num_classes == 10 and train.name == "digits"
    assert train.x.dtype == torch.float32 and train.y.dtype == torch.int64 and train.groups is None
    # The documented constants are the train split's own statistics.
    assert abs(float(train.x.mean())) < 1e-3 and abs(float(train.x.std()) - 1.0) < 1e-3
    from sklearn.datasets import load_digits

    target = load_digits().target
    np.testing.assert_array_equal(test.y.numpy(), target[4::5])
    assert set(np.unique(test.y.numpy())) == set(range(10))


def test_digits_read_without_scikit_learn_equal_its_loader() -> None:
    """The bundled CSV read directly is scikit-learn's ``load_digits``, image for image."""
    from sklearn.datasets import load_digits

    from fl_core.data_files import digits_table

    images, labels = digits_table()
    bunch = load_digits()
    np.testing.assert_array_equal(images, bunch.images)
    np.testing.assert_array_equal(labels, bunch.target)


def test_loading_digits_does_not_import_scikit_learn(tmp_path: Path) -> None:
    code = (
        "import sys; from fl_core.data import load_train_test; load_train_test('digits'); "
        "print('sklearn' in sys.modules)"
    )
    env = {**os.environ, "VMC_CACHE": str(tmp_path / "cache"), "VMC_DATA": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"


def test_unknown_name_and_bad_split() -> None:
    with pytest.raises(ValueError, match=r"unknown dataset 'imagenet'.*mnist"):
        load_dataset("imagenet")
    with pytest.raises(ValueError, match="split must be one of"):
        load_dataset("digits", split="validation")


def test_registry_names() -> None:
    names = data.dataset_names()
    for n in (
        "digits",
        "mnist",
        "fashion_mnist",
        "femnist",
        "cifar10",
        "cifar100",
        "svhn",
        "emnist",
        "emnist-digits",
        "emnist-letters",
        "emnist-balanced",
        "emnist-byclass",
    ):
        assert n in names
    assert data.DATASETS["emnist"].name == "emnist-balanced"
    assert data.DATASETS["emnist-byclass"].num_classes == 62


# ------------------------------------------------------------------------- shared copies


def test_mnist_from_shared_data() -> None:
    _need_shared("mnist")
    train, test = load_train_test("mnist")
    assert (len(train), len(test)) == (60000, 10000)
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    assert train.y[:5].tolist() == [5, 0, 4, 1, 9]
    assert test.y[:5].tolist() == [7, 2, 1, 0, 4]
    assert train.x.dtype == torch.float32 and train.y.dtype == torch.int64
    assert abs(float(train.x.mean())) < 1e-3 and abs(float(train.x.std()) - 1.0) < 1e-2


def test_femnist_groups_and_polarity() -> None:
    _need_shared("femnist_leaf")
    train = load_dataset("femnist")
    assert len(train) == 14708 and train.num_classes == 62 and train.input_shape == (1, 28, 28)
    assert train.groups is not None and train.groups.shape == (14708,)
    assert np.unique(train.groups).shape[0] == 105
    pixels = _unnormalise(train)
    assert pixels.mean() < 0.1 * 255, "FEMNIST must be flipped to MNIST polarity (background 0)"
    test = load_dataset("femnist", "test")
    assert test.groups is not None and test.groups.shape == (len(test),)
    sub = train.subset(np.flatnonzero(train.groups == train.groups[0]))
    assert sub.groups is not None and np.all(sub.groups == train.groups[0])


def test_cifar100_train_from_shared_data() -> None:
    _need_shared("cifar100")
    train = load_dataset("cifar100")
    assert len(train) == 5000 and train.input_shape == (3, 32, 32) and train.num_classes == 100
    assert train.y[:10].tolist() == [19, 29, 0, 11, 1, 86, 90, 28, 23, 31]
    with lzma.open(SHARED / "cifar100" / "x_train.npy.xz") as f:
        raw = np.load(f)
    np.testing.assert_allclose(_unnormalise(train.subset([0, 1])), raw[:2].transpose(0, 3, 1, 2), atol=1e-3)


# -------------------------------------------------------------------- torchvision layouts


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(("name", "folder"), [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_torchvision_idx_layout(tmp_path: Path, name: str, folder: str, gz: bool) -> None:
    raw = tmp_path / folder / "raw"
    suffix = ".gz" if gz else ""
    x_tr, y_tr = _fake_images(12, seed=1), np.arange(12, dtype=np.uint8) % 10
    x_te, y_te = _fake_images(5, seed=2), np.array([7, 2, 1, 0, 4], dtype=np.uint8)
    _write_idx(raw / f"train-images-idx3-ubyte{suffix}", x_tr)
    _write_idx(raw / f"train-labels-idx1-ubyte{suffix}", y_tr)
    _write_idx(raw / f"t10k-images-idx3-ubyte{suffix}", x_te)
    _write_idx(raw / f"t10k-labels-idx1-ubyte{suffix}", y_te)
    train, test = load_train_test(name, root=tmp_path)
    assert (len(train), len(test)) == (12, 5) and train.input_shape == (1, 28, 28)
    np.testing.assert_allclose(_unnormalise(train)[:, 0], x_tr, atol=1e-3)
    np.testing.assert_allclose(_unnormalise(test)[:, 0], x_te, atol=1e-3)
    assert train.y.tolist() == y_tr.tolist() and test.y.tolist() == [7, 2, 1, 0, 4]


def test_emnist_layout_orientation_and_letters(tmp_path: Path) -> None:
    upright = np.zeros((3, 28, 28), dtype=np.uint8)
    upright[:, 2, 5:20] = 255  # a horizontal bar near the top: not symmetric under transposition
    upright[1, 10:25, 3] = 128
    raw = tmp_path / "EMNIST" / "raw"
    for split in ("train", "test"):
        # The EMNIST files store each image transposed, plain files beside gz files in raw/gzip.
        _write_idx(raw / f"emnist-digits-{split}-images-idx3-ubyte", upright.transpose(0, 2, 1))
        _write_idx(raw / f"emnist-digits-{split}-labels-idx1-ubyte", np.array([3, 1, 4], dtype=np.uint8))
        _write_idx(raw / "gzip" / f"emnist-letters-{split}-images-idx3-ubyte.gz", upright.transpose(0, 2, 1))
        _write_idx(raw / "gzip" / f"emnist-letters-{split}-labels-idx1-ubyte.gz", np.array([1, 26, 5], dtype=np.uint8))
    digits = load_dataset("emnist-digits", root=tmp_path)
    assert digits.num_classes == 10 and digits.y.tolist() == [3, 1, 4]
    np.testing.assert_allclose(_unnormalise(digits)[:, 0], upright, atol=1e-3)
    letters = load_dataset("emnist_letters", "test", root=tmp_path)
    assert letters.num_classes == 26 and letters.y.tolist() == [0, 25, 4]
    np.testing.assert_allclose(_unnormalise(letters)[:, 0], upright, atol=1e-3)
    with pytest.raises(DatasetNotFoundError, match="emnist-balanced-train-images-idx3-ubyte"):
        load_dataset("emnist", root=tmp_path)


@pytest.mark.parametrize("subdir", ["", "svhn"])
def test_svhn_mat_layout(tmp_path: Path, subdir: str) -> None:
    from scipy.io import savemat

    n = 4
    x = np.random.default_rng(0).integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = np.array([[10], [1], [9], [10]], dtype=np.uint8)
    folder = tmp_path / subdir
    folder.mkdir(exist_ok=True)
    savemat(folder / "train_32x32.mat", {"X": x, "y": y})
    savemat(folder / "test_32x32.mat", {"X": x[..., :2], "y": y[:2]})
    train, test = load_train_test("svhn", root=tmp_path)
    assert len(train) == 4 and len(test) == 2 and train.input_shape == (3, 32, 32)
    assert train.y.tolist() == [0, 1, 9, 0]
    np.testing.assert_allclose(_unnormalise(train), x.transpose(3, 2, 0, 1), atol=1e-3)


def test_cifar_python_batches_delegate_to_torchvision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision.datasets as tvd

    (tmp_path / "cifar-10-batches-py").mkdir()
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(b"")
    hwc = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    calls = []

    class FakeCIFAR10:
        def __init__(self, root: str, train: bool, download: bool) -> None:
            calls.append((root, train, download))
            self.data, self.targets = hwc, [2, 0, 9]

    monkeypatch.setattr(tvd, "CIFAR10", FakeCIFAR10)
    test = load_dataset("cifar10", "test", root=tmp_path)
    assert calls == [(str(tmp_path.resolve()), False, False)]
    assert test.y.tolist() == [2, 0, 9] and test.input_shape == (3, 32, 32)
    np.testing.assert_allclose(_unnormalise(test), hwc.transpose(0, 3, 1, 2), atol=1e-3)


# ------------------------------------------------------------------------- errors, roots


def test_missing_dataset_lists_every_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_root = tmp_path / "from-env"
    monkeypatch.setenv("VMC_DATA", str(env_root))
    arg_root = tmp_path / "from-arg"
    arg_root.mkdir()
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("svhn", root=arg_root)
    assert isinstance(info.value, FileNotFoundError)
    msg = str(info.value)
    assert "'svhn'" in msg and "train_32x32.mat" in msg and "test_32x32.mat" in msg
    assert msg.index(str(arg_root.resolve())) < msg.index(str(env_root.resolve()))
    assert f"{env_root.resolve()}  (directory does not exist)" in msg
    for root in search_roots(arg_root):
        assert str(root) in msg
    assert "VMC_DATA" in msg


def test_search_roots_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("VMC_DATA", f"{a}{os.pathsep}{b}")
    roots = search_roots(tmp_path)
    assert roots[:3] == [tmp_path.resolve(), a.resolve(), b.resolve()]
    project_shared = (Path(data.__file__).resolve().parent.parent.parent / "shared" / "data").resolve()
    assert project_shared in roots


def test_read_idx_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x02\x08\x01abcd")
    with pytest.raises(ValueError, match="bad magic"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 3)
    with pytest.raises(ValueError, match="size mismatch"):
        read_idx(short)


# --------------------------------------------------------------------------------- cache


def _fake_shared_mnist(root: Path, value: int) -> None:
    for split, n in (("train", 6), ("test", 3)):
        _write_npy_xz(root / "mnist" / f"x_{split}.npy.xz", np.full((n, 28, 28), value, dtype=np.uint8))
        _write_npy_xz(root / "mnist" / f"y_{split}.npy.xz", np.arange(n, dtype=np.uint8))


def test_cache_is_reused_and_invalidated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMC_CACHE", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "data"  # beside the project's other caches
    root = tmp_path / "data"
    _fake_shared_mnist(root, 10)
    first = load_dataset("mnist", root=root)
    cached = sorted(p.name for p in cache.iterdir())
    assert len(cached) == 2 and all(n.endswith(".npy") and n.startswith("mnist-") for n in cached)
    assert not any(n.startswith(".tmp-") for n in cached)

    def no_decompress(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached copy should have been used")

    with monkeypatch.context() as m:
        m.setattr(lzma, "open", no_decompress)
        second = load_dataset("mnist", root=root)
    assert torch.equal(first.x, second.x) and torch.equal(first.y, second.y)

    # A changed source (new content and mtime) is decoded again under a new key.
    _fake_shared_mnist(root, 200)
    src = root / "mnist" / "x_train.npy.xz"
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third = load_dataset("mnist", root=root)
    assert np.allclose(_unnormalise(third), 200, atol=1e-3)
    assert len(list(cache.iterdir())) > len(cached)


def test_unwritable_cache_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("VMC_CACHE", str(blocker / "cache"))
    _fake_shared_mnist(tmp_path / "data", 7)
    with pytest.warns(UserWarning, match="could not cache"):
        ds = load_dataset("mnist", "test", root=tmp_path / "data")
    assert len(ds) == 3


# ------------------------------------------------------------------------- ArrayDataset


def test_array_dataset_subset_and_validation() -> None:
    ds = ArrayDataset(
        x=torch.arange(5 * 4, dtype=torch.float32).view(5, 1, 2, 2),
        y=torch.tensor([0, 1, 2, 1, 0]),
        num_classes=3,
        name="toy",
        groups=np.array([7, 7, 8, 8, 9]),
    )
    assert len(ds) == 5 and ds.input_shape == (1, 2, 2)
    sub = ds.subset(np.array([4, 0]))
    assert sub.y.tolist() == [0, 0] and sub.groups is not None and sub.groups.tolist() == [9, 7]
    assert torch.equal(sub.x[0], ds.x[4])
    masked = ds.subset(ds.y.numpy() == 1)
    assert masked.y.tolist() == [1, 1] and masked.groups.tolist() == [7, 8]  # type: ignore[union-attr]
    assert len(ds.subset([])) == 0
    with pytest.raises(IndexError, match="out of range"):
        ds.subset([5])
    with pytest.raises(ValueError, match="y must be an int64"):
        ArrayDataset(x=ds.x, y=ds.y.float(), num_classes=3, name="toy")
    with pytest.raises(ValueError, match="x has 5 samples but y has 4"):
        ArrayDataset(x=ds.x, y=ds.y[:4], num_classes=3, name="toy")
