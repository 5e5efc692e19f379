"""Readers of a completed run read the records it completed with: a cut or changed ``records.jsonl``
is refused in one line naming the file, by every command that goes through ``RunDir.records``."""

from __future__ import annotations

import pytest
from test_cosim import files_of, scenario, trace_file

from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import CorruptFileError, RunDir, file_fingerprint


@pytest.fixture
def done(tmp_path):
    """A completed run on a recorded trace."""
    run = run_scenario(scenario(trace_file(tmp_path)), out=tmp_path / "runs", progress=False, say=lambda s: None)
    return run.path


def test_a_completed_run_records_its_file_fingerprint(done):
    manifest = RunDir(done, create=False).manifest()
    assert manifest["status"] == "complete"
    assert manifest["records_file"] == file_fingerprint(done / "records.jsonl")
    assert manifest["records_file"]["lines"] == manifest["summary"]["records"]


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_a_cut_or_changed_records_file_is_refused_by_its_readers(done, damage, capsys, tmp_path):
    path = done / "records.jsonl"
    data = path.read_bytes()
    if damage == "cut":  # the last whole record gone: still valid JSON lines, one fewer
        path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])
    else:  # one byte of a record changed, the line still valid JSON
        i = data.index(b'"method"') + len(b'"method"')
        i = data.index(b'"', i + 1) + 1  # the method name's first letter
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1 :])
    before = files_of(done)
    with pytest.raises(CorruptFileError, match="not the file this run completed with"):
        list(RunDir(done, create=False).records())
    assert main(["plot", str(done), "--out", str(tmp_path / "fig.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "cut or changed since" in err
    assert not (tmp_path / "fig.png").exists() and files_of(done) == before


def test_a_changed_model_file_is_refused_by_audit(done, capsys):
    manifest = RunDir(done, create=False).manifest()
    assert manifest["models_file"] == file_fingerprint(done / "models.safetensors")
    path = done / "models.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # one bit of a weight: still a loadable safetensors file
    path.write_bytes(bytes(data))
    before = files_of(done)
    assert main(["audit", str(done)]) != 0
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "cut or changed since" in err
    assert files_of(done) == before


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A completed live run on the embedded city: it records its own trace.jsonl."""
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario, load_scenario

    data = load_scenario(None).model_dump(mode="json")
    data["duration"] = 150.0
    data["coordinator"]["max_requests"] = 4
    data["federated"].update(dataset="digits", model="mlp", num_clients=8)
    data["federated"]["train"]["epochs"] = 1
    tmp = tmp_path_factory.mktemp("live")
    run = run_scenario(load_model(Scenario, None, data), out=tmp, progress=False, say=lambda s: None)
    return run.path


def test_a_changed_trace_is_refused_by_replay_and_export(live, tmp_path, capsys):
    from vmc_sim.cosim import replay_scenario

    manifest = RunDir(live, create=False).manifest()
    trace = live / "trace.jsonl"
    assert manifest["trace_file"] == file_fingerprint(trace)
    replay_scenario(trace)  # the file it completed with: accepted
    trace.write_bytes(trace.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n")  # the end record cut off
    with pytest.raises(CorruptFileError, match="cut or changed since"):
        replay_scenario(trace)
    out = tmp_path / "a.csv"
    assert main(["export", "availability", str(live), "--format", "csv", "--out", str(out)]) != 0
    assert str(trace) in capsys.readouterr().err and not out.exists()
