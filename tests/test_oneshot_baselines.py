"""The one-shot baselines FedLPA and DENSE behind the editor interface: they learn, FedLPA's
aggregation is the product of the client posteriors, DENSE's generator and distillation do their
jobs, edits rerun the method with every client charged, and bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fl_core.contribution import Contribution
from fl_core.editors import DenseConfig, DenseEditor, FedLPAConfig, FedLPAEditor, build_editor
from fl_core.editors.fedlpa import diagonal_posterior_mean, kfac_posterior_mean
from fl_core.errors import DuplicateClientError, UnknownClientError
from fl_core.payload import ByteKind, serialized_size
from fl_core.training import evaluate

SMALL_DENSE = DenseConfig(
    rounds=10,
    generator_steps=10,
    distill_steps=30,
    synthesis_batch=64,
    latent_dim=16,
    generator_width=8,
    generator_lr=1e-2,
    distill_lr=0.05,
)
TINY_DENSE = DenseConfig(
    rounds=2, generator_steps=2, distill_steps=3, synthesis_batch=16, latent_dim=8, generator_width=4
)


def accuracy(tiny, flat: torch.Tensor) -> float:
    return evaluate(tiny.model_fn(), flat, tiny.test)[0]


@pytest.mark.parametrize("fisher", ["kfac", "diagonal"])
def test_fedlpa_learns(tiny, fisher):
    editor = build_editor("fedlpa", tiny.pool(fisher, epochs=10), np.random.default_rng(0))
    editor.fit(range(8))
    assert accuracy(tiny, editor.model) > 0.4  # chance is 0.1


def test_dense_learns_and_its_stages_work(tiny):
    pool = tiny.pool("none", epochs=10)
    editor = DenseEditor(pool, SMALL_DENSE)
    editor.fit(range(8))
    assert accuracy(tiny, editor.model) > 0.25  # chance 0.1; the ensemble itself is at about 0.45
    trace = editor.trace
    ce = np.array(trace.generator_ce).reshape(SMALL_DENSE.rounds, SMALL_DENSE.generator_steps)
    assert ce[:, -1].mean() < 0.8 * ce[:, 0].mean()  # the generator fits each round's targets
    assert trace.synthetic_agreement > 0.6  # the student sides with the ensemble on most samples
    assert len(trace.distill_loss) == SMALL_DENSE.rounds * SMALL_DENSE.distill_steps


@pytest.mark.parametrize("fisher", ["kfac", "diagonal"])
def test_fedlpa_posterior_of_one_client_is_its_model(tiny, fisher):
    pool = tiny.pool(fisher)
    editor = FedLPAEditor(pool, FedLPAConfig(tol=1e-10))
    editor.fit([3])
    torch.testing.assert_close(editor.model, pool.train(3).weights, rtol=0, atol=1e-5)


def test_a_fedlpa_solve_stopped_at_its_cap_says_so(tiny):
    from fl_core.projection import SolveWarning

    editor = FedLPAEditor(tiny.pool("kfac"), FedLPAConfig(tol=1e-14, max_iter=1))
    with pytest.warns(
        SolveWarning, match=r"fedlpa: .*stopped above its tolerance 1e-14 .*\(max_iter\).*max_iter \(now 1\)"
    ):
        report = editor.fit(range(4))
    assert report.solve.stop_reason == "max_iter" and not report.solve.converged
    assert report.solve.as_dict()["stop_reason"] == "max_iter"


def test_fedlpa_aggregation_is_the_precision_weighted_mean_by_hand():
    # 1 x 1 layers, lambda = 0.01 (sqrt 0.1 added to each factor), equal sample counts:
    # precisions 0.5 * (0.9 + 0.1)(0.9 + 0.1) = 0.5 and 0.5 * (1.9 + 0.1)(0.9 + 0.1) = 1.0,
    # so the mean of (0, 3) is (0.5 * 0 + 1.0 * 3) / 1.5 = 2.
    one = lambda v: torch.tensor([[v]], dtype=torch.float64)  # noqa: E731
    mean, _, _ = kfac_posterior_mean([one(0.0), one(3.0)], [one(0.9), one(1.9)], [one(0.9), one(0.9)], [10, 10], 0.01)
    assert float(mean) == pytest.approx(2.0, abs=1e-12)
    diag = diagonal_posterior_mean([one(0.0), one(3.0)], [one(0.99), one(1.99)], [10, 10], 0.01)
    assert float(diag) == pytest.approx(2.0, abs=1e-12)


def test_fedlpa_kfac_mean_equals_dense_product_of_gaussians():
    g = torch.Generator().manual_seed(0)
    out_f, in_f, lam, n = 3, 4, 0.05, [5.0, 20.0, 11.0]
    spd = lambda d: (lambda r: r @ r.T / d)(torch.randn(d, d, generator=g, dtype=torch.float64))  # noqa: E731
    means = [torch.randn(out_f, in_f, generator=g, dtype=torch.float64) for _ in n]
    a = [spd(in_f) for _ in n]
    gg = [spd(out_f) for _ in n]
    got, _, residual = kfac_posterior_mean(means, a, gg, n, lam, tol=1e-12, max_iter=100)
    s = lam**0.5
    prec = [
        w
        / sum(n)
        * torch.kron(gk + s * torch.eye(out_f, dtype=torch.float64), ak + s * torch.eye(in_f, dtype=torch.float64))
        for w, ak, gk in zip(n, a, gg, strict=True)
    ]
    rhs = sum(p @ m.reshape(-1) for p, m in zip(prec, means, strict=True))
    want = torch.linalg.solve(sum(prec), rhs).view(out_f, in_f)
    assert residual <= 1e-12
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", ["fedlpa", "dense"])
def test_edits_rerun_on_the_new_client_set_and_charge_every_client(tiny, method):
    fisher = "kfac" if method == "fedlpa" else "diagonal"  # dense ignores (and is not charged for) a Fisher
    pool = tiny.pool(fisher, epochs=2)
    make = (lambda: FedLPAEditor(pool)) if method == "fedlpa" else (lambda: DenseEditor(pool, TINY_DENSE))
    editor = make()
    editor.fit(range(6))
    for kind, removed, added in [("remove", [2], []), ("add", [], [7]), ("batch", [0], [8, 9])]:
        report = getattr(editor, kind)(*(removed or added)) if kind != "batch" else editor.batch(removed, added)
        current = sorted(editor.clients)
        assert report.triggered and sorted(report.trained) == current
        assert list(report.left) == removed and list(report.joined) == added
        uploads = [pool.train(c) for c in current]
        assert report.bytes[ByteKind.BROADCAST.value] == serialized_size({"weights": pool.trainer.w0})
        assert report.bytes[ByteKind.MODEL_UPLOAD.value] == sum(u.model_bytes for u in uploads)
        assert report.bytes[ByteKind.CONTROL.value] > 0
        spent = [u.compute_s if method == "fedlpa" else u.train_s for u in uploads]
        assert report.compute_s == pytest.approx(sum(spent))
        assert report.max_client_compute_s == pytest.approx(max(spent))
        assert report.solve_s > 0
        if method == "fedlpa":
            assert report.bytes[ByteKind.FISHER_UPLOAD.value] == sum(u.fisher_bytes for u in uploads)
            assert report.solve.converged
        else:
            assert report.bytes[ByteKind.FISHER_UPLOAD.value] == 0
    fresh = make()
    fresh.fit(sorted(editor.clients))
    torch.testing.assert_close(editor.model, fresh.model, rtol=0, atol=1e-6)


def test_bad_input_is_refused_and_leaves_the_editor_as_it_was(tiny, monkeypatch):
    pool = tiny.pool("kfac")
    editor = FedLPAEditor(pool)
    editor.fit(range(4))
    before = editor.model.clone()
    with pytest.raises(UnknownClientError, match="client 9"):
        editor.remove(9)
    with pytest.raises(DuplicateClientError, match="client 1"):
        editor.add(1)
    good = pool.train
    bad = good(5)
    bad = Contribution(5, torch.full_like(bad.weights, float("nan")), bad.fisher, bad.num_samples)
    monkeypatch.setattr(pool, "train", lambda c: bad if c == 5 else good(c))
    report = editor.add(5)  # quarantined: as if it had not come
    assert "client 5" in report.quarantined[5] and not report.triggered
    assert editor.clients == {0, 1, 2, 3}
    torch.testing.assert_close(editor.model, before, rtol=0, atol=0)
    with pytest.raises(ValueError, match="train.fisher"):
        FedLPAEditor(tiny.pool("none"))
    with pytest.raises(ValueError, match="prior_precision"):
        FedLPAConfig(prior_precision=0.0)
    with pytest.raises(ValueError, match="dense.rounds"):
        DenseConfig(rounds=0)
    with pytest.raises(ValueError, match="targets|TargetRule|valid"):
        DenseConfig(targets="nearest")
    with pytest.raises(ValueError, match="one entry per client"):
        kfac_posterior_mean([torch.zeros(1, 1)], [], [], [1], 0.1)
    with pytest.raises(ValueError, match="positive"):
        diagonal_posterior_mean([torch.zeros(1)], [torch.ones(1)], [0], 0.1)
