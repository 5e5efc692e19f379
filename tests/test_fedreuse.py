"""Top-K FedAvg and DG-FedReuse: both learn on digits, the gate keeps the seed's invariants
(fresh quota, age cap, decayed reuse never larger than the cache), accounting follows Eq. 13,
and the repeatability measurement leaves the state untouched."""

import math

import pytest
import torch

from fl_core.experiment import OneShotSetup
from fl_core.payload import serialized_size
from fl_core.rounds import RoundConfig, build_strategy
from fl_core.rounds.accounting import Ledger, message_bytes, score_message
from fl_core.rounds.dgfedreuse import DGFedReuseStrategy, FedReuseConfig, discrepancy
from fl_core.rounds.topk import TopKConfig


@pytest.fixture(scope="module")
def setup():
    return OneShotSetup(dataset="digits", num_clients=8, alpha=0.5, model="mlp", seed=3)


def make(setup, name, reuse=None, **cfg):
    base = dict(rounds=8, clients_per_round=4, local_epochs=1, lr=0.05, batch_size=32)
    base.update(cfg)
    opts = {"reuse": reuse} if reuse is not None else {}
    return build_strategy(name, setup.model_fn, setup.w0, setup.client_data, RoundConfig(**base), setup.streams, **opts)


@pytest.mark.parametrize("name", ["topk", "dgfedreuse"])
def test_strategies_learn_on_digits(setup, name):
    s = make(setup, name)
    acc0, _ = s.evaluate(setup.test_set)
    reports = s.fit(range(8))
    acc, _ = s.evaluate(setup.test_set)
    assert acc > acc0 + 0.3, (name, acc0, acc)
    ledger = Ledger(s.codec.sizes)
    for r in reports:
        ledger.add(r)
    summary = ledger.summary()
    assert summary["modelled_uplink_saving"] > 0.75 and summary["real_uplink_saving"] > 0.7
    assert summary["modelled_symmetric_saving"] == pytest.approx(summary["modelled_uplink_saving"] / 2)


def test_topk_uplink_is_the_serialized_payload(setup):
    s = make(setup, "topk")
    r = s.run_round(range(8))
    per_client = [t["bytes"] for t in r.transfers if t["kind"] == "model_upload"]
    assert len(per_client) == 4 and len(set(per_client)) == 1
    b = s.codec.field_bytes
    assert r.extra["accounting"]["modelled_uplink"] == 4 * b and r.fields["uplink"] == 4 * b / 4
    assert b < per_client[0] < serialized_size({"delta": s.weights})  # header on top, far below dense


def test_gate_invariants_quota_age_cap_and_decay(setup):
    cfg = FedReuseConfig(max_age=2, fresh_quota=0.5)
    s = make(setup, "dgfedreuse", reuse=cfg)
    reasons = set()
    for t in range(10):
        cache = {c: v.clone() for c, v in s.cache.items()}
        report = s.begin(range(8))
        assert report.extra["tau"] == pytest.approx(max(cfg.tau_min, cfg.tau0 * math.exp(-cfg.gamma * t)))
        gate = {g["client"]: g for g in report.extra["gate"]}
        assert set(gate) == set(report.selected)
        active = [c for c, g in gate.items() if g["active"]]
        assert len(active) >= math.ceil(0.5 * len(report.selected)) == report.extra["quota"]
        for g in gate.values():
            reasons.add(g["reason"])
            if g["age"] is not None and g["age"] >= cfg.max_age:
                assert g["active"] and g["reason"] == "age"
            if not g["active"]:
                assert g["age"] < cfg.max_age
            if g["reason"] == "promoted":  # promotion goes by decreasing score
                assert all(g["score"] >= o["score"] for o in gate.values() if not o["active"])
        for c in report.selected:
            u = s.update(c)
            if not gate[c]["active"]:
                assert torch.allclose(u.delta, cfg.decay ** gate[c]["age"] * cache[c])
                assert u.delta.norm() <= cache[c].norm()
        done = s.finish()
        acct = done.extra["accounting"]
        assert acct["reused"] == len(done.extra["reused"]) == len(report.selected) - len(active)
        assert acct["modelled_uplink"] == acct["fresh"] * s.codec.field_bytes + 16 * acct["reused"]
        assert done.fields["uplink"] * 4 == acct["modelled_uplink"]
        cacheful = sum(g["age"] is not None for g in gate.values())
        assert acct["control_uplink"] == cacheful * message_bytes(score_message(0.0))
    assert {"cacheless", "age", "reused", "promoted"} <= reasons


def test_full_quota_means_no_reuse(setup):
    s = make(setup, "dgfedreuse", reuse=FedReuseConfig(fresh_quota=1.0))
    reports = s.fit(range(8), rounds=4)
    assert all(not r.extra["reused"] for r in reports)


def test_repeatability_runs_and_leaves_the_state_alone(setup):
    a, b = make(setup, "dgfedreuse"), make(setup, "dgfedreuse")
    a.fit(range(8), rounds=3)
    b.fit(range(8), rounds=3)
    rep = a.repeatability(repeats=4)
    assert {c["client"] for c in rep.clients} == set(a.signature)
    summary = rep.summary()
    assert summary["repeats"] == 4 and summary["clients"] == len(rep.clients)
    # the summary is the clients' figures, and a client that flipped counts as one with flips
    assert summary["mean_flip_rate"] == pytest.approx(sum(c["flip_rate"] for c in rep.clients) / len(rep.clients))
    assert summary["clients_with_flips"] == pytest.approx(
        sum(c["flip_rate"] > 0 for c in rep.clients) / len(rep.clients)
    )
    ra, rb = a.run_round(range(8)), b.run_round(range(8))
    assert ra.extra["gate"] == rb.extra["gate"] and torch.equal(a.weights, b.weights)
    with pytest.raises(ValueError, match="repeats"):
        a.repeatability(repeats=1)


def test_config_rules_and_options(setup):
    cfg = FedReuseConfig()
    assert cfg.quota(10) == 3  # exact, not ceil(3.0000000000000004)
    assert cfg.threshold(0) == cfg.tau0 and cfg.threshold(10_000) == cfg.tau_min
    assert discrepancy(torch.ones(3), torch.ones(3)) == pytest.approx(0.0)
    assert discrepancy(torch.ones(3), -torch.ones(3)) == pytest.approx(2.0)
    for bad in ({"decay": 1.0}, {"max_age": 0}, {"tau_min": 0.95}, {"fresh_quota": 1.5}):
        with pytest.raises(ValueError, match="reuse\\."):
            FedReuseConfig(**bad)
    s = build_strategy(
        "dgfedreuse",
        setup.model_fn,
        setup.w0,
        setup.client_data,
        RoundConfig(clients_per_round=4),
        setup.streams,
        ratio=0.5,
        error_feedback=True,
        schedule="fedavg",
    )
    assert isinstance(s, DGFedReuseStrategy) and s.topk == TopKConfig(0.5, True) and s.feedback is not None
    assert s.head_names == ["layers.1.weight"]  # mlp has no 'fc': the output layer is the head
    s.run_round(range(8))
    assert s.feedback.residual and all(r.abs().sum() > 0 for r in s.feedback.residual.values())
    with pytest.raises(ValueError, match="unknown options"):
        build_strategy("topk", setup.model_fn, setup.w0, setup.client_data, RoundConfig(), setup.streams, rho=1)
