"""Local training and evaluation: the fast paths give the plain paths' answers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fl_core.data import ArrayDataset
from fl_core.models import build_model, flat_params, load_flat
from fl_core.training import TrainConfig, evaluate, sgd_epochs, sgd_optimizer


def images(n: int = 300, seed: int = 0) -> ArrayDataset:
    g = torch.Generator().manual_seed(seed)
    return ArrayDataset(torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g), 10, "noise")


def test_evaluate_equals_a_plain_forward_pass():
    torch.manual_seed(0)
    model, data = build_model("cnn", (1, 28, 28), 10), images()
    w = flat_params(model) + 0.05 * torch.randn(flat_params(model).numel())
    reference = build_model("cnn", (1, 28, 28), 10)
    load_flat(reference, w)
    with torch.no_grad():
        logits = reference.eval()(data.x)
    acc, loss = evaluate(model, w, data)
    assert acc * len(data) == int((logits.argmax(1) == data.y).sum())
    assert abs(loss - float(F.cross_entropy(logits, data.y))) < 1e-5


def test_a_ladder_with_one_optimizer_equals_one_long_run_with_momentum():
    cfg = TrainConfig(epochs=3, lr=0.05, batch_size=32, momentum=0.9)
    data = images(96)
    torch.manual_seed(1)
    start = flat_params(build_model("cnn", (1, 28, 28), 10))
    long = load_flat(build_model("cnn", (1, 28, 28), 10), start)
    sgd_epochs(long, data, cfg, torch.Generator().manual_seed(5), epochs=3)
    ladder = load_flat(build_model("cnn", (1, 28, 28), 10), start)
    opt, g = sgd_optimizer(ladder, cfg), torch.Generator().manual_seed(5)
    sgd_epochs(ladder, data, cfg, g, epochs=1, optimizer=opt)
    sgd_epochs(ladder, data, cfg, g, epochs=2, optimizer=opt)
    assert torch.equal(flat_params(ladder), flat_params(long))
    fresh = load_flat(build_model("cnn", (1, 28, 28), 10), start)  # without the optimizer the momentum restarts
    g = torch.Generator().manual_seed(5)
    sgd_epochs(fresh, data, cfg, g, epochs=1)
    sgd_epochs(fresh, data, cfg, g, epochs=2)
    assert not torch.equal(flat_params(fresh), flat_params(long))
