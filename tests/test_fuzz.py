"""Generated malformed inputs: scenarios, traces, run directories, contribution files and uploads.

For each bad input: the error is one clear line naming the file, field or client; the command
exits 2 (bad input) or 1 (the run failed), and no file of an existing run directory changes
(nor is a new one created). ``bench/RESULTS.md`` states how many distinct bad inputs this module
tries (``test_count``).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_cosim import files_of, scenario, trace_file

from fl_core.contribution import Contribution
from fl_core.editors import FixedRatio, build_editor
from fl_core.errors import DuplicateClientError, UnknownClientError
from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario


def base_scenario(trace) -> dict:
    return {
        "name": "f",
        "seed": 3,
        "duration": 120.0,
        "mobility": {"source": "trace", "trace": str(trace)},
        "federated": {
            "dataset": "digits",
            "num_clients": 12,
            "model": "mlp",
            "rho": 0.5,
            "methods": ["fsosa"],
            "train": {"epochs": 1, "lr": 0.05, "fisher": "diagonal"},
        },
        "coordinator": {"warmup": 5.0, "min_clients": 4},
        "compute": {"time_model": "device"},
    }


# -- scenarios: (dotted field, bad value) --------------------------------------------------------
SCENARIO_CASES = [
    ("duration", -5.0),
    ("duration", "long"),
    ("seed", -1),
    ("seed", 1.5),
    ("name", None),
    ("federated.num_clients", 0),
    ("federated.rho", 1.5),
    ("federated.rho", 0.0),
    ("federated.methods", ["nope"]),
    ("federated.methods", "fsosa"),
    ("federated.strategies", ["nope"]),
    ("federated.dataset", "imagenet"),
    ("federated.model", "transformer"),
    ("federated.train.epochs", 0),
    ("federated.train.lr", -0.1),
    ("federated.train.fisher", "hessian"),
    ("federated.train.batch_size", 0),
    ("federated.alpha", -1.0),
    ("federated.unknown", 1),
    ("mobility.source", "satellite"),
    ("mobility.trace", None),
    ("mobility.sumo.step_length", 0.0),
    ("mobility.fcd_max_speed", 0.0),
    ("mobility.fcd_invalid", "ignore"),
    ("mobility.fcd_geo", "maybe"),
    ("coordinator.window", -1.0),
    ("coordinator.min_clients", -3),
    ("coordinator.warmup", "soon"),
    ("channel.bandwidth_hz", -1.0),
    ("channel", [1, 2]),
    ("compute.mode", "cloud"),
    ("compute.time_model", "guess"),
    ("unknown_section", {"a": 1}),
]


def put(data: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    for key in path:
        data = data.setdefault(key, {})
    data[last] = value


@pytest.mark.parametrize(("field", "value"), SCENARIO_CASES, ids=[f"{f}={v!r}" for f, v in SCENARIO_CASES])
def test_bad_scenario_field(tmp_path, capsys, field, value):
    data = base_scenario(trace_file(tmp_path))
    put(data, field, value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    top = field.split(".")[0]
    assert "bad.yaml" in err and top in err, err
    assert not (tmp_path / "runs").exists()


SCENARIO_FILES = {
    "not yaml": "federated: [unclosed\n",
    "a list": "- 1\n- 2\n",
    "a number": "3\n",
    "binary": "\x00\x01\x02",
}


@pytest.mark.parametrize("name", list(SCENARIO_FILES))
def test_unreadable_scenario_file(tmp_path, capsys, name):
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO_FILES[name])
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert "bad.yaml" in capsys.readouterr().err and not (tmp_path / "runs").exists()


# -- traces: a valid trace, then one line damaged -----------------------------------------------
def damage_trace(lines: list[str], how: str) -> list[str]:
    event = json.loads(lines[2])
    if how == "truncated last line":
        return lines[:-1] + [lines[-1][:-7]]
    if how == "not json":
        return lines[:2] + ["{oops\n"] + lines[3:]
    if how == "empty line":
        return lines[:2] + ["\n"] + lines[2:]
    if how == "unknown record type":
        return lines[:2] + [json.dumps({**event, "type": "teleport"}) + "\n"] + lines[3:]
    if how == "time backwards":
        return lines[:3] + [json.dumps({**event, "time": -1.0}) + "\n"] + lines[3:]
    if how == "time NaN":
        return lines[:2] + [json.dumps({**event, "time": math.nan}) + "\n"] + lines[3:]
    if how == "time missing":
        return lines[:2] + [json.dumps({k: v for k, v in event.items() if k != "time"}) + "\n"] + lines[3:]
    if how == "bad event kind":
        return lines[:2] + [json.dumps({**event, "kind": "teleport"}) + "\n"] + lines[3:]
    if how == "event without vehicle":
        return lines[:2] + [json.dumps({k: v for k, v in event.items() if k != "vehicle"}) + "\n"] + lines[3:]
    if how == "leave without join":
        return lines[:2] + [json.dumps({**event, "kind": "leave", "vehicle": "ghost"}) + "\n"] + lines[3:]
    if how == "record after end":
        return lines + [lines[2]]
    if how == "no header":
        return lines[1:]
    if how == "empty file":
        return []
    if how == "wrong format":
        return [json.dumps({"type": "header", "format": "other", "version": 1, "meta": {}}) + "\n"] + lines[1:]
    if how == "future version":
        return [json.dumps({**json.loads(lines[0]), "version": 99}) + "\n"] + lines[1:]
    if how == "meta not an object":
        return [json.dumps({**json.loads(lines[0]), "meta": [1]}) + "\n"] + lines[1:]
    if how == "states member malformed":
        return (
            lines[:3]
            + [json.dumps({"type": "states", "time": event["time"], "members": [["v0", "rsu0"]]}) + "\n"]
            + lines[3:]
        )
    raise AssertionError(how)


TRACE_CASES = [
    "truncated last line",
    "not json",
    "empty line",
    "unknown record type",
    "time backwards",
    "time NaN",
    "time missing",
    "bad event kind",
    "event without vehicle",
    "leave without join",
    "record after end",
    "no header",
    "empty file",
    "wrong format",
    "future version",
    "meta not an object",
    "states member malformed",
]


@pytest.mark.parametrize("how", TRACE_CASES)
def test_bad_trace(tmp_path, capsys, how):
    good = trace_file(tmp_path)
    lines = good.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(damage_trace(lines, how)))
    sc = tmp_path / "sc.yaml"
    sc.write_text(yaml.safe_dump(base_scenario(good)))
    assert main(["replay", str(bad), "--scenario", str(sc), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.jsonl" in err, err
    assert not (tmp_path / "runs").exists()


# -- run directories: a finished run, then one file damaged, then --resume ----------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    run = run_scenario(scenario(trace_file(tmp)), out=tmp / "runs", progress=False, say=lambda s: None)
    manifest = json.loads((run.path / "manifest.json").read_text())
    manifest["status"] = "interrupted"  # a complete run is not resumed: damage is found by resuming one
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    return run.path


def damage_run(path, how):
    manifest = path / "manifest.json"
    records = path / "records.jsonl"
    contributions = sorted((path / "contributions").glob("*.safetensors"))
    if how == "manifest truncated":
        manifest.write_text(manifest.read_text()[:50])
    elif how == "manifest not an object":
        manifest.write_text("[1, 2]")
    elif how == "manifest without config":
        manifest.write_text(json.dumps({"status": "failed"}))
    elif how == "manifest config invalid":
        m = json.loads(manifest.read_text())
        m["config"]["federated"]["rho"] = 7
        manifest.write_text(json.dumps(m))
    elif how == "manifest missing":
        manifest.unlink()
    elif how == "record not json":
        lines = records.read_text().splitlines(keepends=True)
        records.write_text("".join(lines[:2] + ["{nope\n"] + lines[3:]))
    elif how == "record not an object":
        lines = records.read_text().splitlines(keepends=True)
        records.write_text("".join(lines[:2] + ["[1, 2]\n"] + lines[3:]))
    elif how == "record changed":
        lines = records.read_text().splitlines(keepends=True)
        r = json.loads(lines[3])
        r["left"] = ["nobody"]
        records.write_text("".join(lines[:3] + [json.dumps(r) + "\n"] + lines[4:]))
    elif how == "contribution truncated":
        contributions[0].write_bytes(contributions[0].read_bytes()[:64])
    elif how == "contribution bytes flipped":
        data = bytearray(contributions[0].read_bytes())
        data[-5] ^= 0xFF
        contributions[0].write_bytes(bytes(data))
    elif how == "contribution replaced by another":
        contributions[0].write_bytes(contributions[1].read_bytes())
    elif how == "contribution index truncated":
        index = path / "contributions" / "index.json"
        index.write_text(index.read_text()[:40])
    elif how == "contribution index not an object":
        (path / "contributions" / "index.json").write_text("[]")
    else:
        raise AssertionError(how)


RUN_CASES = [
    "manifest truncated",
    "manifest not an object",
    "manifest without config",
    "manifest config invalid",
    "manifest missing",
    "record not json",
    "record not an object",
    "record changed",
    "contribution truncated",
    "contribution bytes flipped",
    "contribution replaced by another",
    "contribution index truncated",
    "contribution index not an object",
]


@pytest.mark.parametrize("how", RUN_CASES)
def test_damaged_run_directory_is_left_as_it_was(finished_run, tmp_path, capsys, how):
    path = tmp_path / "run"
    shutil.copytree(finished_run, path)
    damage_run(path, how)
    before = files_of(path)
    rc = main(["run", "--resume", str(path), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc in (1, 2) and err.startswith("vmc: "), (rc, err)
    named = {
        "manifest config": "manifest.json: config: federated.rho",
        "manifest": "manifest.json",
        "record": "records.jsonl",
        "contribution index": "index.json",
        "contribution": ".safetensors",
    }
    word = next(v for k, v in named.items() if how.startswith(k))
    assert word in err or (how == "record changed" and "diverged" in err), err
    assert files_of(path) == before


# -- uploads: editors quarantine invalid uploads, refuse unknown / duplicate clients ------------
def bad_upload(good: Contribution, how: str) -> Contribution:
    w = good.weights.clone()
    if how == "nan":
        w[3] = math.nan
    elif how == "inf":
        w[0] = math.inf
    elif how == "-inf":
        w[-1] = -math.inf
    elif how == "short":
        w = w[:-1]
    elif how == "2-d":
        w = w.reshape(1, -1)
    elif how == "int dtype":
        w = w.to(torch.int64)
    elif how == "fisher nan":
        f = good.fisher.from_tensors(
            {k: torch.full_like(t, math.nan) for k, t in good.fisher.tensors().items()}, good.fisher
        )
        return Contribution(good.client, w, f, good.num_samples)
    elif how == "no samples":
        return Contribution(good.client, w, good.fisher, 0)
    return Contribution(good.client, w, good.fisher, good.num_samples)


UPLOAD_CASES = ["nan", "inf", "-inf", "short", "2-d", "int dtype", "fisher nan", "no samples"]


class OneBadPool:
    def __init__(self, inner, bad, how):
        self.inner, self.bad, self.how, self.trainer = inner, bad, how, inner.trainer
        self.data_of = inner.data_of

    def train(self, c):
        good = self.inner.train(c)
        return bad_upload(good, self.how) if c == self.bad else good

    def recall(self, c):
        return self.inner.recall(c)

    def forget(self, c):
        self.inner.forget(c)


@pytest.mark.parametrize("how", UPLOAD_CASES)
def test_invalid_upload_is_quarantined_naming_the_client(tiny, how):
    editor = build_editor("fsosa", OneBadPool(tiny.pool("diagonal"), 7, how), np.random.default_rng(0), FixedRatio(1.0))
    editor.fit(range(6))
    model = editor.model.clone()
    report = editor.add(7)  # rho = 1: the arrival always joins, so its upload is always checked
    assert list(report.quarantined) == [7] and "client 7" in report.quarantined[7]
    assert editor.clients == set(range(6)) and torch.equal(editor.model, model)


REQUEST_CASES = [
    ("remove unknown", [42], []),
    ("add present", [], [3]),
    ("remove twice", [1, 1], []),
    ("add twice", [], [8, 8]),
    ("remove and re-add", [2], [2]),
    ("remove everyone", list(range(6)), []),
]


@pytest.mark.parametrize(("name", "removed", "added"), REQUEST_CASES, ids=[c[0] for c in REQUEST_CASES])
def test_bad_request_names_the_client_and_changes_nothing(tiny, name, removed, added):
    editor = build_editor("fsosa", tiny.pool("diagonal"), np.random.default_rng(0), FixedRatio(0.5))
    editor.fit(range(6))
    members, model = set(editor.members), editor.model.clone()
    with pytest.raises((UnknownClientError, DuplicateClientError, ValueError)) as err:
        editor.batch(removed, added)
    assert name == "remove everyone" or f"client {(removed or added)[0]}" in str(err.value) or "twice" in str(err.value)
    assert editor.clients == set(range(6)) and editor.members == members and torch.equal(editor.model, model)


ONESHOT_CASES = [["-10"], ["+3"], ["-3,-3"], ["+50"], ["3"], ["-x"], ["+8", "+8"], ["-0,-1,-2,-3,-4,-5,-6,-7"]]


@pytest.mark.parametrize("requests", ONESHOT_CASES, ids=["|".join(c) for c in ONESHOT_CASES])
def test_bad_oneshot_requests_are_refused_before_anything_runs(tmp_path, capsys, requests):
    path = tmp_path / "o.yaml"
    path.write_text(
        yaml.safe_dump(
            {"initial_clients": 8, "federated": {"num_clients": 20, "dataset": "digits"}, "requests": requests}
        )
    )
    assert main(["oneshot", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert "o.yaml" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_count():
    """The number of distinct bad inputs above (stated in bench/RESULTS.md)."""
    n = (
        len(SCENARIO_CASES)
        + len(SCENARIO_FILES)
        + len(TRACE_CASES)
        + len(RUN_CASES)
        + len(UPLOAD_CASES)
        + len(REQUEST_CASES)
        + len(ONESHOT_CASES)
        + len(FCD_CASES)
    )
    print(f"fuzz: {n} distinct bad inputs")
    assert n == 101  # the figure stated in bench/RESULTS.md: change both together


# -- FCD that breaks physics or names no metres, and files SUMO cannot take ----------------------
def fcd_xml(steps: dict[float, list[tuple]], attrs: str = 'x="{x}" y="{y}" speed="{s}"') -> str:
    """An FCD file's text: ``{time: [(id, x, y, speed), ...]}``."""
    body = "".join(
        f'<timestep time="{t:.2f}">'
        + "".join(f'<vehicle id="{v}" ' + attrs.format(x=x, y=y, s=sp) + "/>" for v, x, y, sp in vs)
        + "</timestep>\n"
        for t, vs in steps.items()
    )
    return f"<fcd-export>\n{body}</fcd-export>\n"


OWN = Path(__file__).resolve().parents[1] / "scenarios" / "own_network"
TIMES = [2.0 * k for k in range(10)]
DRIVING = {t: [("v1", 100 + 13 * t, 300.0, 13), ("v2", 500 - 13 * t, 310.0, 13)] for t in TIMES}
LONLAT = {t: [("v1", 6.12 + 1.8e-4 * t, 49.6, 13), ("v2", 6.13 - 1.8e-4 * t, 49.6, 13)] for t in TIMES}
JUMPER = {10.0: [("v3", -2300, 200, 13)], 12.0: [("v3", 2700, 200, 13)]}  # 5 km in 2 s
JUMPS = {t: DRIVING[t] + JUMPER.get(t, []) for t in TIMES}
EXPLICIT = {"placement": "explicit", "positions": [[300, 300]]}
FCD = {"source": "fcd", "fcd_file": "traffic.xml", "rsus": EXPLICIT}
FCD_CASES: dict[str, tuple[dict[str, str], dict, str]] = {
    "vehicle jumps 5 km in 2 s": (
        {"traffic.xml": fcd_xml(JUMPS)},
        FCD,
        "traffic.xml: vehicle 'v3' moves 5,000 m between time steps 10 and 12",
    ),
    "lon/lat, no network": ({"traffic.xml": fcd_xml(LONLAT)}, FCD, "lon/lat? give `mobility.fcd_geo: true`"),
    "lon/lat inside a network's bounds": (
        {"traffic.xml": fcd_xml(LONLAT)},
        {**FCD, "net_file": str(OWN / "town.net.xml")},
        "lon/lat? give `mobility.fcd_geo: true`",
    ),
    "positions off the network": (
        {"traffic.xml": fcd_xml({0.0: [("v1", 291905.4, 5498112.4, 0)]})},
        {**FCD, "net_file": str(OWN / "town.net.xml")},
        "outside the bounds of the network",
    ),
    "vehicle without speed": (
        {"traffic.xml": fcd_xml({12.0: [("v3", 1, 1, 0)]}, attrs='x="{x}" y="{y}"')},
        FCD,
        "traffic.xml: time step 12.00: vehicle 'v3' has no `speed` attribute",
    ),
    "CSV speed cell empty": (
        {"traffic.csv": "timestep_time;vehicle_id;vehicle_x;vehicle_y;vehicle_speed\n12.00;v3;1;1;\n"},
        {**FCD, "fcd_file": "traffic.csv"},
        "vehicle 'v3' has no vehicle_speed (an empty cell)",
    ),
    "speed limit below the traffic": (
        {"traffic.xml": fcd_xml(DRIVING)},
        {**FCD, "fcd_max_speed": 5.0},
        "faster than the limit of 5 m/s",
    ),
    "every vehicle dropped": (
        {"traffic.xml": fcd_xml(JUMPER)},
        {**FCD, "fcd_invalid": "drop"},
        "every one of its 1 vehicle(s) breaks a rule and would be dropped",
    ),
    "fcd_geo without net_file": (
        {"traffic.xml": fcd_xml(LONLAT)},
        {**FCD, "fcd_geo": True},
        "mobility.fcd_geo: true converts lon/lat to network x/y with the network's projection: give mobility.net_file",
    ),
    "fcd_geo on a network without projection": (
        {"traffic.xml": fcd_xml(LONLAT)},
        {**FCD, "fcd_geo": True, "net_file": str(OWN / "town.net.xml")},
        "town.net.xml has no geo projection",
    ),
    "route file with a comma": (
        {"a,b.rou.xml": (OWN / "town.rou.xml").read_text()},
        {"source": "files", "net_file": str(OWN / "town.net.xml"), "route_files": ["a,b.rou.xml"]},
        "mobility.route_files[0]: SUMO cannot take the file",
    ),
    "network name ending in a space": (
        {"town.net.xml ": (OWN / "town.net.xml").read_text()},
        {"source": "files", "net_file": "town.net.xml ", "route_files": [str(OWN / "town.rou.xml")]},
        "its name begins or ends with white space",
    ),
}


@pytest.mark.parametrize("how", list(FCD_CASES))
def test_bad_traffic_input_is_refused_before_anything_runs(tmp_path, capsys, how):
    files, mobility, expected = FCD_CASES[how]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    data = base_scenario(tmp_path / "unused.jsonl")
    data["mobility"] = mobility
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    (runs / "earlier").mkdir(parents=True)
    (runs / "earlier" / "records.jsonl").write_text('{"index": 0}\n')
    before = files_of(runs)
    assert main(["run", str(path), "--out", str(runs), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    lines = [x for x in err.splitlines() if expected in x]
    assert len(lines) == 1 and "mobility." in lines[0], err
    assert files_of(runs) == before


# -- run directories: a resume whose inputs changed, or whose run another process writes --------
@pytest.mark.parametrize("how", ["input digest differs", "another writer holds the lock"])
def test_a_resume_that_must_not_run_is_refused_and_changes_nothing(finished_run, tmp_path, capsys, how):
    import contextlib

    from vmc_sim.rundir.lock import RunLock

    path = tmp_path / "run"
    shutil.copytree(finished_run, path)
    expected = "another process is writing this run (pid "
    if how == "input digest differs":
        manifest = json.loads((path / "manifest.json").read_text())
        (named,) = manifest["inputs"]
        manifest["inputs"][named] = "0" * 64
        (path / "manifest.json").write_text(json.dumps(manifest))
        expected = f"{named} (sha256 000000000000 when the run began"
    with RunLock(path) if how == "another writer holds the lock" else contextlib.nullcontext():
        before = files_of(path)
        rc = main(["run", "--resume", str(path), "--quiet"])
        assert files_of(path) == before
    err = capsys.readouterr().err.strip()
    assert rc == 1 and err.startswith("vmc: ") and expected in err, err


# -- non-finite numbers: every numeric key of the schema, generated from it ----------------------
def numeric_keys() -> list[tuple[str, str]]:
    """(dotted key, shape) of every numeric key of the scenario schema (:data:`SECTIONS`): shape is
    ``scalar``, ``list`` (a list of numbers) or ``pairs`` (a list of [x, y])."""
    import dataclasses
    import typing

    from pydantic import BaseModel

    from vmc_sim.scenario.docs import SECTIONS

    def shape(text: str) -> str | None:
        if "str" in text or not ("float" in text or "int" in text):
            return None
        return "pairs" if "list[list" in text else "list" if "list[" in text else "scalar"

    keys = []
    for path, cls in SECTIONS:
        prefix = path + "." if path else ""
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            for name, f in cls.model_fields.items():
                text = str(f.annotation) if typing.get_origin(f.annotation) else getattr(f.annotation, "__name__", "")
                kind = shape(text.replace("Literal['mean']", ""))
                if kind:
                    keys.append((prefix + name, kind))
        else:
            for fld in dataclasses.fields(cls):
                kind = shape(str(fld.type))
                if kind:
                    keys.append((prefix + fld.name, kind))
    return keys


NUMERIC_KEYS = numeric_keys()
NON_FINITE = [math.inf, -math.inf, math.nan, "inf"]
NON_FINITE_CASES = [(k, shape, v) for k, shape in NUMERIC_KEYS for v in NON_FINITE]


def test_the_numeric_keys_are_generated_from_the_schema():
    keys = dict(NUMERIC_KEYS)
    for key in ("duration", "seed", "federated.train.lr", "federated.rho", "mobility.sumo.step_length"):
        assert keys[key] == "scalar", key
    for key in ("coordinator.backhaul_bps", "channel.carrier_ghz", "mobility.city.spacing", "compute.batch_overlap"):
        assert keys[key] == "scalar", key
    assert keys["mobility.rsus.region"] == "list" and keys["mobility.rsus.polygon"] == "pairs"
    assert "name" not in keys and "mobility.source" not in keys and "compute.profile.name" not in keys
    assert len(NUMERIC_KEYS) > 60


@pytest.mark.parametrize(
    ("key", "shape", "value"), NON_FINITE_CASES, ids=[f"{k}={v!r}" for k, _, v in NON_FINITE_CASES]
)
def test_a_non_finite_number_is_refused_naming_its_key(tmp_path, capsys, key, shape, value):
    data = base_scenario(trace_file(tmp_path))
    bad = [value] if shape == "list" else [[value, 0.0]] if shape == "pairs" else value
    if key.startswith("compute.calibration."):
        put(data, "compute.calibration", {"train_s_per_sample_epoch": 1.0, "fisher_s_per_sample": 0.0})
        put(data, "compute.calibration.solve_s_per_unit", 0.0)
    if key.startswith("compute.profile."):
        put(data, "compute.profile", {"name": "mine", "flops_per_s": 1e12, "source": "datasheet"})
    put(data, key, bad)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    shown = value if isinstance(value, str) else repr(value)
    assert "bad.yaml" in err and f"must be a finite number, got {shown}" in err, err
    *section, last = key.split(".")
    line = next(x for x in err.splitlines() if "must be a finite number" in x)
    assert all(part in line for part in section) and last in line, line
    assert not (tmp_path / "runs").exists()


# -- writers pointed into a completed run, onto its files, or beside a live writer --------------
@pytest.fixture(scope="module")
def complete_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("complete")
    run = run_scenario(scenario(trace_file(tmp)), out=tmp / "runs", progress=False, say=lambda s: None)
    return run.path


def _scenario_file(run, tmp_path, **over) -> str:
    data = json.loads((Path(run) / "manifest.json").read_text())["config"]
    data.update(over)
    path = tmp_path / "same.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


WRITE_CASES = {
    "export onto the run's trace": lambda run, tmp: ["export", "availability", run, "--out", f"{run}/trace.jsonl"],
    "export onto the run's manifest": lambda run, tmp: ["export", "availability", run, "--out", f"{run}/manifest.json"],
    "export into the run directory": lambda run, tmp: ["export", "availability", run, "--out", f"{run}/"],
    "export under the run's contributions": lambda run, tmp: [
        *("export", "availability", run, "--out", f"{run}/contributions/x.csv"),
    ],
    "export with a file on the way": lambda run, tmp: ["export", "availability", run, "--out", f"{tmp}/f/x.csv"],
    "flower into the run": lambda run, tmp: [
        *("flower", _scenario_file(run, tmp), "--schedule", run, "--out", run, "--direct"),
    ],
    "run into the run": lambda run, tmp: ["run", _scenario_file(run, tmp), "--out", run, "--quiet"],
    "replay into the run": lambda run, tmp: ["replay", f"{run}/trace.jsonl", "--out", run, "--quiet"],
    "plot onto the run's records": lambda run, tmp: ["plot", run, "--out", f"{run}/records.jsonl"],
    "plot beside a live writer": lambda run, tmp: ["plot", run],
    "audit into the run under another name": lambda run, tmp: ["audit", run, "--out", f"{run}/mine.json"],
    "certify onto the run's released models": lambda run, tmp: ["certify", run, "--out", f"{run}/released.jsonl"],
    "certify into the run under another name": lambda run, tmp: ["certify", run, "--out", f"{run}/mine.json"],
    "resume with another scenario": lambda run, tmp: [
        *("run", _scenario_file(run, tmp, seed=4), "--resume", run, "--quiet"),
    ],
    "resume with --out": lambda run, tmp: ["run", "--resume", run, "--out", str(tmp), "--quiet"],
}


@pytest.mark.parametrize("how", list(WRITE_CASES))
def test_no_command_writes_into_a_run_it_does_not_own(complete_run, tmp_path, capsys, how):
    import contextlib

    from vmc_sim.rundir.directory import FINGERPRINTED, RunDir
    from vmc_sim.rundir.lock import RunLock

    path = tmp_path / "run"
    shutil.copytree(complete_run, path)
    (tmp_path / "f").write_text("a file where a directory is expected")
    argv = WRITE_CASES[how](str(path), tmp_path)
    with RunLock(path) if how == "plot beside a live writer" else contextlib.nullcontext():
        before = files_of(path)
        rc = main(argv)
        assert files_of(path) == before
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("vmc: ") and "Errno" not in err, (rc, err)
    assert len(err.splitlines()) <= 2, err  # one line (a configuration error: its heading and the line)
    for name in FINGERPRINTED:
        RunDir(path, create=False).verify_file(name)


def test_an_output_file_is_replaced_only_with_force(complete_run, tmp_path, capsys):
    out = tmp_path / "av.csv"
    assert main(["export", "availability", str(complete_run), "--out", str(out)]) == 0
    first = out.read_bytes()
    out.write_text("mine")
    assert main(["export", "availability", str(complete_run), "--out", str(out)]) == 2
    assert "exists; give --force" in capsys.readouterr().err and out.read_text() == "mine"
    assert main(["export", "availability", str(complete_run), "--out", str(out), "--force"]) == 0
    assert out.read_bytes() == first


def test_plot_of_a_finished_run_writes_its_figure_under_the_lock_and_again(complete_run, tmp_path):
    path = tmp_path / "run"
    shutil.copytree(complete_run, path)
    assert main(["plot", str(path)]) == 0 and (path / "fig6.png").is_file()
    assert main(["plot", str(path)]) == 0  # its own figure, drawn again
    assert (path / ".lock").read_text() == ""  # let go


def test_a_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path, capsys):
    path = tmp_path / "twice.yaml"
    path.write_text("name: x\nduration: 600\nseed: 1\nduration: 60\n")
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "'duration' is given twice" in err and "line 2 and line 4" in err
    assert not (tmp_path / "runs").exists()
