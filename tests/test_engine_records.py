"""Every shipped scenario, shrunk to a few seconds, gives the records committed in
``tests/data/engine_records.json``: a change to the engine's structure that moves a simulated
figure fails here.

Each shipped file keeps its structure (methods, strategies, RSUs, coordinator, channel, compute
mode); what makes it slow is shrunk: the data set becomes digits with a small MLP, two local epochs,
a short duration, at most a few requests; LuST traffic is the committed case-study trace; simulated
time is the device profiles' (host-independent), and ``calibrated`` or ``measured`` (host time) get
the calibrated model with pinned costs. A city-based scenario with every multi-round strategy covers
the round worlds, one with three RSUs covers handover and store-and-forward.

``VMC_WRITE_ENGINE_RECORDS=1 python -m pytest tests/test_engine_records.py`` writes the file anew.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmc_sim.compute.host import cpu_model
from vmc_sim.cosim import run_scenario
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.inputs import resolve_paths
from vmc_sim.scenario.schema import Scenario

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "engine_records.json"
LUST_TRACE = ROOT / "reports" / "lust_case_study" / "trace.jsonl"
COSTS = {"train_s_per_sample_epoch": 2.5e-4, "fisher_s_per_sample": 1.5e-3, "solve_s_per_unit": 2e-3}
LEARNED = ("accuracy", "loss")  # float results of training on the host: exact on one CPU model


def _shrink(data: dict[str, Any], duration: float, max_requests: int) -> dict[str, Any]:
    fed = data.setdefault("federated", {})
    train = fed.setdefault("train", {})
    cap = 32 if fed.get("shard_assignment") == "arrival" else 16  # arrival: a shard for each client
    fed.update(dataset="digits", model="mlp", num_clients=min(int(fed.get("num_clients", 16)), cap))
    fed.pop("scheme", None)
    fed.pop("augment", None)
    train.update(epochs=2, lr=0.05, batch_size=32)
    train.pop("threads", None)
    coord = data.setdefault("coordinator", {})
    coord["max_requests"] = max_requests
    coord["min_clients"] = min(int(coord.get("min_clients", 4)), 6)
    compute = data.setdefault("compute", {})
    if compute.get("time_model", "profile") in ("calibrated", "measured"):
        compute.update(time_model="calibrated", calibration=dict(COSTS))
    data["duration"] = min(float(data.get("duration", 600)), duration)
    return data


def _lust_to_trace(data: dict[str, Any]) -> dict[str, Any]:
    mob = data["mobility"]
    data["mobility"] = {"source": "trace", "trace": str(LUST_TRACE)}
    if mob.get("rsus", {}).get("placement") != "explicit":  # the trace has the case study's one RSU
        data["coordinator"]["min_clients"] = min(data["coordinator"]["min_clients"], 4)
    return data


def shipped_scenarios() -> dict[str, dict[str, Any]]:
    """The shrunk variant of every scenario under ``scenarios/``, by file name."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        src = data.get("mobility", {}).get("source", "city")
        if src == "lust":
            data = _lust_to_trace(_shrink(data, 7200.0, 10))
        elif src == "trace":  # the paper sequence's trace is a tool's output: the LuST trace stands in
            data = _shrink(data, 7200.0, 10)
            data["mobility"] = {"source": "trace", "trace": str(LUST_TRACE)}
            data["coordinator"].update(warmup=5400.0, min_clients=6)
            data["duration"] = 7200.0
        else:
            data = _shrink(data, 240.0, 12)
        out[path.stem] = resolve_paths(data, path.parent)
    for path in sorted((ROOT / "scenarios" / "sweeps").glob("*.yaml")):
        sweep = yaml.safe_load(path.read_text())
        base = sweep["base"]
        if isinstance(base, str):
            continue  # a sweep over a scenario file above
        data = (
            _lust_to_trace(_shrink(base, 7200.0, 10))
            if base["mobility"]["source"] == "lust"
            else _shrink(base, 240.0, 12)
        )
        out[f"sweep-{path.stem}"] = data
    rounds = _shrink(yaml.safe_load((ROOT / "scenarios" / "city.yaml").read_text()), 240.0, 12)
    rounds["name"] = "city-rounds"
    rounds["federated"]["methods"] = ["fsosa"]
    rounds["federated"]["strategies"] = ["fedavg", "fedprox", "topk", "dgfedreuse", "pdf"]
    rounds["federated"]["rounds"] = {"rounds": 3, "clients_per_round": 4, "interval": 20.0}
    out["city-rounds"] = rounds
    slow = _shrink(yaml.safe_load((ROOT / "scenarios" / "city.yaml").read_text()), 240.0, 12)
    slow["name"] = "city-slow-window"  # jobs outlast coverage (failed transfers); requests gathered in windows
    slow["coordinator"]["window"] = 15.0
    slow["compute"] = {
        "time_model": "device",
        "seconds_per_sample_epoch": 0.02,
        "batch_max_jobs": 3,
        "batch_overlap": 0.5,
    }
    out["city-slow-window"] = slow
    region = _shrink(yaml.safe_load((ROOT / "scenarios" / "city.yaml").read_text()), 240.0, 12)
    region["name"] = "city-region"  # three RSUs, one coordinator: transfers hand over and resume
    region["mobility"]["rsus"] = {"placement": "auto", "count": 3, "radius": 150.0, "min_spacing": 200.0}
    region["coordinator"].update(resume_within_s=10.0, backhaul_bps=1e8)
    region["channel"] = {
        **region.get("channel", {}),
        "rate_cap_bps": 2e5,
    }  # transfers of seconds: long enough to hand over
    region["compute"] = {"time_model": "device", "seconds_per_sample_epoch": 0.002}
    out["city-region"] = region
    return out


def simulated(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without their host-measured columns, floats as JSON keeps them."""
    rows = [{k: v for k, v in r.items() if not k.startswith("host_") and k != "host"} for r in records]
    return json.loads(json.dumps(rows))


def _run(name: str, data: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    data = json.loads(json.dumps(data))
    data["name"] = name
    sc = load_model(Scenario, None, data)
    run = run_scenario(sc, out=tmp_path / name, progress=False, say=lambda s: None)
    return simulated(list(run.records()))


def _same(a: Any, b: Any, exact_learned: bool, path: str = "") -> str | None:
    """Where ``a`` and ``b`` differ (None if nowhere); learned floats within 1e-6 across CPU models."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            d = _same(a[k], b[k], exact_learned, f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _same(x, y, exact_learned, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None
    learned = path.rsplit(".", 1)[-1] in LEARNED
    if learned and not exact_learned and isinstance(a, float) and isinstance(b, float):
        return None if math.isclose(a, b, abs_tol=0.05) else f"{path}: {a!r} against {b!r}"
    return None if a == b else f"{path}: {a!r} against {b!r}"


SCENARIOS = shipped_scenarios()


@pytest.mark.slow
@pytest.mark.sumo
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_shipped_scenario_gives_the_committed_records(name, tmp_path):
    rows = _run(name, SCENARIOS[name], tmp_path)
    assert rows, f"{name}: no record"
    if os.environ.get("VMC_WRITE_ENGINE_RECORDS") == "1":
        golden = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {"cpu": cpu_model(), "scenarios": {}}
        golden["cpu"] = cpu_model()
        golden["scenarios"][name] = rows
        GOLDEN.write_text(json.dumps(golden, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
        return
    golden = json.loads(GOLDEN.read_text())
    assert name in golden["scenarios"], f"{name}: no committed records; write them with VMC_WRITE_ENGINE_RECORDS=1"
    diff = _same(rows, golden["scenarios"][name], exact_learned=golden["cpu"] == cpu_model(), path=name)
    assert diff is None, diff


def test_every_shipped_scenario_file_is_covered():
    names = {p.stem for p in (ROOT / "scenarios").glob("*.yaml")}
    assert names <= set(SCENARIOS)
