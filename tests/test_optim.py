"""fl_core.optim.MomentumSGD is torch.optim.SGD's update bit for bit, and a process that trains a
client does not import torch._dynamo (the reason the optimizer is the project's own)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from fl_core.models import build_model, flat_params, load_flat
from fl_core.optim import MomentumSGD


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_the_update_equals_torch_sgd_bit_for_bit(momentum):
    torch.manual_seed(0)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    start = flat_params(build_model("cnn", (1, 28, 28), 10))
    ours, theirs = (load_flat(build_model("cnn", (1, 28, 28), 10), start) for _ in range(2))
    opt_ours = MomentumSGD(ours.parameters(), lr=0.05, momentum=momentum)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=momentum)
    for step in range(6):
        idx = torch.arange(step * 8, step * 8 + 16) % 64
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        assert torch.equal(flat_params(ours), flat_params(theirs)), step
    assert not torch.equal(flat_params(ours), start)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="lr >= 0"):
        MomentumSGD([torch.nn.Parameter(torch.zeros(2))], lr=-1.0)


def test_training_a_client_does_not_import_dynamo():
    code = (
        "import sys, torch\n"
        "from fl_core.data import ArrayDataset\n"
        "from fl_core.models import build_model\n"
        "from fl_core.training import TrainConfig, sgd_epochs\n"
        "data = ArrayDataset(torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,)), 10, 'noise')\n"
        "sgd_epochs(build_model('cnn', (1, 28, 28), 10), data, TrainConfig(epochs=1, momentum=0.9),"
        " torch.Generator().manual_seed(0))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
