"""tools/remerge.py rebuilds a recorded run's member sets: with the stored uploads it gives the
accuracy the run recorded at every request, and a recomputed Fisher merges the same members."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import load_script
from test_cosim import scenario, trace_file

from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import RunDir

remerge = load_script("tools/remerge.py")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("remerge")
    sc = scenario(
        trace_file(tmp), federated={"train": {"epochs": 2, "lr": 0.05, "fisher": "diagonal", "upload_dtype": "float16"}}
    )
    return run_scenario(sc, out=tmp / "runs", progress=False, say=lambda s: None).path


def test_stored_uploads_reproduce_every_recorded_accuracy(run_dir, tmp_path):
    records = [r for r in RunDir(run_dir).records() if r["method"] == "fsosa"]
    indices = [int(r["index"]) for r in records]
    rows = remerge.remerge(run_dir, "fsosa", indices, "stored", None, say=lambda s: None)
    chosen = {r["request"]: r["test_accuracy"] for r in rows if r["selected"]}
    for r in records:
        assert abs(chosen[int(r["index"])] - r["accuracy"]) <= remerge.REPRODUCE_TOL
    assert remerge.main([str(run_dir), "--requests", "0", str(indices[-1]), "--out", str(tmp_path)]) == 0
    assert "| 0 |" in (tmp_path / "remerge.md").read_text() and (tmp_path / "remerge.csv").is_file()
    assert remerge.main([str(run_dir), "--requests", "0", "--dampings", "mean", "0", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "remerge.md").read_text()
    assert "--dampings mean 0`" in text and "| 0 | " in text and text.count("| diagonal | ") == 2


def test_a_member_set_that_does_not_reproduce_is_refused(run_dir, monkeypatch):
    real = remerge.member_sets

    def off_by_one(records, method):
        sets = real(records, method)
        last = max(sets)
        sets[last] = set(sorted(sets[last])[1:])  # one member dropped: not the run's subset
        return sets

    monkeypatch.setattr(remerge, "member_sets", off_by_one)
    last = max(int(r["index"]) for r in RunDir(run_dir).records() if r["method"] == "fsosa")
    with pytest.raises(SystemExit, match="do not reproduce"):
        remerge.remerge(run_dir, "fsosa", [last], "stored", None, say=lambda s: None)


def test_kfac_recomputed_for_the_same_members(run_dir):
    rows = remerge.remerge(run_dir, "fsosa", [0], "kfac", "float16", say=lambda s: None)
    assert {r["fisher"] for r in rows} == {"kfac"} and sum(r["selected"] for r in rows) == 1
    stored = remerge.remerge(run_dir, "fsosa", [0], "stored", None, say=lambda s: None, dampings=[float("inf")])
    mean = [r for r in rows if r["damping"] == "mean"]
    assert len(stored) == len(mean) == 1 and mean[0]["members"] == stored[0]["members"] > 0
    # the weighted mean does not depend on the Fisher: the same members and weights give the same model
    assert mean[0]["test_accuracy"] == stored[0]["test_accuracy"]
    with pytest.raises(SystemExit, match="no record"):
        remerge.remerge(run_dir, "fsosa", [999], "stored", None, say=lambda s: None)


def test_a_low_rank_kfac_run_without_a_validation_set_is_reproduced(tmp_path):
    """A run that uploaded K-FAC factors in low-rank form (``train.fisher_rank``; its store keeps
    the whole factors) and merged at its fixed damping (no validation set): the stored uploads,
    compressed as the run compressed them and merged without selection, give its accuracy; a
    request without a recorded accuracy is said to be unchecked, never passed silently."""
    sc = scenario(
        trace_file(tmp_path),
        federated={
            "methods": ["fsosa"],
            "validation_samples": 0,
            "train": {"epochs": 2, "lr": 0.05, "fisher": "kfac", "fisher_rank": 2},
        },
    )
    run = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None)
    records = [r for r in run.records() if r["method"] == "fsosa"]
    indices = [int(r["index"]) for r in records]
    said: list[str] = []
    rows = remerge.remerge(run.path, "fsosa", indices, "stored", None, say=said.append)
    chosen = {r["request"]: r["test_accuracy"] for r in rows if r["selected"]}
    assert all(r["val_accuracy"] is None for r in rows)
    for r in records:
        if r["accuracy"] is not None:
            assert abs(chosen[int(r["index"])] - r["accuracy"]) <= remerge.REPRODUCE_TOL
    assert not any("not checked" in s for s in said)
    with pytest.raises(SystemExit, match="no validation set"):
        remerge.remerge(run.path, "fsosa", [0], "stored", None, say=said.append, dampings=[1.0])
    with pytest.raises(SystemExit, match="upload-dtype"):
        remerge.remerge(run.path, "fsosa", [0], "stored", "float16", say=said.append)


def test_a_directory_that_is_not_a_run_is_named(tmp_path):
    with pytest.raises(SystemExit, match="not a run directory"):
        remerge.main([str(tmp_path), "--requests", "0"])


def test_an_interrupted_remerge_keeps_the_requests_it_finished(run_dir, tmp_path, monkeypatch):
    """Results are written after every request: a remerge stopped during its second merge leaves
    the first request's rows (checked against the run) and a table that says it is partial; the
    complete command then replaces both files with every request."""
    last = max(int(r["index"]) for r in RunDir(run_dir).records() if r["method"] == "fsosa")
    real, calls = remerge.project, []

    def stop_on_second(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(remerge, "project", stop_on_second)
    with pytest.raises(KeyboardInterrupt):
        remerge.main([str(run_dir), "--requests", "0", str(last), "--out", str(tmp_path)])
    with open(tmp_path / "remerge.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and {r["request"] for r in rows} == {"0"} and {r["check"] for r in rows} == {"reproduced"}
    assert "Partial: 1 of the 2 requests asked" in (tmp_path / "remerge.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["remerge.csv", "remerge.md"]
    monkeypatch.setattr(remerge, "project", real)
    assert remerge.main([str(run_dir), "--requests", "0", str(last), "--out", str(tmp_path)]) == 0
    with open(tmp_path / "remerge.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["request"] for r in rows} == {"0", str(last)} and {r["check"] for r in rows} == {"reproduced"}
    assert "Partial" not in (tmp_path / "remerge.md").read_text()
