"""Multi-round strategies inside the co-simulation: rounds run over the vehicles in coverage,
a participant that leaves mid-round is a dropout, PDF forgets departing participants, and every
strategy runs in a short scenario (trace replay, no SUMO)."""

from __future__ import annotations

import itertools

import pytest
from conftest import small_scenario

from fl_core.rounds import STRATEGIES
from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cosim import run_scenario
from vmc_sim.scenario.config import ConfigError, load_model
from vmc_sim.scenario.schema import Scenario


def trace_file(tmp_path, leave_at=30.0):
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(6)]
    events.append(MobilityEvent(leave_at, "leave", "v0", "rsu0", 280.0, 0.0, 10.0))
    events.append(MobilityEvent(leave_at + 5, "join", "n0", "rsu0", 50.0, -30.0, 8.0))
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(tmp_path / "trace.jsonl", events, meta, end_time=90.0)


def scenario(trace, strategies, compute=None, **rounds):
    federated = {
        "num_clients": 8,
        "methods": [],
        "strategies": strategies,
        "rounds": {"clients_per_round": 4, "lr": 0.05, "interval": 10.0, **rounds},
    }
    return small_scenario(trace, federated, name="rounds", seed=1, duration=80.0, compute=compute or {})


def rows(run, method):
    return [r for r in run.records() if r["method"] == method]


@pytest.mark.parametrize("name", STRATEGIES.names())
def test_every_strategy_runs_in_a_short_scenario(tmp_path, name):
    run = run_scenario(
        scenario(trace_file(tmp_path), [name], rounds=3), out=tmp_path / "run", progress=False, say=lambda s: None
    )
    rs = [r for r in rows(run, name) if r["kind"] == "round"]
    assert len(rs) == 3
    for r in rs:
        assert 1 <= len(r["selected"]) <= 4
        assert r["total_bytes"] > 0 and r["fields"]["uplink"] > 0
    assert (run.path / "models.safetensors").exists()


def test_rounds_are_repeatable_and_time_advances(tmp_path):
    sc = scenario(trace_file(tmp_path), ["fedavg"], rounds=4)
    a = run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    b = run_scenario(sc, out=tmp_path / "b", progress=False, say=lambda s: None)
    keep = ("index", "selected", "completed", "dropped", "bytes", "accuracy", "done_time")
    assert [{k: r[k] for k in keep} for r in rows(a, "fedavg")] == [{k: r[k] for k in keep} for r in rows(b, "fedavg")]
    starts = [r["request_time"] for r in rows(a, "fedavg")]
    assert all(t2 - t1 >= 10.0 for t1, t2 in itertools.pairwise(starts))


def test_participant_leaving_mid_round_is_a_dropout(tmp_path):
    # training takes seconds per client on the shared device; v0 leaves 1 s into its own training
    trace = trace_file(tmp_path, leave_at=6.0)
    sc = scenario(trace, ["fedavg"], compute={"seconds_per_sample_epoch": 0.02}, rounds=1, clients_per_round=6)
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    (r,) = rows(run, "fedavg")
    assert "v0" in r["selected"] and "v0" in r["dropped"] and "v0" not in r["completed"]
    assert any(f["client"] == "v0" for f in r["failed"])


def test_pdf_forgets_a_departing_participant(tmp_path):
    sc = scenario(trace_file(tmp_path), ["pdf"], rounds=2, clients_per_round=6)
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    un = [r for r in rows(run, "pdf") if r["kind"] == "unlearn"]
    assert len(un) == 1
    assert un[0]["extra"]["unlearn"]["targets"] == ["v0"]
    assert "v0" not in un[0]["extra"]["unlearn"]["selected"] and un[0]["total_bytes"] > 0


def test_pdf_says_when_no_retained_participant_was_in_coverage(tmp_path):
    from vmc_sim.cosim import summarize

    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(4)]
    events.append(MobilityEvent(30.0, "join", "n0", "rsu0", 50.0, -30.0, 8.0))  # arrives after the only round
    events += [
        MobilityEvent(40.0 + 5 * k, "leave", f"v{i}", "rsu0", 280.0, 0.0, 10.0) for k, i in enumerate((1, 2, 3, 0))
    ]
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    trace = write_trace(tmp_path / "trace.jsonl", events, meta, end_time=90.0)
    data = scenario(trace, ["pdf"], rounds=1, clients_per_round=4, min_available=4).model_dump(mode="json")
    data["coordinator"]["min_clients"] = 1  # keep the model while coverage empties
    sc = load_model(Scenario, None, data)
    run = run_scenario(sc, out=tmp_path / "run", progress=False, say=lambda s: None)
    un = {
        r["extra"]["unlearn"]["targets"][0]: r["extra"]["unlearn"] for r in rows(run, "pdf") if r["kind"] == "unlearn"
    }
    assert un["v1"]["retained_in_coverage"] == 3 and "ranked_out_of_coverage" not in un["v1"]
    assert un["v0"]["retained_in_coverage"] == 0 and un["v0"]["ranked_out_of_coverage"] is True
    assert "note: pdf: 1 unlearning request(s) found no retained participant in coverage" in summarize(run)


def test_bad_strategy_is_refused(tmp_path):
    trace = trace_file(tmp_path)
    with pytest.raises(ConfigError, match="federated.strategies"):
        scenario(trace, ["nope"])
    with pytest.raises(ConfigError, match="at least one method or strategy"):
        scenario(trace, [])


def test_multiround_editors_replay_requests_and_refuse_what_they_cannot_do(tmp_path):
    data = {
        "name": "editors",
        "seed": 1,
        "duration": 80.0,
        "mobility": {"source": "trace", "trace": str(trace_file(tmp_path))},
        "federated": {
            "dataset": "digits",
            "num_clients": 8,
            "model": "mlp",
            "rho": 0.5,
            "methods": ["fsosa", "federaser", "fats", "finetune"],
            "train": {"epochs": 2, "lr": 0.05, "fisher": "diagonal"},
            "rounds": {"rounds": 3, "clients_per_round": 4, "lr": 0.05},
        },
        "coordinator": {"warmup": 5.0, "min_clients": 4},
        "channel": {"path_loss_model": "tr37885_urban_los"},  # the editors' mechanics on the idealised link
    }
    run = run_scenario(load_model(Scenario, None, data), out=tmp_path / "run", progress=False, say=lambda s: None)
    by = {}
    for r in run.records():
        by.setdefault(r["method"], []).append(r)
    assert {m: len(rs) for m, rs in by.items()} == {"fsosa": 3, "federaser": 3, "fats": 3, "finetune": 3}
    leave, join = by["finetune"][1], by["finetune"][2]
    assert "unsupported" in leave["note"] and join["added"] == ["n0"] and join["total_bytes"] > 0
    assert "unsupported" in by["fats"][2]["note"]  # FATS-CU has no addition
    assert by["federaser"][1]["removed"] == ["v0"] and by["federaser"][1]["compute_sim_s"] > 0
