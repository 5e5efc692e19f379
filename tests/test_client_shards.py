"""Every vehicle its own shard (``federated.shard_assignment: arrival``) and the paper's
idealised links (``coordinator.dwell_limited: false``), end to end on small recorded traces."""

from __future__ import annotations

import json

import pytest
from conftest import small_scenario

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.audit import client_sets
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.schema import Scenario
from vmc_sim.scenario.shards import ShardAssignment, recorded_shards, vehicle_shard


def churn_trace(tmp_path, initial: int = 6, arrivals: int = 6, dwell: float = 7.0):
    """``initial`` vehicles at the start, then arrivals every 6 s that leave ``dwell`` s later and
    one that comes back (a second visit must keep its shard)."""
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 10.0 * i, 5.0, 5.0) for i in range(initial)]
    t = 20.0
    for k in range(arrivals):
        events.append(MobilityEvent(t + 6.0 * k, "join", f"n{k}", "rsu0", 60.0, -20.0, 8.0))
        events.append(MobilityEvent(t + 6.0 * k + dwell, "leave", f"n{k}", "rsu0", 290.0, 0.0, 12.0))
    back = t + 6.0 * arrivals + dwell + 5.0
    events.append(MobilityEvent(back, "join", "n0", "rsu0", 40.0, 0.0, 6.0))
    events.sort(key=lambda e: e.time)
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(tmp_path / "trace.jsonl", events, meta, end_time=back + 10.0)


def scenario(trace, num_clients: int = 16, federated: dict | None = None, **over) -> Scenario:
    fed = {
        "num_clients": num_clients,
        "shard_assignment": "arrival",
        "rho": 0.5,
        "methods": ["fsosa", "retrain"],
        "train": {"epochs": 1, "lr": 0.05, "fisher": "diagonal"},
        **(federated or {}),
    }
    over.setdefault("coordinator", {"warmup": 3.0, "min_clients": 4})
    return small_scenario(trace, fed, name="shards", seed=5, **over)


def test_arrival_gives_the_kth_client_shard_k_and_never_two_clients_one_shard(tmp_path):
    run = run_scenario(scenario(churn_trace(tmp_path)), out=tmp_path / "runs", progress=False, say=lambda s: None)
    manifest = run.manifest()
    shards = manifest["client_shards"]["shards"]
    records = [r for r in RunDir(run.path).records() if r["method"] == "fsosa"]
    order: list[str] = []
    for r in sorted(records, key=lambda r: r["index"]):
        order += [str(c) for c in r.get("added", []) if str(c) not in order]
    assert list(shards) == order  # the k-th vehicle to become a client
    assert sorted(shards.values()) == list(range(len(order)))  # one shard each, none shared
    assert order.count("n0") == 1  # n0 came back: it kept its shard
    look = recorded_shards(manifest, 5, 16)
    assert [look(c) for c in order] == list(range(len(order)))


def test_hash_assignment_is_unchanged_and_records_no_mapping(tmp_path):
    sc = scenario(churn_trace(tmp_path), federated={"shard_assignment": "hash"})
    run = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)
    manifest = run.manifest()
    assert manifest["client_shards"] is None
    assert recorded_shards(manifest, 5, 16)("n3") == vehicle_shard(5, "n3", 16)


def test_more_clients_than_shards_stops_naming_num_clients(tmp_path):
    with pytest.raises(RuntimeError, match=r"federated.num_clients is 8"):
        run_scenario(scenario(churn_trace(tmp_path), num_clients=8), out=tmp_path / "r", progress=False, say=print)


def test_a_second_process_rebuilds_the_same_mapping_on_resume(tmp_path):
    """The mapping is a function of the request sequence: a resumed run (a new process state) ends
    with the same shards as the uninterrupted one."""
    trace = churn_trace(tmp_path)
    a = run_scenario(scenario(trace), out=tmp_path / "a", progress=False, say=lambda s: None)
    b = run_scenario(scenario(trace), out=tmp_path / "b", progress=False, say=lambda s: None)
    assert a.manifest()["client_shards"] == b.manifest()["client_shards"]
    alloc = ShardAssignment("arrival", 5, 4)
    alloc.assign(["x", "y", "x"])
    assert alloc("y") == 1 and alloc("z") == 2  # a client no request named gets the next free one


def failures(run: RunDir) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in run.records():
        out[r["method"]] = out.get(r["method"], 0) + len(r.get("failed") or [])
    return out


def test_dwell_limited_false_lets_every_contribution_arrive(tmp_path):
    """3 s visits against jobs of a few seconds: dwell-limited, contributions are lost; the paper's idealisation
    (dwell_limited: false) loses none, and every removal is still exact."""
    trace = churn_trace(tmp_path, dwell=3.0)
    slow = {"time_model": "device", "seconds_per_sample_epoch": 0.05}  # a few seconds a contribution
    cut = run_scenario(scenario(trace, compute=slow), out=tmp_path / "cut", progress=False, say=lambda s: None)
    ideal = run_scenario(
        scenario(trace, compute=slow, coordinator={"warmup": 3.0, "min_clients": 4, "dwell_limited": False}),
        out=tmp_path / "ideal",
        progress=False,
        say=lambda s: None,
    )
    assert failures(cut)["fsosa"] > 0
    assert failures(ideal) == {"fsosa": 0, "retrain": 0}
    removed, final = client_sets(list(ideal.records()))
    assert set(removed) - final == {"n1", "n2", "n3", "n4", "n5"}  # n0 came back
    assert json.loads((ideal.path / "manifest.json").read_text())["config"]["coordinator"]["dwell_limited"] is False
