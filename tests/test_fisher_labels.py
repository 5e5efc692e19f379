"""The expected-label Fisher (``fisher_labels: expected``) is the exact expectation over classes
that the drawn-label Fisher estimates: checked against a per-sample autograd reference, against
the mean of many drawn-label Fishers, and across representations; and choosing it changes the
contribution store's key while the default keeps every key already on disk."""

from __future__ import annotations

import argparse

import pytest
import torch
import torch.nn.functional as F

from fl_core.fisher import FisherLabels, compute_fisher
from fl_core.models import build_model, flat_params
from fl_core.training import TrainConfig, key_settings


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return build_model("mlp", (1, 6, 6), 5, hidden=(7,))


def reference_fisher(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """mean_n sum_c p(c|x_n) grad log p(c|x_n) grad log p(c|x_n)^T, one autograd call per (n, c)."""
    params = list(model.parameters())
    d = flat_params(model).numel()
    total = torch.zeros(d, d, dtype=torch.float64)
    for xn in x:
        logp = F.log_softmax(model(xn.unsqueeze(0)), dim=1)[0]
        for c in range(logp.shape[0]):
            g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(logp[c], params, retain_graph=True)]).double()
            total += logp[c].exp().double() * torch.outer(g, g)
    return total / x.shape[0]


def test_expected_full_fisher_is_the_exact_expectation_over_classes(mlp):
    x = torch.randn(9, 1, 6, 6)
    got = compute_fisher("full", mlp, x, torch.Generator().manual_seed(0), batch_size=4, labels="expected")
    torch.testing.assert_close(got.matrix.double(), reference_fisher(mlp, x), rtol=1e-4, atol=1e-7)


def test_drawn_labels_average_to_the_expected_fisher(mlp):
    """The drawn-label Fisher is unbiased for the expected one: the mean of N independent draws
    sits at the distance sqrt(E||draw - exact||^2 / N) from it that unbiasedness predicts (a
    bias would add a term that does not shrink with N)."""
    x = torch.randn(12, 1, 6, 6)
    exact = compute_fisher("full", mlp, x, torch.Generator(), labels="expected").matrix.double()
    n = 300
    draws = torch.stack(
        [
            compute_fisher("full", mlp, x, torch.Generator().manual_seed(s), labels="sampled").matrix.double()
            for s in range(n)
        ]
    )
    rms = torch.sqrt(((draws - exact) ** 2).sum((1, 2)).mean())
    predicted = rms / n**0.5
    got = torch.linalg.norm(draws.mean(0) - exact)
    assert 0.5 * predicted < got < 1.5 * predicted, (float(got), float(predicted))


def test_expected_representations_agree(mlp):
    """Diagonal = diag(full) and, for one input, K-FAC = the full Fisher's layer blocks (A is a
    rank-one outer product then), all with expected labels."""
    x = torch.randn(8, 1, 6, 6)
    full = compute_fisher("full", mlp, x, torch.Generator(), labels="expected")
    diag = compute_fisher("diagonal", mlp, x, torch.Generator(), labels="expected")
    torch.testing.assert_close(torch.diagonal(full.matrix), diag.diag, rtol=1e-5, atol=1e-8)
    one = x[:1]
    full1 = compute_fisher("full", mlp, one, torch.Generator(), labels="expected").matrix.double()
    kfac1 = compute_fisher("kfac", mlp, one, torch.Generator(), labels="expected")
    mask = torch.zeros_like(full1)
    for s in kfac1.specs:
        mask[s.offset : s.offset + s.size, s.offset : s.offset + s.size] = 1
    v = torch.randn(full1.shape[0], dtype=torch.float64)
    torch.testing.assert_close(kfac1.matvec(v), (full1 * mask) @ v, rtol=1e-4, atol=1e-7)


def test_expected_conv_kfac_matches_the_mean_of_drawn_ones():
    """On the paper's CNN: G factors from expected labels against the mean over 60 drawn-label
    captures (A does not depend on labels and is identical)."""
    torch.manual_seed(0)
    cnn = build_model("cnn", (1, 28, 28), 10)
    x = torch.randn(6, 1, 28, 28)
    exact = compute_fisher("kfac", cnn, x, torch.Generator(), labels="expected")
    draws = [compute_fisher("kfac", cnn, x, torch.Generator().manual_seed(s), labels="sampled") for s in range(60)]
    for layer, (a, g) in enumerate(exact.factors):
        torch.testing.assert_close(draws[0].factors[layer][0], a)
        mean_g = torch.stack([d.factors[layer][1].double() for d in draws]).mean(0)
        assert torch.linalg.norm(mean_g - g.double()) / torch.linalg.norm(g.double()) < 0.2


def reference_diagonal(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """mean_n sum_c p(c|x_n) (grad log p(c|x_n))^2, one autograd call per (n, c)."""
    params = list(model.parameters())
    total = torch.zeros(flat_params(model).numel(), dtype=torch.float64)
    for xn in x:
        logp = F.log_softmax(model(xn.unsqueeze(0)), dim=1)[0]
        for c in range(logp.shape[0]):
            g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(logp[c], params, retain_graph=True)]).double()
            total += logp[c].exp().double() * g**2
    return total / x.shape[0]


def test_expected_conv_diagonal_from_one_batched_backward_matches_per_class_autograd(monkeypatch):
    """The capture sends all C cotangents through one batched backward pass; on the paper's CNN
    (convolutions, max-pooling) it gives the per-(input, class) autograd diagonal, and so does
    the one-pass-per-class fallback, taken with a warning when an operator cannot be batched."""
    torch.manual_seed(0)
    cnn = build_model("cnn", (1, 28, 28), 10)
    x = torch.randn(5, 1, 28, 28)
    ref = reference_diagonal(cnn, x)
    from fl_core.fisher import capture

    real_vjp, real_grad = capture._vjp, torch.autograd.grad
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs["batched"])
        return real_vjp(*args, **kwargs)

    monkeypatch.setattr(capture, "_vjp", spy)
    got = compute_fisher("diagonal", cnn, x, torch.Generator(), batch_size=3, labels="expected").diag.double()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-9)
    assert calls == [True, True]  # one batched pass per mini-batch, nothing else

    def unbatchable(*args, **kwargs):
        calls.append(True)
        raise RuntimeError("no batching rule")

    def per_class(*args, **kwargs):
        calls.append(bool(kwargs.get("is_grads_batched")))
        return real_grad(*args, **kwargs)

    calls.clear()
    monkeypatch.setattr(capture, "_vjp", unbatchable)
    monkeypatch.setattr(torch.autograd, "grad", per_class)
    with pytest.warns(RuntimeWarning, match="one backward pass per class"):
        looped = compute_fisher("diagonal", cnn, x, torch.Generator(), batch_size=3, labels="expected").diag.double()
    torch.testing.assert_close(looped, got, rtol=1e-5, atol=1e-10)
    assert calls == [True] + [False] * 20  # the batched pass is tried once per call, then 10 passes a batch


class _InplaceAfterLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8, bias=False)
        self.fc2 = torch.nn.Linear(8, 3, bias=False)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1)), inplace=True))


class _LayerTwice(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 6, bias=False)

    def forward(self, x):
        return self.fc(torch.relu(self.fc(x.flatten(1))))


@pytest.mark.parametrize(("model", "message"), [(_InplaceAfterLayer, "in place"), (_LayerTwice, "twice")])
def test_a_model_whose_layer_outputs_the_fisher_cannot_see_is_refused(model, message):
    """An in-place op on a layer's output, or a layer applied twice, would give the gradient of
    another function: refused with the layer's name instead of a wrong Fisher."""
    with pytest.raises(ValueError, match=message):
        compute_fisher("diagonal", model(), torch.randn(4, 1, 2, 3), torch.Generator(), labels="expected")


def test_expected_labels_use_no_random_draw(mlp):
    x = torch.randn(5, 1, 6, 6)
    a = compute_fisher("kfac", mlp, x, torch.Generator().manual_seed(1), labels="expected")
    b = compute_fisher("kfac", mlp, x, torch.Generator().manual_seed(2), labels="expected")
    for fa, fb in zip(a.factors, b.factors, strict=True):
        for ma, mb in zip(fa, fb, strict=True):
            assert torch.equal(ma, mb)


def test_expected_labels_are_the_default():
    """The paper follows FedFisher, whose code takes the expectation over classes."""
    assert TrainConfig().fisher_labels is FisherLabels.EXPECTED
    from vmc_sim.scenario.config import TrainSection

    assert TrainSection().build().fisher_labels is FisherLabels.EXPECTED


def test_store_keys_keep_sampled_labels_keys_and_change_with_expected_labels():
    sampled = key_settings(TrainConfig(fisher_labels="sampled"), ("device",))
    expected = key_settings(TrainConfig(), ("device",))
    assert "fisher_labels" not in sampled and "device" not in sampled
    assert expected["fisher_labels"] is FisherLabels.EXPECTED
    assert {k: v for k, v in expected.items() if k != "fisher_labels"} == sampled
    with pytest.raises(ValueError, match="not a valid FisherLabels"):
        TrainConfig(fisher_labels="argmax")


def test_table2_store_key_is_unchanged_for_sampled_labels():
    """The one-shot reproductions' store (:mod:`vmc_sim.reproduction.common`): sampled labels keep the
    fingerprint contributions were stored under before the option existed."""
    from vmc_sim.reproduction import common as repro

    args = argparse.Namespace(
        store="STORE",
        dataset="mnist",
        scheme="per_client",
        clients=20,
        model="cnn",
        seed=0,
        max_train=None,
        validation_samples=500,
    )

    def store(labels: str) -> str:
        setup = argparse.Namespace(
            train=TrainConfig(fisher_labels=labels), model_fn=lambda: build_model("cnn", (1, 28, 28), 10)
        )
        return repro.contribution_store(setup, args, 0.1).fingerprint

    assert store("sampled") == "d1ed86363eb748c3"  # MNIST alpha 0.1's store in reports/table2_mnist
    assert store("expected") != store("sampled")


@pytest.mark.parametrize("labels", ["expected", "sampled"])
def test_output_gradients_equal_torch_public_call_bit_for_bit(labels):
    """The Fisher's own engine call (which skips the public call's shape check and its sympy
    import) gives exactly the gradients of ``torch.autograd.grad`` with the same cotangents."""
    from fl_core.fisher.capture import _cotangents, _output_grads

    torch.manual_seed(3)
    model = build_model("mlp", (1, 8, 8), 10, hidden=(16,))
    outs: list[torch.Tensor] = []
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.register_forward_hook(lambda _m, _i, o: outs.append(o))
    logits = model(torch.randn(12, 1, 8, 8))
    v = _cotangents(logits, FisherLabels(labels), torch.Generator().manual_seed(0))
    if v.shape[0] == 1:
        public = [g.unsqueeze(0) for g in torch.autograd.grad(logits, outs, v[0], retain_graph=True)]
    else:
        public = list(torch.autograd.grad(logits, outs, v, retain_graph=True, is_grads_batched=True))
    ours = _output_grads(logits, outs, v, [True])
    assert len(ours) == len(public) == 2
    for a, b in zip(ours, public, strict=True):
        assert a.shape == b.shape and torch.equal(a, b)


def test_a_fisher_pass_imports_no_symbolic_shapes():
    """A process that only trains and takes a Fisher does not pay for sympy (0.3 s a start)."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from fl_core.fisher import compute_fisher\n"
        "from fl_core.models import build_model\n"
        "m = build_model('mlp', (1, 8, 8), 10, hidden=(16,))\n"
        "compute_fisher('diagonal', m, torch.randn(20, 1, 8, 8), batch_size=8, generator=torch.Generator())\n"
        "print('sympy' in sys.modules, 'torch.fx.experimental.symbolic_shapes' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
