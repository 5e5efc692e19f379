"""F-SOSA on Flower: the Flower run releases the models and charges the bytes of fl_core's editor
driven directly on the same schedule, and agrees with ``vmc run``'s records on the same trace."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_cosim import scenario
from test_export import returning_trace

from fl_core.training import evaluate
from vmc_sim.cosim import run_scenario
from vmc_sim.flower.replay import direct_run, parse_schedule, read_run, uploads
from vmc_sim.rundir.export import flower_schedule, load_availability

pytest.importorskip("flwr")

FEDERATED = {"methods": ["fsosa"], "num_clients": 8, "train": {"epochs": 1, "upload_dtype": "float16"}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same scenario and schedule run by Flower, directly, and by ``vmc run``."""
    from vmc_sim.flower.apps import run_flower

    tmp = tmp_path_factory.mktemp("flower")
    trace = returning_trace(tmp / "traffic.jsonl")
    sc = scenario(trace, federated=FEDERATED)
    schedule = parse_schedule(flower_schedule(load_availability(trace)))
    flower = read_run(run_flower(sc, schedule, tmp / "flower"))
    direct = read_run(direct_run(sc, schedule, tmp / "direct"))
    cosim = run_scenario(sc, out=tmp / "runs", progress=False, say=lambda s: None)
    return sc, flower, direct, list(cosim.records())


def test_flower_releases_the_direct_models_and_bytes(runs):
    _, (flower, f_models), (direct, d_models), _ = runs
    assert flower["status"] == "complete", flower.get("traceback")
    kinds = [r["kind"] for r in flower["records"]]
    assert kinds[0] == "fit" and {"add", "remove"} <= set(kinds)
    assert sorted(f_models) == sorted(d_models) == [r["index"] for r in direct["records"]]
    for i, model in d_models.items():
        assert torch.equal(f_models[i], model), f"model after request {i}"
    strip = lambda r: {k: v for k, v in r.items() if k != "messages"}  # noqa: E731
    assert [strip(r) for r in flower["records"]] == direct["records"]
    assert uploads(flower["records"]) == uploads(direct["records"])
    for r in flower["records"]:
        sent = sum(m["reply"]["model"] + m["reply"].get("fisher", 0) for m in r["messages"])
        assert sent == r["bytes"]["model_upload"] + r["bytes"]["fisher_upload"]
        trained = [m["vehicle"] for m in r["messages"] if m["type"] == "train"]
        assert trained == r["trained"] or sorted(trained) == r["trained"]
        broadcast = {m["sent"]["w0"] for m in r["messages"] if m["type"] == "train"}
        assert broadcast <= {r["bytes"]["broadcast"]}
    assert any(m["type"] == "query.recall" for r in flower["records"] for m in r["messages"])


def test_flower_matches_vmc_run_records(runs):
    sc, (flower, f_models), _, cosim = runs
    assert all(not r.get("take_outs") and not r.get("not_arrived") for r in cosim)
    assert [r["kind"] for r in flower["records"]] == [r["kind"] for r in cosim]
    assert [r["members"] for r in flower["records"]] == [r["members"] for r in cosim]
    assert [r["bytes"] for r in flower["records"]] == [r["bytes"] for r in cosim]
    setup = sc.federated.setup(sc.seed)
    model = setup.model_fn()
    for r, c in zip(flower["records"], cosim, strict=True):
        assert evaluate(model, f_models[r["index"]], setup.test_set)[0] == c["accuracy"]


def test_schedule_is_refused_when_not_a_flower_schedule(tmp_path: Path):
    from vmc_sim.flower.replay import read_schedule

    bad = tmp_path / "x.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a vmc-sim Flower schedule"):
        read_schedule(bad)
