"""``vmc export availability``: the CSV holds the intervals ``vmc dwell`` computes, FedScale's fields
and Flower's schedule hold the same intervals, and a trace that does not verify is refused with
nothing written."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from test_cosim import scenario

from mobility.dwell import coverage_visits
from mobility.events import MobilityEvent
from mobility.trace import TraceWriter, read_trace, write_trace
from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.export import flower_schedule, load_availability
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]
LUST_TRACE = ROOT / "reports" / "lust_case_study" / "trace.jsonl"
COMMENT = "# vmc-sim availability "


def returning_trace(path: Path) -> Path:
    """Six vehicles at the start; v0 leaves and comes back, v1 and v2 leave, two arrive and stay."""
    e = lambda t, kind, v: MobilityEvent(t, kind, v, "rsu0", 10.0, 0.0, 5.0)  # noqa: E731
    events = [e(float(i), "join", f"v{i}") for i in range(6)]
    events += [e(30.0, "leave", "v0"), e(40.0, "join", "n0"), e(47.0, "leave", "v1"), e(55.0, "join", "v0")]
    events += [e(60.0, "leave", "v2"), e(66.0, "join", "n1"), e(80.0, "leave", "v0")]
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
    }
    return write_trace(path, events, meta, end_time=90.0)


def two_method_replay(tmp: Path) -> Path:
    """F-SOSA and Retrain replaying :func:`returning_trace` (no SUMO, no network), uploads slow enough
    to fail: the run directory (the run that test_frames.py and test_map.py read)."""
    from conftest import small_scenario

    sc = small_scenario(
        returning_trace(tmp / "traffic.jsonl"),
        {"methods": ["fsosa", "retrain"]},
        compute={"time_model": "device", "seconds_per_sample_epoch": 0.2},
    )
    return run_scenario(sc, out=tmp / "runs", progress=False, say=lambda s: None).path


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory) -> Path:
    """A run replaying :func:`returning_trace` (no SUMO), with uploads slow enough to fail."""
    tmp = tmp_path_factory.mktemp("replay")
    trace = returning_trace(tmp / "traffic.jsonl")
    sc = scenario(
        trace, compute={"time_model": "device", "seconds_per_sample_epoch": 0.2}, federated={"methods": ["fsosa"]}
    )
    return run_scenario(sc, out=tmp / "runs", progress=False, say=lambda s: None).path


@pytest.fixture(scope="module")
def city_run(tmp_path_factory) -> Path:
    """The embedded default city, for 3 simulated minutes (a few seconds)."""
    pytest.importorskip("libsumo")
    data = load_scenario(None).model_dump(mode="json")
    data.update(duration=180.0, coordinator={**data["coordinator"], "max_requests": 8})
    data["federated"]["train"]["epochs"] = 1
    city = load_model(Scenario, None, data)
    return run_scenario(city, out=tmp_path_factory.mktemp("city"), progress=False, say=lambda s: None).path


KINDS = ["replay", pytest.param("city", marks=pytest.mark.sumo)]


def run_of(request: pytest.FixtureRequest, kind: str) -> Path:
    return request.getfixturevalue(f"{kind}_run")


def read_csv(path: Path) -> tuple[dict, list[dict[str, str]]]:
    first, *rest = path.read_text(encoding="utf-8").splitlines()
    assert first.startswith(COMMENT)
    return json.loads(first[len(COMMENT) :]), list(csv.DictReader(rest))


def export(source: Path, fmt: str, out: Path, capsys) -> str:
    assert main(["export", "availability", str(source), "--format", fmt, "--out", str(out)]) == 0
    return capsys.readouterr().out


def trace_of(run: Path) -> Path:
    own = run / "trace.jsonl"
    return (
        own if own.is_file() else Path(json.loads((run / "manifest.json").read_text())["config"]["mobility"]["trace"])
    )


def dwell_intervals(trace: Path) -> list[tuple[str, str, float, float, bool]]:
    """What ``vmc dwell`` computes, an interval still open ending at the trace's end."""
    t = read_trace(trace)
    assert t.end is not None
    return [
        (v.vehicle, v.rsu, v.join, t.end["time"] if v.leave is None else v.leave, v.censored)
        for v in coverage_visits(t.events)
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_the_csv_holds_the_dwell_intervals_and_says_where_they_came_from(request, kind, tmp_path, capsys):
    run = run_of(request, kind)
    text = export(run, "csv", tmp_path / "a.csv", capsys)
    assert "wrote" in text and "coverage intervals" in text
    meta, rows = read_csv(tmp_path / "a.csv")
    got = [(r["client"], r["rsu"], float(r["start"]), float(r["end"]), r["censored"] == "1") for r in rows]
    trace = trace_of(run)
    assert got == dwell_intervals(trace) and got
    manifest = json.loads((run / "manifest.json").read_text())
    assert meta["run"] == run.name and meta["scenario"] == manifest["config"]["name"]
    assert meta["seeds"] == manifest["seeds"] and meta["tool"]["version"]
    assert meta["trace"]["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert meta["trace"]["lines"] == len(trace.read_text().splitlines())
    ids = {r["client"]: int(r["id"]) for r in rows}
    assert sorted(ids.values()) == list(range(1, len(ids) + 1))
    cmeta, contributions = read_csv(tmp_path / "a.contributions.csv")
    assert cmeta["trace"] == meta["trace"]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(contributions) == sum(len(r.get("arrived", [])) + len(r.get("not_arrived", [])) for r in records)
    assert all(c["outcome"] in ("arrived", "not_arrived") and int(c["id"]) == ids[c["client"]] for c in contributions)


def test_a_contribution_that_never_arrived_says_why(replay_run, tmp_path, capsys):
    export(replay_run, "csv", tmp_path / "a.csv", capsys)
    _, contributions = read_csv(tmp_path / "a.contributions.csv")
    lost = [c for c in contributions if c["outcome"] == "not_arrived"]
    assert lost and all("left_coverage" in c["failure"] for c in lost)
    assert all(float(c["request_time"]) <= float(c["done_time"]) for c in contributions)


@pytest.mark.parametrize("kind", KINDS)
def test_fedscale_fields_and_the_flower_schedule_hold_the_csv_intervals(request, kind, tmp_path, capsys):
    run = run_of(request, kind)
    export(run, "csv", tmp_path / "a.csv", capsys)
    export(run, "fedscale", tmp_path / "f.json", capsys)
    export(run, "flower", tmp_path / "w.json", capsys)
    meta, rows = read_csv(tmp_path / "a.csv")
    by_vehicle: dict[str, list[list[float]]] = {}
    for r in rows:
        by_vehicle.setdefault(r["client"], []).append([float(r["start"]), float(r["end"])])
    begin, end = meta["begin"], meta["end"]

    fed = json.loads((tmp_path / "f.json").read_text())
    assert fed["meta"]["trace"] == meta["trace"] and fed["meta"]["run"] == run.name
    ids = fed["client_ids"]
    assert sorted(ids.values()) == list(range(1, len(ids) + 1)) and set(ids) == set(by_vehicle)
    for vehicle, client in ids.items():
        t = fed["client_behave_trace"][str(client)]
        assert t["finish_time"] == end - begin and t["model"] == "vehicle"
        active, inactive = t["active"], t["inactive"]
        assert len(active) == len(inactive) >= 1
        flat = [x for pair in zip(active, inactive, strict=True) for x in pair]
        assert flat == sorted(flat) and flat[0] >= 0 and flat[-1] <= t["finish_time"]
        assert [[a + begin, i + begin] for a, i in zip(active, inactive, strict=True)] == by_vehicle[vehicle]
        assert t["duration"] == pytest.approx(sum(i - a for a, i in zip(active, inactive, strict=True)))

    flower = json.loads((tmp_path / "w.json").read_text())
    assert flower["duration"] == end - begin and flower["meta"]["seeds"] == meta["seeds"]
    assert {n["vehicle"]: n["node_id"] for n in flower["nodes"]} == ids
    assert {n["vehicle"]: n["intervals"] for n in flower["nodes"]} == by_vehicle
    times = [r["time"] for r in flower["requests"]]
    assert times == sorted(times)
    assert sum(r["kind"] == "join" for r in flower["requests"]) == len(rows)
    assert sum(r["kind"] == "leave" for r in flower["requests"]) == sum(r["censored"] == "0" for r in rows)


def test_a_vehicle_that_returns_has_two_intervals(replay_run):
    av = load_availability(replay_run)
    assert [(s, e) for v, _, s, e, _ in av.intervals() if v == "v0"] == [(0.0, 30.0), (55.0, 80.0)]
    assert [v for v, *_, censored in av.intervals() if censored] == ["v3", "v4", "v5", "n0", "n1"]


def test_a_recording_cut_before_its_end_record_ends_at_its_last_record(tmp_path):
    w = TraceWriter(tmp_path / "cut.jsonl", {"clock": {"begin": 10.0}})
    w.write_events(
        [MobilityEvent(12.0, "join", "a", "r", 0.0, 0.0, 1.0), MobilityEvent(20.0, "join", "b", "r", 0, 0, 1)]
    )
    w.write_states(25.0, [])
    w.abandon()
    av = load_availability(tmp_path / "cut.jsonl")
    assert av.meta["trace"]["complete"] is False and (av.begin, av.end) == (10.0, 25.0)
    assert [i[2:] for i in av.intervals()] == [(12.0, 25.0, True), (20.0, 25.0, True)]


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def refuses(argv: list[str], where: Path, capsys) -> str:
    before = files_under(where)
    assert main(["export", "availability", *argv]) == 2
    assert files_under(where) == before, "a refused export wrote something"
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


@pytest.mark.parametrize("as_file", [False, True])
@pytest.mark.parametrize("fmt", ["csv", "fedscale"])
def test_a_cut_off_trace_is_refused_naming_the_file_and_nothing_is_written(replay_run, tmp_path, capsys, as_file, fmt):
    run = shutil.copytree(replay_run, tmp_path / "run")
    shutil.copy(trace_of(replay_run), run / "trace.jsonl")
    trace = run / "trace.jsonl"
    trace.write_bytes(trace.read_bytes()[:-7])
    source = trace if as_file else run
    err = refuses([str(source), "--format", fmt, "--out", str(tmp_path / "out" / "x")], tmp_path, capsys)
    assert str(trace) in err and "truncated" in err


def test_a_run_without_its_trace_is_refused(replay_run, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    manifest = json.loads((replay_run / "manifest.json").read_text())
    manifest["config"]["mobility"]["trace"] = str(tmp_path / "gone.jsonl")
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "no trace.jsonl" in refuses([str(run), "--out", str(tmp_path / "a.csv")], tmp_path, capsys)
    manifest["config"]["mobility"] = {"source": "city"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "recorded no traffic" in refuses([str(run), "--out", str(tmp_path / "a.csv")], tmp_path, capsys)
    assert "no such run directory" in refuses([str(tmp_path / "nothing")], tmp_path, capsys)


def test_a_trace_that_is_not_the_runs_is_refused(replay_run, tmp_path, capsys):
    run = shutil.copytree(replay_run, tmp_path / "run")
    other = returning_trace(tmp_path / "other.jsonl")
    meta = json.loads(other.read_text().splitlines()[0])
    meta["meta"]["rsus"][0]["radius"] = 99.0
    lines = other.read_text().splitlines(keepends=True)
    (run / "trace.jsonl").write_text(json.dumps(meta) + "\n" + "".join(lines[1:]))
    assert "not this run's trace" in refuses([str(run), "--out", str(tmp_path / "a.csv")], tmp_path, capsys)
    shutil.copy(other, run / "trace.jsonl")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["trace"] = {"sha256": "0" * 64, "lines": 15}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "changed since the run" in refuses([str(run), "--out", str(tmp_path / "a.csv")], tmp_path, capsys)


def test_an_unknown_format_is_an_argparse_choice_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", "availability", "runs/x", "--format", "pickle"])
    assert e.value.code == 2 and "invalid choice: 'pickle'" in capsys.readouterr().err


def test_the_documented_example_exports_the_lust_case_study(tmp_path, monkeypatch, capsys):
    page = (ROOT / "docs" / "availability.md").read_text()
    section = page[page.index("## Take your availability") :]
    line = next(x.strip() for x in section.splitlines() if x.strip().startswith("vmc export availability"))
    argv = line.split()[1:]
    out = tmp_path / argv[argv.index("--out") + 1]
    argv[argv.index("--out") + 1] = str(out)
    monkeypatch.chdir(ROOT)
    assert main(argv) == 0 and "3033 vehicles" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["meta"]["scenario"] == "lust-case-study-mnist" and doc["meta"]["seeds"] == {"sumo": 42}
    assert doc["meta"]["run"] is None and doc["meta"]["trace"]["complete"]
    visits = coverage_visits(read_trace(LUST_TRACE).events)
    assert len(doc["client_ids"]) == len({v.vehicle for v in visits})
    assert sum(len(t["active"]) for t in doc["client_behave_trace"].values()) == len(visits)


def test_the_flower_schedule_keeps_the_traces_order_at_one_instant(tmp_path):
    """Two leaves and a join in one second come in the trace's order (the order a run meets them),
    not by node id, so a replay removes and adds the clients in the run's order."""
    e = lambda t, kind, v: MobilityEvent(t, kind, v, "rsu0", 10.0, 0.0, 5.0)  # noqa: E731
    events = [e(0.0, "join", "a"), e(1.0, "join", "b"), e(2.0, "join", "c")]
    events += [e(9.0, "leave", "c"), e(9.0, "join", "d"), e(9.0, "leave", "a")]
    meta = {"source": "test", "clock": {"begin": 0.0, "step_length": 1.0}, "rsus": []}
    trace = write_trace(tmp_path / "t.jsonl", events, meta, end_time=20.0)
    doc = flower_schedule(load_availability(trace))
    at9 = [(r["kind"], r["vehicle"]) for r in doc["requests"] if r["time"] == 9.0]
    assert at9 == [("leave", "c"), ("join", "d"), ("leave", "a")]
