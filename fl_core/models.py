"""Models used by the toolkit, all without biases or batch norm so that every parameter
belongs to a Linear or Conv2d layer (what the Fisher representations support).

- ``cnn``: the paper's default two-layer CNN (conv 5x5 32 and 64 filters, each followed by a
  2x2 max-pool, then fully connected 512-128-classes), no bias.
- ``resnet18``: ResNet-18 with GroupNorm without affine parameters instead of batch norm.
- ``mlp``: a small multilayer perceptron for fast tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from .registry import Registry


class TwoLayerCNN(nn.Module):
    """conv(5x5, 32) - pool - conv(5x5, 64) - pool - fc 512 - fc 128 - fc classes."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int) -> None:
        super().__init__()
        c, h, w = input_shape
        self.conv1 = nn.Conv2d(c, 32, 5, bias=False)
        self.conv2 = nn.Conv2d(32, 64, 5, bias=False)
        h2, w2 = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
        if h2 < 1 or w2 < 1:
            raise ValueError(f"input {input_shape} is too small for the 5x5 CNN (need >= 16x16)")
        self.fc1 = nn.Linear(64 * h2 * w2, 512, bias=False)
        self.fc2 = nn.Linear(512, 128, bias=False)
        self.fc3 = nn.Linear(128, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ReLU after the max-pool: the same function (both are monotone), on a quarter of the values
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class MLP(nn.Module):
    """Flatten - hidden layers with ReLU - classes, no bias."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, hidden: tuple[int, ...] = (32,)) -> None:
        super().__init__()
        dims = [int(torch.tensor(input_shape).prod()), *hidden, num_classes]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in itertools.pairwise(dims))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(x, 1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, cout, affine=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, cout, affine=False)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(groups, cout, affine=False)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return F.relu(out + (x if self.short is None else self.short(x)))


class ResNet18GN(nn.Module):
    """ResNet-18 (CIFAR stem: 3x3 conv, no max-pool) with parameter-free GroupNorm.

    GroupNorm without affine parameters keeps every trainable weight in a conv or linear
    layer, so K-FAC covers the whole model; batch norm would couple samples in a batch and
    break both per-sample Fisher terms and the determinism of a client's contribution.
    """

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, groups: int = 8) -> None:
        super().__init__()
        c = input_shape[0]
        self.stem = nn.Conv2d(c, 64, 3, 1, 1, bias=False)
        self.norm = nn.GroupNorm(groups, 64, affine=False)
        widths, blocks, cin = (64, 128, 256, 512), [], 64
        for i, w in enumerate(widths):
            for j in range(2):
                blocks.append(_Block(cin, w, 2 if (j == 0 and i > 0) else 1, groups))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm(self.stem(x)))
        x = self.blocks(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


ModelFactory = Callable[[tuple[int, int, int], int], nn.Module]

MODELS: Registry[ModelFactory] = Registry(
    "model",
    {
        "cnn": TwoLayerCNN,
        "mlp": MLP,
        "resnet18": ResNet18GN,
    },
)


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int, **kwargs) -> nn.Module:
    """Instantiate a registered model by name (``cnn``, ``resnet18``, ``mlp``)."""
    shape = cast(tuple[int, int, int], tuple(input_shape))  # callers may pass a list
    return MODELS[name](shape, int(num_classes), **kwargs)


def flat_params(model: nn.Module) -> torch.Tensor:
    """All parameters as one detached float32 vector, in ``model.parameters()`` order."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).float().clone()


def load_flat(model: nn.Module, flat: torch.Tensor) -> nn.Module:
    """Write a flat vector back into ``model``'s parameters (in place) and return it."""
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    if flat.numel() != n:
        raise ValueError(f"flat vector has {flat.numel()} values, the model has {n} parameters")
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p).to(p.dtype))
            offset += p.numel()
    return model


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
