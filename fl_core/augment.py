"""Training-time image augmentation, as FedFisher's code applies it to CIFAR batches.

FedFisher (which seed 000 follows) trains its CIFAR clients on randomly cropped and flipped
images: a 32 x 32 crop of the image zero-padded by 4 pixels (black in the raw pixels), and a
horizontal flip with probability 1/2, drawn afresh for every sample of every batch. Here the
draws come from the client's own training stream, so a contribution stays a deterministic
function of its seeds. ``none`` (the default) draws nothing: training is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import torch

from .data import DATASETS, ArrayDataset


class Augment(str, Enum):
    NONE = "none"
    CROP_FLIP = "crop_flip"  # random crop of the 4-pixel padded image, then a horizontal flip (p = 1/2)


CROP_PADDING = 4

BatchAugmenter = Callable[[torch.Tensor], torch.Tensor]


def black_level(data: ArrayDataset) -> torch.Tensor:
    """Per-channel value of a black (zero) pixel after ``data``'s normalisation: what the raw
    image's zero padding becomes. Datasets the registry does not know are padded with 0."""
    spec = DATASETS.get(data.name)
    channels = data.x.shape[1]
    if spec is None or len(spec.mean) != channels:
        return torch.zeros(channels, dtype=data.x.dtype)
    return torch.tensor([-m / s for m, s in zip(spec.mean, spec.std, strict=True)], dtype=data.x.dtype)


def crop_flip(
    x: torch.Tensor, generator: torch.Generator, fill: torch.Tensor, padding: int = CROP_PADDING
) -> torch.Tensor:
    """Each image of the batch ``x`` (N x C x H x W) cropped back to H x W at a random offset of
    its ``padding``-pixel border (filled with ``fill`` per channel), then flipped left-right with
    probability 1/2. The offsets and flips are drawn from ``generator`` on the CPU."""
    n, c, h, w = x.shape
    offsets = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator).to(x.device)
    flips = torch.rand(n, generator=generator).lt(0.5).to(x.device)
    padded = fill.to(x).view(1, c, 1, 1).expand(n, c, h + 2 * padding, w + 2 * padding).clone()
    padded[:, :, padding : padding + h, padding : padding + w] = x
    rows = offsets[:, :1] + torch.arange(h, device=x.device)  # n x h
    cols = offsets[:, 1:] + torch.arange(w, device=x.device)  # n x w
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    out = padded[torch.arange(n, device=x.device)[:, None, None], :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)


def augmenter(kind: Augment | str, data: ArrayDataset, generator: torch.Generator) -> BatchAugmenter | None:
    """The batch transform for ``kind`` on ``data`` drawing from ``generator`` (None for ``none``)."""
    kind = Augment(kind)
    if kind is Augment.NONE:
        return None
    fill = black_level(data)
    return lambda batch: crop_flip(batch, generator, fill)
