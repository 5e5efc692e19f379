"""The co-simulation engine on recorded traces (no SUMO): every request reaches every method,
replays are identical, transfers fail when a vehicle leaves, and bad scenarios are refused."""

from __future__ import annotations

import itertools
import sys

import pytest
from conftest import small_scenario

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.compute.host import cpu_model
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.config import ConfigError, load_model
from vmc_sim.scenario.schema import Scenario, load_scenario

HOST_KEYS: set[str] = set()


def trace_file(tmp_path, n_initial=6, arrivals=4, departures=3):
    events = []
    for i in range(n_initial):
        events.append(MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0))
    t = 40.0
    for k in range(arrivals):
        events.append(MobilityEvent(t, "join", f"n{k}", "rsu0", 50.0, -30.0, 8.0))
        t += 7.0
        if k < departures:
            events.append(MobilityEvent(t, "leave", f"v{k}", "rsu0", 280.0, 0.0, 10.0))
            t += 5.0
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(tmp_path / "trace.jsonl", events, meta, end_time=t + 5.0)


def scenario(trace, **over):
    """``trace`` replayed with F-SOSA and Retrain (rho 0.5, two local epochs, diagonal Fisher)."""
    one_shot = {"rho": 0.5, "methods": ["fsosa", "retrain"], "train": {"epochs": 2, "lr": 0.05, "fisher": "diagonal"}}
    return small_scenario(trace, one_shot, **over)


def sim_records(run: RunDir, host=HOST_KEYS):
    """Every record without its host-measured columns (``host_*``, and ``host``)."""
    return [{k: v for k, v in r.items() if k not in host and not k.startswith("host_")} for r in run.records()]


def test_every_request_reaches_every_method_and_replay_is_identical(tmp_path):
    trace = trace_file(tmp_path)
    sc = scenario(trace)
    a = run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    b = run_scenario(sc, out=tmp_path / "b", progress=False, say=lambda s: None)
    ra, rb = sim_records(a), sim_records(b)
    assert ra == rb
    for method in ("fsosa", "retrain"):
        rows = [r for r in ra if r["method"] == method]
        assert [r["kind"] for r in rows][0] == "fit"
        assert len(rows) == 1 + 4 + 3  # fit, 4 arrivals, 3 departures
        for before, after in itertools.pairwise(rows):  # an untriggered request releases the same model
            if not after["triggered"]:
                assert after["accuracy"] == before["accuracy"]
    retrain = [r for r in ra if r["method"] == "retrain" and r["kind"] != "fit"]
    fsosa = [r for r in ra if r["method"] == "fsosa" and r["kind"] != "fit"]
    assert all(r["triggered"] for r in retrain)
    assert sum(r["total_bytes"] for r in fsosa) < sum(r["total_bytes"] for r in retrain)
    manifest = a.manifest()
    assert manifest["status"] == "complete" and manifest["seeds"]["run_seed"] == 3
    # the host's CPU model is named (wall-clock figures are read against it)
    assert manifest["host"]["cpu"] == cpu_model() and cpu_model().strip()
    # the channel the run used, every field resolved, so a later change of defaults cannot hide it
    assert manifest["channel"] == sc.channel_config().to_dict() and manifest["channel"]["transport"]


def test_calibrated_time_does_not_depend_on_the_method_order(tmp_path):
    """The calibrated time model: two method orders (and two runs) give identical records, every
    field except the host-measured ``host_*`` columns, in the same row order."""
    trace = trace_file(tmp_path)
    runs = []
    for k, methods in enumerate((["fsosa", "retrain"], ["retrain", "fsosa"], ["fsosa", "retrain"])):
        sc = scenario(trace, federated={"methods": methods}, compute={"time_model": "calibrated"})
        assert sc.compute.time_model == "calibrated" and Scenario().compute.time_model == "profile"
        runs.append(run_scenario(sc, out=tmp_path / f"o{k}", progress=False, say=lambda s: None))
    first, swapped, again = (sim_records(r) for r in runs)
    assert first == swapped == again
    keys = [(r["done_time"], r["method"]) for r in first]
    assert keys == sorted(keys)  # simulated-time order, one instant's rows by method name
    assert all(r["compute_sim_s"] > 0 for r in first if r["kind"] == "fit")
    assert any("host_compute_s" in r for r in list(runs[0].records()))
    cal = runs[0].manifest()["calibration"]
    assert cal["source"] in ("measured", "cached") and cal["train_s_per_sample_epoch"] > 0 and cal["repeats"] >= 3
    # the fit's simulated compute is the calibrated cost of its trainees' work, nothing more
    fit = next(r for r in first if r["method"] == "retrain" and r["kind"] == "fit")
    per_sample = 2 * cal["train_s_per_sample_epoch"] + cal["fisher_s_per_sample"]
    samples = fit["compute_sim_s"] / per_sample
    assert abs(samples - round(samples)) < 1e-6 * samples


def test_pinned_calibration_is_charged_exactly(tmp_path):
    trace = trace_file(tmp_path)
    costs = {"train_s_per_sample_epoch": 1e-3, "fisher_s_per_sample": 2e-3, "solve_s_per_unit": 0.5}
    sc = scenario(trace, federated={"methods": ["fsosa"]}, compute={"time_model": "calibrated", "calibration": costs})
    run = run_scenario(sc, out=tmp_path / "p", progress=False, say=lambda s: None)
    assert run.manifest()["calibration"]["source"] == "pinned"
    rows = list(run.records())
    assert all(r["solve_sim_s"] == 0.5 * (1 + r["solve"]["products"]) for r in rows if r.get("triggered"))
    samples = rows[0]["compute_sim_s"] / (2 * 1e-3 + 2e-3)  # 2 epochs + one Fisher pass per sample
    assert samples > 0 and samples == pytest.approx(round(samples), abs=1e-9)


def test_transfer_to_a_vehicle_that_left_fails_and_is_recorded(tmp_path):
    # slow device: training takes longer than the vehicles stay, so uploads fail
    trace = trace_file(tmp_path, n_initial=6, arrivals=4, departures=3)
    sc = scenario(
        trace, compute={"time_model": "device", "seconds_per_sample_epoch": 0.5}, federated={"methods": ["retrain"]}
    )
    run = run_scenario(sc, out=tmp_path / "r", progress=False, say=lambda s: None)
    rows = list(run.records())
    failed = [f for r in rows for f in r.get("failed", [])]
    # the last jobs outlast coordinator.drain_s after the end of traffic: what is then in flight fails
    assert failed and all(f["reason"] in ("left_coverage", "traffic_ended") for f in failed)
    assert run.manifest()["summary"]["drain"]["traffic_cut"]["after_s"] == sc.coordinator.drain_s
    # no released model holds a contribution that never arrived: each was taken out, or the model withdrawn
    for r in rows:
        assert not set(r["members"]) & set(r.get("not_arrived", []))
        assert "provisional" not in r and "kept_unarrived" not in r
    assert any(r.get("take_outs") or r["kind"] == "suspend" for r in rows if r.get("not_arrived"))
    # failed work is charged: the device time of jobs whose uploads failed, and the airtime up to the failures
    assert sum(r.get("wasted_compute_s", 0.0) for r in rows) > 0
    assert all(r["bytes_sent"] >= r["bytes_delivered"] for r in rows if "bytes_sent" in r)


def test_window_batches_requests(tmp_path):
    trace = trace_file(tmp_path)
    sc = scenario(
        trace, coordinator={"warmup": 5.0, "min_clients": 4, "window": 30.0}, federated={"methods": ["fsosa"]}
    )
    run = run_scenario(sc, out=tmp_path / "w", progress=False, say=lambda s: None)
    rows = [r for r in run.records() if r.get("kind") != "fit"]
    assert any(len(r["requests"]) > 1 for r in rows)
    assert sum(len(r["requests"]) for r in rows) == 7


def test_bad_scenarios_are_refused_with_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("federated:\n  train:\n    epochs: 0\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: federated.train.epochs"):
        load_scenario(bad)
    bad.write_text("mobility:\n  source: trace\n")
    with pytest.raises(ConfigError, match="mobility.trace"):
        load_scenario(bad)
    bad.write_text("channel:\n  bandwidth_hz: -1\n")
    with pytest.raises(ConfigError, match="channel.bandwidth_hz"):
        load_scenario(bad)
    bad.write_text("coordinator: [1, 2]\n")
    with pytest.raises(ConfigError, match="coordinator"):
        load_scenario(bad)
    bad.write_text("name: x\nunknown_section: 1\n")
    with pytest.raises(ConfigError, match="unknown_section"):
        load_scenario(bad)
    assert load_scenario(None).name == "default-city"


class DiesAt:
    """A mobility source that fails like a dying SUMO once it reaches ``t``."""

    def __init__(self, inner, t):
        self.inner, self.t = inner, t

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def advance(self, until):
        if until >= self.t:
            from mobility.errors import SumoError

            raise SumoError(f"SUMO died at t={until} (injected)")
        return self.inner.advance(until)


def test_failure_keeps_records_and_resume_matches_uninterrupted(tmp_path, monkeypatch):
    import vmc_sim.cosim as cosim

    trace = trace_file(tmp_path)
    sc = scenario(trace)
    full = run_scenario(sc, out=tmp_path / "full", progress=False, say=lambda s: None)
    original = cosim.open_source
    monkeypatch.setattr(cosim, "open_source", lambda *a, **k: (lambda s, r: (DiesAt(s, 60.0), r))(*original(*a, **k)))
    with pytest.raises(Exception, match="SUMO died"):
        run_scenario(sc, out=tmp_path / "broken", progress=False, say=lambda s: None)
    broken_dir = next((tmp_path / "broken").iterdir())
    broken = RunDir(broken_dir)
    kept = list(broken.records())
    assert kept and broken.manifest()["status"] == "failed"
    assert "--resume" in broken.manifest()["hint"]
    before = broken.manifest()
    monkeypatch.setattr(cosim, "open_source", original)
    run_scenario(sc, progress=False, say=lambda s: None, run_dir=broken_dir, resume=True)
    assert sim_records(broken) == sim_records(full)
    assert list(broken.records())[: len(kept)] == kept
    # the manifest keeps when and with what the run began, and says what the resume continued
    after = broken.manifest()
    assert after["status"] == "complete"
    assert {k: after[k] for k in ("created", "versions", "host")} == {
        k: before[k] for k in ("created", "versions", "host")
    }
    (resume,) = after["resumes"]
    assert sum(resume["after"].values()) == len(kept) and resume["ended"]["status"] == "failed"
    assert "SUMO died" in resume["ended"]["error"] and resume["at"] >= before["created"]


def test_a_run_recorded_before_fisher_labels_existed_resumes_with_drawn_labels(tmp_path, monkeypatch):
    """A manifest written before ``train.fisher_labels`` existed recorded a run that drew its labels:
    resuming it must not switch to today's default (expected labels) half way through."""
    import json

    import vmc_sim.cosim as cosim
    from vmc_sim.cosim import manifest_scenario

    trace = trace_file(tmp_path)
    sc = scenario(
        trace, federated={"train": {"epochs": 2, "lr": 0.05, "fisher": "diagonal", "fisher_labels": "sampled"}}
    )
    full = run_scenario(sc, out=tmp_path / "full", progress=False, say=lambda s: None)
    original = cosim.open_source
    monkeypatch.setattr(cosim, "open_source", lambda *a, **k: (lambda s, r: (DiesAt(s, 60.0), r))(*original(*a, **k)))
    with pytest.raises(Exception, match="SUMO died"):
        run_scenario(sc, out=tmp_path / "broken", progress=False, say=lambda s: None)
    monkeypatch.setattr(cosim, "open_source", original)
    broken_dir = next((tmp_path / "broken").iterdir())
    manifest = json.loads((broken_dir / "manifest.json").read_text())
    del manifest["config"]["federated"]["train"][
        "fisher_labels"
    ]  # as a manifest written before the option existed has it
    (broken_dir / "manifest.json").write_text(json.dumps(manifest))
    recorded = manifest_scenario(broken_dir / "manifest.json")
    assert recorded.federated.train.fisher_labels.value == "sampled"
    run_scenario(recorded, progress=False, say=lambda s: None, run_dir=broken_dir, resume=True)
    assert sim_records(RunDir(broken_dir)) == sim_records(full)


def test_shipped_scenarios_validate():
    from pathlib import Path

    files = sorted(Path(__file__).resolve().parent.parent.joinpath("scenarios").glob("*.yaml"))
    assert files
    for f in files:
        load_scenario(f)


def emptying_trace(tmp_path):
    """Five vehicles, all leave (the cell empties), then five new ones arrive and one leaves."""
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(5)]
    t = 30.0
    for i in range(5):
        events.append(MobilityEvent(t, "leave", f"v{i}", "rsu0", 280.0, 0.0, 10.0))
        t += 6.0
    for k in range(5):
        events.append(MobilityEvent(t, "join", f"n{k}", "rsu0", 50.0, -30.0, 8.0))
        t += 6.0
    events.append(MobilityEvent(t, "leave", "n0", "rsu0", 280.0, 0.0, 10.0))
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(tmp_path / "empty.jsonl", events, meta, end_time=t + 5.0)


def test_a_cell_that_empties_suspends_every_model_and_the_run_goes_on(tmp_path):
    trace = emptying_trace(tmp_path)
    methods = ["fsosa", "retrain", "fedfisher", "fedavg", "finetune", "retrain_fedavg"]
    sc = scenario(
        trace,
        duration=200.0,
        federated={
            "methods": methods,
            "strategies": ["fedprox", "pdf"],
            "rounds": {"rounds": 6, "min_available": 2, "clients_per_round": 3},
        },
        coordinator={"warmup": 5.0, "min_clients": 3},
    )
    run = run_scenario(sc, out=tmp_path / "e", progress=False, say=lambda s: None)
    assert run.manifest()["status"] == "complete"
    rows = list(run.records())
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        kinds = [r.get("kind") for r in mine]
        assert kinds[0] == "fit" and len(mine) == 1 + 11, (m, kinds)  # every request recorded
        s = kinds.index("suspend")
        suspend = mine[s]
        assert suspend["removed"] == ["v2"] and suspend["population"] == 2 and suspend["accuracy"] is None
        # the model's clients go with it (fine-tuning cannot remove: it still held v0 and v1)
        assert sorted(suspend["withdrawn"]) == (["v0", "v1"] if m == "finetune" else []) + ["v2", "v3", "v4"], m
        assert "withdrawn" in suspend["note"]
        refit = next(r for r in mine[s:] if r.get("kind") == "fit")
        assert refit["refit"] and refit["model_epoch"] == 1 and sorted(refit["added"]) == ["n0", "n1", "n2"]
        assert all(r["kind"] == "suspended" for r in mine[s + 1 : mine.index(refit)])
        last = mine[-1]  # n0 leaves the refitted model (fine-tuning records that it cannot remove)
        assert last["model_epoch"] == 1
        assert (
            last.get("kind") == "remove" and last["accuracy"] is not None
            if m != "finetune"
            else "unsupported" in last["note"]
        )
    for m in ("fedprox", "pdf"):
        mine = [r for r in rows if r["method"] == m]
        assert [r["kind"] for r in mine].count("suspend") == 1, m
        assert any(r["kind"] == "round" and r["model_epoch"] == 1 for r in mine), m


class Recording:
    """A 'live' source for tests: replays a trace and records it to ``path`` as SUMO would."""

    def __init__(self, trace, path, overwrite):
        from mobility.source import TraceSource
        from mobility.trace import TraceWriter

        self.inner = TraceSource(trace)
        self.writer = TraceWriter(path, self.inner.metadata, overwrite=overwrite) if path else None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def advance(self, until):
        events = self.inner.advance(until)
        if self.writer is not None:
            self.writer.write_events(events)
            self.writer.flush()
        return events

    def close(self):
        if self.writer is not None and not self.writer.closed:
            self.writer.close("closed", time=self.inner.time)
        self.inner.close()


def files_of(path):
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None) for p in sorted(path.rglob("*"))}


@pytest.fixture
def broken_live_run(tmp_path, monkeypatch):
    """A 'live' run (it records its own trace) that died at t = 60, and the full run beside it."""
    import vmc_sim.cosim as cosim
    from mobility.rsu import Rsu
    from mobility.source import TraceSource

    trace = trace_file(tmp_path)
    rsus = [Rsu.from_dict(r) for r in TraceSource(trace).metadata["rsus"]]
    sc = scenario(trace, mobility={"source": "city"})
    dies = {"at": 60.0}

    def fake_open(scenario, trace_path, overwrite=False, outputs_dir=None):
        src = Recording(trace, trace_path, overwrite)
        return (DiesAt(src, dies["at"]) if dies["at"] else src), rsus

    monkeypatch.setattr(cosim, "open_source", fake_open)
    with pytest.raises(Exception, match="SUMO died"):
        run_scenario(sc, out=tmp_path / "broken", progress=False, say=lambda s: None)
    dies["at"] = None
    full = run_scenario(sc, out=tmp_path / "full", progress=False, say=lambda s: None)
    return sc, next((tmp_path / "broken").iterdir()), full


def test_resume_swaps_in_the_new_trace_only_when_past_the_old_end(broken_live_run):
    sc, broken_dir, full = broken_live_run
    old_trace = (broken_dir / "trace.jsonl").read_text()
    assert len(old_trace.splitlines()) < len((full.path / "trace.jsonl").read_text().splitlines())
    run_scenario(sc, progress=False, say=lambda s: None, run_dir=broken_dir, resume=True)
    assert (broken_dir / "trace.jsonl").read_bytes() == (full.path / "trace.jsonl").read_bytes()
    assert not (broken_dir / "trace.jsonl.resume").exists()
    assert sim_records(RunDir(broken_dir)) == sim_records(full)
    assert RunDir(broken_dir).manifest()["status"] == "complete"


@pytest.mark.parametrize("damage", ["diverged record", "truncated contribution"])
def test_failed_resume_leaves_every_file_as_it_was(broken_live_run, damage):
    import json

    from vmc_sim.cosim import ResumeError

    sc, broken_dir, _ = broken_live_run
    if damage == "diverged record":
        path = broken_dir / "records.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        last = json.loads(lines[-1])
        last["triggered"] = not last["triggered"]
        lines[-1] = json.dumps(last) + "\n"
        path.write_text("".join(lines))
        expected = "diverged"
    else:
        victim = sorted((broken_dir / "contributions").glob("*.safetensors"))[0]
        victim.write_bytes(victim.read_bytes()[:100])
        expected = rf"{victim}: the stored contribution of client '.*' does not match the digest.*unchanged"
    before = files_of(broken_dir)
    with pytest.raises(ResumeError, match=expected):
        run_scenario(sc, progress=False, say=lambda s: None, run_dir=broken_dir, resume=True)
    assert files_of(broken_dir) == before


def test_a_vehicle_with_a_nan_upload_is_quarantined_and_the_run_completes(tmp_path, monkeypatch):
    from fl_core.clients import ClientPool
    from fl_core.contribution import Contribution

    train = ClientPool.train

    def poisoned(self, client):
        c = train(self, client)
        if client == "n1":
            c = Contribution(client, c.weights * float("nan"), c.fisher, c.num_samples, c.compute_s)
        return c

    monkeypatch.setattr(ClientPool, "train", poisoned)
    run = run_scenario(scenario(trace_file(tmp_path)), out=tmp_path / "q", progress=False, say=lambda s: None)
    rows = list(run.records())
    assert run.manifest()["status"] == "complete"
    hits = [r for r in rows if r["method"] == "retrain" and r.get("quarantined")]
    assert hits and all(set(r["quarantined"]) == {"n1"} and "NaN" in r["quarantined"]["n1"] for r in hits)
    assert len([r for r in rows if r["method"] == "retrain"]) == 8  # every request handled


def test_a_torn_last_record_is_dropped_and_resume_goes_on(broken_live_run, capsys):
    sc, broken_dir, full = broken_live_run
    with open(broken_dir / "records.jsonl", "a") as f:
        f.write('{"method": "fsosa", "ind')
    say = []
    run_scenario(sc, progress=False, say=say.append, run_dir=broken_dir, resume=True)
    assert any("incomplete" in s for s in say) and "dropped an incomplete last line" in capsys.readouterr().out
    assert sim_records(RunDir(broken_dir)) == sim_records(full)
    assert (broken_dir / "records.jsonl").read_text().endswith("\n")


class InterruptedAt(DiesAt):
    def advance(self, until):
        if until >= self.t:
            raise KeyboardInterrupt
        return self.inner.advance(until)


def test_ctrl_c_records_interrupted_and_the_resume_hint(tmp_path, monkeypatch):
    import vmc_sim.cosim as cosim

    original = cosim.open_source
    monkeypatch.setattr(
        cosim, "open_source", lambda *a, **k: (lambda s, r: (InterruptedAt(s, 60.0), r))(*original(*a, **k))
    )
    with pytest.raises(KeyboardInterrupt, match="continue with: vmc run --resume"):
        run_scenario(scenario(trace_file(tmp_path)), out=tmp_path / "i", progress=False, say=lambda s: None)
    manifest = RunDir(next((tmp_path / "i").iterdir())).manifest()
    assert manifest["status"] == "interrupted" and "--resume" in manifest["hint"]


def test_cli_refuses_missing_and_damaged_inputs_without_creating_anything(tmp_path, capsys):
    from vmc_sim.cli import main

    assert main(["plot", str(tmp_path / "typo_dir")]) == 2
    assert not (tmp_path / "typo_dir").exists() and "typo_dir: no such run directory" in capsys.readouterr().err
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"config": {"name": "x", "se')
    assert main(["run", "--resume", str(run)]) == 2
    assert f"{run / 'manifest.json'}: not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        (["-10"], r"requests\[0\] \('-10'\): client 10 is not in the client set"),
        (["-2", "+3"], r"requests\[1\] \('\+3'\): client 3 is already in the client set"),
        (["+9", "-3,-3"], r"requests\[1\] \('-3,-3'\): client 3 is listed twice"),
    ],
)
def test_oneshot_requests_are_checked_against_the_client_set_before_anything_runs(tmp_path, requests, message):
    import yaml

    from vmc_sim.scenario.config import OneShotConfig

    path = tmp_path / "o.yaml"
    path.write_text(yaml.safe_dump({"initial_clients": 8, "federated": {"num_clients": 20}, "requests": requests}))
    with pytest.raises(ConfigError, match=rf"o.yaml: .*{message}"):
        load_model(OneShotConfig, path)


def test_a_trace_leave_without_a_join_is_refused_naming_the_line(tmp_path):
    from mobility.errors import TraceError
    from mobility.source import TraceSource

    events = [
        MobilityEvent(1.0, "join", "v0", "rsu0", 0.0, 0.0, 1.0),
        MobilityEvent(2.0, "leave", "ghost", "rsu0", 0.0, 0.0, 1.0),
    ]
    path = write_trace(tmp_path / "t.jsonl", events, {"clock": {"begin": 0.0, "step_length": 1.0}}, end_time=3.0)
    with pytest.raises(TraceError, match=r"t.jsonl:3: leave of vehicle 'ghost', which has not joined"):
        TraceSource(path)


def test_a_run_whose_coverage_never_fills_says_no_model_was_fitted(tmp_path):
    from vmc_sim.cosim import summarize

    sc = scenario(
        trace_file(tmp_path), coordinator={"warmup": 5.0, "min_clients": 50}, federated={"strategies": ["fedavg"]}
    )
    run = run_scenario(sc, out=tmp_path / "n", progress=False, say=lambda s: None)
    assert list(run.records()) == []
    text = summarize(run)
    for m in ("fsosa", "retrain"):
        assert f"note: {m}: no record: no model was ever fitted" in text and "min_clients = 50" in text
    assert "note: fedavg: no record: no round ran (coverage never held coordinator.min_clients = 50" in text


def test_a_request_cap_says_how_many_coverage_events_it_left_unsent(tmp_path):
    from vmc_sim.cosim import summarize

    sc = scenario(trace_file(tmp_path), coordinator={"warmup": 5.0, "min_clients": 4, "max_requests": 4})
    run = run_scenario(sc, out=tmp_path / "c", progress=False, say=lambda s: None)
    # the fit and 3 edits are sent; the trace's other 4 arrivals / departures are not
    assert {r["index"] for r in run.records()} == {0, 1, 2, 3}
    assert run.manifest()["summary"]["max_requests"] == {"cap": 4, "reached": True, "events_not_dispatched": 4}
    assert "note: coordinator.max_requests = 4 was reached: 4 later coverage event(s)" in summarize(run)


def test_a_trace_that_ends_before_the_scenario_says_so(tmp_path):
    from vmc_sim.cosim import summarize

    trace = trace_file(tmp_path)  # its events end at 88 s, the scenario runs 120 s
    run = run_scenario(scenario(trace), out=tmp_path / "a", progress=False, say=lambda s: None)
    ended = run.manifest()["summary"]["traffic_ended_early"]
    assert ended["at"] == 88.0 and ended["scenario_end"] == 120.0 and ended["trace_status"] == "finished"
    # a trace that finished normally reads as the live run did (SUMO out of vehicles)
    assert (
        "note: traffic ended at 88.0 s, 32.0 s before the scenario's end (120.0 s): no arrival or departure after it\n"
    ) in summarize(run) + "\n"
    full = run_scenario(scenario(trace, duration=80.0), out=tmp_path / "c", progress=False, say=lambda s: None)
    assert "traffic_ended_early" not in full.manifest()["summary"]
    lines = trace.read_text().splitlines()  # a recorder that died: no end record
    assert '"type": "end"' in lines[-1].replace('"type":"end"', '"type": "end"')
    trace.write_text("\n".join(lines[:-1]) + "\n")
    run = run_scenario(scenario(trace), out=tmp_path / "b", progress=False, say=lambda s: None)
    assert "the replayed trace has no end record (its recorder stopped)" in summarize(run)


def test_teleports_the_recorder_counted_reach_the_summary(tmp_path):
    import json

    from vmc_sim.cosim import summarize

    trace = trace_file(tmp_path)
    lines = trace.read_text().splitlines()
    end = json.loads(lines[-1])
    assert end["type"] == "end"
    trace.write_text("\n".join([*lines[:-1], json.dumps({**end, "teleports": 3})]) + "\n")
    run = run_scenario(scenario(trace), out=tmp_path / "t", progress=False, say=lambda s: None)
    assert run.manifest()["summary"]["teleports"] == 3
    assert "note: SUMO teleported 3 vehicle(s) stuck longer than sumo.time_to_teleport" in summarize(run)


def test_the_summary_says_how_many_samples_the_validation_set_really_holds(tmp_path):
    from vmc_sim.cosim import summarize

    sc = scenario(trace_file(tmp_path))  # digits: 10 % of its training set is fewer than the 500 asked
    run = run_scenario(sc, out=tmp_path / "v", progress=False, say=lambda s: None)
    held = run.manifest()["summary"]["validation_held"]
    assert 0 < held < 500
    assert (
        f"note: the merges selected their damping on {held} held-out samples (federated.validation_samples asks 500"
        in summarize(run)
    )


def test_a_dirichlet_split_that_needed_its_repair_is_in_the_summary(tmp_path):
    from fl_core.partition import PartitionWarning
    from vmc_sim.cosim import summarize

    # alpha 0.001 over 12 clients and 10 classes: every draw gives each class to about one client,
    # so some clients get nothing and the split's repair step moves samples to them
    trace = trace_file(tmp_path)
    sc = scenario(trace, federated={"alpha": 0.001})
    with pytest.warns(PartitionWarning):
        run = run_scenario(sc, out=tmp_path / "p", progress=False, say=lambda s: None)
    repaired = run.manifest()["summary"]["partition_repaired"]
    assert repaired["attempts"] == 100 and repaired["samples_moved"] > 0
    assert f"{repaired['samples_moved']} sample(s) were moved to empty clients" in summarize(run)
    plain = run_scenario(scenario(trace), out=tmp_path / "q", progress=False, say=lambda s: None)
    assert "partition_repaired" not in plain.manifest()["summary"]
    assert "moved to empty clients" not in summarize(plain)


def test_the_summary_lists_the_methods_in_the_scenario_order(tmp_path):
    from vmc_sim.cosim import summarize

    rows, trace = {}, trace_file(tmp_path)
    for order in (["fsosa", "retrain"], ["retrain", "fsosa"]):
        sc = scenario(trace, federated={"methods": order})
        text = summarize(run_scenario(sc, out=tmp_path / "-".join(order), progress=False, say=lambda s: None))
        table = [ln.split()[0] for ln in text.splitlines() if ln.split() and ln.split()[0] in order]
        assert table[:2] == order
        rows[order[0]] = sorted(ln for ln in text.splitlines() if ln.split() and ln.split()[0] in order)
    assert rows["fsosa"] == rows["retrain"]  # the same figures, only listed in the other order


def test_co_simulated_merges_select_their_damping_on_the_held_out_set(tmp_path):
    sc = scenario(trace_file(tmp_path), federated={"methods": ["fsosa"]})
    run = run_scenario(sc, out=tmp_path / "v", progress=False, say=lambda s: None)
    fits = [r for r in run.records() if r.get("solve")]
    assert fits and all(r["solve"]["validation"] is not None and len(r["solve"]["candidates"]) == 5 for r in fits)


def test_vmc_calibrate_prints_costs_that_pin_a_scenario(tmp_path, monkeypatch, capsys):
    """``vmc calibrate`` measures the scenario's costs, keeps them in the machine's cache (where the
    next unpinned run of the setup finds them, load average included) and prints a
    ``compute.calibration`` block that, pasted into the scenario, charges exactly those costs."""
    import yaml

    from vmc_sim.cli import main
    from vmc_sim.compute import calibration

    monkeypatch.setenv("VMC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "_CACHE", {})
    monkeypatch.setattr(calibration, "_load_average", lambda: 0.2)  # an idle host
    monkeypatch.setattr(calibration, "_others_cores", lambda a, b: 0.0)
    trace = trace_file(tmp_path)
    sc = scenario(trace, federated={"methods": ["fsosa"]}, compute={"time_model": "calibrated"})
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    assert main(["calibrate", str(path), "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out
    costs = yaml.safe_load(out)["compute"]["calibration"]
    assert set(costs) == {"train_s_per_sample_epoch", "fisher_s_per_sample", "solve_s_per_unit"}
    assert costs["train_s_per_sample_epoch"] > 0 and costs["fisher_s_per_sample"] > 0

    calibration._CACHE.clear()  # a new process: the costs come back from the cache file
    run = run_scenario(sc, out=tmp_path / "cached", progress=False, say=lambda s: None)
    cal = run.manifest()["calibration"]
    assert cal["source"] == "cached" and cal["load"] == [0.2, 0.2]
    assert {k: cal[k] for k in costs} == costs

    pinned = scenario(
        trace, federated={"methods": ["fsosa"]}, compute={"time_model": "calibrated", "calibration": costs}
    )
    run_p = run_scenario(pinned, out=tmp_path / "pinned", progress=False, say=lambda s: None)
    assert run_p.manifest()["calibration"]["source"] == "pinned"
    assert sim_records(run_p) == sim_records(run)

    with pytest.raises(SystemExit):
        main(["calibrate", str(path), "--repeats", "0"])
    assert "whole number >= 1" in capsys.readouterr().err


def test_vmc_calibrate_on_a_busy_host_warns_and_keeps_the_cached_costs(tmp_path, monkeypatch, capsys):
    import yaml

    from vmc_sim.cli import main
    from vmc_sim.compute import calibration

    monkeypatch.setenv("VMC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "_CACHE", {})
    trace = trace_file(tmp_path)
    sc = scenario(trace, federated={"methods": ["fsosa"]}, compute={"time_model": "calibrated"})
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    monkeypatch.setattr(calibration, "_load_average", lambda: 0.1)
    monkeypatch.setattr(calibration, "_others_cores", lambda a, b: 0.0)
    assert main(["calibrate", str(path), "--repeats", "1"]) == 0
    before = calibration.cache_file().read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(calibration, "_load_average", lambda: 3.0)  # two other jobs on the machine
    monkeypatch.setattr(calibration, "_others_cores", lambda a, b: 2.0)
    assert main(["calibrate", str(path), "--repeats", "1"]) == 0
    captured = capsys.readouterr()
    assert "NOT saved" in captured.out and "other work competed" in captured.err
    assert calibration.cache_file().read_bytes() == before
    assert main(["calibrate", str(path), "--repeats", "1", "--force"]) == 0
    assert "saved to the machine's cache anyway" in capsys.readouterr().out
    assert calibration.cache_file().read_bytes() != before
    calibration._CACHE.clear()
    with pytest.warns(UserWarning, match="other work competed"):
        run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)


def test_a_calibration_measured_on_a_busy_host_is_flagged():
    from vmc_sim.compute.calibration import Calibration, busy_host

    assert busy_host(Calibration(1e-4, 1e-3, 1e-3, load=(0.3, 1.2)), threads=1) is None
    busy_before = busy_host(Calibration(1e-4, 1e-3, 1e-3, load=(1.4, 1.4)), threads=1)
    busy_after = busy_host(Calibration(1e-4, 1e-3, 1e-3, load=(0.2, 3.1)), threads=1)
    assert "1.40 before" in busy_before and "3.10 after" in busy_after and "too high" in busy_after
    assert busy_host(Calibration(1e-4, 1e-3, 1e-3), threads=1) is None
    # measured: the cores other processes used while it ran decide, not the lagging load average
    assert busy_host(Calibration(1e-4, 1e-3, 1e-3, load=(1.4, 1.4), others=0.05), threads=1) is None
    flagged = busy_host(Calibration(1e-4, 1e-3, 1e-3, load=(0.1, 0.9), others=1.2), threads=1)
    assert "1.20 core(s) busy" in flagged and "too high" in flagged


def test_other_processes_cpu_is_measured_without_the_calibrating_process():
    from vmc_sim.compute.calibration import _cpu_snapshot, _others_cores

    # host busy 30 s, of which this process 10 s, over 10 s of wall clock: the others kept 2 cores busy
    assert _others_cores((100.0, 5.0, 50.0), (130.0, 15.0, 60.0)) == 2.0
    assert _others_cores((100.0, 5.0, 50.0), (110.0, 15.0, 60.0)) == 0.0  # only this process worked
    assert _others_cores(None, (1.0, 1.0, 1.0)) is None and _others_cores((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)) is None
    snap = _cpu_snapshot()
    if sys.platform.startswith("linux"):
        assert snap is not None and snap[0] > 0 and snap[1] >= 0


def test_calibrating_a_kfac_setup_times_short_solves(monkeypatch):
    """The solve cost is a cost per operator product: ``measure`` times solves cut at
    ``CALIBRATION_SOLVE_ITER`` products, not CG runs to the tolerance (about 1,000 products and
    half an hour for a K-FAC CNN), and still reports a positive cost per product."""
    import fl_core.projection as projection_module
    from fl_core.experiment import OneShotSetup
    from fl_core.projection import ProjectionConfig
    from fl_core.training import TrainConfig
    from vmc_sim.compute import calibration

    seen = []
    real = projection_module.project

    def spy(stats, config, *args, **kwargs):
        seen.append(config.max_iter)
        return real(stats, config, *args, **kwargs)

    monkeypatch.setattr(projection_module, "project", spy)
    setup = OneShotSetup(
        "digits", num_clients=10, model="mlp", seed=0, train=TrainConfig(epochs=1, lr=0.05, fisher="kfac")
    )
    cal = calibration.measure(setup, ProjectionConfig(method="cg_f", max_iter=1000, damping=1e-8), repeats=1)
    assert seen and all(m == calibration.CALIBRATION_SOLVE_ITER for m in seen)
    assert cal.solve_s_per_unit > 0 and cal.fisher_s_per_sample > 0


def test_calibrating_a_low_rank_kfac_setup_times_solves_on_the_uploads(monkeypatch, tmp_path):
    """With ``train.fisher_rank`` the coordinator merges low-rank uploads (whose products go
    through that form); the calibration times its solves on those, not on the whole factors,
    and its cache key tells such a setup from one measured before that was so."""
    import fl_core.projection as projection_module
    from fl_core.experiment import OneShotSetup
    from fl_core.projection import ProjectionConfig
    from fl_core.training import TrainConfig
    from vmc_sim.compute import calibration

    uploads = []
    real = projection_module.project

    def spy(stats, config, *args, **kwargs):
        uploads.append([rep._upload is not None for rep in stats.fisher_sum.members.values()])
        return real(stats, config, *args, **kwargs)

    monkeypatch.setattr(projection_module, "project", spy)
    train = TrainConfig(epochs=1, lr=0.05, fisher="kfac", fisher_rank=4)
    setup = OneShotSetup("digits", num_clients=10, model="mlp", seed=0, train=train)
    calibration.measure(setup, ProjectionConfig(method="cg_f", max_iter=1000, damping=1e-2), repeats=1)
    assert uploads and all(all(u) for u in uploads)
    (tmp_path / "ranked.yaml").write_text("federated: {train: {fisher: kfac, fisher_rank: 4}}\n")
    (tmp_path / "whole.yaml").write_text("federated: {train: {fisher: kfac}}\n")
    ranked, whole = (load_scenario(tmp_path / f"{n}.yaml").federated for n in ("ranked", "whole"))
    assert "low_rank_uploads" in calibration.calibration_key(ranked)
    assert "low_rank_uploads" not in calibration.calibration_key(whole)


def test_a_cg_setups_calibration_key_carries_the_solver_version(tmp_path, monkeypatch):
    """A solver change that moves the host time per product re-measures cached K-FAC costs
    (``fl_core.projection.SOLVER_VERSION``); a diagonal setup, merged in closed form, keeps its."""
    import fl_core.projection as projection_module
    from vmc_sim.compute import calibration

    (tmp_path / "kfac.yaml").write_text("federated: {train: {fisher: kfac}}\n")
    (tmp_path / "diag.yaml").write_text("federated: {train: {fisher: diagonal}}\n")
    kfac, diag = (load_scenario(tmp_path / f"{n}.yaml").federated for n in ("kfac", "diag"))
    keys = {n: calibration.calibration_key(f) for n, f in (("kfac", kfac), ("diag", diag))}
    monkeypatch.setattr(projection_module, "SOLVER_VERSION", projection_module.SOLVER_VERSION + 1)
    assert calibration.calibration_key(kfac) != keys["kfac"] and '"solver_version"' in keys["kfac"]
    assert calibration.calibration_key(diag) == keys["diag"] and "solver_version" not in keys["diag"]


def test_channel_shadowing_runs_and_does_not_depend_on_the_method_order(tmp_path):
    """``channel.shadowing_sigma_db > 0`` draws from the run's channel stream (the co-simulation
    passed none, so any such scenario stopped with an internal error); each method's world draws
    the same sequence, so the method order changes no record, and the draws change the transfers."""
    trace = trace_file(tmp_path)
    runs = [
        run_scenario(
            scenario(trace, federated={"methods": methods}, channel={"shadowing_sigma_db": 8.0}),
            out=tmp_path / f"o{k}",
            progress=False,
            say=lambda s: None,
        )
        for k, methods in enumerate((["fsosa", "retrain"], ["retrain", "fsosa"]))
    ]
    first, swapped = (sim_records(r) for r in runs)
    assert first == swapped
    plain = sim_records(run_scenario(scenario(trace), out=tmp_path / "plain", progress=False, say=lambda s: None))
    assert [r["latency_s"] for r in first] != [r["latency_s"] for r in plain]


def test_the_machine_calibration_cache_is_keyed_by_the_cpu_model(monkeypatch):
    """A calibration measured on one CPU is not reused on another with the same node name."""
    import vmc_sim.compute.calibration as calibration
    import vmc_sim.compute.host as host

    sc = load_scenario(None)
    here = calibration._cache_key(sc.federated)
    monkeypatch.setattr(host, "cpu_model", lambda: "Another CPU")
    assert calibration._cache_key(sc.federated) != here
