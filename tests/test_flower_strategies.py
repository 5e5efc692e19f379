"""Flower's FedAvg in rounds on an availability schedule: sampling only from reachable nodes,
dropouts discarded and recorded, and reproducible runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_cosim import scenario

from vmc_sim.flower.replay import Schedule, parse_schedule, read_run

pytest.importorskip("flwr")

FEDERATED = {"methods": ["fsosa"], "num_clients": 6, "train": {"epochs": 1}}
ROUND_S = 10.0
ROUNDS = 3
INTERVALS = {  # node: coverage [start, end] (None: still in coverage at the end)
    "a": (0.0, None),
    "b": (0.0, None),
    "c": (0.0, 15.0),  # reachable in round 1 ([10, 20)), leaves inside it: a dropout
    "d": (12.0, None),  # joins inside round 1: reachable from round 2 only
    "e": (0.0, 25.0),  # leaves inside round 2
}


LINK_S = {"a": 12.0, "c": 4.0, "e": 6.0}  # seconds from a round's start to the reply (others: the round's end)


def synthetic_schedule(link_s: dict[str, float] | None = None) -> Schedule:
    """Five nodes with the coverage of ``INTERVALS``, the ``--format flower`` document's shape; with
    ``link_s``, a radio section giving those nodes their link times."""
    nodes, requests = [], []
    for i, (v, (start, end)) in enumerate(INTERVALS.items(), start=1):
        nodes.append({"node_id": i, "vehicle": v, "intervals": [[start, end or 40.0]], "open_at_end": end is None})
        requests.append({"time": start, "kind": "join", "node_id": i, "vehicle": v})
        if end is not None:
            requests.append({"time": end, "kind": "leave", "node_id": i, "vehicle": v})
    requests.sort(key=lambda r: (r["time"], r["kind"] == "join", r["node_id"]))
    doc = {"format": "vmc-sim-availability-flower", "begin": 0.0, "end": 40.0, "nodes": nodes, "requests": requests}
    if link_s is not None:
        doc["radio"] = {"methods": {"fsosa": {"steps": [], "link_s": link_s, "default_link_s": None}}}
    return parse_schedule(doc)


def in_coverage(vehicle: str, t: float) -> bool:
    start, end = INTERVALS[vehicle]
    return start <= t < (end if end is not None else float("inf"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same FedAvg run twice, and the scenario they ran."""
    from vmc_sim.flower.strategies import run_strategy

    tmp = tmp_path_factory.mktemp("strategies")
    sc = scenario(tmp / "unused.jsonl", federated=FEDERATED)
    schedule = synthetic_schedule()
    return [read_run(run_strategy(sc, schedule, tmp / f"run{i}", "fedavg", ROUNDS, ROUND_S)) for i in range(2)] + [sc]


def test_rounds_sample_only_reachable_nodes(runs):
    doc, models = runs[0]
    assert doc["status"] == "complete", doc.get("traceback")
    assert [r["round"] for r in doc["records"]] == [1, 2, 3]
    for r in doc["records"]:
        assert r["end"] - r["begin"] == ROUND_S
        assert r["reachable"] == [v for v in INTERVALS if in_coverage(v, r["begin"])]
        assert set(r["sampled"]) <= set(r["reachable"]) and r["sampled"]
        assert r["bytes_sent"] > 0 and r["bytes_received"] > 0
    assert "d" not in doc["records"][1]["reachable"] and "d" in doc["records"][2]["reachable"]
    assert sorted(models) == [0, 1, 2, 3]
    assert isinstance(doc["sampling_seed"], int)


def test_each_round_records_the_accuracy_of_its_aggregated_model(runs):
    from fl_core.training import evaluate

    (doc, models), sc = runs[0], runs[-1]
    setup = sc.federated.setup(sc.seed)
    for r in doc["records"]:
        assert r["accuracy"] == evaluate(setup.model_fn(), models[r["round"]], setup.test_set)[0]


def test_dropouts_are_recorded_and_not_aggregated(runs):
    doc, _ = runs[0]
    dropouts = {r["round"]: r["dropouts"] for r in doc["records"]}
    assert dropouts == {1: [], 2: ["c"], 3: ["e"]}
    for r in doc["records"]:
        assert not set(r["dropouts"]) & set(r["aggregated"])
        assert sorted(r["aggregated"]) == sorted(set(r["sampled"]) - set(r["dropouts"]))
        for m in r["messages"]:
            assert m["dropped"] == (m["vehicle"] in r["dropouts"])
            assert (m["reply"] is None) == m["dropped"]
        received = sum(m["reply"]["arrays"] for m in r["messages"] if not m["dropped"])
        assert received == r["bytes_received"]


def test_runs_are_reproducible(runs):
    (a, a_models), (b, b_models) = runs[:2]
    assert a["sampling_seed"] == b["sampling_seed"]
    strip = lambda r: {k: v for k, v in r.items() if k != "messages"}  # noqa: E731
    assert [strip(r) for r in a["records"]] == [strip(r) for r in b["records"]]
    for k, model in a_models.items():
        assert torch.equal(model, b_models[k]), f"model after round {k}"


def test_strategy_names_and_refusals(tmp_path: Path):
    from vmc_sim.flower.cli import STRATEGY_NAMES
    from vmc_sim.flower.rounds import RoundClock, coverage
    from vmc_sim.flower.strategies import FLOWER_STRATEGIES, build_strategy

    assert tuple(FLOWER_STRATEGIES) == STRATEGY_NAMES
    with pytest.raises(ValueError, match="unknown strategy"):
        build_strategy("nope", 1.0)
    clock = RoundClock(0.0, ROUND_S, coverage(synthetic_schedule()))
    assert clock.reachable(1) == ["a", "b", "c", "e"] and clock.drops_out("c", 2) and not clock.drops_out("c", 1)


def test_a_node_whose_upload_outlasts_its_coverage_or_round_drops_out(tmp_path: Path):
    """On the radio's link times: c's reply (4 s) now arrives before it leaves at 15 s, e's (6 s)
    not before it leaves at 25 s, a's (12 s) never within a 10 s round."""
    from vmc_sim.flower.strategies import run_strategy

    sc = scenario(tmp_path / "unused.jsonl", federated=FEDERATED)
    doc, _ = read_run(run_strategy(sc, synthetic_schedule(LINK_S), tmp_path / "r", "fedavg", ROUNDS, ROUND_S))
    assert doc["status"] == "complete", doc.get("traceback")
    assert doc["link_times"] == {"method": "fsosa", "default_s": None}
    assert {r["round"]: r["dropouts"] for r in doc["records"]} == {1: ["a"], 2: ["a"], 3: ["a", "e"]}
    for r in doc["records"]:
        arrives = {m["vehicle"]: m["arrives"] for m in r["messages"]}
        assert arrives == {v: r["begin"] + LINK_S.get(v, ROUND_S) for v in r["sampled"]}
