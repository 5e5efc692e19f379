"""PDF (seed 003): bounded history, CLP detection, the selection formula, and unlearning that
forgets a label-flipping client, deterministically."""

import copy

import pytest
import torch

from fl_core.data import ArrayDataset
from fl_core.errors import UnknownClientError
from fl_core.experiment import OneShotSetup
from fl_core.rounds import RoundConfig, build_strategy
from fl_core.rounds.pdf import PathHistory, PDFConfig, PDFStrategy, detect_clp, retrain_reference


@pytest.fixture(scope="module")
def setup():
    # no validation hold-out: the split this test was sized on (PDF selects no damping)
    return OneShotSetup(dataset="digits", num_clients=8, alpha=0.5, model="mlp", seed=3, validation_samples=0)


@pytest.fixture(scope="module")
def poisoned(setup):
    """The clients' data with the largest client's labels flipped (y -> C - 1 - y)."""
    data = dict(setup.client_data)
    target = max(data, key=lambda c: len(data[c]))
    d = data[target]
    data[target] = ArrayDataset(d.x, d.num_classes - 1 - d.y, d.num_classes, d.name)
    return data, target


CFG = RoundConfig(rounds=8, clients_per_round=4, lr=0.05, batch_size=32)


def make(setup, data, **options) -> PDFStrategy:
    return build_strategy("pdf", setup.model_fn, setup.w0, data, CFG, setup.streams, **options)


def test_history_size_does_not_grow_with_rounds(setup, tmp_path):
    s = make(setup, setup.client_data)
    s.fit(setup.client_data, rounds=2)
    after2 = s.history.nbytes()
    files2 = [p.stat().st_size for p in sorted(s.save_history(tmp_path / "r2").iterdir())]
    s.fit(setup.client_data, rounds=6)
    assert s.history.rounds == 8
    assert s.history.nbytes() == after2
    files8 = [p.stat().st_size for p in sorted(s.save_history(tmp_path / "r8").iterdir())]
    assert files8 == files2 and sum(files8) == after2
    assert s.history.directions.shape == (8, 32 * 10)  # N x d_cls (the mlp's last layer is 32 x 10)
    loaded = PathHistory.load(tmp_path / "r8")
    assert loaded.clients == s.history.clients and torch.equal(loaded.directions, s.history.directions)
    assert loaded.rounds == 8 and loaded.previous_norm == s.history.previous_norm
    assert loaded.scores([0]) == s.history.scores([0])


def test_clp_detection_on_a_constructed_norm_sequence():
    norms = [1.0, 1.005, 1.02, 0.9, 0.95, 0.95, 0.0, 0.5]
    assert detect_clp(norms, 0.01) == [True, False, True, False, True, False, False, True]
    assert detect_clp(norms, 0.01, first_critical=False)[0] is False
    assert detect_clp(norms, 0.06) == [True, False, False, False, False, False, False, True]

    h = PathHistory(["a"], 2, PDFConfig(tau_clp=0.01, lam=0.7))
    u = torch.tensor([0.0, 3.0])
    assert h.record_round(1.0, torch.tensor([1.0, 0.0]), [("a", u)]) is True  # weight 1.7
    assert h.record_round(0.5, torch.tensor([0.0, 1.0]), [("a", u)]) is False  # weight 1
    assert h.critical_rounds == 1 and h.rounds == 2
    assert torch.allclose(h.directions[0], torch.tensor([0.0, 2.7], dtype=torch.float64))
    # alignment: round 1 cos = 0 -> 0.5 (weight 1.7), round 2 cos = 1 -> 1.0 (weight 1)
    assert h.alignment("a") == pytest.approx((1.7 * 0.5 + 1.0) / 2.7)


def test_scores_and_top_k_follow_the_formula():
    h = PathHistory(["a", "b", "c", "d", "t"], 2)
    rows = {"t": ([2.0, 0.0], 1.0), "a": ([3.0, 0.0], 0.9), "b": ([0.0, 1.0], 0.6), "c": ([-1.0, 0.0], 0.3)}
    for c, (direction, align) in rows.items():
        i = h.row(c)
        h.directions[i] = torch.tensor(direction, dtype=torch.float64)
        h.align_sum[i], h.weight_sum[i] = 2 * align, 2.0
    # coherence with t: a 1, b 1/2, c 0; score = beta * align + (1 - beta) * (1 - coherence)
    s = h.scores(["t"], beta=0.5)
    assert s == pytest.approx({"a": 0.45, "b": 0.55, "c": 0.65})  # d has no history: not scored
    assert h.select(["t"], k=2, beta=0.5) == ["c", "b"]
    assert h.select(["t"], k=4, beta=0.5) == ["c", "b", "a", "d"]
    assert h.scores(["t"], beta=0.9) == pytest.approx({"a": 0.81, "b": 0.59, "c": 0.37})
    assert h.select(["t"], k=3, beta=0.9) == ["a", "b", "c"]
    assert h.select(["t"], k=2, beta=0.5, candidates=["a", "b", "t"]) == ["b", "a"]
    with pytest.raises(UnknownClientError, match="'zz'"):
        h.scores(["zz"])
    with pytest.raises(ValueError, match="beta"):
        PDFConfig(beta=1.5)


def test_unlearning_forgets_the_flipped_client_deterministically(setup, poisoned):
    data, target = poisoned
    flipped = data[target]
    a = make(setup, data, k=4, unlearn_rounds=8)
    a.fit(data)
    fa_before, _ = a.evaluate(flipped)
    b = copy.deepcopy(a)
    ra = a.unlearn([target])
    rb = b.unlearn([target])
    assert ra.selected == rb.selected and torch.equal(a.weights, b.weights)
    assert len(ra.selected) == 4 and target not in ra.selected
    assert all(set(r.completed) == set(ra.selected) for r in ra.reports)
    fa_after, _ = a.evaluate(flipped)
    assert fa_before > 0.2 and fa_after < fa_before - 0.15, (fa_before, fa_after)
    assert a.history.alignment(target) is None  # the target's history is erased
    acc, _ = a.evaluate(setup.test_set)
    assert acc > 0.5

    again = make(setup, data, k=4, unlearn_rounds=8)
    again.fit(data)
    assert again.unlearn([target]).selected == ra.selected and torch.equal(again.weights, a.weights)
    assert torch.equal(again.history.directions, a.history.directions)

    retrain, reports = retrain_reference(setup.model_fn, setup.w0, data, CFG, setup.streams, data, [target], rounds=4)
    assert all(target not in r.selected and len(r.selected) == 7 for r in reports)
    assert retrain.evaluate(flipped)[0] < fa_before - 0.15


def test_unlearn_rejects_bad_requests(setup, poisoned):
    data, target = poisoned
    s = make(setup, data)
    with pytest.raises(UnknownClientError, match="99"):
        s.unlearn([99])
    with pytest.raises(UnknownClientError, match="not available"):
        s.unlearn([target], clients=[target])
    with pytest.raises(TypeError):
        make(setup, data, nonsense=1)
