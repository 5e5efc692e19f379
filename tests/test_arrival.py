"""A released model holds only what arrived, and failed work is charged.

Property: over randomized traffic (random traces, the embedded city and a small network of our
own, with tiny coverage and slow training so that uploads fail), every record of every method
releases a model whose members are contributions the coordinator received, and none of the
contributions that never arrived. Exactness: F-SOSA's subset stays uniform (chi-square) when
trainees that left mid-upload are taken out before their departures are processed.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fl_core.sampler import FixedSize, SubsetSampler, ordered
from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]
METHODS = ["fsosa", "retrain", "fedfisher", "fedavg"]
SLOW = {"time_model": "device", "seconds_per_sample_epoch": 0.05}


def random_trace(path: Path, seed: int, vehicles: int = 24, span: float = 240.0) -> Path:
    """Vehicles arriving and leaving at random (a few come back), one RSU of 300 m."""
    rng = np.random.default_rng(seed)
    events = []
    for i in range(vehicles):
        t = float(rng.uniform(0, span / 2)) if i >= 6 else float(i)
        while t < span:
            stay = float(rng.exponential(25.0)) + 1.0
            events.append(MobilityEvent(round(t, 1), "join", f"v{i}", "rsu0", 10.0 * i, 0.0, 8.0))
            if t + stay >= span:
                break
            events.append(MobilityEvent(round(t + stay, 1), "leave", f"v{i}", "rsu0", 290.0, 0.0, 8.0))
            t += stay + float(rng.exponential(60.0))
    events.sort(key=lambda e: (e.time, e.kind != "leave", e.vehicle))
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(path, events, meta, end_time=span)


def check_records(run: RunDir) -> dict[str, int]:
    """Assert the property on every record; returns how many contributions never arrived, per method."""
    received: dict[tuple[str, int], set] = {}
    lost: dict[str, int] = {}
    for r in run.records():
        got = received.setdefault((r["method"], r["model_epoch"]), set())
        got.update(r.get("arrived", ()))
        members, never = set(r["members"]), set(r.get("not_arrived", ()))
        assert members <= got, f"{r['method']} record {r['index']} holds {sorted(members - got)}, never received"
        if r["kind"] != "round":  # a round's dropout may still hold its update of an earlier round
            assert not members & never, f"{r['method']} record {r['index']} holds contributions that never arrived"
        assert "kept_unarrived" not in r and "provisional" not in r
        assert r.get("bytes_sent", 0) >= r.get("bytes_delivered", 0)
        lost[r["method"]] = lost.get(r["method"], 0) + len(never)
    return lost


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_traffic_releases_only_what_arrived(tmp_path, seed):
    trace = random_trace(tmp_path / "trace.jsonl", seed)
    sc = load_model(
        Scenario,
        None,
        {
            "name": "arrival",
            "seed": seed,
            "duration": 240.0,
            "mobility": {"source": "trace", "trace": str(trace)},
            "federated": {
                "dataset": "digits",
                "num_clients": 24,
                "methods": METHODS,
                "strategies": ["fedavg", "pdf"],
                "rounds": {"clients_per_round": 4, "local_epochs": 1, "rounds": 6, "unlearn_on_departure": True},
                "train": {"epochs": 2, "fisher": "diagonal"},
            },
            "coordinator": {"warmup": 5.0, "min_clients": 3},
            "compute": SLOW,
        },
    )
    run = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)
    lost = check_records(run)
    assert sum(lost.values()) > 0, "the setting was meant to make uploads fail"
    spent = [r for r in run.records() if r.get("not_arrived")]
    assert sum(r["wasted_compute_s"] for r in spent) > 0  # the device time of the lost work is charged


@pytest.mark.parametrize("source", ["city", "own_network"])
def test_sumo_traffic_with_tiny_coverage_releases_only_what_arrived(tmp_path, source):
    base = (
        load_scenario(None).model_dump(mode="json")
        if source == "city"
        else load_scenario(ROOT / "scenarios" / "own_network.yaml").model_dump(mode="json")
    )
    base["duration"] = 240.0
    base["mobility"]["rsus"]["radius"] = 40.0
    base["federated"].update(methods=METHODS, num_clients=12, train={**base["federated"]["train"], "epochs": 2})
    base["coordinator"].update(warmup=20.0, min_clients=2)
    base["compute"] = SLOW
    sc = load_model(Scenario, None, base)
    run = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)
    check_records(run)


def test_taking_out_trainees_that_left_keeps_the_subset_uniform():
    """A trainee that left mid-upload is taken out (F-SOSA's exact removal), then its departure is
    processed; a newcomer that was not drawn leaves by its departure alone. After the departures the
    subset is uniform over the remaining clients, as retraining on them would draw it."""
    rng = np.random.default_rng(7)
    runs, counts = 10_000, {}
    initial = list(range(7))
    final: set = set()
    for _ in range(runs):
        s = SubsetSampler(FixedSize(3), rng)
        s.initialize(initial)
        for newcomer, leaves in ((10, True), (11, False), (12, True)):
            s.add(newcomer)
            if leaves and newcomer in s.members:  # it trained, then left before its upload arrived
                s.remove(newcomer)
            if leaves and newcomer in s.clients:  # its departure request
                s.remove(newcomer)
        s.remove(2)
        final = set(s.clients)
        key = tuple(ordered(s.members))
        counts[key] = counts.get(key, 0) + 1
    support = [tuple(ordered(c)) for c in itertools.combinations(ordered(final), 3)]
    assert set(counts) <= set(support)
    observed = np.array([counts.get(k, 0) for k in support], dtype=float)
    assert stats.chisquare(observed, np.full(len(support), runs / len(support))).pvalue > 1e-3
