"""Multi-round unlearning baselines and Fine-tuning behind the editor interface (digits, mlp)."""

import math

import numpy as np
import pytest
import torch

from fl_core.clients import ClientPool
from fl_core.data import load_train_test
from fl_core.editors import (
    EDITORS,
    FATSConfig,
    FedEraserConfig,
    FineTuneConfig,
    UnsupportedRequestError,
    build_editor,
)
from fl_core.errors import DuplicateClientError, UnknownClientError
from fl_core.experiment import OneShotSetup
from fl_core.models import build_model, flat_params
from fl_core.payload import serialized_size
from fl_core.rng import Streams
from fl_core.rounds import RoundConfig
from fl_core.training import LocalTrainer, TrainConfig, evaluate

UNLEARNING = ("retrain_fedavg", "federaser", "fedrr", "fats")
ROUNDS = RoundConfig(rounds=4, clients_per_round=4, local_epochs=1, lr=0.05, batch_size=32)


@pytest.fixture(scope="module")
def setup():
    return OneShotSetup(
        dataset="digits",
        num_clients=8,
        alpha=0.5,
        model="mlp",
        seed=3,
        train=TrainConfig(epochs=5, lr=0.05, batch_size=32, fisher="diagonal"),
    )


def make(setup, name, rounds=ROUNDS, options=None):
    return build_editor(name, setup.pool(), setup.streams.numpy("subset", name), rounds=rounds, options=options)


def state(editor):
    return editor.model.clone(), set(editor.clients), editor.state_bytes()


def test_registered():
    assert {"retrain_fedavg", "federaser", "fedrr", "fats", "finetune"} <= set(EDITORS)


@pytest.mark.parametrize("name", UNLEARNING)
def test_fit_and_remove_are_accounted_in_real_bytes(setup, name):
    e = make(setup, name)
    fit = e.fit(range(7))
    assert fit.triggered and fit.compute_s >= fit.max_client_compute_s > 0
    assert fit.bytes["broadcast"] == ROUNDS.rounds * 4 * serialized_size({"weights": setup.w0})
    assert fit.bytes["model_upload"] == ROUNDS.rounds * 4 * serialized_size({"delta": setup.w0})
    victim = e.selected[-1][0] if name == "fats" else 0  # FATS: a client it sampled, so the removal triggers
    stored = {t: [c for c in ups if c != victim] for t, ups in getattr(e, "stored", {}).items()}
    before = e.model.clone()
    rep = e.remove(victim)
    assert rep.triggered and not torch.equal(e.model, before)
    assert victim not in e.clients and victim not in rep.trained and rep.trained
    assert rep.bytes["control"] > 0 and rep.bytes["fisher_upload"] == 0
    assert rep.total_bytes == sum(t["bytes"] for t in rep.transfers)
    for t in rep.transfers:
        if t["kind"] == "broadcast":
            assert t["bytes"] == serialized_size({"weights": setup.w0}) and t["client"] != victim
        if t["kind"] == "model_upload":
            assert t["bytes"] == serialized_size({"delta": setup.w0}) and t["client"] != victim
    assert rep.compute_s >= rep.max_client_compute_s > 0 and rep.solve_s > 0
    broadcasts = sum(t["kind"] == "broadcast" for t in rep.transfers)
    if name == "federaser":  # calibration in every stored round but round 0 (replayed as stored)
        assert broadcasts == sum(len(m) for t, m in stored.items() if t > 0)
        assert set(e.stored) == set(stored) and all(victim not in ups for ups in e.stored.values())
    if name == "fedrr":
        assert broadcasts == math.ceil(ROUNDS.rounds / 2) * 4
    if name == "retrain_fedavg":
        assert broadcasts == ROUNDS.rounds * 4
        e.add(victim)  # the multi-round Retrain also serves arrivals: the same as a fresh fit
        fresh = make(setup, name)
        fresh.fit(range(7))
        assert torch.equal(e.model, fresh.model)


@pytest.mark.parametrize("name", [*UNLEARNING, "finetune"])
def test_bad_requests_are_clear_errors_and_state_kept(setup, name):
    e = make(setup, name)
    e.fit(range(6))
    snap = state(e)
    with pytest.raises(UnknownClientError):
        e.remove(42)
    with pytest.raises(DuplicateClientError):
        e.add(1)
    if name in ("federaser", "fedrr", "fats"):
        with pytest.raises(UnsupportedRequestError, match="cannot add"):
            e.add(6)
    if name == "finetune":
        with pytest.raises(UnsupportedRequestError, match="cannot remove"):
            e.remove(1)
        with pytest.raises(UnsupportedRequestError, match="cannot remove"):
            e.batch([1], [6])
    if name in ("retrain_fedavg", "finetune"):
        with pytest.raises(UnknownClientError, match="99"):
            e.batch([], [6, 99])  # client 99 has no data: nothing is kept of client 6 either
    model, clients, nbytes = state(e)
    assert torch.equal(model, snap[0]) and clients == snap[1] and nbytes == snap[2]


def test_config_errors_name_the_field(setup):
    with pytest.raises(ValueError, match="federaser.interval"):
        FedEraserConfig(interval=0)
    with pytest.raises(ValueError, match="fats.sample_rate"):
        FATSConfig(sample_rate=0)
    with pytest.raises(ValueError, match="rounds.server"):
        make(setup, "federaser", rounds=RoundConfig(rounds=2, server="adam"))


def test_fats_removal_is_free_when_never_sampled_and_exact_otherwise(setup):
    cfg = RoundConfig(rounds=3, clients_per_round=2, local_epochs=1, lr=0.05, batch_size=32)
    clients = list(range(8))

    def retrained(without):
        e = make(setup, "fats", cfg)
        e.fit([c for c in clients if c not in without])
        return e.model

    e = make(setup, "fats", cfg)
    e.fit(clients)
    sampled = {c for chosen in e.selected for c in chosen}
    never = [c for c in clients if c not in sampled]
    assert never, "3 rounds of 2 among 8 clients leave some client unsampled"
    before = e.model.clone()
    rep = e.remove(never[0])
    assert not rep.triggered and rep.compute_s == 0 and not rep.trained
    assert rep.total_bytes == rep.bytes["control"] > 0
    assert torch.equal(e.model, before) and torch.equal(e.model, retrained({never[0]}))

    first = {c: min(t for t, chosen in enumerate(e.selected) if c in chosen) for c in sampled}
    late = max(first, key=lambda c: (first[c], c))  # recomputation starts at its first round
    rep = e.remove(late)
    assert rep.triggered and late not in rep.trained
    assert sum(t["kind"] == "broadcast" for t in rep.transfers) == (cfg.rounds - first[late]) * 2
    assert torch.equal(e.model, retrained({never[0], late}))
    early = next(c for c in ordered_by_first(first) if c != late)
    e.remove(early)
    assert torch.equal(e.model, retrained({never[0], late, early}))


def ordered_by_first(first):
    return sorted(first, key=lambda c: (first[c], c))


class OneClassHolder:
    """Digits where client 0 alone holds every 9 (and a sixth of the other digits); the other
    five clients split the rest at random.

    Client 0's influence on a model is then measurable as the model's accuracy on the test 9s:
    the original model has learnt 9s from client 0 only, a model retrained without it has never
    seen a 9 (accuracy near 0), and an unlearning method that removes its contribution must land
    near the retrained model, far from the original.
    """

    def __init__(self) -> None:
        train, self.test = load_train_test("digits")
        y = train.y.numpy()
        self.streams = Streams(11)
        rest = self.streams.numpy("partition").permutation(np.flatnonzero(y != 9))
        parts = np.array_split(rest, 6)
        self.data = {0: train.subset(np.sort(np.concatenate([parts[0], np.flatnonzero(y == 9)])))}
        self.data.update({i: train.subset(np.sort(p)) for i, p in enumerate(parts[1:], start=1)})
        self.nines = self.test.subset(np.flatnonzero(self.test.y.numpy() == 9))
        torch.manual_seed(self.streams.seed("init"))
        self.w0 = flat_params(self.model_fn())

    def model_fn(self):
        return build_model("mlp", (1, 8, 8), 10, hidden=(32,))

    def pool(self):
        cfg = TrainConfig(epochs=5, lr=0.05, batch_size=32, fisher="diagonal")
        return ClientPool(LocalTrainer(self.model_fn, self.w0, cfg, self.streams), self.data)


@pytest.mark.parametrize("name", ["federaser", "fedrr", "fats"])
def test_unlearning_removes_the_clients_influence(name):
    world = OneClassHolder()
    cfg = RoundConfig(rounds=6, clients_per_round=6, local_epochs=2, lr=0.05, batch_size=32)
    options = FATSConfig(sample_rate=0.8) if name == "fats" else None
    model = world.model_fn()

    def acc_on_removed(weights):  # accuracy on the test 9s: what only client 0 taught
        return evaluate(model, weights, world.nines)[0]

    reference = build_editor("retrain_fedavg", world.pool(), None, rounds=cfg)
    reference.fit(range(1, 6))
    e = build_editor(name, world.pool(), None, rounds=cfg, options=options)
    e.fit(range(6))
    original = acc_on_removed(e.model)
    e.remove(0)
    edited, retrained = acc_on_removed(e.model), acc_on_removed(reference.model)
    assert original > 0.2 and retrained < 0.05
    assert abs(edited - retrained) <= 0.05 and original - retrained > 0.2
    assert evaluate(model, e.model, world.test)[0] > 0.5  # still a useful model on the rest


def test_finetune_picks_epochs_from_the_grid(setup):
    e = make(setup, "finetune")
    e.fit(range(6))
    start = e.model.clone()
    rep = e.add(7)
    grid = FineTuneConfig().epochs_grid
    assert grid == tuple(range(5, 51, 5))
    chosen = e.chosen_epochs[7]
    tuned = e.tune(7, start)  # the client's run again: same streams, same choice
    assert chosen == tuned.epochs in grid and set(tuned.val_accuracy) == set(grid)
    best = max(tuned.val_accuracy.values())
    assert tuned.val_accuracy[chosen] == best
    assert all(tuned.val_accuracy[g] < best for g in grid if g < chosen)  # ties go to fewer epochs
    assert torch.equal(e.model, tuned.weights) and not torch.equal(e.model, start)
    w = serialized_size({"weights": setup.w0})
    assert rep.bytes["broadcast"] == w and rep.bytes["model_upload"] == w and rep.bytes["fisher_upload"] == 0
    assert rep.trained == (7,) and rep.compute_s > 0 and rep.triggered
