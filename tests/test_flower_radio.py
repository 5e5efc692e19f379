"""F-SOSA on Flower feels the radio: ``vmc flower SCENARIO`` runs the traffic once, and an upload
that ``vmc run`` lost is lost on Flower too, so Flower releases ``vmc run``'s models; on a recorded
trace through ``flwr run`` of the packaged app, on the default city and on your own network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from test_cosim import scenario
from test_export import returning_trace

from vmc_sim.cli import main
from vmc_sim.flower.replay import direct_run, parse_schedule, read_run, read_schedule
from vmc_sim.rundir.directory import RunDir
from vmc_sim.rundir.released import load_released, read_index
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario, load_scenario

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parents[1]
SLOW_UPLOADS = {"time_model": "device", "seconds_per_sample_epoch": 0.4}  # jobs outlast some vehicles' coverage
FEDERATED = {"methods": ["fsosa"], "train": {"epochs": 1, "fisher": "diagonal"}}
TOLERANCE = 1e-5  # vmc certify's: the statistics never hold a lost upload instead of adding and removing it


def released(run: Path) -> dict[int, torch.Tensor]:
    """``vmc run``'s released models by the F-SOSA record that released them."""
    return {e["record"]: load_released(run, e) for e in read_index(run) if e["method"] == "fsosa"}


def max_diff(flower: dict[int, torch.Tensor], cosim: dict[int, torch.Tensor]) -> tuple[float, int]:
    """Largest absolute difference between Flower's and ``vmc run``'s models, and how many are equal
    bit for bit; every model ``vmc run`` released must have its Flower counterpart."""
    assert cosim and set(cosim) <= set(flower)
    diffs = [float((flower[k].double() - m.double()).abs().max()) for k, m in cosim.items()]
    return max(diffs), sum(torch.equal(flower[k], m) for k, m in cosim.items())


@pytest.fixture(scope="module")
def trace_run(tmp_path_factory):
    """``vmc flower sc.yaml`` (no schedule: the co-simulation runs first, then ``flwr run`` of the
    packaged app) on a trace whose uploads outlast coverage, and the cosim run directory."""
    tmp = tmp_path_factory.mktemp("flower-radio")
    sc = scenario(returning_trace(tmp / "traffic.jsonl"), compute=SLOW_UPLOADS, federated=FEDERATED)
    path = tmp / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")), encoding="utf-8")
    out = tmp / "flower"
    assert main(["flower", str(path), "--out", str(out)]) == 0, (out / "flwr_run.log").read_text()
    (cosim,) = (out / "cosim").iterdir()
    return sc, out, cosim


def test_an_upload_lost_in_vmc_run_is_lost_on_flower(trace_run):
    sc, out, cosim = trace_run
    doc, models = read_run(out)
    assert doc["status"] == "complete" and doc["runner"] == "flower", doc.get("traceback")
    rows = [r for r in RunDir(cosim, create=False).records() if r["method"] == "fsosa"]
    lost = [(k, c) for k, r in enumerate(rows) for c in r.get("not_arrived") or []]
    assert lost, "the scenario must lose uploads for this test to mean anything"
    for k, vehicle in lost:
        row = doc["records"][k]
        assert vehicle in row["lost"] and vehicle not in row["members"]
        sent = [m for m in row["messages"] if m["vehicle"] == vehicle and m["type"] == "train"]
        assert sent and all(m["reply"] is None and (m.get("reply_lost") or m.get("delivered") is False) for m in sent)
    assert any(r["take_outs"] for r in doc["records"])  # a lost member was taken out and replaced
    # replayed on coverage alone (the trace, without the run's radio), the same upload arrives
    k, vehicle = lost[0]
    bare = read_schedule(sc.mobility.trace)
    assert bare.radio is None
    coverage_only, _ = read_run(direct_run(sc, bare, out.parent / "coverage-only"))
    assert any(vehicle in r["members"] for r in coverage_only["records"])


def test_flower_releases_vmc_runs_models(trace_run):
    sc, out, cosim = trace_run
    _, models = read_run(out)
    worst, _ = max_diff(models, released(cosim))
    assert worst <= TOLERANCE
    direct, d_models = read_run(direct_run(sc, read_schedule(out / "schedule.json"), out.parent / "direct"))
    flower, _ = read_run(out)
    strip = lambda r: {k: v for k, v in r.items() if k != "messages"}  # noqa: E731
    assert [strip(r) for r in flower["records"]] == direct["records"]
    assert all(torch.equal(models[k], m) for k, m in d_models.items())


def test_a_schedule_of_another_scenario_is_refused(trace_run, tmp_path):
    from vmc_sim.flower.radio import ScheduleMismatchError

    sc, out, _ = trace_run
    other = load_model(Scenario, None, {**sc.model_dump(mode="json"), "seed": sc.seed + 1})
    with pytest.raises(ScheduleMismatchError, match="not of this scenario"):
        direct_run(other, read_schedule(out / "schedule.json"), tmp_path / "x")
    doc = json.loads((out / "schedule.json").read_text())
    doc["radio"]["methods"]["fsosa"]["steps"][0].pop("lost")
    with pytest.raises(ValueError, match=r"radio.methods.fsosa.steps\[0\] lacks lost"):
        parse_schedule(doc)


def test_schedule_only_writes_the_radio_schedule_and_the_flwr_run_line(trace_run, tmp_path, capsys):
    sc, _, _ = trace_run
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")), encoding="utf-8")
    assert main(["flower", str(path), "--out", str(tmp_path / "o"), "--schedule-only"]) == 0
    schedule = read_schedule(tmp_path / "o" / "schedule.json")
    assert schedule.radio is not None and not (tmp_path / "o" / "records.json").exists()
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.strip().startswith("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run ")
    assert (
        f"num-supernodes={len(schedule.vehicles)}" in line and str((tmp_path / "o" / "schedule.json").resolve()) in line
    )


def test_the_app_refuses_a_bad_run_config(tmp_path):
    from vmc_sim.flower.app_config import app_config

    good = {"scenario": "/a.yaml", "schedule": "/s.json", "out": "/o"}
    assert app_config(good).strategy == "fsosa" and app_config(good).round_s is None
    with pytest.raises(ValueError, match="not an absolute path"):
        app_config({**good, "schedule": "s.json"})
    with pytest.raises(ValueError, match="strategy='nope'"):
        app_config({**good, "strategy": "nope"})
    with pytest.raises(ValueError, match="'out' is empty"):
        app_config({**good, "out": ""})


def shrunk(name: str, duration: float, **over: dict) -> Scenario:
    """A shipped scenario cut to ``duration`` s on digits with the small MLP, one epoch, F-SOSA
    alone, uploads slow enough that some outlast their vehicle's coverage."""
    data = load_scenario(ROOT / "scenarios" / f"{name}.yaml").model_dump(mode="json")
    data.update(duration=duration)
    data["federated"].update(dataset="digits", model="mlp", num_clients=16, methods=["fsosa"])
    data["federated"]["train"].update(epochs=1)
    data["coordinator"].update(warmup=30.0, min_clients=3)
    data["compute"] = {"time_model": "device", "seconds_per_sample_epoch": 0.05}
    for k, v in over.items():
        data[k] = {**data[k], **v}
    return load_model(Scenario, None, data)


@pytest.mark.slow
@pytest.mark.sumo
@pytest.mark.parametrize(
    "name",
    [
        pytest.param("city", id="default-city"),  # denser traffic: enough clients for the take-outs
        pytest.param("own_network", id="own-network"),
    ],
)
def test_flower_on_the_radio_releases_vmc_runs_models(name, tmp_path):
    from vmc_sim.flower.apps import run_flower
    from vmc_sim.flower.radio_run import radio_schedule

    pytest.importorskip("libsumo")
    over = {}
    if name == "city":
        city = load_scenario(ROOT / "scenarios" / "city.yaml").model_dump(mode="json")["mobility"]["city"]
        over["mobility"] = {"city": {**city, "demand_scale": 2.5}}
    sc = shrunk(name, 150.0, **over)
    doc, cosim = radio_schedule(sc, tmp_path, "fsosa", say=lambda s: None)
    steps = doc["radio"]["methods"]["fsosa"]["steps"]
    assert any(s["take_outs"] for s in steps), "no upload was lost and taken out: the test would prove nothing"
    flower, models = read_run(run_flower(sc, parse_schedule(doc), tmp_path / "flower"))
    assert flower["status"] == "complete", flower.get("traceback")
    worst, _ = max_diff(models, released(cosim))
    assert worst <= TOLERANCE
    for row, step in zip(flower["records"], steps, strict=True):
        assert not set(step["lost"]) & set(row["members"])
