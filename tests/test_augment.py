"""FedFisher's CIFAR augmentation: each image a random crop of its padded self, maybe flipped."""

from __future__ import annotations

import pytest
import torch

from fl_core.augment import Augment, black_level, crop_flip
from fl_core.data import CIFAR10_STATS, ArrayDataset
from fl_core.models import build_model, flat_params, load_flat
from fl_core.training import TrainConfig, key_settings, sgd_epochs
from vmc_sim.scenario.config import ConfigError
from vmc_sim.scenario.schema import load_scenario


def cifar_like(n: int = 40, seed: int = 0) -> ArrayDataset:
    g = torch.Generator().manual_seed(seed)
    return ArrayDataset(torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g), 10, "cifar10")


def test_every_image_is_a_crop_of_its_padded_self_flipped_or_not():
    data = cifar_like(64)
    fill = black_level(data)
    out = crop_flip(data.x, torch.Generator().manual_seed(3), fill)
    assert out.shape == data.x.shape
    padded = fill.view(1, 3, 1, 1).expand(64, 3, 40, 40).clone()
    padded[:, :, 4:36, 4:36] = data.x
    flipped = 0
    for i in range(64):
        crops = [(padded[i, :, r : r + 32, c : c + 32], f) for r in range(9) for c in range(9) for f in (False, True)]
        hits = [f for crop, f in crops if torch.equal(out[i], crop.flip(-1) if f else crop)]
        assert hits, f"image {i} is no crop of its padded self"
        flipped += hits[0]
    assert 16 < flipped < 48  # about half flipped


def test_the_border_is_a_black_pixel_in_the_datasets_normalisation():
    data = cifar_like(8)
    mean, std = CIFAR10_STATS
    assert torch.allclose(black_level(data), torch.tensor([-m / s for m, s in zip(mean, std, strict=True)]))
    unknown = ArrayDataset(data.x, data.y, 10, "noise")
    assert torch.equal(black_level(unknown), torch.zeros(3))
    out = crop_flip(data.x, torch.Generator().manual_seed(0), black_level(data), padding=4)
    # an image shifted by the largest offset shows at least one row or column of padding
    border = torch.cat(
        [out[:, :, :1].flatten(2), out[:, :, -1:].flatten(2), out[..., :1].flatten(2), out[..., -1:].flatten(2)], dim=2
    )
    assert bool((border == black_level(data).view(1, 3, 1)).any())


def test_augmented_training_is_reproducible_and_differs_from_plain_training():
    data = cifar_like(48)
    torch.manual_seed(0)
    w0 = flat_params(build_model("cnn", (3, 32, 32), 10))

    def train(augment: str) -> torch.Tensor:
        model = load_flat(build_model("cnn", (3, 32, 32), 10), w0)
        cfg = TrainConfig(epochs=1, lr=0.05, batch_size=16, augment=augment)
        return flat_params(sgd_epochs(model, data, cfg, torch.Generator().manual_seed(7)))

    assert torch.equal(train("crop_flip"), train("crop_flip"))
    assert not torch.equal(train("crop_flip"), train("none"))


def test_augmentation_enters_stored_keys_only_when_on():
    assert "augment" not in key_settings(TrainConfig())  # contributions already on disk keep their keys
    assert key_settings(TrainConfig(augment="crop_flip"))["augment"] is Augment.CROP_FLIP
    with pytest.raises(ValueError, match="train.augment must be one of"):
        TrainConfig(augment="mixup")


def test_a_scenario_names_the_bad_augmentation(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("federated:\n  train: {augment: mixup}\n")
    with pytest.raises(ConfigError, match="federated.train.augment"):
        load_scenario(p)
    p.write_text("federated:\n  dataset: cifar10\n  train: {augment: crop_flip}\n")
    assert load_scenario(p).federated.train.build().augment is Augment.CROP_FLIP
