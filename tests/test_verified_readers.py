"""Readers of a completed run read the records it completed with: a cut or changed ``records.jsonl``
is refused in one line naming the file, by every command that goes through ``RunDir.records``."""

from __future__ import annotations

import pytest
from test_cosim import files_of, scenario, trace_file

from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.runs import CorruptFileError, RunDir, file_fingerprint


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
