"""Multi-round base: FedAvg/FedProx/FedAdam learn, are deterministic, and handle dropouts."""

import pytest
import torch

from fl_core.errors import EditError, EmptyPopulationError, UnknownClientError
from fl_core.experiment import OneShotSetup
from fl_core.rounds import RoundConfig, build_strategy


@pytest.fixture(scope="module")
def setup():
    return OneShotSetup(dataset="digits", num_clients=8, alpha=0.5, model="mlp", seed=3)


def make(setup, name="fedavg", **cfg):
    base = dict(rounds=5, clients_per_round=4, local_epochs=1, lr=0.05, batch_size=32)
    base.update(cfg)
    return build_strategy(name, setup.model_fn, setup.w0, setup.client_data, RoundConfig(**base), setup.streams)


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "fedadam"])
def test_strategies_learn(setup, name):
    s = make(setup, name, **{"fedadam": {"server_lr": 0.03}, "fedprox": {"prox_mu": 0.01}}.get(name, {}))
    acc0, _ = s.evaluate(setup.test_set)
    reports = s.fit(setup.client_data)
    acc, _ = s.evaluate(setup.test_set)
    assert acc > acc0 + 0.2, (name, acc0, acc)
    assert all(len(r.completed) == 4 for r in reports)


def test_fedprox_refuses_a_zero_proximal_weight_instead_of_replacing_it(setup):
    with pytest.raises(ValueError, match="prox_mu > 0, got 0"):
        make(setup, "fedprox")  # RoundConfig's prox_mu defaults to 0
    s = make(setup, "fedprox", prox_mu=0.2)
    assert s.config.prox_mu == 0.2


def test_rounds_are_deterministic_and_bytes_are_real(setup):
    a, b = make(setup), make(setup)
    ra, rb = a.fit(range(8), rounds=2), b.fit(range(8), rounds=2)
    assert torch.equal(a.weights, b.weights)
    assert [r.selected for r in ra] == [r.selected for r in rb]
    d = setup.w0.numel()
    r = ra[0]
    assert r.bytes["broadcast"] == 4 * r.transfers[0]["bytes"] and r.transfers[0]["bytes"] > 4 * d
    assert r.fields["uplink"] == 4 * d and r.fields["downlink"] == 4 * d


def test_dropout_is_left_out_of_the_aggregate(setup):
    a, b = make(setup), make(setup)
    report = a.begin(range(8))
    first, *rest = report.selected
    for c in report.selected:
        a.update(c)
    done = a.finish(dropped=[first])
    assert done.dropped == (first,) and first not in done.completed
    b.begin(range(8))
    for c in rest:
        b.update(c)
    b.finish()
    assert torch.allclose(a.weights, b.weights)


def test_round_errors(setup):
    s = make(setup)
    with pytest.raises(EmptyPopulationError):
        s.begin([])
    with pytest.raises(EditError):
        s.update(0)
    r = s.begin(range(8))
    outsider = next(c for c in range(8) if c not in r.selected)
    with pytest.raises(UnknownClientError):
        s.update(outsider)
    with pytest.raises(EditError):
        s.begin(range(8))
    with pytest.raises(ValueError, match="prox_mu"):
        RoundConfig(client_algo="prox", prox_mu=0)
    with pytest.raises(ValueError, match="unknown multi-round strategy"):
        make(setup, "nope")


@pytest.mark.parametrize("name", ["fedavg", "topk", "pdf"])
def test_a_nan_update_is_quarantined_and_the_round_goes_on(setup, name):
    s = make(setup, name, clients_per_round=8)
    train = s.train

    def poisoned(client):
        update = train(client)
        if client == 2:
            update.delta = torch.full_like(update.delta, float("inf") if name == "topk" else float("nan"))
        return update

    s.train = poisoned
    report = s.run_round(range(8))
    assert list(report.quarantined) == [2] and "client 2: update has NaN/Inf" in report.quarantined[2]
    assert 2 not in report.completed and 2 not in report.dropped and len(report.completed) == 7
    assert torch.isfinite(s.weights).all()
    assert 2 not in s.run_round(range(8)).selected  # quarantined for the rest of the run
