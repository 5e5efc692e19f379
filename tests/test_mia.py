"""Membership inference: the attacks find the members of an overfit model, see nothing between
two sets the model never saw, and ``vmc audit`` works on oneshot and co-simulation run dirs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fl_core import mia, mia_audit
from fl_core.data import load_train_test
from fl_core.models import build_model, flat_params
from fl_core.training import TrainConfig, sgd_epochs
from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.oneshot import run_oneshot
from vmc_sim.scenario.config import OneShotConfig, load_model
from vmc_sim.scenario.schema import Scenario

# plain SGD: the attack test needs a model that memorised its members, not the paper's momentum setting
OVERFIT = TrainConfig(epochs=200, lr=0.1, batch_size=16, momentum=0.0)


@pytest.fixture(scope="module")
def overfit():
    """An MLP that memorised 50 digits: (model_fn, model, weights, members, attacker pool, test)."""
    train, test = load_train_test("digits")
    perm = np.random.default_rng(0).permutation(len(train))
    members, pool = train.subset(perm[:50]), train.subset(perm[50:450])

    def model_fn():
        return build_model("mlp", train.input_shape, train.num_classes, hidden=(64,))

    torch.manual_seed(0)
    model = model_fn()
    sgd_epochs(model, members, OVERFIT, torch.Generator().manual_seed(1))
    return model_fn, model, flat_params(model), members, pool, test


def test_attacks_find_the_members_of_an_overfit_model(overfit):
    model_fn, model, w, members, pool, test = overfit
    results = [
        mia.loss_threshold_attack(model, w, members, test),
        mia.confidence_threshold_attack(model, w, members, test),
        mia.shadow_model_attack(
            model, w, members, test, pool, OVERFIT, model_fn=model_fn, num_shadows=3, shadow_size=50
        ),
    ]
    for r in results:
        assert r.n_members == r.n_nonmembers == 50  # balanced: the 359 test samples are subsampled
        # three null standard errors above chance (AUC under no leakage: 0.5 +- 0.058 at 50 vs 50)
        assert r.auc > 0.5 + 3 * mia.auc_null_se(50, 50), r
        assert r.accuracy > 0.6, r


def test_two_unseen_sets_are_indistinguishable(overfit):
    model_fn, model, w, _, pool, test = overfit
    a, b = test.subset(np.arange(0, len(test), 2)), test.subset(np.arange(1, len(test), 2))
    se = mia.auc_null_se(len(b), len(b))  # 0.031 at 179 vs 179
    attacker = mia.train_shadow_attacker(model_fn, pool, OVERFIT, num_shadows=2, shadow_size=50)
    for r in (
        mia.loss_threshold_attack(model, w, a, b),
        mia.confidence_threshold_attack(model, w, a, b),
        attacker.attack(model, w, a, b),
    ):
        # both sets are i.i.d. test samples and the score does not depend on them: the AUC is the
        # Mann-Whitney statistic under its null, so |AUC - 0.5| > 4 se has probability < 1e-4
        assert abs(r.auc - 0.5) < 4 * se, r
        assert abs(r.accuracy - 0.5) < 0.15, r  # 90 + 90 evaluation samples: sd 0.037


def test_auc_and_threshold_are_exact_on_known_scores():
    assert mia.auc_score(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert mia.auc_score(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.5
    assert mia.best_threshold(np.array([5.0, 6.0]), np.array([1.0, 2.0])) == 5.0
    r = mia.threshold_attack("loss", np.array([5.0, 6.0, 7.0, 8.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert (r.accuracy, r.precision, r.auc) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="member samples"):
        mia.threshold_attack("loss", np.array([1.0]), np.array([1.0, 2.0]))


def test_audit_sets_are_balanced_label_matched_and_disjoint(overfit):
    _, _, _, members, _, test = overfit
    sets = mia_audit.audit_sets(members, test, np.random.default_rng(3))
    assert len(sets.members) == len(sets.nonmembers)
    assert np.array_equal(np.sort(sets.members.y.numpy()), np.sort(sets.nonmembers.y.numpy()))
    assert len(sets.nonmembers) + len(sets.rest) == len(test)
    seen = {tuple(x.flatten().tolist()) for x in sets.nonmembers.x}
    assert not any(tuple(x.flatten().tolist()) in seen for x in sets.rest.x)


# ---------------------------------------------------------------------------------------------
# vmc audit on run directories
# ---------------------------------------------------------------------------------------------

FED = {
    "dataset": "digits",
    "num_clients": 6,
    "model": "mlp",
    "rho": 0.5,
    "methods": ["fsosa", "retrain"],
    "train": {"epochs": 3, "lr": 0.05, "fisher": "diagonal"},
}


def oneshot_run(tmp_path, requests):
    config = load_model(
        OneShotConfig, None, {"name": "t", "seed": 1, "federated": FED, "initial_clients": 4, "requests": requests}
    )
    return run_oneshot(config, out=tmp_path, say=lambda s: None).path


def test_cli_audits_the_removed_client_of_a_oneshot_run(tmp_path, capsys):
    run = oneshot_run(tmp_path, ["-1", "+4"])
    assert main(["audit", str(run), "--attack", "all", "--shadows", "1", "--shadow-epochs", "2"]) == 0
    report = json.loads((run / "audit.json").read_text())
    assert report["clients"] == ["1"] and report["n_members"] == report["n_nonmembers"] > 0
    assert {(r["model"], r["attack"]) for r in report["results"]} == {
        (m, a) for m in ("fsosa", "retrain") for a in ("loss", "confidence", "shadow")
    }
    assert "fsosa" in capsys.readouterr().out
    assert main(["audit", str(run), "--client", "0", "--attack", "loss", "--method", "retrain"]) == 0
    report = json.loads((run / "audit.json").read_text())
    assert report["clients"] == ["0"] and {r["model"] for r in report["results"]} == {"retrain"}
    assert any("not removed" in n for n in report["notes"])


def test_cli_says_clearly_when_there_is_nothing_to_audit(tmp_path, capsys):
    run = oneshot_run(tmp_path, ["+4"])
    assert main(["audit", str(run)]) == 1
    assert "no removal" in capsys.readouterr().err
    (run / "models.safetensors").unlink()
    assert main(["audit", str(run), "--client", "0"]) == 1
    assert "no stored model" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "nowhere")]) == 1
    assert "not a run directory" in capsys.readouterr().err


def test_cli_audits_a_cosimulation_run(tmp_path):
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(5)]
    events += [
        MobilityEvent(30.0, "leave", "v1", "rsu0", 280.0, 0.0, 10.0),
        MobilityEvent(36.0, "leave", "v3", "rsu0", 280.0, 0.0, 10.0),
    ]
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    trace = write_trace(tmp_path / "trace.jsonl", events, meta, end_time=45.0)
    scenario = load_model(
        Scenario,
        None,
        {
            "name": "t",
            "seed": 3,
            "duration": 50.0,
            "mobility": {"source": "trace", "trace": str(trace)},
            "federated": {**FED, "num_clients": 12},
            "coordinator": {"warmup": 5.0, "min_clients": 3},  # 3 stay: no withdrawal
            "compute": {"time_model": "device"},
        },
    )
    run = run_scenario(scenario, out=tmp_path / "runs", progress=False, say=lambda s: None).path
    assert main(["audit", str(run), "--attack", "loss"]) == 0
    report = json.loads((run / "audit.json").read_text())
    assert sorted(report["clients"] + report["excluded"]) == ["v1", "v3"]
    assert {r["model"] for r in report["results"]} == {"fsosa", "retrain"}
